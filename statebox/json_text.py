"""JSON someone else shaped (an agent, a model, a user's file), read as `json.loads` reads it: faster, and
with no text that can crash the reader.

Why one module at the bottom: the same JSON text reaches statebox through many doors (session files, a
command's output, the arguments a model writes, the stream a CLI prints, the gateway's log, data files),
and each reader had its own `json.loads` and its own idea of what can go wrong. json reads nested arrays and
objects by recursion, so a text nested a few thousand deep raised RecursionError, which readers catching
`ValueError` let through: an audit, a live session's recorder or the gateway's log writer ended in a
traceback on text the agent chose. Here such text is refused like any malformed text (a
`json.JSONDecodeError`, a `ValueError`), and each reader keeps doing what it does with malformed text.

Why orjson first: it reads a session file's lines ~5x faster, and gives json's value for every text it
accepts but numbers of 19 digits or more (it may read a wide integer otherwise); those, and whatever it
refuses (NaN and Infinity literals, a number too large for a float, a lone surrogate escape, a BOM,
nesting past 1,024 levels), go to json, which also words the error. An integer past Python's 4,300 digits,
which json itself raises on (a ValueError no reader caught), is read as its digits.

The writers' side: `utf8_json` (JSON as UTF-8 bytes whatever its strings hold) and `well_formed` (strings every UTF-8
writer takes): a string of JSON may hold an unpaired surrogate, which no UTF-8 text can.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Iterator

import orjson

TOO_DEEP = "nested too deeply"
# orjson reads an integer of more than 64 bits as a float, json as an int: text holding a run of
# this many digits is left to json (any 64-bit integer has at most 19 digits, and most never 19).
_LONG_DIGITS = b"\x00" * 19
_DIGITS_TO_ZERO = bytes(0 if chr(b).isdigit() and b < 128 else 1 for b in range(256))


def has_long_digits(data: bytes) -> bool:
    """Whether `data` holds a run of 19 ASCII digits: where orjson may read a number otherwise than json does
    (every reader that takes orjson for json asks this)."""
    return _LONG_DIGITS in data.translate(_DIGITS_TO_ZERO)


def json_value(raw: str | bytes) -> Any:
    """`json.loads(raw)`, read by orjson where that is the same value; too deep a nesting raises
    `json.JSONDecodeError` (msg TOO_DEEP) instead of RecursionError."""
    # asked of the bytes (translate + find: ~1 GB/s; a regex over the text was 8x slower than orjson itself)
    if not has_long_digits(raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return _json_loads(raw)


def _orjson_first(raw: str | bytes) -> Any:
    """`json_value(raw)` for text known to hold no run of 19 digits (`line_loads` knows it of a whole file)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _json_loads(raw)


def line_loads(data: bytes) -> Callable[[str | bytes], Any]:
    """The reader for the lines of `data` (a JSONL file's bytes, the lines cut from it, as they are or decoded
    with replacement): each line as `json_value` reads it, with the digit check asked once of the whole file.

    Why: asked per line, the check (and the encoding of a decoded line back to bytes for it) cost as much as
    orjson's reading of the line. The same answer: a run of 19 ASCII digits in a line is one in the file, as
    bytes or decoded (decoding never joins, splits or makes ASCII digits), and stripping a line makes none."""
    return json_value if has_long_digits(data) else _orjson_first


def _json_loads(raw: str | bytes) -> Any:
    """json's reading, too deep a nesting refused as malformed text, an integer too long for Python read as its
    digits."""
    try:
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise
        except ValueError:  # an integer past Python's 4,300 digits (`sys.get_int_max_str_digits`)
            # Why read on: a model can write such a number into a tool call, and every reader catching JSONDecodeError
            # raised on it (the gateway's reply assembler cut the reply and logged nothing). Its digits are kept as
            # text, so the rest of the value (the call beside it) is read whole.
            return json.loads(raw, parse_int=_int_or_digits)
    except RecursionError:
        text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
        raise json.JSONDecodeError(TOO_DEEP, text, 0) from None


