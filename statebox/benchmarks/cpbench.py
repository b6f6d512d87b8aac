"""CP-Bench: a manifest JSONL `{id, video, count, setting: main|control}` (written by the suite generator).

No released files exist; statebox's generated suite writes this manifest. Extra
keys are kept: a `labels` object is merged into the item's labels (string
values), anything else goes to meta. `count` and `setting` are labels too, so
per-count and main-vs-control breakdowns come for free.
"""

from __future__ import annotations

from pathlib import Path

from statebox.benchmarks import LoadResult
from statebox.benchmarks._io import as_label, bounded, field
from statebox.datafiles import iter_jsonl
from statebox.errors import DataError
from statebox.schema import Item, Query

PROMPT = "How many cubes are present in the scene? Provide your response as a single numerical value."
SETTINGS = ("main", "control")
CORE = {"id", "video", "count", "setting", "labels", "question"}


def load(path: Path) -> LoadResult:
    items = []
    for line, row in iter_jsonl(path):
        item_id = field(row, "id", (str, int), path, line)
        video = field(row, "video", (str,), path, line)
        count = bounded(field(row, "count", (int,), path, line), path, line, "field 'count'")
        setting = field(row, "setting", (str,), path, line)
        if setting not in SETTINGS:
            raise DataError(path, line, f"field 'setting' must be main or control, got {setting!r}")
        question = field(row, "question", (str,), path, line, optional=True, default=PROMPT)
        extra_labels = field(row, "labels", (dict,), path, line, optional=True, default={})
        labels = {"setting": setting, "count": str(count)}
        for key, value in extra_labels.items():
            text = as_label(value)
            if text is not None:
                labels[str(key)] = text
        items.append(
            Item(
                id=str(item_id),
                benchmark="cpbench",
                video=video,
                question=question,
                answer_type="number",
                target=count,
                queries=[Query(index=0, time=None, target=count)],
                labels=labels,
                meta={k: v for k, v in row.items() if k not in CORE} | {"line": line},
            )
        )
    warnings = []
    settings = {i.labels["setting"] for i in items}
    if items and settings != set(SETTINGS):
        warnings.append(f"CP-Bench manifest has only the {'/'.join(sorted(settings))} setting: the drop is not defined")
    return LoadResult(items=items, warnings=warnings)
