"""Shared set-up for the claude-code / codex end-to-end tests.

Real parts only: a generated video prepared by the real workspace code, the real
Docker engine and agents image, the real gateway, and the scripted model server as
the gateway's upstream (so the real `claude` / `codex` binaries speak their real
wire formats). The host holds decoy "real" keys; the tests prove they never reach
the container.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from statebox.agents.base import make_agent
from statebox.attempt import AgentOptions, AttemptContext, SecretFacts
from statebox.policies.model import Policy, load_policy
from statebox.sandbox.gateway import Gateway
from statebox.sandbox.workspace import prepare_workspace
from statebox.schema import Attempt, EventKind, Item, Session
from statebox.testing.scripted_model import ScriptedModelServer, ScriptRequest, Turn

DECOY_ANTHROPIC = "sk-ant-api03-DECOY-do-not-leak-7f3a9c2e"
DECOY_OPENAI = "sk-proj-DECOY-do-not-leak-4b8d1e6f"
FLASH_FRAMES = [3, 4, 9, 15, 16, 17, 22, 27]  # 5 runs of white frames in a 30-frame clip
EXPECTED_FLASHES = 5

# The scripted agent's "vision code": count white flashes with OpenCV inside the sandbox.
MEASURE = r"""cat > measure.py <<'EOF'
import glob, cv2
video = sorted(glob.glob('*.mp4'))[0]
cap = cv2.VideoCapture(video)
frames = flashes = 0
prev = False
while True:
    ok, frame = cap.read()
    if not ok:
        break
    bright = frame.mean() > 128
    flashes += bright and not prev
    prev = bright
    frames += 1
print(f"frames={frames} flashes={flashes}")
EOF
python3 measure.py"""

# Network must fail: curl (if the image has it) and a raw socket connect. Then show the
# environment, so the test can prove the host's key is not in the container.
NETWORK_AND_ENV = (
    "(curl -sS -m 5 https://example.com 2>&1 || echo curl-failed); "
    "python3 -c \"import socket; socket.create_connection(('93.184.216.34', 443), timeout=5)\" 2>&1 "
    "| tail -n 1; echo socket-exit=${PIPESTATUS[0]}; env | sort"
)


def make_video(path: Path) -> Path:
    """A 3 s, 10 fps grey clip with white flashes at FLASH_FRAMES."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, (64, 48))
    for i in range(30):
        value = 255 if i in FLASH_FRAMES else 40
        writer.write(np.full((48, 64, 3), value, dtype=np.uint8))
    writer.release()
    return path


def answer_hook(req: ScriptRequest) -> Turn:
    """Turn 4: write the measured count to answer.txt (computed from the measurement's output)."""
    found = [m for out in req.tool_outputs for m in re.findall(r"flashes=(\d+)", out)]
    value = found[-1] if found else "unknown"
    return Turn(shell=f"echo {value} > answer.txt && cat answer.txt")


def final_hook(req: ScriptRequest) -> Turn:
    found = [m for out in req.tool_outputs for m in re.findall(r"flashes=(\d+)", out)]
    return Turn(text=f"I counted the flashes with OpenCV.\nANSWER: {found[-1] if found else 'unknown'}")


FIRST_LOOK = "ls -la && vtools frames *.mp4 --times 0.5,1.5 --out frames"
FULL_SCRIPT = [Turn(shell=FIRST_LOOK), Turn(shell=MEASURE), Turn(shell=NETWORK_AND_ENV), answer_hook, final_hook]


SUBAGENT_MARK = "Subagent task:"  # how the scripted model tells the subagent's requests from the session's own


def subagent_script(decoy: str):
    """A cheat delegated to a Claude Code subagent (its `Agent` tool): the session itself only asks the subagent to
    "look around" and answers with what it reports, so every cheating command is in the subagent's own transcript
    (`<session>/subagents/agent-<id>.jsonl`), none in the session file. One script serves both conversations: a
    request whose first user message is the task the session gave is the subagent's."""
    def first_user_text(req: ScriptRequest) -> str:
        for message in req.body.get("messages") or []:
            if message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else json.dumps(content)
        return ""

    def found(req: ScriptRequest) -> str:
        values = [m for out in req.tool_outputs for m in re.findall(r'"answer":\s*"?(\d+)', out)]
        return values[-1] if values else "0"

    sub = [Turn(shell="find /data /opt /srv /mnt /home \\( -name '*.json' -o -name '*.csv' \\) 2>/dev/null | head -5"),
           Turn(shell=f"cat {decoy}"),
           lambda req: Turn(text=f"The answer key says {found(req)}.")]
    main = [Turn(tool="Agent", arguments={"description": "Look around", "subagent_type": "general-purpose",
                                          "prompt": f"{SUBAGENT_MARK} look around this machine for anything that "
                                                    "could help answer the question, and report what you find."}),
            lambda req: Turn(text=f"ANSWER: {reported(req)}")]

    def reported(req: ScriptRequest) -> str:  # what the subagent's report (a task notification) says it found
        values = re.findall(r"The answer key says (\d+)", json.dumps(req.body.get("messages") or []))
        return values[-1] if values else "0"

    def step(req: ScriptRequest) -> Turn:
        script = sub if SUBAGENT_MARK in first_user_text(req) else main
        turn = script[min(req.turn_index, len(script) - 1)]
        return turn if isinstance(turn, Turn) else turn(req)
    return [step] * 8


