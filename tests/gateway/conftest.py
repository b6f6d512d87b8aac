"""Gateway fixtures: a scripted model as the upstream, a gateway in front of it, one lease."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from statebox.policies.model import Budgets
from statebox.sandbox.gateway import Gateway
from statebox.testing.scripted_model import ScriptedModelServer, Turn

DECOY_ANTHROPIC = "sk-ant-DECOY-real-key-0123456789abcdef"
DECOY_OPENAI = "sk-proj-DECOY-real-key-0123456789abcdef"

SHELL_THEN_ANSWER = [Turn(shell="ls -la"), Turn(text="The answer is 42.")]


@pytest.fixture
def scripted():
    with ScriptedModelServer(list(SHELL_THEN_ANSWER)) as server:
        yield server


@pytest.fixture
def socket_dir():
    # Short path: the socket must also work where pytest's tmp paths are long.
    with tempfile.TemporaryDirectory(prefix="sbx-gw-") as d:
        yield Path(d)


@pytest.fixture
def gateway(scripted, monkeypatch):
    """A gateway whose 'real' keys are decoys from the host environment."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", DECOY_ANTHROPIC)
    monkeypatch.setenv("OPENAI_API_KEY", DECOY_OPENAI)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", scripted.base_url)
    monkeypatch.setenv("OPENAI_BASE_URL", scripted.openai_base_url)
    with Gateway(env=dict(os.environ)) as gw:
        yield gw


@pytest.fixture
def lease(gateway, socket_dir, tmp_path):
    lease = gateway.lease("attempt-1", socket_dir, tmp_path / "gateway.jsonl", Budgets())
    yield lease
    lease.close()
