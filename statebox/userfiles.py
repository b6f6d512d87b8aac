"""The one door for files a user hands statebox: regular files only, read under a size cap.

Why a door of its own: `--data /dev/zero` once grew host memory by ~0.9 GB/s until the
machine ran out, a FIFO as `--data` hung `run` forever, and a 2 GB file was read whole
before anything looked at it. Every reader of a user file (annotations, predictions,
policies, suite.json, run.json) comes through here, so each of these is one line naming
the path and why (`DataError`, exit 2), decided before the first byte is read:

- `os.stat` first (following links: a user's own symlink to a dataset is fine), refusing
  anything but a regular file (a FIFO, a device, a socket, a folder) and a size over the cap;
- then `os.open(O_RDONLY | O_NONBLOCK)`, so a FIFO swapped in after the stat cannot block
  the open, and `fstat` of the opened descriptor checked again (what is read is what was judged);
- reads stop at the cap + 1 byte (a file that grows while read is still bounded), and
  line-oriented readers refuse a line longer than their per-line cap instead of buffering it.

Agent-written files in a workspace have their own, stricter door (no links at all):
`statebox/sandbox/workspace.py:open_regular`.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from statebox.errors import DataError, UserError, file_kind, storage_error

MiB = 1024 * 1024

# Caps, by what the file is. Each is far above the largest real instance (the VCBench eval
# file is a few MB, EC-Bench's transcript.csv tens of MB) and far below what would hurt the host.
DATA_MAX_BYTES = 256 * MiB  # an annotation file or a predictions file
LINE_MAX_BYTES = 16 * MiB  # one JSONL/CSV line of those
TRANSCRIPT_LINE_MAX_BYTES = 64 * MiB  # EC-Bench transcript.csv: one video's transcript is one cell
CONFIG_MAX_BYTES = 16 * MiB  # suite.json, run.json
POLICY_MAX_BYTES = 1 * MiB  # a policy YAML
TEMPLATE_MAX_BYTES = 1 * MiB  # a prompt template (--prompt-template)
BATCH_READ_BYTES = 1 * MiB  # what `iter_line_batches` reads per step


def make_output_folder(path: Path | str, what: str) -> None:
    """Make the folder a user named for statebox to write into (`--run-dir`, `bench make --out`), or say in one line
    why not. A file there, or a place no folder can be made (under /proc, a read-only disk), was a traceback."""
    path = Path(path)
    try:
        kind = os.stat(path).st_mode
    except FileNotFoundError:
        kind = None
    except OSError as exc:
        raise UserError(f"{path}: cannot be the {what} ({exc.strerror or exc})") from None
    if kind is not None and not stat.S_ISDIR(kind):
        raise UserError(f"{path}: is {file_kind(kind)}; statebox needs a folder there for the {what}")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise storage_error(exc, path, f"cannot make the {what}") or UserError(
            f"{path}: cannot make the {what} here ({exc.strerror or exc})") from None


def _size(n: int) -> str:
    return f"{n / MiB:.0f} MiB" if n >= MiB else f"{n} bytes"


def _judge(path: Path, st: os.stat_result, what: str, max_bytes: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = file_kind(st.st_mode)
        if kind == "a folder":
            raise DataError(path, None, f"is a folder, expected a file ({what})")
        raise DataError(path, None, f"is {kind}, not a regular file; statebox reads a {what} only from a regular file")
    if st.st_size > max_bytes:
        raise DataError(path, None, f"{_size(st.st_size)} is over the {_size(max_bytes)} limit for a {what}")


def open_user_file(path: Path | str, *, what: str = "file", max_bytes: int = DATA_MAX_BYTES) -> BinaryIO:
    """Open a user's file for reading in binary, or raise `DataError` naming the path and why.

    The caller reads through `read_capped`/`iter_lines` (or at most `max_bytes` itself).
    """
    path = Path(path)
    try:
        _judge(path, os.stat(path), what, max_bytes)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise DataError(path, None, "file not found") from None
    except NotADirectoryError:
        raise DataError(path, None, "file not found (a parent is not a folder)") from None
    except PermissionError:
        raise DataError(path, None, f"permission denied (cannot read this {what})") from None
    except OSError as exc:
        raise DataError(path, None, f"cannot open: {exc.strerror or exc}") from None
    handle = os.fdopen(fd, "rb")
    try:
        _judge(path, os.fstat(fd), what, max_bytes)  # swapped between stat and open: judged again
    except BaseException:
        handle.close()
        raise
    return handle


def read_upto(handle: BinaryIO, limit: int) -> bytes:
    """`handle.read(limit)`: to EOF, `limit` bytes at most, asked first for the size the file has.

    Why: a read of `limit` bytes allocates that much before it reads; under a 2 GiB cap, reading a 70 KB
    session file that way cost 3.5x the CPU. The same bytes: a file that grew since its size was asked is
    read on to EOF or the limit, as the one read would have."""
    try:
        size = os.fstat(handle.fileno()).st_size
    except (OSError, AttributeError):  # not a file of the OS (io.UnsupportedOperation is an OSError)
        return handle.read(limit)
    data = handle.read(min(size + 1, limit))
    if len(data) > size:  # grew since
        data += handle.read(limit - len(data))
    return data


def read_capped(handle: BinaryIO, path: Path | str, *, what: str, max_bytes: int) -> bytes:
    """All of an opened user file, refusing one that grew past the cap while being read."""
    data = read_upto(handle, max_bytes + 1)
    if len(data) > max_bytes:
        raise DataError(Path(path), None, f"over the {_size(max_bytes)} limit for a {what} (it grew while read)")
    return data


def read_user_bytes(path: Path | str, *, what: str = "file", max_bytes: int = DATA_MAX_BYTES) -> bytes:
    with open_user_file(path, what=what, max_bytes=max_bytes) as handle:
        return read_capped(handle, path, what=what, max_bytes=max_bytes)


def decode(data: bytes, path: Path | str, line: int | None = None, *, encoding: str = "utf-8") -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise DataError(Path(path), line, f"not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r})") from None


def as_text_file(data: bytes, errors: str = "replace") -> io.TextIOWrapper:
    """`data` as `open(path, encoding="utf-8", errors=errors)` reads a file holding it (universal newlines: `\r\n`
    and `\r` read as `\n`; its lines cut at `\n` alone), by the same io machinery, for bytes already read through
    a door."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors=errors)


