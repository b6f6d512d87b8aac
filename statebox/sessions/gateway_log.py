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

What the provider did or was refused, beside the conversation (issue 24): the gateway
is the sandbox's only road out, and with a real key the provider is a road further on.
So three more things in this log are network events (`network_attempt`, with
`data["gateway"]` saying which, judged in `statebox.audits.rules.rule_network`):

- `refused`: a request the gateway refused (`"refused": "<field or reason>"`), with its
  `refusal` kind (`refusal_kind`: a server tool, an MCP server, a stateful field, a
  budget, ...), from the record's `kind` when the gateway wrote one, else from its text;
- `provider_tool`: a reply block or item that a tool the *provider* ran left behind
  (`server_tool_use`, `web_search_tool_result`, `mcp_call`, `web_search_call`, and any
  `*_tool_use`/`*_tool_result`/`*_call` type that no client executes, so a tool type a
  provider adds later counts the day it appears);
- `provider_request`: a served request that asked for such a tool or for provider-held
  state (`mcp_servers`, `previous_response_id`, ...): a gateway older than its field
  tables let it through, and the log still shows it.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Callable, Iterable, Iterator

import orjson

from statebox.attempt_folder import GATEWAY_LOG
from statebox.json_text import json_value
from statebox.sessions import EventDraft, clip, parse_json_line
from statebox.sessions.conversation_splice import Splicer
from statebox.sessions.shapes import list_of, name_at, object_at, text_of
from statebox.schema import ACTION_KINDS, EventKind

RAW_LOG = GATEWAY_LOG

# request lines hold the whole conversation: orjson (a declared dependency) reads them several times faster
_loads = orjson.loads
# `json.dumps(obj, ensure_ascii=False)` is this encoder's `encode` (json.dumps builds one like it per call)
_encode = json.JSONEncoder(ensure_ascii=False).encode
_quoted = json.encoder.encode_basestring  # the encoder's own string writer when ensure_ascii is off


def _json_text(obj: Any) -> str:
    """`json.dumps(obj, ensure_ascii=False)`. A tool input of one string under one string key (`{"command": ...}`,
    most of them) is written as the encoder writes it, `{` key `: ` value `}` with its own string writer,
    without setting the encoder up per call."""
    if type(obj) is dict and len(obj) == 1:
        (key, value), = obj.items()
        if type(key) is str and type(value) is str:
            return "{" + _quoted(key) + ": " + _quoted(value) + "}"
    return _encode(obj)


def _key(obj: Any) -> bytes:
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(obj, sort_keys=True, default=str).encode()


