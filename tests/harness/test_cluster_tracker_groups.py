"""Tracker attempt groups on a Ray cluster: `--option group=N` makes up to N tracker attempts
one Ray task and one container on the node that gets it (`cluster_worker.run_group`).

The pieces without a cluster come first (batch sizes, the batcher's expected members, a group
one of whose attempts failed). Then a real cluster (`ray_cluster.Cluster`, the same `ray
start` nodes as test_cluster.py): node `a`, the head, has no GPU; node `g` declares one logical
GPU (`ray start --num-gpus=1`) without having one. Both use this host's Docker engine (the
tracker image is 7 GB: shipping it to the second dockerd of test_cluster.py would be the test),
each with its own workspace root and staging folder. With the default policy (`gpu: auto`) a
tracker task asks Ray for `num_gpus=1`, so every tracker group lands on `g`, and the sandbox,
finding no NVIDIA runtime or CDI spec on the engine, runs the container on CPU (each session
records `meta.gpu == false`). `gpu: require` is refused before anything runs: `g` offers a GPU
to Ray that its engine cannot give a container.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ray_cluster import Cluster, run_containers, store_rows, wait_for
from streaming_session_support import container_creates, listen_for_creates

STATEBOX = [sys.executable, "-m", "statebox.cli"]


# ------------------------------------------------------------------ without a cluster


def _planned(agent: str, k: int):
    return SimpleNamespace(attempt=SimpleNamespace(agent=agent, attempt_id=f"{agent}-{k}"))


def test_batches_never_mix_agents_and_a_tracker_group_is_its_size():
    from statebox.harness.cluster import RayExecutor, same_agent_runs

    todo = [_planned("oracle", k) for k in range(5)] + [_planned("tracker", k) for k in range(7)] + [_planned("shell", k) for k in range(2)]
    runs = same_agent_runs(todo)
    assert [runs[p.attempt.attempt_id] for p in todo] == [5, 4, 3, 2, 1, 7, 6, 5, 4, 3, 2, 1, 2, 1]
    ex = RayExecutor("auto", host_batch=32)
    ex._runs, ex.sandboxed, ex.group_sizes = runs, {"tracker", "shell"}, {"tracker": 3, "shell": 1}
    # the runner's loop: take batch_size(next) attempts from the front, in plan order
    queue, batches = list(reversed(todo)), []
    while queue:
        batches.append([queue.pop().attempt.attempt_id for _ in range(min(len(queue), ex.batch_size(queue[-1])))])
    assert [len(b) for b in batches] == [5, 3, 3, 1, 1, 1]
    assert all(len({a.split("-")[0] for a in b}) == 1 for b in batches)  # never an oracle with a tracker


class _Provider:
    name = "docker"


def _ctx(aid: str, provider):
    # each attempt sees the run's provider through its own wrapper (runner: AttemptSandboxes per attempt)
    policy = SimpleNamespace(model_dump_json=lambda: "{}")
    return SimpleNamespace(attempt=SimpleNamespace(attempt_id=aid), engine=SimpleNamespace(provider=provider), policy=policy)


def test_expected_attempts_make_one_group_however_late_they_arrive():
    from statebox.agents.tracker import _Batcher

    groups: list[list[str]] = []

    def run_group(ctxs):
        groups.append([c.attempt.attempt_id for c in ctxs])
        return [f"session-{c.attempt.attempt_id}" for c in ctxs]

    batcher = _Batcher(run_group, size=4, wait_s=0.05)  # a short wait: an unexpected straggler would miss the group
    provider = _Provider()
    batcher.expect(["t0", "t1", "t2", "t3"])
    out: dict[str, str] = {}

    def arrive(aid: str, delay: float) -> None:
        time.sleep(delay)
        if aid == "t3":  # failed before its agent ran (e.g. its workspace was refused)
            batcher.left(aid)
            return
        out[aid] = batcher.submit(_ctx(aid, provider))

    threads = [threading.Thread(target=arrive, args=(f"t{k}", 0.3 * k)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert groups == [["t0", "t1", "t2"]]  # one container for the three that ran, in arrival order
    assert out == {f"t{k}": f"session-t{k}" for k in range(3)}
    # not expected (the single-host `-c N` path): attempts group by `wait_s` or size, as before; each
    # attempt's own wrapper of the one provider does not keep them apart (it did: one container each)
    groups.clear()
    pairs = _Batcher(run_group, size=2, wait_s=60)
    pair = [threading.Thread(target=lambda a=a: pairs.submit(_ctx(a, provider))) for a in ("u0", "u1")]
    for t in pair:
        t.start()
    for t in pair:
        t.join(timeout=30)
    assert [sorted(g) for g in groups] == [["u0", "u1"]]


def test_a_failed_attempt_of_a_group_keeps_the_others_rows(tmp_path):
    """A group task whose one attempt raised on the node: the others' folders and rows are kept
    (written by `stop`, as the run stops), the failed one gets no row (resume redoes it)."""
    from statebox.errors import UserError
    from statebox.harness.cluster import RayExecutor
    from statebox.harness.cluster_handoff import BatchResult, GroupError, NodeIdentity, PackedAttempt
    from statebox.harness.cluster_worker import pack_folder
    from statebox.harness.store import ResultRow

    ex = RayExecutor("auto")
    ex.ctx = SimpleNamespace(run_dir=tmp_path)
    batch = [_planned("tracker", k) for k in range(3)]
    rows, results = [], []
    for k in (0, 2):
        src = tmp_path / "node" / f"tracker-{k}"
        src.mkdir(parents=True)
        (src / "session.json").write_text("{}")
        row = ResultRow(attempt_id=f"tracker-{k}", run_id="r", agent="tracker", dataset="d", bench="vstat", item_id=str(k))
        rows.append(row)
        results.append(PackedAttempt(row=row, folder=pack_folder(src)))
    who = NodeIdentity(node="g", node_id="n1", host="g", pid="1")
    result = BatchResult(who=who, results=results, group=3,
                         error=GroupError(attempt_id="tracker-1", type="StorageError", message="no space left on device (/x)",
                                          user_error=True))
    with pytest.raises(UserError, match="tracker-1: no space left"):
        ex.collect_rows(result, batch)
    recorded = []
    ex.stop({}, lambda finished: recorded.extend(finished))
    assert [(p.attempt.attempt_id, r.attempt_id) for p, r in recorded] == [("tracker-0", "tracker-0"), ("tracker-2", "tracker-2")]
    assert (tmp_path / "attempts" / "tracker-0" / "session.json").is_file()
    assert not (tmp_path / "attempts" / "tracker-1").exists()
    # rows for an attempt it was not given are refused, error or not
    with pytest.raises(UserError, match="other attempts"):
        ex._place(BatchResult(who=who, results=results[::-1], group=3,
                              error=GroupError(attempt_id="x", type="OSError", user_error=False)), batch)


# ------------------------------------------------------------------ on a real cluster

# one run id for every run below (the same attempt ids, so rows compare directly), its own per test
# session: container counts and sweeps go by the run label, and another session may share this engine
RUN_ID = f"trk-grp-{os.getpid()}"


@pytest.fixture(scope="module")
def tracker_suite(tmp_path_factory) -> Path:
    from statebox.benchmarks.synthetic.suite import make_suite

    out = tmp_path_factory.mktemp("tsuite")
    make_suite(out, size="tiny", seed=0, tasks=["cube_count"])  # 4 items, one question each
    return out


@pytest.fixture(scope="module")
def tracker_image(docker_engine) -> str:
    from statebox.tracker import container as tc

    return tc.tracker_image(progress=print)  # built from this tree if missing


def _save(run_dir: Path, suite: Path, group: int, concurrency: int, policy: str = "default") -> Path:
    from statebox.harness.plan import RunConfig, datasets_from_suite

    run_dir.mkdir(parents=True)
    options = {"tracker": {"extra": {"group": group}}} if group > 1 else {}
    RunConfig(run_id=RUN_ID, agents=["tracker", "oracle"], datasets=datasets_from_suite(suite), concurrency=concurrency,
              suite=str(suite), agent_options=options, policy=policy).save(run_dir)
    return run_dir


def _run(run_dir: Path, *extra: str, timeout: int = 900, env: dict[str, str] | None = None
         ) -> tuple[subprocess.CompletedProcess, float, float]:
    listen_for_creates()  # before the run: the engine keeps only its last 256 events
    started = time.time()
    done = subprocess.run(STATEBOX + ["run", "--resume", str(run_dir), "--json", *extra], capture_output=True, text=True,
                          timeout=timeout, env=env)
    return done, started, time.time()


def _sessions(run_dir: Path, agent: str = "tracker") -> dict[str, dict]:
    return {f.parent.name: json.loads(f.read_text()) for f in sorted((run_dir / "attempts").glob(f"{agent}-*/session.json"))}


def _tracks(run_dir: Path) -> dict[str, bytes]:
    return {f.parent.parent.name: f.read_bytes() for f in sorted((run_dir / "attempts").glob("tracker-*/tracker-out/tracks.jsonl"))}


BOX_TOLERANCE_PX = 0.5  # a group batches frames of several streams: per-frame floats may differ in the last bit
CONF_TOLERANCE = 0.005


def _assert_same_tracks(run_dir: Path, reference: Path, n: int | None = None) -> None:
    """The group's tracks are the single-container run's: the same frames, objects, ids and classes,
    boxes and scores equal up to float rounding. A group's forward passes hold frames of several
    streams, and CPU kernels may round a frame's floats differently in another batch (seen: one
    coordinate 107.2 vs 107.3 in 100 frames); byte equality held only by chance."""
    ours, theirs = _tracks(run_dir), _tracks(reference)
    assert sorted(ours) == sorted(theirs) and (n is None or len(ours) == n), (sorted(ours), sorted(theirs))
    for attempt, data in ours.items():
        a = [json.loads(line) for line in data.decode().splitlines()]
        b = [json.loads(line) for line in theirs[attempt].decode().splitlines()]
        assert [(f["frame"], f["detections"]) for f in a] == [(f["frame"], f["detections"]) for f in b], attempt
        for fa, fb in zip(a, b):
            assert [(o["id"], o["cls"]) for o in fa["objects"]] == [(o["id"], o["cls"]) for o in fb["objects"]], (attempt, fa["frame"])
            for oa, ob in zip(fa["objects"], fb["objects"]):
                assert max(abs(x - y) for x, y in zip(oa["xyxy"], ob["xyxy"])) <= BOX_TOLERANCE_PX, (attempt, fa["frame"], oa, ob)
                assert abs(oa["conf"] - ob["conf"]) <= CONF_TOLERANCE, (attempt, fa["frame"], oa, ob)


def _store_ids(run_dir: Path) -> list[str]:
    if not (run_dir / "results.sqlite").exists():
        return []
    con = sqlite3.connect(run_dir / "results.sqlite")
    try:
        return [r[0] for r in con.execute("SELECT attempt_id FROM results")]
    except sqlite3.OperationalError:  # the table is not there yet
        return []
    finally:
        con.close()


def _tracker_tag() -> str:
    from statebox.sandbox.images import image_status

    return image_status("tracker")["tag"]


@pytest.fixture(scope="module")
def single_host(docker_engine, tracker_image, tracker_suite, tmp_path_factory) -> Path:
    """The reference: the same plan on one host, one container per tracker attempt (no group)."""
    run_dir = _save(tmp_path_factory.mktemp("single") / "run", tracker_suite, group=1, concurrency=4)
    done, _, _ = _run(run_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir / "tracker-tag").write_text(_tracker_tag())
    return run_dir


def _same_runtime(single_host: Path) -> None:
    """Answers compare only between runs of the same tracker runtime (its image tag hashes its sources)."""
    tag = (single_host / "tracker-tag").read_text()
    assert _tracker_tag() == tag, f"the tracker runtime's sources changed during this test ({tag} -> {_tracker_tag()}): rerun it"


@pytest.fixture(scope="module")
def gpu_cluster(docker_engine, tracker_image):

    root = Path("/tmp") / f"sbx-ray-g{os.getpid()}"  # short: unix socket paths are limited to 108 bytes
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    c = Cluster(root)
    try:
        c.start_node("a", head=True, docker_host=None, extra=("--num-gpus=0",))
        c.wait_nodes(1)
        c.start_node("g", head=False, docker_host=None, extra=("--num-gpus=1",))  # a logical GPU: Ray's bookkeeping only
        c.wait_nodes(2)
        yield c
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


def _wait_gpu_free(cluster, timeout_s: float = 300) -> None:
    """Wait until the cluster's one logical GPU is free again: a previous test's killed head may leave
    its group task on the GPU node until Ray reaps the dead job's worker (that once starved the next
    test's group for its whole wait). Fails naming what Ray still reports."""
    probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
             "print(ray.available_resources().get('GPU', 0))")
    deadline, last = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        out = subprocess.run([sys.executable, "-c", probe, cluster.address], capture_output=True, text=True, timeout=120,
                             env=cluster.bare_driver_env())
        last = (out.stdout.strip().splitlines() or [out.stderr[-500:]])[-1]
        if out.returncode == 0 and float(last) >= 1:
            return
        time.sleep(2)
    pytest.fail(f"the GPU node's GPU was still taken {timeout_s:.0f} s after the previous test (available: {last})")


