"""`statebox score`: score a predictions JSONL against a benchmark file with the official rules."""

from __future__ import annotations

import json
import math
from enum import Enum
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from statebox.benchmarks import load_benchmark
from statebox.model_names import ANTHROPIC_MODEL, OPENAI_MODEL
from statebox.model_retirement import retirement_notes
from statebox.scoring.judge import make_judge
from statebox.scoring.predictions import load_predictions
from statebox.schema import ScoreReport
from statebox.scoring.report import score_predictions

MAX_BOOTSTRAP = 100_000  # a 95% CI settles within a few thousand; 100,000 x ~11 metrics is ~9 MB


class Bench(str, Enum):
    vstat = "vstat"
    vcbench = "vcbench"
    ecbench = "ecbench"
    eocbench = "eocbench"
    cpbench = "cpbench"


class JudgeKind(str, Enum):
    auto = "auto"
    openai = "openai"
    anthropic = "anthropic"
    fuzzy = "fuzzy"


def register(app: typer.Typer) -> None:
    @app.command("score")
    def score(
        bench: Bench = typer.Option(..., "--bench", help="Benchmark whose rules apply."),
        data: Path = typer.Option(..., "--data", help="The benchmark's annotation file."),
        predictions: Path = typer.Option(..., "--predictions", help="JSONL: {id, query_index, response, clips}."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object (the ScoreReport) on stdout."),
        judge: JudgeKind = typer.Option(JudgeKind.auto, "--judge",
                                        help="EC-Bench enumeration judge (auto: OpenAI/Anthropic key if set, else fuzzy)."),
        judge_model: str = typer.Option(None, "--judge-model", help=f"Judge model (default {OPENAI_MODEL} / {ANTHROPIC_MODEL})."),
        # capped: the replicates are held as one (replicates x metrics) array, and `--bootstrap 1000000000` asked numpy
        # for 82 GiB (a traceback where the allocation failed, the host's memory where it did not; found by probe)
        bootstrap: int = typer.Option(1000, "--bootstrap", min=0, max=MAX_BOOTSTRAP,
                                      help=f"Bootstrap replicates for the 95% CIs (0: none; at most {MAX_BOOTSTRAP:,})."),
        seed: int = typer.Option(0, "--seed", help="Seed for the bootstrap and the random baseline."),
    ) -> None:
        """Score predictions exactly as each benchmark's released code does (plus CIs, chance, breakdowns)."""
        loaded = load_benchmark(bench.value, data)
        lines = load_predictions(predictions)
        enumeration_judge = make_judge(judge.value, judge_model) if bench == Bench.ecbench else None
        for note in retirement_notes([judge_model] if enumeration_judge is not None and judge_model else []):
            typer.echo(f"warning: {note}", err=True)
        report = score_predictions(bench.value, loaded.items, lines, enumeration_judge, n_boot=bootstrap, seed=seed,
                                   source=str(predictions))
        report.warnings = loaded.warnings + report.warnings
        if as_json:
            typer.echo(json.dumps(_strict_json(report.model_dump(mode="json")), allow_nan=False))
        else:
            print_report(report)


def print_report(report: ScoreReport) -> None:
    console = Console()
    extra = report.model_extra or {}
    ci = extra.get("ci") or {}
    chance = extra.get("chance") or {}
    table = Table(title=f"{report.benchmark}: {report.n} items", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("95% CI (by video)", justify="right")
    for kind in chance:
        table.add_column(f"chance: {kind}", justify="right")
    for name, value in report.metrics.items():
        interval = ci.get(name)
        table.add_row(
            _plain(name),
            _fmt(value),
            f"{_fmt(interval[0])} - {_fmt(interval[1])}" if interval else "",
            *[_fmt(chance[k].get(name)) if name in chance[k] else "" for k in chance],
        )
    console.print(table)
    if report.groups:
        headline = list(report.metrics)[:3]
        groups = Table(title="breakdown by label", title_justify="left")
        groups.add_column("group")
        groups.add_column("n", justify="right")
        for name in headline:
            groups.add_column(name, justify="right")
        for name, group in report.groups.items():
            groups.add_row(_plain(name), str(group.n), *[_fmt(group.metrics.get(m)) for m in headline])
        console.print(groups)
    failures = extra.get("parse_failures") or {}
    console.print(f"parse failures: {failures.get('count', 0)} of {failures.get('queries', 0)} queries; "
                  f"missing predictions: {extra.get('missing', 0)}")
    if extra.get("judge"):
        console.print(f"enumeration judge: {extra['judge']}")
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/yellow] {_plain(warning)}")


def _strict_json(value: object) -> object:
    """`value` with every float that is not finite as null: `json.dumps` writes `Infinity` and `NaN`, which are no
    JSON values (a strict reader refuses the whole object); a metric over no finite number has no value."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _strict_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_strict_json(item) for item in value]
    return value


def _plain(text: str) -> str:
    """Text from the user's files (ids, labels) as the console shows it: never read as rich markup (`[link=...]` in an
    id), and a lone surrogate (valid JSON) as its escape, which a terminal can be sent (it raised after the table)."""
    return escape(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def _fmt(value) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if isinstance(value, float) else str(value)
