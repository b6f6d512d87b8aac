"""The auditor against the labelled corpus: precision/recall per category, zero false positives on honest work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from corpus_eval import CATEGORIES, CORPUS, evaluate, table  # noqa: E402


@pytest.fixture(scope="module")
def results():
    return evaluate(CORPUS, fast=True)


def test_corpus_covers_every_category_in_every_format():
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    formats = {c["format"] for c in manifest}
    assert {"events", "claude", "codex", "gateway", "gateway_oai", "shell"} <= formats
    for fmt in ("events", "claude", "codex", "gateway", "shell"):
        labelled = {cat for c in manifest if c["format"] == fmt for cat in c["labels"]}
        assert labelled == set(CATEGORIES), f"{fmt} lacks cheats for {set(CATEGORIES) - labelled}"
        assert any(not c["labels"] for c in manifest if c["format"] == fmt), f"{fmt} has no honest session"


def test_precision_and_recall_per_category(results):
    stats, rows = results
    print("\n" + table(stats))  # the report quotes this table
    for cat, s in stats.items():
        assert s["recall"] == 1.0, f"{cat}: missed {s['fn']} labelled cheats"
        assert s["precision"] == 1.0, f"{cat}: {s['fp']} findings on sessions not labelled with it"


def test_no_finding_at_all_on_honest_sessions(results):
    _, rows = results
    honest = [r for r in rows if not r["labels"]]
    assert len(honest) >= 15
    for r in honest:
        assert r["verdict"] == "clean", (r["attempt"], [(f.category, f.quote) for f in r["findings"]])


def test_cheats_are_never_clean_and_answer_seekers_are_contaminated(results):
    _, rows = results
    for r in rows:
        if not r["labels"]:
            continue
        assert r["verdict"] != "clean", r["attempt"]
        if {"qa_metadata", "honeytoken", "original_filename"} & set(r["labels"]):
            assert r["verdict"] == "contaminated", r["attempt"]


def test_findings_point_at_real_events(results):
    """Every finding names an event seq that exists in the attempt's normalised log."""
    from statebox.audits.events import load_attempt

    _, rows = results
    for r in rows:
        if not r["findings"]:
            continue
        seqs = {e.seq for e in load_attempt(Path(r["root"]) / r["attempt"]).events}
        for f in r["findings"]:
            assert f.event in seqs, (r["attempt"], f)


def test_fast_path_finds_exactly_what_the_full_parse_finds():
    """The prefilter may skip lines only when they cannot matter."""
    fast = {r["attempt"]: sorted((f.category, f.quote) for f in r["findings"]) for r in evaluate(CORPUS, fast=True)[1]}
    slow = {r["attempt"]: sorted((f.category, f.quote) for f in r["findings"]) for r in evaluate(CORPUS, fast=False)[1]}
    assert fast == slow


def test_corpus_is_up_to_date(tmp_path):
    """The committed corpus is what make_corpus.py writes (no hand edits drifting from the scenarios)."""
    from make_corpus import write_corpus

    write_corpus(tmp_path / "c")
    for case in json.loads((CORPUS / "manifest.json").read_text()):
        for f in (CORPUS / case["attempt"]).iterdir():
            if f.name == "verdict.json":
                continue
            assert f.read_text() == (tmp_path / "c" / case["attempt"] / f.name).read_text(), f


