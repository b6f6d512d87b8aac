"""Benchmark loaders: each released file format becomes a list of `Item`s.

One module per benchmark knows its format and nothing else (no Docker, no
scoring). `load_benchmark` is the one entry point the rest of statebox uses.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from statebox.errors import DataError, UserError
from statebox.schema import BENCHMARKS, Item, resolve_video, video_path_problem


class LoadResult(BaseModel):
    """Items of one annotation file plus anything odd found while reading it."""

    model_config = ConfigDict(extra="forbid")

    items: list[Item]
    warnings: list[str] = Field(default_factory=list)


_MODULES = {
    "vstat": "statebox.benchmarks.vstat",
    "vcbench": "statebox.benchmarks.vcbench",
    "ecbench": "statebox.benchmarks.ecbench",
    "eocbench": "statebox.benchmarks.eocbench",
    "cpbench": "statebox.benchmarks.cpbench",
}


def load_benchmark(bench: str, data_path: str | Path, videos_dir: str | Path | None = None) -> LoadResult:
    """Load `data_path` as benchmark `bench`; malformed input raises `DataError(path, line, what)`.

    With `videos_dir`, items whose video is absent there are reported in `warnings`
    (the harness refuses to run them; scoring does not need videos).
    """
    if bench not in _MODULES:
        raise UserError(f"unknown benchmark '{bench}' (expected one of: {', '.join(BENCHMARKS)})")
    module = importlib.import_module(_MODULES[bench])
    result: LoadResult = module.load(Path(data_path))
    _check_video_paths(result, Path(data_path))
    _check_unique_ids(bench, result, Path(data_path))
    if videos_dir is not None:
        result.warnings.extend(_missing_video_warnings(bench, result.items, Path(videos_dir)))
    return result


def _check_video_paths(result: LoadResult, path: Path) -> None:
    """Every item's video path names a file under the videos folder (`schema.video_path_problem`): one line naming
    the annotation file, the line where it has one, and the item, before any video is looked for."""
    for item in result.items:
        problem = video_path_problem(item.video)
        if problem is not None:
            raise DataError(path, item.meta.get("line"), f"item '{item.id}': video path {item.video!r} {problem}")


def _check_unique_ids(bench: str, result: LoadResult, path: Path) -> None:
    seen: set[str] = set()
    for item in result.items:
        if item.id in seen:
            line = item.meta.get("line")
            raise DataError(path, line, f"duplicate item id '{item.id}'")
        seen.add(item.id)


def _missing_video_warnings(bench: str, items: list[Item], videos_dir: Path) -> list[str]:
    if not videos_dir.is_dir():
        return [f"videos folder {videos_dir} does not exist: every {bench} video is missing"]
    missing = [item for item in items if not resolve_video(item, videos_dir).exists()]
    if not missing:
        return []
    shown = ", ".join(sorted({m.video for m in missing})[:3])
    return [f"{len(missing)} of {len(items)} {bench} items have no video under {videos_dir} (e.g. {shown})"]


__all__ = ["LoadResult", "load_benchmark"]
