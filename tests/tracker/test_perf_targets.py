"""perf/tracker_throughput.py: its target verdicts (GPU targets never pass off a GPU, nor the CPU one on a
GPU), and the bench it runs in the tracker image (each side in its own process; the JSON keys the script
reads)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from statebox.policies import load_policy
from statebox.sandbox.docker import ContainerSpec, Mount
from statebox.tracker import container as tc

ROOT = Path(__file__).resolve().parents[2]


def _perf():
    spec = importlib.util.spec_from_file_location("tracker_throughput", ROOT / "perf" / "tracker_throughput.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result(device: str, **kw) -> dict:
    r = {"device": device, "imgsz": 320, "streams": 1, "single_stream_ratio": 2.5,
         "median_fps": {"ultralytics_track": 100.0, "sbtracker": 250.0}, "multi_stream_fps": 250.0,
         "detector_ceiling_fps": 1000.0, "hota": {"statebox": 0.8, "ultralytics": 0.6}}
    r.update(kw)
    return r


def test_on_cpu_gpu_targets_are_unmeasured_and_the_cpu_ratio_decides():
    targets = _perf().targets
    t = targets(_result("cpu", streams=16, multi_stream_fps=99_999.0))
    assert t["cpu_single_stream_ratio_ge_2"] == "met" and t["hota_statebox_ge_ultralytics"] == "met"
    assert {k: v for k, v in t.items() if k.startswith("gpu_")} == {
        "gpu_single_stream_ge_800fps": "unmeasured", "gpu_16_streams_ge_5000fps": "unmeasured",
        "gpu_16_streams_ge_half_ceiling": "unmeasured", "gpu_per_gpu_ge_8x_ultralytics": "unmeasured"}
    assert targets(_result("cpu", single_stream_ratio=1.9))["cpu_single_stream_ratio_ge_2"] == "missed"
    assert targets(_result("cpu", hota={"statebox": 0.5, "ultralytics": 0.6}))["hota_statebox_ge_ultralytics"] == "missed"
    assert targets(_result("cpu", hota=None))["hota_statebox_ge_ultralytics"] == "unmeasured"


def test_on_a_gpu_each_target_is_checked_and_none_passes_by_default():
    targets = _perf().targets
    one = targets(_result("cuda:0"))  # 250 fps single stream, 1 stream only
    assert one["cpu_single_stream_ratio_ge_2"] == "unmeasured"
    assert one["gpu_single_stream_ge_800fps"] == "missed"
    assert one["gpu_16_streams_ge_5000fps"] == "unmeasured"  # needs --streams 16
    sixteen = targets(_result("cuda:0", streams=16, median_fps={"ultralytics_track": 100.0, "sbtracker": 900.0},
                              multi_stream_fps=6000.0, detector_ceiling_fps=10_000.0))
    assert sixteen["gpu_single_stream_ge_800fps"] == "met" and sixteen["gpu_16_streams_ge_5000fps"] == "met"
    assert sixteen["gpu_16_streams_ge_half_ceiling"] == "met" and sixteen["gpu_per_gpu_ge_8x_ultralytics"] == "met"
    short = targets(_result("cuda:0", streams=16, multi_stream_fps=4000.0, detector_ceiling_fps=10_000.0))
    assert short["gpu_16_streams_ge_5000fps"] == "missed" and short["gpu_16_streams_ge_half_ceiling"] == "missed"
    big = targets(_result("cuda:0", imgsz=640, streams=16, multi_stream_fps=4000.0, detector_ceiling_fps=6000.0))
    assert big["gpu_16_streams_ge_half_ceiling"] == "met" and big["gpu_16_streams_ge_5000fps"] == "unmeasured"


@pytest.mark.docker
def test_bench_runs_each_side_in_its_own_process(docker_engine, tracker_image, shipped_weights, tiny_suite,
                                                 writable_dir):
    """A short bench in the image (every 4th frame of one clip, one round): both sides measured, each in a
    process of its own (not the parent's), statebox's fast path in its default precision."""
    video = tiny_suite / "cube_count" / "videos" / "cube_count_main_0000.mp4"
    command = [tc.PYTHON, "-m", "sbtracker.bench", "--weights", f"{tc.MODELS_MOUNT}/{shipped_weights.name}",
               "--video", f"/videos/{video.name}", "--device", "cpu", "--rounds", "1", "--stride", "4",
               "--ceiling-seconds", "0.5"]
    spec = ContainerSpec(image=tracker_image, command=command, workspace=None, policy=load_policy("default"),
                         env=dict(tc.OFFLINE_ENV),
                         mounts=[Mount(source=video, target=f"/videos/{video.name}"),
                                 Mount(source=shipped_weights, target=f"{tc.MODELS_MOUNT}/{shipped_weights.name}"),
                                 Mount(source=writable_dir, target=tc.OUT_MOUNT, read_only=False)])
    lines: list[str] = []
    result = docker_engine.run(spec, writable_dir / "stdout.log", writable_dir / "stderr.log",
                               on_stdout_line=lines.append)
    assert result.status == "ok", (writable_dir / "stderr.log").read_text()[-3000:]
    found = [tc.parse_event_line(line) for line in "".join(lines).splitlines()]
    r = next((e for e in found if e and e.get("event") == "bench"), None)
    assert r is not None, (writable_dir / "stderr.log").read_text()[-3000:]
    pids = r["side_pids"]
    assert set(pids) == {"ultralytics", "statebox"} and len({*pids.values(), r["parent_pid"]}) == 3, r
    assert r["fast_path"] and r["precision"] in {"bf16", "fp32"} and r["peer_precision"] == "fp32", r
    assert r["rounds"]["ultralytics_track"][0]["frames"] == r["rounds"]["sbtracker"][0]["frames"] == 25, r
    assert r["rounds"]["ultralytics_track"][0]["torch_threads"] >= 1 and r["single_stream_ratio"] > 0, r
    for key in ("device", "single_stream_ratio", "streams", "multi_stream_fps", "detector_ceiling_fps", "gpu_util"):
        assert key in r, key
    assert r["device"] == "cpu" and r["gpu_util"] is None and r["streams"] == 1 and r["detector_ceiling_fps"] > 0, r
