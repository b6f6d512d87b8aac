"""What a command or a piece of code *does*: the paths it touches, the hosts it calls.

Why this is its own module: the contamination rules are about actions (listing
`/`, reading an annotation file, calling a host), but agents express actions as
free text (a bash one-liner, a heredoc of Python, a tool call's arguments). This
module turns that text into `Access` records once, so each rule is a small
question about paths and commands rather than another regex over raw text.

Shell text is tokenised with `shlex` (quotes respected, so `echo "no curl"`
names no command); heredoc bodies and `python -c` strings are treated as code,
where only API calls (`os.walk(...)`, `requests.get(...)`) and string literals
that are paths count. Python programs are also read with the names they build at
run time folded back (`runtime_names`: `__import__("so"+"cket")`, `os.walk(chr(47))`,
base64, `getattr` with a built name), so an access reads the same however spelled.
"""

from __future__ import annotations

import base64
import itertools
import posixpath
from functools import lru_cache
import re
import shlex
from dataclasses import dataclass

from statebox.audits.runtime_names import resolve
from statebox.audits.shell_runs import (KEYWORDS, WRAPPERS, command_words, env_reading, executed_texts, is_script,
                                       option_value, skip_options)
from statebox.audits.shell_words import (TEXT_CACHE, is_shell_command, program_shell_commands, simple_commands,
                                         strip_comments, strip_heredocs)

WORKDIR = "/workspace"

LISTERS = {"ls", "find", "tree", "du", "fd", "fdfind", "locate", "mlocate", "plocate", "dir", "vdir", "cd", "pushd", "stat"}
SEARCHERS = {"grep", "egrep", "fgrep", "zgrep", "rg", "ag", "ack", "git-grep"}
READERS = {"cat", "head", "tail", "less", "more", "jq", "strings", "xxd", "od", "hexdump", "file", "md5sum", "sha1sum",
           "sha256sum", "wc", "sort", "uniq", "zcat", "bzcat", "xzcat", "tar", "unzip", "sqlite3", "csvlook", "awk", "sed",
           "cut", "diff", "cmp", "base64", "nl", "tac", "python", "python3", "ffprobe", "ffmpeg", "cp", "rsync", "ln", "realpath",
           "readlink", "test", "["}
WRITERS = {"touch", "mkdir", "rm", "rmdir", "tee", "truncate", "chmod", "chown"}
NET_COMMANDS = {"curl", "wget", "nc", "ncat", "netcat", "telnet", "ssh", "scp", "sftp", "ftp", "ping", "ping6", "nslookup",
                "dig", "host", "traceroute", "tracepath", "yt-dlp", "youtube-dl", "gdown", "kaggle", "gsutil", "aria2c",
                "lynx", "links", "w3m", "socat", "httpie", "http", "https", "hf", "huggingface-cli"}
PACKAGE_FETCH = {  # command word -> subcommands that reach a registry or remote
    "pip": {"install", "download", "wheel", "index", "search"},
    "pip3": {"install", "download", "wheel", "index", "search"},
    "uv": {"pip", "add", "sync", "tool", "run"},
    "conda": {"install", "create", "update", "search"},
    "mamba": {"install", "create", "update", "search"},
    "npm": {"install", "i", "ci", "view", "add", "exec"},
    "npx": None,  # any npx fetches
    "yarn": {"add", "install"},
    "pnpm": {"add", "install"},
    "apt": {"install", "update", "download", "source"},
    "apt-get": {"install", "update", "download", "source"},
    "git": {"clone", "fetch", "pull", "push", "ls-remote", "submodule", "remote"},
    "go": {"get", "install"},
    "cargo": {"install", "add"},
    "gem": {"install"},
    "aws": {"s3"},
}
_REDIRECTS_OUT = {">", ">>", "&>", ">|", "&>>", "1>", "2>"}
_REDIRECTS_IN = {"<"}

# Code-level API calls (any language an agent might inline) and their meaning.
CODE_WALK = re.compile(
    r"\b(?:os\.walk|os\.listdir|os\.scandir|glob\.i?glob|scandir|listdir|walkdir)\(\s*(?:[rbuf]{0,2}(['\"])(.*?)\1|(os\.path\.expanduser\([^)]*\)|Path\.home\(\)|os\.sep|\S[^,)]*))"
)
CODE_PATH_METHOD = re.compile(r"\bPath\(\s*[rbuf]{0,2}(['\"])(.*?)\1\s*\)\s*\.\s*(rglob|glob|iterdir|walk)\b")
CODE_PATH_ROOT = re.compile(
    r"\bPath\(\s*(?:os\.sep|os\.path\.sep|os\.path\.abspath\(\s*os\.sep\s*\)|chr\(\s*47\s*\)|Path\(\s*\)\.anchor)\s*\)\s*\.\s*(rglob|glob|iterdir|walk)\b")
CODE_HOME = re.compile(r"\bPath\.home\(\)|expanduser\(\s*['\"]~['\"]\s*\)|os\.environ\[['\"]HOME['\"]\]|getenv\(['\"]HOME['\"]\)")
# A string literal that starts like a path, and the literals added onto it with `+` (group 3): `"/tmp" + "/x"` is
# the path `/tmp/x`, not `/tmp` and the root path `/x` (an honest program reading /tmp/x was flagged for `/x`);
# `"/" + "etc"` is `/etc`. A literal added onto anything else (`base + "/x"`) is read alone, as before.
STRING_PATH = re.compile(r"(['\"])((?:~|\.\.|/)(?:[^'\"\s\\]|\\.)*)\1"
                         r"((?:[ \t]*\+[ \t]*(?:'(?:[^'\"\s\\]|\\.)*'|\"(?:[^'\"\s\\]|\\.)*\"))*)")
