"""Unit tests (no engine) for the stop path: cancel checks, container sweep, storage errors, video checks."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from statebox.errors import StorageError, storage_error
from statebox.signals import Cancelled, Interrupted


class _FakeApi:
    def __init__(self) -> None:
        self.filters: list[dict] = []
        self.removed: list[str] = []

    def containers(self, all: bool, filters: dict) -> list[dict]:  # noqa: A002 - docker's name
        self.filters.append(filters)
        return [{"Id": "c1"}, {"Id": "c2"}]

    def remove_container(self, cid: str, force: bool) -> None:
        self.removed.append(cid)


class _FakeSandbox:
    def __init__(self) -> None:
        self.stopped = 0

    def stop(self) -> None:
        self.stopped += 1


class _FakeEngine:
    """A SandboxProvider whose run cleanup sweeps like the Docker one (by pid and run labels)."""

    name = "fake"

    def __init__(self) -> None:
        self.api = _FakeApi()
        self.started: list[_FakeSandbox] = []
        self.ran = 0

    def run_init(self, run_id=""):
        pass

    def attempt_init(self, attempt_id):
        pass

    def attempt_cleanup(self, attempt_id):
        pass

    def run_cleanup(self, run_id=""):
        from statebox.sandbox.docker import remove_own_containers

        remove_own_containers(self.api, run_id or None)

    def run(self, spec, *args, **kwargs):
        self.ran += 1
        return "result"

    def start(self, spec, *args, **kwargs):
        sandbox = _FakeSandbox()
        self.started.append(sandbox)
        return sandbox


class _Spec:
    run_id = ""
    attempt_id = ""
    mounts: list = []

    def model_copy(self, update):
        return self


def _services(engine=None):
    from statebox.harness.runner import RunServices
    from statebox.policies.model import load_policy

    return RunServices(policy=load_policy("default"), provider=engine, run_id="run-x")


def test_a_cluster_stops_marker_file_stops_new_containers_before_the_cancel_arrives(tmp_path, monkeypatch):
    """On a node, the head's stop sweeps containers and Ray's cancel reaches the task later: the sweep's
    marker file (written before it removes anything) already refuses a new container (a group member
    whose container was removed does not run again alone), and a resumed run's node clears it."""
    from statebox.harness import cluster_worker
    from statebox.harness.attempt_sandbox import AttemptSandboxes

    monkeypatch.setenv("STATEBOX_NODE_ROOT", str(tmp_path))
    engine = _FakeEngine()
    services = _services(engine)
    staging = tmp_path / "runs" / "run-x"
    staging.mkdir(parents=True)
    services.tracker.stop_marker = staging / cluster_worker.STOP_MARKER
    wrapped = AttemptSandboxes(engine, run_id="run-x", attempt_id="a1", tracker=services.tracker)
    assert wrapped.run(_Spec(), None, None) == "result" and not services.cancel.is_set()
    cluster_worker.sweep("run-x", [], only_dead=True)  # the end of a run: no marker
    assert not services.tracker.stop_marker.exists()
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # the sweep's engine: none here
    cluster_worker.sweep("run-x", [], only_dead=False)  # a stop
    assert services.tracker.stop_marker.exists()
    with pytest.raises(Cancelled):
        wrapped.run(_Spec(), None, None)
    assert services.cancel.is_set() and engine.ran == 1  # the rest of the seam sees the stop too


def test_attempt_engine_refuses_new_containers_once_the_run_stops_and_the_sweep_removes_them():
    from statebox.harness.attempt_sandbox import AttemptSandboxes

    engine = _FakeEngine()
    services = _services(engine)
    wrapped = AttemptSandboxes(engine, run_id="run-x", attempt_id="a1", tracker=services.tracker)
    assert wrapped.run(_Spec(), None, None) == "result"
    sandbox = wrapped.start(_Spec())
    services.cancel.set()
    with pytest.raises(Cancelled):
        wrapped.run(_Spec(), None, None)
    with pytest.raises(Cancelled):
        wrapped.start(_Spec())
    assert engine.ran == 1 and len(engine.started) == 1
    services.stop_containers()
    assert sandbox.stopped == 1
    labels = engine.api.filters[-1]["label"]
    assert f"statebox.pid={os.getpid()}" in labels and "statebox.run=run-x" in labels
    assert engine.api.removed == ["c1", "c2"]


