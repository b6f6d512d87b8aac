"""A session past the auditor's limits is read up to them and flagged, never passed and never the end of the audit.

The attack: the agent decides how long its log is. Before these limits an `events.jsonl` of 60,000 code walks
(27.6 MB, under statebox's own 32 MB cap) took 1.0 GB and 24 s to audit, and 2,000 listings of 400 paths
(9.9 MB) 749 MB: each place an output shows becomes an event of its own. A handed-over file may be 2 GiB.
Stopping the audit at a limit would let one flooded attempt end the audit of its whole run; reading on, exhaust
the machine; passing the unread rest, hide the cheat past the cut (audits/session_limits.py).

Most tests lower the limits (the same code at a size a test reads in milliseconds); one floods at the real ones.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statebox.audits import session_limits
from statebox.audits.events import derived_access, line_spans, load_attempt, load_session_file, spans_within
from statebox.audits import log_files
from statebox.audits.external import audit_path
from statebox.audits.session_limits import first_lines
from statebox.audits.verdict import audit_attempt, audit_run
from statebox.cli import app
from statebox.errors import UserError

CLI_FILES = Path(__file__).parent / "cli_session_files"
CORPUS = Path(__file__).parent / "corpus"


def _attempt(folder: Path, actions: list[tuple[str, str]], outputs: list[str] | None = None) -> Path:
    """An attempt folder whose events.jsonl holds the prompt, `actions` (kind, command) each with an output, and
    the answer; `outputs[i]` (when given) is the i-th action's output."""
    folder.mkdir(parents=True)
    (folder / "attempt.json").write_text(json.dumps({
        "attempt_id": folder.name, "attempt": {"agent": "claude-code"}, "workspace_video": "v.mp4",
        "question": "How many blocks are on the table?",
        "secret": {"original_name": "blocks_1234_src.mp4", "item_id": "q77x"}}))
    events = [{"seq": 0, "kind": "message", "text": "Question: how many blocks?", "data": {"role": "user"}}]
    for i, (kind, command) in enumerate(actions):
        events.append({"seq": len(events), "kind": kind, "text": command, "data": {"tool": "Bash"}})
        output = outputs[i] if outputs is not None else "ok"
        events.append({"seq": len(events), "kind": "tool_output", "text": output, "data": {}})
    events.append({"seq": len(events), "kind": "final_answer", "text": "4"})
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return folder


def _honest(n: int) -> list[tuple[str, str]]:
    return [("shell_command", f"python3 /workspace/count.py --frame {i}") for i in range(n)]


CHEAT = ("shell_command", "cat /data/annotations/answers.json")


def _limit_findings(verdict) -> list:  # type: ignore[no-untyped-def]
    return [f for f in verdict.findings if f.category == "audit_limit"]


@pytest.mark.parametrize("data, limit, cut, lines", [
    (b"", 2, b"", None),
    (b"a\nb\n", 2, b"a\nb\n", None),
    (b"a\nb", 2, b"a\nb", None),
    (b"a\nb\nc", 2, b"a\nb\n", 3),
    (b"a\nb\nc\n", 2, b"a\nb\n", 3),
    (b"\n\n\n", 1, b"\n", 3),
])
def test_first_lines_cuts_after_the_limit_and_counts_what_it_left(data: bytes, limit: int, cut: bytes,
                                                                  lines: int | None) -> None:
    assert first_lines(data, limit) == (cut, lines)


@pytest.mark.parametrize("fast", [True, False])
def test_a_log_past_the_line_limit_is_flagged_on_both_paths_and_read_up_to_it(tmp_path: Path, fast: bool,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_limits, "SESSION_LINE_LIMIT", 40)
    under = _attempt(tmp_path / "under", _honest(19))  # 1 + 2*19 + 1 = 40 lines: at the limit
    over = _attempt(tmp_path / "over", _honest(20))
    assert audit_attempt(under, fast=fast, write=False).verdict == "clean"
    verdict = audit_attempt(over, fast=fast, write=False)
    assert verdict.verdict == "suspicious" and verdict.action == "flag"
    [note] = _limit_findings(verdict)
    assert note.quote == "events.jsonl: 42 lines, the audit read the first 40" and note.severity == "medium"
    log = load_attempt(over)
    assert max(e.line or 0 for e in log.events) <= 40


def test_a_cheat_past_the_cut_is_never_passed_as_clean_and_one_before_it_is_still_judged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_limits, "SESSION_LINE_LIMIT", 40)
    hidden = _attempt(tmp_path / "hidden", _honest(30) + [CHEAT])
    assert audit_attempt(hidden, write=False).verdict == "suspicious"
    before = _attempt(tmp_path / "before", [CHEAT] + _honest(30))
    verdict = audit_attempt(before, write=False)
    assert verdict.verdict == "contaminated"
    assert {f.category for f in verdict.findings} >= {"qa_metadata", "audit_limit"}


