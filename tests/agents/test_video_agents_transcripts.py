"""EC-Bench's with-subtitles condition for `mllm` and `video-agent` (issue 17): with the policy's
`media.transcripts`, the workspace's transcript.txt (written by the host, cut at the query time)
is in the prompt text the model receives; without it, nothing of the transcript is. Checked in
the request bodies the scripted model server received (real gateway, official SDK, real vtools).
"""

from __future__ import annotations

import json

import pytest

from statebox.attempt import AgentOptions
from statebox.agents.mllm import MllmAgent
from statebox.agents.video_agent import VideoAgent
from statebox.policies import load_policy
from statebox.schema import Item, Query
from statebox.testing.scripted_model import ScriptRequest, Turn

from video_agents_support import body_of, make_clip, role_of, run_on_item

TRANSCRIPT = ("[00:00:01.000 - 00:00:02.500] the first bell rings now\n"
              "[00:00:03.000 - 00:00:04.000] and a second bell\n"
              "[00:00:07.000 - 00:00:08.000] a third bell after the cut\n")
REPLY = 'ANSWER: {"results":[{"query_id":1,"answer":"2","clips":[["00:00:01","00:00:04"]]}]}'


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return make_clip(tmp_path_factory.mktemp("transcripts") / "clip.mp4")


def ec_item() -> Item:
    return Item(id="ec-5", benchmark="ecbench", video="clip.mp4", question="How many times does a bell ring?",
                answer_type="number", target="2", labels={"task_type": "Counting"}, transcript=TRANSCRIPT)


def run(agent_cls, tmp_path, clip, transcripts: bool, query: Query, script, max_rounds: int = 1):
    policy = load_policy("default")
    policy = policy.model_copy(update={"media": policy.media.model_copy(update={"transcripts": transcripts})})
    options = AgentOptions(model="claude-sonnet-4-6", frames=4, extra={"vtools": "local", "max_rounds": max_rounds})
    return run_on_item(agent_cls, ec_item(), query, clip, policy, options, script, tmp_path)


def texts(request) -> str:
    """Every text the model got in one request (system prompt and text blocks), joined."""
    body = body_of(request)
    out = [body.get("system") if isinstance(body.get("system"), str) else json.dumps(body.get("system", ""))]
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out += [b["text"] for b in content if b["type"] == "text"]
    return "\n".join(out)


def test_mllm_puts_the_transcript_after_the_frames_cut_at_the_query(tmp_path, clip):
    session, requests = run(MllmAgent, tmp_path, clip, True, Query(index=0, time=5.0), [Turn(text=REPLY)])
    content = body_of(requests[0])["messages"][0]["content"]
    kinds = [b["type"] for b in content]
    section = next(i for i, b in enumerate(content) if b["type"] == "text" and "Audio transcription" in b["text"])
    assert all(k != "image" for k in kinds[section:]) and "image" in kinds[:section]  # after the frames
    text = content[section]["text"]
    assert "[00:00:01.000 - 00:00:02.500] the first bell rings now" in text
    assert "and a second bell" in text
    assert "third bell" not in json.dumps(body_of(requests[0]))  # starts after the query time: never sent
    assert '"clips"' in content[-1]["text"]  # the question with EC-Bench's output JSON follows
    assert session.response.startswith('{"results"')


def test_mllm_sends_no_transcript_when_the_policy_keeps_it_out(tmp_path, clip):
    _, requests = run(MllmAgent, tmp_path, clip, False, Query(), [Turn(text=REPLY)])
    sent = json.dumps(body_of(requests[0]))
    assert "bell rings" not in sent and "Audio transcription" not in sent


def by_role(replies: dict[str, str]):
    def hook(req: ScriptRequest) -> Turn:
        return Turn(text=replies.get(role_of(req), "(no script)"))
    return [hook] * 20


PLAN = json.dumps({"look_for": "bells", "state": {"count": 0},
                   "segments": [{"start": 0, "end": 9, "fps": 0.5, "why": "overview"}]})
OBSERVED = json.dumps({"observations": [], "events": [], "state": {"count": 2}, "uncertain": []})


def test_video_agent_gives_the_transcript_to_planner_replanner_and_synthesiser(tmp_path, clip):
    replies = {"planner": PLAN, "observer": OBSERVED, "replanner": json.dumps({"done": True, "reason": "ok"}),
               "synthesiser": REPLY}
    session, requests = run(VideoAgent, tmp_path, clip, True, Query(), by_role(replies))
    by = {}
    for request in requests:
        by.setdefault(role_of(request), []).append(texts(request))
    assert set(by) == {"planner", "observer", "synthesiser"}  # max_rounds 1: no re-planner call
    for role in ("planner", "synthesiser"):
        assert "Audio transcription" in by[role][0]
        assert "[00:00:07.000 - 00:00:08.000] a third bell after the cut" in by[role][0]  # no cut: every line
    assert all("bell rings" not in t for t in by["observer"])  # observers get frames only
    assert session.response.startswith('{"results"')


def test_video_agent_replanner_gets_the_transcript_and_none_without_the_policy(tmp_path, clip):
    replies = {"planner": PLAN, "observer": OBSERVED, "replanner": json.dumps({"done": True, "reason": "ok"}),
               "synthesiser": REPLY}
    _, requests = run(VideoAgent, tmp_path / "on", clip, True, Query(), by_role(replies), max_rounds=2)
    replanner = [texts(r) for r in requests if role_of(r) == "replanner"]
    assert len(replanner) == 1 and "a third bell after the cut" in replanner[0]
    _, requests = run(VideoAgent, tmp_path / "off", clip, False, Query(), by_role(replies), max_rounds=2)
    assert [role_of(r) for r in requests] == ["planner", "observer", "replanner", "synthesiser"]
    assert all("Audio transcription" not in texts(r) and "bell rings" not in texts(r) for r in requests)
