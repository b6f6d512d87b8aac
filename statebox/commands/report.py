"""`statebox report RUN_DIR`: the HTML report (one file, or one page plus a folder for big runs) and a terminal summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from statebox.report.page import write_report_output
from statebox.report.leaderboard import attribution_table, print_leaderboard, wide_console
from statebox.report.trust_view import trust_table


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        run_dir: Path = typer.Argument(..., help="a run folder (statebox run --run-dir)"),
        out: Optional[Path] = typer.Option(None, help="HTML file to write (default RUN_DIR/report.html)"),
        single_file: bool = typer.Option(
            False, "--single-file", help="one self-contained file whatever the run size (big runs otherwise get OUT plus a OUT_files/ folder)"
        ),
        as_json: bool = typer.Option(False, "--json", help="print the scores as JSON instead of a table"),
    ) -> None:
        """Write the HTML report of a run and print its leaderboard."""
        result = write_report_output(run_dir, out, single_file=single_file)
        if as_json:
            payload = {
                "run_dir": str(run_dir),
                "report": str(result.path),
                "report_bytes": result.bytes,
                "single_file": result.single_file,
                "files_dir": str(result.files_dir) if result.files_dir else None,
                "attempts": result.n_rows,
                "results": [{**s.to_json(), **(result.trust.entry(s.agent, s.dataset) if result.trust else {})}
                            for s in result.scores],
                "failure_attribution": result.failure_attribution,  # {agent: {dataset: {step: n}}}, first epoch
            }
            sys.stdout.write(json.dumps(payload, default=str) + "\n")
            return
        console = wide_console()
        print_leaderboard(result.scores, console)
        if result.trust is not None:
            console.print(trust_table(result.trust))
        if result.attribution:
            console.print(attribution_table(result.attribution))
        console.print(f"report: {result.describe()}")
