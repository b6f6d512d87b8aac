"""`statebox bench make|info|validate|variants`: the built-in generated suite."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from statebox import signals
from statebox.benchmarks import load_benchmark
from statebox.progress import ProgressDisplay

bench_app = typer.Typer(help="The built-in generated suite: make it, summarise it, validate it, derive variants.",
                        no_args_is_help=True)


def _split_tasks(tasks: list[str] | None) -> list[str] | None:
    if not tasks:
        return None
    return [t.strip() for value in tasks for t in value.split(",") if t.strip()]


@bench_app.command("make")
def make(
    out: Path = typer.Option(..., "--out", help="Folder to write the suite into (created; must be empty or a suite)."),
    size: str = typer.Option("tiny", "--size", help="tiny (~2 videos per family) | small (~10) | full (CP-Bench sizes)."),
    seed: int = typer.Option(0, "--seed", help="Same seed, same bytes."),
    tasks: list[str] = typer.Option(None, "--tasks", help="Families to make (repeat or comma-separate); default all."),
    workers: int = typer.Option(None, "--workers", min=1, help="Processes (default: up to 2)."),
) -> None:
    """Render the suite's videos, ground truth and annotation files."""
    from statebox.benchmarks.synthetic.suite import make_suite, render_workers  # why: the generator (numpy), only when run

    console = Console(stderr=True)
    start = time.perf_counter()
    columns = [TextColumn("[bold]bench make[/] {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with ProgressDisplay("bench make", console, columns, slots=render_workers(workers)) as display:
        display.add("videos", total=None)

        def on_video(label: str, done: int, total: int) -> None:
            display.update("videos", done=done, total=total, note=label)
            signals.check()  # a safe point between two videos: a stop signal ends the suite here

        path = make_suite(out, size=size, seed=seed, tasks=_split_tasks(tasks), workers=workers, progress=on_video)
    console.print(f"wrote {path} in {time.perf_counter() - start:.1f} s")
    _print_info(path.parent)


@bench_app.command("info")
def info(
    dir: Path = typer.Argument(..., help="A suite folder (holding suite.json)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Summarise a suite: datasets, items, queries, videos, answer spread."""
    if as_json:
        typer.echo(json.dumps(summarise(dir)))
    else:
        _print_info(dir)


def summarise(dir: Path) -> dict[str, Any]:
    """The suite's summary as `bench info --json` prints it."""
    from statebox.benchmarks.synthetic.suite import load_suite  # why: the generator (numpy), only when run

    suite = load_suite(dir)
    rows = []
    for ref in suite.datasets:
        loaded = load_benchmark(ref.bench, ref.data, ref.videos)
        videos = sorted(ref.videos.glob("*.mp4"))
        answers = Counter(str(q.target) for i in loaded.items for q in i.queries)
        rows.append({"family": ref.family, "bench": ref.bench, "data": str(ref.data), "items": len(loaded.items),
                     "queries": sum(len(i.queries) for i in loaded.items), "videos": len(videos),
                     "video_mb": round(sum(v.stat().st_size for v in videos) / 1e6, 2),
                     "answers": dict(sorted(answers.items())), "warnings": loaded.warnings})
    return {"suite": str(suite.root), "seed": suite.seed, "size": suite.size, "classes": suite.classes,
            "datasets": rows}


def _console() -> Console:
    """A console that keeps tables readable when stdout is a pipe or a log file (rich would use 80 columns)."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=150)
    return console


def _print_info(dir: Path) -> None:
    summary = summarise(dir)
    table = Table(title=f"suite {summary['suite']} (size {summary['size']}, seed {summary['seed']})")
    for col in ("family", "bench", "items", "queries", "videos", "MB", "answers"):
        table.add_column(col, justify="right" if col in ("items", "queries", "videos", "MB") else "left")
    for row in summary["datasets"]:
        spread = ", ".join(f"{k}:{v}" for k, v in list(row["answers"].items())[:8])
        table.add_row(row["family"], row["bench"], str(row["items"]), str(row["queries"]), str(row["videos"]),
                      f"{row['video_mb']:.1f}", spread)
    console = _console()
    console.print(table)
    console.print(f"classes (id = position): {', '.join(summary['classes'])}")


@bench_app.command("validate")
def validate(
    dir: Path = typer.Argument(..., help="A suite folder (holding suite.json)."),
    as_json: bool = typer.Option(False, "--json", help="Print the probes as one JSON object."),
) -> None:
    """Run the validity probes (oracle 100%, max-single-frame 0%/100%, 1 fps, causal streaming answers); exit 2 on failure."""
    from statebox.harness.suite_validity import validate_suite  # why: the generator (numpy, cv2, PyAV), only when run

    report = validate_suite(dir)
    if as_json:
        typer.echo(json.dumps({"suite": report.suite, "ok": report.ok,
                               "probes": [p.model_dump() for p in report.probes]}))
    else:
        table = Table(title=f"validity probes: {report.suite}")
        for col in ("dataset", "probe", "value", "expected", "result"):
            table.add_column(col)
        for p in report.probes:
            result = "[dim]info[/]" if p.info else ("[green]pass[/]" if p.ok else "[bold red]FAIL[/]")
            table.add_row(p.dataset, p.name, p.value, p.expected, result)
        console = _console()
        console.print(table)
        failed = [p for p in report.probes if not p.ok]
        console.print("[green]all probes pass[/]" if not failed else f"[bold red]{len(failed)} probe(s) failed[/]")
    if not report.ok:
        raise typer.Exit(code=2)


@bench_app.command("variants")
def variants(
    suite: Path = typer.Argument(..., help="A suite folder (holding suite.json)."),
    kind: str = typer.Option(..., "--kind", help="transcript | stretch | duration | failure"),
    out: Path = typer.Option(..., "--out", help="Folder for the variant suite (created; must be empty or a suite)."),
    factor: int = typer.Option(2, "--factor", min=1, help="stretch: how many times slower."),
) -> None:
    """Write a suite of diagnostic variants of the same items (run it with `statebox run --suite DIR`)."""
    from statebox.benchmarks.synthetic.variants import make_variants  # why: the generator (numpy, cv2, PyAV), only when run

    start = time.perf_counter()
    path = make_variants(suite, kind, out, factor=factor)
    console = _console()
    console.print(f"wrote {path} ({kind}) in {time.perf_counter() - start:.1f} s")
    info = json.loads(path.read_text()).get("variant", {})
    if info.get("held"):  # stretch: videos whose re-render was not the same scene had their frames held
        console.print("frames held (not re-rendered): " + ", ".join(f"{f} ({len(v)})" for f, v in info["held"].items()))
    for reason in info.get("skipped", []):  # duration: lengths the generator could not plan
        console.print(f"left out: {reason}")
    _print_info(path.parent)


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
