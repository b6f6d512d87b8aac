"""`statebox run` on bad input: one clear line naming the cause, exit code 2, nothing lost.

Also the harness's retry rule: infrastructure failures are retried, agent failures never.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from statebox.errors import InfrastructureError

STATEBOX = [sys.executable, "-m", "statebox.cli"]


def _dataset(tmp_path: Path, video_name: str = "clip.mp4", make_video: bool = True) -> tuple[Path, Path]:
    videos = tmp_path / "videos"
    videos.mkdir(exist_ok=True)
    if make_video:
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=5:duration=1",
                        "-pix_fmt", "yuv420p", str(videos / video_name)], check=True)
    docs = [{"source_task": "t", "video_id": "c", "video_path": video_name, "question": f"q{i}?", "answer": "3",
             "choices": [], "answer_index": -1} for i in range(3)]
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"data": {"t": docs}}))
    return data, videos


def _run(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(STATEBOX + args, capture_output=True, text=True, timeout=300, env=env)


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_missing_video_is_one_line_and_exit_2(tmp_path):
    data, videos = _dataset(tmp_path, "absent.mp4", make_video=False)
    line = _one_error_line(_run(["run", "--agent", "shell", "--bench", "vstat", "--data", str(data), "--videos", str(videos),
                                 "--run-dir", str(tmp_path / "run"), "--option", "command=true"]))
    assert "video not found" in line and "absent.mp4" in line


def test_malformed_annotation_names_file_and_line(tmp_path):
    bad = tmp_path / "eval.jsonl"
    bad.write_text('{"id": "a"}\nnot json\n')
    line = _one_error_line(_run(["run", "--agent", "oracle", "--bench", "vcbench", "--data", str(bad), "--run-dir", str(tmp_path / "r")]))
    assert str(bad) in line and ":" in line


def test_no_engine_is_one_line(tmp_path):
    data, videos = _dataset(tmp_path)
    env = dict(os.environ, DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock")
    line = _one_error_line(_run(["run", "--agent", "shell", "--bench", "vstat", "--data", str(data), "--videos", str(videos),
                                 "--run-dir", str(tmp_path / "run"), "--option", "command=true"], env))
    assert "docker" in line.lower()


def test_no_api_key_stops_before_any_container_and_keeps_finished_rows(tmp_path):
    data, videos = _dataset(tmp_path)
    run_dir = tmp_path / "run"
    first = _run(["run", "--agent", "oracle", "--agent", "chance-random", "--bench", "vstat", "--data", str(data),
                  "--videos", str(videos), "--run-dir", str(run_dir)])
    assert first.returncode == 0, first.stderr[-2000:]
    rows_before = sqlite3.connect(run_dir / "results.sqlite").execute("SELECT COUNT(*) FROM results").fetchone()[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    line = _one_error_line(_run(["run", "--agent", "oracle", "--agent", "chance-random", "--agent", "claude-code",
                                 "--bench", "vstat", "--data", str(data), "--videos", str(videos), "--run-dir", str(run_dir)], env))
    assert "ANTHROPIC_API_KEY" in line
    rows_after = sqlite3.connect(run_dir / "results.sqlite").execute("SELECT COUNT(*) FROM results").fetchone()[0]
    assert rows_before == rows_after == 6  # nothing already written was lost, nothing half-run was added
    assert not list((run_dir / "attempts").glob("claude-code-*"))


class _FlakyEngineAgent:
    """Fails like a Docker engine hiccup on its first call, then answers."""

    name = "flaky"
    needs_sandbox = False
    needs_gateway = False

    def __init__(self, exc: Exception, fail_times: int) -> None:
        self.exc, self.fail_times, self.calls = exc, fail_times, 0

    def run(self, ctx):
        from statebox.schema import Session

        self.calls += 1
        if self.calls <= self.fail_times:
            raise self.exc
        return Session(attempt_id=ctx.attempt.attempt_id, agent=self.name, response="3")


def _planned(tmp_path: Path):
    from statebox.harness.plan import DatasetSpec, PlannedAttempt
    from statebox.schema import Attempt, Item

    item = Item(id="t:0", benchmark="vstat", video="clip.mp4", question="q?", answer_type="number", target=3)
    spec = DatasetSpec(label="vstat", bench="vstat", data=str(tmp_path / "d.json"))
    return PlannedAttempt(attempt=Attempt(run_id="r", agent="flaky", item_id=item.id), dataset=spec, item=item, query=item.queries[0])


def test_infrastructure_failures_are_retried_agent_failures_are_not(tmp_path, monkeypatch):
    from statebox.agents.base import AgentOptions
    from statebox.harness import runner
    from statebox.policies.model import load_policy

    monkeypatch.setattr(runner.time, "sleep", lambda s: None)
    services = runner.RunServices(policy=load_policy("default"))
    flaky = _FlakyEngineAgent(InfrastructureError("engine hiccup"), fail_times=2)
    row = runner.execute_attempt(_planned(tmp_path), flaky, AgentOptions(), services, tmp_path / "run", [])
    assert (flaky.calls, row.status, row.retries, row.metrics["score"]) == (3, "ok", 2, 1.0)

    broken = _FlakyEngineAgent(RuntimeError("agent bug"), fail_times=1)
    row = runner.execute_attempt(_planned(tmp_path), broken, AgentOptions(), services, tmp_path / "run2", [])
    assert (broken.calls, row.status, row.retries) == (1, "error", 0)
    assert "agent bug" in row.reason

    hopeless = _FlakyEngineAgent(InfrastructureError("engine gone"), fail_times=99)
    row = runner.execute_attempt(_planned(tmp_path), hopeless, AgentOptions(), services, tmp_path / "run3", [])
    assert hopeless.calls == runner.INFRA_RETRIES + 1 and row.status == "error" and "infrastructure" in row.reason
