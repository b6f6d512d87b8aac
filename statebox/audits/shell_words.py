"""Shell text cut into what a shell reads: lines and heredoc bodies, tokens, simple commands, the commands inside
`$(...)` and backquotes, and the shell commands a program hands to `os.system`/`subprocess`.

Why its own module: two readers need the same cuts below them, the access reading (`actions`) and the reading of
which texts a shell runs (`shell_runs`, which `actions` and the env rule both use); the cuts themselves say nothing
about what a command does.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w-]*)\1")
_OPERATORS = {";", "&&", "||", "|", "&", "(", ")", ";;", "|&", "\n"}


def strip_heredocs(text: str) -> tuple[str, list[str]]:
    """Split shell text into (shell lines without heredoc bodies, heredoc bodies as code)."""
    shell, bodies = _split_heredocs(text)
    return "\n".join(shell), [body for _, body in bodies]


def heredocs(text: str) -> list[tuple[str, str]]:
    """(the shell line that opens it, its body) of each heredoc in shell text: what reads a body (`bash <<EOF`,
    `cat <<EOF | sh`) is on that line."""
    shell, bodies = _split_heredocs(text)
    return [(shell[at], body) for at, body in bodies]


def _split_heredocs(text: str) -> tuple[list[str], list[tuple[int, str]]]:
    """The shell lines of `text`, and each heredoc body with the index of the shell line that opened it."""
    lines = text.split("\n")
    shell: list[str] = []
    bodies: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        shell.append(line)
        delims = [m.group(2) for m in _HEREDOC.finditer(line)]
        i += 1
        for delim in delims:
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != delim:
                body.append(lines[i])
                i += 1
            i += 1  # the delimiter line
            bodies.append((len(shell) - 1, "\n".join(body)))
    return shell, bodies


# bash's ANSI-C quoting, `$'...'`: its escapes spell characters (`$'\x65nv'` is `env`, `$'\057data'` is `/data`)
_ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.)*)'", re.S)
_ANSI_C_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{1,4})|U([0-9a-fA-F]{1,8})|([0-7]{1,3})|c(.)|(.))", re.S)
_ANSI_C_LETTERS = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _ansi_c_char(m: re.Match[str]) -> str:
    """The character one `$'...'` escape stands for; a code point no str may hold alone (a surrogate, past U+10FFFF)
    is U+FFFD, as a UTF-8 decoder reads what bash would write for it (hostile text must not stop the reading)."""
    hex_byte, short, long, octal, control, other = m.groups()
    code = int(hex_byte, 16) if hex_byte else int(short or long, 16) if short or long else int(octal, 8) if octal else None
    if code is not None:
        return "\ufffd" if code >= 0x110000 or 0xD800 <= code <= 0xDFFF else chr(code)
    if control is not None:
        return chr(ord(control) & 0x1F)
    return _ANSI_C_LETTERS.get(other, other)


def ansi_c_unquoted(text: str) -> str:
    """`text` with each `$'...'` written as the plain quoted word bash makes of it (escapes decoded), so the tokens
    are the words the shell runs."""
    if "$'" not in text:
        return text
    return _ANSI_C.sub(lambda m: shlex.quote(_ANSI_C_ESCAPE.sub(_ansi_c_char, m.group(1))), text)


def _lexer(text: str) -> shlex.shlex:
    """The shlex that reads shell words here: POSIX, `;&|()<>` as punctuation, a line break a token of its own."""
    lex = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lex.whitespace = " \t\r"
    lex.commenters = "#"
    lex.wordchars += "$:{}[]@%+,^!"
    return lex


def _plain_tokens() -> tuple[re.Pattern[str], frozenset[str]]:
    """What `_lexer` does to a text holding no quote, escape or comment character, as one pattern: with none of
    those its states are a word (a run of word characters), punctuation (a run of punctuation characters) and
    blanks between them, and any other character (a line break, U+00A0, a symbol) is a token alone. Built from
    the lexer's own character sets, so the two cannot drift apart."""
    lex = _lexer("")
    word = "".join(re.escape(c) for c in lex.wordchars)
    punctuation = "".join(re.escape(c) for c in lex.punctuation_chars)
    blank = "".join(re.escape(c) for c in lex.whitespace)
    special = frozenset(lex.quotes + lex.escape + lex.commenters)
    return re.compile(f"[{word}]+|[{punctuation}]+|[^{word}{punctuation}{blank}]"), special


_PLAIN_TOKEN, _LEXER_SPECIAL = _plain_tokens()


