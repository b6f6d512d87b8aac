"""Running a planned run: C attempts at once, each written the moment it finishes.

This is the one place that wires benchmarks, sandbox, agents, auditor and
scorer together. Per attempt: a fresh attempt folder, a de-identified
workspace, honeytokens, the agent, the audit, the score, one store row.
Infrastructure failures (engine hiccups) are retried; agent failures never
are — retrying them would let a flaky agent roll the dice.
"""

from __future__ import annotations

import json
import random
import shutil
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from statebox.agents.base import Agent, AgentOptions, AttemptContext, SecretFacts, make_agent
from statebox.errors import InfrastructureError, UserError
from statebox.harness.plan import LoadedDataset, PlannedAttempt, RunConfig, load_datasets, plan_attempts
from statebox.harness.store import ResultRow, ResultStore
from statebox.policies.model import Policy, load_policy
from statebox.schema import Session, resolve_video

INFRA_RETRIES = 2
ATTEMPTS_DIR = "attempts"


class _AttemptEngine:
    """The run's sandbox engine as one attempt sees it: every container gets the attempt's
    extra mounts (honeytokens: root-owned 0444 files, mounted so that a read moves their host
    atime) and the run/attempt labels, without each agent having to know about them."""

    def __init__(self, engine: Any, mounts: list[Any], run_id: str = "", attempt_id: str = "") -> None:
        self._engine = engine
        self._mounts = mounts
        self._labels = {"run_id": run_id, "attempt_id": attempt_id}

    def _prepared(self, spec: Any) -> Any:
        update: dict[str, Any] = {k: v for k, v in self._labels.items() if v and not getattr(spec, k, "")}
        if self._mounts:
            present = {m.target for m in spec.mounts}
            extra = [m for m in self._mounts if m.target not in present]
            update["mounts"] = list(spec.mounts) + extra
        return spec.model_copy(update=update) if update else spec

    def run(self, spec: Any, *args: Any, **kwargs: Any) -> Any:
        return self._engine.run(self._prepared(spec), *args, **kwargs)

    def start(self, spec: Any, *args: Any, **kwargs: Any) -> Any:
        return self._engine.start(self._prepared(spec), *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


@dataclass
class RunServices:
    """Shared, lazily started services of a run (one engine, one gateway)."""

    policy: Policy
    engine: Any = None
    gateway: Any = None

    def close(self) -> None:
        if self.gateway is not None:
            try:
                self.gateway.close()
            except Exception:  # noqa: BLE001 - closing must not mask the run's own error
                pass


@dataclass
class AgentTally:
    total: int = 0
    done: int = 0
    failed: int = 0
    tokens: int = 0
    cost: float = 0.0
    statuses: Counter = field(default_factory=Counter)


def provider_of(options: AgentOptions, agent: Agent | None = None) -> str:
    """The provider an agent's model talks to; one rule, the gateway's, for the whole product.
    A CLI agent run without --model uses its CLI's own provider (its `provider` attribute)."""
    if options.provider:
        return options.provider
    fixed = getattr(agent, "provider", None)
    if fixed:
        return fixed
    if not options.model:
        return "anthropic"
    from statebox.sandbox.gateway import provider_for_model

    return provider_for_model(options.model)


def start_services(
    config: RunConfig, agents: dict[str, Agent], policy: Policy, gateway_options: dict[str, Any] | None = None
) -> RunServices:
    """Start only what the run's agents need, and fail before any container starts
    when something is missing (engine, API key)."""
    services = RunServices(policy=policy)
    if any(a.needs_sandbox for a in agents.values()):
        from statebox.sandbox.docker import SandboxEngine

        services.engine = SandboxEngine()  # also removes containers a killed run left behind
    if any(a.needs_gateway for a in agents.values()):
        from statebox.sandbox.gateway import Gateway

        gateway = Gateway(**(gateway_options or {}))
        for name, agent in agents.items():
            if agent.needs_gateway:
                options = AgentOptions.model_validate(config.agent_options.get(name, {}))
                gateway.check_ready(provider_of(options, agent))
        gateway.start()
        services.gateway = gateway
    return services


def preflight_videos(planned: list[PlannedAttempt], agents: dict[str, Agent]) -> None:
    """A missing video is the user's to fix: say which, before anything runs."""
    seen: set[str] = set()
    for p in planned:
        if not agents[p.attempt.agent].needs_sandbox:
            continue
        video = resolve_video(p.item, Path(p.dataset.videos) if p.dataset.videos else None)
        key = str(video)
        if key in seen:
            continue
        seen.add(key)
        if not video.is_file():
            raise UserError(f"{p.dataset.data}: item {p.item.id}: video not found: {video}")


def _write_json(path: Path, payload: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    tmp.replace(path)


def execute_attempt(
    planned: PlannedAttempt,
    agent: Agent,
    options: AgentOptions,
    services: RunServices,
    run_dir: Path,
    dataset_items: list,
) -> ResultRow:
    """Run one attempt end to end and return its store row (never raises for agent faults)."""
    attempt = planned.attempt
    policy = services.policy
    attempt_dir = run_dir / ATTEMPTS_DIR / attempt.attempt_id
    if attempt_dir.exists():  # left over from a killed run: that attempt was in flight, redo it
        shutil.rmtree(attempt_dir)
    attempt_dir.mkdir(parents=True)
    videos_dir = Path(planned.dataset.videos) if planned.dataset.videos else None
    video = resolve_video(planned.item, videos_dir)
    secret = SecretFacts(
        original_name=video.name,
        original_stem=video.stem,
        item_id=planned.item.id,
        # the benchmark's name, not a suite family's label: "bolts" is a word the question itself uses
        dataset=planned.dataset.bench,
    )
    workspace = None
    mounts: list[Any] = []
    started = time.time()
    session: Session | None = None
    retries = 0
    try:
        if agent.needs_sandbox:
            from statebox.sandbox.workspace import prepare_workspace

            workspace = prepare_workspace(
                planned.item,
                planned.query,
                video,
                policy,
                reencode=policy.reencode,
                dataset=secret.dataset,
            )
            if policy.audit.honeytokens:
                from statebox.audits.honeytokens import plant_honeytokens

                plan = plant_honeytokens(attempt_dir / "honeytokens", random.Random(attempt.attempt_id))
                mounts = list(plan.mounts)
                secret.honeytoken_values = list(plan.values)
                secret.honeytoken_paths = list(plan.paths)
        _write_json(
            attempt_dir / "attempt.json",
            {
                "attempt": attempt.model_dump(),
                "attempt_id": attempt.attempt_id,
                "bench": planned.dataset.bench,
                "item_id": planned.item.id,
                "question": planned.item.question,  # lets the auditor recognise searches for it
                "query_index": planned.query.index,
                "query_time": planned.query.time,
                "workspace_video": workspace.video_name if workspace else None,
                "secret": secret.__dict__,
            },
        )
        ctx = AttemptContext(
            attempt=attempt,
            item=planned.item,
            query=planned.query,
            attempt_dir=attempt_dir,
            policy=policy,
            options=options,
            secret=secret,
            workspace=workspace,
            engine=(
                _AttemptEngine(services.engine, mounts, attempt.run_id, attempt.attempt_id)
                if services.engine is not None
                else None
            ),
            gateway=services.gateway,
            dataset_items=dataset_items,
            videos_dir=videos_dir,
        )
        while True:
            try:
                session = agent.run(ctx)
                break
            except InfrastructureError as exc:
                retries += 1
                if retries > INFRA_RETRIES:
                    session = _failed_session(attempt.attempt_id, agent.name, f"infrastructure: {exc}", started)
                    break
                time.sleep(min(2.0 * retries, 5.0))
    except UserError as exc:  # e.g. the leak gate refused the workspace: this attempt cannot run
        session = _failed_session(attempt.attempt_id, agent.name, str(exc), started)
    except Exception as exc:  # noqa: BLE001 - an agent bug must not stop the other attempts
        session = _failed_session(attempt.attempt_id, agent.name, f"{type(exc).__name__}: {exc}", started)
    finally:
        if workspace is not None:
            try:
                workspace.cleanup()
            except Exception:  # noqa: BLE001
                pass
    assert session is not None
    (attempt_dir / "response.txt").write_text(session.response)
    _write_json(attempt_dir / "session.json", json.loads(session.model_dump_json()))
    return finish_row(planned, session, policy, attempt_dir, retries)


def _failed_session(attempt_id: str, agent: str, reason: str, started: float) -> Session:
    return Session(attempt_id=attempt_id, agent=agent, status="error", reason=reason.splitlines()[0][:500] if reason else "error", started_at=started, duration_s=time.time() - started)


def finish_row(planned: PlannedAttempt, session: Session, policy: Policy, attempt_dir: Path, retries: int) -> ResultRow:
    """Audit and score a finished session into its store row."""
    from statebox.audits.verdict import audit_attempt
    from statebox.scoring import score_query

    verdict = audit_attempt(attempt_dir, policy)
    scored = score_query(planned.dataset.bench, planned.item, planned.query.index, session.response)
    metrics = dict(getattr(scored, "metrics", scored) or {})
    return ResultRow(
        attempt_id=planned.attempt.attempt_id,
        run_id=planned.attempt.run_id,
        agent=planned.attempt.agent,
        dataset=planned.dataset.label,
        bench=planned.dataset.bench,
        item_id=planned.item.id,
        query_index=planned.query.index,
        epoch=planned.attempt.epoch,
        status=session.status,
        reason=session.reason,
        response=session.response,
        verdict=verdict.verdict,
        action=verdict.action,
        findings=[f.model_dump() for f in verdict.findings],
        metrics={k: (float(v) if v is not None else None) for k, v in metrics.items()},
        duration_s=round(session.duration_s, 3),
        input_tokens=session.usage.input_tokens,
        output_tokens=session.usage.output_tokens,
        cost_usd=session.usage.cost_usd,
        frames_decoded=len(session.frames.decoded),
        frames_model=session.frames.images_sent or len(session.frames.model_visible),
        retries=retries,
        finished_at=time.time(),
    )


ProgressHook = Callable[[str, ResultRow | None, AgentTally], None]


def run_planned(
    config: RunConfig,
    run_dir: Path,
    *,
    progress: ProgressHook | None = None,
    on_start: Callable[[dict[str, AgentTally]], None] | None = None,
    gateway_options: dict[str, Any] | None = None,
) -> ResultStore:
    """Run (or continue) a run: skip attempts already in the store, run the rest C at a time."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    policy = load_policy(config.policy)
    agents = {name: make_agent(name, AgentOptions.model_validate(config.agent_options.get(name, {}))) for name in config.agents}
    options = {name: AgentOptions.model_validate(config.agent_options.get(name, {})) for name in config.agents}
    if config.suite:
        for opts in options.values():
            opts.extra.setdefault("suite", True)
    datasets = load_datasets(config)
    planned = plan_attempts(config, datasets)
    preflight_videos(planned, agents)
    config.save(run_dir)
    store = ResultStore(run_dir)
    done = store.done_ids()
    items_by_dataset = {d.spec.label: d.items for d in datasets}
    tallies: dict[str, AgentTally] = {name: AgentTally() for name in config.agents}
    for p in planned:
        tallies[p.attempt.agent].total += 1
    todo = []
    for p in planned:
        if p.attempt.attempt_id in done:
            tallies[p.attempt.agent].done += 1
        else:
            todo.append(p)
    if on_start:
        on_start(tallies)
    if not todo:
        return store
    services = start_services(config, agents, policy, gateway_options)
    lock = threading.Lock()
    try:
        with ThreadPoolExecutor(max_workers=max(1, config.concurrency), thread_name_prefix="attempt") as pool:
            pending: dict[Future, PlannedAttempt] = {}
            queue = list(reversed(todo))

            def submit_next() -> None:
                p = queue.pop()
                fut = pool.submit(
                    execute_attempt,
                    p,
                    agents[p.attempt.agent],
                    options[p.attempt.agent],
                    services,
                    run_dir,
                    items_by_dataset[p.dataset.label],
                )
                pending[fut] = p

            for _ in range(min(len(queue), max(1, config.concurrency))):
                submit_next()
            while pending:
                finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for fut in finished:
                    p = pending.pop(fut)
                    row = fut.result()
                    store.add(row)
                    with lock:
                        tally = tallies[p.attempt.agent]
                        tally.done += 1
                        tally.statuses[row.status] += 1
                        if row.status not in ("ok", "abstain"):
                            tally.failed += 1
                        tally.tokens += row.input_tokens + row.output_tokens
                        tally.cost += row.cost_usd
                    if progress:
                        progress(p.attempt.agent, row, tally)
                    if queue:
                        submit_next()
    finally:
        services.close()
    return store


def datasets_for_report(config: RunConfig) -> list[LoadedDataset]:
    return load_datasets(config)
