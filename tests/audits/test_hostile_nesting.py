"""JSON the agent shapes, nested past what Python's json reader can recurse into, must not end an audit.

Found this way: a line nested a few thousand deep raised RecursionError inside json.loads, and no parser's
`except ValueError` caught it. The agent writes such text itself: the output of a command it runs (a Codex
rollout reads tool outputs as JSON), the arguments its model sends (the gateway log reads them), any line of a
session file someone hands the auditor. The audit ended in a traceback, leaving that session unjudged.
Now such text is malformed text like any other (kept as what it is, unparsed), and `json_text.json_value`, which
reads every line of a session file, gives json's own value for everything else.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from statebox.json_text import json_value, line_loads
from statebox.sessions import atif_trajectory, codex_rollout, gateway_log, parse_json_line
from statebox.sessions.tool_calls import parse_arguments

HERE = Path(__file__).parent
CLI_FILES = HERE / "cli_session_files"
DEEP = "[" * 5000 + "]" * 5000  # json recurses once per level; orjson refuses past 1,024


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "statebox.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(HERE.parents[1])})


@pytest.mark.parametrize("raw", [DEEP, DEEP.encode(), '{"a": ' + DEEP + "}"])
def test_too_deep_a_nesting_is_malformed_json_not_a_recursion_error(raw: str | bytes) -> None:
    with pytest.raises(json.JSONDecodeError, match="nested too deeply"):
        json_value(raw)


def test_every_reader_of_agent_shaped_json_keeps_a_too_deep_text_as_text() -> None:
    assert parse_arguments(DEEP) == {"input": DEEP}  # arguments a model wrote
    assert gateway_log._tool_call("exec", DEEP, "c1").data["input"] == {"input": DEEP}
    assert codex_rollout._output(DEEP) == (DEEP, False)  # a command's output
    [(line, draft)] = parse_json_line(7, DEEP, lambda obj, n: [])
    assert line == 7 and draft.data == {"unparsed": True}
    with pytest.raises(ValueError):  # a trajectory file: one error naming it, from the caller
        atif_trajectory.parse_trajectory(DEEP)


# ---------------------------------------------------------------------------
# json_value is json.loads
# ---------------------------------------------------------------------------

EDGES = [
    '{"a": 1, "a": 2}', "[1e400]", "[-1e400]", "[-0]", "[-0.0]", "[5e-324]", "[1e-400]", "[NaN]", "[Infinity]",
    "[-Infinity]", '"\\ud800"', '"\\udfff\\ud800"', '"\\u00e9\\ud83d\\ude00"', "\ufeff[1]", '"a\tb"', '"a\\tb"',
    "[1,]", "[01]", "[1.]", "[.5]", "[1e5]", "[1E+2]", "[123456789012345678]", "[1234567890123456789]",
    "[12345678901234567890123]", "[-9223372036854775808]", "[18446744073709551615]", "[18446744073709551616]",
    "[0.1000000000000000055511151231257827]", "[2.2250738585072011e-308]", "[1.7976931348623157e308]", "{}", "[]",
    '{"": null, "t": true, "f": false}', "nul", "[true false]", "  [1]  ", "[1] x", '{"a" 1}', "\x00", '"\x7f"',
    '"\\/"', '"\\x41"', "[" * 1024 + "]" * 1024, "[" * 1025 + "]" * 1025,
]


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (NaN equal to NaN; 1 is not 1.0; -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _outcome(loads: Any, raw: str | bytes) -> tuple[str, Any]:
    try:
        return "value", loads(raw)
    except ValueError:
        return "refused", None
    except RecursionError:
        return "too deep for json", None


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 4 and roll < 0.2:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if depth < 4 and roll < 0.4:
        return {"".join(rng.choices("ab\u00e9\U0001f600\"\\\n", k=rng.randint(0, 3))): _random_value(rng, depth + 1)
                for _ in range(rng.randint(0, 4))}
    if roll < 0.55:
        return rng.choice([rng.randint(-10**25, 10**25), rng.randint(-10**6, 10**6), 10**18 + rng.randint(0, 10**19)])
    if roll < 0.7:
        return rng.choice([rng.uniform(-1e300, 1e300), rng.random() * 10 ** rng.randint(-320, 308), -0.0, 0.0])
    if roll < 0.9:
        return "".join(rng.choices("az09 \t\n\"\\/\u0000\u001f\u00e9\u2028\U0001f600", k=rng.randint(0, 12)))
    return rng.choice([None, True, False])


@pytest.mark.parametrize("seed", range(40))
def test_json_value_is_what_json_loads_gives_or_refuses(seed: int) -> None:
    rng = random.Random(seed)
    docs: list[str | bytes] = list(EDGES) if seed == 0 else []
    for _ in range(50):
        text = json.dumps(_random_value(rng), ensure_ascii=rng.random() < 0.5)
        docs += [text, text.encode()]
    for raw in docs:
        got, want = _outcome(json_value, raw), _outcome(json.loads, raw)
        if want[0] == "too deep for json":  # json cannot answer: orjson's value (up to 1,024 levels), else refused
            assert got[0] in ("value", "refused"), repr(raw)[:200]
            continue
        assert got[0] == want[0] and _same(got[1], want[1]), repr(raw)[:200]


@pytest.mark.parametrize("seed", range(20))
def test_a_files_lines_read_once_checked_are_what_json_loads_gives_each(seed: int) -> None:
    """line_loads asks the digit check of the whole file once: each line, as bytes or decoded with replacement
    (as the CLIs' files are read), must still read as json.loads reads it alone; files with and without a wide
    integer somewhere, and bytes that are not UTF-8 next to digits."""
    rng = random.Random(1000 + seed)
    lines = [json.dumps(_random_value(rng), ensure_ascii=rng.random() < 0.5).replace("\n", " ").encode() for _ in range(30)]
    lines += [b'{"n": 12\xff345678901234567890}', b"[1234567890\xff123456789]", rng.choice(EDGES[:20]).encode("utf-8", "surrogatepass")]
    rng.shuffle(lines)
    data = b"\n".join(lines) + b"\n"
    loads = line_loads(data)
    for raw in data.split(b"\n"):
        for line in (raw, raw.decode("utf-8", "replace")):
            want = _outcome(json.loads, line)
            if want[0] == "too deep for json":
                continue
            got = _outcome(loads, line)
            assert got[0] == want[0] and _same(got[1], want[1]), repr(line)[:200]


def test_a_file_whose_only_wide_integer_is_in_one_line_reads_that_line_as_json_does() -> None:
    data = b'{"a": 1}\n{"big": 123456789012345678901234567}\n'
    assert line_loads(data)(data.split(b"\n")[1]) == {"big": 123456789012345678901234567}  # orjson alone: a float
    assert line_loads(b'{"a": 1}\n') is not json_value  # no wide number: the per-line check is skipped


def test_a_nesting_json_cannot_recurse_into_but_orjson_reads_gives_its_value() -> None:
    value = json_value("[" * 1024 + "7" + "]" * 1024)
    for _ in range(1024):
        [value] = value
    assert value == 7


# ---------------------------------------------------------------------------
# end to end: the command judges such sessions
# ---------------------------------------------------------------------------

def test_a_claude_session_file_with_a_too_deep_line_is_judged(tmp_path: Path) -> None:
    original = next((CLI_FILES / "claude-code-cheat").rglob("*.jsonl"))
    target = tmp_path / "claude" / "projects" / "-workspace" / original.name
    target.parent.mkdir(parents=True)
    target.write_text(original.read_text() + '{"type": "user", "sessionId": "x", "x": ' + DEEP + "}\n")
    done = _cli("audit", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = json.loads(done.stdout)["attempts"]
    assert row["verdict"] == "contaminated"  # the cheating session's own findings, still read after the line


def test_a_codex_rollout_whose_tool_printed_a_too_deep_text_is_judged(tmp_path: Path) -> None:
    original = next((CLI_FILES / "codex-cheat").rglob("rollout-*.jsonl"))
    lines = original.read_text().splitlines()
    output = next(k for k, line in enumerate(lines) if '"function_call_output"' in line)
    obj = json.loads(lines[output])
    obj["payload"]["output"] = DEEP  # what the command printed, read as JSON by the rollout reader
    lines[output] = json.dumps(obj)
    target = tmp_path / "codex" / "sessions" / "2026" / "11" / "26" / original.name
    target.parent.mkdir(parents=True)
    target.write_text("\n".join(lines) + "\n")
    done = _cli("audit", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = json.loads(done.stdout)["attempts"]
    assert row["verdict"] == "contaminated"


def test_an_attempt_whose_model_wrote_too_deep_tool_arguments_is_judged(tmp_path: Path) -> None:
    attempt = tmp_path / "attempts" / "a1"
    attempt.mkdir(parents=True)
    (attempt / "attempt.json").write_text(json.dumps({
        "attempt_id": "a1", "attempt": {"agent": "react"}, "workspace_video": "v.mp4", "question": "How many?",
        "secret": {"original_name": "blocks_1234_src.mp4", "item_id": "q77x"}}))
    (attempt / "events.jsonl").write_text(json.dumps({"seq": 0, "kind": "final_answer", "text": "4"}) + "\n")
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": DEEP}}
    cat = {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": "cat /data/annotations/qa.json"})}}
    line = {"api": "openai", "model": "gpt", "status": 200,
            "request": {"model": "gpt", "messages": [{"role": "user", "content": "How many?"}]},
            "response": {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call, cat]}}]}}
    (attempt / "gateway.jsonl").write_text(json.dumps(line) + "\n" + json.dumps(line) + "\n")
    done = _cli("audit", str(tmp_path), "--json", "--no-write")
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = json.loads(done.stdout)["attempts"]
    assert row["verdict"] == "contaminated", row  # the other call of the same reply is still read


def test_a_lone_surrogate_in_the_agents_commands_is_judged_and_shown(tmp_path: Path) -> None:
    """JSON lets a string hold a lone surrogate (`"\\ud800"`, as JSON.stringify writes one the agent's text holds);
    UTF-8 cannot. The verdict, its JSON and the HTML page (where it is spelt <U+D800>) are all still written."""
    original = next((CLI_FILES / "claude-code-cheat").rglob("*.jsonl"))
    target = tmp_path / "s" / "claude" / "projects" / "-workspace" / original.name
    target.parent.mkdir(parents=True)
    lines = []
    for line in original.read_text().splitlines():
        obj = json.loads(line)
        content = (obj.get("message") or {}).get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
                block["input"] = {k: f"{v} #\ud800" if isinstance(v, str) else v for k, v in block["input"].items()}
        lines.append(json.dumps(obj))
    target.write_text("\n".join(lines) + "\n")
    page = tmp_path / "audit.html"
    done = _cli("audit", str(tmp_path / "s"), "--json", "--html", str(page))
    assert done.returncode == 0, done.stderr[-2000:]
    assert [a["verdict"] for a in json.loads(done.stdout)["attempts"]] == ["contaminated"]
    assert "&lt;U+D800&gt;" in page.read_text(encoding="utf-8")