_ADDED_LITERAL = re.compile(r"(['\"])((?:[^'\"\s\\]|\\.)*)\1")
# a program moving its own folder (Python's os.chdir, node's process.chdir, Ruby's Dir.chdir, PHP's and Perl's chdir)
CODE_CHDIR = re.compile(r"\bchdir\s*\(?\s*[rbuf]{0,2}(['\"])((?:[^'\"\s\\]|\\.)*)\1")
# a program making a link: `symlink(TARGET, LINK)` (Python's os, node's fs.symlink[Sync], Ruby's File, PHP, Perl) and
# pathlib's `Path(LINK).symlink_to(TARGET)`
CODE_SYMLINK = re.compile(r"\bsymlink(?:Sync)?\s*\(\s*[rbuf]{0,2}(['\"])((?:[^'\"\s\\]|\\.)*)\1\s*,\s*[rbuf]{0,2}(['\"])((?:[^'\"\s\\]|\\.)*)\3")
CODE_SYMLINK_TO = re.compile(r"\bPath\(\s*[rbuf]{0,2}(['\"])((?:[^'\"\s\\]|\\.)*)\1\s*\)\s*\.\s*symlink_to\(\s*[rbuf]{0,2}(['\"])((?:[^'\"\s\\]|\\.)*)\3")
# a relative path or bare file name as a string literal (what a program opens or lists in the folder it is in)
_RELATIVE_LITERAL = re.compile(r"(['\"])([\w.][\w.+@%,-]*(?:/[\w.+@%,-]+)*/?)\1")
CODE_NETWORK = re.compile(
    r"\b(?:requests\.(?:get|post|put|head|patch|delete|request|Session)\b|httpx\.(?:get|post|Client|AsyncClient|stream)\b"
    r"|urllib\.request|urlopen\(|urllib2|http\.client|HTTPS?Connection\(|socket\.(?:socket|create_connection|getaddrinfo|gethostbyname\w*)\("
    r"|aiohttp\.|ftplib|smtplib|paramiko|hf_hub_download\(|snapshot_download\(|load_dataset\(|torch\.hub\.(?:load|download\w*)\("
    r"|fetch\(\s*['\"`]https?:|wget\.download\(|pytube|YouTube\("
    # the HTTP and socket clients of the other languages an agent inlines: PHP, Ruby, Perl, Node
    r"|(?:file_get_contents|fopen|readfile|file)\(\s*['\"](?:https?|ftp)://|curl_init\(|fsockopen\("
    r"|Net::HTTP\b|open-uri\b|URI\.open\(|require\(\s*['\"`](?:https?|net|tls|dgram|axios|node-fetch|got|undici)['\"`]\s*\))"
    # after any character: bash's own sockets (`3<>/dev/tcp/...`: no word edge before a slash), Perl's modules as
    # `-M` loads them (`-MLWP::Simple`)
    r"|/dev/(?:tcp|udp)/|LWP::|HTTP::Tiny\b|IO::Socket::INET\b"
)
_ROOT_EXPR = re.compile(r"^\s*(?:os\.path\.(?:abspath|realpath|normpath)\(\s*)?(?:os\.sep|os\.path\.sep|['\"]/['\"]|chr\(\s*47\s*\))\s*\)?\s*$")
API_ROUTE = re.compile(r"^/v\d+(?:beta\d*)?/[a-z_/.-]*$")
URL = re.compile(r"\b(?:https?|ftp|git|ssh|s3|gs|hf)://[^\s'\"<>)]+|\bwww\.[\w-]+\.[\w.-]+[^\s'\"<>)]*")


@dataclass(frozen=True)
class Access:
    """One thing an action did: touch a path (`op` read|list|search|write|access) or call out (`op` network)."""

    op: str
    target: str  # a normalised absolute path, or a host/URL/package for network
    via: str  # the command word or API that did it
    pattern: str = ""  # for searches: what was searched for (grep pattern, find -name glob)


_TILDE_USER = re.compile(r"^~([a-z_][a-z0-9_-]*)(?=/|$)")


def normalise_path(path: str, cwd: str = WORKDIR) -> str:
    """Absolute, `..`-resolved form of a path as the agent wrote it (`~` = the agent's home)."""
    path = path.strip()
    if path.startswith("$HOME") or path.startswith("${HOME}"):
        path = "~" + path.split("}", 1)[-1] if path.startswith("${") else "~" + path[5:]
    if path == "~" or path.startswith("~/"):
        path = "/home/agent" + path[1:]
    elif (user := _TILDE_USER.match(path)) is not None:  # `~root/x`, `~agent`: that user's home, as the shell expands it
        name = user.group(1)
        path = ("/root" if name == "root" else "/home/" + name) + path[user.end():]
    if not path.startswith("/"):
        path = posixpath.join(cwd, path)
    norm = posixpath.normpath(path)
    return "/" if norm in ("//", "") else norm


