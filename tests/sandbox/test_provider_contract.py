"""The contract every sandbox provider passes (statebox/sandbox/provider.py:SandboxProvider).

Parametrised over the providers: Docker itself (`SandboxEngine`, chosen by name through
`get_provider`) and the harness's per-attempt wrapper over it (`AttemptSandboxes`), which
is what agents actually get. A provider the cluster work adds joins `PROVIDERS` below.
"""

from __future__ import annotations

import os
import secrets

import pytest

from statebox.harness.attempt_sandbox import AttemptSandboxes, SandboxTracker
from statebox.policies import load_policy
from statebox.sandbox.provider import Sandbox, SandboxFileError, SandboxProvider, get_provider
from statebox.sandbox.spec import ContainerSpec
from statebox.signals import Cancelled

pytestmark = pytest.mark.docker

RUN_ID = "t-contract"


def _docker(engine):
    return get_provider("docker")


def _attempt_wrapper(engine):
    return AttemptSandboxes(get_provider("docker"), run_id=RUN_ID, attempt_id=f"c-{secrets.token_hex(3)}",
                            tracker=SandboxTracker())


PROVIDERS = {"docker": _docker, "attempt-wrapper": _attempt_wrapper}


@pytest.fixture(params=sorted(PROVIDERS))
def provider(request, docker_engine) -> SandboxProvider:
    made = PROVIDERS[request.param](docker_engine)
    made.run_init(RUN_ID)
    yield made
    made.run_cleanup(RUN_ID)


def _policy(**limits):
    base = load_policy("default")
    return base.model_copy(update={"limits": base.limits.model_copy(update=limits)})


def _spec(image, ws, command, attempt_id="", **limits) -> ContainerSpec:
    return ContainerSpec(image=image, command=command, workspace=ws, policy=_policy(**limits), run_id=RUN_ID,
                         attempt_id=attempt_id or f"c-{secrets.token_hex(3)}")


def _ours(engine, **labels) -> list:
    filters = [f"statebox.pid={os.getpid()}"] + [f"statebox.{k}={v}" for k, v in labels.items()]
    return engine.api.containers(all=True, filters={"label": filters})


def test_it_is_a_provider(provider):
    assert isinstance(provider, SandboxProvider) and provider.name == "docker"


def test_run_to_completion_with_output_files(provider, sandbox_image, agent_dir, tmp_path):
    res = provider.run(_spec(sandbox_image, agent_dir, ["bash", "-c", "echo hi; echo err >&2; id -u > out"]),
                       tmp_path / "o", tmp_path / "e")
    assert (res.status, res.exit_code) == ("ok", 0)
    assert (tmp_path / "o").read_text() == "hi\n" and (tmp_path / "e").read_text() == "err\n"
    assert (agent_dir / "out").read_text() == "1000\n"
    lines: list[str] = []
    res = provider.run(_spec(sandbox_image, agent_dir, "echo a; echo b; exit 3"), None, None, on_stdout_line=lines.append)
    assert (res.status, res.exit_code) == ("error", 3) and [ln.strip() for ln in lines] == ["a", "b"]


def test_start_exec_stop(provider, sandbox_image, agent_dir, docker_engine):
    box = provider.start(_spec(sandbox_image, agent_dir, ["sleep", "infinity"]))
    try:
        assert isinstance(box, Sandbox)
        r = box.exec(["bash", "-c", "id -u; pwd; echo oops >&2; exit 4"])
        assert r.exit_code == 4 and r.stdout.split() == ["1000", "/workspace"] and r.stderr.strip() == "oops"
        assert box.exec("echo $((6 * 7))").stdout.strip() == "42"
    finally:
        box.stop()
    box.stop()  # idempotent


def test_files_round_trip_with_the_agents_rights(provider, sandbox_image, agent_dir):
    box = provider.start(_spec(sandbox_image, agent_dir, ["sleep", "infinity"]))
    try:
        payload = bytes(range(256)) * 700  # binary, more than one write chunk
        box.write_file("data.bin", payload)
        assert box.read_file("/workspace/data.bin") == payload
        assert (agent_dir / "data.bin").stat().st_uid == 1000
        box.write_file("/workspace/data.bin", b"short")  # replaced, not appended
        assert box.read_file("data.bin") == b"short"
        box.write_file("empty", b"")
        assert box.read_file("empty") == b""
        with pytest.raises(SandboxFileError):
            box.write_file("/etc/passwd", b"x")  # read-only root: the agent cannot, so neither can this
        with pytest.raises(SandboxFileError):
            box.read_file("/workspace/missing")
    finally:
        box.stop()


