"""`statebox sandbox doctor`: is this machine ready to run sandboxes? Each problem comes with its fix."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Literal

from statebox.errors import UserError
from statebox.sandbox import gpu, hardening, images, limited_fs
from statebox.sandbox.engine_client import docker_client, start_hint
from statebox.sandbox.workspace import limited_folder, workspace_root


@dataclass
class Check:
    name: str
    state: str  # ok | warn | fail | info
    detail: str
    fix: str = ""


def gather_checks(docker_host: str | None = None) -> list[Check]:
    checks: list[Check] = []
    try:
        client = docker_client(docker_host)
        info = client.info()
        checks.append(Check("engine", "ok", f"Docker {info.get('ServerVersion')} ({info.get('Driver')}, cgroup v{info.get('CgroupVersion', '?')})"))
    except UserError as exc:
        checks.append(Check("engine", "fail", str(exc).split(";")[0], start_hint()))
        return checks

    base = images.expected_base(client)
    if base:
        checks.append(Check("base image", "ok", base))
    else:
        checks.append(Check("base image", "warn", f"neither {images.PUBLIC_BASE} nor {images.local_base_tag()} is present",
                            "`statebox sandbox build` (pulls, or makes a local base with debootstrap; --offline-base forces that)"))
    if shutil.which("debootstrap") is None:
        checks.append(Check("debootstrap", "warn" if not base else "info", "not installed (only needed when no registry answers)",
                            "apt-get install -y debootstrap"))

    for name in sorted(images.load_targets()):
        try:
            status = images.image_status(name, docker_host)
        except UserError as exc:
            checks.append(Check(f"image {name}", "fail", str(exc), "fix the target entry in statebox/sandbox/image/targets.yaml"))
            continue
        if status["present"]:
            checks.append(Check(f"image {name}", "ok", status["tag"]))
        elif status["latest_present"]:
            checks.append(Check(f"image {name}", "warn", "out of date (its Dockerfile, files or parent changed)",
                                f"statebox sandbox build --target {name}"))
        else:
            checks.append(Check(f"image {name}", "fail" if name == "sandbox" else "warn", "not built",
                                f"statebox sandbox build --target {name}"))

    bundle = images.DEFAULT_CA_BUNDLE
    if bundle.is_file():
        checks.append(Check("CA bundle", "ok", f"{bundle} (given to pip during builds)"))
    else:
        checks.append(Check("CA bundle", "warn", f"{bundle} missing: pip behind a TLS-intercepting proxy will fail",
                            "statebox sandbox build --ca-bundle /path/to/your-proxy-ca.pem"))

    checks.append(gpu_check(info))

    for tool in ("ffmpeg", "ffprobe"):
        if shutil.which(tool) is None:
            checks.append(Check(tool, "fail", "not on the host (workspaces need it)", "apt-get install -y ffmpeg"))
    try:
        root = workspace_root()
        probe = root / f".doctor-{os.getpid()}"
        probe.mkdir()
        probe.rmdir()
        checks.append(Check("workspace root", "ok", str(root)))
    except OSError as exc:
        checks.append(Check("workspace root", "fail", f"{exc}", "set STATEBOX_WORKSPACE_ROOT to a writable folder"))
        return checks
    checks.append(_limited_fs_check())
    summary = hardening.seccomp_summary()
    checks.append(Check("seccomp profile", "ok",
                        f"{summary['path']} (sha256 {summary['sha256']}): {summary['allowed']} syscalls allowed, "
                        f"default {summary['default']}; denied: {', '.join(summary['denied'])}"))
    checks.append(Check("container init", "ok",
                        f"docker's tini runs as root with only {'/'.join(hardening.INIT_CAPS)}; the agent's command runs "
                        f"through `{' '.join(hardening.DROP_TO_AGENT[:2])} ...` as uid {hardening.AGENT_UID} with "
                        "no capabilities, so it cannot ptrace, signal or freeze init"))
    return checks


def host_gpus() -> list[str] | None:
    """`nvidia-smi -L` lines (one per GPU the host driver sees); None when there is no nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line for line in out.stdout.splitlines() if line.startswith("GPU ")]


def gpu_check(info: dict[str, Any], host: list[str] | None | Literal[False] = False) -> Check:
    """Which GPU path the engine offers (NVIDIA runtime, CDI, none) and what that means for the tracker."""
    access = gpu.detect(info)
    host = host_gpus() if host is False else host
    seen = ("nvidia-smi not found on the host (no NVIDIA driver)" if host is None
            else f"the host driver sees {len(host)} GPU(s)")
    if access.available:
        return Check("GPU", "ok", f"{access.reason}; {seen}; containers that ask for one (the tracker; policy gpu: "
                                  "auto or require) get every GPU, with limits.gpu_memory_mb of memory at least")
    return Check("GPU", "warn" if host else "info",
                 f"no GPU for containers: {access.reason}; {seen}. The tracker runs on CPU; a policy with "
                 "gpu: require stops with one line", gpu.FIX)


def _limited_fs_check() -> Check:
    """Mount and unmount one tiny limited folder: the workspace limits need it (and root)."""
    try:
        with limited_folder(1, inodes=64) as folder:
            ok = limited_fs.is_limited(folder.path)
    except UserError as exc:
        return Check("workspace limits", "fail", str(exc), "run statebox as root (it mounts a size-limited tmpfs per attempt)")
    if not ok:
        return Check("workspace limits", "fail", "a mounted tmpfs did not show its size/inode limits",
                     "check /proc/self/mountinfo on this host")
    return Check("workspace limits", "ok", "each writable folder is a tmpfs with size= and nr_inodes= (ENOSPC past the budget)")


def run_doctor(docker_host: str | None = None) -> int:
    """Print the checks as a table; exit status 1 when any check failed."""
    from rich.console import Console
    from rich.table import Table

    checks = gather_checks(docker_host)
    table = Table(title="statebox sandbox doctor")
    for col in ("check", "state", "detail", "fix"):
        table.add_column(col, overflow="fold")
    colour = {"ok": "green", "warn": "yellow", "fail": "red", "info": "cyan"}
    for c in checks:
        table.add_row(c.name, f"[{colour[c.state]}]{c.state}[/]", c.detail, c.fix)
    Console().print(table)
    return 1 if any(c.state == "fail" for c in checks) else 0
