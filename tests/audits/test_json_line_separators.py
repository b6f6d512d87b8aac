"""A JSONL line ends at "\\n" alone: JSON strings may hold U+2028, U+2029 and U+0085 unescaped.

The attack: Claude Code (JavaScript's JSON.stringify) and Codex (Rust's serde_json) write those characters as
they are inside a string. The auditor cut its files with `str.splitlines`, which also cuts at them, so an agent
that ended each command with `#` and U+2028 split every line holding one of its commands into two halves that
parse as nothing: the cheating Claude Code session read as suspicious instead of contaminated, its commands
unseen. The same cut was in `--items` and in the live reading of a streaming session's CLI output.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from statebox.json_text import decoded_lines, jsonl_lines

HERE = Path(__file__).parent
CLI_FILES = HERE / "cli_session_files"
SEPARATORS = ["\u2028", "\u2029", "\u0085"]


def _audit(target: Path) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "statebox.cli", "audit", str(target), "--json"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(HERE.parents[1])})
    assert done.returncode == 0, done.stderr[-2000:]
    return [a["verdict"] for a in json.loads(done.stdout)["attempts"]]


def _with_separator_in_every_command(obj: dict, separator: str) -> dict:  # type: ignore[type-arg]
    """Claude Code's tool_use inputs and Codex's function-call arguments, each command ending in `#` + separator."""
    message = obj.get("message") or {}
    for block in message.get("content") or [] if isinstance(message.get("content"), list) else []:
        if block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
            block["input"] = {k: f"{v} #{separator}" if isinstance(v, str) else v for k, v in block["input"].items()}
    payload = obj.get("payload") or {}
    if payload.get("type") == "function_call" and isinstance(payload.get("arguments"), str):
        arguments = json.loads(payload["arguments"])
        payload["arguments"] = json.dumps({k: f"{v} #{separator}" if isinstance(v, str) else v
                                           for k, v in arguments.items()}, ensure_ascii=False)
    return obj


@pytest.mark.parametrize("separator", SEPARATORS)
@pytest.mark.parametrize("session", ["claude-code-cheat", "codex-cheat"])
def test_a_line_separator_inside_a_command_hides_nothing(tmp_path: Path, session: str, separator: str) -> None:
    [original] = [p for p in (CLI_FILES / session).rglob("*.jsonl")]
    target = tmp_path / original.relative_to(CLI_FILES / session)
    target.parent.mkdir(parents=True)
    lines = [json.dumps(_with_separator_in_every_command(json.loads(line), separator), ensure_ascii=False)
             for line in original.read_text().splitlines()]
    target.write_text("\n".join(lines) + "\n")
    assert separator in target.read_text()  # written raw, as the CLIs write it
    assert _audit(tmp_path) == _audit(CLI_FILES / session) == ["contaminated"]


@pytest.mark.parametrize("seed", range(30))
def test_lines_decoded_one_at_a_time_are_the_lines_of_the_decoded_text(seed: int) -> None:
    """decoded_lines (the CLIs' files, read without holding their whole text) against jsonl_lines of the whole
    decoded text: ill-formed UTF-8 just before and after a newline, U+2028, CR, blank and missing last lines."""
    rng = random.Random(seed)
    pieces = [b"\n", b"\r\n", b"a", b"{}", b"\xe2\x80\xa8", b"\xe2\x80", b"\xe2", b"\xf0\x9f\x98", b"\xf0\x9f\x98\x80",
              b"\xed\xa0\x80", b"\xc3", b"\xc3\xa9", b"\xff", b"\x80", b" ", b"\x00"]
    for _ in range(50):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        assert list(decoded_lines(data)) == jsonl_lines(data.decode("utf-8", "replace")), data


def test_jsonl_lines_cut_at_newlines_only() -> None:
    text = '{"a": "x\u2028y"}\r\n{"b": "\u0085"}\n\n{"c": 1}'
    assert jsonl_lines(text) == ['{"a": "x\u2028y"}\r', '{"b": "\u0085"}', "", '{"c": 1}']
    assert jsonl_lines("a\n") == ["a"] and jsonl_lines("") == []
