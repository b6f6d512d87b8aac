"""The AVP-style `video-agent` graph against a scripted model behind the real gateway.

The script answers by role (the system prompt names it), so each test drives the planner,
observer, re-planner and synthesiser and then checks the requests the server received.
"""

from __future__ import annotations

import json
import math

import pytest

from statebox.attempt import AgentOptions
from statebox.agents.video_agent import VideoAgent
from statebox.testing.scripted_model import ScriptRequest, Turn

from video_agents_support import image_times, make_clip, make_ctx, role_of, scripted_gateway

LOCAL = {"vtools": "local"}


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return make_clip(tmp_path_factory.mktemp("video_agent") / "clip.mp4")


def by_role(replies: dict[str, list[str]]):
    """A hook answering each role with its next scripted text (the last one repeats)."""
    used: dict[str, int] = {}

    def hook(req: ScriptRequest) -> Turn:
        role = role_of(req)
        texts = replies.get(role, ["(no script for this role)"])
        k = used.get(role, 0)
        used[role] = k + 1
        return Turn(text=texts[min(k, len(texts) - 1)])

    return [hook] * 40


def run_agent(tmp_path, clip, options, replies, **ctx_kwargs):
    with scripted_gateway(by_role(replies)) as (server, gateway):
        ctx = make_ctx("video-agent", tmp_path, gateway, clip, options=options, **ctx_kwargs)
        session = VideoAgent(options).run(ctx)
        return session, server.model.model_requests()


PLAN_1FPS = json.dumps({"look_for": "cubes added or removed", "state": {"count": 0},
                        "segments": [{"start": 0, "end": 9.9, "fps": 1, "why": "overview"}]})
OBSERVED = json.dumps({"observations": [{"t": 2.0, "what": "a cube appears"}],
                       "events": [{"t": 2.0, "event": "cube added", "state_change": "count 0 -> 1"}],
                       "state": {"count": 1}, "uncertain": ["between 2 and 5 s"]})
MORE = json.dumps({"done": False, "reason": "gap between 2 and 5 s", "requests": [{"times": [2.5, 3.5, 4.5]}]})
DONE = json.dumps({"done": True, "reason": "consistent"})


def test_plan_observe_replan_synthesise(tmp_path, clip):
    options = AgentOptions(model="claude-sonnet-4-6", frames=32, extra=LOCAL)
    replies = {"planner": [PLAN_1FPS], "observer": [OBSERVED], "replanner": [MORE, DONE],
               "synthesiser": ["A cube was added at 2 s and none removed.\nANSWER: 4"]}
    session, requests = run_agent(tmp_path, clip, options, replies)
    assert session.status == "ok", session.reason
    assert session.response == "4"
    roles = [role_of(r) for r in requests]
    assert roles == ["planner", "observer", "replanner", "observer", "replanner", "synthesiser"]
    for r in requests:
        if role_of(r) != "observer":
            assert image_times(r) == [], "only observers see frames"
    first, second = [image_times(r) for r in requests if role_of(r) == "observer"]
    assert first == [float(t) for t in range(10)]  # the plan: 1 fps over 0-9.9 s, in time order
    assert second == [2.5, 3.5, 4.5]  # exactly the frames the re-planner asked for
    # The second observer is told the state so far, and the synthesiser gets the evidence.
    assert '\\"count\\": 1' in json.dumps(requests[3].body) or '"count": 1' in json.dumps(requests[3].body)
    assert "cube added" in json.dumps(requests[-1].body)
    # Frame accounting = what was sent.
    sent = first + second
    assert session.frames.model_visible == sent
    assert session.frames.images_sent == len(sent) == 13
    assert set(sent) <= set(session.frames.decoded)
    assert session.meta["rounds"] == 2 and session.meta["frames_used"] == 13
    assert session.usage.requests == 6


def test_observer_batches_keep_time_order(tmp_path, clip):
    plan = json.dumps({"segments": [{"start": 0, "end": 9.9, "fps": 2}]})
    options = AgentOptions(model="gpt-4.1", frames=40, extra={**LOCAL, "batch": 6, "max_rounds": 1})
    replies = {"planner": [plan], "observer": [OBSERVED], "synthesiser": ["ANSWER: 1"]}
    session, requests = run_agent(tmp_path, clip, options, replies)
    observer = [r for r in requests if role_of(r) == "observer"]
    batches = [image_times(r) for r in observer]
    assert all(0 < len(b) <= 6 for b in batches)
    flat = [t for b in batches for t in b]
    assert flat == sorted(flat) and len(flat) == 20  # 2 fps over 0-9.9 s, first-round share of 40
    body = observer[0].body
    assert body["messages"][-1]["content"][1]["type"] == "text"
    assert body["messages"][-1]["content"][2]["type"] == "image_url"
    assert body["messages"][-1]["content"][2]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert "replanner" not in [role_of(r) for r in requests], "max_rounds=1: no re-planning"
    assert session.frames.images_sent == 20


