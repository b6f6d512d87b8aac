"""`statebox report RUN_DIR`: one self-contained HTML report plus a terminal summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        run_dir: Path = typer.Argument(..., help="a run folder (statebox run --run-dir)"),
        out: Optional[Path] = typer.Option(None, help="HTML file to write (default RUN_DIR/report.html)"),
        as_json: bool = typer.Option(False, "--json", help="print the scores as JSON instead of a table"),
    ) -> None:
        """Write the HTML report of a run and print its leaderboard."""
        from statebox.harness.report import write_report
        from statebox.harness.summary import print_leaderboard, wide_console

        path, scores, rows = write_report(run_dir, out)
        if as_json:
            payload = {"run_dir": str(run_dir), "report": str(path), "results": [s.to_json() for s in scores]}
            sys.stdout.write(json.dumps(payload, default=str) + "\n")
            return
        console = wide_console()
        print_leaderboard(scores, console)
        console.print(f"report: {path}")
