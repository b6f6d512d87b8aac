"""The tracker baseline on the tiny suite: per-task scores next to the frequency baseline, abstentions, no network."""

from __future__ import annotations

import pytest

from statebox.tracker.evaluate import evaluate_suite

pytestmark = pytest.mark.docker

COUNTING_TASKS = ("cube_count", "block_count", "bolts", "streaming_count")


def test_tracker_beats_chance_on_the_suites_counting_questions(docker_engine, tracker_image, shipped_weights,
                                                               tiny_suite, tmp_path):
    score = evaluate_suite(tiny_suite, shipped_weights, engine=docker_engine, workdir=tmp_path, progress=print)
    print("\ntask              n  tracker  frequency  abstained  programs")
    for name, t in score.tasks.items():
        print(f"{name:16} {t.n:3}  {t.accuracy:7.2f}  {t.chance:9.2f}  {t.abstained:9}  {t.programs}")
    for row in score.answers:
        if not row["correct"]:
            print("  wrong:", row["task"], row["key"], repr(row["response"]), "target", row["target"], row["explanation"][:120])
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
