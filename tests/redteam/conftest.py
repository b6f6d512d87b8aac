"""Red-team fixtures: a video with an identifying name and metadata, host decoys, a host
listener, and one session-wide run of every attacker in parallel (each in its own sandbox).

Running the attackers once, 4 at a time, keeps the whole red team well under a minute;
each test then asserts on its own attacker's outcome and prints what it tried and saw.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from tests.redteam.attacks import ATTACKS, Attack

DECOYS = {
    "ANTHROPIC_API_KEY": "sk-ant-decoy-" + "7f3a9c" * 6,
    "OPENAI_API_KEY": "sk-decoy-openai-" + "b41e2d" * 6,
    "HF_TOKEN": "hf_decoyToken" + "Qx9Lm2" * 5,
}
SECRET_ITEM_ID = "q-scene0042-redteam-007"
SECRET_DATASET = "vcbench-redteam"
VIDEO_STEM = "vcbench_scene0042_kitchen_secret"
QUERY_TIME = 2.5
WORKERS = 4

OUTCOMES: dict[str, "Outcome"] = {}


@dataclass
class Outcome:
    attack: Attack
    status: str
    exit_code: int | None
    duration_s: float
    reason: str
    stdout: str
    stderr: str
    stdout_bytes: int
    truncated: bool
    workspace: object
    leftover_containers: int
    wall_s: float
    notes: list[str] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    def count(self, word: str) -> int:
        return sum(1 for line in self.lines if line.startswith(word))

    def summary(self) -> str:
        blocked, escaped = self.count("BLOCKED"), self.count("ESCAPED")
        return (f"{self.attack.name}: tried {self.attack.tried} -> status={self.status} exit={self.exit_code} "
                f"{self.duration_s:.1f}s blocked={blocked} escaped={escaped}"
                + (f" ({self.reason})" if self.reason else ""))


class Listener:
    """A real TCP service on the host (all interfaces): any connection from a sandbox is a breach."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted += 1
            conn.sendall(b"host-secret-service\n")
            conn.close()

    def close(self) -> None:
        self.stop = True
        self.sock.close()


def host_ip() -> str:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("10.255.255.254", 9))
        return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    finally:
        s.close()


@pytest.fixture(scope="session")
def redteam(docker_engine, tmp_path_factory):
    """Run every attacker once; yields a context with outcomes and the host-side evidence."""
    from statebox.harness.attempt_sandbox import AttemptSandboxes
    from statebox.policies import load_policy
    from statebox.sandbox.provider import get_provider
    from statebox.sandbox.spec import ContainerSpec, Mount
    from statebox.sandbox.images import ensure_image
    from statebox.sandbox.workspace import prepare_workspace
    from statebox.schema import Item, Query

    # the harness's own environment holds "real" secrets while the attackers run, and only then: the worker process
    # goes on to other tests (a later `statebox demo` in it took the decoy for a real key and called the real API)
    before = {key: os.environ.get(key) for key in DECOYS}
    os.environ.update(DECOYS)
    image = ensure_image("sandbox")
    src_dir = tmp_path_factory.mktemp(SECRET_DATASET) / "videos"
    src_dir.mkdir()
    video = src_dir / f"{VIDEO_STEM}.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10",
                    "-f", "lavfi", "-i", "sine=frequency=440", "-t", "6", "-c:v", "libx264", "-pix_fmt", "yuv420p",
                    "-c:a", "aac", "-metadata", f"title={VIDEO_STEM}", "-metadata", f"comment={SECRET_ITEM_ID}",
                    "-metadata", f"album={SECRET_DATASET}", "-metadata", "creation_time=2019-05-04T10:00:00Z",
                    str(video)], check=True)
    video_hash = hashlib.sha256(video.read_bytes()).hexdigest()
    canary = tmp_path_factory.mktemp("canary") / "answer-key.txt"
    canary.write_text("CANARY-ANSWER-42\n")
    ro_dir = tmp_path_factory.mktemp("gw")
    ro_dir.chmod(0o755)  # like the gateway's socket dir: readable by the agent, never writable
    (ro_dir / "token.txt").write_text("lease-token-not-a-secret\n")
    logs = tmp_path_factory.mktemp("redteam-logs")
    needles = [video.name, video.stem, SECRET_ITEM_ID, SECRET_DATASET]
    listener = Listener()
    item = Item(id=SECRET_ITEM_ID, benchmark="vcbench", video=video.name, question="How many squares are visible?",
                answer_type="number", queries=[Query(index=0, time=None), Query(index=1, time=QUERY_TIME)])
    fill = {"port": str(listener.port), "host_ip": host_ip(), "canary": str(canary), "query_time": str(QUERY_TIME),
            "needles": base64.b64encode(json.dumps([n[::-1] for n in needles]).encode()).decode()}
    base_policy = load_policy("default")
    provider = get_provider("docker")  # the attacks go through the SandboxProvider protocol, as agents' containers do
    provider.run_init("redteam")

    def run_one(attack: Attack) -> Outcome:
        limits = base_policy.limits.model_copy(update={"time_limit_s": 60, **attack.limits})
        policy = base_policy.model_copy(update={"limits": limits})
        query = item.queries[1] if attack.streaming else item.queries[0]
        ws = prepare_workspace(item, query, video, policy, dataset=SECRET_DATASET)
        attempt_id = f"rt-{attack.name}-{secrets.token_hex(3)}"
        mounts = [Mount(source=ro_dir, target="/run/statebox", read_only=True)] if attack.ro_mount else []
        spec = ContainerSpec(image=image, command=attack.command(), workspace=ws, policy=policy, mounts=mounts,
                             env={k: v.format(**fill) for k, v in attack.env.items()},
                             run_id="redteam", attempt_id=attempt_id)
        out, err = logs / f"{attack.name}.out", logs / f"{attack.name}.err"
        started = time.monotonic()
        sandboxes = AttemptSandboxes(provider, run_id="redteam", attempt_id=attempt_id)  # what an attempt is handed
        sandboxes.attempt_init(attempt_id)
        try:
            result = sandboxes.run(spec, out, err)
        finally:
            sandboxes.attempt_cleanup(attempt_id)
        wall = time.monotonic() - started
        # the evidence is the engine's own listing, not the provider's word
        left = len(docker_engine.api.containers(all=True, filters={"label": f"statebox.attempt={attempt_id}"}))
        return Outcome(attack=attack, status=result.status, exit_code=result.exit_code, duration_s=result.duration_s,
                       reason=result.reason, stdout=out.read_text(errors="replace"), stderr=err.read_text(errors="replace"),
                       stdout_bytes=result.stdout_bytes, truncated=result.truncated, workspace=ws,
                       leftover_containers=left, wall_s=wall)

    started = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            for outcome in pool.map(run_one, ATTACKS):
                OUTCOMES[outcome.attack.name] = outcome
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    total = time.monotonic() - started
    ctx = {"outcomes": OUTCOMES, "needles": needles, "listener": listener, "video": video, "video_hash": video_hash,
           "canary": canary, "ro_dir": ro_dir, "image": image, "total_s": total, "logs": logs}
    yield ctx
    provider.run_cleanup("redteam")
    listener.close()
    for outcome in OUTCOMES.values():
        outcome.workspace.cleanup()


def pytest_terminal_summary(terminalreporter):
    if not OUTCOMES:
        return
    terminalreporter.section(f"red team: {len(OUTCOMES)} attackers")
    for outcome in OUTCOMES.values():
        terminalreporter.write_line(outcome.summary())
