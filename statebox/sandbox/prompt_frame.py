"""EOC-Bench's prompt frame: the last frame before the query with each `<object N>` marked.

The paper overlays its visual prompts on the last frame with SoM: one object in red,
several in red / blue / green / yellow / purple / orange (the released code adds pink),
and the instruction says which colour is which `<object N>`. statebox draws the marks
itself, on the host, into a PNG beside the plain video (`prompt_frame.png`), so the
question stays answerable without trusting anything the agent writes:
- box: a `LINE` px outline just inside [x0, y0, x1, y1) (x1/y1 exclusive);
- point: a filled disc of radius `DOT` around [x, y];
- mask: the mask's inner boundary, `LINE` px wide (mask pixels within `LINE` px, Chebyshev, of a
  pixel outside it).
Marks are painted pixel by pixel in flat colours (no anti-aliasing, no ID numbers), so
a test can find each mark at exactly the annotated pixels and nowhere else. Masks are
decoded by pycocotools (COCO compressed or uncompressed RLE, polygons); an RLE whose
size differs from the frame is resized (nearest) to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from statebox.errors import UserError
from statebox.media_input import AV_CONTAINER_OPTIONS, file_url
from statebox.schema import MaskRLE, VisualPrompt

if TYPE_CHECKING:  # PyAV is imported where a video is opened
    from av.video.frame import VideoFrame

PROMPT_FRAME_FILE = "prompt_frame.png"
LINE = 2  # outline width (px) for boxes and masks
DOT = 4  # point radius (px)
COLOURS: tuple[tuple[str, tuple[int, int, int]], ...] = (  # RGB, in the paper's order (+ the repo's pink)
    ("red", (255, 0, 0)),
    ("blue", (0, 0, 255)),
    ("green", (0, 255, 0)),
    ("yellow", (255, 255, 0)),
    ("purple", (128, 0, 128)),
    ("orange", (255, 165, 0)),
    ("pink", (255, 192, 203)),
)


@dataclass(frozen=True)
class Mark:
    """One object drawn on the frame: which `<object N>`, in which colour, as which kind of mark."""

    object: int
    colour: str
    rgb: tuple[int, int, int]
    kind: str  # box | point | mask


def choose_kind(prompt: VisualPrompt, preference: str) -> str:
    """The policy's kind when the object has it, else the first it has (box, point, mask)."""
    kinds = prompt.kinds
    if not kinds:
        raise UserError(f"visual prompt for <object {prompt.object}> has no box, point or mask")
    return preference if preference in kinds else kinds[0]


def colour_of(index: int) -> tuple[str, tuple[int, int, int]]:
    if index >= len(COLOURS):
        raise UserError(f"<object {index}>: EOC-Bench prompt colours cover objects 0-{len(COLOURS) - 1} only")
    return COLOURS[index]


def decode_mask(mask: MaskRLE | list[list[float]], height: int, width: int) -> np.ndarray:
    """A boolean (height, width) array from a COCO RLE or polygons (pycocotools)."""
    # heavy-ish C extension: only EOC-Bench workspaces need it; it ships no type information
    from pycocotools import mask as coco  # type: ignore[import-untyped]

    if isinstance(mask, MaskRLE):
        h, w = mask.size
        if isinstance(mask.counts, str):
            rle = {"size": [h, w], "counts": mask.counts.encode("ascii")}
        else:  # uncompressed counts
            rle = coco.frPyObjects({"size": [h, w], "counts": list(mask.counts)}, h, w)
        try:
            decoded = coco.decode(rle)
        except Exception as exc:  # noqa: BLE001 - pycocotools raises bare exceptions on bad strings
            raise UserError(f"mask prompt is not a valid COCO RLE ({exc})") from exc
        decoded = decoded.astype(bool)
        if decoded.shape != (height, width):
            import cv2

            decoded = cv2.resize(decoded.astype(np.uint8), (width, height), interpolation=cv2.INTER_NEAREST) > 0
        return decoded
    rles = coco.frPyObjects([list(p) for p in mask], height, width)
    return coco.decode(coco.merge(rles)).astype(bool)


