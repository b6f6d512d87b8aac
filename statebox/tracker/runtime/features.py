"""Per-object appearance measurements taken while tracking, for programs that need pixels.

Boxes alone cannot tell which way a bolt turned, whether a lamp is lit, or whether the
red can that just came back is the one seen earlier. A program asks for a feature on a
class; `run_tracking` then measures it on each tracked object's crop in the frame it
was seen in (cheap: a few numpy operations on a small crop), and stores the value in
`TrackedObject.extra`.

- `mark_xy`: where the saturated paint mark is (image pixels, the centroid of the
  saturated bright pixels in the box); None when no mark is visible.
- `glow`: how lit the object's brightest part is: the mean of the 5% brightest pixels'
  "warm value" (max(R, G) minus B/2), high for a lit bulb, low for a grey one.
- `colour`: the median BGR colour of the saturated (or else all) pixels of the box's
  central part, for telling individuals of one class apart.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Feature = Callable[[np.ndarray, tuple[float, float, float, float]], object]


def _crop(image: np.ndarray, box: tuple[float, float, float, float], shrink: float = 0.0) -> np.ndarray:
    h, w = image.shape[:2]
    x1, y1, x2, y2 = box
    dx, dy = (x2 - x1) * shrink, (y2 - y1) * shrink
    xa, ya = max(0, int(round(x1 + dx))), max(0, int(round(y1 + dy)))
    xb, yb = min(w, int(round(x2 - dx))), min(h, int(round(y2 - dy)))
    return image[ya:yb, xa:xb]


def _saturation_value(crop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = crop.astype(np.int16)
    mx, mn = c.max(axis=2), c.min(axis=2)
    sat = np.where(mx > 0, (mx - mn) * 255 // np.maximum(mx, 1), 0)
    return sat, mx


def mark_xy(image: np.ndarray, box: tuple[float, float, float, float]) -> list[float] | None:
    crop = _crop(image, box)
    if crop.size == 0:
        return None
    sat, val = _saturation_value(crop)
    mask = (sat > 120) & (val > 120)
    if int(mask.sum()) < 3:
        return None
    ys, xs = np.nonzero(mask)
    return [round(max(0.0, box[0]) + float(xs.mean()), 2), round(max(0.0, box[1]) + float(ys.mean()), 2)]


def glow(image: np.ndarray, box: tuple[float, float, float, float]) -> float | None:
    crop = _crop(image, box)
    if crop.size == 0:
        return None
    c = crop.reshape(-1, 3).astype(np.float32)
    warm = np.maximum(c[:, 1], c[:, 2]) - c[:, 0] / 2  # BGR
    k = max(1, len(warm) // 20)
    return round(float(np.partition(warm, -k)[-k:].mean()), 2)


def colour(image: np.ndarray, box: tuple[float, float, float, float]) -> list[float] | None:
    crop = _crop(image, box, shrink=0.2)
    if crop.size == 0:
        return None
    sat, _ = _saturation_value(crop)
    pixels = crop[sat > 60] if int((sat > 60).sum()) >= 5 else crop.reshape(-1, 3)
    return [round(float(v), 1) for v in np.median(pixels, axis=0)]


FEATURES: dict[str, Feature] = {"mark_xy": mark_xy, "glow": glow, "colour": colour}
