"""Output floods from inside the real container, through every agent kind that runs in a sandbox.

The attack (issue 12): an agent prints without end. Before the caps, the shell agent's
line callback recorded every stdout line into events.jsonl and kept every event in memory
(4 GB on disk, 13.8 GB of host memory). Here each agent's sandboxed process floods both
output streams of the process the host is reading:

- the shell agent prints straight to the container's stdout/stderr;
- claude-code and codex run the flood in their Bash tool, and the tool writes to the CLI's
  own stdout/stderr (`/proc/<cli pid>/fd/1`: same uid), i.e. into `claude.stream.jsonl` /
  `codex.jsonl` and `stderr.log`, past the CLI's own output truncation;
- react's bash tool floods its `docker exec` output;
- the tracker's command (replaced by the flood) prints SBTRACK lines and fills its /out
  mount, which is a folder of the attempt on the host.

Each test then checks the host side only: every file in the attempt folder within its cap
(events.jsonl exactly one marker), the session bounded, and no container left behind. The
policy's caps are set small so they are hit quickly; the flood is a few hundred MB of
`os.write` from memory, fast on any box. No assertion depends on speed.
"""

from __future__ import annotations

import json
import secrets
import tracemalloc
from pathlib import Path

import pytest

from statebox.capped_log import cap_marker, is_marker
from statebox.policies.model import Recording, load_policy
from statebox.schema import EventKind

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

KB, MB = 1024, 1024 * 1024
CAPS = Recording(event_bytes=4 * KB, events_bytes=256 * KB, raw_line_bytes=8 * KB, raw_log_bytes=1 * MB,
                 exec_output_bytes=256 * KB, session_events=400)
STDOUT_LINES_MB, STDOUT_NOLINE_MB, STDERR_MB = 160, 32, 32
FLOOD_MB = STDOUT_LINES_MB + STDOUT_NOLINE_MB + STDERR_MB
RUN_ID = "flood-" + secrets.token_hex(4)  # unique attempt ids: the leftover-container check sees only ours
GATEWAY_LOG_BOUND = 16 * MB  # gateway.jsonl is the gateway's own log (not these caps): it must not follow the flood

# Finds the outermost process of our uid above this one (the CLI, or the shell agent's bash, or
# the exec'd `timeout`), and floods its stdout and stderr: lines, one line with no end, then stderr.
FLOOD_PY = r"""
import os
def status(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
top = pid = os.getpid()
while True:
    parent = status(pid, "PPid")
    if parent <= 1 or status(parent, "Uid") != os.getuid():
        break
    top = pid = parent
try:
    out, err = os.open(f"/proc/{top}/fd/1", os.O_WRONLY), os.open(f"/proc/{top}/fd/2", os.O_WRONLY)
    route = f"/proc/{top}/fd"
except OSError as exc:
    out, err, route = 1, 2, f"own stdout ({exc})"
print("flood route:", route, flush=True)
block = (b"A" * 999 + b"\n") * 1024
for _ in range(%(lines)d):
    os.write(out, block)
nul = b"\0" * (1 << 20)
for _ in range(%(noline)d):
    os.write(out, nul)
os.write(out, b"\n")
for _ in range(%(err)d):
    os.write(err, block)
open("answer.txt", "w").write("3\n")
print("flooded via", route, flush=True)
""" % {"lines": STDOUT_LINES_MB, "noline": STDOUT_NOLINE_MB, "err": STDERR_MB}
FLOOD_CMD = "python3 - <<'EOF'\n" + FLOOD_PY + "\nEOF"


def flood_policy():
    base = load_policy("default")
    limits = base.limits.model_copy(update={"time_limit_s": 240})
    return base.model_copy(update={"recording": CAPS, "limits": limits})


def check_attempt_folder(attempt_dir: Path, docker_engine, attempt_id: str, caps: Recording = CAPS,
                         flood: str = f"{FLOOD_MB} MB") -> dict[str, int]:
    """Every file within its cap, events.jsonl readable with at most one marker, no container left."""
    CAPS = caps  # noqa: N806 - the caps this attempt ran under
    sizes: dict[str, int] = {}
    for path in sorted(Path(attempt_dir).rglob("*")):
        assert not path.is_symlink(), f"{path} is a link"
        if not path.is_file():
            continue
        rel = str(path.relative_to(attempt_dir))
        sizes[rel] = size = path.stat().st_size
        if rel == "events.jsonl":
            assert size <= CAPS.events_bytes, (rel, size)
        elif rel == "gateway.jsonl":
            assert size <= GATEWAY_LOG_BOUND, (rel, size)
        else:
            assert size <= CAPS.raw_log_bytes, (rel, size)
        if rel.endswith((".jsonl", ".log")) and rel != "gateway.jsonl":
            longest = max((len(line) for line in path.read_bytes().split(b"\n")), default=0)
            bound = CAPS.event_bytes if rel == "events.jsonl" else CAPS.raw_line_bytes
            assert longest <= bound, (rel, longest)
    events = [json.loads(line) for line in (Path(attempt_dir) / "events.jsonl").read_bytes().splitlines()]
    markers = [e for e in events if e.get("data", {}).get("statebox") == "cap_reached" and e["data"]["file"] == "events.jsonl"]
    assert len(markers) <= 1
    left = docker_engine.api.containers(all=True, filters={"label": f"statebox.attempt={attempt_id}"})
    assert not left, f"{len(left)} container(s) left behind"
    print(f"{attempt_id}: flood {flood} in; on the host: "
          + ", ".join(f"{name} {size / KB:.0f} KB" for name, size in sizes.items()))
    return sizes


