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
    conf: float = 0.1  # ByteTrack's second stage uses detections down to this
    iou: float = 0.5  # NMS; at ultralytics' 0.7 two overlapping objects also got a merged box (measured: cube counts 0.50 -> 0.90)
    device: str = "cpu"  # "cpu" | "cuda" | "cuda:0"
    half: bool | None = None  # None = half precision exactly when on a GPU
    agnostic: bool = True  # one box per object even when two classes fire on it (the tracker votes on the class)


def available_cpus() -> int:
    """CPUs this process may really use: its affinity, capped by a cgroup CPU quota (docker --cpus)."""
    import math
    import os

    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()[:2]  # cgroup v2
        if quota != "max":
            n = min(n, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        try:  # cgroup v1
            quota = int(open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read())
            period = int(open("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read())
            if quota > 0:
                n = min(n, math.ceil(quota / period))
        except (OSError, ValueError):
            pass
    return max(1, n)


def resolve_device(requested: str) -> str:
    """`auto` -> cuda when torch sees a GPU, else cpu; an explicit cuda without a GPU is an error."""
    import torch

    if requested == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("device cuda was asked for but torch sees no GPU in this container")
    return "cuda:0" if requested == "cuda" else requested


class Detector:
    """One loaded model; `detect(images)` -> one `sv.Detections` per image.

    The fast path keeps ultralytics' own pieces (its letterbox, the fused network behind
    its AutoBackend, its non-max suppression and box rescaling) but feeds the network one
    batch tensor in channels-last memory order, which oneDNN's CPU convolutions run
    faster, and skips building `Results` objects. Anything the fast path does not cover
    (exported formats, end-to-end heads) goes through `model.predict`.
    """

    def __init__(self, config: DetectorConfig) -> None:
        import numpy as np
        import torch
        from ultralytics import YOLO

        self.config = config
        self.device = resolve_device(config.device)
        self.half = (self.device != "cpu") if config.half is None else config.half
        self.model = YOLO(config.weights, task="detect")
        self.names: dict[int, str] = dict(self.model.names)
        # One call builds the predictor: fused model on the device, in half precision on a GPU.
        self._predict([np.zeros((config.imgsz, config.imgsz, 3), np.uint8)])
        self.net = self.model.predictor.model
        self.fast = getattr(self.net, "pt", False) and not getattr(self.net, "end2end", False)
        if self.fast:
            self.net.to(memory_format=torch.channels_last)
        # On CPUs torch gets every core the container grants (ultralytics sets cores - 1, leaving
        # one for its data loader; decoding here is a light thread). This pays only with
        # OpenMP's passive waiting (OMP_WAIT_POLICY=PASSIVE, set in the image): spinning
        # OpenMP threads fight the decode thread and a busy neighbour, and measured 2 threads
        # slower than 1 that way; passive, 2 threads ran 1.55x faster than 1 on 2 cores.
        # Two batches in flight from Python threads did not scale (the GIL between small ops).
        self.workers = 1
        self.threads = available_cpus() if self.device == "cpu" else None

    def claim_threads(self) -> None:
        """Set torch's intra-op threads for this run (process-wide; ultralytics resets it on its own runs)."""
        import torch

        if self.threads and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)

    def _predict(self, images):
        return self.model.predict(
            images,
            imgsz=self.config.imgsz,
            conf=self.config.conf,
            iou=self.config.iou,
            device=self.device,
            quantize=16 if self.half else None,  # half precision on a GPU (ultralytics 8.4: `quantize`)
            agnostic_nms=self.config.agnostic,
            batch=len(images),
            verbose=False,
        )

    def detect(self, images: list["np.ndarray"]) -> list["sv.Detections"]:
        import supervision as sv

        if not self.fast:
            return [sv.Detections.from_ultralytics(r) for r in self._predict(images)]
        import numpy as np
        import torch
        from ultralytics.data.augment import LetterBox
        from ultralytics.utils import nms, ops

        same = len({im.shape for im in images}) == 1
        letterbox = LetterBox(self.config.imgsz, auto=same, stride=int(self.net.stride))
        batch = torch.from_numpy(np.stack([letterbox(image=im) for im in images])).to(self.device)
        x = batch.permute(0, 3, 1, 2).flip(1)  # NHWC BGR -> NCHW RGB
        x = (x.half() if self.half else x.float()).div_(255).contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            preds = self.net(x)
        dets = nms.non_max_suppression(preds, self.config.conf, self.config.iou, None, self.config.agnostic, max_det=300)
        out = []
        for det, im in zip(dets, images):
            if len(det) == 0:
                out.append(sv.Detections.empty())
                continue
            boxes = ops.scale_boxes(x.shape[2:], det[:, :4].clone(), im.shape)
            out.append(sv.Detections(xyxy=boxes.float().cpu().numpy(), confidence=det[:, 4].float().cpu().numpy(),
                                     class_id=det[:, 5].int().cpu().numpy()))
        return out
