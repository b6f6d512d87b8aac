"""Is this file a video a query can be asked of? One ffprobe, one clear line when not.

Without this, an audio-only file or an empty one reaches ffmpeg as `-map 0:v:0` and
comes back as ffmpeg's "add a trailing '?' to the map", and a query time past the end
of the video is cut to the whole video silently. Used up front (`statebox sandbox run`,
the runner's preflight) and by `workspace.clean_copy` to name the cause of a failure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statebox.errors import UserError
from statebox.media_input import FFMPEG_INPUT_OPTIONS, file_url, refusal, refused_container

# A query time may overshoot the probed duration by this much (annotation rounding,
# container vs stream duration) before it counts as past the end.
END_TOLERANCE_S = 0.5


# The most pixels a frame of a query's video may have: 8K UHD (7680x4320). Why a cap: the host decodes the video's
# tail (the last frame's time, EOC-Bench's prompt frame) and may re-encode it (a streaming cut), and a few hundred bytes
# of H.264 can declare 16384x16384 frames (400 MB each); no benchmark video comes near 8K.
MAX_FRAME_PIXELS = 7680 * 4320


def _dimension(raw: object) -> int:
    """A stream's width or height as ffprobe gives it (0 where it gives none)."""
    return raw if isinstance(raw, int) and raw > 0 else 0


class VideoError(UserError):
    """The file is not a usable video (empty, no video stream, unreadable)."""


@dataclass(frozen=True)
class VideoFacts:
    path: Path
    duration_s: float | None
    has_audio: bool


def _duration(info: dict[str, Any], video: dict[str, Any]) -> float | None:
    for raw in (video.get("duration"), (info.get("format") or {}).get("duration")):
        if raw is None:
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
        if value > 0:
            return value
    return None


def inspect_video(path: Path | str) -> VideoFacts:
    """Probe `path`; raise `VideoError` naming the file when it cannot be a query's video (also when it is not in a
    container `media_input` allows: a playlist or concat list that would open other files)."""
    path = Path(path)
    if not path.is_file():
        raise VideoError(f"{path}: video not found")
    if path.stat().st_size == 0:
        raise VideoError(f"{path}: empty file")
    if shutil.which("ffprobe") is None:
        raise UserError("ffprobe is not installed; install ffmpeg (apt-get install -y ffmpeg)")
    proc = subprocess.run(["ffprobe", "-v", "error", *FFMPEG_INPUT_OPTIONS, "-show_format", "-show_streams", "-of", "json",
                           file_url(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        container = refused_container(proc.stderr)
        if container is not None:
            raise VideoError(refusal(path, container))
        tail = (proc.stderr.strip().splitlines() or ["unknown format"])[-1]
        raise VideoError(f"{path}: not a readable video ({tail[:200]})")
    try:
        info = json.loads(proc.stdout or "{}")
    except ValueError:
        info = {}
    streams = info.get("streams") or []
    video = next((s for s in streams if s.get("codec_type") == "video"
                  and not (s.get("disposition") or {}).get("attached_pic")), None)
    has_audio = any(s.get("codec_type") == "audio" for s in streams)
    if video is None:
        raise VideoError(f"{path}: no video stream" + (" (audio only)" if has_audio else ""))
    if str(video.get("nb_frames", "")).strip() == "0":
        raise VideoError(f"{path}: no video frames")
    width, height = _dimension(video.get("width")), _dimension(video.get("height"))
    if width * height > MAX_FRAME_PIXELS:
        raise VideoError(f"{path}: frames of {width}x{height} pixels, more than 8K ({MAX_FRAME_PIXELS:,} pixels a frame): "
                         "not decoded on this machine")
    return VideoFacts(path=path, duration_s=_duration(info, video), has_audio=has_audio)


def check_query_time(facts: VideoFacts, query_time: float | None) -> None:
    """A query time must lie inside the video (up to `END_TOLERANCE_S`)."""
    if query_time is None or facts.duration_s is None:
        return
    if query_time > facts.duration_s + END_TOLERANCE_S:
        raise UserError(f"query time {query_time:g}s is past the end of {facts.path} ({facts.duration_s:.1f}s)")


def check_video(path: Path | str, query_time: float | None = None) -> VideoFacts:
    """`inspect_video` plus `check_query_time`: the one call for "can this query run on this file"."""
    facts = inspect_video(path)
    check_query_time(facts, query_time)
    return facts
