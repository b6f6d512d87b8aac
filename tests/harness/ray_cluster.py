"""A Ray cluster of a test's own and what the cluster tests read back from its runs.

Shared by test_cluster.py (two nodes, token auth, a second dockerd for node B),
test_cluster_auth.py (one node without auth) and test_streaming_session_cluster.py. Every path
lives under the root the test gives (short, under /tmp: unix socket paths are limited to 108
bytes) and every port is a free one, so two test processes never share a node.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from second_engine import SecondEngine

RAY = str(Path(sys.executable).parent / "ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """Ray nodes of this test's own, with Ray token authentication as Ray 2.60 does it by default:
    the head turns it on because it finds a token (`RAY_AUTH_TOKEN`, as KubeRay gives every node
    its Secret), a joining node sets `RAY_AUTH_MODE=token`. `auth="disabled"`: a cluster without
    it, which statebox refuses unless told otherwise. statebox, the driver, gets the token from
    a file named by `RAY_AUTH_TOKEN_PATH` (`driver_env`), one of Ray's documented sources."""

    def __init__(self, root: Path, auth: str = "token") -> None:
        self.root = root
        self.auth = auth
        self.token = secrets.token_hex(32)
        self.token_file = root / "ray_auth_token"
        self.token_file.write_text(self.token + "\n")
        self.token_file.chmod(0o600)
        self.procs: dict[str, subprocess.Popen] = {}
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.engine_b = ""
        self.dockerd: SecondEngine | None = None
        self.model_env: dict[str, str] = {}  # each node's gateway key and upstream (never the head's)
        self.model = None  # the scripted model server behind every node's gateway

    def node_env(self, name: str, docker_host: str | None, head: bool = False) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH_") and k not in ("DOCKER_HOST", "RAY_ADDRESS")}
        env.update(RAY_USAGE_STATS_ENABLED="0", STATEBOX_NODE_NAME=name, STATEBOX_WORKSPACE_ROOT=str(self.root / f"ws-{name}"),
                   STATEBOX_NODE_ROOT=str(self.root / f"node-{name}"), **self.model_env)
        if self.auth == "token":
            env["RAY_AUTH_TOKEN"] = self.token
            if not head:  # the head's `ray start` turns token mode on by itself when it finds a token
                env["RAY_AUTH_MODE"] = "token"
        else:
            env["RAY_AUTH_MODE"] = "disabled"
        if docker_host:
            env["DOCKER_HOST"] = docker_host
        return env

    def driver_env(self, **extra: str) -> dict[str, str]:
        """statebox's environment: the cluster's token in a file named by RAY_AUTH_TOKEN_PATH."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH_") and k != "RAY_ADDRESS"}
        env["RAY_AUTH_TOKEN_PATH"] = str(self.token_file)
        env.update(extra)
        return env

    def bare_driver_env(self) -> dict[str, str]:
        """A plain `ray.init(address=...)` of a test's own: with an explicit address Ray turns token
        mode on only when told (statebox sets it from what the cluster asks)."""
        return self.driver_env(RAY_AUTH_MODE=self.auth)

    def start_dockerd(self) -> None:
        """Node B's engine: a second dockerd in its own network namespace."""
        self.dockerd = SecondEngine(self.root / "d2")
        self.engine_b = self.dockerd.start()

    def start_node(self, name: str, head: bool, docker_host: str | None, extra: tuple[str, ...] = ()) -> None:
        common = ["--num-cpus=2", "--object-store-memory=100000000", f"--resources={json.dumps({'node_' + name: 1})}",
                  "--dashboard-agent-listen-port=0", "--metrics-export-port=0", "--block", *extra]
        if head:
            cmd = [RAY, "start", "--head", f"--port={self.port}", "--include-dashboard=false", f"--ray-client-server-port={free_port()}",
                   f"--temp-dir={self.root / 'ray'}", *common]
        else:
            cmd = [RAY, "start", f"--address={self.address}", *common]
        log = open(self.root / f"ray-{name}.log", "w")
        # its own session: the whole node (raylet, workers) is one process group, stopped by its id
        self.procs[name] = subprocess.Popen(cmd, env=self.node_env(name, docker_host, head), stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True, cwd=self.root)

    def wait_nodes(self, n: int) -> None:
        deadline = time.time() + 180
        probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
                 "print(len([x for x in ray.nodes() if x['Alive'] and x['Resources'].get('CPU')]))")
        env = self.bare_driver_env()
        while time.time() < deadline:
            out = subprocess.run([sys.executable, "-c", probe, self.address], capture_output=True, text=True, timeout=120, env=env)
            if out.returncode == 0 and out.stdout.strip().splitlines()[-1:] == [str(n)]:
                return
            time.sleep(1)
        pytest.fail("the Ray nodes did not come up: " + "".join((self.root / f"ray-{k}.log").read_text()[-1500:] for k in self.procs))

    def kill_node(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        proc.wait(timeout=60)

    def stop(self) -> None:
        for name in list(self.procs):
            proc = self.procs[name]
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.procs.pop(name)
        from statebox.sandbox import limited_fs

        for ws in self.root.glob("ws-*"):
            limited_fs.unmount_all(ws)
        if self.dockerd is not None:
            for cid in subprocess.run(["docker", "-H", self.engine_b, "ps", "-aq"], capture_output=True, text=True).stdout.split():
                subprocess.run(["docker", "-H", self.engine_b, "rm", "-f", cid], capture_output=True)
            self.dockerd.stop()


@contextmanager
def one_node_cluster(root: Path, auth: str = "token") -> Iterator[Cluster]:
    """A one-node cluster (the head, on this host's engine) in a fresh `root`, stopped and removed after."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    cluster = Cluster(root, auth=auth)
    try:
        cluster.start_node("a", head=True, docker_host=None)
        cluster.wait_nodes(1)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def run_config(suite: Path, run_id: str, concurrency: int = 4, agents=("oracle", "chance-random", "scripted-cheater")):
    from statebox.harness.plan import RunConfig, datasets_from_suite

    return RunConfig(run_id=run_id, agents=list(agents), datasets=datasets_from_suite(suite), concurrency=concurrency,
                     agent_limits={"scripted-cheater": 1}, suite=str(suite))


def store_rows(run_dir: Path) -> list[tuple]:
    """The store's rows, with each attempt's decoy canaries written as `<canary-k>`.

    Canaries are drawn afresh for every planting (issue 18), so the cheater's answer (a decoy
    value) differs between two runs of the same attempt; which decoy it read must not.
    """
    con = sqlite3.connect(run_dir / "results.sqlite")
    rows = con.execute("SELECT attempt_id, agent, dataset, item_id, query_index, epoch, status, reason, response, verdict, "
                       "action, findings, metrics, frames_decoded, retries FROM results ORDER BY attempt_id").fetchall()
    con.close()
    return [without_canaries(run_dir, row) for row in rows]


def without_canaries(run_dir: Path, row: tuple) -> tuple:
    facts = json.loads((run_dir / "attempts" / row[0] / "attempt.json").read_text())
    values = (facts.get("secret") or {}).get("honeytoken_values") or []
    out = []
    for cell in row:
        if isinstance(cell, str):
            for k, value in enumerate(values):
                cell = cell.replace(value, f"<canary-{k}>")
            cell = re.sub(r"\b\d+ bytes\b", "N bytes", cell)  # a decoy file's size follows its canary's length
        out.append(cell)
    if "<canary-" in (out[8] or ""):  # an answer that is a canary: only whether it was right is comparable
        out[12] = json.dumps({"correct": json.loads(out[12]).get("correct")})
    return tuple(out)


def rows_per_node(run_dir: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in (run_dir / "cluster.jsonl").read_text().splitlines():
        node = json.loads(line)["node"]
        counts[node] = counts.get(node, 0) + 1
    return counts


def run_containers(host: str | None, run_id: str) -> list[str]:
    cmd = ["docker"] + (["-H", host] if host else []) + ["ps", "-a", "--filter", f"label=statebox.run={run_id}", "--format", "{{.Names}}"]
    return subprocess.run(cmd, capture_output=True, text=True).stdout.split()


def wait_for(pred, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}")
