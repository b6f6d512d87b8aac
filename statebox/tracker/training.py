"""Train the baseline's detector on a generated suite, inside the tracker container.

The host exports the suite's ground truth as a YOLO data set (`export`), then the
tracker image trains from a model yaml with the network off: the data set is mounted
read-only, only the output folder is writable. The result is a weights file and a card
(what data, how many epochs, which mAP, how long, which versions), so anyone can tell
what the shipped `statebox/models/suite-yolov8n.pt` is.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.progress import BarColumn, ProgressColumn, TextColumn, TimeElapsedColumn

from statebox.errors import UserError
from statebox.policies import Policy, load_policy
from statebox.progress import ProgressDisplay
from statebox.sandbox.docker import ContainerSpec, Mount, SandboxEngine
from statebox.tracker import container as tc
from statebox.tracker.export import ExportSummary, export_yolo_dataset
from statebox.userfiles import make_output_folder


class FamilyMetrics(BaseModel):
    """One family's detection metrics (ultralytics `val`, imgsz 320) on a held-out suite."""

    model_config = ConfigDict(populate_by_name=True)

    images: int
    boxes: int
    mAP50: float
    mAP50_95: float = Field(alias="mAP50-95")
    precision: float
    recall: float


class Coverage(BaseModel):
    """How well the weights detect each suite family's objects on a suite they never saw.

    The suite grows families; a card that only states the mAP on its own training mix says
    nothing about a family added later. `weights_sha256` ties the measurement to the file:
    new weights need a new measurement (tests/tracker/test_weights_card.py checks both).
    """

    weights_sha256: str
    suite: str  # how the held-out suite was made
    suite_seed: int  # differs from the training suites' seeds and the demo's (0)
    command: str
    date: str
    image: str
    families: dict[str, FamilyMetrics]
    note: str = ""


class WeightsCard(BaseModel):
    """What a trained weights file is: written beside it as `<name>.card.json`."""

    weights: str
    sha256: str
    bytes: int
    model: str
    init: str | None = None  # the local weights training started from (name and sha256), None = from scratch
    epochs: int
    imgsz: int
    device: str
    batch: int
    freeze: int = 0  # layers kept as they were (a fine-tune; 10 = YOLOv8's backbone)
    lr0: float | None = None  # learning rate with plain SGD, no warm-up; None = ultralytics' auto
    metrics: dict[str, float | None] = Field(default_factory=dict)
    names: dict[int, str] = Field(default_factory=dict)
    data: ExportSummary
    train_seconds: float = 0.0
    seconds_per_epoch: float | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    network_attempts: int = 0
    image: str = ""
    created: str = ""
    lineage: list[dict[str, object]] = Field(default_factory=list)  # earlier training stages, oldest first
    lineage_note: str = ""
    coverage: Coverage | None = None  # per-family metrics on a held-out suite (added after training)
    weights_path: str = Field("", exclude=True)
    card_path: str = Field("", exclude=True)


def training_policy(device: str) -> Policy:
    """The default sandbox policy with room to train: all cores, more memory, hours not minutes."""
    policy = load_policy("default")
    limits = policy.limits.model_copy(update={
        "cpus": float(os.cpu_count() or 1), "memory_mb": max(policy.limits.memory_mb, 8192),
        "time_limit_s": 6 * 3600.0, "tmp_mb": max(policy.limits.tmp_mb, 2048), "pids": max(policy.limits.pids, 1024),
    })
    return policy.model_copy(update={"limits": limits, "gpu": "require" if device == "cuda" else "never"})


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _refuse_unless_a_training_folder(out: Path) -> None:
    """`dataset/` and `run/` under `--out` are replaced whole; `--out ~/project` removed a project's own folders of
    those names (found by probe). So `--out` is empty or holds a training statebox began there: its data set's
    `dataset/data.yaml` or a weights card; otherwise one line, nothing removed (as `bench make --out` refuses)."""
    if not any(out.iterdir()):
        return
    if (out / "dataset" / "data.yaml").is_file() or any(out.glob("*.card.json")):
        return
    raise UserError(f"{out} is not empty and holds no earlier training (dataset/data.yaml or a .card.json): "
                    "refusing to replace its dataset/ and run/ (give --out a new or empty folder)")


