"""Gateway logs (`gateway.jsonl`) -> normalised events.

The gateway writes one request/response pair per line (keys redacted, images
summarised). That log is the auditor's independent witness: a CLI agent can hide
what its subprocesses do from its own stream, but every tool call the *model*
asked for went through the gateway. Three wire formats are understood
(Anthropic Messages, OpenAI Responses, OpenAI Chat Completions).

Why the de-duplication: every request repeats the whole conversation so far, so
a naive reading would report the same tool output thirty times. A prompt or a
tool result is emitted the first time it is seen; the model's reply (the
response half of each pair) is always new.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable

from statebox.sessions import EventDraft, clip, parse_json_lines
from statebox.schema import EventKind

RAW_LOG = "gateway.jsonl"

try:  # request lines hold the whole conversation: orjson reads them several times faster
    from orjson import OPT_SORT_KEYS
    from orjson import dumps as _orjson_dumps
    from orjson import loads as _loads

    def _key(obj: Any) -> bytes:
        try:
            return _orjson_dumps(obj, option=OPT_SORT_KEYS)
        except TypeError:
            return json.dumps(obj, sort_keys=True, default=str).encode()
except ImportError:  # pragma: no cover
    from json import loads as _loads

    def _key(obj: Any) -> bytes:
        return json.dumps(obj, sort_keys=True, default=str).encode()


def looks_like_gateway(obj: dict[str, Any]) -> bool:
    """A request/response pair, whatever else the gateway put beside it."""
    return isinstance(obj.get("request"), dict) and ("response" in obj or "error" in obj or "status" in obj)


class GatewayNormaliser:
    """Stateful: remembers which prompts and tool results it already emitted."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._done: dict[str, tuple[int, str]] = {}  # list key -> (items already read, hash of the first)

    def _new_items(self, key: str, items: list[Any]) -> list[Any]:
        """Conversation history only grows: read just what follows the part read before.

        When the history was rewritten (compaction: shorter, or a different first item)
        everything is read again; the content hashes still keep repeats out.
        """
        head = hashlib.blake2b(_key(items[:1]), digest_size=8).hexdigest()
        done, seen_head = self._done.get(key, (0, ""))
        start = done if (seen_head == head and done <= len(items)) else 0
        self._done[key] = (len(items), head)
        return items[start:]

    def _first(self, *parts: Any) -> bool:
        key = hashlib.blake2b(_key(parts), digest_size=12).hexdigest()
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def feed(self, obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]:
        request = _body(obj.get("request"))
        response = _body(obj.get("response"))
        drafts: list[EventDraft] = []
        drafts.extend(self._request(request))
        drafts.extend(self._response(response))
        error = obj.get("error")
        if error:
            drafts.append(EventDraft(EventKind.error, clip(str(error)), {"status": obj.get("status")}))
        return drafts

    # -- requests: prompts (once) and tool results (once) --
    def _request(self, req: dict[str, Any]) -> list[EventDraft]:
        out: list[EventDraft] = []
        system = req.get("system") or req.get("instructions")
        if system:
            text = _text_of(system)
            if text and self._first("system", text):
                out.append(EventDraft(EventKind.message, clip(text), {"role": "system"}))
        for msg in self._new_items("messages", req.get("messages") or []):
            if isinstance(msg, dict):
                out.extend(self._chat_or_anthropic_message(msg))
        items = req.get("input")
        if isinstance(items, str):
            if self._first("user", items):
                out.append(EventDraft(EventKind.message, clip(items), {"role": "user"}))
        elif isinstance(items, list):
            for item in self._new_items("input", items):
                if isinstance(item, dict):
                    out.extend(self._responses_input(item))
        return out

    def _chat_or_anthropic_message(self, msg: dict[str, Any]) -> list[EventDraft]:
        role = msg.get("role", "")
        content = msg.get("content")
        out: list[EventDraft] = []
        if role in ("user", "system", "developer"):
            if isinstance(content, list):
                for block in content:
                    if not isinstance(block, dict):
                        continue
                    if block.get("type") == "tool_result":
                        call_id = block.get("tool_use_id", "")
                        text = _text_of(block.get("content"))
                        if self._first("tool_result", call_id, text):
                            out.append(EventDraft(EventKind.tool_output, clip(text),
                                                  {"call_id": call_id, "is_error": bool(block.get("is_error"))}))
                    elif block.get("type") in ("text", "input_text"):
                        text = str(block.get("text", ""))
                        if text and self._first(role, text):
                            out.append(EventDraft(EventKind.message, clip(text), {"role": role}))
            else:
                text = _text_of(content)
                if text and self._first(role, text):
                    out.append(EventDraft(EventKind.message, clip(text), {"role": role}))
        elif role == "tool":  # chat completions tool result
            call_id = msg.get("tool_call_id", "")
            text = _text_of(content)
            if self._first("tool_result", call_id, text):
                out.append(EventDraft(EventKind.tool_output, clip(text), {"call_id": call_id}))
        # assistant turns in requests repeat earlier responses: already emitted from those responses
        return out

    def _responses_input(self, item: dict[str, Any]) -> list[EventDraft]:
        itype = item.get("type", "message" if "role" in item else "")
        if itype == "function_call_output":
            call_id = item.get("call_id", "")
            text = _text_of(item.get("output"))
            if self._first("tool_result", call_id, text):
                return [EventDraft(EventKind.tool_output, clip(text), {"call_id": call_id})]
            return []
        if itype == "message" and item.get("role") in ("user", "system", "developer"):
            text = _text_of(item.get("content"))
            if text and self._first(item.get("role"), text):
                return [EventDraft(EventKind.message, clip(text), {"role": item.get("role")})]
        return []

    # -- responses: everything the model said or asked for --
    def _response(self, resp: dict[str, Any]) -> list[EventDraft]:
        out: list[EventDraft] = []
        if isinstance(resp.get("content"), list):  # Anthropic
            for block in resp["content"]:
                if not isinstance(block, dict):
                    continue
                btype = block.get("type")
                if btype == "text":
                    out.append(EventDraft(EventKind.model_text, clip(str(block.get("text", ""))), {"role": "assistant"}))
                elif btype == "thinking":
                    out.append(EventDraft(EventKind.model_text, clip(str(block.get("thinking", ""))), {"thinking": True}))
                elif btype in ("tool_use", "server_tool_use"):
                    out.append(_tool_call(str(block.get("name", "")), block.get("input"), block.get("id", "")))
        for item in resp.get("output") or []:  # OpenAI Responses
            if not isinstance(item, dict):
                continue
            itype = item.get("type")
            if itype == "message":
                text = _text_of(item.get("content"))
                if text:
                    out.append(EventDraft(EventKind.model_text, clip(text), {"role": "assistant"}))
            elif itype == "reasoning":
                text = _text_of(item.get("summary") or item.get("content"))
                if text:
                    out.append(EventDraft(EventKind.model_text, clip(text), {"thinking": True}))
            elif itype in ("function_call", "custom_tool_call", "local_shell_call"):
                args = item.get("arguments", item.get("input", item.get("action")))
                out.append(_tool_call(str(item.get("name", itype)), args, item.get("call_id", "")))
            elif itype == "web_search_call":
                out.append(EventDraft(EventKind.network_attempt, clip(json.dumps(item.get("action") or {})), {"tool": "web_search"}))
        for choice in resp.get("choices") or []:  # OpenAI Chat Completions
            message = (choice or {}).get("message") or {}
            text = _text_of(message.get("content"))
            if text:
                out.append(EventDraft(EventKind.model_text, clip(text), {"role": "assistant"}))
            for call in message.get("tool_calls") or []:
                fn = (call or {}).get("function") or {}
                out.append(_tool_call(str(fn.get("name", "")), fn.get("arguments"), call.get("id", "")))
        return out


