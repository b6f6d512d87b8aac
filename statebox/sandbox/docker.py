"""Hardened containers on the real Docker engine (docker SDK), one per attempt.

Every container gets the same hardening, from the one table in `hardening.py` (no
network, read-only root, size- and inode-limited tmpfs /tmp and home, the workspace a
size-limited filesystem of its own, a root-owned init that drops the agent's command to
uid 1000 with no capabilities, no-new-privileges, the seccomp allow-list, pids/memory/CPU
limits), stdin closed, an environment built only from the policy's allow-list. Writable
storage that is not kernel-limited is refused before a container is made. The wall clock is
enforced from the host (kill -> `timeout`), OOM kills are reported (`oom`), output is
streamed to host files as it arrives, and the container is removed on every path out,
Ctrl-C included. Containers carry labels so the next start removes those a killed run
left behind.

Round trips per `run`: create, attach, start, wait (+ inspect only on a non-zero exit),
remove — the same as `docker run --rm`, which is why the overhead stays near the CLI's.
"""

from __future__ import annotations

import os
import secrets
import shlex
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from statebox import signals
from statebox.capped_log import BoundedBuffer, CappedStream
from statebox.errors import InfrastructureError, UserError
from statebox.sandbox import engine_client, hardening, images
from statebox.sandbox import gpu as gpu_access
from statebox.sandbox.engine_client import docker_client
from statebox.sandbox.hardening import AGENT_USER, INIT_USER, as_agent
from statebox.policies.model import Recording
from statebox.sandbox.limited_fs import pid_alive
from statebox.sandbox.provider import READ_LIMIT_BYTES, SandboxFileError
from statebox.sandbox.spec import HOME, WORKDIR, ContainerResult, ContainerSpec, ContainerStatus, ExecResult, Mount

if TYPE_CHECKING:
    from docker import APIClient  # the SDK has no type information: Any to mypy

__all__ = ["AGENT_USER", "HOME", "WORKDIR", "ContainerSpec", "ContainerResult", "ExecResult", "Mount",
           "RunningSandbox", "SandboxEngine", "own_container_filters", "quote_command", "remove_own_containers"]

LABEL = "statebox"
OUTPUT_CAP_BYTES = 64 * 1024 * 1024  # per stream; an output flood must not fill the host disk
OUTPUT_LINE_CAP_BYTES = 1024 * 1024  # one line of a stream (policy recording.raw_line_bytes)
STOP_GRACE_S = 2.0  # SIGTERM first, SIGKILL after this; an agent ignoring SIGTERM still dies
OOM_REPORT_WAIT_S = 5.0  # how long a SIGKILLed container's OOM flag may lag its exit (see oom_killed)


def own_container_filters(run_id: str | None = None) -> dict[str, list[str]]:
    """Docker label filters for the containers this process started (optionally one run's)."""
    labels = [f"{LABEL}=1", f"{LABEL}.pid={os.getpid()}", f"{LABEL}.host={socket.gethostname()}"]
    if run_id:
        labels.append(f"{LABEL}.run={run_id}")
    return {"label": labels}


def remove_own_containers(api: APIClient | None = None, run_id: str | None = None) -> int:
    """Force-remove every container this process started (of `run_id` when given).

    Removing a container ends the blocking `wait` of the thread that runs it, so the
    thread unwinds through its own `finally` (workspace cleanup) instead of running on.
    """
    if api is None:
        # only engines this process already connected to: a container of ours can be nowhere else,
        # and connecting afresh could hang the exit on an engine that does not answer
        clients = engine_client.connected_clients()
        return sum(remove_own_containers(c.api, run_id) for c in clients if getattr(c, "api", None) is not None)
    try:
        found = api.containers(all=True, filters=own_container_filters(run_id))
    except Exception:  # noqa: BLE001
        return 0
    removed = 0
    for c in found:
        try:
            api.remove_container(c["Id"], force=True)
            removed += 1
        except Exception:  # noqa: BLE001 - already gone
            pass
    return removed



