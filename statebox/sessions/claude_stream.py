"""Claude Code `--output-format stream-json --verbose` lines -> normalised events.

One JSON object per line: `system` (init, api_retry, ...), `assistant` (one content
block per line: text, thinking or tool_use), `user` (tool_result blocks), and a final
`result`. Pure functions: the claude-code agent feeds them live, the auditor offline.

Tool calls are also mapped to what they *do*, because the contamination rules look for
actions, not tool names: `Bash` -> shell_command, `Read`/`Glob`/`Grep`/`LS` -> file_read
(with the path or pattern), `Write`/`Edit`/`NotebookEdit` -> file_write,
`WebFetch`/`WebSearch` -> network_attempt.

The blocks of a turn are read from an allow-list (text, thinking, tool use and results, a provider's `server_tool_use`
/ `mcp_tool_use` and its `*_tool_result`, images, documents, search results); a block of any other type is kept as
output and flagged (`sessions.unread_draft`), never filed as a prompt or dropped. Lines of another top-level type are
the CLI's own status (`tool_progress`, `rate_limit_event`, ...), kept as a message.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

from statebox.attempt_folder import CLAUDE_STREAM_LOG
from statebox.json_text import json_value
from statebox.sessions import EventDraft, clip, parse_json_lines, strings_of, unread_draft
from statebox.sessions.shapes import list_of, name_at, object_at, text_of
from statebox.schema import EventKind

RAW_LOG = CLAUDE_STREAM_LOG

_READ_TOOLS = {"Read": "file_path", "Glob": "path", "Grep": "path", "LS": "path"}
_WRITE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
_NETWORK_TOOLS = {"WebFetch": "url", "WebSearch": "query"}


def parse_line(obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]:
    """Normalise one stream-json object; unknown shapes become a `message` so nothing is lost."""
    kind = name_at(obj, "type")
    if kind == "system":
        return _system(obj)
    if kind == "assistant":
        if obj.get("is_api_error_message") or obj.get("error"):
            # the CLI reports a failed model call as a synthetic assistant message
            text = " ".join(str(b.get("text", "")) for b in _blocks(obj)) or str(obj.get("error"))
            return [EventDraft(EventKind.error, clip(text), {"api_error_status": obj.get("api_error_status")})]
        return [d for block in _blocks(obj) for d in _assistant_block(block, obj)]
    if kind == "user":
        return [d for block in _blocks(obj) for d in _user_block(block, obj)]
    if kind == "result":
        return _result(obj)
    if kind == "stream_event":  # partial chunks (--include-partial-messages); the full blocks follow
        return []
    return [EventDraft(EventKind.message, clip(json.dumps(obj)[:2000]), {"type": kind})]


class ClaudeNormaliser:
    """Live normaliser: `parse_line` plus what the agent needs at the end (final text, failure)."""

    def __init__(self) -> None:
        self.final_answer: str | None = None
        self.failure: str | None = None

    def feed(self, obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]:
        drafts = parse_line(obj, line_no)
        for d in drafts:
            if d.kind is EventKind.final_answer:
                self.final_answer = d.text
            elif d.kind is EventKind.error:
                self.failure = d.text
        return drafts


def parse_lines(lines: Iterable[str], loads: Callable[[str], Any] = json_value) -> list[tuple[int, EventDraft]]:
    """Normalise a whole raw log: (1-based line number, draft); torn or non-JSON lines are kept as messages."""
    return parse_json_lines(lines, parse_line, loads)


def _blocks(obj: dict[str, Any]) -> list[dict[str, Any]]:
    content = object_at(obj, "message").get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in list_of(content) if isinstance(b, dict)]


def _system(obj: dict[str, Any]) -> list[EventDraft]:
    subtype = text_of(obj.get("subtype"))
    if subtype == "init":
        data = {k: obj.get(k) for k in ("model", "tools", "cwd", "permissionMode", "claude_code_version", "apiKeySource")}
        return [EventDraft(EventKind.message, f"claude-code session start (model {obj.get('model')})", data)]
    if subtype == "api_retry":
        data = {k: obj.get(k) for k in ("attempt", "max_retries", "retry_delay_ms", "error_status", "error")}
        text = f"model API retry {obj.get('attempt')}/{obj.get('max_retries')}: {obj.get('error_status')} {obj.get('error')}"
        return [EventDraft(EventKind.message, text, data)]
    return [EventDraft(EventKind.message, f"system: {subtype}", {"subtype": subtype})]


def _assistant_block(block: dict[str, Any], obj: dict[str, Any]) -> list[EventDraft]:
    btype = name_at(block, "type")
    if btype == "text":
        return [EventDraft(EventKind.model_text, clip(text_of(block.get("text"))), {"message_id": _message_id(obj)})]
    if btype in ("thinking", "redacted_thinking"):
        return [EventDraft(EventKind.model_text, clip(text_of(block.get("thinking"))), {"thinking": True})]
    if btype in ("tool_use", "server_tool_use"):
        return _tool_use(block)
    if btype == "mcp_tool_use":
        return _mcp_tool_use(block)
    if isinstance(btype, str) and btype.endswith("_tool_result"):
        # what a tool the provider ran returned (web_search_tool_result, web_fetch_, code_execution_, mcp_tool_result,
        # ...): shown to the agent, read as output
        data = {"call_id": text_of(block.get("tool_use_id")), "block_type": btype, "is_error": bool(block.get("is_error"))}
        return [EventDraft(EventKind.tool_output, clip(_result_text(block.get("content"))), data)]
    if btype is None:
        return []  # a misshapen block (no string type): the format's absent case (sessions.shapes), as it always was
    return [unread_draft("a Claude assistant block of type", btype, block)]


def _mcp_tool_use(block: dict[str, Any]) -> list[EventDraft]:
    """Anthropic's MCP connector: the provider called a tool on the MCP server the request named. A call (its input read
    as any tool's) and a network event for the server, as the gateway log reads it."""
    server = text_of(block.get("server_name"))
    drafts = _tool_use(block)
    drafts.append(EventDraft(EventKind.network_attempt, server, {"tool": "mcp_tool_use", "url": server,
                                                                 "call_id": block.get("id", "")}))
    return drafts


