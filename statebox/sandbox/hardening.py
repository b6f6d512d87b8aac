"""The one table of container hardening: each setting once, as Docker SDK arguments and as `docker run` flags.

Why a table: the engine (SDK) and `statebox sandbox run --print-cli` / the interactive
terminal / the perf peer (CLI) must never drift apart; each row below produces both.

What it enforces, and why each line exists:
- no network; read-only root; /tmp, home and /dev/shm as tmpfs with a size AND an inode limit;
- the container starts as root only for its init (docker's tini) and a `setpriv` that
  drops to uid 1000 with no capabilities at all (bounding set included) before the
  agent's command runs: the init is then owned by root, so the agent can neither
  ptrace, signal nor freeze it, and an attempt always ends on its own. The only
  capabilities the container keeps are the three `setpriv` needs for that drop;
- no-new-privileges, a seccomp allow-list (`seccomp.json`, made by
  scripts/dev/make_seccomp_profile.py) that also refuses ptrace, io_uring, userfaultfd,
  keyrings, bpf, perf and namespaces;
- pids, memory (no swap), CPU, core dumps off, a file-size ulimit, no container logs;
- writable storage only on size-limited filesystems (`check_writable`), fail closed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TypedDict

import docker.types

from statebox.errors import UserError
from statebox.sandbox import limited_fs
from statebox.sandbox.gpu import CDI_ALL
from statebox.sandbox.spec import HOME, WORKDIR, ContainerSpec

SECCOMP_PROFILE = Path(__file__).with_name("seccomp.json")
AGENT_UID = 1000
AGENT_USER = f"{AGENT_UID}:{AGENT_UID}"
INIT_USER = "0:0"
SHM_MB = 64
INIT_CAPS = ["SETUID", "SETGID", "SETPCAP"]  # only what setpriv needs to become the agent with nothing
DROP_TO_AGENT = ["setpriv", f"--reuid={AGENT_UID}", f"--regid={AGENT_UID}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--"]


def as_agent(command: list[str] | str) -> list[str]:
    """argv that runs `command` as uid 1000 with no capabilities, from the root init."""
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    return [*DROP_TO_AGENT, *argv]


@lru_cache(maxsize=1)
def seccomp_json() -> str:
    """The profile as Docker's API wants it (the content, not a path), compact."""
    try:
        return json.dumps(json.loads(SECCOMP_PROFILE.read_text()), separators=(",", ":"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{SECCOMP_PROFILE}: seccomp profile unreadable ({exc}); reinstall statebox") from exc


class SeccompSummary(TypedDict):
    path: str
    sha256: str  # first 16 hex digits
    default: str
    allowed: int
    denied: list[str]


def seccomp_summary() -> SeccompSummary:
    """What `statebox sandbox doctor` lists: the file, its hash, what it denies."""
    profile = json.loads(seccomp_json())
    denied = sorted(n for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ERRNO" for n in rule["names"])
    allowed = sum(len(rule["names"]) for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW")
    return {"path": str(SECCOMP_PROFILE), "sha256": hashlib.sha256(SECCOMP_PROFILE.read_bytes()).hexdigest()[:16],
            "default": f"{profile['defaultAction']} (errno {profile.get('defaultErrnoRet')})",
            "allowed": allowed, "denied": denied}


@dataclass
class Setting:
    """One hardening row: its Docker SDK `create_host_config` arguments and its `docker run` flags."""

    sdk: dict[str, object] = field(default_factory=dict)
    cli: list[str] = field(default_factory=list)


def _tmpfs(size_mb: int, inodes: int, extra: str) -> str:
    return f"rw,nosuid,nodev,size={size_mb}m,nr_inodes={inodes},{extra}"


def settings(spec: ContainerSpec, *, gpu: bool | str) -> list[Setting]:
    """Every hardening row for `spec` (binds and GPU included); see the module docstring.

    `gpu`: False, or how the engine hands out GPUs (sandbox/gpu.py): "nvidia" (True too) =
    the NVIDIA runtime's `--gpus all`, "cdi" = `--device nvidia.com/gpu=all`. A container
    with a GPU gets at least `limits.gpu_memory_mb` of memory (CUDA's host side needs it).
    """
    lim = spec.policy.limits
    memory_mb = max(lim.memory_mb, lim.gpu_memory_mb) if gpu else lim.memory_mb
    tmp = _tmpfs(lim.tmp_mb, lim.inodes, "mode=1777")
    home = _tmpfs(lim.home_mb, lim.inodes, f"uid={AGENT_UID},gid={AGENT_UID},mode=0700")
    shm = _tmpfs(SHM_MB, lim.inodes, "noexec,mode=1777")  # replaces docker's own /dev/shm, which has no inode limit
    fsize = lim.workspace_mb * 1024 * 1024
    rows = [
        Setting({"network_mode": "none"}, ["--network", "none"]),
        Setting({"read_only": True}, ["--read-only"]),
        Setting({"tmpfs": {"/tmp": tmp, HOME: home, "/dev/shm": shm}},
                ["--tmpfs", f"/tmp:{tmp}", "--tmpfs", f"{HOME}:{home}", "--tmpfs", f"/dev/shm:{shm}"]),
        Setting({"cap_drop": ["ALL"], "cap_add": list(INIT_CAPS)},
                ["--cap-drop", "ALL", *[a for cap in INIT_CAPS for a in ("--cap-add", cap)]]),
        Setting({"security_opt": ["no-new-privileges", f"seccomp={seccomp_json()}"]},
                ["--security-opt", "no-new-privileges", "--security-opt", f"seccomp={SECCOMP_PROFILE}"]),
        Setting({"pids_limit": lim.pids}, ["--pids-limit", str(lim.pids)]),
        Setting({"mem_limit": f"{memory_mb}m", "memswap_limit": f"{memory_mb}m"},
                ["--memory", f"{memory_mb}m", "--memory-swap", f"{memory_mb}m"]),
        Setting({"nano_cpus": int(lim.cpus * 1e9)}, ["--cpus", f"{lim.cpus:g}"]),
        Setting({"init": True}, ["--init"]),
        Setting({"log_config": {"type": "none", "config": {}}}, ["--log-driver", "none"]),
        # fsize: one file can never exceed the workspace budget, whichever filesystem it is on
        Setting({"ulimits": [{"Name": "core", "Soft": 0, "Hard": 0}, {"Name": "fsize", "Soft": fsize, "Hard": fsize}]},
                ["--ulimit", "core=0:0", "--ulimit", f"fsize={fsize}:{fsize}"]),
    ]
    binds: dict[str, dict[str, str]] = {}
    cli_binds: list[str] = []
    for source, target, mode in bind_list(spec):
        binds[source] = {"bind": target, "mode": mode}
        cli_binds += ["--volume", f"{source}:{target}:{mode}"]
    rows.append(Setting({"binds": binds}, cli_binds))
    if gpu == "cdi":
        rows.append(Setting({"device_requests": [docker.types.DeviceRequest(driver="cdi", device_ids=[CDI_ALL])]},
                            ["--device", CDI_ALL]))
    elif gpu:
        rows.append(Setting({"device_requests": [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]},
                            ["--gpus", "all"]))
    return rows


def bind_list(spec: ContainerSpec) -> list[tuple[str, str, str]]:
    """(host source, container target, ro|rw) for the workspace and every mount, checked."""
    out: list[tuple[str, str, str]] = []
    ws = spec.workspace_dir()
    if ws is not None:
        if not ws.is_dir():
            raise UserError(f"{ws}: workspace folder not found")
        out.append((str(ws.resolve()), WORKDIR, "rw"))
    for m in spec.mounts:
        if not Path(m.source).exists():
            raise UserError(f"{m.source}: mount source not found (for {m.target})")
        if m.target in (WORKDIR, "/", "/tmp", HOME) or not m.target.startswith("/"):
            raise UserError(f"mount target {m.target!r} is not allowed")
        out.append((str(Path(m.source).resolve()), m.target, "ro" if m.read_only else "rw"))
    return out


def check_writable(spec: ContainerSpec) -> None:
    """Fail closed: every folder the agent can write to must be a size- and inode-limited filesystem."""
    ws = spec.workspace_dir()
    if ws is not None and ws.is_dir() and not limited_fs.is_limited(ws):
        raise UserError(f"{ws}: the workspace is not a size-limited filesystem; make it with "
                        "prepare_workspace() or limited_folder() (statebox never runs an agent on unbounded storage)")
    for m in spec.mounts:
        source = Path(m.source)
        if m.read_only or m.writer == "statebox":
            continue
        if source.is_file():  # a single file (honeytokens: rw only so that reads move atime)
            st = source.stat()
            if st.st_uid == AGENT_UID or st.st_mode & 0o002 or (st.st_gid == AGENT_UID and st.st_mode & 0o020):
                raise UserError(f"{source}: a writable single-file mount must not be writable by the agent")
            continue
        if not limited_fs.is_limited(source):
            raise UserError(f"{m.source}: writable mount {m.target} is not a size-limited filesystem; "
                            "make it with limited_folder()")


def host_config_kwargs(spec: ContainerSpec, *, gpu: bool | str) -> dict[str, object]:
    merged: dict[str, object] = {}
    for row in settings(spec, gpu=gpu):
        merged.update(row.sdk)
    return merged


def cli_flags(spec: ContainerSpec, *, gpu: bool | str) -> list[str]:
    return [flag for row in settings(spec, gpu=gpu) for flag in row.cli]
