"""The video tools as LangChain/LangGraph tools, for users' own LangGraph agents.

Each tool runs `vtools` in the attempt's sandbox through a `VideoTools` handle (so
the clamping to the query time and the "decoded" accounting come with it). Frame
tools return LangChain's standard multimodal content blocks — a text label with the
timestamp, then the image — which langchain-anthropic and langchain-openai turn into
each API's native image format. `on_shown(times)` is called with the times of every
image a tool hands back to the model (frame accounting: "model-visible").

    tools = video_langchain_tools(video_tools, on_shown=lambda ts: rec.add_frames(model_visible=ts))
    llm.bind_tools(tools)   # or langgraph.prebuilt.ToolNode(tools)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

from statebox.tools.video_tools import Frame, VideoTools, VtoolsError

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

# what a tool hands the model: a message, or content blocks (text and images)
ToolContent = str | list[dict[str, Any]]

MAX_FRAMES_PER_CALL = 32


def _image_blocks(frames: list[Frame]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for f in sorted(frames, key=lambda f: f.time):
        label = f"[frame t={f.time:.3f}s]" + (f" ({f.label})" if f.label else "")
        blocks.append({"type": "text", "text": label})
        blocks.append({"type": "image", "base64": f.data, "mime_type": f.media_type})
    return blocks


def video_langchain_tools(tools: VideoTools, on_shown: Callable[[list[float]], None] | None = None) -> list[BaseTool]:
    """probe, frames, crop, grid and motion as `StructuredTool`s bound to one attempt's video."""
    from langchain_core.tools import StructuredTool  # why: langchain is needed only by users' own LangGraph agents

    def shown(frames: list[Frame]) -> None:
        if on_shown and frames:
            on_shown([f.time for f in sorted(frames, key=lambda f: f.time)])

    def video_probe() -> str:
        """Duration (s), fps, frame count and size of the video (only up to the query time is visible)."""
        info = tools.probe().model_dump()
        info["visible_until"] = tools.end_time
        return json.dumps(info)

    def video_frames(times: list[float] | None = None, fps: float | None = None, count: int | None = None,
                     start: float | None = None, end: float | None = None) -> tuple[ToolContent, list[Frame]]:
        """Look at frames: exact `times` (s), or `fps` frames per second, or `count` frames spread
        uniformly, over [start, end] (s). Each image comes after its timestamp."""
        try:
            if times:
                frames = tools.frames(times=list(times)[:MAX_FRAMES_PER_CALL])
            elif fps:
                frames = tools.frames(fps=fps, start=start, end=end, max_frames=MAX_FRAMES_PER_CALL)
            else:
                frames = tools.frames(uniform=min(int(count or 8), MAX_FRAMES_PER_CALL), start=start, end=end)
        except VtoolsError as exc:
            return f"video_frames failed: {exc}", []
        shown(frames)
        return _image_blocks(frames), frames

    def video_crop(box: list[float], times: list[float] | None = None, count: int | None = None,
                   start: float | None = None, end: float | None = None, scale: float = 2.0) -> tuple[ToolContent, list[Frame]]:
        """Zoom: the region `box` = [x1, y1, x2, y2] (fractions 0-1 of width/height, or pixels) at
        `times` or `count` uniform moments over [start, end], enlarged `scale` times."""
        try:
            frames = tools.crop(box, times=list(times)[:MAX_FRAMES_PER_CALL] if times else None,
                                uniform=None if times else min(int(count or 4), MAX_FRAMES_PER_CALL),
                                start=start, end=end, scale=scale)
        except VtoolsError as exc:
            return f"video_crop failed: {exc}", []
        shown(frames)
        return _image_blocks(frames), frames

    def video_grid(count: int = 16, start: float | None = None, end: float | None = None) -> tuple[ToolContent, list[float]]:
        """An overview: one contact sheet of `count` frames over [start, end], timestamps written on each."""
        try:
            sheet, times = tools.grid(uniform=min(int(count), 64), start=start, end=end)
        except VtoolsError as exc:
            return f"video_grid failed: {exc}", []
        if on_shown and times:
            on_shown(times)
        text = "Contact sheet of frames at " + ", ".join(f"{t:.2f}" for t in times) + " s (left to right, top to bottom)."
        return [{"type": "text", "text": text}, {"type": "image", "base64": sheet.data, "mime_type": sheet.media_type}], times

    def video_motion(fps: float = 4.0, start: float | None = None, end: float | None = None) -> str:
        """When things happen: motion events (start, end, peak time) and scene cuts over [start, end]."""
        try:
            report = tools.motion(fps=fps, start=start, end=end)
        except VtoolsError as exc:
            return f"video_motion failed: {exc}"
        return json.dumps({"events": report.events, "cuts": report.cuts, "threshold": report.threshold})

    return [
        StructuredTool.from_function(video_probe),
        StructuredTool.from_function(video_frames, response_format="content_and_artifact"),
        StructuredTool.from_function(video_crop, response_format="content_and_artifact"),
        StructuredTool.from_function(video_grid, response_format="content_and_artifact"),
        StructuredTool.from_function(video_motion),
    ]
