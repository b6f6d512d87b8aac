"""The built-in generated suite: make it, describe it, load it.

A suite folder looks like this (every path inside suite.json is relative to DIR):

    DIR/suite.json                         {"seed", "size", "datasets": [{"family", "bench",
                                            "data", "videos"}], "classes": [...]}
    DIR/classes.json                       {"classes": [...], "by_family": {...}}; class id = list index
    DIR/<family>/<annotation file>         cube_count -> cpbench_manifest.jsonl (CP-Bench manifest)
                                           streaming_count -> vcbench_eval.jsonl (VCBench eval rows)
                                           the other four -> vstat.json (VSTAT {"data": {task: [doc]}})
    DIR/<family>/videos/<stem>.mp4         H.264 480x320 10 fps; item video paths are relative to this
    DIR/<family>/gt/<stem>.tracks.jsonl    per frame, per object: box, amodal box, visible fraction
    DIR/<family>/gt/<stem>.events.jsonl    per event: time, frame, kind, object ids
    DIR/<family>/gt/<stem>.meta.json       fps, size, scene parameters, answers

(`statebox.benchmarks.synthetic.groundtruth` documents the ground-truth rows.) Each
video is generated from its own random stream, derived from (seed, family, index), so
the output does not depend on worker scheduling or on which other families were asked
for, and the same seed gives byte-identical annotation files and identical frames.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel, ValidationError

from statebox.benchmarks.synthetic.families import FAMILIES, family_module
from statebox.benchmarks.synthetic.families.common import SIZES, VideoRecord
from statebox.benchmarks.synthetic.groundtruth import dumps
from statebox.errors import DataError, UserError
from statebox.userfiles import CONFIG_MAX_BYTES, make_output_folder, read_user_text

SUITE_FILE = "suite.json"
CLASSES_FILE = "classes.json"


class DatasetRef(BaseModel):
    """One annotation file of the suite and the folder its video paths are relative to."""

    family: str
    bench: str
    data: Path
    videos: Path


class Suite(BaseModel):
    root: Path
    seed: int
    size: str
    datasets: list[DatasetRef]
    classes: list[str]

    def family_dir(self, family: str) -> Path:
        return self.root / family

    def dataset(self, family: str) -> DatasetRef:
        for ref in self.datasets:
            if ref.family == family:
                return ref
        raise UserError(f"the suite at {self.root} has no {family!r} dataset")


def all_classes() -> list[str]:
    """Detector classes of every family, in a fixed order (the class id is the index)."""
    out: list[str] = []
    for name in FAMILIES:
        for cls in family_module(name).CLASSES:
            if cls not in out:
                out.append(cls)
    return out


def default_workers() -> int:
    """Processes `make_suite` renders with by default: up to 2 (the renderer is CPU-bound)."""
    return min(2, os.cpu_count() or 1)


def render_workers(requested: int | None, videos: int | None = None) -> int:
    """Processes that render: those asked for (else `default_workers`), at most one per core and per video.

    Why capped: the renderer is CPU-bound, and `--workers 5000` started 5,000 processes at once (Python 3.11's
    pool starts them all), each with numpy, until the host's memory ran out. One function, so that `bench make`'s
    progress display shows as many slots as render."""
    workers = requested if requested is not None else default_workers()
    return max(1, min(workers, os.cpu_count() or 1, videos if videos is not None else workers))


def _video_job(args: tuple[str, str, int, int, int]) -> tuple[str, int, VideoRecord]:
    family, family_dir, seed, index, n = args
    record = family_module(family).make_video(Path(family_dir), seed, index, n)
    return family, index, record


def annotation_text(module: ModuleType, records: list[VideoRecord]) -> str:
    rows = [row for record in records for row in record.rows]
    if hasattr(module, "annotation_text"):
        return module.annotation_text(rows)
    if module.BENCH == "vstat":
        return dumps({"data": {module.NAME: rows}}) + "\n"
    return "".join(dumps(row) + "\n" for row in rows)


def _prepare_out(out: Path, families: list[str]) -> None:
    make_output_folder(out, "suite folder")
    if any(out.iterdir()) and not (out / SUITE_FILE).exists():
        raise UserError(f"{out} is not empty and holds no {SUITE_FILE}: refusing to write a suite there")
    for family in families:
        target = out / family
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            target.unlink()  # never followed: rmtree raised on a link (a traceback), following it would empty its folder
        elif target.exists():
            shutil.rmtree(target)  # a previous suite's family: regenerate it whole, no stale videos


def make_suite(out: Path, size: str = "tiny", seed: int = 0, tasks: list[str] | None = None,
               workers: int | None = None, progress: Callable[[str, int, int], None] | None = None) -> Path:
    """Generate the suite into `out` and return the path of `out/suite.json`.

    `progress(label, done, total)` is called once before the first video (done 0: the total
    is known before any rendering) and after each video. Work is spread over `workers`
    processes (default: `default_workers()`); the result does not depend on the count.
    """
    if size not in SIZES:
        raise UserError(f"unknown size {size!r} (choose one of {', '.join(SIZES)})")
    families = list(tasks) if tasks else list(FAMILIES)
    unknown = [t for t in families if t not in FAMILIES]
    if unknown:
        raise UserError(f"unknown task(s) {', '.join(unknown)} (choose from {', '.join(FAMILIES)})")
    families = [f for f in FAMILIES if f in families]  # canonical order
    out = Path(out).resolve()
    _prepare_out(out, families)

    jobs = []
    for family in families:
        module = family_module(family)
        n = module.n_videos(size)
        (out / family).mkdir(parents=True, exist_ok=True)
        jobs += [(family, str(out / family), seed, i, n) for i in range(n)]
    # Longest families first so two workers finish together.
    jobs.sort(key=lambda j: (-family_module(j[0]).COST, j[0], j[3]))

    records: dict[str, dict[int, VideoRecord]] = {f: {} for f in families}
    workers = render_workers(workers, len(jobs))
    done = 0
    if progress:
        progress("", 0, len(jobs))
    if workers <= 1:
        for family, index, record in map(_video_job, jobs):
            records[family][index] = record
            done += 1
            if progress:
                progress(record.stem, done, len(jobs))
    else:
        pool = ProcessPoolExecutor(max_workers=workers)
        try:
            for family, index, record in pool.map(_video_job, jobs):
                records[family][index] = record
                done += 1
                if progress:
                    progress(record.stem, done, len(jobs))
        finally:  # on an error or a stop (raised by `progress`): the videos not started are dropped, not made
            pool.shutdown(wait=True, cancel_futures=True)

    datasets = []
    for family in families:
        module = family_module(family)
        ordered = [records[family][i] for i in sorted(records[family])]
        data = out / family / module.ANNOTATION
        data.write_text(annotation_text(module, ordered))
        datasets.append({"family": family, "bench": module.BENCH,
                         "data": f"{family}/{module.ANNOTATION}", "videos": f"{family}/videos"})
    classes = all_classes()
    by_family = {f: list(family_module(f).CLASSES) for f in families}
    (out / CLASSES_FILE).write_text(dumps({"classes": classes, "by_family": by_family}) + "\n")
    suite = {"seed": seed, "size": size, "datasets": datasets, "classes": classes}
    path = out / SUITE_FILE
    path.write_text(dumps(suite) + "\n")
    return path


def load_suite(dir: Path) -> Suite:
    """Read DIR/suite.json; dataset paths come back absolute."""
    root = Path(dir).resolve()
    path = root / SUITE_FILE
    if root.is_file() and root.name == SUITE_FILE:
        root, path = root.parent, root
    if not path.exists():
        raise UserError(f"{root} is not a generated suite: {SUITE_FILE} is missing (make one with `statebox bench make`)")
    text = read_user_text(path, what="suite description", max_bytes=CONFIG_MAX_BYTES)  # regular file, capped
    try:
        import json

        raw = json.loads(text)
        datasets = [DatasetRef(family=d["family"], bench=d["bench"], data=root / d["data"], videos=root / d["videos"])
                    for d in raw["datasets"]]
        return Suite(root=root, seed=raw["seed"], size=raw["size"], datasets=datasets,
                     classes=raw.get("classes") or all_classes())
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        raise DataError(path, None, f"not a valid suite description ({type(exc).__name__}: {exc})") from None


def timed_make(out: Path, **kwargs) -> tuple[Path, float]:
    start = time.perf_counter()
    path = make_suite(out, **kwargs)
    return path, time.perf_counter() - start
