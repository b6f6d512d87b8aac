"""Running a planned run: C attempts at once, each written the moment it finishes.

This is the one place that wires benchmarks, sandbox, agents, auditor and
scorer together. Per attempt: a fresh attempt folder, a de-identified
workspace, honeytokens, the agent, the audit, the score, one store row.
Infrastructure failures (engine hiccups) are retried; agent failures never
are — retrying them would let a flaky agent roll the dice.
"""

from __future__ import annotations

import errno
import os
import queue as queue_mod
import random
import threading
import time
from collections import Counter
from concurrent.futures import ALL_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from statebox import signals
from statebox.agents.base import Agent, make_agent
from statebox.agents.streaming import AgentStream, can_stream
from statebox.attempt import AgentOptions, AttemptContext, SecretFacts, provider_for
from statebox.attempt_folder import ATTEMPTS_DIR, RUN_CONFIG_FILE, AttemptFolder, failed_session, inside
from statebox.audits.verdict import audit_attempt
from statebox.errors import InfrastructureError, StorageError, UserError, storage_error
from statebox.harness.attempt_sandbox import AttemptSandboxes, SandboxTracker
from statebox.harness.decoys import AttemptDecoys, plant_decoys
from statebox.harness.lock import hold_run_lock
from statebox.harness.plan import (
    AttemptJob,
    LoadedDataset,
    PlannedAttempt,
    RunConfig,
    SessionJob,
    agent_options,
    load_datasets,
    plan_attempts,
    session_order,
)
from statebox.harness.store import RESULTS_FILE, ResultRow, ResultStore
from statebox.harness.trust import materialise, plan_for_run
from statebox.harness.streaming_session import SessionWorkspace, history_note
from statebox.policies.model import Policy, load_policy
from statebox.sandbox.gateway import Gateway
from statebox.sandbox.provider import SandboxProvider, get_provider
from statebox.sandbox.spec import Mount
from statebox.sandbox.videocheck import check_query_time, inspect_video
from statebox.sandbox.workspace import Workspace, prepare_workspace
from statebox.schema import Item, Session, resolve_video
from statebox.scoring import score_query
from statebox.signals import Cancelled, Interrupted
from statebox.userfiles import make_output_folder

INFRA_RETRIES = 2
STOP_GRACE_S = 30.0  # on a stop: how long in-flight attempts get to unwind once their containers are gone
PREFLIGHT_PROBES = 8  # videos probed at once before a run starts


@dataclass
class RunServices:
    """What one process of a run shares between its attempts (one provider, one gateway, the
    agents, the datasets' items), and the run's stop switch.

    `cancel` is set when the run stops (a signal, a full disk): attempts then start no new
    container and raise `Cancelled` instead of returning a row; `stop_containers` removes
    the run's containers so the threads blocked on them unwind.
    """

    policy: Policy
    run_dir: Path = Path(".")
    run_id: str = ""
    provider: SandboxProvider | None = None
    gateway: Gateway | None = None
    agents: dict[str, Agent] = field(default_factory=dict)
    items: dict[str, list[Item]] = field(default_factory=dict)  # dataset label -> its items (chance baselines)
    tracker: SandboxTracker = field(default_factory=SandboxTracker)

    @property
    def cancel(self) -> threading.Event:
        return self.tracker.cancel

    def sandboxes_for(self, job: AttemptJob, mounts: list[Mount]) -> AttemptSandboxes | None:
        """The provider as this attempt sees it (its honeytoken mounts and labels, the stop switch)."""
        if self.provider is None:
            return None
        return AttemptSandboxes(self.provider, mounts=mounts, run_id=job.attempt.run_id,
                                attempt_id=job.attempt.attempt_id, tracker=self.tracker)

    def stop_containers(self) -> None:
        """Remove every container of this run this process started (long-lived ones included)."""
        self.tracker.stop_all()
        if self.provider is not None:
            try:
                self.provider.run_cleanup(self.run_id)
            except Exception:  # noqa: BLE001 - stopping must not mask the run's own error
                pass

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
    statuses: Counter[str] = field(default_factory=Counter)


