"""claude-code and codex end to end, one scenario each run by both CLIs: the real binary in the real
sandbox, the real gateway (codex through its in-container relay), the scripted model as the gateway's
upstream. No key, no internet. What only one CLI does lives in test_claude_code_agent.py and
test_codex_config.py; what only one CLI's output supports is in its `CliUnderTest` checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _cli_agent_support import (
    BOTH_CLIS,
    EXPECTED_FLASHES,
    FULL_SCRIPT,
    SUBAGENT_CHEATS,
    SUBAGENT_MARK,
    SUBAGENT_TOOLS,
    CliUnderTest,
    assert_no_decoy_anywhere,
    gateway_records,
    shell_steps,
)
from statebox.audits.verdict import audit_run
from statebox.policies.model import load_policy
from statebox.schema import EventKind
from statebox.scoring import score_predictions
from statebox.testing.scripted_model import Turn

pytestmark = [pytest.mark.docker]
each_cli = pytest.mark.parametrize("cli", BOTH_CLIS, ids=lambda cli: cli.agent)


@each_cli
def test_the_cli_measures_the_video_and_answers(cli: CliUnderTest, tmp_path, docker_engine, monkeypatch):
    ctx, server, session = cli.run(tmp_path, docker_engine, monkeypatch, FULL_SCRIPT)
    print(f"{cli.agent} attempt: {session.duration_s:.1f}s wall, container {session.meta['container_s']:.1f}s")
    assert session.status == "ok", session.reason
    assert session.response == str(EXPECTED_FLASHES)  # from answer.txt, written by the agent
    assert session.meta["response_from"] == "answer.txt"

    # the answer reaches the scorer and scores as correct
    report = score_predictions("vstat", [ctx.item], [{"id": ctx.item.id, "response": session.response}], chance=False)
    assert report.n == 1 and report.metrics["score"] == pytest.approx(1.0)

    # the session holds every tool call and its output, in order
    steps = shell_steps(session)
    assert [cmd.split()[0] for cmd, _ in steps] == ["ls", "cat", "(curl", "echo"]
    assert ctx.workspace.video_name in steps[0][1]
    assert {0.5, 1.5} <= {round(t, 3) for t in session.frames.decoded}  # vtools' report, accounted
    assert f"frames=30 flashes={EXPECTED_FLASHES}" in steps[1][1]
    network_out = steps[2][1]
    assert "curl-failed" in network_out or "Could not resolve" in network_out
    assert "Network is unreachable" in network_out and "socket-exit=1" in network_out
    raw = (Path(ctx.attempt_dir) / cli.raw_log).read_text().splitlines()
    for event in session.events:
        if event.source == cli.raw_log:  # each parsed event points at its raw line
            assert json.loads(raw[event.line - 1])

    # every model request went through the gateway (codex: through the relay first) and was logged
    records = [r for r in gateway_records(ctx) if r.get("api") == cli.api]
    upstream = [r for r in server.requests if r.api == cli.api]
    assert len(records) == len(upstream) >= 5
    cli.session_checks(ctx, session, network_out, records)
    # the real key went upstream (the swap works) but never into the container
    header, value = cli.upstream_key
    assert all(r.headers.get(header) == value for r in upstream)
    assert_no_decoy_anywhere(ctx, server, session)
    # issue 24: the real CLI's own requests pass the gateway's allow-lists: not one refusal
    records = gateway_records(ctx)
    assert [r for r in records if "refused" in r] == []
    dropped = sorted({h for r in records for h in r.get("dropped_headers", [])})
    print("headers the gateway dropped:", dropped)
    assert not [h for h in dropped if h.startswith(("anthropic-beta=", "openai-beta="))]  # the real API needs them
    for name in ("events.jsonl", cli.raw_log, "stderr.log", "gateway.jsonl"):
        assert name in session.raw_logs


@each_cli
def test_the_cli_over_token_budget_is_an_error(cli: CliUnderTest, tmp_path, docker_engine, monkeypatch):
    policy = load_policy("default").model_copy(deep=True)
    policy.budgets.max_total_tokens = 1000
    script = [Turn(shell="ls", usage={"input_tokens": 5000, "output_tokens": 10}), Turn(text="ANSWER: 3")]
    ctx, server, session = cli.run(tmp_path, docker_engine, monkeypatch, script, policy=policy)
    assert session.status == "error"
    assert "budget exceeded" in session.reason and "limit 1000" in session.reason
    refused = [r for r in gateway_records(ctx) if r.get("refused")]
    assert refused and refused[0]["status"] == 429  # issue 24: a budget refusal is 429
    cli.budget_checks(session)


@each_cli
def test_a_crashing_cli_keeps_its_stderr(cli: CliUnderTest, tmp_path, docker_engine, monkeypatch):
    ctx, server, session = cli.run(tmp_path, docker_engine, monkeypatch, [Turn(text="never asked")],
                                   extra={"cli_args": ["--no-such-flag"]})
    assert session.status == "error"
    assert f"{cli.binary} exited with code {cli.crash_exit_code}" in session.reason and "no-such-flag" in session.reason
    stderr = (Path(ctx.attempt_dir) / "stderr.log").read_text()
    assert "no-such-flag" in stderr
    errors = [e for e in session.events if e.kind is EventKind.error]
    assert errors and "no-such-flag" in errors[-1].text and errors[-1].source == "stderr.log"
    assert not server.model.model_requests()  # it died before asking the model anything


@each_cli
def test_a_cheat_the_agent_hands_to_a_subagent_is_caught_in_the_run(cli: CliUnderTest, tmp_path, docker_engine, monkeypatch):
    """The attack that left a CLI's own files clean (tests/audits/test_subagent_transcripts.py), run by statebox:
    the session only starts a subagent (Claude Code's `Agent`, Codex's `spawn_agent`) and answers with its report;
    the subagent walks the data folders and reads an annotation file. Codex's `exec --json` stream shows only the
    spawn, never the subagent's commands; the gateway log, the independent witness, holds every request of both
    conversations, so the attempt is judged on what the subagent did."""
    ctx, server, session = cli.run(tmp_path, docker_engine, monkeypatch, SUBAGENT_CHEATS[cli.agent]("/data/annotations/answers.csv"),
                                   extra=SUBAGENT_TOOLS[cli.agent])
    assert session.status == "ok", session.error
    assert any(SUBAGENT_MARK in json.dumps(r.body.get("messages") or r.body.get("input") or [])
               and "find /data" in json.dumps(r.body) for r in server.model_requests())  # the subagent ran its walk
    [row] = audit_run(Path(ctx.attempt_dir), write=False, keep_logs=True)
    assert row.verdict.verdict == "contaminated", row.verdict.findings
    quotes = {(f.category, f.quote) for f in row.verdict.findings}
    assert any(c == "filesystem_walk" and "find /data" in q for c, q in quotes), quotes
    assert any(c == "qa_metadata" and "/data/annotations/answers.csv" in q for c, q in quotes), quotes
