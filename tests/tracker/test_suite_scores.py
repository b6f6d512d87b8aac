"""The tracker baseline on the tiny suite, run through the harness (`statebox tracker eval`):
per-task scores next to the frequency baseline, abstentions, no network, a normal run folder."""

from __future__ import annotations

import pytest

from statebox.harness.store import open_existing
from statebox.harness.tracker_eval import BASELINE, TRACKER, evaluate_suite, suite_scores

pytestmark = [pytest.mark.docker, pytest.mark.slow]  # the tracker over every counting question: minutes

COUNTING_TASKS = ("cube_count", "block_count", "bolts", "streaming_count")


def test_tracker_beats_chance_on_the_suites_counting_questions(docker_engine, tracker_image, shipped_weights,
                                                               tiny_suite, tmp_path):
    run_dir = tmp_path / "run"
    # groups of 8 attempts per container (one model load, the run's detection cache): the path `tracker
    # eval --group` and the demo take; one container per attempt is tests/tracker/test_tracking.py's
    score = evaluate_suite(tiny_suite, shipped_weights, run_dir=run_dir, concurrency=2, group=8, progress=print)
    print("\ntask              n  tracker  frequency  abstained  programs")
    for name, t in score.tasks.items():
        print(f"{name:16} {t.n:3}  {t.accuracy:7.2f}  {t.chance:9.2f}  {t.abstained:9}  {t.programs}")
    for row in score.answers:
        if not row["correct"]:
            print("  wrong:", row["task"], row["key"], repr(row["response"]), row["status"], row["explanation"][:120])
    assert set(COUNTING_TASKS) <= set(score.tasks)
    counting = [score.tasks[t] for t in COUNTING_TASKS]
    n = sum(t.n for t in counting)
    accuracy = sum(t.correct for t in counting) / n
    chance = sum(t.chance_correct for t in counting) / n
    assert accuracy >= chance + 0.15, f"counting accuracy {accuracy:.2f} vs frequency baseline {chance:.2f}"
    # every suite question maps to a program (none reaches the no-rule abstention) ...
    assert all(sum(t.programs.values()) == t.n and "none" not in t.programs for t in score.tasks.values())
    # ... and abstentions (a program that saw too little) are counted apart, empty and scored wrong
    abstained = [a for a in score.answers if a["abstain"]]
    assert sum(t.abstained for t in score.tasks.values()) == len(abstained)
    assert all(a["correct"] == 0.0 and a["response"] == "" for a in abstained)
    assert score.network_attempts == 0
    # a normal run folder: one row per query for the tracker and for the frequency baseline, audited clean
    store = open_existing(run_dir)
    rows = store.rows()
    store.close()
    tracker_rows = [r for r in rows if r.agent == TRACKER]
    assert len(tracker_rows) == sum(t.n for t in score.tasks.values())
    assert len([r for r in rows if r.agent == BASELINE]) == len(tracker_rows)
    assert all(r.verdict == "clean" for r in tracker_rows), [(r.attempt_id, r.findings) for r in tracker_rows if r.verdict != "clean"]
    assert (run_dir / "run.json").exists()
    # the table is read back from the store: a second read (no run) gives the same numbers
    again = suite_scores(run_dir, weights_name=score.weights)
    assert {k: v.model_dump() for k, v in again.tasks.items()} == {k: v.model_dump() for k, v in score.tasks.items()}
