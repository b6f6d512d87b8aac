"""The decoders in the tracker image, inside the hardened sandbox (pids limit, 64 MiB /dev/shm, seccomp).

What the host tests (test_decode_process.py) cannot show: the process reader works under
the sandbox's limits (1080p in a ring smaller than a batch) and falls back, with a reason,
when two frames would not fit half of /dev/shm (4K); torchcodec (installed in the image) loads the image's FFmpeg, and its frames are
OpenCV's within 2 levels (measured: identical, max difference 0, on the suite's H.264 clips
and on bt709, full-range, MPEG-4 and VP9 videos); tracking writes the same tracks whichever
decoder read the video; nothing is left running or in /dev/shm afterwards.
The checks live in decode_check.py (it imports torch, so it runs in the image).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statebox.policies import load_policy
from statebox.sandbox.docker import ContainerSpec, Mount
from statebox.tracker import container as tc

pytestmark = pytest.mark.docker

HERE = Path(__file__).resolve().parent
TOLERANCE = 2  # intensity levels: decoders' YUV->BGR conversions may differ in rounding


@pytest.fixture(scope="module")
def result(docker_engine, tracker_image, shipped_weights, tiny_suite) -> dict:
    from statebox.sandbox.workspace import limited_folder

    videos = [tiny_suite / "cube_count" / "videos" / "cube_count_main_0000.mp4",
              tiny_suite / "streaming_count" / "videos" / "streaming_count_0000.mp4"]
    with limited_folder(64) as folder:
        mounts = [Mount(source=v, target=f"/videos/{v.name}") for v in videos]
        mounts += [Mount(source=HERE / "decode_check.py", target="/checks/decode_check.py"),
                   Mount(source=shipped_weights, target=f"{tc.MODELS_MOUNT}/{shipped_weights.name}")]
        command = [tc.PYTHON, "/checks/decode_check.py", f"{tc.MODELS_MOUNT}/{shipped_weights.name}",
                   *[f"/videos/{v.name}" for v in videos]]
        spec = ContainerSpec(image=tracker_image, command=command, workspace=None, policy=load_policy("default"),
                             env=dict(tc.OFFLINE_ENV), mounts=mounts)
        lines: list[str] = []
        run = docker_engine.run(spec, folder.path / "stdout.log", folder.path / "stderr.log",
                                on_stdout_line=lines.append)
        stderr = (folder.path / "stderr.log").read_text()[-3000:]
    assert run.status == "ok", stderr
    found = [l for l in "".join(lines).splitlines() if l.startswith("RESULT ")]
    assert found, stderr
    out = json.loads(found[-1][len("RESULT "):])
    print(json.dumps(out, indent=1))
    return out


def test_the_process_reader_gives_the_thread_readers_frames_in_the_sandbox(result):
    assert result["pids_left"] is not None and result["shm_free_mb"] <= 64  # the sandbox's limits were in force
    for video, runs in result["process"].items():
        for layout, r in runs.items():
            assert r["frames"] > 0 and r["same"], (video, layout, r)


def test_torchcodec_runs_in_the_image_and_matches_opencv(result):
    tcd = result["torchcodec"]
    assert tcd["import_error"] is None and tcd["version"].startswith("0.17.0"), tcd
    assert len(tcd["videos"]) == 6
    for video, r in tcd["videos"].items():
        assert r["kind"] == "torchcodec" and r["fallback"] is None, (video, r)
        assert r["frames"][0] == r["frames"][1] > 0 and r["indices_times_same"] and r["shapes_same"], (video, r)
        assert 0 <= r["max"] <= TOLERANCE and r["bgr_contiguous"], (video, r)


def test_hd_frames_fit_dev_shm_in_a_smaller_ring(result):
    hd = result["hd"]
    assert hd["kind"] == "process" and 2 <= hd["ring"] < 8 and hd["frames"] == 12 and hd["same"], hd


def test_frames_too_big_for_dev_shm_fall_back_to_the_thread_with_the_reason(result):
    big = result["big"]
    assert big["kind"] == "thread" and "/dev/shm" in big["fallback"] and big["frames"] == 2, big


def test_every_decoder_gives_the_same_tracks(result):
    t = result["tracks"]
    assert t["lines"] > 0 and t["same"] == {"thread": True, "process": True, "torchcodec": True}, t
    assert {k: v[0] for k, v in t["kinds"].items()} == {"thread": "thread", "process": "process",
                                                         "torchcodec": "torchcodec"}, t


def test_nothing_is_left_running_or_in_dev_shm(result):
    assert result["leaks"] == {"processes": [], "shm": []}, result["leaks"]
