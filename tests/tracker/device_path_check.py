"""Runs INSIDE the tracker image (torch, ultralytics): the checks behind tests/tracker/test_device_path.py.

Usage: python device_path_check.py WEIGHTS OUTDIR VIDEO [VIDEO ...]
Prints one line `RESULT <json>` with what the host test asserts on:
- `nms`: the device-side `postprocess` against ultralytics' `non_max_suppression` +
  `scale_boxes` on random raw network outputs (both on CPU tensors; max differences);
- `pre`: the torch letterbox against ultralytics' OpenCV `LetterBox` (pixel differences);
- `detect`: `Detector.detect_arrays` against `Detector.detect_reference` on every frame
  of the videos (detections matched by class and IoU; box and score differences);
- `streams`: whether each stream's tracks.jsonl from one `run_tracking_many` over all
  videos is byte-for-byte the file a single-stream `run_tracking` writes;
- `compile`: the detector under `torch.compile` (Dynamo's graph capture with the `eager`
  backend: the image has no C compiler for inductor) against the eager detector on one batch.
The detector runs in its default precision (`auto`: bf16 on a CPU that computes it natively,
else fp32), so `detect` measures that precision against the fp32 previous path.
"""

from __future__ import annotations

import io
import json
import sys

import cv2
import numpy as np
import torch
from ultralytics.data.augment import LetterBox
from ultralytics.utils import nms, ops

from sbtracker.detect import Detector, DetectorConfig, letterbox_params, postprocess, preprocess, split_rows
from sbtracker.track import run_tracking, run_tracking_many


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda r: (r[:, 2] - r[:, 0]) * (r[:, 3] - r[:, 1])  # noqa: E731
    return inter / (area(a)[:, None] + area(b)[None, :] - inter + 1e-9)


def check_nms() -> dict:
    """Random raw outputs (4 images, 3 classes, 2100 anchors) through both NMS implementations."""
    g = torch.Generator().manual_seed(0)
    b, nc, anchors = 4, 3, 2100
    xy = torch.rand(b, 2, anchors, generator=g) * 300
    wh = torch.rand(b, 2, anchors, generator=g) * 60 + 4
    cls = torch.rand(b, nc, anchors, generator=g) ** 6  # mostly low scores, some high
    raw = torch.cat((xy, wh, cls), 1)
    lb = letterbox_params(320, 480, 320)  # a 480x320 video at imgsz 320 -> 320x224 input
    worst = {"box": 0.0, "score": 0.0, "count": 0}
    for agnostic in (True, False):
        ref = nms.non_max_suppression(raw.clone(), 0.1, 0.5, None, agnostic, max_det=300)
        mine = split_rows(postprocess(raw.clone(), 0.1, 0.5, agnostic, lb), b)
        for det, (xyxy, conf, c) in zip(ref, mine):
            boxes = ops.scale_boxes((lb.out_h, lb.out_w), det[:, :4].clone(), (320, 480)).numpy()
            worst["count"] = max(worst["count"], abs(len(det) - len(xyxy)))
            if len(det) and len(det) == len(xyxy):
                o_ref = np.lexsort((boxes[:, 0], -det[:, 4].numpy()))
                o_me = np.lexsort((xyxy[:, 0], -conf))
                worst["box"] = max(worst["box"], float(np.abs(boxes[o_ref] - xyxy[o_me]).max()))
                worst["score"] = max(worst["score"], float(np.abs(det[o_ref, 4].numpy() - conf[o_me]).max()))
                worst["count"] = max(worst["count"], int((det[o_ref, 5].numpy().astype(int) != c[o_me]).sum()))
    return worst


def check_pre(frames: list[np.ndarray]) -> dict:
    h, w = frames[0].shape[:2]
    lb = letterbox_params(h, w, 320)
    ref = np.stack([LetterBox(320, auto=True, stride=32)(image=f) for f in frames])  # NHWC BGR uint8
    mine = preprocess(torch.from_numpy(np.stack(frames)), lb, "cpu", False)  # NCHW RGB 0..1
    mine = (mine.flip(1).permute(0, 2, 3, 1).numpy() * 255).round().astype(int)
    diff = np.abs(mine - ref.astype(int))
    return {"shape_ref": list(ref.shape), "shape": list(mine.shape), "max": int(diff.max()),
            "over1": float((diff > 1).mean())}


