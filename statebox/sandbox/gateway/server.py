"""The gateway's server: the only road from an attempt to a model (see the package docstring).

Isolation rule 2: a sandbox has no network and never holds the real API key.
Each attempt gets its own unix socket (bind-mounted into its container at
`/run/statebox/gateway.sock`) and a random token as its "API key". The gateway
checks the token, swaps in the real key from the host environment, enforces the
policy's model allow-list and budgets, relays the request to the upstream
provider (streaming SSE relayed as it arrives) and writes every
request/response pair, redacted, to the attempt's `gateway.jsonl`.

Everything on the socket is hostile until proven otherwise (issue 12):

- Routing is strict (`routes.py`): a request target must be a clean
  origin-form path found in an explicit endpoint table; the upstream URL is built
  from the provider's fixed scheme, host and port (parsed once, at start) plus
  the table's path. The real key therefore only ever goes to that one upstream,
  and budgets and the model allow-list are decided on the endpoint actually called.
- Reading is bounded (`http.py`): the head is read and judged (rate,
  route, token, declared size) before any body byte; bodies stop at the
  policy's cap; slow clients time out; each lease has a cap on concurrent
  connections and on requests per second (`GatewayLimits` in the policy).
- Refusals are logged small: method, endpoint, size and reason, never a body;
  floods (rate and connection refusals) are folded into one line per second.
- What a request may carry is an allow-list (`admission.py`, issue 24): body fields,
  tools, content blocks per endpoint; headers and `anthropic-beta` values per provider
  (the rest dropped, and named in the log); no Content-Encoding; no body on GET/HEAD.
  A body the tables refuse is 400 naming the field, never forwarded.
- Budgets hold at admission (`accounting.reserve`): each generation request reserves its
  worst case (clamping its max-token field to what is left) before it goes upstream, and
  the reply settles it (`accounting.settle`).

One `Gateway` serves a whole run from a background thread running an asyncio
loop; `lease()` opens an attempt's socket, `GatewayLease.close()` shuts it.
Host-side agents (react, video-agent, mllm) reach the same socket through an
httpx unix-socket transport (`statebox/agents/model_clients.py`), so every model
request of every agent kind is logged in one place.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h11
import httpx

from statebox.errors import UserError
from statebox.json_text import json_value, rfc_loads, utf8_json
from statebox.policies.model import Budgets, GatewayLimits
from statebox.sandbox.gateway.accounting import (
    BudgetRefused,
    GatewayLease,
    Reservation,
    _bearer,
    _budget_status,
    input_estimate,
    model_allowed,
    reserve,
    settle,
)
from statebox.sandbox.gateway.admission import (
    ENCODING,
    MAX_OUTPUT_FIELDS,
    Refused,
    check_body,
    check_encoding,
    filter_headers,
    table_for,
)
from statebox.sandbox.gateway.http import (
    BodyIncomplete,
    BodyTooLarge,
    BoundedReader,
    ReadTimeout,
    Sender,
    declared_length,
    has_body,
    write_raw_error,
)
from statebox.sandbox.gateway.log import StreamAssembler, image_payloads, redact_headers, summarise_images
from statebox.sandbox.gateway.routes import Provider, Route, RouteError, UpstreamBase, guess_provider, route
from statebox.sandbox.spec import Mount


CONTAINER_SOCKET_DIR = "/run/statebox"
CONTAINER_SOCKET = f"{CONTAINER_SOCKET_DIR}/gateway.sock"
SOCKET_NAME = "gateway.sock"
DEFAULT_RELAY_PORT = 18080
ANTHROPIC_DEFAULT_URL = "https://api.anthropic.com"
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"

_RESPONSE_DROP = {"content-length", "connection", "keep-alive", "transfer-encoding", "content-encoding"}
_TARGET_SHOWN = 200  # characters of a refused target kept in the log


def error_body(provider: Provider, status: int, kind: str, message: str) -> dict[str, Any]:
    """An error in the provider's own shape, so clients report it as they would the real API's."""
    if provider == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    code = {"insufficient_quota": "insufficient_quota", "model_not_allowed": "model_not_allowed",
            "invalid_api_key": "invalid_api_key", "rate_limit_error": "rate_limit_exceeded",
            "not_found_error": "unknown_url"}.get(kind)
    otype = {"insufficient_quota": "insufficient_quota", "rate_limit_error": "requests"}.get(
        kind, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": otype, "param": None, "code": code}}


@dataclass
class Upstream:
    """Where one provider's requests go, and with which key (None: send none, e.g. a local vLLM)."""

    base_url: str
    api_key: str | None



