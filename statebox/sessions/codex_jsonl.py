"""Codex `exec --json` lines -> normalised events.

One JSON object per line: `thread.started`, `turn.started`, `item.started` /
`item.updated` / `item.completed` (items: agent_message, reasoning,
command_execution, file_change, mcp_tool_call, web_search, todo_list, error; an item of any
other type is kept as output and flagged, `sessions.unread_draft`),
`turn.completed` (usage), `turn.failed` and `error`.

`parse_line` is pure. Codex has no final "result" line, so the final answer is the
last agent message of the turn: `CodexNormaliser` (live) and `parse_lines`
(offline) remember it and emit a `final_answer` at `turn.completed`.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Callable, Iterable

from statebox.attempt_folder import CODEX_LOG
from statebox.json_text import json_value
from statebox.sessions import EventDraft, clip, parse_json_lines, unread_draft
from statebox.sessions.shapes import list_of, text_of
from statebox.schema import EventKind

RAW_LOG = CODEX_LOG
_SHELLS = {"bash", "sh", "zsh", "dash", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/bin/zsh", "/bin/dash"}


def parse_line(obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]:
    """Normalise one exec-JSONL object; unknown shapes become a `message` so nothing is lost."""
    etype = obj.get("type", "")
    item = obj.get("item") if isinstance(obj.get("item"), dict) else None
    if etype == "item.started" and item is not None:
        return _item_started(item)
    if etype == "item.completed" and item is not None:
        return _item_completed(item)
    if etype in ("item.updated", "turn.started"):
        return []
    if etype == "thread.started":
        return [EventDraft(EventKind.message, "codex session start", {"thread_id": obj.get("thread_id")})]
    if etype == "turn.completed":
        return [EventDraft(EventKind.message, "turn completed", {"usage": obj.get("usage") or {}})]
    if etype == "turn.failed":
        error = obj.get("error")
        message = text_of(error.get("message", "turn failed")) if isinstance(error, dict) else text_of(error) or "turn failed"
        return [EventDraft(EventKind.error, clip(message), {"type": etype})]
    if etype == "error":
        return [EventDraft(EventKind.error, clip(str(obj.get("message", ""))), {"type": etype})]
    return [EventDraft(EventKind.message, clip(json.dumps(obj)[:2000]), {"type": etype})]


def unwrap_shell(command: str) -> str:
    """`/bin/bash -lc 'ls -la'` -> `ls -la`: the script the model wrote, which is what an auditor reads."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return command
    if len(argv) >= 3 and argv[0] in _SHELLS and argv[-2] in ("-c", "-lc"):
        return argv[-1]
    return command


def _item_started(item: dict[str, Any]) -> list[EventDraft]:
    if item.get("type") != "command_execution":
        return []  # other items are complete only at item.completed
    raw = str(item.get("command", ""))
    script = unwrap_shell(raw)
    base = {"tool": "exec_command", "call_id": item.get("id", "")}
    return [
        EventDraft(EventKind.tool_call, clip(raw), {**base, "input": {"cmd": raw}}),
        EventDraft(EventKind.shell_command, clip(script), {**base, "raw": raw}),
    ]


def _item_completed(item: dict[str, Any]) -> list[EventDraft]:
    itype = item.get("type")
    call_id = item.get("id", "")
    if itype == "agent_message":
        return [EventDraft(EventKind.model_text, clip(str(item.get("text", ""))), {"item_id": call_id})]
    if itype == "reasoning":
        return [EventDraft(EventKind.model_text, clip(str(item.get("text", ""))), {"item_id": call_id, "thinking": True})]
    if itype == "command_execution":
        data = {"tool": "exec_command", "call_id": call_id, "exit_code": item.get("exit_code"), "status": item.get("status")}
        data["is_error"] = item.get("exit_code") not in (0, None)
        return [EventDraft(EventKind.tool_output, clip(str(item.get("aggregated_output", ""))), data)]
    if itype == "file_change":
        return [
            EventDraft(EventKind.file_write, str(c.get("path", "")), {"call_id": call_id, "path": str(c.get("path", "")), "change": c.get("kind")})
            for c in list_of(item.get("changes"))
            if isinstance(c, dict)
        ]
    if itype == "mcp_tool_call":
        args = item.get("arguments") if isinstance(item.get("arguments"), dict) else {}
        data = {"tool": f"{item.get('server')}.{item.get('tool')}", "call_id": call_id}
        out = json.dumps(item.get("result") or item.get("error") or "", ensure_ascii=False)
        return [
            EventDraft(EventKind.tool_call, clip(json.dumps(args, ensure_ascii=False)), {**data, "input": args}),
            EventDraft(EventKind.tool_output, clip(out), {**data, "is_error": item.get("status") == "failed"}),
        ]
    if itype == "web_search":
        query = str(item.get("query", ""))
        return [EventDraft(EventKind.network_attempt, query, {"call_id": call_id, "tool": "web_search", "query": query})]
    if itype == "error":
        # Codex's own non-fatal notices ("proceeding ..."); fatal ones arrive as `error` / `turn.failed` lines.
        return [EventDraft(EventKind.message, clip(str(item.get("message", ""))), {"level": "warning", "item_id": call_id})]
    if itype == "todo_list":
        # the agent's plan, in its own words: its text, never a prompt and never the answer (so marked as thinking)
        steps = [str(step.get("text", "")) for step in list_of(item.get("items")) if isinstance(step, dict)]
        return [EventDraft(EventKind.model_text, clip("\n".join(steps)), {"item_id": call_id, "thinking": True, "plan": True})]
    if not isinstance(itype, str):
        return []  # a misshapen item (no string type): the format's absent case (sessions.shapes)
    return [unread_draft("a codex exec item of type", itype, item)]


class CodexNormaliser:
    """Live normaliser: `parse_line` plus the one piece of state codex needs (the turn's last message)."""

    def __init__(self) -> None:
        self.last_message: str | None = None
        self.final_answer: str | None = None
        self.failure: str | None = None

    def feed(self, obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]:
        drafts = parse_line(obj, line_no)
        for d in drafts:
            if d.kind is EventKind.model_text and not d.data.get("thinking"):
                self.last_message = d.text
            if d.kind is EventKind.error:
                self.failure = d.text
        if obj.get("type") == "turn.completed" and self.last_message is not None:
            self.final_answer = self.last_message
            drafts.append(EventDraft(EventKind.final_answer, self.last_message, {"usage": obj.get("usage") or {}}))
        return drafts


def parse_lines(lines: Iterable[str], loads: Callable[[str], Any] = json_value) -> list[tuple[int, EventDraft]]:
    """Normalise a whole raw log: (1-based line number, draft); torn or non-JSON lines are kept as messages."""
    return parse_json_lines(lines, CodexNormaliser().feed, loads)
