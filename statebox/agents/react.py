"""`react`: a LangGraph ReAct agent on the host whose tools run inside the sandbox.

The model loop runs on the host (langchain-anthropic / langchain-openai chat
models, their HTTP pointed at the attempt's gateway socket, so every request is
logged and budgeted like a CLI agent's). The tools never run on the host: each
is a `docker exec` in one long-lived hardened container holding only the
de-identified workspace, with no network:

- `bash(command)`    a shell command in /workspace
- `python(code)`     a Python program (numpy, OpenCV, PyAV available)
- `view_frames(times)` frames decoded inside the sandbox by `vtools frames`, shown to
                     the model as images (recorded in the frame account)
- `submit(answer)`   the final answer; ends the attempt

Limits come from the policy: `budgets.max_steps` model calls, `limits.time_limit_s`
of wall clock (each tool call is cut at what is left), and the gateway's token /
cost / request budgets (`lease.exceeded`). Every step is recorded as it happens.
The response is the submitted answer, else `answer.txt`, else the last message.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from statebox.agents.model_clients import langchain_chat_model
from statebox.attempt import AgentOptions, AttemptContext, GatewaySession, Provider, open_gateway, provider_for
from statebox.attempt_folder import EVENTS_FILE, GATEWAY_LOG
from statebox.errors import InfrastructureError, UserError
from statebox.json_text import json_value
from statebox.model_names import ANTHROPIC_MODEL
from statebox.recorder import SessionRecorder
from statebox.sandbox.gateway import GatewayLease
from statebox.sandbox.provider import Sandbox
from statebox.sandbox.spec import ContainerSpec
from statebox.schema import AttemptStatus, EventKind, Session
from statebox.userfiles import TEMPLATE_MAX_BYTES, read_user_text

DEFAULT_MODEL = ANTHROPIC_MODEL
# The effort levels Anthropic's `output_config.effort` takes. A named --effort was silently dropped on an Anthropic model
# before the seventeenth session (only a token budget reached it), and the Claude 5 line refuses a token budget.
ANTHROPIC_EFFORTS = ("low", "medium", "high", "xhigh", "max")
# Every level either provider takes (OpenAI's `reasoning_effort` adds none and minimal), and `off`: no thinking asked.
EFFORTS = ("off", "none", "minimal", *ANTHROPIC_EFFORTS)
TOOL_OUTPUT_LIMIT = 12_000  # characters of a tool result shown to the model (head and tail kept)
TOOL_TIMEOUT_S = 300.0
MAX_FRAMES_PER_CALL = 16
FRAME_MAX_SIDE = 768
ANSWER_FILE = "answer.txt"

SYSTEM_PROMPT = """You are an expert analyst answering a question about a video.
You work in a sandboxed Linux container: the current folder /workspace holds the video and
instruction.txt. Python 3 with numpy, OpenCV (cv2), PyAV and Pillow, ffmpeg and the `vtools`
command (vtools probe|frames|grid|crop|motion VIDEO ...) are available.

Tools:
- bash(command): run a shell command in /workspace.
- python(code): run a Python program in /workspace.
- view_frames(times): look at the frames shown at these times (seconds); they come back as images.
- submit(answer): give your final answer. Call it exactly once, when you are done.

Rules:
{prohibitions}
Stay inside /workspace. There is no network: do not try to use it.
Also write your final answer alone to {answer_file} in /workspace before you submit.

{instruction}"""

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "bash", "description": "Run a shell command in /workspace; returns stdout, stderr and the exit code.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "the command"}},
                       "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "python", "description": "Run a Python 3 program in /workspace; returns its output.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "the program"}},
                       "required": ["code"]}}},
    {"type": "function", "function": {
        "name": "view_frames",
        "description": f"Show the video frames on screen at these times (seconds), at most {MAX_FRAMES_PER_CALL} a call.",
        "parameters": {"type": "object", "properties": {"times": {"type": "array", "items": {"type": "number"}}},
                       "required": ["times"]}}},
    {"type": "function", "function": {
        "name": "submit", "description": "Submit the final answer and finish.",
        "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}},
]


class Graph(TypedDict):
    """The graph's state: the conversation, appended to by both nodes."""

    messages: Annotated[list[AnyMessage], add_messages]


