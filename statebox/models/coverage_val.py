"""How the card's `coverage` was measured: per-family detection metrics on a held-out suite.

Two steps (the card's `coverage.command` names them):

1. host (statebox venv): `python statebox/models/coverage_val.py export SUITE DATA` writes every
   5th frame of every video of SUITE (`statebox bench make --size tiny --seed 7`) with its modal
   boxes as a YOLO data set (`statebox.tracker.export`, all videos on the validation side) and
   DATA/families.json (family -> its images).
2. tracker image, `--network none`, offline env as in `statebox.tracker.container.OFFLINE_ENV`:
   `python coverage_val.py val WEIGHTS DATA OUT.json` runs ultralytics `val` (imgsz 320, its
   default conf 0.001 / IoU 0.7) on each family's images with the weights' own class names,
   then on all of them ("all").

Kept beside the weights, not in the tracker runtime: changing the runtime changes the image.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def export(suite: Path, out: Path, every: int = 5) -> dict[str, int]:
    from statebox.tracker.export import export_yolo_dataset  # why: the `val` step runs in the tracker image, without statebox

    export_yolo_dataset(suite, out, every=every, val_every=1)  # single-video families land in train/: listed too
    families: dict[str, list[str]] = {}
    for meta in sorted(suite.glob("*/gt/*.meta.json")):
        family, stem = meta.parent.parent.name, meta.name[: -len(".meta.json")]
        families.setdefault(family, []).extend(sorted(str(p.relative_to(out)) for p in (out / "images").glob(f"*/{stem}_*.jpg")))
    (out / "families.json").write_text(json.dumps(families, indent=1))
    return {f: len(v) for f, v in families.items()}


def validate(weights: str, data_dir: Path, out_json: Path) -> dict[str, Any]:
    import torch  # why: the tracker image's stack, not on the host
    import ultralytics
    from ultralytics import YOLO

    work = Path("/tmp/coverage-val")
    work.mkdir(parents=True, exist_ok=True)
    families: dict[str, list[str]] = json.loads((data_dir / "families.json").read_text())
    families["all"] = sorted(p for ps in families.values() for p in ps)
    model = YOLO(weights)
    names = model.names
    result: dict[str, Any] = {"weights": weights, "versions": {"ultralytics": ultralytics.__version__, "torch": torch.__version__},
                    "names": {int(k): v for k, v in names.items()}, "families": {}}
    for family, paths in families.items():
        listing = work / f"{family}.txt"
        listing.write_text("".join(str(data_dir / p) + "\n" for p in paths))
        data_yaml = work / f"{family}.yaml"
        data_yaml.write_text(f"train: {listing}\nval: {listing}\nnc: {len(names)}\nnames:\n"
                             + "".join(f"  {k}: {v}\n" for k, v in names.items()))
        started = time.perf_counter()
        m = model.val(data=str(data_yaml), imgsz=320, batch=16, device="cpu", workers=0, plots=False, verbose=False,
                      project=str(work / "runs"), name=family, exist_ok=True)
        boxes = sum(len((data_dir / p.replace("images/", "labels/", 1)).with_suffix(".txt").read_text().splitlines())
                    for p in paths)
        result["families"][family] = {"images": len(paths), "boxes": boxes, "mAP50": round(float(m.box.map50), 4),
                                      "mAP50-95": round(float(m.box.map), 4), "precision": round(float(m.box.mp), 4),
                                      "recall": round(float(m.box.mr), 4),
                                      "seconds": round(time.perf_counter() - started, 1)}
        print(json.dumps({family: result["families"][family]}), flush=True)
    out_json.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "export":
        print(export(Path(sys.argv[2]), Path(sys.argv[3])))
    elif len(sys.argv) == 5 and sys.argv[1] == "val":
        validate(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
    else:
        sys.exit("usage: coverage_val.py export SUITE DATA | val WEIGHTS DATA OUT.json")
