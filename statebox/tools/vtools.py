#!/usr/bin/env python3
"""vtools: frame-accurate video tools for agents inside the statebox sandbox.

    vtools probe  VIDEO                      duration, fps, frame count, size
    vtools frames VIDEO (--times T,.. | --fps F | --uniform N) [--resize WxH]
    vtools grid   VIDEO [selection] [--cols C] [--cell W]   contact sheet, timestamps burnt in
    vtools crop   VIDEO --box X1,Y1,X2,Y2 [selection]      zoom on a box over a time range
    vtools motion VIDEO [--fps F]                          motion energy, cuts, events
    vtools audio  VIDEO --start S --end E --out FILE.wav [--rate R] [--channels C]   audio segment as WAV

Every command prints one JSON object on stdout (errors: one line on stderr, exit 2).
Frame files are named by the presented frame's timestamp (frame_t0001.500.jpg), so a
file name alone says which moment of the video a model was shown.

Why it is built the way it is:
- It is copied into the sandbox image as /usr/local/bin/vtools, so it is one script that
  needs only numpy, opencv-python-headless, PyAV and pillow (no statebox imports).
- Frame accuracy: the packet index (demux only, no decoding) gives every frame's exact
  presentation timestamp and the keyframes. "The frame at time t" is the last frame whose
  timestamp is <= t, i.e. the frame on screen at t. Requested frames are matched by pts,
  never by counting decoded frames, so seeking cannot shift them by one.
- Speed: a target is reached by seeking to the nearest keyframe before it only when that
  keyframe lies ahead of the decoder; otherwise decoding continues sequentially. Frames
  nobody asked for that no other frame references (non-reference B-frames) are skipped by
  the decoder. Only requested frames are converted to RGB and encoded.
- Isolation: it reads only under /workspace and the current folder (symlinks resolved),
  writes only there or under the temp folder; --root replaces the allowed roots (tests).
"""

from __future__ import annotations

import argparse
import base64
import bisect
import json
import math
import os
import sys
import tempfile
import wave
from fractions import Fraction

import av
import cv2
import numpy as np

VERSION = "1"
DEFAULT_MAX_FRAMES = 2048
MAX_AUDIO_S = 1800.0  # one `vtools audio` call: at most 30 min (16 kHz mono: ~58 MB of WAV)
MAX_AUDIO_BYTES = 128 * 1024 * 1024
TIME_EPS = 1e-4  # seconds; a requested time this close below a frame's timestamp still shows that frame


class VtoolsError(Exception):
    """A problem with the request (bad path, bad option, unreadable video): one line, exit 2."""


# --------------------------------------------------------------------------- paths


def allowed_roots(roots: list[str] | None) -> list[str]:
    """Folders vtools may read from: --root values, else /workspace and the current folder."""
    if roots:
        return [os.path.realpath(r) for r in roots]
    found: list[str] = []
    if os.path.isdir("/workspace"):
        found.append(os.path.realpath("/workspace"))
    cwd = os.path.realpath(os.getcwd())
    if cwd != os.sep:
        found.append(cwd)
    return found


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def checked_input(path: str, roots: list[str]) -> str:
    real = os.path.realpath(path)
    if not _inside(real, roots):
        raise VtoolsError(f"refusing to read {path}: outside the allowed folders ({', '.join(roots) or 'none'})")
    if not os.path.isfile(real):
        raise VtoolsError(f"no such video file: {path}")
    return real


def checked_output_dir(path: str, roots: list[str]) -> str:
    real = os.path.realpath(path)
    writable = roots + [os.path.realpath(tempfile.gettempdir())]
    if not _inside(real, writable):
        raise VtoolsError(f"refusing to write to {path}: outside the allowed folders")
    os.makedirs(real, exist_ok=True)
    return real


# --------------------------------------------------------------------------- index


