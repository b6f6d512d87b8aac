"""An Inspect log admitted before inspect_ai reads it: whoever hands `statebox audit` a log may have crafted it.

`inspect_logs.read_inspect_log` hands inspect_ai's own reader a handle it opened as a hostile file (no link, a
regular file, at most 2 GiB). What that reader did with a crafted log, within that cap (figures: one process,
peak resident memory over its imports; `tests/audits/test_hostile_inspect_logs.py` holds each as a test):

- an `.eval` is a zip, read with the standard library's zipfile, which decompresses each `read()` in one call
  (deflate up to 1 GiB, zstandard, what inspect_ai writes, with no limit at all) and only then cuts the result
  to the entry's declared size: a 122 KB entry declaring 10 bytes decompressed 4 GB of zeros (3.9 GB, 2.8 s;
  a few MB of such entries exhaust any machine). A declared size is a claim, not a bound;
- zipfile builds an object per entry of the central directory before anyone looks at them: 3,000,000 empty
  entries (a 274 MB file) took 20 s and ~1.2 GB before inspect_ai found no header in them;
- inside the JSON, inspect_ai expands each model event's `input_refs` (ranges over the sample's pool of
  messages) into a list of its own: 100 events x 100 ranges over a pool of 10,000 took 780 MB from 491 KB of
  `.json`, and the same shape in an `.eval` walked every expanded message (minutes); and an `attachment://`
  reference in the messages stands for the attachment's whole text, which statebox reads once per reference
  (1.7 MB of JSON for 500 MB of tool output: 1 GB and 6.5 s to judge).

So before inspect_ai reads a log, this module checks, with the standard library, and refuses with one line
naming the file and the cause (`DataError`, exit 2; nothing is read further, nothing written):

- `.eval`: the central directory's size (`MAX_INSPECT_DIRECTORY_BYTES`) and its records counted one by one
  (`MAX_INSPECT_ENTRIES`; the end record's count is a claim too) before zipfile parses it; each entry's name
  (no absolute path, no `..`: nothing extracts an Inspect log today, and such a name has no place in one), its
  method (stored, deflate or zstandard, what Inspect writes; bzip2 and lzma decompress unbounded too), no
  encryption; the declared sizes summed against `MAX_INSPECT_JSON_BYTES` before anything is decompressed; each
  entry's data inside its own span of the file (no two entries sharing bytes: the overlapping-entries bomb);
  then every entry decompressed here in 1 MiB steps, refused the moment it passes its declared size, and its
  size and CRC compared with the declared ones. What inspect_ai then decompresses is exactly what was declared
  and checked (it reads the same handle).
- `.json`: its size against the same `MAX_INSPECT_JSON_BYTES` (the same JSON text, whichever container).
- both: each sample's pool references counted as inspect_ai will expand them (`MAX_INSPECT_POOL_REFS`), and
  the attachment text its messages stand for counted against `MAX_INSPECT_JSON_BYTES`.

No cap on an entry's compression ratio: the decompressed total is what costs, and it is bounded; a real
sample compresses ~20:1 with zstandard (a run of identical tool output far more), so a ratio cap would refuse
real logs and stop nothing the budget does not. A file changed by another process between this check and
inspect_ai's read is outside what this guards (the check and the read use the same open file).
"""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import IO, Any, BinaryIO, cast

from statebox.errors import DataError
from statebox.json_text import json_value
from statebox.sessions.shapes import list_of
from statebox.userfiles import read_upto

MiB = 1024 * 1024
GiB = 1024 * MiB

# The JSON text inspect_ai parses from one log, decompressed (`.eval`) or as it is (`.json`). Its reader builds
# the whole log at once: 3x (long texts) to 9x (many small messages) the JSON in memory, at 7-22 MB/s (this
# machine), so 1 GiB is ~3-9 GB and a few minutes: what a workstation holds. Past it, one line says why,
# rather than the OOM killer ending the audit without one. (The file cap stays 2 GiB: an `.eval` carries dead
# bytes of rewritten entries; a `.json` log's file is its JSON, so it gets this cap.)
MAX_INSPECT_JSON_BYTES = 1 * GiB
# One entry per sample and epoch, plus a handful (header, summaries, journal): a quarter million samples is
# far beyond a real eval, and builds ~120 MB of zipfile's objects.
MAX_INSPECT_ENTRIES = 250_000
# The central directory zipfile reads whole: ~130 bytes a record in a real log (46 fixed, the name, a zip64
# extra), so 64 MiB holds the entry cap with names of a few hundred characters.
MAX_INSPECT_DIRECTORY_BYTES = 64 * MiB
# List slots inspect_ai builds from the logs' pool references (8 bytes each: 1 GiB). A sample of T turns needs
# ~T^2 (each model call's input is the conversation so far): ~1,000 samples of 350 turns.
MAX_INSPECT_POOL_REFS = 2**27
STEP = 1 * MiB  # decompressed per step of the check

