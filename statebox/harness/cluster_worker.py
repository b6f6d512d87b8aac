"""What runs on a Ray node: attempts against the node's own engine, gateway and folders.

Nothing here imports Ray: these are plain functions that `harness/cluster.py` wraps as Ray
tasks, so they are testable without a cluster and the head never needs them.

A node is configured by its environment (what `ray start` was started with, inherited by
every Ray worker process on it):

- `DOCKER_HOST`: its own engine (unset: the local socket). Never one that does not see the
  node's files: the start-of-run probe (`cluster_probe.py`) refuses it.
- `STATEBOX_WORKSPACE_ROOT`: where its workspaces (size-limited tmpfs) go.
- `STATEBOX_NODE_ROOT`: its staging folder (per run, `runs/<run_id>/`: attempt folders until
  they are shipped to the head, the policy file, the files the agents' options name; removed at
  the end of the run) and the video cache (`videos/`, kept across runs, least recently used
  videos removed above `STATEBOX_NODE_VIDEO_CACHE_MB`, default 2048); default
  `<tmp>/statebox-node`.
- `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` (and `*_BASE_URL`): the keys its gateway uses. They
  stay in the node's environment: the head never sends a key, no sandbox ever sees one.
- `STATEBOX_NODE_NAME`: a readable name in reports (default: host name + Ray node id).

Per Ray worker process, the run's services (`runner.start_services`: the sandbox provider,
the gateway) start once, on the first attempt of that run, and are reused; an attempt runs
with `runner.run_attempt(job, services)` (the attempt seam) into the node's staging folder;
the finished attempt folder is packed (regular files only, no links) and returned with its
row. The head unpacks it into `RUN_DIR/attempts/<id>/` and only then writes the row. What
crosses between head and node is typed (`harness/cluster_handoff.py`): a `RunSpecRef` to the
run's `RunSpec`, the batch's `AttemptJob`s and `ShippedVideo`s in, a `BatchResult` out.
"""

from __future__ import annotations

import atexit
import hashlib
import io
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, cast, runtime_checkable
from urllib.parse import urlparse

import docker

import statebox
from statebox.attempt import AgentOptions
from statebox.attempt_folder import AttemptFolder
from statebox.errors import UserError
from statebox.harness.cluster_handoff import (
    BatchResult,
    GroupError,
    NodeIdentity,
    PackedAttempt,
    RunSpec,
    RunSpecRef,
    ShippedFile,
    ShippedVideo,
)
from statebox.harness.cluster_probe import probe_engine
from statebox.harness.plan import AttemptJob, LoadedDataset, RunConfig, SessionJob
from statebox.harness.runner import run_attempt, run_session, start_services
from statebox.harness.store import ResultRow
from statebox.policies.model import load_policy
from statebox.sandbox.docker import LABEL, SandboxEngine
from statebox.sandbox.images import ensure_image, image_status
from statebox.sandbox.limited_fs import pid_alive
from statebox.schema import video_path_problem

PACK_LEVEL = 1  # gzip level: logs compress well, and a 2-core node should not spend its time here
FILES_DIR = "files"  # in a run's staging folder: the head's files the agents' options name
STOP_MARKER = "STOPPING"  # in a run's staging folder: written by a stop's sweep before it removes containers

# agent options that name a file on the head (AgentOptions fields; `extra` keys by their ending)
FILE_FIELDS = ("prompt_template", "weights")
FILE_SUFFIXES = ("_file", "_path", "_template", "_weights")

VIDEO_CACHE_MB = 2048  # default cap of a node's video cache (STATEBOX_NODE_VIDEO_CACHE_MB)
VIDEO_GRACE_S = 300.0  # a video used this recently is never evicted (an attempt may be copying it)


def node_root() -> Path:
    root = Path(os.environ.get("STATEBOX_NODE_ROOT") or Path(tempfile.gettempdir()) / "statebox-node")
    root.mkdir(parents=True, exist_ok=True)
    return root


def node_name(node_id: str = "") -> str:
    name = os.environ.get("STATEBOX_NODE_NAME")
    if name:
        return name
    return f"{socket.gethostname()}:{node_id[:8]}" if node_id else socket.gethostname()