def test_files_refuse_links_and_special_files(provider, sandbox_image, agent_dir):
    box = provider.start(_spec(sandbox_image, agent_dir, ["sleep", "infinity"]))
    try:
        r = box.exec(["bash", "-c", "echo secret > real; ln -s /etc/hostname link; ln -s real inner; "
                                    "mkdir d; ln -s d dlink; echo x > d/f; mkfifo pipe"])
        assert r.exit_code == 0, r.stderr
        for path in ("link", "inner", "dlink/f", "/workspace/d", "pipe", "/proc/self/environ"):
            with pytest.raises(SandboxFileError):
                box.read_file(path)
        for path in ("link", "inner", "dlink/f", "pipe"):
            with pytest.raises(SandboxFileError):
                box.write_file(path, b"planted")
        assert box.read_file("real") == b"secret\n" and box.read_file("d/f") == b"x\n"
        assert (agent_dir / "real").read_text() == "secret\n"  # nothing written through a link
    finally:
        box.stop()


def test_limits_hold(provider, sandbox_image, agent_dir):
    res = provider.run(_spec(sandbox_image, agent_dir, ["sleep", "30"], time_limit_s=2), None, None)
    assert res.status == "timeout" and res.duration_s < 15
    box = provider.start(_spec(sandbox_image, agent_dir, ["sleep", "infinity"]))
    try:
        r = box.exec(["sleep", "30"], timeout_s=1)
        assert r.timed_out and r.duration_s < 10
        box.write_file("big", b"x" * 4096)
        with pytest.raises(SandboxFileError, match="limit"):
            box.read_file("big", max_bytes=1024)
        full = box.exec(["bash", "-c", "head -c 200M /dev/zero > fill; echo $?"])  # the workspace is 64 MB
        assert "No space left" in full.stderr
    finally:
        box.stop()


def test_lifecycle_cleans_what_an_attempt_and_a_run_leave(provider, sandbox_image, agent_dir, docker_engine):
    attempt_id = f"c-left-{secrets.token_hex(3)}"
    provider.attempt_init(attempt_id)
    spec = _spec(sandbox_image, agent_dir, ["sleep", "infinity"], attempt_id=attempt_id)
    provider.start(spec)  # never stopped by its caller
    assert len(_ours(docker_engine, attempt=attempt_id)) == 1
    provider.attempt_cleanup(attempt_id)
    assert _ours(docker_engine, attempt=attempt_id) == []
    provider.start(_spec(sandbox_image, agent_dir, ["sleep", "infinity"]))
    provider.start(_spec(sandbox_image, agent_dir, ["sleep", "infinity"]))
    if isinstance(provider, AttemptSandboxes):  # an attempt's view never ends the run: the run's provider does
        provider.run_cleanup(RUN_ID)
        assert len(_ours(docker_engine, run=RUN_ID)) == 2
        provider = provider.provider
    provider.run_cleanup(RUN_ID)
    assert _ours(docker_engine, run=RUN_ID) == []


def test_the_attempt_wrapper_adds_mounts_labels_and_the_stop_switch(docker_engine, sandbox_image, agent_dir, tmp_path):
    from statebox.sandbox.spec import Mount

    decoy = tmp_path / "decoy.json"
    decoy.write_text('{"answer": 12345}')
    tracker = SandboxTracker()
    wrapped = AttemptSandboxes(get_provider("docker"), mounts=[Mount(source=decoy, target="/data/answers.json")],
                               run_id=RUN_ID, attempt_id="c-wrapped", tracker=tracker)
    bare = ContainerSpec(image=sandbox_image, command=["cat", "/data/answers.json"], workspace=agent_dir,
                         policy=load_policy("default"))
    res = wrapped.run(bare, tmp_path / "o", None)
    assert res.status == "ok" and "12345" in (tmp_path / "o").read_text()
    box = wrapped.start(bare.model_copy(update={"command": ["sleep", "infinity"]}))
    assert len(_ours(docker_engine, attempt="c-wrapped", run=RUN_ID)) == 1
    tracker.cancel.set()
    with pytest.raises(Cancelled):
        wrapped.run(bare, None, None)
    with pytest.raises(Cancelled):
        wrapped.start(bare)
    tracker.stop_all()
    assert _ours(docker_engine, attempt="c-wrapped") == []
    box.stop()


def test_unknown_provider_is_one_line():
    from statebox.errors import UserError

    with pytest.raises(UserError, match="unknown sandbox provider 'nope'.*docker"):
        get_provider("nope")