def test_fast_and_full_paths_cut_a_flooded_log_at_the_same_line(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_limits, "SESSION_LINE_LIMIT", 40)
    for name, actions in (("a", _honest(10) + [CHEAT] + _honest(30)), ("b", _honest(20) + [CHEAT]),
                          ("c", _honest(19) + [CHEAT])):
        folder = _attempt(tmp_path / name, actions)
        fast, full = audit_attempt(folder, write=False), audit_attempt(folder, fast=False, write=False)
        assert fast == full
    # the cheat on line 40 (the last one read) counts, on line 42 it does not
    assert audit_attempt(tmp_path / "c", write=False).verdict == "contaminated"
    assert audit_attempt(tmp_path / "b", write=False).verdict == "suspicious"


def test_places_past_the_derived_limit_are_not_derived_and_the_session_is_flagged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_limits, "DERIVED_EVENT_LIMIT", 100)
    listing = "\n".join(f"/workspace/frames/f{j}.png" for j in range(30))
    folder = _attempt(tmp_path / "a", [("shell_command", "ls /workspace/frames")] * 5, [listing] * 5)
    log = load_attempt(folder)
    derived = [e for e in log.events if derived_access(e) is not None]
    assert 0 < len(derived) <= 100
    assert [note for note in log.limits if "places" in note]
    assert audit_attempt(folder, write=False).verdict == "suspicious"
    monkeypatch.setattr(session_limits, "DERIVED_EVENT_LIMIT", 1000)
    assert audit_attempt(folder, write=False).verdict == "clean"  # the same session within the limit


def test_witness_events_past_the_event_limit_are_dropped_and_flagged(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_limits, "SESSION_EVENT_LIMIT", 30)
    folder = _attempt(tmp_path / "a", _honest(10))
    (folder / "stdout.log").write_text("".join(f"frame {i}: 4 blocks\n" for i in range(40)))
    log = load_attempt(folder, None)
    assert len([e for e in log.events if derived_access(e) is None]) == 30
    assert log.limits == [session_limits.past_events(22 + 40, 30)]  # events.jsonl's 22, a line of stdout.log each
    assert audit_attempt(folder, fast=False, write=False).verdict == "suspicious"


def test_one_flooded_attempt_is_flagged_and_the_rest_of_the_run_is_audited(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_limits, "SESSION_LINE_LIMIT", 40)
    run = tmp_path / "run"
    _attempt(run / "attempts" / "a0", _honest(30))
    _attempt(run / "attempts" / "a1", _honest(3))
    _attempt(run / "attempts" / "a2", [CHEAT])
    result = CliRunner().invoke(app, ["audit", str(run), "--json", "--no-write"])
    assert result.exit_code == 0, result.output
    rows = {a["attempt"]: a["verdict"] for a in json.loads(result.stdout)["attempts"]}
    assert rows == {"a0": "suspicious", "a1": "clean", "a2": "contaminated"}
    assert [r.verdict.verdict for r in audit_run(run, write=False, jobs=2)] == ["suspicious", "clean", "contaminated"]


@pytest.mark.parametrize("name", ["claude-code-honest", "codex-honest"])
def test_a_cli_session_file_past_the_line_limit_is_flagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           name: str) -> None:
    [source] = sorted((CLI_FILES / name).rglob("*.jsonl"))
    lines = source.read_bytes().count(b"\n")
    copy = tmp_path / source.relative_to(CLI_FILES / name)
    copy.parent.mkdir(parents=True)
    shutil.copy(source, copy)
    [row] = audit_path(tmp_path, None)
    assert row.row.verdict.verdict == "clean"
    monkeypatch.setattr(session_limits, "SESSION_LINE_LIMIT", lines - 1)
    [row] = audit_path(tmp_path, None)
    assert row.row.verdict.verdict == "suspicious"
    assert [f.quote for f in _limit_findings(row.row.verdict)] == [
        f"{copy.name}: {lines:,} lines, the audit read the first {lines - 1:,}"]


def test_a_lone_session_file_past_the_line_limit_is_flagged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_limits, "SESSION_LINE_LIMIT", 40)
    folder = _attempt(tmp_path / "a", _honest(30))
    log = load_session_file(folder / "events.jsonl")
    assert log.limits == ["events.jsonl: 62 lines, the audit read the first 40"]


