"""Inspect AI logs as sessions: one per sample and epoch, read through inspect_ai's own reader after admission.

An `.eval` is read a sample at a time (`opened_inspect_log`); a `.json` log, or an `.eval` whose entries are not named
as inspect_ai names them, is read whole. Every log is admitted first (`inspect_admission`: an `.eval`'s zip checked
entry by entry, the JSON within its budget).
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterator, TypeVar

from statebox.audits import inspect_admission
from statebox.audits.events import AttemptFacts, session_log
from statebox.audits.external_session import ExternalSession, events_of
from statebox.audits.log_files import open_regular
from statebox.errors import DataError
from statebox.sessions import inspect_sample
from statebox.sessions.shapes import list_of

if TYPE_CHECKING:  # inspect_ai is heavy: imported where an Inspect log is read (see _inspect_reader)
    from inspect_ai.log import EvalLog, EvalSample


T = TypeVar("T")

AUDIT_SCORER = "statebox_audit"  # the score `--write-scores` adds; never read back as the task's own (`inspect_session`)


def _inspect_reader() -> Callable[..., Any]:
    # inspect_ai is heavy (~1 s to import, a large tree): loaded only when an Inspect log is audited
    from inspect_ai.log import read_eval_log

    return read_eval_log


def read_inspect_log(path: Path) -> "EvalLog":
    """The whole log through inspect_ai's own reader, from a handle opened as a hostile file and admitted first
    (`inspect_admission`: an `.eval`'s zip checked entry by entry, decompressed within its declared sizes; the JSON
    within its budget; the references inside it within theirs). `--write-scores` reads it so, to write a `.json` copy;
    the audit reads an `.eval` a sample at a time (`opened_inspect_log`)."""
    with open_regular(path) as fh:
        _admit(fh, path, path.suffix == ".eval")
        return _read_whole(fh, path)


def _read_whole(fh: BinaryIO, path: Path) -> "EvalLog":
    """An admitted log, every sample, through inspect_ai's reader (attachments resolved)."""
    read_eval_log = _inspect_reader()
    return _inspect_read(path, lambda: read_eval_log(fh, resolve_attachments=True,
                                                     format="eval" if path.suffix == ".eval" else "json"))


def _admit(fh: BinaryIO, path: Path, eval_zip: bool) -> None:
    if eval_zip:
        inspect_admission.admit_eval(fh, path)
    else:
        inspect_admission.admit_json(fh, path)


def _inspect_read(path: Path, read: Callable[[], T]) -> T:
    """`read()` (a call into inspect_ai's reader), its failure as the one line naming the log."""
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - inspect raises many kinds; the user needs one line
        raise DataError(path, None, f"not a readable Inspect log ({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})") from None


@dataclass
class EvalStream:
    """An `.eval` read a sample at a time: its open, admitted file (a forked worker reads the same file through it),
    its sample entries (name, id as text, epoch) in order, and its format version."""

    fd: int
    entries: list[tuple[str, str, int]]
    version: int


@dataclass
class InspectSamples:
    """An admitted Inspect log: its header (no samples), the (id as text, epoch) of each of its samples in the order
    they come, and the samples themselves, read as they are asked for (`stream`: how, where a sample at a time;
    None for a log read whole)."""

    header: "EvalLog"  # without its samples
    keys: list[tuple[str, int]]
    samples: Iterator["EvalSample"]
    stream: EvalStream | None = None


SAMPLE_ALONE_EVAL = {"created": "2000-01-01T00:00:00+00:00", "task": "sample", "dataset": {}, "model": "none", "config": {}}
_SAMPLE_ENTRY = re.compile(r"samples/(.+)_epoch_([0-9]{1,9})\.json", re.S)


@contextmanager
def opened_inspect_log(path: Path) -> Iterator[InspectSamples]:
    """An Inspect log, admitted as `read_inspect_log` admits it, whose samples an `.eval` gives one at a time.

    Why: inspect_ai's reader builds every sample of a log before the first is returned: 127 MB of samples (3,000 of 63
    messages) held ~600 MB, so a 2 GB log (what admission lets in) wanted ~10 GB. Each sample is still read by
    inspect_ai's own public reader: its entry, as admitted (within its declared size, its CRC checked), goes with
    a least header into a zip of its own in memory, which `read_eval_log` reads with the attachments
    resolved, exactly as it reads a whole log (the same validation, events data and timelines). Samples come in the
    order inspect_ai sorts them (epoch, then id; an integer id as it zero-fills it), told from the entry names and
    the header's typed sample ids. A `.json` log is one JSON text: read whole, as before; so is an `.eval` whose
    sample entries are not named as inspect_ai names them (a log it did not write)."""
    read_eval_log = _inspect_reader()
    eval_zip = path.suffix == ".eval"
    with open_regular(path) as fh:
        _admit(fh, path, eval_zip)
        entries: list[tuple[str, str, int]] | None = None
        if eval_zip:
            header = _inspect_read(path, lambda: read_eval_log(fh, header_only=True, format="eval"))
            archive = _inspect_read(path, lambda: zipfile.ZipFile(fh))
            entries = _sample_entries(archive.namelist(), header)
        if entries is None:
            log = _read_whole(fh, path)
            samples = list(log.samples or [])
            log.samples = None
            yield InspectSamples(log, [(str(s.id), s.epoch) for s in samples], iter(samples))
            return
        yield InspectSamples(header, [(i, e) for _, i, e in entries],
                             (sample_alone(archive, path, name, (i, e), header.version) for name, i, e in entries),
                             EvalStream(fh.fileno(), entries, header.version))


