"""Batched YOLO detection with ultralytics' network, returning supervision `Detections`.

A batch of decoded frames (from one stream or many) goes through the model in one forward
pass. Everything around the network runs as torch ops on the chosen device (the device
is a parameter, so tests run the very same functions on CPU tensors): letterbox and
normalisation (`preprocess`), candidate filtering, NMS for the whole batch
(`torchvision.ops.batched_nms`) and mapping boxes back (`postprocess`), then one
device->host copy per batch. The previous path (ultralytics' OpenCV letterbox per image on
the host, per-image NMS, three copies per image) stays as `Detector.detect_reference` for
comparison. On a GPU the model runs in half precision. The class names come from the
weights, so user-supplied COCO weights work as well as the suite's.
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
    half: bool | None = None  # True = fp16, False = fp32; None = `precision` decides
    precision: str = "auto"  # "auto" (fp16 on a GPU, bf16 on a CPU that computes it natively, else fp32) | "fp32" | "fp16" | "bf16"
    compile: str = "off"  # torch.compile of the network: "off" | a backend or mode, see COMPILE_MODES
    agnostic: bool = True  # one box per object even when two classes fire on it (the tracker votes on the class)
    device_pre: bool = True  # letterbox, normalisation and NMS as torch ops on `device`; False = the previous host path


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
            quota_us = int(open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read())
            period_us = int(open("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read())
            if quota_us > 0:
                n = min(n, math.ceil(quota_us / period_us))
        except (OSError, ValueError):
            pass
    return max(1, n)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 in hardware (AVX512-BF16 or AMX): oneDNN's bf16 convolutions
    then run ~2.8x faster than fp32 (measured, yolov8n at batch 8); without it they are emulated, and slower."""
    try:
        flags = next((line for line in open("/proc/cpuinfo") if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def resolve_precision(config: DetectorConfig, device: str) -> str:
    """The forward pass's number format: an explicit `half` wins (old callers), then `precision`."""
    if config.half is not None:
        return "fp16" if config.half else "fp32"
    if config.precision != "auto":
        if config.precision not in {"fp32", "fp16", "bf16"}:
            raise ValueError(f"precision must be auto, fp32, fp16 or bf16, not {config.precision!r}")
        if config.precision == "fp16" and device == "cpu":
            raise ValueError("fp16 runs on a GPU; on a CPU use bf16 or fp32")
        return config.precision
    if device != "cpu":
        return "fp16"
    return "bf16" if cpu_has_native_bf16() else "fp32"


# torch.compile settings by name: (backend, mode). "inductor" and "reduce-overhead" (inductor + CUDA graphs)
# generate code and need a C compiler (inductor's CPU kernels; triton's launcher on a GPU): the tracker image
# has none. "cudagraphs" captures CUDA graphs without code generation; "aot_eager" traces the same graph and
# runs it eagerly, "eager" only captures it with Dynamo (what CI can run on a CPU without a compiler: the
# captured graph's detections are the eager ones).
COMPILE_MODES: dict[str, tuple[str, str | None]] = {
    "inductor": ("inductor", None),
    "reduce-overhead": ("inductor", "reduce-overhead"),
    "max-autotune": ("inductor", "max-autotune"),
    "cudagraphs": ("cudagraphs", None),
    "aot_eager": ("aot_eager", None),
    "eager": ("eager", None),
}


def build_forward(net, precision: str, compile: str, device: str):
    """The callable the fast path runs: ultralytics' fused network (`AutoBackend.model`, called directly:
    channels-last in, (predictions, raw) out), in `precision`, optionally under torch.compile.

    bf16 on a CPU converts a copy of the network (the fp32 one stays for `detect_reference` and
    `model.predict`) except the head's final step: the box and class branches hand their outputs
    back in fp32 and the distribution-to-box decoding (DFL, anchors, strides) runs in fp32, so a box
    edge at x=300 is not rounded to bf16's 2-pixel steps there. The backbone's features in bf16 move
    boxes by a fraction of a pixel (p99 0.3 px) and scores by 0.004 on average, 0.03 at most (tested
    against the fp32 path on three suite videos).
    """
    import copy

    import torch

    inner = net.model
    if precision == "bf16":
        head = inner.model[-1]
        if not (getattr(head, "cv2", None) and getattr(head, "cv3", None) and hasattr(head, "dfl")):
            raise ValueError(f"bf16 needs a YOLO Detect head with box/class branches, not {type(head).__name__}; "
                             "use precision fp32")
        inner = copy.deepcopy(inner).to(torch.bfloat16)
        head = inner.model[-1]
        head.dfl.float()
        to_fp32 = lambda _module, _inputs, output: output.float()  # noqa: E731
        for branch in (*head.cv2, *head.cv3):
            branch.register_forward_hook(to_fp32)
    inner = inner.to(memory_format=torch.channels_last).eval()
    if compile != "off":
        if compile not in COMPILE_MODES:
            raise ValueError(f"compile must be off or one of {', '.join(COMPILE_MODES)}, not {compile!r}")
        backend, mode = COMPILE_MODES[compile]
        if backend == "cudagraphs" and not device.startswith("cuda"):
            raise ValueError("compile=cudagraphs needs a CUDA device")
        inner = torch.compile(inner, backend=backend, mode=mode, dynamic=False)
    return inner


DTYPE_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


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
        self.precision = resolve_precision(config, self.device)
        self.half = self.precision == "fp16"  # the predictor's (and the reference path's) precision
        self.model = YOLO(config.weights, task="detect")
        self.names: dict[int, str] = dict(self.model.names)
        # One call builds the predictor: fused model on the device, in half precision on a GPU.
        self._predict([np.zeros((config.imgsz, config.imgsz, 3), np.uint8)])
        self.net = self.model.predictor.model
        # A PyTorch checkpoint (ultralytics 8.4's AutoBackend says `format == "pt"`; older ones set `pt`):
        # the fast path. Anything else (exported formats, end-to-end heads) goes through `model.predict`.
        pt = getattr(self.net, "format", None) == "pt" or getattr(self.net, "pt", False) is True
        self.fast = pt and not getattr(self.net, "end2end", False)
        if self.fast:
            self.net.to(memory_format=torch.channels_last)
            try:
                self.forward = build_forward(self.net, self.precision, config.compile, self.device)
            except ValueError:
                if not (self.precision == "bf16" and config.precision == "auto" and config.half is None):
                    raise
                self.precision = "fp32"  # auto never fails: a head bf16 cannot split runs in fp32
                self.forward = build_forward(self.net, self.precision, config.compile, self.device)
        else:  # model.predict runs it, in the predictor's precision
            self.precision = "fp16" if self.half else "fp32"
            self.forward = self.net
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
        """Detections per image: the device-side path (`detect_arrays`) unless the model needs ultralytics' own."""
        import supervision as sv

        if not self.fast:
            return [sv.Detections.from_ultralytics(r) for r in self._predict(images)]
        if not self.config.device_pre:
            return self.detect_reference(images)
        return [self.wrap(arrays) for arrays in self.detect_arrays(images)]

    @property
    def cacheable(self) -> bool:
        """Whether `detect` is `wrap(detect_arrays(...))`, so stored arrays give the same detections (detcache.py)."""
        return self.fast and self.config.device_pre

    @staticmethod
    def wrap(arrays: tuple["np.ndarray", "np.ndarray", "np.ndarray"]) -> "sv.Detections":
        """One image's (xyxy, confidence, class) arrays as the `sv.Detections` ByteTrack reads."""
        import supervision as sv

        xyxy, conf, cls = arrays
        return sv.Detections(xyxy=xyxy, confidence=conf, class_id=cls) if len(xyxy) else sv.Detections.empty()

    def detect_arrays(self, images: list["np.ndarray"]) -> list[tuple["np.ndarray", "np.ndarray", "np.ndarray"]]:
        """(xyxy float32, confidence float32, class int32) per image, all work on `self.device`.

        Images of one shape go through one forward pass (a batch may mix streams of different
        sizes: each size is letterboxed to its own minimal rectangle, as a single-stream run of
        that video would be, so a stream's detections never depend on its batch neighbours).
        """
        import numpy as np
        import torch

        groups: dict[tuple[int, ...], list[int]] = {}
        for i, im in enumerate(images):
            groups.setdefault(im.shape, []).append(i)
        out: list = [None] * len(images)
        for shape, idx in groups.items():
            h, w = shape[:2]
            lb = letterbox_params(h, w, self.config.imgsz, int(self.net.stride), auto=True)
            frames = torch.from_numpy(np.stack([images[i] for i in idx]))  # one host->device copy per group
            x = preprocess(frames, lb, self.device, self.precision)
            with torch.inference_mode():
                preds = self.forward(x)
                rows = postprocess(preds, self.config.conf, self.config.iou, self.config.agnostic, lb)
            for j, part in zip(idx, split_rows(rows, len(idx))):
                out[j] = part
        return out

    def detect_reference(self, images: list["np.ndarray"]) -> list["sv.Detections"]:
        """The previous path (ultralytics' OpenCV letterbox on the host, per-image NMS and three copies per
        image): kept to compare detections and speed with (tests, perf)."""
        import numpy as np
        import supervision as sv
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

    def forward_only(self, batch: int, shape: tuple[int, int], seconds: float = 3.0) -> float:
        """The detector-only ceiling: images/s of the bare forward pass on a ready device tensor of
        `batch` letterboxed frames of `shape` (h, w), for about `seconds` (3 passes at least); no
        decode, no pre/post-processing, no copies."""
        import time

        import torch

        self.claim_threads()
        lb = letterbox_params(shape[0], shape[1], self.config.imgsz, int(self.net.stride), auto=True)
        x = torch.rand(batch, 3, lb.out_h, lb.out_w, device=self.device)
        x = x.to(getattr(torch, DTYPE_NAMES[self.precision])).contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            self.forward(x)  # warm-up (allocations, cuDNN algorithm choice, compilation)
            _sync(self.device)
            passes, started = 0, time.perf_counter()
            while passes < 3 or time.perf_counter() - started < seconds:
                self.forward(x)
                passes += 1
                if self.device.startswith("cuda") and passes % 10 == 0:
                    _sync(self.device)
            _sync(self.device)
        return batch * passes / (time.perf_counter() - started)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


@dataclass(frozen=True)
class Letterbox:
    """ultralytics' LetterBox geometry for one frame size (same rounding, so boxes map back the same way)."""

    h: int
    w: int
    new_h: int
    new_w: int
    top: int
    bottom: int
    left: int
    right: int

    @property
    def out_h(self) -> int:
        return self.new_h + self.top + self.bottom

    @property
    def out_w(self) -> int:
        return self.new_w + self.left + self.right


def letterbox_params(h: int, w: int, imgsz: int, stride: int = 32, auto: bool = True) -> Letterbox:
    """The numbers `ultralytics.data.augment.LetterBox.get_params` computes (scale up allowed, centred)."""
    r = min(imgsz / h, imgsz / w)
    new_w, new_h = max(round(w * r), 1), max(round(h * r), 1)
    dw, dh = imgsz - new_w, imgsz - new_h
    if auto:
        dw, dh = dw % stride, dh % stride
    half_w, half_h = dw / 2, dh / 2
    return Letterbox(h, w, new_h, new_w, round(half_h - 0.1), round(half_h + 0.1), round(half_w - 0.1),
                     round(half_w + 0.1))


def preprocess(frames, lb: Letterbox, device: str, precision: str | bool = "fp32"):
    """uint8 NHWC BGR frames (a CPU tensor) -> the network's NCHW RGB input on `device`, as torch ops there.

    Resizing is bilinear with half-pixel centres and no antialiasing, to whole intensities:
    the arithmetic of OpenCV's INTER_LINEAR on uint8 images, which ultralytics' letterbox
    uses (tested: within one intensity level); the border is ultralytics' grey 114. On a CPU
    the resize runs on the uint8 channels-last frames (torch's vectorised uint8 kernel:
    measured 1.3 ms a frame against 9 ms in float32 and 4 ms for OpenCV per image); on a GPU
    in float32, rounded.
    """
    import torch
    import torch.nn.functional as F

    x = frames.to(device, non_blocking=True).permute(0, 3, 1, 2)  # NCHW view of NHWC memory: channels-last, BGR
    if (lb.new_h, lb.new_w) != (lb.h, lb.w):
        size = (lb.new_h, lb.new_w)
        if x.device.type == "cpu":
            x = F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=False)
        else:
            x = F.interpolate(x.float(), size=size, mode="bilinear", align_corners=False).round_().clamp_(0, 255)
    x = F.pad(x.flip(1).float(), (lb.left, lb.right, lb.top, lb.bottom), value=114.0).div_(255)  # RGB, 0..1
    if isinstance(precision, bool):  # the old signature: half or not
        precision = "fp16" if precision else "fp32"
    return x.to(getattr(torch, DTYPE_NAMES[precision])).contiguous(memory_format=torch.channels_last)


def postprocess(preds, conf: float, iou: float, agnostic: bool, lb: Letterbox, max_det: int = 300):
    """Raw YOLO output (b, 4 + classes, anchors) -> one float32 CPU tensor of rows
    (image, x1, y1, x2, y2, confidence, class) in original-frame pixels, sorted by image then score.

    Candidate filtering, NMS for the whole batch at once (`torchvision.ops.batched_nms`, one
    group per image, or per image and class when not agnostic), `max_det` per image and the
    letterbox undo all run on the device; the result crosses to the host in one copy.
    Equivalent to ultralytics' `non_max_suppression` (best class per box) + `scale_boxes`.
    """
    import torch
    from torchvision.ops import batched_nms

    p = preds[0] if isinstance(preds, (list, tuple)) else preds
    nc = p.shape[1] - 4
    p = p.transpose(1, 2)  # (b, anchors, 4 + nc)
    score, cls = p[..., 4:].max(-1)
    img, anchor = (score > conf).nonzero(as_tuple=True)
    xywh = p[img, anchor, :4]
    boxes = torch.cat((xywh[:, :2] - xywh[:, 2:] / 2, xywh[:, :2] + xywh[:, 2:] / 2), 1)
    score, cls = score[img, anchor], cls[img, anchor]
    keep = batched_nms(boxes, score, img if agnostic else img * nc + cls, iou)  # score-descending
    order = torch.sort(img[keep], stable=True).indices  # by image, score order kept inside each
    keep = keep[order]
    kimg = img[keep]
    if len(kimg):  # rank inside its image = position - position of the image's first row
        rank = torch.arange(len(kimg), device=kimg.device) - torch.searchsorted(kimg, kimg)
        keep = keep[rank < max_det]
    b = boxes[keep].float()
    gain_y, gain_x = lb.new_h / lb.h, lb.new_w / lb.w
    b[:, [0, 2]] = ((b[:, [0, 2]] - lb.left) / gain_x).clamp_(0, lb.w)
    b[:, [1, 3]] = ((b[:, [1, 3]] - lb.top) / gain_y).clamp_(0, lb.h)
    rows = torch.cat((img[keep, None].float(), b, score[keep, None].float(), cls[keep, None].float()), 1)
    return rows.cpu()


def split_rows(rows, n: int) -> list[tuple["np.ndarray", "np.ndarray", "np.ndarray"]]:
    """`postprocess` rows (a CPU tensor) -> (xyxy, confidence, class) numpy arrays for images 0..n-1."""
    import numpy as np

    a = rows.numpy()
    bounds = np.searchsorted(a[:, 0], np.arange(n + 1), side="left")
    return [(a[s:e, 1:5].copy(), a[s:e, 5].copy(), a[s:e, 6].astype(np.int32))
            for s, e in zip(bounds[:-1], bounds[1:])]
