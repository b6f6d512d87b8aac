"""A Ray cluster without token authentication is refused unless the user says otherwise.

Its nodes hold provider keys and anyone who reaches its ports can run code on them, so
`cluster doctor`, `cluster prepare` and `run --cluster` refuse it with one line (exit 2)
naming the auth mode and `--allow-unauthenticated-cluster`; with the flag, a run works and
says once what it is doing. One real Ray node started with `RAY_AUTH_MODE=disabled`; the
token cluster is `test_cluster.py`'s. Host-side agents only: no container is needed to show
who may connect.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ray_cluster import one_node_cluster, rows_per_node, run_config, store_rows

STATEBOX = [sys.executable, "-m", "statebox.cli"]
pytestmark = [pytest.mark.slow]

pytest.importorskip("ray", reason="the cluster extra (pip install 'statebox[cluster]') is not installed")

FAMILIES = ["cube_count", "block_count"]


@pytest.fixture(scope="module")
def open_cluster():
    # short: unix socket paths are limited to 108 bytes
    with one_node_cluster(Path("/tmp") / f"sbx-ray-o{os.getpid()}", auth="disabled") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    from statebox.benchmarks.synthetic.suite import make_suite

    out = tmp_path_factory.mktemp("osuite")
    make_suite(out, size="tiny", seed=0, tasks=FAMILIES)
    return out


def _one_refusal(done: subprocess.CompletedProcess, address: str) -> None:
    assert done.returncode == 2 and done.stdout == "", done.stderr[-2000:]
    assert len([line for line in done.stderr.splitlines() if line.strip()]) == 1, done.stderr
    assert done.stderr.strip().startswith(f"statebox: error: the Ray cluster at {address} runs without token authentication "
                                  "(auth mode disabled)")
    assert "--allow-unauthenticated-cluster" in done.stderr


@pytest.mark.docker
def test_doctor_and_prepare_refuse_a_cluster_without_token_auth(open_cluster, docker_engine):
    # the allowed doctor asks each node's engine for the sandbox image: without an engine it fails (as it should),
    # so the test needs one (`make test-fast` ran it without one and failed)
    env = open_cluster.driver_env()  # the driver has a token: the cluster asks for none, which is what counts
    for cmd in (["cluster", "doctor", "--no-probe"], ["cluster", "prepare", "--image", "sandbox"]):
        _one_refusal(subprocess.run(STATEBOX + [*cmd, "--cluster", open_cluster.address], capture_output=True, text=True,
                                    timeout=120, env=env), open_cluster.address)
    allowed = subprocess.run(STATEBOX + ["cluster", "doctor", "--no-probe", "--cluster", open_cluster.address,
                                         "--allow-unauthenticated-cluster"], capture_output=True, text=True, timeout=300, env=env)
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    assert (f"cluster {open_cluster.address}: auth mode disabled: allowed by --allow-unauthenticated-cluster"
            in allowed.stdout.splitlines()[0])


def test_run_is_refused_without_the_flag_and_runs_with_it(open_cluster, suite, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_config(suite, "cl-open", agents=("oracle", "chance-random")).save(run_dir)
    cmd = STATEBOX + ["run", "--resume", str(run_dir), "--cluster", open_cluster.address, "--json"]
    _one_refusal(subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=open_cluster.driver_env()),
                 open_cluster.address)
    assert not (run_dir / "results.sqlite").exists() or store_rows(run_dir) == []

    ran = subprocess.run(cmd + ["--allow-unauthenticated-cluster"], capture_output=True, text=True, timeout=600,
                         env=open_cluster.driver_env())
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert (f"statebox: warning: the Ray cluster at {open_cluster.address}: auth mode disabled: allowed by "
            "--allow-unauthenticated-cluster") in ran.stderr
    rows = store_rows(run_dir)
    assert rows and all(r[6] == "ok" for r in rows)
    assert rows_per_node(run_dir) == {"a": len(rows)}  # on the cluster


def test_the_flag_goes_with_cluster(tmp_path):
    done = subprocess.run(STATEBOX + ["run", "--agent", "oracle", "--bench", "x", "--data", str(tmp_path / "d.jsonl"),
                                      "--allow-unauthenticated-cluster"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "statebox: error: --allow-unauthenticated-cluster goes with --cluster ADDRESS"