_METHODS = {0: "stored", 8: "deflate", 93: "zstandard"}
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # the zip local file header (30 bytes)
_DIRECTORY_RECORD = struct.Struct("<4s4B4HL2L5HLL")  # a central directory record (46 bytes)
_ATTACHMENT_PREFIXES = ("attachment://", "tc://")  # how inspect_ai spells a reference (tc:// is its old one)
_SUMMARY = "inspect_ai's reader holds the whole log: ~3-9x that in memory"


def admit_json(fh: BinaryIO, path: Path) -> None:
    """Refuse a `.json` Inspect log over the JSON budget or whose samples expand past their caps; the handle is
    left at its start for inspect_ai."""
    size = os.fstat(fh.fileno()).st_size
    if size > MAX_INSPECT_JSON_BYTES:
        raise DataError(path, None, f"{size} bytes of JSON, over the {MAX_INSPECT_JSON_BYTES} bytes statebox reads "
                                    f"from one Inspect log ({_SUMMARY})")
    data = read_upto(fh, MAX_INSPECT_JSON_BYTES + 1)
    if len(data) > MAX_INSPECT_JSON_BYTES:
        raise DataError(path, None, f"grew past the {MAX_INSPECT_JSON_BYTES} bytes statebox reads from one Inspect log")
    try:
        log = json_value(data)
    except ValueError as exc:
        raise DataError(path, None, f"not a readable Inspect log (invalid JSON: {_line(exc)})") from None
    del data
    samples = log.get("samples") if isinstance(log, dict) else None
    tally = _Tally(path)
    for n, sample in enumerate(samples if isinstance(samples, list) else []):
        tally.sample(sample, f"samples[{n}]")
    fh.seek(0)


def admit_eval(fh: BinaryIO, path: Path) -> None:
    """Refuse an `.eval` Inspect log whose zip is hostile (module docstring); the handle is left at its start."""
    start, size = _directory(fh, path)
    _count_records(fh, path, start, size)
    try:
        with zipfile.ZipFile(fh) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, NotImplementedError, ValueError, OSError, EOFError, struct.error) as exc:
        raise DataError(path, None, f"not a readable Inspect log ({type(exc).__name__}: {_line(exc)})") from None
    if len(entries) > MAX_INSPECT_ENTRIES:  # pragma: no cover - the records were counted above
        raise DataError(path, None, f"more than {MAX_INSPECT_ENTRIES} entries in the zip")
    total = 0
    for info in entries:
        _judge_entry(info, path)
        total += info.file_size
    if total > MAX_INSPECT_JSON_BYTES:
        raise DataError(path, None, f"entries that decompress to {total} bytes, over the {MAX_INSPECT_JSON_BYTES} bytes "
                                    f"of JSON statebox reads from one Inspect log ({_SUMMARY})")
    tally = _Tally(path)
    for info, begin in _spans(fh, path, entries, start):
        keep = info.filename.startswith("samples/") and info.filename.endswith(".json")  # what inspect_ai reads as samples
        data = _decompressed(fh, path, info, begin, keep)
        if data is not None:
            try:
                sample = json_value(data)
            except ValueError as exc:
                raise DataError(path, None, f"{_name(info)}: not JSON ({_line(exc)})") from None
            del data
            tally.sample(sample, _name(info))
    fh.seek(0)


# ---------------------------------------------------------------------------
# the zip's directory
# ---------------------------------------------------------------------------


def _name(info: zipfile.ZipInfo) -> str:
    """An entry's name as the one error line shows it (quoted: a crafted name may hold a newline or an escape)."""
    return repr(info.filename)


def _line(exc: BaseException) -> str:
    text = str(exc).splitlines()
    return repr(text[0][:160])[1:-1] if text else ""


def _directory(fh: BinaryIO, path: Path) -> tuple[int, int]:
    """Where the central directory starts and its size, as zipfile will find them (its own end-record reader)."""
    end_record = getattr(zipfile, "_EndRecData")  # zipfile's private reader: the same record ZipFile() will use
    try:
        record = end_record(fh)
    except (OSError, struct.error, zipfile.BadZipFile) as exc:
        raise DataError(path, None, f"not a readable Inspect log ({type(exc).__name__}: {_line(exc)})") from None
    if not record:
        raise DataError(path, None, "not a readable Inspect log (not a zip archive: no end of central directory)")
    size, offset, location = int(record[5]), int(record[6]), int(record[9])  # _ECD_SIZE, _ECD_OFFSET, _ECD_LOCATION
    if size > MAX_INSPECT_DIRECTORY_BYTES:
        raise DataError(path, None, f"a central directory of {size} bytes, over the {MAX_INSPECT_DIRECTORY_BYTES} byte "
                                    f"cap (at most {MAX_INSPECT_ENTRIES} entries are read from one Inspect log)")
    zip64 = record[0] == b"PK\x06\x06"
    start = location - size - (56 + 20 if zip64 else 0)  # zipfile's start_dir: offset + "concat"
    if start < 0 or offset < 0:
        raise DataError(path, None, "not a readable Inspect log (its central directory lies before the file's start)")
    return start, size


