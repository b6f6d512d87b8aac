"""One Inspect AI sample (`inspect_ai.log.EvalSample`, as inspect_ai's own reader returns it) -> normalised events.

The sample's `messages` are the agent's conversation: system and user messages are prompt text (the
task's instructions, prohibitions and the question: never evidence), an assistant message's text and
reasoning are the model's words, its `tool_calls` are actions (through `tool_calls.tool_call_drafts`:
Inspect's `bash {cmd}` is a shell command, `python {code}` is code the rules read; a tool the provider ran, a
`tool_use` content block, is a network attempt and its result what the agent saw; a `data` block is output, and a
block of any other type than Inspect's is kept as output and flagged, `sessions.unread_draft`), a tool message is
what the agent saw (`error` set: the call failed). `output.completion` is the final answer. The line of
an event is its message's index + 1.

The sample's `events` transcript is read for one thing only: the tool calls that are not in the messages
(`subagent_tool_drafts`). A subagent the agent ran as a tool (`as_tool(agent)`) works in a conversation of its
own; the sample's messages hold only the call that started it and its answer, while every tool it called is a
`tool` event in the transcript, inside the subagent's span. Read from the messages alone, a cheat delegated to
such a subagent was clean. The rest of the transcript is not read: its model and sandbox events repeat the
messages, and what runs inside the scorers' span is the scorer's doing, not the agent's.

No inspect_ai import here (this package stands on `statebox.schema` only): the reader in
`audits/inspect_logs.py` loads the log and hands the sample's pydantic objects over; this module reads
their attributes, duck-typed, with a `Protocol` naming the ones it uses.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from statebox.schema import EventKind
from statebox.sessions import EventDraft, clip, strings_of, unread_draft
from statebox.sessions.tool_calls import output_draft, tool_call_drafts


class ToolCallLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def function(self) -> str: ...
    @property
    def arguments(self) -> dict[str, Any]: ...


class MessageLike(Protocol):
    """What is read of an Inspect chat message (read-only: inspect's classes narrow `role` to a literal)."""

    @property
    def role(self) -> str: ...
    @property
    def content(self) -> Any: ...  # str | list[Content]
    @property
    def metadata(self) -> dict[str, Any] | None: ...


def content_text(content: Any) -> tuple[str, str]:
    """(text, reasoning) of a message's content: a string, or content blocks (text, reasoning, images)."""
    if isinstance(content, str):
        return content, ""
    texts: list[str] = []
    reasoning: list[str] = []
    for block in content or []:
        btype = getattr(block, "type", "")
        if btype == "text":
            texts.append(str(getattr(block, "text", "")))
        elif btype == "reasoning":
            value = getattr(block, "summary", None) if getattr(block, "redacted", False) else getattr(block, "reasoning", "")
            if value:
                reasoning.append(str(value))
        elif btype in ("image", "audio", "video"):
            texts.append(f"[{btype}]")
    return "\n".join(texts), "\n".join(reasoning)


# Inspect's content types (inspect_ai.model.Content): read, or (image, audio, video, document: a file, no text) left
_CONTENT_TYPES = frozenset(("text", "reasoning", "image", "audio", "video", "document", "data", "tool_use"))


def provider_tools(content: Any) -> list[EventDraft]:
    """Tools the model's provider ran for it (Inspect's `ContentToolUse`: web search, code execution, MCP):
    the provider as the agent's road out, so each is a network attempt, whatever it was called, and its `result` is
    what the agent was shown (output; it was dropped)."""
    out: list[EventDraft] = []
    for block in [] if isinstance(content, str) else content or []:
        if getattr(block, "type", "") != "tool_use":
            continue
        name = str(getattr(block, "name", "") or getattr(block, "tool_type", "") or "provider tool")
        arguments = getattr(block, "arguments", "")
        target = arguments if isinstance(arguments, str) else str(arguments)
        out.append(EventDraft(EventKind.network_attempt, clip(f"{name} {target}".strip(), 2000),
                              {"tool": name, "provider": True, "url": clip(target, 2000) or name}))
        result = getattr(block, "result", None)
        if result:
            out.append(output_draft(result if isinstance(result, str) else str(result), str(getattr(block, "id", "") or ""),
                                    tool=name, provider=True))
    return out


def other_blocks(content: Any) -> list[EventDraft]:
    """What an assistant message's blocks hold beyond its words and its provider's tools: a `data` block's strings (a
    provider's own item, kept by Inspect as it came) as output, and a block of a type Inspect did not have when this
    was written as unread (`sessions.unread_draft`: output, and the session flagged). Both were dropped."""
    out: list[EventDraft] = []
    for block in [] if isinstance(content, str) else content or []:
        btype = getattr(block, "type", "")
        if btype == "data":
            out.append(EventDraft(EventKind.tool_output, clip(strings_of(getattr(block, "data", None))), {"block_type": "data"}))
        elif isinstance(btype, str) and btype not in _CONTENT_TYPES:
            out.append(unread_draft("an Inspect content block of type", btype, _fields(block)))
    return out


def _fields(block: Any) -> Any:
    """A content block's fields (a pydantic model's dump, else the block itself)."""
    dump = getattr(block, "model_dump", None)
    return dump() if callable(dump) else block


def message_drafts(messages: Sequence[MessageLike]) -> list[tuple[int, EventDraft]]:
    """The conversation's events, each with its message index + 1 as line."""
    out: list[tuple[int, EventDraft]] = []
    for n, message in enumerate(messages, start=1):
        role = getattr(message, "role", "")
        text, reasoning = content_text(getattr(message, "content", ""))
        if role in ("system", "user"):
            if text:
                out.append((n, EventDraft(EventKind.message, clip(text), {"role": role})))
        elif role == "assistant":
            if reasoning:
                out.append((n, EventDraft(EventKind.model_text, clip(reasoning), {"thinking": True})))
            if text:
                out.append((n, EventDraft(EventKind.model_text, clip(text), {"message": n})))
            out.extend((n, d) for d in provider_tools(getattr(message, "content", "")))
            out.extend((n, d) for d in other_blocks(getattr(message, "content", "")))
            for call in getattr(message, "tool_calls", None) or []:
                out.extend((n, d) for d in tool_call_drafts(str(getattr(call, "function", "")),
                                                            getattr(call, "arguments", None), str(getattr(call, "id", "") or "")))
        elif role == "tool":
            error = getattr(message, "error", None)
            body = text or (str(getattr(error, "message", "")) if error is not None else "")
            out.append((n, output_draft(body, str(getattr(message, "tool_call_id", "") or ""), is_error=error is not None,
                                        tool=str(getattr(message, "function", "") or ""))))
    return out


def sample_drafts(messages: Sequence[MessageLike], completion: str) -> list[tuple[int, EventDraft]]:
    """A sample's events: its messages, then its output's completion as the final answer."""
    out = message_drafts(messages)
    if completion:
        out.append((len(messages) + 1, EventDraft(EventKind.final_answer, clip(completion), {"from": "output.completion"})))
    return out


def _attr(obj: Any, name: str) -> Any:
    return getattr(obj, name, None)


def subagent_tool_drafts(events: Sequence[Any], messages: Sequence[MessageLike], first_line: int) -> list[tuple[int, EventDraft]]:
    """The tool calls of the transcript `events` that the messages do not hold (a subagent's), each a call and its
    result, marked `subagent` (the name of the agent span it ran in), numbered on from `first_line`; calls inside
    the scorers' span are left out (see the module docstring). Events are read duck-typed: `event` "span_begin"
    (`id`, `parent_id`, `type`, `name`) and "tool" (`id`, `function`, `arguments`, `result`, `error`, `span_id`)."""
    in_messages = {str(_attr(call, "id") or "") for m in messages for call in (_attr(m, "tool_calls") or [])}
    spans: dict[str, tuple[str | None, str, str]] = {}  # id -> (parent, type, name)
    for event in events:
        if _attr(event, "event") == "span_begin" and _attr(event, "id"):
            spans[str(_attr(event, "id"))] = (_attr(event, "parent_id"), str(_attr(event, "type") or ""),
                                              str(_attr(event, "name") or ""))
    out: list[tuple[int, EventDraft]] = []
    for index, event in enumerate(events):
        call_id = str(_attr(event, "id") or "")
        if _attr(event, "event") != "tool" or call_id in in_messages:
            continue
        agent, scored = _span_facts(spans, _attr(event, "span_id"))
        if scored:
            continue
        line = first_line + index
        marks = {"subagent": agent or "subagent", "inspect_event": index}
        function = str(_attr(event, "function") or "")
        out.extend((line, EventDraft(d.kind, d.text, {**d.data, **marks}))
                   for d in tool_call_drafts(function, _attr(event, "arguments"), call_id))
        error = _attr(event, "error")
        text = _result_text(_attr(event, "result")) or (str(_attr(error, "message") or "") if error is not None else "")
        result = output_draft(text, call_id, is_error=error is not None, tool=function)
        out.append((line, EventDraft(result.kind, result.text, {**result.data, **marks})))
    return out


def _span_facts(spans: dict[str, tuple[str | None, str, str]], span_id: Any) -> tuple[str, bool]:
    """(the name of the nearest agent span around `span_id`, whether a scorers' span holds it); a loop of parents
    (a crafted log) ends the walk."""
    agent, seen, at = "", set(), str(span_id) if span_id else None
    while at is not None and at in spans and at not in seen:
        seen.add(at)
        parent, kind, name = spans[at]
        if kind in ("scorer", "scorers"):
            return agent, True
        if kind == "agent" and not agent:
            agent = name
        at = str(parent) if parent else None
    return agent, False


def _result_text(result: Any) -> str:
    if result is None:
        return ""
    if isinstance(result, (list, str)):
        return content_text(result)[0] if isinstance(result, list) else result
    text = _attr(result, "text")
    return str(text) if isinstance(text, str) else str(result)
