"""HTTP/1.1 framing for the model gateway, bounded: every read has a size cap and a clock.

Issue 12: a sandboxed agent could hand the gateway a 150 MB body (read whole into
host memory and logged whole), hold thousands of connections, or trickle bytes
forever. The gateway's reader therefore:

- reads the request head first, through h11 with a cap on its size
  (`max_incomplete_event_size`) and on its number of header lines, so the
  gateway can route, authenticate and refuse a request before reading its body;
- reads a body only when asked, stopping as soon as it passes the cap (a
  declared `Content-Length` over the cap is refused without reading a byte;
  a chunked body is cut off when it grows past it);
- waits at most `idle_timeout_s` for a new request on a keep-alive connection
  and at most `request_timeout_s` from a request's first byte to its last, so
  a slow-loris client cannot keep a slot forever.

`Sender` writes one response, whole or streamed. Nothing here knows about
providers, tokens or budgets (that is gateway.py), nor about paths
(routes.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import h11

READ_SIZE = 65536


class ReadTimeout(Exception):
    """The client was too slow: no new request in time, or a request not finished by its deadline."""

    def __init__(self, reason: str, received: int = 0) -> None:
        super().__init__(reason)
        self.reason, self.received = reason, received


class BodyTooLarge(Exception):
    """The body passed the cap (`received` bytes were read before stopping; `declared` from Content-Length)."""

    def __init__(self, received: int, declared: int | None) -> None:
        super().__init__(f"body over the cap after {received} bytes")
        self.received, self.declared = received, declared


class BodyIncomplete(Exception):
    """The client went away (or broke the framing) in the middle of a body."""

    def __init__(self, reason: str, received: int) -> None:
        super().__init__(reason)
        self.reason, self.received = reason, received


class BoundedReader:
    """Reads one request at a time from a connection: head first, body on demand, all bounded."""

    def __init__(self, conn: h11.Connection, reader: asyncio.StreamReader, *, request_timeout_s: float,
                 idle_timeout_s: float) -> None:
        self.conn, self.reader = conn, reader
        self.request_timeout_s, self.idle_timeout_s = request_timeout_s, idle_timeout_s
        self.deadline: float | None = None  # monotonic time by which the current request must be in
        self.bytes_in = 0  # bytes received for the current request (head and body)

    async def _feed(self) -> None:
        if self.deadline is None:
            timeout = self.idle_timeout_s
        else:
            timeout = self.deadline - time.monotonic()
            if timeout <= 0:
                raise ReadTimeout(f"request not complete within {self.request_timeout_s:g}s", self.bytes_in)
        try:
            data = await asyncio.wait_for(self.reader.read(READ_SIZE), timeout)
        except asyncio.TimeoutError:
            if self.deadline is None:
                raise ReadTimeout(f"no request within {self.idle_timeout_s:g}s (idle connection)") from None
            raise ReadTimeout(f"request not complete within {self.request_timeout_s:g}s", self.bytes_in) from None
        if data and self.deadline is None:
            self.deadline = time.monotonic() + self.request_timeout_s
        self.bytes_in += len(data)
        self.conn.receive_data(data)

    async def head(self) -> h11.Request | None:
        """The next request's head; None when the client closed cleanly between requests.

        Raises `h11.RemoteProtocolError` (bad framing, head over the size cap) and `ReadTimeout`.
        """
        self.deadline, self.bytes_in = None, 0
        if self.conn.trailing_data[0]:  # a pipelined request is already buffered: its clock runs now
            self.deadline = time.monotonic() + self.request_timeout_s
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                await self._feed()
                continue
            if isinstance(event, h11.Request):
                return event
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None
            raise h11.RemoteProtocolError(f"unexpected {type(event).__name__} before a request", 400)

    async def body(self, cap: int, declared: int | None) -> bytes:
        """The whole body, or `BodyTooLarge` once more than `cap` bytes arrive (`ReadTimeout`, `BodyIncomplete`)."""
        body = bytearray()
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise BodyIncomplete(f"broken body: {exc}", len(body)) from None
            if event is h11.NEED_DATA:
                await self._feed()
                continue
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > cap:
                    raise BodyTooLarge(len(body), declared)
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)
            else:
                raise BodyIncomplete(f"connection ended in the body ({type(event).__name__})", len(body))


def declared_length(headers: dict[str, str]) -> int | None:
    """The request's Content-Length (h11 already checked it is one decimal number), or None."""
    value = headers.get("content-length")
    return int(value) if value is not None and value.strip().isdigit() else None


def has_body(headers: dict[str, str]) -> bool:
    return bool(declared_length(headers)) or "transfer-encoding" in headers


async def write_raw_error(writer: asyncio.StreamWriter, status: int, payload: Any,
                          extra: list[tuple[str, str]] | None = None) -> None:
    """An error response written without h11 (a connection refused before any request was read), then close."""
    raw = json.dumps(payload).encode()
    head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", "content-type: application/json",
            f"content-length: {len(raw)}", "connection: close"] + [f"{k}: {v}" for k, v in (extra or [])]
    try:
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + raw)
        await asyncio.wait_for(writer.drain(), 5)
    except (ConnectionError, asyncio.TimeoutError, RuntimeError):
        pass
    finally:
        writer.close()


_REASONS = {400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
            413: "Payload Too Large", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
            501: "Not Implemented", 503: "Service Unavailable"}


class Sender:
    """Writes one h11 response, as a whole or streamed.

    `write_timeout_s` bounds how long a write may wait for a client that stops reading (a slow
    reader would otherwise hold its slot, and the upstream stream, forever); past it the write
    raises `ConnectionError`, which the gateway treats as a client gone.
    """

    def __init__(self, conn: h11.Connection, writer: asyncio.StreamWriter, method: str = "GET",
                 write_timeout_s: float | None = None) -> None:
        self.conn, self.writer = conn, writer
        self.head = method == "HEAD"  # a HEAD response carries headers only
        self.started = False
        self.write_timeout_s = write_timeout_s

    async def _write(self, data: bytes | None) -> None:
        if data:
            self.writer.write(data)
            try:
                await asyncio.wait_for(self.writer.drain(), self.write_timeout_s)
            except asyncio.TimeoutError:
                raise ConnectionError(f"client read nothing for {self.write_timeout_s:g}s") from None

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

    async def continue_100(self) -> None:
        """Tell a client waiting on `Expect: 100-continue` to send its body (only once it was accepted)."""
        if self.conn.client_is_waiting_for_100_continue:
            await self._write(self.conn.send(h11.InformationalResponse(status_code=100, headers=[])))

    def abort(self) -> None:
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001
            pass