class VideoIndex:
    """Every frame's presentation timestamp and the keyframes, from demuxing alone."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            container = av.open(path)
        except (av.error.FFmpegError, OSError) as exc:
            raise VtoolsError(f"cannot open video {path}: {exc}") from exc
        try:
            if not container.streams.video:
                raise VtoolsError(f"{path} has no video stream")
            stream = container.streams.video[0]
            self.time_base: Fraction = stream.time_base or Fraction(1, 90000)
            self.width = stream.codec_context.width
            self.height = stream.codec_context.height
            self.codec = stream.codec_context.name
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            pts: list[int] = []
            keys: list[int] = []
            missing_pts = False
            for packet in container.demux(stream):
                if packet.size == 0 and packet.pts is None:
                    continue  # the flush packet
                if packet.pts is None:
                    missing_pts = True
                    continue
                pts.append(packet.pts)
                if packet.is_keyframe:
                    keys.append(packet.pts)
        except av.error.FFmpegError as exc:
            raise VtoolsError(f"cannot read video {path}: {exc}") from exc
        finally:
            container.close()
        if not pts:
            raise VtoolsError(f"{path} has no video frames")
        self.exact = not missing_pts  # False: timestamps come from decoding (rare raw streams)
        self.pts = sorted(set(pts))
        self.keys = sorted(set(keys)) or [self.pts[0]]
        self.first_pts = self.pts[0]
        diffs = np.diff(self.pts) if len(self.pts) > 1 else np.array([])
        if rate:
            self.fps = float(rate)
        elif diffs.size:
            self.fps = 1.0 / float(np.median(diffs) * self.time_base)
        else:
            self.fps = 25.0
        self.frame_duration = float(np.median(diffs) * self.time_base) if diffs.size else 1.0 / self.fps
        self.times = [float((p - self.first_pts) * self.time_base) for p in self.pts]

    @property
    def frame_count(self) -> int:
        return len(self.pts)

    @property
    def last_time(self) -> float:
        return self.times[-1]

    @property
    def duration(self) -> float:
        return self.last_time + self.frame_duration

    def index_at(self, t: float) -> int:
        """The frame on screen at time t (clamped to the video)."""
        i = bisect.bisect_right(self.times, t + TIME_EPS) - 1
        return min(max(i, 0), self.frame_count - 1)

    def keyframe_for(self, pts: int) -> int:
        i = bisect.bisect_right(self.keys, pts) - 1
        return self.keys[max(i, 0)]


# --------------------------------------------------------------------------- selection


def parse_times(text: str) -> list[float]:
    try:
        return [float(x) for x in text.replace(" ", "").split(",") if x != ""]
    except ValueError as exc:
        raise VtoolsError(f"--times must be comma-separated seconds, got {text!r}") from exc


def select_frames(index: VideoIndex, args: argparse.Namespace, default_uniform: int | None = None) -> list[dict]:
    """Turn --times / --fps / --uniform (within --start/--end) into requested frames, in time order."""
    start = max(0.0, args.start if args.start is not None else 0.0)
    end = index.last_time if args.end is None else min(args.end, index.last_time)
    if end < start:
        raise VtoolsError(f"empty time range: start {start} > end {end} (video ends at {index.last_time:.3f}s)")
    modes = [m for m in ("times", "fps", "uniform") if getattr(args, m, None) is not None]
    if len(modes) > 1:
        raise VtoolsError("give only one of --times, --fps, --uniform")
    requests: list[tuple[float, int]] = []
    if args.times is not None:
        for t in parse_times(args.times):
            if t < 0:
                raise VtoolsError(f"negative time {t}")
            requests.append((t, index.index_at(min(t, end) if args.end is not None else t)))
    elif args.fps is not None:
        if args.fps <= 0:
            raise VtoolsError("--fps must be > 0")
        n = int(math.floor((end - start) * args.fps + 1e-6)) + 1
        for k in range(n):
            t = start + k / args.fps
            requests.append((round(t, 6), index.index_at(t)))
    else:
        count = args.uniform if args.uniform is not None else default_uniform
        if count is None:
            raise VtoolsError("say which frames: --times T1,T2 | --fps F | --uniform N")
        if count <= 0:
            raise VtoolsError("--uniform must be > 0")
        first, last = index.index_at(start), index.index_at(end)
        # lmms-eval's sampler: linspace over frame indices, truncated to int.
        for i in np.linspace(first, last, count).astype(int).tolist():
            requests.append((index.times[i], i))
    limit = getattr(args, "max_frames", DEFAULT_MAX_FRAMES)
    if len({i for _, i in requests}) > limit:
        raise VtoolsError(f"{len(requests)} frames requested, more than --max-frames {limit}")
    requests.sort(key=lambda r: (r[1], r[0]))
    return [
        {"requested": r, "index": i, "time": round(index.times[i], 6), "clamped": r > end + index.frame_duration}
        for r, i in requests
    ]


# --------------------------------------------------------------------------- decoding


def _open_stream(path: str):
    container = av.open(path)
    stream = container.streams.video[0]
    stream.thread_type = "AUTO"
    return container, stream


def decode_frames(index: VideoIndex, wanted: list[int], convert):
    """Yield (frame_index, convert(frame)) for each wanted frame index, in time order.

    Seeks to a target's keyframe only when that keyframe is ahead of the decoder; decodes
    sequentially otherwise; lets the decoder skip non-reference frames nobody asked for.
    """
    targets = sorted(set(wanted))
    if not targets:
        return
    if not index.exact:
        yield from _decode_sequential(index, targets, convert)
        return
    pts_to_index = {index.pts[i]: i for i in targets}
    remaining = sorted(pts_to_index)
    container, stream = _open_stream(index.path)
    cc = stream.codec_context
    try:
        can_skip = True
        try:
            cc.skip_frame = "DEFAULT"
        except (AttributeError, ValueError, TypeError):
            can_skip = False
        current_key: int | None = None
        missed: list[int] = []
        cursor = 0  # position in `remaining`
        while cursor < len(remaining):
            goal_key = index.keyframe_for(remaining[cursor])
            if current_key is None or goal_key > current_key:
                container.seek(goal_key, stream=stream, backward=True, any_frame=False)
                current_key = goal_key
            jumped = False
            for packet in container.demux(stream):
                if packet.pts is not None and packet.is_keyframe:
                    current_key = max(current_key, packet.pts)
                if can_skip:
                    skip = packet.pts is not None and packet.pts not in pts_to_index
                    cc.skip_frame = "NONREF" if skip else "DEFAULT"
                for frame in cc.decode(packet):
                    if frame.pts in pts_to_index and cursor < len(remaining) and frame.pts >= remaining[cursor]:
                        # Frames come out in presentation order; a target passed unseen is retried below.
                        while cursor < len(remaining) and remaining[cursor] <= frame.pts:
                            if remaining[cursor] == frame.pts:
                                yield pts_to_index[frame.pts], convert(frame)
                            else:
                                missed.append(pts_to_index[remaining[cursor]])
                            cursor += 1
                if cursor >= len(remaining):
                    break
                if index.keyframe_for(remaining[cursor]) > current_key:
                    jumped = True
                    break  # the next target starts a later keyframe: seek there
            if not jumped:
                break  # all found, or end of stream (flushed inside demux) with targets left
        missing = missed + [pts_to_index[p] for p in remaining[cursor:]]
        if missing:
            container.close()
            container = None
            yield from _decode_sequential(index, missing, convert)
    finally:
        if container is not None:
            container.close()


def _decode_sequential(index: VideoIndex, targets: list[int], convert):
    """Fallback: decode everything once and take the frame nearest each target time."""
    want = sorted(targets)
    container, stream = _open_stream(index.path)
    try:
        previous = None
        k = 0
        n = 0
        for frame in container.decode(stream):
            t = float(frame.time) if frame.time is not None else n / index.fps
            n += 1
            while k < len(want) and index.times[want[k]] + TIME_EPS < t:
                if previous is not None:
                    yield want[k], convert(previous)
                k += 1
            previous = frame
            while k < len(want) and abs(index.times[want[k]] - t) <= TIME_EPS:
                yield want[k], convert(frame)
                k += 1
            if k >= len(want):
                return
        while k < len(want) and previous is not None:
            yield want[k], convert(previous)
            k += 1
    finally:
        container.close()


def parse_size(text: str | None, width: int, height: int) -> tuple[int, int] | None:
    """'WxH' with -1/0 meaning 'keep the aspect ratio', or a bare 'W'."""
    if not text:
        return None
    try:
        parts = text.lower().split("x")
        w = int(parts[0]) if parts[0] else -1
        h = int(parts[1]) if len(parts) > 1 and parts[1] else -1
    except ValueError as exc:
        raise VtoolsError(f"size must look like 640x360 or 640 or 640x-1, got {text!r}") from exc
    if w <= 0 and h <= 0:
        raise VtoolsError(f"size {text!r} gives neither width nor height")
    if w <= 0:
        w = max(2, round(width * h / height))
    if h <= 0:
        h = max(2, round(height * w / width))
    return w, h


def frame_to_bgr(frame) -> np.ndarray:
    """BGR pixels of a frame; limited-range 4:2:0 (nearly every video) skips swscale's slow first call."""
    if frame.format.name == "yuv420p" and frame.width % 2 == 0 and frame.height % 2 == 0:
        return cv2.cvtColor(frame.to_ndarray(format="yuv420p"), cv2.COLOR_YUV2BGR_I420)
    return frame.to_ndarray(format="bgr24")


