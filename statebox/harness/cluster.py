"""Running a run's attempts on a Ray cluster; the head stays the run folder's one writer.

`statebox run ... --cluster ADDRESS` swaps the runner's thread pool for `RayExecutor`
(`runner.AttemptExecutor`); planning, the store, the lock, resume, scoring and the report
are the single-host ones. ADDRESS is `auto` (the cluster this machine belongs to, or
RAY_ADDRESS), `ray://host:10001` (Ray Client) or a head's `host:port` as `ray start --head
--port` prints it.

- Placement is Ray's: each batch is a task asking `num_cpus` (a node's CPUs are its attempt
  slots) and, for a tracker attempt on a GPU policy, `num_gpus=1`, so it lands on a GPU node;
  tasks SPREAD over the nodes. Host-side agents (oracle, chance) go in batches of
  `HOST_BATCH` (one task, one transaction of rows); an attempt that sees a video is one task,
  except tracker attempts run with `--option group=N`: up to N consecutive ones are one task
  and one container on its node (`cluster_worker.run_group`), so a GPU node serves N attempts
  per GPU. A batch never mixes agents (`_runs`: how many attempts of the same agent follow).
- Each node runs attempts with its own engine, gateway (key in its environment), workspaces
  and honeytokens (`cluster_worker.py`). Videos are shipped once per node through Ray's object
  store; an attempt's folder comes back packed with its row, is unpacked into
  `RUN_DIR/attempts/<id>/`, and only then is the row written (`store.add_many`).
- Agent options that name a file on the head (`--prompt-template`, the tracker's `--weights`,
  `--option KEY=FILE` for a KEY ending in `_file`/`_path`/`_template`/`_weights`) travel in the
  run spec the same way: each file put into the object store once per run, keyed by a hash of
  its bytes; the node writes it into its staging folder and rewrites the options to point
  there (`file_options`, `cluster_worker.place_files`/`rewrite_options`). A missing one stops
  the run with one line before anything is dispatched. At the end of the run every node
  removes its staging folder (`cluster_worker.end_run`).
- A node lost mid-attempt is an infrastructure failure: Ray retries the task on another node
  (`max_retries`); the head writes a row once, when a task's result arrives, so nothing is
  lost or duplicated (and the store's primary key refuses a duplicate anyway).
- Who may connect (`cluster_auth.py`): before `ray.init`, the driver asks the cluster whether it
  wants Ray's token and presents the one Ray's documented sources give (`RAY_AUTH_TOKEN`,
  `RAY_AUTH_TOKEN_PATH`, `~/.ray/auth_token`); no token, a wrong one, or a cluster without token
  auth (unless `--allow-unauthenticated-cluster`: its nodes hold provider keys) is one line.
- The head takes the run lock as `RunLock(run_dir, role="ray-head")`. On a stop (a signal, a
  full disk) it cancels its tasks (a KeyboardInterrupt in the worker: `SandboxEngine.run`
  removes its container on the way out), then every node removes the run's containers from
  its engine; at the end, live nodes remove containers of the run whose process died (a lost
  node on the same machine). `RUN_DIR/cluster.jsonl` says which node ran each attempt.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TextIO

from statebox import signals
from statebox.agents.base import Agent
from statebox.attempt import provider_for
from statebox.attempt_folder import AttemptFolder
from statebox.errors import UserError
from statebox.harness import cluster_auth, cluster_worker
from statebox.harness.cluster_handoff import BatchResult, RunSpec, RunSpecRef, ShippedDataset, ShippedFile, ShippedVideo
from statebox.harness.cluster_worker import file_option_values, group_size, unpack_folder
from statebox.harness.plan import AttemptJob, PlannedAttempt, RunConfig, agent_options
from statebox.harness.runner import AttemptExecutor, DispatchContext, RecordHook, TaskFuture
from statebox.harness.store import ResultRow
from statebox.sandbox.images import ensure_image, image_tag
from statebox.schema import resolve_video

HOST_BATCH = 32  # host-side attempts per task
MAX_RETRIES = 5  # Ray re-runs a task whose node or worker died this many times
RESUBMITS = 3  # and then the head itself resubmits the batch this many times
STOP_GRACE_S = 30.0
CLUSTER_LOG = "cluster.jsonl"

# which image an agent's containers use (default for any other sandboxed agent: sandbox)
AGENT_IMAGES = {"tracker": "tracker", "claude-code": "agents", "codex": "agents", "claude-code-scripted": "agents"}


def as_job(p: PlannedAttempt | AttemptJob, options: dict[str, Any]) -> AttemptJob:
    """A planned attempt as the typed job the attempt seam takes (a job stays itself)."""
    if isinstance(p, AttemptJob):
        return p
    return AttemptJob(attempt=p.attempt, dataset=p.dataset, item=p.item, query=p.query, options=options[p.attempt.agent],
                      decoy_answer=p.decoy_answer)


def _node_video_name(job: AttemptJob) -> AttemptJob:
    """A job whose item names its video by an absolute head path names it by file name (the node's copy)."""
    if Path(job.item.video).is_absolute():
        return job.model_copy(update={"item": job.item.model_copy(update={"video": Path(job.item.video).name})})
    return job


def file_options(config: RunConfig) -> dict[str, dict[str, Path]]:
    """agent -> {option: the file on the head} for each option of the run that names a file
    (`cluster_worker.FILE_FIELDS`, and `extra` keys with a `FILE_SUFFIXES` ending). A path that
    is not a file here is the user's to fix: one line, before anything is dispatched."""
    found: dict[str, dict[str, Path]] = {}
    for agent in config.agents:
        for option, value in file_option_values(agent_options(config, agent)).items():
            path = Path(value).expanduser()
            if not path.is_file():
                flag = f"--option {option[len('extra.'):]}=" if option.startswith("extra.") else f"--{option.replace('_', '-')} "
                raise UserError(f"{flag}{value} (agent {agent}): no such file on this machine; "
                                "the cluster's nodes get a copy of the head's file, so it must exist here")
            found.setdefault(agent, {})[option] = path.resolve()
    return found


def ship_files(found: dict[str, dict[str, Path]], put: Callable[[bytes], object]
               ) -> tuple[dict[str, ShippedFile], dict[str, dict[str, str]]]:
    """The run spec's `files` (content hash -> the file: each distinct file put once) and
    `file_options` (agent -> {option: content hash})."""
    files: dict[str, ShippedFile] = {}
    by_path: dict[Path, str] = {}
    by_agent: dict[str, dict[str, str]] = {}
    for agent, options in found.items():
        for option, path in options.items():
            digest = by_path.get(path)
            if digest is None:
                data = path.read_bytes()
                digest = by_path[path] = hashlib.sha256(data).hexdigest()[:24]
                if digest not in files:
                    files[digest] = ShippedFile(name=path.name, ref=put(data))
            by_agent.setdefault(agent, {})[option] = digest
    return files, by_agent


def _ray():
    try:
        import ray  # an optional dependency (statebox[cluster]); a run without --cluster never needs it
    except ImportError:
        raise UserError("--cluster needs Ray: pip install 'statebox[cluster]'") from None
    return ray


def normalise_address(address: str) -> str:
    address = (address or "").strip()
    if not address:
        raise UserError("--cluster needs an address: auto, ray://HOST:10001 or HOST:PORT")
    return address


def connect(address: str, *, allow_unauthenticated: bool = False, auth: cluster_auth.ClusterAuth | None = None) -> Any:
    """Connect this process to the cluster as a driver (idempotent), after `cluster_auth.admit`
    has checked the cluster's auth mode and the driver's token (one line for each refusal;
    `auth`: already admitted by the caller)."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    address = normalise_address(address)
    if auth is None:
        auth = cluster_auth.admit(address, allow_unauthenticated=allow_unauthenticated)
    cluster_auth.use_mode(auth.mode)
    try:
        ray.init(address=address, namespace="statebox", logging_level="ERROR", log_to_driver=False,
                 include_dashboard=False, configure_logging=True)
    except Exception as exc:  # noqa: BLE001 - admitted a moment ago, so whatever Ray raises now is one line too
        cluster_auth.restore_mode()
        raise UserError(f"cannot connect to the Ray cluster at {address} ({auth.mode} auth): "
                        f"{(str(exc).splitlines() or [type(exc).__name__])[0][:200]}") from exc
    signals.install()  # Ray's driver set-up may replace SIGTERM/SIGINT handling: ours again
    return ray


def disconnect() -> None:
    try:
        import ray  # an optional dependency (statebox[cluster]): absent, there is nothing to disconnect
    except ImportError:
        return
    if ray.is_initialized():
        ray.shutdown()
    cluster_auth.restore_mode()


def usable_nodes(ray) -> list[dict[str, Any]]:
    """Alive nodes that offer CPUs (a head started with --num-cpus=0 runs no attempts)."""
    return [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]


def _on_node(ray, node_id: str, fn: Callable, **options: Any):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # optional dependency (statebox[cluster])

    return ray.remote(fn).options(num_cpus=0, max_retries=0,
                                  scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False), **options)


def images_for(agents: dict[str, Agent]) -> list[str]:
    targets = []
    for name, agent in agents.items():
        if agent.needs_sandbox:
            for target in ("sandbox", AGENT_IMAGES.get(name, "sandbox")):
                if target not in targets:
                    targets.append(target)
    return targets


def providers_for(config: RunConfig, agents: dict[str, Agent]) -> list[str]:
    found: list[str] = []
    for name, agent in agents.items():
        if agent.needs_gateway:
            p = provider_for(agent_options(config, name), getattr(agent, "provider", None))
            if p not in found:
                found.append(p)
    return found


def _get(ray, ref, timeout: float | None = None) -> Any:
    """`ray.get(ref, timeout)` for the head's main thread: it waits in short slices, so a stop
    signal raises `Interrupted` at a safe point instead of waiting for a slow node
    (statebox/signals.py). Raises Ray's `GetTimeoutError` as `ray.get` does."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        signals.check()
        left = signals.SLICE_S if deadline is None else min(signals.SLICE_S, deadline - time.monotonic())
        ready, _ = ray.wait([ref], num_returns=1, timeout=max(left, 0.0))
        if ready or left <= 0:
            return ray.get(ref, timeout=0 if not ready else None)


def node_reports(ray, targets: list[str], providers: list[str], probe: bool, policy: str = "default",
                 gateway: bool = False) -> list[dict[str, Any]]:
    """Every usable node's report (engine, images, keys, probe), gathered in parallel."""
    nodes = usable_nodes(ray)
    refs = [_on_node(ray, n["NodeID"], cluster_worker.node_report).remote(targets, providers, probe, policy) for n in nodes]
    grefs = [_on_node(ray, n["NodeID"], cluster_worker.gateway_check).remote(providers) for n in nodes] if gateway else []
    reports = []
    for node, ref in zip(nodes, refs):
        try:
            report = _get(ray, ref, timeout=600)
        except Exception as exc:  # noqa: BLE001 - a node that cannot even answer
            report = {"node_id": node["NodeID"], "node": node.get("NodeManagerAddress", "?"),
                      "problems": [f"node {node['NodeID'][:8]}: did not answer ({str(exc).splitlines()[0][:160]})"]}
        report["resources"] = node.get("Resources", {})
        reports.append(report)
    for report, ref in zip(reports, grefs):
        try:
            report["problems"].extend(_get(ray, ref, timeout=60))
        except Exception as exc:  # noqa: BLE001
            report["problems"].append(f"{report['node']}: gateway check failed ({str(exc).splitlines()[0][:160]})")
    return reports


def cluster_problems(reports: list[dict[str, Any]], targets: list[str], head_code: str | None = None) -> list[str]:
    """The problems of every node, plus disagreements between nodes (code, image tags)."""
    problems = [p for r in reports for p in r.get("problems", [])]
    if not reports:
        problems.append("the cluster has no node with CPUs to run attempts (start workers with `ray start --address`)")
    if head_code:
        for r in reports:
            if r.get("code") and r["code"] != head_code:
                problems.append(f"{r['node']}: runs different statebox code ({r['code']}, head {head_code}); "
                                "install the same version on every node")
    for target in targets:
        tags = {r["node"]: r.get("images", {}).get(target, {}).get("tag") for r in reports if r.get("images")}
        distinct = {t for t in tags.values() if t}
        if len(distinct) > 1:
            problems.append(f"image {target}: nodes disagree on its content-hash tag ({', '.join(f'{n}={t}' for n, t in tags.items())}); "
                            "run `statebox cluster prepare`")
    return problems


class RayExecutor(AttemptExecutor):
    """The runner's dispatch on a Ray cluster (see the module docstring)."""

    lock_role = "ray-head"

    def __init__(self, address: str, *, host_batch: int = HOST_BATCH, task_cpus: float = 1.0,
                 preflight: bool = True, allow_unauthenticated: bool = False) -> None:
        self.address = normalise_address(address)
        self.allow_unauthenticated = allow_unauthenticated
        self.host_batch = max(1, host_batch)
        self.task_cpus = task_cpus
        self.preflight = preflight
        self._refs: dict[Future[Any], Any] = {}  # a task's future -> its ray.ObjectRef
        self._videos: dict[str, Any] = {}
        self._video_uses: dict[str, int] = {}
        self._engines: set[str] = set()
        self._lock = threading.Lock()
        self.per_node: dict[str, int] = {}
        self._log: TextIO | None = None
        self._saved_stdout: int | None = None  # fd 1 while Ray's driver is connected (`_quiet_stdout`)
        self._runs: dict[str, int] = {}  # attempt id -> attempts of the same agent from it on, in dispatch order
        self._finished: list[tuple[PlannedAttempt, ResultRow]] = []  # rows of a group one of whose attempts failed

    # -------------------------------------------------------------- start

    def start(self, ctx: DispatchContext) -> None:
        self.ctx = ctx
        self._quiet_stdout()
        try:
            self._start(ctx)
        except BaseException:  # the runner calls close() only once start() returned
            self.close()
            raise

    def _start(self, ctx: DispatchContext) -> None:
        self._files = file_options(ctx.config)  # a missing file: refused before connecting
        auth = cluster_auth.admit(self.address, allow_unauthenticated=self.allow_unauthenticated)
        if auth.mode != "token":
            print(f"statebox: warning: the Ray cluster at {self.address}: {auth.describe()}", file=sys.stderr, flush=True)
        ray = self.ray = connect(self.address, auth=auth)
        self._remote = ray.remote(cluster_worker.run_batch)
        agents = ctx.agents
        self.targets = images_for(agents)
        self.sandboxed = {n for n, a in agents.items() if a.needs_sandbox}
        nodes = usable_nodes(ray)
        problems: list[str] = []
        if self.preflight:
            reports = node_reports(ray, self.targets, providers_for(ctx.config, agents), probe=bool(self.targets),
                                   policy=self._policy_ref(ctx))
            problems = cluster_problems(reports, self.targets, cluster_worker.code_fingerprint())
            self._engines |= {r.get("docker_host", "") for r in reports}
        elif not nodes:
            problems.append("the cluster has no node with CPUs to run attempts")
        total_gpus = sum(n.get("Resources", {}).get("GPU", 0) for n in nodes)
        self.gpu_agents: set[str] = set()
        if "tracker" in agents and ctx.policy.gpu != "never" and total_gpus > 0:
            self.gpu_agents.add("tracker")
        if "tracker" in agents and ctx.policy.gpu == "require" and total_gpus == 0:
            problems.append("the policy requires a GPU for the tracker but no node of the cluster has one")
        if "tracker" in agents and ctx.policy.gpu == "require" and self.preflight:
            # a node may declare GPUs to Ray (`ray start --num-gpus`) that its engine cannot give a container
            for r in reports:
                if r.get("resources", {}).get("GPU", 0) > 0 and not r.get("gpu_runtime"):
                    problems.append(f"{r['node']}: offers {r['resources']['GPU']:g} GPU to Ray but its Docker engine gives "
                                    "containers none (no NVIDIA runtime or CDI spec; `statebox sandbox doctor` there), "
                                    "and the policy requires a GPU for the tracker")
        if problems:
            raise UserError("the cluster cannot run this run:\n" + "\n".join(problems))
        self._spec = RunSpecRef(ref=ray.put(self._run_spec(ctx)), key=f"{ctx.config.run_id}:{time.time_ns()}")
        for p in ctx.todo:
            if p.attempt.agent in self.sandboxed:
                key = self._video_key(p)
                self._video_uses[key] = self._video_uses.get(key, 0) + 1
        self._runs = same_agent_runs(ctx.todo)
        self.group_sizes = {name: cluster_group_size(agent) for name, agent in agents.items() if name in self.sandboxed}
        self._log = open(Path(ctx.run_dir) / CLUSTER_LOG, "a")

    def _policy_ref(self, ctx: DispatchContext) -> str:
        return ctx.config.policy if not Path(ctx.config.policy).is_file() else "default"

    def _run_spec(self, ctx: DispatchContext) -> RunSpec:
        config = ctx.config
        policy_yaml = Path(config.policy).read_text() if Path(config.policy).is_file() else None
        # keys never travel: a node's gateway takes its key from the node's environment
        gateway_options = {k: v for k, v in (ctx.gateway_options or {}).items() if "key" not in k.lower()}
        datasets = [ShippedDataset(spec=d.spec, key=f"dataset-{i}", items=d.items) for i, d in enumerate(ctx.datasets)]
        found = getattr(self, "_files", None)
        files, by_agent = ship_files(file_options(config) if found is None else found, self.ray.put)
        return RunSpec(config=config, policy_yaml=policy_yaml, datasets=datasets, gateway_options=gateway_options,
                       files=files, file_options=by_agent)

    # -------------------------------------------------------------- dispatch

    def slots(self) -> int:
        return max(1, self.ctx.config.concurrency)

    def batch_size(self, next_attempt: PlannedAttempt) -> int:
        """Host-side attempts `host_batch` to a task, a tracker group `group` to a task, any other
        attempt that sees a video alone; never past the last attempt of the same agent (the runner
        takes the next attempts in plan order, which holds each agent's attempts together)."""
        agent = next_attempt.attempt.agent
        cap = self.group_sizes.get(agent, 1) if agent in self.sandboxed else self.host_batch
        return max(1, min(cap, self._runs.get(next_attempt.attempt.attempt_id, 1)))

    @staticmethod
    def _video_path(p: PlannedAttempt) -> Path:
        return resolve_video(p.item, Path(p.dataset.videos) if p.dataset.videos else None)

    def _video_key(self, p: PlannedAttempt) -> str:
        path = self._video_path(p)
        st = path.stat()
        return hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:20]

    def _ship_videos(self, batch: list[PlannedAttempt]) -> dict[str, ShippedVideo]:
        shipped: dict[str, ShippedVideo] = {}
        for p in batch:
            if p.attempt.agent not in self.sandboxed:
                continue
            key = self._video_key(p)
            with self._lock:
                ref = self._videos.get(key)
                if ref is None:
                    ref = self._videos[key] = self.ray.put(self._video_path(p).read_bytes())
                self._video_uses[key] = self._video_uses.get(key, 1) - 1
                if self._video_uses[key] <= 0:  # the last attempt of this video: the task holds it now
                    self._videos.pop(key, None)
            rel = p.item.video if not Path(p.item.video).is_absolute() else Path(p.item.video).name
            shipped[p.attempt.attempt_id] = ShippedVideo(key=key, rel=str(rel), ref=ref)
        return shipped

    def _submit_ref(self, batch: list[PlannedAttempt]) -> Any:
        jobs = [_node_video_name(as_job(p, self.ctx.options)) for p in batch]
        # a streaming session (`--streaming session`) is one task: all its open points, one container
        session = self.ctx.sessions.get(batch[0].attempt.attempt_id) if self.ctx.sessions else None
        if session is not None:
            session = session.model_copy(update={"jobs": [_node_video_name(j) for j in session.jobs]})
        gpu = 1 if any(p.attempt.agent in self.gpu_agents for p in batch) else 0
        return self._remote.options(num_cpus=self.task_cpus, num_gpus=gpu, max_retries=MAX_RETRIES,
                                    scheduling_strategy="SPREAD").remote(self._spec, jobs, self._ship_videos(batch), session)

    def submit(self, batch: list[PlannedAttempt]) -> Future[list[ResultRow]]:
        ref = self._submit_ref(batch)
        fut = _future_of(ref)
        self._refs[fut] = ref
        return fut

    def collect(self, fut: Future[Any], batch: list[PlannedAttempt]) -> list[ResultRow]:
        ref = self._refs.pop(fut, None)
        for attempt in range(RESUBMITS + 1):
            try:
                result = signals.result(fut)  # done already, unless resubmitted: then a stop still ends the wait
                break
            except BaseException as exc:  # noqa: BLE001
                cause = _task_cause(exc)
                if isinstance(cause, UserError):
                    raise cause from None
                if _lost(exc) and attempt < RESUBMITS:  # nodes died more often than Ray retries: again
                    ref = self._submit_ref(batch)
                    fut = _future_of(ref)
                    continue
                if isinstance(exc, (KeyboardInterrupt, SystemExit)) or type(exc).__name__ == "Interrupted":
                    raise
                raise UserError(f"attempt {batch[0].attempt.attempt_id}: the cluster task failed: "
                                f"{str(cause or exc).splitlines()[0][:300]}") from None
        del ref
        return self.collect_rows(result, batch)

    def collect_rows(self, result: BatchResult, batch: list[PlannedAttempt]) -> list[ResultRow]:
        """The rows of a finished task. A tracker group one of whose attempts raised on the node
        (`result.error`) still has the others' rows: they are kept for `stop` to write, and
        the run stops as it would for that one attempt (on one host: its thread's error)."""
        rows = self._place(result, batch)
        error = result.error
        if error is not None:
            by_id = {p.attempt.attempt_id: p for p in batch}
            self._finished.extend((by_id[r.attempt_id], r) for r in rows)
            message = f"attempt {error.attempt_id}: {error.message or error.type}"
            raise UserError(message if error.user_error else f"{message} (on the cluster node, {error.type})")
        return rows

    def _place(self, result: BatchResult, batch: list[PlannedAttempt]) -> list[ResultRow]:
        """Folders first (into RUN_DIR/attempts/), then the rows go back to the runner to be written."""
        who = result.who
        rows = []
        for packed in result.results:
            row = packed.row
            if packed.folder:
                unpack_folder(packed.folder, AttemptFolder(Path(self.ctx.run_dir), row.attempt_id).path)
            rows.append(row)
        self._engines.add(who.docker_host)
        self.per_node[who.node] = self.per_node.get(who.node, 0) + len(rows)
        if self._log is not None:
            # `task`: the first attempt of the Ray task that ran it (a tracker group shares one task and container)
            task = batch[0].attempt.attempt_id if batch else ""
            for row in rows:
                self._log.write(json.dumps({"attempt_id": row.attempt_id, "node": who.node, "node_id": who.node_id,
                                            "docker_host": who.docker_host, "task": task,
                                            "group": result.group}) + "\n")
            self._log.flush()
        expected = [p.attempt.attempt_id for p in batch]
        got = [r.attempt_id for r in rows]
        if got != expected and not (result.error is not None and got == [a for a in expected if a in set(got)]):
            raise UserError("the cluster returned rows for other attempts than it was given")
        return rows

    # -------------------------------------------------------------- stop and close

    def _sweep(self, only_dead: bool, end: bool = False) -> None:
        """Every node removes the run's containers (`only_dead`: those whose process died);
        `end`: and the run's staging folder."""
        ray = getattr(self, "ray", None)
        if ray is None:
            return
        try:
            nodes = usable_nodes(ray)
            run_id = self.ctx.config.run_id
            refs = [_on_node(ray, n["NodeID"], cluster_worker.sweep).remote(run_id, sorted(self._engines), only_dead)
                    for n in nodes]
            if end:
                refs += [_on_node(ray, n["NodeID"], cluster_worker.end_run).remote(run_id) for n in nodes]
            ray.wait(refs, num_returns=len(refs), timeout=60)
        except Exception:  # noqa: BLE001 - stopping must not mask the run's own error
            pass

    def stop(self, pending: dict[TaskFuture, list[PlannedAttempt]], record: RecordHook) -> None:
        finished, self._finished = self._finished, []
        if finished:  # the other attempts of a group whose one attempt stopped the run
            record(finished)
        ray = getattr(self, "ray", None)
        if ray is None:
            return
        for fut in list(pending):
            ref = self._refs.get(fut)
            if ref is not None and not fut.done():
                try:
                    ray.cancel(ref, force=False)
                except Exception:  # noqa: BLE001
                    pass
        self._sweep(only_dead=False)
        deadline = time.monotonic() + STOP_GRACE_S
        while pending and time.monotonic() < deadline:
            for fut in [f for f in pending if f.done()]:
                batch = pending.pop(fut)
                try:
                    result = fut.result()
                    rows = self._place(result, batch)
                    batch = [p for p in batch if p.attempt.attempt_id in {r.attempt_id for r in rows}]
                    # A task may come back after our sweep removed its container (a cancel does not
                    # always reach a worker blocked on the engine): an attempt that did not end
                    # "ok" during a stop may have been ended by the stop, so it gets no row and
                    # --resume redoes it (a stopped attempt never gets a row, as on one host).
                    record([(job, row) for job, row in zip(batch, rows) if row.status in ("ok", "abstain")])
                except BaseException:  # noqa: BLE001 - cancelled, or the error that stops us
                    pass
            if pending:
                time.sleep(0.2)
        self._sweep(only_dead=False)

    def close(self) -> None:
        try:
            if getattr(self, "ray", None) is not None and getattr(self, "ctx", None) is not None:
                self._sweep(only_dead=True, end=True)  # containers of dead processes (a lost node on this host); staging
        finally:
            if self._log is not None:
                self._log.close()
            self._refs.clear()
            self._videos.clear()
            disconnect()
            self._restore_stdout()

    def _quiet_stdout(self) -> None:
        """Ray's driver may print (a worker died, a node left) to stdout, which `run --json`
        keeps for its one JSON document: while connected, fd 1 goes to stderr."""
        try:
            sys.stdout.flush()
            self._saved_stdout = os.dup(1)
            os.dup2(2, 1)
        except OSError:
            self._saved_stdout = None

    def _restore_stdout(self) -> None:
        saved = self._saved_stdout
        if saved is None:
            return
        try:
            sys.stdout.flush()
            os.dup2(saved, 1)
        finally:
            os.close(saved)
            self._saved_stdout = None


