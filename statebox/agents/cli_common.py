"""What the coding-agent CLIs (claude-code, codex) share: one attempt, start to Session.

Both agents are the same shape: render the prompt, open a gateway lease, run the
real CLI inside the `agents` image with the lease's socket mounted, parse its
native JSON lines live into the session while the raw stream lands in the attempt
folder, then decide status and response. Only the command line, the environment
and the line parser differ, so each agent supplies a `CliLaunch` and this module
does the rest — the status rules can't drift apart between the two.

Status rules (first match wins): the wall clock ran out -> `timeout`; out of
memory -> `oom`; the gateway cut the model off (`lease.exceeded`) -> `error` with
the budget reason; the CLI exited non-zero or reported a failure -> `error` with
its message and the tail of its stderr; otherwise `ok`. The response is the
workspace's `answer.txt` when the agent wrote one, else the CLI's final message.
"""

from __future__ import annotations

import json
import shlex
import shutil
import string
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from statebox.agents.frames_accounting import with_frame_account
from statebox.attempt import AgentOptions, AttemptContext, GatewaySession, Provider, lease_budgets, open_gateway
from statebox.attempt_folder import EVENTS_FILE, GATEWAY_LOG, STDERR_LOG
from statebox.capped_log import CappedFile, read_tail
from statebox.errors import InfrastructureError, UserError
from statebox.json_text import json_value, jsonl_lines
from statebox.recorder import SessionRecorder
from statebox.sandbox.images import PACKAGE_ROOT
from statebox.sandbox.provider import Sandbox
from statebox.sandbox.spec import ContainerResult, ContainerSpec, ContainerStatus, Mount
from statebox.schema import UNREAD_LINE, AttemptStatus, EventKind, Session
from statebox.sessions import EventDraft, clip
from statebox.userfiles import TEMPLATE_MAX_BYTES, read_user_text

PROMPTS_DIR = Path(__file__).parent / "prompts"
DEFAULT_TEMPLATE = PROMPTS_DIR / "coding.txt"
ANSWER_FILE = "answer.txt"
STDERR_TAIL_CHARS = 4000
AGENTS_IMAGE_TARGET = "agents"

# What the prompt says when the policy has no prohibitions text of its own (VSTAT's rules).
DEFAULT_PROHIBITIONS = (
    "Work only inside the current folder; no parent directories, no network, no environment "
    "dumps, no dataset or answer files, no guessing the video's original name."
)


class Normaliser(Protocol):
    """A native-line parser with the little state an agent needs at the end."""

    @property
    def final_answer(self) -> str | None: ...

    @property
    def failure(self) -> str | None: ...

    def feed(self, obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]: ...


@dataclass
class CliLaunch:
    """How one CLI is started inside the agents image (built by each agent)."""

    cli: str  # "claude" | "codex": used in reasons ("claude exited with code 1")
    command: list[str]
    env: dict[str, str]
    raw_log: str  # file name in the attempt folder receiving the CLI's stdout (its JSON lines)
    normaliser: Normaliser
    meta: dict[str, Any] = field(default_factory=dict)


def extra_cli_args(options: AgentOptions) -> list[str]:
    """`extra.cli_args`: a list, or one string split like a shell would (from `--extra cli_args=...`)."""
    value = options.extra.get("cli_args") or []
    return shlex.split(value) if isinstance(value, str) else [str(a) for a in value]


# ---------------------------------------------------------------- prompt


def load_template(options: AgentOptions) -> str:
    """The user's template file (`--prompt-template`), else the built-in coding prompt."""
    path = Path(options.prompt_template) if options.prompt_template else DEFAULT_TEMPLATE
    if not path.exists():
        raise UserError(f"{path}: prompt template not found")
    return read_user_text(path, what="prompt template", max_bytes=TEMPLATE_MAX_BYTES)


