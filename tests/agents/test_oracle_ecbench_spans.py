"""The oracle on the generated suite's EC-Bench families (issue 17): it answers in EC-Bench's official
output JSON with the true evidence spans, so `statebox run --suite` proves the span path end to
end (span_miou = 1.0, as `statebox score` gives on the same responses); it used to answer in
plain text, which scores tIoU 0."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from statebox.agents.baselines import ecbench_reply
from statebox.benchmarks.synthetic.suite import make_suite
from statebox.schema import Item, Query, Span
from statebox.scoring.parsing import ecbench_answer_and_clips
from statebox.scoring.spans import parse_clips

STATEBOX = [sys.executable, "-m", "statebox.cli"]


def _statebox(args: list[str], cwd) -> subprocess.CompletedProcess:
    done = subprocess.run(STATEBOX + args, cwd=cwd, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_ecbench_reply_is_the_official_json_with_the_items_spans():
    item = Item(id="q", benchmark="ecbench", video="v.mp4", question="How many?", answer_type="number", target="3",
                queries=[Query(index=0, target="3")], evidence=[Span(start=4, end=7), Span(start=3725, end=3730)])
    reply = ecbench_reply("3", item)
    data = json.loads(reply)
    assert data == {"results": [{"query_id": 1, "answer": "3",
                                 "clips": [["00:00:04", "00:00:07"], ["01:02:05", "01:02:10"]]}]}
    answer, clips = ecbench_answer_and_clips(reply)
    assert answer == "3" and parse_clips(clips) == [(4, 7), (3725, 3730)]


@pytest.fixture(scope="module")
def ec_suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("ec_suite")
    make_suite(out, size="tiny", seed=0, tasks=["ec_bolts", "ec_beeps"], workers=1)
    return out


def test_oracle_span_miou_is_one_through_statebox_run_suite(tmp_path, ec_suite):
    run_dir = tmp_path / "run"
    done = _statebox(["run", "--suite", str(ec_suite), "--agent", "oracle", "--run-dir", str(run_dir), "--json"],
                     tmp_path)
    results = {r["dataset"]: r for r in json.loads(done.stdout)["results"]}
    assert set(results) == {"ec_bolts", "ec_beeps"}
    for row in results.values():
        assert row["n"] >= 1
        assert row["metrics"]["span_miou"] == 1.0 and row["metrics"]["span_miou_hull"] == 1.0
        assert row["metrics"]["counting_accuracy"] == 1.0
    with sqlite3.connect(run_dir / "results.sqlite") as conn:
        rows = conn.execute("SELECT dataset, item_id, query_index, response FROM results").fetchall()
    assert rows and all(json.loads(r[3])["results"][0]["query_id"] == 1 for r in rows)
    # `statebox score` on the same responses gives the same span IoU.
    for dataset in results:
        preds = tmp_path / f"{dataset}.jsonl"
        preds.write_text("".join(json.dumps({"id": i, "query_index": q, "response": r}) + "\n"
                                 for d, i, q, r in rows if d == dataset))
        data = ec_suite / dataset / "dataset.csv"
        scored = json.loads(_statebox(["score", "--bench", "ecbench", "--data", str(data), "--predictions",
                                       str(preds), "--json"], tmp_path).stdout)
        assert scored["metrics"]["span_miou"] == pytest.approx(results[dataset]["metrics"]["span_miou"], abs=1e-12)
