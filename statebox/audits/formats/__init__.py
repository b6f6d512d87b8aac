"""Moved to `statebox.sessions` (issue 13); this shim re-exports it while callers switch."""

from __future__ import annotations

import sys

from statebox import sessions as _sessions
from statebox.sessions import EventDraft, clip, parse_json_lines  # noqa: F401
from statebox.sessions import claude_stream, codex_jsonl, gateway_log, text_log  # noqa: F401

for _name in ("claude_stream", "codex_jsonl", "gateway_log", "text_log"):
    sys.modules[f"{__name__}.{_name}"] = getattr(_sessions, _name)
