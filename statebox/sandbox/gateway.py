"""The host-side model gateway: the only road from an attempt to a model.

Isolation rule 2: a sandbox has no network and never holds the real API key.
Each attempt gets its own unix socket (bind-mounted into its container at
`/run/statebox/gateway.sock`) and a random token as its "API key". The gateway
checks the token, swaps in the real key from the host environment, enforces the
policy's model allow-list and budgets, relays the request to the upstream
provider (streaming SSE relayed as it arrives) and writes every
request/response pair, redacted, to the attempt's `gateway.jsonl`.

One `Gateway` serves a whole run from a background thread running an asyncio
loop; `lease()` opens an attempt's socket, `GatewayLease.close()` shuts it.
Host-side agents (react, video-agent, mllm) reach the same socket through an
httpx unix-socket transport (`host_http_client`), so every model request of
every agent kind is logged in one place.
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
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import h11
import httpx

from statebox.errors import UserError
from statebox.policies.model import Budgets
from statebox.sandbox import gateway_budget as budget
from statebox.sandbox.gateway_log import (
    StreamAssembler,
    redact_headers,
    redact_text,
    summarise_images,
    usage_of,
)
from statebox.schema import Usage

if TYPE_CHECKING:  # pragma: no cover
    from statebox.sandbox.docker import Mount

Provider = Literal["anthropic", "openai"]

CONTAINER_SOCKET_DIR = "/run/statebox"
CONTAINER_SOCKET = f"{CONTAINER_SOCKET_DIR}/gateway.sock"
SOCKET_NAME = "gateway.sock"
DEFAULT_RELAY_PORT = 18080
ANTHROPIC_DEFAULT_URL = "https://api.anthropic.com"
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"

# Headers that describe one hop, or that the gateway rewrites itself.
_HOP_HEADERS = {
    "host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
    "proxy-connection", "accept-encoding", "x-api-key", "authorization", "api-key",
}
_RESPONSE_DROP = {"content-length", "connection", "keep-alive", "transfer-encoding", "content-encoding"}


def provider_for_model(model: str) -> Provider:
    """Which provider serves a model name (claude-* -> anthropic, everything else -> openai)."""
    return "anthropic" if model.lower().startswith(("claude", "anthropic")) else "openai"


def _api_of(path: str, headers: Mapping[str, str] | None = None) -> tuple[Provider, str | None]:
    """(provider, api) for a request path; api None for non-generation endpoints.

    Paths shared by both providers (`/v1/models`, ...) go where the client's headers
    point: Anthropic clients send `anthropic-version` / `x-api-key`.
    """
    if path.startswith("/v1/messages"):
        return "anthropic", (None if path.rstrip("/").endswith("count_tokens") else "anthropic")
    if path.startswith("/v1/complete"):
        return "anthropic", None
    if path.rstrip("/").endswith("/responses"):
        return "openai", "responses"
    if path.rstrip("/").endswith("/chat/completions"):
        return "openai", "chat"
    if headers and ("anthropic-version" in headers or "x-api-key" in headers):
        return "anthropic", None
    return "openai", None


def error_body(provider: Provider, status: int, kind: str, message: str) -> dict[str, Any]:
    """An error in the provider's own shape, so clients report it as they would the real API's."""
    if provider == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    code = {"insufficient_quota": "insufficient_quota", "model_not_allowed": "model_not_allowed",
            "invalid_api_key": "invalid_api_key"}.get(kind)
    otype = "insufficient_quota" if kind == "insufficient_quota" else (
        "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": otype, "param": None, "code": code}}


@dataclass
class Upstream:
    """Where one provider's requests go, and with which key (None: send none, e.g. a local vLLM)."""

    base_url: str
    api_key: str | None