def code_fingerprint() -> str:
    """A hash of the statebox package's Python sources: head and nodes must run the same code."""
    root = Path(statebox.__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def video_cache_bytes() -> int:
    raw = os.environ.get("STATEBOX_NODE_VIDEO_CACHE_MB", "")
    try:
        mb = float(raw) if raw.strip() else VIDEO_CACHE_MB
    except ValueError:
        mb = VIDEO_CACHE_MB
    return max(0, int(mb * 1024 * 1024))


# ---------------------------------------------------------------- the head's files


def ray_get(ref: object) -> object:
    """`ray.get` of a reference the head made (typed `object` in the hand-off models, cluster_handoff.py)."""
    import ray  # an optional dependency (statebox[cluster]); only a node's process gets here

    got: object = ray.get(cast("ray.ObjectRef[object]", ref))
    return got


def ray_get_bytes(ref: object) -> bytes:
    """The bytes behind a reference the head put (a video, a file an option names)."""
    data = ray_get(ref)
    if not isinstance(data, bytes):
        raise TypeError(f"expected bytes in Ray's object store, found a {type(data).__name__}")
    return data


def file_option_values(options: AgentOptions) -> dict[str, str]:
    """option -> value for each of `options` (an AgentOptions) that names a file: the
    `FILE_FIELDS` that are set, and `extra` string values whose key ends in a `FILE_SUFFIXES`
    (as `extra.KEY`)."""
    found = {f: str(getattr(options, f)) for f in FILE_FIELDS if getattr(options, f, None)}
    for key, value in (options.extra or {}).items():
        if isinstance(value, str) and value and key.endswith(FILE_SUFFIXES):
            found[f"extra.{key}"] = value
    return found


def place_files(files: dict[str, ShippedFile], dest: Path, get: Callable[[object], bytes]) -> dict[str, Path]:
    """Write each shipped file (content hash -> its name and reference) as `dest/<hash>/<name>` unless
    it is there already; `get(ref)` reads the bytes (ray.get on a node). Returns hash -> path."""
    placed = {}
    for digest, f in files.items():
        name = Path(f.name).name or "file"
        target = Path(dest) / digest / name
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(get(f.ref))
            tmp.replace(target)
        placed[digest] = target
    return placed


def rewrite_options(raw: dict[str, Any], by_option: dict[str, str], placed: dict[str, Path]) -> dict[str, Any]:
    """A copy of an agent's options (as a dict) whose file options (`option -> content hash`)
    name the node's copies instead of the head's paths."""
    out = dict(raw)
    extra = dict(out.get("extra") or {})
    for option, digest in by_option.items():
        path = str(placed[digest])
        if option.startswith("extra."):
            extra[option[len("extra."):]] = path
        else:
            out[option] = path
    if extra or "extra" in out:
        out["extra"] = extra
    return out


def rewrite_job_options(options: AgentOptions, by_option: dict[str, str], placed: dict[str, Path]) -> AgentOptions:
    """`rewrite_options` for an AgentOptions."""
    if not by_option:
        return options
    return type(options).model_validate(rewrite_options(options.model_dump(), by_option, placed))


# ---------------------------------------------------------------- the video cache


def evict_videos(root: Path, cap_bytes: int, keep: Iterable[Path] = (),
                 grace_s: float = VIDEO_GRACE_S, now: float | None = None) -> list[Path]:
    """Remove the least recently used videos under `root` (their mtime is their last use) until
    the cache holds at most `cap_bytes`; never one in `keep` or used in the last `grace_s`.
    Returns what it removed (empty folders go too)."""
    now = time.time() if now is None else now
    kept = {Path(k).resolve() for k in keep}
    entries = []
    total = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if name.endswith(".tmp"):
                continue
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            total += st.st_size
            entries.append((st.st_mtime, st.st_size, path))
    removed = []
    for mtime, size, path in sorted(entries):
        if total <= cap_bytes:
            break
        if path.resolve() in kept or now - mtime < grace_s:
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        total -= size
        removed.append(path)
        parent = path.parent
        while parent != Path(root) and Path(root) in parent.parents:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
    return removed


# ---------------------------------------------------------------- attempt folders


def pack_folder(folder: Path) -> bytes:
    """The folder as a gzip'd tar of its regular files and directories (links and special files
    are left out, never followed)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=PACK_LEVEL) as tar:
        for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
            rel_dir = Path(dirpath).relative_to(folder)
            for name in sorted(dirnames):
                full = Path(dirpath) / name
                if not full.is_symlink():
                    tar.add(full, arcname=str(rel_dir / name), recursive=False)
            for name in sorted(filenames):
                full = Path(dirpath) / name
                if full.is_symlink() or not full.is_file():
                    continue
                tar.add(full, arcname=str(rel_dir / name), recursive=False)
    return buf.getvalue()


def unpack_folder(blob: bytes, dest: Path) -> None:
    """Unpack a `pack_folder` blob into `dest` (replaced if present); only regular files and
    directories inside `dest` are created, whatever the blob holds."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    root = dest.resolve()
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        for member in tar.getmembers():
            if not (member.isfile() or member.isdir()):
                continue
            target = (root / member.name).resolve()
            if target != root and root not in target.parents:
                continue
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(member)
            if src is None:
                continue
            with open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            os.chmod(target, member.mode & 0o644 | 0o600)
            os.utime(target, (member.mtime, member.mtime))


# ---------------------------------------------------------------- the run on this process

_runs: dict[str, NodeRun] = {}
_runs_lock = threading.Lock()


class NodeRun:
    """One run's services in one Ray worker process, and its staging folder on the node."""

    def __init__(self, spec: RunSpec) -> None:
        self.run_id = spec.config.run_id
        self.staging = node_root() / "runs" / self.run_id
        self.staging.mkdir(parents=True, exist_ok=True)
        (self.staging / STOP_MARKER).unlink(missing_ok=True)  # a resumed run: the stop it resumes from is over
        config: RunConfig = spec.config
        if spec.policy_yaml is not None:  # a policy file on the head: the node gets its text
            policy_path = self.staging / "policy.yaml"
            policy_path.write_text(spec.policy_yaml)
            config = config.model_copy(update={"policy": str(policy_path)})
        # the head's files the options name: copies here, and the options point at them
        self.file_options: dict[str, dict[str, str]] = spec.file_options
        self.placed = place_files(spec.files, self.staging / FILES_DIR, ray_get_bytes)
        if self.file_options:
            config = config.model_copy(update={"agent_options": {
                agent: rewrite_options(raw, self.file_options.get(agent, {}), self.placed)
                for agent, raw in config.agent_options.items()}})
        self.videos_root = node_root() / "videos"
        datasets = [LoadedDataset(spec=d.spec.model_copy(update={"videos": str(self.videos_root / d.key)}),
                                  items=list(d.items), warnings=[]) for d in spec.datasets]
        self.config = config
        self.services = start_services(config, self.staging, gateway_options=spec.gateway_options or None,
                                       datasets=datasets)
        self.services.tracker.stop_marker = self.staging / STOP_MARKER
        self._video_lock = threading.Lock()

    def options_for(self, job: AttemptJob) -> AttemptJob:
        """The job with its file options pointing at this node's copies."""
        by_option = self.file_options.get(job.attempt.agent)
        if not by_option:
            return job
        return job.model_copy(update={"options": rewrite_job_options(job.options, by_option, self.placed)})

    def video_folder(self, key: str) -> Path:
        return self.videos_root / key

    def materialise_video(self, video: ShippedVideo) -> None:
        """The head ships each video once per node (through Ray's object store); cached by content
        key, least recently used videos removed above the cache's cap (`evict_videos`)."""
        target = cached_video_path(self.video_folder(video.key), video.rel)
        with self._video_lock:
            try:
                os.utime(target)  # a hit: its mtime says when it was last used
                return
            except FileNotFoundError:
                pass
            data = ray_get_bytes(video.ref)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
            try:
                evict_videos(self.videos_root, video_cache_bytes(), keep={target})
            except OSError:  # another process evicting the same files: its work, not an error
                pass

    def close(self) -> None:
        try:
            self.services.close()
        except Exception:  # noqa: BLE001
            pass


def cached_video_path(folder: Path, rel: str) -> Path:
    """Where a node keeps its copy of a shipped video: `rel` (the item's path inside the dataset's videos folder)
    under the video's cache folder, refused (UserError) unless it stays there.

    Why here too: the head refuses such a path when it loads the annotation file (`schema.video_path_problem`), and
    this node writes bytes at the path it is handed, so it checks for itself what it writes to (fail closed)."""
    problem = video_path_problem(rel)
    if problem is not None or PurePosixPath(rel).is_absolute():
        raise UserError(f"shipped video path {rel!r} {problem or 'is absolute'}: not written outside the node's video cache")
    return folder / rel


def _run_for(spec: RunSpecRef) -> NodeRun:
    key = spec.key
    with _runs_lock:
        run = _runs.get(key)
        if run is None:
            got = ray_get(spec.ref)
            if not isinstance(got, RunSpec):
                raise TypeError(f"the run's spec in Ray's object store is a {type(got).__name__}, not a RunSpec")
            run = NodeRun(got)
            _runs[key] = run
        return run


@atexit.register
def _close_runs() -> None:
    for run in list(_runs.values()):
        run.close()


def end_run(run_id: str) -> bool:
    """The end of a run on this node: close its services in this process and remove its
    staging folder (`runs/<run_id>`); the video cache stays. True when a folder was removed."""
    if not run_id or "/" in run_id or run_id in {".", ".."}:
        return False
    with _runs_lock:
        for key in [k for k, r in _runs.items() if r.run_id == run_id]:
            _runs.pop(key).close()
    folder = node_root() / "runs" / run_id
    if not folder.exists():
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True


def node_identity() -> NodeIdentity:
    node_id = ""
    try:
        import ray  # an optional dependency (statebox[cluster]); absent outside a cluster

        node_id = str(ray.get_runtime_context().get_node_id())
    except Exception:  # noqa: BLE001 - outside Ray (unit tests)
        pass
    return NodeIdentity(node_id=node_id, node=node_name(node_id), host=socket.gethostname(),
                        docker_host=os.environ.get("DOCKER_HOST", ""), pid=str(os.getpid()))


@runtime_checkable
class GroupAgent(Protocol):
    """An agent whose attempts share one container (the tracker, its `group` option): told which
    attempts to wait for."""

    def expect_group(self, attempt_ids: list[str]) -> None: ...

    def left_group(self, attempt_id: str) -> None: ...


def run_batch(spec: RunSpecRef, jobs: list[AttemptJob], videos: dict[str, ShippedVideo],
              session: SessionJob | None = None) -> BatchResult:
    """Run a batch of attempts on this node; returns each row with its packed folder.

    `videos`: attempt id -> the video it sees (for the attempts that see one). `session`: the
    batch is one streaming session's open points, run by `runner.run_session` in one container;
    its rows come back together when the session ends.
    """
    run = _run_for(spec)
    if session is not None:
        shipped = next((videos[j.attempt.attempt_id] for j in jobs if j.attempt.attempt_id in videos), None)
        if shipped is not None:
            run.materialise_video(shipped)
        folder = str(run.video_folder(shipped.key)) if shipped is not None else None

        def placed_point(job: AttemptJob) -> AttemptJob:
            if folder is None:
                return run.options_for(job)
            return run.options_for(job.model_copy(update={"dataset": job.dataset.model_copy(update={"videos": folder})}))

        session = session.model_copy(update={"jobs": [placed_point(j) for j in session.jobs]})
        return BatchResult(who=node_identity(), results=[_packed(run, row) for row in run_session(session, run.services)])

    def placed(job: AttemptJob) -> AttemptJob:
        video = videos.get(job.attempt.attempt_id)
        if video is not None:
            run.materialise_video(video)
        return run.options_for(job.model_copy(update={"dataset": job.dataset.model_copy(
            update={"videos": str(run.video_folder(video.key)) if video is not None else job.dataset.videos})}))

    agent = run.services.agents.get(jobs[0].attempt.agent) if jobs else None
    if (len(jobs) > 1 and isinstance(agent, GroupAgent) and group_size(agent) > 1
            and all(j.attempt.agent == jobs[0].attempt.agent for j in jobs)):
        return run_group(run, [placed(j) for j in jobs], agent)
    return BatchResult(who=node_identity(), results=[_packed(run, run_attempt(placed(job), run.services)) for job in jobs])


def group_size(agent: object) -> int:
    """How many attempts of `agent` share one container (the tracker's `group` option; else 1)."""
    return int(getattr(agent, "group", 1) or 1) if hasattr(agent, "expect_group") else 1


def _packed(run: NodeRun, row: ResultRow) -> PackedAttempt:
    """An attempt's row and its folder, packed to go to the head; the node's copy is removed."""
    folder = AttemptFolder(run.staging, row.attempt_id).path
    blob = pack_folder(folder) if folder.exists() else b""
    shutil.rmtree(folder, ignore_errors=True)
    return PackedAttempt(row=row, folder=blob)


def run_group(run: NodeRun, jobs: list[AttemptJob], agent: GroupAgent) -> BatchResult:
    """A tracker group (one Ray task): every attempt runs the whole attempt seam (`run_attempt`:
    its own folder's lifecycle, workspace mount, honeytokens, audit, score, row) in its own thread,
    and the agent, told to expect exactly these attempts (`expect_group`), runs them in ONE container.

    Rows come back together when the group ends. An attempt whose thread raised (a full disk
    on the node, a bug) costs only itself: the others' rows and folders come back, with
    `error` naming what stopped it (the head records those rows, then stops the run as it
    would for a single attempt). A cancel (the head stopping the run: a KeyboardInterrupt in
    this, the task's main thread) stops every member: the run's services are cancelled (no
    row for a cancelled attempt), this node's containers of the run removed, and it re-raises.
    """
    ids = [j.attempt.attempt_id for j in jobs]
    agent.expect_group(ids)

    def one(job: AttemptJob) -> ResultRow:
        try:
            return run_attempt(job, run.services)
        finally:  # arrived and finished, or failed before its agent ran: the group stops waiting for it
            agent.left_group(job.attempt.attempt_id)

    pool = ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="group")
    futures: list[Future[ResultRow]] = [pool.submit(one, j) for j in jobs]
    try:
        # Wait in short slices, not in one blocking `result()`: Ray's cancel is a KeyboardInterrupt raised
        # in this thread, and a thread blocked on a lock without a timeout only sees it when every member
        # has finished (a stopped group's members then ran on, e.g. again alone, and came back as rows).
        pending = set(futures)
        while pending:
            _finished, pending = wait(pending, timeout=0.25)
    except BaseException:  # a cancel (KeyboardInterrupt) or the worker exiting: stop every member
        run.services.cancel.set()
        run.services.stop_containers()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    results: list[PackedAttempt] = []
    error: GroupError | None = None
    for aid, fut in zip(ids, futures):
        exc = fut.exception()
        if exc is None:
            results.append(_packed(run, fut.result()))
        else:  # no row: its folder is not shipped, and resume redoes it
            if error is None:
                error = GroupError(attempt_id=aid, type=type(exc).__name__, user_error=isinstance(exc, UserError),
                                   message=str(exc).splitlines()[0][:300] if str(exc) else "")
            shutil.rmtree(AttemptFolder(run.staging, aid).path, ignore_errors=True)
    return BatchResult(who=node_identity(), results=results, group=len(jobs), error=error)


