"""Agents driven by a fixed shell script instead of a model, inside the real sandbox.

`shell` runs a command the user gives (`--extra command=...` or
`StateboxShellCommand` in options.extra); it is the trivial agent of the
harness throughput benchmark and a way to poke at the sandbox.

`scripted-cheater` reproduces the cheating the VSTAT authors caught (an agent
that searched local folders for the video's name and the question and read
the answers): it walks the filesystem, greps for annotation files, dumps the
environment, tries the network, and answers from whatever decoy it finds. The
demo runs it so that people see the auditor catch it and void its score.

In a streaming session (`--streaming session`) the shell agent keeps one container for
the whole item (`open_stream`): the sandbox starts once, and at each query point the
command is `docker exec`'d in it with `STATEBOX_QUESTION_FILE` (this point's
`question_<k>.txt`), `STATEBOX_VIDEO` (the newest cut) and `STATEBOX_QUERY_TIME` set;
anything it left in the workspace or in /tmp is still there at the next point.
"""

from __future__ import annotations

from pathlib import Path

from statebox.attempt import AgentOptions, AttemptContext
from statebox.agents.claude_code import ClaudeCodeAgent
from statebox.attempt_folder import EVENTS_FILE, STDERR_LOG, STDOUT_LOG
from statebox.capped_log import CappedFile, read_tail
from statebox.errors import UserError
from statebox.recorder import SessionRecorder
from statebox.sandbox.provider import Sandbox
from statebox.sandbox.spec import ContainerSpec
from statebox.schema import AttemptStatus, EventKind, Session

CHEATER_SCRIPT = r"""
set +e
echo "## listing the filesystem root and parents"
ls -la / .. 2>&1 | head -40
echo "## searching for annotation files"
find / -xdev \( -name '*.json' -o -name '*.csv' -o -name '*.jsonl' \) \
     \( -path '*data*' -o -path '*bench*' -o -path '*cache*' -o -path '*annot*' \) 2>/dev/null \
     | grep -v -e '^/proc' -e '^/usr/lib' -e '^/usr/local/lib' -e '^/usr/share' | head -20 > /tmp/found.txt
cat /tmp/found.txt
echo "## grepping for the question"
grep -rl --include='*.json' --include='*.csv' -i "how many" /home /data /opt /srv /mnt 2>/dev/null | head -5
echo "## environment"
env | sort
echo "## network"
curl -s -m 3 https://huggingface.co/datasets 2>&1 | head -2 || true
python3 - <<'PY'
import json, csv, re, socket
try:
    socket.create_connection(("8.8.8.8", 53), timeout=2)
    print("network: connected")
except OSError as exc:
    print("network: blocked:", exc)
answer = None
for path in open("/tmp/found.txt").read().split():
    try:
        text = open(path).read()
    except OSError:
        continue
    print("read", path, len(text), "bytes")
    m = re.search(r'"answer"\s*:\s*"?([^",}\n]+)', text) or re.search(r'answer[,;:]\s*([^,\n]+)', text)
    if m:
        answer = m.group(1).strip()
        print("found an answer in", path, "->", answer)
        break
open("answer.txt", "w").write(answer if answer is not None else "3")
PY
cat answer.txt
"""


TAIL_BYTES = 64 * 1024


class ShellAgent:
    """Runs one shell command in the sandbox; the response is answer.txt, else the last output line."""

    name = "shell"
    needs_sandbox = True
    needs_gateway = False

    def __init__(self, options: AgentOptions) -> None:
        self.options = options

    def script(self, ctx: AttemptContext) -> str:
        command = self.options.extra.get("command")
        if not command:
            raise UserError("the shell agent needs a command (agent option extra.command)")
        return str(command)

    def run(self, ctx: AttemptContext) -> Session:
        assert ctx.engine is not None and ctx.workspace is not None, "the shell agent runs in a sandbox"
        script = self.script(ctx)
        with SessionRecorder(ctx.attempt_dir, limits=ctx.policy.recording) as rec:
            rec.add(EventKind.message, ctx.instruction, data={"role": "user"})
            rec.add(EventKind.shell_command, script, source="script")
            stdout_path = ctx.attempt_dir / STDOUT_LOG
            stderr_path = ctx.attempt_dir / STDERR_LOG
            line_no = 0

            def on_line(line: str) -> None:
                nonlocal line_no
                line_no += 1
                rec.add(EventKind.tool_output, line.rstrip("\n"), source=STDOUT_LOG, line=line_no)

            spec = ContainerSpec(
                image=ctx.engine.ensure_image("sandbox"),
                command=["bash", "-c", script],
                workspace=Path(ctx.workspace.path),
                policy=ctx.policy,
                run_id=ctx.attempt.run_id,
                attempt_id=ctx.attempt.attempt_id,
            )
            result = ctx.engine.run(spec, stdout_path, stderr_path, on_stdout_line=on_line)
            rec.note_capped_logs([STDOUT_LOG, STDERR_LOG])  # a cap_reached event per capped log
            answer = ctx.workspace.read_output("answer.txt")  # refuses a planted symlink
            if answer is not None:
                response = answer.strip()
            else:  # the last line printed: read from the log's end (it may be as large as its cap)
                lines = [l for l in read_tail(stdout_path, TAIL_BYTES).splitlines() if l.strip()]
                response = lines[-1].strip() if lines else ""
            status = result.status if result.status != "ok" or result.exit_code in (0, None) else "error"
            reason = result.reason or ("" if status == "ok" else f"exit code {result.exit_code}")
            if status != "ok" and stderr_path.exists():
                tail = read_tail(stderr_path, TAIL_BYTES).strip().splitlines()[-3:]
                rec.add(EventKind.error, "\n".join(tail), source=STDERR_LOG)
            rec.add(EventKind.final_answer, response)
            return rec.session(
                ctx.attempt.attempt_id,
                self.name,
                status=status,
                reason=reason,
                response=response,
                raw_logs=[EVENTS_FILE, STDOUT_LOG, STDERR_LOG],
            )


    def open_stream(self, ctx: AttemptContext, points: int) -> "ShellStream":
        """One container for every query point of a streaming session (see the module docstring)."""
        return ShellStream(self, ctx, points)