def render_prompt(ctx: AttemptContext) -> str:
    """Fill the template: ${instruction}, ${video}, ${prohibitions}, ${answer_file}.

    `string.Template` (not str.format) so a user's template may contain braces (code,
    JSON examples) freely; unknown `$names` are left as they are.
    """
    workspace = ctx.workspace
    values = {
        "instruction": ctx.instruction.strip(),
        "video": workspace.video_name if workspace is not None else "the video",
        "prohibitions": ctx.policy.prohibitions.strip() or DEFAULT_PROHIBITIONS,
        "answer_file": ANSWER_FILE,
    }
    return string.Template(load_template(ctx.options)).safe_substitute(values).strip() + "\n"


# ---------------------------------------------------------------- live stream


class LiveStream:
    """`on_stdout_line` for `SandboxEngine.run`: each native line -> events, recorded at once.

    The engine writes the same lines to the raw log, so the 1-based line numbers here
    point into that file; a line that is not JSON (a CLI's stray print, or a line cut at
    the policy's `recording.raw_line_bytes`) is kept as a `message` rather than dropped.
    Each line arrives already capped, and the recorder clips what it records to one
    `recording.event_bytes` line and stops at `recording.events_bytes` (statebox/recorder.py).
    """

    def __init__(self, recorder: SessionRecorder, normaliser: Normaliser, source: str) -> None:
        self.recorder = recorder
        self.normaliser = normaliser
        self.source = source
        self.line_no = 0

    def __call__(self, line: str) -> None:
        """One native line -> its events; a line this fails on leaves an `error` event saying so (`UNREAD_LINE`).

        Why: the stream's writer swallows a callback's exception (the raw log must go on), so a line statebox
        failed to read or record left no event at all: an unpaired surrogate in a tool call hid the call from
        events.jsonl that way. Now such a line is named, and the auditor flags the attempt."""
        self.line_no += 1
        try:
            self._record(line)
        except Exception as exc:  # noqa: BLE001 - named in the log, never silent
            self.recorder.add(EventKind.error, f"statebox could not record line {self.line_no} of {self.source}: "
                              f"{type(exc).__name__}: {exc}"[:500], source=self.source, line=self.line_no,
                              data={UNREAD_LINE: type(exc).__name__})

    def _record(self, line: str) -> None:
        raw = line.strip()
        if not raw:
            return
        try:
            obj = json_value(raw)
        except json.JSONDecodeError:
            self.recorder.add(EventKind.message, clip(raw), source=self.source, line=self.line_no, data={"unparsed": True})
            return
        if not isinstance(obj, dict):
            return
        for draft in self.normaliser.feed(obj, self.line_no):
            self.recorder.add(draft.kind, draft.text, source=self.source, line=self.line_no, data=draft.data)


# ---------------------------------------------------------------- the attempt


def agents_image(ctx: AttemptContext) -> str:
    """The agents image tag (built on demand where the provider runs containers), with a fix-it
    message when the CLIs are missing."""
    for name in ("claude", "codex"):
        if not (PACKAGE_ROOT / ".cache/agent-clis/image" / name).exists():
            raise UserError(f"the {name} CLI is not installed for the agents image; run `bash scripts/setup/40-agent-clis.sh`")
    assert ctx.engine is not None, "the CLI agents run in a sandbox"
    return ctx.engine.ensure_image(AGENTS_IMAGE_TARGET)


def require_parts(ctx: AttemptContext, agent: str) -> None:
    if ctx.engine is None:
        raise UserError(f"the {agent} agent runs inside a Docker sandbox, but no engine was given")
    if ctx.gateway is None:
        raise UserError(f"the {agent} agent reaches its model through the statebox gateway, but none was started")
    if ctx.workspace is None:
        raise UserError(f"the {agent} agent needs a prepared workspace")