# ---------------------------------------------------------------- doctor, sweep, images


def node_report(targets: list[str], providers: list[str], probe: bool, policy_name: str = "default") -> dict[str, Any]:
    """What `cluster doctor` and the start of a cluster run need to know about this node."""
    report: dict[str, Any] = {**node_identity().model_dump(), "code": code_fingerprint(), "problems": [], "images": {},
                              "keys": {}, "gpu_runtime": False, "probe": None}
    where = report["node"]
    for provider in providers:
        var = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
        base = os.environ.get("ANTHROPIC_BASE_URL" if provider == "anthropic" else "OPENAI_BASE_URL", "")
        present = bool(os.environ.get(var))
        report["keys"][provider] = {"key": present, "base_url": base}
        if not present:
            report["problems"].append(f"{where}: no {var} in the node's environment (its gateway cannot reach {provider})")
    if not targets:
        return report
    try:
        engine = SandboxEngine()
    except UserError as exc:
        report["problems"].append(f"{where}: {exc}")
        return report
    report["gpu_runtime"] = engine.has_gpu_runtime()

    for target in targets:
        try:
            status = image_status(target)
        except Exception as exc:  # noqa: BLE001
            status = {"tag": None, "present": False, "error": str(exc).splitlines()[0][:160]}
        report["images"][target] = status
        if not status.get("present"):
            report["problems"].append(f"{where}: image {status.get('tag') or 'statebox-' + target} missing on "
                                      f"{report['docker_host'] or 'the local engine'}; run `statebox cluster prepare`")
    if probe and report["images"].get("sandbox", {}).get("present"):
        try:
            found = probe_engine(engine, load_policy(policy_name), report["images"]["sandbox"]["tag"], where=where)
            report["probe"] = {"shares_filesystem": found.shares_filesystem, "egress_blocked": found.egress_blocked,
                               "interfaces": found.interfaces}
            report["problems"].extend(found.problems)
        except Exception as exc:  # noqa: BLE001
            report["problems"].append(f"{where}: the probe failed ({str(exc).splitlines()[0][:160]})")
    return report