def same_agent_runs(todo: list[PlannedAttempt]) -> dict[str, int]:
    """attempt id -> how many attempts of the same agent follow it in dispatch order (itself included)."""
    runs: dict[str, int] = {}
    count, agent = 0, ""
    for p in reversed(todo):
        count = count + 1 if p.attempt.agent == agent else 1
        agent = p.attempt.agent
        runs[p.attempt.attempt_id] = count
    return runs


def cluster_group_size(agent: Agent) -> int:
    """Attempts of `agent` per Ray task: the tracker's `group` option (one container each), else 1."""
    return group_size(agent)


def _future_of(ref: Any) -> Future[Any]:
    try:
        return ref.future()
    except Exception:  # noqa: BLE001 - a client ref without .future(): wait in a thread
        import ray  # an optional dependency (statebox[cluster]); connected by now

        fut: Future[Any] = Future()

        def wait() -> None:
            try:
                fut.set_result(ray.get(ref))
            except BaseException as exc:  # noqa: BLE001
                fut.set_exception(exc)

        threading.Thread(target=wait, daemon=True).start()
        return fut


def _task_cause(exc: BaseException) -> BaseException | None:
    cause = getattr(exc, "cause", None)
    if cause is not None:
        return cause
    try:
        return exc.as_instanceof_cause() if hasattr(exc, "as_instanceof_cause") else None
    except Exception:  # noqa: BLE001
        return None


