"""The one protocol every agent implements, and the context an attempt runs in.

The harness prepares everything an attempt needs (a de-identified workspace,
the policy, a gateway lease for model traffic, a folder on the host for the
session's files) and hands it to `Agent.run`. The agent returns a `Session`;
it never sees the original video path, the item id or the dataset name — those
stay in `AttemptContext.secret` for the auditor.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from statebox.policies.model import Policy
from statebox.schema import Attempt, Item, Query, Session

if TYPE_CHECKING:  # pragma: no cover
    from statebox.sandbox.docker import SandboxEngine
    from statebox.sandbox.gateway import Gateway
    from statebox.sandbox.workspace import Workspace


class AgentOptions(BaseModel):
    """Options a user sets on the command line for an agent."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    provider: str | None = None  # "anthropic" | "openai"; inferred from the model name when None
    effort: str | None = None  # reasoning effort / thinking budget, agent-specific meaning
    prompt_template: str | None = None  # path to a template file; None = built-in
    frames: int | None = None  # mllm: N uniform frames
    fps: float | None = None  # mllm: frames per second instead of N
    timestamps: bool = True  # mllm/video-agent: show timestamps with frames
    weights: str | None = None  # tracker: weights file
    extra: dict[str, Any] = Field(default_factory=dict)


@dataclass
class SecretFacts:
    """What identifies the original video; known to the host and auditor, never to the agent."""

    original_name: str
    original_stem: str
    item_id: str
    dataset: str
    honeytoken_values: list[str] = field(default_factory=list)
    honeytoken_paths: list[str] = field(default_factory=list)


@dataclass
class AttemptContext:
    """Everything one attempt needs; built by the harness, consumed by one agent."""

    attempt: Attempt
    item: Item
    query: Query
    attempt_dir: Path  # host folder for this attempt's session files (raw logs, gateway log)
    policy: Policy
    options: AgentOptions
    secret: SecretFacts
    workspace: "Workspace | None" = None  # de-identified host folder mounted at /workspace
    engine: "SandboxEngine | None" = None
    gateway: "Gateway | None" = None
    started_at: float = field(default_factory=time.time)
    dataset_items: list[Item] = field(default_factory=list)  # the whole dataset (chance baselines)
    videos_dir: Path | None = None  # host video root; only host-side baselines may read it

    @property
    def instruction(self) -> str:
        if self.workspace is None:
            return self.item.question
        return self.workspace.instruction


@runtime_checkable
class Agent(Protocol):
    """An agent answers one query of one item and reports what it did."""

    name: str
    needs_sandbox: bool  # runs (or runs its tools) inside a Docker sandbox
    needs_gateway: bool  # talks to a model through the host gateway

    def run(self, ctx: AttemptContext) -> Session:
        """Answer the query; never raise for agent misbehaviour (return a Session with status)."""
        ...


AGENT_MODULES: dict[str, str] = {
    "claude-code": "statebox.agents.claude_code:ClaudeCodeAgent",
    "codex": "statebox.agents.codex:CodexAgent",
    "react": "statebox.agents.react:ReactAgent",
    "video-agent": "statebox.agents.video_agent:VideoAgent",
    "mllm": "statebox.agents.mllm:MllmAgent",
    "tracker": "statebox.agents.tracker:TrackerAgent",
    "chance-random": "statebox.agents.baselines:ChanceRandomAgent",
    "chance-frequency": "statebox.agents.baselines:ChanceFrequencyAgent",
    "oracle": "statebox.agents.baselines:OracleAgent",
    "scripted-cheater": "statebox.agents.scripted:ScriptedCheaterAgent",
    "shell": "statebox.agents.scripted:ShellAgent",
    "claude-code-scripted": "statebox.agents.scripted:ScriptedClaudeCodeAgent",
}


def make_agent(name: str, options: AgentOptions | None = None) -> Agent:
    """Instantiate an agent by its CLI name; an unknown name is a user error."""
    import importlib

    from statebox.errors import UserError

    target = AGENT_MODULES.get(name)
    if target is None:
        raise UserError(f"unknown agent {name!r} (known: {', '.join(sorted(AGENT_MODULES))})")
    module_name, cls_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise UserError(f"agent {name!r} is not available in this build ({exc})") from exc
    return getattr(module, cls_name)(options or AgentOptions())
