"""The `react` LangGraph agent end to end: real LangGraph + langchain-anthropic/openai clients, real gateway,
real sandbox container; the only stand-in is the scripted model upstream (real wire format)."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest

from statebox.attempt import AgentOptions, AttemptContext, SecretFacts
from statebox.errors import UserError
from statebox.policies import load_policy
from statebox.schema import Attempt, EventKind, Item, Query
from statebox.testing.scripted_model import ScriptedModelServer, ScriptRequest, Turn

pytestmark = pytest.mark.docker

DECOY_ANTHROPIC = "sk-ant-DECOY-react-0123456789abcdef"
DECOY_OPENAI = "sk-proj-DECOY-react-0123456789abcdef"

MEASURE = r"""
import glob, cv2
video = sorted(glob.glob('*.mp4'))[0]
cap = cv2.VideoCapture(video)
n, bright = 0, 0
while True:
    ok, frame = cap.read()
    if not ok:
        break
    n += 1
    bright += int(frame.mean() > 100)
print(f"frames={n} bright={bright}")
"""

NETWORK_PROBE = ("curl -sS -m 5 https://example.com >/dev/null 2>&1; echo curl_exit=$?; "
                 "python3 -c \"import socket\ntry:\n socket.create_connection(('93.184.216.34', 80), timeout=3)"
                 "\n print('NET-OK')\nexcept OSError as e:\n print('NET-BLOCKED', e)\"; env | sort")


def make_video(path: Path, frames: int = 24, bright_every: int = 3) -> int:
    """A tiny MP4 where every `bright_every`-th frame is white; returns the number of bright frames."""
    import cv2
    import numpy as np

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 12.0, (64, 48))
    bright = 0
    for i in range(frames):
        value = 255 if i % bright_every == 0 else 20
        bright += value == 255
        writer.write(np.full((48, 64, 3), value, np.uint8))
    writer.release()
    return bright


def answer_from_output(req: ScriptRequest) -> Turn:
    """Hook: read the measurement the python tool printed, write answer.txt, then submit it."""
    found = [re.search(r"bright=(\d+)", out) for out in req.tool_outputs]
    value = next(m.group(1) for m in found if m)
    return Turn(shell=f"echo {value} > answer.txt && cat answer.txt")


def submit_hook(req: ScriptRequest) -> Turn:
    return Turn(text="Done measuring.", tool="submit", arguments={"answer": req.last_tool_output.split("\n")[0].strip()})


SCRIPT = [
    Turn(text="Let me look at the workspace.", shell="ls -la"),
    Turn(tool="python", arguments={"code": MEASURE}),
    Turn(shell=NETWORK_PROBE),
    Turn(tool="view_frames", arguments={"times": [0.0, 0.5]}),
    answer_from_output,
    submit_hook,
]


@pytest.fixture
def attempt_setup(tmp_path, docker_engine):
    from statebox.sandbox.workspace import prepare_workspace

    video = tmp_path / "source_clip_original.mp4"
    bright = make_video(video)
    item = Item(id="bright-1", benchmark="vstat", video=str(video), question="How many frames are bright white?",
                answer_type="number", target=bright)
    policy = load_policy("default")
    workspace = prepare_workspace(item, Query(), video, policy)
    yield {"item": item, "policy": policy, "workspace": workspace, "bright": bright, "engine": docker_engine,
           "attempt_dir": tmp_path / "attempt"}
    workspace.cleanup()


def make_ctx(setup, gateway, options: AgentOptions, run_id: str = "r1") -> AttemptContext:
    attempt = Attempt(run_id=run_id, agent="react", item_id=setup["item"].id)
    return AttemptContext(attempt=attempt, item=setup["item"], query=Query(), attempt_dir=setup["attempt_dir"],
                          policy=setup["policy"], options=options,
                          secret=SecretFacts(original_name="source_clip_original.mp4",
                                             original_stem="source_clip_original", item_id="bright-1",
                                             dataset="t"),
                          workspace=setup["workspace"], engine=setup["engine"], gateway=gateway)


def run_react(setup, script, *, provider_model: str, budgets=None, effort=None):
    from statebox.agents.react import ReactAgent
    from statebox.sandbox.gateway import Gateway

    if budgets is not None:
        setup["policy"] = setup["policy"].model_copy(update={"budgets": budgets})
    with ScriptedModelServer(script) as upstream, Gateway(
        env={}, anthropic_base_url=upstream.base_url, openai_base_url=upstream.openai_base_url,
        anthropic_api_key=DECOY_ANTHROPIC, openai_api_key=DECOY_OPENAI,
    ) as gateway:
        session = ReactAgent(AgentOptions(model=provider_model, effort=effort)).run(make_ctx(setup, gateway, AgentOptions()))
        return session, upstream.model_requests()


# gpt-6.1-sol: the OpenAI default; it calls tools only through the Responses API, where langchain-openai sends it
@pytest.mark.parametrize("model", ["claude-sonnet-4-6", "gpt-4o", "gpt-6.1-sol"])
def test_react_end_to_end(attempt_setup, model):
    from statebox.scoring import score_query

    session, requests = run_react(attempt_setup, list(SCRIPT), provider_model=model)
    bright = attempt_setup["bright"]
    assert session.status == "ok", session.reason
    assert session.response == str(bright)
    assert score_query("vstat", attempt_setup["item"], 0, session.response).metrics["correct"] == 1.0

    events = session.events
    calls = [(e.data["tool"], e.text) for e in events if e.kind is EventKind.tool_call]
    assert [c[0] for c in calls] == ["bash", "python", "bash", "view_frames", "bash", "submit"]
    outputs = [e.text for e in events if e.kind is EventKind.tool_output]
    video_name = attempt_setup["workspace"].video_name
    assert video_name in outputs[0] and "instruction.txt" in outputs[0]  # listed the workspace
    assert f"bright={bright}" in outputs[1] and "frames=24" in outputs[1]  # OpenCV ran in the sandbox
    assert "curl_exit=0" not in outputs[2] and "NET-BLOCKED" in outputs[2] and "NET-OK" not in outputs[2]
    assert outputs[4].startswith(str(bright))
    # Order: each call is followed by its output, and the answer comes last.
    kinds = [e.kind for e in events if e.kind in (EventKind.tool_call, EventKind.tool_output, EventKind.final_answer)]
    assert kinds == [EventKind.tool_call, EventKind.tool_output] * 5 + [EventKind.tool_call, EventKind.final_answer]
    assert any(e.kind is EventKind.model_text and "look at the workspace" in e.text for e in events)
    # Frames decoded in the sandbox and shown to the model are accounted for.
    assert session.frames.model_visible == [0.0, 0.5] and session.frames.images_sent == 2
    last_body = json.dumps(requests[-1].body)
    assert "[frame t=0.500s]" in last_body and "base64" in last_body

    attempt_dir = attempt_setup["attempt_dir"]
    log = [json.loads(l) for l in (attempt_dir / "gateway.jsonl").read_text().splitlines()]
    assert len(log) == len(requests) == 6 and all(l["status"] == 200 for l in log)
    expected_path = "/v1/responses" if model.startswith("gpt-6") else "/v1/chat/completions"
    assert model.startswith("claude") or all(r.path.endswith(expected_path) for r in requests)
    assert session.usage.requests == 6 and session.usage.input_tokens > 0
    # The real (decoy) key reached the upstream but nothing the sandbox or the logs hold.
    header = "x-api-key" if model.startswith("claude") else "authorization"
    assert all(DECOY_ANTHROPIC in r.headers.get(header, "") or DECOY_OPENAI in r.headers.get(header, "")
               for r in requests)
    everything = "\n".join([(attempt_dir / "gateway.jsonl").read_text(), (attempt_dir / "events.jsonl").read_text(),
                            *outputs, json.dumps([r.body for r in requests])]
                           + [p.read_text(errors="replace") for p in Path(attempt_setup["workspace"].path).rglob("*")
                              if p.is_file() and p.suffix != ".mp4"])
    for decoy in (DECOY_ANTHROPIC, DECOY_OPENAI):
        assert decoy not in everything
    assert "[image]" not in (attempt_dir / "gateway.jsonl").read_text()
    assert '"sha256"' in (attempt_dir / "gateway.jsonl").read_text()  # frames summarised in the log


@pytest.mark.parametrize("effort, thinking, output_config", [
    ("high", "adaptive", {"effort": "high"}),                    # a named level: output_config.effort (Claude 5's way)
    ("2048", "enabled", None),                                   # a token budget: manual thinking (Claude 3.7 to 4.6)
])
def test_react_effort_reaches_an_anthropic_model(attempt_setup, effort, thinking, output_config):
    """A named --effort on an Anthropic model was dropped without a word: only a token budget reached the request, and
    the Claude 5 line refuses token budgets. A named level now goes as `output_config.effort`."""
    session, requests = run_react(attempt_setup, [Turn(text="ANSWER: 3")], provider_model="claude-sonnet-5",
                                  effort=effort)
    body = requests[0].body
    assert body["thinking"]["type"] == thinking and body.get("output_config") == output_config


@pytest.mark.parametrize("model, effort", [
    (None, "extreme"), (None, "4096 tokens"), (None, "-1"),
    ("claude-sonnet-5", "minimal"),  # OpenAI's level: Anthropic's API has none such
    ("gpt-6.1-sol", "4096"),         # a token budget: Anthropic's
])
def test_react_refuses_an_effort_its_provider_does_not_take(model, effort):
    """Refused when the agent is made, before any sandbox starts: a request the provider answers with a 400 would
    fail every attempt of the run one by one."""
    from statebox.agents.react import ReactAgent

    with pytest.raises(UserError, match="react --effort"):
        ReactAgent(AgentOptions(model=model, effort=effort))


def test_react_token_budget_ends_with_error(attempt_setup):
    from statebox.policies.model import Budgets

    script = [Turn(shell="ls", usage={"input_tokens": 5000, "output_tokens": 100}), Turn(text="never reached")]
    session, requests = run_react(attempt_setup, script, provider_model="claude-haiku-4-5",
                                  budgets=Budgets(max_total_tokens=3000))  # the first request's worst case fits
    assert session.status == "error"
    assert "token budget exceeded: 5100 tokens used, limit 3000" in session.reason
    assert len(requests) == 1
    assert any(e.kind is EventKind.error and "token budget" in e.text for e in session.events)


def test_react_step_limit(attempt_setup):
    from statebox.policies.model import Budgets

    session, requests = run_react(attempt_setup, [Turn(shell="true")] * 10, provider_model="gpt-4o",
                                  budgets=Budgets(max_steps=3))
    assert session.status == "error" and "step limit" in session.reason
    assert len(requests) == 3


def test_react_wall_clock_limit(attempt_setup):
    from statebox.agents.react import ReactAgent
    from statebox.sandbox.gateway import Gateway

    policy = attempt_setup["policy"]
    attempt_setup["policy"] = policy.model_copy(update={"limits": policy.limits.model_copy(update={"time_limit_s": 6})})
    script = [Turn(shell="sleep 60"), Turn(text="late", delay_s=30)]
    with ScriptedModelServer(script) as upstream, Gateway(env={}, openai_base_url=upstream.openai_base_url,
                                                          openai_api_key=DECOY_OPENAI) as gateway:
        import time

        started = time.time()
        ctx = make_ctx(attempt_setup, gateway, AgentOptions())
        session = ReactAgent(AgentOptions(model="gpt-4o")).run(ctx)
        elapsed = time.time() - started
    assert session.status == "timeout" and "wall-clock limit of 6s" in session.reason
    assert elapsed < 25  # neither the 60 s command nor the 30 s model reply was waited for
    output = [e.text for e in session.events if e.kind is EventKind.tool_output][0]
    assert "timed out" in output or "exit code 124" in output or "exit code 137" in output