def oom_killed(inspect_state: Callable[[], dict[str, Any]], exit_code: int | None,
               wait_s: float = OOM_REPORT_WAIT_S) -> bool:
    """Whether the kernel's OOM killer ended the container, from the engine's `State.OOMKilled`.

    The engine learns of an OOM kill from the cgroup's own notification, a separate event from
    the exit, and may record it after `wait` has returned (seen on a fresh, idle machine: exit
    137, flag still false). So for a SIGKILL exit (137) the flag is read again for up to
    `wait_s`; any other exit code is read once. The limit itself is the kernel's; this only
    names the cause."""
    deadline = time.monotonic() + (wait_s if exit_code == 137 else 0.0)
    while True:
        try:
            if inspect_state().get("OOMKilled"):
                return True
        except Exception:  # noqa: BLE001 - the container is gone: nothing more to learn
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)

def _infra(what: str, exc: Exception) -> Exception:
    """Client errors (4xx) are the caller's; engine/connection failures are retried by the harness."""
    import docker.errors

    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, docker.errors.ImageNotFound):
        return InfrastructureError(f"{what}: image missing ({msg}); run `statebox sandbox build`")
    if isinstance(exc, docker.errors.APIError) and exc.is_client_error():
        return UserError(f"{what}: {msg[:300]}")
    return InfrastructureError(f"{what}: {msg[:300]}")


class _Sink:
    """One container stream -> its host file through the shared capped writer (statebox/capped_log.py).

    The file stops at the policy's `recording.raw_log_bytes` (OUTPUT_CAP_BYTES by default)
    with one `cap_reached` marker line. A line longer than `recording.raw_line_bytes` is cut
    there and the rest of it dropped; the callback (live parsing of a CLI's JSON stream) gets
    exactly the lines the file got, never a longer one and nothing after the cap, and an
    exception in it never stops the stream to the file. At most one line is held in memory.
    """

    def __init__(self, path: Path | None, on_line: Callable[[str], None] | None,
                 limits: Recording | None = None) -> None:
        self.stream = CappedStream(path, max_bytes=getattr(limits, "raw_log_bytes", OUTPUT_CAP_BYTES),
                                   max_line_bytes=getattr(limits, "raw_line_bytes", OUTPUT_LINE_CAP_BYTES),
                                   on_line=on_line)

    @property
    def seen_bytes(self) -> int:
        """Bytes the stream produced (written or not)."""
        return self.stream.seen

    @property
    def truncated(self) -> bool:
        return self.stream.truncated

    def write(self, data: bytes) -> None:
        self.stream.feed(data)

    def close(self) -> None:
        self.stream.close()


