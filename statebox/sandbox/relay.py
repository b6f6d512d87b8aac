#!/usr/bin/env python3
"""statebox-relay: TCP 127.0.0.1:PORT -> the gateway's unix socket, inside the container.

A sandbox has no network, so model traffic reaches the host gateway only through
the unix socket bind-mounted at /run/statebox/gateway.sock. Clients that can't
speak to a unix socket (Codex, any OpenAI SDK) get this relay on loopback; it
moves bytes both ways and understands nothing, so HTTP, SSE and keep-alive all
pass unchanged and the gateway still sees (and logs) every request.

Kept free of statebox imports: it is copied into the sandbox image as
/usr/local/bin/statebox-relay and runs on the image's python3.

    statebox-relay --port 18080 [--socket /run/statebox/gateway.sock] [--background]

`--background` returns once the port is listening (the relay keeps running in a
forked child whose pid it prints), so `statebox-relay --background && codex ...`
has no race.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import threading

DEFAULT_SOCKET = "/run/statebox/gateway.sock"


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy bytes until EOF, then half-close the other side so the peer sees the end too."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve_one(client: socket.socket, socket_path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(socket_path)
    except OSError as exc:
        print(f"statebox-relay: cannot reach the gateway at {socket_path}: {exc}", file=sys.stderr, flush=True)
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def listen(host: str, port: int) -> socket.socket:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(64)
    return server


def serve_forever(server: socket.socket, socket_path: str) -> None:
    while True:
        client, _ = server.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve_one, args=(client, socket_path), daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="statebox-relay", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18080)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--socket", default=DEFAULT_SOCKET)
    parser.add_argument("--background", action="store_true", help="return once listening; keep relaying in a child")
    parser.add_argument("--log", default="/tmp/statebox-relay.log", help="where a background relay writes errors")
    args = parser.parse_args(argv)
    try:
        server = listen(args.host, args.port)
    except OSError as exc:
        print(f"statebox-relay: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    if args.background:
        child = os.fork()
        if child > 0:
            print(child, flush=True)  # the child owns the listening socket now
            return 0
    if args.background:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)  # a caller reading our stdout (the pid) or stderr must see EOF
        try:
            log = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError:
            log = devnull
        os.dup2(log, 2)
    try:
        serve_forever(server, args.socket)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
