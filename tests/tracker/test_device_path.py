"""The device-side detection path and many streams per process, run on CPU tensors in the tracker image.

The same functions run on a GPU with `device` set to cuda; here they must (a) reproduce
ultralytics' NMS + box rescaling exactly, (b) letterbox within one intensity level of
ultralytics' OpenCV letterbox, (c) give the previous path's detections on every frame of
three suite videos (boxes and scores to a tolerance, in the default precision: bf16 on a CPU
that computes it natively), (d) track three videos in one multi-stream run with each stream's
tracks.jsonl byte-for-byte the single-stream file, and (e) detect the same under torch.compile.
The checks themselves live in device_path_check.py (it imports torch, so it runs in the image).
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


@pytest.fixture(scope="module")
def device_result(docker_engine, tracker_image, shipped_weights, tiny_suite) -> dict:
    from statebox.sandbox.workspace import limited_folder

    with limited_folder(256) as folder:
        return _run_checks(docker_engine, tracker_image, shipped_weights, tiny_suite, folder.path)


def _run_checks(docker_engine, tracker_image, shipped_weights, tiny_suite, writable_dir: Path) -> dict:
    videos = [tiny_suite / "cube_count" / "videos" / "cube_count_main_0000.mp4",
              tiny_suite / "cube_count" / "videos" / "cube_count_control_0001.mp4",
              tiny_suite / "streaming_count" / "videos" / "streaming_count_0000.mp4"]
    mounts = [Mount(source=v, target=f"/videos/{v.name}") for v in videos]
    mounts += [Mount(source=HERE / "device_path_check.py", target="/checks/device_path_check.py"),
               Mount(source=shipped_weights, target=f"{tc.MODELS_MOUNT}/{shipped_weights.name}"),
               Mount(source=writable_dir, target=tc.OUT_MOUNT, read_only=False)]
    command = [tc.PYTHON, "/checks/device_path_check.py", f"{tc.MODELS_MOUNT}/{shipped_weights.name}", tc.OUT_MOUNT,
               *[f"/videos/{v.name}" for v in videos]]
    spec = ContainerSpec(image=tracker_image, command=command, workspace=None, policy=load_policy("default"),
                         env=dict(tc.OFFLINE_ENV), mounts=mounts)
    lines: list[str] = []
    result = docker_engine.run(spec, writable_dir / "stdout.log", writable_dir / "stderr.log",
                               on_stdout_line=lines.append)
    assert result.status == "ok", (writable_dir / "stderr.log").read_text()[-3000:]
    found = [l for l in "".join(lines).splitlines() if l.startswith("RESULT ")]
    assert found, (writable_dir / "stderr.log").read_text()[-3000:]
    return json.loads(found[-1][len("RESULT "):])


def test_batched_device_nms_equals_ultralytics_nms(device_result):
    nms = device_result["nms"]
    assert nms["count"] == 0 and nms["box"] < 1e-3 and nms["score"] < 1e-6, nms


def test_torch_letterbox_matches_opencv_letterbox(device_result):
    pre = device_result["pre"]
    assert pre["shape"] == pre["shape_ref"] and pre["max"] <= 1 and pre["over1"] == 0.0, pre


def test_device_path_gives_the_previous_detections(device_result):
    d = device_result["detect"]
    assert d["fast_path"], d  # a .pt checkpoint takes the device-side path (it once fell back to model.predict)
    assert d["reference"] > 300, d  # the videos do have objects
    assert d["matched"] >= 0.99 * d["reference"], d
    assert d["box_p99"] < 1.5 and d["box_max"] < 4.0, d
    if d["precision"] == "fp32":
        assert d["score_max"] < 0.03, d
    else:  # bf16 features (CPUs with native bf16): scores move a little more, on average < 0.01
        assert d["precision"] == "bf16" and d["score_max"] < 0.05 and d["score_mean"] < 0.01, d


def test_compiled_detector_gives_the_eager_detections(device_result):
    c = device_result["compile"]
    assert c["compiled"] == "OptimizedModule", c  # torch.compile's wrapper really runs
    assert sum(n for n, _ in c["counts"]) > 0, c  # the batch has objects
    assert all(a == b for a, b in c["counts"]) and c["box"] < 0.5 and c["score"] < 0.01, c


def test_three_streams_in_one_run_write_the_single_stream_logs(device_result):
    s = device_result["streams"]
    assert s["same"] == [True, True, True], s
    assert all(n > 0 for n in s["lines"]) and all(n > 0 for n in s["objects"]), s
    assert s["log_equals_sink"], s