def start_services(
    config: RunConfig,
    run_dir: Path,
    *,
    provider: str = "docker",
    gateway_options: dict[str, Any] | None = None,
    datasets: list[LoadedDataset] | None = None,
    agents: dict[str, Agent] | None = None,
) -> RunServices:
    """Start, once per process, only what the run's agents need, and fail before any container
    starts when something is missing (engine, API key). `datasets=None` loads them;
    `agents=None` makes them from the configuration."""
    policy = load_policy(config.policy)
    if agents is None:
        agents = {name: make_agent(name, agent_options(config, name)) for name in config.agents}
    loaded = datasets if datasets is not None else load_datasets(config)
    services = RunServices(policy=policy, run_dir=Path(run_dir), run_id=config.run_id, agents=agents,
                           items={d.spec.label: d.items for d in loaded})
    try:
        if any(a.needs_sandbox for a in agents.values()):
            services.provider = get_provider(provider)  # docker: also removes containers a killed run left
            services.provider.run_init(config.run_id)
        if any(a.needs_gateway for a in agents.values()):
            gateway = Gateway(**(gateway_options or {}))
            for name, agent in agents.items():
                if agent.needs_gateway:
                    gateway.check_ready(provider_for(agent_options(config, name), getattr(agent, "provider", None)))
            services.gateway = gateway
            gateway.start()
    except BaseException:  # a missing key, a signal: never leave a started gateway behind
        services.close()
        raise
    return services


def preflight_videos(planned: list[PlannedAttempt], agents: dict[str, Agent]) -> None:
    """A missing, empty or audio-only video, or a query time past a video's end, is the
    user's to fix: say which (one line, naming the annotation file and item), before anything runs."""
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
    pool = ThreadPoolExecutor(max_workers=min(PREFLIGHT_PROBES, len(keys)), thread_name_prefix="probe")
    try:
        futures = [pool.submit(_probe_quietly, key) for key in keys]
        signals.wait_futures(futures, return_when=ALL_COMPLETED)  # a stop signal raises here, not mid-probe
        results = [f.result() for f in futures]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # on a stop: the probes left are short and their own
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
    try:
        return inspect_video(video), None
    except UserError as exc:
        return None, exc


def run_attempt(job: AttemptJob, services: RunServices) -> ResultRow:
    """Run one attempt end to end and return its store row (never raises for agent faults).

    Raises `Cancelled` (the run is stopping: no row) and `StorageError` (a full or
    read-only disk: stop the run). Writes no store row: the caller (the head) does.
    """
    try:
        return _run_attempt(job, services)
    except (Cancelled, StorageError):
        raise
    except OSError as exc:  # writing the attempt folder or the workspace: a full or read-only disk
        raise _disk_fault(exc, services.run_dir) from exc


def _disk_fault(exc: OSError, run_dir: Path) -> BaseException:
    """A full or read-only disk as the run's `StorageError` (any other OSError as itself)."""
    owned = inside(exc.filename, run_dir)
    return storage_error(exc, None, "cannot write the run folder" if owned else "cannot write", owned=owned) or exc


def _folder(services: RunServices, job: AttemptJob) -> AttemptFolder:
    return AttemptFolder(services.run_dir, job.attempt.attempt_id)


def _finisher(job: AttemptJob, services: RunServices, folder: AttemptFolder) -> Callable[[Session, int], ResultRow]:
    """How the attempt folder's lifecycle turns this job's finished session into its row."""

    def finish(session: Session, retries: int) -> ResultRow:
        return finish_row(job.planned, session, services.policy, folder.path, retries)

    return finish


def _secret_facts(job: AttemptJob, video: Path) -> SecretFacts:
    return SecretFacts(
        original_name=video.name,
        original_stem=video.stem,
        item_id=job.item.id,
        # the benchmark's name, not a suite family's label: "bolts" is a word the question itself uses
        dataset=job.dataset.bench,
    )


