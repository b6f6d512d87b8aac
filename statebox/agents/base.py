"""The one protocol every agent implements, and the registry of agents by CLI name.

The context an attempt runs in (`AttemptContext`, `SecretFacts`, `AgentOptions`) is
`statebox/attempt.py`'s, below agents and tools: import it from there.
"""

from __future__ import annotations

import importlib
from typing import Protocol, runtime_checkable

from statebox.attempt import AgentOptions, AttemptContext
from statebox.errors import UserError
from statebox.schema import Session

__all__ = ["AGENT_MODULES", "Agent", "make_agent"]


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
    target = AGENT_MODULES.get(name)
    if target is None:
        raise UserError(f"unknown agent {name!r} (known: {', '.join(sorted(AGENT_MODULES))})")
    module_name, cls_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise UserError(f"agent {name!r} is not available in this build ({exc})") from exc
    return getattr(module, cls_name)(options or AgentOptions())
