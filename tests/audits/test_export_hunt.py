"""The export hunt in CI (export_hunt.py says what and why): every string literal of the test suite in every place of a
run folder (a later command in each API's gateway log, with and without events.jsonl; an output; a path Read opens),
and the mutations of those `--full` flags as commands, exported to Inspect (JSON and `.eval`) and ATIF, and each export
audited: its verdict, categories and severities must be the run folder's. Plus the case it found, alone, and the two sides of the rule that closed it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import export_hunt  # noqa: E402
import literal_hunt  # noqa: E402

from statebox.audits.external import CARRIED_PREFIX, audit_path  # noqa: E402

CHUNKS = 8
LITERALS = literal_hunt.test_suite_literals()
CHEAT = "cat /data/annotations/answers.csv"


def _export_rows(tmp_path: Path, place: str, texts: list[str], as_export: bool = True) -> dict[str, list]:
    folder = literal_hunt.run_session(tmp_path / "attempts", place, texts, name="attempt0000")
    export_hunt.write_exports([folder], tmp_path, as_export=as_export)
    return {name: [row.row.verdict for row in audit_path(tmp_path / name, None)] for name in export_hunt.EXPORTS}


def test_a_cheat_only_the_gateway_saw_is_carried_into_every_export(tmp_path):
    """The agent left its cheat out of events.jsonl; the run folder's gateway log holds it, an export does not. Each
    export's audit is contaminated by the findings the run recorded, each marked as carried (before: clean)."""
    for name, verdicts in _export_rows(tmp_path, "run_command_gateway_only", [CHEAT]).items():
        (verdict,) = verdicts
        assert verdict.verdict == "contaminated", name
        assert {(f.category, f.severity) for f in verdict.findings} == {("qa_metadata", "high"), ("filesystem_walk", "medium")}
        assert all(f.rule.startswith(CARRIED_PREFIX) and f.event is None for f in verdict.findings), name


def test_each_finding_the_run_made_comes_back_as_many_times(tmp_path):
    """Two cheats of one category and severity, one in both logs and one the gateway alone saw: the export's own
    actions make the first again, the second is carried; the run's two findings are two in every export."""
    folder = literal_hunt.run_folder.session(tmp_path / "attempts", [
        literal_hunt.run_folder.honest(0), literal_hunt.Turn("x", {"command": "curl -s https://example.com/a"}, "done"),
        literal_hunt.Turn("x", {"command": "wget -q https://example.com/b"}, "done", in_events=False)], name="attempt0000")
    own = export_hunt.write_exports([folder], tmp_path)["attempt0000"]
    assert own == ("suspicious", [("network", "medium"), ("network", "medium")])
    for name in export_hunt.EXPORTS:
        (row,) = audit_path(tmp_path / name, None)
        findings = row.row.verdict.findings
        assert sorted((f.category, f.severity) for f in findings) == own[1], name
        assert [f.rule.startswith(CARRIED_PREFIX) for f in findings].count(True) == 1, name
        assert any("wget" in f.quote for f in findings if f.rule.startswith(CARRIED_PREFIX)), name


def test_a_hostile_exports_recorded_findings_are_carried_within_bounds(tmp_path):
    """An export is a file someone hands over: its recorded findings may be of any shape and any number. Values of
    another type (a list for a category, an object for a quote, a list for an event) are never carried nor turned into
    text; a flood of one kind is carried up to CARRIED_PER_KIND, and the note says how many more were not."""
    import json

    from statebox.audits.external import CARRIED_PER_KIND

    folder = literal_hunt.run_session(tmp_path / "attempts", "run_command", ["ls -la"], name="attempt0000")
    export_hunt.write_exports([folder], tmp_path)
    path = tmp_path / "inspect.json"
    doc = json.loads(path.read_text())
    flood = CARRIED_PER_KIND + 50
    doc["samples"][0]["metadata"]["findings"] = [
        {"category": ["network"], "severity": "high"}, {"category": "network", "severity": {"x": 1}},
        {"category": "no_such_category", "severity": "high"}, "network", None, 7,
        {"category": "network", "severity": "high", "quote": {"x": "y" * 10_000}, "rule": ["r"], "event": [1, 2]},
    ] + [{"category": "filesystem_walk", "severity": "medium", "quote": "q" * 10_000, "event": n} for n in range(flood)]
    path.write_text(json.dumps(doc))
    (row,) = audit_path(path, None)
    findings = row.row.verdict.findings
    network = [f for f in findings if f.category == "network"]
    assert [(f.severity, f.quote, f.rule) for f in network] == [("high", "", f"{CARRIED_PREFIX}: network")]
    walks = [f for f in findings if f.category == "filesystem_walk"]
    assert len(walks) == CARRIED_PER_KIND and all(len(f.quote) == 200 for f in walks)
    assert walks[0].rule == f"{CARRIED_PREFIX}: filesystem_walk; run event 0"
    assert row.row.verdict.verdict == "contaminated"
    assert any(f"{flood - CARRIED_PER_KIND} more recorded finding(s) not carried" in note for note in row.row.notes)


def test_what_the_export_shows_is_judged_again_not_carried(tmp_path):
    """The same cheat in events.jsonl too: the export's own actions make every finding, none is carried twice."""
    for name, verdicts in _export_rows(tmp_path, "run_command", [CHEAT]).items():
        (verdict,) = verdicts
        assert verdict.verdict == "contaminated", name
        assert {(f.category, f.severity) for f in verdict.findings} >= {("qa_metadata", "high")}
        assert not any(f.rule.startswith(CARRIED_PREFIX) for f in verdict.findings), name


def test_a_log_that_is_not_a_statebox_export_carries_nothing(tmp_path):
    """Findings in an Inspect sample's metadata of some other task are text, not a verdict statebox recorded: the
    actions alone are judged (the ATIF trajectories stay statebox's: they are not part of this case)."""
    rows = _export_rows(tmp_path, "run_command_gateway_only", [CHEAT], as_export=False)
    for name in ("inspect.json", "inspect.eval"):
        (verdict,) = rows[name]
        assert verdict.verdict == "clean" and not verdict.findings, name


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_every_literal_audits_the_same_from_each_export(chunk: int):
    """Every literal in every run-folder place; one `--full` flags as a command also mutated (literal_hunt.MUTATIONS:
    tabs, line breaks, wrappers, upper case, folding letters: what an export's JSON must carry as it is) in the places
    the export holds (a command in events.jsonl, in two APIs' gateway logs, and an output)."""
    texts = LITERALS[chunk::CHUNKS]
    flagged = [text for text in texts if literal_hunt.flagged_by_full(text)]
    mutated = list(dict.fromkeys(mutate(text) for text in flagged for mutate in literal_hunt.MUTATIONS.values()))
    found = export_hunt.differences(texts) + \
        export_hunt.differences(mutated, ("run_command", "run_command_responses", "run_output"))
    assert not found, "\n".join(f"{place} -> {export}: {text[:100]!r}\n  run folder {own}\n  export {theirs}"
                                for place, export, text, own, theirs in found[:20])