def train_detector(suite: Path, out: Path, *, model: str = "yolov8n.yaml", epochs: int = 30, imgsz: int = 320,
                   device: str = "cpu", name: str | None = None, every: int = 5, batch: int = 16,
                   families: list[str] | None = None, every_for: dict[str, int] | None = None,
                   init: Path | None = None, engine=None, progress: bool = True, freeze: int = 0,
                   lr0: float | None = None) -> WeightsCard:
    """Export, train in the container, write `<out>/<name>.pt` + `<name>.card.json`; returns the card."""
    suite, out = Path(suite), Path(out)
    if not suite.is_dir():
        raise UserError(f"{suite}: suite folder not found (--suite)")
    if freeze < 0 or (lr0 is not None and not 0.0 < lr0 <= 1.0):
        raise UserError(f"--freeze {freeze} / --lr0 {lr0}: give --freeze N >= 0 and 0 < --lr0 <= 1")
    if not model.endswith((".yaml", ".yml")):
        raise UserError(f"--model {model!r}: give a model yaml (e.g. yolov8n.yaml); training never downloads weights")
    stem = name or f"suite-{Path(model).stem}"
    console = Console(stderr=True, quiet=not progress, markup=False, highlight=False)
    make_output_folder(out, "training folder (--out)")
    _refuse_unless_a_training_folder(out)
    data_dir = out / "dataset"
    if data_dir.exists():
        shutil.rmtree(data_dir)
    console.print(f"[tracker] exporting frames + boxes from {suite} ...")
    summary = export_yolo_dataset(suite, data_dir, every=every, families=families, every_for=every_for)
    console.print(f"[tracker] data set: {summary.images} images, {summary.boxes} boxes, classes {summary.names}")
    engine = engine or SandboxEngine()
    image = tc.tracker_image(progress=lambda m: console.print(f"[tracker] {m}"))
    run_dir = out / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir()
    os.chmod(run_dir, 0o777)  # written by the container's user
    command = [tc.PYTHON, "-m", "sbtracker.cli", "train", "--data", f"{tc.DATA_MOUNT}/data.yaml", "--model", model,
               "--epochs", str(epochs), "--imgsz", str(imgsz), "--device", device, "--batch", str(batch),
               "--out", tc.OUT_MOUNT]
    if freeze:
        command += ["--freeze", str(freeze)]
    if lr0 is not None:
        command += ["--lr0", repr(float(lr0))]
    mounts = [Mount(source=data_dir.resolve(), target=tc.DATA_MOUNT, read_only=True),
              Mount(source=run_dir.resolve(), target=tc.OUT_MOUNT, read_only=False, writer="statebox")]
    init_sha = None
    if init is not None:
        init = Path(init).resolve()
        if not init.is_file():
            raise UserError(f"{init}: weights to start from not found (--init)")
        init_sha = _sha256(init)
        mounts.append(Mount(source=init, target=f"/init/{init.name}", read_only=True))
        command += ["--init", f"/init/{init.name}"]
    spec = ContainerSpec(image=image, command=command, workspace=None, policy=training_policy(device),
                         env=dict(tc.OFFLINE_ENV),
                         mounts=mounts,
                         gpu=device == "cuda", time_limit_s=None)
    result_event: dict[str, Any] = {}
    network: list[dict] = []
    started = time.monotonic()
    columns: list[ProgressColumn | str] = [TextColumn("tracker: training", markup=False), BarColumn(), TextColumn("{task.completed}/{task.total} epochs"),
               TextColumn("{task.description}"), TimeElapsedColumn()]
    with ProgressDisplay("tracker train", console, columns) as bar:  # bars on a terminal, else a line every 10 s
        bar.add("epochs", total=epochs)

        def on_line(line: str) -> None:
            event = tc.parse_event_line(line)
            if not event:
                return
            if event.get("event") == "epoch":
                bar.update("epochs", done=event.get("epoch", 0), note=f"mAP50 {event.get('mAP50')}")
            elif event.get("event") == "trained":
                result_event.update(event)
            elif event.get("event") == "network_attempt":
                network.append(event)

        result = engine.run(spec, out / "train.stdout.log", out / "train.stderr.log", on_stdout_line=on_line)
    if result.status != "ok" or result.exit_code not in (0, None) or not result_event:
        tail = (out / "train.stderr.log").read_text(errors="replace").strip().splitlines()[-1:] if (out / "train.stderr.log").exists() else []
        raise UserError(f"training failed ({result.status}, exit {result.exit_code}): "
                        f"{tail[0][:200] if tail else result.reason} (log: {out / 'train.stderr.log'})")
    weights = out / f"{stem}.pt"
    shutil.copyfile(run_dir / "weights.pt", weights)
    card = WeightsCard(
        weights=weights.name, sha256=_sha256(weights), bytes=weights.stat().st_size, model=model, epochs=epochs,
        init=f"{init.name} sha256:{init_sha}" if init is not None else None,
        imgsz=imgsz, device=str(result_event.get("device", device)), batch=batch, freeze=freeze, lr0=lr0,
        metrics=result_event.get("metrics", {}), names={int(k): v for k, v in result_event.get("names", {}).items()},
        data=summary, train_seconds=float(result_event.get("train_seconds", time.monotonic() - started)),
        seconds_per_epoch=result_event.get("seconds_per_epoch"), versions=result_event.get("versions", {}),
        network_attempts=len(network) + len(tc.read_network_log(run_dir)), image=image,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        weights_path=str(weights), card_path=str(out / f"{stem}.card.json"),
    )
    card_path = out / f"{stem}.card.json"
    card_path.write_text(json.dumps(card.model_dump(mode="json", by_alias=True), indent=2) + "\n")
    return card
