"""`statebox tracker eval`'s plan and per-family table, without Docker: the table is read from a run folder."""

from __future__ import annotations

import json

import pytest

from statebox.errors import UserError
from statebox.harness.store import ResultRow, ResultStore
from statebox.harness.tracker_eval import BASELINE, TRACKER, suite_scores, tracker_run_config


def _row(agent: str, dataset: str, item: str, *, status: str = "ok", correct: float = 0.0, response: str = "") -> ResultRow:
    return ResultRow(attempt_id=f"{agent}-{dataset}-{item}", run_id="r", agent=agent, dataset=dataset, bench="vstat",
                     item_id=item, status=status, response=response, metrics={"correct": correct})


def _session(run_dir, row: ResultRow, **meta) -> None:
    folder = run_dir / "attempts" / row.attempt_id
    folder.mkdir(parents=True)
    events = [{"seq": 0, "kind": "network_attempt", "text": "dns x"}] if meta.pop("network", False) else []
    (folder / "session.json").write_text(json.dumps({"meta": meta, "events": events}))


def test_table_from_the_store(tmp_path):
    rows = [_row(TRACKER, "cube_count", "a", correct=1.0, response="3"),
            _row(TRACKER, "cube_count", "b", status="abstain"),
            _row(TRACKER, "bolts", "c", correct=0.0, response="1"),
            _row(BASELINE, "cube_count", "a", correct=1.0), _row(BASELINE, "cube_count", "b", correct=1.0),
            _row(BASELINE, "bolts", "c", correct=0.0)]
    store = ResultStore(tmp_path)
    for r in rows:
        store.add(r)
    store.close()
    _session(tmp_path, rows[0], program="count_max", weights="w.pt")
    _session(tmp_path, rows[1], program="count_max", explanation="saw too little")
    _session(tmp_path, rows[2], program="rotations", network=True)
    score = suite_scores(tmp_path)
    assert score.weights == "w.pt"
    cube, bolts = score.tasks["cube_count"], score.tasks["bolts"]
    assert (cube.n, cube.correct, cube.abstained, cube.chance_correct) == (2, 1, 1, 2.0)
    assert cube.programs == {"count_max": 2} and bolts.programs == {"rotations": 1}
    assert (bolts.n, bolts.correct, bolts.chance) == (1, 0, 0.0)
    assert score.network_attempts == 1
    abstained = [a for a in score.answers if a["abstain"]]
    assert [a["explanation"] for a in abstained] == ["saw too little"] and abstained[0]["correct"] == 0.0


def test_plan_refuses_unknown_tasks_and_non_suites(tmp_path, tiny_suite):
    with pytest.raises(UserError, match="not a suite folder"):
        tracker_run_config(tmp_path)
    with pytest.raises(UserError, match="--task nope"):
        tracker_run_config(tiny_suite, tasks=["nope"])
    config = tracker_run_config(tiny_suite, tasks=["cube_count"])
    assert config.agents == [TRACKER, BASELINE] and [d.label for d in config.datasets] == ["cube_count"]
    assert config.suite and config.agent_options[TRACKER]["weights"].endswith(".pt")
    assert tracker_run_config(tiny_suite, tasks=["cube_count"]).run_id == config.run_id  # same command, same run
    assert config.agent_options[TRACKER]["extra"] == {"stride": 1}  # --group 1 leaves the config as it was


def test_group_shares_containers_and_raises_concurrency(tiny_suite):
    """`tracker eval --group N`: the tracker agent's group option, and enough concurrent attempts to fill a group."""
    grouped = tracker_run_config(tiny_suite, tasks=["cube_count"], group=4, concurrency=2)
    assert grouped.agent_options[TRACKER]["extra"] == {"stride": 1, "group": 4}
    assert grouped.concurrency == 4
    assert tracker_run_config(tiny_suite, tasks=["cube_count"], group=2, concurrency=6).concurrency == 6
    assert grouped.run_id != tracker_run_config(tiny_suite, tasks=["cube_count"]).run_id


def _tracks_from_truth(truth_path, out_path, swap_after: int | None = None) -> None:
    """A tracks.jsonl made of the truth boxes (ids 1 and 2 swapped from frame `swap_after` on, if given)."""
    from statebox.tracker.runtime.metrics import load_truth

    truth = load_truth(truth_path)
    lines = []
    for frame in sorted(truth):
        objs = []
        for i, box in truth[frame]:
            if swap_after is not None and frame >= swap_after:
                i = {1: 2, 2: 1}.get(i, i)
            objs.append({"id": i, "cls": "cube", "xyxy": list(box), "conf": 0.9})
        lines.append(json.dumps({"frame": frame, "t": frame / 10, "detections": len(objs), "objects": objs}))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text("\n".join(lines) + "\n")


def test_tracking_metrics_sit_next_to_the_answers(tmp_path, tiny_suite):
    """HOTA / IDF1 / MOTA per task from each item's tracks.jsonl vs the suite's truth, for both sides."""
    from statebox.harness.tracker_eval import PEER_DIR

    config = tracker_run_config(tiny_suite, tasks=["cube_count"])
    config.save(tmp_path)
    gt = tiny_suite / "cube_count" / "gt"
    rows = [_row(TRACKER, "cube_count", "cube_count_control_0000", correct=1.0, response="3"),
            _row(TRACKER, "cube_count", "cube_count_main_0000", correct=0.0, response="2")]
    store = ResultStore(tmp_path)
    for r in rows:
        store.add(r)
    store.close()
    for r in rows:
        _session(tmp_path, r, program="unique_total")
        _tracks_from_truth(gt / f"{r.item_id}.tracks.jsonl", tmp_path / "attempts" / r.attempt_id / "tracker-out" /
                           "tracks.jsonl", swap_after=50 if "control" in r.item_id else None)
        _tracks_from_truth(gt / f"{r.item_id}.tracks.jsonl", tmp_path / PEER_DIR / f"{r.item_id}.ultralytics.tracks.jsonl")
    score = suite_scores(tmp_path)
    tracking = score.tasks["cube_count"].tracking
    assert tracking["ultralytics"]["HOTA"] == pytest.approx(1.0) and tracking["ultralytics"]["videos"] == 2
    assert tracking["statebox"]["IDF1"] < tracking["ultralytics"]["IDF1"]  # the swapped ids cost IDF1
    assert tracking["statebox"]["DetA"] == pytest.approx(1.0)  # ... and nothing else
    assert score.tracking["statebox"]["videos"] == 2
