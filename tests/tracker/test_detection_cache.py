"""The run's detection cache: each frame of a video detected once per run, never an answer changed,
never a row of the future or of another video handed to an attempt, poisoned rows dropped."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from statebox.policies import load_policy
from statebox.tracker.detection_cache import CACHE_DIR, ROWS_FILE, VideoCache, run_folder_of, settings_key


def _row(key: str, t: float, n: int = 1) -> dict:
    return {"key": key, "t": t, "xyxy": [[1.5, 2.25, 30.0, 40.125]] * n, "conf": [0.5] * n, "cls": [3] * n}


def _video(tmp_path: Path, content: bytes = b"not really a video") -> Path:
    path = tmp_path / "source.mp4"
    path.write_bytes(content)
    return path


def test_rows_of_frames_at_or_after_the_query_time_are_never_handed_over(tmp_path):
    run_dir = tmp_path / "run"
    cache = VideoCache(run_dir, "settings", _video(tmp_path))
    produced = tmp_path / "out.jsonl"
    produced.write_text("".join(json.dumps(_row(f"{i:032x}", i / 10)) + "\n" for i in range(30)))
    assert cache.keep(produced, "tracker-0001") == 30
    assert (cache.folder / "tracker-0001.jsonl").is_file() and cache.folder.is_relative_to(run_dir / CACHE_DIR)

    dest = tmp_path / ROWS_FILE
    assert cache.hand_over(dest, until=1.0) == 10
    times = [json.loads(line)["t"] for line in dest.read_text().splitlines()]
    assert times and max(times) < 1.0
    assert cache.hand_over(dest, until=None) == 30  # an uncut video: every frame


def test_another_video_or_other_settings_share_no_rows(tmp_path):
    run_dir = tmp_path / "run"
    produced = tmp_path / "out.jsonl"
    produced.write_text(json.dumps(_row("a" * 32, 0.0)) + "\n")
    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()
    VideoCache(run_dir, "settings", _video(tmp_path / "v1")).keep(produced, "a1")
    assert VideoCache(run_dir, "settings", _video(tmp_path / "v1")).hand_over(tmp_path / "dest.jsonl", until=None) == 1
    other_video = VideoCache(run_dir, "settings", _video(tmp_path / "v2", b"another video"))
    other_settings = VideoCache(run_dir, "other", _video(tmp_path / "v1"))
    for cache in (other_video, other_settings):
        assert cache.hand_over(tmp_path / "dest.jsonl", until=None) == 0


def test_settings_key_changes_with_what_detections_depend_on(tmp_path):
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"weights one")
    base = dict(imgsz=320, conf=0.1, device="auto", image="statebox-tracker:abc")
    key = settings_key(weights, **base)
    assert key == settings_key(weights, **base)
    for change in ({"imgsz": 640}, {"conf": 0.2}, {"device": "cpu"}, {"image": "statebox-tracker:def"}):
        assert settings_key(weights, **{**base, **change}) != key, change
    other = tmp_path / "w2.pt"
    other.write_bytes(b"weights two")
    assert settings_key(other, **base) != key


def test_poisoned_rows_links_and_oversized_files_are_dropped(tmp_path, monkeypatch):
    """A container's rows file is hostile: every row is checked, a link is never followed, an oversized file
    is dropped whole, and only the host writes the cache folder."""
    from statebox.tracker import detection_cache

    cache = VideoCache(tmp_path / "run", "settings", _video(tmp_path))
    good = _row("b" * 32, 0.1)
    bad = [
        "not json",
        json.dumps(_row("../../etc/passwd".ljust(32, "x"), 0.2)),  # a key that is no hash
        json.dumps({**_row("c" * 32, 0.3), "cls": [1, 2]}),  # lengths disagree
        json.dumps({**_row("d" * 32, 0.4), "conf": [math.inf]}).replace("Infinity", "1e999"),  # not finite
        json.dumps({**_row("e" * 32, float("nan"))}).replace("NaN", "1e999"),  # t not finite
        json.dumps({**_row("f" * 32, 0.5), "extra": "field"}),  # unknown field
        json.dumps({**_row("1" * 32, -1.0)}),  # a time before the start
    ]
    produced = tmp_path / "out.jsonl"
    produced.write_text(json.dumps(good) + "\n" + "\n".join(bad) + "\n")
    assert cache.keep(produced, "x/../../evil") == 1
    assert [p.name for p in cache.folder.iterdir()] == ["xevil.jsonl"]  # the id cannot name another folder

    secret = tmp_path / "host-secret.jsonl"
    secret.write_text(json.dumps(_row("2" * 32, 0.0)) + "\n")
    os.symlink(secret, cache.folder / "link.jsonl")
    monkeypatch.setattr(detection_cache, "MAX_FILE_BYTES", 400)
    big = tmp_path / "big.jsonl"
    big.write_text("".join(json.dumps(_row(f"{i:032x}", 0.0)) + "\n" for i in range(10)))
    assert cache.keep(big, "big") == 0  # over the cap: nothing of it

    dest = tmp_path / ROWS_FILE
    assert cache.hand_over(dest, until=None) == 1
    assert json.loads(dest.read_text())["key"] == "b" * 32


def test_cache_lives_only_in_a_run_folder(tmp_path):
    assert run_folder_of(tmp_path / "run" / "attempts" / "tracker-1") == tmp_path / "run"
    assert run_folder_of(tmp_path / "somewhere" / "a1") is None


# ---------------------------------------------------------------- the real tracker in its sandbox


def _streaming_context(item, query, ws, attempt_dir, engine, videos_dir, options):
    from statebox.attempt import AttemptContext, SecretFacts
    from statebox.schema import Attempt

    attempt_dir.mkdir(parents=True, exist_ok=True)
    attempt = Attempt(run_id="t", agent="tracker", item_id=item.id, query_index=query.index)
    return AttemptContext(attempt=attempt, item=item, query=query, attempt_dir=attempt_dir,
                          policy=load_policy("default"), options=options,
                          secret=SecretFacts(original_name="x.mp4", original_stem="x", item_id=item.id, dataset="d"),
                          workspace=ws, engine=engine, videos_dir=videos_dir)


@pytest.mark.docker
def test_cached_detections_give_the_same_tracks_and_answer_as_detecting_every_frame(docker_engine, tracker_image,
                                                                                  tiny_suite, tmp_path):
    """Two query points of one streaming item, each in its own sandbox with its own cut of the video: the
    earlier point, answered after the later one, reuses its frames' detections (only the cut's re-encoded
    tail is detected again), and its tracks and answer equal, byte for byte, those of an attempt that
    detected every frame; a third run of it detects nothing at all; in one group container the two points'
    common frames are detected once."""
    from statebox.agents.tracker import TrackerAgent
    from statebox.attempt import AgentOptions
    from statebox.benchmarks import load_benchmark
    from statebox.benchmarks.synthetic.suite import load_suite
    from statebox.sandbox.workspace import prepare_workspace
    from statebox.schema import resolve_video

    ds = load_suite(tiny_suite).dataset("streaming_count")
    items = load_benchmark(ds.bench, ds.data, ds.videos).items
    item = next(i for i in items if "visible at this moment" in i.question and len(i.queries) >= 2)
    early, late = sorted(item.queries, key=lambda q: q.time)[-2:]
    policy = load_policy("default")
    video = resolve_video(item, Path(ds.videos))
    cached_agent = TrackerAgent(AgentOptions())
    fresh_agent = TrackerAgent(AgentOptions(extra={"cache": 0}))
    run = tmp_path / "run" / "attempts"
    plans = [("late", late, cached_agent, run / "a-late"), ("early", early, cached_agent, run / "a-early"),
             ("again", early, cached_agent, run / "a-again"),
             ("fresh", early, fresh_agent, tmp_path / "other-run" / "attempts" / "a-fresh")]
    sessions = {}
    for name, query, agent, folder in plans:
        ws = prepare_workspace(item, query, video, policy, root=tmp_path / f"ws-{name}")
        try:
            sessions[name] = agent.run(_streaming_context(item, query, ws, folder, docker_engine, Path(ds.videos),
                                                          agent.options))
        finally:
            ws.cleanup()
        assert sessions[name].status == "ok", (name, sessions[name].reason)
    folders = {name: folder for name, _q, _a, folder in plans}

    assert sessions["late"].meta["detection_cache"]["hits"] == 0  # the first attempt of the video
    early_cache = sessions["early"].meta["detection_cache"]
    assert early_cache["hits"] > 3 * early_cache["misses"] > 0, early_cache  # the re-encoded tail only
    assert sessions["again"].meta["detection_cache"]["misses"] == 0
    assert "detection_cache" not in sessions["fresh"].meta  # cache=0: every frame detected
    handed = [json.loads(line)["t"] for line in (folders["early"] / "tracker-input" / ROWS_FILE).read_text().splitlines()]
    assert handed and max(handed) < early.time  # nothing of the later cut's frames past this query time

    fresh_out = folders["fresh"] / "tracker-out"
    for name in ("early", "again"):
        out = folders[name] / "tracker-out"
        assert sessions[name].response == sessions["fresh"].response
        assert (out / "tracks.jsonl").read_bytes() == (fresh_out / "tracks.jsonl").read_bytes(), name
        assert (out / "answer.json").read_bytes() == (fresh_out / "answer.json").read_bytes(), name
        assert sessions[name].frames.decoded == sessions["fresh"].frames.decoded

    # both points in ONE group container of a new run (nothing cached yet): their common frames are
    # detected once, and the early point's tracks are still those of detecting every frame
    workspaces = [prepare_workspace(item, q, video, policy, root=tmp_path / f"wsg{k}") for k, q in enumerate((early, late))]
    group_run = tmp_path / "group-run" / "attempts"
    try:
        grouped = cached_agent.run_group([
            _streaming_context(item, q, ws, group_run / f"g{k}", docker_engine, Path(ds.videos), cached_agent.options)
            for k, (q, ws) in enumerate(zip((early, late), workspaces))])
    finally:
        for ws in workspaces:
            ws.cleanup()
    assert [s.status for s in grouped] == ["ok", "ok"], [s.reason for s in grouped]
    assert grouped[0].meta["detection_cache"]["hits"] > 0  # the late stream's copies of the early stream's frames
    assert grouped[0].response == sessions["fresh"].response and grouped[1].response == sessions["late"].response
    assert (group_run / "g0" / "tracker-out" / "tracks.jsonl").read_bytes() == (fresh_out / "tracks.jsonl").read_bytes()
