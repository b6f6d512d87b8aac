"""The attempt loader's shortcuts give the answer of the plain path they replace, on hostile input too.

Each shortcut in `statebox.audits.events` (attempt.json read by orjson, one folder listing instead of
a stat per file, response.txt read as bytes, ...) holds only where an argument holds, and falls back
to the plain path elsewhere. Each test here builds an input where the argument fails and checks the
answer is the plain path's: without the fallback it would differ.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from statebox.attempt_folder import ATTEMPT_FILE, EVENTS_FILE, RESPONSE_FILE, STDOUT_LOG
from statebox.audits.events import AttemptFacts, _attempt_json, _Listing, load_attempt
from statebox.audits.verdict import audit_run, default_prefilter
from statebox.errors import DataError
from statebox.schema import EventKind


def _plain_json(path: Path) -> object:
    """What attempt.json's reader did before the shortcut."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(path, exc.lineno, f"not valid JSON ({exc.msg})") from exc


# -- attempt.json ---------------------------------------------------------------------------------------------

HOSTILE_ATTEMPT_JSON = [
    b'{"secret": {"item_id": 123456789012345678901234567890, "original_name": "v.mp4"}}',  # beyond 64 bits
    b'{"secret": {"item_id": -9223372036854775809}}',  # one below int64
    b'{"secret": {"honeytoken_values": [18446744073709551616, "tok-1"]}}',  # one above uint64
    b'{"question": NaN, "secret": {"item_id": Infinity}}',  # json reads these, orjson refuses
    # (a lone surrogate in a fact searched for as a literal is refused: tests/audits/test_misshapen_lines.py)
    b'{"question": "\\ud800 lone surrogate", "workspace_video": "\\udc00x.mp4"}',
    b'{"question": "q", "question": "second wins", "agent": "a"}',  # duplicate keys
    b'{"secret": {"item_id": 1e400, "original_stem": 1.5e-400}}',
    b'{"question": "caf\xc3\xa9 \xe2\x84\xaa", "secret": {"item_id": 12345678901234567}}',
]


@pytest.mark.parametrize("raw", HOSTILE_ATTEMPT_JSON)
def test_attempt_json_is_what_json_reads(tmp_path, raw):
    path = tmp_path / ATTEMPT_FILE
    path.write_bytes(raw)
    expected = _plain_json(path)
    got = _attempt_json(path)
    assert repr(got) == repr(expected)  # repr: NaN != NaN, and int 10**29 == float 1e29 would hide a change
    assert AttemptFacts.from_attempt_json(path) == AttemptFacts.from_attempt_json(path)


def test_a_long_integer_item_id_keeps_every_digit(tmp_path):
    """orjson reads an integer beyond 64 bits as a float: the secret literal would become `1.2345678901234568e+29`."""
    path = tmp_path / ATTEMPT_FILE
    path.write_bytes(b'{"secret": {"item_id": 123456789012345678901234567890}}')
    assert AttemptFacts.from_attempt_json(path).item_id == "123456789012345678901234567890"


@pytest.mark.parametrize("raw", [b"\xef\xbb\xbf{}", b'{"a": 1', b'{"a": 1}\n{"b": 2}', b"", b'{"a": "\x01"}', b"[1, 2"])
def test_bad_attempt_json_gives_the_same_one_line_error(tmp_path, raw):
    path = tmp_path / ATTEMPT_FILE
    path.write_bytes(raw)
    with pytest.raises(DataError) as plain:
        _plain_json(path)
    with pytest.raises(DataError) as fast:
        AttemptFacts.from_attempt_json(path)
    assert str(fast.value) == str(plain.value) and "\n" not in str(fast.value)


def test_attempt_json_not_an_object_is_refused(tmp_path):
    path = tmp_path / ATTEMPT_FILE
    path.write_bytes(b"[1, 2]")
    with pytest.raises(DataError, match="must be an object"):
        AttemptFacts.from_attempt_json(path)


# -- the folder listing -----------------------------------------------------------------------------------------