def run_cli_attempt(ctx: AttemptContext, agent: str, provider: Provider,
                    launch_for: Callable[[AttemptContext, GatewaySession, str], CliLaunch]) -> Session:
    """Run one CLI attempt end to end; `launch_for(ctx, gateway, prompt)` says how to start the CLI."""
    require_parts(ctx, agent)
    assert ctx.engine is not None and ctx.gateway is not None and ctx.workspace is not None
    attempt_dir = Path(ctx.attempt_dir)
    with open_gateway(ctx, provider, f"the {agent} agent") as gw:  # no key, no base URL: one line, no container
        image = agents_image(ctx)
        recorder = SessionRecorder(attempt_dir, started_at=ctx.started_at, limits=ctx.policy.recording)
        prompt = render_prompt(ctx)
        try:
            launch = launch_for(ctx, gw, prompt)
            for stale in (launch.raw_log, STDERR_LOG):  # a retried attempt starts its raw logs afresh
                (attempt_dir / stale).unlink(missing_ok=True)
            recorder.add(EventKind.message, prompt, source="prompt", data={"role": "user", "agent": agent, **launch.meta})
            spec = ContainerSpec(
                image=image,
                command=launch.command,
                workspace=ctx.workspace.path,
                policy=ctx.policy,
                env=launch.env,
                mounts=[gw.mount()],
                run_id=ctx.attempt.run_id,
                attempt_id=ctx.attempt.attempt_id,
            )
            stream = LiveStream(recorder, launch.normaliser, launch.raw_log)
            result = ctx.engine.run(spec, attempt_dir / launch.raw_log, attempt_dir / STDERR_LOG, on_stdout_line=stream)
        except BaseException:
            recorder.close()
            raise
    try:
        recorder.note_capped_logs([launch.raw_log, STDERR_LOG])  # one cap_reached event per capped raw log
        return conclude(ctx, agent, recorder, launch, result, gw)
    finally:
        recorder.close()


def read_answer_file(ctx: AttemptContext, recorder: SessionRecorder) -> str | None:
    """answer.txt from the workspace, stripped; a symlink or non-file is refused and recorded."""
    assert ctx.workspace is not None
    try:
        text = ctx.workspace.read_output(ANSWER_FILE)
    except UserError as exc:
        recorder.add(EventKind.error, str(exc), source=ANSWER_FILE)
        return None
    if text is None or not text.strip():
        return None
    return text.strip()


def stderr_tail(attempt_dir: Path) -> str:
    """The end of stderr.log (read from its end: the file may be as large as its cap), cap marker left out."""
    return read_tail(attempt_dir / STDERR_LOG, STDERR_TAIL_CHARS).strip()


def conclude(ctx: AttemptContext, agent: str, recorder: SessionRecorder, launch: CliLaunch,
             result: ContainerResult, gw: GatewaySession) -> Session:
    """Status, reason and response from the container result, the lease and the parsed stream."""
    attempt_dir = Path(ctx.attempt_dir)
    norm = launch.normaliser
    errors_tail = stderr_tail(attempt_dir)
    status: AttemptStatus = "ok"
    reason = ""
    if result.status in ("timeout", "oom"):
        status, reason = result.status, result.reason
    elif gw.exceeded:
        status, reason = "error", f"model budget exceeded: {gw.exceeded}"
    elif result.status != "ok" or result.exit_code not in (0, None):
        why = norm.failure or _last_line(errors_tail) or result.reason
        status, reason = "error", f"{launch.cli} exited with code {result.exit_code}: {why}"
    elif norm.failure and norm.final_answer is None:
        status, reason = "error", f"{launch.cli} reported a failure: {norm.failure}"
    if status != "ok":
        recorder.add(EventKind.error, clip(reason + ("\n--- stderr ---\n" + errors_tail if errors_tail else "")),
                     source=STDERR_LOG if errors_tail else "statebox",
                     data={"status": status, "exit_code": result.exit_code})
    answer = read_answer_file(ctx, recorder)
    response = answer if answer is not None else (norm.final_answer or "")
    if answer is not None:
        recorder.add(EventKind.final_answer, clip(answer), source=ANSWER_FILE, data={"from": ANSWER_FILE})
    usage = gw.usage
    recorder.usage = usage.model_copy()
    raw_logs = [name for name in (EVENTS_FILE, launch.raw_log, STDERR_LOG, GATEWAY_LOG) if (attempt_dir / name).exists()]
    session = recorder.session(
        ctx.attempt.attempt_id,
        agent,
        status=status,
        reason=reason,
        response=response,
        raw_logs=raw_logs,
        usage=usage,
        meta={"exit_code": result.exit_code, "container_status": result.status, "container_s": result.duration_s,
              "model_requests": gw.lease.requests_logged,
              "response_from": ANSWER_FILE if answer is not None else "final_message", **launch.meta},
    )
    return _with_frames(session, attempt_dir)


