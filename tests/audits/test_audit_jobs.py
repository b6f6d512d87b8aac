"""`statebox audit RUN_DIR --jobs N`: attempt folders audited in N processes give the very rows of one process.

Why a test: the worker pool is only worth having if it changes nothing but the wall time: the same
verdicts, findings (event, quote, rule) and notes, in folder order, and each attempt's verdict.json
written by the worker that judged it.
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from typer.testing import CliRunner

from statebox.audits import workers as audit_workers
from statebox.audits.verdict import audit_run
from statebox.cli import app

CORPUS = Path(__file__).parent / "corpus"


def _rows(rows) -> list:
    return [(r.attempt, r.agent, r.item, r.verdict.model_dump(), r.notes) for r in rows]


def test_jobs_give_the_rows_of_one_process_in_folder_order():
    one = audit_run(CORPUS, None, write=False)
    many = audit_run(CORPUS, None, write=False, jobs=3)
    assert len(one) >= 40
    assert {r.verdict.verdict for r in one} == {"clean", "suspicious", "contaminated"}  # the comparison means something
    assert _rows(many) == _rows(one)


def test_cli_jobs_writes_each_verdict_and_prints_the_same_json(tmp_path: Path):
    names = ["cheat_env_dump__claude", "cheat_env_dump__gateway", "cheat_filesystem_walk__events"]
    names += sorted(p.name for p in CORPUS.iterdir() if p.name.startswith("honest"))[:3]
    run = tmp_path / "run"
    for name in names:
        shutil.copytree(CORPUS / name, run / "attempts" / name)
    serial = CliRunner().invoke(app, ["audit", str(run), "--json", "--no-write"])
    assert serial.exit_code == 0, serial.output
    parallel = CliRunner().invoke(app, ["audit", str(run), "--json", "--jobs", "2"])
    assert parallel.exit_code == 0, parallel.output
    assert json.loads(parallel.stdout) == json.loads(serial.stdout)
    verdicts = {}
    for name in names:
        written = json.loads((run / "attempts" / name / "verdict.json").read_text())
        verdicts[name] = written["verdict"]
    assert verdicts == {a["attempt"]: a["verdict"] for a in json.loads(serial.stdout)["attempts"]}
    assert "clean" in verdicts.values() and set(verdicts.values()) != {"clean"}


def test_cli_jobs_below_zero_is_a_usage_error(tmp_path: Path):
    result = CliRunner().invoke(app, ["audit", str(CORPUS), "--jobs", "-1", "--no-write"])
    assert result.exit_code == 2


def test_workers_take_jobs_as_given_and_by_default_one_per_core_once_there_is_work_for_it(monkeypatch):
    monkeypatch.setattr(audit_workers, "usable_cores", lambda: 8)
    per = audit_workers.MIN_PER_WORKER
    assert audit_workers.workers(3, 1) == 3 and audit_workers.workers(1, 10_000) == 1  # as given
    assert audit_workers.workers(audit_workers.AUTO, 0) == 1
    assert audit_workers.workers(audit_workers.AUTO, 2 * per - 1) == 1  # not enough for a second worker
    assert audit_workers.workers(audit_workers.AUTO, 2 * per) == 2
    assert audit_workers.workers(audit_workers.AUTO, 100 * per) == 8  # never more than the cores
    monkeypatch.undo()
    assert 1 <= audit_workers.usable_cores() <= (os.cpu_count() or 1)


class _CountedPool(ProcessPoolExecutor):
    """The pool the audit builds, its size recorded."""

    sizes: list[int] = []

    def __init__(self, max_workers: int | None = None, **kwargs) -> None:
        _CountedPool.sizes.append(max_workers or 0)
        super().__init__(max_workers=max_workers, **kwargs)


def test_the_cli_audits_in_as_many_processes_as_workers_gives_by_default(tmp_path: Path, monkeypatch):
    """No --jobs: a run's folders (and a folder of other harnesses' files) are shared among `workers(AUTO, n)`
    processes, and the JSON is the one process's."""
    from statebox.audits import external, verdict

    monkeypatch.setattr(audit_workers, "usable_cores", lambda: 3)
    monkeypatch.setattr(audit_workers, "MIN_PER_WORKER", 2)
    monkeypatch.setattr(verdict, "ProcessPoolExecutor", _CountedPool)
    monkeypatch.setattr(external, "ProcessPoolExecutor", _CountedPool)
    _CountedPool.sizes = []
    serial = CliRunner().invoke(app, ["audit", str(CORPUS), "--json", "--no-write", "--jobs", "1"])
    assert serial.exit_code == 0, serial.output
    assert _CountedPool.sizes == []
    auto = CliRunner().invoke(app, ["audit", str(CORPUS), "--json", "--no-write"])
    assert auto.exit_code == 0, auto.output
    assert _CountedPool.sizes == [3] and json.loads(auto.stdout) == json.loads(serial.stdout)
    _CountedPool.sizes = []
    args = ["audit", str(CLI_FILES), "--json", "--items", str(CLI_FILES / "items.jsonl")]
    serial = CliRunner().invoke(app, args + ["--jobs", "1"])
    auto = CliRunner().invoke(app, args)
    assert serial.exit_code == 0 and auto.exit_code == 0, serial.output + auto.output
    assert _CountedPool.sizes == [2] and json.loads(auto.stdout) == json.loads(serial.stdout)  # 4 files: 2 per worker