@dataclass(eq=False)
class InFlight:
    """A request on its way to a model, until its line is written (`GatewayLease._in_flight`).

    Why: the lease's close cancels its handlers and waits for each to log its request, but a cancellation can fail
    to reach a handler in time (one was seen, under load, still waiting in httpx's stream read 2 s later): its
    request reached a model and had no line in the witness log. What the close needs to write that line itself is
    kept here, and `claim` makes sure exactly one of the handler and the close writes it."""

    record: dict[str, Any]
    reservation: Reservation | None
    api: str
    started: float
    status: int | None = None  # the upstream's answer status, once it answered
    assembler: StreamAssembler | None = None
    chunks: list[bytes] = field(default_factory=list)
    written: bool = False

    def answered(self, status: int, assembler: StreamAssembler | None, chunks: list[bytes]) -> None:
        self.status, self.assembler, self.chunks = status, assembler, chunks

    def claim(self, lease: GatewayLease) -> bool:
        """Whether the caller is the one to account and log it (the first to ask; on the gateway's loop thread)."""
        lease._in_flight.discard(self)
        if self.written:
            return False
        self.written = True
        return True

class Gateway:
    """One host server per run; see the module docstring.

    Upstreams come from the arguments, else the host environment (`ANTHROPIC_API_KEY`,
    `ANTHROPIC_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`), else the official APIs.
    Each base URL is parsed once, here, into a fixed scheme, host, port and path prefix
    (a malformed one is a `UserError`). `prices` overrides the USD/Mtok table used for cost
    budgets; `limits` are the per-lease flood limits used when `lease()` is given none.
    """

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        anthropic_base_url: str | None = None,
        openai_base_url: str | None = None,
        anthropic_api_key: str | None = None,
        openai_api_key: str | None = None,
        prices: dict[str, tuple[float, float]] | None = None,
        upstream_timeout_s: float = 600.0,
        limits: GatewayLimits | None = None,
    ) -> None:
        env = os.environ if env is None else env
        self._explicit_base = {
            "anthropic": anthropic_base_url or env.get("ANTHROPIC_BASE_URL") or None,
            "openai": openai_base_url or env.get("OPENAI_BASE_URL") or None,
        }
        self.upstreams: dict[Provider, Upstream] = {
            "anthropic": Upstream(self._explicit_base["anthropic"] or ANTHROPIC_DEFAULT_URL,
                                  anthropic_api_key or env.get("ANTHROPIC_API_KEY") or None),
            "openai": Upstream(self._explicit_base["openai"] or OPENAI_DEFAULT_URL,
                               openai_api_key or env.get("OPENAI_API_KEY") or None),
        }
        self.bases: dict[Provider, UpstreamBase] = {}
        for provider, upstream in self.upstreams.items():
            try:
                self.bases[provider] = UpstreamBase.parse(upstream.base_url)
            except ValueError as exc:
                name = "ANTHROPIC_BASE_URL" if provider == "anthropic" else "OPENAI_BASE_URL"
                raise UserError(f"{name}: {exc}") from None
        self.prices = prices
        self.upstream_timeout_s = upstream_timeout_s
        self.limits = limits or GatewayLimits()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._start_lock = threading.Lock()
        self._leases: list[GatewayLease] = []

    # -- readiness --------------------------------------------------------
    def check_ready(self, provider: Provider) -> None:
        """Raise `UserError` when `provider` can't be reached: no key and no base URL on the host."""
        if self.upstreams[provider].api_key or self._explicit_base[provider]:
            return
        key, url = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL") if provider == "anthropic" else (
            "OPENAI_API_KEY", "OPENAI_BASE_URL")
        raise UserError(f"no {key} on the host (and no {url}): set one to let agents reach a {provider} model")

    # -- life cycle -------------------------------------------------------
    def start(self) -> "Gateway":
        with self._start_lock:
            if self._loop is not None:
                return self
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            self._thread = threading.Thread(target=run, name="statebox-gateway", daemon=True)
            self._thread.start()
            ready.wait()
            self._loop = loop
        return self

    def close(self) -> None:
        """Close every lease, the upstream clients and the loop thread."""
        for lease in list(self._leases):
            lease.close()
        loop = self._loop
        if loop is None:
            return

        async def shutdown() -> None:
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
            await asyncio.sleep(0)
            for client in self._clients.values():
                await client.aclose()
            self._clients.clear()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        loop.close()
        self._loop = None

    stop = close  # the harness says stop()

    def __enter__(self) -> "Gateway":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- leases -----------------------------------------------------------
    def lease(self, attempt_id: str, socket_dir: Path | str, log_path: Path | str,
              budgets: Budgets | None = None, *, limits: GatewayLimits | None = None) -> GatewayLease:
        """Open `socket_dir/gateway.sock` for one attempt (connectable by any uid in a container).

        `limits` (the policy's `gateway:` section) caps body size, connections, request rate
        and slow clients for this lease; default: the gateway's own.
        """
        self.start()
        assert self._loop is not None
        socket_dir = Path(socket_dir)
        socket_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(socket_dir, 0o755)
        lease = GatewayLease(attempt_id=attempt_id, socket_dir=socket_dir, socket_path=socket_dir / SOCKET_NAME,
                             token=f"sbx-{secrets.token_urlsafe(24)}", log_path=Path(log_path),
                             budgets=budgets or Budgets(), limits=limits or self.limits, _gateway=self)
        lease._secrets = self._secrets(lease)
        sock = _bind_unix(lease.socket_path)
        lease.host_socket_path = lease.socket_path
        if len(os.fsencode(str(lease.socket_path))) >= 100:
            # Clients can't connect() to a path over 108 bytes either: give them a short link.
            link = Path(tempfile.gettempdir()) / f"statebox-gw-{secrets.token_hex(6)}.sock"
            link.symlink_to(lease.socket_path)
            lease.host_socket_path = link

        async def open_server() -> asyncio.AbstractServer:
            return await asyncio.start_unix_server(
                lambda r, w: self._serve_connection(lease, r, w), sock=sock, limit=2**16)

        lease._server = asyncio.run_coroutine_threadsafe(open_server(), self._loop).result(timeout=10)
        self._leases.append(lease)
        return lease

    def _close_server(self, server: asyncio.AbstractServer) -> None:
        if self._loop is None or self._loop.is_closed():
            return

        lease = next((l for l in self._leases if l._server is server), None)

        async def close() -> None:
            server.close()
            if lease is not None:
                await self._cut_requests(lease)
            try:
                await asyncio.wait_for(server.wait_closed(), timeout=2)
            except asyncio.TimeoutError:
                pass

        try:
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
        except Exception:  # noqa: BLE001 - closing is best effort; the socket file goes anyway
            pass
        self._leases = [l for l in self._leases if l._server is not server]

    async def _cut_requests(self, lease: GatewayLease) -> None:
        """Cancel the lease's connections, each handler logging its request on the way out (`_forward`), and log
        here any request whose handler the cancellation did not reach in time: under load one was seen still
        waiting in httpx's stream read 2 s later (the cancel swallowed below it), and its request, which reached a
        model, had no line. Written from what had come; the handler, if it ever wakes, writes no second line."""
        tasks = list(lease._connections)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        for flight in list(lease._in_flight):
            self._log_cut(lease, flight, "the lease closed mid-reply (the attempt ended): the response is what had "
                                         "come (its handler did not end in time)")

    # -- HTTP serving -----------------------------------------------------
    async def _serve_connection(self, lease: GatewayLease, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        limits = lease.limits
        if len(lease._connections) >= limits.max_connections:
            message = f"too many connections to the statebox gateway (limit {limits.max_connections})"
            lease.log_refusal("connections", self._refusal_record(lease, status=429, reason=message), fold=True)
            await write_raw_error(writer, 429, error_body("anthropic", 429, "rate_limit_error", message),
                                  [("retry-after", "1")])
            return
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.max_header_kb * 1024)
        read = BoundedReader(conn, reader, request_timeout_s=limits.request_timeout_s,
                             idle_timeout_s=limits.idle_timeout_s)
        task = asyncio.current_task()
        lease._connections.add(task)
        try:
            while True:
                try:
                    request = await read.head()
                except h11.RemoteProtocolError as exc:
                    await self._refuse_unparsed(lease, conn, writer, exc, read.bytes_in)
                    break
                except ReadTimeout as exc:
                    if exc.received:  # a half-sent head (slow loris); a quiet keep-alive connection just closes
                        lease.log_refusal("timeout", self._refusal_record(
                            lease, status=408, reason=exc.reason, size=exc.received),
                            fold=not lease.take_request_slot())
                        await _try_send(Sender(conn, writer), 408, error_body(
                            "anthropic", 408, "invalid_request_error", exc.reason))
                    break
                if request is None:
                    break
                try:
                    await self._handle(lease, conn, writer, request, read)
                except (ConnectionError, asyncio.CancelledError):
                    raise
                except Exception as exc:  # noqa: BLE001 - a gateway bug must answer, not hang the client
                    self._log_internal_error(lease, request, exc)
                    await _answer_internal_error(conn, writer, request, exc)
                    break
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    break
                try:
                    conn.start_next_cycle()
                except h11.LocalProtocolError:
                    break
        except (ConnectionError, h11.RemoteProtocolError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            lease._connections.discard(task)
            try:
                writer.close()
            except Exception:  # noqa: BLE001
                pass

    async def _refuse_unparsed(self, lease: GatewayLease, conn: h11.Connection, writer: asyncio.StreamWriter,
                               exc: h11.RemoteProtocolError, received: int) -> None:
        """A head h11 would not parse (bad request line, two Host headers, head over the cap, ...)."""
        status = exc.error_status_hint if exc.error_status_hint in (400, 413, 414, 431, 501) else 400
        reason = f"malformed request: {str(exc)[:_TARGET_SHOWN]}"
        # A head never reaches the rate check in _handle, so it is charged here: in full while under
        # the rate, folded once over it (a flood of garbage then costs a line a second).
        lease.log_refusal("malformed", self._refusal_record(lease, status=status, reason=reason, size=received),
                          fold=not lease.take_request_slot())
        await _try_send(Sender(conn, writer), status, error_body("anthropic", status, "invalid_request_error", reason))

    def _refusal_record(self, lease: GatewayLease, *, status: int, reason: str | None, method: str | None = None,
                        target: bytes | None = None, r: Route | None = None, size: int | None = None,
                        declared: int | None = None, **extra: Any) -> dict[str, Any]:
        """What a refused request leaves in gateway.jsonl: never its body, never its headers. `reason` None: no rule
        refused it (a request the gateway failed on), so the record has no `refused`."""
        record: dict[str, Any] = {"time": round(time.time(), 3), "attempt_id": lease.attempt_id}
        if method is not None:
            record["method"] = method[:16]
        if target is not None:
            shown = target[:_TARGET_SHOWN].decode("latin-1")
            record["path"] = shown + (f"...(+{len(target) - _TARGET_SHOWN} bytes)" if len(target) > _TARGET_SHOWN else "")
        record["endpoint"] = r.endpoint.path if r else None
        if r:
            record["provider"] = r.provider
        record["status"] = status
        if reason is not None:
            record["refused"] = reason
        if declared is not None:
            record["content_length"] = declared
        if size is not None:
            record["bytes_read"] = size
        record.update(extra)
        return record

    def _log_internal_error(self, lease: GatewayLease, request: h11.Request, exc: Exception) -> None:
        """A request the gateway failed on (a bug, or input nobody foresaw) still leaves a line in gateway.jsonl.

        Why: the 500 it answered was the only trace; a body the gateway could not read (an integer of 5,000 digits,
        an unpaired surrogate) left no line at all, so the log, the auditor's independent witness, was silent about
        a request the agent sent. Never raises: the client is answered after it."""
        try:
            record = self._refusal_record(lease, status=500, reason=None, method=request.method.decode("latin-1"),
                                          target=bytes(request.target))
            record["error"] = f"statebox gateway error: {type(exc).__name__}: {exc}"[:1000]
            lease.write_log(record, lease._secrets)
        except Exception:  # noqa: BLE001 - the answer must still go out
            pass

    async def _handle(self, lease: GatewayLease, conn: h11.Connection, writer: asyncio.StreamWriter,
                      request: h11.Request, read: BoundedReader) -> None:
        started = time.time()
        method = request.method.decode("latin-1")
        target = bytes(request.target)
        headers: dict[str, str] = {}
        for k, v in request.headers:
            name = k.decode("latin-1").lower()
            headers[name] = v.decode("latin-1") if name not in headers else headers[name] + ", " + v.decode("latin-1")
        send = Sender(conn, writer, method, write_timeout_s=lease.limits.idle_timeout_s)
        declared = declared_length(headers)
        close = [("connection", "close")]  # a refused request's body is never read, so its connection ends

        async def refuse(kind: str, status: int, etype: str, reason: str, provider: Provider, r: Route | None = None,
                         fold: bool = False, extra: list[tuple[str, str]] | None = None, **more: Any) -> None:
            lease.log_refusal(kind, self._refusal_record(lease, status=status, reason=reason, method=method,
                                                         target=target, r=r, declared=declared, **more), fold=fold)
            await send.json(status, error_body(provider, status, etype, reason), extra=close + (extra or []))

        if not lease.take_request_slot():
            await refuse("rate", 429, "rate_limit_error", "too many requests to the statebox gateway "
                         f"(limit {lease.limits.max_requests_per_s:g}/s)", guess_provider(target, headers),
                         fold=True, extra=[("retry-after", "1")])
            return
        if len(request.headers) > lease.limits.max_headers:
            await refuse("headers", 431, "invalid_request_error",
                         f"too many header lines ({len(request.headers)}, limit {lease.limits.max_headers})",
                         guess_provider(target, headers))
            return
        if "transfer-encoding" in headers and "content-length" in headers:
            await refuse("framing", 400, "invalid_request_error", "both Transfer-Encoding and Content-Length",
                         guess_provider(target, headers))
            return
        try:
            r = route(method, target, headers)
        except RouteError as exc:
            await refuse("route", exc.status, exc.kind, exc.reason, guess_provider(target, headers))
            return
        provider = r.provider

        if method in ("GET", "HEAD") and has_body(headers):
            # An upstream that ignores GET bodies would read this one as a second request,
            # judged by nobody (request smuggling): refused before a byte of it is read.
            await refuse("framing", 400, "invalid_request_error",
                         f"statebox gateway: body: a {method} request carries no body", provider, r)
            return
        if r.endpoint.local:  # a liveness probe: answered here
            await read.body(0, None)  # h11's EndOfMessage, already there
            await send.json(200, {"ok": True, "server": "statebox gateway"})
            return

        token = headers.get("x-api-key") or _bearer(headers.get("authorization"))
        if token != lease.token:
            await refuse("token", 401, "authentication_error" if provider == "anthropic" else "invalid_api_key",
                         "invalid statebox gateway token", provider, r)
            return
        try:
            check_encoding(headers)
        except Refused as exc:
            await refuse(ENCODING, 400, "invalid_request_error", exc.message, provider, r, refused_field=exc.field)
            return
        cap = int(lease.limits.max_body_mb * 1024 * 1024)
        if declared is not None and declared > cap:
            await refuse("size", 413, "request_too_large", f"request body of {declared} bytes is over the "
                         f"statebox gateway's limit of {cap} bytes", provider, r)
            return
        try:
            await send.continue_100()
            body = await read.body(cap, declared)
        except BodyTooLarge as exc:
            await refuse("size", 413, "request_too_large", f"request body over the statebox gateway's limit of "
                         f"{cap} bytes (stopped reading at {exc.received})", provider, r, size=exc.received)
            return
        except ReadTimeout as exc:
            await refuse("timeout", 408, "invalid_request_error", exc.reason, provider, r, size=exc.received)
            return
        except BodyIncomplete as exc:
            lease.log_refusal("incomplete", self._refusal_record(lease, status=400, reason=exc.reason, method=method,
                                                                 target=target, r=r, declared=declared,
                                                                 size=exc.received))
            await _try_send(send, 400, error_body(provider, 400, "invalid_request_error", exc.reason))
            return

        api = r.api
        record: dict[str, Any] = {"time": round(started, 3), "attempt_id": lease.attempt_id, "method": method,
                                  "path": target.decode("ascii"), "endpoint": r.endpoint.path, "provider": provider,
                                  "api": api, "request_headers": redact_headers(headers)}
        parsed: Any = None
        table = table_for(api, r.endpoint.path) if method == "POST" else None
        if table is not None:
            try:
                parsed = rfc_loads(body)  # NaN, Infinity and 1e999 are no JSON: never forwarded re-serialised
            except (ValueError, RecursionError):  # not JSON, not UTF-8, too deep, or an integer past Python's
                parsed = None  # 4,300 digits (a ValueError of its own, which answered 500 and logged nothing)
            try:
                check_body(table, parsed)
            except Refused as exc:
                record["model"] = parsed.get("model") if isinstance(parsed, dict) else None
                await self._refuse(lease, send, record, provider, 400, "invalid_request_error", exc.message, body,
                                   kind=exc.kind, field=exc.field)
                return
        model = parsed.get("model") if isinstance(parsed, dict) else None
        model = model if isinstance(model, str) else ""
        record["model"] = model
        reservation: Reservation | None = None
        if api is not None:
            if not model:
                await self._refuse(lease, send, record, provider, 400, "invalid_request_error",
                                   "statebox gateway: model: a model request needs a model", body, kind="field",
                                   field="model")
                return
            if lease.exceeded:
                await self._refuse(lease, send, record, provider, *_budget_status(provider), lease.exceeded, body)
                return
            if not model_allowed(model, lease.budgets):
                lease.exceeded = (f"model {model!r} is not allowed by the policy "
                                  f"(allowed: {', '.join(lease.budgets.models)})")
                await self._refuse(lease, send, record, provider, 403,
                                   "permission_error" if provider == "anthropic" else "model_not_allowed",
                                   lease.exceeded, body, kind="model")
                return
            try:
                reservation = self._admit(lease, api, model, parsed, body, record)
            except BudgetRefused as exc:
                await self._refuse(lease, send, record, provider, *_budget_status(provider), exc.message, body)
                return
        elif model and not model_allowed(model, lease.budgets):
            # Counting tokens is free, but a model outside the allow-list is still not the agent's to name.
            await self._refuse(lease, send, record, provider, 403,
                               "permission_error" if provider == "anthropic" else "model_not_allowed",
                               f"model {model!r} is not allowed by the policy", body, kind="model")
            return
        try:  # from here to the flight's start a failure must not hold the reservation: nothing reached a model
            if table is not None:
                # Forward exactly what was judged: a re-serialised body, so a parser difference upstream
                # (say, a repeated "model" key) cannot make it read another model than the one allowed.
                body = utf8_json(parsed)  # an unpaired surrogate the client sent goes on escaped, as it came

            stream = isinstance(parsed, dict) and bool(parsed.get("stream"))
            if api == "chat" and stream and isinstance(parsed, dict):
                # Ask for the usage chunk, or streamed chat replies could not be budgeted.
                options = dict(parsed.get("stream_options") or {})
                if not options.get("include_usage"):
                    options["include_usage"] = True
                    parsed["stream_options"] = options
                    body = json.dumps(parsed).encode()
            record["request"] = summarise_images(parsed) if parsed is not None else body.decode("utf-8", "replace")
            record["stream"] = stream

            upstream = self.upstreams[provider]
            base = self.bases[provider]
            url = base.url(r)
            out_headers, dropped = filter_headers(provider, headers)
            if dropped:
                record["dropped_headers"] = dropped[:50]
            out_headers["host"] = base.host_header
            out_headers["accept-encoding"] = "identity"
            if upstream.api_key:
                if provider == "anthropic":
                    out_headers["x-api-key"] = upstream.api_key
                else:
                    out_headers["authorization"] = f"Bearer {upstream.api_key}"
            client = self._client_for(upstream.base_url, base)
            flight = InFlight(record, reservation, api or "", started)
            lease._in_flight.add(flight)
        except Exception:
            if reservation is not None:
                settle(lease, api or "", reservation, None, record, complete=True, status=500)
            raise  # answered 500 and logged by `_serve_connection`
        try:
            up_request = client.build_request(method, url, headers=out_headers,
                                              content=body if method == "POST" else None)
            response = await client.send(up_request, stream=True, follow_redirects=False)
        except (httpx.HTTPError, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError):  # the lease closed (the attempt ended) before an answer:
                self._log_cut(lease, flight, "the lease closed before the upstream answered (the attempt ended)")
                raise  # (the request is still logged)
            if not flight.claim(lease):
                return  # its line was written when the lease closed
            if reservation is not None:  # nothing reached a model: the reservation is released unspent
                settle(lease, api or "", reservation, None, record, complete=True, status=502)
            message = f"statebox gateway could not reach the {provider} upstream: {type(exc).__name__}"
            record.update(status=502, error=f"{message}: {exc}", duration_s=round(time.time() - started, 3))
            lease.write_log(record, lease._secrets)
            await send.json(502, error_body(provider, 502, "api_error", message))
            return

        record["status"] = response.status_code
        reply_headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _RESPONSE_DROP]
        is_sse = "text/event-stream" in response.headers.get("content-type", "")
        assembler = StreamAssembler(api) if (is_sse and api) else None
        chunks: list[bytes] = []
        flight.answered(response.status_code, assembler, chunks)
        # From the stream's own end marker on (`[DONE]`, `message_stop`, `response.completed`) the bytes are held
        # back until the record is accounted and logged: a client stops reading at the marker, not at the end of
        # the HTTP response, and one that has its answer must find the usage and the log line already there
        held: list[bytes] = []
        client_gone = False
        try:
            await send.start(response.status_code, reply_headers)
            async for chunk in response.aiter_bytes():
                if assembler is not None:
                    assembler.feed(chunk)
                    if assembler.finished:
                        held.append(chunk)
                        continue
                else:
                    chunks.append(chunk)
                try:
                    await send.data(chunk)
                except (ConnectionError, RuntimeError):
                    client_gone = True
                    break
        except httpx.HTTPError as exc:
            record["error"] = f"upstream stream broke: {type(exc).__name__}: {exc}"
            client_gone = True
        except ConnectionError:
            client_gone = True
        except Exception as exc:  # noqa: BLE001 - anything else (a reply h11 will not relay, an event the reader
            # cannot read): the reply is cut for the client, but the request reached a model, so it is still
            # settled and logged below, never left to hold its reservation with no line in the log
            record["error"] = f"statebox gateway could not relay the reply: {type(exc).__name__}: {exc}"
            client_gone = True
        except asyncio.CancelledError:  # the lease closed mid-reply (the attempt ended): charge the worst case,
            # log the request and what came of its reply, then stop
            self._log_cut(lease, flight, "the lease closed mid-reply (the attempt ended): the response is what had come")
            raise
        finally:
            await response.aclose()
        if not flight.claim(lease):  # its line was written when the lease closed: nothing more to account or relay
            send.abort()
            return
        # Account and log before the reply's last bytes go out: a client that has its answer
        # must find the usage, `exceeded` and the log line already there.
        if client_gone:
            record["client_disconnected"] = True
        self._finish_record(lease, api, reservation, record, assembler, chunks, response.status_code, started,
                            complete=not client_gone)
        if client_gone:
            send.abort()
            return
        try:
            for chunk in held:
                await send.data(chunk)
            await send.end()
        except (ConnectionError, RuntimeError):  # gone after its record was written: nothing left to account
            send.abort()

    def _log_cut(self, lease: GatewayLease, flight: "InFlight", error: str) -> None:
        """Write the line of a request the lease's close cut (once, whoever gets there first: its handler or the
        close): unanswered, its reservation is released unspent; answered, the worst case is charged and the reply
        is what had come."""
        if not flight.claim(lease):
            return
        record = flight.record
        if flight.status is None:
            if flight.reservation is not None:
                settle(lease, flight.api, flight.reservation, None, record, complete=True, status=502)
        else:
            if flight.reservation is not None:
                settle(lease, flight.api, flight.reservation, None, record, complete=False, status=flight.status)
            record["response"] = summarise_images(self._reply_of(flight.assembler, flight.chunks, record))
        record.update(error=error, cancelled=True, duration_s=round(time.time() - flight.started, 3))
        lease.write_log(record, lease._secrets)

    @staticmethod
    def _reply_of(assembler: StreamAssembler | None, chunks: list[bytes], record: dict[str, Any]) -> Any:
        """The reply as far as it came: a stream assembled (its event count and error noted in `record`), a body
        parsed as JSON, else its text (cut)."""
        if assembler is not None:
            record["sse_events"] = assembler.events
            if assembler.error is not None:
                record["error"] = assembler.error
            return assembler.result()
        raw = b"".join(chunks)
        try:
            return json_value(raw) if raw else None
        except ValueError:  # not JSON, not UTF-8, too deep or an integer too long (`json_text`): kept as text
            return raw.decode("utf-8", "replace")[:10000]

    def _finish_record(self, lease: GatewayLease, api: str | None, reservation: Reservation | None,
                       record: dict[str, Any], assembler: StreamAssembler | None, chunks: list[bytes], status: int,
                       started: float, *, complete: bool) -> None:
        reply = self._reply_of(assembler, chunks, record)
        record["response"] = summarise_images(reply)
        if api is not None and reservation is not None:
            broken = assembler is not None and (assembler.error is not None or not assembler.finished)
            settle(lease, api, reservation, reply, record, complete=complete and not broken, status=status)
        record["duration_s"] = round(time.time() - started, 3)
        lease.write_log(record, lease._secrets)

    async def _refuse(self, lease: GatewayLease, send: Sender, record: dict[str, Any], provider: Provider,
                      status: int, etype: str, message: str, body: bytes, *, kind: str = "budget",
                      field: str | None = None) -> None:
        """Refuse an authenticated model request (body allow-list, model, budget): logged with its size, not its body.

        `kind` (`refused_kind` in the log) says which rule refused it; `field` the JSON path refused.
        """
        payload = error_body(provider, status, etype, message)
        record.pop("request_headers", None)
        record.update(status=status, refused=message, refused_kind=kind, request_bytes=len(body), response=payload)
        if field is not None:
            record["refused_field"] = field
        lease.log_refusal(kind, record)
        await send.json(status, payload, extra=[("x-should-retry", "false")])

    def _admit(self, lease: GatewayLease, api: str, model: str, parsed: dict[str, Any], body: bytes,
               record: dict[str, Any]) -> Reservation:
        """Reserve a generation request's worst case; clamp (rewrite) its max-token field to what is left."""
        images, image_bytes = image_payloads(parsed)
        estimate = input_estimate(max(0, len(body) - image_bytes), images)
        names = MAX_OUTPUT_FIELDS[api]
        present = next((n for n in names if n in parsed), None)
        requested = parsed.get(present) if present else None
        reservation, cap = reserve(lease, model, estimate, requested, self.prices)
        if cap is not None and cap != requested:
            field = present or names[0]
            parsed[field] = cap
            record["clamped"] = {"field": field, "requested": requested, "cap": cap}
            thinking = parsed.get("thinking") if api == "anthropic" else None
            if isinstance(thinking, dict) and isinstance(thinking.get("budget_tokens"), int) \
                    and thinking["budget_tokens"] >= cap:
                thinking["budget_tokens"] = max(0, cap - 1)  # Anthropic wants budget_tokens < max_tokens
        record["reserved"] = {"input_tokens": reservation.input_tokens, "output_tokens": reservation.output_tokens}
        return reservation

    def _secrets(self, lease: GatewayLease) -> list[str]:
        return [u.api_key for u in self.upstreams.values() if u.api_key] + [lease.token]

    def _client_for(self, base_url: str, base: UpstreamBase) -> httpx.AsyncClient:
        client = self._clients.get(base_url)
        if client is None:
            loopback = base.host in ("localhost", "127.0.0.1", "::1")
            client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.upstream_timeout_s, connect=30.0),
                trust_env=not loopback,  # a host proxy must never capture a local upstream
                follow_redirects=False,  # a redirect would carry the key to wherever it points
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
            )
            self._clients[base_url] = client
        return client