def _attempt(tmp_path: Path) -> Path:
    folder = tmp_path / "a1"
    folder.mkdir(parents=True)
    (folder / ATTEMPT_FILE).write_text(json.dumps({"attempt_id": "a1", "secret": {"original_name": "blocks_1.mp4"}}))
    (folder / EVENTS_FILE).write_text(json.dumps({"seq": 0, "kind": "shell_command", "text": "ls /data"}) + "\n")
    return folder


def test_a_broken_link_is_refused_not_taken_for_missing(tmp_path):
    """A listed link is refused, dangling or not (statebox never writes one into an attempt folder; a handed-over
    folder may hold one): one line naming it (tests/audits/test_hostile_run_folders.py has the attacks)."""
    folder = _attempt(tmp_path)
    (folder / RESPONSE_FILE).symlink_to(tmp_path / "nowhere")
    listing = _Listing(folder)
    with pytest.raises(DataError, match="symbolic link"):
        listing.exists(RESPONSE_FILE)
    with pytest.raises(DataError, match="symbolic link"):
        load_attempt(folder, default_prefilter())


def test_a_link_to_a_file_is_not_read_through(tmp_path):
    folder = _attempt(tmp_path)
    target = tmp_path / "elsewhere.txt"
    target.write_text("7\n")
    (folder / RESPONSE_FILE).symlink_to(target)
    with pytest.raises(DataError, match=f"{RESPONSE_FILE}: a symbolic link"):
        _Listing(folder).response_text()


def test_a_fifo_is_never_read_and_never_taken_for_missing(tmp_path):
    """A FIFO named like a witness log has size 0: it was skipped as a missing log (so the attempt was judged on
    the logs left). Now it is refused without being read (reading it would wait for a writer)."""
    folder = _attempt(tmp_path)
    os.mkfifo(folder / STDOUT_LOG)
    listing = _Listing(folder)
    with pytest.raises(DataError, match="FIFO"):
        listing.nonempty_bytes(STDOUT_LOG)
    with pytest.raises(DataError, match="FIFO"):
        load_attempt(folder, default_prefilter())


def test_a_name_equal_but_for_case_makes_the_listing_ask_the_file_system(tmp_path):
    """On a case-insensitive file system `Path("response.txt").exists()` finds `Response.TXT`: the listing,
    which sees only the exact name, must not answer for it."""
    folder = _attempt(tmp_path)
    (folder / "Response.TXT").write_text("5")
    listing = _Listing(folder)
    assert not listing.authoritative
    assert listing.exists(RESPONSE_FILE) == (folder / RESPONSE_FILE).exists()
    folder2 = _attempt(tmp_path / "b")  # a non-ASCII name (ſ folds to s) likewise
    (folder2 / "\u017ftdout.log").write_text("x")
    assert not _Listing(folder2).authoritative


def test_a_plain_folder_is_answered_by_the_listing(tmp_path):
    folder = _attempt(tmp_path)
    (folder / STDOUT_LOG).write_bytes(b"")
    listing = _Listing(folder)
    assert listing.authoritative
    assert listing.exists(EVENTS_FILE) and not listing.exists(RESPONSE_FILE)
    assert listing.nonempty_bytes(STDOUT_LOG) is None and listing.nonempty_bytes(EVENTS_FILE)


def test_not_a_folder_loads_nothing(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    log = load_attempt(path, default_prefilter())
    assert log.events == [] and log.facts.attempt_id == "file"


@pytest.mark.parametrize("raw, text", [(b" 42\r\n", "42"), (b"a\rb\r\n", "a\nb"), (b"\xff\xfe 3 \n", "\ufffd\ufffd 3"),
                                       (b"caf\xc3\xa9\r", "caf\u00e9")])
def test_response_text_is_read_text_stripped(tmp_path, raw, text):
    folder = _attempt(tmp_path)
    (folder / RESPONSE_FILE).write_bytes(raw)
    expected = (folder / RESPONSE_FILE).read_text(encoding="utf-8", errors="replace").strip()
    assert expected == text and _Listing(folder).response_text() == expected
    log = load_attempt(folder, default_prefilter())
    assert [e.text for e in log.events if e.kind is EventKind.final_answer] == [expected]


# -- the events.jsonl prefilter: RE2's engine called per hit -----------------------------------------------------

PIECES = [b"\n", b"\n\n", b"curl ", b"env\n", b"\n env", b'"kind": "message"', b'"KIND":   "Final_Answer"', b'"\xe2\x84\xaaind": "message"',
          b"/data/", b"x" * 50, b" ", b"os.walk(", b"\xff", b"\xc5\xbf", b"ENV", b"set\n", b"{", b"}", b"a", b"b\n"]


def _hostile(seed: int) -> bytes:
    import random

    rng = random.Random(seed)
    return b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 400)))


