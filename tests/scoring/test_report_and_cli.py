"""Report shape, VSTAT / EOC / CP-Bench scoring, chance baselines, CIs, and the `statebox score` CLI."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest

from statebox.benchmarks import load_benchmark
from statebox.scoring import chance_response, score_predictions, score_query
from statebox.scoring.stats import bootstrap_ci

REPO = Path(__file__).resolve().parents[2]
STATEBOX = REPO / ".venv" / "bin" / "statebox"


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture()
def vstat_file(tmp_path):
    data = {"data": {
        "block_count": [
            {"source_task": "block_count", "video_id": "v1", "video_path": "videos/a.mp4", "question": "How many?",
             "answer": "10", "choices": [], "answer_index": None, "state_element_type": "Count"},
            {"source_task": "block_count", "video_id": "v2", "video_path": "videos/b.mp4", "question": "How many?",
             "answer": "0", "choices": [], "answer_index": None, "state_element_type": "Count"},
        ],
        "shell_game": [
            {"source_task": "shell_game", "video_id": "v3", "video_path": "videos/c.mp4", "question": "Which cup?",
             "answer": "B", "choices": ["left", "middle", "right"], "answer_index": 1,
             "perceptual_complexity": ["occlusion", "homogeneity"]},
            {"source_task": "shell_game", "video_id": "v3", "video_path": "videos/c.mp4", "question": "Typed word?",
             "answer": "Hello", "choices": [], "answer_index": None},
        ],
    }}
    path = tmp_path / "vstat_qa_clean.json"
    path.write_text(json.dumps(data))
    return path


def test_vstat_scoring_and_report_shape(vstat_file):
    items = load_benchmark("vstat", vstat_file).items
    assert [i.id for i in items] == ["block_count:0", "block_count:1", "shell_game:0", "shell_game:1"]
    lines = [
        {"id": "block_count:0", "response": "I think 9"},  # MRA 0.9 (float64 boundary)
        {"id": "block_count:1", "response": "0"},
        {"id": "shell_game:0", "response": "Between A and b, b"},  # last standalone letter: B
        {"id": "ghost:7", "response": "A"},
    ]
    report = score_predictions("vstat", items, lines, n_boot=200)
    dumped = json.loads(report.model_dump_json())
    assert {"benchmark", "n", "metrics", "groups", "warnings"} <= set(dumped)
    assert dumped["n"] == 4
    assert report.metrics["numeric_mra"] == pytest.approx(0.95)
    assert report.metrics["mcq_acc"] == 1.0
    assert report.metrics["score"] == pytest.approx((0.9 + 1 + 1 + 0) / 4)  # missing text answer scores 0
    assert report.groups["perceptual_complexity=occlusion"].n == 1
    assert report.groups["source_task=block_count"].metrics["score"] == pytest.approx(0.95)
    assert any("unknown ids" in w for w in report.warnings)
    assert any("no prediction" in w for w in report.warnings)
    lo, hi = dumped["ci"]["score"]
    assert lo <= report.metrics["score"] <= hi
    assert set(dumped["chance"]) == {"random", "frequency"}


def test_eocbench_accuracy_and_msta(tmp_path):
    rows = [
        {"idx": 1, "video_path": "a.mp4", "question": "Where is <object 0>?", "choices": {"a": "On the placemat",
         "b": "In the sink", "c": "In the cabinet", "d": "On the shelf"}, "answer": ["B"],
         "choice_type": "single-choice", "video_type": "Location Retrospection", "video_time": 30.0},
        {"idx": 2, "video_path": "a.mp4", "question": "Which?", "choices": {"a": "x", "b": "y", "c": "z"},
         "answer": ["A", "C"], "choice_type": "multi-choice", "video_type": "Object Relationship"},
        {"idx": 3, "video_path": "b.mp4", "question": "How many seconds ago?", "choices": {}, "answer": ["17s"],
         "choice_type": "open-ended", "video_type": "Absolute Time Perception", "video_time": 40.0},
    ]
    path = _write_jsonl(tmp_path / "eoc.jsonl", rows)
    items = load_benchmark("eocbench", path).items
    assert items[0].labels["dimension"] == "Past" and items[1].labels["dimension"] == "Present"
    lines = [{"id": "1", "response": "The answer is B"}, {"id": "2", "response": "<choice>C, A</choice>"},
             {"id": "3", "response": "<object 0> about 15 seconds"}]
    report = score_predictions("eocbench", items, lines, n_boot=0)
    assert report.metrics["accuracy"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert report.metrics["msta"] == 0.5
    assert report.metrics["msta@0.2"] == 1.0 and report.metrics["msta@0.1"] == 0.0
    assert report.metrics["accuracy_strict"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert report.groups["dimension=Past"].metrics["accuracy"] == pytest.approx(0.75)
    # a missing prediction scores 0 even though the released parser maps "" to "a"
    missing = score_predictions("eocbench", items[1:2], [], n_boot=0, chance=False)
    assert missing.metrics["accuracy"] == 0.0


def test_cpbench_accuracy_control_and_drop(tmp_path):
    rows = []
    for k, count in enumerate([3, 4, 5, 6]):
        rows.append({"id": f"m{k}", "video": f"main/{k}.mp4", "count": count, "setting": "main",
                     "labels": {"camera": "pan", "seed": k}})
        rows.append({"id": f"c{k}", "video": f"control/{k}.mp4", "count": count, "setting": "control"})
    items = load_benchmark("cpbench", _write_jsonl(tmp_path / "manifest.jsonl", rows)).items
    assert items[0].labels == {"setting": "main", "count": "3", "camera": "pan", "seed": "0"}
    answers = {"m0": "3", "m1": "There are 5 cubes", "m2": "five", "m3": "no idea",
               "c0": "3", "c1": "4", "c2": "5", "c3": "7"}
    report = score_predictions("cpbench", items, [{"id": k, "response": v} for k, v in answers.items()], n_boot=100)
    m = report.metrics
    assert list(m)[:3] == ["accuracy", "control_accuracy", "drop"]
    assert m["accuracy"] == 0.5 and m["control_accuracy"] == 0.75 and m["drop"] == pytest.approx(0.25)
    assert m["within1"] == 0.75 and m["mae"] == pytest.approx(1 / 3) and m["bias"] == pytest.approx(1 / 3)
    assert m["accuracy_count_4"] == 0.0 and m["accuracy_count_5"] == 1.0
    assert report.model_extra["parse_failures"]["count"] == 1
    assert report.model_extra["chance"]["frequency"]["accuracy"] == 0.25  # balanced counts: any constant
    assert score_query("cpbench", items[0], 0, "3").metrics["correct"] == 1.0


def test_chance_response_kinds(vstat_file):
    items = load_benchmark("vstat", vstat_file).items
    rng = np.random.default_rng(0)
    letters = {chance_response("vstat", items[2], 0, items, "random", rng) for _ in range(50)}
    assert letters <= {"A", "B", "C"} and len(letters) > 1
    assert chance_response("vstat", items[2], 0, items, "frequency", rng) == "B"
    # best constant for MRA over targets {10, 0}: 10 scores 1 on the first and 0 on the second
    assert chance_response("vstat", items[0], 0, items, "frequency", random.Random(0)) in {"0", "10"}


def test_bootstrap_ci_is_clustered_by_video():
    values = [1.0] * 10 + [0.0] * 10
    spread = bootstrap_ci(values, [f"v{i}" for i in range(20)], n_boot=2000, seed=1)
    clustered = bootstrap_ci(values, ["a"] * 10 + ["b"] * 10, n_boot=2000, seed=1)
    assert spread[0] < 0.5 < spread[1]
    assert clustered == (0.0, 1.0)  # two clusters: a replicate is all-a, all-b or mixed
    assert bootstrap_ci([None, None], ["a", "b"]) is None


def test_cli_scores_json(tmp_path, shared_dir):
    data = shared_dir / "benchmarks/vcbench/vcbench_eval.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines()[:40]]
    preds = _write_jsonl(tmp_path / "p.jsonl",
                         [{"id": r["id"], "query_index": r["query_index"], "response": str(r["count"])} for r in rows])
    done = subprocess.run([str(STATEBOX), "score", "--bench", "vcbench", "--data", str(data), "--predictions",
                           str(preds), "--json", "--bootstrap", "50"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "vcbench" and report["n"] == 1000
    assert set(report["metrics"]) >= {"gpa", "moc", "uda"}
    assert "counting_subtype=O1-Snap" in report["groups"]
    table = subprocess.run([str(STATEBOX), "score", "--bench", "vcbench", "--data", str(data), "--predictions",
                            str(preds), "--bootstrap", "0"], capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and "gpa" in table.stdout and "breakdown by label" in table.stdout


@pytest.mark.parametrize(
    ("content", "line", "what"),
    [
        ('{"id": "0000", "query_index": 0, "response": "3"}\n{"id": "0000", "query_index": 1, "response": 4}\n',
         2, "field 'response' must be a string"),
        ('{"id": "0000", "query_index": 0, "response": "3"}\n\n{not json}\n', 3, "not valid JSON"),
        ('{"query_index": 0, "response": "3"}\n', 1, "missing field 'id'"),
        ('{"id": "0000", "response": "3"}\n', 1, "'query_index' is required"),
        ('["a list"]\n', 1, "expected a JSON object"),
    ],
)
def test_cli_malformed_predictions_exit_2_with_file_line(tmp_path, shared_dir, content, line, what):
    preds = tmp_path / "bad.jsonl"
    preds.write_text(content)
    done = subprocess.run([str(STATEBOX), "score", "--bench", "vcbench", "--data",
                           str(shared_dir / "benchmarks/vcbench/vcbench_eval.jsonl"), "--predictions", str(preds)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"{preds}:{line}: " in done.stderr and what in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_cli_malformed_data_exit_2(tmp_path):
    data = tmp_path / "manifest.jsonl"
    data.write_text('{"id": "a", "video": "a.mp4", "count": 3, "setting": "main"}\n'
                    '{"id": "b", "video": "b.mp4", "count": "four", "setting": "main"}\n')
    preds = _write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "response": "3"}])
    done = subprocess.run([str(STATEBOX), "score", "--bench", "cpbench", "--data", str(data), "--predictions",
                           str(preds)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"{data}:2: field 'count' must be an integer, got string" in done.stderr