def _attempt_record(job: AttemptJob, workspace: Workspace | None, secret: SecretFacts) -> dict[str, object]:
    """attempt.json's content (`AttemptFolder.write_record`); the auditor's `AttemptFacts` reads it."""
    return {
        "attempt": job.attempt.model_dump(),
        "attempt_id": job.attempt.attempt_id,
        "bench": job.dataset.bench,
        "item_id": job.item.id,
        "question": job.item.question,  # lets the auditor recognise searches for it
        "query_index": job.query.index,
        "query_time": job.query.time,
        "workspace_video": workspace.video_name if workspace else None,
        "secret": secret.__dict__,
    }


def _run_agent(agent: Agent, ctx: AttemptContext, services: RunServices, started: float) -> tuple[Session, int]:
    """The agent's session; an `InfrastructureError` is retried (twice), an agent failure never is."""
    retries = 0
    while True:
        if services.cancel.is_set():
            raise Cancelled("the run is stopping")
        try:
            return agent.run(ctx), retries
        except InfrastructureError as exc:
            if services.cancel.is_set():  # the stop removed its container: not the engine's fault
                raise Cancelled("the run is stopping") from None
            retries += 1
            if retries > INFRA_RETRIES:
                return failed_session(ctx.attempt.attempt_id, agent.name, f"infrastructure: {exc}", started), retries
            time.sleep(min(2.0 * retries, 5.0))


def _run_attempt(job: AttemptJob, services: RunServices) -> ResultRow:
    attempt = job.attempt
    policy = services.policy
    agent = services.agents[attempt.agent]
    folder = _folder(services, job)
    videos_dir = Path(job.dataset.videos) if job.dataset.videos else None
    with folder.lifecycle(agent.name, _finisher(job, services, folder), cancel=services.cancel) as run:
        video = resolve_video(job.item, videos_dir)
        secret = _secret_facts(job, video)
        workspace: Workspace | None = None
        mounts: list[Mount] = []
        if agent.needs_sandbox:
            workspace = prepare_workspace(job.item, job.query, video, policy, reencode=policy.reencode, dataset=secret.dataset)
            run.on_cleanup(workspace.cleanup)
            if policy.audit.honeytokens:  # host files outside the run folder (harness/decoys.py)
                decoys = plant_decoys(folder.path, random.Random(attempt.attempt_id), decoy_answer=job.decoy_answer)
                # once its containers are gone the decoys' snapshot is final (none when stopped)
                run.on_cleanup(lambda: decoys.finish(folder.path if run.session is not None else None), quiet=False)
                mounts = decoys.mounts
                secret.honeytoken_values = list(decoys.plan.values)
                secret.honeytoken_paths = list(decoys.plan.paths)
        folder.write_record(_attempt_record(job, workspace, secret))
        sandboxes = services.sandboxes_for(job, mounts)
        if sandboxes is not None:
            run.on_cleanup(lambda: sandboxes.attempt_cleanup(attempt.attempt_id))
            sandboxes.attempt_init(attempt.attempt_id)
        ctx = AttemptContext(
            attempt=attempt,
            item=job.item,
            query=job.query,
            attempt_dir=folder.path,
            policy=policy,
            options=job.options,
            secret=secret,
            workspace=workspace,
            engine=sandboxes,
            gateway=services.gateway,
            dataset_items=services.items.get(job.dataset.label, []),
            videos_dir=videos_dir,
        )
        run.session, run.retries = _run_agent(agent, ctx, services, run.started)
    return run.row


RowHook = Callable[[ResultRow], None]


def run_session(job: SessionJob, services: RunServices, on_row: RowHook | None = None) -> list[ResultRow]:
    """Run a streaming session (`--streaming session`): every query point of one item in one
    workspace and one agent conversation, in asking order; returns the rows of the points it
    asked and hands each to `on_row` the moment it is made (the head writes it at once, so a
    killed run keeps every point answered before the kill).

    Points in `job.answered` (a resumed session) are not asked again: their cut is re-added
    and their Q&A goes into the later instructions. Raises `Cancelled` and `StorageError`
    like `run_attempt`; every other failure becomes that point's failed row.
    """
    try:
        return _run_session(job, services, on_row)
    except (Cancelled, StorageError):
        raise
    except OSError as exc:
        raise _disk_fault(exc, services.run_dir) from exc