def test_a_flood_at_the_real_limits_is_read_up_to_them(tmp_path: Path) -> None:
    """60,000 tool outputs each showing two places: over the line limit and, without it, the derived one."""
    lines = session_limits.SESSION_LINE_LIMIT
    outputs = [f"/workspace/a{i}.txt\n/workspace/b{i}.txt" for i in range(lines)]
    folder = _attempt(tmp_path / "a", [("shell_command", "ls /workspace")] * lines, outputs)
    log = load_attempt(folder)
    read = [e for e in log.events if derived_access(e) is None]
    assert len(read) <= session_limits.SESSION_EVENT_LIMIT and max(e.line or 0 for e in read) <= lines
    assert len(log.events) - len(read) <= session_limits.DERIVED_EVENT_LIMIT
    assert log.limits[0] == f"events.jsonl: {2 * lines + 2:,} lines, the audit read the first {lines:,}"
    assert audit_attempt(folder, write=False).verdict == "suspicious"


def _trajectory(path: Path, steps: int, output: str = "/workspace/a") -> Path:
    """A Harbor trial's ATIF trajectory: the question, then `steps` agent steps each running a command."""
    path.parent.mkdir(parents=True)
    doc = {"schema_version": "ATIF-v1.4", "session_id": path.parent.parent.name, "agent": {"name": "terminus", "version": "1"},
           "steps": [{"step_id": 1, "source": "user", "message": "How many blocks are on the table?"}] + [
               {"step_id": i + 2, "source": "agent", "message": "",
                "tool_calls": [{"tool_call_id": f"c{i}", "function_name": "bash_command",
                                "arguments": {"keystrokes": f"python3 /workspace/count.py --frame {i}\n"}}],
                "observation": {"results": [{"source_call_id": f"c{i}", "content": output}]}} for i in range(steps)]}
    path.write_text(json.dumps(doc))
    return path


