"""User-facing errors.

Anything a user can cause (a malformed file, a missing video, no Docker engine,
no API key) raises `UserError`. The CLI turns it into exactly one line naming
the cause and exit code 2; nothing already written is touched.
"""

from __future__ import annotations


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


class InfrastructureError(Exception):
    """A failure of the machinery (engine hiccup, image missing) rather than of the agent.

    The harness retries these; agent failures are never retried.
    """
