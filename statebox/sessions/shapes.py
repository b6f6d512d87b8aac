"""Reading a JSON value of a shape the format does not promise, without a traceback.

Why: a session file is hostile input (a run folder handed over, a log a tool other than statebox wrote),
and every normaliser read it as the format's writer shapes it: `obj.get("message").get("content")`,
`kind in SOME_SET`, `for block in content`. A line whose value had another JSON type (a number where an
object stands, a list where a name stands) raised TypeError or AttributeError, and the whole audit of a
folder of sessions ended in a traceback (a type-mutation fuzzer found ~6,500 such inputs in three minutes).
These accessors give what the honest shape gives for honest input, and for any other shape the answer the
format's own "absent" case gives (an empty object, no name, no items), so a misshapen value is read as
missing, never as something else; text fields of another type are read as their `str`, so nothing they
hold is lost to the rules.
"""

from __future__ import annotations

from typing import Any


def object_at(obj: Any, key: str) -> dict[str, Any]:
    """`obj[key]` when `obj` is an object and that value is one too, else `{}` (absent)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def name_at(obj: Any, key: str) -> str | None:
    """`obj[key]` when it is a string (a `type`, a `role`, a tool's name: compared with known names), else None.

    Why not the raw value: a list or an object is unhashable, and `value in KNOWN_NAMES` raised."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else None


def list_of(value: Any) -> list[Any]:
    """`value` when it is a list, else `[]` (a number or `true` where a list of blocks stands holds no block)."""
    return value if isinstance(value, list) else []


def text_of(value: Any) -> str:
    """A text field as text: a string as it is, absent (`None`) as "", any other value as its `str` (kept, not
    dropped: a number or a list in a text field is still what the line says)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return str(value)
    except RecursionError:  # a list nested deeper than `str` recurses: what it holds is no text of its own
        return ""
