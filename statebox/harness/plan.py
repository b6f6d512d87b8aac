"""Planning a run: which datasets, which items, and the attempts (agent x query x epoch).

The plan is a pure function of the run configuration, so re-running the same
command (or `--resume`) re-derives exactly the same attempt ids, and the store
tells which of them are already done.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator

from statebox.agents.base import agent_class
from statebox.attempt import AgentOptions, provider_for
from statebox.attempt_folder import RUN_CONFIG_FILE as RUN_CONFIG_FILE  # the run folder's config file; named where the folder is
from statebox.benchmarks import load_benchmark
from statebox.errors import UserError
from statebox.harness.trust import TrustPlan, TrustSettings, plan_for_run
from statebox.policies.model import load_policy
from statebox.replace_file import replace_text
from statebox.schema import BENCHMARKS, Attempt, Item, Query
from statebox.userfiles import CONFIG_MAX_BYTES, read_user_text



class DatasetSpec(BaseModel):
    """One annotation file plus the folder its videos live in."""

    model_config = ConfigDict(extra="forbid")

    label: str  # unique inside a run, e.g. "cube_count" or "vcbench"
    bench: str
    data: str
    videos: str | None = None


class Sample(BaseModel):
    """`--sample per-LABEL=N --seed S`: N items (each with all its query points) for every value
    of the item label LABEL, drawn with a seed. Why per value and not N overall: the papers'
    agent subsets are stratified (VSTAT's one question per category, a few per VCBench
    subtype), and a stratified draw is the only one that covers every value at any N."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str
    n: int = Field(ge=1)
    seed: int = 0

    @classmethod
    def parse(cls, text: str, seed: int = 0) -> "Sample":
        match = re.fullmatch(r"per-([^=\s]+)=(\d+)", text.strip())
        if not match or int(match.group(2)) < 1:
            raise UserError(f"--sample {text!r}: expected per-LABEL=N with N >= 1 (e.g. per-category=1)")
        return cls(label=match.group(1), n=int(match.group(2)), seed=seed)

    @property
    def flag(self) -> str:
        return f"per-{self.label}={self.n}"