@dataclass
class _SessionKit:
    """What a streaming session's points share (made on its first asked point, undone when it ends)."""

    space: SessionWorkspace | None = None
    stream: AgentStream | None = None
    sandboxes: AttemptSandboxes | None = None
    decoys: AttemptDecoys | None = None

    def close(self, lead: AttemptJob) -> None:
        """Whatever happened: the conversation, the containers, the workspace, then the decoys (every
        point has its snapshot)."""
        undo: list[Callable[[], object]] = []
        if self.stream is not None:
            undo.append(self.stream.close)
        if self.sandboxes is not None:
            sandboxes = self.sandboxes
            undo.append(lambda: sandboxes.attempt_cleanup(lead.attempt.attempt_id))
        if self.space is not None:
            undo.append(self.space.cleanup)
        for step in undo:
            try:
                step()
            except Exception:  # noqa: BLE001 - tidying up must not mask the session's outcome
                pass
        if self.decoys is not None:
            self.decoys.finish(None)


def _run_session(job: SessionJob, services: RunServices, on_row: RowHook | None) -> list[ResultRow]:
    rows: list[ResultRow] = []

    def emit(row: ResultRow) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)

    todo = [j for j in job.jobs if j.attempt.attempt_id not in job.answered]
    if not todo:
        return rows
    lead = todo[0]
    agent = services.agents[lead.attempt.agent]
    if not agent.needs_sandbox or any(j.query.time is None for j in job.jobs):
        # host-side baselines never see a video, and an item without query times has nothing to stream
        for j in todo:
            emit(run_attempt(j, services))
        return rows
    if services.cancel.is_set():
        raise Cancelled("the run is stopping")
    policy = services.policy
    videos_dir = Path(lead.dataset.videos) if lead.dataset.videos else None
    video = resolve_video(lead.item, videos_dir)
    base_secret = _secret_facts(lead, video)
    kit = _SessionKit()
    try:
        for j in job.jobs:
            if services.cancel.is_set():
                raise Cancelled("the run is stopping")
            answered = job.answered.get(j.attempt.attempt_id)
            if kit.space is None:
                try:
                    kit.space = SessionWorkspace.open(lead.item, job.jobs[0].query, video, policy, dataset=base_secret.dataset)
                except (Cancelled, StorageError):
                    raise
                except Exception as exc:  # noqa: BLE001 - the leak gate, a bad video: no point of this session can run
                    _emit_all(emit, todo, rows, services, _session_fault(exc, services))
                    return rows
            space = kit.space
            if answered is not None:
                try:
                    space.advance(j.query)
                except (Cancelled, StorageError):
                    raise
                except Exception as exc:  # noqa: BLE001 - an earlier cut cannot be re-made: nothing left can be asked
                    _emit_all(emit, todo, rows, services, _session_fault(exc, services))
                    return rows
                space.replayed(j.query, answered)
                continue
            folder = _folder(services, j)
            with folder.lifecycle(agent.name, _finisher(j, services, folder), cancel=services.cancel) as point:
                secret = SecretFacts(**base_secret.__dict__)
                if kit.sandboxes is None:  # the session's first asked point: decoys planted once, mounted for the whole session
                    mounts: list[Mount] = []
                    if policy.audit.honeytokens:
                        kit.decoys = plant_decoys(folder.path, random.Random(lead.attempt.attempt_id), decoy_answer=lead.decoy_answer)
                        mounts = kit.decoys.mounts
                        base_secret.honeytoken_values = list(kit.decoys.plan.values)
                        base_secret.honeytoken_paths = list(kit.decoys.plan.paths)
                        secret = SecretFacts(**base_secret.__dict__)
                    sandboxes = services.sandboxes_for(lead, mounts)
                    assert sandboxes is not None
                    kit.sandboxes = sandboxes
                    sandboxes.attempt_init(lead.attempt.attempt_id)
                point.session, point.retries, kit.stream = _ask_point(agent, j, space, folder, secret, kit.sandboxes,
                                                                      kit.stream, services, point.started, points=len(todo))
                if kit.decoys is not None:
                    # the same decoys judge every point, each from its own snapshot: a read taints this point and the rest
                    kit.decoys.snapshot(folder.path)
            emit(point.row)
            space.answered(j.query, point.row.response)
    finally:
        kit.close(lead)
    return rows