@dataclass
class GatewayLease:
    """One attempt's door to the gateway. `exceeded` says why model access was cut off (None: it was not)."""

    attempt_id: str
    socket_dir: Path
    socket_path: Path
    token: str
    log_path: Path
    budgets: Budgets
    usage: Usage = field(default_factory=Usage)
    exceeded: str | None = None
    requests_logged: int = 0
    host_socket_path: Path | None = None  # what host-side clients connect to (a short link when the path is long)
    _gateway: "Gateway | None" = field(default=None, repr=False)
    _server: Any = field(default=None, repr=False)
    _log_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _connections: set = field(default_factory=set, repr=False)

    def close(self) -> None:
        """Stop accepting connections and remove the socket (idempotent)."""
        if self._gateway is not None and self._server is not None:
            self._gateway._close_server(self._server)
            self._server = None
        for path in {self.socket_path, self.host_socket_path or self.socket_path}:
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def __enter__(self) -> "GatewayLease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write_log(self, record: dict[str, Any], secrets_: list[str]) -> None:
        line = redact_text(json.dumps(record, ensure_ascii=False, default=str), secrets_)
        with self._log_lock:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
            self.requests_logged += 1


class Gateway:
    """One host server per run; see the module docstring.

    Upstreams come from the arguments, else the host environment (`ANTHROPIC_API_KEY`,
    `ANTHROPIC_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`), else the official APIs.
    `prices` overrides the USD/Mtok table used for cost budgets.
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
        self.prices = prices
        self.upstream_timeout_s = upstream_timeout_s
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
              budgets: Budgets | None = None) -> GatewayLease:
        """Open `socket_dir/gateway.sock` for one attempt (connectable by any uid in a container)."""
        self.start()
        assert self._loop is not None
        socket_dir = Path(socket_dir)
        socket_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(socket_dir, 0o755)
        lease = GatewayLease(attempt_id=attempt_id, socket_dir=socket_dir, socket_path=socket_dir / SOCKET_NAME,
                             token=f"sbx-{secrets.token_urlsafe(24)}", log_path=Path(log_path),
                             budgets=budgets or Budgets(), _gateway=self)
        sock = _bind_unix(lease.socket_path)
        lease.host_socket_path = lease.socket_path
        if len(os.fsencode(str(lease.socket_path))) >= 100:
            # Clients can't connect() to a path over 108 bytes either: give them a short link.
            link = Path(tempfile.gettempdir()) / f"statebox-gw-{secrets.token_hex(6)}.sock"
            link.symlink_to(lease.socket_path)
            lease.host_socket_path = link

        async def open_server() -> asyncio.AbstractServer:
            return await asyncio.start_unix_server(
                lambda r, w: self._serve_connection(lease, r, w), sock=sock, limit=2**20)

        lease._server = asyncio.run_coroutine_threadsafe(open_server(), self._loop).result(timeout=10)
        self._leases.append(lease)
        return lease

    def _close_server(self, server: asyncio.AbstractServer) -> None:
        if self._loop is None or self._loop.is_closed():
            return

        lease = next((l for l in self._leases if l._server is server), None)

        async def close() -> None:
            server.close()
            for task in list(lease._connections if lease else ()):
                task.cancel()
            try:
                await asyncio.wait_for(server.wait_closed(), timeout=2)
            except asyncio.TimeoutError:
                pass

        try:
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
        except Exception:  # noqa: BLE001 - closing is best effort; the socket file goes anyway
            pass
        self._leases = [l for l in self._leases if l._server is not server]

    # -- HTTP serving -----------------------------------------------------
    async def _serve_connection(self, lease: GatewayLease, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=2**20)
        task = asyncio.current_task()
        lease._connections.add(task)
        try:
            while True:
                request, body = await _read_request(conn, reader)
                if request is None:
                    break
                try:
                    await self._handle(lease, conn, writer, request, body)
                except (ConnectionError, asyncio.CancelledError):
                    raise
                except Exception as exc:  # noqa: BLE001 - a gateway bug must answer, not hang the client
                    await _answer_internal_error(conn, writer, request, exc)
                    break
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
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

    async def _handle(self, lease: GatewayLease, conn: h11.Connection, writer: asyncio.StreamWriter,
                      request: h11.Request, body: bytes) -> None:
        started = time.time()
        method = request.method.decode()
        target = request.target.decode()
        path = urlsplit(target).path or "/"
        headers = {k.decode().lower(): v.decode("latin-1") for k, v in request.headers}
        provider, api = _api_of(path, headers)
        record: dict[str, Any] = {"time": round(started, 3), "attempt_id": lease.attempt_id, "method": method,
                                  "path": target, "provider": provider, "api": api,
                                  "request_headers": redact_headers(headers)}
        send = _Sender(conn, writer, method)

        if path in ("/", "") and method in ("HEAD", "GET"):
            await send.json(200, {"ok": True, "server": "statebox gateway"})
            return

        token = headers.get("x-api-key") or _bearer(headers.get("authorization"))
        if token != lease.token:
            await self._refuse(lease, send, record, provider, 401,
                               "authentication_error" if provider == "anthropic" else "invalid_api_key",
                               "invalid statebox gateway token", body)
            return

        parsed: Any = None
        if body:
            try:
                parsed = json.loads(body)
            except json.JSONDecodeError:
                parsed = None
        model = str(parsed.get("model", "")) if isinstance(parsed, dict) else ""
        record["model"] = model
        if api is not None:
            if lease.exceeded:
                await self._refuse(lease, send, record, provider, *_budget_status(provider), lease.exceeded, body)
                return
            if model and not budget.model_allowed(model, lease.budgets):
                lease.exceeded = (f"model {model!r} is not allowed by the policy "
                                  f"(allowed: {', '.join(lease.budgets.models)})")
                await self._refuse(lease, send, record, provider, 403,
                                   "permission_error" if provider == "anthropic" else "model_not_allowed",
                                   lease.exceeded, body)
                return
            why = budget.exceeded_before(lease.usage, lease.budgets)
            if why:
                lease.exceeded = why
                await self._refuse(lease, send, record, provider, *_budget_status(provider), why, body)
                return
            lease.usage.requests += 1

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
        url = _upstream_url(upstream.base_url, provider, target)
        out_headers = {k: v for k, v in headers.items() if k not in _HOP_HEADERS}
        out_headers["accept-encoding"] = "identity"
        if upstream.api_key:
            if provider == "anthropic":
                out_headers["x-api-key"] = upstream.api_key
            else:
                out_headers["authorization"] = f"Bearer {upstream.api_key}"
        client = self._client_for(upstream.base_url)
        try:
            up_request = client.build_request(method, url, headers=out_headers, content=body or None)
            response = await client.send(up_request, stream=True)
        except httpx.HTTPError as exc:
            message = f"statebox gateway could not reach the {provider} upstream: {type(exc).__name__}: {exc}"
            record.update(status=502, error=message, duration_s=round(time.time() - started, 3))
            lease.write_log(record, self._secrets(lease))
            await send.json(502, error_body(provider, 502, "api_error", message))
            return

        record["status"] = response.status_code
        reply_headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _RESPONSE_DROP]
        is_sse = "text/event-stream" in response.headers.get("content-type", "")
        assembler = StreamAssembler(api) if (is_sse and api) else None
        chunks: list[bytes] = []
        client_gone = False
        try:
            await send.start(response.status_code, reply_headers)
            async for chunk in response.aiter_bytes():
                if assembler is not None:
                    assembler.feed(chunk)
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
        finally:
            await response.aclose()
        # Account and log before the reply's last bytes go out: a client that has its answer
        # must find the usage, `exceeded` and the log line already there.
        if client_gone:
            record["client_disconnected"] = True
        self._finish_record(lease, api, model, record, assembler, chunks, response.status_code, started)
        if client_gone:
            send.abort()
            return
        try:
            await send.end()
        except ConnectionError:
            send.abort()

    def _finish_record(self, lease: GatewayLease, api: str | None, model: str, record: dict[str, Any],
                       assembler: StreamAssembler | None, chunks: list[bytes], status: int, started: float) -> None:
        if assembler is not None:
            reply: Any = assembler.result()
            record["sse_events"] = assembler.events
            if assembler.error is not None:
                record["error"] = assembler.error
        else:
            raw = b"".join(chunks)
            try:
                reply = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                reply = raw.decode("utf-8", "replace")[:10000]
        record["response"] = summarise_images(reply)
        if api is not None and status < 400:
            self._account(lease, api, model, reply, record)
        record["duration_s"] = round(time.time() - started, 3)
        lease.write_log(record, self._secrets(lease))

    def _account(self, lease: GatewayLease, api: str, model: str, reply: Any, record: dict[str, Any]) -> None:
        inp, out = usage_of(api, reply)
        price_in, price_out = budget.price_of(model, self.prices)
        cost = (inp * price_in + out * price_out) / 1_000_000
        lease.usage.input_tokens += inp
        lease.usage.output_tokens += out
        lease.usage.cost_usd += cost
        record["usage"] = {"input_tokens": inp, "output_tokens": out, "cost_usd": round(cost, 6)}
        why = budget.exceeded_after(lease.usage, lease.budgets)
        if why and not lease.exceeded:
            lease.exceeded = why
            record["exceeded"] = why

    async def _refuse(self, lease: GatewayLease, send: "_Sender", record: dict[str, Any], provider: Provider,
                      status: int, kind: str, message: str, body: bytes) -> None:
        payload = error_body(provider, status, kind, message)
        try:
            request = summarise_images(json.loads(body)) if body else None
        except json.JSONDecodeError:
            request = body.decode("utf-8", "replace")[:10000]
        record.update(status=status, refused=message, request=request, response=payload)
        lease.write_log(record, self._secrets(lease))
        await send.json(status, payload, extra=[("x-should-retry", "false")])

    def _secrets(self, lease: GatewayLease) -> list[str]:
        return [u.api_key for u in self.upstreams.values() if u.api_key] + [lease.token]

    def _client_for(self, base_url: str) -> httpx.AsyncClient:
        client = self._clients.get(base_url)
        if client is None:
            host = urlsplit(base_url).hostname or ""
            loopback = host in ("localhost", "127.0.0.1", "::1")
            client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.upstream_timeout_s, connect=30.0),
                trust_env=not loopback,  # a host proxy must never capture a local upstream
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
            )
            self._clients[base_url] = client
        return client


# ---------------------------------------------------------------------------
# Helpers: sockets, HTTP framing, URLs
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


def _bearer(value: str | None) -> str | None:
    if value and value.lower().startswith("bearer "):
        return value[7:].strip()
    return None


def _budget_status(provider: Provider) -> tuple[int, str]:
    """Anthropic answers a spent balance with 400 invalid_request_error; OpenAI with 429 insufficient_quota."""
    return (400, "invalid_request_error") if provider == "anthropic" else (429, "insufficient_quota")


def _upstream_url(base_url: str, provider: Provider, target: str) -> str:
    base = base_url.rstrip("/")
    if provider == "openai" and target.startswith("/v1/"):
        # OPENAI_BASE_URL conventionally ends in /v1 already.
        return base + target[3:] if base.endswith("/v1") else base + target
    if provider == "anthropic" and base.endswith("/v1") and target.startswith("/v1/"):
        return base + target[3:]
    return base + target


async def _read_request(conn: h11.Connection, reader: asyncio.StreamReader) -> tuple[h11.Request | None, bytes]:
    request: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(65536)
            conn.receive_data(data)
            if not data and request is None:
                return None, b""
            continue
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return request, bytes(body)
        elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
            return None, b""


async def _answer_internal_error(conn: h11.Connection, writer: asyncio.StreamWriter, request: h11.Request,
                                 exc: Exception) -> None:
    provider, _ = _api_of(request.target.decode(errors="replace"))
    message = f"statebox gateway error: {type(exc).__name__}: {exc}"
    if conn.our_state is h11.SEND_RESPONSE:
        try:
            await _Sender(conn, writer, request.method.decode()).json(500, error_body(provider, 500, "api_error", message))
        except Exception:  # noqa: BLE001
            pass


class _Sender:
    """Writes one h11 response, as a whole or streamed."""

    def __init__(self, conn: h11.Connection, writer: asyncio.StreamWriter, method: str = "GET") -> None:
        self.conn, self.writer = conn, writer
        self.head = method == "HEAD"  # a HEAD response carries headers only
        self.started = False

    async def _write(self, data: bytes | None) -> None:
        if data:
            self.writer.write(data)
            await self.writer.drain()

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.started = True
        await self._write(self.conn.send(h11.Response(status_code=status, headers=headers)))

    async def data(self, chunk: bytes) -> None:
        if chunk and not self.head:
            await self._write(self.conn.send(h11.Data(data=chunk)))

    async def end(self) -> None:
        await self._write(self.conn.send(h11.EndOfMessage()))

    async def json(self, status: int, payload: Any, extra: list[tuple[str, str]] | None = None) -> None:
        raw = json.dumps(payload).encode()
        await self.start(status, [("content-type", "application/json"), ("content-length", str(len(raw)))]
                         + (extra or []))
        await self.data(raw)
        await self.end()

    def abort(self) -> None:
        try:
            self.writer.close()
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


def socket_mount(lease: GatewayLease) -> "Mount":
    """The bind mount that puts the lease's socket at `/run/statebox/gateway.sock` in a container."""
    from statebox.sandbox.docker import Mount

    return Mount(source=lease.socket_dir, target=CONTAINER_SOCKET_DIR, read_only=True)