def as_read_text(data: bytes, errors: str = "replace") -> str:
    """`data` decoded as `Path.read_text(encoding="utf-8", errors=errors)` decodes a file holding it (`as_text_file`)."""
    return as_text_file(data, errors).read()


def read_user_text(path: Path | str, *, what: str = "file", max_bytes: int = DATA_MAX_BYTES,
                   encoding: str = "utf-8") -> str:
    """A user's text file, decoded (`utf-8-sig` drops a byte-order mark); bad bytes are one line."""
    return decode(read_user_bytes(path, what=what, max_bytes=max_bytes), path, encoding=encoding)


def iter_line_batches(path: Path | str, *, what: str = "file", max_bytes: int = DATA_MAX_BYTES,
                      max_line_bytes: int = LINE_MAX_BYTES,
                      block_bytes: int = BATCH_READ_BYTES) -> Iterator[tuple[int, list[bytes]]]:
    """(1-based number of the first line, raw lines without their `\n`) for each block of a user's
    file: `iter_lines`' lines and caps, undecoded and many per step.

    Why batches: a million-line predictions file read a line at a time spends more in the
    readline/decode calls than in parsing; read in blocks and split with one `bytes.split`, the
    lines go to a bytes JSON reader undecoded (it checks UTF-8 itself). The caps hold as in
    `iter_lines`: at most `block_bytes` plus one line's cap is held, a line past `max_line_bytes`
    (with its `\n`, as `iter_lines` counts) is refused once the lines before it were handed out,
    and a file that grows past `max_bytes` while read is refused. The byte-order mark is left to
    the caller (it is part of line 1 here).
    """
    path = Path(path)
    total = 0
    number = 1
    pending = b""
    with open_user_file(path, what=what, max_bytes=max_bytes) as handle:
        while True:
            block = handle.read(block_bytes)
            total += len(block)
            if total > max_bytes:
                raise DataError(path, None, f"over the {_size(max_bytes)} limit for a {what} (it grew while read)")
            if not block:
                if pending:
                    yield number, [pending]
                return
            lines = (pending + block).split(b"\n") if pending else block.split(b"\n")
            pending = lines.pop()  # the part after the block's last newline: the start of the next line
            for index, line in enumerate(lines):
                if len(line) >= max_line_bytes:  # with its newline, over the cap
                    yield number, lines[:index]
                    raise DataError(path, number + index, f"line longer than the {_size(max_line_bytes)} limit for a {what}")
            if len(pending) > max_line_bytes:
                yield number, lines
                raise DataError(path, number + len(lines), f"line longer than the {_size(max_line_bytes)} limit for a {what}")
            if lines:
                yield number, lines
                number += len(lines)


def iter_lines(path: Path | str, *, what: str = "file", max_bytes: int = DATA_MAX_BYTES,
               max_line_bytes: int = LINE_MAX_BYTES) -> Iterator[tuple[int, str]]:
    """(1-based line number, UTF-8-decoded line with its ending) for each line of a user's file
    (a byte-order mark before the first line is dropped).

    A line longer than `max_line_bytes` is refused when the cap is reached, never buffered whole;
    the file as a whole is bounded by `max_bytes` even when it grows while read.
    """
    path = Path(path)
    total = 0
    with open_user_file(path, what=what, max_bytes=max_bytes) as handle:
        number = 0
        while True:
            raw = handle.readline(max_line_bytes + 1)
            if not raw:
                return
            number += 1
            total += len(raw)
            if len(raw) > max_line_bytes:
                raise DataError(path, number, f"line longer than the {_size(max_line_bytes)} limit for a {what}")
            if total > max_bytes:
                raise DataError(path, None, f"over the {_size(max_bytes)} limit for a {what} (it grew while read)")
            text = decode(raw, path, number)
            if number == 1:
                text = text.removeprefix("\ufeff")
            yield number, text
