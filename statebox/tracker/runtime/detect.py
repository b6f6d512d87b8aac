"""Batched YOLO detection with ultralytics, returning supervision `Detections`.

A batch of decoded frames goes through the model in one forward pass (the predictor
letterboxes, normalises, runs the network and non-max suppression). On a GPU the model
runs in half precision. The class names come from the weights, so user-supplied COCO
weights work as well as the suite's.
"""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import supervision as sv


@dataclass
class DetectorConfig:
    weights: str
    imgsz: int = 320
    conf: float = 0.25
    iou: float = 0.7
    device: str = "cpu"  # "cpu" | "cuda" | "cuda:0"
    half: bool | None = None  # None = half precision exactly when on a GPU


def resolve_device(requested: str) -> str:
    """`auto` -> cuda when torch sees a GPU, else cpu; an explicit cuda without a GPU is an error."""
    import torch

    if requested == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("device cuda was asked for but torch sees no GPU in this container")
    return "cuda:0" if requested == "cuda" else requested


class Detector:
    """One loaded model; `detect(images)` -> one `sv.Detections` per image."""

    def __init__(self, config: DetectorConfig) -> None:
        from ultralytics import YOLO

        self.config = config
        self.device = resolve_device(config.device)
        self.half = (self.device != "cpu") if config.half is None else config.half
        self.model = YOLO(config.weights, task="detect")
        self.names: dict[int, str] = dict(self.model.names)

    def detect(self, images: list["np.ndarray"]) -> list["sv.Detections"]:
        import supervision as sv

        results = self.model.predict(
            images,
            imgsz=self.config.imgsz,
            conf=self.config.conf,
            iou=self.config.iou,
            device=self.device,
            half=self.half,
            batch=len(images),
            verbose=False,
        )
        return [sv.Detections.from_ultralytics(r) for r in results]
