"""`statebox export RUN_DIR --format inspect|atif --out PATH`: a run for the viewers people already use."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from statebox.report.export import export_run


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export(
        run_dir: Path = typer.Argument(..., help="a run folder (statebox run --run-dir)"),
        fmt: str = typer.Option(..., "--format", help="inspect (an Inspect AI eval log: `inspect view` opens it) | "
                                                      "atif (Harbor's trajectory format, ATIF-v1.4)"),
        out: Path = typer.Option(..., "--out", help="inspect: a .eval (or .json) file; atif: a folder, written as "
                                                    "OUT/<attempt_id>/agent/trajectory.json"),
        as_json: bool = typer.Option(False, "--json", help="print what was written as JSON"),
    ) -> None:
        """Export a run as an Inspect AI eval log or as Harbor ATIF trajectories, one per attempt.

        Every stored attempt becomes one Inspect sample (messages from its events.jsonl, the per-query
        score with the answer, the audit verdict as the score's explanation) or one ATIF trajectory.
        """
        result = export_run(run_dir, fmt, out)
        if as_json:
            sys.stdout.write(json.dumps({"format": result.format, "out": str(result.out), "attempts": result.attempts}) + "\n")
            return
        print(f"{result.attempts} attempts written to {result.out} ({result.format})")
