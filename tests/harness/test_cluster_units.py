"""Cluster pieces without a cluster: folder shipping, batched rows, node checks, and the
refusal of a DOCKER_HOST that does not see this host's files (a real second engine in its
own mount namespace: a workspace mounted after it started is invisible to it, exactly as
on another machine)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from statebox.harness.cluster_worker import pack_folder, unpack_folder


def test_folder_round_trip_keeps_files_and_drops_links(tmp_path):
    src = tmp_path / "src"
    (src / "honeytokens").mkdir(parents=True)
    (src / "events.jsonl").write_text('{"seq": 1}\n')
    (src / "honeytokens" / "a.json").write_text("decoy")
    (src / "escape").symlink_to("/etc/passwd")
    os.mkfifo(src / "fifo")
    dest = tmp_path / "run" / "attempts" / "x"
    dest.mkdir(parents=True)
    (dest / "stale.txt").write_text("from a killed run")
    unpack_folder(pack_folder(src), dest)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == ["events.jsonl", "honeytokens", "honeytokens/a.json"]
    assert (dest / "events.jsonl").read_text() == '{"seq": 1}\n'


def test_unpack_refuses_paths_outside_the_folder(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (("../outside.txt", b"x"), ("/abs.txt", b"y"), ("ok.txt", b"z")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("link")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc"
        tar.addfile(link)
    dest = tmp_path / "a" / "b"
    unpack_folder(buf.getvalue(), dest)
    assert [p.name for p in dest.iterdir()] == ["ok.txt"] or sorted(p.name for p in dest.iterdir()) == ["abs.txt", "ok.txt"]
    assert not (tmp_path / "a" / "outside.txt").exists() and not Path("/abs.txt").exists()
    assert not (dest / "link").exists()


def test_add_many_writes_once(tmp_path):
    from statebox.harness.store import ResultRow, ResultStore

    store = ResultStore(tmp_path)
    rows = [ResultRow(attempt_id=f"a{i}", run_id="r", agent="oracle", dataset="d", bench="vstat", item_id=str(i)) for i in range(50)]
    assert store.add_many(rows) == 50
    assert store.add_many(rows[:10] + [rows[0]]) == 0
    assert store.count() == 50 and len(store.done_ids()) == 50


def test_cluster_problems_name_each_node():
    from statebox.harness.cluster import cluster_problems

    reports = [
        {"node": "a", "code": "c1", "problems": [], "images": {"sandbox": {"tag": "statebox-sandbox:1", "present": True}}},
        {"node": "b", "code": "c2", "problems": ["b: no ANTHROPIC_API_KEY in the node's environment"],
         "images": {"sandbox": {"tag": "statebox-sandbox:2", "present": True}}},
    ]
    problems = cluster_problems(reports, ["sandbox"], head_code="c1")
    assert "b: no ANTHROPIC_API_KEY in the node's environment" in problems
    assert any(p.startswith("b: runs different statebox code") for p in problems)
    assert any("nodes disagree on its content-hash tag" in p for p in problems)
    assert cluster_problems([], ["sandbox"]) == [
        "the cluster has no node with CPUs to run attempts (start workers with `ray start --address`)"]


def test_images_and_keys_needed_by_agents():
    from statebox.agents.base import make_agent
    from statebox.harness.cluster import images_for

    agents = {n: make_agent(n) for n in ("oracle", "scripted-cheater", "tracker")}
    assert images_for(agents) == ["sandbox", "tracker"]
    assert images_for({"oracle": agents["oracle"]}) == []


@pytest.mark.docker
@pytest.mark.slow
def test_a_docker_host_that_does_not_see_this_hosts_files_is_refused(docker_engine, tmp_path):
    from statebox.sandbox.images import ensure_image, image_tag

    if shutil.which("dockerd") is None:
        pytest.fail("dockerd is not installed (scripts/setup/20-docker-engine.sh installs it)")
    root = Path("/tmp") / f"sbx-d3-{os.getpid()}"
    root.mkdir(exist_ok=True)
    host = f"unix://{root}/docker.sock"
    log = open(root / "dockerd.log", "w")
    # its own mount namespace (private): workspaces mounted from now on are invisible to it
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--net", "dockerd", "--host", host,
                             "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
                             "--pidfile", str(root / "docker.pid"), "--bridge", "none", "--iptables=false", "--ip-masq=false"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while subprocess.run(["docker", "-H", host, "info"], capture_output=True).returncode != 0:
            assert time.time() < deadline and proc.poll() is None, (root / "dockerd.log").read_text()[-2000:]
            time.sleep(0.5)
        image = ensure_image("sandbox")
        _, base, _ = image_tag("sandbox")
        moved = subprocess.run(f"docker save {base} {image} | docker -H {host} load", shell=True, capture_output=True, text=True)
        assert moved.returncode == 0, moved.stderr
        videos = tmp_path / "videos"
        videos.mkdir()
        subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10:duration=2",
                        "-pix_fmt", "yuv420p", str(videos / "clip.mp4")], check=True)
        data = tmp_path / "data.json"
        data.write_text(json.dumps({"data": {"t": [{"source_task": "t", "video_id": "clip", "video_path": "clip.mp4",
                                                      "question": "q?", "answer": "3", "choices": [], "answer_index": -1}]}}))
        run = subprocess.run(
            [sys.executable, "-m", "statebox.cli", "run", "--agent", "shell", "--bench", "vstat", "--data", str(data),
             "--videos", str(videos), "--run-dir", str(tmp_path / "run"), "--option", "command=echo 3 > answer.txt", "--json"],
            capture_output=True, text=True, env=dict(os.environ, DOCKER_HOST=host), timeout=300)
        assert run.returncode == 2, run.stderr[-2000:]
        lines = [l for l in run.stderr.splitlines() if l.strip()]
        assert len(lines) == 1 and "does not see this host's files" in lines[0] and "--cluster" in lines[0], run.stderr
        assert not (tmp_path / "run" / "results.sqlite").exists() or subprocess.run(
            ["sqlite3", str(tmp_path / "run" / "results.sqlite"), "select count(*) from results"],
            capture_output=True, text=True).stdout.strip() in ("", "0")
        assert subprocess.run(["docker", "-H", host, "ps", "-aq", "--filter", "label=statebox=1"],
                              capture_output=True, text=True).stdout.split() == []
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        subprocess.run(["bash", "-c", f"rm -rf {root}"], check=False)
