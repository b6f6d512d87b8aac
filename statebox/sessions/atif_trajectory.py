"""Harbor's ATIF trajectories (`<trial>/agent/trajectory.json`) -> normalised events.

Why reading models of its own rather than the writer's (`report/export/atif.py`): the writer's
models are strict on purpose (`extra="forbid"`, `schema_version` exactly `ATIF-v1.4`, so statebox
never writes anything the RFC does not define), while a reader must take what Harbor's agents
write, ATIF-v1.0 to v1.8 (harbor 0.25.0 accepts that range), later fields included; and the layer
rules keep `sessions` below `harness`. The fields read here are the RFC's own names (the same ones
the writer mirrors): a trajectory's `session_id`, `agent`, `steps`, `extra`; a step's `source`
(system / user / agent), `message`, `reasoning_content`, `tool_calls` (`tool_call_id`,
`function_name`, `arguments`), `observation.results` (`source_call_id`, `content`), `extra`.

Mapping: system / user steps are prompt messages; an agent step's reasoning and message are the
model's text, its tool calls go through `tool_calls.tool_call_drafts` (so Terminus's
`bash_command {keystrokes}`, Claude Code's `Bash {command}`, Codex's `shell {command: [argv]}` are
all shell commands), its observation results are what the agent saw. The final answer is the step
statebox's export marks `extra.final_answer`, else the last agent message after the last tool call.
An event's line is its step id, so a finding names the step that proves it.

Subagents (ATIF >= 1.7): a trajectory may hold the trajectories of the subagents it started
(`subagent_trajectories`, each with its own `trajectory_id` and steps, nested), and an observation result may point
at one (`subagent_trajectory_ref`: `trajectory_id` / `session_id`, or `trajectory_path` to a file of its own). What
a subagent did is the agent's doing: `subagent_drafts` reads every embedded one, each step marked `subagent`; its
system and user steps are what it was handed (the task the agent wrote for it), never a prompt that excuses
(`subagent_task`), and none of its messages is the final answer. Depth and size are bounded before any model is
made (`parse_trajectory`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from statebox.json_text import json_value
from statebox.schema import EventKind
from statebox.sessions import EventDraft, clip, unread_draft
from statebox.sessions.tool_calls import output_draft, tool_call_drafts


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AtifToolCallIn(_Lenient):
    tool_call_id: str = ""
    function_name: str = ""
    arguments: dict[str, Any] | str | None = None


class AtifSubagentRefIn(_Lenient):
    session_id: str | None = None
    trajectory_id: str | None = None
    trajectory_path: str | None = None


class AtifResultIn(_Lenient):
    source_call_id: str | None = None
    content: str | list[dict[str, Any]] | None = None
    # a list since ATIF-v1.7, one object before it
    subagent_trajectory_ref: list[AtifSubagentRefIn] | AtifSubagentRefIn | None = None

    def refs(self) -> list[AtifSubagentRefIn]:
        ref = self.subagent_trajectory_ref
        return [] if ref is None else [ref] if isinstance(ref, AtifSubagentRefIn) else ref


class AtifObservationIn(_Lenient):
    results: list[AtifResultIn] = Field(default_factory=list)


class AtifStepIn(_Lenient):
    step_id: int = 0
    source: str = "agent"
    message: str | list[dict[str, Any]] | None = None
    reasoning_content: str | None = None
    tool_calls: list[AtifToolCallIn] | None = None
    observation: AtifObservationIn | None = None
    extra: dict[str, Any] | None = None


class AtifAgentIn(_Lenient):
    name: str = ""
    version: str | None = None
    model_name: str | None = None


class AtifTrajectoryIn(_Lenient):
    schema_version: str = ""
    session_id: str = ""
    trajectory_id: str = ""
    agent: AtifAgentIn = Field(default_factory=AtifAgentIn)
    steps: list[AtifStepIn] = Field(default_factory=list)
    extra: dict[str, Any] | None = None
    subagent_trajectories: list["AtifTrajectoryIn"] = Field(default_factory=list)

    def embedded(self) -> list["AtifTrajectoryIn"]:
        """Every subagent trajectory it holds, nested ones included, depth first in order."""
        out: list[AtifTrajectoryIn] = []
        for sub in self.subagent_trajectories:
            out.append(sub)
            out.extend(sub.embedded())
        return out

    def refs(self) -> list[AtifSubagentRefIn]:
        """The subagent references of its own steps' observation results (not of its embedded subagents')."""
        return [ref for step in self.steps for result in (step.observation.results if step.observation else [])
                for ref in result.refs()]


# the versions this reader knows (harbor 0.25.0 accepts this range): a later one may hold steps' fields it does not read
KNOWN_VERSIONS = frozenset(f"ATIF-v1.{minor}" for minor in range(9))
MAX_SUBAGENT_DEPTH = 16  # nested subagent trajectories read; deeper ones are cut and said (a document may nest 1,000)


def looks_like_atif(obj: Any) -> bool:
    return isinstance(obj, dict) and str(obj.get("schema_version", "")).startswith("ATIF") and isinstance(obj.get("steps"), list)


def text_of(content: str | list[dict[str, Any]] | None) -> str:
    """A message or result: a string, or (ATIF >= 1.6) content parts, of which text is kept."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif part.get("type") in ("image", "image_url"):
            parts.append("[image]")
    return "\n".join(parts)


