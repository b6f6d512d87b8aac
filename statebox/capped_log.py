"""The one capped writer for every file an agent's output reaches on the host.

An agent controls what it prints, so nothing it prints may grow a host file, or the
host's memory, past a fixed size. Every raw log (`stdout.log`, `stderr.log`,
`claude.stream.jsonl`, `codex.jsonl`, ...) and `events.jsonl` go through `CappedFile`:

- a per-file byte cap: the file never exceeds `max_bytes` (room for the marker is
  reserved); the first write that would pass it writes one marker line instead,
  `{"statebox": "cap_reached", ...}` (a JSON object, so JSON-lines readers parse it),
  and everything after it is counted, never written;
- `CappedStream` (a container's stdout/stderr as it arrives) adds a per-line cap: a
  line longer than `max_line_bytes` is cut there (with a visible note) and the rest of
  it, up to the next newline, is dropped without being held in memory. The live line
  callback gets exactly the lines the file got, so raw line numbers stay valid, and gets
  nothing once the file is capped;
- `BoundedBuffer` (one `docker exec`'s output): the first bytes and the last bytes,
  with a note of how many were cut between them.

Memory is bounded by the caps, never by the output: a stream holds at most one line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from statebox.json_text import json_value

CAP_REACHED = "cap_reached"
MARKER_RESERVE = 512  # bytes kept free under each cap for the marker line
LINE_CUT_NOTE = b" [statebox: line cut at %d bytes]"
TAIL_PROBE = 4096


def marker_line(file: str, cap_bytes: int, what: str = "file", **extra: Any) -> bytes:
    """The one line written where a cap was reached (a JSON object, always under MARKER_RESERVE)."""
    record = {"statebox": CAP_REACHED, "file": file, "cap": what, "cap_bytes": int(cap_bytes), **extra}
    line = json.dumps(record, ensure_ascii=True, default=str)
    return line[: MARKER_RESERVE - 2].encode("ascii") + b"\n"


def is_marker(line: str | bytes | dict[str, Any]) -> bool:
    """True for a `cap_reached` marker (a raw-log line, its parsed object, or an event's data)."""
    if isinstance(line, dict):
        return line.get("statebox") == CAP_REACHED
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    text = text.strip()
    if not (text.startswith("{") and CAP_REACHED in text):
        return False
    try:
        obj = json_value(text)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("statebox") == CAP_REACHED


def cap_marker(path: Path | str) -> dict[str, Any] | None:
    """The marker a capped file ends with, or None (reads only the file's last few KB)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(size - TAIL_PROBE, 0))
            tail = fh.read()
    except OSError:
        return None
    for raw in reversed(tail.splitlines()):
        if not raw.strip():
            continue
        if is_marker(raw):
            return json_value(raw)
        return None
    return None


def clip_bytes(data: bytes, limit: int, note: bytes = LINE_CUT_NOTE) -> bytes:
    """`data` cut so that it plus the note fits in `limit` bytes (unchanged when it already fits)."""
    if len(data) <= limit:
        return data
    suffix = note % limit if b"%d" in note else note
    return data[: max(limit - len(suffix), 0)] + suffix


def clip_text(text: str, limit_bytes: int) -> str:
    """`text` cut to at most `limit_bytes` of UTF-8 (never mid-character), with a note of what was cut."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= limit_bytes:
        return text
    note = f"\n[statebox: {len(raw) - limit_bytes} more bytes clipped]"
    keep = max(limit_bytes - len(note), 0)
    return raw[:keep].decode("utf-8", "ignore") + note


class CappedFile:
    """An append-only host file with a hard byte cap and one marker line when it is reached.

    `write(data)` writes all of `data` or none of it (whole lines stay whole); `force`
    lets a caller spend the marker's reserve (the recorder's own closing events).
    Thread-safe only under the caller's lock.
    """

    def __init__(self, path: Path | str | None, max_bytes: int, *, name: str | None = None,
                 reserve: int = MARKER_RESERVE) -> None:
        self.path = Path(path) if path is not None else None
        self.name = name or (self.path.name if self.path is not None else "stream")
        self.max_bytes = int(max_bytes)
        self.reserve = min(max(int(reserve), MARKER_RESERVE), self.max_bytes // 2)
        self.fh = self.path.open("ab", buffering=0) if self.path is not None else None
        self.size = self.fh.tell() if self.fh is not None else 0  # a retried attempt appends: the cap is the file's
        self.capped = False
        self.dropped_bytes = 0
        self.dropped_writes = 0

    @property
    def soft_limit(self) -> int:
        return self.max_bytes - self.reserve

    def fits(self, n: int) -> bool:
        return self.size + n <= self.soft_limit

    def write(self, data: bytes, *, force: bool = False, **marker_extra: Any) -> bool:
        """Append `data` if it fits under the cap; otherwise write the marker (once) and drop it."""
        if not self.capped and self.fits(len(data)):
            self._put(data)
            return True
        self.cap(**marker_extra)
        if force and self.size + len(data) <= self.max_bytes:
            self._put(data)
            return True
        self.dropped_bytes += len(data)
        self.dropped_writes += 1
        return False

    def cap(self, marker: bytes | None = None, **marker_extra: Any) -> None:
        """Mark the file capped now and write its marker line (`marker`, else the generic one)."""
        if self.capped:
            return
        self.capped = True
        self._put(marker if marker is not None else marker_line(self.name, self.max_bytes, **marker_extra))

    def _put(self, data: bytes) -> None:
        if self.fh is not None:
            self.fh.write(data)
        self.size += len(data)

    def close(self) -> None:
        if self.fh is not None and not self.fh.closed:
            self.fh.close()


class CappedStream:
    """A byte stream (container stdout/stderr) -> capped file, cut into capped lines for a callback.

    `feed(chunk)` as bytes arrive, `close()` at the end (flushes a last line with no newline).
    The callback gets each line (decoded, without its newline) exactly as the file got it,
    at most `max_line_bytes` long, and nothing after the file cap; an exception in it never
    stops the stream to the file.
    """

    def __init__(self, path: Path | str | None, *, max_bytes: int, max_line_bytes: int,
                 on_line: Callable[[str], None] | None = None, name: str | None = None) -> None:
        self.file = CappedFile(path, max_bytes, name=name)
        self.max_line = int(max_line_bytes)
        self.on_line = on_line
        self.partial = bytearray()
        self.skipping = False  # inside a line already cut: drop bytes until its newline
        self.seen = 0  # bytes offered by the stream (what the agent produced)
        self.lines_cut = 0

    @property
    def capped(self) -> bool:
        return self.file.capped

    @property
    def truncated(self) -> bool:
        return self.file.capped or self.lines_cut > 0

    def feed(self, data: bytes) -> None:
        self.seen += len(data)
        if self.file.capped:  # nothing more is written or parsed: counting is all that is left
            return
        parts = data.split(b"\n")
        lines: list[bytes] = []
        if len(parts) > 1:
            first = parts[0]
            if self.skipping:  # the end of a line already cut: dropped
                self.skipping = False
            else:
                if self.partial:
                    self.partial += first
                    first = bytes(self.partial)
                    self.partial.clear()
                lines.append(self._clip(first))
            limit = self.max_line
            lines.extend(p if len(p) <= limit else self._clip(p) for p in parts[1:-1])
        rest = parts[-1]
        if rest and not self.skipping:
            self.partial += rest
            if len(self.partial) > self.max_line:  # a line with no end yet: cut it now, drop the rest of it
                lines.append(self._clip(bytes(self.partial)))
                self.partial.clear()
                self.skipping = True
        if lines:
            self._emit(lines)

    def _clip(self, line: bytes) -> bytes:
        if len(line) > self.max_line:
            self.lines_cut += 1
            return clip_bytes(line, self.max_line)
        return line

    def _emit(self, lines: list[bytes]) -> None:
        blob = b"\n".join(lines) + b"\n"
        if self.file.fits(len(blob)):
            self.file.write(blob)
            written = lines
        else:  # line by line up to the cap, then the marker
            written = []
            for line in lines:
                if not self.file.write(line + b"\n", seen_bytes=self.seen):
                    break
                written.append(line)
        if self.on_line is not None:
            for line in written:
                try:
                    self.on_line(line.decode("utf-8", "replace"))
                except Exception:  # noqa: BLE001 - a parser bug must not kill the stream to the file
                    pass

    def close(self) -> None:
        if self.partial and not self.file.capped:
            self._emit([self._clip(bytes(self.partial))])
        self.partial.clear()
        self.file.close()


class BoundedBuffer:
    """The first and last bytes of an output of any length (one `docker exec`'s stdout)."""

    def __init__(self, max_bytes: int, tail_bytes: int | None = None) -> None:
        self.max_bytes = int(max_bytes)
        self.tail_keep = min(tail_bytes if tail_bytes is not None else self.max_bytes // 8, self.max_bytes // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    @property
    def truncated(self) -> bool:
        return self.total > self.max_bytes

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.max_bytes - self.tail_keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.tail_keep > 0:
            self.tail += data[-2 * self.tail_keep:]
            if len(self.tail) > 2 * self.tail_keep:
                del self.tail[: len(self.tail) - self.tail_keep]

    def getvalue(self) -> bytes:
        tail = bytes(self.tail[-self.tail_keep:]) if self.tail_keep else b""
        if not self.truncated:
            return bytes(self.head) + tail
        cut = self.total - len(self.head) - len(tail)
        return bytes(self.head) + b"\n[statebox: %d bytes of output cut here]\n" % cut + tail

    def text(self) -> str:
        return self.getvalue().decode("utf-8", "replace")


def read_tail(path: Path | str, max_bytes: int = 64 * 1024, *, skip_marker: bool = True) -> str:
    """The last `max_bytes` of a (possibly huge) log as text, without reading the rest; marker lines dropped."""
    try:
        with Path(path).open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(size - max_bytes, 0))
            data = fh.read(max_bytes)
    except OSError:
        return ""
    lines = data.decode("utf-8", "replace").splitlines()
    if size > max_bytes and lines:
        lines = lines[1:]  # the first line is most likely a piece of a longer one
    if skip_marker:
        lines = [line for line in lines if not is_marker(line)]
    return "\n".join(lines)


def clamp_tree(root: Path | str, max_file_bytes: int, max_total_bytes: int) -> list[str]:
    """After a container wrote into a host folder directly: hold every file there to the caps.

    Links and special files are removed (never followed); a regular file over
    `max_file_bytes`, or past `max_total_bytes` for the folder, is cut and ends with the
    marker line. Returns the relative paths that were cut or removed.
    """
    import stat

    root = Path(root)
    touched: list[str] = []
    total = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            rel = os.path.relpath(entry.path, root)
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(entry.path))
                continue
            if not stat.S_ISREG(st.st_mode):
                try:
                    os.unlink(entry.path)
                except OSError:
                    pass
                touched.append(rel)
                continue
            allowed = max(min(max_file_bytes, max_total_bytes - total) - MARKER_RESERVE, 0)
            if st.st_size > allowed:
                try:
                    fd = os.open(entry.path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
                    try:
                        os.ftruncate(fd, allowed)
                        os.lseek(fd, 0, os.SEEK_END)
                        os.write(fd, (b"\n" if allowed else b"") + marker_line(rel, max_file_bytes, seen_bytes=st.st_size))
                    finally:
                        os.close(fd)
                except OSError:
                    try:
                        os.unlink(entry.path)
                    except OSError:
                        pass
                touched.append(rel)
                total += allowed + MARKER_RESERVE
            else:
                total += st.st_size
    return touched