def to_bgr(size: tuple[int, int] | None):
    def convert(frame):
        image = frame_to_bgr(frame)
        if size is None or (image.shape[1], image.shape[0]) == size:
            return image
        shrink = size[0] <= image.shape[1] and size[1] <= image.shape[0]
        return cv2.resize(image, size, interpolation=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)

    return convert


def _luma(frame) -> np.ndarray:
    """The Y plane as an array, without colour conversion (motion only needs brightness)."""
    plane = frame.planes[0]
    rows = np.frombuffer(plane, dtype=np.uint8).reshape(-1, plane.line_size)
    return rows[: frame.height, : frame.width]


def encode_image(image: np.ndarray, fmt: str, quality: int) -> bytes:
    if fmt == "png":
        ok, buf = cv2.imencode(".png", image)
    else:
        ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise VtoolsError("could not encode an image")
    return buf.tobytes()


def stamp(t: float) -> str:
    return f"{t:08.3f}"


# --------------------------------------------------------------------------- output


def emit_images(args, selection, images: dict[int, np.ndarray], prefix: str, roots: list[str]) -> list[dict]:
    """Write (or inline) one image per distinct frame; one JSON entry per requested frame."""
    out_dir = None
    if args.out is not None or not args.inline:
        out_dir = checked_output_dir(args.out or f"vtools_{prefix}", roots)
    encoded: dict[int, tuple[str | None, str | None]] = {}
    for i, image in images.items():
        data = encode_image(image, args.format, args.quality)
        path = None
        if out_dir is not None:
            t = selection_time(selection, i)
            path = os.path.join(out_dir, f"{prefix}_t{stamp(t)}.{args.format}")
            with open(path, "wb") as fh:
                fh.write(data)
        encoded[i] = (path, base64.b64encode(data).decode("ascii") if args.inline else None)
    entries = []
    for s in selection:
        path, inline = encoded[s["index"]]
        entry = dict(s)
        if path is not None:
            entry["path"] = path
        if inline is not None:
            entry["media_type"] = "image/png" if args.format == "png" else "image/jpeg"
            entry["data"] = inline
        entries.append(entry)
    return entries


