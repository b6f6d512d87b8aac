"""Policy profiles: built-ins load, bad input is one clear line, `statebox policy show` prints them."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from statebox.cli import app
from statebox.errors import UserError
from statebox.policies import load_policy


def test_builtin_profiles_load_and_differ():
    default, strict = load_policy("default"), load_policy("strict")
    assert default.name == "default" and strict.name == "strict"
    assert strict.limits.time_limit_s < default.limits.time_limit_s
    assert strict.limits.memory_mb <= default.limits.memory_mb
    assert strict.reencode is True
    assert "PATH" in default.env_allow and "ANTHROPIC_API_KEY" not in default.env_allow
    assert "network" in default.prohibitions


def test_unknown_policy_names_the_builtins():
    with pytest.raises(UserError, match="unknown policy 'nope'.*default"):
        load_policy("nope")


def test_bad_yaml_reports_the_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("limits:\n  cpus: 1\n  memory_mb: [\n")
    with pytest.raises(UserError, match=r"bad.yaml:\d+: not valid YAML"):
        load_policy(bad)


def test_bad_field_is_named(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("limits:\n  memory_mb: 1\n")
    with pytest.raises(UserError, match="limits.memory_mb"):
        load_policy(bad)
    typo = tmp_path / "q.yaml"
    typo.write_text("limits:\n  memroy_mb: 512\n")
    with pytest.raises(UserError, match="memroy_mb"):
        load_policy(typo)


def test_policy_show_cli():
    runner = CliRunner()
    result = runner.invoke(app, ["policy", "show", "strict"])
    assert result.exit_code == 0, result.output
    assert "time_limit_s: 900" in result.output and "prohibitions: |" in result.output
    result = runner.invoke(app, ["policy", "show", "default", "--json"])
    assert '"memory_mb": 2048' in result.output
    result = runner.invoke(app, ["policy", "list"])
    assert "strict" in result.output
