"""The families added for issue 14: every VCBench subtype, VSTAT Set/Dict, EC-Bench spans and audio, EOC-Bench.

Oracle 100% through the real scorer is checked for every family in test_oracle_scoring;
here: the single-frame shortcut fails where memory is needed, the truth per frame is the
renderer's id buffer, and the format-specific parts (subtypes, structures, spans, audio,
visual prompts) are present.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from statebox.benchmarks import load_benchmark
from statebox.benchmarks.synthetic import clip as clip_mod
from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic.families import family_module
from statebox.benchmarks.synthetic.suite import load_suite
from statebox.harness.suite_validity import validate_suite
from statebox.benchmarks.synthetic.video import read_audio
from statebox.benchmarks.vcbench import SUBTYPES

NEW = ("streaming_window", "line_crossing", "swing", "lamp_episodes", "cup_drops", "ec_bolts", "ec_beeps", "eoc_objects")


def test_all_eight_vcbench_subtypes(tiny_suite: Path) -> None:
    suite = load_suite(tiny_suite)
    found = set()
    for ref in suite.datasets:
        if ref.bench == "vcbench":
            found |= {json.loads(line)["counting_subtype"] for line in ref.data.read_text().splitlines()}
    assert found == set(SUBTYPES)


def test_vstat_structures_and_questions_per_video(tiny_suite: Path) -> None:
    suite = load_suite(tiny_suite)
    structures = set()
    for ref in suite.datasets:
        if ref.bench == "vstat":
            for docs in json.loads(ref.data.read_text())["data"].values():
                structures |= {d["state_structure"] for d in docs}
    assert {"Atomic", "Sequence", "Set", "Dict"} <= structures
    docs = json.loads(suite.dataset("cup_drops").data.read_text())["data"]["cup_drops"]
    per_video: dict[str, int] = {}
    for d in docs:
        per_video[d["video_path"]] = per_video.get(d["video_path"], 0) + 1
    assert min(per_video.values()) >= 4
    assert any(d["perceptual_challenge"] == "multi-entity attribution" for d in docs)


def test_shortcuts_fail_where_memory_is_needed(tiny_suite: Path) -> None:
    report = validate_suite(tiny_suite, contact_sheets=False)
    for family in NEW:
        probe = next(p for p in report.probes if p.dataset == family and p.name.startswith("single-frame shortcut"))
        assert probe.ok, probe
    assert all(p.ok for p in report.probes if p.dataset in NEW), [p for p in report.probes if not p.ok]


def test_ecbench_rows_have_exact_spans_and_audio(tiny_suite: Path) -> None:
    suite = load_suite(tiny_suite)
    for family in ("ec_bolts", "ec_beeps"):
        ref = suite.dataset(family)
        rows = list(csv.DictReader(ref.data.open()))
        assert rows and all(r["clips"].startswith("[0:") for r in rows if r["answer"] != "0")
        items = load_benchmark("ecbench", ref.data, ref.videos).items
        assert all(i.evidence for i in items if i.target != "0")
    ref = suite.dataset("ec_beeps")
    for video in sorted(ref.videos.glob("*.mp4")):
        samples, rate = read_audio(video)
        assert rate == 16000 and float(np.abs(samples).max()) > 0.3


def test_eocbench_prompts_mark_the_object(tiny_suite: Path) -> None:
    ref = load_suite(tiny_suite).dataset("eoc_objects")
    items = load_benchmark("eocbench", ref.data, ref.videos).items
    raw = {str(r["idx"]): r for r in map(json.loads, ref.data.read_text().splitlines())}
    assert {i.labels["dimension"] for i in items} == {"Past", "Present", "Future"}
    assert {i.labels["choice_type"] for i in items} >= {"single-choice", "multi-choice", "open-ended"}
    for item in items:
        stem = Path(item.video).stem
        last = gt.frames_of(gt.read_tracks(ref.data.parent, stem))
        rows = last[max(last)]
        box = item.meta["box"][0]
        assert any(r.box == box for r in rows)
        mask = raw[item.id]["mask"][0]
        assert mask["size"] == [320, 480] and mask["counts"]
        x, y = item.meta["point"][0]
        assert box[0] <= x < box[2] and box[1] <= y < box[3]


@pytest.mark.parametrize("family", NEW)
def test_truth_per_frame_is_the_id_buffer(family: str, tmp_path: Path, monkeypatch) -> None:
    """Boxes and visibility in tracks.jsonl equal what the renderer's id buffer holds, frame by frame."""
    import cv2

    monkeypatch.setattr(clip_mod, "CAPTURE_IDS", True)
    monkeypatch.setattr(clip_mod, "CAPTURED", [])
    module = family_module(family)
    record = module.make_video(tmp_path, 0, 0, 1)
    stem = gt.read_meta(tmp_path, record.stem).stem
    meta = gt.read_meta(tmp_path, stem)
    clip = next(c for c in reversed(clip_mod.CAPTURED) if c.n_frames == meta.n_frames)
    frames = gt.frames_of(gt.read_tracks(tmp_path, stem))
    checked = 0
    for f in range(0, meta.n_frames, 3):
        ids = clip.ids[f]
        for row in frames.get(f, []):
            mine = (ids == row.id).astype(np.uint8)
            if mine.any():
                x, y, w, h = cv2.boundingRect(mine)
                assert row.box == [x, y, x + w, y + h], (family, f, row.id)
                checked += 1
            else:
                assert row.box is None and row.visible == 0.0, (family, f, row.id)
    assert checked > 0
