"""`statebox run --cluster`: a real two-node Ray cluster, each node on its own Docker engine.

Node A is the Ray head (`ray start --head`) on this host's engine; node B joins it
(`ray start --address`) with DOCKER_HOST set to a second dockerd in its own network
namespace (second_engine.SecondEngine, as test_remote_engine.py uses). Each node has its own
workspace root and staging folder. The images reach node B through `statebox cluster
prepare` (docker save here -> Ray object store -> docker load there).

The run's rows must equal a single-host run of the same plan; both nodes must run some
attempts; killing node B mid-run must lose and duplicate nothing and leave no container on
either engine; SIGTERM to the head must leave no container anywhere. Only the processes
this module started are stopped, by their process group.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ray_cluster import Cluster, rows_per_node, run_config, run_containers, store_rows, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ray = pytest.importorskip("ray", reason="the cluster extra (pip install 'statebox[cluster]') is not installed")

STATEBOX = [sys.executable, "-m", "statebox.cli"]
FAMILIES = ["cube_count", "block_count", "streaming_count", "ec_beeps"]
NODE_KEY = "node-only-key-7f3a"  # in the nodes' environment only; must never reach the head or a sandbox


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    from statebox.benchmarks.synthetic.suite import make_suite

    out = tmp_path_factory.mktemp("csuite")
    make_suite(out, size="tiny", seed=0, tasks=FAMILIES)
    return out


@pytest.fixture(scope="module")
def cluster(docker_engine, tmp_path_factory):
    if shutil.which("dockerd") is None:
        pytest.fail("dockerd is not installed (scripts/setup/20-docker-engine.sh installs it)")
    root = Path("/tmp") / f"sbx-ray-{os.getpid()}"  # short: unix socket paths are limited to 108 bytes
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    from statebox.testing.cheating_model import CHEATING_SCRIPT
    from statebox.testing.scripted_model import ScriptedModelServer

    c = Cluster(root)
    model = ScriptedModelServer(CHEATING_SCRIPT)
    model.__enter__()
    c.model_env = {"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": NODE_KEY}
    c.model = model
    try:
        c.start_dockerd()
        c.start_node("a", head=True, docker_host=None)
        c.wait_nodes(1)
        c.start_node("b", head=False, docker_host=c.engine_b)
        c.wait_nodes(2)
        prepared = subprocess.run(STATEBOX + ["cluster", "prepare", "--cluster", c.address, "--image", "sandbox", "--image", "agents"],
                                  capture_output=True, text=True, timeout=900, env=c.driver_env())
        print(prepared.stderr[-2000:])
        assert prepared.returncode == 0, prepared.stderr[-3000:]
        yield c
    finally:
        c.stop()
        model.__exit__(None, None, None)
        shutil.rmtree(root, ignore_errors=True)


def _numbers(stdout: str) -> list[dict]:
    """`run --json` results without the one wall-clock figure (mean attempt duration)."""
    results = json.loads(stdout)["results"]
    for r in results:
        r.pop("mean_duration_s")
    # The cheater answers decoy canaries, drawn afresh for every planting: its errors (MAE, bias) differ
    # between two runs of the same attempts; what it did and how it was judged must not.
    kept = ("agent", "dataset", "n", "status_counts", "verdict_counts", "audit_categories", "clean_metrics")
    return [{k: r.get(k) for k in kept} if r["agent"] == "scripted-cheater" else r for r in results]


def test_doctor_sees_both_nodes_and_their_engines(cluster):
    out = subprocess.run(STATEBOX + ["cluster", "doctor", "--cluster", cluster.address, "--json"],
                         capture_output=True, text=True, timeout=300, env=cluster.driver_env())
    assert out.returncode == 0, out.stderr[-2000:]
    nodes = {n["node"]: n for n in json.loads(out.stdout)["nodes"]}
    assert set(nodes) == {"a", "b"}
    assert nodes["b"]["docker_host"] == cluster.engine_b and nodes["a"]["docker_host"] == ""
    for n in nodes.values():
        assert n["images"]["sandbox"]["present"]
        assert n["probe"] == {"shares_filesystem": True, "egress_blocked": True, "interfaces": ["lo"]}
    assert nodes["a"]["images"]["sandbox"]["tag"] == nodes["b"]["images"]["sandbox"]["tag"]
    # a provider whose key no node has: one line per node, exit 2
    missing = subprocess.run(STATEBOX + ["cluster", "doctor", "--cluster", cluster.address, "--provider", "openai", "--no-probe"],
                             capture_output=True, text=True, timeout=300, env=cluster.driver_env(OPENAI_API_KEY="head-only"))
    assert missing.returncode == 2
    assert sum("no OPENAI_API_KEY in the node's environment" in line for line in missing.stderr.splitlines()) == 2


def test_the_token_is_found_where_ray_documents_it_and_a_missing_or_wrong_one_is_one_line(cluster, suite, tmp_path):
    """The cluster runs Ray's token auth; statebox finds the token in RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH (every other test here) or ~/.ray/auth_token, and says plainly when it
    has none or a wrong one: one line naming the source, never the value, never "start one"."""
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(cluster.token + "\n")
    bare = {k: v for k, v in cluster.driver_env().items() if k != "RAY_AUTH_TOKEN_PATH"}
    doctor = STATEBOX + ["cluster", "doctor", "--cluster", cluster.address, "--no-probe"]
    by_file = subprocess.run(doctor, capture_output=True, text=True, timeout=300, env={**bare, "HOME": str(home)})
    assert by_file.returncode == 0, by_file.stderr[-2000:]
    default_file = home / ".ray" / "auth_token"
    assert f"cluster {cluster.address}: auth mode token (token accepted, from the default token file {default_file})" in by_file.stdout
    by_env = subprocess.run(doctor + ["--json"], capture_output=True, text=True, timeout=300,
                            env={**bare, "HOME": str(tmp_path), "RAY_AUTH_TOKEN": cluster.token})
    assert by_env.returncode == 0, by_env.stderr[-2000:]
    assert json.loads(by_env.stdout)["auth"] == {"address": cluster.address, "endpoint": cluster.address, "mode": "token",
                                                 "token_source": "RAY_AUTH_TOKEN", "allowed_unauthenticated": False}

    none = subprocess.run(doctor, capture_output=True, text=True, timeout=120, env={**bare, "HOME": str(tmp_path)})
    assert none.returncode == 2 and none.stdout == ""
    assert len([line for line in none.stderr.splitlines() if line.strip()]) == 1 and "start one" not in none.stderr, none.stderr
    assert f"the Ray cluster at {cluster.address} requires a token (auth mode token) and none was found" in none.stderr

    wrong_file = tmp_path / "wrong_token"
    wrong = secrets.token_hex(32)
    wrong_file.write_text(wrong)
    run_dir = tmp_path / "refused"
    run_dir.mkdir()
    run_config(suite, "cl-wrong-token", agents=("oracle",)).save(run_dir)
    for cmd in (doctor, STATEBOX + ["run", "--resume", str(run_dir), "--cluster", cluster.address, "--json"]):
        refused = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                                 env={**bare, "HOME": str(tmp_path), "RAY_AUTH_TOKEN_PATH": str(wrong_file)})
        assert refused.returncode == 2 and refused.stdout == "", refused.stderr[-2000:]
        assert len([line for line in refused.stderr.splitlines() if line.strip()]) == 1 and "start one" not in refused.stderr, refused.stderr
        assert (f"the Ray cluster at {cluster.address} refused the token from RAY_AUTH_TOKEN_PATH={wrong_file} "
                "(auth mode token)") in refused.stderr
        assert wrong not in refused.stderr and cluster.token not in refused.stderr
    assert not (run_dir / "results.sqlite").exists() or store_rows(run_dir) == []  # nothing ran


def test_cluster_run_spreads_over_both_nodes_and_equals_a_single_host_run(cluster, suite, tmp_path):
    on_cluster, single = tmp_path / "cluster", tmp_path / "single"
    for d in (on_cluster, single):
        d.mkdir()
        run_config(suite, "cl-eq").save(d)
    ran = subprocess.run(STATEBOX + ["run", "--resume", str(on_cluster), "--cluster", cluster.address, "--json"],
                         capture_output=True, text=True, timeout=900, env=cluster.driver_env())
    assert ran.returncode == 0, ran.stderr[-3000:]
    local = subprocess.run(STATEBOX + ["run", "--resume", str(single), "--json"], capture_output=True, text=True, timeout=900)
    assert local.returncode == 0, local.stderr[-3000:]
    a, b = store_rows(on_cluster), store_rows(single)
    per_node = rows_per_node(on_cluster)
    print(f"attempts: {len(a)}; per node: {per_node}")
    assert len(a) >= 40 and len({r[0] for r in a}) == len(a)
    assert a == b  # same attempts, answers, verdicts, findings and scores
    assert set(per_node) == {"a", "b"} and all(n > 0 for n in per_node.values())
    assert sum(per_node.values()) == len(a)
    assert _numbers(ran.stdout) == _numbers(local.stdout)  # run --json: same shape, same numbers
    cheats = [r for r in a if r[1] == "scripted-cheater"]
    assert cheats and all(r[9] == "contaminated" for r in cheats)  # caught on whichever node ran it
    for r in a:  # every attempt's folder came back to the head's run folder
        assert (on_cluster / "attempts" / r[0] / "session.json").is_file()
        assert (on_cluster / "attempts" / r[0] / "verdict.json").is_file()
    assert run_containers(None, "cl-eq") == [] and run_containers(cluster.engine_b, "cl-eq") == []
    # resume of a finished cluster run: nothing to do, same rows
    again = subprocess.run(STATEBOX + ["run", "--resume", str(on_cluster), "--cluster", cluster.address, "--json"],
                           capture_output=True, text=True, timeout=300, env=cluster.driver_env())
    assert again.returncode == 0, again.stderr[-2000:]
    assert store_rows(on_cluster) == a


def test_coding_agent_reaches_its_model_through_each_nodes_own_gateway(cluster, suite, tmp_path):
    """The real `claude` CLI (scripted model) on the cluster: every model request goes through
    the gateway of the node that ran it, with that node's key; the key is in no attempt file.
    Its `--prompt-template` is a file on the head, named by a path relative to the head's
    folder: each node gets a copy, and its staging folder is gone at the end of the run."""
    from statebox.harness.plan import RunConfig, datasets_from_suite

    run_dir = tmp_path / "coding"
    run_dir.mkdir()
    marker = f"head-template-{os.getpid()}"
    (tmp_path / "prompt.txt").write_text(f"{marker}\n${{instruction}}\nWrite only the answer to ${{answer_file}}.\n${{prohibitions}}\n")
    RunConfig(run_id="cl-code", agents=["claude-code-scripted"], datasets=datasets_from_suite(suite)[:2], limit=1,
              concurrency=2, suite=str(suite), agent_options={"claude-code-scripted": {"prompt_template": "prompt.txt"}}).save(run_dir)
    env = {k: v for k, v in cluster.driver_env().items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}  # the head has no key
    ran = subprocess.run(STATEBOX + ["run", "--resume", str(run_dir), "--cluster", cluster.address, "--json"],
                         capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    rows = store_rows(run_dir)
    print(f"coding agent attempts per node: {rows_per_node(run_dir)}")
    assert rows and all(r[6] == "ok" for r in rows), rows
    assert all(r[9] == "contaminated" for r in rows)  # the scripted model cheats; the auditor catches it
    for r in rows:
        folder = run_dir / "attempts" / r[0]
        log = (folder / "gateway.jsonl").read_text()
        assert '"/v1/messages"' in log or "/v1/messages" in log
        for f in folder.rglob("*"):
            if f.is_file():
                text = f.read_text(errors="replace")
                assert NODE_KEY not in text and cluster.token not in text, f  # neither the key nor Ray's token
    assert NODE_KEY not in ran.stdout + ran.stderr and cluster.token not in ran.stdout + ran.stderr
    assert run_containers(None, "cl-code") == [] and run_containers(cluster.engine_b, "cl-code") == []
    prompts = [json.dumps(r.body) for r in cluster.model.model_requests() if marker in json.dumps(r.body)]
    assert prompts, "the head's prompt template did not reach the model"
    for name in ("a", "b"):  # each node's staging folder for the run is gone; its video cache stays
        assert not (cluster.root / f"node-{name}" / "runs" / "cl-code").exists()


def _slow_config(run_dir: Path, suite: Path, run_id: str, n_items: int | None = None) -> None:
    from statebox.harness.plan import RunConfig, datasets_from_suite

    RunConfig(run_id=run_id, agents=["shell"], datasets=datasets_from_suite(suite), concurrency=4,
              agent_options={"shell": {"extra": {"command": "sleep 2; echo 3 > answer.txt"}}}, suite=str(suite)).save(run_dir)


def test_sigterm_of_the_head_leaves_no_container_on_any_node(cluster, suite, tmp_path):
    run_dir = tmp_path / "stopped"
    run_dir.mkdir()
    _slow_config(run_dir, suite, "cl-term")
    head = subprocess.Popen(STATEBOX + ["run", "--resume", str(run_dir), "--cluster", cluster.address, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster.driver_env())
    wait_for(lambda: run_containers(None, "cl-term") and run_containers(cluster.engine_b, "cl-term"), 240,
              "containers of the run on both engines")
    head.send_signal(signal.SIGTERM)
    _, err = head.communicate(timeout=120)
    assert head.returncode == 143, err[-2000:]
    assert "stopped by SIGTERM" in err
    wait_for(lambda: not run_containers(None, "cl-term") and not run_containers(cluster.engine_b, "cl-term"), 60,
              "the run's containers to be gone")
    resumed = subprocess.run(STATEBOX + ["run", "--resume", str(run_dir), "--cluster", cluster.address, "--json"],
                             capture_output=True, text=True, timeout=900, env=cluster.driver_env())
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = store_rows(run_dir)
    assert rows and len({r[0] for r in rows}) == len(rows) and all(r[6] == "ok" and r[8] == "3" for r in rows)


def test_lost_node_mid_run_is_retried_elsewhere_nothing_lost_or_duplicated(cluster, suite, tmp_path):
    run_dir = tmp_path / "lost"
    run_dir.mkdir()
    _slow_config(run_dir, suite, "cl-lost")
    head = subprocess.Popen(STATEBOX + ["run", "--resume", str(run_dir), "--cluster", cluster.address, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster.driver_env())
    # node B is mid-attempt (a container of the run is running on its engine) and has finished some
    wait_for(lambda: (run_dir / "cluster.jsonl").exists() and rows_per_node(run_dir).get("b", 0) >= 1
              and run_containers(cluster.engine_b, "cl-lost"), 300, "node b to be mid-run")
    before = rows_per_node(run_dir)
    cluster.kill_node("b")
    out, err = head.communicate(timeout=900)
    assert head.returncode == 0, err[-3000:]
    rows = store_rows(run_dir)
    assert out.lstrip().startswith("{"), out[:2000]
    from statebox.harness.plan import RunConfig, load_datasets, plan_attempts

    config = RunConfig.load(run_dir)
    n_planned = len(plan_attempts(config, load_datasets(config)))
    assert json.loads(out)["results"]
    after = rows_per_node(run_dir)
    print(f"node b killed after {before}; finished with {after}; rows {len(rows)} of {n_planned}")
    assert len(rows) == n_planned and len({r[0] for r in rows}) == len(rows)
    assert all(r[6] == "ok" and r[8] == "3" for r in rows)
    assert after.get("a", 0) > before.get("a", 0)  # the rest ran on the surviving node
    assert sum(after.values()) == len(rows)  # each attempt recorded once
    assert run_containers(None, "cl-lost") == [] and run_containers(cluster.engine_b, "cl-lost") == []
