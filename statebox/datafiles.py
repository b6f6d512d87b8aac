"""Reading JSON and JSONL data files so that every malformed input names its file and line.

Annotation loaders (`statebox/benchmarks/`) and prediction readers (`statebox/scoring/`)
both read user files: neither lets a `KeyError` or `json.JSONDecodeError` escape, a user
who hands statebox a broken file gets `file:line: what is wrong` (exit 2), not a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from statebox.errors import DataError


def require_file(path: Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise DataError(path, None, "file not found")
    if path.is_dir():
        raise DataError(path, None, "is a folder, expected a file")
    return path


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, object) for each non-blank line; objects only."""
    path = require_file(path)
    with path.open("r", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(path, number, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(value, dict):
                raise DataError(path, number, f"expected a JSON object, got {type_name(value)}")
            yield number, value


def read_json(path: Path) -> Any:
    path = require_file(path)
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(path, exc.lineno, f"not valid JSON ({exc.msg} at column {exc.colno})") from None


def read_json_or_jsonl(path: Path) -> list[tuple[int | None, dict[str, Any]]]:
    """Rows from a JSON array (or {"data": [...]}) or a JSONL file, with line numbers where known."""
    path = require_file(path)
    head = path.read_text(encoding="utf-8").lstrip()[:1]
    if path.suffix == ".jsonl" or (head == "{" and _looks_like_jsonl(path)):
        return [(n, row) for n, row in iter_jsonl(path)]
    data = read_json(path)
    if isinstance(data, dict):
        for key in ("data", "rows", "items", "test"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
    if not isinstance(data, list):
        raise DataError(path, 1, f"expected a list of rows (or JSONL), got {type_name(data)}")
    rows: list[tuple[int | None, dict[str, Any]]] = []
    for index, row in enumerate(data):
        if not isinstance(row, dict):
            raise DataError(path, None, f"row {index}: expected an object, got {type_name(row)}")
        rows.append((None, row))
    return rows


def _looks_like_jsonl(path: Path) -> bool:
    with path.open("r", encoding="utf-8") as handle:
        first = handle.readline()
    try:
        json.loads(first)
        return True
    except json.JSONDecodeError:
        return False


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