def step_drafts(trajectory: AtifTrajectoryIn, subagent: str | None = None) -> list[tuple[int, EventDraft]]:
    """Every step's events, each with its step id as line (see the module docstring); `subagent`: the steps are that
    subagent's (each marked so, its system and user steps `subagent_task`, no final answer among them)."""
    out: list[tuple[int, EventDraft]] = []
    if subagent is None and trajectory.schema_version not in KNOWN_VERSIONS:
        # fields a later version adds (a new kind of step content, of tool call) would be read as nothing: flagged
        out.append((0, unread_draft("an ATIF trajectory of a version this reader does not know,", trajectory.schema_version,
                                    {"schema_version": trajectory.schema_version})))
    marked_final = False
    last_text: tuple[int, str] | None = None
    for step in trajectory.steps:
        line = step.step_id
        message = text_of(step.message)
        if step.source in ("system", "user"):
            if message:
                data: dict[str, Any] = {"role": step.source, "step": line}
                if subagent is not None:
                    data.update(subagent=subagent, subagent_task=True)
                out.append((line, EventDraft(EventKind.message, clip(message), data)))
            continue
        if step.reasoning_content:
            out.append((line, EventDraft(EventKind.model_text, clip(step.reasoning_content), {"thinking": True, "step": line})))
        final = bool((step.extra or {}).get("final_answer")) and subagent is None
        if message:
            kind = EventKind.final_answer if final else EventKind.model_text
            out.append((line, EventDraft(kind, clip(message), {"step": line})))
            marked_final = marked_final or final
            last_text = (line, message)
        for call in step.tool_calls or []:
            out.extend((line, d) for d in tool_call_drafts(call.function_name, call.arguments, call.tool_call_id, step=line))
            last_text = None
        for result in (step.observation.results if step.observation else []):
            out.append((line, output_draft(text_of(result.content), result.source_call_id or "", step=line)))
            last_text = None if step.tool_calls else last_text
    if subagent is not None:
        return [(line, EventDraft(d.kind, d.text, {**d.data, "subagent": subagent})) for line, d in out]
    if not marked_final and last_text is not None:
        out.append((last_text[0], EventDraft(EventKind.final_answer, clip(last_text[1]), {"from": "last agent message"})))
    return out


def subagent_name(trajectory: AtifTrajectoryIn, index: int) -> str:
    return trajectory.trajectory_id or trajectory.session_id or f"subagent-{index}"


def subagent_drafts(trajectory: AtifTrajectoryIn) -> list[tuple[str, list[tuple[int, EventDraft]]]]:
    """(name, its steps' events) of every subagent trajectory `trajectory` holds, nested ones included."""
    return [(name, step_drafts(sub, name)) for index, sub in enumerate(trajectory.embedded(), start=1)
            for name in [subagent_name(sub, index)]]


def parse_trajectory(raw: bytes | str, max_steps: int | None = None, cut: list[str] | None = None) -> tuple[AtifTrajectoryIn, int]:
    """A trajectory document and how many steps it holds; a malformed one raises ValueError (the caller names the
    file). `max_steps`: only the first ones are made models (each step's models and events are what a long
    trajectory costs: 200,000 small steps took 1.6 GB), its embedded subagents' steps counted with its own (those
    nearer the top first), and no subagent nested deeper than MAX_SUBAGENT_DEPTH; what was cut is told to `cut`."""
    value = json_value(raw)
    if not looks_like_atif(value):
        raise ValueError("not an ATIF trajectory (no schema_version 'ATIF-...' with steps)")
    steps = value["steps"]
    held = len(steps)
    if max_steps is not None and held > max_steps:
        value["steps"] = steps[:max_steps]
    _bound_subagents(value, max_steps - len(value["steps"]) if max_steps is not None else None, cut)
    return AtifTrajectoryIn.model_validate(value), held


def _bound_subagents(value: dict[str, Any], budget: int | None, cut: list[str] | None) -> None:
    """Cut the embedded subagent trajectories of `value` (in place) to `budget` steps in all and MAX_SUBAGENT_DEPTH
    levels, the subagents of a trajectory before theirs; anything not a trajectory-shaped object among them is
    dropped as none of ATIF's (it holds no steps to read)."""
    dropped_steps = dropped_deep = 0
    stack: list[tuple[dict[str, Any], int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        subs = node.get("subagent_trajectories")
        if subs is None:
            continue
        if not isinstance(subs, list) or depth >= MAX_SUBAGENT_DEPTH:
            dropped_deep += len(subs) if isinstance(subs, list) else 1
            node["subagent_trajectories"] = []
            continue
        kept = [sub for sub in subs if isinstance(sub, dict) and isinstance(sub.get("steps"), list)]
        for sub in kept:
            if budget is not None:
                take = max(0, min(budget, len(sub["steps"])))
                dropped_steps += len(sub["steps"]) - take
                sub["steps"] = sub["steps"][:take]
                budget -= take
        node["subagent_trajectories"] = kept
        stack.extend((sub, depth + 1) for sub in reversed(kept))
    if cut is not None and dropped_steps:
        cut.append(f"{dropped_steps} steps of its subagents' trajectories not read (past the steps read of one session)")
    if cut is not None and dropped_deep:
        cut.append(f"{dropped_deep} subagent trajectories nested deeper than {MAX_SUBAGENT_DEPTH} not read")
