"""claude-code end to end, what only claude-code does: the wall-clock limit, and the agents image both
CLIs run in. The scenarios both CLIs share (measure and answer, token budget, crash) are in
test_cli_agents.py."""

from __future__ import annotations

import pytest

from _cli_agent_support import CLAUDE
from statebox.policies.model import load_policy
from statebox.schema import EventKind
from statebox.testing.scripted_model import Turn

pytestmark = [pytest.mark.docker]


def test_claude_code_past_the_wall_clock_is_a_timeout(tmp_path, docker_engine, monkeypatch):
    policy = load_policy("default").model_copy(deep=True)
    policy.limits.time_limit_s = 8
    script = [Turn(shell="ls", delay_s=40), Turn(text="ANSWER: 1")]  # the model "hangs" past the limit
    ctx, server, session = CLAUDE.run(tmp_path, docker_engine, monkeypatch, script, policy=policy)
    assert session.status == "timeout"
    assert "wall-clock limit of 8s" in session.reason
    assert session.meta["container_s"] < 15
    assert any(e.kind is EventKind.message and e.source == "claude.stream.jsonl" for e in session.events)


def test_agents_image_runs_both_clis_as_user_agent(tmp_path, docker_engine):
    """The pinned native binaries, hardened container, no node runtime inside."""
    from statebox.sandbox.docker import ContainerSpec
    from statebox.sandbox.images import ensure_image

    spec = ContainerSpec(image=ensure_image("agents"), policy=load_policy("default"),
                         command=["sh", "-c", "id -u; claude --version; codex --version; command -v node || echo no-node"])
    result = docker_engine.run(spec, tmp_path / "out.log", tmp_path / "err.log")
    out = (tmp_path / "out.log").read_text().split("\n")
    assert result.status == "ok", (tmp_path / "err.log").read_text()
    assert out[:4] == ["1000", "2.1.330 (Claude Code)", "codex-cli 0.169.0", "no-node"]
