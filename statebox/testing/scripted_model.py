"""A scripted model server speaking the real Anthropic and OpenAI wire formats.

Tests (and users replaying or debugging an agent) need a model that answers
exactly as the real APIs do — same paths, same SSE event sequences, same JSON
shapes — but whose answers are fixed in advance. Agents under test then run
their real clients (anthropic, openai, langchain, the `claude` and `codex`
CLIs) unchanged; only the base URL differs.

Served:
- Anthropic Messages: `POST /v1/messages` (with or without `?beta=true`), streaming SSE
  and JSON; `POST /v1/messages/count_tokens`; `HEAD /` and `GET /` answer 200.
- OpenAI Responses: `POST /v1/responses` (SSE and JSON).
- OpenAI Chat Completions: `POST /v1/chat/completions` (SSE chunks ending in `[DONE]`, and JSON).
- `GET /v1/models` (both shapes are harmless lists).

The script is a list of turns; see `Turn`. Which turn answers a request is, by
default, the number of model turns already in the request's conversation, so a
client retrying a request gets the same answer and side requests of a new
conversation start at turn 0 (see `ScriptedModel` for the alternatives).
"""

from __future__ import annotations

import argparse
import importlib
import json
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Literal, TypedDict, Union
from urllib.parse import parse_qs, urlsplit

from statebox.json_text import utf8_json

Api = Literal["anthropic", "responses", "chat"]

# Client tool names for "run this shell command", in the order they are looked for,
# with how each spells its arguments.
SHELL_TOOLS: dict[str, Callable[[str], dict[str, Any]]] = {
    "Bash": lambda cmd: {"command": cmd, "description": "Run a shell command"},
    "exec_command": lambda cmd: {"cmd": cmd},
    "bash": lambda cmd: {"command": cmd},
    "shell": lambda cmd: {"command": ["bash", "-lc", cmd]},
    "container.exec": lambda cmd: {"cmd": ["bash", "-lc", cmd]},
}


@dataclass
class Turn:
    """One model turn: a final text answer, or a tool call (optionally preceded by text).

    - `Turn(text="42")`: final answer (stop_reason end_turn / status completed / finish stop).
    - `Turn(shell="ls -la")`: call the client's shell tool (`Bash`, `exec_command`, `bash`,
      ... whichever the request's `tools` list offers), arguments spelled its way.
    - `Turn(tool="python", arguments={"code": "print(1)"})`: call a tool by its name.
    - `namespace`: the tool's namespace, for a Responses client that groups tools so (Codex's
      `multi_agent_v1`: `Turn(tool="spawn_agent", namespace="multi_agent_v1", ...)`); the other wire
      formats have none and ignore it.
    - `usage`: override the reported token counts (`{"input_tokens": N, "output_tokens": M}`);
      by default they are estimated from the request and reply sizes (~4 chars a token).
    - `delay_s`: sleep before answering (for time-limit tests).
    - `status`: answer with this HTTP error status instead (e.g. 500), `text` as the message.
    """

    text: str | None = None
    shell: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    namespace: str | None = None
    usage: dict[str, int] | None = None
    delay_s: float = 0.0
    status: int | None = None

    @property
    def is_tool_call(self) -> bool:
        return self.shell is not None or self.tool is not None

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "Turn":
        known = {"text", "shell", "tool", "arguments", "namespace", "usage", "delay_s", "status"}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"unknown turn keys {sorted(unknown)} (known: {sorted(known)})")
        return cls(**raw)


@dataclass
class ScriptRequest:
    """What a hook sees: one model request, already parsed, with helpers."""

    api: Api
    body: dict[str, Any]
    turn_index: int
    tool_names: list[str]
    tool_outputs: list[str]  # every tool result in the conversation, oldest first

    @property
    def last_tool_output(self) -> str | None:
        return self.tool_outputs[-1] if self.tool_outputs else None

    @property
    def model(self) -> str:
        return str(self.body.get("model", "scripted"))


Hook = Callable[[ScriptRequest], Turn]
ScriptStep = Union[Turn, Hook]


@dataclass
class RecordedRequest:
    """One request the server received, kept for tests to assert on."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    api: str | None = None
    turn_index: int | None = None
    side: bool = False
    time: float = field(default_factory=time.time)


# ---------------------------------------------------------------------------
# Reading requests: tools offered, tool outputs so far, turns so far
# ---------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    """Flatten the many shapes of message content into plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if "text" in part and isinstance(part["text"], str):
                    parts.append(part["text"])
                elif "content" in part:
                    parts.append(_text_of(part["content"]))
                elif "output" in part:
                    parts.append(_text_of(part["output"]))
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict):
        return _text_of(content.get("text") or content.get("content"))
    return str(content)