class SandboxEngine:
    """The Docker engine, as statebox uses it: hardened containers only. Thread-safe."""

    _gc_done: set[str] = set()
    _gc_lock = threading.Lock()

    name = "docker"

    def __init__(self, docker_host: str | None = None) -> None:
        self.docker_host = docker_host
        self.client = docker_client(docker_host)  # UserError with a fix when no engine answers
        self.api = self.client.api
        self._gpu_access: gpu_access.GpuAccess | None = None
        self.gc_stale()

    # ------------------------------------------------------------ images (SandboxProvider)

    def ensure_image(self, target: str, progress: Callable[[str], None] | None = None) -> str:
        """`target`'s image tag on this engine (its `docker_host`), built there when inputs changed."""
        if progress is None:
            return images.ensure_image(target, docker_host=self.docker_host)
        return images.ensure_image(target, docker_host=self.docker_host, progress=progress)

    # ------------------------------------------------------------ lifecycle (SandboxProvider)

    def run_init(self, run_id: str = "") -> None:
        """Containers a killed statebox left behind go first (once per engine and process)."""
        self.gc_stale()

    def attempt_init(self, attempt_id: str) -> None:
        """Nothing to prepare: each container is made fresh from its spec."""

    def attempt_cleanup(self, attempt_id: str) -> None:
        """Remove any container of this attempt that this process started and something left running."""
        if attempt_id:
            self._remove_labelled(f"{LABEL}.attempt={attempt_id}")

    def run_cleanup(self, run_id: str = "") -> None:
        """Remove every container of the run this process started (all of this process's when run_id is empty)."""
        self._remove_labelled(*([f"{LABEL}.run={run_id}"] if run_id else []))

    def _remove_labelled(self, *labels: str) -> None:
        try:
            found = self.api.containers(all=True, filters={"label": [f"{LABEL}=1", f"{LABEL}.pid={os.getpid()}",
                                                                f"{LABEL}.host={socket.gethostname()}", *labels]})
        except Exception:  # noqa: BLE001 - clean-up never masks the attempt's or run's own outcome
            return
        for c in found:
            self._remove(c["Id"])

    # ------------------------------------------------------------ housekeeping

    def gc_stale(self) -> int:
        """Remove containers a killed statebox process left behind (its pid is gone); once per engine."""
        key = self.docker_host or os.environ.get("DOCKER_HOST", "")
        with self._gc_lock:
            if key in self._gc_done:
                return 0
            self._gc_done.add(key)
        removed = 0
        try:
            stale = self.api.containers(all=True, filters={"label": [f"{LABEL}=1", f"{LABEL}.host={socket.gethostname()}"]})
        except Exception:  # noqa: BLE001 - housekeeping never blocks a run
            return 0
        for c in stale:
            pid = int(c.get("Labels", {}).get(f"{LABEL}.pid", "0") or 0)
            if pid and pid != os.getpid() and not pid_alive(pid):
                try:
                    self.api.remove_container(c["Id"], force=True)
                    removed += 1
                except Exception:  # noqa: BLE001
                    pass
        return removed

    def gpu_access(self) -> gpu_access.GpuAccess:
        """How this engine gives a container a GPU (NVIDIA runtime, CDI, or not at all) and why (sandbox/gpu.py)."""
        if self._gpu_access is None:
            try:
                self._gpu_access = gpu_access.detect(self.client.info())
            except Exception as exc:  # noqa: BLE001 - an engine that cannot say is one without GPUs
                self._gpu_access = gpu_access.GpuAccess(None, f"engine info unavailable ({type(exc).__name__})")
        return self._gpu_access

    def has_gpu_runtime(self) -> bool:
        """True when containers can get a GPU here (NVIDIA runtime or a CDI spec for nvidia.com/gpu)."""
        return self.gpu_access().available

    def _gpu_request(self, spec: ContainerSpec) -> bool:
        mode = spec.policy.gpu
        wanted = spec.gpu or mode == "require"
        if not wanted or mode == "never":
            return False
        if self.has_gpu_runtime():
            return True
        if mode == "require":
            raise UserError(gpu_access.require_message(self.gpu_access()))
        return False

    def _gpu_flag(self, gpu: bool) -> str | bool:
        """What the hardening table's GPU row gets: the access mode ("nvidia" | "cdi") or False."""
        return (self.gpu_access().mode or False) if gpu else False

    # ------------------------------------------------------------ container config

    def environment(self, spec: ContainerSpec) -> dict[str, str]:
        return {**spec.policy.env_allow, **spec.env}

    def labels(self, spec: ContainerSpec, *, owned: bool = True) -> dict[str, str]:
        """`owned`: this process runs the container, and its pid marks it (`gc_stale` removes a container whose
        pid is gone); a container no statebox process owns carries none."""
        labels = {
            LABEL: "1",
            f"{LABEL}.run": spec.run_id,
            f"{LABEL}.attempt": spec.attempt_id,
            f"{LABEL}.host": socket.gethostname(),
        }
        if owned:
            labels[f"{LABEL}.pid"] = str(os.getpid())
        return labels

    def host_config(self, spec: ContainerSpec, gpu: bool) -> dict[str, Any]:
        """The SDK host config: `hardening.settings`, after the fail-closed check on writable storage."""
        hardening.check_writable(spec)
        return self.api.create_host_config(**hardening.host_config_kwargs(spec, gpu=self._gpu_flag(gpu)))

    def _create(self, spec: ContainerSpec, command: list[str], gpu: bool) -> str:
        try:
            created = self.api.create_container(
                image=spec.image,
                command=command,
                user=INIT_USER,  # only tini (and setpriv) run as root; see hardening.py
                working_dir=WORKDIR,
                environment=self.environment(spec),
                hostname="sandbox",
                labels=self.labels(spec),
                stdin_open=spec.tty,
                tty=spec.tty,
                network_disabled=True,
                host_config=self.host_config(spec, gpu),
                name=f"statebox-{secrets.token_hex(6)}",
            )
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise _infra("creating the sandbox container", exc) from exc
        return created["Id"]

    def _remove(self, cid: str) -> None:
        import docker.errors

        for _ in range(3):
            try:
                self.api.remove_container(cid, force=True)
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as exc:
                if "already in progress" in str(exc):
                    return
                time.sleep(0.2)
            except Exception:  # noqa: BLE001
                time.sleep(0.2)

    def _stop(self, cid: str) -> None:
        try:
            self.api.stop(cid, timeout=int(STOP_GRACE_S))
        except Exception:  # noqa: BLE001 - already gone is fine
            try:
                self.api.kill(cid)
            except Exception:  # noqa: BLE001
                pass

    # ------------------------------------------------------------ run

    def run(self, spec: ContainerSpec, stdout_path: Path | str | None, stderr_path: Path | str | None,
            on_stdout_line: Callable[[str], None] | None = None,
            on_stderr_line: Callable[[str], None] | None = None) -> ContainerResult:
        """Run `spec.command` to completion (or the time limit) in a fresh hardened container.

        Output goes to the host files as it arrives; `on_stdout_line` (live parsing of a
        CLI's JSON stream) and `on_stderr_line` get each complete line as well.
        """
        signals.check()  # a stop that came before: no container at all
        gpu = self._gpu_request(spec)
        limit = spec.time_limit_s or spec.policy.limits.time_limit_s
        out = _Sink(Path(stdout_path) if stdout_path else None, on_stdout_line, spec.policy.recording)
        err = _Sink(Path(stderr_path) if stderr_path else None, on_stderr_line, spec.policy.recording)
        started = time.monotonic()
        cid = self._create(spec, as_agent(spec.command), gpu)
        exited = threading.Event()
        waited: dict[str, Any] = {}
        reader: threading.Thread | None = None
        try:
            try:
                stream = self.api.attach(cid, stdout=True, stderr=True, stream=True, logs=False, demux=True)
            except Exception as exc:  # noqa: BLE001
                raise _infra("attaching to the sandbox container", exc) from exc

            def pump() -> None:
                try:
                    for chunk_out, chunk_err in stream:
                        if chunk_out:
                            out.write(chunk_out)
                        if chunk_err:
                            err.write(chunk_err)
                except Exception:  # noqa: BLE001 - the stream ends when the container is removed
                    pass

            reader = threading.Thread(target=pump, name=f"statebox-out-{cid[:8]}", daemon=True)
            reader.start()
            signals.check()  # a stop during create/attach: the container never starts
            try:
                self.api.start(cid)
            except Exception as exc:  # noqa: BLE001
                raise _infra("starting the sandbox container", exc) from exc
            started = time.monotonic()
            verdict = self._wait_exit(cid, exited, waited, started + limit, limit)
            duration = time.monotonic() - started
            if "error" in waited:
                raise _infra("waiting for the sandbox container", waited["error"]) from waited["error"]
            exit_code = waited["result"].get("StatusCode")
            reader.join(timeout=5)
            status: ContainerStatus = "ok" if exit_code == 0 else "error"
            reason = "" if exit_code == 0 else f"exit code {exit_code}"
            if exit_code != 0 and not verdict and oom_killed(lambda: self.api.inspect_container(cid)["State"], exit_code):
                status, reason = "oom", f"killed: out of memory (limit {spec.policy.limits.memory_mb} MB)"
            if verdict:
                status, reason = verdict["status"], verdict["reason"]  # type: ignore[assignment]
            return ContainerResult(status=status, exit_code=exit_code, duration_s=round(duration, 3), reason=reason,
                                   stdout_bytes=out.seen_bytes, stderr_bytes=err.seen_bytes,
                                   truncated=out.truncated or err.truncated, gpu=gpu)
        finally:
            self._remove(cid)  # also on a stop and on every error above; ends the waiter's `wait`
            if reader is not None:
                reader.join(timeout=2)
            out.close()
            err.close()

    def _wait_exit(self, cid: str, exited: threading.Event, waited: dict[str, Any], deadline: float,
                   limit: float) -> dict[str, str]:
        """Wait for the container's exit, enforcing the wall clock from the host (storage limits
        are the kernel's: see limited_fs). Returns the timeout verdict ({} when none).

        The engine's blocking `wait` runs in a daemon thread that fills `waited` and sets
        `exited`; the calling thread waits on that event in short slices (`signals.wait_event`),
        so a stop signal is acted on here, at a safe point, within one slice (and in a worker
        thread, which the signal never reaches, as `Cancelled`)."""

        def wait_for_engine() -> None:
            try:
                waited["result"] = self.api.wait(cid, timeout=None)
            except Exception as exc:  # noqa: BLE001 - the caller turns it into an InfrastructureError
                waited["error"] = exc
            finally:
                exited.set()

        threading.Thread(target=wait_for_engine, name=f"statebox-wait-{cid[:8]}", daemon=True).start()
        verdict: dict[str, str] = {}
        while not signals.wait_event(exited, None if verdict else max(deadline - time.monotonic(), 0.0)):
            verdict = {"status": "timeout", "reason": f"wall-clock limit of {limit:g}s reached; killed"}
            self._stop(cid)
        return verdict

    # ------------------------------------------------------------ long-lived sandboxes

    def start(self, spec: ContainerSpec) -> "RunningSandbox":
        """A container kept alive (a root-owned init + sleep) for tools driven by `docker exec`."""
        gpu = self._gpu_request(spec)
        cid = self._create(spec, ["sleep", "infinity"], gpu)
        try:
            self.api.start(cid)
        except Exception as exc:  # noqa: BLE001
            self._remove(cid)
            raise _infra("starting the sandbox container", exc) from exc
        return RunningSandbox(self, cid, spec)

    def cli_args(self, spec: ContainerSpec, *, by_hand: bool = False) -> list[str]:
        """The equivalent `docker run` arguments (`--print-cli`, a terminal session, the perf peer).

        `by_hand`: a command printed for a person to run later is owned by no statebox process, so it carries
        no `statebox.pid` label. With this process's pid (gone once it has printed), the next statebox start on
        the host took the running container for one a killed run left behind and removed it (`gc_stale`)."""
        gpu = self._gpu_request(spec)
        hardening.check_writable(spec)
        args = ["docker", "run", "--rm", *hardening.cli_flags(spec, gpu=self._gpu_flag(gpu)),
                "--user", INIT_USER, "--workdir", WORKDIR, "--hostname", "sandbox"]
        for key, value in self.labels(spec, owned=not by_hand).items():
            args += ["--label", f"{key}={value}"]
        for key, value in self.environment(spec).items():
            args += ["--env", f"{key}={value}"]
        if spec.tty:
            args += ["-it"]
        args.append(spec.image)
        args += as_agent(spec.command)
        return args


