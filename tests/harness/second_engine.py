"""A second Docker engine of a test's own: another dockerd on its own socket, in its own network
namespace (it must not touch the host's docker0 bridge), with its own data and exec roots.

With `private_mounts`, it also gets its own mount namespace, so the workspaces the host mounts after
it starts are invisible to it: an engine on another machine, as far as files go. Used by
test_remote_engine.py, test_cluster_units.py and ray_cluster.Cluster (node B's engine). Its root
sits under /tmp and is named by the caller (unix socket paths are limited to 108 bytes); one root per
test process, so parallel test processes never share an engine.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import IO

import pytest

START_TIMEOUT_S = 60


class SecondEngine:
    def __init__(self, root: Path, *, private_mounts: bool = False) -> None:
        self.root = root
        self.host = f"unix://{root}/docker.sock"
        self.private_mounts = private_mounts
        self.proc: subprocess.Popen | None = None
        self._log: IO[str] | None = None

    def start(self) -> str:
        """Start the daemon and wait until it answers; returns its DOCKER_HOST."""
        if shutil.which("dockerd") is None:
            pytest.fail("dockerd is not installed (scripts/setup/20-docker-engine.sh installs it)")
        self.root.mkdir(parents=True, exist_ok=True)
        namespaces = ["--mount", "--propagation", "private", "--net"] if self.private_mounts else ["--net"]
        self._log = open(self.root / "dockerd.log", "w")
        self.proc = subprocess.Popen(
            ["unshare", *namespaces, "dockerd", "--host", self.host, "--data-root", str(self.root / "data"),
             "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "docker.pid"), "--bridge", "none",
             "--iptables=false", "--ip-masq=false"],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline and self.proc.poll() is None:
            if subprocess.run(["docker", "-H", self.host, "info"], capture_output=True).returncode == 0:
                return self.host
            time.sleep(0.5)
        log = (self.root / "dockerd.log").read_text()[-2000:]
        self.stop()
        pytest.fail(f"second dockerd did not start: {log}")

    def load_image(self, kind: str) -> None:
        self.load_image_into(self.host, kind)

    @staticmethod
    def load_image_into(host: str, kind: str) -> None:
        """Copy one of statebox's images and its base (the tag is a hash over both) from this host's
        engine into the engine at `host`: there is no registry here."""
        from statebox.sandbox.images import ensure_image, image_tag

        image = ensure_image(kind)
        _, base, _ = image_tag(kind)
        moved = subprocess.run(f"docker save {base} {image} | docker -H {host} load", shell=True, capture_output=True,
                               text=True)
        assert moved.returncode == 0, moved.stderr

    def stop(self) -> None:
        """Stop the daemon, unmount what it left mounted and remove its root."""
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        subprocess.run(["bash", "-c", f"umount -R {self.root}/exec {self.root}/data 2>/dev/null; rm -rf {self.root}"],
                       check=False)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