def mark_pixels(prompt: VisualPrompt, kind: str, height: int, width: int) -> np.ndarray:
    """The boolean (height, width) set of pixels the mark of `kind` paints."""
    out = np.zeros((height, width), dtype=bool)
    if kind == "box":
        assert prompt.box is not None
        x0, y0, x1, y1 = (int(round(v)) for v in prompt.box)
        x0, y0 = max(0, x0), max(0, y0)
        x1, y1 = min(width, x1), min(height, y1)
        if x1 <= x0 or y1 <= y0:
            return out
        out[y0:y1, x0:x1] = True
        inner = (slice(y0 + LINE, max(y0 + LINE, y1 - LINE)), slice(x0 + LINE, max(x0 + LINE, x1 - LINE)))
        out[inner] = False
        return out
    if kind == "point":
        assert prompt.point is not None
        cx, cy = prompt.point
        ys, xs = np.ogrid[:height, :width]
        return (xs - cx) ** 2 + (ys - cy) ** 2 <= DOT**2
    assert prompt.mask is not None
    import cv2

    filled = decode_mask(prompt.mask, height, width).astype(np.uint8)
    # a pixel stays in the erosion when every pixel within LINE (Chebyshev) is in the mask
    eroded = cv2.erode(filled, np.ones((2 * LINE + 1, 2 * LINE + 1), np.uint8), borderType=cv2.BORDER_CONSTANT,
                       borderValue=0)
    return (filled > 0) & (eroded == 0)


def marks_for(prompts: list[VisualPrompt], preference: str) -> list[Mark]:
    """Which colour and kind of mark each object gets (the legend), in object order."""
    marks = []
    for prompt in sorted(prompts, key=lambda p: p.object):
        name, rgb = colour_of(prompt.object)
        marks.append(Mark(object=prompt.object, colour=name, rgb=rgb, kind=choose_kind(prompt, preference)))
    return marks


def draw_prompts(frame_rgb: np.ndarray, prompts: list[VisualPrompt], preference: str) -> tuple[np.ndarray, list[Mark]]:
    """A copy of the frame with every prompt painted in its object's colour, and the legend."""
    image = frame_rgb.copy()
    height, width = image.shape[:2]
    marks = marks_for(prompts, preference)
    by_object = {p.object: p for p in prompts}
    for mark in marks:
        image[mark_pixels(by_object[mark.object], mark.kind, height, width)] = mark.rgb
    return image, marks


def tail_frames(video: Path) -> Iterator[VideoFrame]:
    """The frames of a video's last ~3 seconds: a seek near the end, then decode, so finding the
    last frame (or its time) never decodes a whole long video."""
    import av

    with av.open(file_url(video), container_options=AV_CONTAINER_OPTIONS) as container:
        stream = container.streams.video[0]
        duration = None
        if stream.duration is not None and stream.time_base is not None:
            duration = float(stream.duration * stream.time_base)
        elif container.duration is not None:
            duration = container.duration / 1e6
        if duration and duration > 3 and stream.time_base is not None:
            container.seek(int((duration - 3) / stream.time_base), stream=stream, backward=True, any_frame=False)
        yield from container.decode(stream)


def last_frame(video: Path) -> np.ndarray:
    """The last decodable frame (RGB) of a video: the frame just before the query time of a cut copy."""
    best = None
    best_time = None
    for frame in tail_frames(video):
        t = frame.time if frame.time is not None else 0.0
        if best_time is None or t >= best_time:
            best, best_time = frame, t
    if best is None:
        raise UserError(f"{video}: no decodable video frame for the prompt frame")
    return best.to_ndarray(format="rgb24")


def encode_png(image_rgb: np.ndarray) -> bytes:
    """PNG bytes with no text chunks (nothing but pixels, for the leak gate)."""
    import cv2

    ok, data = cv2.imencode(".png", np.ascontiguousarray(image_rgb[:, :, ::-1]))
    if not ok:
        raise UserError("could not encode the prompt frame as PNG")
    return data.tobytes()


def legend(marks: list[Mark], where: str = f"saved as {PROMPT_FRAME_FILE} in this folder") -> str:
    """The paper's system-prompt sentence, naming where the marked frame is and each mark's colour and kind."""
    parts = "; ".join(f"<object {m.object}>: {m.colour} ({m.kind})" for m in marks)
    return f"I have overlaid the visual prompts on the last frame of the video, {where}: {parts}."