# ---------------------------------------------------------------------------
# Helpers: sockets, headers
# ---------------------------------------------------------------------------


def _bind_unix(path: Path) -> socket.socket:
    """A listening unix socket at `path`, mode 0666 (uid 1000 in a container must connect).

    Paths longer than the kernel's 108-byte limit are bound through `/proc/self/fd/N/`,
    so deep attempt folders still work.
    """
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if len(os.fsencode(str(path))) < 100:
        sock.bind(str(path))
    else:
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            sock.bind(f"/proc/self/fd/{dir_fd}/{path.name}")
        finally:
            os.close(dir_fd)
    os.chmod(path, 0o666)
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def _try_send(send: Sender, status: int, payload: Any) -> None:
    """Best effort: answer a broken or timed-out request (the client may be gone, or h11 past replying)."""
    if send.conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
        return
    try:
        await asyncio.wait_for(send.json(status, payload, extra=[("connection", "close")]), 5)
    except (ConnectionError, h11.LocalProtocolError, RuntimeError, asyncio.TimeoutError):
        pass


async def _answer_internal_error(conn: h11.Connection, writer: asyncio.StreamWriter, request: h11.Request,
                                 exc: Exception) -> None:
    provider = guess_provider(bytes(request.target))
    message = f"statebox gateway error: {type(exc).__name__}"
    if conn.our_state is h11.SEND_RESPONSE:
        try:
            await Sender(conn, writer, request.method.decode("latin-1")).json(
                500, error_body(provider, 500, "api_error", message), extra=[("connection", "close")])
        except Exception:  # noqa: BLE001
            pass


