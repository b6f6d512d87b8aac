"""The tracker in its sandbox: no network attempt, the right number of objects, the agent's sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statebox.policies import load_policy
from statebox.sandbox.docker import ContainerSpec, Mount
from statebox.tracker import container as tc

from tests.tracker.counting_engine import CountingEngine

pytestmark = pytest.mark.docker


def _spec(image, command, mounts, policy=None):
    return ContainerSpec(image=image, command=command, workspace=None, policy=policy or load_policy("default"),
                         env=dict(tc.OFFLINE_ENV), mounts=mounts)


def test_network_guard_records_an_attempt_and_the_network_is_off(docker_engine, tracker_image, writable_dir):
    """Positive control: the guard the other tests rely on does see a look-up, and it fails."""
    code = ("import socket\n"
            "try:\n    socket.create_connection(('pypi.org', 443), timeout=3); print('CONNECTED')\n"
            "except OSError as exc:\n    print('refused', type(exc).__name__)\n")
    lines: list[str] = []
    result = docker_engine.run(_spec(tracker_image, [tc.PYTHON, "-c", code],
                                     [Mount(source=writable_dir, target=tc.OUT_MOUNT, read_only=False)]),
                               writable_dir / "stdout.log", writable_dir / "stderr.log", on_stdout_line=lines.append)
    assert result.status == "ok", result.reason
    text = "".join(lines)
    assert "refused" in text and "CONNECTED" not in text
    logged = tc.read_network_log(writable_dir)
    assert any(row["kind"] == "dns" and row["target"] == "pypi.org" for row in logged)
    assert any((tc.parse_event_line(l) or {}).get("event") == "network_attempt" for l in lines)


def _gt_count(suite: Path, stem: str) -> int:
    meta = json.loads((suite / "cube_count" / "gt" / f"{stem}.meta.json").read_text())
    return int(meta["answers"]["count"])


def test_tracking_a_generated_clip_recovers_the_number_of_objects(docker_engine, tracker_image, shipped_weights,
                                                                 tiny_suite, writable_dir, tmp_path):
    stem = "cube_count_control_0000"  # a static camera that shows every cube in every frame
    video = tiny_suite / "cube_count" / "videos" / f"{stem}.mp4"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "question.json").write_text(json.dumps({"question": "How many cubes are present in the scene?"}))
    command = [tc.PYTHON, "-m", "sbtracker.cli", "track", "--video", f"/videos/{video.name}",
               "--question-file", f"{tc.INPUT_MOUNT}/question.json",
               "--weights", f"{tc.MODELS_MOUNT}/{shipped_weights.name}", "--out", tc.OUT_MOUNT]
    lines: list[str] = []
    result = docker_engine.run(
        _spec(tracker_image, command, [Mount(source=video, target=f"/videos/{video.name}"),
                                       Mount(source=shipped_weights, target=f"{tc.MODELS_MOUNT}/{shipped_weights.name}"),
                                       Mount(source=tmp_path / "in", target=tc.INPUT_MOUNT),
                                       Mount(source=writable_dir, target=tc.OUT_MOUNT, read_only=False)]),
        writable_dir / "stdout.log", writable_dir / "stderr.log", on_stdout_line=lines.append)
    assert result.status == "ok" and result.exit_code == 0, (writable_dir / "stderr.log").read_text()[-2000:]
    expected = _gt_count(tiny_suite, stem)
    ids_per_frame = [len(json.loads(l)["objects"]) for l in (writable_dir / "tracks.jsonl").read_text().splitlines()]
    assert ids_per_frame.count(expected) >= 0.9 * len(ids_per_frame), ids_per_frame
    answer = json.loads((writable_dir / "answer.json").read_text())
    assert answer["program"] == "unique_total" and answer["response"] == str(expected), answer
    events = [tc.parse_event_line(l) for l in lines]
    assert not any(e and e.get("event") == "network_attempt" for e in events)
    assert not (writable_dir / "network.jsonl").exists()


def _context(item, ws, attempt_dir, engine, weights=None):
    from statebox.attempt import AgentOptions, AttemptContext, SecretFacts
    from statebox.schema import Attempt

    policy = load_policy("default")
    attempt = Attempt(run_id="t", agent="tracker", item_id=item.id)
    return AttemptContext(attempt=attempt, item=item, query=item.queries[0], attempt_dir=attempt_dir, policy=policy,
                          options=AgentOptions(weights=weights),
                          secret=SecretFacts(original_name="x.mp4", original_stem="x", item_id=item.id, dataset="d"),
                          workspace=ws, engine=engine)


def test_agent_answers_in_the_sandbox_and_abstains_on_what_it_cannot_map(docker_engine, tracker_image,
                                                                          shipped_weights, tiny_suite, tmp_path):
    from statebox.agents.base import make_agent
    from statebox.benchmarks import load_benchmark
    from statebox.benchmarks.synthetic.suite import load_suite
    from statebox.recorder import read_events
    from statebox.sandbox.workspace import prepare_workspace
    from statebox.schema import resolve_video
    from statebox.scoring import score_query

    ds = load_suite(tiny_suite).dataset("cube_count")
    items = load_benchmark(ds.bench, ds.data, ds.videos).items
    item = next(i for i in items if "control" in i.id)
    policy = load_policy("default")
    ws = prepare_workspace(item, item.queries[0], resolve_video(item, ds.videos), policy, root=tmp_path / "ws")
    try:
        agent = make_agent("tracker")
        session = agent.run(_context(item, ws, tmp_path / "a1", docker_engine))
        assert session.status == "ok", session.reason
        assert score_query(ds.bench, item, 0, session.response).metrics["correct"] == 1.0, session.response
        assert session.frames.decoded and session.meta["program"] == "unique_total"
        events = read_events(tmp_path / "a1")
        kinds = {e.kind.value for e in events}
        assert {"message", "frames", "final_answer"} <= kinds and "network_attempt" not in kinds
        # the launch command is statebox's own (harness role), so the auditor does not judge it
        assert any(e.kind.value == "message" and e.data.get("role") == "harness" for e in events)

        odd = item.model_copy(update={"question": "What colour is the plane behind the cubes?"})
        abstained = agent.run(_context(odd, ws, tmp_path / "a2", docker_engine))
        assert abstained.status == "abstain" and abstained.response == ""
        assert score_query(ds.bench, odd, 0, abstained.response).metrics["correct"] == 0.0
    finally:
        ws.cleanup()


def test_batched_parallel_pipeline_gives_the_same_tracks_as_frame_by_frame(docker_engine, tracker_image,
                                                                          shipped_weights, tiny_suite, writable_dir):
    """The throughput path (decode thread, batches, two batches in flight) must not change a single track."""
    video = tiny_suite / "cube_count" / "videos" / "cube_count_main_0000.mp4"
    code = (
        "import json, sys\n"
        "from sbtracker.detect import Detector, DetectorConfig\n"
        "from sbtracker.track import run_tracking\n"
        f"d = Detector(DetectorConfig(weights='{tc.MODELS_MOUNT}/{shipped_weights.name}'))\n"
        "runs = []\n"
        "for workers, batch in ((1, 1), (2, 8), (2, 5)):\n"
        "    d.workers = workers\n"
        f"    log, stats = run_tracking('/videos/{video.name}', d, batch=batch)\n"
        "    runs.append([f.to_json() for f in log.frames])\n"
        "print('FRAMES', len(runs[0]), 'OBJECTS', sum(len(f['objects']) for f in runs[0]))\n"
        "print('SAME', runs[0] == runs[1] == runs[2])\n")
    lines: list[str] = []
    result = docker_engine.run(
        _spec(tracker_image, [tc.PYTHON, "-c", code],
              [Mount(source=video, target=f"/videos/{video.name}"),
               Mount(source=shipped_weights, target=f"{tc.MODELS_MOUNT}/{shipped_weights.name}"),
               Mount(source=writable_dir, target=tc.OUT_MOUNT, read_only=False)]),
        writable_dir / "stdout.log", writable_dir / "stderr.log", on_stdout_line=lines.append)
    assert result.status == "ok", (writable_dir / "stderr.log").read_text()[-2000:]
    text = "".join(lines)
    assert "FRAMES 100" in text and "OBJECTS 0" not in text, text
    assert "SAME True" in text, text


def test_grouped_attempts_share_one_container_and_keep_their_own_files(docker_engine, tracker_image,
                                                                        shipped_weights, tiny_suite, tmp_path):
    """Three attempts (one abstaining) in one tracker container: each attempt's answer, tracks.jsonl and
    session equal those of its own single-attempt run, and every file lands in its own attempt folder."""
    from statebox.agents.base import make_agent
    from statebox.benchmarks import load_benchmark
    from statebox.benchmarks.synthetic.suite import load_suite
    from statebox.recorder import read_events
    from statebox.sandbox.workspace import prepare_workspace
    from statebox.schema import resolve_video

    ds = load_suite(tiny_suite).dataset("cube_count")
    items = load_benchmark(ds.bench, ds.data, ds.videos).items
    picked = [next(i for i in items if "control" in i.id), next(i for i in items if "main" in i.id)]
    picked.append(picked[0].model_copy(update={"question": "What colour is the plane behind the cubes?"}))
    policy = load_policy("default")
    workspaces = [prepare_workspace(it, it.queries[0], resolve_video(it, ds.videos), policy, root=tmp_path / f"ws{k}")
                  for k, it in enumerate(picked)]
    engine = CountingEngine(docker_engine)
    try:
        agent = make_agent("tracker")
        grouped = agent.run_group([_context(it, ws, tmp_path / f"g{k}", engine)
                                   for k, (it, ws) in enumerate(zip(picked, workspaces))])
        assert engine.runs == 1
        assert [s.status for s in grouped] == ["ok", "ok", "abstain"], [s.reason for s in grouped]
        for k in range(2):
            single = agent.run(_context(picked[k], workspaces[k], tmp_path / f"s{k}", docker_engine))
            assert grouped[k].response == single.response and grouped[k].meta["program"] == single.meta["program"]
            g_tracks = (tmp_path / f"g{k}" / "tracker-out" / "tracks.jsonl").read_bytes()
            assert g_tracks and g_tracks == (tmp_path / f"s{k}" / "tracker-out" / "tracks.jsonl").read_bytes()
            assert grouped[k].frames.decoded == single.frames.decoded
            assert grouped[k].meta["group"] == {"size": 3, "index": k}
            events = read_events(tmp_path / f"g{k}")
            answers = [e for e in events if e.kind.value == "tool_output" and e.data.get("event") == "answer"]
            assert len(answers) == 1 and answers[0].data["stream"] == k  # only its own stream's answer
            own_log = (tmp_path / f"g{k}" / "stdout.log").read_text()
            assert f'"stream": {k}' in own_log and f'"stream": {1 - k}' not in own_log
        assert not (tmp_path / "g2" / "tracker-out" / "tracks.jsonl").exists()  # abstained before decoding
    finally:
        for ws in workspaces:
            ws.cleanup()


def test_concurrent_attempts_with_group_option_share_a_container(docker_engine, tracker_image, shipped_weights,
                                                                tiny_suite, tmp_path):
    """`--option group=2`: two attempts arriving at once from the runner's threads run in one container."""
    from concurrent.futures import ThreadPoolExecutor

    from statebox.agents.tracker import TrackerAgent
    from statebox.attempt import AgentOptions
    from statebox.benchmarks import load_benchmark
    from statebox.benchmarks.synthetic.suite import load_suite
    from statebox.sandbox.workspace import prepare_workspace
    from statebox.schema import resolve_video

    ds = load_suite(tiny_suite).dataset("cube_count")
    items = [i for i in load_benchmark(ds.bench, ds.data, ds.videos).items if "control" in i.id][:2]
    policy = load_policy("default")
    workspaces = [prepare_workspace(it, it.queries[0], resolve_video(it, ds.videos), policy, root=tmp_path / f"ws{k}")
                  for k, it in enumerate(items)]
    engine = CountingEngine(docker_engine)
    try:
        agent = TrackerAgent(AgentOptions(extra={"group": 2, "group_wait_s": 30}))
        with ThreadPoolExecutor(2) as pool:
            sessions = list(pool.map(lambda k: agent.run(_context(items[k], workspaces[k], tmp_path / f"a{k}", engine)),
                                     range(2)))
        assert engine.runs == 1
        assert [s.status for s in sessions] == ["ok", "ok"], [s.reason for s in sessions]
        assert sorted(s.meta["group"]["index"] for s in sessions) == [0, 1]
        assert all(s.response for s in sessions)
    finally:
        for ws in workspaces:
            ws.cleanup()


