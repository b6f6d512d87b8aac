"""Claude Code's own session files (`~/.claude/projects/<project>/<session>.jsonl`) -> normalised events.

What differs from `--output-format stream-json` (claude_stream.py), seen in files the real CLI wrote
(tests/audits/cli_session_files/, recorded by tests/audits/record_cli_session_files.py):
- the conversation lines (`type` `user` / `assistant`, one content block per assistant line) have the
  same shape, so they go through `claude_stream.parse_line`; the prompt is a `user` line too;
- there is no `result` line: the final answer is the last assistant text of the file;
- the CLI's bookkeeping sits between them: `queue-operation` (the prompt queued), `attachment`
  (system reminders it rendered for the model: environment, date, token budget, the system prompt
  snapshot), `api-request-shape` / `api-request` / `api-request-blob` (copies of what was sent to the
  model: system prompt, tool descriptions, the same messages again), `last-prompt`, `cost-state`,
  `summary`, `file-history-snapshot`, ...

Judged on actions: the system prompt and the harness's reminders become prompt messages (never
evidence, and they excuse an echo). The request copies are dropped, not turned into prompts: they
repeat tool results, and a tool result filed as "prompt" would excuse what the agent found there
(e.g. the original video name it dug up would read as "the prompt leaked it"). An attachment of a kind
not known to be the harness's own is kept as something the agent *saw* (tool output), never as prompt.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from statebox.schema import EventKind
from statebox.json_text import json_value
from statebox.sessions import QUIET_CALLS, QUIET_RESULTS, QUIET_TEXT, EventDraft, clip, parse_json_lines
from statebox.sessions import claude_stream
from statebox.sessions.shapes import list_of, name_at, object_at

# attachments the CLI renders from its own state (never from a file or tool the agent touched)
HARNESS_ATTACHMENTS = {"environment", "model", "total_tokens_reminder", "date", "session_context", "remote_session_change",
                       "prompt_snapshot", "todo_reminder", "plan_mode", "critical_system_reminder", "output_style",
                       "token_usage", "budget_usd", "deferred_tools_delta", "skill_listing", "nested_memory"}
# bookkeeping lines with nothing the model saw or did that is not also on a conversation line
DROPPED = {"api-request", "api-request-blob", "last-prompt", "atis-latch", "tools-used", "cost-state",
           "file-history-snapshot", "summary", "custom-title", "tag"}
SESSION_KEYS = ("sessionId", "parentUuid")


def looks_like_session(obj: dict[str, Any]) -> bool:
    """A session-file line (camelCase `sessionId` / `parentUuid`; stream-json says `session_id`)."""
    return any(k in obj for k in SESSION_KEYS) or name_at(obj, "type") in ("queue-operation", "file-history-snapshot", "summary")


def parse_line(obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]:
    """One session-file line; unknown bookkeeping becomes a short `message` naming its type."""
    kind = name_at(obj, "type")
    if kind in ("user", "assistant"):
        if kind == "user" and obj.get("isMeta"):  # the CLI's own caveats / reminders in a user turn
            return [EventDraft(EventKind.message, clip(_text_of(obj)), {"role": "system", "meta": True})]
        drafts = claude_stream.parse_line(obj, line_no)
        result = obj.get("toolUseResult")
        if kind == "user" and isinstance(result, dict) and result.get("stderr"):
            drafts = [EventDraft(d.kind, d.text, {**d.data, "stderr": clip(str(result.get("stderr", "")), 4000)})
                      if d.kind is EventKind.tool_output else d for d in drafts]
        if obj.get("isSidechain"):  # a subagent's turn: still the agent's doing
            drafts = [EventDraft(d.kind, d.text, {**d.data, "sidechain": True}) for d in drafts]
        return drafts
    if kind == "queue-operation":
        content = obj.get("content")
        return [EventDraft(EventKind.message, clip(str(content)), {"role": "user", "queued": True})] if content else []
    if kind == "attachment":
        return _attachment(obj)
    if kind == "api-request-shape":
        system = object_at(obj, "shape").get("system")
        texts = [str(b.get("text", "")) for b in system or [] if isinstance(b, dict)] if isinstance(system, list) else []
        return [EventDraft(EventKind.message, clip("\n".join(texts)), {"role": "system"})] if texts else []
    if kind == "system":
        text = str(obj.get("content") or obj.get("subtype") or "system")
        return [EventDraft(EventKind.message, clip(text), {"role": "system", "subtype": obj.get("subtype")})]
    if kind in DROPPED:
        return []
    return [EventDraft(EventKind.message, f"claude session line: {str(kind)[:80]}", {"type": kind})]


def _attachment(obj: dict[str, Any]) -> list[EventDraft]:
    raw_att = obj.get("attachment")
    att: dict[str, Any] = raw_att if isinstance(raw_att, dict) else {}
    atype = str(att.get("type", ""))
    rendered = obj.get("rendered")
    texts = [str(r.get("content", "")) for r in rendered if isinstance(r, dict)] if isinstance(rendered, list) else []
    if atype == "prompt_snapshot":
        system = att.get("systemPrompt")
        texts = [str(t) for t in system] if isinstance(system, list) else [str(system or "")]
    text = "\n".join(t for t in texts if t)
    if not text:
        return []
    if atype in HARNESS_ATTACHMENTS:
        return [EventDraft(EventKind.message, clip(text), {"role": "system", "attachment": atype})]
    # a file's content, a hook's output, ...: what the agent was shown, which may be what it dug up
    return [EventDraft(EventKind.tool_output, clip(text), {"attachment": atype})]


def _text_of(obj: dict[str, Any]) -> str:
    content = object_at(obj, "message").get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in list_of(content) if isinstance(b, dict) and b.get("type") == "text")


class ClaudeSessionNormaliser:
    """`parse_line` plus the final answer: the last assistant text, emitted when the file ends."""

    def __init__(self) -> None:
        self.last_text: tuple[int, str] | None = None

    def feed(self, obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]:
        drafts = parse_line(obj, line_no)
        for d in drafts:
            if d.kind is EventKind.model_text and not d.data.get("thinking") and not d.data.get("sidechain"):
                self.last_text = (line_no, d.text)
            elif d.kind in (EventKind.tool_call, EventKind.tool_output) and not d.data.get("sidechain"):
                self.last_text = None  # the text before a tool call is not the answer
        return drafts


def parse_lines(lines: Iterable[str], loads: Callable[[str], Any] = json_value) -> list[tuple[int, EventDraft]]:
    """A whole session file: (1-based line number, draft), the final answer last (`loads`: json_text.line_loads of the file)."""
    norm = ClaudeSessionNormaliser()
    out = parse_json_lines(lines, norm.feed, loads)
    if norm.last_text is not None:
        line_no, text = norm.last_text
        out.append((line_no, EventDraft(EventKind.final_answer, text, {"from": "last assistant text"})))
    return out


_QUIET_ASSISTANT = frozenset(("text", "thinking", "redacted_thinking"))


def quiet_line(obj: dict[str, Any]) -> str | None:
    """QUIET_TEXT, QUIET_CALLS or QUIET_RESULTS for a conversation line of only the blocks a candidate-line reading may leave
    unread where its bytes hold no trigger (`audits.session_file_prefilter`), else None (read as usual).

    Why by the parsed line and not by its bytes: whether a line is the prompt, a reminder or the agent's own
    turn is its top-level `type`, `isMeta` and blocks, which a pattern over the bytes can mistake (the agent
    writes `"type":"user"` into a tool input at will). Left to the usual reading: user text (a prompt), any
    `isMeta` line, an API error, provider-run (`server_tool_use`) or unknown blocks, a line mixing text and tool
    blocks, bookkeeping lines."""
    kind = name_at(obj, "type")
    if kind == "assistant":
        if obj.get("is_api_error_message") or obj.get("error"):
            return None
        content = object_at(obj, "message").get("content")
        if isinstance(content, str):
            return QUIET_TEXT
        types = {name_at(b, "type") for b in list_of(content) if isinstance(b, dict)}
        if types <= _QUIET_ASSISTANT:
            return QUIET_TEXT
        return QUIET_CALLS if types == {"tool_use"} else None
    if kind == "user" and not obj.get("isMeta"):
        content = object_at(obj, "message").get("content")
        if isinstance(content, str):
            return None  # a prompt
        types = {name_at(b, "type") for b in list_of(content) if isinstance(b, dict)}
        return QUIET_RESULTS if types == {"tool_result"} else None
    return None
