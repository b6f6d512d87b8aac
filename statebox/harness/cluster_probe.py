"""Does a Docker engine see this host's files, and does it keep a sandbox off the network?

One hardened container, run with the sandbox image on the engine in question, answers both:

- a random token is written to a probe file in a fresh workspace (a size-limited tmpfs, as
  every workspace is) and the container prints what it finds at `/workspace/<probe>`. An
  engine on another machine (a `DOCKER_HOST=tcp://...` or an ssh-forwarded socket) resolves
  bind mounts on *its* filesystem: the file is missing (or docker refuses the mount), so the
  workspace, the gateway socket and the honeytokens would silently not be there. statebox
  refuses such an engine with one line that names the cluster mode instead.
- the same container tries to leave the machine (TCP to two public resolvers, and lists its
  network interfaces): anything but "only `lo`, connections refused" means the engine does not
  apply `--network none`, and the node must not run attempts (a backend that drops network
  rules silently is worse than none).

Used by `statebox run` (single host, when DOCKER_HOST points elsewhere than the local
socket), by every Ray node at the start of a cluster run, and by `statebox cluster doctor`.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from statebox.attempt_folder import STDERR_LOG, STDOUT_LOG
from statebox.errors import UserError
from statebox.policies.model import Policy
from statebox.sandbox.images import ensure_image
from statebox.sandbox.spec import ContainerSpec
from statebox.sandbox.workspace import limited_folder

if TYPE_CHECKING:  # imported for real where an engine is made (the docker SDK is slow to import)
    from statebox.sandbox.docker import SandboxEngine

PROBE_FILE = ".statebox-probe"
DEFAULT_SOCKETS = ("", "unix:///var/run/docker.sock", "unix:///run/docker.sock")

PROBE_SCRIPT = r"""
import os, socket
try:
    print("probe:" + open("/workspace/%s").read().strip())
except OSError as exc:
    print("probe-missing:" + type(exc).__name__)
names = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:] if ":" in l)
print("ifaces:" + ",".join(names))
opened = []
for host in ("1.1.1.1", "8.8.8.8"):
    try:
        socket.create_connection((host, 53), timeout=2).close()
        opened.append(host)
    except OSError:
        pass
print("egress:" + (",".join(opened) if opened else "blocked"))
""" % PROBE_FILE


@dataclass
class ProbeResult:
    shares_filesystem: bool = False
    egress_blocked: bool = False
    interfaces: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def probe_engine(engine: SandboxEngine, policy: Policy, image: str, *, where: str = "") -> ProbeResult:
    """Run the probe container on `engine` and say what it found."""
    result = ProbeResult()
    label = where or (getattr(engine, "docker_host", None) or os.environ.get("DOCKER_HOST") or "the local engine")
    token = secrets.token_hex(16)
    folder = limited_folder(8, inodes=64)
    logs = Path(tempfile.mkdtemp(prefix="statebox-probe-"))
    try:
        probe = folder.path / PROBE_FILE
        probe.write_text(token + "\n")
        probe.chmod(0o644)
        spec = ContainerSpec(image=image, command=["python3", "-c", PROBE_SCRIPT], workspace=folder.path,
                             policy=policy, run_id="statebox-probe", attempt_id=f"probe-{token[:8]}")
        try:
            ran = engine.run(spec, logs / STDOUT_LOG, logs / STDERR_LOG)
        except Exception as exc:  # noqa: BLE001 - a refused bind mount is the clearest "not this host"
            text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            if "bind source path does not exist" in text or "invalid mount" in text or "no such file" in text.lower():
                result.problems.append(f"{label}: the engine does not see this host's files ({text})")
            else:
                result.problems.append(f"{label}: the probe container did not run ({text})")
            return result
        out = (logs / STDOUT_LOG).read_text(errors="replace") if (logs / STDOUT_LOG).exists() else ""
        lines = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        if lines.get("probe") == token:
            result.shares_filesystem = True
        else:
            result.problems.append(f"{label}: the engine does not see this host's files (a probe file written to the "
                                   "workspace was not found inside the container)")
        result.interfaces = [n for n in lines.get("ifaces", "").split(",") if n]
        egress = lines.get("egress", "")
        result.egress_blocked = egress == "blocked" and set(result.interfaces) <= {"lo"}
        if "egress" not in lines:
            err = (logs / STDERR_LOG).read_text(errors="replace")[-300:] if (logs / STDERR_LOG).exists() else ""
            result.problems.append(f"{label}: the probe container failed ({ran.reason or ran.status}) {err.strip()[:160]}")
        elif not result.egress_blocked:
            result.problems.append(f"{label}: a sandbox is NOT cut off from the network (interfaces {result.interfaces}, "
                                   f"reached {egress}); the engine ignores --network none, refusing to run attempts on it")
        return result
    finally:
        folder.cleanup()
        for child in logs.iterdir():
            child.unlink(missing_ok=True)
        logs.rmdir()


_checked: dict[str, ProbeResult] = {}
_checked_lock = threading.Lock()


def engine_is_default(docker_host: str | None = None) -> bool:
    host = docker_host if docker_host is not None else os.environ.get("DOCKER_HOST", "")
    return host in DEFAULT_SOCKETS


def require_shared_filesystem(policy: Policy, docker_host: str | None = None) -> None:
    """Single-host runs: refuse (one line) an engine that does not see this host's files.

    Checked once per process and engine, only when DOCKER_HOST points elsewhere than the
    local socket (the local engine shares the filesystem by construction)."""
    host = docker_host if docker_host is not None else os.environ.get("DOCKER_HOST", "")
    if engine_is_default(host):
        return
    with _checked_lock:
        found = _checked.get(host)
    if found is None:
        from statebox.sandbox.docker import SandboxEngine  # why: the docker SDK (~1 s), remote engines only

        engine = SandboxEngine(host or None)
        found = probe_engine(engine, policy, ensure_image("sandbox", docker_host=host or None), where=f"DOCKER_HOST={host}")
        with _checked_lock:
            _checked[host] = found
    if not found.shares_filesystem:
        detail = next((p for p in found.problems if "files" in p or "probe container" in p), "the probe failed")
        raise UserError(f"{detail.split(': ', 1)[-1] if ': ' in detail else detail}; DOCKER_HOST={host} is not on this "
                        "host, so workspaces, the gateway socket and honeytokens cannot be mounted: run the attempts on "
                        "that machine with the cluster mode (`statebox run ... --cluster ADDRESS`, docs/cluster.md)")
    if not found.egress_blocked:
        raise UserError(next(p for p in found.problems if "network" in p))
