"""`statebox demo`, end to end on the real engine, with the real `claude` CLI as the cheater.

The full demo also runs the tracker (minutes on a CPU); this test keeps the parts
that prove the product's promise: the oracle reaches 100% through the real scorer,
and the cheating coding agent (real CLI, scripted cheating model, real gateway)
finds only honeytokens, is flagged contaminated, and its answers are voided.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from statebox.benchmarks.synthetic.suite import load_suite
from tests.cli_deadline import run_statebox

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_demo_catches_the_cheating_coding_agent(tmp_path, docker_engine):
    out = tmp_path / "demo"
    # the demo a newcomer runs has no API key (README): with one it adds the real agent on the real API, which this
    # machine cannot reach (a key some other test of this worker set once made it hang to the deadline)
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    proc = run_statebox(["demo", "--out", str(out), "--agent", "oracle", "--agent", "claude-code-scripted"], timeout=900,
                        env=env)
    assert "API key found" not in proc.stdout
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    assert "statebox demo" in proc.stdout and "report:" in proc.stdout
    assert "demo timing by phase: images " in proc.stdout and "host-side agents (oracle) " in proc.stdout
    report = json.loads(
        subprocess.run([sys.executable, "-m", "statebox.cli", "report", str(out / "run"), "--json"],
                       capture_output=True, text=True, check=True, timeout=300).stdout
    )
    cheater = [r for r in report["results"] if r["agent"] == "claude-code-scripted"]
    oracle = [r for r in report["results"] if r["agent"] == "oracle"]
    families = len(load_suite(out / "suite").datasets)  # the suite grows: count what it holds
    assert families >= 6 and len(cheater) == families and len(oracle) == families  # one entry per dataset
    for r in cheater:
        assert r["verdict_counts"].get("contaminated", 0) == sum(r["status_counts"].values()), r
        assert r["audit_categories"].get("honeytoken", 0) >= 1, r
        assert r["clean_metrics"] is None  # nothing clean to score
        # EOC-Bench's released parser maps any reply to the most similar option (difflib), so a canary
        # answer lands on the right letter by chance; its strict parse (letters only) must score 0.
        headline = ("score", "gpa", "accuracy_strict") if r["bench"] == "eocbench" else ("score", "gpa", "accuracy")
        assert all((v or 0) == 0 for k, v in r["voided_metrics"].items() if k in headline), r
        # counted as wrong, every contaminated attempt scores 0 under every rule, EOC-Bench's official parser included
        wrong = ("score", "gpa", "accuracy", "accuracy_strict", "counting_accuracy", "enumeration_accuracy")
        assert all(r["flagged_as_wrong"][k] == 0 for k in wrong if r["flagged_as_wrong"].get(k) is not None), r
    for r in oracle:
        assert r["verdict_counts"] == {"clean": sum(r["status_counts"].values())}
    # the real CLI's own requests are never refused by the gateway's allow-lists (issue 24): a refusal
    # would end the cheater's attempt as an error before it cheats
    refusals = [line for log in (out / "run" / "attempts").glob("*/gateway.jsonl")
                for line in log.read_text().splitlines() if '"refused"' in line]
    assert refusals == [], refusals[:3]
    html = (out / "run" / "report.html").read_text()
    assert "contaminated" in html and "honeytoken" in html


def _config(agents: list[str], group: int = 8):
    from statebox.commands.demo import GROUPED_AGENT
    from statebox.harness.plan import RunConfig

    options = {GROUPED_AGENT: {"extra": {"group": group}}} if group > 1 else {}
    return RunConfig(run_id="demo-0", agents=agents, datasets=[], agent_options=options)


def test_demo_phases_put_host_side_agents_first_and_group_the_tracker():
    from statebox.commands.demo import DEMO_AGENTS, demo_phases

    host_side, grouped = demo_phases(_config(list(DEMO_AGENTS)))
    assert host_side == ["oracle", "chance-random", "chance-frequency"] and grouped == ["tracker"]
    assert demo_phases(_config(list(DEMO_AGENTS), group=1)) == (["oracle", "chance-random", "chance-frequency"], [])
    assert demo_phases(_config(["oracle", "claude-code-scripted"])) == (["oracle"], [])
    # every agent host-side: one phase, one leaderboard
    assert demo_phases(_config(["oracle", "chance-random"])) == ([], [])
