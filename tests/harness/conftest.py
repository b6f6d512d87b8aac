"""Fixtures shared by the harness tests.

`one_attempt` runs a single attempt through the seam every executor uses (`runner.run_attempt`) with
an in-process agent, so a unit test of the retry rule, the stop path or storage errors needs no
engine, no dataset file and no CLI. It was copied between test_run_errors.py and test_stop_units.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from statebox.attempt import AgentOptions
from statebox.harness import runner
from statebox.harness.plan import AttemptJob, DatasetSpec, PlannedAttempt
from statebox.schema import Attempt, Item


@dataclass(frozen=True)
class OneAttempt:
    """One vstat item (a number question, target 3) planned for one agent, run through `run_attempt`."""

    tmp_path: Path

    def planned(self, agent_name: str) -> PlannedAttempt:
        item = Item(id="t:0", benchmark="vstat", video="clip.mp4", question="q?", answer_type="number", target=3)
        spec = DatasetSpec(label="vstat", bench="vstat", data=str(self.tmp_path / "d.json"))
        return PlannedAttempt(attempt=Attempt(run_id="r", agent=agent_name, item_id=item.id), dataset=spec,
                              item=item, query=item.queries[0])

    def run(self, services: runner.RunServices, agent, run_dir: Path):
        """The attempt with `agent` (named by its `name`) as the run's only agent; returns the store row."""
        p = self.planned(agent.name)
        services.agents = {p.attempt.agent: agent}
        services.run_dir = Path(run_dir)
        job = AttemptJob(attempt=p.attempt, dataset=p.dataset, item=p.item, query=p.query, options=AgentOptions())
        return runner.run_attempt(job, services)


@pytest.fixture()
def one_attempt(tmp_path: Path) -> OneAttempt:
    return OneAttempt(tmp_path)