def sample_alone(archive: zipfile.ZipFile, path: Path, name: str, key: tuple[str, int], version: int) -> "EvalSample":
    """One sample entry of an admitted `.eval`, read by inspect_ai's public reader from a zip of its own (the entry and
    a least header: the least an EvalLog is, since a sample is validated without it; not the log's own `eval`, which
    a crafted log can make megabytes long to be parsed again with each of its samples)."""
    read_eval_log = _inspect_reader()
    alone = io.BytesIO()
    with zipfile.ZipFile(alone, "w", zipfile.ZIP_STORED) as out:
        out.writestr("header.json", json.dumps({"version": version, "eval": SAMPLE_ALONE_EVAL}))
        out.writestr(name, archive.read(name))
    alone.seek(0)
    sample: EvalSample = _inspect_read(path, lambda: read_eval_log(alone, resolve_attachments=True, format="eval").samples[0])
    if (str(sample.id), sample.epoch) != key:
        raise DataError(path, None, f"entry {name!r} holds sample {str(sample.id)[:80]!r} epoch {sample.epoch}, "
                                    "not the one its name says")
    return sample


def _sample_entries(names: list[str], header: Any) -> list[tuple[str, str, int]] | None:
    """(entry name, id as text, epoch) of each sample entry, in inspect_ai's order (`sort_samples`: epoch, then the id,
    an integer one zero-filled to 20), or None where an entry is not named `samples/ID_epoch_N.json`."""
    typed = {str(i): i for i in (header.eval.dataset.sample_ids or [])}
    found: list[tuple[tuple[int, str], str, str, int]] = []
    for name in dict.fromkeys(names):  # a re-logged member is listed twice; reading it gives its last copy
        if not (name.startswith("samples/") and name.endswith(".json")):
            continue
        match = _SAMPLE_ENTRY.fullmatch(name)
        if match is None:
            return None
        text, epoch = match.group(1), int(match.group(2))
        value = typed.get(text, text)
        found.append(((epoch, value if isinstance(value, str) else str(value).zfill(20)), name, text, epoch))
    found.sort(key=lambda entry: entry[0])
    return [(name, text, epoch) for _, name, text, epoch in found]


def inspect_sample_name(sample: Any, unique_ids: bool) -> str:
    return str(sample.id) if unique_ids else f"{sample.id}@epoch{sample.epoch}"


def _input_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    for message in value or []:
        if getattr(message, "role", "") == "user":
            text, _ = inspect_sample.content_text(getattr(message, "content", ""))
            return text
    return ""


def inspect_sessions(path: Path) -> Iterator[ExternalSession]:
    """One session per sample and epoch, each sample read as it is judged (`opened_inspect_log`)."""
    with opened_inspect_log(path) as log:
        context = inspect_context(log)
        for sample in log.samples:
            yield inspect_session(path, sample, *context)


def inspect_context(log: InspectSamples) -> tuple[bool, bool, str]:
    """What naming and judging each sample needs from the whole log: whether its ids are unique (else a session is
    `ID@epochN`), whether it is a statebox export (its recorded findings are carried), the agent a sample names none."""
    ids = [key for key, _ in log.keys]
    header = log.header.eval
    packages = getattr(header, "packages", None) or {}
    is_export = "statebox" in packages and getattr(header, "task", "") == "statebox"
    default_agent = str(getattr(header, "solver", None) or getattr(header, "model", None) or "inspect")
    return len(set(ids)) == len(ids), is_export, default_agent


def inspect_session(path: Path, sample: "EvalSample", unique: bool, is_export: bool, default_agent: str) -> ExternalSession:
    meta = sample.metadata or {}
    name = inspect_sample_name(sample, unique)
    facts = AttemptFacts(attempt_id=name, agent=str(meta.get("agent") or default_agent),
                         item_id=str(meta.get("item_id") or sample.id),
                         original_name=str(meta.get("original_name") or ""),
                         question=str(meta.get("question") or _input_text(sample.input)))
    facts.original_stem = Path(facts.original_name).stem if facts.original_name else ""
    completion = sample.output.completion if sample.output is not None else ""
    messages = list(sample.messages or [])
    drafts = inspect_sample.sample_drafts(messages, completion or "")
    drafts += inspect_sample.subagent_tool_drafts(list(sample.events or []), messages, len(messages) + 2)
    source = f"{path.name}#{name}"
    audit_log = session_log(events_of(drafts, source), facts, [source])
    recorded = list(list_of(meta.get("findings"))) if is_export else None
    scores = {k: v.value for k, v in (sample.scores or {}).items() if k != AUDIT_SCORER}
    return ExternalSession(name, "inspect", path, audit_log,
                           keys=[name, str(sample.id), f"{sample.id}@epoch{sample.epoch}"],
                           recorded=recorded, task_score=json.dumps(scores, default=str) if scores else "")
