"""Validity probes on the tiny suite, and proof that they fail when the suite is broken."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic import oracle
from statebox.benchmarks.synthetic.suite import load_suite, make_suite
from statebox.harness.suite_validity import validate_suite
from statebox.errors import UserError

STATEBOX = [sys.executable, "-m", "statebox.cli"]


def _probe(report, dataset: str, name: str):
    return next(p for p in report.probes if p.dataset == dataset and p.name.startswith(name))


def test_suite_json_contract(tiny_suite: Path) -> None:
    raw = json.loads((tiny_suite / "suite.json").read_text())
    assert raw["seed"] == 0 and raw["size"] == "tiny"
    families = {d["family"]: d for d in raw["datasets"]}
    assert set(families) == {"cube_count", "shell_game", "block_count", "bolts", "streaming_count", "morse_light",
                             "streaming_window", "line_crossing", "swing", "lamp_episodes", "cup_drops", "ec_bolts",
                             "ec_beeps", "eoc_objects"}
    assert families["cube_count"]["bench"] == "cpbench" and families["streaming_count"]["bench"] == "vcbench"
    assert all(families[f]["bench"] == "vstat" for f in ("shell_game", "block_count", "bolts", "morse_light", "cup_drops"))
    assert all(families[f]["bench"] == "vcbench" for f in ("streaming_window", "line_crossing", "swing", "lamp_episodes"))
    assert families["ec_bolts"]["bench"] == families["ec_beeps"]["bench"] == "ecbench"
    assert families["eoc_objects"]["bench"] == "eocbench"
    for d in raw["datasets"]:
        assert not Path(d["data"]).is_absolute() and (tiny_suite / d["data"]).is_file()
        assert (tiny_suite / d["videos"]).is_dir()
    suite = load_suite(tiny_suite)
    assert all(ref.data.is_absolute() and ref.videos.is_absolute() for ref in suite.datasets)
    classes = json.loads((tiny_suite / "classes.json").read_text())["classes"]
    assert classes == raw["classes"] and {"cube", "cup", "ball", "block", "bolt", "lamp"} <= set(classes)


def test_all_probes_pass_on_tiny_suite(tiny_suite: Path) -> None:
    report = validate_suite(tiny_suite)
    failed = [p for p in report.probes if not p.ok]
    assert not failed, failed
    assert _probe(report, "cube_count", "max-single-frame baseline, main").value == "0.000"
    assert _probe(report, "cube_count", "max-single-frame baseline, control").value == "1.000"
    assert _probe(report, "cube_count", "answer recoverable from 1 fps").ok
    assert _probe(report, "streaming_count", "answers use only the past").ok


def test_cube_invariants_from_tracks(tiny_suite: Path) -> None:
    """A9: max visible per frame < N on main; every cube visible in >= 2 frames of the 1 fps sample."""
    family_dir = tiny_suite / "cube_count"
    for meta_file in sorted((family_dir / "gt").glob("*.meta.json")):
        stem = meta_file.name.removesuffix(".meta.json")
        meta = gt.read_meta(family_dir, stem)
        rows = gt.read_tracks(family_dir, stem)
        n = meta.answers["count"]
        if meta.params["setting"] == "main":
            assert oracle.max_single_frame(rows) < n
            sampled = [r for r in rows if r.frame % meta.fps == 0 and r.visible >= 0.5]
            assert {r.id for r in sampled} == set(range(1, n + 1))
            assert all(sum(r.id == i for r in sampled) >= 2 for i in range(1, n + 1))
        else:
            assert all(r.visible >= 0.95 for r in rows)


def test_streaming_answers_depend_on_the_cut(tiny_suite: Path) -> None:
    """Answers equal counts over frames before each query time, and would differ if the future leaked in."""
    from statebox.benchmarks import load_benchmark

    ref = load_suite(tiny_suite).dataset("streaming_count")
    items = load_benchmark(ref.bench, ref.data, ref.videos).items
    leaked_differs = False
    for item in items:
        rows = oracle.tracks_for(ref.data.parent, item)
        end = max(r.time for r in rows) + 1
        kind = oracle.kind_of(item.question)
        for q in item.queries:
            assert q.time == round(q.time, 2) and (q.time * 10) % 1 == pytest.approx(0.5)
            assert oracle.streaming(rows, item.labels["counting_subtype"], kind, q.time, 10) == q.target
            if item.labels["counting_subtype"] != "O1-Snap":
                leaked_differs |= oracle.streaming(rows, item.labels["counting_subtype"], kind, end, 10) != q.target
    assert leaked_differs


def test_broken_suite_fails_validation(tiny_suite: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(tiny_suite, broken)
    manifest = broken / "cube_count" / "cpbench_manifest.jsonl"
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[0]["count"] += 1  # an annotation that disagrees with the tracks
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = validate_suite(broken)
    assert not _probe(report, "cube_count", "oracle").ok
    proc = subprocess.run(STATEBOX + ["bench", "validate", str(broken)], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "FAIL" in proc.stdout


def test_cli_validate_and_info(tiny_suite: Path) -> None:
    proc = subprocess.run(STATEBOX + ["bench", "validate", str(tiny_suite), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["ok"] and len(payload["probes"]) > 20
    info = subprocess.run(STATEBOX + ["bench", "info", str(tiny_suite), "--json"], capture_output=True, text=True)
    assert info.returncode == 0, info.stderr
    summary = json.loads(info.stdout)
    counts = {d["family"]: d["items"] for d in summary["datasets"]}
    assert counts["cube_count"] == 4 and counts["shell_game"] == 2


def test_bad_input_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="suite.json is missing"):
        load_suite(tmp_path)
    with pytest.raises(UserError, match="unknown task"):
        make_suite(tmp_path / "x", tasks=["nope"])
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty"):
        make_suite(tmp_path / "busy", tasks=["morse_light"])
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"
    proc = subprocess.run(STATEBOX + ["bench", "validate", str(tmp_path / "missing")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "suite.json is missing" in proc.stderr


def test_static_props_stay_in_frame(tiny_suite: Path) -> None:
    """Cups, bolts and the lamp never leave the picture (a cut-off bolt could hide a turn)."""
    for family, classes in (("shell_game", {"cup"}), ("bolts", {"bolt"}), ("morse_light", {"lamp"})):
        family_dir = tiny_suite / family
        for meta_file in sorted((family_dir / "gt").glob("*.meta.json")):
            rows = gt.read_tracks(family_dir, meta_file.name.removesuffix(".meta.json"))
            out = [r for r in rows if r.cls in classes and r.in_frame < 0.99]
            assert not out, (family, out[:1])


def test_degenerate_answers_fail_the_frequency_probe(tiny_suite: Path, tmp_path: Path) -> None:
    """One item left per question group: its answer is the group's mode, so a constant guess scores 100%."""
    assert _probe(validate_suite(tiny_suite, contact_sheets=False), "ec_beeps", "chance baseline (frequency)").ok
    one = tmp_path / "one"
    shutil.copytree(tiny_suite / "ec_beeps", one / "ec_beeps")
    raw = json.loads((tiny_suite / "suite.json").read_text())
    raw["datasets"] = [d for d in raw["datasets"] if d["family"] == "ec_beeps"]
    (one / "suite.json").write_text(json.dumps(raw))
    csv_file = one / "ec_beeps" / raw["datasets"][0]["data"].split("/", 1)[1]
    header, first, *_ = csv_file.read_text().splitlines()
    csv_file.write_text(header + "\n" + first + "\n")
    report = validate_suite(one, contact_sheets=False)
    assert _probe(report, "ec_beeps", "oracle").ok  # the item itself is fine ...
    assert not _probe(report, "ec_beeps", "chance baseline (frequency)").ok and not report.ok  # ... its spread is not