def test_cli_json_contract(tmp_path):
    import shutil

    run = tmp_path / "run"
    (run / "attempts").mkdir(parents=True)
    for name in ("honest_opencv__claude", "cheat_grep_question__codex"):
        shutil.copytree(CORPUS / name, run / "attempts" / name)
    out = subprocess.run([sys.executable, "-m", "statebox.cli", "audit", str(run), "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    assert set(doc) == {"attempts"}
    by = {a["attempt"]: a for a in doc["attempts"]}
    for a in doc["attempts"]:
        assert set(a) == {"attempt", "agent", "item", "verdict", "findings"}
        for f in a["findings"]:
            assert set(f) == {"category", "severity", "event", "quote"}
    assert by["honest_opencv__claude"]["verdict"] == "clean" and by["honest_opencv__claude"]["agent"] == "claude-code"
    cheat = by["cheat_grep_question__codex"]
    assert cheat["verdict"] == "contaminated" and cheat["item"] == "vstat-blocks-0042"
    assert {"qa_metadata", "filesystem_walk"} == {f["category"] for f in cheat["findings"]}
    assert (run / "attempts" / "cheat_grep_question__codex" / "verdict.json").exists()
    wide = {**os.environ, "COLUMNS": "200"}
    table_out = subprocess.run([sys.executable, "-m", "statebox.cli", "audit", str(run)], capture_output=True, text=True,
                               check=True, env=wide).stdout
    # the table lists the flagged attempt and counts the clean one; --all lists both
    assert "cheat_grep_question__codex" in table_out and "honest_opencv__claude" not in table_out
    assert "1 clean attempt not listed (--all lists them)" in table_out and "clean: 1, suspicious: 0, contaminated: 1" in table_out
    every = subprocess.run([sys.executable, "-m", "statebox.cli", "audit", str(run), "--all"], capture_output=True, text=True,
                           check=True, env=wide).stdout
    assert "cheat_grep_question__codex" in every and "honest_opencv__claude" in every and "not listed" not in every


def test_cli_lone_session_file_with_flags(tmp_path):
    raw = CORPUS / "cheat_original_filename__claude" / "claude.stream.jsonl"
    base = [sys.executable, "-m", "statebox.cli", "audit", str(raw), "--json"]
    plain = json.loads(subprocess.run(base, capture_output=True, text=True, check=True).stdout)
    # without the secret facts only the benchmark's name inside the item id betrays it
    assert {f["category"] for f in plain["attempts"][0]["findings"]} == {"self_recognition"}
    told = json.loads(subprocess.run(base + ["--original-name", "block_count_0042.mp4"], capture_output=True, text=True, check=True).stdout)
    assert told["attempts"][0]["verdict"] == "contaminated"
    assert told["attempts"][0]["findings"][0]["category"] == "original_filename"


@pytest.mark.parametrize("content, why", [
    ('{"seq": 0, "kind": "message", "text": "hi"}\nnot json at all\n{"seq": 2, "kind": "message", "text": "x"}\n', ":2:"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, content, why):
    attempt = tmp_path / "attempts" / "a1"
    attempt.mkdir(parents=True)
    (attempt / "events.jsonl").write_text(content)
    out = subprocess.run([sys.executable, "-m", "statebox.cli", "audit", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and why in out.stderr
    missing = subprocess.run([sys.executable, "-m", "statebox.cli", "audit", str(tmp_path / "nope")], capture_output=True, text=True)
    assert missing.returncode == 2 and "no such" in missing.stderr


def test_cli_audit_that_writes_waits_for_no_run_holding_the_folder(tmp_path):
    """A run writes verdict.json as attempts finish; an audit under another policy writing at the
    same time would overwrite them. While another process holds the run lock, a writing audit
    stops (one line, exit 2) and touches nothing; `--no-write` still audits; an attempt folder
    is guarded by its run folder's lock."""
    import shutil
    import textwrap

    run = tmp_path / "run"
    (run / "attempts").mkdir(parents=True)
    name = "cheat_grep_question__codex"
    shutil.copytree(CORPUS / name, run / "attempts" / name)
    verdict = run / "attempts" / name / "verdict.json"
    verdict.unlink(missing_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from statebox.harness.lock import RunLock
        RunLock({str(run)!r}, role="run").acquire()
        print("held", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        (run / "run.json").write_text("{}")  # a run folder's mark, so RUN_DIR/attempts maps to RUN_DIR
        for target in (run, run / "attempts", run / "attempts" / name):
            out = subprocess.run([sys.executable, "-m", "statebox.cli", "audit", str(target)], capture_output=True, text=True)
            assert out.returncode == 2, out.stdout + out.stderr
            assert len(out.stderr.strip().splitlines()) == 1 and f"pid {holder.pid}" in out.stderr
            assert not verdict.exists()
        read_only = subprocess.run([sys.executable, "-m", "statebox.cli", "audit", str(run), "--json", "--no-write"],
                                   capture_output=True, text=True, check=True)
        assert json.loads(read_only.stdout)["attempts"][0]["verdict"] == "contaminated"
        assert not verdict.exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    subprocess.run([sys.executable, "-m", "statebox.cli", "audit", str(run / "attempts" / name)], capture_output=True, text=True, check=True)
    assert json.loads(verdict.read_text())["verdict"] == "contaminated"
    assert not list((run / "attempts" / name).glob("*.tmp"))


def test_the_count_line_names_what_the_rows_are(capsys):
    """A run's rows are attempts, other harnesses' rows are sessions; the count of the clean ones left out says which."""
    from types import SimpleNamespace

    from statebox.commands.audit import _print_table

    clean = SimpleNamespace(attempt="s1", agent="claude-code", item="i",
                            verdict=SimpleNamespace(verdict="clean", action="none", findings=[]))
    _print_table([clean, clean], False, "session")
    out = capsys.readouterr().out
    assert "2 clean sessions not listed (--all lists them)" in out and "s1" not in out
    _print_table([clean], False, "attempt")
    assert "1 clean attempt not listed" in capsys.readouterr().out
