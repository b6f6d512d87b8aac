"""EC-Bench replies in the paper's JSON: answer and evidence clips split the way the released pipeline does."""

from __future__ import annotations

import json

import pytest

from statebox.benchmarks import load_benchmark
from statebox.scoring import score_predictions, score_query
from statebox.scoring.parsing import ecbench_answer_and_clips
from statebox.scoring.predictions import PredictionLine

CLIPS = [["00:00:02", "00:00:04"]]


@pytest.mark.parametrize("text, expected", [
    ('{"results":[{"query_id":1,"answer":"2","clips":[["00:00:02","00:00:04"]]}]}', ("2", CLIPS)),
    ('{"enumeration":["a","b"],"answer":"2","clips":[["00:00:02","00:00:04"]]}', ("2", CLIPS)),
    ('Here it is:\n```json\n{"answer": ["bat", "ball"], "clips": []}\n```', ("bat, ball", [])),
    ('ANSWER: {"results":[{"answer":3}]}', ("3", None)),
    ("3", None),
    ("{not json}", None),
    ('{"count": 3}', None),
])
def test_split(text, expected):
    assert ecbench_answer_and_clips(text) == expected


@pytest.fixture()
def items(tmp_path):
    (tmp_path / "dataset.csv").write_text(
        "video_url,video_id,video_type,question_id,question_type,task_type,question,clips,answer,count_details\n"
        'http://x,v1,sports,q1,A,Counting,How many goals?,"[0:00:01,0:00:03]",2,\n'
        ',v1,sports,q2,A,Counting,How many fouls?,"[0:00:00,0:00:01], [0:00:02,0:00:03]",3,\n')
    return load_benchmark("ecbench", tmp_path / "dataset.csv").items


def test_json_replies_score_like_the_same_answers_with_clips_given(items):
    as_json = [PredictionLine("q1", 0, json.dumps({"results": [{"answer": "2", "clips": CLIPS}]})),
               PredictionLine("q2", 0, json.dumps({"answer": "4", "clips": [["00:00:00", "00:00:01"]]}))]
    given = [PredictionLine("q1", 0, "2", CLIPS), PredictionLine("q2", 0, "4", [["00:00:00", "00:00:01"]])]
    a, b = score_predictions("ecbench", items, as_json), score_predictions("ecbench", items, given)
    assert a.metrics == b.metrics
    assert a.metrics["span_miou"] == pytest.approx((1 / 3 + 1 / 2) / 2)  # [2,4] vs [1,3]; [0,1] vs [0,1]+[2,3]
    assert a.metrics["counting_accuracy"] == pytest.approx(0.5)
    row = score_query("ecbench", items[0], 0, as_json[0].response)
    assert row.metrics["span_iou"] == pytest.approx(1 / 3) and row.metrics["correct"] == 1.0


def test_plain_replies_score_as_before(items):
    report = score_predictions("ecbench", items, [PredictionLine("q1", 0, "2"), PredictionLine("q2", 0, "3 fouls")])
    assert report.metrics["counting_accuracy"] == 1.0 and report.metrics["span_miou"] == 0.0
    assert any("no predicted clips" in w for w in report.warnings)
    # clips given beside a JSON reply win over the reply's own
    row = score_query("ecbench", items[0], 0, json.dumps({"answer": "2", "clips": []}), clips="[0:00:01,0:00:03]")
    assert row.metrics["span_iou"] == 1.0
