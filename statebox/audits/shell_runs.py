"""Which shell texts an action runs, read as a shell runs them: the action itself and every text it hands to a shell
in turn.

Why its own module, shared: a command hides inside what runs a command (a `sh -c` string, backquotes, `$(...)`,
`eval`, `trap`, `watch`, `find -exec`, a heredoc, here-string or pipe into a shell, `env`'s command or `-S` string,
`su -c`, a process substitution, a program's `os.system`/`subprocess` string), behind a wrapper's options
(`sudo -u root bash -c ...`). The env rule read all of these; the access reading read `sh -c` and `$(...)` only, so
`bash <<'EOF'` with `ls /data` in its body, or `echo 'ls /data' | sh`, touched nothing. Both now read the texts
found here (`executed_texts`), each with its own question of every simple command in them.

A script the text writes and then runs (`cat > /tmp/s.sh <<EOF ... EOF; bash /tmp/s.sh`, `echo 'ls /data' > s.sh &&
sh s.sh`) is read as run too, and so is one written with a shell's name (`*.sh`) or a shell's `#!` line, which is
there to be run.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from statebox.audits.shell_words import (TEXT_CACHE, command_substitutions, heredocs, is_shell_command,
                                         program_shell_commands, simple_commands, strip_comments, strip_heredocs)

MAX_DEPTH = 6  # shells in shells (`bash -c "sh -c 'env'"`) read this deep
SHELLS = frozenset(("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish"))
_SHELL_VALUE_OPTIONS = frozenset(("-o", "+o", "-O", "+O", "--rcfile", "--init-file"))  # take the next word
# Words that only lead into the command after them (shell keywords, `!`, braces)
KEYWORDS = frozenset(("then", "do", "else", "elif", "if", "while", "until", "!", "{", "}"))
# Commands that run the command after their options: the options that take the next word as their value, and how
# many words they take before the command (`timeout 5 env`, `flock /tmp/l env`, `chroot / env`)
WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (frozenset(("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U", "--user", "--group", "--chdir",
                        "--close-from", "--host", "--prompt", "--role", "--type", "--command-timeout",
                        "--other-user")), 0),
    "doas": (frozenset(("-u", "-C")), 0),
    "nice": (frozenset(("-n", "--adjustment")), 0),
    "ionice": (frozenset(("-c", "-n", "-p", "-P", "-u", "--class", "--classdata")), 0),
    "time": (frozenset(("-f", "-o", "--format", "--output")), 0),
    "exec": (frozenset(("-a",)), 0),
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "nohup": (frozenset(), 0),
    "setsid": (frozenset(), 0),
    "unbuffer": (frozenset(), 0),
    "busybox": (frozenset(), 0),
    "toybox": (frozenset(), 0),
    "stdbuf": (frozenset(("-i", "-o", "-e", "--input", "--output", "--error")), 0),
    "timeout": (frozenset(("-s", "-k", "--signal", "--kill-after")), 1),
    "xargs": (frozenset(("-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter", "--eof",
                         "--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars",
                         "--process-slot-var")), 0),
    "strace": (frozenset(("-o", "-e", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-S", "-X", "-P")), 0),
    "ltrace": (frozenset(("-o", "-e", "-p", "-s", "-u", "-a", "-n")), 0),
    "runuser": (frozenset(("-u", "-g", "-G", "--user", "--group", "--supp-group", "-w", "--whitelist-environment")), 0),
    "flock": (frozenset(("-w", "-E", "--timeout", "--conflict-exit-code")), 1),
    "chroot": (frozenset(("--userspec", "--groups")), 1),
    "chrt": (frozenset(), 1),
}
# Commands that run a string as shell text given with `-c` (or `--command`)
C_RUNNERS = frozenset(("su", "runuser", "script", "flock"))
_ENV_VALUE_OPTIONS = frozenset("uCSPa")  # `env -u NAME`, `-C DIR`, `-S STRING`, `-P PATH`, `-a ARG0`
_ENV_VALUE_LONG = frozenset(("--unset", "--chdir", "--split-string", "--argv0"))
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
# a script by its name or its first line: what a shell runs
_SCRIPT_NAME = re.compile(r"\.(?:sh|bash|zsh|ksh|dash)$")
_SHEBANG = re.compile(r"^#!\s*(?:/usr)?(?:/local)?/bin/(?:env\s+(?:-\S+\s+)*)?(?:" + "|".join(sorted(SHELLS)) + r")\b")
_RUN_SOURCES = frozenset((".", "source"))
_OUT_REDIRECTS = frozenset((">", ">>", ">|", "&>", "1>"))  # what sends a command's output into a file


def is_script(name: str, content: str) -> bool:
    """Whether a file written with this name and content is a shell script: a shell's extension or `#!` line."""
    return _SCRIPT_NAME.search(name) is not None or _SHEBANG.match(content.lstrip()) is not None


