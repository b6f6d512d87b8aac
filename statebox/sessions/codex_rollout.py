"""Codex's own session rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) -> normalised events.

A different format from `codex exec --json` (codex_jsonl.py): each line is an envelope
`{"timestamp", "type", "payload"}` with type
- `session_meta`: the session id, cwd, CLI version, and (some versions) the base instructions;
- `turn_context`: the turn's settings (cwd, sandbox and approval policy, model);
- `response_item`: what went to and came from the model, in the Responses API's own item shapes:
  `message` (role user / developer / system / assistant), `reasoning`, `function_call` (`name`,
  `arguments` as a JSON string, `call_id`) and `function_call_output`, `custom_tool_call` (e.g.
  `apply_patch` with the patch as `input`) and its output, `local_shell_call`, `web_search_call`;
- `event_msg`: the CLI's UI events, which repeat the items (`user_message`, `agent_message`,
  `agent_reasoning`, `exec_command_end`, `token_count`) plus `task_complete` (the last agent message)
  and errors;
- `compacted`: a summary replacing history.
Older rollouts (2025) hold the bare items without the envelope; they are read the same way.

Judged on actions: the items are the record (tool calls through `tool_calls.tool_call_drafts`, their
outputs as what the agent saw); `event_msg` copies are dropped, never turned into prompts (a copy of
a tool's output filed as prompt would excuse what the agent found). User, developer and system
messages and the base instructions are prompt text.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

from statebox.json_text import json_value
from statebox.schema import EventKind
from statebox.sessions import (QUIET_CALLS, QUIET_NOTHING, QUIET_RESULTS, QUIET_TEXT, EventDraft, clip, parse_json_lines,
                               strings_of, unread_draft)
from statebox.sessions.shapes import list_of, name_at, object_at
from statebox.sessions.tool_calls import output_draft, shell_script, tool_call_drafts

ENVELOPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
ITEMS = {"message", "reasoning", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output",
         "local_shell_call", "web_search_call", "tool_search_call", "tool_search_output"}
# Items Codex writes that are read as nothing, each for its reason (the item types of Codex 0.169's ResponseItem, read
# from the pinned binary). Every other type is model I/O no reader here knows: kept as output and flagged
# (`sessions.unread_draft`), never passed as nothing.
INERT_ITEMS = {
    "ghost_snapshot": "the CLI's own git snapshot of the workspace for /undo: a commit id, nothing the model did or saw",
    "compaction": "the provider's encrypted summary of the conversation so far: opaque, and the turns it sums were read",
    "compaction_summary": "compaction's older name",
    "context_compaction": "the marker of a context compaction (the summary is a compaction item or a compacted line)",
    "compaction_trigger": "the marker that a compaction was asked for",
    "configuration_update": "the turn's settings changed (model, effort, policies): the CLI's own state",
    "image_generation_call": "an image the provider drew from the model's words: it reads no file and reaches no host "
                             "the agent names, and what it returns is an image",
}
_EVENT_COPIES = {"user_message", "agent_message", "agent_reasoning", "agent_reasoning_raw_content", "exec_command_begin",
                 "exec_command_end", "exec_command_output_delta", "token_count", "task_started", "turn_diff",
                 "patch_apply_begin", "patch_apply_end", "mcp_tool_call_begin", "mcp_tool_call_end", "web_search_begin",
                 "web_search_end", "agent_reasoning_section_break", "turn_aborted", "entered_review_mode",
                 "item_started", "item_completed", "thread_settings_applied"}


def looks_like_rollout(obj: dict[str, Any]) -> bool:
    """A rollout line: an envelope type this module knows, or an old bare item / session header."""
    if name_at(obj, "type") in ENVELOPES and "payload" in obj:
        return True
    return name_at(obj, "type") in ITEMS and ("call_id" in obj or "role" in obj or "summary" in obj)


def parse_line(obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]:
    etype = name_at(obj, "type")
    payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else None
    if payload is None and etype in ITEMS:  # an old rollout's bare item
        return _item(obj)
    if payload is None:
        if "instructions" in obj and obj.get("instructions"):  # an old rollout's first line
            return [EventDraft(EventKind.message, clip(str(obj["instructions"])), {"role": "system"})]
        return [EventDraft(EventKind.message, f"codex rollout line: {str(etype)[:80]}", {"type": etype})]
    if etype == "response_item":
        return _item(payload)
    if etype == "session_meta":
        drafts = [EventDraft(EventKind.message, "codex session start",
                             {"session_id": payload.get("id"), "cli_version": payload.get("cli_version"), "cwd": payload.get("cwd")})]
        for key in ("base_instructions", "instructions", "user_instructions", "developer_instructions"):
            value = payload.get(key)
            text = value.get("text") if isinstance(value, dict) else value
            if text:
                drafts.append(EventDraft(EventKind.message, clip(str(text)), {"role": "system", "from": key}))
        return drafts
    if etype == "event_msg":
        return _event(payload)
    if etype == "compacted":
        return [EventDraft(EventKind.message, clip(str(payload.get("message", ""))), {"role": "system", "compacted": True})]
    return []  # turn_context: settings, no conversation


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in list_of(content):
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, dict) and block.get("type") in ("input_image", "image"):
            parts.append("[image]")
    return "\n".join(parts)


def _item(item: dict[str, Any]) -> list[EventDraft]:
    itype = name_at(item, "type")
    call_id = str(item.get("call_id") or item.get("id") or "")
    if itype == "message":
        role = str(item.get("role", ""))
        text = _text(item.get("content"))
        if role == "assistant":
            return [EventDraft(EventKind.model_text, clip(text), {"item_id": item.get("id")})]
        return [EventDraft(EventKind.message, clip(text), {"role": "system" if role == "developer" else role or "user"})]
    if itype == "reasoning":
        summary = "\n".join(str(s.get("text", "")) for s in list_of(item.get("summary")) if isinstance(s, dict))
        content = _text(item.get("content")) if item.get("content") else ""
        text = "\n".join(t for t in (summary, content) if t)
        return [EventDraft(EventKind.model_text, clip(text), {"thinking": True})] if text else []
    if itype == "function_call":
        return tool_call_drafts(str(item.get("name", "")), item.get("arguments"), call_id)
    if itype == "custom_tool_call":
        return tool_call_drafts(str(item.get("name", "")), {"input": item.get("input", "")}, call_id)
    if itype == "local_shell_call":
        raw_action = item.get("action")
        action: dict[str, Any] = raw_action if isinstance(raw_action, dict) else {}
        return tool_call_drafts("local_shell", {"command": shell_script(action.get("command") or "")}, call_id)
    if itype in ("function_call_output", "custom_tool_call_output"):
        text, is_error = _output(item.get("output"))
        return [output_draft(text, call_id, is_error=is_error)]
    if itype == "web_search_call":
        raw_search = item.get("action")
        search: dict[str, Any] = raw_search if isinstance(raw_search, dict) else {}
        query = str(search.get("query") or search.get("url") or "")
        return [EventDraft(EventKind.network_attempt, query, {"call_id": call_id, "tool": "web_search", "query": query})]
    if itype == "tool_search_call":  # the model searched the tools it may call (deferred MCP tools): a call of its own
        arguments = item.get("arguments")
        if arguments is None:
            arguments = {k: v for k, v in item.items() if k not in ("type", "id", "call_id", "status")}
        return tool_call_drafts("tool_search", arguments, call_id)
    if itype == "tool_search_output":  # the tools that search found: what the agent was shown
        return [output_draft(strings_of({k: v for k, v in item.items() if k not in ("type", "call_id")}), call_id)]
    if itype is None or itype in INERT_ITEMS:
        return []  # a misshapen item (no string type) is the format's absent case (sessions.shapes)
    return [unread_draft("a Codex rollout item of type", itype, item)]


def _output(raw: Any) -> tuple[str, bool]:
    """A tool output: a string, a JSON string `{"output": ..., "metadata": {"exit_code": ...}}`, or content blocks."""
    if isinstance(raw, dict):
        raw = raw.get("content") if "content" in raw else json.dumps(raw)
    if isinstance(raw, list):
        return _text(raw), False
    text = str(raw or "")
    try:
        value = json_value(text)
    except ValueError:
        return text, False
    if isinstance(value, dict) and "output" in value:
        code = object_at(value, "metadata").get("exit_code")
        return str(value.get("output", "")), code not in (0, None)
    return text, False


def _event(payload: dict[str, Any]) -> list[EventDraft]:
    ptype = name_at(payload, "type")
    if ptype == "task_complete":
        last = payload.get("last_agent_message")
        return [EventDraft(EventKind.final_answer, clip(str(last)), {"from": "task_complete"})] if last else []
    if ptype in ("error", "stream_error"):
        return [EventDraft(EventKind.error, clip(str(payload.get("message", ""))), {"type": ptype})]
    if ptype in _EVENT_COPIES:
        return []
    return [EventDraft(EventKind.message, f"codex event: {str(ptype)[:80]}", {"type": ptype})]


class RolloutNormaliser:
    """`parse_line` plus the final answer when no `task_complete` says it: the last assistant message."""

    def __init__(self) -> None:
        self.last_text: tuple[int, str] | None = None
        self.answered = False

    def feed(self, obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]:
        drafts = parse_line(obj, line_no)
        for d in drafts:
            if d.kind is EventKind.model_text and not d.data.get("thinking"):
                self.last_text = (line_no, d.text)
            elif d.kind is EventKind.final_answer:
                self.answered = True
        return drafts


def parse_lines(lines: Iterable[str], loads: Callable[[str], Any] = json_value) -> list[tuple[int, EventDraft]]:
    """A whole rollout (`loads`: json_text.line_loads of the file), the final answer last."""
    norm = RolloutNormaliser()
    out = parse_json_lines(lines, norm.feed, loads)
    if not norm.answered and norm.last_text is not None:
        line_no, text = norm.last_text
        out.append((line_no, EventDraft(EventKind.final_answer, text, {"from": "last assistant message"})))
    return out


_QUIET_ITEMS = {"reasoning": QUIET_TEXT, "function_call": QUIET_CALLS, "custom_tool_call": QUIET_CALLS,
                "local_shell_call": QUIET_CALLS, "function_call_output": QUIET_RESULTS,
                "custom_tool_call_output": QUIET_RESULTS}


def quiet_line(obj: dict[str, Any]) -> str | None:
    """QUIET_TEXT (assistant message or reasoning), QUIET_CALLS, QUIET_RESULTS or QUIET_NOTHING (a UI event that copies an
    item) for a line a candidate-line reading may leave unread where its bytes hold no trigger
    (`audits.session_file_prefilter`), else None: messages of any other role (prompts), provider-run web searches,
    session metadata, compaction summaries, the final answer and errors, unknown items, are read as usual."""
    etype = name_at(obj, "type")
    payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else None
    if payload is None:
        item = obj if etype in ITEMS else None
    elif etype == "response_item":
        item = payload
    elif etype == "event_msg":
        return QUIET_NOTHING if name_at(payload, "type") in _EVENT_COPIES else None
    else:
        item = None
    if item is None:
        return None
    itype = name_at(item, "type")
    if itype == "message":
        return QUIET_TEXT if str(item.get("role", "")) == "assistant" else None
    return _QUIET_ITEMS.get(itype) if itype is not None else None


def session_id(lines: Iterable[str]) -> str:
    """The rollout's session id (its `session_meta`), read from the first lines only."""
    for n, raw in enumerate(lines):
        if n > 5:
            break
        try:
            obj = json_value(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("type") == "session_meta" and isinstance(obj.get("payload"), dict):
            return str(obj["payload"].get("id") or "")
    return ""
