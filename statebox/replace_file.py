"""Write a file whole or not at all, never through a link someone planted beside it.

Why a module of its own: statebox writes into folders it did not make alone. `statebox audit RUN` writes each
attempt's verdict.json into a run folder someone may have handed over (a tarball keeps links), and its pages and
exports go where the user points, often inside that folder. The old way, a fixed temporary name
(`verdict.json.tmp`) opened for writing and then renamed, wrote through a link planted at that name: over any
file the user can write (their `~/.bashrc`). Here the temporary file is one this call creates itself, under a
fresh random name, with `O_CREAT | O_EXCL` (which fails on any existing name, a link included) and `O_NOFOLLOW`;
the rename then replaces what stands at the target, a link included, without following it.

What it replaces is a regular file, a link to one, a dangling link, or nothing. Run as root, `statebox audit X
--html /dev/full` renamed its page over the device node, and `/dev/null` or `/dev/stdout` (a link to the terminal or
a pipe) would have gone the same way: a device, FIFO, socket or folder at the target, a link to one, or a path that
leads into /proc is refused with one error line (`UserError`), before anything is written and again just before the
rename. A writer may also say what it replaces (`Holding`: an HTML page, an Inspect log), and then a file already
there must begin as one: a slip of the user's (`--out RUN/results.sqlite`) is refused rather than obeyed.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from statebox.errors import UserError, file_kind


@dataclass(frozen=True)
class Holding:
    """What a writer replaces at its target: a file that already stands there must look like one, by its first bytes.

    `statebox report RUN --out RUN/results.sqlite` renamed the page over the run's result store, and `statebox audit
    S.jsonl --html S.jsonl` over the session it had just audited (found by probe): a page replaces only a page."""

    what: str
    head: re.Pattern[bytes]

    def holds(self, first: bytes) -> bool:
        return bool(self.head.match(first.removeprefix(b"\xef\xbb\xbf")))


HEAD_BYTES = 65536  # enough for an Inspect log's `"eval": {` after its version and status
HTML_PAGE = Holding("an HTML page", re.compile(rb"\s*<(!doctype\s+html|html)[\s>]", re.I))
INSPECT_EVAL = Holding("an Inspect .eval log (a zip)", re.compile(rb"PK\x03\x04"))
INSPECT_JSON = Holding("an Inspect .json log", re.compile(rb'\s*\{.*"eval"\s*:\s*\{', re.S))


def inspect_log_holding(path: Path) -> Holding:
    """What an Inspect log written to `path` replaces: a zip for `.eval`, the JSON document otherwise."""
    return INSPECT_EVAL if path.suffix == ".eval" else INSPECT_JSON


def _first_bytes(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        return os.read(fd, HEAD_BYTES)
    finally:
        os.close(fd)


MAX_LINK_HOPS = 40  # the kernel's own limit on links followed in one lookup


def _names_an_open_file(path: Path) -> bool:
    """Whether `path`, or a link on the way from it, stands in /proc: `/dev/stdout` is a link to `/proc/self/fd/1`,
    which names whatever the process's output is. Redirected to a file, that is a regular file, and renaming over the
    link replaced `/dev/stdout` itself, for every program on the machine (found by probe, run as root)."""
    current = path
    for _ in range(MAX_LINK_HOPS):
        folder = os.path.realpath(current.parent)
        if folder == "/proc" or folder.startswith("/proc/"):
            return True
        try:
            if not stat.S_ISLNK(os.lstat(current).st_mode):
                return False
            current = Path(folder) / os.readlink(current)
        except OSError:
            return False
    return True  # a loop of links: nothing to replace


def refuse_unless_replaceable(path: Path, holding: Holding | None = None) -> None:
    """Raise `UserError` unless `path` holds nothing, a regular file, or a link to a regular file or to nothing; and,
    given `holding`, a regular file there (not empty) must begin as one (a link is replaced, never written through,
    so what it names is kept whatever it holds).

    A link is never followed to write; it is followed here only to ask what it names, so that a link to a device, a
    FIFO or a folder is refused as what it names would be, and so is any path through /proc (`/dev/stdout`)."""
    if _names_an_open_file(Path(path)):
        raise UserError(f"{path}: leads into /proc, where /dev/stdout and /dev/fd/N name a process's open files, not a "
                        "regular file; statebox writes a whole file only over a regular file or a new name "
                        "(nothing written)")
    try:
        here = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(here.st_mode):
        if holding is not None and here.st_size and not holding.holds(_first_bytes(Path(path))):
            raise UserError(f"{path}: exists and is not {holding.what}; statebox replaces a file there only when it is "
                            "one (give a new name, or remove the file)")
        return
    if stat.S_ISLNK(here.st_mode):
        try:
            named = os.stat(path)
        except OSError:  # dangling (or unreadable past the link): only the link is replaced
            return
        if stat.S_ISREG(named.st_mode):
            return
        raise UserError(f"{path}: a link to {file_kind(named.st_mode)}, not a regular file; statebox writes a "
                        "whole file only over a regular file or a new name (nothing written)")
    raise UserError(f"{path}: {file_kind(here.st_mode)}, not a regular file; statebox writes a whole file only over a "
                    "regular file or a new name (nothing written)")


def _created_beside(path: Path, suffix: str, holding: Holding | None) -> tuple[int, str]:
    """A fresh file of this call's own beside `path` (same folder, so a rename is atomic), with the mode `open(path,
    "w")` would have given, not mkstemp's 0600: its descriptor and name. mkstemp opens with `O_EXCL | O_NOFOLLOW`."""
    refuse_unless_replaceable(path, holding)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


@contextmanager
def _renamed_over(tmp: str, path: Path, holding: Holding | None) -> Iterator[None]:
    """On a clean exit `tmp` is renamed over `path`; on an error it is removed (quietly if its writer already did),
    and what stood at `path` is untouched."""
    try:
        yield
        refuse_unless_replaceable(path, holding)  # again: what stood there may have changed while the file was written
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextmanager
def replacing(path: Path | str, holding: Holding | None = None) -> Iterator[BinaryIO]:
    """A binary handle on a fresh temporary file beside `path`; on a clean exit it is flushed and renamed over
    `path`, on an error removed (what stood at `path` is untouched). `holding`: what a file already at `path` must
    be for this write to replace it (`refuse_unless_replaceable`)."""
    path = Path(path)
    fd, tmp = _created_beside(path, ".tmp", holding)
    with _renamed_over(tmp, path, holding), os.fdopen(fd, "wb") as handle:  # closed (flushed) before the rename
        yield handle


def replace_file(path: Path | str, data: bytes, holding: Holding | None = None) -> None:
    """`path` holds `data`, whole, or keeps what it held."""
    with replacing(path, holding) as handle:
        handle.write(data)


def replace_text(path: Path | str, text: str, holding: Holding | None = None) -> None:
    replace_file(path, text.encode("utf-8"), holding)


@contextmanager
def replacing_by_name(path: Path | str, holding: Holding | None = None) -> Iterator[str]:
    """The name of a fresh, empty file of this process's own beside `path` (keeping its suffix), for a writer that
    must be handed a file name (inspect_ai's `write_eval_log`): renamed over `path` on a clean exit, removed on an
    error."""
    path = Path(path)
    fd, tmp = _created_beside(path, f".tmp{path.suffix}", holding)
    os.close(fd)
    with _renamed_over(tmp, path, holding):
        yield tmp


def _umask() -> int:
    """The process's umask, read once at import: from /proc (Linux), else by setting it and back, which is safe
    only before other threads create files (hence at import, not per write)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()