@lru_cache(maxsize=TEXT_CACHE)
def executed_texts(action: str) -> tuple[str, ...]:
    """`action` and every shell text it runs, in the order met, each once (to MAX_DEPTH shells deep)."""
    out: list[str] = []
    _read_shell(action, 0, out)
    return tuple(dict.fromkeys(out))


def _read_shell(text: str, depth: int, out: list[str]) -> None:
    """`text` and what it runs: each simple command (with what a pipe feeds it), each heredoc's body where a shell on
    its line reads it, each command substitution, each shell command of a program in it, each script it writes
    and runs."""
    if depth > MAX_DEPTH or not text.strip():
        return
    out.append(text)
    shell_text, _ = strip_heredocs(strip_comments(text))
    piped: str | None = None  # what the command before printed into a pipe (`echo env | sh`)
    written: dict[str, str] = {}  # file -> what this text wrote into it (a heredoc, `echo`/`printf`), to run later
    for words, op in simple_commands(shell_text):
        shown = printed(words)
        if "`" in words:  # `` `set` `` tokenizes to a backquote, the command, a backquote
            for inner in " ".join(words).split("`"):
                _read_shell(inner, depth + 1, out)
        else:
            _read_command(words, depth, out, piped)
            target = _written_to(words)
            if shown is not None and target is not None:
                _write(written, target, shown, depth, out)
        piped = shown if op in ("|", "|&") else None
    if "<<" in text:
        for line, body in heredocs(text):
            for words, _ in simple_commands(line):  # a shell on the line reads the body (`sh <<EOF`, `cat <<EOF | sh`)
                _read_command(words, depth + 1, out, body)
                target = _written_to(words)
                if target is not None and posixpath.basename(words[0]) in ("cat", "tee"):
                    _write(written, target, body, depth, out)
    if "`" in shell_text or "$(" in shell_text:
        for inner in command_substitutions(shell_text):
            _read_shell(inner, depth + 1, out)
    for command in program_shell_commands(text):
        _read_shell(command if isinstance(command, str) else shlex.join(command), depth + 1, out)
    if written:  # a script written, then run by name or by a shell: `bash /tmp/s.sh`, `. s.sh`, `./s.sh`
        for words, _ in simple_commands(shell_text):
            for name in _scripts_run(words):
                content = written.get(name)
                if content is not None:
                    _read_shell(content, depth + 1, out)


def _write(written: dict[str, str], target: str, content: str, depth: int, out: list[str]) -> None:
    """Note what a text wrote into a file; a shell script by its name or `#!` line is read as run at once."""
    written[target] = content
    written[posixpath.normpath(target)] = content
    if is_script(target, content):
        _read_shell(content, depth + 1, out)


def _written_to(words: tuple[str, ...]) -> str | None:
    """The file a command's output is redirected into (`> F`, `>> F`), or `tee`'s file."""
    for k, word in enumerate(words[:-1]):
        if word in _OUT_REDIRECTS:
            return words[k + 1]
    if words and posixpath.basename(words[0]) == "tee":
        files = [w for w in words[1:] if not w.startswith("-")]
        return files[0] if files else None
    return None


def _scripts_run(words: tuple[str, ...]) -> list[str]:
    """The files a command runs as shell scripts: a shell's script operand, `.`/`source`'s file, a path run by name."""
    if not words:
        return []
    name = posixpath.basename(words[0])
    if name in SHELLS:
        mode, _ = shell_mode(list(words[1:]))
        operands = [w for w in words[1:] if not w.startswith(("-", "+"))]
        return operands[:1] if mode == "" else []
    if words[0] in _RUN_SOURCES:
        return list(words[1:2])
    if "/" in words[0]:
        return [words[0], posixpath.normpath(words[0])]
    return []


