"""Shared set-up for the mllm and video-agent tests: a clip, a scripted model behind a real gateway,
and an AttemptContext as the harness would build it.

Only the remote model is replaced (by the scripted server speaking the real wire formats);
the official SDKs, the gateway (unix socket, token swap, logging) and vtools are real.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from statebox.attempt import AgentOptions, AttemptContext, SecretFacts
from statebox.agents.frames_accounting import request_images
from statebox.policies.model import Policy, load_policy
from statebox.sandbox.gateway import Gateway
from statebox.sandbox.workspace import Workspace, prepare_workspace
from statebox.schema import Attempt, Item, Query, Session
from statebox.testing.scripted_model import ScriptedModel, ScriptedModelServer

DECOY_KEY = "sk-DECOY-video-agents-0123456789abcdef"
QUESTION = "How many cubes are on the table at the end?"


def make_clip(path: Path) -> Path:
    """10 s at 10 fps, 320x240 (ffmpeg testsrc: every frame differs)."""
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=10",
                    "-t", "10", "-c:v", "libx264", "-pix_fmt", "yuv420p", str(path)], check=True)
    return path


@contextmanager
def scripted_gateway(script: list[Any]) -> Iterator[tuple[ScriptedModelServer, Gateway]]:
    """A scripted upstream (each request is its own conversation: turns are taken in order)."""
    model = ScriptedModel(script, index_mode="sequential", side_request=lambda req: False)
    with ScriptedModelServer(model) as server:
        env = {"ANTHROPIC_API_KEY": DECOY_KEY, "ANTHROPIC_BASE_URL": server.base_url,
               "OPENAI_API_KEY": DECOY_KEY, "OPENAI_BASE_URL": server.openai_base_url}
        with Gateway(env=env) as gateway:
            yield server, gateway


def make_item(answer_type: str = "number") -> Item:
    return Item(id="item-7", benchmark="vstat", video="secret_name.mp4", question=QUESTION, answer_type=answer_type)


def make_ctx(agent: str, tmp: Path, gateway: Gateway, clip: Path, *, options: AgentOptions,
             query_time: float | None = None, cut: bool = False, engine: Any = None) -> AttemptContext:
    """A context like the harness's; `cut=True` (or an engine) prepares the real de-identified workspace."""
    item = make_item()
    query = Query(index=0, time=query_time)
    policy = load_policy("default")
    if cut or engine is not None:  # the real de-identified workspace (owned by the container's user)
        workspace = prepare_workspace(item, query, clip, policy, root=tmp / "wsroot")
    else:
        folder = tmp / "ws"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(clip, folder / "a1b2c3.mp4")
        workspace = Workspace(path=folder, video_name="a1b2c3.mp4", instruction=QUESTION, query_time=query_time)
    attempt_dir = tmp / "attempt"
    attempt_dir.mkdir(parents=True, exist_ok=True)
    return AttemptContext(
        attempt=Attempt(run_id="run-1", agent=agent, item_id=item.id),
        item=item, query=query, attempt_dir=attempt_dir, policy=policy, options=options,
        secret=SecretFacts("secret_name.mp4", "secret_name", item.id, "ds"),
        workspace=workspace, gateway=gateway, engine=engine,
    )


def run_on_item(agent_cls: type, item: Item, query: Query, clip: Path, policy: Policy, options: AgentOptions,
                script: list[Any], tmp: Path) -> tuple[Session, list[Any]]:
    """One attempt of `agent_cls` on `item` in the real prepared workspace (named "clip.mp4" to the
    agent's secret facts), against a scripted model; asserts it ended ok and returns the session and
    the model requests the server received."""
    workspace = prepare_workspace(item, query, clip, policy, root=tmp / "ws")
    (tmp / "attempt").mkdir()
    try:
        with scripted_gateway(script) as (server, gateway):
            ctx = AttemptContext(attempt=Attempt(run_id="r", agent=agent_cls.name, item_id=item.id), item=item,
                                 query=query, attempt_dir=tmp / "attempt", policy=policy, options=options,
                                 secret=SecretFacts("clip.mp4", "clip", item.id, "ds"), workspace=workspace,
                                 gateway=gateway)
            session = agent_cls(options).run(ctx)
            requests = server.model.model_requests()
    finally:
        workspace.cleanup()
    assert session.status == "ok", session.reason
    return session, requests


def body_of(request: Any) -> dict[str, Any]:
    return request.body if isinstance(request.body, dict) else json.loads(request.body)


def image_times(request: Any) -> list[float]:
    """The timestamps labelling each image of a recorded request (NaN-free: every image must be labelled)."""
    found = request_images(body_of(request), request.api)
    return [image.times[0] if image.times else float("nan") for image in found.images]


def request_text(request: Any) -> str:
    return json.dumps(body_of(request))


def role_of(request: Any) -> str:
    text = request_text(request)
    for role in ("planner", "observer", "replanner", "synthesiser"):
        if f"Role: {role}." in text:
            return role
    return "?"
