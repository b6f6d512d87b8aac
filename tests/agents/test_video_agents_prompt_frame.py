"""EOC-Bench's input for `mllm` and `video-agent` (issue 17): where the host's marked prompt frame
goes (`-o prompt_frame=replace_last|append|only`, default the paper's replace_last), checked in the
request bodies the scripted model server received: how many images, their kind, their order and
the marks' colours at the annotated pixels of the image that stands for the last frame.

Only the remote model is replaced (the scripted server behind the real gateway, official SDK);
the workspace, its prompt frame and vtools are real.
"""

from __future__ import annotations

import base64
import json

import cv2
import numpy as np
import pytest

from statebox.attempt import AgentOptions
from statebox.agents.mllm import MllmAgent
from statebox.agents.video_agent import VideoAgent
from statebox.errors import UserError
from statebox.policies import load_policy
from statebox.schema import Item, Query, VisualPrompt
from statebox.scoring import score_query
from statebox.testing.scripted_model import ScriptRequest, Turn

from video_agents_support import body_of, make_clip, role_of, run_on_item

RED, BLUE = (255, 0, 0), (0, 0, 255)
BOX = [100, 60, 200, 160]  # <object 0>, xyxy: outline inside [x0, x1) x [y0, y1)
POINT = [260, 40]  # <object 1>


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return make_clip(tmp_path_factory.mktemp("prompt_frame") / "clip.mp4")


def eoc_item() -> Item:
    return Item(id="eoc-3", benchmark="eocbench", video="clip.mp4",
                question="Where was <object 0> before <object 1> moved?",
                choices=["A. on the shelf", "B. in the sink"], answer_type="mcq", target=["b"],
                meta={"choices": {"a": "on the shelf", "b": "in the sink"}},
                prompts=[VisualPrompt(object=0, box=BOX), VisualPrompt(object=1, point=POINT)])


def run(agent_cls, tmp_path, clip, options: AgentOptions, script):
    item = eoc_item()
    session, requests = run_on_item(agent_cls, item, Query(), clip, load_policy("default"), options, script, tmp_path)
    return item, session, requests


def blocks(request) -> list[dict]:
    """The request's content blocks in order (Anthropic Messages: one user message)."""
    return body_of(request)["messages"][0]["content"]


def images(request) -> list[dict]:
    return [b for b in blocks(request) if b["type"] == "image"]


def decode(block: dict) -> np.ndarray:
    data = np.frombuffer(base64.b64decode(block["source"]["data"]), np.uint8)
    return cv2.imdecode(data, cv2.IMREAD_COLOR)[:, :, ::-1]  # RGB


