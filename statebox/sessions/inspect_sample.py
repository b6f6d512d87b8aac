"""One Inspect AI sample (`inspect_ai.log.EvalSample`, as inspect_ai's own reader returns it) -> normalised events.

The sample's `messages` are the agent's conversation: system and user messages are prompt text (the
task's instructions, prohibitions and the question: never evidence), an assistant message's text and
reasoning are the model's words, its `tool_calls` are actions (through `tool_calls.tool_call_drafts`:
Inspect's `bash {cmd}` is a shell command, `python {code}` is code the rules read; a tool the provider ran, a
`tool_use` content block, is a network attempt), a tool message is
what the agent saw (`error` set: the call failed). `output.completion` is the final answer. The
sample's `events` transcript is not read: its sandbox and model events repeat the messages and include
what the scorer ran, which is not the agent's doing. The line of an event is its message's index + 1.

No inspect_ai import here (this package stands on `statebox.schema` only): the reader in
`audits/external.py` loads the log and hands the sample's pydantic objects over; this module reads
their attributes, duck-typed, with a `Protocol` naming the ones it uses.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from statebox.schema import EventKind
from statebox.sessions import EventDraft, clip
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


def provider_tools(content: Any) -> list[EventDraft]:
    """Tools the model's provider ran for it (Inspect's `ContentToolUse`: web search, code execution, MCP):
    the provider as the agent's road out, so each is a network attempt, whatever it was called."""
    out: list[EventDraft] = []
    for block in [] if isinstance(content, str) else content or []:
        if getattr(block, "type", "") != "tool_use":
            continue
        name = str(getattr(block, "name", "") or getattr(block, "tool_type", "") or "provider tool")
        arguments = getattr(block, "arguments", "")
        target = arguments if isinstance(arguments, str) else str(arguments)
        out.append(EventDraft(EventKind.network_attempt, clip(f"{name} {target}".strip(), 2000),
                              {"tool": name, "provider": True, "url": clip(target, 2000) or name}))
    return out


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