def selection_time(selection: list[dict], i: int) -> float:
    for s in selection:
        if s["index"] == i:
            return s["time"]
    raise KeyError(i)


def base_report(command: str, index: VideoIndex) -> dict:
    return {"tool": "vtools", "version": VERSION, "command": command, "video": index.path}


# --------------------------------------------------------------------------- commands


def cmd_probe(args, roots):
    index = VideoIndex(checked_input(args.video, roots))
    report = base_report("probe", index)
    report.update(
        duration=round(index.duration, 6),
        fps=round(index.fps, 6),
        frame_count=index.frame_count,
        width=index.width,
        height=index.height,
        codec=index.codec,
        first_frame_time=0.0,
        last_frame_time=round(index.last_time, 6),
        keyframes=len(index.keys),
    )
    return report


def cmd_frames(args, roots):
    index = VideoIndex(checked_input(args.video, roots))
    selection = select_frames(index, args)
    size = parse_size(args.resize, index.width, index.height)
    if size is None and args.max_side and max(index.width, index.height) > args.max_side:
        ratio = args.max_side / max(index.width, index.height)
        size = (max(2, round(index.width * ratio)), max(2, round(index.height * ratio)))
    images = dict(decode_frames(index, [s["index"] for s in selection], to_bgr(size)))
    report = base_report("frames", index)
    frames = emit_images(args, selection, images, "frame", roots)
    report.update(
        fps=round(index.fps, 6),
        duration=round(index.duration, 6),
        size=list(size) if size else [index.width, index.height],
        decoded_times=sorted({s["time"] for s in selection}),
        frames=frames,
    )
    return report