def tool_names(api: Api, body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if api == "chat" and isinstance(tool.get("function"), dict):
            names.append(str(tool["function"].get("name", "")))
        elif tool.get("name"):
            names.append(str(tool["name"]))
        elif tool.get("type") == "local_shell":
            names.append("local_shell")
    return names


def tool_outputs(api: Api, body: dict[str, Any]) -> list[str]:
    outs: list[str] = []
    if api == "anthropic":
        for msg in body.get("messages") or []:
            if isinstance(msg, dict) and isinstance(msg.get("content"), list):
                for part in msg["content"]:
                    if isinstance(part, dict) and part.get("type") == "tool_result":
                        outs.append(_text_of(part.get("content")))
    elif api == "chat":
        for msg in body.get("messages") or []:
            if isinstance(msg, dict) and msg.get("role") == "tool":
                outs.append(_text_of(msg.get("content")))
    else:
        items = body.get("input")
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict) and str(item.get("type", "")).endswith("call_output"):
                    outs.append(_text_of(item.get("output")))
    return outs


_RESPONSES_MODEL_ITEMS = {"function_call", "reasoning", "custom_tool_call", "local_shell_call"}


def turns_so_far(api: Api, body: dict[str, Any]) -> int:
    """How many model turns the conversation already holds (consecutive model items = one turn)."""
    if api in ("anthropic", "chat"):
        return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    count, in_model_run = 0, False
    for item in items:
        is_model = isinstance(item, dict) and (
            item.get("type") in _RESPONSES_MODEL_ITEMS or item.get("role") == "assistant"
        )
        if is_model and not in_model_run:
            count += 1
        in_model_run = is_model
    return count