def _with_frames(session: Session, attempt_dir: Path) -> Session:
    """Frame accounting from the session's vtools reports and the gateway's image log.

    The CLI decodes frames inside the sandbox by itself, so what it decoded and what its
    model saw are recovered after the fact; a bug there must not cost the attempt.
    """
    try:
        return with_frame_account(session, attempt_dir)
    except Exception as exc:  # noqa: BLE001
        return session.model_copy(update={"meta": {**session.meta, "frame_accounting_error": str(exc)[:300]}})


def _last_line(text: str) -> str:
    """The most telling stderr line: the last one naming an error, else the last one."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    telling = [ln for ln in lines if any(w in ln.lower() for w in ("error", "panic", "fatal", "exception"))]
    return (telling or lines or [""])[-1][:300]


# ---------------------------------------------------------------- streaming sessions


STREAM_GRACE_S = 60.0  # the session container's wall clock: each point's limit times the points, plus this


class SessionCli(Protocol):
    """What a CLI agent adds to run one conversation across a streaming session's points."""

    def stream_setup(self, ctx: AttemptContext) -> tuple[list[str] | None, dict[str, str]]:
        """A command exec'd once after the session's container starts (or None), and its environment."""
        ...

    def stream_launch(self, ctx: AttemptContext, gw: GatewaySession, prompt: str, conversation: str | None) -> CliLaunch:
        """The CLI command for one point: a new conversation, or `conversation` continued."""
        ...

    @staticmethod
    def conversation_of(obj: dict[str, Any]) -> str | None:
        """The conversation id a native stream line reveals (None when it reveals none)."""
        ...


class _Watching:
    """A normaliser wrapper that notes the conversation id the CLI's stream announces."""

    def __init__(self, inner: Normaliser, find: Callable[[dict[str, Any]], str | None]) -> None:
        self.inner = inner
        self.find = find
        self.conversation: str | None = None

    @property
    def final_answer(self) -> str | None:
        return self.inner.final_answer

    @property
    def failure(self) -> str | None:
        return self.inner.failure

    def feed(self, obj: dict[str, Any], line_no: int = 0) -> list[EventDraft]:
        found = self.find(obj)
        if found and self.conversation is None:
            self.conversation = found
        return self.inner.feed(obj, line_no)


