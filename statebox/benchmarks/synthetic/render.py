"""The shared 2.5D OpenCV renderer: shaded solids, soft shadows, painter's order, exact visibility.

Why a hand-made renderer: the suite must render in seconds on a CPU with no GPU or
Blender, and must know, for every object in every frame, exactly which pixels it
owns. Each frame is drawn twice in one pass: once in colour (Lambert + specular
shading, anti-aliased edges, blurred contact shadows, emissive glow) and once into
an object-id buffer with the same painter's order. The id buffer gives each
object's visible box and its visible fraction (visible pixels / pixels of its full
silhouette, which is rasterised the same way, so a fully visible object has exactly
1.0). Those numbers are the ground truth the oracle, the validity probes and the
detector training all rely on.
"""

from __future__ import annotations

import math
import pickle
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from statebox.benchmarks.synthetic.geometry import NEAR, Camera, Mesh, Part, Sphere, dot3, shade, unit

SHIFT = 4  # sub-pixel bits for cv2 polygon fills
SCALE = 1 << SHIFT


@dataclass
class SceneObject:
    """Something in the scene. `cls` None marks scenery (occluders, plates) that gets no ground-truth rows."""

    oid: int
    cls: str | None
    parts: list[Part]
    state: dict[str, Any] = field(default_factory=dict)
    cast_shadow: bool = True
    layer: int = 0  # painter's order sorts by layer first: flat supports (plates) use -1 so they never cover what stands on them


@dataclass
class ObjectStats:
    """Per-frame ground truth for one object."""

    visible_px: int
    full_px: int
    in_frame_px: int
    box: tuple[int, int, int, int] | None  # visible pixels' box [x1, y1, x2, y2), None when unseen
    amodal_box: tuple[float, float, float, float] | None  # full silhouette box, unclipped

    @property
    def visible(self) -> float:
        return self.visible_px / self.full_px if self.full_px else 0.0

    @property
    def in_frame(self) -> float:
        return self.in_frame_px / self.full_px if self.full_px else 0.0


def _box_1d(a: np.ndarray, r: int, axis: int) -> np.ndarray:
    """Mean over a window of 2r+1 along `axis` (edges clamped), in exact integer arithmetic.

    int32 sums are exact here (a uint8 image row of at most a few thousand pixels), and
    slicing the running sum is cheaper than np.take/np.pad: this is the renderer's hot loop."""
    n = a.shape[axis]
    if axis == 0:
        padded = np.concatenate([np.repeat(a[:1], r + 1, axis=0), a, np.repeat(a[-1:], r, axis=0)], axis=0)
        c = np.cumsum(padded, axis=0, dtype=np.int32)
        return (c[2 * r + 1:2 * r + 1 + n] - c[:n]) // (2 * r + 1)
    padded = np.concatenate([np.repeat(a[:, :1], r + 1, axis=1), a, np.repeat(a[:, -1:], r, axis=1)], axis=1)
    c = np.cumsum(padded, axis=1, dtype=np.int32)
    return (c[:, 2 * r + 1:2 * r + 1 + n] - c[:, :n]) // (2 * r + 1)


