"""An unpaired UTF-16 surrogate, valid in JSON (`"\\ud800"`), in what an agent's CLI prints and answers.

Claude Code (JavaScript) writes one as an escape where the model put it in a tool call. UTF-8 has no form for it.
Before: the recorder could not write such an event and the live stream's reader dropped it without a word (the call
went missing from events.jsonl), and a final answer holding one could not be written to response.txt. Now each is written with U+FFFD and says how many it lost.
"""

from __future__ import annotations

import json

from statebox.agents.cli_common import LiveStream
from statebox.attempt_folder import AttemptFolder
from statebox.audits.verdict import audit_run
from statebox.json_text import utf8_json, well_formed
from statebox.recorder import UNPAIRED_SURROGATES, SessionRecorder, read_events
from statebox.schema import EventKind, Session
from statebox.sessions import claude_stream

from .test_unrecorded_lines import empty_attempt, tool_call_line

LONE = "\ud800"


def test_well_formed_replaces_only_unpaired_surrogates_and_counts_them():
    assert well_formed(f"a{LONE}b") == ("a\ufffdb", 1)
    assert well_formed("\ud83d\ude00") == ("\U0001F600", 0)  # a pair held as two code points is its character
    assert well_formed("plain é \ufffd") == ("plain é \ufffd", 0)  # a U+FFFD already there is not counted
    value = {"k" + LONE: [LONE, {"x": "\udc00y"}], "n": 3, "ok": "é"}
    assert well_formed(value) == ({"k\ufffd": ["\ufffd", {"x": "\ufffdy"}], "n": 3, "ok": "é"}, 3)
    same = {"a": ["b", 1]}
    assert well_formed(same)[0] is same  # nothing to replace: nothing copied


def test_utf8_json_escapes_only_where_it_must():
    assert utf8_json({"a": "é"}) == '{"a": "é"}'.encode()
    assert utf8_json({"a": f"é{LONE}"}) == b'{"a": "\\u00e9\\ud800"}'
    assert json.loads(utf8_json({"a": f"é{LONE}"})) == {"a": f"é{LONE}"}  # the same value, as the sender wrote it


def test_the_live_stream_records_a_tool_call_holding_an_unpaired_surrogate(tmp_path):
    """The stream-json line Claude Code prints for a model's tool call whose command holds one: before, the event
    was dropped, so the auditor never read `cat /data/annotations/answers.csv`."""
    line = tool_call_line(f"cat /data/annotations/answers.csv # {LONE}").decode()
    assert "\\ud800" in line
    recorder = SessionRecorder(tmp_path)
    stream = LiveStream(recorder, claude_stream.ClaudeNormaliser(), "claude.stream.jsonl")
    stream(line)
    recorder.close()
    events = read_events(tmp_path)
    calls = [e for e in events if e.kind in (EventKind.tool_call, EventKind.shell_command)]
    assert calls and all("cat /data/annotations/answers.csv # \ufffd" in e.text for e in calls)
    assert all(e.data[UNPAIRED_SURROGATES] >= 1 for e in calls)
    (tmp_path / "events.jsonl").read_bytes().decode("utf-8")  # UTF-8 every reader takes


def test_an_answer_holding_an_unpaired_surrogate_is_written_and_scored_as_text(tmp_path):
    session = Session(attempt_id="a1", agent="claude-code", response=f"ANSWER: 3 {LONE}", reason=f"why {LONE}",
                      meta={"final_message": f"3 {LONE}"})
    assert session.response == "ANSWER: 3 \ufffd" and session.reason == "why \ufffd"
    folder = AttemptFolder(tmp_path, "a1")
    folder.path.mkdir(parents=True)
    folder.write_outcome(session)  # before: UnicodeEncodeError, and the attempt failed
    assert (folder.path / "response.txt").read_text() == "ANSWER: 3 \ufffd"
    written = json.loads((folder.path / "session.json").read_text())
    assert written["meta"]["final_message"] == "3 \ufffd"


def test_the_auditor_reads_the_recorded_call(tmp_path):
    """The whole way: recorded from the stream, audited from the folder, caught."""
    attempt = empty_attempt(tmp_path)
    recorder = SessionRecorder(attempt)
    recorder.add(EventKind.message, "How many blocks?", source="prompt", data={"role": "user"})
    stream = LiveStream(recorder, claude_stream.ClaudeNormaliser(), "claude.stream.jsonl")
    stream(tool_call_line(f"cat /data/annotations/answers.csv # {LONE}").decode())
    recorder.close()
    [row] = audit_run(tmp_path, write=True)
    assert row.verdict.verdict == "contaminated", row.verdict.findings
    assert any(f.category == "qa_metadata" and "/data/annotations/answers.csv" in f.quote for f in row.verdict.findings)
    json.loads((attempt / "verdict.json").read_text())
