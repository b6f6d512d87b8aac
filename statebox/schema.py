"""The data contracts every part of statebox agrees on.

Benchmarks produce `Item`s; the harness plans `Attempt`s; agents return a
`Session`; the auditor turns a session into a `Verdict`; the scorer turns
responses into `ScoreRow`s and a `ScoreReport`. These are the only shapes that
cross module boundaries, so they are pydantic models: a malformed value fails
loudly at the boundary instead of deep inside a metric.
"""

from __future__ import annotations

import hashlib
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from statebox.errors import UserError
from statebox.json_text import well_formed

BenchmarkName = Literal["vstat", "vcbench", "ecbench", "eocbench", "cpbench"]
BENCHMARKS: tuple[str, ...] = ("vstat", "vcbench", "ecbench", "eocbench", "cpbench")

AnswerType = Literal["mcq", "number", "text", "set", "interval"]


class Query(BaseModel):
    """One moment at which a question is asked.

    Streaming benchmarks (VCBench) ask the same question at several times, each
    answered from the video cut at `time`; other benchmarks have a single query
    whose `time` is None (the whole video).
    """

    model_config = ConfigDict(extra="forbid")

    index: int = 0
    time: float | None = None
    target: Any = None
    meta: dict[str, Any] = Field(default_factory=dict)