def gateway_check(providers: list[str]) -> list[str]:
    """Can this node's gateway start and reach each provider's upstream (a plain TCP connect)?"""
    problems = []
    for provider in providers:
        default = "https://api.anthropic.com" if provider == "anthropic" else "https://api.openai.com"
        base = os.environ.get("ANTHROPIC_BASE_URL" if provider == "anthropic" else "OPENAI_BASE_URL") or default
        parsed = urlparse(base)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            socket.create_connection((parsed.hostname, port), timeout=5).close()
        except OSError as exc:
            problems.append(f"{node_name()}: gateway upstream {base} unreachable ({exc.strerror or exc})")
    return problems


def sweep(run_id: str, engines: list[str], only_dead: bool) -> int:
    """Remove the run's containers on this node's engine and on any other engine of this host
    seen in the run (a lost node's, when it shared this machine). `only_dead`: only containers
    whose statebox process is gone (the end of a run); else all of the run's (a stop)."""
    removed = 0
    staging = node_root() / "runs" / run_id
    if not only_dead and staging.is_dir():  # a stop: this node's attempts start no container from now on
        (staging / STOP_MARKER).touch()
    seen = {os.environ.get("DOCKER_HOST", "")} | set(engines)
    for host in seen:
        try:
            client = docker.DockerClient(base_url=host, timeout=20) if host else docker.from_env(timeout=20)
        except Exception:  # noqa: BLE001 - not reachable from here (another machine's engine)
            continue
        try:
            found = client.api.containers(all=True, filters={"label": [f"{LABEL}=1", f"{LABEL}.run={run_id}",
                                                                       f"{LABEL}.host={socket.gethostname()}"]})
            for c in found:
                pid = int(c.get("Labels", {}).get(f"{LABEL}.pid", "0") or 0)
                if only_dead and pid and pid_alive(pid):
                    continue
                try:
                    client.api.remove_container(c["Id"], force=True)
                    removed += 1
                except Exception:  # noqa: BLE001 - already gone
                    pass
        except Exception:  # noqa: BLE001
            pass
        finally:
            client.close()
    return removed


class ImageLoader:
    """`docker load` on this node, fed the head's `docker save` stream chunk by chunk."""

    def __init__(self) -> None:
        cmd = ["docker", "load"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def write(self, chunk: bytes) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(chunk)
        return len(chunk)

    def finish(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        out = self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""
        err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
        code = self.proc.wait()
        return {"code": code, "out": out[-2000:], "err": err[-2000:], **node_identity().model_dump()}


def build_images(targets: list[str]) -> dict[str, Any]:
    """Build (or find up to date) the sandbox images on this node's engine."""
    tags = {t: ensure_image(t) for t in targets}
    return {"tags": tags, **node_identity().model_dump()}
