"""`statebox tracker train | eval`: train the baseline's detector on a generated suite, score it per task."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from statebox.errors import UserError
from statebox.harness.tracker_eval import evaluate_suite
from statebox.progress import ProgressDisplay
from statebox.tracker.training import train_detector

ATTEMPT_LINE = re.compile(r": (\S+) \((\d+)/(\d+)\)$")

tracker_app = typer.Typer(help="The detector/tracker baseline: train its detector on a generated suite, score it per task.",
                          no_args_is_help=True)


@tracker_app.command("train")
def train(
    suite: Path = typer.Option(..., "--suite", help="a generated suite folder (statebox bench make)"),
    model: str = typer.Option("yolov8n.yaml", "--model", help="ultralytics model yaml; trained from scratch, no download"),
    epochs: int = typer.Option(30, "--epochs", min=1, help="training epochs"),
    imgsz: int = typer.Option(320, "--imgsz", min=32, help="training image size (pixels)"),
    device: str = typer.Option("cpu", "--device", help="cpu | cuda"),
    out: Path = typer.Option(Path("runs/tracker-train"), "--out", help="folder for the data set, the run, the weights and the card"),
    name: Optional[str] = typer.Option(None, "--name", help="weights file stem (default: suite-<model stem>)"),
    every: int = typer.Option(5, "--every", min=1, help="export every n-th frame of each video"),
    batch: int = typer.Option(16, "--batch", min=1, help="training batch size"),
    every_for: list[str] = typer.Option([], "--every-for", help="FAMILY=N: export every N-th frame of that family (repeatable)"),
    init: Optional[Path] = typer.Option(None, "--init", help="continue from these local weights (default: from scratch)"),
    freeze: int = typer.Option(0, "--freeze", min=0, help="keep the first N layers as they are (10: YOLOv8's backbone)"),
    lr0: Optional[float] = typer.Option(None, "--lr0", help="learning rate with plain SGD and no warm-up "
                                                          "(a gentle fine-tune; default: ultralytics' auto)"),
) -> None:
    """Export frames + boxes from the suite's ground truth and train a detector inside the tracker container.

    Writes OUT/<name>.pt and OUT/<name>.card.json (data, epochs, mAP); prints the weights path.
    """
    if device not in ("cpu", "cuda"):
        raise UserError(f"--device must be cpu or cuda, not {device!r}")
    overrides: dict[str, int] = {}
    for pair in every_for:
        family, _, n = pair.partition("=")
        if not n.isdigit() or int(n) < 1:
            raise UserError(f"--every-for {pair!r}: expected FAMILY=N with N >= 1")
        overrides[family] = int(n)
    card = train_detector(suite, out, model=model, epochs=epochs, imgsz=imgsz, device=device, name=name,
                          every=every, batch=batch, every_for=overrides, init=init, freeze=freeze, lr0=lr0)
    print(f"[tracker] mAP50 {card.metrics.get('mAP50')} after {card.epochs} epochs "
          f"({card.train_seconds:.0f}s); card: {card.card_path}", file=sys.stderr)
    print(card.weights_path)


@tracker_app.command("eval")
def evaluate(
    suite: Path = typer.Option(..., "--suite", help="a generated suite folder"),
    weights: Optional[Path] = typer.Option(None, "--weights", help="weights file (default: the shipped suite model)"),
    task: list[str] = typer.Option([], "--task", help="only these task families (repeatable)"),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="where results go (default: runs/<config hash>)"),
    concurrency: int = typer.Option(1, "--concurrency", "-c", min=1, help="sandboxes at once"),
    stride: int = typer.Option(1, "--stride", min=1, help="track every n-th frame"),
    group: int = typer.Option(1, "--group", min=1, help="up to N attempts share one tracker container "
                                                      "(one model load, batched frames; -c is raised to N)"),
    policy: str = typer.Option("default", "--policy", help="policy name or YAML path"),
    as_json: bool = typer.Option(False, "--json", help="print the per-task scores as JSON"),
    compare_ultralytics: bool = typer.Option(False, "--compare-ultralytics",
                                             help="also track every video with ultralytics' own model.track loop "
                                                  "(same weights, one container) and score it the same way"),
) -> None:
    """Score the tracker on a suite per task, next to the frequency baseline (abstentions counted apart).

    A normal run (tracker + chance-frequency through the harness) into RUN_DIR; the table is read from its store.
    """
    # the per-attempt lines as before; to a file or a pipe also a progress line at least every 15 s
    with ProgressDisplay("tracker eval", Console(stderr=True), slots=max(concurrency, group)) as display:
        display.add("tracker")
        failed = 0

        def say(message: str) -> None:
            nonlocal failed
            print(f"[tracker] {message}", file=sys.stderr, flush=True)
            attempt = ATTEMPT_LINE.search(message)  # evaluate_suite ends each attempt's line: status (done/total)
            if attempt:
                failed += attempt.group(1) not in ("ok", "abstain")
                display.update("tracker", done=int(attempt.group(2)), total=int(attempt.group(3)), failed=failed)

        score = evaluate_suite(suite, weights, tasks=list(task) or None, run_dir=run_dir, stride=stride,
                               concurrency=concurrency, policy=policy, compare_ultralytics=compare_ultralytics,
                               group=group, progress=say)
    rows = {name: {"n": t.n, "accuracy": round(t.accuracy, 4), "frequency_baseline": round(t.chance, 4),
                   "abstained": t.abstained, "programs": t.programs, "tracking": t.tracking}
            for name, t in score.tasks.items()}
    if as_json:
        print(json.dumps({"weights": score.weights, "run_dir": score.run_dir, "tasks": rows,
                          "tracking": score.tracking, "network_attempts": score.network_attempts}, indent=2))
        return
    table = Table(title=f"tracker ({score.weights}) on {suite}")
    for col in ("task", "n", "tracker", "frequency", "abstained", "programs", "HOTA / IDF1 / MOTA"):
        table.add_column(col)

    def fmt(tracking: dict[str, dict[str, float]]) -> str:
        return "; ".join(f"{side} {m['HOTA']:.2f} / {m['IDF1']:.2f} / {m['MOTA']:.2f}" for side, m in tracking.items())

    for name, t in score.tasks.items():  # the rows above, typed: the same rounding
        table.add_row(name, str(t.n), f"{round(t.accuracy, 4):.2f}", f"{round(t.chance, 4):.2f}", str(t.abstained),
                      ", ".join(f"{k} {v}" for k, v in t.programs.items()), fmt(t.tracking))
    Console().print(table)
    if score.tracking:
        print(f"tracking (HOTA / IDF1 / MOTA, every scored video): {fmt(score.tracking)}")
    print(f"network attempts: {score.network_attempts}")
    print(f"results: {score.run_dir}/results.sqlite  (report: statebox report {score.run_dir})")


def register(app: typer.Typer) -> None:
    app.add_typer(tracker_app, name="tracker")