def _estimate_tokens(obj: Any) -> int:
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return max(1, len(text) // 4)


# ---------------------------------------------------------------------------
# The model: picks a turn and resolves it into a concrete reply
# ---------------------------------------------------------------------------


@dataclass
class Reply:
    """A resolved turn: what exactly to send back, independent of wire format."""

    text: str
    tool_name: str | None
    tool_args: dict[str, Any] | None
    input_tokens: int
    output_tokens: int
    model: str
    status: int | None = None
    tool_namespace: str | None = None


class ScriptedModelOptions(TypedDict, total=False):
    """`ScriptedModel`'s keyword options, for subclasses that pass them through."""

    index_mode: Literal["conversation", "sequential"]
    side_request: Callable[[ScriptRequest], bool] | None
    side_text: str
    exhausted_text: str


class ScriptedModel:
    """The script and the bookkeeping; `ScriptedModelServer` puts it on HTTP.

    - `script`: list of `Turn`s or hooks `f(ScriptRequest) -> Turn`.
    - `index_mode="conversation"` (default): turn = model turns already in the request;
      `"sequential"`: turn = number of (non-side) requests answered so far.
    - `side_request`: predicate on `ScriptRequest` marking requests that are not part of the
      scripted conversation (a CLI's title or prefix-detection calls); they get `side_text`
      and consume no turn. Default: a request offering no tools while the script has tool
      calls is a side request.
    - `exhausted_text`: what a request past the end of the script gets.
    """

    def __init__(
        self,
        script: list[ScriptStep],
        *,
        index_mode: Literal["conversation", "sequential"] = "conversation",
        side_request: Callable[[ScriptRequest], bool] | None = None,
        side_text: str = "OK",
        exhausted_text: str = "[scripted model: script exhausted]",
    ) -> None:
        self.script = list(script)
        self.index_mode = index_mode
        self.side_request = side_request or self._default_side_request
        self.side_text = side_text
        self.exhausted_text = exhausted_text
        self.requests: list[RecordedRequest] = []
        self.exhausted = False
        self._answered = 0
        self._lock = threading.Lock()

    def _default_side_request(self, req: ScriptRequest) -> bool:
        script_uses_tools = any(not isinstance(s, Turn) or s.is_tool_call for s in self.script)
        return script_uses_tools and not req.tool_names

    def record(self, rec: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(rec)

    def model_requests(self) -> list[RecordedRequest]:
        """The requests that asked for a model turn (not HEAD /, not count_tokens)."""
        with self._lock:
            return [r for r in self.requests if r.api is not None and r.turn_index is not None]

    def respond(self, api: Api, body: dict[str, Any], rec: RecordedRequest) -> Reply:
        names = tool_names(api, body)
        outs = tool_outputs(api, body)
        probe = ScriptRequest(api=api, body=body, turn_index=0, tool_names=names, tool_outputs=outs)
        model = probe.model
        in_tokens = _estimate_tokens(body.get("messages") or body.get("input") or body)
        if self.side_request(probe):
            rec.side = True
            rec.turn_index = -1
            return Reply(self.side_text, None, None, in_tokens, 1, model)
        with self._lock:
            if self.index_mode == "sequential":
                index = self._answered
            else:
                index = turns_so_far(api, body)
            self._answered += 1
        rec.turn_index = index
        if index >= len(self.script):
            self.exhausted = True
            return Reply(self.exhausted_text, None, None, in_tokens, _estimate_tokens(self.exhausted_text), model)
        step = self.script[index]
        probe.turn_index = index
        turn = step if isinstance(step, Turn) else step(probe)
        if turn.delay_s:
            time.sleep(turn.delay_s)
        tool_name, tool_args = None, None
        if turn.shell is not None:
            tool_name = next((n for n in SHELL_TOOLS if n in names), None)
            if tool_name is None:
                tool_name = names[0] if names else "bash"
                tool_args = {"command": turn.shell}
            else:
                tool_args = SHELL_TOOLS[tool_name](turn.shell)
        elif turn.tool is not None:
            tool_name, tool_args = turn.tool, dict(turn.arguments or {})
        text = turn.text or ""
        out_tokens = _estimate_tokens(text + json.dumps(tool_args or {}))
        usage = turn.usage or {}
        return Reply(
            text=text,
            tool_name=tool_name,
            tool_args=tool_args,
            input_tokens=int(usage.get("input_tokens", in_tokens)),
            output_tokens=int(usage.get("output_tokens", out_tokens)),
            model=model,
            status=turn.status,
            tool_namespace=turn.namespace if turn.tool is not None else None,
        )


# ---------------------------------------------------------------------------
# Wire formats
# ---------------------------------------------------------------------------


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _chunks(text: str, size: int = 16) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _sse(event: str | None, data: Any) -> bytes:
    # as a provider writes it: a string holding an unpaired surrogate (`Turn(shell="x \\ud800")`) goes out escaped
    payload = data if isinstance(data, str) else utf8_json(data).decode("utf-8")
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


# -- Anthropic Messages ------------------------------------------------------


def anthropic_message(reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    if reply.tool_name:
        content.append({"type": "tool_use", "id": _new_id("toolu"), "name": reply.tool_name, "input": reply.tool_args})
    return {
        "id": _new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": "tool_use" if reply.tool_name else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def anthropic_sse(reply: Reply) -> list[bytes]:
    msg = anthropic_message(reply)
    start = dict(msg, content=[], stop_reason=None, usage=dict(msg["usage"], output_tokens=1))
    events = [_sse("message_start", {"type": "message_start", "message": start}), _sse("ping", {"type": "ping"})]
    for index, block in enumerate(msg["content"]):
        if block["type"] == "text":
            events.append(_sse("content_block_start", {"type": "content_block_start", "index": index,
                                                       "content_block": {"type": "text", "text": ""}}))
            for piece in _chunks(block["text"]):
                events.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                           "delta": {"type": "text_delta", "text": piece}}))
        else:
            events.append(_sse("content_block_start", {"type": "content_block_start", "index": index,
                                                       "content_block": dict(block, input={})}))
            for piece in _chunks(utf8_json(block["input"]).decode("utf-8"), 24):
                events.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                           "delta": {"type": "input_json_delta", "partial_json": piece}}))
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(_sse("message_delta", {"type": "message_delta",
                                         "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                                         "usage": {"output_tokens": reply.output_tokens,
                                                   "input_tokens": reply.input_tokens}}))
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


# -- OpenAI Responses --------------------------------------------------------


def _responses_items(reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append({"id": _new_id("msg"), "type": "message", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}]})
    if reply.tool_name:
        items.append({"id": _new_id("fc"), "type": "function_call", "status": "completed",
                      "call_id": _new_id("call"), "name": reply.tool_name,
                      "arguments": utf8_json(reply.tool_args).decode("utf-8")})
        if reply.tool_namespace:
            items[-1]["namespace"] = reply.tool_namespace
    return items


def responses_object(reply: Reply, body: dict[str, Any], items: list[dict[str, Any]] | None, status: str) -> dict[str, Any]:
    done = status == "completed"
    return {
        "id": _new_id("resp"),
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": reply.model,
        "output": items if items is not None else [],
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": bool(body.get("store", False)),
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.input_tokens + reply.output_tokens,
        } if done else None,
        "user": None,
        "metadata": {},
    }