def _line_loads(raw: str | bytes) -> Any:
    """A whole line as `parse_json_line` reads it: orjson, and what orjson refuses (a lone surrogate escape, NaN)
    as json reads it (`json_value`), so a line valid to json is read on both of the auditor's paths, never taken
    for an unparsed prompt on one while the other reads its reply half (`reply_half`)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json_value(raw)


def looks_like_gateway(obj: dict[str, Any]) -> bool:
    """A request/response pair, whatever else the gateway put beside it."""
    return isinstance(obj.get("request"), dict) and ("response" in obj or "error" in obj or "status" in obj)


# -- tools the provider runs ---------------------------------------------------------

# Reply blocks (Anthropic) and output items (OpenAI Responses) of tools the agent's own process
# executes. An allow-list: every other tool-like type ran at the provider.
CLIENT_TOOL_BLOCKS = frozenset({"tool_use"})
CLIENT_TOOL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "shell_call", "apply_patch_call",
                               "computer_call"})
_PROVIDER_BLOCK_NAMES = frozenset({"server_tool_use", "mcp_tool_use", "mcp_tool_result", "container_upload"})


def is_provider_tool_block(btype: str) -> bool:
    """An Anthropic content block left by a tool the provider ran (a server tool, an MCP server)."""
    if btype in CLIENT_TOOL_BLOCKS:
        return False
    return btype in _PROVIDER_BLOCK_NAMES or btype.endswith(("_tool_use", "_tool_result"))


def is_provider_tool_item(itype: str) -> bool:
    """An OpenAI Responses output item left by a tool the provider ran (web_search_call, mcp_call, ...)."""
    if itype in CLIENT_TOOL_ITEMS or itype.endswith("_output"):
        return False
    return itype.endswith("_call") or itype.startswith("mcp_")


# Request tool types the provider executes (both providers' families; versioned names included).
# The gateway's field tables are the allow-list; this is what the log can still show when one let
# such a request through (an older gateway, a log from elsewhere).
PROVIDER_TOOL_TYPE = re.compile(
    r"^(?:web_search|web_fetch|code_execution|code_interpreter|file_search|image_generation|tool_search|mcp)(?:\b|_|$)")
# Request fields that make the provider hold state or reach a host the agent names.
PROVIDER_STATE_FIELDS = ("mcp_servers", "container", "previous_response_id", "conversation", "background")

# Prefilter patterns (the RE2/ERE subset of statebox.audits.fastmatch) for lines holding any of it:
# a refusal, a provider tool's block or item type, a request field above. Raw JSON quotes only, so
# the same words inside a prompt or a tool's output (escaped there) never match.
EVIDENCE_TRIGGERS = [
    r'"refused": *"',
    r'"type": *"(server_tool_use|mcp_[a-z_]+|[a-z0-9_]+_tool_use|[a-z0-9_]+_tool_result|container_upload)"',
    r'"type": *"(web_search|web_fetch|code_execution|code_interpreter|file_search|image_generation|tool_search|mcp|url_citation)',
    r'"(mcp_servers|container|previous_response_id|conversation)": *[\[{"]', r'"background": *true',
    # usage.server_tool_use counts (every Claude reply carries them, at 0); any other counter above zero is found
    # from the parsed reply (`reply_billed_server_tools`, asked by the auditor's prefilter of every reply it parses)
    r'"[a-z_]+_requests": *[1-9]',
]
_ITEM_TYPE = re.compile(rb'"type": *"([a-z0-9_]+_call|mcp_[a-z_]+)"')


def has_provider_item(raw: bytes) -> bool:
    """A reply half naming an OpenAI output item of a provider-run tool (too generic for one RE2 pattern:
    `*_call` minus the client's own `function_call`, ...)."""
    return any(True for _ in provider_items_at(raw))


def provider_items_at(raw: bytes) -> Iterator[int]:
    """Where `raw` names an OpenAI output item of a provider-run tool. A match holds no newline, so for
    replies joined by newlines these are the replies' own (the auditor's prefilter reads them so)."""
    return (m.start() for m in _ITEM_TYPE.finditer(raw) if is_provider_tool_item(m.group(1).decode()))


# -- refusals ---------------------------------------------------------------------------

REFUSAL_KINDS = ("server_tool", "mcp", "stateful", "field", "header", "encoding", "budget", "model", "flood", "size",
                 "timeout", "token", "route", "malformed", "other")
_WORD = r"(?<![a-z0-9_])(?:{})(?![a-z0-9_])"
_MCP = re.compile(_WORD.format(r"mcp[a-z0-9_]*|server_url|mcp-[a-z0-9-]+"))
_SERVER_TOOL = re.compile(_WORD.format(
    r"(?:web_search|web_fetch|code_execution|code_interpreter|file_search|image_generation|tool_search)[a-z0-9_]*"
    r"|container|server[ _]tools?|hosted tools?"))
_STATEFUL = re.compile(_WORD.format(r"background|store|previous_response_id|conversation|stateful"))
# `kind` values written by the gateway (and `refused_kind` of a folded-flood line) -> ours
_ALLOWED_LIST = re.compile(r"\(?\ballow(?:ed|s)?\b[^:\n]{0,40}:")
_EXPLICIT = {"server_tool": "server_tool", "tool": "server_tool", "mcp": "mcp", "stateful": "stateful", "field": "field",
             "header": "header", "headers": "malformed", "encoding": "encoding", "budget": "budget", "model": "model",
             "rate": "flood", "connections": "flood", "size": "size", "timeout": "timeout", "incomplete": "timeout",
             "token": "token", "route": "route", "malformed": "malformed", "framing": "malformed", "smuggle": "malformed",
             "body": "malformed", "get_body": "malformed"}


def refusal_kind(record: dict[str, Any]) -> str:
    """What a refusal line refused, one of REFUSAL_KINDS.

    The gateway's own `kind` is trusted for what it names, except that a plain `field` (or no kind)
    naming a server tool, an MCP server or a stateful field is that: those are what a contaminating
    request asks for, however the gateway filed it. Resource limits are read first from an untagged
    line's status and wording, so a model name or a budget text cannot make one look like a tool.
    """
    full = f"{record.get('refused_field') or ''} {record.get('refused') or ''}".strip().lower()
    text = _ALLOWED_LIST.split(full, 1)[0]  # what was refused, not the list of what is allowed
    status = record.get("status")
    explicit = _EXPLICIT.get(str(record.get("kind") or record.get("refused_kind") or "").lower())
    if explicit in ("server_tool", "mcp", "stateful"):
        return explicit
    if explicit not in (None, "field"):
        return explicit
    if explicit is None:
        resource = _resource_kind(full, status)
        if resource:
            return resource
    for kind, rx in (("mcp", _MCP), ("server_tool", _SERVER_TOOL), ("stateful", _STATEFUL)):
        if rx.search(text):
            return kind
    if explicit == "field" or "field" in text:
        return "field"
    if "encoding" in text:
        return "encoding"
    if "header" in text:
        return "header"
    if status == 400 or "malformed" in text or "body" in text:
        return "malformed"
    return "other"


def _resource_kind(text: str, status: Any) -> str | None:
    """The refusals the gateway's own limits make (what an honest agent meets by working), and the plain ones."""
    if "budget" in text or "price" in text or "reached its cap" in text:
        return "budget"
    if "not allowed by the policy" in text or "model_not_allowed" in text:
        return "model"
    if "too many requests" in text or "too many connections" in text:
        return "flood"
    if status == 413 or "over the statebox gateway's limit" in text:
        return "size"
    if status == 408 or "timed out" in text or "timeout" in text:
        return "timeout"
    if status == 401 or "gateway token" in text:
        return "token"
    if status in (404, 405) or "no such endpoint" in text or "is not served" in text:
        return "route"
    if status in (414, 431) or "malformed request" in text or "too many header lines" in text \
            or "transfer-encoding" in text or "bad request target" in text:
        return "malformed"
    return None


def refusal_draft(record: dict[str, Any]) -> EventDraft:
    """A refusal line as a network event: the agent tried, the gateway said no."""
    reason = str(record.get("refused") or "")
    data: dict[str, Any] = {"tool": "gateway", "gateway": "refused", "refusal": refusal_kind(record),
                            "status": record.get("status")}
    for key in ("refused_field", "method", "path", "endpoint", "provider", "model", "folded_before"):
        if record.get(key) not in (None, ""):
            data[key] = record[key]
    return EventDraft(EventKind.network_attempt, clip(reason, 2000), data)


class GatewayNormaliser:
    """Stateful: remembers which prompts and tool results it already emitted."""

    def __init__(self) -> None:
        self._seen: set[Any] = set()  # tuples of ASCII strings, else hex digests (`_first`)
        self._last: dict[str, list[Any]] = {}  # list key -> the items of the last request read
        self._system = ""  # the last system prompt text seen (`_request`)

    def _new_items(self, key: str, items: list[Any]) -> list[Any]:
        """The items from the first one that differs from the last request's item at the same place.

        Why not "what follows the count read before": a client may rewrite history in place (same count, same
        first item, an old tool result edited to hold the answer), and what the model was shown then is in an
        item that count would skip. Compaction (shorter, or another first item) reads from where it differs.
        Reading from too early costs only time: `_first` keeps repeats out.

        Cost: the comparison is C's; items a line shares with the line before (conversation_splice.py) are the
        same objects, so each is an identity check; a line parsed whole is compared item by item, at about the
        cost of having parsed it."""
        before = self._last.get(key)
        self._last[key] = items
        if not before:
            return items
        shared = min(len(before), len(items))
        if items[:shared] == before[:shared]:
            return items[shared:]
        start = next((i for i in range(shared) if items[i] != before[i]), 0)
        return items[start:]

    def _first(self, *parts: Any) -> bool:
        """Whether `parts` (a kind, then what identifies one prompt or tool result) are seen for the first time.

        Parts that are all ASCII strings are their own key (no serialising, no hashing: most tool results);
        anything else is keyed by a hash of its JSON text. The same answer as hashing everything: ASCII
        strings always serialise, equal texts are equal tuples, and a tuple's compact orjson text never
        equals another's `json.dumps` text (that one always holds ", " between parts), so no hash key
        ever stood for an all-ASCII tuple."""
        try:  # one C call for "all ASCII strings": join refuses anything but strings (parsed JSON's are plain str)
            plain = "".join(parts).isascii()
        except TypeError:
            plain = False
        key: Any = parts if plain else hashlib.blake2b(_key(parts), digest_size=12).hexdigest()
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def feed(self, obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]:
        request = _body(obj.get("request"))
        drafts: list[EventDraft] = []
        if isinstance(obj.get("refused"), str):
            drafts.append(refusal_draft(obj))
        drafts.extend(self._request(request))
        drafts.extend(self._provider_request(request))
        return drafts + self.feed_reply(obj)

    def feed_reply(self, obj: dict[str, Any]) -> list[EventDraft]:
        """What a line's reply half says (`feed` without the request: the conversation read so far is left as it
        was, so the next request read adds everything after it)."""
        drafts = self._response(_body(obj.get("response")))
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
            # the same text as the last system prompt was seen then: `_first` would say so, after hashing it again
            if text and text != self._system and self._first("system", text):
                out.append(EventDraft(EventKind.message, clip(text), {"role": "system"}))
            self._system = text
        message = self._chat_or_anthropic_message
        for msg in self._new_items("messages", list_of(req.get("messages"))):
            # an assistant turn adds nothing (it repeats a response already read): half the items, not walked
            if isinstance(msg, dict) and msg.get("role") != "assistant":
                message(msg, out)
        items = req.get("input")
        if isinstance(items, str):
            if self._first("user", items):
                out.append(EventDraft(EventKind.message, clip(items), {"role": "user"}))
        elif isinstance(items, list):
            for item in self._new_items("input", items):
                if isinstance(item, dict):
                    out.extend(self._responses_input(item))
        return out

    def _chat_or_anthropic_message(self, msg: dict[str, Any], out: list[EventDraft]) -> None:
        """Appends to `out` the prompts and tool results of one message seen for the first time."""
        role = msg.get("role", "")
        content = msg.get("content")
        if role in ("user", "system", "developer"):
            if isinstance(content, list):
                first = self._first
                for block in content:
                    if not isinstance(block, dict):
                        continue
                    btype = block.get("type")
                    if btype == "tool_result":
                        call_id = block.get("tool_use_id", "")
                        text = _text_of(block.get("content"))
                        if first("tool_result", call_id, text):
                            out.append(EventDraft(EventKind.tool_output, clip(text),
                                                  {"call_id": call_id, "is_error": bool(block.get("is_error"))}))
                    elif btype in ("text", "input_text"):
                        text = str(block.get("text", ""))
                        if text and first(role, text):
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

    def _responses_input(self, item: dict[str, Any]) -> list[EventDraft]:
        itype = item.get("type", "message" if "role" in item else "")
        if isinstance(itype, str) and itype.endswith("_call_output"):
            # what a client tool returned: function_call_output, and custom_tool_call_output / local_shell_call_output
            # (Codex's apply_patch and local shell), which were read as nothing
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

    def _provider_request(self, req: dict[str, Any]) -> list[EventDraft]:
        """Provider-run tools and provider-held state a served request asked for (once each)."""
        out: list[EventDraft] = []
        tools = req.get("tools")
        for tool in tools if isinstance(tools, list) else []:
            ttype = str(tool.get("type", "")) if isinstance(tool, dict) else ""
            if ttype and PROVIDER_TOOL_TYPE.match(ttype) and self._first("provider_request", ttype, tool.get("server_url", "")):
                shown = {k: tool[k] for k in ("type", "name", "server_label", "server_url") if k in tool}
                out.append(EventDraft(EventKind.network_attempt, clip(json.dumps(shown, ensure_ascii=False)),
                                      {"tool": ttype, "gateway": "provider_request", "field": "tools",
                                       **({"url": str(tool["server_url"])} if tool.get("server_url") else {})}))
        for name in PROVIDER_STATE_FIELDS:
            value = req.get(name)
            if not value or (name == "background" and value is not True):
                continue
            if self._first("provider_request", name, _key(value)):
                out.append(EventDraft(EventKind.network_attempt, clip(f"{name}: {json.dumps(value, ensure_ascii=False)}", 2000),
                                      {"tool": name, "gateway": "provider_request", "field": name}))
        return out

    # -- responses: everything the model said or asked for --
    def _response(self, resp: dict[str, Any]) -> list[EventDraft]:
        out: list[EventDraft] = []
        if isinstance(resp.get("content"), list):  # Anthropic
            for block in resp["content"]:
                if not isinstance(block, dict):
                    continue
                btype = name_at(block, "type")
                if btype == "text":
                    out.append(EventDraft(EventKind.model_text, clip(str(block.get("text", ""))), {"role": "assistant"}))
                elif btype == "thinking":
                    out.append(EventDraft(EventKind.model_text, clip(str(block.get("thinking", ""))), {"thinking": True}))
                elif btype in CLIENT_TOOL_BLOCKS:
                    out.append(_tool_call(str(block.get("name", "")), block.get("input"), block.get("id", "")))
                elif isinstance(btype, str) and is_provider_tool_block(btype):
                    out.append(_provider_tool(btype, block))
        for item in list_of(resp.get("output")):  # OpenAI Responses
            if not isinstance(item, dict):
                continue
            itype = name_at(item, "type")
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
                out.append(_tool_call(text_of(item.get("name", itype)), args, item.get("call_id", "")))
            elif itype in CLIENT_TOOL_ITEMS:  # OpenAI's built-in tools the agent's process runs: shell, apply_patch, computer
                out.append(_builtin_client_call(itype, item))
            elif isinstance(itype, str) and is_provider_tool_item(itype):
                out.append(_provider_tool(itype, item))
        for choice in list_of(resp.get("choices")):  # OpenAI Chat Completions
            message = object_at(choice, "message")
            text = _text_of(message.get("content"))
            if text:
                out.append(EventDraft(EventKind.model_text, clip(text), {"role": "assistant"}))
            for call in list_of(message.get("tool_calls")):
                fn = object_at(call, "function")
                out.append(_tool_call(str(fn.get("name", "")), fn.get("arguments"), call.get("id", "") if isinstance(call, dict) else ""))
            for note in list_of(message.get("annotations")):  # a search model's citations: it searched the web
                if isinstance(note, dict) and note.get("type") == "url_citation":
                    out.append(_provider_tool("url_citation", note.get("url_citation") or note))
        if not any((d.data or {}).get("gateway") == "provider_tool" for d in out):
            used = server_tools_billed(resp)
            if used:  # a reply whose blocks were cut still bills its server tools
                out.append(EventDraft(EventKind.network_attempt, clip(json.dumps(used)),
                                      {"tool": "server_tool_use", "gateway": "provider_tool", "type": "usage.server_tool_use"}))
        return out


def server_tools_billed(resp: dict[str, Any]) -> dict[str, Any]:
    """The counters of a reply's `usage.server_tool_use` above zero: what the provider billed for tools it ran itself
    (any name, any positive number: a count, seconds, a fraction; `_response` makes a provider_tool event of them)."""
    usage = resp.get("usage")
    server_use = usage.get("server_tool_use") if isinstance(usage, dict) else None
    if not isinstance(server_use, dict):
        return {}
    return {k: v for k, v in server_use.items() if isinstance(v, (int, float)) and v > 0}


def reply_billed_server_tools(reply: dict[str, Any]) -> bool:
    """Whether a line's reply half (`reply_half`'s object) bills server tools (`server_tools_billed` of its response)."""
    return bool(server_tools_billed(_body(reply.get("response"))))


def reply_acts(reply: dict[str, Any]) -> bool:
    """Whether a line's reply half (`reply_half`'s object) makes an event of an action kind as `feed_reply` reads
    it (a tool call, a provider-run tool)."""
    return any(d.kind in ACTION_KINDS for d in GatewayNormaliser().feed_reply(reply))


def _provider_tool(btype: str, block: dict[str, Any]) -> EventDraft:
    """A network event for what a provider-run tool left in a reply (its query, URL or server, when it shows one)."""
    inner = block.get("input") if isinstance(block.get("input"), dict) else block.get("action")
    inner = inner if isinstance(inner, dict) else {}
    data: dict[str, Any] = {"tool": str(block.get("name") or block.get("server_label") or btype), "gateway": "provider_tool",
                            "type": btype, "call_id": str(block.get("id") or block.get("tool_use_id") or "")}
    for key in ("url", "query"):
        value = inner.get(key) or block.get(key)
        if isinstance(value, str) and value:
            data[key] = value
    if block.get("server_label"):
        data["server"] = str(block["server_label"])
    shown = {k: v for k, v in block.items() if k in ("type", "name", "server_label", "input", "action", "url", "title",
                                                       "arguments", "status", "tool_use_id")}
    return EventDraft(EventKind.network_attempt, clip(json.dumps(shown, ensure_ascii=False, default=str), 4000), data)


def _builtin_client_call(itype: str, item: dict[str, Any]) -> EventDraft:
    """A call of one of OpenAI's built-in tools that the client runs, read as the call it stands for: `shell_call`'s
    commands as a shell command, `apply_patch_call`'s file and diff, `computer_call`'s action. They were on the client
    allow-list (so no provider-run tool) and read as nothing."""
    call_id = text_of(item.get("call_id", ""))
    action = object_at(item, "action")
    if itype == "shell_call":
        commands = action.get("commands")
        command = "\n".join(str(c) for c in commands) if isinstance(commands, list) else text_of(commands)
        return _tool_call("shell", {"command": command}, call_id)
    if itype == "apply_patch_call":
        operation = object_at(item, "operation")
        return _tool_call("apply_patch", {"path": text_of(operation.get("path")), "diff": text_of(operation.get("diff")),
                                          "operation": text_of(operation.get("type"))}, call_id)
    return _tool_call(itype.removesuffix("_call"), action or {k: v for k, v in item.items() if k != "type"}, call_id)


def _tool_call(name: str, args: Any, call_id: str) -> EventDraft:
    if isinstance(args, str):
        try:
            parsed = json_value(args)
            args = parsed if isinstance(parsed, dict) else {"input": parsed}
        except json.JSONDecodeError:
            args = {"input": args}
    if not isinstance(args, dict):
        args = {"input": args}
    return EventDraft(EventKind.tool_call, clip(_json_text(args)),
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
                elif btype == "document":  # a text file the agent read, inline (the gateway admits it): its text
                    source = block.get("source")
                    if isinstance(source, dict) and source.get("type") == "text":
                        parts.append(str(source.get("data") or ""))
                elif "stdout" in block or "stderr" in block:  # a shell_call_output's output: what each command printed
                    parts.append("\n".join(str(block.get(k) or "") for k in ("stdout", "stderr")))
        return "\n".join(p for p in parts if p)
    return str(content)


def parse_lines(lines: Iterable[str]) -> list[tuple[int, EventDraft]]:
    """Normalise a whole gateway log: (1-based line number, draft)."""
    normaliser = GatewayNormaliser()
    return [draft for n, line in enumerate(lines, start=1) for draft in _line_drafts(n, line, normaliser)]


def _line_drafts(n: int, line: str, normaliser: "GatewayNormaliser") -> list[tuple[int, EventDraft]]:
    """One line's drafts (`parse_json_line`), and where the line is no JSON, what its reply half says.

    Why the reply half: the fast path reads a line kept for its reply from the top-level `response` key to the
    line's end (`top_level_reply`), which parses on its own where the request half before it is broken; the full
    reading took the whole line for an unparsed message and lost the reply's tool calls (a cheat in them passed
    as clean on the reference path, and the two paths disagreed). Read here from the same text both paths decode."""
    drafts = parse_json_line(n, line, normaliser.feed, loads=_line_loads)
    if len(drafts) == 1 and drafts[0][1].data.get("unparsed"):
        raw = line.strip().encode("utf-8", "surrogatepass")
        reply = top_level_reply(raw, memoryview(raw), 0, len(raw))[1]
        if reply is not None:
            drafts.extend((n, draft) for draft in normaliser.feed_reply(reply))
    return drafts


def parse_raw_lines(lines: Iterable[bytes | memoryview]) -> list[tuple[int, EventDraft]]:
    """`parse_lines` over the lines' bytes, without decoding them to text first (`parse_kept_lines` says why
    it is the same answer)."""
    raws = [bytes(raw) for raw in lines]
    data = b"\n".join(raws)
    spans, at = [], 0
    for raw in raws:
        spans.append((at, at + len(raw)))
        at += len(raw) + 1
    return parse_kept_lines(data, spans, lambda n: True)


_BEFORE_KEY = frozenset(b" ,{")  # what may stand right before the `"response"` key `reply_half` reads: never a backslash


def reply_half(data: bytes, view: memoryview, cut: int, end: int) -> dict[str, Any] | None:
    """The line's top-level `response` and the keys after it, as one object, read from `cut` (where the
    line's last `"response"` stands) to its end; None where that is not certain (the caller reads the
    whole line).

    Certain because: the quote at `cut` follows a space, comma or brace, so it is not an escaped quote
    inside a string; in valid JSON an unescaped quote followed by `response"` opens that string, a key
    when a colon follows. `{` + the bytes from a key at nesting depth D to the line's end closes D
    containers after opening one, so it parses as one object exactly when D is 1: a top-level key. The
    last top-level `response` is the one a parser keeps (the last of repeated keys wins). A `"response"`
    nested deeper (a tool's input naming one) or a value fails to parse, and the line is read whole."""
    if cut <= 0 or data[cut - 1] not in _BEFORE_KEY:
        return None
    try:
        obj = _loads(b"".join((b"{", view[cut:end])))
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) and "response" in obj else None


# how many of a line's last `"response"`s are tried as its top-level key (`top_level_reply`): each try parses from
# there to the line's end, and a reply can hold any number of nested ones
REPLY_TRIES = 4


def top_level_reply(data: bytes, view: memoryview, start: int, end: int) -> tuple[int, dict[str, Any] | None]:
    """Where the line [start, end) has its top-level `response` key, and its reply half (`reply_half`) read from
    there; (start, None) where none of its last REPLY_TRIES `"response"`s is certain to be that key.

    Why not the last `"response"` alone: the model writes its tool inputs, and an input holding a `response` key
    put the last one inside the reply, so the bytes before it (the call itself) were not searched for triggers.
    Only a top-level key reads as `reply_half`'s object (a key nested in the request or the reply does not parse
    from there), so the first that does, from the end, is the line's own; past REPLY_TRIES the whole line is the
    reply searched (more than is needed, never less)."""
    hi = end
    for _ in range(REPLY_TRIES):
        at = data.rfind(b'"response"', start, hi)
        if at < 0:
            break
        reply = reply_half(data, view, at, end)
        if reply is not None:
            return at, reply
        hi = at
    return start, None


def _messages_of(obj: Any) -> Any:
    """The request's `messages` list as `GatewayNormaliser.feed` finds it (or whatever stands there)."""
    return _body(obj.get("request")).get("messages") if isinstance(obj, dict) else None


def parse_kept_lines(data: bytes, spans: list[tuple[int, int]], keep: Callable[[int], bool],
                     reply_only: dict[int, dict[str, Any]] | None = None) -> list[tuple[int, EventDraft]]:
    """`parse_lines` over the lines of `data` that `keep` (1-based numbers; the others are never read), from
    their bytes (the auditor's kept gateway lines).

    The same drafts: orjson reads bytes only when they are UTF-8 (text decoded from them is then the same
    characters) and, around the JSON value, only JSON whitespace (space, tab, CR, LF), which `str.strip` would
    have removed (the value starts and ends with a character that is not whitespace). Any line orjson refuses
    as bytes takes `parse_lines`' own steps: decoded with replacement, stripped, parsed or kept unparsed.
    A line that repeats the conversation items of a line read before is parsed without them
    (conversation_splice.py: the same value, or the whole line is parsed).

    `reply_only` (line -> its reply half, `top_level_reply`): of these lines only the reply and the keys after it
    are read, so their request adds no prompt or tool result; those the request re-sends are read from the next
    line parsed whole (the normaliser reads what followed the last request it read)."""
    normaliser = GatewayNormaliser()
    splicer = Splicer(_messages_of)
    view = memoryview(data)
    out: list[tuple[int, EventDraft]] = []
    for n, (start, end) in enumerate(spans, start=1):
        if end == start or not keep(n):
            continue
        reply = reply_only.get(n) if reply_only is not None else None
        if reply is not None:
            out.extend((n, d) for d in normaliser.feed_reply(reply))
            continue
        obj = splicer.read(data, view, start, end)
        if obj is None:
            try:
                obj = _loads(view[start:end])
            except orjson.JSONDecodeError:
                out.extend(_line_drafts(n, str(view[start:end], "utf-8", "replace"), normaliser))
                continue
            splicer.learn(data, start, end)
        if isinstance(obj, dict):
            out.extend((n, d) for d in normaliser.feed(obj, n))
    return out