@dataclass
class _Run:
    """Mutable state of one attempt's loop (the graph's nodes close over it)."""

    started: float
    deadline: float
    max_steps: int
    steps: int = 0
    answer: str | None = None
    status: AttemptStatus = "ok"
    reason: str = ""
    last_text: str = ""
    stop: bool = False
    frames_sent: list[float] = field(default_factory=list)

    def remaining(self) -> float:
        return self.deadline - time.time()

    def end(self, status: AttemptStatus, reason: str) -> None:
        """Stop the loop; the first reason wins (a timeout is not overwritten by the error it causes)."""
        if not self.reason:
            self.status, self.reason = status, reason
        self.stop = True


def _clip(text: str, limit: int = TOOL_OUTPUT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


def _format_exec(result: Any) -> str:
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.timed_out:
        parts.append(f"[timed out after {result.duration_s:g}s]")
    parts.append(f"[exit code {result.exit_code}]")
    return _clip("\n".join(parts))


def _message_text(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "output_text")]
    return "\n".join(t for t in texts if t)


def load_system_template(options: AgentOptions) -> str:
    """The system prompt's template: `--prompt-template` read as every user's file is (`userfiles`: a small regular
    file, one line otherwise; it was read whole with `read_text`, so a 2 GB file went into memory), else the default."""
    if not options.prompt_template:
        return SYSTEM_PROMPT
    return read_user_text(Path(options.prompt_template), what="prompt template", max_bytes=TEMPLATE_MAX_BYTES)


def _render_prompt(ctx: AttemptContext, options: AgentOptions) -> str:
    template = load_system_template(options)
    video = ctx.workspace.video_name if ctx.workspace is not None else ""
    values = {"{prohibitions}": ctx.policy.prohibitions.strip(), "{instruction}": ctx.instruction.strip(),
              "{video}": video, "{answer_file}": ANSWER_FILE}
    for key, value in values.items():
        template = template.replace(key, value)
    return template