def soften(mask: np.ndarray, radius: int) -> np.ndarray:
    """A Gaussian-like blur (three box passes per axis) of a uint8 mask.

    Integer-only on purpose: OpenCV's blurs take alignment-dependent SIMD paths for
    large kernels, so the same frame could round differently from run to run, and the
    suite promises identical frames for the same seed. Only the mask's non-zero box plus
    a margin of 3r+2 is blurred: three passes spread a value at most 3r pixels, so the
    crop's edges stay zero (as the whole frame's would) and the result is bit-identical
    to blurring the whole frame, at a fraction of the cost (shadows and glows are small).
    """
    r = max(1, radius // 2)
    out = np.zeros(mask.shape, np.uint8)
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return out
    cols = np.flatnonzero(mask.any(axis=0))
    h, w = mask.shape
    m = 3 * r + 2
    y0, y1 = max(0, int(rows[0]) - m), min(h, int(rows[-1]) + 1 + m)
    x0, x1 = max(0, int(cols[0]) - m), min(w, int(cols[-1]) + 1 + m)
    sub = mask[y0:y1, x0:x1].astype(np.int32)
    for _ in range(3):
        sub = _box_1d(_box_1d(sub, r, 0), r, 1)
    out[y0:y1, x0:x1] = sub
    return out


def _fixed(points: np.ndarray) -> np.ndarray:
    return np.round(points * SCALE).astype(np.int32)


def _circle(center: np.ndarray, radius: float, n: int = 32) -> np.ndarray:
    a = np.arange(n) * 2 * math.pi / n
    return np.stack([center[0] + radius * np.cos(a), center[1] + radius * np.sin(a)], axis=-1)


CACHE_SCENES = 16  # distinct scenes kept per renderer (~1 MB each)


def _part_key(part: Part) -> tuple:
    if isinstance(part, Sphere):
        return ("sphere", tuple(part.center), part.radius, tuple(part.color), part.gloss, part.emissive)
    return ("mesh", part.vertices.tobytes(), part.vertices.shape, [list(f) for f in part.faces], tuple(part.color),
            part.gloss, [(np.asarray(poly, np.float64).tobytes(), tuple(colour)) for poly, colour in part.decals])


def _scene_key(camera: Camera, objects: list[SceneObject]) -> bytes:
    """Everything a frame's pixels depend on (the object's truth `state` is not drawn), as bytes."""
    return pickle.dumps((camera, [(o.oid, o.cls, o.layer, o.cast_shadow, [_part_key(p) for p in o.parts])
                                  for o in objects]), protocol=5)


@dataclass
class Light:
    direction: tuple[float, float, float] = (-0.4, -0.42, 0.82)  # towards the light
    shadow_strength: float = 0.5
    shadow_blur: int = 11

    @property
    def vector(self) -> np.ndarray:
        return unit(np.asarray(self.direction, dtype=np.float64))


class Renderer:
    """Renders scenes of `SceneObject`s seen by a `Camera` into BGR frames plus per-object stats."""

    def __init__(self, width: int, height: int, ground: tuple[int, int, int], light: Light | None = None,
                 noise_sigma: float = 0.0, seed: int = 0) -> None:
        self.width, self.height = width, height
        self.light = light or Light()
        self.background = self._ground_image(ground)
        self._cache: OrderedDict[bytes, tuple[np.ndarray, np.ndarray, dict[int, ObjectStats]]] = OrderedDict()
        self.noise: list[np.ndarray] = []
        if noise_sigma > 0:
            rng = np.random.default_rng(seed)
            self.noise = [np.round(rng.normal(0.0, noise_sigma, (height, width, 1))).astype(np.int16)
                          for _ in range(5)]

    def _ground_image(self, ground: tuple[int, int, int]) -> np.ndarray:
        """An untextured ground with a gentle gradient and vignette: no landmarks, like CLEVR's floor."""
        h, w = self.height, self.width
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        r2 = ((xx - w / 2) / (w / 2)) ** 2 + ((yy - h / 2) / (h / 2)) ** 2
        gain = (0.92 + 0.1 * (yy / h)) * (1.0 - 0.12 * r2)
        return np.asarray(ground, dtype=np.float32)[None, None, :] * gain[..., None]

    # ---- shadows ---------------------------------------------------------------------------
    def _shadow_polygon(self, camera: Camera, part: Part) -> np.ndarray | None:
        light = self.light.vector
        if isinstance(part, Sphere):
            a = unit(np.array([light[1], -light[0], 0.0]))  # light x up
            b = np.array([light[1] * a[2] - light[2] * a[1], light[2] * a[0] - light[0] * a[2],
                          light[0] * a[1] - light[1] * a[0]])
            ang = np.arange(20) * 2 * math.pi / 20
            pts = np.asarray(part.center) + part.radius * (np.outer(np.cos(ang), a) + np.outer(np.sin(ang), b))
        else:
            pts = part.vertices
        ground = pts - np.outer(pts[:, 2] / light[2], light)
        uv, depth = camera.project(ground)
        if (depth <= NEAR).any():
            return None
        return cv2.convexHull(_fixed(uv))

    # ---- one frame -------------------------------------------------------------------------
    def render(self, camera: Camera, objects: list[SceneObject], frame_index: int = 0) -> tuple[np.ndarray, dict[int, ObjectStats]]:
        """The frame (with this frame's sensor noise) and per-object stats.

        A scene drawn before (same camera, same objects, same parts) is taken from a small
        cache instead of drawn again: rendering is a pure function of those inputs, so the
        pixels, id buffer and stats are the same bytes either way, and static stretches
        (a lamp that only switches on and off, bolts between turns) cost one render per
        distinct scene. Only the noise, which depends on the frame index, is added after."""
        key = _scene_key(camera, objects)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._render(camera, objects)
            self._cache[key] = hit
            if len(self._cache) > CACHE_SCENES:
                self._cache.pop(next(iter(self._cache)))
        else:
            self._cache.move_to_end(key)
        frame, ids, stats = hit
        self.last_ids = ids  # the object-id buffer of this frame (checks and masks read it; never written)
        if self.noise:
            noisy = frame.astype(np.int16) + self.noise[frame_index % len(self.noise)]
            frame = np.clip(noisy, 0, 255).astype(np.uint8)
        else:
            frame = frame.copy()
        return frame, dict(stats)

    def _render(self, camera: Camera, objects: list[SceneObject]) -> tuple[np.ndarray, np.ndarray, dict[int, ObjectStats]]:
        h, w = self.height, self.width
        light = self.light.vector
        cam_pos = np.asarray(camera.pos)

        shadow = np.zeros((h, w), np.uint8)
        for obj in objects:
            if not obj.cast_shadow:
                continue
            for part in obj.parts:
                poly = self._shadow_polygon(camera, part)
                if poly is not None:
                    cv2.fillConvexPoly(shadow, poly, 255, cv2.LINE_AA, SHIFT)
        k = self.light.shadow_blur | 1
        shadow = soften(shadow, k // 2)
        base = self.background * (1.0 - self.light.shadow_strength * (shadow.astype(np.float32) / 255.0))[..., None]
        glow = np.zeros((h, w), np.uint8)
        lamps: list[tuple[Sphere, np.ndarray, float]] = []
        self._ground_pools(camera, objects, base)
        frame = np.clip(base, 0, 255).astype(np.uint8)

        for obj in painter_order(camera, objects):
            for part in obj.parts:
                self._draw_part(camera, part, frame, light, cam_pos, lamps)

        for sphere, centre, radius in lamps:
            cv2.circle(glow, (int(centre[0] * SCALE), int(centre[1] * SCALE)), int(radius * 2.6 * SCALE), 255, -1,
                       cv2.LINE_AA, SHIFT)
        if lamps:
            glow = soften(glow, int(max(4.0, lamps[0][2] * 1.2)))
            tint = np.asarray(lamps[0][0].color, np.float32)
            out = frame.astype(np.float32) + (glow.astype(np.float32) / 255.0)[..., None] * tint[None, None, :] * 0.9
            frame = np.clip(out, 0, 255).astype(np.uint8)
        ids, stats = silhouettes(camera, objects, w, h)
        return frame, ids, stats

    def _ground_pools(self, camera: Camera, objects: list[SceneObject], base: np.ndarray) -> None:
        """A lit bulb brightens the ground below it (a soft pool of light)."""
        for obj in objects:
            for part in obj.parts:
                if isinstance(part, Sphere) and part.emissive:
                    cx, cy, cz = part.center
                    ang = np.arange(24) * 2 * math.pi / 24
                    r = 0.9 * cz
                    pts = np.stack([cx + r * np.cos(ang), cy + r * np.sin(ang), np.zeros(24)], axis=-1)
                    uv, depth = camera.project(pts)
                    if (depth <= NEAR).any():
                        continue
                    pool = np.zeros(base.shape[:2], np.uint8)
                    cv2.fillConvexPoly(pool, _fixed(uv), 255, cv2.LINE_AA, SHIFT)
                    weight = soften(pool, 9).astype(np.float32) / 255.0
                    base += weight[..., None] * np.asarray(part.color, np.float32)[None, None, :] * 0.35

    def _draw_part(self, camera: Camera, part: Part, frame: np.ndarray, light: np.ndarray, cam_pos: np.ndarray,
                   lamps: list) -> None:
        if isinstance(part, Sphere):
            self._draw_sphere(camera, part, frame, light, lamps)
            return
        uv, depth = camera.project(part.vertices)
        if (depth <= NEAR).any():
            return
        normals = part.normals()
        views = cam_pos[None, :] - part.face_centres()
        facing = dot3(normals, views) > 0
        for face, normal, view, front in zip(part.faces, normals, views, facing):
            if not front:
                continue
            view = view / math.sqrt(float(dot3(view, view)))
            colour = shade(part.color, normal, light, view, part.gloss)
            cv2.fillConvexPoly(frame, _fixed(uv[face]), colour, cv2.LINE_AA, SHIFT)
        for polygon, colour in part.decals:
            p = np.asarray(polygon)
            a, b = p[1] - p[0], p[2] - p[0]
            n = np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])
            if dot3(n, cam_pos - p.mean(axis=0)) <= 0:
                continue
            duv, ddepth = camera.project(p)
            if (ddepth > NEAR).all():
                cv2.fillConvexPoly(frame, _fixed(duv), colour, cv2.LINE_AA, SHIFT)

    def _draw_sphere(self, camera: Camera, s: Sphere, frame: np.ndarray, light: np.ndarray, lamps: list) -> None:
        (uv,), (depth,) = camera.project(np.asarray([s.center]))
        if depth <= NEAR + s.radius:
            return
        radius = camera.focal_px * s.radius / depth
        h, w = frame.shape[:2]
        x0, x1 = int(math.floor(uv[0] - radius - 1)), int(math.ceil(uv[0] + radius + 1))
        y0, y1 = int(math.floor(uv[1] - radius - 1)), int(math.ceil(uv[1] + radius + 1))
        cx0, cx1, cy0, cy1 = max(0, x0), min(w, x1), max(0, y0), min(h, y1)
        if cx0 < cx1 and cy0 < cy1:
            yy, xx = np.mgrid[cy0:cy1, cx0:cx1].astype(np.float32)
            nx = (xx + 0.5 - uv[0]) / radius
            ny = -(yy + 0.5 - uv[1]) / radius
            d2 = nx * nx + ny * ny
            nz = -np.sqrt(np.clip(1.0 - d2, 0.0, 1.0))
            right, up, forward = camera.basis()
            lc = np.array([dot3(light, right), dot3(light, up), dot3(light, forward)], np.float32)
            colour = np.asarray(s.color, np.float32)
            if s.emissive:
                core = np.clip(1.0 - d2, 0, 1)[..., None]
                rgb = colour * 0.85 + (255.0 - colour * 0.85) * core * 0.8
            else:
                diffuse = np.clip(nx * lc[0] + ny * lc[1] + nz * lc[2], 0, 1)
                hv = lc + np.array([0, 0, -1], np.float32)
                hv = (hv / np.sqrt(hv[0] * hv[0] + hv[1] * hv[1] + hv[2] * hv[2])).astype(np.float32)
                c = np.clip(nx * hv[0] + ny * hv[1] + nz * hv[2], 0, 1)
                c2 = c * c
                c4 = c2 * c2
                c8 = c4 * c4
                spec = s.gloss * (c8 * c8 * c8 * c4 * c2)  # c**30 by products: numpy's SIMD pow is not bit-stable
                rgb = colour * (0.38 + 0.66 * diffuse)[..., None] + 255.0 * spec[..., None]
            alpha = np.clip(radius - np.sqrt(d2) * radius + 0.5, 0, 1)[..., None]
            roi = frame[cy0:cy1, cx0:cx1].astype(np.float32)
            frame[cy0:cy1, cx0:cx1] = np.clip(roi * (1 - alpha) + np.clip(rgb, 0, 255) * alpha, 0, 255).astype(np.uint8)
        if s.emissive:
            lamps.append((s, uv, radius))


