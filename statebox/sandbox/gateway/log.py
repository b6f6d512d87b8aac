"""What the gateway writes about each model request: redacted, image-free, streams assembled.

The gateway log is evidence for the auditor and the report, so it must hold the
whole conversation — but never a key (neither the real one nor the attempt's
token) and never megabytes of base64 frames. Images become
`{"image": {"bytes": N, "sha256": ...}}`, which still proves which frames were
shown. Streaming replies are assembled into the message the client ended up
with, plus usage, so a reader never has to replay SSE.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Any

from statebox.json_text import json_value

REDACTED = "[redacted]"
SECRET_HEADERS = {"x-api-key", "authorization", "api-key", "openai-api-key", "proxy-authorization", "cookie"}
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?(;[\w-]+=[^;,]*)*;base64,", re.I)
_B64_CHARS = re.compile(r"^[A-Za-z0-9+/=\s]+$")


def image_summary(b64: str) -> dict[str, Any]:
    """Size and hash of a base64 payload (hash of the decoded bytes when it decodes)."""
    try:
        raw = base64.b64decode(b64, validate=False)
    except (binascii.Error, ValueError):
        raw = b64.encode()
    return {"image": {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}}


def summarise_images(obj: Any) -> Any:
    """Replace every base64 image (data URLs, Anthropic base64 sources, long base64 `data`) by its summary."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if key == "data" and isinstance(value, str) and len(value) > 256 and _B64_CHARS.match(value[:4096]):
                out[key] = image_summary(value)
            else:
                out[key] = summarise_images(value)
        return out
    if isinstance(obj, list):
        return [summarise_images(v) for v in obj]
    if isinstance(obj, str) and len(obj) > 64:
        match = _DATA_URL.match(obj)
        if match:
            return image_summary(obj[match.end():])
    return obj


def image_payloads(obj: Any) -> tuple[int, int]:
    """(images, base64 bytes they take) in a request body: inline images are budgeted per image, not per byte."""
    count = size = 0
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            data = node.get("data")
            if (isinstance(data, str) and str(node.get("media_type", "")).startswith("image/")):
                count, size = count + 1, size + len(data)
                continue
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and node[:11].lower() == "data:image/":
            count, size = count + 1, size + len(node)
    return count, size


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    return {k: (REDACTED if k.lower() in SECRET_HEADERS else v) for k, v in headers.items()}


def redact_text(text: str, secrets: list[str]) -> str:
    """Remove every secret string from a serialised log line (belt and braces over header redaction)."""
    for secret in secrets:
        if secret and len(secret) >= 8:
            text = text.replace(secret, REDACTED)
    return text


# ---------------------------------------------------------------------------
# SSE assembly
# ---------------------------------------------------------------------------


