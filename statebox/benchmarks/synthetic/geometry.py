"""World geometry for the 2.5D renderer: a pinhole camera and convex primitives.

World axes: x to the right, y forward (away from the default camera), z up; the
ground is the plane z = 0. Every solid is a convex polyhedron (boxes, hexagonal
bolt heads and cups are all convex), so back-face culling alone orders the faces
of one solid and its silhouette is the convex hull of its projected vertices;
spheres are handled analytically. Convexity is what makes the per-object visible
fraction exact and cheap, which the ground truth depends on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

NEAR = 0.05  # metres: faces with a vertex nearer than this to the camera plane are skipped


def dot3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dot product over the last axis (size 3) written as plain multiplies and adds.

    numpy's `@`/`dot`/`einsum` hand small products to BLAS kernels whose FMA and
    alignment-dependent paths can change the last bit between processes; a last-bit
    change can move a polygon edge by a pixel and break "same seed, same frames".
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    length = np.sqrt(dot3(v, v))
    return v / np.where(length > 0, length, 1.0)[..., None] if v.ndim > 1 else v / (float(length) or 1.0)


@dataclass(frozen=True)
class Camera:
    """A pinhole camera: position, yaw about z (0 looks along +y), pitch down (radians), horizontal FOV."""

    pos: tuple[float, float, float]
    yaw: float
    pitch: float
    hfov_deg: float
    width: int
    height: int

    @property
    def focal_px(self) -> float:
        return (self.width / 2.0) / math.tan(math.radians(self.hfov_deg) / 2.0)

    def basis(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(right, up, forward) unit vectors in world coordinates."""
        cy, sy = math.cos(self.yaw), math.sin(self.yaw)
        cp, sp = math.cos(self.pitch), math.sin(self.pitch)
        forward = np.array([sy * cp, cy * cp, -sp])
        right = np.array([cy, -sy, 0.0])
        up = np.array([right[1] * forward[2] - right[2] * forward[1],
                       right[2] * forward[0] - right[0] * forward[2],
                       right[0] * forward[1] - right[1] * forward[0]])
        return right, up, forward

    def to_camera(self, points: np.ndarray) -> np.ndarray:
        """World points (n,3) -> camera coordinates (n,3): x right, y up, z depth."""
        right, up, forward = self.basis()
        rel = np.asarray(points, dtype=np.float64) - np.asarray(self.pos)
        return np.stack([dot3(rel, right), dot3(rel, up), dot3(rel, forward)], axis=-1)

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World points (n,3) -> pixel coordinates (n,2) and depths (n,)."""
        cam = self.to_camera(points)
        depth = cam[:, 2]
        safe = np.where(depth > NEAR, depth, NEAR)
        f = self.focal_px
        u = self.width / 2.0 + f * cam[:, 0] / safe
        v = self.height / 2.0 - f * cam[:, 1] / safe
        return np.stack([u, v], axis=-1), depth

    def looking_at(self, target: tuple[float, float, float]) -> "Camera":
        """The same camera re-aimed at a world point (keeps position and FOV)."""
        d = np.asarray(target, dtype=np.float64) - np.asarray(self.pos)
        yaw = math.atan2(d[0], d[1])
        pitch = math.atan2(-d[2], math.hypot(d[0], d[1]))
        return Camera(self.pos, yaw, pitch, self.hfov_deg, self.width, self.height)


def aim(pos: tuple[float, float, float], target: tuple[float, float, float], hfov_deg: float, width: int, height: int) -> Camera:
    """A camera at `pos` looking at `target`."""
    return Camera(pos, 0.0, 0.0, hfov_deg, width, height).looking_at(target)


def rot_z(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


@dataclass
class Mesh:
    """A convex polyhedron: vertices (n,3), faces as vertex-index loops ordered CCW seen from outside.

    `decals` are flat polygons lying on a face (e.g. the paint mark on a bolt head); they are
    drawn right after the solid when their normal faces the camera.
    """

    vertices: np.ndarray
    faces: list[list[int]]
    color: tuple[int, int, int]  # BGR
    gloss: float = 0.15
    decals: list[tuple[np.ndarray, tuple[int, int, int]]] = field(default_factory=list)

    def normals(self) -> np.ndarray:
        """Unit outward normal per face (computed once; meshes are rebuilt, not mutated, per frame)."""
        cached = getattr(self, "_normals", None)
        if cached is None:
            idx = np.array([f[:3] for f in self.faces])
            p0, p1, p2 = (self.vertices[idx[:, k]] for k in range(3))
            a, b = p1 - p0, p2 - p0
            n = np.stack([a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1],
                          a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2],
                          a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]], axis=-1)
            cached = unit(n)
            self._normals = cached
        return cached

    def face_centres(self) -> np.ndarray:
        cached = getattr(self, "_centres", None)
        if cached is None:
            cached = np.array([self.vertices[f].mean(axis=0) for f in self.faces])
            self._centres = cached
        return cached


@dataclass
class Sphere:
    center: tuple[float, float, float]
    radius: float
    color: tuple[int, int, int]  # BGR
    gloss: float = 0.35
    emissive: bool = False  # a lit bulb: drawn at full brightness and given a glow


Part = Mesh | Sphere


def colour3(values: Iterable[float]) -> tuple[int, int, int]:
    """A BGR colour from exactly three numbers (a numpy draw, a twin spec's JSON list)."""
    b, g, r = (int(v) for v in values)
    return b, g, r


def box_mesh(center_xy: tuple[float, float], z0: float, size: tuple[float, float, float], yaw: float,
             color: tuple[int, int, int], gloss: float = 0.12) -> Mesh:
    """An upright box standing on height z0, rotated by `yaw` about its vertical axis."""
    sx, sy, sz = size
    hx, hy = sx / 2.0, sy / 2.0
    base = np.array([[-hx, -hy, 0], [hx, -hy, 0], [hx, hy, 0], [-hx, hy, 0]], dtype=np.float64)
    c, s = math.cos(yaw), math.sin(yaw)
    rotated = np.stack([base[:, 0] * c - base[:, 1] * s, base[:, 0] * s + base[:, 1] * c, base[:, 2]], axis=-1)
    bottom = rotated + np.array([center_xy[0], center_xy[1], z0])
    top = bottom + np.array([0.0, 0.0, sz])
    vertices = np.vstack([bottom, top])
    faces = [[3, 2, 1, 0], [4, 5, 6, 7], [0, 1, 5, 4], [1, 2, 6, 5], [2, 3, 7, 6], [3, 0, 4, 7]]
    return Mesh(vertices, faces, color, gloss)


def frustum_mesh(center_xy: tuple[float, float], z0: float, r_bottom: float, r_top: float, height: float,
                 color: tuple[int, int, int], segments: int = 24, yaw: float = 0.0, gloss: float = 0.2) -> Mesh:
    """A vertical (truncated) cone or, with equal radii, a cylinder; 6 segments make a hex prism."""
    angles = yaw + np.arange(segments) * 2 * math.pi / segments
    ring = np.stack([np.cos(angles), np.sin(angles), np.zeros(segments)], axis=-1)
    cx, cy = center_xy
    bottom = ring * [r_bottom, r_bottom, 0] + [cx, cy, z0]
    top = ring * [r_top, r_top, 0] + [cx, cy, z0 + height]
    vertices = np.vstack([bottom, top])
    faces = [list(range(segments - 1, -1, -1)), list(range(segments, 2 * segments))]
    for i in range(segments):
        j = (i + 1) % segments
        faces.append([i, j, segments + j, segments + i])
    return Mesh(vertices, faces, color, gloss)


def shade(color: tuple[int, int, int], normal: np.ndarray, light: np.ndarray, view: np.ndarray,
          gloss: float, ambient: float = 0.36) -> tuple[int, int, int]:
    """Lambert + Blinn-Phong shading of a flat face; returns a BGR colour."""
    diffuse = max(0.0, float(dot3(normal, light)))
    half = unit(light + view)
    spec = gloss * max(0.0, float(dot3(normal, half))) ** 24
    k = ambient + 0.72 * diffuse
    s = 255.0 * spec

    def channel(c: int) -> int:
        return int(min(255.0, max(0.0, c * k + s)))

    return channel(color[0]), channel(color[1]), channel(color[2])
