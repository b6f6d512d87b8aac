"""Harbor trajectories and Inspect logs of a shape their writers never give, read as an attacker hands them over.

A type-mutation fuzzer over ATIF trajectories and Inspect logs (~141,000 cases) found three tracebacks and two
ways a cheating session left the audit's rows without a word. Each is a test here; each failed on the old code:

- a sample's `events` a number (Inspect admission iterated it), an export's recorded `findings` a number
  (Harbor's `extra.statebox`, Inspect's sample metadata): a traceback;
- a `trajectory.json` whose `"schema_version": "ATIF-..."` stands after the first 64 KiB, or is spelled with an
  escape, was taken for none of ours: the trial's row was missing from its job's audit, exit 0;
- an Inspect `.json` whose `eval` comes after its `samples` (past 64 KiB): in a folder skipped, given alone read
  as a plain session file and judged clean;
- a `trajectory.json` that is no ATIF trajectory at all is still Harbor's name for a trial's session: it is now
  named on stderr as not read, not missing without a word.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from statebox.audits import external, log_formats
from statebox.errors import UserError
from tests.audits.test_external_formats import harbor_job, inspect_log

HERE = Path(__file__).parent
PAD = "x" * 70_000  # past log_formats.HEAD_BYTES


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "statebox.cli", "audit", *args, "--json", "--no-write"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(HERE.parents[1])})


def _verdicts(path: Path) -> dict[str, str]:
    return {r.row.attempt: r.row.verdict.verdict for r in external.audit_path(path, None, jobs=1)}


def _trajectory(job: Path, trial: str = "a") -> Path:
    return job / f"{trial}__trial" / "agent" / "trajectory.json"


def _statebox_export(doc: dict) -> dict:
    doc["eval"]["task"] = "statebox"
    doc["eval"]["packages"] = {"statebox": "1.0"}
    return doc


def test_an_inspect_sample_whose_events_are_a_number_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    log = inspect_log(tmp_path / "log.json", {"a": True})
    doc = json.loads(log.read_text())
    doc["samples"][0]["events"] = 5
    log.write_text(json.dumps(doc))
    with pytest.raises(UserError, match="not a readable Inspect log"):
        external.audit_path(log, None, jobs=1)


@pytest.mark.parametrize("findings", [5, True, 1.5])
def test_an_exports_recorded_findings_of_another_type_are_none(tmp_path: Path, findings: object) -> None:
    job = harbor_job(tmp_path / "job", {"a": True})
    doc = json.loads(_trajectory(job).read_text())
    doc["extra"]["statebox"] = {"findings": findings, "attempt_id": "x"}
    _trajectory(job).write_text(json.dumps(doc))
    assert _verdicts(job) == {"x": "contaminated"}  # judged on its actions, as without the field

    log = inspect_log(tmp_path / "log.json", {"a": True})
    doc = _statebox_export(json.loads(log.read_text()))
    doc["samples"][0]["metadata"]["findings"] = findings
    log.write_text(json.dumps(doc))
    assert list(_verdicts(log).values()) == ["contaminated"]


@pytest.mark.parametrize("spelling", ["late", "escaped"])
def test_an_atif_trajectory_the_head_does_not_show_is_still_read(tmp_path: Path, spelling: str) -> None:
    job = harbor_job(tmp_path / "job", {"a": True, "b": False})
    path = _trajectory(job)
    if spelling == "late":  # a writer that puts a long `extra` first: still ATIF to its reader
        doc = json.loads(path.read_text())
        path.write_text(json.dumps({"extra": {**doc["extra"], "pad": PAD}, **{k: v for k, v in doc.items() if k != "extra"}}))
    else:  # the same JSON value, one letter escaped
        path.write_text(path.read_text().replace('"ATIF', '"\\u0041TIF'))
    assert log_formats.file_format(path) == "harbor"
    assert _verdicts(job) == {"sess-a": "contaminated", "sess-b": "clean"}


def test_an_inspect_log_whose_eval_comes_late_is_read_alone_and_in_a_folder(tmp_path: Path) -> None:
    log = inspect_log(tmp_path / "logs" / "x.json", {"a": True})
    doc = json.loads(log.read_text())
    log.write_text(json.dumps({"samples": doc["samples"], "pad": PAD, **{k: v for k, v in doc.items() if k != "samples"}}))
    inspect_log(tmp_path / "logs" / "y.json", {"b": False})
    assert log_formats.detect(log) == "inspect"
    assert list(_verdicts(log).values()) == ["contaminated"]
    assert sorted(_verdicts(tmp_path / "logs").values()) == ["clean", "contaminated"]


def test_a_trajectory_json_that_is_no_atif_is_named_as_not_read(tmp_path: Path) -> None:
    job = harbor_job(tmp_path / "job", {"a": True, "b": False})
    doc = json.loads(_trajectory(job).read_text())
    del doc["schema_version"]
    _trajectory(job).write_text(json.dumps(doc))
    passed_over: list[str] = []
    assert [f.path for f in log_formats.discover(job, None, passed_over)] == [_trajectory(job, "b")]
    assert passed_over == [f"{_trajectory(job)}: named like a Harbor trajectory, but no ATIF trajectory (no "
                           f"\"schema_version\": \"ATIF-...\" and steps, or over 268435456 bytes)"]
    done = _cli(str(job))
    assert done.returncode == 0
    assert f"note: not read: {_trajectory(job)}: named like a Harbor trajectory" in done.stderr
    assert [row["verdict"] for row in json.loads(done.stdout)["attempts"]] == ["clean"]


def test_a_small_json_file_of_no_format_is_not_read_whole_to_be_sniffed(tmp_path: Path, monkeypatch) -> None:
    """The fallback reads a document whole only where its head could not answer: a head that is the whole file
    and holds no escape is a final no (a folder holds many small JSON files: results, configs)."""
    (tmp_path / "config.json").write_text(json.dumps({"n": 1}))
    monkeypatch.setattr(log_formats, "read_within", lambda *a, **k: pytest.fail("read whole"))
    assert log_formats.file_format(tmp_path / "config.json") is None


def test_a_trajectorys_fact_holding_a_lone_surrogate_is_one_line_naming_the_file(tmp_path: Path) -> None:
    job = harbor_job(tmp_path / "job", {"a": True})
    doc = json.loads(_trajectory(job).read_text())
    doc["extra"]["original_name"] = "clip\ud800.mp4"
    _trajectory(job).write_text(json.dumps(doc))
    done = _cli(str(job))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"statebox: error: {_trajectory(job)}: session 'sess-a': its original_name is not text (a lone surrogate escape)"]