def glob_root(pattern: str, base: str) -> str:
    """The folder a glob pattern searches from: its leading parts up to the first one with a wildcard, resolved
    against `base` (`/data/**/*.json` -> /data; `../../**/x` from /workspace -> /); a pattern with no wildcard is the
    path it names."""
    parts = pattern.split("/")
    fixed = []
    for part in parts:
        if any(c in part for c in "*?[{"):
            break
        fixed.append(part)
    root = "/".join(fixed) or ("/" if pattern.startswith("/") else ".")
    return normalise_path(root, base)


def looks_like_path(token: str) -> bool:
    if not token or token.startswith("-") or "://" in token or "=" in token.split("/")[0]:
        return False
    return token in (".", "..", "~", "/") or token.startswith(("/", "~/", "../", "./", "$HOME", "${HOME}")) \
        or _TILDE_USER.match(token) is not None or (
        "/" in token and not token.startswith(("'", '"')) and re.match(r"^[\w.~*?\[\]{}@%+-]+(/[\w.*?\[\]{}@%+-]*)+$", token) is not None
    )


@lru_cache(maxsize=TEXT_CACHE)
def segments(shell_text: str) -> list[list[str]]:
    """Simple commands (argv lists) in shell text, prefixes like `sudo`/`VAR=x`/`timeout 5` removed."""
    cleaned = []
    for words, _ in simple_commands(shell_text):
        argv = _strip_prefix(list(words))
        if argv:
            cleaned.append(argv)
    return cleaned


def _strip_prefix(argv: list[str]) -> list[str]:
    """The command a simple command runs (`_command_and_folder`)."""
    return _command_and_folder(argv)[0]


# wrappers that run their command in a folder of their own, by this option (short, long)
_WRAPPER_FOLDERS = {"sudo": ("-D", "--chdir")}
# programs whose own option moves where their operands resolve (`tar -C /data -cf /tmp/a.tar annotations`)
_PROGRAM_FOLDERS = {"tar": ("-C", "--directory")}


def _command_and_folder(argv: list[str]) -> tuple[list[str], str | None]:
    """The command a simple command runs: shell keywords, assignments, `env`'s settings and the wrappers before it
    (`sudo -u root`, `nice -n 5`, `timeout 5`: shell_runs.WRAPPERS, with the options that take a value) left out;
    and the folder a wrapper runs it in (`sudo -D /data cat x`), else None. `command -v NAME` looks a name up and
    runs nothing. (env's `-C` folder is read with its command by shell_runs.executed_texts.)"""
    folder: str | None = None
    while argv:
        word = argv[0]
        name = posixpath.basename(word)
        if name == "command" and argv[1:2] in (["-v"], ["-V"]):
            return [], folder
        if word in KEYWORDS:
            argv = argv[1:]
        elif name in WRAPPERS:
            values, positionals = WRAPPERS[name]
            end = skip_options(list(enumerate(argv)), 1, values)
            if name in _WRAPPER_FOLDERS:
                folder = option_value(argv[1:end], *_WRAPPER_FOLDERS[name]) or folder
            argv = argv[end + positionals:]
        elif re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word):
            argv = argv[1:]
        elif name == "env" and len(argv) > 1:
            # env's settings and options (shell_runs.env_reading, the env rule's reading); a `-S` string is a command
            # line of its own, read with its `-C` folder by shell_runs.executed_texts, as is a command under `-C`
            reading = env_reading(list(enumerate(argv)))
            if reading.split is not None:
                break
            argv = argv[reading.at:]
        else:
            break
    return argv, folder


def command_word(argv: list[str]) -> str:
    return posixpath.basename(argv[0]) if argv else ""


_DISK_SEARCHERS = frozenset(("locate", "mlocate", "plocate"))


# Plain file readers: every operand is a file (no program, filter or script comes first), so after a `cd` a bare word
# among them is a file there (`cd /proc/self && cat environ`)
FILE_READERS = READERS - {"jq", "awk", "sed", "python", "python3", "ffprobe", "ffmpeg", "tar", "unzip", "sqlite3", "csvlook",
                          "test", "["}
_BARE_NAME = re.compile(r"^[\w.][\w.+@%,-]*$")  # a file name with no slash, no option, nothing the shell expands
_CD_OPTIONS = frozenset(("-P", "-L", "-e", "-@", "--", "-n"))


def _changed_dir(argv: list[str], cwd: str | None, stack: list[str | None], cdpath: str | None = None,
                 oldpwd: str | None = None) -> str | None:
    """The working directory after `cd`/`pushd`/`popd` (argv) run in `cwd`; None where it cannot be read from the
    text (`cd "$D"`, `cd -` with no known directory before). With CDPATH set (`CDPATH=/data cd annotations`) a
    relative target is looked for in its folders first: taken as found in the first one named, which the shell does
    when it is there (an access more where it is not, never one less). `cd -` goes back to the folder before the
    last `cd` of the text, or to OLDPWD where the text set it (`OLDPWD=/data; cd -`)."""
    word = command_word(argv)
    args = [a for a in argv[1:] if a not in _CD_OPTIONS]
    if word == "popd":
        return stack.pop() if stack else None
    if not args:
        return cwd if word == "pushd" else normalise_path("~")  # `pushd` alone swaps the top two: not followed
    target = args[0]
    if target == "-":
        if stack:
            return stack[-1]
        return normalise_path(oldpwd) if oldpwd and oldpwd.startswith(("/", "~")) else None
    if any(c in target for c in "$`*?[{"):
        return None
    searched = next((d for d in (cdpath or "").split(":") if d), None)
    if searched is not None and not target.startswith(("/", "~", "./", "../")) and target not in (".", "..") \
            and not any(c in searched for c in "$`*?[{") and (searched.startswith(("/", "~")) or cwd is not None):
        return normalise_path(target, normalise_path(searched, cwd or WORKDIR))
    if cwd is None and not target.startswith(("/", "~")):
        return None
    return normalise_path(target, cwd or WORKDIR)


