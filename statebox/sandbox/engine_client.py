"""One place that connects to the Docker engine, so every caller fails the same clear way.

`DOCKER_HOST` (or the `docker_host` argument) is honoured; the API version is negotiated
with the engine (the host CLI may be newer than the daemon). A missing engine is a user
problem with a one-line fix, never a traceback.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from statebox.errors import UserError

if TYPE_CHECKING:
    from docker import DockerClient  # the SDK has no type information: Any to mypy

_clients: dict[str, DockerClient] = {}
_lock = threading.Lock()


def start_hint() -> str:
    return "start it with `bash scripts/setup/20-docker-engine.sh` (or `dockerd &`), or set DOCKER_HOST"


def connected_clients() -> list[DockerClient]:
    """The engines this process has already connected to (never connects afresh)."""
    with _lock:
        return list(_clients.values())


def docker_client(docker_host: str | None = None, timeout: int = 120) -> DockerClient:
    """A cached `docker.DockerClient`, shared by threads.

    Its pool is large (64) because every running container holds two connections (attach +
    wait); the default pool of 10 would discard and re-open connections at 8 in parallel.
    """
    import docker

    key = docker_host or os.environ.get("DOCKER_HOST", "")
    with _lock:
        client = _clients.get(key)
        if client is not None:
            return client
        where = key or "unix:///var/run/docker.sock"
        try:
            if docker_host:
                client = docker.DockerClient(base_url=docker_host, version="auto", timeout=timeout, max_pool_size=64)
            else:
                client = docker.from_env(version="auto", timeout=timeout, max_pool_size=64)
            client.ping()
        except Exception as exc:  # noqa: BLE001 - every way of not answering means "no engine"
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UserError(f"no Docker engine at {where} ({reason[:160]}); {start_hint()}") from exc
        _clients[key] = client
        return client
