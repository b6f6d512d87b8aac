"""A run as Harbor trajectories: ATIF (Agent Trajectory Interchange Format), one file per attempt.

Which version: `ATIF-v1.4`, the version of Harbor's published RFC (docs/rfcs/0001-trajectory-
format.md, laude-institute/harbor). Every field written here exists in v1.4; later readers take
it as it is (harbor 0.25.0's `Trajectory` model accepts ATIF-v1.0 to v1.8). Why not the harbor
package's own models: harbor needs Python >= 3.12 and statebox runs on 3.11, so the schema is
mirrored below from the RFC (pydantic, `extra="forbid"`, with the RFC's rules as validators:
step ids sequential from 1, an observation's `source_call_id` names a tool call of its own step,
`model_name` / `reasoning_content` / `tool_calls` / `metrics` only on agent steps).

Layout: `OUT/<attempt_id>/agent/trajectory.json`, the place a Harbor trial folder keeps its
agent's trajectory (`<trial>/agent/trajectory.json`), so tools that walk Harbor job folders
find them. Each file is written as its attempt is read (temp file + rename): memory holds one
attempt.

Mapping of the conversation (`turns.py`): user / system turns are user / system steps; an
assistant turn is an agent step (message, reasoning_content, tool_calls, metrics when the model
call's tokens were recorded); tool results become the `observation` of the agent step that
called them (an output with no call of its own: an agent step with an empty message and an
observation whose `source_call_id` is null, as the RFC allows for non-tool actions). statebox's
own facts (item, dataset, truth, per-query score, audit verdict and findings, status) are the
root `extra.statebox`; each step's `extra.events` lists the events.jsonl seq numbers it came
from as [first, last] runs, so a finding's event number leads to its step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from statebox import __version__
from statebox.json_text import utf8_json
from statebox.replace_file import replace_file
from statebox.report.export.records import AttemptRecord, RunReader, iso_time
from statebox.report.export.turns import Turn, build_turns, read_events, seq_ranges

ATIF_VERSION: Final = "ATIF-v1.4"
TRAJECTORY_PATH = Path("agent") / "trajectory.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AtifAgent(_Strict):
    name: str
    version: str
    model_name: str | None = None
    extra: dict[str, Any] | None = None


class AtifToolCall(_Strict):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]


class AtifObservationResult(_Strict):
    source_call_id: str | None = None
    content: str | None = None


class AtifObservation(_Strict):
    results: list[AtifObservationResult]


class AtifMetrics(_Strict):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None


class AtifStep(_Strict):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    message: str
    reasoning_content: str | None = None
    tool_calls: list[AtifToolCall] | None = None
    observation: AtifObservation | None = None
    metrics: AtifMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _agent_only(self) -> "AtifStep":
        if self.source != "agent":
            for name in ("model_name", "reasoning_content", "tool_calls", "metrics"):
                if getattr(self, name) is not None:
                    raise ValueError(f"step {self.step_id}: {name} is only for agent steps")
        return self


class AtifFinalMetrics(_Strict):
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    total_steps: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None


class AtifTrajectory(_Strict):
    schema_version: Literal["ATIF-v1.4"] = ATIF_VERSION
    session_id: str
    agent: AtifAgent
    steps: list[AtifStep] = Field(min_length=1)
    notes: str | None = None
    final_metrics: AtifFinalMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _rules(self) -> "AtifTrajectory":
        for i, step in enumerate(self.steps, start=1):
            if step.step_id != i:
                raise ValueError(f"steps[{i - 1}].step_id is {step.step_id}, expected {i}")
            if step.observation is not None:
                ids = {c.tool_call_id for c in step.tool_calls or []}
                for result in step.observation.results:
                    if result.source_call_id is not None and result.source_call_id not in ids:
                        raise ValueError(f"step {i}: observation names {result.source_call_id!r}, not a call of this step")
        return self


def _steps(turns: list[Turn], started_at: float | None, model: str | None) -> list[AtifStep]:
    steps: list[AtifStep] = []
    attach_to: AtifStep | None = None  # the agent step that tool results can still join
    for turn in turns:
        stamp = iso_time(started_at + turn.time) if started_at is not None and turn.time is not None else None
        extra: dict[str, Any] = {"events": seq_ranges(turn.seqs)}
        if turn.role == "tool":
            ids = {c.tool_call_id for c in (attach_to.tool_calls or [])} if attach_to is not None else set()
            if attach_to is None or (turn.call_id and turn.call_id not in ids):
                attach_to = AtifStep(step_id=len(steps) + 1, timestamp=stamp, source="agent", message="", extra=extra)
                steps.append(attach_to)
                ids = set()
            else:
                attach_to.extra = {**(attach_to.extra or {}),
                                   "events": [*(attach_to.extra or {}).get("events", []), *seq_ranges(turn.seqs)]}
            result = AtifObservationResult(source_call_id=turn.call_id if turn.call_id in ids else None, content=turn.text)
            if attach_to.observation is None:
                attach_to.observation = AtifObservation(results=[])
            attach_to.observation.results.append(result)
            if turn.error:
                attach_to.extra = {**(attach_to.extra or {}),
                                   "failed_calls": [*(attach_to.extra or {}).get("failed_calls", []), turn.call_id or None]}
            continue
        if turn.role in ("system", "user"):
            steps.append(AtifStep(step_id=len(steps) + 1, timestamp=stamp, source=turn.role, message=turn.text, extra=extra))
            attach_to = None
            continue
        if turn.final:
            extra["final_answer"] = True
        step = AtifStep(
            step_id=len(steps) + 1, timestamp=stamp, source="agent", message=turn.text,
            model_name=model, reasoning_content=turn.reasoning or None,
            tool_calls=[AtifToolCall(tool_call_id=c.id, function_name=c.name, arguments=c.arguments) for c in turn.calls] or None,
            metrics=AtifMetrics(prompt_tokens=turn.usage[0], completion_tokens=turn.usage[1]) if turn.usage else None,
            extra=extra,
        )
        steps.append(step)
        attach_to = step
    return steps


def build_trajectory(record: AttemptRecord, model: str | None) -> AtifTrajectory:
    """One attempt as an ATIF trajectory (see the module docstring for the mapping)."""
    row = record.row
    started = record.started_at if row.finished_at else None
    steps = _steps(build_turns(read_events(record.events_path)), started, model)
    if not steps:  # an attempt that recorded nothing still has its question and its answer
        question = record.item.question if record.item is not None else ""
        steps = [AtifStep(step_id=1, source="user", message=question, extra={"events": []}),
                 AtifStep(step_id=2, source="agent", message=row.response, extra={"events": [], "final_answer": True})]
    statebox = {
        "run_id": row.run_id, "attempt_id": row.attempt_id, "item_id": row.item_id, "dataset": row.dataset,
        "bench": row.bench, "query_index": row.query_index, "epoch": row.epoch, "target": record.target,
        "response": row.response, "score": dict(row.metrics or {}), "status": row.status, "reason": row.reason,
        "verdict": row.verdict, "action": row.action, "findings": list(row.findings or []),
        "duration_s": row.duration_s, "frames_decoded": row.frames_decoded, "frames_model": row.frames_model,
        "trust": record.trust_facts,
    }
    return AtifTrajectory(
        session_id=row.attempt_id,
        agent=AtifAgent(name=row.agent, version=f"statebox {__version__}", model_name=model),
        steps=steps,
        notes="Exported by statebox from the attempt's host-written events.jsonl; extra.statebox holds the "
              "per-query score and the contamination audit verdict.",
        final_metrics=AtifFinalMetrics(
            total_prompt_tokens=int(row.input_tokens), total_completion_tokens=int(row.output_tokens),
            total_cost_usd=float(row.cost_usd), total_steps=len(steps),
        ),
        extra={"statebox": statebox},
    )


def write_atif(reader: RunReader, out: Path) -> int:
    """Write `OUT/<attempt_id>/agent/trajectory.json` for every stored attempt; returns how many."""
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for record in reader.records():
        trajectory = build_trajectory(record, reader.agent_model(record.row.agent))
        path = out / record.attempt_dir.name / TRAJECTORY_PATH
        path.parent.mkdir(parents=True, exist_ok=True)
        # readable text where it can be; a lone surrogate (valid JSON, the agent's output may hold one) escaped, not an
        # export ended by UnicodeEncodeError (`json_text.utf8_json`)
        replace_file(path, utf8_json(trajectory.model_dump(mode="json", exclude_none=True), indent=2) + b"\n")
        written += 1
    return written
