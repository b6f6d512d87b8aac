"""`--write-scores` into an `.eval` copy, streamed a sample at a time (audits/inspect_scores.py).

The copy was built by reading the whole log with inspect_ai's reader, which holds every sample (a 126.5 MB log: ~400-500
MB). It is now read as the audit reads it and written by inspect_ai's own `.eval` recorder. What must not change is
checked against the whole-log write, inspect_ai's `write_eval_log`, as the oracle: the header (status, stats, results
with the task's scores and the audit's, reductions, error, invalidation), every sample with its scores, and the
summaries `inspect view` lists samples by.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from inspect_ai.log import (EvalConfig, EvalDataset, EvalError, EvalLog, EvalMetric, EvalResults, EvalSampleReductions,
                            EvalSampleScore, EvalScore, EvalSpec, EvalStats, read_eval_log, read_eval_log_sample_summaries,
                            write_eval_log)
from inspect_ai.scorer import Score

from statebox.audits import external, inspect_logs, inspect_scores
from statebox.policies import load_policy

from tests.audits.test_inspect_streaming import _sample, real_eval_log

CHEATS = {("2", 2), ("10", 1)}


def _scored_log(path: Path, ids: list[int | str], epochs: int) -> Path:
    """A finished log as a real evaluation leaves it: task scores per sample, results, reductions, an error note."""
    samples = []
    for epoch in range(1, epochs + 1):
        for i in ids:
            sample = _sample(i, epoch, cheat=(str(i), epoch) in CHEATS)
            sample.scores = {"match": Score(value="C" if epoch == 1 else "I", answer="4")}
            samples.append(sample)
    log = EvalLog(eval=EvalSpec(created="2026-12-01T00:00:00+00:00", task="t", dataset=EvalDataset(sample_ids=ids),
                                model="anthropic/claude", config=EvalConfig(epochs=epochs), metadata={"team": "vision"}),
                  samples=samples, status="error", error=EvalError(message="cancelled", traceback="", traceback_ansi=""),
                  stats=EvalStats(started_at="2026-12-01T00:00:00+00:00", completed_at="2026-12-01T01:00:00+00:00"),
                  results=EvalResults(total_samples=len(samples), completed_samples=len(samples), scores=[
                      EvalScore(name="match", scorer="match", metrics={"accuracy": EvalMetric(name="accuracy", value=0.5)})]))
    # set after: inspect_ai's validator wants the results as a dict to take reductions in the constructor
    log.reductions = [EvalSampleReductions(scorer="match", samples=[EvalSampleScore(value=1.0, sample_id=i) for i in ids])]
    write_eval_log(log, str(path))
    return path


def _whole_write(target: Path, rows: list[external.AuditedSession], out: Path) -> None:
    """The oracle: the log read whole, each sample scored as the copy scores it, written by `write_eval_log`."""
    by_name = {r.row.attempt: r.row for r in rows}
    log = inspect_logs.read_inspect_log(target)
    samples = list(log.samples or [])
    unique = len({str(s.id) for s in samples}) == len(samples)
    counts = Counter(inspect_scores._score(s, by_name.get(inspect_logs.inspect_sample_name(s, unique))) for s in samples)
    log.results = inspect_scores._results(log.results, counts, len(samples))
    write_eval_log(log, str(out), format="eval")


def _comparable(path: Path) -> tuple[dict, list[dict], list[dict]]:
    log = read_eval_log(str(path))
    header = log.model_dump(exclude={"samples", "location", "etag"})
    samples = [s.model_dump() for s in log.samples or []]
    summaries = [s.model_dump() for s in read_eval_log_sample_summaries(str(path))]
    return header, samples, summaries


def _copied_both_ways(src: Path, folder: Path, samples: int) -> EvalLog:
    """`src` copied with scores streamed and by the whole-log write: the two read back the same; the streamed copy."""
    rows = external.audit_path(src, load_policy("default"))
    streamed, whole = folder / "streamed.eval", folder / "whole.eval"
    assert inspect_scores.write_scores(src, rows, streamed) == samples
    _whole_write(src, rows, whole)
    assert _comparable(streamed) == _comparable(whole)
    return read_eval_log(str(streamed))


@pytest.mark.parametrize("ids, epochs", [([1, 2, 10], 2), (["a", "b"], 1)])
def test_the_streamed_copy_is_the_whole_log_write(tmp_path, ids, epochs, monkeypatch):
    monkeypatch.setattr(inspect_scores, "BATCH", 2)  # several batches put into the zip, and a last partial one
    src = _scored_log(tmp_path / "src.eval", ids, epochs)
    rows = external.audit_path(src, load_policy("default"))
    streamed, whole = tmp_path / "streamed.eval", tmp_path / "whole.eval"
    assert inspect_scores.write_scores(src, rows, streamed) == len(ids) * epochs
    _whole_write(src, rows, whole)
    got, want = _comparable(streamed), _comparable(whole)
    assert got[0] == want[0]
    assert got[1] == want[1]
    assert got[2] == want[2]
    log = read_eval_log(str(streamed))
    verdicts = {(str(s.id), s.epoch): s.scores["statebox_audit"].value for s in log.samples}
    assert {k for k, v in verdicts.items() if v != "clean"} == (CHEATS & set(verdicts))
    assert all(s.scores["match"].value in ("C", "I") for s in log.samples)  # the task's own score beside it
    assert [s.name for s in log.results.scores] == ["match", "statebox_audit"]
    assert log.status == "error" and log.error.message == "cancelled" and log.reductions[0].scorer == "match"
    assert log.eval.metadata == {"team": "vision"}


def test_an_eval_copy_never_reads_the_whole_log(tmp_path, monkeypatch):
    """The whole read is what held every sample; an `.eval` source with inspect_ai's entry names never takes it."""
    src = _scored_log(tmp_path / "src.eval", [1, 2, 3], 1)
    rows = external.audit_path(src, load_policy("default"))

    def whole(*_args, **_kwargs):
        raise AssertionError("the whole log was read")

    monkeypatch.setattr(inspect_logs, "_read_whole", whole)
    out = tmp_path / "scored.eval"
    assert inspect_scores.write_scores(src, rows, out) == 3
    assert len(read_eval_log(str(out)).samples) == 3