def _tool_call(name: str, args: Any, call_id: str) -> EventDraft:
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
            args = parsed if isinstance(parsed, dict) else {"input": parsed}
        except json.JSONDecodeError:
            args = {"input": args}
    if not isinstance(args, dict):
        args = {"input": args}
    return EventDraft(EventKind.tool_call, clip(json.dumps(args, ensure_ascii=False)),
                      {"tool": name, "call_id": call_id, "input": args})


def _body(part: Any) -> dict[str, Any]:
    """The JSON body of a logged request/response, wherever the gateway nested it."""
    if not isinstance(part, dict):
        return {}
    for key in ("body", "json", "message"):
        inner = part.get(key)
        if isinstance(inner, dict) and any(k in inner for k in ("messages", "input", "content", "output", "choices", "model")):
            return inner
    return part


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return str(content.get("text", "")) or _text_of(content.get("content"))
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                btype = block.get("type", "")
                if "text" in block:
                    parts.append(str(block["text"]))
                elif btype == "tool_result":
                    parts.append(_text_of(block.get("content")))
                elif btype in ("image", "input_image", "image_url"):
                    parts.append("[image]")
        return "\n".join(p for p in parts if p)
    return str(content)


def parse_lines(lines: Iterable[str]) -> list[tuple[int, EventDraft]]:
    """Normalise a whole gateway log: (1-based line number, draft)."""
    return parse_json_lines(lines, GatewayNormaliser().feed, loads=_loads)
