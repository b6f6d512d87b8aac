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
import weakref
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from statebox.agents.base import Agent, AgentOptions, AttemptContext, SecretFacts, make_agent
from statebox.errors import InfrastructureError, StorageError, UserError, storage_error
from statebox.harness.lock import hold_run_lock
from statebox.harness.plan import LoadedDataset, PlannedAttempt, RunConfig, load_datasets, plan_attempts
from statebox.harness.store import RESULTS_FILE, ResultRow, ResultStore
from statebox.policies.model import Policy, load_policy
from statebox.schema import Session, resolve_video
from statebox.signals import Cancelled, Interrupted, remove_own_containers

INFRA_RETRIES = 2
ATTEMPTS_DIR = "attempts"
STOP_GRACE_S = 30.0  # on a stop: how long in-flight attempts get to unwind once their containers are gone
PREFLIGHT_PROBES = 8  # videos probed at once before a run starts


class _AttemptEngine:
    """The run's sandbox engine as one attempt sees it: every container gets the attempt's
    extra mounts (honeytokens: root-owned 0444 files, mounted so that a read moves their host
    atime) and the run/attempt labels, without each agent having to know about them."""

    def __init__(self, engine: Any, mounts: list[Any], run_id: str = "", attempt_id: str = "",
                 services: "RunServices | None" = None) -> None:
        self._engine = engine
        self._mounts = mounts
        self._labels = {"run_id": run_id, "attempt_id": attempt_id}
        self._services = services

    def _check(self) -> None:
        if self._services is not None and self._services.cancel.is_set():
            raise Cancelled("the run is stopping; no new container")

    def _prepared(self, spec: Any) -> Any:
        update: dict[str, Any] = {k: v for k, v in self._labels.items() if v and not getattr(spec, k, "")}
        if self._mounts:
            present = {m.target for m in spec.mounts}
            extra = [m for m in self._mounts if m.target not in present]
            update["mounts"] = list(spec.mounts) + extra
        return spec.model_copy(update=update) if update else spec

    def run(self, spec: Any, *args: Any, **kwargs: Any) -> Any:
        self._check()
        return self._engine.run(self._prepared(spec), *args, **kwargs)

    def start(self, spec: Any, *args: Any, **kwargs: Any) -> Any:
        self._check()
        sandbox = self._engine.start(self._prepared(spec), *args, **kwargs)
        if self._services is not None:
            self._services.track(sandbox)
            if self._services.cancel.is_set():  # the stop raced the start: never leave it running
                sandbox.stop()
                raise Cancelled("the run is stopping")
        return sandbox

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


@dataclass
class RunServices:
    """Shared, lazily started services of a run (one engine, one gateway), and its stop switch.

    `cancel` is set when the run stops (a signal, a full disk): attempts then start no new
    container and raise `Cancelled` instead of returning a row; `stop_containers` removes
    the run's containers so the threads blocked on them unwind.
    """

    policy: Policy
    engine: Any = None
    gateway: Any = None
    run_id: str = ""
    cancel: threading.Event = field(default_factory=threading.Event)
    _sandboxes: "weakref.WeakSet[Any]" = field(default_factory=weakref.WeakSet)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def track(self, sandbox: Any) -> None:
        with self._guard:
            self._sandboxes.add(sandbox)

    def stop_containers(self) -> None:
        """Remove every container of this run this process started (long-lived ones included)."""
        with self._guard:
            sandboxes = list(self._sandboxes)
        for sandbox in sandboxes:
            try:
                sandbox.stop()
            except Exception:  # noqa: BLE001 - already gone
                pass
        if self.engine is not None:
            remove_own_containers(getattr(self.engine, "api", None), self.run_id or None)

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
    services = RunServices(policy=policy, run_id=config.run_id)
    try:
        _start(services, config, agents, gateway_options)
    except BaseException:  # a missing key, a signal: never leave a started gateway behind
        services.close()
        raise
    return services


def _start(services: RunServices, config: RunConfig, agents: dict[str, Agent], gateway_options: dict[str, Any] | None) -> None:
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
        services.gateway = gateway
        gateway.start()


