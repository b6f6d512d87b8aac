"""One recorded model turn, and the failures that end a host-driven agent's attempt.

mllm, blind and video-agent each recorded a model call the same way (request, usage,
response, final answer) and each turned a model or vtools failure into an `error` status
with the same event; one copy keeps their sessions alike, so the auditor, the report and
the exports read every host-driven agent the same way. An `InfrastructureError` is never
caught here: the harness retries it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from statebox.agents.video_prompts import extract_answer
from statebox.agents.vision_client import ModelError, Part, VisionClient
from statebox.attempt import AttemptContext
from statebox.attempt_folder import GATEWAY_LOG
from statebox.recorder import SessionRecorder
from statebox.schema import AttemptStatus, EventKind, Session, Usage
from statebox.tools.video_tools import VtoolsError


@dataclass
class AttemptOutcome:
    """How the attempt ended: `ok`, or `error` with the one-line reason the session carries."""

    status: AttemptStatus = "ok"
    reason: str = ""


@contextmanager
def failures_end_the_attempt(rec: SessionRecorder) -> Iterator[AttemptOutcome]:
    """A model or vtools failure inside the block ends the attempt as `error`, recorded as one event."""
    outcome = AttemptOutcome()
    try:
        yield outcome
    except ModelError as exc:
        outcome.status, outcome.reason = "error", f"model: {exc}"
        rec.add(EventKind.error, outcome.reason)
    except VtoolsError as exc:
        outcome.status, outcome.reason = "error", f"vtools: {exc}"
        rec.add(EventKind.error, outcome.reason)


def ask_for_answer(rec: SessionRecorder, client: VisionClient, parts: Sequence[Part], text: str,
                   request_data: dict[str, object], shown: list[float] | None = None) -> str:
    """Ask once, record the request (and the frame times `shown` to the model), usage and reply,
    and record the answer its last line gives."""
    rec.add(EventKind.model_request, text, data=request_data)
    if shown is not None:
        rec.add_frames(model_visible=shown)
    reply = client.ask(list(parts))
    rec.add_usage(reply.input_tokens, reply.output_tokens)
    rec.add(EventKind.model_response, reply.text,
            data={"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
                  "stop_reason": reply.stop_reason})
    response = extract_answer(reply.text)
    rec.add(EventKind.final_answer, response)
    return response


def model_session(ctx: AttemptContext, agent: str, rec: SessionRecorder, outcome: AttemptOutcome, response: str,
                  usage: Usage, meta: dict[str, object]) -> Session:
    """The attempt's session: its raw log is the gateway's, where every model request of the attempt is."""
    return rec.session(ctx.attempt.attempt_id, agent, status=outcome.status, reason=outcome.reason,
                       response=response, raw_logs=[GATEWAY_LOG], usage=usage, meta=meta)