def _count_records(fh: BinaryIO, path: Path, start: int, size: int) -> None:
    """Walk the directory's records as zipfile will (by their lengths, not the end record's count) and refuse
    more than MAX_INSPECT_ENTRIES before zipfile builds an object for each."""
    fh.seek(start)
    data = fh.read(size)
    at, count = 0, 0
    while at < size:
        if at + _DIRECTORY_RECORD.size > len(data):
            return  # truncated: zipfile says so
        fields = _DIRECTORY_RECORD.unpack_from(data, at)
        if fields[0] != b"PK\x01\x02":
            return  # not a record: zipfile says so
        count += 1
        if count > MAX_INSPECT_ENTRIES:
            raise DataError(path, None, f"more than {MAX_INSPECT_ENTRIES} entries in the zip, over the cap for one "
                                        "Inspect log (one entry per sample and epoch)")
        at += _DIRECTORY_RECORD.size + fields[12] + fields[13] + fields[14]  # name, extra, comment


def _judge_entry(info: zipfile.ZipInfo, path: Path) -> None:
    name = info.filename
    posix, windows = PurePosixPath(name), PureWindowsPath(name)
    if not name or "\0" in name or posix.is_absolute() or windows.is_absolute() or windows.drive \
            or ".." in posix.parts or ".." in windows.parts:
        raise DataError(path, None, f"entry name {name!r} is absolute or climbs out with '..' (an Inspect log's "
                                    "entries are header.json, samples/..., _journal/...)")
    if info.flag_bits & 0x1:
        raise DataError(path, None, f"{name!r}: an encrypted entry (an Inspect log's entries are not encrypted)")
    if info.compress_type not in _METHODS:
        raise DataError(path, None, f"{name!r}: compression method {info.compress_type} (an Inspect log's entries are "
                                    "stored, deflate or zstandard)")


def _spans(fh: BinaryIO, path: Path, entries: list[zipfile.ZipInfo], directory: int) -> Iterator[tuple[zipfile.ZipInfo, int]]:
    """Each entry (in file order) with where its data begins; refused where its data is not inside its own space,
    between its local header and the next entry's (or the directory)."""
    ordered = sorted(entries, key=lambda info: info.header_offset)
    for n, info in enumerate(ordered):
        following = ordered[n + 1] if n + 1 < len(ordered) else None
        limit = following.header_offset if following is not None else directory
        fh.seek(max(info.header_offset, 0))
        header = fh.read(_LOCAL_HEADER.size)
        if info.header_offset < 0 or len(header) < _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
            raise DataError(path, None, f"{_name(info)}: no local header where the directory says it is")
        fields = _LOCAL_HEADER.unpack(header)
        begin = info.header_offset + _LOCAL_HEADER.size + fields[10] + fields[11]  # name, extra
        end = begin + info.compress_size
        if end > limit:
            if following is not None and following.header_offset < end:
                raise DataError(path, None, f"{_name(info)}: its data overlaps entry {_name(following)} (the same "
                                            "bytes listed twice: a zip bomb's way to multiply them)")
            raise DataError(path, None, f"{_name(info)}: its data runs past the central directory")
        yield info, begin


# ---------------------------------------------------------------------------
# each entry decompressed, bounded
# ---------------------------------------------------------------------------


class _Span:
    """`length` bytes of `fh` from `begin`, as a file (for zstandard's reader)."""

    def __init__(self, fh: BinaryIO, begin: int, length: int) -> None:
        self.fh, self.at, self.left = fh, begin, length

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        self.fh.seek(self.at)
        data = self.fh.read(size)
        self.at += len(data)
        self.left -= len(data)
        return data


def _raw_chunks(fh: BinaryIO, begin: int, length: int) -> Iterator[bytes]:
    span = _Span(fh, begin, length)
    while span.left > 0:
        chunk = span.read(STEP)
        if not chunk:
            return
        yield chunk


