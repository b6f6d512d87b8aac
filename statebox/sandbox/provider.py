"""The sandbox seam: what any place that runs an agent's containers must offer.

After Inspect AI's `SandboxEnvironment`, but typed and narrower: a provider has a
lifecycle (once per run, once per attempt), runs a container to completion (`run`)
or starts a long-lived one (`start`) whose handle runs commands (`exec`) and moves
files (`read_file`, `write_file`, both refusing links and non-regular files), and
names (building where needed) the image an agent's container runs (`ensure_image`).

Docker (`sandbox/docker.py:SandboxEngine`) is the one provider today; the harness's
per-attempt wrapper (`harness/attempt_sandbox.py:AttemptSandboxes`: honeytoken mounts, labels,
the run's stop switch) satisfies the same protocol, and so must any provider the
cluster work adds. `tests/sandbox/test_provider_contract.py` is the suite every
provider passes, and `tests/sandbox/test_provider_signatures.py` holds each registered
provider's method signatures to this protocol's (a `runtime_checkable` Protocol compares
names only; mypy checks only the call sites it sees). Providers are chosen by name through
`get_provider`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from statebox.errors import UserError
from statebox.sandbox.spec import ContainerResult, ContainerSpec, ExecResult

READ_LIMIT_BYTES = 16 * 1024 * 1024  # read_file/write_file move small files (answers, configs), not videos


class SandboxFileError(UserError):
    """read_file/write_file refused: a link, a non-regular file, a missing file, or too large."""


@runtime_checkable
class Sandbox(Protocol):
    """A started, hardened container (from `SandboxProvider.start`)."""

    def exec(self, cmd: Sequence[str] | str, timeout_s: float = 60.0) -> ExecResult:
        """Run one command as the agent user in /workspace; killed after timeout_s."""
        ...

    def read_file(self, path: str, max_bytes: int = READ_LIMIT_BYTES) -> bytes:
        """A regular file's bytes, read with the agent's rights; a link anywhere in `path`,
        a non-regular file or one over max_bytes raises `SandboxFileError`."""
        ...

    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a regular file with the agent's rights; refuses links as read_file does."""
        ...

    def stop(self) -> None:
        """Remove the container (idempotent)."""
        ...


@runtime_checkable
class SandboxProvider(Protocol):
    """Where containers run. One per run and process; thread-safe."""

    name: str

    def run_init(self, run_id: str) -> None:
        """Once before run `run_id`'s first attempt (housekeeping: containers a killed run left)."""
        ...

    def attempt_init(self, attempt_id: str) -> None:
        """Before an attempt's first container."""
        ...

    def attempt_cleanup(self, attempt_id: str) -> None:
        """After an attempt, whatever happened: no container of it may outlive this."""
        ...

    def run_cleanup(self, run_id: str) -> None:
        """Once after run `run_id` (or on a stop): no container of the run may outlive this."""
        ...

    def run(self, spec: ContainerSpec, stdout_path: Path | str | None, stderr_path: Path | str | None,
            on_stdout_line: Callable[[str], None] | None = None,
            on_stderr_line: Callable[[str], None] | None = None) -> ContainerResult:
        """Run a container to completion under the policy's limits; output streamed to the paths (capped)."""
        ...

    def start(self, spec: ContainerSpec) -> Sandbox:
        """Start a long-lived container (the policy's wall clock still applies)."""
        ...

    def ensure_image(self, target: str, progress: Callable[[str], None] | None = None) -> str:
        """The tag of image `target` (sandbox | agents | tracker) where this provider runs containers,
        built there when its inputs changed: a cluster node builds and checks its own."""
        ...


# name -> "module:factory"; the factory takes keyword options and returns a SandboxProvider.
# Imported on demand: a provider may need what another machine lacks (the docker SDK, ray).
PROVIDERS: dict[str, str] = {
    "docker": "statebox.sandbox.docker:SandboxEngine",
}


def register_provider(name: str, target: str) -> None:
    """Add a provider ("module:factory"); the cluster work registers its own."""
    PROVIDERS[name] = target


def get_provider(name: str = "docker", **options: Any) -> SandboxProvider:
    """The provider called `name`, started (raises `UserError` when it cannot be)."""
    target = PROVIDERS.get(name)
    if target is None:
        raise UserError(f"unknown sandbox provider {name!r} (known: {', '.join(sorted(PROVIDERS))})")
    module_name, factory = target.split(":")
    provider: object = getattr(importlib.import_module(module_name), factory)(**options)
    if not isinstance(provider, SandboxProvider):  # names only (runtime_checkable); signatures: tests/sandbox
        raise UserError(f"sandbox provider {name!r} ({target}) does not offer the SandboxProvider methods")
    return provider