def cmd_crop(args, roots):
    index = VideoIndex(checked_input(args.video, roots))
    x1, y1, x2, y2 = parse_box(args.box, index.width, index.height)
    selection = select_frames(index, args, default_uniform=8)
    if args.resize:
        size = parse_size(args.resize, x2 - x1, y2 - y1)
    else:
        size = (max(1, round((x2 - x1) * args.scale)), max(1, round((y2 - y1) * args.scale)))

    def convert(frame):
        image = frame_to_bgr(frame)[y1:y2, x1:x2]
        interp = cv2.INTER_CUBIC if size[0] > (x2 - x1) else cv2.INTER_AREA
        return cv2.resize(image, size, interpolation=interp) if size != (x2 - x1, y2 - y1) else image

    images = dict(decode_frames(index, [s["index"] for s in selection], convert))
    report = base_report("crop", index)
    report.update(
        box=[x1, y1, x2, y2],
        size=list(size),
        decoded_times=sorted({s["time"] for s in selection}),
        frames=emit_images(args, selection, images, "crop", roots),
    )
    return report


def parse_box(text: str, width: int, height: int) -> tuple[int, int, int, int]:
    """x1,y1,x2,y2 in pixels, or as fractions of the frame when every value is in [0, 1] with a dot."""
    try:
        parts = [p.strip() for p in text.split(",")]
        values = [float(p) for p in parts]
    except ValueError as exc:
        raise VtoolsError(f"--box must be x1,y1,x2,y2, got {text!r}") from exc
    if len(values) != 4:
        raise VtoolsError(f"--box must have 4 numbers, got {text!r}")
    if all("." in p for p in parts) and all(0.0 <= v <= 1.0 for v in values):
        values = [values[0] * width, values[1] * height, values[2] * width, values[3] * height]
    x1, y1, x2, y2 = (int(round(v)) for v in values)
    x1, x2 = sorted((min(max(x1, 0), width), min(max(x2, 0), width)))
    y1, y2 = sorted((min(max(y1, 0), height), min(max(y2, 0), height)))
    if x2 - x1 < 1 or y2 - y1 < 1:
        raise VtoolsError(f"--box {text!r} is empty inside a {width}x{height} frame")
    return x1, y1, x2, y2


