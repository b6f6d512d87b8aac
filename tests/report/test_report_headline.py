"""A headline that says what the data can say, and a terminal table that fits (issue 27), and the
report's page showing what an attacker hides in a transcript (issue 24).

The run: the host-side baselines and the oracle on the tiny generated suite (two items per
family, no sandbox needed), through the real CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from statebox.report.aggregate import compare_with_prior, score_run, wilson_low
from statebox.harness.plan import RunConfig, load_datasets
from statebox.harness.store import ResultStore
from statebox.report.leaderboard import leaderboard_table

STATEBOX = [sys.executable, "-m", "statebox.cli"]
AGENTS = ["oracle", "chance-frequency", "chance-random", "query-index-prior"]


def _cli(args: list[str], **env: str) -> subprocess.CompletedProcess:
    done = subprocess.run(STATEBOX + args, capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def tiny_run(tiny_suite, tmp_path_factory) -> tuple[Path, dict]:
    run_dir = tmp_path_factory.mktemp("headline") / "run"
    args = ["run", "--suite", str(tiny_suite), "--run-dir", str(run_dir), "--json"]
    for agent in AGENTS:
        args += ["--agent", agent]
    return run_dir, json.loads(_cli(args).stdout)


def _scores(run_dir: Path):
    store = ResultStore(run_dir)
    try:
        rows = store.rows()
    finally:
        store.close()
    items = {d.spec.label: d.items for d in load_datasets(RunConfig.load(run_dir))}
    return score_run(rows, items)


# ---------------------------------------------------------------- the three-way test


def test_too_few_items_is_neither_above_nor_not_above():
    # n=2: a perfect score's Wilson low end is 34.2, so a prior of 50 cannot be cleared by anything
    assert wilson_low(2, 2) == pytest.approx(2 / (2 + 1.959963984540054 ** 2))
    beats, why = compare_with_prior(1.0, (1.0, 1.0), 2, 0.5)
    assert beats is None and why.startswith("too few items to tell: at n=2")
    assert compare_with_prior(0.0, (0.0, 0.0), 2, 0.5)[0] is None  # not "not above" either: no power at all
    # enough items: the CI decides
    assert compare_with_prior(1.0, (1.0, 1.0), 30, 0.5)[0] is True
    assert compare_with_prior(0.6, (0.42, 0.78), 30, 0.5) == (False, "95% CI low end 42.0 <= prior 50.0 (n=30)")
    assert compare_with_prior(0.9, (0.8, 1.0), 30, 0.5)[0] is True
    # no CI computed: the Wilson interval of the score at n
    assert compare_with_prior(1.0, None, 30, 0.5)[0] is True
    assert compare_with_prior(0.55, None, 30, 0.5)[0] is False
    # a perfect prior leaves no room at any n
    beats, why = compare_with_prior(1.0, (1.0, 1.0), 1000, 1.0)
    assert beats is None and "no score can be above it" in why


def test_a_perfect_score_is_above_wherever_the_test_has_power():
    for n in range(1, 60):
        for prior in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99):
            assert compare_with_prior(1.0, (1.0, 1.0), n, prior)[0] in (True, None), (n, prior)
            assert compare_with_prior(1.0, None, n, prior)[0] in (True, None), (n, prior)


# ---------------------------------------------------------------- run --json, report, terminal


def test_run_json_never_calls_the_oracle_not_above(tiny_run):
    _, payload = tiny_run
    oracle = [r for r in payload["results"] if r["agent"] == "oracle"]
    assert oracle
    for r in oracle:
        assert r["beats_prior"] is not False, r
        assert r["beats_prior_n"] == r["n"] and isinstance(r["beats_prior_reason"], str), r
    assert any(r["beats_prior"] is None and r["beats_prior_reason"].startswith("too few items to tell") for r in oracle)
    for r in payload["results"]:
        if r["baseline"]:
            assert "beats_prior" not in r and "beats_prior_n" not in r
        assert r["flagged_as_wrong"] == r["metrics"], r  # nothing flagged here: the score itself


def test_report_first_line_and_terminal_say_too_few_items(tiny_run):
    run_dir, _ = tiny_run
    done = _cli(["report", str(run_dir)], COLUMNS="100")
    assert "too few items to tell" in " ".join(done.stdout.split())  # the last column may wrap it
    assert "NOT above" not in done.stdout
    html = (run_dir / "report.html").read_text()
    headline = re.search(r"<p class=headline>(.*?)</p>", html, re.S).group(1)
    assert "too few items to tell against the best prior: oracle" in headline
    assert "not above the best prior" not in headline
    report_json = json.loads(_cli(["report", str(run_dir), "--json"]).stdout)
    oracle = [r for r in report_json["results"] if r["agent"] == "oracle"]
    assert all(r["beats_prior"] is not False for r in oracle)
    assert all(r["flagged_as_wrong"] == r["metrics"] for r in report_json["results"])


def _numbers_whole(text: str, scores) -> None:
    lines = text.splitlines()
    for s in scores:
        value = s.report.metrics.get(s.headline)
        ci = ((s.report.model_extra or {}).get("ci") or {}).get(s.headline)
        wanted = [f"{100 * value:.1f}"] if value is not None else []
        if ci:
            wanted.append(f"{100 * ci[0]:.1f}-{100 * ci[1]:.1f}")
        for w in wanted:  # each number whole on one line (a cut or wrapped one is not found)
            assert any(re.search(rf"(?<![\d.]){re.escape(w)}(?![\d.])", line) for line in lines), (w, s.agent, s.dataset)


@pytest.mark.parametrize("width", [100, 80])
@pytest.mark.parametrize("flagged", [False, True], ids=["clean", "flagged"])
def test_leaderboard_fits_the_width_without_cutting_a_number(tiny_run, width, flagged):
    run_dir, _ = tiny_run
    scores = _scores(run_dir)
    for s in scores:  # the long names
        if s.agent == "chance-random":
            s.agent = "claude-code-scripted"
        if flagged and s.agent == "oracle":
            s.verdict_counts = {"clean": 1, "contaminated": 1}
            s.status_counts = {"ok": 1, "timeout": 1}
            s.clean = None  # no clean attempt: the clean-only column says "-"
            s.flagged_as_wrong = s.report.model_copy(update={"metrics": {**s.report.metrics, s.headline: 0.5}})
    console = Console(width=width, record=True, color_system=None)
    console.print(leaderboard_table(scores))
    text = console.export_text()
    assert max(cell_len(line) for line in text.splitlines()) <= width
    assert "…" not in text
    _numbers_whole(text, scores)
    if flagged:  # the columns a flagged run needs are there (at 80 their text may fold)
        assert re.search(r"^dataset +agent +score +95% CI +clean +flag=0 +n +audit +s/att +vs prior *$", text, re.M)
        assert "flag=0: every flagged attempt counted wrong" in " ".join(text.split())
        assert any(re.search(r"(?<![\d.])50\.0(?![\d.])", line) and "oracle" in line for line in text.splitlines())
        if width == 100:
            assert "contaminated:1" in text
    else:
        assert "flag=0" not in text
    if width == 100:
        assert "claude-code-scripted" in text  # in the table, or in the legend under it


# ---------------------------------------------------------------- hidden characters in the page (Chromium)


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium is not installed (scripts/setup/60-report-browser.sh installs it)")
    return exe


def test_report_page_shows_hidden_characters_of_a_transcript(tiny_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run[0], run_dir)
    store = ResultStore(run_dir)
    try:
        for row in store.rows():
            store.update_verdict(row.attempt_id, "suspicious", "flag",
                                 [{"category": "network", "severity": "medium", "event": 2,
                                   "quote": "curl x\u202e\u2066.sh"}])
    finally:
        store.close()
    for events in (run_dir / "attempts").glob("*/events.jsonl"):
        with events.open("a", encoding="utf-8") as fh:  # raw UTF-8, and the same characters JSON-escaped
            fh.write(json.dumps({"seq": 2, "kind": "command", "text": "echo \u202etxt.exe\u2069 \u200b"}, ensure_ascii=False) + "\n")
            fh.write(json.dumps({"seq": 3, "kind": "command", "text": "rm -rf \u202e/ \x1b[8m"}) + "\n")
    _cli(["report", str(run_dir)])
    done = subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
         (run_dir / "report.html").resolve().as_uri() + "#open=0"],
        capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    opened = re.search(r'<div class="attempt-detail loaded" id="attempt-0">(.*?)</div></td></tr>', done.stdout, re.S)
    assert opened, "#open=0 did not open the attempt's transcript"
    detail = opened.group(1)
    mark = '<span class="uesc">&lt;U+{}&gt;</span>'
    assert f"echo {mark.format('202E')}txt.exe{mark.format('2069')} {mark.format('200B')}" in detail
    assert f"rm -rf {mark.format('202E')}/ {mark.format('001B')}[8m" in detail
    assert f"curl x{mark.format('202E')}{mark.format('2066')}.sh" in detail  # the finding's evidence
    for char in ("\u202e", "\u2066", "\u2069", "\u200b", "\x1b"):
        assert char not in detail
