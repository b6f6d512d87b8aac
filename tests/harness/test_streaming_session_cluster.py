"""`statebox run --streaming session --cluster`: a session is one Ray task (one container on
its node), and its rows come back as on a single host.

One Ray node (the head, on this host's engine; `test_cluster.py` has the two-node cluster):
the same hand-made VCBench file and decoding shell agent as test_streaming_session.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from ray_cluster import one_node_cluster
from streaming_session_support import ITEMS, check_points, container_creates, listen_for_creates, make_dataset, session_command, session_rows

pytestmark = [pytest.mark.docker, pytest.mark.slow]

pytest.importorskip("ray", reason="the cluster extra (pip install 'statebox[cluster]') is not installed")


@pytest.fixture()
def one_node(docker_engine):
    # short: unix socket paths are limited to 108 bytes
    with one_node_cluster(Path("/tmp") / f"sbx-ray-s{os.getpid()}") as cluster:
        yield cluster


def test_session_runs_as_one_task_per_item_on_the_cluster(one_node, tmp_path):
    data, videos = make_dataset(tmp_path)
    run_dir = tmp_path / "run"
    listen_for_creates()  # before the run: the engine keeps only its last 256 events
    started = time.time()
    done = subprocess.run(session_command(data, videos, run_dir) + ["--cluster", one_node.address], capture_output=True,
                          text=True, timeout=600, env=one_node.driver_env())
    ended = time.time()
    assert done.returncode == 0, done.stderr[-3000:]
    rows = session_rows(run_dir)
    assert len(rows) == 6
    check_points(run_dir, rows)  # k cuts at the k-th question, no frame past the query time, folders back on the head
    nodes = [json.loads(line) for line in (run_dir / "cluster.jsonl").read_text().splitlines()]
    assert sorted(n["attempt_id"] for n in nodes) == sorted(rows) and {n["node"] for n in nodes} == {"a"}
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    assert container_creates(run_id, started, ended) == len(ITEMS)  # one per item (the start-up probe is not the run's)