def _sdk_http_lib(sdk: str = "anthropic") -> Any:
    """The httpx flavour an SDK was built on: `httpx2` for anthropic>=2 / openai>=3, else `httpx`.

    The SDKs refuse a client from the other library, so the unix-socket transport must
    be built from the one they import.
    """
    import importlib

    base = importlib.import_module(f"{sdk}._base_client")
    return getattr(base, "httpx2", None) or getattr(base, "httpx")


def host_http_client(lease: GatewayLease, timeout_s: float = 600.0, sdk: str = "anthropic") -> Any:
    """A sync HTTP client (of the SDK's httpx flavour) whose every request goes to the lease's socket."""
    lib = _sdk_http_lib(sdk)
    return lib.Client(transport=lib.HTTPTransport(uds=str(lease.host_socket_path or lease.socket_path)), timeout=timeout_s)


def host_async_http_client(lease: GatewayLease, timeout_s: float = 600.0, sdk: str = "anthropic") -> Any:
    lib = _sdk_http_lib(sdk)
    return lib.AsyncClient(transport=lib.AsyncHTTPTransport(uds=str(lease.host_socket_path or lease.socket_path)), timeout=timeout_s)


def anthropic_client(lease: GatewayLease, **kwargs: Any):
    """`anthropic.Anthropic` through the gateway (base URL http://localhost, key = the lease token)."""
    import anthropic

    return anthropic.Anthropic(base_url="http://localhost", api_key=lease.token,
                               http_client=host_http_client(lease, sdk="anthropic"), **kwargs)