class ReactAgent:
    """LangGraph ReAct loop on the host, tools in the sandbox, model through the gateway."""

    name = "react"
    needs_sandbox = True
    needs_gateway = True
    default_models = (DEFAULT_MODEL,)  # the gateway's model allow-list when the run names no --model (harness/plan.py:pinned_models)

    def __init__(self, options: AgentOptions | None = None) -> None:
        self.options = options or AgentOptions()
        effort = self.options.effort
        if effort is not None and not (effort.isdigit() or effort in EFFORTS):
            raise UserError(f"react --effort: a thinking budget in tokens (4096) or one of {'|'.join(EFFORTS)} "
                            f"(got {effort[:40]!r})")
        # the model and its provider, found once: what the provider takes is asked here, before the run starts,
        # rather than failing each attempt's first request
        self._model = self.options.model or DEFAULT_MODEL
        self._provider = provider = provider_for(AgentOptions(model=self._model, provider=self.options.provider))
        if provider == "anthropic" and effort in ("none", "minimal"):
            raise UserError(f"react --effort {effort} is OpenAI's level; on an Anthropic model: a thinking budget in "
                            f"tokens (4096), one of {'|'.join(ANTHROPIC_EFFORTS)}, or off")
        if provider != "anthropic" and effort is not None and effort.isdigit():
            raise UserError(f"react --effort {effort}: a thinking budget in tokens is Anthropic's; on an OpenAI model "
                            "one of none|minimal|low|medium|high|xhigh|max, or off")

    # ------------------------------------------------------------------ model
    def _chat_model(self, lease: GatewayLease, model: str, provider: Provider) -> Runnable[LanguageModelInput, AIMessage]:
        extra = self.options.extra
        kwargs: dict[str, Any] = {"max_retries": int(extra.get("max_retries", 2)),
                                  "timeout": float(extra.get("request_timeout_s", 600))}
        if provider == "anthropic":
            kwargs["max_tokens"] = int(extra.get("max_tokens", 4096))
            effort = self.options.effort
            if effort and effort.isdigit():  # a thinking budget in tokens: Claude 3.7 to 4.6's manual thinking
                budget = int(effort)
                kwargs["thinking"] = {"type": "enabled", "budget_tokens": budget}
                kwargs["max_tokens"] = max(kwargs["max_tokens"], budget + 1024)
            elif effort in ANTHROPIC_EFFORTS:  # `output_config.effort`, with adaptive thinking (Opus 4.6+, Claude 5)
                kwargs["effort"] = effort
        else:
            if extra.get("max_tokens"):
                kwargs["max_tokens"] = int(extra["max_tokens"])
            if self.options.effort and self.options.effort != "off":
                kwargs["reasoning_effort"] = self.options.effort
        return langchain_chat_model(lease, model, provider, **kwargs).bind_tools(TOOLS)

    # ------------------------------------------------------------------ run
    def run(self, ctx: AttemptContext) -> Session:
        if ctx.engine is None or ctx.workspace is None:
            raise UserError("the react agent runs its tools in a sandbox, but no Docker engine/workspace was given")
        model, provider = self._model, self._provider
        prompt = _render_prompt(ctx, self.options)
        started = ctx.started_at
        policy = ctx.policy
        state = _Run(started=started, deadline=started + policy.limits.time_limit_s,
                     max_steps=policy.budgets.max_steps)
        with open_gateway(ctx, provider, "the react agent") as gw:
            return self._attempt(ctx, gw, model, provider, prompt, state)

    def _attempt(self, ctx: AttemptContext, gw: GatewaySession, model: str, provider: Provider, prompt: str,
                 state: "_Run") -> Session:
        started = ctx.started_at
        policy = ctx.policy
        lease = gw.lease
        sandbox = None
        with SessionRecorder(ctx.attempt_dir, started, limits=ctx.policy.recording) as rec:
            rec.add(EventKind.message, prompt, source="prompt", data={"role": "system", "model": model,
                                                                       "provider": provider})
            worker: threading.Thread | None = None
            try:
                sandbox = self._start_sandbox(ctx)
                llm = self._chat_model(lease, model, provider)
                failure: list[BaseException] = []

                def drive() -> None:
                    try:
                        self._loop(ctx, llm, sandbox, rec, state, lease, prompt)
                    except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
                        failure.append(exc)

                # The loop runs in a worker so the wall clock holds even while a model call hangs:
                # at the deadline the attempt ends, and closing the lease below cuts the call off.
                worker = threading.Thread(target=drive, name=f"react-{ctx.attempt.attempt_id}", daemon=True)
                worker.start()
                worker.join(timeout=max(state.remaining(), 0.0) + 5.0)
                if worker.is_alive():
                    state.end("timeout", f"wall-clock limit of {policy.limits.time_limit_s:g}s reached")
                elif failure:
                    raise failure[0]
            finally:
                if sandbox is not None:
                    sandbox.stop()
                gw.close()  # cuts off a model call still in flight
                if worker is not None:
                    worker.join(timeout=10)
            from_file = None if state.answer is not None else self._answer_file(ctx, rec)
            response = state.answer if state.answer is not None else (from_file or state.last_text.strip())
            if response and not state.answer:
                rec.add(EventKind.final_answer, response, data={"from": "answer.txt" if from_file else "last_message"})
            if state.status != "ok" and state.reason:
                rec.add(EventKind.error, state.reason)
            rec.usage = lease.usage.model_copy()
            return rec.session(
                ctx.attempt.attempt_id,
                self.name,
                status=state.status,
                reason=state.reason,
                response=response,
                raw_logs=[EVENTS_FILE, GATEWAY_LOG],
                usage=lease.usage,
                meta={"model": model, "provider": provider, "steps": state.steps},
            )

    def _start_sandbox(self, ctx: AttemptContext) -> Sandbox:
        assert ctx.engine is not None and ctx.workspace is not None  # `run` refused the attempt without them
        image = self.options.extra.get("image") or ctx.engine.ensure_image("sandbox")
        spec = ContainerSpec(image=image, command=["sleep", "infinity"], workspace=Path(ctx.workspace.path),
                             policy=ctx.policy, run_id=ctx.attempt.run_id, attempt_id=ctx.attempt.attempt_id)
        return ctx.engine.start(spec)

    def _answer_file(self, ctx: AttemptContext, rec: SessionRecorder) -> str | None:
        """answer.txt as the agent left it; a link or special file is refused (the host would follow it)."""
        if ctx.workspace is None:
            return None
        try:
            text = ctx.workspace.read_output(ANSWER_FILE)
        except UserError as exc:
            rec.add(EventKind.error, str(exc), source=ANSWER_FILE)
            return None
        return (text or "").strip() or None

    # ------------------------------------------------------------------ the graph
    def _loop(self, ctx: AttemptContext, llm: Runnable[LanguageModelInput, AIMessage], sandbox: Sandbox,
              rec: SessionRecorder, run: _Run, lease: GatewayLease, prompt: str) -> None:
        def call_model(state: Graph) -> Graph:
            if run.steps >= run.max_steps:
                run.end("error", f"step limit reached: {run.max_steps} model calls without a submitted answer")
                return {"messages": []}
            if run.remaining() <= 0:
                run.end("timeout", f"wall-clock limit of {ctx.policy.limits.time_limit_s:g}s reached")
                return {"messages": []}
            run.steps += 1
            rec.add(EventKind.model_request, f"step {run.steps}", source=GATEWAY_LOG,
                    data={"step": run.steps, "messages": len(state["messages"])})
            try:
                reply = llm.invoke(state["messages"])
            except Exception as exc:  # noqa: BLE001 - any model failure ends the attempt with a reason
                if lease.exceeded:
                    run.end("error", lease.exceeded)
                else:
                    first = (str(exc).splitlines() or [""])[0][:300]
                    run.end("error", f"model request failed: {type(exc).__name__}: {first}")
                return {"messages": []}
            usage = getattr(reply, "usage_metadata", None) or {}
            rec.add(EventKind.model_response, "", source=GATEWAY_LOG,
                    data={"step": run.steps, "input_tokens": usage.get("input_tokens", 0),
                          "output_tokens": usage.get("output_tokens", 0),
                          "tool_calls": [c["name"] for c in reply.tool_calls]})
            text = _message_text(reply)
            if text:
                run.last_text = text
                rec.add(EventKind.model_text, text, data={"role": "assistant", "step": run.steps})
            if lease.exceeded:
                run.end("error", lease.exceeded)
            elif not reply.tool_calls:
                run.stop = True  # the model answered in prose: that is the response
            return {"messages": [reply]}

        def run_tools(state: Graph) -> Graph:
            reply = state["messages"][-1]
            assert isinstance(reply, AIMessage)  # after_model routes here only after a model reply with tool calls
            out: list[AnyMessage] = []
            images: list[str | dict[str, Any]] = []
            for call in reply.tool_calls:
                name, args, call_id = call["name"], call.get("args") or {}, call.get("id") or ""
                result_text, frame_parts = self._run_tool(ctx, sandbox, rec, run, name, args, call_id)
                out.append(ToolMessage(content=result_text, tool_call_id=call_id, name=name))
                images.extend(frame_parts)
                if run.stop:
                    break
            if images:
                # Tool results can't carry images in every API; a user turn with them works everywhere.
                out.append(HumanMessage(content=images))
            return {"messages": out}

        def after_model(state: Graph) -> str:
            return END if run.stop else "tools"

        def after_tools(state: Graph) -> str:
            return END if run.stop else "model"

        builder = StateGraph(Graph)
        builder.add_node("model", call_model)
        builder.add_node("tools", run_tools)
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", after_model, ["tools", END])
        builder.add_conditional_edges("tools", after_tools, ["model", END])
        graph = builder.compile()
        first_user = "Begin. Investigate the video with the tools, then call submit with your answer."
        graph.invoke({"messages": [SystemMessage(content=prompt), HumanMessage(content=first_user)]},
                     config={"recursion_limit": 2 * run.max_steps + 10})

    # ------------------------------------------------------------------ tools
    def _run_tool(self, ctx: AttemptContext, sandbox: Sandbox, rec: SessionRecorder, state: _Run, name: str,
                  args: dict[str, Any], call_id: str) -> tuple[str, list[dict[str, Any]]]:
        """Run one tool call inside the sandbox; returns (text for the model, image parts)."""
        shown = {"bash": args.get("command"), "python": args.get("code"), "submit": args.get("answer"),
                 "view_frames": json.dumps(args.get("times"))}.get(name, json.dumps(args))
        rec.add(EventKind.tool_call, str(shown or ""), data={"tool": name, "input": args, "id": call_id})
        frame_parts: list[dict[str, Any]] = []
        timeout = min(float(self.options.extra.get("tool_timeout_s", TOOL_TIMEOUT_S)), max(state.remaining(), 1.0))
        try:
            if name == "submit":
                answer = str(args.get("answer", "")).strip()
                state.answer = answer
                state.stop = True
                rec.add(EventKind.final_answer, answer, data={"from": "submit"})
                return "Answer recorded.", []
            if name == "bash":
                command = str(args.get("command", ""))
                text = _format_exec(sandbox.exec(["bash", "-c", command], timeout_s=timeout))
            elif name == "python":
                code = str(args.get("code", ""))
                text = _format_exec(sandbox.exec(["python3", "-c", code], timeout_s=timeout))
            elif name == "view_frames":
                text, frame_parts = self._view_frames(ctx, sandbox, rec, args.get("times"), timeout)
            else:
                text = f"unknown tool {name!r}; the tools are bash, python, view_frames and submit"
        except InfrastructureError as exc:
            expired = getattr(sandbox, "expired", False)
            state.end("timeout" if expired else "error",
                      f"wall-clock limit of {ctx.policy.limits.time_limit_s:g}s reached" if expired
                      else f"sandbox failed: {exc}")
            text = f"[sandbox error: {exc}]"
        rec.add(EventKind.tool_output, text, data={"tool": name, "id": call_id})
        return text, frame_parts

    def _view_frames(self, ctx: AttemptContext, sandbox: Sandbox, rec: SessionRecorder, times: object,
                     timeout: float) -> tuple[str, list[dict[str, Any]]]:
        if not isinstance(times, list) or not times:
            return "view_frames needs a non-empty list of times in seconds", []
        try:
            wanted = [float(t) for t in times][:MAX_FRAMES_PER_CALL]
        except (TypeError, ValueError):
            return "view_frames: times must be numbers (seconds)", []
        assert ctx.workspace is not None  # `run` refused the attempt without one
        video = ctx.workspace.video_name
        cmd = ["vtools", "frames", video, "--times", ",".join(f"{t:.3f}" for t in wanted), "--inline",
               "--max-side", str(FRAME_MAX_SIDE), "--quality", "85"]
        result = sandbox.exec(cmd, timeout_s=timeout)
        if result.exit_code != 0:
            return _format_exec(result), []
        try:
            report = json_value(result.stdout)
        except json.JSONDecodeError:
            return _format_exec(result), []
        parts: list[dict[str, Any]] = []
        shown: list[float] = []
        for frame in report.get("frames", []):
            if not frame.get("data"):
                continue
            t = float(frame.get("time", 0.0))
            shown.append(t)
            parts.append({"type": "text", "text": f"[frame t={t:.3f}s]"})
            parts.append({"type": "image_url",
                          "image_url": {"url": f"data:{frame.get('media_type', 'image/jpeg')};base64,{frame['data']}"}})
        rec.add_frames(decoded=list(report.get("decoded_times") or shown), model_visible=shown)
        skipped = len(times) - len(wanted)
        note = f" ({skipped} more times were ignored: at most {MAX_FRAMES_PER_CALL} a call)" if skipped > 0 else ""
        text = (f"Decoded {len(shown)} frame(s) at t={', '.join(f'{t:.3f}' for t in shown)} s; "
                f"they follow as images{note}.")
        return text, parts