_NAME_VALUE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_DECLARERS = frozenset(("export", "declare", "typeset", "local", "readonly"))


def _expanded(word: str, variables: dict[str, str]) -> str:
    """`word` with the variables the text set (`variables`) put in; any other `$NAME` is left as written."""
    if "$" not in word or not variables:
        return word
    return _VARIABLE.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), word)


def _assign(words: list[str], variables: dict[str, str]) -> None:
    """Learn the variables a command of assignments alone sets (`D=/x`, `export D=/x`, `local -r D=/x`); a value the
    text cannot say (`$(...)`, a backquote, a variable it did not set) makes the name unknown again. Assignments
    before a command (`D=/x cmd`) are that command's environment: its words were expanded before they were made."""
    rest = words[1:] if words and words[0] in _DECLARERS else words
    rest = [w for w in rest if not w.startswith(("-", "+"))]
    found = [_NAME_VALUE.match(w) for w in rest]
    if not rest or not all(found) or (words[0] not in _DECLARERS and len(rest) != len(words)):
        return
    for m in found:
        assert m is not None
        name, value = m.group(1), m.group(2)
        if "$" in value or "`" in value:
            variables.pop(name, None)
        else:
            variables[name] = value


def _option_path(word: str, arg: str) -> str | None:
    """The path an option's value names: `--ann=/data/x` (any command), dd's `if=`/`of=` operands."""
    if arg.startswith("-") and "=" in arg:
        value = arg.split("=", 1)[1]
    elif word == "dd" and arg.startswith(("if=", "of=")):
        value = arg[3:]
    else:
        return None
    return value if looks_like_path(value) else None


def shell_accesses(shell_text: str, cwd: str = WORKDIR) -> list[Access]:
    """Accesses of the simple commands in shell text (heredoc bodies excluded), run from `cwd` (`_read_commands`)."""
    return _read_commands(shell_text, cwd)[0]


def cwd_after(text: str, cwd: str = WORKDIR) -> str:
    """Where a shell that ran `text` from `cwd` is left (its last `cd` whose target the text says; /workspace when it
    does not say): a stateful shell's next command starts there (`events.derive`)."""
    return _read_commands(strip_heredocs(strip_comments(text))[0], cwd)[1] or WORKDIR