def sample_items(items: list[Item], sample: Sample, where: str = "", *, strict: bool = True) -> tuple[list[Item], list[str]]:
    """The stratified draw: for each value of the label (items lacking it are left out, with a
    warning), `n` items chosen by a generator seeded with (seed, label, value), so a value's
    draw does not depend on the other values; the chosen items keep the file's order.
    A label no item has is the user's to fix: one line listing the labels the items do have
    (`strict=False`: no item, and a warning, for one dataset of several that lacks it)."""
    groups: dict[str, list[Item]] = {}
    missing = 0
    for item in items:
        value = item.labels.get(sample.label)
        if value is None:
            missing += 1
        else:
            groups.setdefault(value, []).append(item)
    if not groups and not strict:
        return [], [f"--sample {sample.flag}: no item of {where or 'this dataset'} has the label {sample.label!r}; "
                    "none of its items is run"]
    if not groups:
        known = sorted({key for item in items for key in item.labels})
        raise UserError(f"{where + ': ' if where else ''}--sample {sample.flag}: no item has the label {sample.label!r} "
                        f"(known labels: {', '.join(known) or 'none'})")
    chosen: set[str] = set()
    for value in sorted(groups):
        group = groups[value]
        rng = random.Random(f"{sample.seed}|{sample.label}|{value}")
        chosen.update(item.id for item in rng.sample(group, min(sample.n, len(group))))
    warnings = []
    if missing:
        warnings.append(f"--sample {sample.flag}: {missing} item(s) without the label {sample.label!r} left out")
    return [item for item in items if item.id in chosen], warnings


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
    agent_options: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)
    suite: str | None = None
    trust: TrustSettings | None = None  # --impossible-rate / --counterfactual (harness/trust.py)
    # VCBench online: "session" = one sandbox and one agent conversation per item (harness/streaming_session.py)
    streaming: Literal["independent", "session"] = "independent"
    sample: Sample | None = None  # --sample per-LABEL=N --seed S: a stratified subset of each dataset

    @model_validator(mode="after")
    def _pin_models(self) -> "RunConfig":
        """Every agent's options carry its effective model allow-list (`allowed_models`, see
        `pinned_models`), so run.json records it and every lease of the run uses it. A stored
        run.json keeps the list it was run with; one written before pinning gets it now."""
        missing = [a for a in self.agents if "allowed_models" not in self.agent_options.get(a, {})]
        if not missing:
            return self
        try:
            policy_models = list(load_policy(self.policy).budgets.models)
        except UserError:
            return self  # the run itself stops on the policy with one line; a report needs no pin
        options = dict(self.agent_options)
        for agent in missing:
            try:
                pinned = pinned_models(agent, options.get(agent, {}), policy_models)
            except UserError:
                continue  # an unknown agent: planning names it with one line
            allowed: list[JsonValue] = list(pinned)
            options[agent] = {**options.get(agent, {}), "allowed_models": allowed}
        self.agent_options = options
        return self

    def save(self, run_dir: Path) -> None:
        path = Path(run_dir) / RUN_CONFIG_FILE
        replace_text(path, self.model_dump_json(indent=2))

    @classmethod
    def load(cls, run_dir: Path) -> "RunConfig":
        path = Path(run_dir) / RUN_CONFIG_FILE
        if not path.exists() and not path.is_symlink():
            raise UserError(f"{run_dir}: nothing to resume (no {RUN_CONFIG_FILE})")
        text = read_user_text(path, what="run configuration", max_bytes=CONFIG_MAX_BYTES)  # regular file, capped
        try:
            return cls.model_validate(json.loads(text))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top)"
            raise UserError(f"{path}: not a valid run configuration ({where}: {first['msg']})") from None
        except (json.JSONDecodeError, ValueError, RecursionError) as exc:
            raise UserError(f"{path}: not a valid run configuration ({str(exc).splitlines()[0][:200]})") from None

    def fingerprint(self, *, command: str | None = None) -> str:
        """The run id (and default folder name, `runs/<id>`): a hash of what defines the run, so the
        same command continues the same run. The one place a run id is made: `statebox run`,
        `tracker eval` and the demo all call it (`command` names a command other than `run`, whose
        runs never share an id with run's).

        What counts: the agents as asked (a sweep's variants folded back to their agent, the swept
        values under `sweeps`), the datasets, limit, epochs, policy and the options (one mapping when
        every agent has the same, else per agent); sampling, trust rates, per-agent limits and
        streaming only when set, so the ids of runs made before each existed stay the same
        (tests/harness/test_run_ids.py holds ids the CLI made before this method). Not counted:
        `run_id`, `concurrency`, the suite folder, the trust plan's folder, and the model
        allow-lists the validator adds (they follow from the rest)."""
        agents: list[str] = []
        options: dict[str, dict[str, JsonValue]] = {}
        sweeps: dict[str, list[JsonValue]] = {}
        for name in self.agents:
            agent, _, variant = name.partition("@")
            opts = {k: v for k, v in self.agent_options.get(name, {}).items() if k != "allowed_models"}
            if variant:  # `mllm@frames=16`: the agent, swept over `frames`
                key = variant.partition("=")[0]
                value = opts.pop(key, None)
                if value not in sweeps.setdefault(key, []):
                    sweeps[key].append(value)
            if agent not in agents:
                agents.append(agent)
            options.setdefault(agent, opts)
        shared = list(options.values())
        fingerprint: dict[str, object] = {
            "agents": agents,
            "datasets": [d.model_dump() for d in self.datasets],
            "limit": self.limit,
            "epochs": self.epochs,
            "policy": self.policy,
            "options": shared[0] if shared and all(o == shared[0] for o in shared) else options,
        }
        if sweeps:
            fingerprint["sweeps"] = sweeps
        if self.sample is not None:
            fingerprint["sample"] = self.sample.model_dump()
        if self.trust is not None and self.trust.active:
            fingerprint["trust"] = {"impossible_rate": self.trust.impossible_rate, "counterfactual": self.trust.counterfactual_rate}
        if self.agent_limits:
            fingerprint["agent_limits"] = self.agent_limits
        if command is not None:
            fingerprint["command"] = command
        digest = run_id_for(fingerprint)
        if self.streaming != "independent":
            digest = run_id_for({"run": digest, "streaming": self.streaming})
        return digest

    def differing_keys(self, other: "RunConfig") -> list[str]:
        """What keeps `other` from continuing this (stored) configuration in the same run folder;
        [] when it may. A folder may grow by agents (each a leaderboard row of its own, the
        stored agents' rows keep their meaning); anything else that plans other attempts or
        judges them otherwise is another run: the datasets, limits, epochs, policy, a stored
        agent's options (its model, its pinned models), sampling, trust, streaming. Not
        compared: `run_id` (a folder keeps its own), `concurrency` (how many at once changes
        no result) and the trust plan's folder."""
        def comparable(config: RunConfig) -> dict[str, JsonValue]:
            dumped = config.model_dump(mode="json", exclude={"run_id", "concurrency", "agents", "agent_options"})
            if dumped.get("trust"):
                dumped["trust"].pop("out_dir", None)
            return dumped

        mine, theirs = comparable(self), comparable(other)
        differing = [key for key in mine if mine[key] != theirs.get(key)]
        dropped = [a for a in self.agents if a not in other.agents]
        if dropped:
            differing.insert(0, f"agents (without {', '.join(dropped)})")
        changed = [a for a in self.agents if a in other.agents
                   and self.agent_options.get(a, {}) != other.agent_options.get(a, {})]
        if changed:
            differing.append(f"agent_options of {', '.join(changed)}")
        return differing