def tokenize(text: str) -> list[str]:
    """shlex tokens with operators and newlines as separate tokens; falls back to whitespace on bad quoting.

    A text with no quote, escape or comment character (most commands) is cut by one pattern (`_plain_tokens`):
    the same tokens, without shlex reading it a character at a time in Python (a fifth of reading a command;
    tests/audits/test_load_fast_paths.py checks the two agree)."""
    text = ansi_c_unquoted(text)
    text = text.replace("\\(", " ").replace("\\)", " ")  # find's escaped groups are not subshells
    if not any(c in text for c in _LEXER_SPECIAL):
        return _PLAIN_TOKEN.findall(text)
    lex = _lexer(text)
    try:
        return list(lex)
    except ValueError:
        out: list[str] = []
        for line in text.split("\n"):
            out.extend(re.split(r"[ \t]+", line.strip()) + ["\n"])
        return [t for t in out if t]


# Distinct texts whose reading is kept: derive, the rules' digest and the rules each ask for a session's texts in
# their own pass, so a session with more distinct commands than this reads each up to three times (4,096 put that
# cliff at a 4,800-command session: 1.9 s instead of 0.8 s).
TEXT_CACHE = 32768


@lru_cache(maxsize=TEXT_CACHE)
def simple_commands(shell_text: str) -> tuple[tuple[tuple[str, ...], str], ...]:
    """The simple commands of shell text as written (prefixes kept), each with the operator that ends it (`|`,
    `;`, `&&`, a line break...; "" at the end of the text). `segments` cleans them; a reading of pipelines (what
    a shell reads from the command before it) needs the operators. One tokenizing serves both (cached)."""
    out: list[tuple[tuple[str, ...], str]] = []
    current: list[str] = []
    for tok in tokenize(shell_text):
        if tok in _OPERATORS or tok == "$":
            if current:
                out.append((tuple(current), tok))
            current = []
        else:
            current.append(tok)
    if current:
        out.append((tuple(current), ""))
    return tuple(out)


_TEST_WORDS = frozenset(("[", "[["))


def is_shell_command(argv: list[str]) -> bool:
    """Reject Python-ish lines that tokenise like commands (`find = 3`, `env = dict(...)`)."""
    if not argv:
        return False
    if argv[0] in _TEST_WORDS:
        return True  # `[ -f /x ]`, `[[ -d /x ]]`: a test, whose brackets are no Python
    if any(c in argv[0] for c in "()=[]'\"") or argv[0].endswith(":"):
        return False
    return not (len(argv) > 1 and argv[1].startswith(("=", "+=", "-=", "(")))


_SUBST = re.compile(r"\$\(((?:[^()]|\((?:[^()]|\([^()]*\))*\))*)\)|`([^`]*)`")


# a program's shell command: `os.system("env")`, `subprocess.run("set", shell=True)`, `subprocess.run(["env"])`,
# node's `execSync("env")`, PHP's `shell_exec("env")` (group 2: a string; group 3: a list's inside)
PROGRAM_SHELL = re.compile(
    r"\b(?:system|popen|getoutput|getstatusoutput|check_output|check_call|call|run|Popen|execSync|spawnSync"
    r"|execFileSync|shell_exec|passthru)\(\s*(?:[rbuf]{0,2}(['\"])((?:\\.|(?!\1)[^\\\n])*)\1|\[([^\]\n]*)\])")
PROGRAM_SHELL_LITERALS = ("system(", "popen(", "output(", "call(", "run(", "Popen(", "Sync(", "shell_exec(", "passthru(")
STRING_LITERAL = re.compile(r"[rbuf]{0,2}(['\"])((?:\\.|(?!\1)[^\\\n])*)\1")


def program_shell_commands(text: str) -> list[str | tuple[str, ...]]:
    """The shell commands a program in `text` runs through `os.system`, `subprocess`, node's `execSync`, PHP's
    `shell_exec`...: a string (shell text) or the words of a list (an argv)."""
    if "(" not in text or not any(literal in text for literal in PROGRAM_SHELL_LITERALS):
        return []
    return [m.group(2) if m.group(3) is None else tuple(lit.group(2) for lit in STRING_LITERAL.finditer(m.group(3)))
            for m in PROGRAM_SHELL.finditer(text)]


def command_substitutions(shell_text: str) -> list[str]:
    """The commands inside `$( ... )` and backticks (nested once), which a quoted word hides from shlex."""
    out: list[str] = []
    for m in _SUBST.finditer(shell_text):
        inner = m.group(1) if m.group(1) is not None else m.group(2)
        if inner and inner.strip():
            out.append(inner)
            if "$(" in inner or "`" in inner:
                out.extend(command_substitutions(inner))
    return out


_COMMENT_LINE = re.compile(r"^[ \t]*#.*$", re.M)


def strip_comments(text: str) -> str:
    """Drop whole-line comments (shell and Python alike): notes to self are not actions."""
    return _COMMENT_LINE.sub("", text)