def _session_fault(exc: Exception, services: RunServices) -> str:
    """Why a session could not start: a user error's own line; a full or read-only run disk is raised, not recorded."""
    if isinstance(exc, OSError) and storage_error(exc, owned=inside(exc.filename, services.run_dir)) is not None:
        raise exc
    return str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"


def _emit_all(emit: RowHook, todo: list[AttemptJob], rows: list[ResultRow], services: RunServices, reason: str) -> None:
    """Every point of the session not yet answered fails with `reason`."""
    made = {r.attempt_id for r in rows}
    for k in todo:
        if k.attempt.attempt_id not in made:
            emit(_session_failure(k, services, reason))


def _ask_point(agent: Agent, job: AttemptJob, space: SessionWorkspace, folder: AttemptFolder, secret: SecretFacts,
               sandboxes: AttemptSandboxes | None, stream: AgentStream | None, services: RunServices, started: float,
               *, points: int) -> tuple[Session, int, AgentStream | None]:
    """One query point of a session: the next cut and question, then the agent (its conversation
    when it has one, else one `run` on the shared workspace). Returns (session, retries, stream)."""
    retries = 0
    try:
        space.advance(job.query)
        view = space.question(job.query)
        folder.write_record(_attempt_record(job, view, secret))
        # the point's query as the agent sees it: which question file is this point's, and its place in the session
        query = job.query.model_copy(update={"meta": {**job.query.meta, "session_question_file": space.question_file,
                                                      "session_position": space.position}})
        item = job.item
        if not can_stream(agent) and space.history:  # agents that prompt from the question alone still get the Q&A
            item = item.model_copy(update={"question": f"{item.question.strip()}\n{history_note(space.history)}"})
        ctx = AttemptContext(attempt=job.attempt, item=item, query=query, attempt_dir=folder.path,
                             policy=services.policy, options=job.options, secret=secret, workspace=view,
                             engine=sandboxes, gateway=services.gateway,
                             dataset_items=services.items.get(job.dataset.label, []),
                             videos_dir=Path(job.dataset.videos) if job.dataset.videos else None)
        if not can_stream(agent):
            session, retries = _run_agent(agent, ctx, services, started)
            return session, retries, stream
        while True:
            if services.cancel.is_set():
                raise Cancelled("the run is stopping")
            try:
                if stream is None:
                    stream = agent.open_stream(ctx, points)  # type: ignore[attr-defined]
                return stream.ask(ctx), retries, stream
            except InfrastructureError as exc:
                if services.cancel.is_set():
                    raise Cancelled("the run is stopping") from None
                if stream is not None:  # its container is gone: the rest of the session gets a new one
                    stream.close()
                    stream = None
                retries += 1
                if retries > INFRA_RETRIES:
                    return failed_session(job.attempt.attempt_id, agent.name, f"infrastructure: {exc}", started), retries, None
                time.sleep(min(2.0 * retries, 5.0))
    except (Cancelled, StorageError):
        raise
    except Exception as exc:  # noqa: BLE001 - the cut could not be added, the leak gate, an agent bug: this point fails
        return folder.fault_session(exc, agent.name, started), retries, stream


def _session_failure(job: AttemptJob, services: RunServices, reason: str) -> ResultRow:
    """The row of a point that could not be asked (its session could not start): no agent ran, so
    neither a stop nor a disk fault is this point's to report (`cancel=None`)."""
    folder = _folder(services, job)
    with folder.lifecycle(job.attempt.agent, _finisher(job, services, folder), cancel=None) as run:
        run.fail(reason)
    return run.row


