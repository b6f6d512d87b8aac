"""Open an attempt's video tools: a long-lived hardened sandbox driven by docker exec.

Host-side agents call `open_video_tools(ctx, ...)` once per attempt. The sandbox holds
only the de-identified workspace (the harness's mounts, e.g. honeytokens, are added by
the engine it hands over); it is removed when the block ends, whatever happens.

`mode="local"` runs vtools on the host against the workspace folder instead. It exists
for tests of agent logic that must not depend on Docker and for debugging; it is never
chosen implicitly, so a missing engine can not silently move decoding out of the sandbox.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from statebox.attempt import AttemptContext
from statebox.errors import UserError
from statebox.sandbox.spec import ContainerSpec
from statebox.tools.video_tools import LocalVtools, SandboxVtools, VideoTools

Mode = Literal["sandbox", "local"]


def query_ceiling(ctx: AttemptContext) -> float | None:
    """The last moment an agent may look at: the streaming query time, if any."""
    if ctx.query.time is not None:
        return float(ctx.query.time)
    ws_time = getattr(ctx.workspace, "query_time", None)
    return float(ws_time) if ws_time is not None else None


@contextmanager
def open_video_tools(
    ctx: AttemptContext,
    *,
    mode: Mode = "sandbox",
    on_decoded: Callable[[list[float]], None] | None = None,
    max_side: int | None = 768,
) -> Iterator[VideoTools]:
    if ctx.workspace is None:
        raise UserError("this agent needs a prepared workspace (run it through `statebox run`)")
    video_name = ctx.workspace.video_name
    ceiling = query_ceiling(ctx)
    if mode == "local":
        yield VideoTools(LocalVtools(Path(ctx.workspace.path)), video_name, max_time=ceiling,
                         max_side=max_side, on_decoded=on_decoded)
        return
    if ctx.engine is None:
        raise UserError("this agent decodes frames inside a Docker sandbox, but no Docker engine was given")
    spec = ContainerSpec(
        image=ctx.engine.ensure_image("sandbox"),
        command=["sleep", "infinity"],
        workspace=Path(ctx.workspace.path),
        policy=ctx.policy,
        run_id=ctx.attempt.run_id,
        attempt_id=ctx.attempt.attempt_id,
    )
    sandbox = ctx.engine.start(spec)
    try:
        yield VideoTools(SandboxVtools(sandbox), video_name, max_time=ceiling, max_side=max_side,
                         on_decoded=on_decoded)
    finally:
        sandbox.stop()