class RunningSandbox:
    """A started hardened container; `exec` runs commands in it, `stop` removes it.

    The policy's wall clock still applies: a watchdog removes the container when it runs out.
    """

    def __init__(self, engine: SandboxEngine, container_id: str, spec: ContainerSpec) -> None:
        self.engine = engine
        self.api = engine.api
        self.id = container_id
        self.spec = spec
        self.started = time.monotonic()
        self._stopped = threading.Event()
        self.expired = False
        limit = spec.time_limit_s or spec.policy.limits.time_limit_s
        self._watchdog = threading.Timer(limit, self._expire)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _expire(self) -> None:
        self.expired = True
        self.stop()

    def exec(self, cmd: Sequence[str] | str, timeout_s: float = 60.0) -> ExecResult:
        """Run one command as `agent` in /workspace; killed (inside the container) after timeout_s."""
        if self._stopped.is_set():
            raise InfrastructureError("the sandbox was stopped" + (" (its wall-clock limit ran out)" if self.expired else ""))
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        # exec'd as root, dropped by setpriv like the main command: never with the container's init caps
        wrapped = as_agent(["timeout", "-k", "2", f"{max(timeout_s, 0.1):g}", *argv])
        started = time.monotonic()
        try:
            exec_id = self.api.exec_create(self.id, wrapped, user=INIT_USER, workdir=WORKDIR,
                                           environment=self.engine.environment(self.spec), stdin=False)["Id"]
            stream = self.api.exec_start(exec_id, stream=True, demux=True)
            # head and tail of each stream, bounded by the policy (statebox/capped_log.py), whatever it prints
            cap = getattr(getattr(self.spec.policy, "recording", None), "exec_output_bytes", OUTPUT_CAP_BYTES)
            out, err = BoundedBuffer(cap), BoundedBuffer(cap)
            for chunk_out, chunk_err in stream:
                if chunk_out:
                    out.add(chunk_out)
                if chunk_err:
                    err.add(chunk_err)
            code = self.api.exec_inspect(exec_id).get("ExitCode")
        except Exception as exc:  # noqa: BLE001
            if self._stopped.is_set():
                raise InfrastructureError("the sandbox was stopped while a command ran"
                                          + (" (wall-clock limit)" if self.expired else "")) from exc
            raise _infra("running a command in the sandbox", exc) from exc
        elapsed = time.monotonic() - started
        timed_out = code in (124, 137) and elapsed >= timeout_s * 0.98
        return ExecResult(exit_code=code, stdout=out.text(), stderr=err.text(),
                          timed_out=timed_out, duration_s=round(elapsed, 3))

    # ------------------------------------------------------------ files (SandboxProvider's Sandbox)

    def read_file(self, path: str, max_bytes: int = READ_LIMIT_BYTES) -> bytes:
        """A regular file's bytes, read inside the container with the agent's rights.

        A link anywhere in `path`, a special file, a missing file or one over `max_bytes`
        raises `SandboxFileError`: nothing is followed out of the container, and the
        final component is opened with O_NOFOLLOW so a link swapped in late fails too.
        """
        result = self.exec(["python3", "-c", _READ_SCRIPT, _absolute(path), str(int(max_bytes))], timeout_s=60)
        if result.exit_code != 0:
            raise SandboxFileError(f"{path}: {_file_refusal(result)}")
        import base64

        return base64.b64decode(result.stdout)

    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a regular file with the agent's rights (refusing links like read_file)."""
        import base64

        if len(data) > READ_LIMIT_BYTES:
            raise SandboxFileError(f"{path}: {len(data)} bytes is over the {READ_LIMIT_BYTES} byte limit")
        target = _absolute(path)
        step = _WRITE_CHUNK
        for offset in range(0, max(len(data), 1), step):
            chunk = base64.b64encode(data[offset:offset + step]).decode()
            mode = "trunc" if offset == 0 else "append"
            result = self.exec(["python3", "-c", _WRITE_SCRIPT, target, mode, chunk], timeout_s=60)
            if result.exit_code != 0:
                raise SandboxFileError(f"{path}: {_file_refusal(result)}")

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._watchdog.cancel()
        self.engine._remove(self.id)

    def __enter__(self) -> "RunningSandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def quote_command(command: list[str] | str) -> str:
    return command if isinstance(command, str) else shlex.join(command)