def printed(words: tuple[str, ...]) -> str | None:
    """What `echo`/`printf` with these words prints, else None: its words up to a redirection, with `\\n` and `\\t` as
    the line break and tab `printf`, `echo -e` and dash's `echo` write (read either way: a superset of the commands a
    shell then runs)."""
    name = posixpath.basename(words[0]) if words else ""
    if name not in ("echo", "printf") or len(words) < 2:
        return None
    args = list(words[1:])
    cut = next((k for k, w in enumerate(args) if w in _OUT_REDIRECTS), None)
    if cut is not None:
        args = args[:cut]
    while name == "echo" and args and args[0] in ("-n", "-e", "-E", "-ne", "-en"):
        args.pop(0)
    return " ".join(args).replace("\\n", "\n").replace("\\t", "\t")


def _read_command(words: tuple[str, ...], depth: int, out: list[str], stdin: str | None) -> None:
    """The texts one simple command as written (`words`) runs; `stdin`: the text a pipe or heredoc feeds it."""
    if depth > MAX_DEPTH or not words:
        return
    command = command_words(words)
    if command.substituted:  # process substitution: a command run for its output
        _read_shell(shlex.join(command.substituted), depth + 1, out)
    if command.c_string is not None:
        _read_shell(command.c_string, depth + 1, out)
        return
    argv, at, here = command.argv, command.at, command.here
    if at >= len(argv):
        return
    start = argv[at][0]
    if not is_shell_command(list(words[start:])):
        return  # Python-ish text that tokenizes like a command (`env = dict(...)`)
    name = posixpath.basename(argv[at][1])
    args = [w for _, w in argv[at + 1:]]
    if name in SHELLS:
        mode, string = shell_mode(args)
        if mode == "c":
            _read_shell(string, depth + 1, out)
        elif mode == "stdin":
            for fed in (here, stdin):
                if fed:
                    _read_shell(fed, depth + 1, out)
    elif name == "env":
        at_command, _, split, chdir = env_reading(argv[at:])
        # the command runs in env's `-C` folder: read as `cd DIR && COMMAND`, so its relative paths resolve there
        cd = f"cd {shlex.quote(chdir)} && " if chdir else ""
        if split is not None:
            _read_shell(cd + " ".join([split] + [w for _, w in argv[at + at_command:]]), depth + 1, out)
        elif at + at_command < len(argv):
            _read_shell(cd + shlex.join(words[argv[at + at_command][0]:]), depth + 1, out)
    elif name in ("eval", "watch", "trap"):
        if name == "watch":
            args = args[skip_options([(0, a) for a in args], 0, frozenset(("-n", "--interval"))):]
        elif name == "trap":
            args = args[:1] if args and not args[0].startswith("-") else []
        _read_shell(" ".join(args), depth + 1, out)
    elif name == "find":
        for k, arg in enumerate(args):
            if arg in ("-exec", "-execdir", "-ok", "-okdir"):
                run = args[k + 1:]
                end = next((j for j, w in enumerate(run) if w in (";", "+")), len(run))
                _read_shell(shlex.join(run[:end]), depth + 1, out)


@dataclass(frozen=True)
class CommandWords:
    """One simple command as a shell reads it before it runs anything: both readers (the walker above and the env
    rule's `rules._command_dump`) start from it."""

    argv: list[tuple[int, str]]  # (where in the words, word) of the words that are no redirection
    at: int  # where in `argv` the command run stands, past assignments, keywords and wrappers; len(argv): none
    here: str | None  # a here-string it is fed (`bash <<< set`)
    substituted: tuple[str, ...]  # the words of a process substitution (`<(env)`), run for their output
    c_string: str | None  # what a `-c` runner (`su -c STRING`) runs instead, if one is in front
    lookup: bool  # `command -v NAME` in front: the name is looked up


def command_words(words: tuple[str, ...]) -> CommandWords:
    """`words` (a simple command as written) read as the shell reads them: redirections (and the descriptor of
    `2>&1`) taken out, a process substitution's words set apart, then assignments, keywords and wrappers with their
    options skipped to the command that runs."""
    argv: list[tuple[int, str]] = []
    here: str | None = None
    substituted: tuple[str, ...] = ()
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("<(", ">("):  # the rest of this segment is the substitution's command
            substituted = words[i + 1:]
            break
        if word and (">" in word or "<" in word) and not word.strip("<>&|"):
            if argv and argv[-1][1].isdigit() and argv[-1][0] == i - 1:
                argv.pop()  # the descriptor of `2>&1`
            if word == "<<<" and i + 1 < len(words):
                here = words[i + 1]
            i += 2  # the operator and its target
            continue
        argv.append((i, word))
        i += 1
    at, c_string, lookup = 0, None, False
    while at < len(argv):
        word = argv[at][1]
        name = posixpath.basename(word)
        if ASSIGNMENT.match(word) or name in KEYWORDS:
            at += 1
            continue
        if name in C_RUNNERS:
            c_string = option_value([w for _, w in argv[at + 1:]], "-c", "--command")
            if c_string is not None:
                break
        if name == "command" and any(w in ("-v", "-V") for _, w in argv[at + 1:at + 3]):
            lookup = True
        if name in WRAPPERS:
            values, positionals = WRAPPERS[name]
            at = skip_options(argv, at + 1, values) + positionals
            continue
        break
    return CommandWords(argv, at, here, substituted, c_string, lookup)