def cmd_grid(args, roots):
    index = VideoIndex(checked_input(args.video, roots))
    selection = select_frames(index, args, default_uniform=16)
    cell_w = args.cell
    cell_h = max(2, round(index.height * cell_w / index.width))
    images = dict(decode_frames(index, [s["index"] for s in selection], to_bgr((cell_w, cell_h))))
    cols = args.cols or max(1, math.ceil(math.sqrt(len(selection))))
    rows = math.ceil(len(selection) / cols)
    sheet = np.zeros((rows * cell_h, cols * cell_w, 3), dtype=np.uint8)
    scale = max(0.35, cell_w / 640)
    cells = []
    for k, s in enumerate(selection):
        r, c = divmod(k, cols)
        tile = images[s["index"]].copy()
        label = f"{s['time']:.2f}s"
        (tw, th), base = cv2.getTextSize(label, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        cv2.rectangle(tile, (0, 0), (tw + 6, th + base + 6), (0, 0, 0), thickness=-1)
        cv2.putText(tile, label, (3, th + 3), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), 1, cv2.LINE_AA)
        sheet[r * cell_h : (r + 1) * cell_h, c * cell_w : (c + 1) * cell_w] = tile
        cells.append({**s, "row": r, "col": c})
    data = encode_image(sheet, args.format, args.quality)
    report = base_report("grid", index)
    if args.out is not None or not args.inline:
        out = args.out or f"grid_t{stamp(selection[0]['time'])}-{stamp(selection[-1]['time'])}.{args.format}"
        out_dir = checked_output_dir(os.path.dirname(os.path.abspath(out)), roots)
        path = os.path.join(out_dir, os.path.basename(out))
        with open(path, "wb") as fh:
            fh.write(data)
        report["path"] = path
    if args.inline:
        report["media_type"] = "image/png" if args.format == "png" else "image/jpeg"
        report["data"] = base64.b64encode(data).decode("ascii")
    report.update(
        cols=cols,
        rows=rows,
        cell=[cell_w, cell_h],
        decoded_times=sorted({s["time"] for s in selection}),
        frames=cells,
    )
    return report


def cmd_motion(args, roots):
    """Motion energy between consecutive sampled frames, shot cuts, and high-motion events."""
    index = VideoIndex(checked_input(args.video, roots))
    if args.fps is None and args.times is None and args.uniform is None:
        args.fps = index.fps  # every frame
    selection = select_frames(index, args)
    small_w = 160
    small_h = max(2, round(index.height * small_w / index.width))

    def convert(frame):
        if frame.format.name in ("yuv420p", "yuvj420p", "yuv422p", "yuv444p", "gray"):
            luma = frame.to_ndarray(format="gray") if frame.format.name == "gray" else _luma(frame)
        else:
            luma = frame.to_ndarray(format="gray")
        return cv2.resize(luma, (small_w, small_h), interpolation=cv2.INTER_AREA)

    frames = dict(decode_frames(index, [s["index"] for s in selection], convert))
    order = sorted(frames)
    times = [round(index.times[i], 6) for i in order]
    energy = [0.0]
    hist_change = [0.0]
    previous = None
    prev_hist = None
    for i in order:
        gray = frames[i].astype(np.int16)
        hist = cv2.calcHist([frames[i]], [0], None, [32], [0, 256]).ravel()
        hist /= max(hist.sum(), 1.0)
        if previous is not None:
            energy.append(float(np.abs(gray - previous).mean() / 255.0))
            hist_change.append(float(0.5 * np.abs(hist - prev_hist).sum()))
        previous, prev_hist = gray, hist
    cuts = [times[k] for k in range(1, len(times)) if hist_change[k] >= args.cut_threshold]
    values = np.array(energy[1:]) if len(energy) > 1 else np.array([0.0])
    threshold = args.threshold
    if threshold is None:
        threshold = float(np.median(values) + 3.0 * (np.median(np.abs(values - np.median(values))) * 1.4826 + 1e-3))
    events = []
    start = None
    for k in range(1, len(times)):
        active = energy[k] >= threshold and times[k] not in cuts
        if active and start is None:
            start = k
        if (not active or k == len(times) - 1) and start is not None:
            stop = k if active else k - 1
            peak = max(range(start, stop + 1), key=lambda j: energy[j])
            events.append(
                {"start": times[start - 1], "end": times[stop], "peak_time": times[peak], "peak": round(energy[peak], 5)}
            )
            start = None
    report = base_report("motion", index)
    report.update(
        sample_fps=round(args.fps, 6) if args.fps else None,
        threshold=round(threshold, 5),
        times=times,
        energy=[round(e, 5) for e in energy],
        cuts=cuts,
        events=events,
        decoded_times=times,
    )
    return report