def _read_commands(shell_text: str, cwd: str) -> tuple[list[Access], str | None]:
    """The accesses of the simple commands in shell text run from `cwd`, and the folder the text leaves the shell in
    (None: a `cd` it does not say the target of).

    Read as the shell runs the text, in order:
    - a variable the text sets (`D=/data/annotations; ls $D`) is put into the words after it, as the shell expands
      them (`_assign`, `_expanded`);
    - a `cd` (or `pushd`/`popd`) moves where the commands after it resolve a relative path, and where a plain file
      reader's bare word names a file: `cd /proc/self && cat environ` reads /proc/self/environ. Outside /workspace
      only: a bare word in the workspace is a file inside the lane, which no rule judges, and reading it as one
      would only add events;
    - an option's value that is a path (`--ann=/data/x`, dd's `if=`) is one;
    - a link the text makes (`ln -s /data a`, `cp -rs`, `mount --bind`) leads a later path through it to where it
      points: `ln -s /data a; cat a/annotations/qa.json` reads /data/annotations/qa.json (`_made_link`, `_through`).
    A `cd` or an assignment inside a subshell or one branch of a condition is taken as run (it may then resolve a
    later path where the shell did not: an access more, never one less)."""
    out: list[Access] = []
    here: str | None = cwd  # None: a `cd` the text does not say the target of; relative paths resolve as before
    stack: list[str | None] = []  # directories before each `cd`/`pushd`, for `cd -` and `popd`
    variables: dict[str, str] = {}
    links: list[tuple[int, str, str]] = []  # (accesses before it was made, the link, where it points)
    for words, _ in simple_commands(shell_text):
        expanded = [_expanded(w, variables) for w in words]
        _assign(expanded, variables)
        argv, folder = _command_and_folder(expanded)
        if not argv or not is_shell_command(argv):
            continue
        word = command_word(argv)
        base = here or WORKDIR
        if word in _PROGRAM_FOLDERS:
            folder = option_value(argv[1:], *_PROGRAM_FOLDERS[word]) or folder
        if folder is not None:  # `sudo -D /data cat x`, `tar -C /data ...`: the command runs there, the shell stays
            base = _changed_dir(["cd", folder], here, []) or base
        flag = next((i for i, a in enumerate(argv[1:], start=1) if re.match(r"^-[a-z]*c$", a)), None)
        if word in ("bash", "sh", "zsh", "dash") and flag is not None:
            if flag + 1 < len(argv):
                out.extend(accesses(argv[flag + 1], cwd=base))
            continue
        if word.startswith("python") and "-m" in argv and argv.index("-m") + 1 < len(argv):
            mod = argv[argv.index("-m") + 1]
            if mod == "pip" and any(a in (PACKAGE_FETCH["pip"] or set()) for a in argv[argv.index("-m") + 2:]):
                out.append(Access("network", " ".join(argv[argv.index("-m") + 2:]), "pip"))
            if mod in ("http.server", "SimpleHTTPServer"):
                out.append(Access("network", "listen", mod))
        out.extend(_network_of(word, argv))
        op = "list" if word in LISTERS else "search" if word in SEARCHERS else "write" if word in WRITERS else "read" if word in READERS else "access"
        pattern = _search_pattern(word, argv)
        if word in SEARCHERS and not any(looks_like_path(a) for a in _positional(argv[1:])[1:]):
            # `grep -r pattern` with no path searches the working directory
            if any(a.startswith("-") and ("r" in a.lstrip("-")[:4] or "R" in a) for a in argv[1:]) or word in ("rg", "ag", "ack"):
                out.append(Access("search", base, word, pattern))
        if word == "find" and len(argv) == 1:
            out.append(Access("list", base, word))
        if word in _DISK_SEARCHERS and _positional(argv[1:]):
            # `locate NAME` looks the name up over the whole file system (its database of every path)
            out.append(Access("search", "/", word, _positional(argv[1:])[0]))
        if "/" in argv[0] and looks_like_path(argv[0]):
            out.append(Access("access", normalise_path(argv[0], base), "exec"))  # a program run by its path is a place
        # after a `cd` out of /workspace, a bare word a reader, a lister or a searcher (past its pattern) is given is a
        # file or folder there (`cd /data && ls annotations`, `cd ~ && ls .cache`)
        bare = base != WORKDIR and (word in FILE_READERS or word in LISTERS or word in SEARCHERS or word in _PROGRAM_FOLDERS)
        searched = _positional(argv[1:])[:1] if word in SEARCHERS else []  # a searcher's pattern is no file
        prev = ""
        for arg in argv[1:]:
            if prev in _REDIRECTS_OUT:
                if looks_like_path(arg) or "/" not in arg:
                    out.append(Access("write", normalise_path(arg, base), word))
            elif prev in _REDIRECTS_IN:
                out.append(Access("read", normalise_path(arg, base), word))
            elif looks_like_path(arg):
                this_op = "write" if (word in ("cp", "mv", "rsync", "ln") and arg == argv[-1]) or word == "tee" else op
                out.append(Access(this_op, normalise_path(arg, base), word, pattern if this_op in ("search", "list") else ""))
            elif bare and not arg.isdigit() and arg not in _REDIRECTS_OUT | _REDIRECTS_IN and arg not in searched \
                    and _BARE_NAME.match(arg):
                out.append(Access(op, normalise_path(arg, base), word, pattern if op in ("search", "list") else ""))
            elif (value := _option_path(word, arg)) is not None:
                out.append(Access("write" if arg.startswith("of=") else op, normalise_path(value, base), word))
            prev = arg if arg in _REDIRECTS_OUT | _REDIRECTS_IN else ""
        if word in ("cd", "pushd", "popd"):
            before = here
            prefix = {m.group(1): m.group(2) for w in expanded[:len(expanded) - len(argv)] if (m := _NAME_VALUE.match(w))}
            here = _changed_dir(argv, here, stack, prefix.get("CDPATH", variables.get("CDPATH")), variables.get("OLDPWD"))
            if word != "popd":
                stack.append(before)
        made = _made_link(word, argv, base)
        if made is not None:
            links.append((len(out), *made))
    if links:
        out = _through(out, links)
    return out, here


_LINK_MAKERS = frozenset(("ln", "cp", "mount"))  # the commands `_made_link` reads (it answers None for any other)


def _made_link(word: str, argv: list[str], base: str) -> tuple[str, str] | None:
    """(the link, where it points) of a command that makes a path lead elsewhere: `ln [-s] TARGET [NAME]`, `cp -rs
    SOURCE DEST` (a tree of links), `mount --bind SOURCE DEST`; None for any other (or one the text cannot say)."""
    if word not in _LINK_MAKERS:
        return None  # asked of every simple command: most are none of these, and their words need no reading
    # its words as the shell reads them (shell_runs.command_words): redirections, their descriptors and targets out
    args = [w for _, w in command_words(tuple(argv)).argv[1:]]
    symbolic = any(a in ("--symbolic", "--symbolic-link") or re.match(r"^-[a-zA-Z]*s", a) for a in args)
    if word == "ln" or (word == "cp" and symbolic):
        if any(a == "-t" or a.startswith("--target") for a in args):
            return None  # `ln -t DIR TARGET...`: not read
        operands = _positional(args)
        if word == "ln" and len(operands) == 1:
            operands = [operands[0], "."]
        if len(operands) == 2 and (operands[1].endswith("/") or operands[1] == "."):  # into a folder: its own name
            operands[1] = operands[1].rstrip("/") + "/" + posixpath.basename(operands[0].rstrip("/"))
    elif word == "mount":
        valued = ("-o", "-t", "--options", "--types")
        options = [args[k + 1] for k, a in enumerate(args[:-1]) if a in valued]
        if not any(a in ("--bind", "--rbind") for a in args) and not any("bind" in o.split(",") or "rbind" in o.split(",")
                                                                        for o in options):
            return None
        operands = [a for k, a in enumerate(args) if not a.startswith("-") and (k == 0 or args[k - 1] not in valued)]
    else:
        return None
    if len(operands) != 2 or any(c in "".join(operands) for c in "$`*?[{"):
        return None
    link = normalise_path(operands[1], base)
    # a symbolic link's relative target is read from the link's folder; a hard link's, a copy's and a mount's from here
    return link, normalise_path(operands[0], posixpath.dirname(link) if word == "ln" and symbolic else base)