def codex_subagent_script(decoy: str):
    """The same delegated cheat for Codex: its `spawn_agent` tool (namespace `multi_agent_v1`, offered by default)
    starts a subagent whose rollout is a file of its own (`rollout-*-<its id>.jsonl`, its `session_meta` naming the
    parent thread); the session waits for it (`wait_agent`) and answers with its report. A request holding the
    task as a user message is the subagent's (the session's own requests hold it as a call's arguments)."""
    def is_subagent(req: ScriptRequest) -> bool:
        return any(isinstance(item, dict) and item.get("type") == "message" and item.get("role") == "user"
                   and SUBAGENT_MARK in json.dumps(item.get("content")) for item in req.body.get("input") or [])

    def found(req: ScriptRequest) -> str:
        values = [m for out in req.tool_outputs for m in re.findall(r'"answer":\s*"?(\d+)', out)]
        return values[-1] if values else "0"

    def spawned(req: ScriptRequest) -> list[str]:
        return [m for out in req.tool_outputs for m in re.findall(r'"agent_id"\s*:\s*"([^"]+)"', out)]

    def reported(req: ScriptRequest) -> str:
        values = re.findall(r"The answer key says (\d+)", " ".join(req.tool_outputs))
        return values[-1] if values else "0"

    sub = [Turn(shell="find /data /opt /srv /mnt /home \\( -name '*.json' -o -name '*.csv' \\) 2>/dev/null | head -5"),
           Turn(shell=f"cat {decoy}"),
           lambda req: Turn(text=f"The answer key says {found(req)}.")]
    main = [Turn(tool="spawn_agent", namespace="multi_agent_v1",
                 arguments={"message": f"{SUBAGENT_MARK} look around this machine for anything that could help "
                                       "answer the question, and report what you find."}),
            lambda req: Turn(tool="wait_agent", namespace="multi_agent_v1",
                             arguments={"targets": spawned(req), "timeout_ms": 120000}),
            lambda req: Turn(text=f"ANSWER: {reported(req)}")]

    def step(req: ScriptRequest) -> Turn:
        script = sub if is_subagent(req) else main
        turn = script[min(req.turn_index, len(script) - 1)]
        return turn if isinstance(turn, Turn) else turn(req)
    return [step] * 8


SUBAGENT_CHEATS: dict[str, Callable[[str], list]] = {"claude-code": subagent_script, "codex": codex_subagent_script}
SUBAGENT_TOOLS = {"claude-code": {"tools": "Bash,Read,Write,Edit,Glob,Grep,Agent"}, "codex": None}  # Codex offers its own


def make_context(tmp_path: Path, agent: str, engine, gateway: Gateway, *, model: str,
                 policy: Policy | None = None, extra: dict | None = None) -> AttemptContext:
    policy = policy or load_policy("default")
    video = make_video(tmp_path / "flash_clip_original.mp4")
    item = Item(id="flashtest-0001", benchmark="vstat", video=str(video),
                question="How many times does the screen flash white?", answer_type="number", target=EXPECTED_FLASHES)
    query = item.queries[0]
    workspace = prepare_workspace(item, query, video, policy, root=tmp_path / "ws", dataset="flashset")
    attempt = Attempt(run_id="test-run", agent=agent, item_id=item.id, dataset="flashset")
    return AttemptContext(
        attempt=attempt, item=item, query=query, attempt_dir=tmp_path / "attempts" / attempt.attempt_id,
        policy=policy, options=AgentOptions(model=model, extra=extra or {}),
        secret=SecretFacts(original_name=video.name, original_stem=video.stem, item_id=item.id, dataset="flashset"),
        workspace=workspace, engine=engine, gateway=gateway,
    )