@pytest.mark.parametrize("seed", range(30))
def test_engine_lines_are_matching_lines(seed, monkeypatch):
    """Hits on every line, matches across a newline (`[^a-z]env` starting at one), case folds, empty data: the
    lines found with RE2's engine asked directly are the ones found through `search`."""
    from statebox.audits import fastmatch
    from statebox.audits.fastmatch import compile_any, matching_lines

    prefilter = default_prefilter()
    data = _hostile(seed)
    matchers = (prefilter.static, prefilter.always, compile_any([r"[^a-z]env", r"b*"]), compile_any([r"(^|\n)set"]))
    assert fastmatch._engine_convention_holds()
    by_engine = [matching_lines(matcher, data) for matcher in matchers]
    monkeypatch.setattr(fastmatch, "_ENGINE_CONVENTION", False)  # every hit through `search`
    assert [matching_lines(matcher, data) for matcher in matchers] == by_engine


def test_engine_lines_take_search_for_another_engine():
    """Python's `re` (the fallback where RE2 is missing) has no RE2 engine to call: its own `search` answers,
    the lines its matches start on, each line searched from its start."""
    import re

    from statebox.audits.fastmatch import matching_lines

    matcher = re.compile(rb"(?im)curl|[^a-z]env")
    data = _hostile(7)
    expected: set[int] = set()
    pos = 0
    while (m := matcher.search(data, pos)) is not None:
        line = data.count(b"\n", 0, m.start()) + 1
        expected.add(line)
        nl = data.find(b"\n", m.start())
        if nl < 0:
            break
        pos = nl + 1
    assert matching_lines(matcher, data) == expected


# -- events.jsonl: only the kept lines are visited ----------------------------------------------------------------

EVENT_LINES = [b'{"seq": 1, "kind": "shell_command", "text": "ls"}', b'{"seq": 2, "kind": "message", "text": "hi"}', b"",
               b"   ", b"not json", b'{"seq": "x"}', b'{"seq": 3, "kind": "shell', b"[1]", b'{"seq": 4, "kind": "error"}\r',
               b' {"seq": 5, "kind": "tool_output", "text": "/data"}']


@pytest.mark.parametrize("seed", range(60))
def test_visiting_kept_lines_is_reading_with_keep(tmp_path, seed):
    """The same events, or the same first error, as the line-by-line reader with `keep` (bad lines kept or
    skipped, before or after each other, a torn last line)."""
    import random

    from statebox.audits.events import _read_events_jsonl

    rng = random.Random(seed)
    data = b"\n".join(rng.choice(EVENT_LINES) for _ in range(rng.randint(0, 12))) + rng.choice([b"", b"\n"])
    path = tmp_path / EVENTS_FILE
    path.write_bytes(data)
    kept = {n for n in range(1, data.count(b"\n") + 3) if rng.random() < 0.5}

    def outcome(**how: object) -> object:
        try:
            return [e.model_dump() for e in _read_events_jsonl(path, data=data, **how)]  # type: ignore[arg-type]
        except DataError as exc:
            return str(exc)

    assert outcome(keep=kept.__contains__) == outcome(keep=None, kept=kept)


# -- gateway user-agents: searched in place -------------------------------------------------------------------------


