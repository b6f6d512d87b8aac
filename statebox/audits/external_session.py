"""One session of another harness, normalised, and the facts about it the log lacks (`--items FILE`).

Every reader (`inspect_logs`, `harbor_trials`, `cli_session_files`) gives `ExternalSession`s: events numbered as
statebox numbers them, the names `--items` may call the session by, and what the log recorded beside it. `--items`
(JSONL, one object per session: `session` | `sample` | `id`, and `question`, `original_name`, `item_id`, optionally
`honeytoken_values` / `honeytoken_paths`) wins where it names a field: the auditor's own facts over the log's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from statebox.audits.events import AttemptFacts, AuditLog, new_event
from statebox.audits.log_files import read_capped
from statebox.errors import DataError
from statebox.json_text import jsonl_lines
from statebox.schema import Event
from statebox.sessions import EventDraft

MAX_ITEMS_BYTES = 64 * 1024**2


class SessionFacts(BaseModel):
    """One line of `--items`: which session, and what the auditor knows about its item."""

    model_config = ConfigDict(extra="forbid")

    session: str | None = None
    sample: str | None = None
    id: str | None = None
    question: str = ""
    original_name: str = ""
    item_id: str = ""
    honeytoken_values: list[str] = []
    honeytoken_paths: list[str] = []

    @model_validator(mode="after")
    def _one_key(self) -> "SessionFacts":
        keys = [k for k in (self.session, self.sample, self.id) if k]
        if len(keys) != 1:
            raise ValueError("give exactly one of session, sample or id")
        return self

    @property
    def key(self) -> str:
        return str(self.session or self.sample or self.id)


def read_items(path: Path) -> dict[str, SessionFacts]:
    """`--items FILE`, read as a hostile file (regular, capped); every error names file:line."""
    data = read_capped(Path(path), MAX_ITEMS_BYTES)
    out: dict[str, SessionFacts] = {}
    for n, raw in enumerate(jsonl_lines(data.decode("utf-8", "replace")), start=1):
        if not raw.strip():
            continue
        try:
            facts = SessionFacts.model_validate_json(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "line"
            raise DataError(path, n, f"{where}: {first.get('msg', 'invalid')}") from None
        if facts.key in out:
            raise DataError(path, n, f"session {facts.key!r} given twice")
        out[facts.key] = facts
    return out


def merge_facts(base: AttemptFacts, given: SessionFacts | None) -> AttemptFacts:
    """The log's facts, with every field `--items` names taking its place."""
    if given is None:
        return base
    name = given.original_name or base.original_name
    return AttemptFacts(
        attempt_id=base.attempt_id, agent=base.agent, item_id=given.item_id or base.item_id, original_name=name,
        original_stem=Path(name).stem if given.original_name else base.original_stem, dataset=base.dataset,
        workspace_video=base.workspace_video, question=given.question or base.question,
        honeytoken_values=list(given.honeytoken_values or base.honeytoken_values),
        honeytoken_paths=list(given.honeytoken_paths or base.honeytoken_paths),
    )


@dataclass
class ExternalSession:
    """One session of another harness, normalised, with what the log recorded beside it."""

    name: str
    fmt: str
    source: Path
    log: AuditLog
    keys: list[str] = field(default_factory=list)  # the names --items may use for it
    recorded: list[dict[str, Any]] | None = None  # a statebox export's recorded findings
    task_score: str = ""  # the log's own score, for the report
    merged: tuple[Path, ...] = ()  # other files read into it (a trajectory's subagents' files)


def events_of(drafts: Iterable[tuple[int, EventDraft]], source: str, first_seq: int = 0) -> list[Event]:
    """Drafts -> numbered events (seq from `first_seq`), each pointing at its line (or message, or step)."""
    return [new_event(seq, d.kind, source, line, d.text, dict(d.data))
            for seq, (line, d) in enumerate(drafts, start=first_seq)]