# read_file/write_file run these inside the container (python3 is in every statebox image), as
# the agent user, through `exec`: the host never opens a path the agent could have linked.
_FILE_COMMON = """
import base64, errno, os, stat, sys
def refuse(code, why):
    sys.stderr.write(why)
    sys.exit(code)
p = sys.argv[1]
if os.path.realpath(p) != os.path.normpath(p):
    refuse(3, "a link in the path")
"""
_READ_SCRIPT = _FILE_COMMON + """
try:
    fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
except OSError as e:
    refuse(3 if e.errno == errno.ELOOP else 2, "a link" if e.errno == errno.ELOOP else e.strerror)
st = os.fstat(fd)
if not stat.S_ISREG(st.st_mode):
    refuse(4, "not a regular file")
limit = int(sys.argv[2])
data = os.read(fd, limit + 1) if st.st_size <= limit else b"x" * (limit + 1)
while len(data) <= limit:
    more = os.read(fd, limit + 1 - len(data))
    if not more:
        break
    data += more
if len(data) > limit:
    refuse(5, "over the %d byte limit" % limit)
sys.stdout.write(base64.b64encode(data).decode())
"""
_WRITE_SCRIPT = _FILE_COMMON + """
flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_CREAT | os.O_TRUNC if sys.argv[2] == "trunc" else os.O_APPEND)
try:
    fd = os.open(p, flags, 0o644)
except OSError as e:
    refuse(3 if e.errno == errno.ELOOP else 2, "a link" if e.errno == errno.ELOOP else e.strerror)
if not stat.S_ISREG(os.fstat(fd).st_mode):
    refuse(4, "not a regular file")
data = base64.b64decode(sys.argv[3])
while data:
    data = data[os.write(fd, data):]
os.close(fd)
"""
_WRITE_CHUNK = 64 * 1024  # bytes per exec: base64 of it stays under the kernel's 128 KiB for one argument


def _absolute(path: str) -> str:
    return path if path.startswith("/") else f"{WORKDIR}/{path}"


def _file_refusal(result: ExecResult) -> str:
    if result.timed_out:
        return "timed out"
    return (result.stderr.strip().splitlines() or [f"exit code {result.exit_code}"])[-1][:200]