def _distance(cam_pos: np.ndarray, obj: SceneObject) -> float:
    pts = [np.asarray(p.center) if isinstance(p, Sphere) else p.vertices.mean(axis=0) for p in obj.parts]
    d = np.mean(pts, axis=0) - cam_pos
    return float(np.sqrt(dot3(d, d)))


def painter_order(camera: Camera, objects: list[SceneObject]) -> list[SceneObject]:
    """Back to front (flat supports first): the order colours and the id buffer are both drawn in."""
    cam_pos = np.asarray(camera.pos)
    return sorted(objects, key=lambda o: (o.layer, -_distance(cam_pos, o)))


def _hull(camera: Camera, part: Part) -> np.ndarray | None:
    """The part's silhouette as a fixed-point convex polygon (None when it reaches behind the near plane)."""
    if isinstance(part, Sphere):
        (uv,), (depth,) = camera.project(np.asarray([part.center]))
        if depth <= NEAR + part.radius:
            return None
        return _fixed(_circle(uv, camera.focal_px * part.radius / depth)).reshape(-1, 1, 2)
    uv, depth = camera.project(part.vertices)
    if (depth <= NEAR).any():
        return None
    return cv2.convexHull(_fixed(uv))


def silhouettes(camera: Camera, objects: list[SceneObject], width: int, height: int
                ) -> tuple[np.ndarray, dict[int, ObjectStats]]:
    """The object-id buffer and every object's stats, from geometry alone (no shading, shadows or glow).

    The renderer's truth comes from here, and so does a family's plan-time trace (clip.trace_clip):
    a family can decide what a frame shows (in view, half visible) before any pixel is drawn, and the
    rendered clip's stats are the same numbers by construction."""
    ids = np.zeros((height, width), np.int32)
    hulls: dict[int, list[np.ndarray]] = {}
    for obj in painter_order(camera, objects):
        for part in obj.parts:
            hull = _hull(camera, part)
            if hull is not None:
                cv2.fillConvexPoly(ids, hull, obj.oid, cv2.LINE_8, SHIFT)
                hulls.setdefault(obj.oid, []).append(hull)
    return ids, {obj.oid: _stats(ids, obj.oid, hulls.get(obj.oid, [])) for obj in objects}


