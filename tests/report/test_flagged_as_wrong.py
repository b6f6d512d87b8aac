"""Scores both ways (issue 26): next to all / clean-only / voided, the score with every flagged attempt
(suspicious or contaminated, whatever the policy's action) counted wrong; in `to_json` (what `run --json`
and `report --json` print) as `flagged_as_wrong`, and in the terminal leaderboard as `flag=0`."""

from __future__ import annotations

from rich.console import Console

from statebox.report.aggregate import score_run
from statebox.harness.store import ResultRow
from statebox.report.leaderboard import leaderboard_table
from statebox.schema import Item


def _items() -> list[Item]:
    return [Item(id=f"q{k}", benchmark="vstat", video="v.mp4", question="how many?", answer_type="number", target=4)
            for k in range(10)]


def _rows(agent: str, verdicts: dict[int, tuple[str, str]]) -> list[ResultRow]:
    """Every answer right; item k gets verdicts[k] (verdict, action), else clean."""
    return [ResultRow(attempt_id=f"{agent}-{k}", run_id="r", agent=agent, dataset="d", bench="vstat", item_id=f"q{k}",
                      query_index=0, response="4", verdict=verdicts.get(k, ("clean", "none"))[0],
                      action=verdicts.get(k, ("clean", "none"))[1]) for k in range(10)]


def test_flagged_attempts_count_wrong_whatever_the_action():
    rows = (_rows("flagger", {0: ("suspicious", "flag"), 1: ("contaminated", "void"), 2: ("suspicious", "none")})
            + _rows("honest", {}))
    scores = {s.agent: s for s in score_run(rows, {"d": _items()})}
    flagger, honest = scores["flagger"], scores["honest"]
    assert flagger.report.metrics["score"] == 1.0
    assert flagger.clean.metrics["score"] == 1.0  # clean-only: the 7 clean items, all right
    assert flagger.voided.metrics["score"] == 0.9  # only the voided attempt answers nothing
    assert flagger.flagged_as_wrong.metrics["score"] == 0.7  # all three flagged attempts wrong, denominator kept
    entry = flagger.to_json()
    assert entry["flagged_as_wrong"]["score"] == 0.7 and entry["voided_metrics"]["score"] == 0.9
    assert honest.to_json()["flagged_as_wrong"] == honest.to_json()["metrics"]


def _board(rows: list[ResultRow], width: int = 100) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(leaderboard_table(score_run(rows, {"d": _items()})))
    return console.export_text()


def test_the_leaderboard_shows_flag0_and_leaves_out_columns_that_repeat_a_number():
    both = _board(_rows("a", {0: ("suspicious", "flag"), 1: ("contaminated", "void")}))
    header = next(line for line in both.splitlines() if line.startswith("dataset"))
    # every answer right: clean-only equals the score and is left out; voided 90.0, flag=0 80.0 stay
    assert header.split()[:9] == ["dataset", "agent", "score", "95%", "CI", "voided", "flag=0", "n", "audit"], header
    assert "clean-only score equals the score on every row" in " ".join(both.split())
    assert "flag=0: every flagged attempt counted wrong" in " ".join(both.split())
    assert any(line.split()[2:] and "90.0" in line.split() and "80.0" in line.split() for line in both.splitlines())
    # the policy voids every flagged attempt: voided and flag=0 are the same numbers, shown once
    same = _board(_rows("a", {0: ("contaminated", "void"), 1: ("contaminated", "void")}))
    header = next(line for line in same.splitlines() if line.startswith("dataset"))
    assert "flag=0" in header.split() and "voided" not in header.split()
    assert "voided scores equal flag=0 on every row" in " ".join(same.split())
    clean = _board(_rows("a", {}))
    assert "flag=0" not in clean and "clean-only, voided and flagged-as-wrong scores equal the score" in " ".join(clean.split())
