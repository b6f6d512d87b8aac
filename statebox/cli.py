"""The `statebox` command line: thin, it parses flags and calls the packages.

Each command group lives in `statebox/commands/<name>.py` and exposes
`register(app)` and imports statebox's own modules at its top; only heavy optional
dependencies (the synthetic generator, model SDKs, langgraph, ray, torch) are imported
inside the command functions.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

from statebox import signals
from statebox.errors import UserError, storage_error
from statebox.sandbox.docker import remove_own_containers

app = typer.Typer(
    name="statebox",
    help="Evaluate agents on video state-tracking benchmarks, in sandboxes, with an auditor and one scorer.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

@app.callback()
def root() -> None:
    """statebox: trustworthy scores for agents on video state-tracking benchmarks."""


@app.command("version")
def version() -> None:
    """Print statebox's version."""
    from statebox import __version__

    print(__version__)


COMMAND_MODULES = ("score", "bench", "policy", "sandbox", "run", "tracker", "audit", "report", "view", "demo", "cluster")

for _name in COMMAND_MODULES:
    _module = importlib.import_module(f"statebox.commands.{_name}")
    _module.register(app)


def _finish(code: int, line: str) -> None:
    """Print the one line and exit; if a worker thread is still stuck, do not wait for it."""
    print(f"statebox: {line}", file=sys.stderr, flush=True)
    if not signals.settle_threads(sweep=remove_own_containers):
        sys.stdout.flush()
        os._exit(code)
    sys.exit(code)


def main() -> None:
    """Entry point: one clear line and exit code 2 for anything the user can fix.

    SIGINT/SIGTERM/SIGHUP all unwind the same way (statebox/signals.py): containers
    removed, workspaces cleaned, rows kept, one line, exit 128 + the signal number.
    """
    signals.install()
    try:
        app()
    except signals.Interrupted as exc:
        remove_own_containers()  # backstop for any command that started containers
        _finish(exc.exit_code, str(exc))
    except UserError as exc:
        if signals.stopping():
            remove_own_containers()
        _finish(exc.exit_code, f"error: {exc}")
    except OSError as exc:  # a full or read-only disk is never a traceback
        err = storage_error(exc)
        if err is None:
            raise
        _finish(err.exit_code, f"error: {err}")


if __name__ == "__main__":
    main()