def _stats(ids: np.ndarray, oid: int, hulls: list[np.ndarray]) -> ObjectStats:
    if not hulls:
        return ObjectStats(0, 0, 0, None, None)
    pts = np.concatenate([hh.reshape(-1, 2) for hh in hulls]) / SCALE
    ax0, ay0 = pts.min(axis=0)
    ax1, ay1 = pts.max(axis=0)
    x0, y0 = int(math.floor(ax0)) - 1, int(math.floor(ay0)) - 1
    x1, y1 = int(math.ceil(ax1)) + 2, int(math.ceil(ay1)) + 2
    local = np.zeros((y1 - y0, x1 - x0), np.uint8)
    offset = np.array([x0 * SCALE, y0 * SCALE], np.int32)
    for hull in hulls:
        cv2.fillConvexPoly(local, hull.reshape(-1, 2) - offset, 1, cv2.LINE_8, SHIFT)
    full = int(local.sum())
    h, w = ids.shape
    cx0, cy0, cx1, cy1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
    amodal = (round(float(ax0), 1), round(float(ay0), 1), round(float(ax1), 1), round(float(ay1), 1))
    if cx0 >= cx1 or cy0 >= cy1:
        return ObjectStats(0, full, 0, None, amodal)
    in_frame = int(local[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0].sum())
    mine = (ids[cy0:cy1, cx0:cx1] == oid).astype(np.uint8)
    visible = int(mine.sum())
    box = None
    if visible:
        bx, by, bw, bh = cv2.boundingRect(mine)
        box = (cx0 + bx, cy0 + by, cx0 + bx + bw, cy0 + by + bh)
    return ObjectStats(visible, max(full, visible), in_frame, box, amodal)
