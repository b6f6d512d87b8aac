"""Reading JSON and JSONL data files so that every malformed input names its file and line.

Annotation loaders (`statebox/benchmarks/`) and prediction readers (`statebox/scoring/`)
both read user files: neither lets a `KeyError` or `json.JSONDecodeError` escape, a user
who hands statebox a broken file gets `file:line: what is wrong` (exit 2), not a traceback.
Every file is opened through `statebox/userfiles.py` (regular files only, size and line caps).

JSON is parsed by orjson (a maintained fast reader, ~5x the standard library per line) and
stays exactly what `json.loads` returns: orjson only answers where the two agree. Where they
do not (orjson refuses NaN/Infinity literals, numbers that overflow a double and lone
surrogate escapes, which `json` accepts; it reads an integer past 64 bits as a float), the line
or file goes to `json`, which also words every error message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from statebox.errors import DataError
from statebox.json_text import TOO_DEEP, has_long_digits, json_value, jsonl_lines
from statebox.userfiles import (
    DATA_MAX_BYTES,
    LINE_MAX_BYTES,
    MiB,
    decode,
    iter_line_batches,
    open_user_file,
    read_user_text,
)


NUMBER_DIGITS = 15  # the most digits a whole count or time read from a user's file may have (annotations and answers
# alike): past 10^15 a float no longer holds every integer, a square or a ratio of one overflows, and `int()` refuses a
# text of over 4,300 digits; each was a traceback of the scorer, and an EOC-Bench target of 400 digits (`inf`) scored
# every answer right without a word
MAX_NUMBER = 10**NUMBER_DIGITS


def too_many_digits(number: str) -> bool:
    """Whether the number text `number` (`-?\\d+(\\.\\d+)?`) has more than NUMBER_DIGITS digits before its point, leading
    zeros aside: read without `int()` or `float()`, which refuse it or overflow."""
    return len(number.split(".")[0].lstrip("+-").lstrip("0")) > NUMBER_DIGITS


BOM = b"\xef\xbb\xbf"


def require_file(path: Path, *, what: str = "data file", max_bytes: int = DATA_MAX_BYTES) -> Path:
    """The path, once it is known to be a regular file under the cap (userfiles.py), else one line."""
    path = Path(path)
    open_user_file(path, what=what, max_bytes=max_bytes).close()
    return path


def iter_jsonl(path: Path, *, what: str = "data file", max_bytes: int = DATA_MAX_BYTES,
               max_line_bytes: int = LINE_MAX_BYTES) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, object) for each non-blank line; objects only.

    Read through `statebox/userfiles.py`: regular files only, the file and each line capped."""
    for rows in iter_jsonl_batches(path, what=what, max_bytes=max_bytes, max_line_bytes=max_line_bytes):
        yield from rows


def iter_jsonl_batches(path: Path, *, what: str = "data file", max_bytes: int = DATA_MAX_BYTES,
                       max_line_bytes: int = LINE_MAX_BYTES) -> Iterator[list[tuple[int, dict[str, Any]]]]:
    """`iter_jsonl`'s rows a block of lines at a time (for readers of million-line files)."""
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    for first, lines in iter_line_batches(path, what=what, max_bytes=max_bytes, max_line_bytes=max_line_bytes):
        rows: list[tuple[int, dict[str, Any]]] = []
        append = rows.append
        long_digits = has_long_digits(b"\n".join(lines))
        for number, raw in enumerate(lines, start=first):
            if not long_digits:
                try:
                    value = loads(raw)
                    if type(value) is dict:
                        append((number, value))
                        continue
                except decode_error:
                    pass
            # json's reading: a BOM, a blank line, a literal orjson refuses, long digits, or an error
            text = decode(raw, path, number)
            if number == 1:
                text = text.removeprefix("\ufeff")
            if text.strip():
                append((number, _json_object(text, path, number)))
        yield rows


def _json_object(line: str, path: Path, number: int) -> dict[str, Any]:
    try:
        value = json_value(line)
    except json.JSONDecodeError as exc:
        raise _not_json(path, number, exc) from None
    if not isinstance(value, dict):
        raise DataError(path, number, f"expected a JSON object, got {type_name(value)}")
    return value


def read_json(path: Path, *, what: str = "data file", max_bytes: int = DATA_MAX_BYTES) -> Any:
    """A whole-JSON user file (no per-line cap: minified JSON is one line), capped in size."""
    return _parse_json(Path(path), read_user_text(path, what=what, max_bytes=max_bytes))


def _parse_json(path: Path, text: str) -> Any:
    try:
        return json_value(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as exc:
        raise _not_json(path, None if exc.msg == TOO_DEEP else exc.lineno, exc) from None


def _not_json(path: Path, number: int | None, exc: json.JSONDecodeError) -> DataError:
    """`file:line: not valid JSON (what json says at column N)`; too deep a nesting has no column to name."""
    if exc.msg == TOO_DEEP:
        return DataError(path, number, f"not valid JSON ({TOO_DEEP})")
    return DataError(path, number, f"not valid JSON ({exc.msg} at column {exc.colno})")


def read_json_or_jsonl(path: Path) -> list[tuple[int | None, dict[str, Any]]]:
    """Rows from a JSON array (or {"data": [...]}) or a JSONL file, with line numbers where known."""
    path = Path(path)
    text = read_user_text(path, what="data file", max_bytes=DATA_MAX_BYTES).removeprefix("\ufeff")
    if path.suffix == ".jsonl" or (text.lstrip()[:1] == "{" and _looks_like_jsonl(text)):
        rows_of_lines: list[tuple[int | None, dict[str, Any]]] = []
        for number, line in enumerate(jsonl_lines(text), start=1):
            if len(line) > LINE_MAX_BYTES:
                raise DataError(path, number, f"line longer than the {LINE_MAX_BYTES // MiB} MiB limit for a data file")
            if line.strip():
                rows_of_lines.append((number, _json_object(line, path, number)))
        return rows_of_lines
    data = _parse_json(path, text)
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


def _looks_like_jsonl(text: str) -> bool:
    first = text.lstrip().split("\n", 1)[0]
    try:
        json_value(first)
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
