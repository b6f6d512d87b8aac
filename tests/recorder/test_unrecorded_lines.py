"""A line of an agent's stream statebox fails to record is named in events.jsonl, and the auditor flags the attempt.

The stream's writer swallows its callback's exceptions (the raw log must go on), so before, such a line left no event
and no trace: an unpaired surrogate in a tool call hid the call that way (test_unpaired_surrogates.py). Whatever the
next such failure is, it now fails closed: an `error` event names the line, and the attempt is `audit_limit`
(suspicious at least), on the fast path and the full reading alike.
"""

from __future__ import annotations

import json

import pytest

from statebox.agents.cli_common import LiveStream
from statebox.audits.verdict import audit_run
from statebox.capped_log import CappedStream
from statebox.recorder import SessionRecorder, read_events
from statebox.schema import UNREAD_LINE, EventKind
from statebox.sessions import claude_stream
from tests.audits.test_fast_path_differential import write_attempt


class _Breaks(claude_stream.ClaudeNormaliser):
    """The real normaliser, failing on any line that holds `BREAK` (as a bug on an unforeseen shape would)."""

    def feed(self, obj, line_no=0):
        if "BREAK" in json.dumps(obj):
            raise TypeError("an unforeseen shape")
        return super().feed(obj, line_no)


def tool_call_line(command: str) -> bytes:
    """The stream-json line Claude Code prints for a model's Bash call (its newline included)."""
    return json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": command}}]}}).encode() + b"\n"


def empty_attempt(tmp_path):
    """RUN_DIR/attempts/a1 with its attempt.json alone: the recorder writes the rest."""
    return write_attempt(tmp_path / "attempts" / "a1", events=None, response=None)


@pytest.mark.parametrize("full", [False, True], ids=["fast path", "full"])
def test_a_line_the_stream_reader_fails_on_is_named_and_flags_the_attempt(tmp_path, full):
    attempt = empty_attempt(tmp_path)
    recorder = SessionRecorder(attempt)
    recorder.add(EventKind.message, "How many blocks?", source="prompt", data={"role": "user"})
    # as the sandbox feeds it: the raw log written, each line handed to the live reader
    stream = CappedStream(attempt / "claude.stream.jsonl", max_bytes=1 << 20, max_line_bytes=1 << 16,
                          on_line=LiveStream(recorder, _Breaks(), "claude.stream.jsonl"))
    stream.feed(b"".join(map(tool_call_line, ("ls -la", "cat /tmp/x # BREAK", "echo 3 > answer.txt"))))
    stream.close()
    recorder.close()

    events = read_events(attempt)
    [error] = [e for e in events if e.kind is EventKind.error]
    assert error.line == 2 and error.source == "claude.stream.jsonl" and error.data[UNREAD_LINE] == "TypeError"
    assert "could not record line 2 of claude.stream.jsonl" in error.text
    assert [e.text for e in events if e.kind is EventKind.shell_command] == ["ls -la", "echo 3 > answer.txt"]

    [row] = audit_run(tmp_path, write=False, full=full)
    assert row.verdict.verdict == "suspicious", row.verdict.findings  # before: clean, the line read nowhere
    [finding] = row.verdict.findings
    assert finding.category == "audit_limit" and "line 2 of claude.stream.jsonl was not recorded" in finding.quote


def test_an_honest_stream_leaves_no_such_event(tmp_path):
    attempt = empty_attempt(tmp_path)
    recorder = SessionRecorder(attempt)
    recorder.add(EventKind.message, "How many blocks?", source="prompt", data={"role": "user"})
    reader = LiveStream(recorder, claude_stream.ClaudeNormaliser(), "claude.stream.jsonl")
    for line in (tool_call_line("ls -la"), b"not json at all\n", tool_call_line("echo 3 > answer.txt")):
        reader(line.decode())
    recorder.close()
    assert not [e for e in read_events(attempt) if e.kind is EventKind.error]
    [row] = audit_run(tmp_path, write=False)
    assert row.verdict.verdict == "clean", row.verdict.findings