def checked_output_file(path: str, roots: list[str], suffix: str) -> str:
    """A new file's path inside the allowed folders; the name must end with `suffix`."""
    if not path.lower().endswith(suffix):
        raise VtoolsError(f"--out must name a {suffix} file, got {path}")
    folder = checked_output_dir(os.path.dirname(path) or ".", roots)
    return os.path.join(folder, os.path.basename(path))


def cmd_audio(args, roots):
    """[start, end) of the first audio track, resampled to `rate` Hz and `channels`, as 16-bit WAV."""
    video = checked_input(args.video, roots)
    start, end = float(args.start), float(args.end)
    if not (math.isfinite(start) and math.isfinite(end)) or start < 0 or end <= start:
        raise VtoolsError(f"need 0 <= --start < --end, got {start:g}..{end:g}")
    limit = min(args.max_seconds, MAX_AUDIO_S)
    if end - start > limit:
        raise VtoolsError(f"segment of {end - start:g} s is longer than the limit of {limit:g} s (--max-seconds)")
    if not 1000 <= args.rate <= 96000 or args.channels not in (1, 2):
        raise VtoolsError("--rate must be 1000-96000 Hz and --channels 1 or 2")
    expected = int((end - start) * args.rate) * args.channels * 2
    if expected > MAX_AUDIO_BYTES:
        raise VtoolsError(f"the WAV would be {expected} bytes, over the {MAX_AUDIO_BYTES} byte limit")
    out = checked_output_file(args.out, roots, ".wav")
    layout = "mono" if args.channels == 1 else "stereo"
    chunks: list[np.ndarray] = []
    first_time = None
    with av.open(video) as container:
        if not container.streams.audio:
            raise VtoolsError(f"{args.video} has no audio track")
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="s16", layout=layout, rate=args.rate)
        if start > 1.0 and stream.time_base is not None:
            container.seek(int((start - 1.0) / stream.time_base), stream=stream, backward=True)
        for frame in container.decode(stream):
            t = float(frame.time) if frame.time is not None else 0.0
            if t >= end:
                break
            if t + frame.samples / frame.sample_rate <= start:
                continue
            if first_time is None:
                first_time = t
            for piece in resampler.resample(frame):
                chunks.append(piece.to_ndarray().reshape(-1))
        for piece in resampler.resample(None):
            chunks.append(piece.to_ndarray().reshape(-1))
    samples = np.concatenate(chunks).astype("<i2") if chunks else np.zeros(0, "<i2")
    first_time = start if first_time is None else first_time
    lo = max(0, int(round((start - first_time) * args.rate))) * args.channels
    hi = max(lo, int(round((end - first_time) * args.rate)) * args.channels)
    samples = samples[lo:hi]
    try:  # never through a planted link
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise VtoolsError(f"cannot write {args.out}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as handle, wave.open(handle, "wb") as wav:
        wav.setnchannels(args.channels)
        wav.setsampwidth(2)
        wav.setframerate(args.rate)
        wav.writeframes(samples.tobytes())
    n = len(samples) // args.channels
    return {"tool": "vtools", "version": VERSION, "command": "audio", "video": video, "out": out,
            "start": start, "end": round(start + n / args.rate, 6), "rate": args.rate, "channels": args.channels,
            "samples": n, "duration": round(n / args.rate, 6)}


# --------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vtools", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"vtools {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, images=True, select=True):
        p.add_argument("video", help="video file (under /workspace or the current folder)")
        p.add_argument("--root", action="append", help="allowed folder (replaces the defaults; repeatable)")
        if select:
            p.add_argument("--times", help="comma-separated seconds, e.g. 1.0,2.5")
            p.add_argument("--fps", type=float, help="frames per second over [start, end]")
            p.add_argument("--uniform", type=int, help="N frames spread uniformly over [start, end]")
            p.add_argument("--start", type=float, help="range start (s)")
            p.add_argument("--end", type=float, help="range end (s); no frame after it is returned")
            p.add_argument("--max-frames", type=int, default=DEFAULT_MAX_FRAMES)
        if images:
            p.add_argument("--out", help="output folder (file for grid); default ./vtools_<cmd>")
            p.add_argument("--format", choices=["jpg", "png"], default="jpg")
            p.add_argument("--quality", type=int, default=90, help="JPEG quality")
            p.add_argument("--inline", action="store_true", help="put base64 images in the JSON (no files unless --out)")

    common(sub.add_parser("probe", help="duration, fps, frame count, size"), images=False, select=False)
    p = sub.add_parser("frames", help="decode frames at times / an fps / N uniform")
    common(p)
    p.add_argument("--resize", help="WxH (use -1 to keep the aspect ratio)")
    p.add_argument("--max-side", type=int, help="shrink (never enlarge) so the longer side is at most this")
    p = sub.add_parser("grid", help="contact sheet with timestamps burnt in")
    common(p)
    p.add_argument("--cols", type=int)
    p.add_argument("--cell", type=int, default=320, help="cell width in pixels")
    p = sub.add_parser("crop", help="a box over a time range, zoomed")
    common(p)
    p.add_argument("--box", required=True, help="x1,y1,x2,y2 in pixels (or fractions 0.0-1.0)")
    p.add_argument("--scale", type=float, default=2.0, help="zoom factor (ignored with --resize)")
    p.add_argument("--resize", help="WxH of the output crop")
    p = sub.add_parser("motion", help="per-frame motion energy, cuts and events")
    common(p, images=False)
    p.add_argument("--threshold", type=float, help="energy threshold for events (default: robust auto)")
    p.add_argument("--cut-threshold", type=float, default=0.5, help="histogram change marking a cut")
    p = sub.add_parser("audio", help="an audio segment as 16-bit WAV")
    common(p, images=False, select=False)
    p.add_argument("--start", type=float, required=True, help="segment start (s)")
    p.add_argument("--end", type=float, required=True, help="segment end (s)")
    p.add_argument("--out", required=True, help="output .wav file (under /workspace, the current folder or tmp)")
    p.add_argument("--rate", type=int, default=16000, help="sample rate (Hz)")
    p.add_argument("--channels", type=int, default=1, help="1 (mono) or 2")
    p.add_argument("--max-seconds", type=float, default=600.0, help=f"longest segment (at most {MAX_AUDIO_S:g})")
    return parser


COMMANDS = {"probe": cmd_probe, "frames": cmd_frames, "grid": cmd_grid, "crop": cmd_crop, "motion": cmd_motion,
            "audio": cmd_audio}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        roots = allowed_roots(args.root)
        report = COMMANDS[args.command](args, roots)
    except VtoolsError as exc:
        print(f"vtools: error: {exc}", file=sys.stderr)
        return 2
    except av.error.FFmpegError as exc:
        print(f"vtools: error: cannot decode {args.video}: {exc}", file=sys.stderr)
        return 2
    try:
        json.dump(report, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
        sys.stdout.flush()
    except BrokenPipeError:  # the reader stopped early (e.g. `| head`); not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