class CliStream:
    """A CLI agent's streaming session: one long-lived container, the CLI exec'd once per query
    point, continuing its own conversation (claude `--resume <session_id>`, `codex exec resume
    <thread_id>`); the CLI's state lives on the container's home tmpfs between points.

    Each point gets its own gateway lease (its own `gateway.jsonl`, usage and budget) on one
    socket folder mounted for the whole session: the next lease binds a fresh socket at the
    same path, and its token reaches the CLI through the exec'd command's environment. The
    CLI's output comes back when its exec ends (`Sandbox.exec` is not streamed), then is
    written to the raw log and parsed line by line exactly as a live stream would be.
    """

    def __init__(self, ctx: AttemptContext, agent: str, provider: Provider, cli: SessionCli, points: int) -> None:
        require_parts(ctx, agent)
        assert ctx.engine is not None and ctx.workspace is not None
        self.agent = agent
        self.provider = provider
        self.cli = cli
        self.limit_s = float(ctx.policy.limits.time_limit_s)
        self.conversation: str | None = None
        self.socket_dir = Path(tempfile.mkdtemp(prefix="sbx-gw-"))
        self.socket_dir.chmod(0o755)
        self.sandbox: Sandbox | None = None
        from statebox.sandbox.gateway import CONTAINER_SOCKET_DIR  # why: it loads httpx/h11 (a second); only sessions need it

        try:
            spec = ContainerSpec(
                image=agents_image(ctx),
                command=["sleep", "infinity"],
                workspace=ctx.workspace.path,
                policy=ctx.policy,
                mounts=[Mount(source=self.socket_dir, target=CONTAINER_SOCKET_DIR, read_only=True)],
                run_id=ctx.attempt.run_id,
                attempt_id=ctx.attempt.attempt_id,
                time_limit_s=self.limit_s * max(points, 1) + STREAM_GRACE_S,
            )
            self.sandbox = ctx.engine.start(spec)
            setup, env = cli.stream_setup(ctx)
            if setup is not None:
                done = self.sandbox.exec(_with_env(env, setup), timeout_s=60)
                if done.exit_code != 0:
                    raise InfrastructureError(f"{agent}: session set-up failed: {(done.stderr or done.stdout).strip()[-300:]}")
        except BaseException:
            self.close()
            raise

    def ask(self, ctx: AttemptContext) -> Session:
        assert self.sandbox is not None and ctx.gateway is not None and ctx.workspace is not None
        attempt_dir = Path(ctx.attempt_dir)
        attempt_dir.mkdir(parents=True, exist_ok=True)
        ctx.gateway.check_ready(self.provider)
        lease = ctx.gateway.lease(ctx.attempt.attempt_id, self.socket_dir, attempt_dir / GATEWAY_LOG,
                                  lease_budgets(ctx), limits=ctx.policy.gateway)
        gw = GatewaySession(lease=lease, provider=self.provider, socket_dir=self.socket_dir)
        recorder = SessionRecorder(attempt_dir, started_at=ctx.started_at, limits=ctx.policy.recording)
        try:
            try:
                prompt = render_prompt(ctx)
                launch = self.cli.stream_launch(ctx, gw, prompt, self.conversation)
                watching = _Watching(launch.normaliser, self.cli.conversation_of)
                launch.normaliser = watching
                recorder.add(EventKind.message, prompt, source="prompt",
                             data={"role": "user", "agent": self.agent, "continues": self.conversation, **launch.meta})
                started = time.monotonic()
                result = self.sandbox.exec(_with_env(launch.env, launch.command), timeout_s=self.limit_s)
                elapsed = time.monotonic() - started
            finally:
                lease.close()  # the socket folder stays for the next point's lease
            cap = ctx.policy.recording.raw_log_bytes
            stream = LiveStream(recorder, launch.normaliser, launch.raw_log)
            raw = CappedFile(attempt_dir / launch.raw_log, cap)
            for line in jsonl_lines(result.stdout):  # the CLI's JSONL: lines end at \n alone (json_text says why)
                if raw.write((line + "\n").encode()):
                    stream(line)
            raw.close()
            err = CappedFile(attempt_dir / STDERR_LOG, cap)
            err.write(result.stderr.encode())
            err.close()
            if watching.conversation:
                self.conversation = watching.conversation
            recorder.note_capped_logs([launch.raw_log, STDERR_LOG])
            status: ContainerStatus = "timeout" if result.timed_out else ("ok" if result.exit_code == 0 else "error")
            container = ContainerResult(status=status, exit_code=result.exit_code, duration_s=round(elapsed, 3),
                                        reason=f"wall-clock limit of {self.limit_s:g}s reached; killed" if result.timed_out else "")
            launch.meta = {**launch.meta, "streaming": "session", "conversation": self.conversation}
            return conclude(ctx, self.agent, recorder, launch, container, gw)
        finally:
            recorder.close()

    def close(self) -> None:
        if self.sandbox is not None:
            sandbox, self.sandbox = self.sandbox, None
            try:
                sandbox.stop()
            except Exception:  # noqa: BLE001 - the run's sweep removes it anyway
                pass
        shutil.rmtree(self.socket_dir, ignore_errors=True)


def _with_env(env: dict[str, str], command: list[str]) -> list[str]:
    """`env K=V ... command`: a `docker exec` keeps the container's environment; this point's lease adds its own."""
    return ["env", *[f"{key}={value}" for key, value in env.items()], *command]
