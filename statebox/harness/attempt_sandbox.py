"""The run's sandbox provider as one attempt sees it (typed; satisfies `SandboxProvider`).

Every container of the attempt gets the attempt's extra mounts (honeytokens: root-owned
0444 files, mounted so that a read moves their host atime) and the run/attempt labels,
and none starts once the run is stopping; agents need not know about any of it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from pathlib import Path

from statebox.audits.honeytokens import HoneytokenPlan
from statebox.sandbox.provider import Sandbox, SandboxProvider
from statebox.sandbox.spec import ContainerResult, ContainerSpec, Mount
from statebox.signals import Cancelled


def honeytoken_mounts(plan: HoneytokenPlan) -> list[Mount]:
    """Each planted decoy at its container path: read-write only when the atime probe needs it
    (Linux never moves atime through a read-only mount); the agent cannot write a 0444 root file."""
    return [Mount(source=Path(host), target=target, read_only=not plan.atime_probe)
            for host, target in zip(plan.host_files, plan.paths)]


class SandboxTracker:
    """The long-lived sandboxes a run started, so a stop can remove them; and the run's stop switch."""

    def __init__(self, cancel: threading.Event | None = None) -> None:
        self.cancel = cancel or threading.Event()
        # A file whose existence also means "stopping": on a cluster node the head's stop reaches the
        # run's worker processes as a Ray cancel, which may come after the head's sweep removed their
        # containers; the sweep writes this file first (cluster_worker.sweep), so no container starts
        # after it (a group member whose container the sweep removed does not run again alone).
        self.stop_marker: Path | None = None
        self._sandboxes: "weakref.WeakSet[Sandbox]" = weakref.WeakSet()
        self._guard = threading.Lock()

    def stopping(self) -> bool:
        """The run is stopping: its switch is set, or the stop's marker file exists (which sets it)."""
        if not self.cancel.is_set() and self.stop_marker is not None and self.stop_marker.exists():
            self.cancel.set()
        return self.cancel.is_set()

    def track(self, sandbox: Sandbox) -> None:
        with self._guard:
            self._sandboxes.add(sandbox)

    def stop_all(self) -> None:
        with self._guard:
            sandboxes = list(self._sandboxes)
        for sandbox in sandboxes:
            try:
                sandbox.stop()
            except Exception:  # noqa: BLE001 - already gone
                pass


class AttemptSandboxes:
    """A `SandboxProvider` for one attempt, over the run's provider."""

    def __init__(self, provider: SandboxProvider, *, mounts: list[Mount] | None = None, run_id: str = "",
                 attempt_id: str = "", tracker: SandboxTracker | None = None) -> None:
        self.provider = provider
        self.name = provider.name
        self.mounts = list(mounts or [])
        self.run_id = run_id
        self.attempt_id = attempt_id
        self.tracker = tracker

    # -- lifecycle: the run's belongs to the run; the attempt's is passed on
    def run_init(self, run_id: str = "") -> None:
        """The run's provider was initialised when the run started."""

    def run_cleanup(self, run_id: str = "") -> None:
        """The run's provider is cleaned when the run ends, not by one attempt."""

    def attempt_init(self, attempt_id: str) -> None:
        self.provider.attempt_init(attempt_id or self.attempt_id)

    def attempt_cleanup(self, attempt_id: str) -> None:
        self.provider.attempt_cleanup(attempt_id or self.attempt_id)

    # -- containers
    def _check(self) -> None:
        if self.tracker is not None and self.tracker.stopping():
            raise Cancelled("the run is stopping; no new container")

    def prepared(self, spec: ContainerSpec) -> ContainerSpec:
        """The spec with the attempt's labels (where unset) and extra mounts (where the target is free)."""
        update: dict[str, object] = {}
        if self.run_id and not spec.run_id:
            update["run_id"] = self.run_id
        if self.attempt_id and not spec.attempt_id:
            update["attempt_id"] = self.attempt_id
        if self.mounts:
            present = {m.target for m in spec.mounts}
            update["mounts"] = list(spec.mounts) + [m for m in self.mounts if m.target not in present]
        return spec.model_copy(update=update) if update else spec

    def run(self, spec: ContainerSpec, stdout_path: Path | str | None, stderr_path: Path | str | None,
            on_stdout_line: Callable[[str], None] | None = None,
            on_stderr_line: Callable[[str], None] | None = None) -> ContainerResult:
        self._check()
        return self.provider.run(self.prepared(spec), stdout_path, stderr_path,
                                 on_stdout_line=on_stdout_line, on_stderr_line=on_stderr_line)

    def start(self, spec: ContainerSpec) -> Sandbox:
        self._check()
        sandbox = self.provider.start(self.prepared(spec))
        if self.tracker is not None:
            self.tracker.track(sandbox)
            if self.tracker.cancel.is_set():  # the stop raced the start: never leave it running
                sandbox.stop()
                raise Cancelled("the run is stopping")
        return sandbox

    def ensure_image(self, target: str, progress: Callable[[str], None] | None = None) -> str:
        """Images live where the run's provider runs containers."""
        return self.provider.ensure_image(target, progress)