CLI_FILES = Path(__file__).parent / "cli_session_files"


def test_a_folder_of_other_harnesses_logs_in_n_processes_gives_the_rows_of_one(tmp_path: Path):
    """The CLIs' own session files (two Claude Code, two Codex), each file judged in a worker: same rows in
    the same order, the same JSON from the command, and progress told once per file."""
    from statebox.audits import external, external_session

    items = external_session.read_items(CLI_FILES / "items.jsonl")
    told: list[tuple[int, int, int]] = []
    one = external.audit_path(CLI_FILES, None, items=items)
    many = external.audit_path(CLI_FILES, None, items=items, jobs=3, progress=lambda *a: told.append(a))
    assert len(one) == 4 and {r.row.verdict.verdict for r in one} == {"clean", "contaminated"}
    assert [(s.fmt, str(s.source), s.row.attempt, s.row.verdict.model_dump()) for s in many] == \
        [(s.fmt, str(s.source), s.row.attempt, s.row.verdict.model_dump()) for s in one]
    assert told == [(k, 4, k) for k in range(1, 5)]
    serial = CliRunner().invoke(app, ["audit", str(CLI_FILES), "--json", "--items", str(CLI_FILES / "items.jsonl")])
    parallel = CliRunner().invoke(app, ["audit", str(CLI_FILES), "--json", "--jobs", "2", "--items", str(CLI_FILES / "items.jsonl")])
    assert serial.exit_code == 0 and parallel.exit_code == 0, serial.output + parallel.output
    assert json.loads(parallel.stdout) == json.loads(serial.stdout)


def test_rows_keep_their_session_only_when_asked():
    """Without --html a row holds its verdict only: a folder of thousands of sessions is audited in the memory
    of one (3,000 CLI session files: 1.6 GB of logs held before, 110 MB now)."""
    from statebox.audits import external

    assert all(s.row.log is None for s in external.audit_path(CLI_FILES, None))
    kept = external.audit_path(CLI_FILES, None, keep_logs=True)
    assert all(s.row.log is not None and s.row.log.events for s in kept)
    run = audit_run(CORPUS, None, write=False, jobs=2)
    assert all(r.log is None for r in run)


def test_run_audit_progress_is_told_after_each_attempt():
    told: list[tuple[int, int]] = []
    rows = audit_run(CORPUS, None, write=False, jobs=2, progress=lambda done, total: told.append((done, total)))
    assert told == [(k, len(rows)) for k in range(1, len(rows) + 1)]
    told.clear()
    audit_run(CORPUS, None, write=False, progress=lambda done, total: told.append((done, total)))
    assert told == [(k, len(rows)) for k in range(1, len(rows) + 1)]
