"""Codex exec JSONL -> events, on streams recorded from the real CLI (0.169.0)."""

from __future__ import annotations

from pathlib import Path

from statebox.sessions.codex_jsonl import parse_line, parse_lines, unwrap_shell
from statebox.schema import EventKind

DATA = Path(__file__).parent / "data"


def test_recorded_stream_gives_calls_outputs_and_answer_in_order():
    events = parse_lines((DATA / "codex_ok.jsonl").read_text().splitlines())
    kinds = [d.kind for _, d in events]
    assert kinds == [
        EventKind.message,  # thread.started
        EventKind.message,  # codex's non-fatal "model metadata" notice
        EventKind.tool_call,
        EventKind.shell_command,
        EventKind.tool_output,
        EventKind.model_text,
        EventKind.message,  # turn.completed (usage)
        EventKind.final_answer,
    ]
    drafts = [d for _, d in events]
    assert drafts[3].text == "ls -la; echo 7 > answer.txt"  # the script, unwrapped from bash -lc
    assert drafts[4].data["exit_code"] == 0 and drafts[2].data["call_id"] == drafts[4].data["call_id"]
    assert drafts[-1].text == "The answer is 7."


def test_failed_turn_is_an_error_and_gives_no_answer():
    events = parse_lines((DATA / "codex_api_error.jsonl").read_text().splitlines())
    assert EventKind.final_answer not in [d.kind for _, d in events]
    errors = [d.text for _, d in events if d.kind is EventKind.error]
    assert errors and all("budget_exceeded" in e for e in errors)


def test_unwrap_shell():
    assert unwrap_shell("/bin/bash -lc 'ls -la; echo 7 > answer.txt'") == "ls -la; echo 7 > answer.txt"
    assert unwrap_shell("bash -l -c 'cat x'") == "cat x"
    assert unwrap_shell("python3 run.py") == "python3 run.py"
    assert unwrap_shell("bash -lc 'unterminated") == "bash -lc 'unterminated"


def test_other_items():
    change = {"type": "item.completed", "item": {"id": "i", "type": "file_change", "changes": [{"path": "/w/a.py", "kind": "add"}]}}
    assert [(d.kind, d.text) for d in parse_line(change)] == [(EventKind.file_write, "/w/a.py")]
    search = {"type": "item.completed", "item": {"id": "i", "type": "web_search", "query": "vstat answers"}}
    assert [d.kind for d in parse_line(search)] == [EventKind.network_attempt]
    failed = {"type": "item.completed", "item": {"id": "i", "type": "command_execution", "command": "false",
                                                 "aggregated_output": "", "exit_code": 1, "status": "failed"}}
    (out,) = parse_line(failed)
    assert out.kind is EventKind.tool_output and out.data["is_error"] is True
