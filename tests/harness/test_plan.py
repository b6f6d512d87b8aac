"""Planning is deterministic: the same configuration always yields the same attempt ids."""

from __future__ import annotations

from statebox.harness.plan import DatasetSpec, LoadedDataset, RunConfig, plan_attempts
from statebox.schema import Item, Query


def _dataset() -> LoadedDataset:
    items = [
        Item(id="s:0", benchmark="vstat", video="a.mp4", question="q", answer_type="number", target=3),
        Item(
            id="v1",
            benchmark="vcbench",
            video="b.mp4",
            question="how many",
            answer_type="number",
            queries=[Query(index=0, time=1.0, target=1), Query(index=1, time=2.0, target=2)],
        ),
    ]
    return LoadedDataset(spec=DatasetSpec(label="mix", bench="vstat", data="x"), items=items, warnings=[])


def test_plan_covers_agent_query_epoch_and_is_stable():
    config = RunConfig(run_id="r1", agents=["a", "b"], datasets=[_dataset().spec], epochs=2)
    first = plan_attempts(config, [_dataset()])
    again = plan_attempts(config, [_dataset()])
    assert len(first) == 2 * 2 * 3  # agents x epochs x (1 + 2 queries)
    assert [p.attempt.attempt_id for p in first] == [p.attempt.attempt_id for p in again]
    assert len({p.attempt.attempt_id for p in first}) == len(first)


def test_attempt_ids_change_with_run_id():
    a = plan_attempts(RunConfig(run_id="r1", agents=["a"], datasets=[_dataset().spec]), [_dataset()])
    b = plan_attempts(RunConfig(run_id="r2", agents=["a"], datasets=[_dataset().spec]), [_dataset()])
    assert {p.attempt.attempt_id for p in a}.isdisjoint({p.attempt.attempt_id for p in b})