def assert_audit_reads(attempt_dir: Path) -> None:
    from statebox.audits.verdict import audit_attempt

    verdict = audit_attempt(attempt_dir, flood_policy())
    assert verdict.verdict in ("clean", "suspicious", "contaminated")


# ---------------------------------------------------------------- shell agent (scripted)


def test_shell_agent_flood_is_capped(tmp_path, docker_engine):
    from statebox.attempt import AgentOptions, AttemptContext, SecretFacts
    from statebox.agents.scripted import ShellAgent
    from statebox.sandbox.workspace import prepare_workspace
    from statebox.schema import Attempt, Item

    from tests.agents._cli_agent_support import make_video

    policy = flood_policy()
    video = make_video(tmp_path / "flood_clip_original.mp4")
    item = Item(id="flood-1", benchmark="vstat", video=str(video), question="How many flashes?", answer_type="number")
    workspace = prepare_workspace(item, item.queries[0], video, policy, root=tmp_path / "ws")
    attempt = Attempt(run_id=RUN_ID, agent="shell", item_id=item.id)
    ctx = AttemptContext(attempt=attempt, item=item, query=item.queries[0],
                         attempt_dir=tmp_path / "attempts" / attempt.attempt_id, policy=policy,
                         options=AgentOptions(extra={"command": FLOOD_CMD}),
                         secret=SecretFacts("flood_clip_original.mp4", "flood_clip_original", item.id, "d"),
                         workspace=workspace, engine=docker_engine)
    tracemalloc.start()
    try:
        session = ShellAgent(ctx.options).run(ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        workspace.cleanup()
    print(f"shell agent: {FLOOD_MB} MB flood, host Python allocations peaked at {peak / MB:.1f} MB, "
          f"{len(session.events)} events in the session")
    sizes = check_attempt_folder(ctx.attempt_dir, docker_engine, attempt.attempt_id)
    assert session.response == "3"  # answer.txt, written after the flood
    assert cap_marker(ctx.attempt_dir / "stdout.log") is not None
    assert cap_marker(ctx.attempt_dir / "stderr.log") is not None
    assert sizes["events.jsonl"] > CAPS.events_bytes // 2  # the flood did reach the recorder
    recording = session.meta["recording"]
    assert recording["events_capped"] and set(recording["capped_logs"]) == {"stdout.log", "stderr.log"}
    assert len(session.events) <= CAPS.session_events
    assert session.events[-1].kind is EventKind.final_answer
    assert peak < 64 * MB  # a 224 MB flood; memory follows the caps (about 1 MB each here)
    assert_audit_reads(ctx.attempt_dir)


# ---------------------------------------------------------------- claude-code and codex (real CLIs)


# The CLIs' own processes are not reachable through /proc from their tools (EACCES), so what
# reaches the host is what the CLI itself prints: every tool result, as big as the CLI lets it be.
# A burst of tool calls with large outputs fills the CLI's raw log past its cap.
BURST_CMD = "python3 -c \"import sys; sys.stdout.write(('B' * 199 + chr(10)) * 1000)\""
BURSTS = 14
CLI_CAPS = CAPS.model_copy(update={"raw_line_bytes": 64 * KB, "raw_log_bytes": 256 * KB, "events_bytes": 128 * KB})


def _run_cli(agent_name: str, model: str, tmp_path, docker_engine, monkeypatch):
    from statebox.agents.base import make_agent
    from statebox.testing.scripted_model import ScriptedModelServer, Turn

    from tests.agents._cli_agent_support import gateway_for, make_context

    script = [Turn(shell=FLOOD_CMD)] + [Turn(shell=BURST_CMD)] * BURSTS + [Turn(text="I flooded.\nANSWER: 3")]
    server = ScriptedModelServer(script).start()
    gateway = gateway_for(server, monkeypatch)
    policy = flood_policy().model_copy(update={"recording": CLI_CAPS})
    try:
        ctx = make_context(tmp_path, agent_name, docker_engine, gateway, model=model, policy=policy)
        ctx.attempt = ctx.attempt.model_copy(update={"run_id": RUN_ID})  # its own attempt id (label)
        session = make_agent(agent_name, ctx.options).run(ctx)
    finally:
        gateway.close()
        server.stop()
        try:
            ctx.workspace.cleanup()
        except Exception:  # noqa: BLE001
            pass
    return ctx, session


@pytest.mark.parametrize("agent_name,model,raw_log", [
    ("claude-code", "claude-sonnet-4-6", "claude.stream.jsonl"),
    ("codex", "gpt-5-codex", "codex.jsonl"),
])
def test_cli_agent_flood_is_capped(agent_name, model, raw_log, tmp_path, docker_engine, monkeypatch):
    ctx, session = _run_cli(agent_name, model, tmp_path, docker_engine, monkeypatch)
    print(f"{agent_name}: status={session.status} reason={session.reason[:200]!r} response={session.response!r}")
    sizes = check_attempt_folder(ctx.attempt_dir, docker_engine, ctx.attempt.attempt_id, CLI_CAPS,
                                 flood=f"{FLOOD_MB} MB (tool stdout) + {BURSTS} x 200 KB tool results")
    assert raw_log in sizes
    # the CLI's own output (tool results) filled its raw log to the cap: one marker, nothing after it
    marker = cap_marker(ctx.attempt_dir / raw_log)
    assert marker is not None and marker["cap_bytes"] == CLI_CAPS.raw_log_bytes
    assert session.response == "3"  # answer.txt, written by the first (224 MB) flood
    capped = set(session.meta["recording"]["capped_logs"])
    assert raw_log in capped
    notes = [e for e in session.events if is_marker(e.data) and e.data.get("file") in capped]
    assert len(notes) == len(capped)
    assert len(session.events) <= CLI_CAPS.session_events
    assert_audit_reads(ctx.attempt_dir)


# ---------------------------------------------------------------- react (tools by docker exec)


def test_react_tool_flood_is_capped(tmp_path, docker_engine):
    from statebox.attempt import AgentOptions, AttemptContext, SecretFacts
    from statebox.agents.react import ReactAgent
    from statebox.sandbox.gateway import Gateway
    from statebox.sandbox.workspace import prepare_workspace
    from statebox.schema import Attempt, Item, Query
    from statebox.testing.scripted_model import ScriptedModelServer, Turn

    from tests.agents._cli_agent_support import make_video

    policy = flood_policy()
    video = make_video(tmp_path / "flood_clip_original.mp4")
    item = Item(id="flood-r", benchmark="vstat", video=str(video), question="How many flashes?", answer_type="number")
    workspace = prepare_workspace(item, Query(), video, policy, root=tmp_path / "ws")
    attempt = Attempt(run_id=RUN_ID, agent="react", item_id=item.id)
    ctx = AttemptContext(attempt=attempt, item=item, query=Query(), attempt_dir=tmp_path / "attempt", policy=policy,
                         options=AgentOptions(),
                         secret=SecretFacts("flood_clip_original.mp4", "flood_clip_original", item.id, "d"),
                         workspace=workspace, engine=docker_engine)
    script = [Turn(shell=FLOOD_CMD),
              Turn(tool="python", arguments={"code": "import sys\nsys.stdout.write('Z' * 50_000_000)"}),
              Turn(tool="submit", arguments={"answer": "3"})]
    try:
        with ScriptedModelServer(script) as upstream, Gateway(
            env={}, anthropic_base_url=upstream.base_url, openai_base_url=upstream.openai_base_url,
            anthropic_api_key="sk-ant-decoy", openai_api_key="sk-decoy",
        ) as gateway:
            ctx.gateway = gateway
            session = ReactAgent(AgentOptions(model="claude-sonnet-4-6")).run(ctx)
            bodies = [json.dumps(r.body) for r in upstream.model_requests()]
    finally:
        workspace.cleanup()
    print(f"react: status={session.status} reason={session.reason!r}; largest model request "
          f"{max(len(b) for b in bodies) / KB:.0f} KB")
    assert session.status == "ok" and session.response == "3", session.reason
    check_attempt_folder(ctx.attempt_dir, docker_engine, attempt.attempt_id)
    outputs = [e for e in session.events if e.kind is EventKind.tool_output and e.data.get("tool") in ("bash", "python")]
    assert len(outputs) == 2
    assert all(len(e.model_dump_json()) <= CAPS.event_bytes for e in outputs)
    assert any("flooded via" in b for b in bodies)  # the exec output's tail (head + tail kept) reached the model
    assert max(len(b) for b in bodies) < 1 * MB  # what the model was sent stays bounded too
    assert_audit_reads(ctx.attempt_dir)


# ---------------------------------------------------------------- tracker (its command replaced by a flood)

TRACKER_FLOOD = r"""
import json, os
line = "SBTRACK " + json.dumps({"event": "frames", "decoded": [i / 10 for i in range(2000)]})
for _ in range(20000):
    print(line)
    print("SBTRACK " + json.dumps({"event": "error", "message": "E" * 3000}))
with open("/out/tracks.jsonl", "w") as fh:
    for _ in range(8):
        fh.write(("x" * 1023 + "\n") * 1024)
os.symlink("/etc/passwd", "/out/network.jsonl")
with open("/out/answer.json", "w") as fh:
    json.dump({"response": "3", "program": "flood", "explanation": "y" * 5_000_000}, fh)
print("SBTRACK " + json.dumps({"event": "answer", "response": "3", "program": "flood", "explanation": "ok"}))
"""


def test_tracker_flood_is_capped(tmp_path, docker_engine, monkeypatch):
    from statebox.attempt import AgentOptions, AttemptContext, SecretFacts
    from statebox.agents.tracker import TrackerAgent
    from statebox.sandbox.workspace import prepare_workspace
    from statebox.schema import Attempt, Item
    from statebox.tracker import container as tc

    from tests.agents._cli_agent_support import make_video

    try:
        tc.tracker_image()
        agent = TrackerAgent(AgentOptions())
    except Exception as exc:  # noqa: BLE001 - the tracker image/weights are optional parts of a checkout
        pytest.skip(f"tracker image or weights unavailable: {exc}")
    monkeypatch.setattr(TrackerAgent, "command", lambda self, weights, **_options: [tc.PYTHON, "-c", TRACKER_FLOOD])
    policy = flood_policy()
    video = make_video(tmp_path / "flood_clip_original.mp4")
    item = Item(id="flood-t", benchmark="vstat", video=str(video), question="How many cubes?", answer_type="number")
    workspace = prepare_workspace(item, item.queries[0], video, policy, root=tmp_path / "ws")
    attempt = Attempt(run_id=RUN_ID, agent="tracker", item_id=item.id)
    ctx = AttemptContext(attempt=attempt, item=item, query=item.queries[0], attempt_dir=tmp_path / "attempt",
                         policy=policy, options=AgentOptions(),
                         secret=SecretFacts("flood_clip_original.mp4", "flood_clip_original", item.id, "d"),
                         workspace=workspace, engine=docker_engine)
    try:
        session = agent.run(ctx)
    finally:
        workspace.cleanup()
    print(f"tracker: status={session.status} reason={session.reason!r} response={session.response!r}")
    sizes = check_attempt_folder(ctx.attempt_dir, docker_engine, attempt.attempt_id,
                                 flood="~300 MB of SBTRACK lines + 13 MB into /out + a planted link")
    assert "tracker-out/network.jsonl" not in sizes  # the planted link was removed, never followed
    assert cap_marker(ctx.attempt_dir / "tracker-out" / "tracks.jsonl") is not None
    assert cap_marker(ctx.attempt_dir / "stdout.log") is not None
    assert len(session.frames.decoded) <= 100_000
    assert len(session.events) <= CAPS.session_events
    assert_audit_reads(ctx.attempt_dir)


# ---------------------------------------------------------------- host-side agents (mllm; unit level)


def test_mllm_huge_model_reply_is_capped(tmp_path):
    from statebox.attempt import AgentOptions
    from statebox.agents.mllm import MllmAgent
    from statebox.testing.scripted_model import Turn

    from tests.agents.video_agents_support import make_clip, make_ctx, scripted_gateway

    clip = make_clip(tmp_path / "clip.mp4")
    options = AgentOptions(model="claude-sonnet-4-6", frames=2, extra={"vtools": "local"})
    with scripted_gateway([Turn(text="B" * 3_000_000 + "\nANSWER: 3")]) as (_, gateway):
        ctx = make_ctx("mllm", tmp_path, gateway, clip, options=options)
        ctx.policy = flood_policy()
        session = MllmAgent(options).run(ctx)
    assert session.status == "ok" and session.response == "3"
    path = Path(ctx.attempt_dir) / "events.jsonl"
    assert path.stat().st_size <= CAPS.events_bytes
    assert max(len(line) for line in path.read_bytes().split(b"\n")) <= CAPS.event_bytes
    assert session.meta["recording"]["events_clipped"] >= 1


@pytest.mark.parametrize("module", ["baselines", "cli_common", "mllm", "react", "scripted", "tracker", "video_agent"])
def test_every_agent_records_under_the_policy_caps(module):
    """Every agent that records passes the policy's caps to its recorder (one capped recorder for all)."""
    import importlib
    import inspect

    source = inspect.getsource(importlib.import_module(f"statebox.agents.{module}"))
    calls = source.count("SessionRecorder(")
    assert calls >= 1 and source.count("limits=ctx.policy.recording") >= calls