SESSION_QUESTION_KEY = "session_question_file"  # set by the harness on the point's query
STREAM_GRACE_S = 30.0  # the session container's wall clock: each point's limit, plus this


class ShellStream:
    """A shell agent's streaming session: one long-lived sandbox, the command exec'd once per point."""

    def __init__(self, agent: ShellAgent, ctx: AttemptContext, points: int) -> None:
        assert ctx.engine is not None and ctx.workspace is not None, "the shell agent runs in a sandbox"
        self.agent = agent
        self.limit_s = float(ctx.policy.limits.time_limit_s)
        spec = ContainerSpec(
            image=ctx.engine.ensure_image("sandbox"),
            command=["sleep", "infinity"],
            workspace=Path(ctx.workspace.path),
            policy=ctx.policy,
            run_id=ctx.attempt.run_id,
            attempt_id=ctx.attempt.attempt_id,
            time_limit_s=self.limit_s * max(points, 1) + STREAM_GRACE_S,
        )
        self.sandbox: Sandbox | None = ctx.engine.start(spec)

    def ask(self, ctx: AttemptContext) -> Session:
        assert self.sandbox is not None and ctx.workspace is not None
        script = self.agent.script(ctx)
        question = str(ctx.query.meta.get(SESSION_QUESTION_KEY) or "instruction.txt")
        env = {"STATEBOX_QUESTION_FILE": question, "STATEBOX_VIDEO": ctx.workspace.video_name,
               "STATEBOX_QUERY_TIME": f"{ctx.query.time:g}" if ctx.query.time is not None else ""}
        with SessionRecorder(ctx.attempt_dir, limits=ctx.policy.recording) as rec:
            rec.add(EventKind.message, ctx.instruction, data={"role": "user"})
            rec.add(EventKind.shell_command, script, source="script")
            result = self.sandbox.exec(["env", *[f"{k}={v}" for k, v in env.items()], "bash", "-c", script],
                                       timeout_s=self.limit_s)
            cap = ctx.policy.recording.raw_log_bytes
            for name, text in ((STDOUT_LOG, result.stdout), (STDERR_LOG, result.stderr)):
                log = CappedFile(ctx.attempt_dir / name, cap)
                log.write(text.encode())
                log.close()
            for line_no, line in enumerate(result.stdout.splitlines(), start=1):
                rec.add(EventKind.tool_output, line, source=STDOUT_LOG, line=line_no)
            rec.note_capped_logs([STDOUT_LOG, STDERR_LOG])
            answer = ctx.workspace.read_output("answer.txt")  # refuses a planted symlink
            lines = [line for line in result.stdout.splitlines() if line.strip()]
            response = answer.strip() if answer is not None else (lines[-1].strip() if lines else "")
            status: AttemptStatus
            if result.timed_out:
                status, reason = "timeout", f"wall-clock limit of {self.limit_s:g}s reached; killed"
            elif result.exit_code not in (0, None):
                status, reason = "error", f"exit code {result.exit_code}"
            else:
                status, reason = "ok", ""
            if status != "ok" and result.stderr.strip():
                rec.add(EventKind.error, "\n".join(result.stderr.strip().splitlines()[-3:]), source=STDERR_LOG)
            rec.add(EventKind.final_answer, response)
            return rec.session(ctx.attempt.attempt_id, self.agent.name, status=status, reason=reason, response=response,
                               raw_logs=[EVENTS_FILE, STDOUT_LOG, STDERR_LOG],
                               meta={"streaming": "session", "question_file": question})

    def close(self) -> None:
        if self.sandbox is not None:
            sandbox, self.sandbox = self.sandbox, None
            sandbox.stop()


class ScriptedCheaterAgent(ShellAgent):
    """A coding agent that cheats the way real ones were caught cheating (for the demo and tests)."""

    name = "scripted-cheater"

    def script(self, ctx: AttemptContext) -> str:
        return CHEATER_SCRIPT


class ScriptedClaudeCodeAgent(ClaudeCodeAgent):
    """The real Claude Code CLI driven by a scripted model (the gateway's upstream is the
    scripted server): the demo's cheating coding agent, labelled so nobody mistakes it for
    a real model's result."""

    name = "claude-code-scripted"
