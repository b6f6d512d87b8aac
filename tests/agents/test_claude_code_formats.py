"""Claude Code stream-json -> events, on streams recorded from the real CLI (2.1.330)."""

from __future__ import annotations

import json
from pathlib import Path

from statebox.sessions.claude_stream import ClaudeNormaliser, parse_line, parse_lines
from statebox.schema import EventKind

DATA = Path(__file__).parent / "data"


def test_recorded_stream_gives_calls_outputs_and_answer_in_order():
    events = parse_lines((DATA / "claude_ok.stream.jsonl").read_text().splitlines())
    kinds = [d.kind for _, d in events]
    assert kinds == [
        EventKind.message,
        EventKind.model_text,
        EventKind.tool_call,
        EventKind.shell_command,
        EventKind.tool_output,
        EventKind.model_text,
        EventKind.final_answer,
    ]
    by_kind = {d.kind: (n, d) for n, d in events}
    assert by_kind[EventKind.shell_command][1].text == "ls -la && echo hi > answer.txt"
    # the call and its output share the tool_use id, and each points at its raw line
    assert by_kind[EventKind.tool_call][1].data["call_id"] == by_kind[EventKind.tool_output][1].data["call_id"] == "toolu_01"
    assert by_kind[EventKind.tool_output][0] == 4
    assert by_kind[EventKind.final_answer][1].text == "The answer is 42."


def test_api_error_stream_is_an_error_not_an_answer():
    norm = ClaudeNormaliser()
    for raw in (DATA / "claude_api_error.stream.jsonl").read_text().splitlines():
        norm.feed(json.loads(raw))
    assert norm.final_answer is None
    assert norm.failure is not None and "budget exceeded" in norm.failure


def test_tools_map_to_actions():
    def one(name: str, args: dict) -> list[EventKind]:
        obj = {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "t", "name": name, "input": args}]}}
        return [d.kind for d in parse_line(obj)]

    assert one("Read", {"file_path": "/etc/passwd"}) == [EventKind.tool_call, EventKind.file_read]
    assert one("Glob", {"pattern": "**/*.json", "path": "/"}) == [EventKind.tool_call, EventKind.file_read]
    assert one("Write", {"file_path": "answer.txt", "content": "3"}) == [EventKind.tool_call, EventKind.file_write]
    assert one("WebFetch", {"url": "https://example.com"}) == [EventKind.tool_call, EventKind.network_attempt]
    assert one("Bash", {"command": "env"}) == [EventKind.tool_call, EventKind.shell_command]


def test_error_tool_result_and_image_content():
    obj = {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "is_error": True,
                                 "content": [{"type": "text", "text": "boom"}, {"type": "image", "source": {}}]}]},
    }
    (draft,) = parse_line(obj)
    assert draft.kind is EventKind.tool_output and draft.data["is_error"] is True
    assert draft.text == "boom\n[image]"


def test_garbage_lines_are_kept_not_fatal():
    events = parse_lines(["not json", "", '{"type": "mystery"}'])
    assert [(n, d.kind) for n, d in events] == [(1, EventKind.message), (3, EventKind.message)]