class _Agent:
    name = "fake"
    needs_sandbox = False
    needs_gateway = False

    def __init__(self, behaviour) -> None:
        self.behaviour = behaviour

    def run(self, ctx):
        return self.behaviour(ctx)


def _session(ctx, status="ok", reason="", response="3"):
    from statebox.schema import Session

    return Session(attempt_id=ctx.attempt.attempt_id, agent="fake", status=status, reason=reason, response=response)


def test_an_attempt_stopped_mid_way_is_never_a_row(tmp_path, one_attempt):
    services = _services()

    def stopped_while_running(ctx):
        services.cancel.set()  # the stop lands while the agent runs
        return _session(ctx, status="error", reason="exit code 137")

    with pytest.raises(Cancelled):
        one_attempt.run(services, _Agent(stopped_while_running), tmp_path / "run")
    assert not (tmp_path / "run" / "attempts" / one_attempt.planned("fake").attempt.attempt_id / "session.json").exists()
    with pytest.raises(Cancelled):  # and nothing new starts once stopped
        one_attempt.run(services, _Agent(_session), tmp_path / "run2")
    assert not (tmp_path / "run2").exists()


def test_a_full_disk_stops_the_run_instead_of_becoming_a_failed_row(tmp_path, one_attempt):
    services = _services()
    run_dir = tmp_path / "run"

    def disk_full(ctx):
        raise OSError(errno.ENOSPC, "No space left on device", str(ctx.attempt_dir / "events.jsonl"))

    with pytest.raises(StorageError, match="no space left on device"):
        one_attempt.run(services, _Agent(disk_full), run_dir)

    def caught_it_itself(ctx):
        return _session(ctx, status="error", reason="OSError: [Errno 28] No space left on device")

    with pytest.raises(StorageError):
        one_attempt.run(services, _Agent(caught_it_itself), run_dir)

    def agent_permission_problem(ctx):  # not statebox's folder: the agent's own failure, a row
        raise PermissionError(errno.EACCES, "Permission denied", "/somewhere/else")

    row = one_attempt.run(services, _Agent(agent_permission_problem), run_dir)
    assert row.status == "error" and "Permission denied" in row.reason


def test_storage_error_words():
    err = storage_error(OSError(errno.ENOSPC, "No space left on device", "/x/y"), doing="cannot write a result row")
    assert str(err) == "cannot write a result row: no space left on device (/x/y)"
    assert "read-only file system" in str(storage_error(OSError(errno.EROFS, "ro", "/r")))
    assert storage_error(OSError(errno.EACCES, "denied", "/a"), owned=False) is None
    assert storage_error(OSError(errno.ENOENT, "missing", "/a")) is None
    assert storage_error(ValueError("x")) is None


def test_interrupted_line_and_exit_code():
    import signal

    exc = Interrupted(signal.SIGTERM, "3 rows kept in r/results.sqlite")
    assert exc.exit_code == 143 and str(exc) == "stopped by SIGTERM; containers removed; 3 rows kept in r/results.sqlite"
    assert Interrupted(signal.SIGHUP).exit_code == 129 and Interrupted(signal.SIGINT).exit_code == 130
    assert not isinstance(exc, (Exception, KeyboardInterrupt))  # click and `except Exception` must not eat it


def test_run_stoppable_kills_its_child_when_statebox_stops(monkeypatch):
    from statebox import signals

    result = signals.run_stoppable(["sh", "-c", "echo hi; echo err >&2; exit 3"])
    assert (result.returncode, result.stdout, result.stderr) == (3, "hi\n", "err\n")
    monkeypatch.setattr(signals, "stopping", lambda: True)
    with pytest.raises(Cancelled):
        signals.run_stoppable(["sleep", "1000"], poll_s=0.05)


