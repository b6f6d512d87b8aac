"""Whether a provider has retired a model, or named the day it will: Anthropic's from its SDK, OpenAI's from its page.

Why: a run on a retired model starts its sandboxes and fails every attempt with the provider's refusal; the
`anthropic` SDK ships the list of the models Anthropic has announced retirements for (`anthropic/_data/
deprecated_models.py`: model id -> the retirement day, as "November 30th, 2026"), the maintained source of that fact.
It is read as data (`ast.literal_eval` of the file the installed package holds), not imported: importing the SDK
costs about a second, and `statebox run` starts without it.

The SDK's list is a window, not a record: once a model's day has passed a later release drops it (anthropic 2.15.0
no longer lists `claude-sonnet-4-5`, retired 2026-11-30, which 2.14.0 listed), so a user naming a retired model would
get no note just when the note matters. `ANTHROPIC_RETIRED` keeps every day an SDK release has listed (read from the
wheels of anthropic 0.125.0 and 2.14.0, the SDK's own text kept), and the SDK installed answers over it where both
name a model.

OpenAI's SDK ships no such list (its `/v1/models` endpoint gives a `shutdown_date`, but only to a caller with a key,
and `statebox run` must warn before it starts anything). `OPENAI_SHUTDOWNS` is statebox's copy of OpenAI's deprecations
page (developers.openai.com/api/docs/deprecations, read 2026-11-30 through independent copies that agree, one of
which checked every date against `/v1/models`): a dated table that a session updates when OpenAI announces more.

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
_OPENAI_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}\Z")


def _shut_down_on(day: date, *models: str) -> dict[str, date]:
    return dict.fromkeys(models, day)


# model id (and the dated snapshots the page names; another `-YYYY-MM-DD` snapshot of a listed id takes its day)
# -> the day OpenAI shuts it down in its API (past days included: a
# model already shut down still gets its note).
OPENAI_SHUTDOWNS: dict[str, date] = {
    **_shut_down_on(date(2026, 7, 23), "gpt-5-chat-latest", "gpt-5-codex", "gpt-5.1-chat-latest", "gpt-5.1-codex",
                    "gpt-5.1-codex-max", "gpt-5.1-codex-mini", "gpt-5.2-codex", "computer-use-preview",
                    "computer-use-preview-2025-03-11", "o3-deep-research", "o3-deep-research-2025-06-26",
                    "o4-mini-deep-research", "o4-mini-deep-research-2025-06-26"),
    **_shut_down_on(date(2026, 8, 10), "gpt-5.2-chat-latest", "gpt-5.3-chat-latest"),
    **_shut_down_on(date(2026, 10, 23), "gpt-3.5-turbo", "gpt-3.5-turbo-0125", "gpt-4", "gpt-4-0613",
                    "gpt-4-1106-preview", "gpt-4-turbo", "gpt-4-turbo-2024-04-09", "gpt-4o-2024-05-13", "o1",
                    "o1-2024-12-17", "o1-pro", "o1-pro-2025-03-19", "o3-mini", "o3-mini-2025-01-31", "o4-mini",
                    "o4-mini-2025-04-16", "gpt-4.1-nano", "gpt-4.1-nano-2025-04-14"),
    **_shut_down_on(date(2026, 12, 11), "gpt-5", "gpt-5-2025-08-07", "gpt-5-mini", "gpt-5-mini-2025-08-07",
                    "gpt-5-nano", "gpt-5-nano-2025-08-07", "gpt-5-pro", "gpt-5-pro-2025-10-06", "o3",
                    "o3-2025-04-16", "o3-pro", "o3-pro-2025-06-10"),
    **_shut_down_on(date(2027, 1, 14), "gpt-4o", "gpt-4o-2024-08-06", "gpt-4o-2024-11-20", "gpt-4o-mini",
                    "gpt-4o-mini-2024-07-18", "gpt-4.1", "gpt-4.1-2025-04-14", "gpt-4.1-mini",
                    "gpt-4.1-mini-2025-04-14"),
    **_shut_down_on(date(2027, 4, 1), "gpt-5.1"),
}


# model id -> the retirement day as an anthropic SDK release wrote it, for the models later releases dropped
ANTHROPIC_RETIRED: dict[str, str] = {
    **dict.fromkeys(("claude-1.3", "claude-1.3-100k", "claude-instant-1.1", "claude-instant-1.1-100k",
                     "claude-instant-1.2"), "November 6th, 2024"),
    **dict.fromkeys(("claude-2.0", "claude-2.1", "claude-3-sonnet-20240229"), "July 21st, 2025"),
    "claude-3-opus-20240229": "January 5th, 2026",
    **dict.fromkeys(("claude-3-7-sonnet-latest", "claude-3-7-sonnet-20250219", "claude-3-5-haiku-latest",
                     "claude-3-5-haiku-20241022"), "February 19th, 2026"),
    **dict.fromkeys(("claude-opus-4-0", "claude-opus-4-20250514", "claude-sonnet-4-0", "claude-sonnet-4-20250514"),
                    "June 15th, 2026"),
    **dict.fromkeys(("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"), "November 30th, 2026"),
}


def anthropic_retirements() -> dict[str, str]:
    """{model id: retirement day as the SDK writes it}: the installed SDK's list over `ANTHROPIC_RETIRED`."""
    return {**ANTHROPIC_RETIRED, **sdk_retirements()}


@lru_cache(maxsize=1)
def sdk_retirements() -> dict[str, str]:
    """{model id: retirement day as the SDK writes it}, the installed SDK's own list; empty where the SDK or its list
    is not installed or not a dict of strings (`ANTHROPIC_RETIRED` then answers alone)."""
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
    """One line for a model its provider has retired (its day is today or past) or will retire; None for any other."""
    said = anthropic_retirements().get(model)
    if said is not None:
        day = retirement_day(said)
        if day is not None and day <= today:
            return (f"{model}: Anthropic retired this model on {said}; its requests fail unless the upstream still serves "
                    "it (name another model)")
        return f"{model}: Anthropic retires this model on {said} (anthropic SDK); a run after that day fails its requests"
    shutdown = OPENAI_SHUTDOWNS.get(model) or OPENAI_SHUTDOWNS.get(_OPENAI_SNAPSHOT.sub("", model))
    if shutdown is None:
        return None
    if shutdown <= today:
        return (f"{model}: OpenAI shut this model down on {shutdown.isoformat()}; its requests fail unless the upstream "
                "still serves it (name another model)")
    return (f"{model}: OpenAI shuts this model down on {shutdown.isoformat()} (OpenAI's deprecations page); a run after "
            "that day fails its requests")


def retirement_notes(models: Iterable[str], today: date | None = None) -> list[str]:
    """`retirement_note` of each distinct model named, in the order named (`today`: the local date unless given)."""
    day = today or date.today()
    return [note for model in dict.fromkeys(models) if (note := retirement_note(model, day)) is not None]
