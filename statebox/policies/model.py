"""The policy profile: every limit and switch an attempt runs under, validated at load time.

Profiles are YAML files (`default.yaml`, `strict.yaml` beside this module, or a
user's own path). The sandbox reads the limits, the gateway the model
allow-list and budgets, the auditor the honeytoken switch and the actions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from statebox.errors import UserError
from statebox.userfiles import POLICY_MAX_BYTES, read_user_text

POLICY_DIR = Path(__file__).parent


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    time_limit_s: float = Field(default=1800, gt=0, description="wall-clock limit, enforced from the host")
    cpus: float = Field(default=1.0, gt=0)
    memory_mb: int = Field(default=2048, ge=64, description="hard limit, no swap")
    gpu_memory_mb: int = Field(default=8192, ge=64, description="memory limit of a container given a GPU (the tracker): "
                                       "CUDA's libraries and context take gigabytes of host memory; the larger of the two applies")
    pids: int = Field(default=256, ge=16)
    tmp_mb: int = Field(default=512, ge=16, description="tmpfs size of /tmp")
    home_mb: int = Field(default=256, ge=16, description="tmpfs size of the agent's home")
    workspace_mb: int = Field(default=1024, ge=1, description="what the agent may write in /workspace: a tmpfs of this size "
                                                               "(ENOSPC past it); its pages count against memory_mb, so keep it below")
    inodes: int = Field(default=20_000, ge=64, description="files + folders the agent may create in each writable filesystem "
                                                            "(/workspace, /tmp, home): nr_inodes of their tmpfs")


class Recording(BaseModel):
    """Hard caps on what an attempt may make the host write or hold (statebox/capped_log.py).

    Every file an agent's output reaches (events.jsonl, claude.stream.jsonl, codex.jsonl,
    stdout.log, stderr.log, ...) stops at its cap with one `cap_reached` marker, and the
    host keeps in memory at most `session_events` events (head and tail) of a session.
    """

    model_config = ConfigDict(extra="forbid")

    event_bytes: int = Field(default=16 * 1024, ge=1024, description="one events.jsonl line; longer text/data is clipped to fit")
    events_bytes: int = Field(default=32 * 1024 * 1024, ge=64 * 1024, description="events.jsonl, per attempt")
    raw_line_bytes: int = Field(default=1024 * 1024, ge=1024,
                                        description="one line of a raw log, and the most a live parser is handed at once")
    raw_log_bytes: int = Field(default=64 * 1024 * 1024, ge=64 * 1024, description="each raw log, per attempt")
    exec_output_bytes: int = Field(default=64 * 1024 * 1024, ge=64 * 1024,
                                           description="stdout (and stderr) one `docker exec` tool call may return")
    session_events: int = Field(default=10_000, ge=100, description="events a Session keeps in memory (first and last)")


class Budgets(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: list[str] = Field(default_factory=list, description="allowed model names (glob); empty = any")
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = 2_000_000
    max_cost_usd: float | None = None
    max_requests: int | None = 500
    max_steps: int = 50  # for agents that run a loop on the host (react, video-agent)
    prices_per_mtok: dict[str, tuple[float, float]] = Field(
        default_factory=dict, description="USD per million (input, output) tokens by model-name prefix, on top of "
        "the gateway's table; a cost budget refuses a model with no price")


class GatewayLimits(BaseModel):
    """What one attempt may throw at the model gateway (per lease); see statebox/sandbox/gateway.py."""

    model_config = ConfigDict(extra="forbid")

    max_body_mb: float = Field(default=8.0, gt=0, description="largest request body (images included); more is 413")
    max_connections: int = Field(default=16, ge=1, description="connections open at once; more are refused")
    max_requests_per_s: float = Field(default=20.0, gt=0, description="sustained request rate (burst of one second's worth)")
    max_header_kb: int = Field(default=64, ge=4, description="largest request head (request line + headers)")
    max_headers: int = Field(default=100, ge=8, description="most header lines in one request")
    request_timeout_s: float = Field(default=120.0, gt=0, description="from a request's first byte to its last")
    idle_timeout_s: float = Field(default=300.0, gt=0, description="a keep-alive connection with no request is closed; "
                                          "also the longest a reply waits on a client that stops reading")
    max_log_mb: float = Field(default=64.0, gt=0, description="largest gateway.jsonl of one attempt; at the cap the log ends "
                                      "with a marker and model access is cut (no request goes unlogged)")


class AuditPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    honeytokens: bool = True
    on_suspicious: Literal["none", "flag", "void"] = "flag"
    on_contaminated: Literal["none", "flag", "void"] = "void"
    llm_second_pass: bool = False
    llm_model: str | None = None


class Media(BaseModel):
    """What the workspace holds besides the video and the question (issue 17)."""

    model_config = ConfigDict(extra="forbid")

    audio: Literal["keep", "drop"] = Field(default="keep", description="the video's audio track (metadata stripped either "
                                                   "way); EC-Bench's speech/audio questions need it")
    visual_prompt: Literal["box", "point", "mask"] = Field(
        default="box", description="EOC-Bench: which annotated prompt marks each object on the prompt frame (box is the "
        "paper's default); an object without that kind gets the one it has")
    transcripts: bool = Field(default=False, description="put the benchmark's shipped speech transcript (EC-Bench "
                                      "transcript.csv) in the workspace as transcript.txt")


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    limits: Limits = Field(default_factory=Limits)
    env_allow: dict[str, str] = Field(
        default_factory=lambda: {"HOME": "/home/agent", "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
        description="the container's whole environment (never inherited from the host)",
    )
    prohibitions: str = ""
    budgets: Budgets = Field(default_factory=Budgets)
    gateway: GatewayLimits = Field(default_factory=GatewayLimits)
    audit: AuditPolicy = Field(default_factory=AuditPolicy)
    recording: Recording = Field(default_factory=Recording)
    reencode: bool = False
    gpu: Literal["auto", "never", "require"] = "auto"

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu_alias(cls, value: object) -> object:
        """`required` reads as `require` (both spellings are in use)."""
        return "require" if value == "required" else value
    media: Media = Field(default_factory=Media)


def load_policy(name_or_path: str | Path = "default") -> Policy:
    """Load a built-in profile by name or a YAML file by path; bad input is one clear line."""
    path = Path(name_or_path)
    if not path.suffix:
        path = POLICY_DIR / f"{name_or_path}.yaml"
        if not path.exists():
            known = ", ".join(sorted(p.stem for p in POLICY_DIR.glob("*.yaml")))
            raise UserError(f"unknown policy {name_or_path!r} (built-in: {known})")
    if not path.exists():
        raise UserError(f"{path}: policy file not found")
    text = read_user_text(path, what="policy", max_bytes=POLICY_MAX_BYTES)  # regular file, capped (userfiles.py)
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else "?"
        raise UserError(f"{path}:{line}: not valid YAML") from exc
    if not isinstance(raw, dict):
        raise UserError(f"{path}: a policy must be a mapping")
    raw.setdefault("name", path.stem)
    try:
        return Policy.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UserError(f"{path}: {where}: {first['msg']}") from exc