def test_store_turns_a_full_database_into_one_line(tmp_path, monkeypatch):
    import sqlite3

    from statebox.harness.store import ResultRow, ResultStore

    store = ResultStore(tmp_path)
    store.add(ResultRow(attempt_id="a", run_id="r", agent="x", dataset="d", bench="vstat", item_id="i"))

    class _Full:
        def execute(self, *a, **k):
            raise sqlite3.OperationalError("database or disk is full")

        def rollback(self):
            pass

    real = store._conn
    store._conn = _Full()
    with pytest.raises(StorageError, match=r"cannot write a result row: no space left on device \(.*results.sqlite\)"):
        store.add(ResultRow(attempt_id="b", run_id="r", agent="x", dataset="d", bench="vstat", item_id="i"))
    store._conn = real
    assert store.done_ids() == {"a"}
    store.close()


def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *args], check=True)


def test_video_checks_name_the_cause(tmp_path):
    from statebox.errors import UserError
    from statebox.sandbox.videocheck import check_video

    video = tmp_path / "v.mp4"
    _ffmpeg("-f", "lavfi", "-i", "testsrc=size=64x48:rate=5:duration=2", "-pix_fmt", "yuv420p", str(video))
    assert check_video(video, 2.2).duration_s == pytest.approx(2.0, abs=0.05)  # within the tolerance
    with pytest.raises(UserError, match=r"query time 99s is past the end of .*v.mp4 \(2.0s\)"):
        check_video(video, 99)
    audio = tmp_path / "a.m4a"
    _ffmpeg("-f", "lavfi", "-i", "sine=duration=1", str(audio))
    with pytest.raises(UserError, match=r"a.m4a: no video stream \(audio only\)"):
        check_video(audio)
    empty = tmp_path / "e.mp4"
    empty.write_bytes(b"")
    with pytest.raises(UserError, match=r"e.mp4: empty file"):
        check_video(empty)
    junk = tmp_path / "j.mp4"
    junk.write_bytes(b"not a video at all" * 10)
    with pytest.raises(UserError, match=r"j.mp4: not a readable video"):
        check_video(junk)


def test_clean_copy_names_the_cause_instead_of_ffmpegs_map_error(tmp_path):
    from statebox.errors import UserError
    from statebox.sandbox.workspace import clean_copy

    audio = tmp_path / "a.m4a"
    _ffmpeg("-f", "lavfi", "-i", "sine=duration=1", str(audio))
    for cut in (None, 0.5):
        with pytest.raises(UserError) as info:
            clean_copy(audio, tmp_path / "out.mp4", cut_at=cut, reencode=False)
        assert "no video stream" in str(info.value) and "trailing" not in str(info.value)


def test_lock_on_a_read_only_folder_is_a_storage_error(tmp_path, monkeypatch):
    from statebox.harness import lock

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / ".lock"))

    monkeypatch.setattr(lock.os, "open", refuse)
    with pytest.raises(StorageError, match="cannot write the run folder: read-only file system"):
        lock.RunLock(tmp_path).acquire()


def test_run_lock_is_released_by_the_kernel_when_the_holder_dies(tmp_path):
    import sys
    import time

    from statebox.harness.lock import RunLock

    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from statebox.harness.lock import RunLock; "
                               "RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(1000)", str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        from statebox.harness.lock import RunFolderBusy

        with pytest.raises(RunFolderBusy, match=f"pid {holder.pid}"):
            RunLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    lock = RunLock(tmp_path).acquire()  # SIGKILL released it; the stale file does not block
    lock.release()


def test_cli_backstop_sweeps_only_engines_this_process_connected_to(monkeypatch):
    from types import SimpleNamespace

    from statebox.sandbox import engine_client
    from statebox.sandbox.docker import remove_own_containers

    api = _FakeApi()
    monkeypatch.setattr(engine_client, "_clients", {"": SimpleNamespace(api=api)})
    assert remove_own_containers() == 2
    assert f"statebox.pid={os.getpid()}" in api.filters[-1]["label"]
    monkeypatch.setattr(engine_client, "_clients", {})
    assert remove_own_containers() == 0
