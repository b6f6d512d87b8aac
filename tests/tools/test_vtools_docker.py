"""vtools inside the real sandbox image: it decodes /workspace and refuses everything else."""

from __future__ import annotations

import base64
import os
import shutil

import cv2
import numpy as np
import pytest

from statebox.policies.model import load_policy
from statebox.tools.video_tools import LocalVtools, SandboxVtools, VideoTools, VtoolsError

pytestmark = pytest.mark.docker


@pytest.fixture
def sandbox(docker_engine, clips, tmp_path, limited_dir):
    from statebox.sandbox.docker import ContainerSpec
    from statebox.sandbox.images import ensure_image

    ws = limited_dir(64)
    shutil.copy(clips["h264"], ws / "v.mp4")
    os.symlink("/etc/passwd", ws / "link.mp4")
    for path in (ws, ws / "v.mp4"):
        os.chown(path, 1000, 1000)
    spec = ContainerSpec(image=ensure_image("sandbox"), command=["sleep", "infinity"], workspace=ws,
                         policy=load_policy("default"))
    running = docker_engine.start(spec)
    try:
        yield running, ws
    finally:
        running.stop()


def test_vtools_in_the_sandbox_decodes_like_the_host_and_refuses_outside_paths(sandbox):
    running, ws = sandbox
    inside = VideoTools(SandboxVtools(running), "v.mp4")
    host = VideoTools(LocalVtools(ws), "v.mp4")
    assert inside.probe() == host.probe()
    a, b = inside.frames(times=[0.5, 3.3, 7.0]), host.frames(times=[0.5, 3.3, 7.0])
    assert [f.time for f in a] == [f.time for f in b] == [0.5, 3.3, 7.0]
    for x, y in zip(a, b):
        ix = cv2.imdecode(np.frombuffer(base64.b64decode(x.data), np.uint8), 1).astype(int)
        iy = cv2.imdecode(np.frombuffer(base64.b64decode(y.data), np.uint8), 1).astype(int)
        assert np.abs(ix - iy).mean() < 1.0, "the sandbox decodes the same frames as the host"
    for path in ("/etc/passwd", "link.mp4", "/workspace/../etc/hostname"):
        result = running.exec(["vtools", "probe", path], timeout_s=60)
        assert result.exit_code == 2 and "refusing to read" in result.stderr, (path, result)
    result = running.exec(["vtools", "frames", "v.mp4", "--uniform", "2", "--out", "/home/agent/x"], timeout_s=60)
    assert result.exit_code == 2 and "refusing to write" in result.stderr
    with pytest.raises(VtoolsError):
        VideoTools(SandboxVtools(running), "missing.mp4").probe()
    assert inside.motion(fps=2).times[-1] == pytest.approx(7.5)
