"""Tracker attempt groups on a Ray cluster: `--option group=N` makes up to N tracker attempts
one Ray task and one container on the node that gets it (`cluster_worker.run_group`).

The pieces without a cluster come first (batch sizes, the batcher's expected members, a group
one of whose attempts failed). Then a real cluster (`test_cluster.Cluster`, the same `ray
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
        results.append((row.model_dump(), pack_folder(src)))
    result = {"who": {"node": "g", "node_id": "n1"}, "results": results, "group": 3,
              "error": {"attempt_id": "tracker-1", "type": "StorageError", "message": "no space left on device (/x)",
                        "user_error": True}}
    with pytest.raises(UserError, match="tracker-1: no space left"):
        ex.collect_rows(result, batch)
    recorded = []
    ex.stop({}, lambda finished: recorded.extend(finished))
    assert [(p.attempt.attempt_id, r.attempt_id) for p, r in recorded] == [("tracker-0", "tracker-0"), ("tracker-2", "tracker-2")]
    assert (tmp_path / "attempts" / "tracker-0" / "session.json").is_file()
    assert not (tmp_path / "attempts" / "tracker-1").exists()
    # rows for an attempt it was not given are refused, error or not
    with pytest.raises(UserError, match="other attempts"):
        ex._place({"who": {"node": "g", "node_id": "n1"}, "results": results[::-1], "group": 3, "error": {"attempt_id": "x"}}, batch)
