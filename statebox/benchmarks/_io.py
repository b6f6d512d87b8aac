"""Reading annotation rows so that every malformed field names its file and line.

The file readers (JSON, JSONL, `file:line` errors) are `statebox/datafiles.py`'s, shared
with the scorer's prediction reader.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from statebox.datafiles import MAX_NUMBER, NUMBER_DIGITS, type_name
from statebox.errors import DataError


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


def bounded(value: int | float, path: Path, line: int | None, what: str) -> int | float:
    """`value` when it is a finite number under `datafiles.MAX_NUMBER` in size (its comment says why), else a
    DataError naming the line and the field."""
    finite = not isinstance(value, float) or math.isfinite(value)
    if not finite or abs(value) >= MAX_NUMBER:
        raise DataError(path, line, f"{what} must be a finite number under 10^{NUMBER_DIGITS}, got {shown_number(value)}")
    return value


def shown_number(value: int | float) -> str:
    """A number as an error line can show it: an integer of hundreds of digits by its size (its `repr` past 4,300
    digits raises, and a line of them names nothing)."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    return repr(value)


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
