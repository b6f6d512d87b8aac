"""The `mllm` baseline against a scripted model behind the real gateway, with the official SDKs.

Frames are decoded by the real vtools script (on the host here, `vtools=local`; inside the
sandbox in the docker test at the end).
"""

from __future__ import annotations

import base64
import json
import math

import numpy as np
import pytest

from statebox.attempt import AgentOptions
from statebox.agents.mllm import MllmAgent
from statebox.agents.vision_client import takes_temperature
from statebox.testing.scripted_model import Turn

from video_agents_support import QUESTION, body_of, image_times, make_clip, make_ctx, scripted_gateway

LOCAL = {"vtools": "local"}


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return make_clip(tmp_path_factory.mktemp("mllm") / "clip.mp4")


def run_mllm(tmp_path, clip, options, script=None, **ctx_kwargs):
    with scripted_gateway(script or [Turn(text="I see three cubes.\nANSWER: 3")]) as (server, gateway):
        ctx = make_ctx("mllm", tmp_path, gateway, clip, options=options, **ctx_kwargs)
        session = MllmAgent(options).run(ctx)
        return session, server.model.model_requests(), ctx


@pytest.mark.parametrize("model, api, temperature, effort", [
    ("gpt-4.1", "chat", 0.0, None),               # GPT-4: sampling, no reasoning
    ("gpt-6.1-sol", "chat", None, "low"),         # the default now: a temperature is a 400, effort "none" too
    ("gpt-6.1-sol", "responses", None, "low"),
    ("gpt-5.5", "chat", None, "low"),
    ("gpt-7", "chat", None, "low"),               # a model not known yet: no temperature it might refuse
    ("claude-sonnet-5", "anthropic", None, None),  # Claude 5: a non-default sampling parameter is a 400
])
def test_a_model_is_sent_only_the_sampling_and_effort_it_takes(tmp_path, clip, model, api, temperature, effort):
    """The frame-reading agents' requests on the wire: a temperature only to a model known to take one (an allow-list:
    GPT-6, GPT-5 and the Claude 5 line answer one with a 400, so every request of the attempt failed), and an OpenAI
    reasoning model asked for low effort (its reasoning counts in the completion cap)."""
    extra = {**LOCAL, "api": api} if api != "anthropic" else LOCAL
    session, requests, _ = run_mllm(tmp_path, clip, AgentOptions(model=model, frames=2, extra=extra))
    assert session.status == "ok", session.reason
    body = body_of(requests[0])
    assert body.get("temperature") == temperature
    sent_effort = body.get("reasoning_effort") if api == "chat" else (body.get("reasoning") or {}).get("effort")
    assert sent_effort == effort
    if api == "chat":
        assert "max_completion_tokens" in body and "max_tokens" not in body


@pytest.mark.parametrize("model, takes", [
    ("claude-sonnet-4-6", True), ("claude-sonnet-4-20250514", True), ("claude-opus-4-1-20250805", True),
    ("claude-3-7-sonnet-latest", True), ("claude-opus-4-7", False), ("claude-opus-4-8", False),
    ("claude-sonnet-5", False), ("claude-opus-5-5", False), ("claude-sonnet-4-6-evil", False),
])
def test_only_claude_3_and_4_up_to_4_6_are_sent_a_temperature(model, takes):
    """The Anthropic half of the allow-list. The pinned `anthropic` SDK takes no temperature at all (the client then
    sends none, as the wire test above shows); an older SDK the dependency range admits does, and reaches this."""
    assert takes_temperature(model, "anthropic") is takes


def test_the_runs_effort_reaches_a_reasoning_model(tmp_path, clip):
    options = AgentOptions(model="gpt-6.1-sol", frames=2, effort="high", extra={**LOCAL, "api": "chat"})
    session, requests, _ = run_mllm(tmp_path, clip, options)
    assert session.status == "ok" and body_of(requests[0])["reasoning_effort"] == "high"


