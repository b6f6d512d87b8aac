"""codex's config, what only codex has: the config.toml statebox renders points the CLI only at the
in-container relay, and `-o config.*` options reach it. No engine needed. The end-to-end scenarios
both CLIs share (measure and answer, token budget, crash) are in test_cli_agents.py."""

from __future__ import annotations

import json
import subprocess
import tomllib

import pytest

from statebox.agents.codex import EFFORTS, CodexAgent, render_config
from statebox.attempt import AgentOptions
from statebox.errors import UserError
from statebox.sandbox.images import PACKAGE_ROOT


def test_config_points_only_at_the_relay():
    text = render_config(model="gpt-5", effort="low", relay_port=18080, max_retries=2,
                         extra={"model_verbosity": "low"})
    cfg = tomllib.loads(text)
    assert cfg["model_provider"] == "statebox" and cfg["model"] == "gpt-5"
    provider = cfg["model_providers"]["statebox"]
    assert provider["base_url"] == "http://127.0.0.1:18080/v1" and provider["wire_api"] == "responses"
    assert provider["env_key"] == "OPENAI_API_KEY"
    assert cfg["analytics"]["enabled"] is False and cfg["features"]["plugins"] is False
    assert cfg["web_search"] == "disabled" and cfg["model_reasoning_effort"] == "low"
    assert cfg["model_verbosity"] == "low"


def test_config_options_from_the_command_line():
    agent = CodexAgent(AgentOptions(model="gpt-5", extra={"config.model_verbosity": "low",
                                                          "config.hide_agent_reasoning": "true",
                                                          "max_retries": "1"}))
    cfg = tomllib.loads(agent.config(18080))
    assert cfg["model_verbosity"] == "low" and cfg["hide_agent_reasoning"] is True
    assert cfg["model_providers"]["statebox"]["request_max_retries"] == 1


def test_every_effort_the_pinned_cli_offers_is_taken(tmp_path):
    """`--effort max` on GPT-6.1 Sol was refused by statebox ("must be one of minimal..xhigh") though the pinned CLI
    offers it: the levels statebox takes are every one the CLI's own model catalog names."""
    cli = PACKAGE_ROOT / ".cache/agent-clis/image/codex"
    if not cli.exists():
        pytest.skip("the pinned Codex CLI is not installed here (`make setup` installs it, and CI runs make setup)")
    out = subprocess.run([str(cli), "debug", "models"], capture_output=True, timeout=60, check=True,
                         env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}).stdout
    offered = {level["effort"] for model in json.loads(out)["models"] for level in model["supported_reasoning_levels"]}
    assert {"low", "max"} <= offered and offered <= set(EFFORTS)
    for effort in offered:
        assert tomllib.loads(CodexAgent(AgentOptions(effort=effort)).config(18080))["model_reasoning_effort"] == effort
    with pytest.raises(UserError, match="codex effort must be one of"):
        CodexAgent(AgentOptions(effort="extreme"))
