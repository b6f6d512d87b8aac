"""Planning a run: which datasets, which items, and the attempts (agent x query x epoch).

The plan is a pure function of the run configuration, so re-running the same
command (or `--resume`) re-derives exactly the same attempt ids, and the store
tells which of them are already done.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from statebox.attempt import AgentOptions
from statebox.benchmarks import load_benchmark
from statebox.errors import UserError
from statebox.schema import BENCHMARKS, Attempt, Item, Query

RUN_CONFIG_FILE = "run.json"


class DatasetSpec(BaseModel):
    """One annotation file plus the folder its videos live in."""

    model_config = ConfigDict(extra="forbid")

    label: str  # unique inside a run, e.g. "cube_count" or "vcbench"
    bench: str
    data: str
    videos: str | None = None


class RunConfig(BaseModel):
    """Everything that defines a run; saved as RUN_DIR/run.json so `--resume` needs nothing else."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    agents: list[str]
    datasets: list[DatasetSpec]
    limit: int | None = None
    agent_limits: dict[str, int] = Field(default_factory=dict)  # per-agent cap (e.g. a costly agent on a few items)
    epochs: int = 1
    concurrency: int = 1
    policy: str = "default"
    agent_options: dict[str, Any] = Field(default_factory=dict)
    suite: str | None = None

    def save(self, run_dir: Path) -> None:
        path = Path(run_dir) / RUN_CONFIG_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.model_dump_json(indent=2))
        tmp.replace(path)

    @classmethod
    def load(cls, run_dir: Path) -> "RunConfig":
        path = Path(run_dir) / RUN_CONFIG_FILE
        if not path.exists():
            raise UserError(f"{run_dir}: nothing to resume (no {RUN_CONFIG_FILE})")
        try:
            return cls.model_validate(json.loads(path.read_text()))
        except (json.JSONDecodeError, ValueError) as exc:
            raise UserError(f"{path}: not a valid run configuration ({exc})") from exc


def new_run_id() -> str:
    return secrets.token_hex(4)


def run_id_for(fingerprint: dict[str, Any]) -> str:
    """The id (and default folder name, `runs/<id>`) of a run: a hash of what defines it, so the
    same command continues the same run. `fingerprint` is JSON-able (agents, datasets, limit,
    epochs, policy, options)."""
    text = json.dumps(fingerprint, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def datasets_from_suite(suite_dir: Path) -> list[DatasetSpec]:
    # the generator's package (numpy, the renderer) is loaded only by runs over a suite
    from statebox.benchmarks.synthetic.suite import load_suite

    suite = load_suite(Path(suite_dir))
    return [
        DatasetSpec(label=d.family, bench=d.bench, data=str(Path(d.data).resolve()), videos=str(Path(d.videos).resolve()))
        for d in suite.datasets
    ]


def dataset_from_flags(bench: str, data: Path, videos: Path | None) -> DatasetSpec:
    if bench not in BENCHMARKS:
        raise UserError(f"unknown benchmark {bench!r} (known: {', '.join(BENCHMARKS)})")
    if not Path(data).exists():
        raise UserError(f"{data}: annotation file not found")
    if videos is not None and not Path(videos).is_dir():
        raise UserError(f"{videos}: videos folder not found")
    return DatasetSpec(label=bench, bench=bench, data=str(Path(data).resolve()), videos=str(Path(videos).resolve()) if videos else None)


@dataclass(frozen=True)
class PlannedAttempt:
    attempt: Attempt
    dataset: DatasetSpec
    item: Item
    query: Query


class AttemptJob(BaseModel):
    """One attempt as data: everything a worker (a thread here, a Ray worker elsewhere) needs
    besides the run's services. Pydantic, so it pickles and JSON-dumps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attempt: Attempt
    dataset: DatasetSpec
    item: Item
    query: Query
    options: AgentOptions

    @property
    def planned(self) -> PlannedAttempt:
        return PlannedAttempt(attempt=self.attempt, dataset=self.dataset, item=self.item, query=self.query)


@dataclass
class LoadedDataset:
    spec: DatasetSpec
    items: list[Item]
    warnings: list[str]


def load_datasets(config: RunConfig) -> list[LoadedDataset]:
    """Load every dataset of a run, applying `--limit` (first N items of each)."""
    loaded = []
    for spec in config.datasets:
        result = load_benchmark(spec.bench, Path(spec.data), Path(spec.videos) if spec.videos else None)
        items = list(result.items)
        if config.limit is not None:
            items = items[: config.limit]
        loaded.append(LoadedDataset(spec=spec, items=items, warnings=list(result.warnings)))
    return loaded


def plan_attempts(config: RunConfig, datasets: list[LoadedDataset]) -> list[PlannedAttempt]:
    """Every (agent, dataset, item, query, epoch), in a stable order."""
    planned: list[PlannedAttempt] = []
    for agent in config.agents:
        cap = config.agent_limits.get(agent)
        for loaded in datasets:
            items = loaded.items[:cap] if cap is not None else loaded.items
            for epoch in range(config.epochs):
                for item in items:
                    for query in item.queries:
                        attempt = Attempt(
                            run_id=config.run_id,
                            agent=agent,
                            item_id=item.id,
                            query_index=query.index,
                            epoch=epoch,
                            dataset=loaded.spec.label,
                        )
                        planned.append(PlannedAttempt(attempt=attempt, dataset=loaded.spec, item=item, query=query))
    return planned


def agent_options(config: RunConfig, agent: str) -> AgentOptions:
    """An agent's options as the run gives them (a suite run marks them `extra.suite`)."""
    options = AgentOptions.model_validate(config.agent_options.get(agent, {}))
    if config.suite:
        options.extra.setdefault("suite", True)
    return options


def plan_jobs(config: RunConfig, datasets: list[LoadedDataset]) -> list[AttemptJob]:
    """`plan_attempts` as jobs, each carrying its agent's options."""
    options = {agent: agent_options(config, agent) for agent in config.agents}
    return [AttemptJob(attempt=p.attempt, dataset=p.dataset, item=p.item, query=p.query, options=options[p.attempt.agent])
            for p in plan_attempts(config, datasets)]