def test_a_json_log_gives_an_eval_copy_and_an_eval_log_a_json_one(tmp_path):
    src = _scored_log(tmp_path / "src.eval", [1, 2], 2)
    as_json = tmp_path / "src.json"
    write_eval_log(read_eval_log(str(src)), str(as_json), format="json")
    for source, out in ((as_json, tmp_path / "a.eval"), (src, tmp_path / "b.json")):
        rows = external.audit_path(source, load_policy("default"))
        assert inspect_scores.write_scores(source, rows, out) == 4
        log = read_eval_log(str(out))
        assert sorted((str(s.id), s.epoch) for s in log.samples if s.scores["statebox_audit"].value != "clean") == [("2", 2)]


def test_a_copy_that_fails_midway_leaves_no_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    """Bad input loses nothing already written: a failure on the third sample leaves the earlier copy as it was and
    no half-written file beside it."""
    src = _scored_log(tmp_path / "src.eval", [1, 2, 3, 4], 1)
    rows = external.audit_path(src, load_policy("default"))
    out = tmp_path / "scored.eval"
    inspect_scores.write_scores(src, rows, out)
    before = out.read_bytes()
    real, seen = inspect_scores._score, []

    def failing(sample, row):
        seen.append(sample.id)
        if len(seen) == 3:
            raise RuntimeError("disk full")
        return real(sample, row)

    monkeypatch.setattr(inspect_scores, "_score", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        inspect_scores.write_scores(src, rows, out)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scored.eval", "src.eval"]


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_the_copy_reports_its_progress(tmp_path, suffix, monkeypatch):
    """A 3,000-sample copy takes ~20 s after the audit: the command shows it as a task of its own."""
    from rich.console import Console

    from statebox.commands.audit import _copy_shown
    from statebox.progress import ProgressDisplay

    monkeypatch.setattr(inspect_scores, "BATCH", 2)
    src = _scored_log(tmp_path / "src.eval", [1, 2, 3], 1)
    rows = external.audit_path(src, load_policy("default"))
    heard: list[tuple[int, int]] = []
    inspect_scores.write_scores(src, rows, tmp_path / f"out{suffix}", lambda done, total: heard.append((done, total)))
    assert heard[0] == (0, 3) and heard[-1] == (3, 3)
    assert [d for d, _ in heard] == sorted(d for d, _ in heard)
    display = ProgressDisplay("audit", Console(file=open(tmp_path / "err.txt", "w")), plain=True)
    display.add("files", total=1, done=1)
    copied = _copy_shown(display)
    copied(0, 3000)
    copied(1200, 3000)
    assert "samples copied 1200/3000" in display.line() and "1201/3001 done" in display.line()


def test_an_unfinished_log_copies_as_the_whole_write_does(tmp_path):
    """A log whose eval was stopped has no header.json (inspect_ai reads its journal's start): still `started`,
    without results, and the copy is the whole write's."""
    import zipfile

    full = _scored_log(tmp_path / "full.eval", [1, 2, 3], 1)
    src = tmp_path / "src.eval"
    with zipfile.ZipFile(full) as archive, zipfile.ZipFile(src, "w") as out:
        for name in archive.namelist():
            if name not in ("header.json", "summaries.json", "reductions.json"):
                out.writestr(name, archive.read(name))
    log = _copied_both_ways(src, tmp_path, 3)
    assert log.status == "started" and [s.name for s in log.results.scores] == ["statebox_audit"]


def test_a_real_eval_s_log_copies_as_the_whole_write_does(tmp_path):
    """A log inspect_ai's own eval wrote (events, a message pool, attachments, timelines, model usage): the streamed copy
    reads back as the whole-log write, every sample contaminated (each read the answer key)."""
    src = real_eval_log(tmp_path / "logs")
    log = _copied_both_ways(src, tmp_path, 6)
    assert {s.scores["statebox_audit"].value for s in log.samples} == {"contaminated"}
    assert all(s.events for s in log.samples)
