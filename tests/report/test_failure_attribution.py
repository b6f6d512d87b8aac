"""The failure-mode diagnostic, end to end: `statebox run --suite FAILDIR` + `statebox report`
attribute each parent item to its first failing step.

A tiny suite of two families (cube_count: scene probes, failure.py; cup_drops: the cup
probes of variants.py) gets its failure variant; the oracle and an oracle that is wrong from an
injected step on (that step and every later one, as a wrong state spoils what follows; the
step is picked per parent, so several steps are counted at once) run through the real
`statebox run` (in-process, the test agent registered beside the built-in ones) with two
epochs, the second answered right; the report's JSON, terminal table and HTML count each
parent under its injected step, in the first epoch.
"""

from __future__ import annotations

import json
import re
import zlib
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statebox.agents.baselines import OracleAgent
from statebox.attempt import AttemptContext
from statebox.benchmarks import load_benchmark
from statebox.benchmarks.synthetic import variants
from statebox.benchmarks.synthetic.suite import load_suite, make_suite
from statebox.report.attribution import epoch_attribution, probe_parents
from statebox.harness.store import ResultRow

FAMILIES = ["cube_count", "cup_drops"]
WRONG = "oracle-wrong-step"


def injected_step(parent: str, steps: list[str]) -> str:
    """The step the wrong oracle starts failing at, for one parent (stable, spread over the steps)."""
    return steps[zlib.crc32(parent.encode()) % len(steps)]


class WrongStepOracle(OracleAgent):
    """The oracle, wrong on its parent's injected step and every later step, in epoch 0 only."""

    name = WRONG

    def answer(self, ctx: AttemptContext) -> str:
        right = super().answer(ctx)
        meta = ctx.item.meta or {}
        step, parent = meta.get("probe_step"), meta.get("parent")
        if ctx.attempt.epoch != 0 or not step or not parent:
            return right
        order = list(variants.STEPS)
        if order.index(step) < order.index(injected_step(parent, order)):
            return right
        return "Z" if ctx.item.answer_type == "mcq" else "999"  # as tests/synthetic/test_failure_scenes.py injects


@pytest.fixture(scope="module")
def failure_suite(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("attribution")
    make_suite(root / "suite", size="tiny", seed=0, tasks=FAMILIES)
    variants.make_variants(root / "suite", "failure", root / "fail")
    return root / "fail"


def _items(suite_dir: Path) -> dict[str, list]:
    suite = load_suite(suite_dir)
    return {ref.family: load_benchmark(ref.bench, ref.data, ref.videos).items for ref in suite.datasets}


def _cli(args: list[str]) -> str:
    from statebox.cli import app

    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def finished(failure_suite, tmp_path_factory) -> tuple[Path, dict]:
    from statebox.agents import base

    patch = pytest.MonkeyPatch()
    patch.setitem(base.AGENT_MODULES, WRONG, f"{__name__}:WrongStepOracle")
    try:
        run_dir = tmp_path_factory.mktemp("run") / "run"
        out = _cli(["run", "--agent", "oracle", "--agent", WRONG, "--suite", str(failure_suite), "--epochs", "2",
                    "--run-dir", str(run_dir), "--json"])
        payload = json.loads(out.strip().splitlines()[-1])
    finally:
        patch.undo()
    return run_dir, payload


def _expected(items: list) -> dict[str, int]:
    parents = probe_parents(items)
    counts = Counter(injected_step(p, list(variants.STEPS)) for p in parents)
    return {step: counts.get(step, 0) for step in (*variants.STEPS, "correct")}


def test_report_attributes_each_parent_to_its_injected_step(failure_suite, finished) -> None:
    run_dir, run_payload = finished
    items = _items(failure_suite)
    assert set(items) == {f"{f}@failure" for f in FAMILIES}
    expected = {label: _expected(its) for label, its in items.items()}
    # the injection covers more than one step, and every probe step is present, so the counts can tell them apart
    assert sum(1 for counts in expected.values() for s, n in counts.items() if n and s != "correct") >= 2
    for label, its in items.items():
        assert all([i.meta["probe_step"] for i in mine] == list(variants.STEPS) for mine in probe_parents(its).values()), label

    report = json.loads(_cli(["report", str(run_dir), "--json"]).strip().splitlines()[-1])
    found = report["failure_attribution"]
    for label, counts in expected.items():
        n = sum(counts.values())
        assert found["oracle"][label] == {**{s: 0 for s in variants.STEPS}, "correct": n}
        assert found[WRONG][label] == counts, label
    assert run_payload["failure_attribution"] == found  # `run --json` says the same
    # existing keys unchanged: the per-step accuracy is still the leaderboard's score (epochs averaged)
    assert {r["agent"] for r in report["results"]} == {"oracle", WRONG}
    assert all(r["metrics"]["score"] == pytest.approx(1.0) for r in report["results"] if r["agent"] == "oracle")
    assert all(r["metrics"]["score"] < 1.0 for r in report["results"] if r["agent"] == WRONG)

    html = Path(report["report"]).read_text()
    assert "First failing step" in html
    for label, counts in expected.items():
        table = re.search(r"<table class='sortable attribution' data-dataset='" + re.escape(label) + r"'>.*?</table>", html, re.S)
        assert table, label
        row = re.search(r"<tr data-agent='" + re.escape(WRONG) + r"' data-epoch='0'>.*?</tr>", table.group(0), re.S).group(0)
        assert {s: int(n) for s, n in re.findall(r"data-step='(\w+)' data-n='(\d+)'", row)} == counts
        later = re.search(r"<tr class=later-epoch data-agent='" + re.escape(WRONG) + r"' data-epoch='1'>.*?</tr>",
                          table.group(0), re.S).group(0)
        assert dict(re.findall(r"data-step='(\w+)' data-n='(\d+)'", later))["correct"] == str(sum(counts.values()))

    terminal = _cli(["report", str(run_dir)])
    assert "first failing step" in terminal and WRONG in terminal


def test_a_parent_counts_once_every_step_has_an_attempt(failure_suite) -> None:
    """A step with no attempt yet (a run in progress) leaves its parent out, not called wrong there;
    a wrong final with every probe right is `final`."""
    items = next(iter(_items(failure_suite).values()))
    parents = probe_parents(items)
    first, *_ = parents

    def row(item, ok: bool) -> ResultRow:
        return ResultRow(attempt_id=item.id, run_id="r", agent="a", dataset="d", bench="vstat", item_id=item.id,
                         status="ok", response="", verdict="clean", metrics={"correct": 1.0 if ok else 0.0})

    rows = [row(i, i.meta["probe_step"] != "final") for mine in parents.values() for i in mine]
    assert epoch_attribution(parents, rows)["final"] == len(parents)
    victim = next(i for i in parents[first] if i.meta["probe_step"] == "update")
    partial = [r for r in rows if r.item_id != victim.id]
    assert len(partial) == len(rows) - 1
    counts = epoch_attribution(parents, partial)
    assert counts["final"] == len(parents) - 1 and sum(counts.values()) == len(parents) - 1