def finish_row(planned: PlannedAttempt, session: Session, policy: Policy, attempt_dir: Path, retries: int) -> ResultRow:
    """Audit and score a finished session into its store row."""
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
    executor: "AttemptExecutor | None" = None,
) -> ResultStore:
    """Run (or continue) a run: skip attempts already in the store, run the rest C at a time.

    `executor` is where attempts run: this process's threads (`LocalExecutor`, the default)
    or the nodes of a Ray cluster (`harness/cluster.py:RayExecutor`, lock role "ray-head").

    The process holds the run folder's lock (`harness/lock.py`) throughout: a second
    process on the same folder stops before touching anything. A full or read-only disk
    raises `StorageError`, a signal `Interrupted`; either way the attempts in flight are
    stopped (containers removed, never recorded) and every row already written stays.
    """
    run_dir = Path(run_dir)
    make_output_folder(run_dir, "run folder")
    executor = executor if executor is not None else LocalExecutor()
    with hold_run_lock(run_dir, role=executor.lock_role):
        _check_writable(run_dir)
        return _run_locked(config, run_dir, progress=progress, on_start=on_start, gateway_options=gateway_options,
                           executor=executor)


def _check_writable(run_dir: Path) -> None:
    """Up front, before any attempt: every place the run writes must be writable."""
    for path in (run_dir, run_dir / ATTEMPTS_DIR, run_dir / RESULTS_FILE):
        if path.exists() and not os.access(path, os.W_OK):
            code = errno.EROFS if _read_only_fs(path) else errno.EACCES
            raise storage_error(OSError(code, os.strerror(code), str(path)), path, "cannot write the run folder") or UserError(
                f"{path}: not writable")


def _read_only_fs(path: Path) -> bool:
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
    executor: "AttemptExecutor",
) -> ResultStore:
    policy = load_policy(config.policy)
    agents = {name: make_agent(name, AgentOptions.model_validate(config.agent_options.get(name, {}))) for name in config.agents}
    options = {name: AgentOptions.model_validate(config.agent_options.get(name, {})) for name in config.agents}
    if config.suite:
        for opts in options.values():
            opts.extra.setdefault("suite", True)
    datasets = load_datasets(config)
    planned = plan_attempts(config, datasets)
    if config.trust is not None and config.trust.active:  # the plan kept in the run; twins' videos before they are probed
        materialise(plan_for_run(config, datasets), out_dir=config.trust.out_dir)
    preflight_videos(planned, agents)
    signals.check()  # a stop during the checks above: before anything is written or started
    try:
        config.save(run_dir)
    except OSError as exc:
        raise storage_error(exc, run_dir / RUN_CONFIG_FILE, "cannot write the run folder") or exc
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
    sessions: dict[str, SessionJob] = {}
    if config.streaming == "session":
        sessions, batches = plan_sessions(planned, store, options)
    else:
        batches = []
    executor.start(DispatchContext(config=config, run_dir=run_dir, policy=policy, agents=agents, options=options,
                                   items_by_dataset=items_by_dataset, datasets=datasets, todo=todo,
                                   gateway_options=gateway_options, sessions=sessions))
    lock = threading.Lock()
    pending: dict[TaskFuture, list[PlannedAttempt]] = {}
    queue = list(reversed(todo))
    session_queue = list(reversed(batches))  # a session is one batch: all its points not yet stored

    def record(finished: list[tuple[PlannedAttempt, ResultRow]]) -> None:
        """Rows finished together are written in one transaction (the head is the one writer)."""
        if not finished:
            return
        store.add_many([row for _, row in finished])
        for p, row in finished:
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
        if sessions:
            batch = session_queue.pop()
        else:
            batch = [queue.pop() for _ in range(min(len(queue), max(1, executor.batch_size(queue[-1]))))]
        pending[executor.submit(batch)] = batch

    def more() -> bool:
        return bool(session_queue) if sessions else bool(queue)

    try:
        # The main thread's safe points: a stop signal raises `Interrupted` only here (before a
        # submit, and in the sliced wait for the next finished batch), never inside `record`'s
        # transaction or a thread's start (statebox/signals.py).
        signals.check()  # a stop while the services started
        while more() and len(pending) < executor.slots():
            submit_next()
            signals.check()
        while pending:
            # a session's rows arrive one query point at a time (executor.drain) before its future ends
            finished, _ = signals.wait_futures(list(pending), timeout=0.5 if sessions else None)
            signals.check()  # a batch a stopped worker ended (`Cancelled`) is never collected as a result
            done_rows: list[tuple[PlannedAttempt, ResultRow]] = list(executor.drain())
            for fut in finished:
                batch = pending.pop(fut)
                done_rows.extend(zip(batch, executor.collect(fut, batch)))
                done_rows.extend(executor.drain())
            record(done_rows)
            while more() and len(pending) < executor.slots():
                signals.check()
                submit_next()
    except BaseException as exc:
        executor.stop(pending, record)
        # a worker's `Cancelled` surfacing here while a signal stops the run is that signal's way out
        stop = signals.interrupted() if isinstance(exc, Cancelled) and signals.stopping() else exc
        if isinstance(stop, Interrupted) and not stop.detail:
            stop.detail = f"{_count(store)} rows kept in {run_dir / RESULTS_FILE}; continue with: statebox run --resume {run_dir}"
        if stop is not exc:
            raise stop from None
        raise
    finally:
        executor.close()
    return store