def preflight_videos(planned: list[PlannedAttempt], agents: dict[str, Agent]) -> None:
    """A missing, empty or audio-only video, or a query time past a video's end, is the
    user's to fix: say which (one line, naming the annotation file and item), before anything runs."""
    from concurrent.futures import ThreadPoolExecutor as _Pool

    from statebox.sandbox.videocheck import check_query_time

    # per video: the first attempt that uses it, and the attempt with its latest query time
    first: dict[str, PlannedAttempt] = {}
    latest: dict[str, PlannedAttempt] = {}
    for p in planned:
        if not agents[p.attempt.agent].needs_sandbox:
            continue
        video = resolve_video(p.item, Path(p.dataset.videos) if p.dataset.videos else None)
        key = str(video)
        if key not in first:
            first[key] = p
            if not video.is_file():
                raise UserError(f"{p.dataset.data}: item {p.item.id}: video not found: {video}")
        t = p.query.time
        if t is not None and (key not in latest or t > (latest[key].query.time or 0.0)):
            latest[key] = p
    if not first:
        return
    keys = list(first)
    with _Pool(max_workers=min(PREFLIGHT_PROBES, len(keys)), thread_name_prefix="probe") as pool:
        results = list(pool.map(_probe_quietly, keys))
    for key, (facts, error) in zip(keys, results):
        if error is not None:
            p = first[key]
            raise UserError(f"{p.dataset.data}: item {p.item.id}: {error}")
        if key in latest:
            p = latest[key]
            try:
                check_query_time(facts, p.query.time)
            except UserError as exc:
                raise UserError(f"{p.dataset.data}: item {p.item.id}: {exc}") from None


def _probe_quietly(video: str) -> tuple[Any, UserError | None]:
    from statebox.sandbox.videocheck import inspect_video

    try:
        return inspect_video(video), None
    except UserError as exc:
        return None, exc


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
    try:
        return _execute_attempt(planned, agent, options, services, run_dir, dataset_items)
    except (Cancelled, StorageError):
        raise
    except OSError as exc:  # writing the attempt folder or the workspace: a full or read-only disk
        err = storage_error(exc, None, "cannot write the run folder" if _under(exc.filename, run_dir) else "cannot write",
                            owned=_under(exc.filename, run_dir))
        if err is None:
            raise
        raise err from exc


def _under(path: Any, folder: Path) -> bool:
    if not path:
        return False
    try:
        Path(str(path)).resolve().relative_to(Path(folder).resolve())
        return True
    except (ValueError, OSError):
        return False


_DISK_WORDS = ("[Errno 28]", "No space left on device", "[Errno 30]", "Read-only file system", "[Errno 122]")