def check_detect(detector: Detector, videos: list[str]) -> dict:
    ref_n = matched = 0
    box_err, score_err = [], []
    for video in videos:
        cap = cv2.VideoCapture(video)
        frames = []
        while True:
            ok, im = cap.read()
            if not ok:
                break
            frames.append(im)
        for k in range(0, len(frames), 8):
            batch = frames[k:k + 8]
            for ref, (xyxy, conf, cls) in zip(detector.detect_reference(batch), detector.detect_arrays(batch)):
                strong = ref.confidence >= 0.2  # a box near the 0.1 threshold may cross it either way
                ref_n += int(strong.sum())
                if not strong.any() or len(xyxy) == 0:
                    continue
                m = iou(ref.xyxy[strong], xyxy)
                same_cls = ref.class_id[strong][:, None] == cls[None, :]
                m = np.where(same_cls, m, 0)
                best = m.argmax(1)
                ok = m[np.arange(len(best)), best] >= 0.9
                matched += int(ok.sum())
                box_err += list(np.abs(ref.xyxy[strong][ok] - xyxy[best[ok]]).max(1))
                score_err += list(np.abs(ref.confidence[strong][ok] - conf[best[ok]]))
    return {"precision": detector.precision, "fast_path": detector.fast, "reference": ref_n, "matched": matched, "box_max": float(max(box_err, default=0)),
            "box_p99": float(np.percentile(box_err, 99)) if box_err else 0.0,
            "score_max": float(max(score_err, default=0)), "score_mean": float(np.mean(score_err)) if score_err else 0.0}


def check_streams(detector: Detector, videos: list[str]) -> dict:
    singles = []
    for v in videos:
        sink = io.StringIO()
        run_tracking(v, detector, batch=4, sink=sink)
        singles.append(sink.getvalue())
    sinks = [io.StringIO() for _ in videos]
    results = run_tracking_many(videos, detector, batch=4, sinks=sinks)
    multi = [s.getvalue() for s in sinks]
    return {"same": [a == b for a, b in zip(singles, multi)], "lines": [a.count("\n") for a in singles],
            "objects": [sum(len(f.objects) for f in log.frames) for log, _ in results],
            "log_equals_sink": all(
                "".join(json.dumps(f.to_json()) + "\n" for f in log.frames) == m for (log, _), m in zip(results, multi))}


def check_compile(weights: str, detector: Detector, video: str) -> dict:
    """One batch through a Dynamo-captured detector and the eager one: the same detections."""
    cap = cv2.VideoCapture(video)
    frames = [cap.read()[1] for _ in range(8)]
    compiled = Detector(DetectorConfig(weights=weights, device="cpu", compile="eager"))
    mine, ref = compiled.detect_arrays(frames), detector.detect_arrays(frames)
    counts = [(len(a[0]), len(b[0])) for a, b in zip(mine, ref)]
    box = max((float(np.abs(a[0] - b[0]).max(initial=0)) for a, b in zip(mine, ref) if len(a[0]) == len(b[0])), default=0)
    score = max((float(np.abs(a[1] - b[1]).max(initial=0)) for a, b in zip(mine, ref) if len(a[0]) == len(b[0])),
                default=0)
    return {"counts": counts, "box": box, "score": score, "precision": compiled.precision,
            "compiled": type(compiled.forward).__name__}


def main() -> int:
    weights, _out, *videos = sys.argv[1:]
    torch.set_num_threads(1)
    detector = Detector(DetectorConfig(weights=weights, device="cpu"))
    cap = cv2.VideoCapture(videos[0])
    frames = [cap.read()[1] for _ in range(4)]
    result = {"nms": check_nms(), "pre": check_pre(frames), "detect": check_detect(detector, videos),
              "streams": check_streams(detector, videos), "compile": check_compile(weights, detector, videos[0])}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
