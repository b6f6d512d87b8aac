"""A session line of a shape its format never has is read as missing, not a traceback.

Why: every file `statebox audit` reads is hostile input, and the normalisers read each line as the format's
writer shapes it. A type-mutation fuzzer (one JSON value per line set to a number, a list, an object, null,
...) made `statebox audit` end in a traceback on ~6,500 inputs in three minutes: `kind in DROPPED` with a list
for `type`, `obj.get("message").get(...)` with a number for `message`, `for block in content` with a number
for `content`, a text field holding an object reaching the rules as an object. One such line in one file ended
the audit of the whole folder. Now each misshapen value is read as the format's absent case
(`statebox.sessions.shapes`), and the rest of the file is judged as before: a cheat in it is still found.

The fuzz below is seeded (the same cases every run) and bounded (a few seconds).
"""

from __future__ import annotations

import copy
import json
import random
import shutil
from pathlib import Path

import pytest

from statebox.attempt_folder import ATTEMPT_FILE, EVENTS_FILE
from statebox.audits import external, external_session
from statebox.audits.events import AttemptFacts
from statebox.audits.verdict import audit_run
from statebox.errors import DataError, UserError

HERE = Path(__file__).parent
CLI_FILES = HERE / "cli_session_files"
CORPUS = HERE / "corpus"
MANIFEST = json.loads((CLI_FILES / "manifest.json").read_text())
EXPECTED = {"honest": "clean", "cheat": "contaminated"}

CLAUDE_LINES = [
    {"type": ["user"], "sessionId": "s"},
    {"type": {"k": 1}, "sessionId": "s"},
    {"type": "user", "sessionId": "s", "message": 5},
    {"type": "assistant", "sessionId": "s", "message": {"content": 3}},
    {"type": "assistant", "sessionId": "s", "message": {"content": [{"type": "text", "text": {"a": 1}}]}},
    {"type": "assistant", "sessionId": "s", "message": {"content": [{"type": ["tool_use"], "name": 7, "input": None}]}},
    {"type": "user", "sessionId": "s", "message": {"content": [{"type": "tool_result", "tool_use_id": [1], "content": 7}]}},
    {"type": "user", "sessionId": "s", "message": {"content": [{"type": "text", "text": None}]}},
    {"type": "api-request-shape", "sessionId": "s", "shape": True},
    {"type": "system", "sessionId": "s", "subtype": ["init"]},
]
CODEX_LINES = [
    {"type": ["response_item"], "payload": {}},
    {"type": "response_item", "payload": {"type": ["message"], "content": 5}},
    {"type": "response_item", "payload": {"type": "message", "role": "assistant", "content": 7}},
    {"type": "response_item", "payload": {"type": "reasoning", "summary": 5, "content": True}},
    {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c",
                                          "output": json.dumps({"output": "x", "metadata": 5})}},
    {"type": "event_msg", "payload": {"type": {"a": 1}}},
    {"type": "event_msg", "payload": {"type": ["task_complete"]}},
]


