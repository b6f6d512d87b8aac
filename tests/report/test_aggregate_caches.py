"""The report's per-dataset caches answer only for the very items they were built from.

`report/aggregate.py` keeps a dataset's label index and its chance baselines across agents and views, since those
depend on the items only. They were keyed by the item ids alone, so two datasets whose items share ids (a suite copied
and relabelled, an annotation file edited between two reports in one process, two runs' suites in one live view) got
the first one's label groups and chance: found when the hostile-strings test's relabelled copy of the tiny suite ran
before the scoring test in one worker (CI, 2026-12-01), which then saw `perceptual_challenge=glare<img ...>` groups
in a suite that has none.
"""

from __future__ import annotations

from statebox.harness.store import ResultRow
from statebox.report import aggregate
from statebox.schema import Item


def _items(label: str, choices: list[str]) -> list[Item]:
    return [Item(id=f"q{n}", benchmark="vstat", video=f"v{n}.mp4", question="Which cup hides the ball?", choices=choices,
                 answer_type="mcq", target="A", labels={"perceptual_challenge": label}) for n in range(8)]


def _rows(items: list[Item]) -> list[ResultRow]:
    return [ResultRow(attempt_id=f"{item.id}-0", run_id="t", agent="a", dataset="d", bench="vstat", item_id=item.id,
                      response="A" if n % 2 else "B") for n, item in enumerate(items)]


def _fresh(items: list[Item]) -> aggregate.AgentDatasetScore:
    aggregate._CHANCE_CACHE.clear()
    aggregate._INDEX_CACHE.clear()
    return aggregate.score_agent_dataset("a", "d", "vstat", items, _rows(items))


def test_datasets_sharing_item_ids_keep_their_own_groups_and_chance():
    first, second = _items("glare", ["A", "B"]), _items("camera motion", ["A", "B", "C", "D"])
    _fresh(first)  # the caches now hold the first dataset's index and chance
    got = aggregate.score_agent_dataset("a", "d", "vstat", second, _rows(second))
    assert "perceptual_challenge=camera motion" in got.report.groups
    assert not any("glare" in key for key in got.report.groups)
    want = _fresh(second)
    for view in ("report", "clean", "voided", "flagged_as_wrong"):
        assert _dumped(getattr(got, view)) == _dumped(getattr(want, view)), view


def _dumped(report: object) -> object:
    return None if report is None else report.model_dump()  # type: ignore[attr-defined]


def test_the_same_items_are_scored_once_for_every_agent():
    """The caches still serve what they are for: every agent and view of one dataset's items shares one index."""
    items = _items("glare", ["A", "B"])
    _fresh(items)
    index = aggregate._item_index(items)
    assert aggregate._item_index(items) is index
    assert aggregate._item_index([items[k] for k in range(len(items))]) is index  # a new list of the same items
