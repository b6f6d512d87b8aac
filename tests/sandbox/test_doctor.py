"""`statebox sandbox doctor` names the seccomp profile, the init model and the workspace limits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker


def test_doctor_lists_the_hardening(docker_engine):
    from statebox.sandbox.doctor import gather_checks

    checks = {c.name: c for c in gather_checks()}
    seccomp = checks["seccomp profile"]
    assert seccomp.state == "ok" and "seccomp.json" in seccomp.detail
    for syscall in ("ptrace", "io_uring_setup", "userfaultfd", "keyctl", "bpf", "perf_event_open"):
        assert syscall in seccomp.detail
    assert checks["container init"].state == "ok" and "setpriv" in checks["container init"].detail
    assert checks["workspace limits"].state == "ok", checks["workspace limits"].detail


def test_doctor_command_prints_the_profile(docker_engine):
    out = subprocess.run([str(Path(sys.executable).parent / "statebox"), "sandbox", "doctor"], capture_output=True,
                         text=True, env={"COLUMNS": "400", "PATH": "/usr/bin:/bin:/usr/local/bin"})
    assert "seccomp profile" in out.stdout and "io_uring_setup" in out.stdout, out.stdout[-2000:] + out.stderr
