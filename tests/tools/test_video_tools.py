"""The host-side handle (VideoTools over LocalVtools) and the LangChain tool wrappers."""

from __future__ import annotations

import shutil

import pytest

from statebox.tools.langgraph_tools import video_langchain_tools
from statebox.tools.video_tools import LocalVtools, VideoTools, VtoolsError


@pytest.fixture
def workspace(clips, tmp_path):
    shutil.copy(clips["h264"], tmp_path / "v.mp4")
    return tmp_path


def test_requests_past_the_query_time_are_clamped(workspace):
    decoded: list[list[float]] = []
    tools = VideoTools(LocalVtools(workspace), "v.mp4", max_time=3.0, on_decoded=decoded.append)
    assert tools.probe().last_frame_time == pytest.approx(7.9)
    assert tools.end_time == 3.0
    frames = tools.frames(times=[1.0, 2.0, 5.0, 7.5])
    assert [f.time for f in frames] == [1.0, 2.0, 3.0]  # 5.0 and 7.5 become the query moment
    assert max(f.time for f in tools.frames(uniform=10)) <= 3.0
    assert max(f.time for f in tools.frames(fps=2, start=2, end=9)) <= 3.0
    assert max(f.time for f in tools.crop([0.0, 0.0, 0.5, 0.5], uniform=4, end=8)) <= 3.0
    sheet, times = tools.grid(uniform=6, end=8)
    assert max(times) <= 3.0 and sheet.data
    assert max(tools.motion(fps=5).times) <= 3.0
    assert decoded[0] == [1.0, 2.0, 3.0]
    assert all(max(batch) <= 3.0 for batch in decoded)


def test_frames_are_sized_and_errors_are_typed(workspace):
    tools = VideoTools(LocalVtools(workspace), "v.mp4", max_side=160)
    frame = tools.frames(times=[0.5])[0]
    import base64

    import cv2
    import numpy as np

    image = cv2.imdecode(np.frombuffer(base64.b64decode(frame.data), np.uint8), 1)
    assert image.shape[:2] == (120, 160)
    with pytest.raises(VtoolsError):
        VideoTools(LocalVtools(workspace), "missing.mp4").probe()


def test_langchain_tools_return_labelled_images_and_report_what_was_shown(workspace):
    shown: list[list[float]] = []
    tools = VideoTools(LocalVtools(workspace), "v.mp4", max_time=4.0)
    by_name = {t.name: t for t in video_langchain_tools(tools, on_shown=shown.append)}
    assert set(by_name) == {"video_probe", "video_frames", "video_crop", "video_grid", "video_motion"}
    call = {"name": "video_frames", "args": {"times": [3.5, 0.5, 6.0]}, "id": "call-1", "type": "tool_call"}
    message = by_name["video_frames"].invoke(call)
    blocks = message.content
    assert [b["type"] for b in blocks] == ["text", "image"] * 3
    assert [b["text"] for b in blocks[::2]] == ["[frame t=0.500s]", "[frame t=3.500s]", "[frame t=4.000s]"]
    assert all(b["mime_type"] == "image/jpeg" and len(b["base64"]) > 100 for b in blocks[1::2])
    assert [f.time for f in message.artifact] == [0.5, 3.5, 4.0]
    assert shown == [[0.5, 3.5, 4.0]]
    info = by_name["video_probe"].invoke({})
    assert '"visible_until": 4.0' in info
    motion = by_name["video_motion"].invoke({"fps": 2})
    assert '"events"' in motion
    bad = by_name["video_crop"].invoke({"box": [0.5, 0.5, 0.5, 0.5], "count": 2})
    assert "failed" in str(bad)