def _execute_attempt(
    planned: PlannedAttempt,
    agent: Agent,
    options: AgentOptions,
    services: RunServices,
    run_dir: Path,
    dataset_items: list,
) -> ResultRow:
    attempt = planned.attempt
    policy = services.policy
    if services.cancel.is_set():
        raise Cancelled("the run is stopping")
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
                _AttemptEngine(services.engine, mounts, attempt.run_id, attempt.attempt_id, services)
                if services.engine is not None
                else None
            ),
            gateway=services.gateway,
            dataset_items=dataset_items,
            videos_dir=videos_dir,
        )
        while True:
            if services.cancel.is_set():
                raise Cancelled("the run is stopping")
            try:
                session = agent.run(ctx)
                break
            except InfrastructureError as exc:
                if services.cancel.is_set():  # the stop removed its container: not the engine's fault
                    raise Cancelled("the run is stopping") from None
                retries += 1
                if retries > INFRA_RETRIES:
                    session = _failed_session(attempt.attempt_id, agent.name, f"infrastructure: {exc}", started)
                    break
                time.sleep(min(2.0 * retries, 5.0))
    except StorageError:  # a full or read-only disk stops the run; it is no fault of this attempt
        raise
    except UserError as exc:  # e.g. the leak gate refused the workspace: this attempt cannot run
        session = _failed_session(attempt.attempt_id, agent.name, str(exc), started)
    except OSError as exc:
        if storage_error(exc, owned=_under(exc.filename, run_dir)) is not None:
            raise
        session = _failed_session(attempt.attempt_id, agent.name, f"{type(exc).__name__}: {exc}", started)
    except Exception as exc:  # noqa: BLE001 - an agent bug must not stop the other attempts
        session = _failed_session(attempt.attempt_id, agent.name, f"{type(exc).__name__}: {exc}", started)
    finally:
        if workspace is not None:
            try:
                workspace.cleanup()
            except Exception:  # noqa: BLE001
                pass
    assert session is not None
    if services.cancel.is_set():  # stopped mid-way (its container may have been removed): redo on resume
        raise Cancelled("the run is stopping")
    if session.status != "ok" and any(w in (session.reason or "") for w in _DISK_WORDS):
        # an agent that caught a full/read-only disk itself: a row would make resume skip it forever
        raise StorageError(f"cannot write the attempt folder: {session.reason.splitlines()[0][:200]} ({attempt_dir})")
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
    """Run (or continue) a run: skip attempts already in the store, run the rest C at a time.

    The process holds the run folder's lock (`harness/lock.py`) throughout: a second
    process on the same folder stops before touching anything. A full or read-only disk
    raises `StorageError`, a signal `Interrupted`; either way the attempts in flight are
    stopped (containers removed, never recorded) and every row already written stays.
    """
    run_dir = Path(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise storage_error(exc, run_dir, "cannot create the run folder") or exc
    with hold_run_lock(run_dir):
        _check_writable(run_dir)
        return _run_locked(config, run_dir, progress=progress, on_start=on_start, gateway_options=gateway_options)


def _check_writable(run_dir: Path) -> None:
    """Up front, before any attempt: every place the run writes must be writable."""
    import errno
    import os

    for path in (run_dir, run_dir / ATTEMPTS_DIR, run_dir / RESULTS_FILE):
        if path.exists() and not os.access(path, os.W_OK):
            code = errno.EROFS if _read_only_fs(path) else errno.EACCES
            raise storage_error(OSError(code, os.strerror(code), str(path)), path, "cannot write the run folder") or UserError(
                f"{path}: not writable")


def _read_only_fs(path: Path) -> bool:
    import os

    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _run_locked(
    config: RunConfig,
    run_dir: Path,
    *,
    progress: ProgressHook | None,
    on_start: Callable[[dict[str, AgentTally]], None] | None,
    gateway_options: dict[str, Any] | None,
) -> ResultStore:
    policy = load_policy(config.policy)
    agents = {name: make_agent(name, AgentOptions.model_validate(config.agent_options.get(name, {}))) for name in config.agents}
    options = {name: AgentOptions.model_validate(config.agent_options.get(name, {})) for name in config.agents}
    if config.suite:
        for opts in options.values():
            opts.extra.setdefault("suite", True)
    datasets = load_datasets(config)
    planned = plan_attempts(config, datasets)
    preflight_videos(planned, agents)
    try:
        config.save(run_dir)
    except OSError as exc:
        raise storage_error(exc, run_dir / "run.json", "cannot write the run folder") or exc
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
    pool = ThreadPoolExecutor(max_workers=max(1, config.concurrency), thread_name_prefix="attempt")
    pending: dict[Future, PlannedAttempt] = {}
    queue = list(reversed(todo))

    def record(p: PlannedAttempt, row: ResultRow) -> None:
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

    try:
        for _ in range(min(len(queue), max(1, config.concurrency))):
            submit_next()
        while pending:
            finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in finished:
                p = pending.pop(fut)
                record(p, fut.result())
                if queue:
                    submit_next()
    except BaseException as exc:
        _stop_in_flight(services, pending, record)
        if isinstance(exc, Interrupted) and not exc.detail:
            exc.detail = f"{_count(store)} rows kept in {run_dir / RESULTS_FILE}; continue with: statebox run --resume {run_dir}"
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        services.close()
    return store


def _stop_in_flight(services: RunServices, pending: dict[Future, PlannedAttempt], record: Callable[..., None]) -> None:
    """Stop the attempts in flight: no new container, remove the running ones, give their
    threads `STOP_GRACE_S` to unwind (workspaces cleaned in their `finally`). An attempt
    that had finished before the stop still gets its row; the stopped ones get none, and
    their half-written folders are wiped and redone by `--resume`."""
    services.cancel.set()
    deadline = time.monotonic() + STOP_GRACE_S
    while True:
        services.stop_containers()
        for fut in [f for f in pending if f.done()]:
            p = pending.pop(fut)
            try:
                row = fut.result()
            except BaseException:  # noqa: BLE001 - Cancelled, or the error being raised already
                continue
            try:
                record(p, row)
            except BaseException:  # noqa: BLE001 - the disk may be what stopped us
                pass
        if not pending or time.monotonic() >= deadline:
            break
        try:
            wait(list(pending), timeout=0.5)
        except BaseException:  # noqa: BLE001 - a second signal: keep stopping
            pass
    services.stop_containers()


def _count(store: ResultStore) -> int:
    try:
        return store.count()
    except Exception:  # noqa: BLE001
        return 0


def datasets_for_report(config: RunConfig) -> list[LoadedDataset]:
    return load_datasets(config)
