"""`statebox audit RUN_DIR --full`: every line of every log parsed, the reference reading the fast path is fuzzed
against (tests/audits/test_fast_path_differential.py), for a run folder written by something other than statebox.

Why a switch: the fast path's shortcuts assume the layouts statebox's own writers produce (the gateway log and
events.jsonl are written on the host, never by the agent); a folder written by other means may not hold to
them (ASCII spelled with `\\u` escapes is one: the triggers read raw bytes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from statebox.audits.verdict import audit_attempt
from statebox.cli import app
from tests.audits.test_fast_path_differential import Turn, honest, session

CORPUS = Path(__file__).parent / "corpus"
CLI_FILES = Path(__file__).parent / "cli_session_files"


def _run_with_an_escaped_command(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    for name in ["cheat_env_dump__gateway"] + sorted(p.name for p in CORPUS.iterdir() if p.name.startswith("honest"))[:2]:
        shutil.copytree(CORPUS / name, run / "attempts" / name)

    def escaped(lines: list[bytes]) -> list[bytes]:  # `env` spelled \u0065\u006ev: valid JSON, the same text
        return [line.replace(b'"command": "ENVX"', b'"command": "\\u0065\\u006ev"') for line in lines]
    session(run / "attempts", [honest(0), Turn("", {"command": "ENVX"}, "x", in_events=False)], usage=False, long=False,
            gateway_edit=escaped, secret=None, name="escaped")
    return run


def test_full_gives_the_full_parse_of_every_attempt_and_reads_what_the_fast_path_does_not(tmp_path: Path):
    run = _run_with_an_escaped_command(tmp_path)
    full = CliRunner().invoke(app, ["audit", str(run), "--json", "--no-write", "--full"])
    assert full.exit_code == 0, full.output
    rows = [(a["attempt"], a["verdict"]) for a in json.loads(full.stdout)["attempts"]]
    folders = sorted((run / "attempts").iterdir())
    assert [verdict for _, verdict in rows] == [audit_attempt(f, fast=False, write=False).verdict for f in folders]
    assert rows[folders.index(run / "attempts" / "escaped")][1] != "clean"  # the dump, read through its escapes
    assert {"clean"} < {verdict for _, verdict in rows}
    parallel = CliRunner().invoke(app, ["audit", str(run), "--json", "--no-write", "--full", "--jobs", "2"])
    assert parallel.exit_code == 0 and json.loads(parallel.stdout) == json.loads(full.stdout)


def test_full_on_the_clis_own_files_gives_the_verdicts_of_their_candidate_lines():
    """`--full` also reads every line of Claude Code's and Codex's own files (`session_file_prefilter` reads
    their candidate lines): on the real CLIs' recorded files both readings give the same rows."""
    items = CLI_FILES / "items.jsonl"
    common = ["audit", str(CLI_FILES), "--json", "--items", str(items), "--jobs", "1"]
    fast = subprocess.run([sys.executable, "-m", "statebox.cli", *common], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    full = subprocess.run([sys.executable, "-m", "statebox.cli", *common, "--full"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert fast.returncode == 0 and full.returncode == 0, fast.stderr + full.stderr

    def rows(out: str) -> list[tuple]:
        return [(a["attempt"], a["verdict"], sorted((f["category"], f["severity"], f["quote"]) for f in a["findings"]))
                for a in json.loads(out)["attempts"]]
    assert rows(fast.stdout) == rows(full.stdout)
    assert {"clean", "contaminated"} <= {row[1] for row in rows(full.stdout)}
