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
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO


def _created_beside(path: Path, suffix: str) -> tuple[int, str]:
    """A fresh file of this call's own beside `path` (same folder, so a rename is atomic), with the mode `open(path,
    "w")` would have given, not mkstemp's 0600: its descriptor and name. mkstemp opens with `O_EXCL | O_NOFOLLOW`."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


@contextmanager
def _renamed_over(tmp: str, path: Path) -> Iterator[None]:
    """On a clean exit `tmp` is renamed over `path`; on an error it is removed (quietly if its writer already did),
    and what stood at `path` is untouched."""
    try:
        yield
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextmanager
def replacing(path: Path | str) -> Iterator[BinaryIO]:
    """A binary handle on a fresh temporary file beside `path`; on a clean exit it is flushed and renamed over
    `path`, on an error removed (what stood at `path` is untouched)."""
    path = Path(path)
    fd, tmp = _created_beside(path, ".tmp")
    with _renamed_over(tmp, path), os.fdopen(fd, "wb") as handle:  # closed (flushed) before the rename
        yield handle


def replace_file(path: Path | str, data: bytes) -> None:
    """`path` holds `data`, whole, or keeps what it held."""
    with replacing(path) as handle:
        handle.write(data)


def replace_text(path: Path | str, text: str) -> None:
    replace_file(path, text.encode("utf-8"))


@contextmanager
def replacing_by_name(path: Path | str) -> Iterator[str]:
    """The name of a fresh, empty file of this process's own beside `path` (keeping its suffix), for a writer that
    must be handed a file name (inspect_ai's `write_eval_log`): renamed over `path` on a clean exit, removed on an
    error."""
    path = Path(path)
    fd, tmp = _created_beside(path, f".tmp{path.suffix}")
    os.close(fd)
    with _renamed_over(tmp, path):
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
