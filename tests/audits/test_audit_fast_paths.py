"""The per-attempt shortcuts after the prefilter (derived events, the rules' digest, the verdict's inputs) give
the plain path's answer, on hostile input too.

Each shortcut holds only where an argument holds and falls back to the plain path elsewhere; each test here
builds an input where the argument fails and checks the answer is the plain path's (without the fallback it
would differ).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statebox.attempt_folder import ATTEMPT_FILE, EVENTS_FILE
from statebox.audits import verdict
from statebox.audits.actions import Access
from statebox.audits.events import event_accesses, load_attempt, new_event
from statebox.audits.honeytokens import HONEYTOKENS_DIR, PLAN_FILE, SNAPSHOT_FILE, DecoyEvidence, decoy_evidence
from statebox.schema import Event, EventKind


def _attempt(folder: Path) -> Path:
    folder.mkdir()
    (folder / ATTEMPT_FILE).write_text(json.dumps({"attempt_id": folder.name, "attempt": {"agent": "a"}}))
    (folder / EVENTS_FILE).write_text(json.dumps({"seq": 0, "kind": "final_answer", "text": "4"}) + "\n")
    return folder


# -- decoy evidence from the folder's listing ----------------------------------------------------------------


def test_no_decoy_record_is_answered_from_the_listing(tmp_path):
    folder = _attempt(tmp_path / "a1")
    log = load_attempt(folder, verdict.default_prefilter())
    assert log.folder_names is not None and ATTEMPT_FILE in log.folder_names
    assert verdict._decoy_evidence(folder, log) == decoy_evidence(folder) == DecoyEvidence()


def test_an_unreadable_snapshot_is_still_reported(tmp_path):
    folder = _attempt(tmp_path / "a1")
    (folder / HONEYTOKENS_DIR).mkdir()
    (folder / HONEYTOKENS_DIR / SNAPSHOT_FILE).write_text("not json")
    log = load_attempt(folder, verdict.default_prefilter())
    expected = decoy_evidence(folder)
    assert expected.notes and verdict._decoy_evidence(folder, log) == expected
    assert verdict.audit_run(folder, write=False)[0].notes == expected.notes


def test_a_plan_beside_the_attempt_is_still_judged(tmp_path):
    folder = _attempt(tmp_path / "a1")
    gone = tmp_path / "gone.csv"
    (folder / PLAN_FILE).write_text(json.dumps({"atime_probe": True, "targets": {str(gone): "/data/answers.csv"},
                                                "planted_atime_ns": {str(gone): 1}}))
    log = load_attempt(folder, verdict.default_prefilter())
    expected = decoy_evidence(folder)
    assert expected.notes and verdict._decoy_evidence(folder, log) == expected


def test_a_case_variant_of_a_record_asks_the_file_system(tmp_path, monkeypatch):
    """On a case-insensitive file system `HONEYTOKENS/` is `honeytokens/`: the listing must not answer."""
    folder = _attempt(tmp_path / "a1")
    (folder / "HoneyTokens").mkdir()
    (folder / "Plan.JSON").write_text("{}")
    log = load_attempt(folder, verdict.default_prefilter())
    asked: list[Path] = []
    monkeypatch.setattr(verdict, "decoy_evidence", lambda d: asked.append(d) or DecoyEvidence(source="live"))
    assert verdict._decoy_evidence(folder, log).source == "live" and asked == [folder]


def test_a_folder_the_listing_does_not_answer_for_asks_the_file_system(tmp_path, monkeypatch):
    folder = _attempt(tmp_path / "a1")
    (folder / "caf\u00e9.txt").write_text("x")  # a name outside ASCII: the listing answers nothing
    log = load_attempt(folder, verdict.default_prefilter())
    assert log.folder_names is None
    asked: list[Path] = []
    monkeypatch.setattr(verdict, "decoy_evidence", lambda d: asked.append(d) or DecoyEvidence(source="live"))
    assert verdict._decoy_evidence(folder, log).source == "live" and asked == [folder]


# -- a tool call's accesses ----------------------------------------------------------------------------------

def _call(tool: str, args: object, text: str = "") -> Event:
    return new_event(3, EventKind.tool_call, "claude.stream.jsonl", 1, text, {"tool": tool, "input": args})


def test_a_lone_command_to_a_search_tool_still_searches_the_workspace():
    """Grep/Glob with no path search /workspace: the one-command shortcut must not drop that access."""
    got = event_accesses(_call("Grep", {"command": "cat /etc/hosts"}))
    assert Access("search", "/workspace", "grep", "") in got
    assert Access("read", "/etc/hosts", "cat", "") in got


@pytest.mark.parametrize("args, expected", [
    ({"command": ["cat", "/etc/hosts"]}, [Access("read", "/etc/hosts", "cat", "")]),  # a list of words is joined
    ({"command": ""}, []),
    ({"cmd": "cat /etc/hosts"}, [Access("read", "/etc/hosts", "cat", "")]),
    ({"path": "/data/qa.json"}, [Access("read", "/data/qa.json", "bash", "")]),
    ({"command": 7}, []),
])
def test_one_argument_calls_read_as_before(args, expected):
    assert event_accesses(_call("Bash", args)) == expected


def test_the_shortcut_hands_out_a_list_of_its_own():
    """`accesses` is cached: the list a tool call answers must not be the cache's own."""
    first = event_accesses(_call("Bash", {"command": "cat /etc/hosts"}))
    first.append(Access("read", "/x", "y"))
    assert event_accesses(_call("Bash", {"command": "cat /etc/hosts"})) == [Access("read", "/etc/hosts", "cat", "")]
