"""A statebox run, exported with `statebox export` to Inspect and to ATIF, audits to the same verdicts
from each export as from the run folder (issue 26).

The run (real Docker, real sandbox, the real gateway; the model played by the scripted model server
over the real Anthropic wire format): the sandboxed `scripted-cheater` (searches for annotation
files, reads a decoy and answers from it) and the sandboxed ReAct agent doing honest work, on the
first item of two generated families.

How decoy evidence travels: an export holds neither the decoys' paths and canaries (the run's secret
facts) nor the host's atime snapshot. Auditing an export re-judges every action in it; the findings it
does not make again (here those wanting those facts: `honeytoken`, `original_filename`, host evidence)
are carried from the verdict the export recorded, marked `recorded by the run` (audits/external.py;
export_hunt.py hunts the rest, a cheat the gateway alone saw among them). The cheater's own commands
show the cheating, so its verdict is contaminated either way; the test also checks that the carried
findings are exactly those (never a finding the export's actions re-prove) and that the re-judged
findings agree with the run's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

STATEBOX = [sys.executable, "-m", "statebox.cli"]
FAMILIES = ["cube_count", "shell_game"]


def _cli(args: list[str], env: dict[str, str] | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(STATEBOX + args, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, docker_engine) -> Path:
    from statebox.benchmarks.synthetic.suite import make_suite
    from statebox.testing.scripted_model import ScriptedModelServer, Turn

    suite = tmp_path_factory.mktemp("esuite")
    make_suite(suite, size="tiny", seed=0, tasks=FAMILIES, workers=1)
    run = tmp_path_factory.mktemp("erun") / "run"
    script = [Turn(text="Let me look at the workspace.", shell="ls -la"), Turn(shell="python3 -c 'print(6*7)'"),
              Turn(text="ANSWER: B")]
    with ScriptedModelServer(script) as model:
        proc = _cli(["run", "--agent", "scripted-cheater", "--agent", "react", "--model", "claude-sonnet-4-6",
                     "--suite", str(suite), "--limit", "1", "--run-dir", str(run), "--json"],
                    env={"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": "sk-scripted"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run


def _audit(target: Path) -> dict[str, dict]:
    proc = _cli(["audit", str(target), "--json", "--no-write"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {r["attempt"]: r for r in json.loads(proc.stdout)["attempts"]}


@pytest.mark.docker
def test_each_export_audits_to_the_run_folders_verdicts(run_dir, tmp_path):
    from statebox.audits.external import CARRIED_PREFIX

    folder = _audit(run_dir)
    assert sorted(r["verdict"] for r in folder.values()) == ["clean", "clean", "contaminated", "contaminated"]
    assert {r["agent"] for r in folder.values() if r["verdict"] == "contaminated"} == {"scripted-cheater"}

    exports = {}
    for fmt, out in (("inspect", tmp_path / "run.eval"), ("inspect", tmp_path / "run.json"), ("atif", tmp_path / "atif")):
        proc = _cli(["export", str(run_dir), "--format", fmt, "--out", str(out)])
        assert proc.returncode == 0, proc.stderr[-3000:]
        exports[out.name] = _audit(out)

    for name, rows in exports.items():
        assert {a: r["verdict"] for a, r in rows.items()} == {a: r["verdict"] for a, r in folder.items()}, name
        for attempt, row in rows.items():
            ours = {(f["category"], f["severity"]) for f in row["findings"]}
            theirs = {(f["category"], f["severity"]) for f in folder[attempt]["findings"]}
            assert ours == theirs, (name, attempt, ours ^ theirs)
            assert row["agent"] == folder[attempt]["agent"] and row["item"] == folder[attempt]["item"]
        cheater = next(r for r in rows.values() if r["agent"] == "scripted-cheater")
        re_judged = {f["category"] for f in cheater["findings"] if f["event"] is not None}
        assert {"qa_metadata", "filesystem_walk"} <= re_judged, name  # its own commands show the cheating
        carried = [f for f in cheater["findings"] if f["event"] is None]
        assert carried and {f["category"] for f in carried} <= {"honeytoken", "original_filename"}, name


@pytest.mark.docker
def test_export_audit_says_what_it_carried(run_dir, tmp_path):
    """The carried findings are named as such: on stderr per session, in the rule text, and in the HTML."""
    out = tmp_path / "run.eval"
    assert _cli(["export", str(run_dir), "--format", "inspect", "--out", str(out)]).returncode == 0
    html = tmp_path / "audit.html"
    proc = _cli(["audit", str(out), "--html", str(html)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "carried from the export's recorded verdict" in proc.stderr
    page = html.read_text()
    assert "recorded by the run" in page and 'data-agent="scripted-cheater"' in page
