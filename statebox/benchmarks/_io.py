"""Reading annotation files so that every malformed input names its file and line.

Loaders never let a `KeyError` or `json.JSONDecodeError` escape: a user who hands
statebox a broken file must get `file:line: what is wrong` (exit 2), not a traceback.
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


def field(row: dict[str, Any], key: str, kinds: tuple[type, ...], path: Path, line: int | None,
          *, where: str = "", optional: bool = False, default: Any = None) -> Any:
    """Fetch `row[key]` checking its JSON type; a DataError names the line and the field."""
    prefix = f"{where}: " if where else ""
    if key not in row or row[key] is None:
        if optional:
            return default
        raise DataError(path, line, f"{prefix}missing field '{key}'")
    value = row[key]
    if isinstance(value, bool) and bool not in kinds:
        raise DataError(path, line, f"{prefix}field '{key}' must be {_kinds(kinds)}, got boolean")
    if not isinstance(value, kinds):
        raise DataError(path, line, f"{prefix}field '{key}' must be {_kinds(kinds)}, got {type_name(value)}")
    return value


def _kinds(kinds: tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", list: "an array", dict: "an object", bool: "a boolean"}
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


def as_label(value: Any) -> str | None:
    """A taxonomy value as the string stored in `Item.labels` (lists join with '|')."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        parts = [str(v).strip() for v in value if v is not None and str(v).strip()]
        return "|".join(parts) if parts else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = str(value).strip()
    return text or None
