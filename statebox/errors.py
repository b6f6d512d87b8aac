"""User-facing errors.

Anything a user can cause (a malformed file, a missing video, no Docker engine,
no API key) raises `UserError`. The CLI turns it into exactly one line naming
the cause and exit code 2; nothing already written is touched.
"""

from __future__ import annotations

import errno
import stat


class UserError(Exception):
    """A problem the user can fix; its message is the one line the CLI prints."""

    exit_code = 2


class DataError(UserError):
    """A malformed input file: the message starts with `file:line:`."""

    def __init__(self, path: object, line: int | None, what: str) -> None:
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {what}")
        self.path = path
        self.line = line
        self.what = what

    def __reduce__(self) -> tuple[type["DataError"], tuple[object, int | None, str]]:
        # raised in a worker process (`statebox audit --jobs N`), it must cross back whole: pickled by its
        # message alone (Exception's way), it could not be rebuilt, and the pool broke with a traceback
        return (type(self), (self.path, self.line, self.what))


class InfrastructureError(Exception):
    """A failure of the machinery (engine hiccup, image missing) rather than of the agent.

    The harness retries these; agent failures are never retried.
    """


class StorageError(UserError):
    """statebox could not write its own files (a full disk, a read-only run folder).

    Unlike an agent's failure this stops the whole run: recording it as a failed attempt
    would make `--resume` skip an attempt that never ran. Rows already written stay.
    """


# errno -> the words of the one line; EACCES/EPERM only count for paths statebox owns
_STORAGE_ERRNOS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}
_ALWAYS_STORAGE = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}


def storage_error(exc: BaseException, path: object = None, doing: str = "", *, owned: bool = True) -> StorageError | None:
    """The one-line `StorageError` for an OSError from writing statebox's own files, else None.

    `owned`: the path is one statebox writes (run folder, workspace), so EACCES/EPERM also
    mean "cannot write there" rather than an agent's business.
    """
    if isinstance(exc, StorageError):
        return exc
    if not isinstance(exc, OSError) or exc.errno not in _STORAGE_ERRNOS:
        return None
    if exc.errno not in _ALWAYS_STORAGE and not owned:
        return None
    where = path if path is not None else (exc.filename if exc.filename is not None else "?")
    words = _STORAGE_ERRNOS[exc.errno]
    return StorageError(f"{doing}: {words} ({where})" if doing else f"{words} ({where})")


def file_kind(mode: int) -> str:
    """What a file is, in the words of the one-line error (said of what statebox will not read or write there)."""
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"
