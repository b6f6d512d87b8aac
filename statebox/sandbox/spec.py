"""What a container is asked to run: the image, the command, the workspace, the mounts, the policy.

Kept apart from the engine (`docker.py`) and the hardening table (`hardening.py`) so both,
and any future sandbox provider, read the same typed request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from statebox.policies.model import Policy

WORKDIR = "/workspace"
HOME = "/home/agent"


class Mount(BaseModel):
    """An extra bind mount; read-only unless said otherwise (honeytokens, gateway socket dir, weights).

    A writable mount is agent-writable storage, so it must be a size-limited filesystem
    (`workspace.limited_folder`); `writer="statebox"` marks the rare folder only
    statebox's own fixed code writes to (training checkpoints), which is exempt.
    """

    model_config = ConfigDict(extra="forbid")

    source: Path
    target: str
    read_only: bool = True
    writer: Literal["agent", "statebox"] = "agent"


class ContainerSpec(BaseModel):
    """What to run and under which policy; the hardening itself is not negotiable here."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    image: str
    command: list[str] | str = Field(description="argv, or a string run with /bin/sh -c")
    workspace: Path | None = Field(default=None, description="host folder mounted rw at /workspace (the working directory)")
    policy: Policy
    env: dict[str, str] = Field(default_factory=dict, description="added to policy.env_allow; the host's is never inherited")
    mounts: list[Mount] = Field(default_factory=list)
    gpu: bool = False
    run_id: str = ""
    attempt_id: str = ""
    time_limit_s: float | None = Field(default=None, description="overrides policy.limits.time_limit_s")
    tty: bool = False  # only for a person at a terminal (`statebox sandbox run -- bash`)

    @field_validator("workspace", mode="before")
    @classmethod
    def _workspace_path(cls, value: object) -> object:
        """Accept a `Workspace` (anything with `.path`) as well as a plain folder."""
        return getattr(value, "path", value)

    def workspace_dir(self) -> Path | None:
        return Path(self.workspace) if self.workspace is not None else None


ContainerStatus = Literal["ok", "timeout", "oom", "error"]


class ContainerResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: ContainerStatus
    exit_code: int | None
    duration_s: float
    reason: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    truncated: bool = False
    gpu: bool = False


class ExecResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    duration_s: float = 0.0
