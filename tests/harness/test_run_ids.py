"""Run ids: `RunConfig.fingerprint()` is the one place an id is made, and the ids `statebox run` made
before it existed stay the same, so rerunning an old command still finds (and resumes) its folder
`runs/<id>`. The expected ids below were printed by the CLI before the rule moved into plan.py
(commands/run.py's own fingerprint), for these exact commands and this exact annotation path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import statebox.commands.run as run_command
from statebox.cli import app
from statebox.harness.plan import DatasetSpec, RunConfig, run_id_for

DATA = Path("/tmp/statebox-run-ids/vstat.json")  # the ids hash the annotation's absolute path

IDS_BEFORE_THE_MOVE = {
    "plain": (["--agent", "oracle", "--bench", "vstat"], "a105076a9f"),
    "two_agents_limit_epochs": (["--agent", "oracle", "--agent", "chance-random", "--bench", "vstat", "--limit", "5",
                                 "--epochs", "3"], "09189e6ce3"),
    "model_options": (["--agent", "mllm", "--bench", "vstat", "--model", "claude-x", "--effort", "high", "--option", "k=v",
                       "--no-timestamps"], "1ececd23ac"),
    "one_frames": (["--agent", "mllm", "--bench", "vstat", "--frames", "16"], "6e2fb44e3d"),
    "sweep": (["--agent", "mllm", "--agent", "oracle", "--bench", "vstat", "--frames", "8,16", "--fps", "1,2"], "a48a393b15"),
    "sample": (["--agent", "oracle", "--bench", "vstat", "--sample", "per-a=2", "--seed", "7"], "c47b38ea15"),
    "trust": (["--agent", "oracle", "--bench", "vstat", "--impossible-rate", "0.2", "--counterfactual", "0.1"], "b6f02dbe7d"),
    "streaming": (["--agent", "oracle", "--bench", "vcbench", "--streaming", "session"], "4f26f36d51"),
    "policy": (["--agent", "oracle", "--bench", "vstat", "--policy", "strict"], "191a5262ba"),
}


@pytest.fixture()
def planned_configs(monkeypatch: pytest.MonkeyPatch) -> list[RunConfig]:
    """`statebox run` up to the point it would execute: the configs it made (nothing runs)."""
    DATA.parent.mkdir(exist_ok=True)
    DATA.write_text(json.dumps([{"id": "a", "video": "v.mp4", "question": "How many?", "answer": 3}]))
    made: list[RunConfig] = []
    monkeypatch.setattr(run_command, "execute_run", lambda config, run_dir, **_kw: made.append(config))
    monkeypatch.setattr(run_command, "_refuse_foreign_engine", lambda config: None)
    return made


@pytest.mark.parametrize("name", sorted(IDS_BEFORE_THE_MOVE))
def test_the_cli_makes_the_ids_it_made_before(name: str, planned_configs: list[RunConfig], tmp_path: Path) -> None:
    flags, expected = IDS_BEFORE_THE_MOVE[name]
    result = CliRunner().invoke(app, ["run", *flags, "--data", str(DATA), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    (config,) = planned_configs
    assert config.run_id == expected
    assert config.fingerprint() == expected  # the stored config gives its own id back


def test_without_a_run_dir_the_folder_is_named_by_the_id(planned_configs: list[RunConfig], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    seen: list[Path] = []
    monkeypatch.setattr(run_command, "execute_run", lambda config, run_dir, **_kw: seen.append(Path(run_dir)))
    flags, expected = IDS_BEFORE_THE_MOVE["trust"]
    assert CliRunner().invoke(app, ["run", *flags, "--data", str(DATA)]).exit_code == 0
    assert seen == [Path("runs") / expected]


def _config(**fields: object) -> RunConfig:
    spec = DatasetSpec(label="vstat", bench="vstat", data="/data/vstat.json")
    return RunConfig.model_validate({"run_id": "", "agents": ["oracle"], "datasets": [spec], **fields})


def test_what_does_not_define_a_run_leaves_the_id_alone() -> None:
    base = _config().fingerprint()
    assert _config(concurrency=8).fingerprint() == base
    assert _config(suite="/somewhere/else").fingerprint() == base
    assert _config(run_id="anything").fingerprint() == base


@pytest.mark.parametrize("change", [{"epochs": 2}, {"limit": 3}, {"policy": "strict"}, {"agents": ["oracle", "chance-random"]},
                                    {"agent_limits": {"oracle": 2}}, {"agent_options": {"oracle": {"model": "m"}}},
                                    {"streaming": "session"}])
def test_what_defines_a_run_changes_the_id(change: dict[str, object]) -> None:
    assert _config(**change).fingerprint() != _config().fingerprint()


def test_another_command_never_shares_an_id_with_run() -> None:
    config = _config()
    assert len({config.fingerprint(), config.fingerprint(command="tracker eval"), config.fingerprint(command="demo")}) == 3


def test_tracker_eval_keeps_its_ids() -> None:
    """`tracker eval`'s recipe before the move: per-agent options and its command's name."""
    spec = DatasetSpec(label="cube_count", bench="vstat", data="/suite/cube_count.json")
    options = {"tracker": {"weights": "/w.pt", "extra": {"stride": 1}}, "chance-frequency": {}}
    config = RunConfig(run_id="", agents=["tracker", "chance-frequency"], datasets=[spec], agent_options=options)
    legacy = run_id_for({"agents": ["tracker", "chance-frequency"], "datasets": [spec.model_dump()], "limit": None,
                         "epochs": 1, "policy": "default", "options": options, "command": "tracker eval"})
    assert config.fingerprint(command="tracker eval") == legacy