def _tool_use(block: dict[str, Any]) -> list[EventDraft]:
    name = text_of(block.get("name"))
    raw_args = block.get("input")
    args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
    call_id = block.get("id", "")
    base = {"tool": name, "call_id": call_id}
    drafts = [EventDraft(EventKind.tool_call, clip(json.dumps(args, ensure_ascii=False)), {**base, "input": args})]
    if name == "Bash":
        drafts.append(EventDraft(EventKind.shell_command, clip(str(args.get("command", ""))), base))
    elif name in _READ_TOOLS:
        target = args.get(_READ_TOOLS[name]) or args.get("pattern") or ""
        drafts.append(EventDraft(EventKind.file_read, str(target), {**base, "path": str(target), "pattern": args.get("pattern")}))
    elif name in _WRITE_TOOLS:
        target = str(args.get(_WRITE_TOOLS[name], ""))
        drafts.append(EventDraft(EventKind.file_write, target, {**base, "path": target}))
    elif name in _NETWORK_TOOLS:
        target = str(args.get(_NETWORK_TOOLS[name], ""))
        drafts.append(EventDraft(EventKind.network_attempt, target, {**base, "url": target}))
    return drafts


def _user_block(block: dict[str, Any], obj: dict[str, Any]) -> list[EventDraft]:
    btype = name_at(block, "type")
    if btype == "tool_result":
        data = {"call_id": block.get("tool_use_id", ""), "is_error": bool(block.get("is_error"))}
        extra = obj.get("tool_use_result")
        if isinstance(extra, dict) and ("stdout" in extra or "stderr" in extra):
            data["stderr"] = clip(str(extra.get("stderr", "")), 4000)
        return [EventDraft(EventKind.tool_output, clip(_result_text(block.get("content"))), data)]
    if btype == "text":
        return [EventDraft(EventKind.message, clip(text_of(block.get("text"))), {"role": "user"})]
    if btype == "image":
        return []  # nothing to read
    if btype in ("document", "search_result"):  # what the agent was shown, read as output
        return [EventDraft(EventKind.tool_output, clip(_result_text([block])), {"block_type": btype})]
    if btype is None:
        return []  # a misshapen block: absent
    return [unread_draft("a Claude user block of type", btype, block)]


def _result_text(content: Any) -> str:
    """A tool_result's content is a string or a list of blocks; images are summarised, not inlined."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for item in list_of(content):
        if not isinstance(item, dict):
            continue
        itype = item.get("type")
        if itype == "text":
            parts.append(str(item.get("text", "")))
        elif itype == "image":
            parts.append("[image]")
        elif itype == "document":
            source = item.get("source")
            if isinstance(source, dict) and source.get("type") == "text":  # a plain-text document: its text (a PDF's
                parts.append(str(source.get("data", "")))                  # base64 is left out)
        else:
            # a search result, a provider tool's result item, a type no reader knows: its strings, so what the agent
            # was shown is read (it was dropped)
            parts.append(strings_of(item))
    return "\n".join(parts)


def _result(obj: dict[str, Any]) -> list[EventDraft]:
    data = {
        k: obj.get(k)
        for k in ("subtype", "is_error", "num_turns", "total_cost_usd", "usage", "terminal_reason", "api_error_status", "duration_ms")
    }
    text = str(obj.get("result") or "")
    if obj.get("is_error") or str(obj.get("subtype", "")).startswith("error"):
        return [EventDraft(EventKind.error, clip(text or f"claude-code ended with {obj.get('subtype')}"), data)]
    return [EventDraft(EventKind.final_answer, clip(text), data)]


def _message_id(obj: dict[str, Any]) -> str:
    return text_of(object_at(obj, "message").get("id"))