def test_a_trajectory_past_the_step_limit_is_flagged_and_the_jobs_other_trials_audited(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = tmp_path / "job"
    _trajectory(job / "long__trial" / "agent" / "trajectory.json", 30)
    _trajectory(job / "short__trial" / "agent" / "trajectory.json", 3)
    assert {r.row.verdict.verdict for r in audit_path(job, None)} == {"clean"}
    monkeypatch.setattr(session_limits, "SESSION_LINE_LIMIT", 20)
    rows = {r.row.attempt: r.row.verdict for r in audit_path(job, None)}
    assert rows["short__trial"].verdict == "clean"
    assert rows["long__trial"].verdict == "suspicious"
    assert "trajectory.json: 31 steps, the audit read the first 20" in [f.quote for f in _limit_findings(rows["long__trial"])]


def test_a_trajectory_over_the_document_limit_is_flagged_unread_and_the_jobs_other_trials_audited(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = tmp_path / "job"
    big = _trajectory(job / "big__trial" / "agent" / "trajectory.json", 3, output="4 blocks " * 2000)
    _trajectory(job / "small__trial" / "agent" / "trajectory.json", 3)
    monkeypatch.setattr(session_limits, "DOCUMENT_BYTES_LIMIT", 10_000)
    result = CliRunner().invoke(app, ["audit", str(job), "--json"])
    assert result.exit_code == 0, result.output
    rows = {a["attempt"]: a for a in json.loads(result.stdout)["attempts"]}
    assert rows["small__trial"]["verdict"] == "clean"
    assert rows["big__trial"]["verdict"] == "suspicious"
    [finding] = rows["big__trial"]["findings"]
    assert finding["category"] == "audit_limit" and f"({big.stat().st_size:,} or more)" in finding["quote"]


@pytest.mark.parametrize("data", [b"", b"\n", b"a", b"a\n", b"a\nb", b"a\nb\n", b"\n\n\n", b"a\n\nb\n\n", b"x" * 5 + b"\ny"])
def test_spans_within_gives_line_spans_up_to_the_limit(data: bytes) -> None:
    def split_spans(data: bytes) -> list[tuple[int, int]]:  # `data.split(b"\n")` as offsets: the reference
        out, at = [], 0
        for part in data.split(b"\n"):
            out.append((at, at + len(part)))
            at += len(part) + 1
        return out
    assert line_spans(data) == split_spans(data)
    lines = len(split_spans(data))
    for limit in range(1, lines + 2):
        cut, spans, total = spans_within(data, limit)
        if total is None:
            assert (cut, spans) == (data, split_spans(data))
        else:
            assert spans[:limit] == split_spans(data)[:limit] and cut == data[:spans[limit - 1][1] + 1]
            assert spans == split_spans(cut) and total == first_lines(data, limit)[1]


@pytest.mark.parametrize("fast", [True, False])
def test_a_gateway_log_past_the_line_limit_is_cut_alike_on_both_paths_and_flagged(
        tmp_path: Path, fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "a"
    shutil.copytree(CORPUS / "honest_opencv__gateway", folder)
    gateway = (folder / "gateway.jsonl").read_bytes()
    lines = gateway.count(b"\n")
    assert audit_attempt(folder, fast=fast, write=False).verdict == "clean"
    monkeypatch.setattr(session_limits, "SESSION_LINE_LIMIT", lines - 2)
    verdict = audit_attempt(folder, fast=fast, write=False)
    assert verdict.verdict == "suspicious"
    assert [f.quote for f in _limit_findings(verdict)] == [f"gateway.jsonl: {lines:,} lines, the audit read the first {lines - 2:,}"]
    assert max(e.line or 0 for e in load_attempt(folder, None).events if e.source == "gateway.jsonl") <= lines - 2


def test_a_trajectory_over_the_two_gib_log_cap_is_flagged_too_not_an_error(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the document limit's bytes are read, so a file past every other cap is judged as one past that limit."""
    job = tmp_path / "job"
    huge = _trajectory(job / "huge__trial" / "agent" / "trajectory.json", 3)
    with huge.open("r+b") as fh:
        fh.truncate(3 << 30)  # sparse: 3 GiB on paper, a few KB on disk
    _trajectory(job / "small__trial" / "agent" / "trajectory.json", 3)
    monkeypatch.setattr(session_limits, "DOCUMENT_BYTES_LIMIT", 10_000)
    rows = {r.row.attempt: r.row.verdict for r in audit_path(job, None)}
    assert rows["small__trial"].verdict == "clean"
    assert rows["huge__trial"].verdict == "suspicious"
    assert f"({3 << 30:,} or more)" in _limit_findings(rows["huge__trial"])[0].quote


def test_a_cli_session_file_over_the_log_cap_is_flagged_unread_and_the_folders_others_audited(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: discovery read a file's head through the 2 GiB cap, took a bigger file for none of ours and left it
    out of the folder's audit without a word."""
    for name in ("claude-code-honest", "codex-honest"):
        [source] = sorted((CLI_FILES / name).rglob("*.jsonl"))
        copy = tmp_path / name / source.name
        copy.parent.mkdir(parents=True)
        shutil.copy(source, copy)
    [big] = sorted((tmp_path / "claude-code-honest").glob("*.jsonl"))
    with big.open("r+b") as fh:
        fh.truncate(3 << 30)  # sparse: the session's own lines, then zeros to 3 GiB
    monkeypatch.setattr(log_files, "MAX_LOG_BYTES", 1 << 20)
    rows = {r.fmt: r.row.verdict for r in audit_path(tmp_path, None)}
    assert rows["codex"].verdict == "clean"
    assert rows["claude"].verdict == "suspicious"
    assert [f.quote for f in _limit_findings(rows["claude"])] == [
        session_limits.past_bytes(big.name, 3 << 30, 1 << 20)]


def test_what_could_hold_a_session_and_was_not_read_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log behind a link (never followed) or in a folder that cannot be listed was left out of the rows without a
    word: each is now a note on stderr (never in --json's output), or part of the error line when nothing was read."""
    [source] = sorted((CLI_FILES / "claude-code-honest").rglob("*.jsonl"))
    root = tmp_path / "logs"
    (root / "real").mkdir(parents=True)
    shutil.copy(source, root / "real" / source.name)
    (root / "linked.jsonl").symlink_to(source)
    (root / "locked").mkdir()
    listing = os.scandir

    def refusing(path=".") -> object:  # type: ignore[no-untyped-def]
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return listing(path)
    monkeypatch.setattr(os, "scandir", refusing)
    result = CliRunner().invoke(app, ["audit", str(root), "--json"])
    assert result.exit_code == 0, result.output
    assert [a["verdict"] for a in json.loads(result.stdout)["attempts"]] == ["clean"]
    assert f"note: not read: {root / 'linked.jsonl'}: a symbolic link (never followed)" in result.stderr
    assert f"note: not read: {root / 'locked'}: a folder that could not be listed (Permission denied)" in result.stderr
    (root / "real" / source.name).unlink()
    alone = CliRunner().invoke(app, ["audit", str(root), "--json"])  # the command's own error (exit 2 from `main`)
    assert isinstance(alone.exception, UserError)
    assert "found (not read: " in str(alone.exception)
    assert str(alone.exception).endswith("a symbolic link (never followed); and 1 more)")