def rfc_loads(raw: str | bytes) -> Any:
    """`json.loads` of JSON as RFC 8259 has it: the `NaN`/`Infinity` literals and a number past the largest double
    (`1e999`, which Python reads as infinity) raise ValueError, as any text that is not JSON does.

    Why: a value read from them is written back as `NaN` or `Infinity`, which is no JSON, so a body forwarded after
    being judged would reach a parser that may read it otherwise (the gateway forwards exactly what it judged)."""
    return json.loads(raw, parse_constant=_no_constant, parse_float=_finite)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is past the largest number JSON carries")
    return value


def _int_or_digits(digits: str) -> int | str:
    """An integer as json reads it; one past Python's limit on digits as its digits (the value kept, not its type)."""
    try:
        return int(digits)
    except ValueError:
        return digits


def utf8_json(value: Any, **options: Any) -> bytes:
    """`json.dumps(value, ensure_ascii=False)` as UTF-8 bytes; where a string in `value` holds an unpaired surrogate
    (valid JSON, `"\\ud800"`: a client, a model or a CLI may send one), the same value with every non-ASCII character
    escaped, as the sender wrote it.

    Why: an unpaired surrogate has no UTF-8 form, so `.encode()` of the text raised, and the gateway, forwarding a
    request that held one (as JavaScript's JSON.stringify writes a string cut inside a surrogate pair), answered 500
    and logged nothing."""
    text = json.dumps(value, ensure_ascii=False, **options)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, **options).encode("ascii")


REPLACEMENT = "\ufffd"


def well_formed(value: Any) -> tuple[Any, int]:
    """`value` (JSON-shaped: dicts, lists, strings, scalars) with every unpaired surrogate in its strings, keys
    included, replaced by U+FFFD, and how many were replaced (0: `value` itself is returned).

    Why: what statebox writes (events.jsonl, gateway.jsonl, verdicts, the run's store) must be UTF-8 that every
    reader takes, and an unpaired surrogate is no character of any text: replaced, the line keeps everything
    the agent did, and says how many it lost. A pair of surrogates held as two code points is joined into the
    character it spells, as a JSON reader joins `"\\ud83d\\ude00"`."""
    if isinstance(value, str):
        if value.isascii():
            return value, 0
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            fixed = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
            return fixed, fixed.count(REPLACEMENT) - value.count(REPLACEMENT)
        return value, 0
    if isinstance(value, dict):
        changed, out = 0, {}
        for key, item in value.items():
            key2, n_key = well_formed(key) if isinstance(key, str) else (key, 0)
            item2, n_item = well_formed(item)
            changed += n_key + n_item
            out[key2] = item2
        return (out, changed) if changed else (value, 0)
    if isinstance(value, (list, tuple)):
        changed, items = 0, []
        for item in value:
            item2, n = well_formed(item)
            changed += n
            items.append(item2)
        return (tuple(items) if isinstance(value, tuple) else items, changed) if changed else (value, 0)
    return value, 0


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSONL text: cut at "\\n" only (a "\\r" before it is left for the reader's strip).

    Why not `str.splitlines`: it also cuts at U+2028, U+2029 and U+0085, which a JSON string may hold
    unescaped (JavaScript's JSON.stringify and Rust's serde_json write them as they are). One line of JSON
    became two halves that parse as nothing, so an agent that put U+2028 in its commands hid them from the
    audit of Claude Code's own session file (a contaminated session read as suspicious)."""
    lines = text.split("\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines


def decoded_lines(data: bytes) -> Iterator[str]:
    """`jsonl_lines(data.decode("utf-8", "replace"))`, one line decoded at a time.

    Why: a session file's whole text and the list of its lines, held beside its bytes while it is parsed,
    were most of an audit's memory (a 200 MB Claude Code file: 1.0 GB resident). The same strings: "\\n" is
    never part of a UTF-8 sequence, so decoding stops at it as at a text's end (an ill-formed sequence just
    before it becomes the same U+FFFD either way), and a last empty piece is dropped as `jsonl_lines` drops it."""
    start, size = 0, len(data)
    find = data.find
    while start < size:
        end = find(b"\n", start)
        if end < 0:
            end = size
        yield data[start:end].decode("utf-8", "replace")
        start = end + 1