def _sliced_agents(data: bytes) -> list[tuple[int, bytes]]:
    """What `_out_of_band` read per line before: the user-agent in a copy of the line's head cut at `"request":`."""
    import re

    from statebox.audits.events import line_spans

    pattern = re.compile(rb'"user-agent":\s*"((?:[^"\\]|\\.)*)"', re.I)
    agents = []
    for n, (start, end) in enumerate(line_spans(data), start=1):
        if data.find(b'"request":', start, end) < 0:
            continue
        head = data[start:min(end + 1, start + 8192)]
        cut = head.find(b'"request":')
        m = pattern.search(head[:cut] if cut >= 0 else head)
        agents.append((n, m.group(1) if m else b""))
    return agents


def _gateway_line(rng, agent: bytes) -> bytes:
    header = b'{"headers": {"User-Agent": "' + agent + b'"}, '
    pad = b"x" * rng.choice([0, 10, 8192 - len(header) - 12, 8192 - len(header) - 9, 8192 - len(header) - 3, 9000])
    parts = [header, b'"pad": "' + pad + b'", ', b'"request": {"user-agent": "inner"}, "response": {}}']
    if rng.random() < 0.3:
        parts = [parts[2], parts[1], parts[0]]  # the request first: its own user-agent must not count
    if rng.random() < 0.2:
        parts = [b'{"refused": "budget"}']
    return b"".join(parts)


def _edge_lines() -> list[bytes]:
    """A user-agent only after the 8 KiB head, and one whose value runs into a `"request":` cut by the head's end
    (its closing quote is the request's opening one: found in the cut head, not before the request)."""
    lines = []
    for shift in range(-12, 4):
        ua = b'{"pad": "' + b"y" * (8192 - 40 + shift) + b'", "user-agent": "late'
        lines.append(ua + b'"request": {}, "user-agent": "after"}')
    lines.append(b'{"pad": "' + b"z" * 9000 + b'", "user-agent": "beyond-head", "request": {}}')
    return lines


@pytest.mark.parametrize("seed", range(40))
def test_user_agents_searched_in_place_are_the_sliced_ones(seed):
    """`"request":` before, across and after the 8 KiB head, user-agents with escapes, refusals, a final newline."""
    import random

    from statebox.audits import events

    rng = random.Random(seed)
    agents = [b"claude-cli/1.0", b"python-requests/2.31", b'sp\\"oof', b"OpenAI/Python 1.2", b""]
    made = [_gateway_line(rng, rng.choice(agents)) for _ in range(rng.randint(1, 8))]
    if seed < 17:
        made.insert(rng.randint(0, len(made)), _edge_lines()[seed])
    data = b"\n".join(made) + rng.choice([b"", b"\n"])
    seen: list[tuple[int, bytes]] = []
    original = events._USER_AGENT

    class Recording:
        def search(self, *args: object) -> object:
            m = original.search(*args)  # type: ignore[call-overload]
            seen.append(m.group(1) if m else b"")
            return m

    events._USER_AGENT = Recording()  # type: ignore[assignment]
    try:
        events._out_of_band(data, events.line_spans(data))
    finally:
        events._USER_AGENT = original
    assert [ua for _, ua in _sliced_agents(data)] == seen


def test_engine_path_is_taken_only_while_the_bindings_private_call_answers_as_read(monkeypatch) -> None:
    """The installed google-re2 passes the probe (so the fast path is what the corpus tests exercised); a
    binding whose private `Match` answers otherwise sends every scan back to `search`, same lines."""
    from statebox.audits import fastmatch
    from statebox.audits.fastmatch import compile_any, matching_lines

    monkeypatch.setattr(fastmatch, "_ENGINE_CONVENTION", None)
    assert fastmatch._engine_convention_holds()
    compiled = compile_any([r"find +/", r"environ"])
    data = b'{"a": "find /"}\n{"b": 1}\n{"c": "os.environ"}\n'

    class Counted:  # the compiled pattern, its `search` calls counted
        def __init__(self) -> None:
            self._regexp = compiled._regexp
            self.calls = 0

        def search(self, *args):  # type: ignore[no-untyped-def]
            self.calls += 1
            return compiled.search(*args)

    matcher = Counted()
    assert matching_lines(matcher, data) == {1, 3} and matcher.calls == 0  # the engine answered
    monkeypatch.setattr(fastmatch, "_ENGINE_CONVENTION", False)  # as if the probe had failed
    assert matching_lines(matcher, data) == {1, 3} and matcher.calls > 0  # search answered