class EnvReading(NamedTuple):
    """How `env` with its options runs (`env_reading`)."""

    at: int  # the place in argv of the command it runs, or len(argv) for none
    empty: bool  # it empties the environment first (`-i`)
    split: str | None  # its `-S` string (a command line of its own), or None
    chdir: str | None  # the folder it runs the command in (`-C DIR`, `--chdir=DIR`), or None


def env_reading(argv: list[tuple[int, str]]) -> EnvReading:
    """How `env` (argv[0]) with its options runs. With no command and no `-S` it prints the environment."""
    at, empty, split, chdir = 1, False, None, None
    while at < len(argv):
        arg = argv[at][1]
        if arg == "--":
            at += 1
            break
        if arg in ("-", "-i", "--ignore-environment"):
            empty = True
        elif arg in ("--help", "--version"):
            return EnvReading(len(argv), True, None, None)
        elif arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name in _ENV_VALUE_LONG and not eq:
                value = argv[at + 1][1] if at + 1 < len(argv) else ""
                at += 1
            if name == "--split-string":
                split = value
            elif name == "--chdir":
                chdir = value
        elif arg.startswith("-") and len(arg) > 1:
            for k, letter in enumerate(arg[1:], start=1):
                if letter == "i":
                    empty = True
                elif letter in _ENV_VALUE_OPTIONS:
                    value = arg[k + 1:]
                    if not value:
                        value = argv[at + 1][1] if at + 1 < len(argv) else ""
                        at += 1
                    if letter == "S":
                        split = value
                    elif letter == "C":
                        chdir = value
                    break
        elif not ASSIGNMENT.match(arg):
            break
        at += 1
    return EnvReading(at, empty, split, chdir)


def skip_options(argv: list[tuple[int, str]], at: int, values: frozenset[str]) -> int:
    """The place of the first word after the options that start at `at` (an option in `values` takes the next
    word as its value; `--` ends them)."""
    while at < len(argv):
        word = argv[at][1]
        if word == "--":
            return at + 1
        if not word.startswith("-") or word == "-":
            return at
        at += 2 if word in values else 1
    return at


def option_value(args: list[str], short: str, long: str) -> str | None:
    """The value of `-c VALUE`, `-cVALUE`, `--command VALUE` or `--command=VALUE` among `args`, else None."""
    for k, arg in enumerate(args):
        if arg in (short, long):
            return args[k + 1] if k + 1 < len(args) else None
        if arg.startswith(long + "="):
            return arg[len(long) + 1:]
        if arg.startswith("-") and not arg.startswith("--") and short[1] in arg[1:]:
            rest = arg[arg.index(short[1], 1) + 1:]
            return rest or (args[k + 1] if k + 1 < len(args) else None)
    return None


def shell_mode(args: list[str]) -> tuple[str, str]:
    """How a shell given `args` gets its commands: ("c", the string) for `-c STRING` (`-lc`, `-ec` too), ("stdin", "")
    when it reads its standard input (no operand, `-`, or `-s`), ("", "") for a script file."""
    command = stdin = False
    at = 0
    while at < len(args):
        arg = args[at]
        if arg == "--":
            at += 1
            break
        if len(arg) < 2 or arg[0] not in "-+":
            break
        if arg in _SHELL_VALUE_OPTIONS:
            at += 2
            continue
        if arg[0] == "-" and arg[1] != "-":
            command = command or "c" in arg[1:]
            stdin = stdin or "s" in arg[1:]
        at += 1
    operands = args[at:]
    if command:
        return ("c", operands[0]) if operands else ("", "")
    if stdin or not operands or operands[0] == "-":
        return "stdin", ""
    return "", ""
