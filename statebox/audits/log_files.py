"""A user's log file, opened as the hostile file it is: no link followed, a regular file, under a size cap.

Why a module of its own: every reader of another harness's logs (Inspect, Harbor, the CLIs' session files) and the
format sniffing before them open files a user handed over; one way of opening them means one place where a fifo, a
device, a link or a file past the cap is refused in one line naming it.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO

from statebox.audits.session_limits import past_bytes
from statebox.errors import UserError, file_kind
from statebox.userfiles import read_upto

MAX_LOG_BYTES = 2 * 1024**3  # one log file; an Inspect log of a large eval is big, a session file far smaller


def open_regular(path: Path, cap: int = MAX_LOG_BYTES) -> BinaryIO:
    """Open a user's file for reading: no link followed (O_NOFOLLOW), a regular file (a fifo or device
    would hang or never end), at most `cap` bytes; otherwise one line naming the file and why."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        why = "a symbolic link (not followed)" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise UserError(f"{path}: cannot read ({why})") from None
    info = os.fstat(fd)  # before fdopen, which refuses a folder with its own error (a traceback, `--items .`)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UserError(f"{path}: {file_kind(info.st_mode)}, not a regular file")
    if info.st_size > cap:
        os.close(fd)
        raise UserError(f"{path}: {info.st_size} bytes, over the {cap} byte cap for one log")
    return os.fdopen(fd, "rb")


def read_capped(path: Path, cap: int = MAX_LOG_BYTES) -> bytes:
    with open_regular(path, cap) as fh:
        data = read_upto(fh, cap + 1)  # not fh.read(cap + 1), which allocates the 2 GiB cap before reading
    if len(data) > cap:  # grew while being read
        raise UserError(f"{path}: over the {cap} byte cap for one log")
    return data


def read_within(path: Path, most: int) -> tuple[bytes, str | None]:
    """A session file's bytes, or (b"", the note saying so) where it holds more than `most`: at most `most` + 1
    bytes are read whatever its size, so a file over a limit is flagged (`audit_limit`), never an error that
    would end the audit of every other session."""
    with open_regular(path, cap=sys.maxsize) as fh:
        size = os.fstat(fh.fileno()).st_size
        data = read_upto(fh, most + 1)
    if len(data) > most:
        return b"", past_bytes(path.name, max(size, len(data)), most)
    return data, None


