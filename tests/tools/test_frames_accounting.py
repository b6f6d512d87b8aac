"""Frame accounting from sessions: images in requests (three wire formats, raw or as the gateway
logs them), de-duplicated over a conversation, dated by label or by the file the agent opened."""

from __future__ import annotations

import base64
import json

from statebox.agents.frames_accounting import (
    account_for_session,
    decoded_from_events,
    model_visible_from_bodies,
    request_images,
)
from statebox.sandbox.gateway.log import summarise_images
from statebox.schema import Event, EventKind


def b64(tag: str) -> str:
    return base64.b64encode((tag * 200).encode()).decode()


A, B, C = b64("a"), b64("b"), b64("c")


def anthropic_body() -> dict:
    return {"model": "claude", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "[frame t=0.500s]"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": A}},
        {"type": "text", "text": "[frame t=1.250s]"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": B}},
        {"type": "text", "text": "How many?"}]}]}


def chat_body() -> dict:
    return {"model": "gpt", "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": [
        {"type": "text", "text": "[frame t=0.500s]"},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{A}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{C}"}}]}]}


def responses_body() -> dict:
    return {"model": "gpt", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "[frame t=2.000s]"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{B}"}]}]}


def test_images_are_found_in_each_wire_format_with_their_labels():
    found = request_images(anthropic_body())
    assert [i.times for i in found.images] == [(0.5,), (1.25,)]
    found = request_images(chat_body(), "chat")
    assert [i.times for i in found.images] == [(0.5,), ()]  # the second image has no label of its own
    found = request_images(responses_body())
    assert [i.times for i in found.images] == [(2.0,)]


def test_gateway_summaries_and_raw_bodies_count_alike():
    raw = model_visible_from_bodies([("anthropic", anthropic_body()), ("chat", chat_body())])
    logged = model_visible_from_bodies([("anthropic", summarise_images(anthropic_body())),
                                        ("chat", summarise_images(chat_body()))])
    assert raw.images_sent == logged.images_sent == 3  # A is the same image in both requests
    assert raw.times == logged.times == [0.5, 1.25]
    assert raw.undated == logged.undated == 1
    assert raw.per_request == [2, 2]


def claude_conversation(turns: int) -> dict:
    """What Claude Code sends after reading frame files with its Read tool (conversation repeats)."""
    messages = [{"role": "user", "content": "look at the video"}]
    for k, (path, data) in enumerate([("frames/frame_t0002.500.jpg", A), ("frames/frame_t0004.000.jpg", B)][:turns]):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"tu{k}", "name": "Read", "input": {"file_path": f"/workspace/{path}"}}]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"tu{k}", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": data}}]}]})
    return {"model": "claude", "messages": messages}


def test_claude_read_tool_images_are_dated_by_file_name_and_counted_once(tmp_path):
    records = []
    for turns in (1, 2):
        records.append({"api": "anthropic", "request": summarise_images(claude_conversation(turns)),
                        "response": {"content": []}})
    (tmp_path / "gateway.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n{torn")
    events = [
        Event(seq=0, kind=EventKind.shell_command, text="vtools frames v.mp4 --times 2.5,4 --out frames"),
        Event(seq=1, kind=EventKind.tool_output, text=json.dumps(
            {"tool": "vtools", "command": "frames", "decoded_times": [2.5, 4.0], "frames": []})),
        Event(seq=2, kind=EventKind.shell_command, text="ffmpeg -i v.mp4 -vf fps=1 out_%03d.png"),
        Event(seq=3, kind=EventKind.tool_output, text="frame_t0007.100.jpg\nframe_t0008.000.jpg"),
    ]
    account, notes = account_for_session(events, tmp_path)
    assert account.images_sent == 2
    assert account.model_visible == [2.5, 4.0]
    assert account.decoded == [2.5, 4.0, 7.1, 8.0]
    assert notes["images_per_request"] == [1, 2]
    assert notes["untracked_decoding_events"] == [2]  # ffmpeg outside vtools: decoded frames unknown


def test_codex_view_image_and_function_outputs_are_dated_by_the_call():
    body = {"model": "gpt-5", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "function_call", "call_id": "c1", "name": "view_image",
         "arguments": json.dumps({"path": "crops/crop_t0003.300.png"})},
        {"type": "function_call_output", "call_id": "c1", "output": "attached"},
        {"role": "user", "content": [{"type": "input_image", "image_url": f"data:image/png;base64,{C}"}]},
    ]}
    visible = model_visible_from_bodies([("responses", body)])
    assert visible.images_sent == 1 and visible.times == [3.3]


def test_decoded_times_come_from_vtools_reports_not_from_other_numbers():
    events = [Event(seq=0, kind=EventKind.tool_output, text="took 1.5s\n" + json.dumps(
        {"tool": "vtools", "command": "motion", "decoded_times": [0.0, 0.25, 0.5]}, separators=(",", ":")))]
    assert decoded_from_events(events).times == [0.0, 0.25, 0.5]


def test_sessions_without_a_live_account_get_one_derived(tmp_path):
    from statebox.agents.frames_accounting import with_frame_account
    from statebox.schema import FrameAccount, Session

    (tmp_path / "gateway.jsonl").write_text(json.dumps(
        {"api": "anthropic", "request": summarise_images(claude_conversation(2))}) + "\n")
    coding = Session(attempt_id="a", agent="claude-code", events=[])
    filled = with_frame_account(coding, tmp_path)
    assert filled.frames.model_visible == [2.5, 4.0] and filled.frames.images_sent == 2
    assert filled.meta["frame_accounting"]["images_per_request"] == [2]
    live = Session(attempt_id="b", agent="mllm", frames=FrameAccount(decoded=[1.0], model_visible=[1.0], images_sent=1))
    assert with_frame_account(live, tmp_path).frames == live.frames  # a live account is never overwritten