def test_decoder_option_reaches_the_runtime_and_bad_values_are_one_line():
    """`--option decoder=...` becomes the runtime's `--decoder`; the agent's list is the runtime's own."""
    from statebox.agents import tracker as tracker_agent
    from statebox.attempt import AgentOptions
    from statebox.errors import UserError
    from statebox.tracker.runtime.decoders import DECODERS

    assert tuple(tracker_agent.DECODERS) == tuple(DECODERS)
    agent = tracker_agent.TrackerAgent(AgentOptions(extra={"decoder": "process"}))
    command = agent.command("/models/w.pt")
    assert command[command.index("--decoder") + 1] == "process"
    default = tracker_agent.TrackerAgent(AgentOptions()).command("/models/w.pt")
    assert default[default.index("--decoder") + 1] == "auto"
    with pytest.raises(UserError, match="decoder='gpu-magic'"):
        tracker_agent.TrackerAgent(AgentOptions(extra={"decoder": "gpu-magic"}))


def test_attempt_with_the_process_decoder_reads_its_frames_in_a_child_process(docker_engine, tracker_image,
                                                                              shipped_weights, tiny_suite, tmp_path):
    """A harness attempt with `decoder=process` decodes in its own process inside the sandbox (run.json says
    which decoder read the frames, and no fallback), and answers as the default attempt does."""
    from statebox.agents.tracker import TrackerAgent
    from statebox.attempt import AgentOptions
    from statebox.benchmarks import load_benchmark
    from statebox.benchmarks.synthetic.suite import load_suite
    from statebox.sandbox.workspace import prepare_workspace
    from statebox.schema import resolve_video

    ds = load_suite(tiny_suite).dataset("cube_count")
    item = next(i for i in load_benchmark(ds.bench, ds.data, ds.videos).items if "control" in i.id)
    ws = prepare_workspace(item, item.queries[0], resolve_video(item, ds.videos), load_policy("default"),
                           root=tmp_path / "ws")
    try:
        sessions = {name: TrackerAgent(AgentOptions(extra={"decoder": name})).run(
            _context(item, ws, tmp_path / name, docker_engine)) for name in ("process", "thread")}
        assert [s.status for s in sessions.values()] == ["ok", "ok"], [s.reason for s in sessions.values()]
        run = sessions["process"].meta["run"]
        assert run["decoder"] == "process" and run["decoder_fallback"] is None, run
        assert sessions["thread"].meta["run"]["decoder"] == "thread"
        assert sessions["process"].response == sessions["thread"].response
    finally:
        ws.cleanup()
