"""Record every attempt to reach the network from inside the tracker sandbox.

The container already runs with `--network none`, so an attempt fails anyway; what this
adds is evidence. ultralytics is known to reach out (hub sync, font and weight downloads,
pip auto-install, online checks); the image is configured so none of that should happen,
and this guard proves it per run: each DNS look-up of a non-local name and each
non-unix-socket connect is appended to `$STATEBOX_NETLOG` (JSON lines) and announced on
stdout, where the host records it as a `network_attempt` event. The call then proceeds
unchanged, so behaviour with and without the guard is identical.

Installed by the image's `sitecustomize.py`, i.e. before any other module is imported, in
every Python process of the container (data-loader workers included).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback

EVENT_PREFIX = "SBTRACK "  # stdout lines the host parses as events
_LOCAL_NAMES = {None, "", "localhost", "127.0.0.1", "::1", "0.0.0.0"}
_installed = False


def _caller() -> str:
    """The innermost frame outside this module and socket: who tried."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        if not frame.filename.endswith(("netguard.py", "socket.py")):
            return f"{frame.filename}:{frame.lineno}"
    return "?"


def record(kind: str, target: str) -> None:
    entry = {"time": round(time.time(), 3), "kind": kind, "target": target, "pid": os.getpid(), "caller": _caller()}
    path = os.environ.get("STATEBOX_NETLOG")
    if path:
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")
        except OSError:
            pass
    try:
        sys.stdout.write(EVENT_PREFIX + json.dumps({"event": "network_attempt", **entry}) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def install() -> None:
    """Wrap socket.getaddrinfo, socket.socket.connect/connect_ex/sendto (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    original_getaddrinfo = socket.getaddrinfo
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_sendto = socket.socket.sendto

    def getaddrinfo(host, *args, **kwargs):
        if host not in _LOCAL_NAMES:
            record("dns", str(host))
        return original_getaddrinfo(host, *args, **kwargs)

    def _check(sock: socket.socket, address) -> None:
        if sock.family == getattr(socket, "AF_UNIX", None):
            return
        host = address[0] if isinstance(address, tuple) and address else address
        if host not in _LOCAL_NAMES:
            record("connect", str(address))

    def connect(self, address):
        _check(self, address)
        return original_connect(self, address)

    def connect_ex(self, address):
        _check(self, address)
        return original_connect_ex(self, address)

    def sendto(self, data, *args):
        if args:
            _check(self, args[-1])
        return original_sendto(self, data, *args)

    socket.getaddrinfo = getaddrinfo
    setattr(socket.socket, "connect", connect)  # setattr: replacing a method is the point here
    setattr(socket.socket, "connect_ex", connect_ex)
    setattr(socket.socket, "sendto", sendto)