def _running_group_containers(earlier: set[str]) -> list[str]:
    """This module's run's running containers that were not there before (other tests share the run id)."""
    out = subprocess.run(["docker", "ps", "--filter", f"label=statebox.run={RUN_ID}", "--filter", "status=running",
                          "--format", "{{.Names}}"], capture_output=True, text=True).stdout.split()
    return [name for name in out if name not in earlier]


def _freeze(container: str) -> None:
    """SIGSTOP every process of a group's container, so the group cannot finish before a stop or kill
    of the head reaches it, however fast this machine tracks (removing the container SIGKILLs them)."""
    pids = subprocess.run(["docker", "top", container, "-eo", "pid"], capture_output=True, text=True).stdout.split()[1:]
    for pid in pids:
        os.kill(int(pid), signal.SIGSTOP)


def _cluster_log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "cluster.jsonl").read_text().splitlines() if line.strip()]


def _check_own_files(run_dir: Path) -> None:
    """Each tracker attempt's folder holds its own stream only: its answer event, its tagged stdout lines."""
    from statebox.recorder import read_events

    for aid, session in _sessions(run_dir).items():
        folder = run_dir / "attempts" / aid
        group = session["meta"].get("group")
        answers = [e for e in read_events(folder) if e.kind.value == "tool_output" and e.data.get("event") == "answer"]
        assert len(answers) == 1, aid
        assert (folder / "tracker-out" / "tracks.jsonl").is_file() and (folder / "tracker-input" / "question.json").is_file()
        if group:
            i = group["index"]
            assert answers[0].data["stream"] == i
            log = (folder / "stdout.log").read_text()
            assert f'"stream": {i}' in log
            assert all(f'"stream": {j}' not in log for j in range(group["size"]) if j != i), aid