def _with_lines(tmp_path: Path, entry: dict, lines: list[dict]) -> Path:
    """The CLI file of `entry`, copied under tmp_path with `lines` inserted after its second line."""
    source = CLI_FILES / entry["file"]
    target = tmp_path / entry["file"]
    target.parent.mkdir(parents=True)
    original = source.read_text(encoding="utf-8").splitlines(keepends=True)
    inserted = [json.dumps(line) + "\n" for line in lines]
    target.write_text("".join(original[:2] + inserted + original[2:]), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("entry", MANIFEST, ids=[f"{e['agent']}-{e['label']}" for e in MANIFEST])
def test_misshapen_lines_in_a_cli_file_leave_its_verdict_as_it_was(tmp_path: Path, entry: dict) -> None:
    lines = CLAUDE_LINES if entry["agent"] == "claude-code" else CODEX_LINES
    rows = external.audit_path(_with_lines(tmp_path, entry, lines), None, jobs=1)
    assert [r.row.verdict.verdict for r in rows] == [EXPECTED[entry["label"]]]


@pytest.mark.parametrize("entry", MANIFEST[:1] + MANIFEST[2:3], ids=["claude-code", "codex"])
def test_each_misshapen_line_alone_reads_without_a_traceback(tmp_path: Path, entry: dict) -> None:
    lines = CLAUDE_LINES if entry["agent"] == "claude-code" else CODEX_LINES
    for n, line in enumerate(lines):
        rows = external.audit_path(_with_lines(tmp_path / str(n), entry, [line]), None, jobs=1)
        assert [r.row.verdict.verdict for r in rows] == ["clean"], line


GATEWAY_LINES = [
    {"api": "anthropic", "request": {"messages": "hello", "system": 5}, "response": {"content": [{"type": ["tool_use"]}, 3]},
     "status": 200},
    {"api": "openai", "request": {"input": 7, "messages": {"a": 1}},
     "response": {"choices": [5, {"message": {"tool_calls": [3, {"function": 4}], "annotations": 9, "content": {"x": 1}}}],
                  "output": 7}, "status": 200},
    {"api": "openai", "request": {"messages": [{"role": ["user"], "content": 5}]},
     "response": {"output": [{"type": {"t": 1}}, {"type": "message", "content": 8}]}, "status": 200},
]


@pytest.mark.parametrize("name", ["cheat_network__gateway", "honest_opencv__gateway", "cheat_env_dump__gateway_oai"])
def test_misshapen_gateway_lines_leave_the_verdict_as_it_was_on_both_paths(tmp_path: Path, name: str) -> None:
    expected = audit_run(CORPUS / name, None, write=False)[0].verdict.verdict
    run = tmp_path / "run" / "attempts" / name
    shutil.copytree(CORPUS / name, run)
    log = run / "gateway.jsonl"
    log.write_text(log.read_text(encoding="utf-8") + "".join(json.dumps(line) + "\n" for line in GATEWAY_LINES),
                   encoding="utf-8")
    for full in (False, True):
        assert [r.verdict.verdict for r in audit_run(run.parent.parent, None, write=False, full=full)] == [expected]


# ---------------------------------------------------------------------------------------- a seeded type fuzz

_VALUES = [0, -1, 2**70, 1.5e308, None, True, False, [], {}, "", "\ud800x", "///", [[[[]]]],
           {"type": "tool_use", "name": 7, "input": None},
           {"type": "text", "text": {"a": 1}, "content": 5, "id": {"x": 1}, "tool_use_id": [1], "call_id": {"k": 2}}]


def _nodes(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _nodes(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _nodes(item, path + (index,))


def _mutated(obj, rng: random.Random):
    """`obj` with one of its values (or itself) replaced by a value of another JSON type, or a key deleted."""
    path = rng.choice(list(_nodes(obj)))
    if not path:
        return copy.deepcopy(rng.choice(_VALUES))
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and rng.random() < 0.15:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(rng.choice(_VALUES))  # a copy: a shared one would make cycles
    return obj


_BYTES = [b"\x00", b"\xff\xfe", b"\r", b"\n", b"\\", b'"', b"\xe2\x80\xa8", b"\\ud800", b"{", b"}", b"[", b",", b"NaN"]


def _bytes_mutated(data: bytes, rng: random.Random) -> bytes:
    """`data` with a few bytes changed, inserted or cut, or a line repeated, moved or torn: a log broken as a
    copy, an editor or a hostile hand breaks one (a line whose request half is broken and whose reply is not)."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not b:
            break
        at, op = rng.randrange(len(b)), rng.randrange(6)
        if op == 0:
            b[at] = rng.randrange(256)
        elif op == 1:
            b[at:at] = rng.choice(_BYTES)
        elif op == 2:
            del b[at:at + rng.randint(1, 50)]
        elif op == 3:
            lines = bytes(b).split(b"\n")
            lines.insert(rng.randrange(len(lines) + 1), rng.choice(lines))
            b = bytearray(b"\n".join(lines))
        elif op == 4:
            b = b[:at]
        else:
            other = rng.randrange(len(b))
            b[at:at] = b[other:other + rng.randint(1, 200)]
    return bytes(b)


def _mutate_file(data: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.4:
        return _bytes_mutated(data, rng)
    out = []
    for line in data.split(b"\n"):
        if line.strip() and rng.random() < 0.3:
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
            if obj is not None:
                for _ in range(rng.randint(1, 3)):
                    obj = _mutated(obj, rng)
                line = json.dumps(obj).encode()
        out.append(line)
    return b"\n".join(out)


SESSION_LOGS = (".jsonl",)


@pytest.mark.parametrize("seed", range(8))
def test_a_seeded_type_fuzz_of_run_folders_never_ends_in_a_traceback_and_both_paths_agree(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    attempts = sorted(p for p in CORPUS.iterdir() if p.is_dir())
    for case in range(40):
        source = rng.choice(attempts)
        run = tmp_path / f"c{case}"
        target = run / "attempts" / source.name
        shutil.copytree(source, target)
        for f in sorted(target.iterdir()):
            if f.name == ATTEMPT_FILE and rng.random() < 0.3:  # one document: mutated whole
                f.write_text(json.dumps(_mutated(json.loads(f.read_text()), rng)))
            elif f.suffix in SESSION_LOGS and rng.random() < 0.7:
                f.write_bytes(_mutate_file(f.read_bytes(), rng))
        verdicts = []
        for full in (False, True):
            try:
                verdicts.append([(r.verdict.verdict, sorted(f.category for f in r.verdict.findings))
                                 for r in audit_run(run, None, write=False, full=full)])
            except UserError as exc:
                verdicts.append(str(exc))  # one line naming the file, exit 2: bad input said so, not a traceback
        if isinstance(verdicts[1], str) and EVENTS_FILE in verdicts[1] and "not a session event" in verdicts[1]:
            continue  # an events.jsonl line of braces that is no event is refused where it is parsed (_misshapen says so)
        if isinstance(verdicts[0], str) and isinstance(verdicts[1], str):
            continue  # both refused (the message may name another line: each reads the lines it reads in order)
        assert verdicts[0] == verdicts[1], (source.name, case)  # the prefilter reads what the full reading reads


@pytest.mark.parametrize("seed", range(4))
def test_a_seeded_type_fuzz_of_cli_files_never_ends_in_a_traceback(tmp_path: Path, seed: int) -> None:
    """Type- and byte-mutated CLI files: no traceback, and the default reading (candidate lines,
    `session_file_prefilter`) gives the verdicts and findings of `--full`."""
    rng = random.Random(100 + seed)
    items = external_session.read_items(CLI_FILES / "items.jsonl")
    for case in range(40):
        entry = rng.choice(MANIFEST)
        target = tmp_path / f"c{case}" / entry["file"]
        target.parent.mkdir(parents=True)
        target.write_bytes(_mutate_file((CLI_FILES / entry["file"]).read_bytes(), rng))
        verdicts: list[object] = []
        for full in (False, True):
            try:
                verdicts.append([(r.row.verdict.verdict, sorted((f.category, f.severity, f.rule) for f in r.row.verdict.findings))
                                 for r in external.audit_path(tmp_path / f"c{case}", None, items=items, jobs=1, full=full)])
            except UserError:
                verdicts.append("refused")  # one line naming the file, exit 2: bad input said so, not a traceback
        assert verdicts[0] == verdicts[1], (entry["file"], case)


# ---------------------------------------------------------------------------------------- attempt.json's facts


@pytest.mark.parametrize("edit", ["secret_list", "attempt_number", "values_string", "values_number"])
def test_facts_of_another_type_read_as_absent(tmp_path: Path, edit: str) -> None:
    """attempt.json is statebox's own file, but a handed-over run folder's is hostile: `secret` a list or
    `attempt` a number raised AttributeError; `honeytoken_values` a string was read letter by letter (each a
    canary), a number raised TypeError."""
    name = "cheat_filesystem_walk__events"
    run = tmp_path / "run" / "attempts" / name
    shutil.copytree(CORPUS / name, run)
    doc = json.loads((run / "attempt.json").read_text())
    if edit == "secret_list":
        doc["secret"] = [doc["secret"]]
    elif edit == "attempt_number":
        doc["attempt"] = 7
    else:
        doc["secret"]["honeytoken_values"] = "76150" if edit == "values_string" else 76150
    (run / "attempt.json").write_text(json.dumps(doc))
    facts = AttemptFacts.from_attempt_json(run / "attempt.json")
    if edit == "secret_list":
        assert (facts.original_name, facts.honeytoken_paths) == ("", [])
    if edit.startswith("values"):
        assert facts.honeytoken_values == []
    for full in (False, True):
        assert [r.verdict.verdict for r in audit_run(run.parent.parent, None, write=False, full=full)] == ["suspicious"]


@pytest.mark.parametrize("field", ["original_name", "honeytoken_values", "honeytoken_paths", "item_id"])
def test_a_fact_holding_a_lone_surrogate_is_one_line_naming_the_file(tmp_path: Path, field: str) -> None:
    """`"\\ud800"` is valid JSON and no text: the secret's literal search could not be compiled (a traceback). The
    facts not searched for as literals (the question, the workspace video's name) may hold one, as before."""
    name = "honest_opencv__shell"
    run = tmp_path / "run" / "attempts" / name
    shutil.copytree(CORPUS / name, run)
    doc = json.loads((run / "attempt.json").read_text())
    value = "/data/ans\ud800wers.csv"
    doc["secret"][field] = [value] if field.startswith("honeytoken") else value
    (run / "attempt.json").write_text(json.dumps(doc))
    for full in (False, True):
        with pytest.raises(DataError, match=f"attempt.json: session '{name}': its {field} is not text"):
            audit_run(run.parent.parent, None, write=False, full=full)


def test_a_question_holding_a_lone_surrogate_is_judged_as_before(tmp_path: Path) -> None:
    name = "honest_opencv__shell"
    run = tmp_path / "run" / "attempts" / name
    shutil.copytree(CORPUS / name, run)
    doc = json.loads((run / "attempt.json").read_text())
    doc["question"], doc["workspace_video"] = "How many \ud800 blocks?", "v\ud800.mp4"
    (run / "attempt.json").write_text(json.dumps(doc))
    for full in (False, True):
        assert [r.verdict.verdict for r in audit_run(run.parent.parent, None, write=False, full=full)] == ["clean"]
