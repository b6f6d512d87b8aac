"""Host-side handle on `vtools`: typed results, a time ceiling, and frame accounting hooks.

Host-side agents (mllm, video-agent, user LangGraph agents) never decode the video
themselves: every decode runs `vtools` inside the attempt's sandbox (docker exec),
so the agent process never touches the video file and the container's limits apply.
`LocalVtools` runs the same script on the host against a folder; tests use it to
exercise agent logic without Docker, and it decodes identically.

Why a time ceiling lives here: for a streaming query the workspace video is already
cut at the query time, but an agent must not even *ask* for a later moment (a request
for t=90 s on a clip cut at 60 s would silently return the last frame and mislabel
it). `VideoTools(max_time=...)` clamps every request, and drops (defensively) any
frame the decoder returns past the ceiling.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from pydantic import BaseModel, ConfigDict, Field

from statebox.errors import InfrastructureError

VTOOLS_SCRIPT = Path(__file__).with_name("vtools.py")
CONTAINER_WORKSPACE = "/workspace"
TIME_EPS = 1e-3


class VtoolsError(RuntimeError):
    """vtools refused or failed (bad option, unreadable video); the message is its stderr line."""


class VtoolsRunner(Protocol):
    """Runs `vtools ARGS` somewhere and returns its stdout."""

    def video_path(self, name: str) -> str: ...

    def run(self, args: Sequence[str], timeout_s: float = 120.0) -> str: ...


class SandboxVtools:
    """vtools inside a started sandbox (`RunningSandbox.exec`), reading /workspace."""

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox

    def video_path(self, name: str) -> str:
        return f"{CONTAINER_WORKSPACE}/{name}"

    def run(self, args: Sequence[str], timeout_s: float = 120.0) -> str:
        result = self.sandbox.exec(["vtools", *args], timeout_s=timeout_s)
        if result.timed_out:
            raise VtoolsError(f"vtools {args[0]} timed out after {timeout_s:g}s")
        if result.exit_code != 0:
            message = (result.stderr or result.stdout or "").strip().splitlines()
            if result.exit_code == 2 and message:
                raise VtoolsError(message[-1])
            raise InfrastructureError(f"vtools {args[0]} failed in the sandbox (exit {result.exit_code}): "
                                      f"{message[-1] if message else 'no output'}")
        return result.stdout


class LocalVtools:
    """vtools on the host against one folder (tests, debugging); same script, same decoding."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).resolve()

    def video_path(self, name: str) -> str:
        return str(self.root / name)

    def run(self, args: Sequence[str], timeout_s: float = 120.0) -> str:
        cmd = [sys.executable, str(VTOOLS_SCRIPT), *args, "--root", str(self.root)]
        try:
            proc = subprocess.run(cmd, cwd=self.root, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise VtoolsError(f"vtools {args[0]} timed out after {timeout_s:g}s") from exc
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            raise VtoolsError(lines[-1] if lines else f"vtools exited {proc.returncode}")
        return proc.stdout


class VideoInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")

    duration: float
    fps: float
    frame_count: int
    width: int
    height: int
    last_frame_time: float


class Frame(BaseModel):
    """One decoded frame: its presentation time, and the encoded image (base64)."""

    model_config = ConfigDict(extra="ignore")

    time: float
    index: int
    requested: float
    media_type: str = "image/jpeg"
    data: str = Field(repr=False)
    label: str = ""  # e.g. "zoom x1,y1,x2,y2" for crops


class MotionReport(BaseModel):
    model_config = ConfigDict(extra="ignore")

    times: list[float]
    energy: list[float]
    cuts: list[float]
    events: list[dict[str, Any]]
    threshold: float


def _fmt(values: Sequence[float]) -> str:
    return ",".join(f"{v:.6f}".rstrip("0").rstrip(".") if v else "0" for v in values)


class VideoTools:
    """The video of one attempt, as the agent's tools see it.

    `on_decoded(times)` is called with the presentation times of every frame vtools
    returned (frame accounting: "decoded"); what is later shown to a model is the
    agent's to record.
    """

    def __init__(
        self,
        runner: VtoolsRunner,
        video_name: str,
        *,
        max_time: float | None = None,
        max_side: int | None = 768,
        on_decoded: Callable[[list[float]], None] | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.runner = runner
        self.video = runner.video_path(video_name)
        self.max_time = max_time
        self.max_side = max_side
        self.on_decoded = on_decoded
        self.timeout_s = timeout_s
        self._info: VideoInfo | None = None

    # ---------------------------------------------------------------- basics
    def _call(self, args: list[str]) -> dict[str, Any]:
        out = self.runner.run(args, timeout_s=self.timeout_s)
        try:
            return json.loads(out.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError) as exc:
            raise VtoolsError(f"vtools {args[0]} printed no JSON: {out[:200]!r}") from exc

    def probe(self) -> VideoInfo:
        if self._info is None:
            self._info = VideoInfo.model_validate(self._call(["probe", self.video]))
        return self._info

    @property
    def end_time(self) -> float:
        """The last moment the agent may see: the query time, or the video's last frame."""
        last = self.probe().last_frame_time
        return last if self.max_time is None else min(last, self.max_time)

    def clamp(self, t: float) -> float:
        return min(max(0.0, float(t)), self.end_time)

    def _range(self, start: float | None, end: float | None) -> list[str]:
        lo = self.clamp(start) if start is not None else 0.0
        hi = self.clamp(end) if end is not None else self.end_time
        if hi < lo:
            lo, hi = hi, lo
        return ["--start", _fmt([lo]), "--end", _fmt([hi])]

    def _selection(self, times: Sequence[float] | None, fps: float | None, uniform: int | None,
                   start: float | None, end: float | None) -> list[str]:
        if times is not None:
            clamped = sorted({round(self.clamp(t), 6) for t in times})
            if not clamped:
                raise VtoolsError("no times given")
            return ["--times", _fmt(clamped), "--end", _fmt([self.end_time])]
        if fps is not None:
            return ["--fps", f"{fps:g}", *self._range(start, end)]
        return ["--uniform", str(int(uniform or 8)), *self._range(start, end)]

    def _frames_from(self, report: dict[str, Any], label: str = "") -> list[Frame]:
        frames = [Frame.model_validate({**f, "label": label}) for f in report.get("frames", [])]
        if self.max_time is not None:
            frames = [f for f in frames if f.time <= self.max_time + TIME_EPS]
        if self.on_decoded and frames:
            self.on_decoded(sorted({f.time for f in frames}))
        return frames

    # ---------------------------------------------------------------- tools
    def frames(
        self,
        *,
        times: Sequence[float] | None = None,
        fps: float | None = None,
        uniform: int | None = None,
        start: float | None = None,
        end: float | None = None,
        max_side: int | None = None,
        max_frames: int = 512,
    ) -> list[Frame]:
        """Frames at times / an fps / N uniform over [start, end], never past `max_time`; time order."""
        args = ["frames", self.video, *self._selection(times, fps, uniform, start, end), "--inline",
                "--max-frames", str(max_frames)]
        side = max_side or self.max_side
        if side:
            args += ["--max-side", str(side)]
        return self._frames_from(self._call(args))

    def crop(
        self,
        box: Sequence[float],
        *,
        times: Sequence[float] | None = None,
        fps: float | None = None,
        uniform: int | None = None,
        start: float | None = None,
        end: float | None = None,
        scale: float = 2.0,
    ) -> list[Frame]:
        """A zoom on `box` (pixels, or fractions 0-1) at the chosen moments."""
        spec = ",".join(f"{float(v):.4f}" if all(0 <= float(x) <= 1 for x in box) else str(int(round(float(v))))
                        for v in box)
        args = ["crop", self.video, "--box", spec, *self._selection(times, fps, uniform, start, end), "--inline",
                "--scale", f"{scale:g}"]
        report = self._call(args)
        return self._frames_from(report, label="zoom " + ",".join(str(v) for v in report.get("box", [])))

    def grid(self, *, uniform: int = 16, start: float | None = None, end: float | None = None,
             cell: int = 256, times: Sequence[float] | None = None) -> tuple[Frame, list[float]]:
        """A contact sheet (one image) and the times of the frames it shows."""
        args = ["grid", self.video, *self._selection(times, None, uniform, start, end), "--inline",
                "--cell", str(cell)]
        report = self._call(args)
        shown = [float(f["time"]) for f in report.get("frames", [])]
        if self.max_time is not None and any(t > self.max_time + TIME_EPS for t in shown):
            raise VtoolsError("grid returned a frame past the query time")
        if self.on_decoded and shown:
            self.on_decoded(sorted(set(shown)))
        sheet = Frame(time=shown[0] if shown else 0.0, index=-1, requested=0.0,
                      media_type=report.get("media_type", "image/jpeg"), data=report["data"],
                      label=f"grid of {len(shown)} frames")
        return sheet, shown

    def motion(self, *, fps: float = 4.0, start: float | None = None, end: float | None = None) -> MotionReport:
        """Motion energy per sampled frame, cuts and high-motion events (to find when things happen)."""
        report = self._call(["motion", self.video, "--fps", f"{fps:g}", *self._range(start, end)])
        if self.on_decoded and report.get("times"):
            self.on_decoded(sorted(set(float(t) for t in report["times"])))
        return MotionReport.model_validate(report)
