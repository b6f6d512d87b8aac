"""The attempt kit: what one attempt is given, and the one way an agent reaches its model.

The harness builds an `AttemptContext` (the de-identified workspace, the policy, a
sandbox provider, the run's gateway, a host folder for the session's files) and hands
it to `Agent.run`. The agent never sees the original video path, the item id or the
dataset name: those stay in `AttemptContext.secret` for the auditor.

Every model-driven agent (the CLI agents, mllm, video-agent, react) opens its gateway
lease through `open_gateway`, which also owns the one provider rule (`provider_for`):
the agent's fixed provider wins (a CLI speaks one API), then an explicit
`--provider`, then the model name (claude-*/anthropic-* -> anthropic, anything else -> openai),
then anthropic.

Layering: this module sits below `agents/` and `tools/` and above `sandbox/`; the
harness imports it, nothing in `sandbox/` does.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from statebox.attempt_folder import GATEWAY_LOG
from statebox.errors import UserError
from statebox.policies.model import Budgets, Policy
from statebox.sandbox.provider import SandboxProvider
from statebox.sandbox.spec import Mount
from statebox.sandbox.workspace import Workspace
from statebox.schema import Attempt, Item, Query, Usage

if TYPE_CHECKING:  # the gateway pulls in httpx/h11; only agents that talk to a model need it
    from statebox.sandbox.gateway import Gateway, GatewayLease

Provider = Literal["anthropic", "openai"]
PROVIDERS: tuple[Provider, ...] = ("anthropic", "openai")


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
    # the gateway's model allow-list (globs) for this agent's leases, set by the harness plan
    # (harness/plan.py:pinned_models) and recorded in run.json; None or []: the policy's `budgets.models`
    allowed_models: list[str] | None = None


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
    workspace: Workspace | None = None  # de-identified host folder mounted at /workspace
    engine: SandboxProvider | None = None  # the run's sandbox provider, as this attempt sees it
    gateway: Gateway | None = None
    started_at: float = field(default_factory=time.time)
    dataset_items: list[Item] = field(default_factory=list)  # the whole dataset (chance baselines)
    videos_dir: Path | None = None  # host video root; only host-side baselines may read it

    @property
    def instruction(self) -> str:
        if self.workspace is None:
            return self.item.question
        return self.workspace.instruction


# ---------------------------------------------------------------- the provider rule


def provider_for_model(model: str) -> Provider:
    """Which provider serves a model name (claude-*/anthropic-* -> anthropic, everything else -> openai)."""
    return "anthropic" if model.lower().startswith(("claude", "anthropic")) else "openai"


def provider_for(options: AgentOptions, fixed: str | None = None) -> Provider:
    """The provider an agent's model talks to; the one rule of the whole product.

    `fixed`, the agent's own wire API, wins (a CLI speaks one API whatever the model is
    called, and a run's `--provider` applies to all its agents); then `options.provider`
    (checked); then the model name; then anthropic.
    """
    if fixed:
        if fixed not in PROVIDERS:  # an agent class's own constant: a typo is a bug, said in one line
            raise UserError(f"unknown provider {fixed!r} (anthropic | openai)")
        return fixed
    if options.provider:
        if options.provider not in PROVIDERS:
            raise UserError(f"unknown provider {options.provider!r} (anthropic | openai)")
        return options.provider
    if not options.model:
        return "anthropic"
    return provider_for_model(options.model)


# ---------------------------------------------------------------- the gateway session


def lease_budgets(ctx: AttemptContext) -> Budgets:
    """The policy's budgets with the run's pinned models (`options.allowed_models`) as the lease's
    model allow-list: `--model X` admits X and the agent's helper models, nothing else.

    An empty pin never widens the policy: it leaves the policy's own list in force."""
    pinned = ctx.options.allowed_models if ctx.options is not None else None
    if not pinned:
        return ctx.policy.budgets
    return ctx.policy.budgets.model_copy(update={"models": list(pinned)})


@dataclass
class GatewaySession:
    """One attempt's lease on the run's gateway, with the short folder its socket lives in.

    Unix socket paths cap at 108 bytes, so the socket is never under the attempt folder.
    `usage` and `exceeded` stay readable after `close()`.
    """

    lease: GatewayLease
    provider: Provider
    socket_dir: Path
    _closed: bool = field(default=False, repr=False)

    @property
    def usage(self) -> Usage:
        return self.lease.usage.model_copy()

    @property
    def exceeded(self) -> str | None:
        return self.lease.exceeded

    def mount(self) -> Mount:
        """The read-only bind mount that puts the socket at /run/statebox/gateway.sock in a container."""
        from statebox.sandbox.gateway import socket_mount  # the gateway pulls in httpx/h11; only agents that talk to a model need it

        return socket_mount(self.lease)

    def container_env(self, relay_port: int | None = None) -> dict[str, str]:
        """What points a client inside the container at this lease (Anthropic: the socket; OpenAI: the
        relay, on `relay_port`, default the gateway's DEFAULT_RELAY_PORT)."""
        from statebox.sandbox.gateway import DEFAULT_RELAY_PORT, container_env  # (see mount)

        return container_env(self.lease, self.provider, relay_port=DEFAULT_RELAY_PORT if relay_port is None else relay_port)

    def close(self) -> None:
        """Close the lease (cutting off any request in flight) and remove the socket folder; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.lease.close()
        finally:
            shutil.rmtree(self.socket_dir, ignore_errors=True)


@contextmanager
def open_gateway(ctx: AttemptContext, provider: Provider, agent: str = "this agent") -> Iterator[GatewaySession]:
    """Lease the run's gateway for one attempt: budgets and limits from the policy, the log at
    ATTEMPT_DIR/gateway.jsonl. Fails with one line, before any container, when no gateway was
    started or the provider has neither a key nor a base URL."""
    if ctx.gateway is None:
        raise UserError(f"{agent} talks to a model through the statebox gateway, but none was started")
    ctx.gateway.check_ready(provider)
    attempt_dir = Path(ctx.attempt_dir)
    attempt_dir.mkdir(parents=True, exist_ok=True)
    socket_dir = Path(tempfile.mkdtemp(prefix="sbx-gw-"))
    try:
        lease = ctx.gateway.lease(ctx.attempt.attempt_id, socket_dir, attempt_dir / GATEWAY_LOG,
                                  lease_budgets(ctx), limits=ctx.policy.gateway)
    except BaseException:
        shutil.rmtree(socket_dir, ignore_errors=True)
        raise
    session = GatewaySession(lease=lease, provider=provider, socket_dir=socket_dir)
    try:
        yield session
    finally:
        session.close()