class SSEParser:
    """Incremental `text/event-stream` parser: feed bytes, get (event, data) pairs."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        self._buffer += chunk
        out: list[tuple[str | None, str]] = []
        while True:
            idx = self._buffer.find(b"\n")
            if idx < 0:
                return out
            line = self._buffer[:idx].rstrip(b"\r").decode("utf-8", "replace")
            self._buffer = self._buffer[idx + 1 :]
            if not line:
                if self._data or self._event:
                    out.append((self._event, "\n".join(self._data)))
                self._event, self._data = None, []
            elif line.startswith(":"):
                continue
            elif line.startswith("event:"):
                self._event = line[6:].strip()
            elif line.startswith("data:"):
                self._data.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])


class StreamAssembler:
    """Turns one provider's SSE events into the final message and its usage."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.parser = SSEParser()
        self.events = 0
        self.finished = False  # the stream's own end marker arrived (else its usage may be partial)
        self.error: Any = None
        # anthropic
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, str] = {}
        # responses
        self.response: dict[str, Any] | None = None
        self.items: dict[int, dict[str, Any]] = {}
        # chat
        self.chat: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": {}}
        self.chat_meta: dict[str, Any] = {}
        self.usage: dict[str, Any] = {}

    def feed(self, chunk: bytes) -> None:
        for event, data in self.parser.feed(chunk):
            if data.strip() == "[DONE]":
                self.finished = True
                continue
            try:
                payload = json_value(data)
            except json.JSONDecodeError:
                continue
            self.events += 1
            if isinstance(payload, dict):
                getattr(self, f"_on_{self.api}")(event or str(payload.get("type", "")), payload)

    # -- Anthropic --
    def _on_anthropic(self, event: str, p: dict[str, Any]) -> None:
        kind = p.get("type", event)
        if kind == "message_start":
            self.message = dict(p.get("message") or {})
            self.usage.update((self.message.get("usage") or {}))
        elif kind == "content_block_start":
            self.blocks[int(p.get("index", 0))] = dict(p.get("content_block") or {})
        elif kind == "content_block_delta":
            index, delta = int(p.get("index", 0)), p.get("delta") or {}
            block = self.blocks.setdefault(index, {"type": "text", "text": ""})
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "input_json_delta":
                self.partial_json[index] = self.partial_json.get(index, "") + delta.get("partial_json", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
        elif kind == "message_delta":
            self.message.update({k: v for k, v in (p.get("delta") or {}).items()})
            self.usage.update({k: v for k, v in (p.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self.finished = True
        elif kind == "error":
            self.error = p.get("error")

    # -- OpenAI Responses --
    def _on_responses(self, event: str, p: dict[str, Any]) -> None:
        kind = p.get("type", event)
        if kind == "response.output_item.done":
            self.items[int(p.get("output_index", len(self.items)))] = p.get("item") or {}
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self.finished = True
            self.response = p.get("response") or {}
            self.usage.update(self.response.get("usage") or {})
        elif kind == "error":
            self.error = p

    # -- OpenAI Chat Completions --
    def _on_chat(self, event: str, p: dict[str, Any]) -> None:
        for key in ("id", "model", "created"):
            if key in p:
                self.chat_meta[key] = p[key]
        if p.get("usage"):
            self.usage.update(p["usage"])
        if "error" in p:
            self.error = p["error"]
        for choice in p.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.chat["content"] += delta["content"]
            for call in delta.get("tool_calls") or []:
                slot = self.chat["tool_calls"].setdefault(int(call.get("index", 0)),
                                                          {"id": None, "type": "function",
                                                           "function": {"name": "", "arguments": ""}})
                if call.get("id"):
                    slot["id"] = call["id"]
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                self.chat_meta["finish_reason"] = choice["finish_reason"]

    def result(self) -> dict[str, Any]:
        """The assembled reply, in the provider's non-streaming shape."""
        if self.api == "anthropic":
            content = []
            for index in sorted(self.blocks):
                block = dict(self.blocks[index])
                if index in self.partial_json:
                    try:
                        block["input"] = json_value(self.partial_json[index] or "{}")
                    except json.JSONDecodeError:
                        block["input"] = self.partial_json[index]
                content.append(block)
            return dict(self.message, content=content, usage=self.usage)
        if self.api == "responses":
            if self.response is not None:
                if not self.response.get("output") and self.items:
                    return dict(self.response, output=[self.items[i] for i in sorted(self.items)])
                return self.response
            return {"output": [self.items[i] for i in sorted(self.items)], "usage": self.usage or None}
        message = {"role": "assistant", "content": self.chat["content"] or None}
        if self.chat["tool_calls"]:
            message["tool_calls"] = [self.chat["tool_calls"][i] for i in sorted(self.chat["tool_calls"])]
        return dict(self.chat_meta, object="chat.completion", choices=[
            {"index": 0, "message": message, "finish_reason": self.chat_meta.get("finish_reason")}],
                    usage=self.usage or None)


def usage_of(api: str, reply: Any) -> tuple[int, int]:
    """(input tokens, output tokens) of a non-streaming (or assembled) reply; cache reads count as input."""
    if not isinstance(reply, dict):
        return 0, 0
    usage = reply.get("usage") or {}
    if not isinstance(usage, dict):
        return 0, 0
    if api == "anthropic":
        inp = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                    "cache_read_input_tokens"))
        return inp, int(usage.get("output_tokens") or 0)
    if api == "responses":
        return int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