def responses_sse(reply: Reply, body: dict[str, Any]) -> list[bytes]:
    items = _responses_items(reply)
    final = responses_object(reply, body, items, "completed")
    pending = dict(final, status="in_progress", output=[], usage=None)
    seq = iter(range(1_000_000))
    ev: list[bytes] = []

    def emit(kind: str, **payload: Any) -> None:
        ev.append(_sse(kind, {"type": kind, "sequence_number": next(seq), **payload}))

    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for out_index, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            emit("response.output_item.added", output_index=out_index,
                 item=dict(item, status="in_progress", content=[]))
            empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            emit("response.content_part.added", item_id=item["id"], output_index=out_index, content_index=0,
                 part=empty_part)
            for piece in _chunks(text):
                emit("response.output_text.delta", item_id=item["id"], output_index=out_index, content_index=0,
                     delta=piece, logprobs=[])
            emit("response.output_text.done", item_id=item["id"], output_index=out_index, content_index=0,
                 text=text, logprobs=[])
            emit("response.content_part.done", item_id=item["id"], output_index=out_index, content_index=0,
                 part=item["content"][0])
        else:
            emit("response.output_item.added", output_index=out_index,
                 item=dict(item, status="in_progress", arguments=""))
            for piece in _chunks(item["arguments"], 24):
                emit("response.function_call_arguments.delta", item_id=item["id"], output_index=out_index,
                     delta=piece)
            emit("response.function_call_arguments.done", item_id=item["id"], output_index=out_index,
                 arguments=item["arguments"], name=item["name"])
        emit("response.output_item.done", output_index=out_index, item=item)
    emit("response.completed", response=final)
    return ev


# -- OpenAI Chat Completions -------------------------------------------------


