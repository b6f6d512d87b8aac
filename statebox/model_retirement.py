"""Whether a provider has retired a model, or named the day it will, read from the provider's own SDK.

Why: a run on a retired model starts its sandboxes and fails every attempt with the provider's refusal; the
`anthropic` SDK ships the list of the models Anthropic has announced retirements for (`anthropic/_data/
deprecated_models.py`: model id -> the retirement day, as "November 30th, 2026"), the maintained source of that fact.
It is read as data (`ast.literal_eval` of the file the installed package holds), not imported: importing the SDK
costs about a second, and `statebox run` starts without it.

Why a warning and not a refusal: partner platforms (Bedrock, Vertex) and proxies reached through an upstream URL set
their own schedules, so a model Anthropic retired may still answer where a run sends it.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from datetime import date, datetime
from functools import lru_cache
from pathlib import Path
from typing import Iterable

_SDK_LIST = ("_data", "deprecated_models.py")
_DAY = re.compile(r"([A-Za-z]+) (\d{1,2})(?:st|nd|rd|th)?, (\d{4})")


@lru_cache(maxsize=1)
def anthropic_retirements() -> dict[str, str]:
    """{model id: retirement day as the SDK writes it}; empty where the SDK or its list is not installed or not a
    dict of strings (a warning is then not given: nothing else depends on it)."""
    spec = importlib.util.find_spec("anthropic")  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        return {}
    for folder in spec.submodule_search_locations:
        path = Path(folder, *_SDK_LIST)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(value, ast.Dict):
                try:
                    found = ast.literal_eval(value)
                except ValueError:
                    continue
                if isinstance(found, dict):
                    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}
    return {}


def retirement_day(text: str) -> date | None:
    """"November 30th, 2026" -> date(2026, 11, 30); None for any other shape."""
    m = _DAY.fullmatch(text.strip())
    if m is None:
        return None
    try:
        return datetime.strptime(f"{m.group(1)} {m.group(2)} {m.group(3)}", "%B %d %Y").date()
    except ValueError:
        return None


def retirement_note(model: str, today: date) -> str | None:
    """One line for a model Anthropic has retired (its day is today or past) or will retire; None for any other."""
    said = anthropic_retirements().get(model)
    if said is None:
        return None
    day = retirement_day(said)
    if day is not None and day <= today:
        return (f"{model}: Anthropic retired this model on {said}; its requests fail unless the upstream still serves it "
                f"(name another model)")
    return f"{model}: Anthropic retires this model on {said} (anthropic SDK); a run after that day fails its requests"


def retirement_notes(models: Iterable[str], today: date | None = None) -> list[str]:
    """`retirement_note` of each distinct model named, in the order named (`today`: the local date unless given)."""
    day = today or date.today()
    return [note for model in dict.fromkeys(models) if (note := retirement_note(model, day)) is not None]