def async_anthropic_client(lease: GatewayLease, **kwargs: Any):
    import anthropic

    return anthropic.AsyncAnthropic(base_url="http://localhost", api_key=lease.token,
                                    http_client=host_async_http_client(lease, sdk="anthropic"), **kwargs)


def openai_client(lease: GatewayLease, **kwargs: Any):
    """`openai.OpenAI` through the gateway (base URL http://localhost/v1, key = the lease token)."""
    import openai

    return openai.OpenAI(base_url="http://localhost/v1", api_key=lease.token,
                         http_client=host_http_client(lease, sdk="openai"), **kwargs)


def async_openai_client(lease: GatewayLease, **kwargs: Any):
    import openai

    return openai.AsyncOpenAI(base_url="http://localhost/v1", api_key=lease.token,
                              http_client=host_async_http_client(lease, sdk="openai"), **kwargs)


def langchain_chat_model(lease: GatewayLease, model: str, provider: Provider | None = None, **kwargs: Any):
    """A langchain chat model (ChatAnthropic / ChatOpenAI) whose requests all go through the lease."""
    provider = provider or provider_for_model(model)
    if provider == "anthropic":
        from langchain_anthropic import ChatAnthropic

        llm = ChatAnthropic(model=model, base_url="http://localhost", api_key=lease.token, **kwargs)
        # ChatAnthropic builds its SDK clients lazily (cached properties): hand it ours instead.
        llm.__dict__["_client"] = anthropic_client(lease, max_retries=llm.max_retries)
        llm.__dict__["_async_client"] = async_anthropic_client(lease, max_retries=llm.max_retries)
        return llm
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=model, base_url="http://localhost/v1", api_key=lease.token,
                      http_client=host_http_client(lease, sdk="openai"),
                      http_async_client=host_async_http_client(lease, sdk="openai"), **kwargs)


def socket_is_connectable_by_others(path: Path) -> bool:
    """True when the socket's mode lets any uid connect (what a container's non-root user needs)."""
    mode = os.stat(path).st_mode
    return stat.S_ISSOCK(mode) and bool(mode & stat.S_IWOTH)