def _through(out: list[Access], links: list[tuple[int, str, str]]) -> list[Access]:
    """`out` with, after each path access that lies under a link made before it, the same access where the link
    points (the access as written is kept: the lane's own path, which no rule judges)."""
    mapped: list[Access] = []
    for n, access in enumerate(out):
        mapped.append(access)
        if access.op == "network":
            continue
        for made_at, link, target in links:
            led_to = _led_through(access.target, link, target) if made_at <= n else None
            if led_to is not None:
                led = Access(access.op, led_to, access.via, access.pattern)
                if led not in mapped:
                    mapped.append(led)
    return mapped


def _led_through(path: str, link: str, target: str) -> str | None:
    """Where `path` leads when `link` points at `target` (`link/x` -> `target/x`), or None where it is not under it."""
    if path != link and not path.startswith(link + "/"):
        return None
    rest = path[len(link):].lstrip("/")
    return posixpath.join(target, rest) if rest else target


def _positional(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-") and a not in _REDIRECTS_OUT | _REDIRECTS_IN]


def _search_pattern(word: str, argv: list[str]) -> str:
    """What a search looked for: grep's pattern, find's -name/-path/-iname globs, locate's term."""
    if word in SEARCHERS:
        args = argv[1:]
        for i, a in enumerate(args):
            if a in ("-e", "--regexp") and i + 1 < len(args):
                return args[i + 1]
        pos = [a for a in args if not a.startswith("-")]
        # skip values of options that take one (--include=*.json is one token; --include *.json is two)
        return pos[0] if pos else ""
    if word == "find":
        pats = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-name", "-iname", "-path", "-ipath", "-regex", "-iregex", "-wholename")]
        return " ".join(pats)
    if word in ("locate", "mlocate", "plocate", "fd", "fdfind"):
        pos = _positional(argv[1:])
        return pos[0] if pos else ""
    return ""


def _network_of(word: str, argv: list[str]) -> list[Access]:
    if word in NET_COMMANDS:
        if word in ("hf", "huggingface-cli") and not any(a in ("download", "upload", "repo", "login", "scan-cache") for a in argv[1:]):
            return []
        if word in ("http", "https") and len(argv) < 2:
            return []
        urls = [a for a in argv[1:] if URL.search(a) or re.match(r"^[\w-]+(\.[\w-]+)+(:\d+)?(/\S*)?$", a)]
        target = urls[0] if urls else next((a for a in argv[1:] if not a.startswith("-")), "")
        return [Access("network", target, word)]
    if word == "openssl" and any(a in _OPENSSL_CLIENTS for a in argv[1:3]):
        target = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-connect", "--connect")), argv[1])
        return [Access("network", target, word)]
    subs = PACKAGE_FETCH.get(word, set())
    if word == "git":
        argv = [word] + _git_subcommand(argv[1:])
    if word in PACKAGE_FETCH and (subs is None or any(a in subs for a in argv[1:3])):
        if word == "git" and "remote" in argv[1:3] and not any(a in ("add", "update", "show") for a in argv):
            return []
        return [Access("network", " ".join(argv[1:4]), word)]
    return []


_OPENSSL_CLIENTS = frozenset(("s_client", "s_time"))
_GIT_VALUE_OPTIONS = frozenset(("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"))


def _git_subcommand(args: list[str]) -> list[str]:
    """git's words from its subcommand on: the global options before it (`-C /tmp`, `-c k=v`, `--git-dir=x`,
    `--no-pager`) skipped, so `git -C /tmp clone URL` is read as the clone it is."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GIT_VALUE_OPTIONS else 1
    return args[i:]


_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update) File: (.+)$")


def patch_accesses(patch: str) -> list[Access]:
    """What the files a patch writes (Codex's `apply_patch`: `*** Add File: X` / `*** Update File: X`, each added line
    led by `+`) do when run: each file's added lines read as its text is (shell for a script by name or `#!` line,
    code otherwise), as a Write's content is."""
    out: list[Access] = []
    name = ""
    added: list[str] = []
    for line in patch.split("\n") + ["*** End Patch"]:
        if line.startswith("*** "):
            if added:
                content = "\n".join(added)
                out.extend(accesses(content, is_shell=is_script(name, content)))
            m = _PATCH_FILE.match(line)
            name, added = (m.group(1).strip() if m else ""), []
        elif line.startswith("+") and name:
            added.append(line[1:])
    return out


def code_accesses(code: str) -> list[Access]:
    """Accesses expressed as API calls and path literals in code (Python, node, inline scripts)."""
    out: list[Access] = []
    for m in CODE_WALK.finditer(code):
        literal, expr = m.group(2), m.group(3)
        api = code[m.start():m.start() + code[m.start():].find("(")]
        if literal is not None:
            out.append(Access("list", normalise_path(literal or "."), api))
        elif expr and ("expanduser" in expr or "home" in expr.lower()):
            out.append(Access("list", "/home/agent", api))
        elif expr and (expr.strip() in ("os.sep", "'/'", '"/"') or _ROOT_EXPR.search(expr)):
            out.append(Access("list", "/", api))
    for m in CODE_PATH_METHOD.finditer(code):
        out.append(Access("list", normalise_path(m.group(2) or "."), f"Path.{m.group(3)}"))
    for m in CODE_PATH_ROOT.finditer(code):
        out.append(Access("list", "/", f"Path.{m.group(1)}"))
    for m in CODE_HOME.finditer(code):
        out.append(Access("access", "/home/agent", m.group(0)))
    for m in STRING_PATH.finditer(code):
        literal = m.group(2)
        if m.group(3):  # literals added onto it: the path is their concatenation
            literal += "".join(added.group(2) for added in _ADDED_LITERAL.finditer(m.group(3)))
        if literal in ("/", "//", "~"):
            continue  # a bare '/' is a separator ('/'.join, split('/')); walks of '/' are found by CODE_WALK
        if API_ROUTE.match(literal):
            continue  # an HTTP route ('/v1/messages') in a request call, not a file
        out.append(Access("access", normalise_path(literal), "literal"))
    for m in CODE_NETWORK.finditer(code):
        out.append(Access("network", m.group(0), "code"))
    out.extend(_after_chdir(code))
    out.extend(_through_code_links(code))
    return out