def chat_completion(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.tool_name:
        message["tool_calls"] = [{"id": _new_id("call"), "type": "function",
                                  "function": {"name": reply.tool_name,
                                               "arguments": utf8_json(reply.tool_args).decode("utf-8")}}]
    return {
        "id": _new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": "tool_calls" if reply.tool_name else "stop"}],
        "usage": {"prompt_tokens": reply.input_tokens, "completion_tokens": reply.output_tokens,
                  "total_tokens": reply.input_tokens + reply.output_tokens},
    }


def chat_sse(reply: Reply, body: dict[str, Any]) -> list[bytes]:
    whole = chat_completion(reply)
    base = {"id": whole["id"], "object": "chat.completion.chunk", "created": whole["created"], "model": reply.model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(None, dict(base, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]))

    ev = [chunk({"role": "assistant", "content": ""})]
    if reply.text:
        ev += [chunk({"content": piece}) for piece in _chunks(reply.text)]
    if reply.tool_name:
        call = whole["choices"][0]["message"]["tool_calls"][0]
        ev.append(chunk({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                         "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        ev += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
               for piece in _chunks(call["function"]["arguments"], 24)]
    ev.append(chunk({}, whole["choices"][0]["finish_reason"]))
    if (body.get("stream_options") or {}).get("include_usage"):
        ev.append(_sse(None, dict(base, choices=[], usage=whole["usage"])))
    ev.append(_sse(None, "[DONE]"))
    return ev


# ---------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------


def _error_body(api: Api, status: int, message: str) -> dict[str, Any]:
    if api == "anthropic":
        kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
                529: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": "server_error" if status >= 500 else "invalid_request_error",
                      "param": None, "code": None}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_HTTPServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        if self.server.verbose:
            super().log_message(format, *args)

    # -- plumbing --
    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_json(self, status: int, payload: Any, extra_headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (extra_headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw)

    def _send_sse(self, events: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            self.wfile.flush()
            if self.server.sse_delay_s:
                time.sleep(self.server.sse_delay_s)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _record(self, body: Any) -> RecordedRequest:
        parts = urlsplit(self.path)
        rec = RecordedRequest(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        self.server.model.record(rec)
        return rec

    # -- verbs --
    def do_HEAD(self) -> None:  # noqa: N802 - stdlib naming
        self._record(None)
        self._send_json(200, {})

    def do_GET(self) -> None:  # noqa: N802
        self._record(None)
        path = urlsplit(self.path).path
        if path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [{"id": "scripted", "object": "model", "created": 0,
                                                              "owned_by": "statebox", "type": "model",
                                                              "display_name": "scripted"}]})
        else:
            self._send_json(200, {"ok": True, "server": "statebox scripted model"})

    def do_POST(self) -> None:  # noqa: N802
        raw = self._read_body()
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._record(raw.decode("utf-8", "replace"))
            self._send_json(400, _error_body("anthropic", 400, "request body is not JSON"))
            return
        rec = self._record(body)
        path = urlsplit(self.path).path.rstrip("/")
        api: Api
        if path.endswith("/messages/count_tokens"):
            rec.api = "anthropic"
            self._send_json(200, {"input_tokens": _estimate_tokens(body.get("messages") or body)})
            return
        if path.endswith("/messages"):
            api = "anthropic"
        elif path.endswith("/responses"):
            api = "responses"
        elif path.endswith("/chat/completions"):
            api = "chat"
        else:
            self._send_json(404, {"error": {"message": f"no such endpoint {path}", "type": "not_found"}})
            return
        rec.api = api
        reply = self.server.model.respond(api, body, rec)
        if reply.status:
            self._send_json(reply.status, _error_body(api, reply.status, reply.text or "scripted error"))
            return
        stream = bool(body.get("stream"))
        if api == "anthropic":
            if stream:
                self._send_sse(anthropic_sse(reply))
            else:
                self._send_json(200, anthropic_message(reply))
        elif api == "responses":
            if stream:
                self._send_sse(responses_sse(reply, body))
            else:
                self._send_json(200, responses_object(reply, body, _responses_items(reply), "completed"))
        else:
            if stream:
                self._send_sse(chat_sse(reply, body))
            else:
                self._send_json(200, chat_completion(reply))


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    model: ScriptedModel
    verbose: bool = False
    sse_delay_s: float = 0.0


class ScriptedModelServer:
    """The scripted model on a real HTTP port (127.0.0.1, random by default), in a thread.

    Use as a context manager; `base_url` is `http://127.0.0.1:PORT` (Anthropic style),
    `openai_base_url` is `.../v1` (OpenAI style). `requests` lists what it received.
    """

    def __init__(self, script: list[ScriptStep] | ScriptedModel, *, host: str = "127.0.0.1", port: int = 0,
                 verbose: bool = False, sse_delay_s: float = 0.0, **model_options: Any) -> None:
        self.model = script if isinstance(script, ScriptedModel) else ScriptedModel(script, **model_options)
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.model = self.model
        self._httpd.verbose = verbose
        self._httpd.sse_delay_s = sse_delay_s
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        return list(self.model.requests)

    def model_requests(self) -> list[RecordedRequest]:
        """Requests that asked for a model turn (side requests included; HEAD /, count_tokens not)."""
        return self.model.model_requests()

    def start(self) -> "ScriptedModelServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "ScriptedModelServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------
# Script files and the command line
# ---------------------------------------------------------------------------


def _import_hook(spec: str) -> Hook:
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"hook {spec!r} must be 'module:function'")
    return getattr(importlib.import_module(module_name), attr)


def _text_template_step(template: str) -> Hook:
    """A step that answers `template` with `{last_output}` filled from the last tool output."""
    def step(req: ScriptRequest) -> Turn:
        return Turn(text=template.replace("{last_output}", (req.last_tool_output or "").strip()))
    return step


def load_script(path: str | Path) -> list[ScriptStep]:
    """Read a script file: a JSON (or YAML) list of turns.

    Each entry is a `Turn` as a mapping (`{"shell": "ls"}`, `{"tool": "python", "arguments":
    {...}}`, `{"text": "42"}`), or `{"hook": "module:function"}` naming a Python hook, or
    `{"text_template": "... {last_output} ..."}`, a final answer built from the last tool output.
    """
    path = Path(path)
    raw_text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        raw = yaml.safe_load(raw_text)
    else:
        raw = json.loads(raw_text)
    if isinstance(raw, dict):
        raw = raw.get("turns", [])
    if not isinstance(raw, list):
        raise ValueError(f"{path}: a script is a list of turns")
    steps: list[ScriptStep] = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise ValueError(f"{path}: each turn is a mapping, got {entry!r}")
        if "hook" in entry:
            steps.append(_import_hook(entry["hook"]))
        elif "text_template" in entry:
            template = str(entry["text_template"])
            steps.append(_text_template_step(template))
        else:
            steps.append(Turn.from_dict(entry))
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m statebox.testing.scripted_model",
                                     description="Serve a scripted model over the Anthropic and OpenAI wire formats.")
    parser.add_argument("--script", required=True, help="JSON/YAML list of turns")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--sequential", action="store_true", help="pick turns by request count, not conversation")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    server = ScriptedModelServer(script, host=args.host, port=args.port, verbose=args.verbose,
                                 index_mode="sequential" if args.sequential else "conversation")
    print(f"scripted model on http://{args.host}:{server.port} "
          f"(Anthropic base URL; OpenAI base URL http://{args.host}:{server.port}/v1)", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