class Span(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start: float
    end: float


class MaskRLE(BaseModel):
    """A COCO run-length mask (`counts` compressed string or list of run lengths, `size` [h, w])."""

    model_config = ConfigDict(extra="forbid")

    counts: str | list[int]
    size: list[int] = Field(min_length=2, max_length=2)


class VisualPrompt(BaseModel):
    """How the question's `<object N>` is marked on the prompt frame (EOC-Bench's visual prompts).

    Any of box ([x0, y0, x1, y1] pixels, x1/y1 exclusive), point ([x, y] pixels) and mask
    (COCO RLE or polygons `[[x, y, x, y, ...], ...]`) as the annotation gives them; the
    workspace draws one of them (the policy's preference, else the one there is).
    """

    model_config = ConfigDict(extra="forbid")

    object: int = Field(ge=0)
    box: list[float] | None = Field(default=None, min_length=4, max_length=4)
    point: list[float] | None = Field(default=None, min_length=2, max_length=2)
    mask: MaskRLE | list[list[float]] | None = None

    @property
    def kinds(self) -> list[str]:
        return [k for k in ("box", "point", "mask") if getattr(self, k) is not None]


class Item(BaseModel):
    """One benchmark question about one video, with everything needed to score it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    benchmark: str
    video: str  # path as given by the annotation file (relative to a video root, or absolute)
    question: str
    choices: list[str] = Field(default_factory=list)
    answer_type: AnswerType
    target: Any = None
    queries: list[Query] = Field(default_factory=lambda: [Query()])
    evidence: list[Span] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)
    prompts: list[VisualPrompt] = Field(default_factory=list)  # marks drawn on the prompt frame (EOC-Bench)
    transcript: str | None = None  # timestamped speech transcript the benchmark ships (EC-Bench), if any

    @property
    def is_streaming(self) -> bool:
        return any(q.time is not None for q in self.queries)


class Attempt(BaseModel):
    """One agent answering one query of one item, once (an epoch)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    agent: str
    item_id: str
    query_index: int = 0
    epoch: int = 0
    dataset: str = ""  # the dataset (annotation file) label inside a run

    @property
    def attempt_id(self) -> str:
        """A stable, filesystem-safe id: the same attempt always maps to the same folder/row."""
        raw = f"{self.run_id}|{self.dataset}|{self.agent}|{self.item_id}|{self.query_index}|{self.epoch}"
        digest = hashlib.sha256(raw.encode()).hexdigest()[:16]
        safe_agent = "".join(c if c.isalnum() or c in "-_" else "-" for c in self.agent)
        return f"{safe_agent}-{digest}"


class EventKind(str, Enum):
    """Kinds of session events; the auditor reads these, whatever agent produced them."""

    model_request = "model_request"
    model_response = "model_response"
    model_text = "model_text"
    tool_call = "tool_call"
    tool_output = "tool_output"
    shell_command = "shell_command"
    file_read = "file_read"
    file_write = "file_write"
    network_attempt = "network_attempt"
    message = "message"
    frames = "frames"  # frames decoded or sent to a model (frame accounting)
    final_answer = "final_answer"
    error = "error"


# The kinds that are the agent's own actions (what it ran, read, wrote, reached), as opposed to what it said or was
# shown: the auditor's rules and the gateway reader's "did this reply act" both ask this one set.
ACTION_KINDS = frozenset({EventKind.tool_call, EventKind.shell_command, EventKind.file_read, EventKind.file_write,
                          EventKind.network_attempt})


class Event(BaseModel):
    """One normalised thing that happened in a session, with a pointer to its raw source line."""

    model_config = ConfigDict(extra="allow")

    seq: int
    kind: EventKind
    time: float | None = None  # seconds since the attempt started, when known
    source: str = ""  # which raw log it came from, e.g. "claude.stream.jsonl"
    line: int | None = None  # 1-based line in that raw log
    text: str = ""  # the human-readable payload (command, message text, output)
    data: dict[str, Any] = Field(default_factory=dict)


AttemptStatus = Literal["ok", "timeout", "error", "oom", "voided", "abstain"]


class FrameAccount(BaseModel):
    """Which frames an attempt decoded and which it showed to a model (none of the anchors has this)."""

    model_config = ConfigDict(extra="forbid")

    decoded: list[float] = Field(default_factory=list)  # timestamps (s)
    model_visible: list[float] = Field(default_factory=list)  # timestamps (s) sent as images
    images_sent: int = 0


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    requests: int = 0


# data key of the `error` event a line of an agent's stream leaves when statebox failed to record it (its exception's
# type; agents/cli_common.LiveStream): the auditor flags the attempt (`audit_limit`), since what the line held is in
# no event
UNREAD_LINE = "statebox_unread_line"
# data key of the event a reader makes of model I/O of a type it does not read (sessions.unread_draft): the type's name;
# the auditor flags the session (`audit_limit`), since what such an item did is unjudged
UNREAD_ITEM = "statebox_unread_item"


class Session(BaseModel):
    """The normalised record of one attempt: what happened and what the agent answered."""

    model_config = ConfigDict(extra="forbid")

    attempt_id: str
    agent: str
    status: AttemptStatus = "ok"
    reason: str = ""  # why the status is not ok, one line
    response: str = ""  # the final response text handed to the scorer
    events: list[Event] = Field(default_factory=list)
    raw_logs: list[str] = Field(default_factory=list)  # file names (in the attempt dir) of raw logs
    frames: FrameAccount = Field(default_factory=FrameAccount)
    usage: Usage = Field(default_factory=Usage)
    started_at: float = 0.0
    duration_s: float = 0.0
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("response", "reason")
    @classmethod
    def _text(cls, value: str) -> str:
        """Text every writer takes: an unpaired surrogate (a CLI's final message is JSON, `"\\ud800"` valid in it)
        as U+FFFD. Before, response.txt could not be written and the attempt failed with a UnicodeEncodeError."""
        return well_formed(value)[0]


Severity = Literal["low", "medium", "high", "proof"]
FindingCategory = Literal[
    "self_recognition",
    "filesystem_walk",
    "network",
    "local_cache",
    "env_dump",
    "qa_metadata",
    "original_filename",
    "honeytoken",
    "audit_limit",  # a session past the auditor's limits, read in part (audits/session_limits.py)
]
VerdictLabel = Literal["clean", "suspicious", "contaminated"]


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid")

    category: FindingCategory
    severity: Severity
    event: int | None = None  # Event.seq that proves it
    quote: str = ""
    rule: str = ""


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    attempt_id: str
    verdict: VerdictLabel = "clean"
    findings: list[Finding] = Field(default_factory=list)
    action: Literal["none", "flag", "void"] = "none"


class ScoreRow(BaseModel):
    """The scorer's view of one answered query."""

    model_config = ConfigDict(extra="forbid")

    item_id: str
    query_index: int = 0
    parsed: Any = None
    parse_ok: bool = True
    metrics: dict[str, float] = Field(default_factory=dict)
    status: AttemptStatus = "ok"
    duration_s: float = 0.0
    tokens: int = 0
    cost_usd: float = 0.0


class GroupScore(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n: int
    metrics: dict[str, float | None]


class ScoreReport(BaseModel):
    """What `statebox score --json` prints; a contract outside checks depend on."""

    model_config = ConfigDict(extra="allow")

    benchmark: str
    n: int
    metrics: dict[str, float | None]
    groups: dict[str, GroupScore] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


class Prediction(BaseModel):
    """One line of a predictions JSONL file given to `statebox score`."""

    model_config = ConfigDict(extra="allow")

    id: str
    query_index: int | None = None
    response: str = ""
    clips: str | None = None


def video_path_problem(video: str) -> str | None:
    """Why an item's video path may not name a file (None: it may): an empty path, or one with a `..` component.

    Why: an annotation file comes from anywhere (a release, a colleague's folder, a tarball), and the video it names
    is looked for under the videos folder; in a cluster run each node writes its copy of the video under its own
    cache at that same relative path (`cluster_worker.materialise_video`). A `..` climbed out of both: the head read a
    host file outside the videos folder as the video, and every node wrote the video's bytes outside its cache. An
    absolute path stays the user's choice (the annotation names the file itself; a node keeps only its name)."""
    if not video.strip():
        return "is empty"
    if "\x00" in video:
        return "holds a NUL byte"
    if ".." in PurePosixPath(video).parts:
        return "leaves the videos folder ('..')"
    return None


def resolve_video(item: Item, videos_dir: Path | None) -> Path:
    """Where an item's video lives on the host (annotation paths are relative to a video root).

    VCBench's release lays its videos out as `{root}/{source_dataset}/{video_path}` (the
    annotation names only the file), so for an item with a `source_dataset` that nested path
    is used when it exists; a flat folder (every video directly under the root, as the
    generated suite writes them) works too. A path `video_path_problem` refuses is a UserError, whoever made the item.
    """
    problem = video_path_problem(item.video)
    if problem is not None:
        raise UserError(f"item {item.id}: video path {item.video!r} {problem}")
    path = Path(item.video)
    if path.is_absolute() or videos_dir is None:
        return path
    source = item.meta.get("source_dataset") if item.benchmark == "vcbench" else None
    if isinstance(source, str) and source and "/" not in source and source not in (".", ".."):
        nested = videos_dir / source / path
        if nested.exists():
            return nested
    return videos_dir / path