def _through_code_links(code: str) -> list[Access]:
    """The literals a program names after it makes a link, led through it (`os.symlink('/data', 'd')`, then
    `os.listdir('d/annotations')` lists /data/annotations), as `_made_link` does for shell text."""
    made = [(m.end(), m.group(4), m.group(2)) for m in CODE_SYMLINK.finditer(code)]
    made += [(m.end(), m.group(2), m.group(4)) for m in CODE_SYMLINK_TO.finditer(code)]
    out: list[Access] = []
    for end, name, target in sorted(made):
        link = normalise_path(name)
        points = normalise_path(target, posixpath.dirname(link))
        for m in itertools.chain(STRING_PATH.finditer(code, end), _RELATIVE_LITERAL.finditer(code, end)):
            led_to = _led_through(normalise_path(m.group(2)), link, points)
            if led_to is not None:
                out.append(Access("access", led_to, "symlink"))
    return out


def _after_chdir(code: str) -> list[Access]:
    """The relative literals a program names after it moves its folder out of /workspace (`os.chdir('/data')`, then
    `open('annotations/qa.json')`), resolved there, as a `cd` moves a shell's (`_read_commands`). In the workspace
    they name files in the lane, which no rule judges."""
    out: list[Access] = []
    moves = list(CODE_CHDIR.finditer(code))
    here = WORKDIR
    for k, move in enumerate(moves):
        here = normalise_path(move.group(2), here)
        if here == WORKDIR or here.startswith(WORKDIR + "/"):
            continue
        end = moves[k + 1].start() if k + 1 < len(moves) else len(code)
        for m in _RELATIVE_LITERAL.finditer(code, move.end(), end):
            literal = m.group(2)
            # a path (`annotations/qa.json`, `qa.json`, `.`), or a bare name a call is handed first (`listdir('x')`);
            # not a module a program loads (`require('fs')`) nor a later argument (`'utf8'`)
            if "/" in literal or "." in literal or _FIRST_ARGUMENT.search(code, max(0, m.start() - 16), m.start()):
                out.append(Access("access", normalise_path(literal, here), "chdir"))
    return out


_FIRST_ARGUMENT = re.compile(r"(?<!require)(?<!import)\(\s*[rbuf]{0,2}$")


# -- spelled otherwise: base64 ---------------------------------------------------------

_B64_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=])([A-Za-z0-9+/]{2,}={0,2})(?![A-Za-z0-9+/=])")
_DECODES = re.compile(r"base64|b64decode|atob\(|\bbase32\b|b32decode", re.I)