def pinned_models(agent: str, options: dict[str, JsonValue], policy_models: list[str]) -> list[str]:
    """An agent's gateway model allow-list in a run ("pinned models by default"); [] is any model.

    Why: with an empty allow-list, `--model X` did not pin the agent to X; an agent could spend
    the run's key on any model the provider serves. The rule, first match wins:
    1. the policy's `budgets.models`, when it lists any: the policy says otherwise;
    2. `--model X`: X plus the helper models the agent documents (`helper_models`: Claude Code
       runs background tasks on its Haiku-class model);
    3. no `--model`: the agent's own default (`default_models`, per provider where the agent's
       default depends on it: mllm, video-agent, blind) plus its helpers;
    4. an agent that talks to no model, or that declares no default: [] (nothing to pin).
    """
    if policy_models:
        return list(policy_models)
    cls = agent_class(agent)
    if not getattr(cls, "needs_gateway", False):
        return []
    helpers = list(getattr(cls, "helper_models", ()))
    model = options.get("model")
    if model:
        return list(dict.fromkeys([str(model), *helpers]))
    defaults = getattr(cls, "default_models", None)
    if isinstance(defaults, dict):
        provider = provider_for(AgentOptions.model_validate({k: v for k, v in options.items() if k != "allowed_models"}),
                                fixed=getattr(cls, "provider", None))
        defaults = [defaults[provider]] if provider in defaults else None
    if not defaults:
        return []
    return list(dict.fromkeys([*defaults, *helpers]))


def new_run_id() -> str:
    return secrets.token_hex(4)