# ---------------------------------------------------------------------------
# What agents use: container environment, mounts, host-side clients
# ---------------------------------------------------------------------------


def container_env(lease: GatewayLease, provider: Provider, relay_port: int = DEFAULT_RELAY_PORT) -> dict[str, str]:
    """Environment variables that point a client inside the container at this lease.

    Anthropic clients (Claude Code) talk to the socket directly; OpenAI clients go through
    `statebox-relay --port relay_port` (start it in the container first). Both sets are
    returned for `provider="both"`-style needs by calling twice and merging.
    """
    if provider == "anthropic":
        return {
            "ANTHROPIC_UNIX_SOCKET": CONTAINER_SOCKET,
            "ANTHROPIC_BASE_URL": "http://localhost",
            "ANTHROPIC_API_KEY": lease.token,
        }
    return {
        "OPENAI_BASE_URL": f"http://127.0.0.1:{relay_port}/v1",
        "OPENAI_API_KEY": lease.token,
        "STATEBOX_GATEWAY_SOCKET": CONTAINER_SOCKET,
        "STATEBOX_RELAY_PORT": str(relay_port),
    }


def relay_command(relay_port: int = DEFAULT_RELAY_PORT) -> str:
    """Shell snippet that starts the relay in the background and returns once it listens."""
    return f"statebox-relay --port {relay_port} --socket {CONTAINER_SOCKET} --background"


def socket_mount(lease: GatewayLease) -> Mount:
    """The bind mount that puts the lease's socket at `/run/statebox/gateway.sock` in a container."""
    return Mount(source=lease.socket_dir, target=CONTAINER_SOCKET_DIR, read_only=True)


def socket_is_connectable_by_others(path: Path) -> bool:
    """True when the socket's mode lets any uid connect (what a container's non-root user needs)."""
    mode = os.stat(path).st_mode
    return stat.S_ISSOCK(mode) and bool(mode & stat.S_IWOTH)
