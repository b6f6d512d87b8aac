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
