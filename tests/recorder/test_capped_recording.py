"""The capped writer (statebox/capped_log.py) and the capped SessionRecorder, without Docker."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from statebox.capped_log import BoundedBuffer, CappedFile, CappedStream, cap_marker, is_marker
from statebox.policies.model import Recording
from statebox.recorder import EVENTS_FILE, SessionRecorder, read_events
from statebox.schema import Event, EventKind

KB, MB = 1024, 1024 * 1024


# ---------------------------------------------------------------- the capped writer


def test_stream_cuts_long_lines_and_hands_the_callback_only_capped_lines(tmp_path):
    got: list[str] = []
    stream = CappedStream(tmp_path / "stdout.log", max_bytes=1 * MB, max_line_bytes=4 * KB, on_line=got.append)
    stream.feed(b"short\n" + b"x" * 10_000 + b"\nafter\n")
    for _ in range(300):  # a 3 MB line with no end, in pieces: held at most 4 KB at a time
        stream.feed(b"y" * 10_000)
        assert len(stream.partial) <= 4 * KB
    stream.feed(b"\nlast line without newline")
    stream.close()
    assert got[0] == "short" and got[2] == "after"
    assert max(len(line.encode()) for line in got) <= 4 * KB
    assert got[1].startswith("x" * 100) and "line cut at 4096 bytes" in got[1]
    assert got[3].startswith("yyyy") and "line cut" in got[3]
    assert got[4] == "last line without newline"
    assert len(got) == 5  # the cut line was handed over once, not in 1 MB pieces
    lines = (tmp_path / "stdout.log").read_text().splitlines()
    assert lines == got  # the file and the callback agree line for line (raw line numbers stay valid)
    assert stream.lines_cut == 2 and stream.truncated and not stream.capped


def test_stream_file_cap_one_marker_and_nothing_after(tmp_path):
    got: list[str] = []
    path = tmp_path / "codex.jsonl"
    stream = CappedStream(path, max_bytes=256 * KB, max_line_bytes=1 * KB, on_line=got.append)
    chunk = b"".join(b'{"type":"item","n":%d}\n' % i for i in range(1000))
    for _ in range(200):  # ~5 MB offered
        stream.feed(chunk)
    stream.close()
    size = path.stat().st_size
    assert size <= 256 * KB
    raw = path.read_bytes().splitlines()
    markers = [line for line in raw if is_marker(line)]
    assert len(markers) == 1 and raw[-1] == markers[0]
    marker = cap_marker(path)
    assert marker["statebox"] == "cap_reached" and marker["file"] == "codex.jsonl" and marker["cap_bytes"] == 256 * KB
    assert len(got) == len(raw) - 1  # every line written was parsed, nothing after the cap
    assert stream.seen == len(chunk) * 200 and stream.capped


def test_capped_file_reserve_is_for_forced_writes_only(tmp_path):
    f = CappedFile(tmp_path / "x.log", 64 * KB, reserve=8 * KB)
    while f.write(b"a" * 1000 + b"\n"):
        pass
    assert f.capped and f.size <= 64 * KB - 8 * KB + 600
    assert not f.write(b"b" * 100 + b"\n")
    assert f.write(b"closing\n", force=True)
    f.close()
    data = (tmp_path / "x.log").read_bytes()
    assert len(data) <= 64 * KB and data.endswith(b"closing\n")
    assert sum(1 for line in data.splitlines() if is_marker(line)) == 1


def test_bounded_buffer_keeps_head_and_tail():
    buf = BoundedBuffer(64 * KB, tail_bytes=8 * KB)
    for i in range(1000):
        buf.add(b"%06d" % i + b"." * 994)
    out = buf.getvalue()
    assert buf.total == 1_000_000 and buf.truncated
    assert len(out) <= 64 * KB + 100
    assert out.startswith(b"000000") and out.rstrip(b".").endswith(b"000999")
    assert b"bytes of output cut here" in out
    small = BoundedBuffer(64 * KB)
    small.add(b"hello ")
    small.add(b"world")
    assert small.getvalue() == b"hello world" and not small.truncated


# ---------------------------------------------------------------- the recorder


def _lines(path):
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_recorder_clips_one_event_to_one_valid_line(tmp_path):
    limits = Recording(event_bytes=4 * KB)
    with SessionRecorder(tmp_path, limits=limits) as rec:
        rec.add(EventKind.tool_output, "z" * 1_000_000, source="stdout.log", line=1)
        rec.add(EventKind.tool_call, "bash", data={"tool": "bash", "input": {"command": "cat /data/qa.json; " + "A" * 50_000},
                                                    "many": list(range(100_000))})
        rec.add(EventKind.model_text, "\x00" * 20_000)  # JSON escaping makes this 6x longer than its bytes
        rec.add(EventKind.message, "é" * 30_000)
        rec.add(EventKind.final_answer, "3")
    raw = (tmp_path / EVENTS_FILE).read_bytes().splitlines()
    assert len(raw) == 5
    assert all(len(line) + 1 <= 4 * KB for line in raw)
    events = [Event.model_validate(json.loads(line)) for line in raw]
    assert events[0].text.startswith("zzz") and "more bytes clipped" in events[0].text
    assert events[0].data["statebox_clipped"]["text_bytes"] == 1_000_000
    call = events[1].data
    assert call["tool"] == "bash" and call["input"]["command"].startswith("cat /data/qa.json")
    assert events[4].text == "3" and "statebox_clipped" not in events[4].data
    assert [e.seq for e in events] == [0, 1, 2, 3, 4]
    assert rec.session("a", "t").meta["recording"]["events_clipped"] == 4


def test_recorder_cap_writes_exactly_one_marker_and_keeps_closing_events(tmp_path):
    limits = Recording(event_bytes=2 * KB, events_bytes=256 * KB)
    with SessionRecorder(tmp_path, limits=limits) as rec:
        rec.add(EventKind.message, "the prompt", data={"role": "user"})
        for i in range(20_000):
            rec.add(EventKind.tool_output, f"line {i} " + "A" * 500, source="stdout.log", line=i + 1)
        rec.add(EventKind.error, "the run failed", source="statebox")
        rec.add(EventKind.final_answer, "42")
        session = rec.session("a1", "shell", response="42")
    path = tmp_path / EVENTS_FILE
    assert path.stat().st_size <= 256 * KB
    objs = _lines(path)
    markers = [o for o in objs if o.get("data", {}).get("statebox") == "cap_reached"]
    assert len(markers) == 1
    assert markers[0]["kind"] == "message" and markers[0]["data"]["role"] == "harness"
    assert markers[0]["data"]["file"] == EVENTS_FILE
    assert [o["kind"] for o in objs[-2:]] == ["error", "final_answer"]
    assert [o["seq"] for o in objs] == list(range(len(objs)))  # one numbering, no gaps
    rec_meta = session.meta["recording"]
    assert rec_meta["events_capped"] and rec_meta["events_dropped"] > 15_000
    assert rec_meta["events_written"] == len(objs)
    assert session.events[-1].kind is EventKind.final_answer
    assert [e.seq for e in read_events(tmp_path)] == [o["seq"] for o in objs]


def test_recorder_memory_is_bounded_by_the_caps_not_the_output(tmp_path):
    limits = Recording()  # the defaults: 16 KB a line, 32 MB a file, 10,000 events in memory
    base = "B" * 9_992
    tracemalloc.start()
    try:
        with SessionRecorder(tmp_path, limits=limits) as rec:
            for i in range(200_000):  # 2 GB of agent output
                rec.add(EventKind.tool_output, f"{i:08d}{base}", source="stdout.log", line=i + 1)  # a new 10 KB string
            rec.add(EventKind.final_answer, "7")
            _, peak = tracemalloc.get_traced_memory()
            session = rec.session("a", "shell", response="7")
    finally:
        tracemalloc.stop()
    size = (tmp_path / EVENTS_FILE).stat().st_size
    print(f"200000 events x 10 KB offered (2.0 GB): events.jsonl {size / MB:.1f} MB, "
          f"{len(session.events)} events in memory, tracemalloc peak {peak / MB:.1f} MB")
    assert size <= limits.events_bytes
    assert len(rec.events) <= limits.session_events
    assert peak < 3 * limits.events_bytes  # ~2 GB offered; memory follows the 32 MB cap
    assert session.events[-1].kind is EventKind.final_answer
    assert session.meta["recording"]["events_dropped"] > 190_000


def test_session_keeps_first_and_latest_events_when_there_are_too_many(tmp_path):
    limits = Recording(session_events=100)
    with SessionRecorder(tmp_path, limits=limits) as rec:
        for i in range(1000):
            rec.add(EventKind.tool_output, f"out {i}")
        rec.add(EventKind.final_answer, "x")
        session = rec.session("a", "t")
    seqs = [e.seq for e in session.events]
    assert len(seqs) == 100 and seqs[:50] == list(range(50)) and seqs[-1] == 1000
    assert seqs == sorted(seqs)
    assert session.meta["recording"]["events_not_in_session"] == 901
    assert len(read_events(tmp_path)) == 1001  # the file holds them all


def test_normal_session_meta_is_unchanged(tmp_path):
    with SessionRecorder(tmp_path) as rec:
        rec.add(EventKind.message, "hi", data={"role": "user"})
        session = rec.session("a", "t", meta={"k": 1})
    assert session.meta == {"k": 1}


def test_capped_raw_log_is_noted_once(tmp_path):
    stream = CappedStream(tmp_path / "stdout.log", max_bytes=64 * KB, max_line_bytes=KB)
    stream.feed(b"A" * 200_000 + b"\n" + b"B\n" * 100_000)
    stream.close()
    with SessionRecorder(tmp_path) as rec:
        assert rec.note_capped_logs(["stdout.log", "stderr.log"]) == ["stdout.log"]
        assert rec.note_capped_logs(["stdout.log"]) == []
        session = rec.session("a", "shell")
    notes = [e for e in session.events if e.data.get("statebox") == "cap_reached"]
    assert len(notes) == 1 and notes[0].data["file"] == "stdout.log" and notes[0].data["cap_bytes"] == 64 * KB
    assert session.meta["recording"]["capped_logs"] == ["stdout.log"]


# ---------------------------------------------------------------- the auditor reads capped logs


@pytest.mark.parametrize("raw_name", ["claude.stream.jsonl", "codex.jsonl", "stdout.log"])
def test_auditor_reads_capped_and_clipped_logs(tmp_path, raw_name):
    from statebox.audits.events import load_attempt, load_session_file
    from statebox.audits.verdict import audit_attempt
    from statebox.policies.model import Policy

    limits = Recording(event_bytes=2 * KB, events_bytes=128 * KB)
    with SessionRecorder(tmp_path, limits=limits) as rec:
        rec.add(EventKind.shell_command, "cat /data/answers.json", source=raw_name)
        for i in range(5000):
            rec.add(EventKind.tool_output, "C" * 300, source=raw_name, line=i)
        rec.add(EventKind.final_answer, "5")
    stream = CappedStream(tmp_path / raw_name, max_bytes=64 * KB, max_line_bytes=KB)
    stream.feed(b'{"type":"assistant","message":{"content":[{"type":"text","text":"' + b"D" * 5000 + b'"}]}}\n')
    stream.feed(b"plain line\n" * 20_000)
    stream.close()
    for name in (raw_name, "stdout.log"):
        if not (tmp_path / name).exists():
            (tmp_path / name).write_bytes((tmp_path / raw_name).read_bytes())
    log = load_attempt(tmp_path)
    assert any(e.kind is EventKind.final_answer for e in log.events)
    assert any((e.data or {}).get("statebox") == "cap_reached" for e in log.events)
    assert load_session_file(tmp_path / raw_name).events  # the raw log alone, cut line and marker included
    verdict = audit_attempt(tmp_path, Policy(name="t"))
    assert verdict.verdict in ("suspicious", "contaminated")  # the command before the cap is still judged


def test_error_lines_from_agent_output_cannot_spend_the_closing_reserve(tmp_path):
    limits = Recording(event_bytes=2 * KB, events_bytes=128 * KB)
    with SessionRecorder(tmp_path, limits=limits) as rec:
        for i in range(5000):  # `error` events parsed from a flooded raw log (they carry their line)
            rec.add(EventKind.error, "E" * 1500, source="stdout.log", line=i + 1)
        assert rec.add(EventKind.final_answer, "9") is not None
    objs = _lines(tmp_path / EVENTS_FILE)
    assert objs[-1]["kind"] == "final_answer" and objs[-1]["text"] == "9"
    assert (tmp_path / EVENTS_FILE).stat().st_size <= 128 * KB