# A batch in flight: its rows on this host's threads; a Ray task's `BatchResult` on a cluster
# (harness/cluster_handoff.py). Only the executor that made it reads it (`collect`).
TaskFuture = Future[Any]
# writes finished attempts' rows (the head is the one writer)
RecordHook = Callable[[list[tuple[PlannedAttempt, ResultRow]]], None]


@dataclass
class DispatchContext:
    """What an executor needs to run a run's attempts (built once by `run_planned`)."""

    config: RunConfig
    run_dir: Path
    policy: Policy
    agents: dict[str, Agent]
    options: dict[str, AgentOptions]
    items_by_dataset: dict[str, list[Item]]
    datasets: list[LoadedDataset]
    todo: list[PlannedAttempt]
    gateway_options: dict[str, Any] | None = None
    sessions: dict[str, SessionJob] = field(default_factory=dict)  # streaming sessions by their first open point's id


class AttemptExecutor:
    """Where a run's attempts execute; `run_planned` only moves batches out and rows back.

    `submit(batch)` returns a Future; `collect(future, batch)` (main thread) returns the
    batch's rows in order, with each attempt's folder in `RUN_DIR/attempts/` before its row
    is written; `stop(pending, record)` stops what is in flight (rows of attempts that had
    finished are still recorded); `close()` releases everything.
    """

    lock_role = "run"

    def start(self, ctx: DispatchContext) -> None:
        raise NotImplementedError

    def slots(self) -> int:
        """Batches in flight at once."""
        raise NotImplementedError

    def batch_size(self, next_attempt: PlannedAttempt) -> int:
        return 1

    def submit(self, batch: list[PlannedAttempt]) -> TaskFuture:
        raise NotImplementedError

    def collect(self, fut: TaskFuture, batch: list[PlannedAttempt]) -> list[ResultRow]:
        rows: list[ResultRow] = fut.result()
        return rows

    def drain(self) -> list[tuple[PlannedAttempt, ResultRow]]:
        """Rows finished ahead of their batch (a streaming session's points), to be written now."""
        return []

    def stop(self, pending: dict[TaskFuture, list[PlannedAttempt]], record: RecordHook) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class LocalExecutor(AttemptExecutor):
    """C attempts at once in this process's threads (the work is in containers)."""

    def start(self, ctx: DispatchContext) -> None:
        self.ctx = ctx
        self.streamed: queue_mod.Queue[tuple[PlannedAttempt, ResultRow]] = queue_mod.Queue()
        self.services = start_services(ctx.config, ctx.run_dir, gateway_options=ctx.gateway_options,
                                       datasets=ctx.datasets, agents=ctx.agents)
        self.pool = ThreadPoolExecutor(max_workers=max(1, ctx.config.concurrency), thread_name_prefix="attempt")

    def slots(self) -> int:
        return max(1, self.ctx.config.concurrency)

    def submit(self, batch: list[PlannedAttempt]) -> TaskFuture:
        ctx = self.ctx
        session = ctx.sessions.get(batch[0].attempt.attempt_id) if ctx.sessions else None
        if session is not None:
            by_id = {p.attempt.attempt_id: p for p in batch}

            def run_one_session() -> list[ResultRow]:
                # each point's row goes to the head as soon as it exists; the future itself returns none
                run_session(session, self.services, lambda row: self.streamed.put((by_id[row.attempt_id], row)))
                return []

            return self.pool.submit(run_one_session)

        def run() -> list[ResultRow]:
            return [run_attempt(AttemptJob(attempt=p.attempt, dataset=p.dataset, item=p.item, query=p.query,
                                           options=ctx.options[p.attempt.agent], decoy_answer=p.decoy_answer),
                                self.services) for p in batch]

        return self.pool.submit(run)

    def drain(self) -> list[tuple[PlannedAttempt, ResultRow]]:
        out = []
        while True:
            try:
                out.append(self.streamed.get_nowait())
            except queue_mod.Empty:
                return out

    def stop(self, pending: dict[TaskFuture, list[PlannedAttempt]], record: RecordHook) -> None:
        def record_all(finished: list[tuple[PlannedAttempt, ResultRow]]) -> None:
            record(self.drain() + list(finished))

        _stop_in_flight(self.services, pending, record_all)
        try:
            record(self.drain())  # points that finished while the rest of their session was stopping
        except BaseException:  # noqa: BLE001 - the disk may be what stopped us
            pass

    def close(self) -> None:
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        services = getattr(self, "services", None)
        if services is not None:
            services.close()