def assert_marked(block: dict) -> None:
    """The image is the host's PNG prompt frame: box corners and edges red, the point's centre blue."""
    assert block["source"]["media_type"] == "image/png"
    rgb = decode(block)
    x0, y0, x1, y1 = BOX
    for x, y in ((x0, y0), (x1 - 1, y1 - 1), (x0, (y0 + y1) // 2), ((x0 + x1) // 2, y1 - 1)):
        assert tuple(int(v) for v in rgb[y, x]) == RED, (x, y)
    assert tuple(int(v) for v in rgb[POINT[1], POINT[0]]) == BLUE
    assert tuple(int(v) for v in rgb[(y0 + y1) // 2, (x0 + x1) // 2]) not in (RED, BLUE)  # box inside untouched


def assert_plain(block: dict) -> None:
    assert block["source"]["media_type"] == "image/jpeg"
    rgb = decode(block)
    near_red = np.all(np.abs(rgb.astype(int) - np.array(RED)) < 40, axis=-1)
    assert near_red[BOX[1]:BOX[3], BOX[0]].sum() < 10, "a plain frame must not carry the box outline"


def label_before(request, index: int) -> str:
    """The text block right before the index-th image."""
    content = blocks(request)
    seen = -1
    for i, block in enumerate(content):
        if block["type"] == "image":
            seen += 1
            if seen == index:
                return content[i - 1]["text"]
    raise AssertionError("no such image")


ANSWER = "The red box was in the sink.\nANSWER: <choice>B</choice>"


# ----------------------------------------------------------------------------- mllm

def test_mllm_default_is_the_papers_replace_last(tmp_path, clip):
    options = AgentOptions(model="claude-sonnet-4-6", frames=4, extra={"vtools": "local"})
    item, session, requests = run(MllmAgent, tmp_path, clip, options, [Turn(text=ANSWER)])
    shown = images(requests[0])
    assert len(shown) == 4, "N frames in all, the last one the marked frame (EOC-Bench's repo)"
    for block in shown[:3]:
        assert_plain(block)
    assert_marked(shown[-1])
    assert label_before(requests[0], 3) == "[frame t=9.900s]"  # it stands in the last sampled frame's place
    assert label_before(requests[0], 2) == "[frame t=6.600s]"  # lmms-eval's linspace(0, 99, 4): 0, 33, 66, 99
    text = blocks(requests[0])[-1]["text"]
    assert "<object 0>: red (box); <object 1>: blue (point)" in text and "shown as the last image" in text
    assert session.frames.model_visible == [0.0, 3.3, 6.6, 9.9]
    assert session.meta["prompt_frame"] == "replace_last"
    assert score_query("eocbench", item, 0, session.response).metrics["correct"] == 1.0


def test_mllm_one_frame_is_the_papers_1f(tmp_path, clip):
    options = AgentOptions(model="claude-sonnet-4-6", frames=1, extra={"vtools": "local"})
    _, _, requests = run(MllmAgent, tmp_path, clip, options, [Turn(text=ANSWER)])
    shown = images(requests[0])
    assert len(shown) == 1
    assert_marked(shown[0])


def test_mllm_only_sends_the_marked_frame_and_decodes_nothing(tmp_path, clip):
    options = AgentOptions(model="claude-sonnet-4-6", frames=8, extra={"vtools": "local", "prompt_frame": "only"})
    _, session, requests = run(MllmAgent, tmp_path, clip, options, [Turn(text=ANSWER)])
    shown = images(requests[0])
    assert len(shown) == 1
    assert_marked(shown[0])
    assert label_before(requests[0], 0) == "[frame t=9.900s]"  # the clean copy's last frame
    assert session.frames.decoded == []
    assert "The image above is the last frame of a video" in blocks(requests[0])[-1]["text"]


def test_mllm_append_sends_n_frames_then_the_marked_one(tmp_path, clip):
    options = AgentOptions(model="claude-sonnet-4-6", frames=3, extra={"vtools": "local", "prompt_frame": "append"})
    _, _, requests = run(MllmAgent, tmp_path, clip, options, [Turn(text=ANSWER)])
    shown = images(requests[0])
    assert len(shown) == 4
    for block in shown[:3]:
        assert_plain(block)
    assert_marked(shown[-1])


@pytest.mark.parametrize("cls", [MllmAgent, VideoAgent])
def test_an_unknown_prompt_frame_mode_is_one_line(cls):
    with pytest.raises(UserError, match=r"prompt_frame=last is not one of replace_last, append, only"):
        cls(AgentOptions(extra={"prompt_frame": "last"}))


# ----------------------------------------------------------------------------- video-agent

PLAN = json.dumps({"look_for": "the red-boxed object", "state": {"where": "?"},
                   "segments": [{"start": 0, "end": 4, "fps": 1, "why": "before the move"}]})
OBSERVED = json.dumps({"observations": [{"t": 9.9, "what": "red box around a pot in the sink"}], "events": [],
                       "state": {"where": "sink"}, "uncertain": []})
DONE = json.dumps({"done": True, "reason": "seen"})


def by_role(replies: dict[str, str]):
    def hook(req: ScriptRequest) -> Turn:
        return Turn(text=replies.get(role_of(req), "(no script)"))
    return [hook] * 20


VIDEO_REPLIES = {"planner": PLAN, "observer": OBSERVED, "replanner": DONE, "synthesiser": ANSWER}


def test_video_agent_default_shows_the_planner_and_the_last_frame_marked(tmp_path, clip):
    options = AgentOptions(model="claude-sonnet-4-6", frames=12, extra={"vtools": "local", "max_rounds": 1})
    item, session, requests = run(VideoAgent, tmp_path, clip, options, by_role(VIDEO_REPLIES))
    roles = [role_of(r) for r in requests]
    assert roles == ["planner", "observer", "synthesiser"]
    planner, observer = requests[0], requests[1]
    assert len(images(planner)) == 1
    assert_marked(images(planner)[0])
    shown = images(observer)
    # The plan asked 0-4 s at 1 fps (5 frames, within the first round's 6); the paper's input adds the
    # video's last frame, marked.
    assert len(shown) == 6
    for block in shown[:5]:
        assert_plain(block)
    assert_marked(shown[-1])
    assert label_before(observer, 5) == "[frame t=9.900s] (the prompt frame: objects marked)"
    assert "<object 0>: red (box)" in json.dumps(body_of(requests[-1]))  # the legend travels with the question
    assert images(requests[-1]) == []
    assert session.frames.model_visible == [9.9, 0.0, 1.0, 2.0, 3.0, 4.0, 9.9]  # the planner's, then the observer's
    assert score_query("eocbench", item, 0, session.response).metrics["correct"] == 1.0


def test_video_agent_append_adds_the_marked_frame_to_every_observation(tmp_path, clip):
    options = AgentOptions(model="claude-sonnet-4-6", frames=12,
                           extra={"vtools": "local", "max_rounds": 1, "batch": 3, "prompt_frame": "append"})
    _, _, requests = run(VideoAgent, tmp_path, clip, options, by_role(VIDEO_REPLIES))
    observers = [r for r in requests if role_of(r) == "observer"]
    assert len(observers) == 2  # 5 frames in batches of 3
    for request in observers:
        shown = images(request)
        for block in shown[:-1]:
            assert_plain(block)
        assert_marked(shown[-1])
    assert [len(images(r)) for r in observers] == [4, 3]


def test_video_agent_only_observes_the_marked_frame_alone(tmp_path, clip):
    options = AgentOptions(model="claude-sonnet-4-6", frames=8, extra={"vtools": "local", "prompt_frame": "only"})
    _, session, requests = run(VideoAgent, tmp_path, clip, options, by_role(VIDEO_REPLIES))
    roles = [role_of(r) for r in requests]
    assert roles == ["planner", "observer", "synthesiser"]
    shown = images(requests[1])
    assert len(shown) == 1
    assert_marked(shown[0])
    assert session.response == "<choice>B</choice>"
    assert session.meta["frames_used"] == 1


def test_mllm_with_a_prompt_template_still_gets_the_colour_sentence(tmp_path, clip):
    bare = tmp_path / "bare.txt"
    bare.write_text("{question}\n{options}\n{answer_format}")
    placed = tmp_path / "placed.txt"
    placed.write_text("SYSTEM: {visual_prompts}\nUSER: {question} Options : {options} {answer_format}")
    legend = "<object 0>: red (box); <object 1>: blue (point)"
    for name, template in (("bare", bare), ("placed", placed)):
        options = AgentOptions(model="claude-sonnet-4-6", frames=2, prompt_template=str(template),
                               extra={"vtools": "local"})
        _, _, requests = run(MllmAgent, tmp_path / name, clip, options, [Turn(text=ANSWER)])
        text = blocks(requests[0])[-1]["text"]
        assert text.count(legend) == 1, text
        assert text.startswith("I have overlaid") if name == "bare" else text.startswith("SYSTEM: I have overlaid")
        assert_marked(images(requests[0])[-1])