def run_id_for(fingerprint: Mapping[str, object]) -> str:
    """The id (and default folder name, `runs/<id>`) of a run: a hash of what defines it, so the
    same command continues the same run. `fingerprint` is JSON-able (agents, datasets, limit,
    epochs, policy, options)."""
    text = json.dumps(fingerprint, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def datasets_from_suite(suite_dir: Path) -> list[DatasetSpec]:
    from statebox.benchmarks.synthetic.suite import load_suite  # why: the generator's package (numpy, the renderer), only for runs over a suite

    suite = load_suite(Path(suite_dir))
    return [
        DatasetSpec(label=d.family, bench=d.bench, data=str(Path(d.data).resolve()), videos=str(Path(d.videos).resolve()))
        for d in suite.datasets
    ]


def parse_budgets(flag: str, text: str | None, kind: type) -> list[int] | list[float]:
    """`--frames 16,32,64` / `--fps 1,2,5` as a list of positive numbers (one value: today's single budget)."""
    if text is None:
        return []
    values = []
    for part in text.split(","):
        try:
            value = kind(part.strip())
        except ValueError:
            raise UserError(f"{flag} {text!r}: expected a number or a comma-separated list (e.g. 16,32,64)") from None
        if value <= 0:
            raise UserError(f"{flag} {text!r}: every value must be positive")
        if value not in values:
            values.append(value)
    return values


def variant_name(agent: str, key: str, value: float) -> str:
    """`mllm@frames=16`: a sweep variant's agent name, its own leaderboard row."""
    return f"{agent}@{key}={value:g}"


def sweep_variants(agents: list[str], options: dict[str, JsonValue], sweeps: dict[str, list[int] | list[float]]) -> dict[str, dict[str, JsonValue]]:
    """The agents a run plans, with their options, once the budget sweeps are expanded.

    A sweep of one value is an ordinary option (every agent gets it, as before sweeps existed).
    A sweep of several values makes each agent whose class lists the option in `budgets`
    (mllm: frames, fps; video-agent: frames) run once per value, as `name@frames=16`: separate
    agents to the planner, the store and the report, which adds the best-of row the papers
    report (report/aggregate.py). `--frames` and `--fps` sweeps are two series of variants,
    not a grid: mllm samples either N frames or an fps, never both. Agents that take no
    swept option run once, as given."""
    base = dict(options)
    multi: dict[str, list[int] | list[float]] = {}
    for key, values in sweeps.items():
        if len(values) == 1:
            base[key] = values[0]
        elif len(values) > 1:
            multi[key] = values
    out: dict[str, dict[str, JsonValue]] = {}
    swept_any = False
    for agent in agents:
        axes = [key for key in multi if key in getattr(agent_class(agent), "budgets", ())]
        if not axes:
            out[agent] = dict(base)
            continue
        swept_any = True
        for key in axes:
            for value in multi[key]:
                variant = {k: v for k, v in base.items() if k not in multi}
                variant[key] = value
                out[variant_name(agent, key, value)] = variant
    if multi and not swept_any:
        flags = " and ".join(f"--{key}" for key in multi)
        raise UserError(f"{flags}: a sweep needs an agent that takes it (mllm: frames, fps; video-agent: frames); "
                        f"none of {', '.join(agents)} does")
    return out


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
    decoy_answer: str | None = None  # an impossible item's plausible answer, for its decoys (harness/trust.py)


class AttemptJob(BaseModel):
    """One attempt as data: everything a worker (a thread here, a Ray worker elsewhere) needs
    besides the run's services. Pydantic, so it pickles and JSON-dumps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attempt: Attempt
    dataset: DatasetSpec
    item: Item
    query: Query
    options: AgentOptions
    decoy_answer: str | None = None  # an impossible item's plausible answer, for its decoys (harness/trust.py)

    @property
    def planned(self) -> PlannedAttempt:
        return PlannedAttempt(attempt=self.attempt, dataset=self.dataset, item=self.item, query=self.query,
                              decoy_answer=self.decoy_answer)


@dataclass
class LoadedDataset:
    spec: DatasetSpec
    items: list[Item]
    warnings: list[str]


def load_datasets(config: RunConfig) -> list[LoadedDataset]:
    """Load every dataset of a run, applying `--sample` (a stratified subset) and then `--limit`
    (first N items of each)."""
    results = [(spec, load_benchmark(spec.bench, Path(spec.data), Path(spec.videos) if spec.videos else None))
               for spec in config.datasets]
    sample = config.sample
    if sample is not None and len(results) > 1 and not any(
            sample.label in item.labels for _, result in results for item in result.items):
        known = sorted({key for _, result in results for item in result.items for key in item.labels})
        raise UserError(f"--sample {sample.flag}: no item of any dataset has the label {sample.label!r} "
                        f"(known labels: {', '.join(known) or 'none'})")
    several = len(results) > 1
    loaded = []
    for spec, result in results:
        items = list(result.items)
        warnings = list(result.warnings)
        if sample is not None:
            # a suite's datasets carry different labels: the label must exist somewhere, and a
            # dataset without it contributes nothing (N items per value of a label it lacks)
            items, more = sample_items(items, sample, where=spec.data, strict=not several)
            warnings.extend(more)
        if config.limit is not None:
            items = items[: config.limit]
        loaded.append(LoadedDataset(spec=spec, items=items, warnings=warnings))
    return loaded


# A plan is held whole (~1.3 KB an attempt, measured), so its size is judged before it is made: `run --epochs
# 1000000000` grew the host's memory until a MemoryError traceback (found by probe). A million attempts is far past
# a real evaluation (every benchmark statebox reads, several agents, several epochs) and ~1.3 GB of plan.
MAX_PLANNED_ATTEMPTS = 1_000_000


def plan_attempts(config: RunConfig, datasets: list[LoadedDataset]) -> list[PlannedAttempt]:
    """Every (agent, dataset, item, query, epoch), in a stable order."""
    planned: list[PlannedAttempt] = []
    trust = trust_plan(config, datasets)
    decoys = trust.decoy_answers()
    runs: list[tuple[str, LoadedDataset, list[Item]]] = []
    for agent in config.agents:
        cap = config.agent_limits.get(agent)
        for loaded in datasets:
            items = loaded.items[:cap] if cap is not None else loaded.items
            if trust.items:  # impossible items and twins of these items, mixed in unlabelled
                ids = {i.id for i in items}
                items = items + [t.item for t in trust.for_label(loaded.spec.label) if t.source_id in ids]
            runs.append((agent, loaded, items))
    total = config.epochs * sum(len(item.queries) for _, _, items in runs for item in items)
    if total > MAX_PLANNED_ATTEMPTS:
        raise UserError(f"the run asks for {total:,} attempts ({config.epochs:,} epochs of {total // config.epochs:,}); "
                        f"statebox plans at most {MAX_PLANNED_ATTEMPTS:,} in one run (fewer --epochs, agents or items)")
    for agent, loaded, items in runs:
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
                    planned.append(PlannedAttempt(attempt=attempt, dataset=loaded.spec, item=item, query=query,
                                                  decoy_answer=decoys.get(item.id)))
    return planned


def trust_plan(config: RunConfig, datasets: list[LoadedDataset]) -> TrustPlan:
    """The run's impossible items and counterfactual twins (empty unless the run asks for them)."""
    return plan_for_run(config, datasets)


def agent_options(config: RunConfig, agent: str) -> AgentOptions:
    """An agent's options as the run gives them (a suite run marks them `extra.suite`)."""
    options = AgentOptions.model_validate(config.agent_options.get(agent, {}))
    if config.suite:
        options.extra.setdefault("suite", True)
    return options


class SessionJob(BaseModel):
    """A streaming session as data: every query point of one (agent, dataset, item, epoch), in the
    order they are asked (query time, then index), and the answers already stored for some of them
    (a resumed session: those points are not asked again, their Q&A goes into the prompt).
    `runner.run_session(job, services, on_row)` returns one row per point asked (harness/streaming_session.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    jobs: list[AttemptJob]
    answered: dict[str, str] = Field(default_factory=dict)  # attempt id -> the stored response


def session_order(planned: list[PlannedAttempt]) -> list[list[PlannedAttempt]]:
    """Group planned attempts into sessions (agent, dataset, item, epoch), each in asking order
    (query time, then query index: a growing video is never asked about an earlier moment later)."""
    groups: dict[tuple[str, str, str, int], list[PlannedAttempt]] = {}
    for p in planned:
        groups.setdefault((p.attempt.agent, p.dataset.label, p.item.id, p.attempt.epoch), []).append(p)
    return [sorted(g, key=lambda p: (p.query.time if p.query.time is not None else 0.0, p.query.index))
            for g in groups.values()]


def plan_jobs(config: RunConfig, datasets: list[LoadedDataset]) -> list[AttemptJob]:
    """`plan_attempts` as jobs, each carrying its agent's options."""
    options = {agent: agent_options(config, agent) for agent in config.agents}
    return [AttemptJob(attempt=p.attempt, dataset=p.dataset, item=p.item, query=p.query, options=options[p.attempt.agent],
                       decoy_answer=p.decoy_answer)
            for p in plan_attempts(config, datasets)]
