"""`statebox export`: a real run read back by the real `inspect_ai` log reader and checked
against Harbor's ATIF rules.

The run (built once per module, two generated families, first item of each): the host-side
baselines (oracle, chance-random), the sandboxed `scripted-cheater` (audited contaminated)
and the sandboxed ReAct agent driven by the scripted model server over the real Anthropic
wire format (two bash tool calls, then an answer). The export must hold one sample /
trajectory per stored attempt, with the store's per-query scores, answers and verdicts, the
shared scorer's per (agent, dataset) numbers, and the ReAct tool calls with their outputs.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from statebox.report.export.turns import build_turns, seq_ranges

STATEBOX = [sys.executable, "-m", "statebox.cli"]
FAMILIES = ["cube_count", "shell_game"]


def _cli(args: list[str], env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(STATEBOX + args, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    from statebox.benchmarks.synthetic.suite import make_suite

    out = tmp_path_factory.mktemp("xsuite")
    make_suite(out, size="tiny", seed=0, tasks=FAMILIES, workers=1)
    return out


@pytest.fixture(scope="module")
def run(suite, tmp_path_factory, docker_engine) -> tuple[Path, dict]:
    from statebox.testing.scripted_model import ScriptedModelServer, Turn

    run_dir = tmp_path_factory.mktemp("xrun") / "run"
    script = [Turn(text="Let me look at the workspace.", shell="ls -la"), Turn(shell="python3 -c 'print(6*7)'"),
              Turn(text="ANSWER: B")]
    with ScriptedModelServer(script) as model:
        proc = _cli(["run", "--agent", "oracle", "--agent", "chance-random", "--agent", "scripted-cheater",
                     "--agent", "react", "--model", "claude-sonnet-4-6", "--suite", str(suite), "--limit", "1",
                     "--run-dir", str(run_dir), "--json"],
                    env={"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": "sk-scripted"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir, json.loads(proc.stdout)


def _stored(run_dir: Path) -> dict:
    from statebox.harness.store import ResultStore

    store = ResultStore(run_dir)
    try:
        return {r.attempt_id: r for r in store.rows()}
    finally:
        store.close()


def _truth(run_dir: Path) -> dict:
    from statebox.report.export.records import RunReader

    with RunReader(run_dir) as reader:
        return {rec.row.attempt_id: rec.target for rec in reader.records()}


# ---------------------------------------------------------------- Inspect


@pytest.mark.docker
@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_inspect_log_read_back_matches_the_store(run, tmp_path, suffix):
    from inspect_ai.log import read_eval_log

    run_dir, payload = run
    out = tmp_path / f"run{suffix}"
    proc = _cli(["export", str(run_dir), "--format", "inspect", "--out", str(out), "--json"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _stored(run_dir)
    assert json.loads(proc.stdout)["attempts"] == len(rows) == 8

    log = read_eval_log(str(out))
    assert log.status == "success"
    assert log.eval.viewer.trust_content is False  # agents' text is shown as plain text, never rendered
    assert len(log.samples) == len(rows)
    assert {s.id for s in log.samples} == set(rows)
    truth = _truth(run_dir)
    verdicts = set()
    for sample in log.samples:
        row = rows[sample.id]
        score = sample.scores["statebox"]
        assert score.value == row.metrics
        assert score.answer == row.response
        assert score.explanation.startswith(f"audit verdict: {row.verdict} (action: {row.action})")
        assert sample.metadata["verdict"] == row.verdict and sample.metadata["findings"] == row.findings
        assert (sample.metadata["agent"], sample.metadata["dataset"], sample.metadata["item_id"]) == (row.agent, row.dataset, row.item_id)
        assert sample.epoch == row.epoch + 1
        assert sample.target == truth[sample.id] != ""
        assert sample.output.completion == row.response
        verdicts.add(row.verdict)
        if row.agent == "oracle":
            assert sample.target == row.response
        if row.agent == "scripted-cheater":
            assert row.verdict == "contaminated" and "honeytoken" in score.explanation
    assert {"clean", "contaminated"} <= verdicts

    # the header's results are the shared scorer's per (agent, dataset) numbers, as `run --json` printed them
    results = {e.name: {k: m.value for k, m in e.metrics.items()} for e in log.results.scores}
    views = {e.name: e.metadata for e in log.results.scores}
    for r in payload["results"]:
        assert results[f"{r['agent']}/{r['dataset']}"] == {k: v for k, v in r["metrics"].items() if v is not None}
        # the other score views beside it, under `run --json`'s keys (scores both ways: flagged counted wrong)
        view = views[f"{r['agent']}/{r['dataset']}"]
        assert view["voided_metrics"] == r["voided_metrics"] and view["flagged_as_wrong"] == r["flagged_as_wrong"]
    # the cheater: every attempt contaminated, so every one counted wrong (None: the metric applies to no item)
    cheated = [views[f"scripted-cheater/{r['dataset']}"] for r in payload["results"] if r["agent"] == "scripted-cheater"]
    headline = [v["flagged_as_wrong"].get(v["headline"]) for v in cheated]
    assert 0.0 in headline and set(headline) <= {0.0, None}, headline

    # the ReAct attempts: instruction, both tool calls with their outputs, the final answer
    react = [s for s in log.samples if s.metadata["agent"] == "react"]
    assert len(react) == 2
    for sample in react:
        calls = [c for m in sample.messages if m.role == "assistant" for c in (m.tool_calls or [])]
        assert [c.function for c in calls] == ["bash", "bash"]
        assert calls[1].arguments == {"command": "python3 -c 'print(6*7)'"}
        outputs = {m.tool_call_id: m.text for m in sample.messages if m.role == "tool"}
        assert set(outputs) == {c.id for c in calls}
        assert "42" in outputs[calls[1].id]
        assert sample.messages[-1].role == "assistant" and sample.messages[-1].text == "ANSWER: B"
        assert sample.messages[-1].metadata["final_answer"] is True
        assert sample.model_usage["anthropic/claude-sonnet-4-6"].input_tokens == rows[sample.id].input_tokens > 0
    # the cheater's shell script and its output, one call and one result
    cheater = next(s for s in log.samples if s.metadata["agent"] == "scripted-cheater")
    assert cheater.messages[0].role == "user" and "Question:" in cheater.messages[0].text
    tool = [m for m in cheater.messages if m.role == "tool"]
    assert len(tool) == 1 and "## searching for annotation files" in tool[0].text


@pytest.mark.docker
def test_eval_written_in_batches_holds_every_sample_once(run, tmp_path, monkeypatch):
    """Samples go into the .eval zip BATCH at a time (3 here: two full batches and a remainder)."""
    from inspect_ai.log import read_eval_log, read_eval_log_sample_summaries

    from statebox.report.export import export_run, inspect_log

    run_dir, _ = run
    monkeypatch.setattr(inspect_log, "BATCH", 3)
    out = tmp_path / "batched.eval"
    assert export_run(run_dir, "inspect", out).attempts == 8
    rows = _stored(run_dir)
    summaries = read_eval_log_sample_summaries(str(out))
    assert sorted(s.id for s in summaries) == sorted(rows)
    assert sorted(s.id for s in read_eval_log(str(out)).samples) == sorted(rows)


@pytest.mark.docker
def test_inspect_view_serves_the_export(run, tmp_path):
    """`inspect view` (inspect_ai's own viewer server) lists the exported log and serves it whole."""
    import socket
    import time
    import urllib.request

    run_dir, _ = run
    logs = tmp_path / "logs"
    out = logs / "run.eval"
    proc = _cli(["export", str(run_dir), "--format", "inspect", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inspect_cli = Path(sys.executable).parent / "inspect"
    server = subprocess.Popen([str(inspect_cli), "view", "start", "--log-dir", str(logs), "--host", "127.0.0.1",
                               "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}/api"
    try:
        listing = None
        for _ in range(120):
            try:
                with urllib.request.urlopen(f"{base}/log-files", timeout=5) as r:
                    listing = json.loads(r.read())
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()[-2000:]
                time.sleep(0.5)
        assert listing is not None, "inspect view did not answer"
        [entry] = listing["files"]
        assert entry["name"] == out.resolve().as_uri() and entry["task"] == "statebox"
        with urllib.request.urlopen(f"{base}/logs/{entry['name']}", timeout=60) as r:
            served = json.loads(r.read())
        rows = _stored(run_dir)
        assert served["status"] == "success" and len(served["samples"]) == len(rows)
        assert {s["id"]: s["scores"]["statebox"]["value"] for s in served["samples"]} == {k: r.metrics for k, r in rows.items()}
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


# ---------------------------------------------------------------- ATIF

# ATIF-v1.4 (Harbor RFC 0001), written out here from the RFC's tables, independent of the
# writer's models: the keys each object may hold, and the ones it must.
_ALLOWED = {
    "root": {"schema_version", "session_id", "agent", "steps", "notes", "final_metrics", "extra"},
    "agent": {"name", "version", "model_name", "extra"},
    "step": {"step_id", "timestamp", "source", "model_name", "reasoning_effort", "message", "reasoning_content",
             "tool_calls", "observation", "metrics", "extra"},
    "tool_call": {"tool_call_id", "function_name", "arguments"},
    "observation": {"results"},
    "result": {"source_call_id", "content", "subagent_trajectory_ref"},
    "metrics": {"prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "prompt_token_ids",
                "completion_token_ids", "logprobs", "extra"},
    "final_metrics": {"total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_cost_usd",
                      "total_steps", "extra"},
}
_REQUIRED = {"root": {"schema_version", "session_id", "agent", "steps"}, "agent": {"name", "version"},
             "step": {"step_id", "source", "message"}, "tool_call": {"tool_call_id", "function_name", "arguments"},
             "observation": {"results"}}
_AGENT_ONLY = {"model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics"}


def _keys(obj: dict, kind: str) -> None:
    assert set(obj) <= _ALLOWED[kind], (kind, set(obj) - _ALLOWED[kind])
    assert _REQUIRED.get(kind, set()) <= set(obj), (kind, _REQUIRED[kind] - set(obj))


def check_atif_v14(doc: dict) -> None:
    """The RFC's rules for one trajectory document."""
    from datetime import datetime

    _keys(doc, "root")
    assert doc["schema_version"] == "ATIF-v1.4"
    assert isinstance(doc["session_id"], str) and doc["session_id"]
    _keys(doc["agent"], "agent")
    assert doc["steps"]
    for i, step in enumerate(doc["steps"], start=1):
        _keys(step, "step")
        assert step["step_id"] == i
        assert step["source"] in ("system", "user", "agent")
        assert isinstance(step["message"], str)
        if "timestamp" in step:
            datetime.fromisoformat(step["timestamp"].replace("Z", "+00:00"))
        if step["source"] != "agent":
            assert not (_AGENT_ONLY & set(step)), step
        ids = set()
        for call in step.get("tool_calls", []):
            _keys(call, "tool_call")
            assert isinstance(call["arguments"], dict)
            ids.add(call["tool_call_id"])
        if "observation" in step:
            _keys(step["observation"], "observation")
            for result in step["observation"]["results"]:
                _keys(result, "result")
                assert result.get("source_call_id") is None or result["source_call_id"] in ids
        if "metrics" in step:
            _keys(step["metrics"], "metrics")
    if "final_metrics" in doc:
        _keys(doc["final_metrics"], "final_metrics")
        assert doc["final_metrics"]["total_steps"] == len(doc["steps"])


@pytest.mark.docker
def test_atif_trajectories_follow_the_rfc_and_match_the_store(run, tmp_path):
    from statebox.report.export.atif import AtifTrajectory

    run_dir, _ = run
    out = tmp_path / "atif"
    proc = _cli(["export", str(run_dir), "--format", "atif", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _stored(run_dir)
    files = sorted(out.glob("*/agent/trajectory.json"))
    assert {f.parent.parent.name for f in files} == set(rows)
    for path in files:
        doc = json.loads(path.read_text())
        check_atif_v14(doc)
        AtifTrajectory.model_validate(doc)
        row = rows[doc["session_id"]]
        facts = doc["extra"]["statebox"]
        assert facts["score"] == row.metrics and facts["verdict"] == row.verdict and facts["response"] == row.response
        assert facts["findings"] == row.findings
        assert doc["agent"]["name"] == row.agent
        assert doc["final_metrics"]["total_prompt_tokens"] == row.input_tokens
        final = [s for s in doc["steps"] if s.get("extra", {}).get("final_answer")]
        assert final and final[-1]["message"] == row.response
        if row.agent == "react":
            assert doc["agent"]["model_name"] == "anthropic/claude-sonnet-4-6"
            calls = [(s, c) for s in doc["steps"] for c in s.get("tool_calls", [])]
            assert [c["function_name"] for _, c in calls] == ["bash", "bash"]
            step, call = calls[1]
            assert [r["source_call_id"] for r in step["observation"]["results"]] == [call["tool_call_id"]]
            assert "42" in step["observation"]["results"][0]["content"]
            # each model call's tokens sit on the agent step it produced; together they are the row's
            steps = [s["metrics"] for s in doc["steps"] if "metrics" in s]
            assert len(steps) == 3 and sum(m["prompt_tokens"] for m in steps) == row.input_tokens
            assert sum(m["completion_tokens"] for m in steps) == row.output_tokens


@pytest.mark.docker
def test_an_attempt_without_events_still_exports(run, tmp_path):
    """A folder whose events.jsonl is gone (or torn) keeps its row: question and answer, flagged."""
    import shutil

    from inspect_ai.log import read_eval_log

    from statebox.report.export import export_run

    run_dir, _ = run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    rows = _stored(copy)
    gone = next(k for k, r in rows.items() if r.agent == "oracle")
    (copy / "attempts" / gone / "events.jsonl").unlink()
    torn = next(k for k, r in rows.items() if r.agent == "chance-random")
    with open(copy / "attempts" / torn / "events.jsonl", "a") as handle:
        handle.write('{"seq": 99, "kind": "tool_out')
    export_run(copy, "inspect", tmp_path / "x.eval")
    samples = {s.id: s for s in read_eval_log(str(tmp_path / "x.eval")).samples}
    assert len(samples) == len(rows)
    assert samples[gone].metadata["events_missing"] is True and samples[gone].messages == []
    assert samples[gone].input and samples[gone].scores["statebox"].answer == rows[gone].response
    assert samples[torn].messages[0].role == "user"
    export_run(copy, "atif", tmp_path / "t")
    doc = json.loads((tmp_path / "t" / gone / "agent" / "trajectory.json").read_text())
    check_atif_v14(doc)
    assert [s["source"] for s in doc["steps"]] == ["user", "agent"] and doc["steps"][1]["message"] == rows[gone].response


def test_impossible_items_and_twins_carry_their_truth_and_kind(suite, tmp_path):
    """A run that mixed in impossible items and counterfactual twins (host-side agents, no Docker):
    their samples / trajectories hold the item's own truth and what it was built as (trust.json)."""
    from inspect_ai.log import read_eval_log

    from statebox.report.export import export_run

    run_dir = tmp_path / "run"
    proc = _cli(["run", "--agent", "oracle", "--agent", "chance-random", "--suite", str(suite), "--limit", "2",
                 "--impossible-rate", "0.5", "--counterfactual", "0.5", "--run-dir", str(run_dir), "--json"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = {t["id"]: t for t in json.loads((run_dir / "trust.json").read_text())["items"]}
    assert {t["kind"] for t in built.values()} == {"impossible", "twin"}
    rows = _stored(run_dir)
    export_run(run_dir, "inspect", tmp_path / "x.eval")
    samples = read_eval_log(str(tmp_path / "x.eval")).samples
    assert len(samples) == len(rows)
    seen = set()
    for sample in samples:
        item_id = sample.metadata["item_id"]
        trust = sample.metadata["trust"]
        assert sample.target != ""
        if item_id in built:
            t = built[item_id]
            assert trust == {"kind": t["kind"], "construction": t["construction"], "source_id": t["source"]}
            seen.add(item_id)
        else:
            assert trust is None
        if sample.metadata["agent"] == "oracle":
            assert sample.target == rows[sample.id].response
    assert seen == set(built)
    export_run(run_dir, "atif", tmp_path / "t")
    for path in (tmp_path / "t").glob("*/agent/trajectory.json"):
        doc = json.loads(path.read_text())
        check_atif_v14(doc)
        facts = doc["extra"]["statebox"]
        assert (facts["trust"] or {}).get("kind") == built.get(facts["item_id"], {}).get("kind")


# ---------------------------------------------------------------- bad input (no Docker needed)


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    from statebox.errors import UserError
    from statebox.report.export import export_run

    (tmp_path / "notarun").mkdir()
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "results.sqlite").write_bytes(b"")
    fifo = tmp_path / "fifo.eval"
    os.mkfifo(fifo)
    null = tmp_path / "null.eval"
    null.symlink_to("/dev/null")
    mine = tmp_path / "annotations.json"
    mine.write_text('{"data": {"t": []}}')
    cases = [
        (tmp_path / "missing", "inspect", tmp_path / "a.eval", "no such run folder"),
        (tmp_path / "notarun", "inspect", tmp_path / "a.eval", "not a statebox run folder"),
        (afile, "atif", tmp_path / "t", "not a folder"),
        (fake, "parquet", tmp_path / "a.eval", "unknown export format 'parquet'"),
        (fake, "inspect", tmp_path / "a.txt", ".eval or .json"),
        (fake, "inspect", Path("/proc/statebox-export/a.eval"), "cannot write there"),
        (fake, "atif", afile, "not a folder"),
        (fake, "inspect", fifo, "a FIFO (named pipe), not a regular file"),  # inspect_ai's writer put its log in its place
        (fake, "inspect", null, "a link to a character device, not a regular file"),
        (fake, "inspect", mine, "exists and is not an Inspect .json log"),  # a user's own JSON was replaced
    ]
    for run_dir, fmt, out, words in cases:
        with pytest.raises(UserError, match=re.escape(words)):
            export_run(run_dir, fmt, out)
    assert not (tmp_path / "a.eval").exists() and not (tmp_path / "t").exists()
    assert os.readlink(null) == "/dev/null" and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert mine.read_text() == '{"data": {"t": []}}'
    # through the command line: the one line and exit code 2
    for args, words in [(["export", str(tmp_path / "missing"), "--format", "inspect", "--out", str(tmp_path / "a.eval")],
                         "no such run folder"),
                        (["export", str(fake), "--format", "inspect", "--out", "/proc/statebox-export/a.eval"],
                         "cannot write there")]:
        proc = _cli(args, timeout=120)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and words in lines[0], (args, proc.stderr[-2000:])


# ---------------------------------------------------------------- the conversation reader (unit)


def test_turns_from_native_agent_events():
    """Claude-style ids, reasoning, the auditor's derived events, id-less line-by-line output."""
    events = [
        {"seq": 0, "kind": "message", "text": "Question?", "data": {"role": "user"}},
        {"seq": 1, "kind": "model_text", "text": "hmm", "data": {"thinking": True}},
        {"seq": 2, "kind": "model_text", "text": "I will list.", "data": {}},
        {"seq": 3, "kind": "tool_call", "text": "{}", "data": {"tool": "Bash", "call_id": "t1", "input": {"command": "ls"}}},
        {"seq": 4, "kind": "shell_command", "text": "ls", "data": {"tool": "Bash", "call_id": "t1"}},
        {"seq": 5, "kind": "tool_output", "text": "a.mp4", "data": {"call_id": "t1"}},
        {"seq": 6, "kind": "frames", "text": "", "data": {"decoded": [0.5]}},
        {"seq": 7, "kind": "shell_command", "text": "cat x", "data": {}},
        {"seq": 8, "kind": "tool_output", "text": "line 1", "data": {}},
        {"seq": 9, "kind": "tool_output", "text": "line 2", "data": {}},
        {"seq": 10, "kind": "message", "text": "cap_reached", "data": {"role": "harness"}},
        {"seq": 11, "kind": "final_answer", "text": "3", "data": {}},
    ]
    turns = build_turns(iter(events))
    assert [t.role for t in turns] == ["user", "assistant", "tool", "assistant", "tool", "system", "assistant"]
    first = turns[1]
    assert (first.reasoning, first.text, [(c.id, c.name, c.arguments) for c in first.calls]) == (
        "hmm", "I will list.", [("t1", "Bash", {"command": "ls"})])
    assert turns[2].call_id == "t1" and turns[2].text == "a.mp4"
    assert [(c.id, c.name) for c in turns[3].calls] == [("shell_command-7", "bash")]
    assert turns[4].call_id == "shell_command-7" and turns[4].text == "line 1\nline 2" and turns[4].seqs == [8, 9]
    assert turns[5].text.startswith("[statebox]")
    assert turns[6].final and turns[6].text == "3"
    assert seq_ranges([1, 2, 3, 7, 9, 10]) == [[1, 3], [7, 7], [9, 10]]


@pytest.mark.docker
def test_a_lone_surrogate_the_agent_printed_exports_and_reports(run, tmp_path):
    """JSON lets a string hold a lone surrogate (`"\\ud800"`), and the CLIs write one where the agent's output
    has one; Python reads it into a str that UTF-8 cannot encode. Every writer of text the agent shaped must
    still write: the Inspect log, the ATIF trajectories (their text escaped where it holds one), the report."""
    import shutil

    from inspect_ai.log import read_eval_log

    from statebox.report.export import export_run

    run_dir, _ = run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    rows = _stored(copy)
    chosen = next(k for k, r in rows.items() if r.agent == "react")
    events = copy / "attempts" / chosen / "events.jsonl"
    last = json.loads(events.read_text().splitlines()[-1])
    with open(events, "a") as handle:
        handle.write(json.dumps({"seq": last["seq"] + 1, "kind": "tool_output", "text": "frame \ud800 done"}) + "\n")
    export_run(copy, "inspect", tmp_path / "x.eval")
    assert len(read_eval_log(str(tmp_path / "x.eval")).samples) == len(rows)
    export_run(copy, "atif", tmp_path / "t")
    doc = json.loads((tmp_path / "t" / chosen / "agent" / "trajectory.json").read_text())
    check_atif_v14(doc)
    assert "frame \ud800 done" in json.dumps(doc, ensure_ascii=False)
    done = _cli(["report", str(copy), "--out", str(tmp_path / "report.html")])
    assert done.returncode == 0, done.stderr[-2000:]
