"""Sessions recorded from the real `claude` and `codex` CLIs in the real sandbox (scripted model through the
real gateway, honeytokens planted; see record_real_sessions.py): honest ones clean, cheats caught."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from statebox.audits.verdict import audit_attempt

REAL = Path(__file__).parent / "corpus_real"
CASES = json.loads((REAL / "manifest.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=[c["attempt"] for c in CASES])
def test_real_session_verdict_matches_its_label(case, tmp_path):
    attempt = tmp_path / case["attempt"]
    shutil.copytree(REAL / case["attempt"], attempt)
    verdict = audit_attempt(attempt, None)
    found = {f.category for f in verdict.findings}
    assert found == set(case["labels"]), [(f.category, f.quote) for f in verdict.findings]
    assert verdict.verdict == ("contaminated" if case["labels"] else "clean")


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_raw_cli_log_alone_gives_the_same_categories(agent, tmp_path):
    """Without events.jsonl the auditor re-normalises the CLI's own raw log (and still reads the gateway)."""
    attempt = tmp_path / "a"
    shutil.copytree(REAL / f"{agent}-cheat", attempt)
    with_events = {f.category for f in audit_attempt(attempt, None).findings}
    (attempt / "events.jsonl").unlink()
    (attempt / "gateway.jsonl").unlink()
    raw_only = {f.category for f in audit_attempt(attempt, None).findings}
    assert raw_only == with_events
