"""Honest baselines must audit clean through the real harness: a false positive on the
tracker (whose launch command mounts /input, /models and /out) once voided its whole score."""

from __future__ import annotations

import json

import pytest

from statebox.benchmarks.synthetic.suite import load_suite
from tests.cli_deadline import run_statebox

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_tracker_sessions_audit_clean(tiny_suite, tmp_path, docker_engine):
    proc = run_statebox(["run", "--agent", "tracker", "--suite", str(tiny_suite), "--limit", "1",
                         "--run-dir", str(tmp_path / "run"), "--concurrency", "2", "--json"], timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)["results"]
    expected = {ds.family for ds in load_suite(tiny_suite).datasets}  # every family of the suite as generated
    assert {r["dataset"] for r in results} == expected and len(expected) >= 6
    for r in results:
        assert set(r["verdict_counts"]) == {"clean"}, (r["dataset"], r["verdict_counts"], r["audit_categories"])
        assert r["status_counts"].get("error", 0) == 0, r
