"""The mllm baseline on an EOC-Bench item: the sampled frames, then the host's prompt frame as the
last image, the paper's colour legend and the official choice prompt; the reply scored by the
official parser. The model is the scripted server behind the real gateway (official SDK, real vtools)."""

from __future__ import annotations

import base64

import cv2
import numpy as np

from statebox.attempt import AgentOptions
from statebox.agents.mllm import MllmAgent
from statebox.policies import load_policy
from statebox.schema import Item, Query, VisualPrompt
from statebox.scoring import score_query
from statebox.testing.scripted_model import Turn

from video_agents_support import body_of, make_clip, run_on_item


def test_mllm_sends_the_prompt_frame_last_with_the_legend(tmp_path):
    clip = make_clip(tmp_path / "clip.mp4")
    item = Item(id="eoc-9", benchmark="eocbench", video="clip.mp4", question="What is <object 0> next to?",
                choices=["A. a cup", "B. a plate"], answer_type="mcq", target=["b"],
                meta={"choices": {"a": "a cup", "b": "a plate"}},
                prompts=[VisualPrompt(object=0, box=[100, 60, 200, 160])])
    options = AgentOptions(model="claude-sonnet-4-6", frames=4, extra={"vtools": "local", "prompt_frame": "append"})
    session, requests = run_on_item(MllmAgent, item, Query(), clip, load_policy("default"), options,
                                    [Turn(text="The marked thing.\nANSWER: <choice>B</choice>")], tmp_path)
    content = body_of(requests[0])["messages"][0]["content"]
    images = [b for b in content if b["type"] == "image"]
    assert len(images) == 5 and images[-1]["source"]["media_type"] == "image/png"
    last = cv2.imdecode(np.frombuffer(base64.b64decode(images[-1]["source"]["data"]), np.uint8), cv2.IMREAD_COLOR)
    assert tuple(last[60, 100][::-1]) == (255, 0, 0) and tuple(last[159, 199][::-1]) == (255, 0, 0)  # box corners red
    text = content[-1]["text"]
    assert "<object 0>: red (box)" in text and "shown as the last image" in text
    assert "wrap your response in <choice></choice>" in text
    assert session.response == "<choice>B</choice>"
    assert score_query("eocbench", item, 0, session.response).metrics["correct"] == 1.0