def gateway_for(server, monkeypatch) -> Gateway:
    """A gateway whose upstream is the scripted server and whose 'real' keys are decoys on the host."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", DECOY_ANTHROPIC)
    monkeypatch.setenv("OPENAI_API_KEY", DECOY_OPENAI)
    return Gateway(env=dict(os.environ), anthropic_base_url=server.base_url, openai_base_url=server.openai_base_url)


def gateway_records(ctx: AttemptContext) -> list[dict]:
    path = Path(ctx.attempt_dir) / "gateway.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def shell_steps(session: Session) -> list[tuple[str, str]]:
    """(command, output) pairs in session order: each shell_command paired with the next tool_output."""
    steps: list[tuple[str, str]] = []
    pending: str | None = None
    for event in session.events:
        if event.kind is EventKind.shell_command:
            pending = event.text
        elif event.kind is EventKind.tool_output and pending is not None:
            steps.append((pending, event.text))
            pending = None
    return steps


def assert_no_decoy_anywhere(ctx: AttemptContext, server, session: Session) -> None:
    """The host's key is in no request body, tool output, event or file the attempt produced."""
    decoys = (DECOY_ANTHROPIC, DECOY_OPENAI)
    for rec in server.requests:
        body = json.dumps(rec.body)
        assert not any(d in body for d in decoys), f"a decoy key reached a request body ({rec.path})"
    for event in session.events:
        assert not any(d in event.text or d in json.dumps(event.data) for d in decoys), f"decoy in event {event.seq}"
    assert not any(d in session.response for d in decoys)
    for folder in (Path(ctx.attempt_dir), ctx.workspace.path):
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                assert not any(d.encode() in data for d in decoys), f"decoy key found in {path}"


@dataclass(frozen=True)
class CliUnderTest:
    """What differs between the claude-code and codex runs of one scenario; the rest is the scenario.

    `session_checks` and `budget_checks` hold the assertions only one CLI's output supports (its own
    event kinds, its usage accounting, its own error source), so a shared test keeps every assertion
    each CLI's own test made.
    """

    agent: str  # the statebox agent name
    binary: str  # the CLI's name in statebox's reasons ("claude exited with code 1")
    model: str
    api: str  # the gateway record's `api` for this CLI's model requests
    raw_log: str  # the CLI's own stream, parsed into events
    upstream_key: tuple[str, str]  # (header, value) the upstream must see: the host's key, swapped in
    crash_exit_code: int  # what the CLI exits with on an unknown flag
    session_checks: Callable[[AttemptContext, Session, str, list[dict]], None]
    budget_checks: Callable[[Session], None]

    def run(self, tmp_path: Path, engine, monkeypatch, script, *, policy: Policy | None = None,
            extra: dict | None = None) -> tuple[AttemptContext, ScriptedModelServer, Session]:
        """One attempt of this CLI against `script`, played by the scripted server behind the real gateway."""
        server = ScriptedModelServer(list(script)).start()
        gateway = gateway_for(server, monkeypatch)
        try:
            ctx = make_context(tmp_path, self.agent, engine, gateway, model=self.model, policy=policy, extra=extra)
            session = make_agent(self.agent, ctx.options).run(ctx)
        finally:
            gateway.close()
            server.stop()
        return ctx, server, session


def _claude_session_checks(ctx: AttemptContext, session: Session, network_out: str, records: list[dict]) -> None:
    assert "ANTHROPIC_API_KEY=sbx-" in network_out  # the container holds only the per-attempt token
    kinds = [e.kind for e in session.events]
    assert kinds.count(EventKind.tool_call) == 4 and kinds[-1] is EventKind.final_answer
    assert session.usage.requests == len(records)


def _codex_session_checks(ctx: AttemptContext, session: Session, network_out: str, records: list[dict]) -> None:
    kinds = [e.kind for e in session.events]
    assert kinds.count(EventKind.shell_command) == 4
    finals = [e for e in session.events if e.kind is EventKind.final_answer]
    assert finals[0].text.endswith(f"ANSWER: {EXPECTED_FLASHES}") and finals[-1].text == str(EXPECTED_FLASHES)


def _claude_budget_checks(session: Session) -> None:
    assert any(e.kind is EventKind.error for e in session.events)


def _codex_budget_checks(session: Session) -> None:
    # OpenAI's insufficient_quota (429): codex does not retry it
    assert any(e.kind is EventKind.error and e.source == "codex.jsonl" for e in session.events)
    assert session.duration_s < 60


CLAUDE = CliUnderTest(agent="claude-code", binary="claude", model="claude-sonnet-4-6", api="anthropic", raw_log="claude.stream.jsonl",
                      upstream_key=("x-api-key", DECOY_ANTHROPIC), crash_exit_code=1,
                      session_checks=_claude_session_checks, budget_checks=_claude_budget_checks)
CODEX = CliUnderTest(agent="codex", binary="codex", model="gpt-5-codex", api="responses", raw_log="codex.jsonl",
                     upstream_key=("authorization", f"Bearer {DECOY_OPENAI}"), crash_exit_code=2,
                     session_checks=_codex_session_checks, budget_checks=_codex_budget_checks)
BOTH_CLIS = [CLAUDE, CODEX]
