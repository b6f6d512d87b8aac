"""How statebox opens a video someone handed over: a local file, in a known container, and nothing else.

Why: ffmpeg picks a demuxer by a file's content, not its name, and some demuxers open other files. An 81-byte
`clip.mp4` that is an HLS playlist naming `/home/alice/private.mp4` made the host's ffmpeg (Debian's 5.1 probes HLS
by content) copy that video into the sandbox as the question's video; an ffconcat list does the same with the files
beside it (PyAV's ffmpeg probes that one too). A dataset, a suite folder or an annotation file may come from anywhere,
so every host-side open of one of its videos goes through these allow-lists: the `file` protocol alone, and the
containers in `CONTAINERS` (ffmpeg's `format_whitelist`). A playlist, a concat list, an image sequence or any other
demuxer is refused, and `refused_container` names it for the one-line error.

The path is handed over as a `file:` URL (`file_url`): with the protocol allow-list a name holding a colon
(`12:30.mp4`) would otherwise be read as a protocol and refused, and a relative name starting with `-` as an option.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import cv2

# The demuxers a benchmark video comes in (ffmpeg's names; `mov` is mov/mp4/m4a/3gp, `matroska` is mkv/webm).
CONTAINERS = ("mov", "matroska", "avi", "mpegts", "mpeg", "flv", "ogg", "asf")
_WHITELIST = ",".join(CONTAINERS)

# ffmpeg/ffprobe options before `-i`, and PyAV's `container_options` for `av.open`: the same allow-lists
FFMPEG_INPUT_OPTIONS: tuple[str, ...] = ("-protocol_whitelist", "file", "-format_whitelist", _WHITELIST)
AV_CONTAINER_OPTIONS: dict[str, str] = {"protocol_whitelist": "file", "format_whitelist": _WHITELIST}
# OpenCV's FFmpeg backend reads its open options from this variable, as `key;value|key;value` (`opencv_capture`)
OPENCV_OPTIONS_VARIABLE = "OPENCV_FFMPEG_CAPTURE_OPTIONS"
OPENCV_CAPTURE_OPTIONS = f"protocol_whitelist;file|format_whitelist;{_WHITELIST}"

_NOT_ON_WHITELIST = re.compile(r"\[([\w,]+) @ [^\]]*\] Format not on whitelist")


def file_url(path: Path | str) -> str:
    """`path` as ffmpeg's `file:` URL (the one protocol allowed)."""
    return f"file:{path}"


def refused_container(stderr: str) -> str | None:
    """The demuxer ffmpeg found and the allow-list refused (`hls`, `concat`), from its error output; None if none."""
    match = _NOT_ON_WHITELIST.search(stderr)
    return match.group(1) if match else None


def refusal(path: Path | str, container: str) -> str:
    """The one line for a refused container."""
    return (f"{path}: a {container} file, not a video container statebox opens "
            f"({', '.join(CONTAINERS)}): a playlist, a list of other files or an image is refused")


def opencv_capture(path: Path | str) -> "cv2.VideoCapture":
    """`cv2.VideoCapture(path)` through the FFmpeg backend only (not OpenCV's image-sequence reader) under the same
    allow-lists. OpenCV takes them from the environment when a capture opens, so the variable is set first; statebox
    sets it to this value only. cv2 is imported on the first capture, as its other users do (a heavy import)."""
    import cv2

    os.environ[OPENCV_OPTIONS_VARIABLE] = OPENCV_CAPTURE_OPTIONS
    return cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