def _stop_in_flight(services: RunServices, pending: dict[TaskFuture, list[PlannedAttempt]], record: RecordHook) -> None:
    """Stop the attempts in flight: no new container, remove the running ones, give their
    threads `STOP_GRACE_S` to unwind (workspaces cleaned in their `finally`). An attempt
    that had finished before the stop still gets its row; the stopped ones get none, and
    their half-written folders are wiped and redone by `--resume`."""
    services.cancel.set()
    deadline = time.monotonic() + STOP_GRACE_S
    while True:
        services.stop_containers()
        for fut in [f for f in pending if f.done()]:
            batch = pending.pop(fut)
            try:
                rows = fut.result()
            except BaseException:  # noqa: BLE001 - Cancelled, or the error being raised already
                continue
            try:
                record(list(zip(batch, rows)))
            except BaseException:  # noqa: BLE001 - the disk may be what stopped us
                pass
        if not pending or time.monotonic() >= deadline:
            break
        try:
            wait(list(pending), timeout=0.5)
        except BaseException:  # noqa: BLE001 - a second signal: keep stopping
            pass
    services.stop_containers()


def plan_sessions(planned: list[PlannedAttempt], store: ResultStore,
                  options: dict[str, AgentOptions]) -> tuple[dict[str, SessionJob], list[list[PlannedAttempt]]]:
    """Streaming sessions for the points not yet stored: {first open point's id: SessionJob} and,
    in plan order, each session's open points (one dispatch batch). Stored points come with their
    answers, so a resumed session passes them on instead of asking again."""
    done = store.done_ids()
    groups = [g for g in session_order(planned) if any(p.attempt.attempt_id not in done for p in g)]
    wanted = {p.attempt.attempt_id for g in groups for p in g if p.attempt.attempt_id in done}
    responses = {row.attempt_id: row.response for row in store.iter_rows() if row.attempt_id in wanted} if wanted else {}
    sessions: dict[str, SessionJob] = {}
    batches: list[list[PlannedAttempt]] = []
    for group in groups:
        jobs = [AttemptJob(attempt=p.attempt, dataset=p.dataset, item=p.item, query=p.query,
                           options=options[p.attempt.agent], decoy_answer=p.decoy_answer) for p in group]
        open_points = [p for p in group if p.attempt.attempt_id not in done]
        sessions[open_points[0].attempt.attempt_id] = SessionJob(
            jobs=jobs, answered={aid: responses.get(aid, "") for aid in (p.attempt.attempt_id for p in group) if aid in done})
        batches.append(open_points)
    return sessions, batches


def _count(store: ResultStore) -> int:
    try:
        return store.count()
    except Exception:  # noqa: BLE001
        return 0


def datasets_for_report(config: RunConfig) -> list[LoadedDataset]:
    return load_datasets(config)
