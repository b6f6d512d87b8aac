"""The `statebox` command line: thin, it parses flags and calls the packages.

Each command lives in `statebox/commands/<name>.py` and exposes `register(app)`; it imports
statebox's own modules at its top, and only heavy optional dependencies (the synthetic
generator, model SDKs, langgraph, ray, torch) inside the command functions.

Registration is lazy (`LazyGroup`): `statebox --help` lists the names and one-line helps of
`COMMANDS` without importing any command module, and `statebox NAME ...` (or `statebox NAME
--help`) imports `statebox/commands/NAME.py` only. `COMMANDS` repeats each command's first help
paragraph; tests/test_cli_lazy.py checks that it matches what the module registers.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand, TyperGroup

from statebox import __version__, signals
from statebox.errors import UserError, storage_error

if TYPE_CHECKING:  # typer vendors click (typer._click): its group's methods take and return these classes
    from typer._click import Command, Context, HelpFormatter

# name -> the first paragraph of its help, in the order `statebox --help` lists them
COMMANDS: dict[str, str] = {
    "score": "Score predictions exactly as each benchmark's released code does (plus CIs, chance, breakdowns).",
    "run": "Run agents on a benchmark or the generated suite; rerun the same command to resume.",
    "audit": "Check sessions for the seven contamination categories and honeytokens (a session past the audit's limits is flagged); write verdicts.",
    "report": "Write the HTML report of a run and print its leaderboard.",
    "view": "Serve a run's report on localhost with progress, rows as they are written, and attempts in flight "
            "(reads the run folder only; only the printed address, which carries a token, opens it).",
    "export": "Export a run as an Inspect AI eval log or as Harbor ATIF trajectories, one per attempt.",
    "demo": "Run the main job on the built-in tiny suite and print the leaderboard and report path.",
    "bench": "The built-in generated suite: make it, summarise it, validate it, derive variants.",
    "policy": "Policy profiles (limits, environment allow-list, budgets, audit actions).",
    "sandbox": "Sandbox images, engine checks, and running one command in a sandbox.",
    "tracker": "The detector/tracker baseline: train its detector on a generated suite, score it per task.",
    "cluster": "Ray cluster: check it (doctor) and put the sandbox images on every node (prepare).",
}


def load_command(name: str) -> Command:
    """Import `statebox/commands/<name>.py` and return the click command it registers as `name`."""
    module = importlib.import_module(f"statebox.commands.{name}")
    holder = typer.Typer()
    module.register(holder)
    command = typer.main.get_group(holder).commands.get(name)
    if command is None:
        raise RuntimeError(f"statebox/commands/{name}.py registers no command {name!r}")
    return command


class LazyGroup(TyperGroup):
    """The root group: `COMMANDS` are imported when invoked (or their own help is asked for);
    the root's help shows them from the table."""

    _listing = False

    def list_commands(self, ctx: Context) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in COMMANDS if n not in self.commands)]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            if self._listing:  # the root's help: a placeholder with the table's line, nothing imported
                return TyperCommand(cmd_name, help=COMMANDS[cmd_name])
            self.add_command(load_command(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True
        try:
            return super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="statebox",
    cls=LazyGroup,
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
    print(__version__)


def remove_own_containers() -> int:
    """The engine's sweep of this process's containers (imported only on the way out: docker is slow to import)."""
    from statebox.sandbox.docker import remove_own_containers as sweep  # why: the docker SDK imports slowly

    return sweep()


def _sweep_if_connected() -> int:
    """The signal backstop's sweep (another thread): a process that never imported the engine
    module started no container, and importing it there could wait on the main thread's import."""
    module = sys.modules.get("statebox.sandbox.docker")
    return module.remove_own_containers() if module is not None else 0


def _finish(code: int, line: str) -> None:
    """Print the one line and exit; if a worker thread is still stuck, do not wait for it."""
    signals.answered()
    print(f"statebox: {line}", file=sys.stderr, flush=True)
    if not signals.settle_threads(sweep=remove_own_containers):
        sys.stdout.flush()
        os._exit(code)
    sys.exit(code)


def _stopped(exc: signals.Interrupted) -> None:
    remove_own_containers()  # backstop for any command that started containers
    _finish(exc.exit_code, str(exc))


def main() -> None:
    """Entry point: one clear line and exit code 2 for anything the user can fix.

    SIGINT/SIGTERM/SIGHUP all unwind the same way (statebox/signals.py): the handler only
    records the signal, the command raises `Interrupted` at its next safe point, then
    containers removed, workspaces cleaned, rows kept, one line, exit 128 + the signal number.
    """
    signals.install(sweep=_sweep_if_connected)
    try:
        app()
    except signals.Interrupted as exc:
        _stopped(exc)
    except signals.Cancelled:  # a worker's stop surfacing in the main thread: the signal's way out
        if not signals.stopping():
            raise
        _stopped(signals.interrupted())
    except SystemExit:
        # the command ended on its own after a signal that found no safe point left: still
        # the signal's way out (its exit code, its line), never a silent 0
        if signals.stopping():
            _stopped(signals.interrupted())
        raise
    except UserError as exc:
        if signals.stopping():  # an error on the way to the safe point (the user asked to stop): the signal's way out
            _stopped(signals.interrupted())
        _finish(exc.exit_code, f"error: {exc}")
    except OSError as exc:  # a full or read-only disk is never a traceback
        err = storage_error(exc)
        if err is None:
            raise
        _finish(err.exit_code, f"error: {err}")


if __name__ == "__main__":
    main()
