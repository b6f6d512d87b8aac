"""Removing a folder an agent has touched, whatever it did to it.

Why not `shutil.rmtree`: on Python 3.11 it recurses once per level, so 1,200 nested
folders raise `RecursionError`; with `ignore_errors=True` that was swallowed and the
workspace stayed on the host. `remove_tree` never recurses and never builds long
paths: it works on directory file descriptors and moves every subfolder it meets up
to the top folder under a fresh name (a rename within one filesystem), so each folder
is emptied at depth one. It never follows a symlink (the agent's links to `/` or to
an answer key are unlinked, not entered), restores the owner's permissions on folders
the agent made unreadable, and raises `CleanupError` naming the path when something
stays, so a failed clean-up is never silent.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from statebox.errors import UserError


class CleanupError(UserError):
    """A folder could not be removed completely; the message names it and why."""


def _open_dir(name: str, dir_fd: int | None) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)


def _make_traversable(fd: int) -> None:
    try:
        mode = os.fstat(fd).st_mode
        if mode & 0o700 != 0o700:
            os.fchmod(fd, stat.S_IMODE(mode) | 0o700)
    except OSError:
        pass


def remove_tree(path: Path | str) -> None:
    """Remove `path` and everything below it; missing is fine; raises CleanupError on failure."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        path.unlink()
        return
    try:
        top = _open_dir(str(path), None)
    except OSError as exc:
        raise CleanupError(f"{path}: cannot open for removal ({exc.strerror})") from exc
    try:
        _make_traversable(top)
        pending: list[str | None] = [None]  # None: the top folder itself; names: folders moved up into it
        while pending:
            name = pending.pop()
            fd = top if name is None else _open_dir(name, top)
            try:
                _make_traversable(fd)
                for entry in list(os.scandir(fd)):
                    if entry.is_dir(follow_symlinks=False):
                        if name is None:
                            pending.append(entry.name)  # already at depth one
                            continue
                        flat = f".rm-{secrets.token_hex(8)}"
                        os.rename(entry.name, flat, src_dir_fd=fd, dst_dir_fd=top)
                        pending.append(flat)
                    else:
                        os.unlink(entry.name, dir_fd=fd)
            finally:
                if fd != top:
                    os.close(fd)
            if name is not None:
                if _has_subdirs(name, top):
                    pending.append(name)  # something appeared meanwhile: look again
                else:
                    os.rmdir(name, dir_fd=top)
    except OSError as exc:
        raise CleanupError(f"{path}: could not be removed ({exc.strerror or exc})") from exc
    finally:
        os.close(top)
    try:
        os.rmdir(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return
        raise CleanupError(f"{path}: could not be removed ({exc.strerror})") from exc


def _has_subdirs(name: str, top: int) -> bool:
    fd = _open_dir(name, top)
    try:
        return any(True for _ in os.scandir(fd))
    finally:
        os.close(fd)
