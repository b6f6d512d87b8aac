"""codex's config, what only codex has: the config.toml statebox renders points the CLI only at the
in-container relay, and `-o config.*` options reach it. No engine needed. The end-to-end scenarios
both CLIs share (measure and answer, token budget, crash) are in test_cli_agents.py."""

from __future__ import annotations

import tomllib

from statebox.agents.codex import CodexAgent, render_config
from statebox.attempt import AgentOptions


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
