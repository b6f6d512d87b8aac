"""Every generated file loads through the benchmark loaders and the oracle scores 100% through `statebox score`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from statebox.benchmarks import load_benchmark
from statebox.benchmarks.synthetic import groundtruth as gt
from statebox.benchmarks.synthetic import oracle
from statebox.benchmarks.synthetic.suite import load_suite
from statebox.benchmarks.synthetic.video import read_frames
from statebox.schema import resolve_video

HEADLINE = {"vstat": ["score"], "vcbench": ["gpa", "moc", "uda"], "cpbench": ["accuracy", "control_accuracy"],
            "ecbench": ["counting_accuracy", "span_miou"], "eocbench": ["accuracy"]}


def test_oracle_scores_100_through_statebox_score(tiny_suite: Path, tmp_path: Path) -> None:
    suite = load_suite(tiny_suite)
    for ref in suite.datasets:
        loaded = load_benchmark(ref.bench, ref.data, ref.videos)
        assert loaded.items and not any("no video" in w and "video_url" not in w for w in loaded.warnings)
        assert all(resolve_video(item, ref.videos).is_file() for item in loaded.items)
        preds = oracle.predictions(ref.family, suite.family_dir(ref.family), loaded.items)
        path = tmp_path / f"{ref.family}.jsonl"
        path.write_text("".join(json.dumps(p) + "\n" for p in preds))
        proc = subprocess.run([sys.executable, "-m", "statebox.cli", "score", "--bench", ref.bench, "--data",
                               str(ref.data), "--predictions", str(path), "--json", "--bootstrap", "0"],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        for key in HEADLINE[ref.bench]:
            if report["metrics"].get(key) is None:  # MoC/UDA: not defined for the windowed VCBench subtypes
                continue
            assert report["metrics"][key] == 1.0, (ref.family, key, report["metrics"])
        # a wrong answer must cost something (the scorer is really looking)
        wrong = [dict(p, response="99") for p in preds]
        path.write_text("".join(json.dumps(p) + "\n" for p in wrong))
        proc = subprocess.run([sys.executable, "-m", "statebox.cli", "score", "--bench", ref.bench, "--data",
                               str(ref.data), "--predictions", str(path), "--json", "--bootstrap", "0"],
                              capture_output=True, text=True)
        assert json.loads(proc.stdout)["metrics"][HEADLINE[ref.bench][0]] < 1.0


def test_vstat_docs_have_the_contract_fields(tiny_suite: Path) -> None:
    for family in ("shell_game", "block_count", "bolts", "morse_light"):
        ref = load_suite(tiny_suite).dataset(family)
        docs = json.loads(ref.data.read_text())["data"][family]
        for doc in docs:
            assert {"id", "source_task", "video_id", "video_path", "question", "answer", "choices", "answer_index",
                    "labels"} <= set(doc)
            assert doc["labels"]["source"] == "Synthetic" and doc["labels"]["task"] == family
            if doc["choices"]:
                assert doc["answer"] in "ABCD" and doc["choices"][doc["answer_index"]]
            assert (ref.videos / doc["video_path"]).is_file()


def test_frames_show_what_tracks_say(tiny_suite: Path) -> None:
    """At 1 fps, cube-blue pixels sit inside the ground-truth boxes of visible cubes and nowhere else."""
    family_dir = tiny_suite / "cube_count"
    stem = sorted(p.name.removesuffix(".meta.json") for p in (family_dir / "gt").glob("*main*.meta.json"))[0]
    meta = gt.read_meta(family_dir, stem)
    frames = gt.frames_of(gt.read_tracks(family_dir, stem))
    checked = 0
    for index, (_, frame) in enumerate(read_frames(family_dir / "videos" / meta.video)):
        if index % meta.fps:
            continue
        b, g, r = (frame[..., k].astype(int) for k in range(3))
        blue = (b - r > 60) & (b - g > 30)
        inside = np.zeros_like(blue)
        for row in frames.get(index, []):
            if row.box is None:
                continue
            x1, y1, x2, y2 = row.box
            inside[max(0, y1 - 2):y2 + 2, max(0, x1 - 2):x2 + 2] = True
            if row.visible >= 0.5:
                assert blue[y1:y2, x1:x2].mean() > 0.3, (index, row.id)
                checked += 1
        assert (blue & ~inside).sum() < 20, index
    assert checked >= meta.answers["count"]
