"""Cluster pieces without a cluster: folder shipping, batched rows, node checks, and the
refusal of a DOCKER_HOST that does not see this host's files (a real second engine in its
own mount namespace: a workspace mounted after it started is invisible to it, exactly as
on another machine)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from statebox.errors import UserError
from statebox.harness.cluster_worker import cached_video_path, pack_folder, unpack_folder

from second_engine import SecondEngine


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


@pytest.mark.parametrize("rel", ["../../../etc/cron.d/job", "sub/../../x.mp4", "/etc/cron.d/job", "", ".."])
def test_a_node_writes_a_shipped_video_only_inside_its_cache(tmp_path, rel):
    """The node writes the bytes it is handed at the path it is handed: it checks that path itself (the head refuses
    such a path at load, `schema.video_path_problem`; a node does not take that on trust)."""
    with pytest.raises(UserError, match="not written outside the node's video cache"):
        cached_video_path(tmp_path / "videos" / "key", rel)
    assert cached_video_path(tmp_path / "videos" / "key", "RoomTour3D/clip..mp4") == tmp_path / "videos" / "key" / "RoomTour3D" / "clip..mp4"


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
    engine = SecondEngine(Path("/tmp") / f"sbx-d3-{os.getpid()}", private_mounts=True)  # workspaces are invisible to it
    host = engine.start()
    try:
        engine.load_image("sandbox")
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
        engine.stop()


# ---------------------------------------------------------------- the head's files on the nodes


def _file_config(tmp_path, **options):
    from statebox.harness.plan import DatasetSpec, RunConfig

    return RunConfig(run_id="files", agents=["mllm", "claude-code", "tracker"],
                     datasets=[DatasetSpec(label="d", bench="vstat", data=str(tmp_path / "d.json"))],
                     agent_options={"mllm": options, "claude-code": options,
                                    "tracker": {"weights": options.get("weights"), "extra": {"stride": "2"}}})


def test_file_options_are_shipped_once_by_content_and_rewritten_on_the_node(tmp_path):
    from statebox.attempt import AgentOptions
    from statebox.harness.cluster import file_options, ship_files
    from statebox.harness.cluster_worker import place_files, rewrite_job_options, rewrite_options

    head = tmp_path / "head"
    head.mkdir()
    (head / "prompt.txt").write_text("Count the cubes. {question}\n")
    (head / "best.pt").write_bytes(bytes(range(256)) * 64)
    (head / "notes.md").write_text("Count the cubes. {question}\n")  # same bytes as the template: shipped once
    config = _file_config(tmp_path, prompt_template=str(head / "prompt.txt"), weights=str(head / "best.pt"),
                          extra={"rubric_file": str(head / "notes.md"), "command": "/bin/true", "max_frames": "8"})
    found = file_options(config)
    assert found["mllm"] == {"prompt_template": head / "prompt.txt", "weights": head / "best.pt",
                             "extra.rubric_file": head / "notes.md"}  # `command` is not a file option
    assert found["tracker"] == {"weights": head / "best.pt"}

    puts: list[bytes] = []

    def put(data: bytes) -> str:
        puts.append(data)
        return f"ref-{len(puts)}"

    files, by_agent = ship_files(found, put)
    assert len(puts) == 2 and len(files) == 2  # two distinct contents, each put once for the whole run
    assert by_agent["mllm"]["prompt_template"] == by_agent["mllm"]["extra.rubric_file"] == by_agent["claude-code"]["prompt_template"]
    assert by_agent["tracker"] == {"weights": by_agent["mllm"]["weights"]}

    refs = {f"ref-{i + 1}": data for i, data in enumerate(puts)}
    staging = tmp_path / "node" / "runs" / "files" / "files"
    placed = place_files(files, staging, refs.__getitem__)
    assert place_files(files, staging, lambda _ref: pytest.fail("fetched again")) == placed  # already there
    for agent, options in found.items():
        for option, head_path in options.items():
            node_path = placed[by_agent[agent][option]]
            assert staging in node_path.parents and node_path.read_bytes() == head_path.read_bytes()
    assert placed[by_agent["tracker"]["weights"]].name == "best.pt"  # the file keeps its name

    raw = config.agent_options["mllm"]
    rewritten = rewrite_options(raw, by_agent["mllm"], placed)
    assert rewritten["prompt_template"] == str(placed[by_agent["mllm"]["prompt_template"]])
    assert rewritten["weights"] == str(placed[by_agent["mllm"]["weights"]])
    assert rewritten["extra"] == {"rubric_file": str(placed[by_agent["mllm"]["extra.rubric_file"]]),
                                  "command": "/bin/true", "max_frames": "8"}
    assert raw["prompt_template"] == str(head / "prompt.txt")  # the head's copy is left alone
    job_options = rewrite_job_options(AgentOptions.model_validate(raw), by_agent["mllm"], placed)
    assert isinstance(job_options, AgentOptions) and job_options.prompt_template == rewritten["prompt_template"]
    assert job_options.extra["max_frames"] == "8"
    tracker = rewrite_options(config.agent_options["tracker"], by_agent["tracker"], placed)
    # (the run's config records each agent's model allow-list: the tracker talks to no model, so [])
    assert tracker == {"weights": str(placed[by_agent["tracker"]["weights"]]), "extra": {"stride": "2"}, "allowed_models": []}
    assert file_options(_file_config(tmp_path)) == {}


@pytest.mark.parametrize("options, flag", [
    ({"prompt_template": "missing/prompt.txt"}, "--prompt-template missing/prompt.txt"),
    ({"weights": "/nonexistent/best.pt"}, "--weights /nonexistent/best.pt"),
    ({"extra": {"rubric_file": "/nonexistent/rubric.md"}}, "--option rubric_file=/nonexistent/rubric.md"),
])
def test_a_file_option_missing_on_the_head_is_refused(tmp_path, monkeypatch, options, flag):
    from statebox.errors import UserError
    from statebox.harness.cluster import file_options

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as err:
        file_options(_file_config(tmp_path, **options))
    assert str(err.value).startswith(flag) and "no such file on this machine" in str(err.value)
    assert err.value.exit_code == 2


def test_run_refuses_a_missing_file_option_before_reaching_the_cluster(tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / "clip.mp4").write_bytes(b"\0" * 64)
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"data": {"t": [{"source_task": "t", "video_id": "clip", "video_path": "clip.mp4",
                                                  "question": "q?", "answer": "3", "choices": [], "answer_index": -1}]}}))
    run = subprocess.run(
        [sys.executable, "-m", "statebox.cli", "run", "--agent", "oracle", "--bench", "vstat", "--data", str(data),
         "--videos", str(videos), "--run-dir", str(tmp_path / "run"), "--prompt-template", str(tmp_path / "nope.txt"),
         "--cluster", "127.0.0.1:9"],  # nothing listens there: the refusal must come first
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr[-2000:]
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"--prompt-template {tmp_path / 'nope.txt'}" in lines[0], run.stderr
    assert "no such file on this machine" in lines[0]


def test_video_cache_keeps_the_most_recently_used_within_its_cap(tmp_path):
    from statebox.harness.cluster_worker import evict_videos

    root = tmp_path / "videos"
    now = 1_000_000.0
    paths = []
    for i in range(5):  # 5 videos of 1000 bytes, used at now-5000+i*1000 (the last one just now)
        p = root / f"key{i}" / "sub" / "v.mp4"
        p.parent.mkdir(parents=True)
        p.write_bytes(b"x" * 1000)
        os.utime(p, (now - 5000 + i * 1000, now - 5000 + i * 1000))
        paths.append(p)
    (root / "key9").mkdir()
    (root / "key9" / "v.mp4.123.tmp").write_bytes(b"y" * 5000)  # a download in progress: neither counted nor removed
    removed = evict_videos(root, cap_bytes=3000, keep={paths[0]}, grace_s=1500, now=now)
    # 2000 bytes over the cap: the oldest (kept) stays, the next two least recently used go
    assert removed == [paths[1], paths[2]]
    assert [p.exists() for p in paths] == [True, False, False, True, True]
    assert not (root / "key1").exists() and not (root / "key2").exists()  # their empty folders too
    # everything used within the grace period stays, even above the cap
    assert evict_videos(root, cap_bytes=0, grace_s=10_000, now=now) == []
    assert evict_videos(root, cap_bytes=0, keep={paths[4]}, grace_s=0, now=now) == [paths[0], paths[3]]
    assert (root / "key9" / "v.mp4.123.tmp").exists()


def test_video_cache_cap_comes_from_the_node_environment(monkeypatch):
    from statebox.harness.cluster_worker import VIDEO_CACHE_MB, video_cache_bytes

    monkeypatch.delenv("STATEBOX_NODE_VIDEO_CACHE_MB", raising=False)
    assert video_cache_bytes() == VIDEO_CACHE_MB * 1024 * 1024 == 2 * 1024 ** 3
    monkeypatch.setenv("STATEBOX_NODE_VIDEO_CACHE_MB", "1.5")
    assert video_cache_bytes() == int(1.5 * 1024 * 1024)


def test_end_of_run_removes_the_nodes_staging_folder_only(tmp_path, monkeypatch):
    from statebox.harness.cluster_worker import end_run

    monkeypatch.setenv("STATEBOX_NODE_ROOT", str(tmp_path / "node"))
    staging = tmp_path / "node" / "runs" / "r1"
    (staging / "files" / "abc").mkdir(parents=True)
    (staging / "files" / "abc" / "prompt.txt").write_text("x")
    (staging / "attempts" / "a1").mkdir(parents=True)
    other = tmp_path / "node" / "runs" / "r2"
    other.mkdir()
    video = tmp_path / "node" / "videos" / "k" / "v.mp4"
    video.parent.mkdir(parents=True)
    video.write_bytes(b"v")
    assert end_run("r1") is True
    assert not staging.exists() and other.is_dir() and video.is_file()  # other runs and the video cache stay
    assert end_run("r1") is False
    assert end_run("..") is False and end_run("") is False and end_run("r2/../r2") is False and other.is_dir()