def _plain_chunks(fh: BinaryIO, info: zipfile.ZipInfo, begin: int) -> Iterator[bytes]:
    """The entry's bytes decompressed, at most STEP at a time (so a bomb is stopped after a step past its size)."""
    if info.compress_type == 0:
        yield from _raw_chunks(fh, begin, info.compress_size)
    elif info.compress_type == 8:
        inflater = zlib.decompressobj(-15)
        for raw in _raw_chunks(fh, begin, info.compress_size):
            while raw and not inflater.eof:
                yield inflater.decompress(raw, STEP)
                raw = inflater.unconsumed_tail
            if inflater.eof:
                return
        yield inflater.flush()
    else:
        import zstandard  # inspect_ai's own dependency: what it writes an .eval's entries with

        reader = zstandard.ZstdDecompressor().stream_reader(cast(IO[bytes], _Span(fh, begin, info.compress_size)),
                                                            read_size=STEP, read_across_frames=True)
        while chunk := reader.read(STEP):
            yield chunk


def _decompressed(fh: BinaryIO, path: Path, info: zipfile.ZipInfo, begin: int, keep: bool) -> bytes | None:
    """Decompress one entry within its declared size and check its size and CRC; its bytes when `keep`."""
    got, crc, kept = 0, 0, []
    try:
        for chunk in _plain_chunks(fh, info, begin):
            got += len(chunk)
            if got > info.file_size:
                raise DataError(path, None, f"{_name(info)}: decompresses to more than the {info.file_size} bytes it "
                                            "declares (a zip bomb's lie)")
            crc = zlib.crc32(chunk, crc)
            if keep:
                kept.append(chunk)
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - zlib.error, zstandard.ZstdError, OSError: the data is not what it says
        raise DataError(path, None, f"{_name(info)}: not readable ({type(exc).__name__}: {_line(exc)})") from None
    if got != info.file_size:
        raise DataError(path, None, f"{_name(info)}: holds {got} bytes, not the {info.file_size} it declares")
    if crc != info.CRC:
        raise DataError(path, None, f"{_name(info)}: fails its CRC check")
    return b"".join(kept) if keep else None


# ---------------------------------------------------------------------------
# references inside a sample
# ---------------------------------------------------------------------------


@dataclass
class _Tally:
    """What a log's samples will expand to once inspect_ai resolves them, summed over the log."""

    path: Path
    refs: int = 0  # pool list slots
    text: int = 0  # characters of the text the messages' attachment references stand for

    def sample(self, sample: Any, where: str) -> None:
        if not isinstance(sample, dict):
            return  # not a sample: inspect_ai refuses it
        pools = sample.get("events_data")
        messages = _length(pools.get("messages")) if isinstance(pools, dict) else 0
        calls = _length(pools.get("calls")) if isinstance(pools, dict) else 0
        for event in list_of(sample.get("events")):  # a number there is inspect_ai's to refuse, not a traceback
            if isinstance(event, dict):
                self.refs += _expanded(event.get("input_refs"), messages)
                call = event.get("call")
                if isinstance(call, dict):
                    self.refs += _expanded(call.get("call_refs"), calls)
        if self.refs > MAX_INSPECT_POOL_REFS:
            raise DataError(self.path, None, f"{where}: model events whose references into the message pool expand to "
                                             f"more than {MAX_INSPECT_POOL_REFS} list entries (inspect_ai builds each)")
        attachments = sample.get("attachments")
        self.text += _attached_text([sample.get("messages"), sample.get("input")],
                                    attachments if isinstance(attachments, dict) else {})
        if self.text > MAX_INSPECT_JSON_BYTES:
            raise DataError(self.path, None, f"{where}: messages whose attachment references stand for more than "
                                             f"{MAX_INSPECT_JSON_BYTES} characters of text (each is read once per reference)")


def _length(value: Any) -> int:
    return len(value) if isinstance(value, (list, dict)) else 0


def _expanded(refs: Any, pool: int) -> int:
    """List slots inspect_ai builds from a list of (start, end) ranges over a pool of `pool` items (a slice
    each); a range it could not read as two integers counted as the whole pool."""
    if not isinstance(refs, list) or not pool:
        return 0
    total = 0
    for ref in refs:
        if isinstance(ref, list) and len(ref) == 2 and all(type(v) is int for v in ref):
            total += len(range(pool)[ref[0]:ref[1]])
        else:
            total += pool
    return total


def _attached_text(values: list[Any], attachments: dict[str, Any]) -> int:
    """Characters of attachment text the `attachment://` strings in `values` stand for (walked without recursion;
    JSON's values are exact types, so `type() is` is enough)."""
    if not attachments:
        return 0
    total, stack = 0, list(values)
    pop, push = stack.pop, stack.extend
    while stack:
        value = pop()
        kind = type(value)
        if kind is str:
            if value.startswith(_ATTACHMENT_PREFIXES):
                content = attachments.get(value.split("://", 1)[1])
                total += len(content) if type(content) is str else 0
        elif kind is list:
            push(value)
        elif kind is dict:
            push(value.values())
    return total
