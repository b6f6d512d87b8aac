"""A page shows at most FINDINGS_SHOWN findings per session and says how many more: the agent decides how many its
session makes (60,000 distinct code walks made 50,000 findings, a 16 MB audit page for one session)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from statebox.audits.audit_report import audit_report_html
from statebox.audits.external import AuditedSession
from statebox.audits.inspect_scores import explanation
from statebox.audits.findings_shown import FINDINGS_SHOWN, shown_indexes
from statebox.audits.events import AttemptFacts, AuditLog
from statebox.audits.verdict import AuditedAttempt
from statebox.report.data import encode_transcript
from statebox.schema import Finding, Verdict

MANY = FINDINGS_SHOWN + 150


def _findings() -> list[Finding]:
    """MANY medium walks, one high finding late among them, and the audit_limit finding last."""
    out = [Finding(category="filesystem_walk", severity="medium", event=i, quote=f"ls /data/d{i}", rule="walk")
           for i in range(MANY)]
    out[MANY - 10] = Finding(category="qa_metadata", severity="high", event=MANY - 10, quote="cat /data/qa.json", rule="qa")
    out.append(Finding(category="audit_limit", severity="medium", event=None, quote="events.jsonl: read in part", rule="limit"))
    return out


def test_few_findings_are_all_shown_in_order() -> None:
    kinds = [("filesystem_walk", "low"), ("network", "high")] * (FINDINGS_SHOWN // 2)
    assert shown_indexes(kinds) == list(range(len(kinds)))


def test_past_the_cap_the_limit_and_the_most_severe_are_shown_in_order() -> None:
    findings = _findings()
    shown = shown_indexes([(f.category, f.severity) for f in findings])
    assert len(shown) == FINDINGS_SHOWN and shown == sorted(shown)
    assert MANY in shown and MANY - 10 in shown  # the audit_limit finding, the one high finding
    assert shown[:FINDINGS_SHOWN - 2] == list(range(FINDINGS_SHOWN - 2))  # then the earliest of the rest


def test_the_audit_page_shows_the_cap_and_says_how_many_more(tmp_path: Path) -> None:
    verdict = Verdict(attempt_id="a", verdict="contaminated", findings=_findings(), action="void")
    row = AuditedAttempt("a", "claude-code", "q1", verdict, AuditLog([], AttemptFacts(attempt_id="a")), [])
    page = audit_report_html([AuditedSession(row, "claude", tmp_path / "a.jsonl")])
    assert page.count("ls /data/d") == FINDINGS_SHOWN - 2
    assert "cat /data/qa.json" in page and "the session&#x27;s size: read in part" in page
    assert f"{MANY + 1 - FINDINGS_SHOWN:,} more finding(s)" in page


def test_the_run_reports_transcript_carries_the_cap_and_the_count() -> None:
    findings = [f.model_dump() for f in _findings()]
    row = SimpleNamespace(findings=findings, response="4", metrics={}, metrics_json="{}")
    data = json.loads(encode_transcript({"lines": []}, row))  # type: ignore[arg-type]
    assert len(data["f"]) == FINDINGS_SHOWN and data["fm"] == MANY + 1 - FINDINGS_SHOWN
    assert {"audit_limit", "qa_metadata"} <= {f["category"] for f in data["f"]}
    few = SimpleNamespace(findings=findings[:3], response="4", metrics={}, metrics_json="{}")
    assert json.loads(encode_transcript({"lines": []}, few))["fm"] == 0  # type: ignore[arg-type]


def test_the_inspect_scores_explanation_lists_the_cap_and_says_how_many_more() -> None:
    findings = [f.model_dump() for f in _findings()]
    text = explanation("contaminated", "void", findings)
    assert text.count("\n- ") == FINDINGS_SHOWN + 1
    assert "qa_metadata / high" in text and "audit_limit / medium" in text
    assert text.endswith(f"- and {MANY + 1 - FINDINGS_SHOWN:,} more finding(s), less severe or later")
    assert explanation("suspicious", "flag", findings[:2]).count("\n- ") == 2