@pytest.mark.parametrize("seed", range(4))
def test_a_shell_call_read_by_its_plain_first_word_is_what_splitting_all_of_it_gives(seed):
    """`tool_calls.shell_script` answers without shlex when shlex's first word is plain and no shell: exact,
    because only a shell as the first word unwraps. Checked against the full split on spellings that move the
    first word (quotes, backslashes, other spaces, unclosed quotes)."""
    import random
    import shlex

    from statebox.sessions.tool_calls import _SHELL_PROGRAMS, shell_script

    def split_all(text: str) -> str:
        try:
            argv = shlex.split(text)
        except ValueError:
            return text
        return argv[-1] if len(argv) >= 3 and argv[0] in _SHELL_PROGRAMS and argv[-2] in ("-c", "-lc") else text

    rng = random.Random(seed)
    pieces = list("ab sh-lc'\"\\\t\n\r/#;") + ["bash", "sh", "/bin/bash", "/usr/bin/env", "-lc", "-c", " ", "\u00a0", "\x0b",
                                               "ls", "env", "'bash'", "b\\ash", "\"-lc\""]
    texts = ["bash -lc 'ls /'", "  sh -c ls", "b\\ash -lc x", "'bash' -lc x", "ls -la", "bash -lc", "\tbash\t-c\tx"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 9))) for _ in range(20000)]
    texts += [rng.choice(["bash", "sh", "'bash'", "b\\ash", " /bin/bash"]) + rng.choice([" -lc ", " -c ", " \"-lc\" "]) + "".join(
        rng.choice(pieces) for _ in range(rng.randint(1, 4))) for _ in range(2000)]
    unwrapped = 0
    for text in texts:
        assert shell_script(text) == split_all(text), repr(text)
        unwrapped += shell_script(text) != text
    assert unwrapped > 500  # the unwrapping path was taken too


@pytest.mark.parametrize("seed", range(4))
def test_a_command_without_quotes_escapes_or_comments_is_cut_as_shlex_cuts_it(seed):
    """`shell_words.tokenize` cuts a text holding no quote, backslash or `#` by one pattern: the same tokens as
    shlex configured as it is there, on spellings made of every kind of character it tells apart (word characters,
    punctuation runs such as `&&` `>&` `;;`, blanks, line breaks, other characters alone: U+00A0, U+000B, a Latin-1
    letter, a symbol, a character outside the BMP)."""
    import random

    from statebox.audits.shell_words import _lexer, tokenize

    rng = random.Random(seed)
    pieces = list("ab0_~-./*?=$:{}[]@%+,^!;&|()<> \t\r\n") + ["\u00a0", "\x0b", "\u00e9", "\u00d7", "\u2028", "\U0001f600",
                                                           "ls", "cat", "2>", ">&", "&&", "||", ";;", "|&", "$(", "`"]
    texts = ["ls -la", "cd /data && cat x", "a>b", "echo 1 2>/dev/null >&2", "", " ", "\n\n", "find / -name x|head"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(20000)]
    for text in texts:
        assert not any(c in text for c in "'\"\\#")
        assert tokenize(text) == list(_lexer(text)), repr(text)


@pytest.mark.parametrize("tool", ["Bash", "bash", "shell", "Write", "WebFetch", "apply_patch", "str_replace_editor"])
@pytest.mark.parametrize("command", ["cat /data/annotations/qa.json", "cd /proc/self && cat environ", "", "ls",
                                     "python3 - <<'EOF'\nimport os\nos.walk('/data')\nEOF"])
