"""`statebox tracker train` end to end on a few images: export, train in the sandbox, weights + card."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statebox.errors import UserError
from statebox.tracker.export import export_yolo_dataset
from statebox.tracker.training import train_detector


def test_export_writes_yolo_labels_and_keeps_videos_on_one_side(tiny_suite: Path, tmp_path: Path):
    summary = export_yolo_dataset(tiny_suite, tmp_path / "ds", every=10)
    assert summary.images["train"] > 0 and summary.images["val"] > 0
    assert set(summary.names.values()) >= {"cube", "cup", "ball", "bolt", "lamp", "block"}
    train_videos = {p.stem.rsplit("_", 1)[0] for p in (tmp_path / "ds/images/train").glob("*.jpg")}
    val_videos = {p.stem.rsplit("_", 1)[0] for p in (tmp_path / "ds/images/val").glob("*.jpg")}
    assert train_videos and val_videos and not (train_videos & val_videos)
    for label in (tmp_path / "ds/labels/train").glob("*.txt"):
        for line in label.read_text().splitlines():
            cls, *xywh = line.split()
            assert 0 <= int(cls) < len(summary.names) and all(0 <= float(v) <= 1 for v in xywh)
    assert "names:" in (tmp_path / "ds/data.yaml").read_text()


def test_export_refuses_a_folder_that_is_not_a_suite(tmp_path: Path):
    with pytest.raises(UserError, match="not a generated suite"):
        export_yolo_dataset(tmp_path, tmp_path / "ds")


@pytest.mark.docker
def test_one_epoch_training_in_the_sandbox_writes_weights_and_card(docker_engine, tracker_image, tiny_suite, tmp_path):
    card = train_detector(tiny_suite, tmp_path / "train", epochs=1, imgsz=160, every=25, batch=8,
                          families=["cube_count"], engine=docker_engine, progress=False)
    weights = Path(card.weights_path)
    assert weights.is_file() and weights.stat().st_size == card.bytes and card.bytes < 10_000_000
    saved = json.loads(Path(card.card_path).read_text())
    assert saved["epochs"] == 1 and saved["model"] == "yolov8n.yaml" and saved["device"] == "cpu"
    assert set(saved["metrics"]) == {"mAP50", "mAP50-95", "precision", "recall"}
    assert saved["data"]["images"]["train"] >= 8 and saved["names"] == {"0": "cube"}
    assert saved["versions"]["ultralytics"] == "8.4.190"
    # network none, and the guard saw no attempt from ultralytics (hub, fonts, downloads, pip)
    assert saved["network_attempts"] == 0
    assert not (tmp_path / "train/run/network.jsonl").exists()


def test_brief_appearances_are_exported_at_least_per_object_times():
    from statebox.tracker.export import _frames_to_export

    # object 1 visible in every frame, object 2 only in frames 41..45 (between the 20-frame samples)
    rows = {f: [{"id": 1, "box": [0, 0, 5, 5], "visible": 1.0}] for f in range(100)}
    for f in range(41, 46):
        rows[f].append({"id": 2, "box": [5, 5, 9, 9], "visible": 0.9})
    chosen = _frames_to_export(rows, every=20, min_visible=0.25, per_object=3)
    assert {0, 20, 40, 60, 80} <= chosen
    assert len(chosen & set(range(41, 46))) == 3


FROZEN_CHECK = """
import json, sys
from ultralytics import YOLO
before = dict(YOLO(sys.argv[1]).model.named_parameters())
after = dict(YOLO(sys.argv[2]).model.named_parameters())
def layer(name):
    return int(name.split(".")[1])
same = lambda k: k in after and after[k].shape == before[k].shape and bool((after[k] == before[k]).all())
backbone = [k for k in before if layer(k) < 10]
rest = [k for k in before if layer(k) >= 10]
print(json.dumps({"backbone": len(backbone), "backbone_changed": [k for k in backbone if not same(k)],
                  "rest_changed": sum(1 for k in rest if not same(k))}))
"""


@pytest.mark.docker
def test_a_gentle_fine_tune_keeps_the_frozen_backbone(docker_engine, tracker_image, tiny_suite, shipped_weights, tmp_path):
    """`--init W --freeze 10 --lr0 X`: the backbone's parameters come out exactly as they went in, the
    rest learns, and the card says how the file was made."""
    import subprocess

    from statebox.tracker import container as tc

    card = train_detector(tiny_suite, tmp_path / "ft", epochs=1, imgsz=160, every=25, batch=8, families=["cube_count"],
                          init=shipped_weights, freeze=10, lr0=0.002, engine=docker_engine, progress=False)
    saved = json.loads(Path(card.card_path).read_text())
    assert (saved["freeze"], saved["lr0"]) == (10, 0.002)
    assert saved["init"].startswith(f"{shipped_weights.name} sha256:") and saved["network_attempts"] == 0
    env = [arg for k, v in tc.OFFLINE_ENV.items() for arg in ("-e", f"{k}={v}")]
    out = subprocess.run(["docker", "run", "--rm", "--network", "none", *env,
                          "-v", f"{shipped_weights}:/w/before.pt:ro", "-v", f"{card.weights_path}:/w/after.pt:ro",
                          tracker_image, tc.PYTHON, "-c", FROZEN_CHECK, "/w/before.pt", "/w/after.pt"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["backbone"] > 0 and report["backbone_changed"] == []
    assert report["rest_changed"] > 0


def test_fine_tune_settings_are_sgd_without_warm_up():
    from statebox.tracker.runtime.train import fine_tune_settings

    assert fine_tune_settings() == {}
    assert fine_tune_settings(10, 0.002) == {"freeze": 10, "optimizer": "SGD", "lr0": 0.002, "warmup_epochs": 0}
    with pytest.raises(UserError, match="--lr0"):
        train_detector(Path("."), Path("."), lr0=0.0)