@pytest.mark.docker
@pytest.mark.slow
def test_single_host_group_option_shares_a_container(single_host, tracker_suite, tmp_path):
    """`-c 4 --option group=4` on one host: the runner's four threads' attempts run in one container
    (each attempt's own AttemptSandboxes used to keep them apart), with the reference's answers and tracks."""

    run_dir = _save(tmp_path / "run", tracker_suite, group=4, concurrency=4)
    done, started, ended = _run(run_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    _same_runtime(single_host)
    assert store_rows(run_dir) == store_rows(single_host)
    _assert_same_tracks(run_dir, single_host, n=4)
    assert container_creates(RUN_ID, started, ended) == 1
    assert sorted(s["meta"]["group"]["index"] for s in _sessions(run_dir).values()) == [0, 1, 2, 3]
    _check_own_files(run_dir)


@pytest.mark.docker
@pytest.mark.slow
def test_tracker_groups_run_on_the_gpu_node_in_one_container_each(gpu_cluster, single_host, tracker_suite, tmp_path):

    run_dir = _save(tmp_path / "run", tracker_suite, group=3, concurrency=2)
    done, started, ended = _run(run_dir, "--cluster", gpu_cluster.address, env=gpu_cluster.driver_env())
    assert done.returncode == 0, done.stderr[-3000:]
    rows = store_rows(run_dir)
    _same_runtime(single_host)
    assert rows == store_rows(single_host)  # same attempts, answers, verdicts and scores as one host, one container each
    _assert_same_tracks(run_dir, single_host, n=4)
    single_frames = {a: s["frames"]["decoded"] for a, s in _sessions(single_host).items()}
    assert {a: s["frames"]["decoded"] for a, s in _sessions(run_dir).items()} == single_frames
    log = _cluster_log(run_dir)
    assert sorted(e["attempt_id"] for e in log) == sorted(r[0] for r in rows)  # one line per attempt
    tracker = [e for e in log if e["attempt_id"].startswith("tracker-")]
    assert {e["node"] for e in tracker} == {"g"}  # num_gpus=1: only the node with a (logical) GPU takes them
    tasks: dict[str, list[str]] = {}
    for e in tracker:
        tasks.setdefault(e["task"], []).append(e["attempt_id"])
    print(f"tracker tasks: {tasks}; nodes: {sorted({e['node'] for e in log})}")
    assert sorted(len(v) for v in tasks.values()) == [1, 3]  # groups of up to 3: 4 attempts, 2 tasks
    sessions = _sessions(run_dir)
    for members in tasks.values():  # the session files say the same: one group per task, indexed 0..n-1
        if len(members) > 1:
            assert sorted(sessions[a]["meta"]["group"]["index"] for a in members) == list(range(len(members)))
            assert all(sessions[a]["meta"]["group"]["size"] == len(members) for a in members)
    assert all(s["meta"]["gpu"] is False for s in sessions.values())  # no GPU runtime here: the container ran on CPU
    assert container_creates(RUN_ID, started, ended) == len(tasks) == 2  # fewer containers than attempts
    _check_own_files(run_dir)
    assert run_containers(None, RUN_ID) == []
    assert not (gpu_cluster.root / "node-g" / "runs" / RUN_ID).exists()  # the node's staging folder is gone
    again, _, _ = _run(run_dir, "--cluster", gpu_cluster.address, timeout=300, env=gpu_cluster.driver_env())  # finished: nothing redone
    assert again.returncode == 0, again.stderr[-2000:]
    assert store_rows(run_dir) == rows and len(_cluster_log(run_dir)) == len(log)


@pytest.mark.docker
@pytest.mark.slow
def test_sigterm_mid_group_leaves_no_container_and_resume_finishes(gpu_cluster, tracker_suite, tmp_path):
    """A stop while a group's container runs: the head cancels the task (a KeyboardInterrupt in the
    node's task thread: `run_group` cancels the run's services and removes its containers) and exits 143
    with no row for the group, and a resume runs the group again, each attempt once."""

    _wait_gpu_free(gpu_cluster)
    earlier = set(run_containers(None, RUN_ID))  # other tests of this module share the run id
    run_dir = _save(tmp_path / "run", tracker_suite, group=4, concurrency=1)
    head = subprocess.Popen(STATEBOX + ["run", "--resume", str(run_dir), "--json", "--cluster", gpu_cluster.address],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=gpu_cluster.driver_env())
    try:
        wait_for(lambda: _running_group_containers(earlier) or head.poll() is not None, 600, "the group's container")
        assert head.poll() is None, f"the run ended before its group's container started: {head.communicate()[1][-3000:]}"
        _freeze(_running_group_containers(earlier)[0])
        head.send_signal(signal.SIGTERM)
        _, err = head.communicate(timeout=180)
    finally:
        if head.poll() is None:
            head.kill()
            head.wait(timeout=60)
    assert head.returncode == 143, err[-2000:]
    # a stopped group has no row: the frozen group cannot finish, and once the stop's sweep has written
    # the node's stop marker (before it removes the container) no member starts a container again alone
    assert not [a for a in _store_ids(run_dir) if a.startswith("tracker-")]
    wait_for(lambda: not run_containers(None, RUN_ID), 60, "the run's containers to be gone")
    done, _, _ = _run(run_dir, "--cluster", gpu_cluster.address, env=gpu_cluster.driver_env())
    assert done.returncode == 0, done.stderr[-3000:]
    ids = _store_ids(run_dir)
    assert len(ids) == len(set(ids)) == 8
    sessions = _sessions(run_dir)
    assert len(sessions) == 4 and all(s["status"] == "ok" and s["meta"]["group"]["size"] == 4 for s in sessions.values())
    assert not any(s["meta"]["group"].get("rerun_alone") for s in sessions.values())  # the resume ran the group as one
    assert run_containers(None, RUN_ID) == []


@pytest.mark.docker
@pytest.mark.slow
def test_a_head_killed_mid_group_resumes_without_redoing_or_duplicating(gpu_cluster, single_host, tracker_suite, tmp_path):
    """Rows of a group are written when its task returns (with its folders): a head SIGKILLed while the
    second group runs keeps the first group's rows; resume runs only the second group, once."""

    earlier = set(run_containers(None, RUN_ID))  # other tests of this module share the run id
    run_dir = _save(tmp_path / "run", tracker_suite, group=2, concurrency=1)
    head = subprocess.Popen(STATEBOX + ["run", "--resume", str(run_dir), "--json", "--cluster", gpu_cluster.address],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=gpu_cluster.driver_env())
    try:
        # one task at a time (-c 1): the second group's container starts after the first group's rows are in
        wait_for(lambda: len([a for a in _store_ids(run_dir) if a.startswith("tracker-")]) == 2
                  and _running_group_containers(earlier), 600, "the first group's rows and the second group's container")
        _freeze(_running_group_containers(earlier)[0])
        kept = sorted(_store_ids(run_dir))
        head.send_signal(signal.SIGKILL)
        head.wait(timeout=60)
    finally:
        if head.poll() is None:
            head.kill()
            head.wait(timeout=60)
    first_group = sorted(a for a in kept if a.startswith("tracker-"))
    assert len(first_group) == 2
    done, started, ended = _run(run_dir, "--cluster", gpu_cluster.address, env=gpu_cluster.driver_env())
    assert done.returncode == 0, done.stderr[-3000:]
    ids = _store_ids(run_dir)
    assert len(ids) == len(set(ids)) == 8  # 4 tracker + 4 oracle, each once
    _same_runtime(single_host)
    assert store_rows(run_dir) == store_rows(single_host)
    _assert_same_tracks(run_dir, single_host)
    log = _cluster_log(run_dir)
    assert sorted(e["attempt_id"] for e in log) == sorted(ids)  # the killed head wrote lines only with rows
    redone = [e for e in log if e["attempt_id"].startswith("tracker-") and e["attempt_id"] not in first_group]
    assert len(redone) == 2 and len({e["task"] for e in redone}) == 1  # the second group, as one task
    assert container_creates(RUN_ID, started, ended) == 1  # resume ran one container: nothing of the first group again
    _check_own_files(run_dir)
    wait_for(lambda: not run_containers(None, RUN_ID), 120, "the killed run's container to be removed")


@pytest.mark.docker
@pytest.mark.slow
def test_gpu_require_is_refused_when_the_gpu_node_cannot_give_a_container_one(gpu_cluster, tracker_suite, tmp_path):
    from statebox.sandbox.docker import SandboxEngine

    if SandboxEngine().has_gpu_runtime():
        pytest.skip("this engine gives containers a GPU: `gpu: require` is satisfiable here")
    policy = tmp_path / "gpu-require.yaml"
    policy.write_text("description: the tracker must get a GPU\ngpu: require\n")
    run_dir = _save(tmp_path / "run", tracker_suite, group=2, concurrency=1, policy=str(policy))
    done, _, _ = _run(run_dir, "--cluster", gpu_cluster.address, timeout=300, env=gpu_cluster.driver_env())
    assert done.returncode == 2, done.stderr[-2000:]
    assert "g: offers 1 GPU to Ray but its Docker engine gives containers none" in done.stderr
    assert _store_ids(run_dir) == []  # refused before any attempt ran


@pytest.mark.docker
@pytest.mark.slow
def test_one_failing_attempt_of_a_group_costs_only_itself(docker_engine, tracker_image, tracker_suite, limited_dir, tmp_path):
    """The tracker runtime is one process for all its streams: a stream whose video is missing ends the
    group's container (exit 2) before any answer. Each member without an answer runs again alone: the
    two good attempts answer as they would have, the bad one fails on its own, each in its own record."""
    from tests.tracker.counting_engine import CountingEngine

    from statebox.agents.tracker import TrackerAgent
    from statebox.attempt import AgentOptions, AttemptContext, SecretFacts
    from statebox.benchmarks import load_benchmark
    from statebox.benchmarks.synthetic.suite import load_suite
    from statebox.policies import load_policy
    from statebox.recorder import read_events
    from statebox.sandbox.workspace import prepare_workspace
    from statebox.schema import Attempt, resolve_video

    ds = load_suite(tracker_suite).dataset("cube_count")
    items = [i for i in load_benchmark(ds.bench, ds.data, ds.videos).items][:3]
    policy = load_policy("default")
    workspaces = [prepare_workspace(it, it.queries[0], resolve_video(it, ds.videos), policy, root=tmp_path / f"ws{k}")
                  for k, it in enumerate(items)]
    empty = limited_dir(16)  # attempt 1's workspace: its video is not there
    broken = SimpleNamespace(path=str(empty), video_name="missing.mp4", instruction=workspaces[1].instruction)

    def ctx(k: int, ws) -> AttemptContext:
        attempt = Attempt(run_id="grp-fail", agent="tracker", item_id=items[k].id)
        return AttemptContext(attempt=attempt, item=items[k], query=items[k].queries[0], attempt_dir=tmp_path / f"a{k}",
                              policy=policy, options=AgentOptions(),
                              secret=SecretFacts(original_name="x.mp4", original_stem="x", item_id=items[k].id, dataset="d"),
                              workspace=ws, engine=engine)

    engine = CountingEngine(docker_engine)
    try:
        agent = TrackerAgent(AgentOptions(extra={"group": 3}))
        sessions = agent.run_group([ctx(0, workspaces[0]), ctx(1, broken), ctx(2, workspaces[2])])
        assert engine.runs == 4  # the group's container, then each member alone
        assert [s.status for s in sessions] == ["ok", "error", "ok"], [s.reason for s in sessions]
        assert "exit code 2" in sessions[1].reason
        for k, s in enumerate(sessions):
            assert s.meta["group"] == {"size": 3, "index": k, "rerun_alone": True}
            events = read_events(tmp_path / f"a{k}")
            notes = [e for e in events if e.kind.value == "message" and "runs again alone" in e.text]
            assert len(notes) == 1 and notes[0].data["group_exit_code"] == 2
            assert sum(1 for e in events if e.data.get("role") == "user") == 1  # the question, recorded once
        for k in (0, 2):
            assert sessions[k].response and (tmp_path / f"a{k}" / "tracker-out" / "tracks.jsonl").stat().st_size > 0
            answers = [e for e in read_events(tmp_path / f"a{k}") if e.data.get("event") == "answer"]
            assert len(answers) == 1 and "stream" not in answers[0].data  # its own single run's answer
        assert not (tmp_path / "a1" / "tracker-out" / "answer.json").exists()
    finally:
        for ws in workspaces:
            ws.cleanup()


def test_the_node_runs_a_group_in_threads_and_returns_the_rows_of_the_others(tmp_path, monkeypatch):
    """`cluster_worker.run_group` without Ray: every member through `run_attempt` in its own thread at
    once (the agent told to expect them, and told when each is done); one raising costs only itself."""
    from statebox.errors import StorageError
    from statebox.harness import cluster_worker
    from statebox.harness.store import ResultRow

    class Agent:
        group = 3

        def __init__(self) -> None:
            self.expected: list[str] = []
            self.left: list[str] = []

        def expect_group(self, ids):
            self.expected = list(ids)

        def left_group(self, aid):
            self.left.append(aid)

    barrier = threading.Barrier(3, timeout=30)  # all three must be running at once, or this times out

    def fake_run_attempt(job, services):
        barrier.wait()
        aid = job.attempt.attempt_id
        if aid == "tracker-1":
            raise StorageError("cannot write the attempt folder: no space left on device (/x)")
        folder = tmp_path / "staging" / "attempts" / aid
        folder.mkdir(parents=True)
        (folder / "session.json").write_text(aid)
        return ResultRow(attempt_id=aid, run_id="r", agent="tracker", dataset="d", bench="vstat", item_id=aid)

    monkeypatch.setattr(cluster_worker, "run_attempt", fake_run_attempt)
    (tmp_path / "staging" / "attempts" / "tracker-1").mkdir(parents=True)  # what the failed one left on the node
    agent = Agent()
    run = SimpleNamespace(staging=tmp_path / "staging", services=SimpleNamespace(cancel=threading.Event()))
    jobs = [SimpleNamespace(attempt=SimpleNamespace(attempt_id=f"tracker-{k}", agent="tracker")) for k in range(3)]
    out = cluster_worker.run_group(run, jobs, agent)
    assert agent.expected == ["tracker-0", "tracker-1", "tracker-2"] and sorted(agent.left) == agent.expected
    assert [p.row.attempt_id for p in out.results] == ["tracker-0", "tracker-2"] and out.group == 3
    assert out.error is not None and out.error.attempt_id == "tracker-1" and out.error.user_error is True
    assert "no space left" in out.error.message
    assert not (tmp_path / "staging" / "attempts").exists() or not any((tmp_path / "staging" / "attempts").iterdir())
    dest = tmp_path / "head" / "tracker-2"
    cluster_worker.unpack_folder(out.results[1].folder, dest)
    assert (dest / "session.json").read_text() == "tracker-2"
