"""The hardened engine on the real Docker daemon: results, limits, streaming, cleanup, concurrency."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from statebox.errors import UserError
from statebox.policies import load_policy
from statebox.sandbox.docker import ContainerSpec, Mount, SandboxEngine
from tests.conftest import default_signal_dispositions

pytestmark = pytest.mark.docker


def _policy(**limits):
    base = load_policy("default")
    return base.model_copy(update={"limits": base.limits.model_copy(update=limits)})


def _spec(image, ws, command, **kw):
    policy = kw.pop("policy", None) or _policy()
    return ContainerSpec(image=image, command=command, workspace=ws, policy=policy, run_id="t-docker", **kw)


def test_ok_error_and_output_files(docker_engine, sandbox_image, agent_dir, tmp_path):
    res = docker_engine.run(_spec(sandbox_image, agent_dir, ["bash", "-c", "echo hi; echo err >&2; echo x > /workspace/a"]),
                            tmp_path / "o", tmp_path / "e")
    assert (res.status, res.exit_code) == ("ok", 0)
    assert (tmp_path / "o").read_text() == "hi\n" and (tmp_path / "e").read_text() == "err\n"
    assert (agent_dir / "a").read_text() == "x\n"  # the workspace is the rw working dir
    res = docker_engine.run(_spec(sandbox_image, agent_dir, "exit 7"), None, None)
    assert (res.status, res.exit_code) == ("error", 7) and "7" in res.reason


def test_environment_is_the_allow_list_only(docker_engine, sandbox_image, agent_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-host-only")
    spec = _spec(sandbox_image, agent_dir, ["env"], env={"EXTRA": "1"})
    docker_engine.run(spec, tmp_path / "o", None)
    env = dict(line.split("=", 1) for line in (tmp_path / "o").read_text().splitlines())
    assert "ANTHROPIC_API_KEY" not in env and "sk-host-only" not in (tmp_path / "o").read_text()
    assert env["EXTRA"] == "1" and env["HOME"] == "/home/agent" and env["PATH"] == "/usr/local/bin:/usr/bin:/bin"


def test_output_streams_while_running(docker_engine, sandbox_image, agent_dir, tmp_path):
    seen: list[tuple[float, str]] = []
    spec = _spec(sandbox_image, agent_dir, ["bash", "-c", "for i in 1 2 3; do echo line$i; sleep 0.5; done"])
    res = docker_engine.run(spec, tmp_path / "o", None, on_stdout_line=lambda l: seen.append((time.monotonic(), l)))
    end = time.monotonic()
    assert [l for _, l in seen] == ["line1", "line2", "line3"]
    assert end - seen[0][0] > 0.8  # the first line arrived long before the container ended
    assert res.status == "ok"


def test_timeout_and_oom(docker_engine, sandbox_image, agent_dir):
    started = time.monotonic()
    res = docker_engine.run(_spec(sandbox_image, agent_dir, "sleep 100", time_limit_s=1.5), None, None)
    assert res.status == "timeout" and "1.5" in res.reason
    assert time.monotonic() - started < 8
    res = docker_engine.run(_spec(sandbox_image, agent_dir, ["python3", "-c", "b=[bytearray(2**25) for _ in range(40)]"],
                                  policy=_policy(memory_mb=96)), None, None)
    assert res.status == "oom", res


def test_hardening_as_the_engine_sees_it(docker_engine, sandbox_image, agent_dir, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    spec = _spec(sandbox_image, agent_dir, "true", mounts=[Mount(source=ro, target="/run/statebox")],
                 policy=_policy(memory_mb=512, pids=99, cpus=0.5), attempt_id="t-harden")
    with docker_engine.start(spec) as box:
        attrs = docker_engine.api.inspect_container(box.id)
        hc, cfg = attrs["HostConfig"], attrs["Config"]
        assert hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] is True
        assert hc["CapDrop"] == ["ALL"] and sorted(hc["CapAdd"]) == ["SETGID", "SETPCAP", "SETUID"]
        assert "no-new-privileges" in hc["SecurityOpt"]
        assert any(opt.startswith("seccomp=") and "io_uring_setup" in opt for opt in hc["SecurityOpt"])
        assert hc["PidsLimit"] == 99 and hc["Memory"] == 512 * 2**20 and hc["MemorySwap"] == 512 * 2**20
        assert hc["NanoCpus"] == 5 * 10**8 and hc["Init"] is True
        assert set(hc["Tmpfs"]) == {"/tmp", "/home/agent", "/dev/shm"}
        assert all("nr_inodes=" in opts for opts in hc["Tmpfs"].values())
        assert cfg["User"] == "0:0" and cfg["WorkingDir"] == "/workspace"  # root only for init; see below
        assert cfg["OpenStdin"] is False and cfg["Hostname"] == "sandbox"
        assert cfg["Labels"]["statebox"] == "1" and cfg["Labels"]["statebox.attempt"] == "t-harden"
        binds = {m["Destination"]: m for m in attrs["Mounts"]}
        assert set(binds) == {"/workspace", "/run/statebox"}
        assert binds["/workspace"]["RW"] is True and binds["/run/statebox"]["RW"] is False
        ex = box.exec(["bash", "-c", "pwd; id -u; echo e >&2"], timeout_s=20)
        assert (ex.exit_code, ex.stdout, ex.stderr, ex.timed_out) == (0, "/workspace\n1000\n", "e\n", False)
        caps = box.exec("grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status; stat -c %u /proc/1", timeout_s=20).stdout
        assert caps.count("0000000000000000") == 4 and caps.strip().endswith("0"), caps  # agent: no caps; init: root
        slow = box.exec("sleep 30", timeout_s=1)
        assert slow.timed_out and slow.duration_s < 25
    assert docker_engine.api.containers(all=True, filters={"label": "statebox.attempt=t-harden"}) == []


def test_running_sandbox_expires_at_the_wall_clock(docker_engine, sandbox_image, agent_dir):
    from statebox.errors import InfrastructureError

    box = docker_engine.start(_spec(sandbox_image, agent_dir, "true", time_limit_s=1))
    time.sleep(2.5)
    assert box.expired
    with pytest.raises(InfrastructureError, match="wall-clock"):
        box.exec("true")


def test_parallel_runs_overlap(docker_engine, sandbox_image, limited_dir):
    n = 4
    spans: dict[int, tuple[float, float]] = {}
    folders = [limited_dir(8) for _ in range(n)]

    def one(i: int) -> None:
        ws = folders[i]
        t0 = time.monotonic()
        res = docker_engine.run(_spec(sandbox_image, ws, f"sleep 1; echo {i} > /workspace/i"), None, None)
        assert res.status == "ok"
        spans[i] = (t0, time.monotonic())

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(spans) == n
    assert max(s for s, _ in spans.values()) < min(e for _, e in spans.values())  # all were running at once
    assert all((folders[i] / "i").read_text().strip() == str(i) for i in range(n))


def test_stale_containers_of_a_dead_process_are_collected(docker_engine, sandbox_image):
    import socket

    dead = subprocess.Popen(["true"])
    dead.wait()
    cid = docker_engine.api.create_container(
        sandbox_image, "sleep 60", labels={"statebox": "1", "statebox.host": socket.gethostname(),
                                           "statebox.pid": str(dead.pid), "statebox.attempt": "t-stale"})["Id"]
    SandboxEngine._gc_done.clear()
    assert SandboxEngine().gc_stale() == 0  # __init__ already collected it
    assert docker_engine.api.containers(all=True, filters={"id": cid}) == []


def test_ctrl_c_removes_the_container(sandbox_image, agent_dir, tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from statebox.policies import load_policy
        from statebox.sandbox.docker import ContainerSpec, SandboxEngine
        spec = ContainerSpec(image={sandbox_image!r}, command=["bash", "-c", "echo started; sleep 60"],
                             workspace=Path({str(agent_dir)!r}), policy=load_policy("default"), attempt_id="t-ctrlc")
        SandboxEngine().run(spec, None, None, on_stdout_line=lambda l: print(l, flush=True))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signal_dispositions)
    assert proc.stdout.readline().strip() == "started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert "KeyboardInterrupt" in err
    import docker

    client = docker.from_env(version="auto")
    assert client.api.containers(all=True, filters={"label": "statebox.attempt=t-ctrlc"}) == []


def test_gpu_required_without_runtime_is_a_user_error(docker_engine, sandbox_image, agent_dir):
    if docker_engine.has_gpu_runtime():
        pytest.skip("skipped: this engine has an NVIDIA runtime, so 'require' is satisfiable")
    policy = load_policy("default").model_copy(update={"gpu": "require"})
    with pytest.raises(UserError, match="NVIDIA runtime"):
        docker_engine.run(_spec(sandbox_image, agent_dir, "true", policy=policy), None, None)
    auto = docker_engine.run(_spec(sandbox_image, agent_dir, "true", gpu=True), None, None)
    assert auto.status == "ok" and auto.gpu is False


def test_no_engine_is_one_clear_line(monkeypatch, source_video):
    from statebox.sandbox import engine_client

    monkeypatch.setattr(engine_client, "_clients", {})
    with pytest.raises(UserError, match="no Docker engine at unix:///nonexistent/docker.sock.*start it"):
        SandboxEngine(docker_host="unix:///nonexistent/docker.sock")
    env = dict(os.environ, DOCKER_HOST="unix:///nonexistent/docker.sock")
    out = subprocess.run([str(Path(sys.executable).parent / "statebox"), "sandbox", "run", "--video", str(source_video),
                          "--question", "q", "--", "true"], capture_output=True, text=True, env=env)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "no Docker engine" in out.stderr


def test_cli_args_match_the_sdk_run(docker_engine, sandbox_image, agent_dir):
    spec = _spec(sandbox_image, agent_dir, ["bash", "-c", "id -u; cat /proc/self/status | grep CapEff; touch /x || echo ro"])
    out = subprocess.run(docker_engine.cli_args(spec), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "1000" and "0000000000000000" in out.stdout and "ro" in out.stdout


def test_print_cli_shows_the_hardened_docker_run_and_it_runs(docker_engine, sandbox_image, source_video):
    """`statebox sandbox run --print-cli` prints `SandboxEngine.cli_args` (the one hardening
    table) for the prepared workspace instead of running; that command, run by hand, is the sandbox."""
    import shlex

    from statebox.policies import load_policy
    from statebox.sandbox import hardening

    out = subprocess.run([str(Path(sys.executable).parent / "statebox"), "sandbox", "run", "--video", str(source_video),
                          "--question", "how many?", "--print-cli", "--", "bash", "-c", "id -u; cat instruction.txt"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    argv = shlex.split(out.stdout.strip().splitlines()[-1])
    assert argv[:3] == ["docker", "run", "--rm"]
    spec = ContainerSpec(image=sandbox_image, command=["true"], policy=load_policy("default"))
    flags = hardening.cli_flags(spec, gpu=False)
    assert " ".join(flags) in " ".join(argv)  # every hardening flag, in the table's order
    workspace = Path(next(a for a in argv if a.endswith(":/workspace:rw")).split(":")[0])
    try:
        ran = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.splitlines()[0] == "1000" and "how many?" in ran.stdout
    finally:
        from statebox.sandbox.limited_fs import reap_stale

        reap_stale(workspace.parent)  # the kept workspace's owner (the CLI process) is gone: unmounted


def test_a_printed_command_run_by_hand_is_not_swept_as_a_killed_runs_leftover(docker_engine, sandbox_image, source_video):
    """The command `--print-cli` prints outlives the process that printed it. It carried that process's pid as
    its `statebox.pid` label, so any statebox start on the host meanwhile (`gc_stale`: a container whose pid is
    gone was left by a killed run) removed it mid-run: exit 137 with no output (a fresh-clone CI run failed so,
    another test's engine starting beside it). Printed commands carry no pid label and survive the sweep: the
    container (it sleeps far longer than the test) is still running after a fresh process has swept."""
    import shlex

    out = subprocess.run([str(Path(sys.executable).parent / "statebox"), "sandbox", "run", "--video", str(source_video),
                          "--question", "how many?", "--print-cli", "--", "sleep", "600"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    argv = shlex.split(out.stdout.strip().splitlines()[-1])
    labels = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--label"]
    assert "statebox=1" in labels and not any(label.startswith("statebox.pid=") for label in labels)
    attempt = next(label for label in labels if label.startswith("statebox.attempt="))
    workspace = Path(next(a for a in argv if a.endswith(":/workspace:rw")).split(":")[0])

    def running() -> bool:
        listed = subprocess.run(["docker", "ps", "-q", "--filter", f"label={attempt}"], capture_output=True, text=True)
        return bool(listed.stdout.strip())

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not running():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the container never started"
            time.sleep(0.1)
        sweep = subprocess.run([sys.executable, "-c", "from statebox.sandbox.docker import SandboxEngine\n"
                                "print(SandboxEngine().gc_stale())"], capture_output=True, text=True, timeout=120)
        assert sweep.returncode == 0, sweep.stderr
        assert running() and proc.poll() is None, "the sweep removed a container started by hand"
    finally:
        subprocess.run(["docker", "rm", "-f", *subprocess.run(["docker", "ps", "-aq", "--filter", f"label={attempt}"],
                                                              capture_output=True, text=True).stdout.split()],
                       capture_output=True)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        from statebox.sandbox.limited_fs import reap_stale

        reap_stale(workspace.parent)
