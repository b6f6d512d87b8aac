"""The `statebox` command line: thin, it parses flags and calls the packages.

Each command group lives in `statebox/commands/<name>.py` and exposes
`register(app)`. Heavy imports (docker, langgraph, torch) happen inside the
command functions so `statebox --help` stays instant.
"""

from __future__ import annotations

import importlib
import sys

import typer

from statebox.errors import UserError

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


COMMAND_MODULES = ("score", "bench", "policy", "sandbox", "run", "tracker", "audit", "report", "demo")

for _name in COMMAND_MODULES:
    _module = importlib.import_module(f"statebox.commands.{_name}")
    _module.register(app)


def main() -> None:
    """Entry point: one clear line and exit code 2 for anything the user can fix."""
    try:
        app()
    except UserError as exc:
        print(f"statebox: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