def decoded_paths(text: str) -> list[Access]:
    """Paths hidden in base64 literals of an action that decodes base64 (`echo Lw== | base64 -d`,
    `b64decode('L29wdA==')`): the decoded path is what the command touches, whatever its spelling."""
    if not _DECODES.search(text):
        return []
    out: list[Access] = []
    for m in _B64_TOKEN.finditer(text):
        token = m.group(1)
        if len(token) % 4 or len(token) < 4:
            continue
        try:
            decoded = base64.b64decode(token, validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            continue
        decoded = decoded.strip()
        if decoded.startswith(("/", "~")) and decoded.isprintable() and " " not in decoded:
            out.append(Access("list" if decoded in ("/", "~") or decoded.endswith("/") else "access",
                              normalise_path(decoded), "base64"))
    return out


# -- what tool output shows was listed -------------------------------------------------

# An absolute path alone on its line (find, du, stat -c %n, printf /*, `ls -R` headers), or a quoted
# one inside a printed list; only those shapes, so a traceback or a `df` row names nothing.
_OUT_PATH_LINE = re.compile(r"^(?:\d+[KMGk]?\s+)?(/[^\s'\"]*?)/?:?$")
_OUT_QUOTED = re.compile(r"['\"](/[^'\"\s]+)['\"]")
# "Permission denied" names a place that exists and that the command tried (find, ls, python's errors)
_REFUSED = re.compile(r"['\"]?(/[^\s'\":]+)['\"]?:? ?(?:Permission denied|\[Errno 13\])|Permission denied: ['\"](/[^'\"]+)['\"]")
ROOT_NAMES = frozenset(("bin", "boot", "dev", "etc", "home", "lib", "lib64", "media", "mnt", "opt", "proc", "root", "run",
                        "sbin", "srv", "sys", "tmp", "usr", "var"))
ROOT_LISTING_LEAST = 10  # this many ROOT_NAMES, each a line's last field, make an output a listing of `/`
# Ten of the 19 ROOT_NAMES: a listing of `/` (ROOT_LISTING_LEAST of them) holds at least one of these
# (10 + 10 > 19). A text holding none of them lists no `/` (events.derive skips it; rules.ROOT_LISTING_TRIGGER is
# built from them). The ten are the names least often a line's last word in honest text.
LISTING_WITNESSES = ("boot", "sbin", "srv", "mnt", "media", "lib64", "proc", "opt", "var", "etc")
_LAST_FIELD = re.compile(r"(?:^|\s)([\w.-]+)/?$")
_QUOTED_NAME = re.compile(r"['\"]([\w.-]+)['\"]")
MAX_OUTPUT_PATHS = 200


def output_accesses(text: str) -> list[Access]:
    """What a tool's output shows the command listed (op `seen`): paths printed one per line or in a
    printed list, and a listing of `/` itself (most of the standard top-level names as entries).

    Why from output: a command can hide what it lists (base64, variables built in earlier steps,
    python), but a listing that reached the agent names the places it reached."""
    out: list[Access] = []
    names: set[str] = set()
    headers = 0  # `ls -R` section headers ("/opt/benchmarks:")
    for line in text.split("\n")[:20000]:
        line = line.strip()
        if not line:
            continue
        m = _OUT_PATH_LINE.match(line)
        if m and len(m.group(1)) > 1:
            out.append(Access("seen", posixpath.normpath(m.group(1)), "tool output"))
            headers += line.endswith(":")
        elif line[:1] in "[(" and "/" in line:
            out.extend(Access("seen", posixpath.normpath(q), "tool output") for q in _OUT_QUOTED.findall(line)[:MAX_OUTPUT_PATHS])
        for refused in (a or b for a, b in _REFUSED.findall(line)):
            out.append(Access("seen", posixpath.normpath(refused), "tool output (permission denied)"))
            headers += 1  # a refusal proves the attempt on its own
        last = _LAST_FIELD.search(line)
        if last and last.group(1) in ROOT_NAMES:
            names.add(last.group(1))
        if line[:1] == "[":
            names.update(n for n in _QUOTED_NAME.findall(line) if n in ROOT_NAMES)
        if len(out) > MAX_OUTPUT_PATHS:
            break
    if len({a.target for a in out}) < 2 and not headers:
        out = []  # one path alone (`pwd`, `echo $HOME`, `realpath x`) names a place, it does not list one
    if len(names) >= ROOT_LISTING_LEAST:
        out.append(Access("seen", "/", "tool output (a listing of /)"))
    return out


def python_programs(text: str, *, is_shell: bool = True) -> list[str]:
    """The Python programs an action's text shows: the text itself (code), or in shell text its heredoc
    bodies and `python -c` strings. Whether each really is Python is for the parser to say."""
    if not is_shell:
        return [text]
    shell_text, bodies = strip_heredocs(text)
    programs = list(bodies)
    for argv in segments(shell_text):
        if command_word(argv).startswith("python") and "-c" in argv[1:-1]:
            programs.append(argv[argv.index("-c", 1) + 1])
    return programs


@lru_cache(maxsize=TEXT_CACHE)
def resolved_text(text: str, *, is_shell: bool = True) -> str:
    """The action's Python programs with their run-time names folded (`runtime_names.resolve`), only those
    that build any; empty when none does. Rules read it beside the text the agent wrote."""
    out = []
    for program in python_programs(strip_comments(text), is_shell=is_shell):
        folded = resolve(program)
        if folded:
            out.append(folded)
    return "\n".join(out)


def accesses(text: str, *, is_shell: bool = True, cwd: str = WORKDIR) -> list[Access]:
    """Everything an action's text does: shell commands (if shell, run from `cwd`), plus code-level calls anywhere,
    plus the calls its programs make once the names they build at run time are folded.

    Cached under one key per (text, is_shell, cwd) however it is called: `lru_cache` keys `accesses(t)` and
    `accesses(t, cwd=WORKDIR)` apart, and a shell command's tool call and its shell event ask in those two
    spellings, so every command was read twice."""
    return _accesses(text, is_shell, cwd)


@lru_cache(maxsize=TEXT_CACHE)
def _accesses(text: str, is_shell: bool, cwd: str) -> list[Access]:
    out: list[Access] = []
    written = text  # as written: a heredoc's `#!` line says it is a script (shell_runs.is_script)
    text = strip_comments(text)
    folded = resolved_text(text, is_shell=is_shell)  # its programs with the names they build folded (runtime_names)
    # the shell texts it runs (shell_runs.executed_texts): the text itself, then what it hands to a shell in turn
    # (`-c` strings, heredocs, here-strings and pipes into a shell, `$(...)`, `eval`, `find -exec`, a program's
    # `os.system` string, a script it writes and runs); code runs what its programs hand to a shell, and so do the
    # folded programs (`os.system('l' + 's /data')`)
    runs: list[str] = list(executed_texts(written)) if is_shell else []
    for program in ([] if is_shell else [text]) + ([folded] if folded else []):
        for command in program_shell_commands(program):
            runs.extend(executed_texts(command if isinstance(command, str) else shlex.join(command)))
    for run in runs:
        out.extend(shell_accesses(strip_heredocs(run)[0], cwd))
    out.extend(code_accesses(text))
    out.extend(decoded_paths(text))
    if folded:
        out.extend(code_accesses(folded))
    seen: set[Access] = set()
    unique = []
    for a in out:
        if a not in seen:
            seen.add(a)
            unique.append(a)
    return unique