def test_unusable_model_text_falls_back_and_still_answers(tmp_path, clip):
    options = AgentOptions(model="claude-sonnet-4-6", frames=8, extra=LOCAL)
    session, requests = run_agent(tmp_path, clip, options, {r: ["I am not sure what you mean."] for r in
                                                            ("planner", "observer", "replanner", "synthesiser")})
    assert session.status == "ok", session.reason
    assert session.response == "I am not sure what you mean."
    observer = [image_times(r) for r in requests if role_of(r) == "observer"]
    assert observer == [[0.0, 3.3, 6.6, 9.9]]  # fallback: uniform over the video, first-round share of 8
    assert any("uniform sampling" in n for n in session.meta["notes"])
    assert [role_of(r) for r in requests][-1] == "synthesiser"


def test_streaming_query_never_gets_a_frame_after_its_time(tmp_path, clip):
    plan = json.dumps({"segments": [{"start": 0, "end": 9.9, "fps": 2}]})
    later = json.dumps({"done": False, "requests": [{"times": [3.95, 6.0, 8.0]},
                                                    {"start": 5, "end": 9, "fps": 4},
                                                    {"start": 2, "end": 9, "fps": 1, "box": [0.1, 0.1, 0.6, 0.6]}]})
    options = AgentOptions(model="claude-sonnet-4-6", frames=64, extra=LOCAL)
    replies = {"planner": [plan], "observer": [OBSERVED], "replanner": [later, DONE], "synthesiser": ["ANSWER: 2"]}
    session, requests = run_agent(tmp_path, clip, options, replies, query_time=4.0)
    seen = [t for r in requests for t in image_times(r)]
    assert seen and not any(math.isnan(t) for t in seen)
    assert max(seen) <= 4.0, f"a frame after the query time was sent: {max(seen)}"
    assert max(session.frames.decoded) <= 4.0 and max(session.frames.model_visible) <= 4.0
    assert "0-4.00 s" in json.dumps(requests[0].body)
    zoomed = [r for r in requests if "zoom" in json.dumps(r.body)]
    assert zoomed, "the re-planner's zoom request reached an observer"


def test_frame_budget_caps_what_the_model_sees(tmp_path, clip):
    plan = json.dumps({"segments": [{"start": 0, "end": 9.9, "fps": 5}]})
    ask_all = json.dumps({"done": False, "requests": [{"start": 0, "end": 9.9, "fps": 10}]})
    options = AgentOptions(model="claude-sonnet-4-6", frames=12, extra={**LOCAL, "max_rounds": 3})
    replies = {"planner": [plan], "observer": [OBSERVED], "replanner": [ask_all], "synthesiser": ["ANSWER: 0"]}
    session, requests = run_agent(tmp_path, clip, options, replies)
    sent = [t for r in requests for t in image_times(r)]
    assert len(sent) == 12 == session.frames.images_sent
    assert len(set(sent)) == 12, "frames already seen are not sent again"
    assert [role_of(r) for r in requests].count("observer") == 2


@pytest.mark.docker
def test_video_agent_in_the_sandbox(tmp_path, clip, docker_engine):
    """The production path: probe, motion and frames all run as vtools inside the container."""
    options = AgentOptions(model="gpt-4.1", frames=16)
    replies = {"planner": [PLAN_1FPS], "observer": [OBSERVED], "replanner": [MORE, DONE],
               "synthesiser": ["ANSWER: 4"]}
    with scripted_gateway(by_role(replies)) as (server, gateway):
        ctx = make_ctx("video-agent", tmp_path, gateway, clip, options=options, engine=docker_engine)
        session = VideoAgent(options).run(ctx)
        requests = server.model.model_requests()
    assert session.status == "ok", session.reason
    assert session.response == "4"
    observed = [image_times(r) for r in requests if role_of(r) == "observer"]
    # First round: the 10 planned frames thinned evenly to half of the 16-frame budget.
    assert observed == [[0.0, 1.0, 3.0, 4.0, 5.0, 6.0, 8.0, 9.0], [2.5, 3.5, 4.5]]
    assert session.frames.images_sent == 11