def test_anthropic_request_carries_n_labelled_base64_images_in_time_order(tmp_path, clip):
    session, requests, ctx = run_mllm(tmp_path, clip, AgentOptions(model="claude-sonnet-4-6", frames=6, extra=LOCAL))
    assert session.status == "ok", session.reason
    assert session.response == "3"
    assert len(requests) == 1 and requests[0].path.startswith("/v1/messages")
    content = body_of(requests[0])["messages"][0]["content"]
    images = [b for b in content if b["type"] == "image"]
    assert len(images) == 6
    for block in images:
        assert block["source"]["type"] == "base64" and block["source"]["media_type"] == "image/jpeg"
        assert base64.b64decode(block["source"]["data"])[:3] == b"\xff\xd8\xff"  # a real JPEG
    expected = (np.linspace(0, 99, 6).astype(int) / 10).tolist()  # lmms-eval's uniform indices at 10 fps
    assert image_times(requests[0]) == pytest.approx(expected)
    labels = [b["text"] for b in content[:-1] if b["type"] == "text"]
    assert labels == [f"[frame t={t:.3f}s]" for t in expected]
    assert [b["type"] for b in content[:12]] == ["text", "image"] * 6  # each label right before its image
    assert QUESTION in content[-1]["text"] and "ANSWER:" in content[-1]["text"]
    # Frame accounting matches what was sent, and the gateway saw the same images.
    assert session.frames.model_visible == pytest.approx(expected)
    assert session.frames.images_sent == 6
    assert session.frames.decoded == pytest.approx(expected)
    logged = [json.loads(line) for line in (ctx.attempt_dir / "gateway.jsonl").read_text().splitlines()]
    assert len(logged) == 1
    assert json.dumps(logged[0]["request"]).count('"sha256"') == 6
    assert session.usage.requests == 1 and session.usage.input_tokens > 0
    assert "secret_name" not in json.dumps(body_of(requests[0]))


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_requests_use_data_url_images(tmp_path, clip, api):
    options = AgentOptions(model="gpt-4.1", frames=4, extra={**LOCAL, "api": api})
    session, requests, _ = run_mllm(tmp_path, clip, options)
    assert session.status == "ok" and session.response == "3"
    assert len(requests) == 1
    body = body_of(requests[0])
    if api == "chat":
        assert requests[0].path.endswith("/chat/completions")
        parts = body["messages"][-1]["content"]
        urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    else:
        assert requests[0].path.endswith("/responses")
        parts = body["input"][0]["content"]
        urls = [p["image_url"] for p in parts if p["type"] == "input_image"]
    assert len(urls) == 4 and all(u.startswith("data:image/jpeg;base64,") for u in urls)
    assert image_times(requests[0]) == pytest.approx([0.0, 3.3, 6.6, 9.9])
    assert session.frames.images_sent == 4


def test_without_timestamps_no_labels_are_sent_but_accounting_keeps_times(tmp_path, clip):
    options = AgentOptions(model="claude-sonnet-4-6", frames=5, timestamps=False, extra=LOCAL)
    session, requests, _ = run_mllm(tmp_path, clip, options)
    text = json.dumps(body_of(requests[0]))
    assert "[frame t=" not in text and "timestamp" not in text
    assert text.count('"type": "image"') == 5
    assert session.frames.model_visible == pytest.approx([0.0, 2.4, 4.9, 7.4, 9.9])


def test_fps_sampling(tmp_path, clip):
    session, requests, _ = run_mllm(tmp_path, clip, AgentOptions(model="claude-sonnet-4-6", fps=0.5, extra=LOCAL))
    assert image_times(requests[0]) == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert "at 0.5 frame(s) per second" in json.dumps(body_of(requests[0]))


def test_streaming_query_never_gets_a_frame_after_its_time(tmp_path, clip):
    # Uncut video (belt): requests are clamped to the query time by the agent's tools.
    options = AgentOptions(model="claude-sonnet-4-6", frames=8, extra=LOCAL)
    session, requests, _ = run_mllm(tmp_path / "a", clip, options, query_time=4.0)
    times = image_times(requests[0])
    assert len(times) == 8 and max(times) <= 4.0 and times[-1] == pytest.approx(4.0)
    assert max(session.frames.decoded) <= 4.0
    assert "4 s into the recording" in json.dumps(body_of(requests[0]))
    # The real path (braces): the workspace video is cut at the query time.
    session, requests, _ = run_mllm(tmp_path / "b", clip, options, query_time=4.0, cut=True)
    times = image_times(requests[0])
    assert len(times) == 8 and max(times) <= 4.0 + 1e-6


def test_unusable_text_still_gives_an_answer(tmp_path, clip):
    script = [Turn(text="Hmm, hard to say.\nThere might be 7 of them")]
    session, _, _ = run_mllm(tmp_path, clip, AgentOptions(model="gpt-4.1", frames=2, extra=LOCAL), script)
    assert session.status == "ok"
    assert session.response == "There might be 7 of them"


def test_model_errors_end_the_attempt_with_a_status_not_a_crash(tmp_path, clip):
    script = [Turn(status=400, text="invalid image")]
    session, _, _ = run_mllm(tmp_path, clip, AgentOptions(model="claude-sonnet-4-6", frames=2, extra=LOCAL), script)
    assert session.status == "error" and "400" in session.reason
    assert session.frames.images_sent == 2  # they were sent, even though the call failed
    assert not math.isnan(session.duration_s)


@pytest.mark.docker
def test_frames_are_decoded_inside_the_sandbox(tmp_path, clip, docker_engine):
    """The production path: vtools runs in the hardened container via docker exec."""
    options = AgentOptions(model="claude-sonnet-4-6", frames=5)
    with scripted_gateway([Turn(text="ANSWER: 3")]) as (server, gateway):
        ctx = make_ctx("mllm", tmp_path, gateway, clip, options=options, engine=docker_engine, query_time=6.0)
        session = MllmAgent(options).run(ctx)
        requests = server.model.model_requests()
    assert session.status == "ok", session.reason
    assert session.response == "3"
    times = image_times(requests[0])
    assert len(times) == 5 and times == sorted(times) and max(times) <= 6.0
    assert session.frames.model_visible == times and session.frames.images_sent == 5
