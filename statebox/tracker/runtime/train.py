"""Train a YOLO detector from a model yaml (no pretrained weights) on an exported data set.

Runs inside the tracker container with the network off. Things ultralytics would
download are avoided by construction: the model is built from its yaml (random init,
`pretrained=False`), the font is in the image, and AMP is off because ultralytics' AMP
self-check downloads a reference model on CUDA devices. Data-loader workers are 0: the
sandbox's /dev/shm is small and 2 CPU cores gain nothing from them.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any


def _metric(metrics: dict[str, Any], *names: str) -> float | None:
    for name in names:
        if name in metrics and metrics[name] is not None:
            return round(float(metrics[name]), 4)
    return None


def fine_tune_settings(freeze: int = 0, lr0: float | None = None) -> dict[str, Any]:
    """ultralytics `train` settings for a gentle fine-tune of weights that already work.

    `freeze` N keeps the first N layers (YOLOv8's backbone is layers 0-9) as they are. `lr0`
    sets the learning rate with plain SGD and no warm-up: ultralytics' default optimizer
    ("auto") ignores `lr0`, and its 3-epoch warm-up starts the biases at 0.1, which shakes a
    trained model as much as a short fine-tune teaches it (a 6-epoch fine-tune that way made
    the old families' tracks worse while every family's mAP50 went up; docs/tracker.md)."""
    settings: dict[str, Any] = {}
    if freeze:
        settings["freeze"] = freeze
    if lr0 is not None:
        settings.update(optimizer="SGD", lr0=lr0, warmup_epochs=0)
    return settings


def train(data_yaml: Path, model_yaml: str, epochs: int, imgsz: int, device: str, out_dir: Path,
          batch: int = 16, seed: int = 0, init: str | None = None, emit=print, freeze: int = 0,
          lr0: float | None = None) -> dict[str, Any]:
    """Train, copy the best weights to `out_dir/weights.pt`, and return the metrics (also in train_result.json)."""
    import torch
    import ultralytics
    from ultralytics import YOLO

    from .detect import available_cpus, resolve_device

    device = resolve_device(device)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = YOLO(model_yaml, task="detect")
    if init:  # continue from local weights (the architecture still comes from the yaml)
        model.load(init)
    started = time.perf_counter()
    epoch_times: list[float] = []
    threads_used: list[int] = []

    def on_epoch_end(trainer) -> None:
        if len(epoch_times) >= trainer.epochs:  # the final validation fires this callback once more
            return
        epoch_times.append(time.perf_counter() - started - sum(epoch_times))
        m = trainer.metrics or {}
        emit({"event": "epoch", "epoch": trainer.epoch + 1, "epochs": trainer.epochs,
              "seconds": round(epoch_times[-1], 1), "mAP50": _metric(m, "metrics/mAP50(B)")})

    def use_all_cores(trainer) -> None:
        # ultralytics leaves a core free for data-loader workers (cores - 1 torch threads);
        # with workers=0 the loading happens between steps, so training takes every granted core
        # (OMP_WAIT_POLICY=PASSIVE, set by the host, keeps idle OpenMP threads from spinning).
        if device == "cpu":
            torch.set_num_threads(available_cpus())
            threads_used.append(torch.get_num_threads())

    model.add_callback("on_fit_epoch_end", on_epoch_end)
    model.add_callback("on_train_epoch_start", use_all_cores)
    model.train(
        data=str(data_yaml), epochs=epochs, imgsz=imgsz, device=device if device != "cpu" else "cpu",
        batch=batch, workers=0, pretrained=init or False, amp=False, seed=seed, deterministic=True,
        project=str(out_dir), name="ultralytics", exist_ok=True, plots=False, verbose=False,
        patience=max(epochs, 50), **fine_tune_settings(freeze, lr0),
    )
    trainer = model.trainer
    best = Path(trainer.best) if Path(trainer.best).exists() else Path(trainer.last)
    weights = out_dir / "weights.pt"
    shutil.copyfile(best, weights)
    metrics = dict(trainer.metrics or {})
    result = {
        "weights": weights.name,
        "model": model_yaml,
        "epochs": epochs,
        "imgsz": imgsz,
        "device": device,
        "batch": batch,
        "seed": seed,
        "freeze": freeze,
        "lr0": lr0,
        "train_seconds": round(time.perf_counter() - started, 1),
        "seconds_per_epoch": round(sum(epoch_times) / len(epoch_times), 1) if epoch_times else None,
        "metrics": {
            "mAP50": _metric(metrics, "metrics/mAP50(B)"),
            "mAP50-95": _metric(metrics, "metrics/mAP50-95(B)"),
            "precision": _metric(metrics, "metrics/precision(B)"),
            "recall": _metric(metrics, "metrics/recall(B)"),
        },
        "names": {int(k): v for k, v in (YOLO(str(weights)).names or {}).items()},
        "versions": {"ultralytics": ultralytics.__version__, "torch": torch.__version__},
        "torch_threads": max(threads_used) if threads_used else torch.get_num_threads(),
        "weights_bytes": weights.stat().st_size,
    }
    (out_dir / "train_result.json").write_text(json.dumps(result, indent=2))
    return result