@pytest.mark.parametrize("description", ["List files", "/data/annotations", ["/etc/passwd"], ""])
def test_a_call_of_a_command_and_its_description_reads_as_the_full_lookup_reads_it(tool, command, description):
    """`events._tool_call_accesses` answers a call holding `command` and `description` (Claude Code's Bash) from the
    command alone: the same accesses as the full lookup, which a third key no lookup reads (`timeout`) forces."""
    from statebox.audits.events import _tool_call_accesses, new_event

    def call(args: dict) -> list:
        return _tool_call_accesses(new_event(0, EventKind.tool_call, "events.jsonl", 1, json.dumps(args),
                                             {"tool": tool, "input": args}))

    quick = call({"command": command, "description": description})
    assert quick == call({"command": command, "description": description, "timeout": 120000})
    assert quick == call({"command": command})


@pytest.mark.parametrize("command", [["bash", "-lc", "cat /data/annotations/qa.json"], ["cat", "/data/annotations/qa.json"]])
def test_an_argv_command_beside_a_description_is_still_read(command):
    """An attack on the Bash fast path: the command as an argv list (Codex's `shell` spelling) beside a
    `description` is no string, so it takes the full lookup, which reads the argv as the shell text that runs it."""
    from statebox.audits.events import _tool_call_accesses, new_event

    args = {"command": command, "description": "List files"}
    found = _tool_call_accesses(new_event(0, EventKind.tool_call, "events.jsonl", 1, json.dumps(args),
                                          {"tool": "Bash", "input": args}))
    assert ("read", "/data/annotations/qa.json") in [(a.op, a.target) for a in found]


def test_a_runs_attempt_folders_are_those_the_path_calls_found(tmp_path):
    """`attempt_dirs` finds the attempt folders of a run through links, broken links, a link loop and plain
    files: those a folder (or a link to one) holding attempt.json or events.jsonl, in name order."""
    from statebox.audits.verdict import attempt_dirs

    base = tmp_path / "run" / "attempts"
    for name, session in (("b2", ATTEMPT_FILE), ("a1", EVENTS_FILE), ("c3", None), ("Z0", ATTEMPT_FILE)):
        (base / name).mkdir(parents=True)
        if session:
            (base / name / session).write_text("{}")
    (base / "a1" / ATTEMPT_FILE).mkdir()  # a folder named attempt.json: `exists()` says yes
    (base / "file").write_text("x")
    os.symlink(base / "b2", base / "link-to-b2")
    os.symlink(tmp_path / "missing", base / "broken")
    os.symlink("loop-b", base / "loop-a")
    os.symlink("loop-a", base / "loop-b")
    (base / "c3" / EVENTS_FILE).symlink_to(tmp_path / "nowhere")  # a broken link does not exist
    expected = sorted(p for p in base.iterdir()
                      if p.is_dir() and ((p / ATTEMPT_FILE).exists() or (p / EVENTS_FILE).exists()))
    assert attempt_dirs(tmp_path / "run") == expected == [base / "Z0", base / "a1", base / "b2", base / "link-to-b2"]


@pytest.mark.parametrize("decoy", [0, -1, "0", "", "/", "///"])
def test_a_decoy_path_that_names_nothing_is_no_decoy_on_either_path(tmp_path, decoy):
    """`secret.honeytoken_paths` holding 0 was the path "0": the full path flagged every text holding a 0 (an honest
    session contaminated) while the prefilter never searched for it (`usable_secret`); "" and "/" matched every text
    or every path on both. Only a distinctive path is a decoy (`AttemptFacts.__post_init__`)."""
    src = Path(__file__).parent / "corpus" / "honest_opencv__gateway"
    shutil.copytree(src, tmp_path / "attempts" / src.name)
    path = tmp_path / "attempts" / src.name / ATTEMPT_FILE
    facts = json.loads(path.read_text())
    facts["secret"]["honeytoken_paths"].append(decoy)
    path.write_text(json.dumps(facts))
    assert AttemptFacts.from_attempt_json(path).honeytoken_paths == facts["secret"]["honeytoken_paths"][:-1]
    for full in (False, True):
        assert [r.verdict.verdict for r in audit_run(tmp_path, None, write=False, full=full)] == ["clean"]