def _lost(exc: BaseException) -> bool:
    return type(exc).__name__ in {"WorkerCrashedError", "NodeDiedError", "ObjectLostError", "ObjectReconstructionFailedError",
                                  "OwnerDiedError", "RaySystemError", "LocalRayletDiedError", "ActorDiedError"}


def read_cluster_log(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / CLUSTER_LOG
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------ doctor and prepare


def doctor(address: str, targets: list[str] | None = None, providers: list[str] | None = None,
           probe: bool = True, allow_unauthenticated: bool = False
           ) -> tuple[cluster_auth.ClusterAuth, list[dict[str, Any]], list[str]]:
    """(the cluster's auth mode and the driver's token source, node reports, problems) for
    `statebox cluster doctor`; a refused connection (no token, a wrong one, no token auth
    without the flag) is the one line of a UserError."""
    auth = cluster_auth.admit(normalise_address(address), allow_unauthenticated=allow_unauthenticated)
    ray = connect(address, auth=auth)
    try:
        targets = targets if targets is not None else ["sandbox"]
        providers = providers or []
        reports = node_reports(ray, targets, providers, probe=probe, gateway=bool(providers))
        return auth, reports, cluster_problems(reports, targets, cluster_worker.code_fingerprint())
    finally:
        disconnect()


def prepare(address: str, targets: list[str], *, build: bool = False, chunk_mb: int = 32,
            progress: Callable[[str], None] = lambda _m: None, allow_unauthenticated: bool = False) -> list[str]:
    """Put the images on every node: ship the head's (docker save -> docker load, in chunks
    through the object store) unless a node already has the same content-hash tag, or build
    them on the node (`build=True`). Returns problems (empty: every node has every tag)."""
    ray = connect(address, allow_unauthenticated=allow_unauthenticated)
    try:
        nodes = usable_nodes(ray)
        if build:
            refs = [_on_node(ray, n["NodeID"], cluster_worker.build_images).remote(targets) for n in nodes]
            for ref in refs:
                done = _get(ray, ref)
                progress(f"{done['node']}: built {', '.join(done['tags'].values())}")
        else:
            wanted = {t: ensure_image(t) for t in targets}  # the head's own, built here if needed
            refs_to_save = list(dict.fromkeys([image_tag(t)[1] for t in targets if image_tag(t)[1]] + list(wanted.values())))
            reports = node_reports(ray, targets, [], probe=False)
            for report in reports:
                have = {t: (report.get("images", {}).get(t) or {}) for t in targets}
                if all(have[t].get("present") and have[t].get("tag") == wanted[t] for t in targets):
                    progress(f"{report['node']}: up to date ({', '.join(wanted.values())})")
                    continue
                progress(f"{report['node']}: shipping {' '.join(refs_to_save)}")
                loader_cls = ray.remote(cluster_worker.ImageLoader)
                from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # optional dependency (statebox[cluster])

                loader = loader_cls.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(report["node_id"], soft=False)).remote()
                saver = subprocess.Popen(["docker", "save", *refs_to_save], stdout=subprocess.PIPE)
                assert saver.stdout is not None
                in_flight = []
                sent = 0
                while True:
                    chunk = saver.stdout.read(chunk_mb * 1024 * 1024)
                    if not chunk:
                        break
                    in_flight.append(loader.write.remote(chunk))
                    sent += len(chunk)
                    if len(in_flight) >= 2:  # at most two chunks in the object store at once
                        _get(ray, in_flight.pop(0))
                for ref in in_flight:
                    _get(ray, ref)
                saver.wait()
                done = _get(ray, loader.finish.remote())
                ray.kill(loader)
                if done["code"] != 0:
                    raise UserError(f"{report['node']}: docker load failed: {done['err'].strip()[-300:]}")
                progress(f"{report['node']}: loaded {sent / 1e6:.0f} MB")
        reports = node_reports(ray, targets, [], probe=False)
        problems = cluster_problems(reports, targets, cluster_worker.code_fingerprint())
        if not build:
            for report in reports:
                for t in targets:
                    tag = report.get("images", {}).get(t, {}).get("tag")
                    if tag and tag != wanted[t]:
                        problems.append(f"{report['node']}: image {t} has tag {tag}, the head's is {wanted[t]}")
        return problems
    finally:
        disconnect()


def environment_summary() -> dict[str, str]:
    return {k: os.environ.get(k, "") for k in ("DOCKER_HOST", "STATEBOX_WORKSPACE_ROOT", "STATEBOX_NODE_ROOT")}
