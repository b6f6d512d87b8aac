"""Write a file whole or not at all, never through a link someone planted beside it.

Why a module of its own: statebox writes into folders it did not make alone. `statebox audit RUN` writes each
attempt's verdict.json into a run folder someone may have handed over (a tarball keeps links), and its pages and
exports go where the user points, often inside that folder. The old way, a fixed temporary name
(`verdict.json.tmp`) opened for writing and then renamed, wrote through a link planted at that name: over any
file the user can write (their `~/.bashrc`). Here the temporary file is one this call creates itself, under a
fresh random name, with `O_CREAT | O_EXCL` (which fails on any existing name, a link included) and `O_NOFOLLOW`;
the rename then replaces whatever stands at the target, a link included, without following it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


@contextmanager
def replacing(path: Path | str) -> Iterator[BinaryIO]:
    """A binary handle on a fresh temporary file beside `path`; on a clean exit it is flushed and renamed over
    `path`, on an error removed (what stood at `path` is untouched)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # O_EXCL | O_NOFOLLOW, 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)  # what `open(path, "w")` would have given, not mkstemp's 0600
            yield handle
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def replace_file(path: Path | str, data: bytes) -> None:
    """`path` holds `data`, whole, or keeps what it held."""
    with replacing(path) as handle:
        handle.write(data)


def replace_text(path: Path | str, text: str) -> None:
    replace_file(path, text.encode("utf-8"))


def temporary_beside(path: Path | str) -> str:
    """A fresh, empty file of this process's own beside `path` (same folder, so a rename is atomic), for a writer
    that must be handed a file name (inspect_ai's `write_eval_log`); the caller renames it over `path` or removes it."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return tmp


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
