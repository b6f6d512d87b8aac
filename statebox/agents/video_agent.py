"""`video-agent`: an AVP-style multi-agent video agent (plan -> observe -> re-plan -> synthesise).

Four roles in a LangGraph graph, all talking to one multimodal model through the gateway:

- planner: from the question, the video's length and a motion timeline (vtools motion:
  when things move, where the cuts are) decides what to look for, which explicit state
  to keep (counts, positions, sequences) and which segments to sample at what density.
- observer: sends frames, each labelled with its timestamp, in time order and in batches,
  with the state so far; the model updates the state event by event and reports evidence.
- re-planner: reads the evidence for gaps and contradictions and asks for denser frames,
  exact times or zooms (crops) where needed — or declares the evidence sufficient.
- synthesiser: the final answer with a short justification (text only, no new frames).

Budgets (rounds of observation, model-visible frames, tokens) bound the loop; the gateway
enforces the policy's budgets on top. Robustness: the VSTAT authors saw video agents
"commit too early at 1 fps" and models that answer with unusable text; here a plan that
is not JSON falls back to uniform sampling, an observation that is not JSON is kept as
free text, a re-plan that is not JSON ends the loop, and the synthesiser always answers.
For a streaming query no request can reach past the query time (VideoTools clamps).

Options: `model`, `provider`, `frames` (frame budget, default 64), `timestamps`, and in
`extra`: `max_rounds` (3), `max_tokens` (300000, agent-side), `batch` (16 frames per
observer request), `first_round_share` (0.5 of the frame budget), `motion_fps` (4),
`max_side` (768), `api` (`chat` | `responses`), `vtools` (`sandbox` | `local`),
`prompt_frame` (`replace_last` | `append` | `only`, below).

Workspace extras (issue 17). EOC-Bench's marked prompt frame (the host's prompt_frame.png) is
shown to the planner (it must know which object is `<object N>` before it plans) and then, by
`prompt_frame`: `replace_last` (default; the paper's input, a video whose last frame carries
the marks): the first round always watches the video's last frame and every observer sees the
marked frame wherever the last frame is watched; `append`: after the frames of every observer
request, as a reference; `only` (the paper's "1f"): one observation of the marked frame alone,
no other frame. With the policy's `media.transcripts`, transcript.txt (EC-Bench's
with-subtitles condition) goes to the planner, the re-planner and the synthesiser, the roles
that read the whole video's course; observers get frames only.
"""

from __future__ import annotations

import json
import time
from typing import Any, TypedDict, cast

import numpy as np

from statebox.attempt import AgentOptions, AttemptContext, open_gateway
from statebox.agents.model_turns import failures_end_the_attempt, model_session
from statebox.agents.vision_client import (
    Image,
    Part,
    Text,
    DEFAULT_MODELS,
    VisionClient,
    model_choice,
)
from statebox.agents.video_prompts import (
    extract_answer,
    extract_json,
    frame_label,
    marked_image,
    prompt_frame_legend,
    prompt_frame_mode,
    question_block,
    transcript_section,
)
from statebox.recorder import SessionRecorder
from statebox.schema import EventKind, Session, Usage
from statebox.tools.sandboxed import open_video_tools
from statebox.tools.video_tools import Frame, MotionReport, VideoTools, VtoolsError

# ---------------------------------------------------------------------------------- prompts

STATE_TRACKING_RULES = """\
This is a state-tracking question: the answer cannot be read off one frame. Keep an
explicit state (counts, positions, who holds what, sequences of events) and update it
event by event, in time order. Never guess what happened between two frames you did not
see: say it is uncertain. Count an event once, at the frame where it happens."""

PLANNER_SYSTEM = f"""Role: planner.
You plan how to watch a video to answer one question. You cannot see frames yet; you get
the question, the video length and a motion timeline (moments where the picture changes).
{STATE_TRACKING_RULES}
Reply with one JSON object only:
{{"look_for": "<what matters visually>",
  "state": {{<the explicit state to track, with initial values, e.g. "count": 0>}},
  "segments": [{{"start": <s>, "end": <s>, "fps": <frames per second>, "why": "<reason>"}}]}}
Use denser fps where motion happens; segments must lie inside the video."""

OBSERVER_SYSTEM = f"""Role: observer.
You watch frames of a video (each preceded by its timestamp, in time order) and update an
explicit state.
{STATE_TRACKING_RULES}
Reply with one JSON object only:
{{"observations": [{{"t": <s>, "what": "<what the frame shows that matters>"}}],
  "events": [{{"t": <s>, "event": "<what changed>", "state_change": "<how the state changed>"}}],
  "state": {{<the full updated state>}},
  "uncertain": ["<gaps or contradictions, with times>"]}}"""

REPLANNER_SYSTEM = f"""Role: replanner.
You check the evidence gathered so far for gaps (moments where an event may have been
missed between two frames) and contradictions, and decide whether more frames are needed.
{STATE_TRACKING_RULES}
Reply with one JSON object only:
{{"done": <true if the evidence suffices>, "reason": "<why>",
  "requests": [{{"start": <s>, "end": <s>, "fps": <f>}} | {{"times": [<s>, ...]}}
               | {{"start": <s>, "end": <s>, "fps": <f>, "box": [<x1>, <y1>, <x2>, <y2>]}}]}}
A "box" asks for a zoom; its corners are fractions (0-1) of the frame width and height.
Ask only for what resolves a gap; stay within the remaining frame budget."""

SYNTHESISER_SYSTEM = f"""Role: synthesiser.
You answer the question from the evidence and the tracked state, gathered by observers
who watched the video's frames.
{STATE_TRACKING_RULES}
Give a short justification (the events that decide the answer, with times), then end with
a last line of the form: ANSWER: <your answer>"""


class AgentState(TypedDict, total=False):
    end_time: float
    fps: float
    width: int
    height: int
    motion: str
    plan: dict[str, Any]
    requests: list[dict[str, Any]]
    evidence: list[dict[str, Any]]
    state: Any
    seen: list[float]
    round: int
    frames_used: int
    tokens_used: int
    notes: list[str]
    done_reason: str
    final_text: str
    answer: str


# ---------------------------------------------------------------------------------- helpers

MARKED_WHERE = {  # where the legend says the marked frame is, per `prompt_frame` mode
    "replace_last": "shown to you (marked) wherever the video's last frame is watched",
    "append": "shown after the frames of every observation",
    "only": "the only frame shown",
}


def _num(value: Any, default: float | None = None) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out if np.isfinite(out) else default


def request_times(req: dict[str, Any], end_time: float, native_fps: float) -> list[float]:
    """The moments one plan/re-plan request asks for, clamped to [0, end_time]."""
    if isinstance(req.get("times"), list):
        times = [_num(t) for t in req["times"]]
        return sorted({round(min(max(t, 0.0), end_time), 6) for t in times if t is not None})
    start = _num(req.get("start"), 0.0) or 0.0
    end = _num(req.get("end"), end_time)
    end = end_time if end is None else end
    start, end = max(0.0, min(start, end_time)), max(0.0, min(end, end_time))
    if end < start:
        start, end = end, start
    if req.get("count") is not None or req.get("uniform") is not None:
        n = int(_num(req.get("count", req.get("uniform")), 8) or 8)
        return sorted({round(t, 6) for t in np.linspace(start, end, max(1, n)).tolist()})
    fps = _num(req.get("fps"), 1.0) or 1.0
    fps = min(max(fps, 0.05), native_fps)
    n = int(np.floor((end - start) * fps + 1e-6)) + 1
    return sorted({round(start + k / fps, 6) for k in range(n)})


def thin(times: list[float], budget: int) -> list[float]:
    """At most `budget` of `times`, spread evenly (keeps the first and last)."""
    if budget <= 0:
        return []
    if len(times) <= budget:
        return times
    keep = np.linspace(0, len(times) - 1, budget).round().astype(int)
    return [times[i] for i in sorted(set(keep.tolist()))]


def motion_summary(report: MotionReport | None, limit: int = 12) -> str:
    if report is None:
        return "(no motion timeline)"
    events = sorted(report.events, key=lambda e: -e.get("peak", 0))[:limit]
    events.sort(key=lambda e: e["start"])
    lines = [f"- motion {e['start']:.2f}-{e['end']:.2f}s (peak at {e['peak_time']:.2f}s)" for e in events]
    if report.cuts:
        lines.append("- scene cuts at: " + ", ".join(f"{t:.2f}s" for t in report.cuts[:20]))
    if not lines:
        lines.append("- no distinct motion events (steady picture or continuous motion)")
    return "\n".join(lines)


def evidence_digest(evidence: list[dict[str, Any]], limit_chars: int = 12000) -> str:
    """The evidence as a time-ordered text log for the re-planner and the synthesiser."""
    rows: list[tuple[float, str]] = []
    for ev in evidence:
        parsed = ev.get("parsed") or {}
        for o in parsed.get("observations") or []:
            if isinstance(o, dict):
                rows.append((_num(o.get("t"), 0.0) or 0.0, f"seen: {o.get('what', '')}"))
        for e in parsed.get("events") or []:
            if isinstance(e, dict):
                change = f" -> {e['state_change']}" if e.get("state_change") else ""
                rows.append((_num(e.get("t"), 0.0) or 0.0, f"EVENT: {e.get('event', '')}{change}"))
        for u in parsed.get("uncertain") or []:
            rows.append((ev["times"][0] if ev.get("times") else 0.0, f"uncertain: {u}"))
        if not parsed and ev.get("raw"):
            first = ev["times"][0] if ev.get("times") else 0.0
            rows.append((first, f"notes on frames {_span(ev.get('times'))}: {ev['raw'][:1500]}"))
    rows.sort(key=lambda r: r[0])
    text = "\n".join(f"t={t:.2f}s {what}" for t, what in rows) or "(no evidence)"
    return text if len(text) <= limit_chars else text[-limit_chars:]


def _span(times: list[float] | None) -> str:
    if not times:
        return "-"
    return f"{min(times):.2f}-{max(times):.2f}s ({len(times)} frames)"


# ---------------------------------------------------------------------------------- agent


class VideoAgent:
    name = "video-agent"
    needs_sandbox = True
    needs_gateway = True
    default_models = DEFAULT_MODELS  # the gateway's model allow-list when the run names no --model (harness/plan.py:pinned_models)
    budgets = ("frames",)  # `--frames a,b` sweeps its frame cap (harness/plan.py:sweep_variants)

    def __init__(self, options: AgentOptions | None = None) -> None:
        self.options = options or AgentOptions()
        prompt_frame_mode(self.options, self.name)  # a bad -o prompt_frame stops the run before it starts

    def run(self, ctx: AttemptContext) -> Session:
        options, provider, model = model_choice(ctx, self.options)
        started = ctx.started_at or time.time()
        response = ""
        usage = Usage()
        final: AgentState = {}
        with SessionRecorder(ctx.attempt_dir, started, limits=ctx.policy.recording) as rec:
            rec.add(EventKind.message, ctx.instruction, data={"role": "user", "agent": self.name, "model": model})
            with open_gateway(ctx, provider, f"the {self.name} agent") as access:
                try:
                    with failures_end_the_attempt(rec) as outcome:
                        client = VisionClient(access.lease, model, provider, api=options.extra.get("api", "chat"),
                                              max_tokens=int(options.extra.get("max_tokens_per_call", 2048)),
                                              effort=options.effort)
                        with open_video_tools(ctx, mode=options.extra.get("vtools", "sandbox"),
                                              max_side=options.extra.get("max_side", 768),
                                              on_decoded=lambda ts: rec.add_frames(decoded=ts)) as tools:
                            run = _Run(ctx, options, tools, client, rec)
                            final = run.invoke()
                        response = final.get("answer", "")
                        rec.add(EventKind.final_answer, response)
                finally:
                    usage = access.usage
            meta = {"model": model, "provider": provider, "rounds": final.get("round", 0),
                    "frames_used": final.get("frames_used", 0), "notes": final.get("notes", []),
                    "stop": final.get("done_reason", "")}
            return model_session(ctx, self.name, rec, outcome, response, usage, meta)


class _Run:
    """One attempt's graph, its tools and its budgets."""

    def __init__(self, ctx: AttemptContext, options: AgentOptions, tools: VideoTools, client: VisionClient,
                 rec: SessionRecorder) -> None:
        self.ctx = ctx
        self.tools = tools
        self.client = client
        self.rec = rec
        extra = options.extra
        self.timestamps = options.timestamps
        self.max_frames = int(options.frames or extra.get("max_frames", 64))
        self.max_rounds = int(extra.get("max_rounds", 3))
        self.max_tokens = int(extra.get("max_tokens", 300_000))
        self.batch = max(1, int(extra.get("batch", 16)))
        self.first_share = float(extra.get("first_round_share", 0.5))
        self.motion_fps = float(extra.get("motion_fps", 4.0))
        self.question = question_block(ctx.item, ctx.query)
        self.frame_mode = prompt_frame_mode(options, VideoAgent.name)
        self.marked: Image | None = None  # EOC-Bench's prompt frame, read once the video's end is known
        self.transcript = transcript_section(ctx)
        if self.transcript:
            self.transcript = "\n\n" + self.transcript

    # -------------------------------------------------------------- model calls
    def ask(self, role: str, parts: list[Part], system: str, state: AgentState) -> tuple[str, int]:
        images = [p for p in parts if isinstance(p, Image)]
        shown = [t for p in images for t in p.times]
        text = "\n".join(p.text for p in parts if isinstance(p, Text))
        self.rec.add(EventKind.model_request, text[:20000], data={"role": role, "images": len(images), "times": shown})
        if shown:
            self.rec.add_frames(model_visible=shown)
        reply = self.client.ask(parts, system=system)
        self.rec.add_usage(reply.input_tokens, reply.output_tokens)
        self.rec.add(EventKind.model_response, reply.text,
                     data={"role": role, "input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens})
        return reply.text, reply.input_tokens + reply.output_tokens

    def note(self, state: AgentState, what: str) -> list[str]:
        self.rec.add(EventKind.message, what, data={"role": "agent-note"})
        return [*state.get("notes", []), what]

    # -------------------------------------------------------------- nodes
    def planner(self, state: AgentState) -> AgentState:
        info = self.tools.probe()
        end_time = self.tools.end_time
        try:
            motion = motion_summary(self.tools.motion(fps=min(self.motion_fps, info.fps)))
        except VtoolsError as exc:
            motion = f"(motion timeline unavailable: {exc})"
        update: AgentState = {"end_time": end_time, "fps": info.fps, "width": info.width, "height": info.height,
                              "motion": motion, "evidence": [], "seen": [], "round": 0, "frames_used": 0,
                              "tokens_used": 0, "notes": [], "state": {}}
        self.marked = marked_image(self.ctx, end_time)
        if self.marked is not None:
            self.question += "\n" + prompt_frame_legend(self.ctx, MARKED_WHERE[self.frame_mode])
        prompt = (f"{self.question}{self.transcript}\n\nThe video lasts {end_time:.2f} s "
                  f"(you may only look at 0-{end_time:.2f} s), "
                  f"{info.fps:g} fps, {info.width}x{info.height}.\nMotion timeline:\n{motion}\n\n"
                  f"Frame budget: {self.max_frames} frames in at most {self.max_rounds} rounds; "
                  f"plan about {self._first_round_budget()} frames for the first round.")
        parts: list[Part] = [Text(prompt)]
        if self.marked is not None:  # the only frame the planner sees: which object is which
            parts += [Text(f"The prompt frame (the video's last frame, {frame_label(end_time)}, objects marked):"),
                      self.marked]
        text, used = self.ask("planner", parts, PLANNER_SYSTEM, state)
        update["tokens_used"] = used
        plan = extract_json(text)
        segments = plan.get("segments") if isinstance(plan, dict) else None
        requests = [s for s in segments if isinstance(s, dict)] if isinstance(segments, list) else []
        times = self._times_for(requests, end_time, info.fps, [])
        if not times:
            update["notes"] = self.note(update, "planner gave no usable plan: uniform sampling over the whole video")
            plan = {"look_for": "", "state": {}}
            requests = [{"start": 0.0, "end": end_time, "count": self._first_round_budget()}]
        update["plan"] = plan if isinstance(plan, dict) else {}
        update["state"] = (plan or {}).get("state", {}) if isinstance(plan, dict) else {}
        update["requests"] = requests
        return update

    def observer(self, state: AgentState) -> AgentState:
        end_time, fps = state["end_time"], state["fps"]
        round_no = state.get("round", 0) + 1
        remaining = self.max_frames - state.get("frames_used", 0)
        budget = min(remaining, self._first_round_budget()) if round_no == 1 else remaining
        if self.marked is not None and self.frame_mode == "only":
            return self._observe_marked_only(state, round_no)
        plain = [r for r in state.get("requests", []) if not isinstance(r.get("box"), list)]
        zooms = [r for r in state.get("requests", []) if isinstance(r.get("box"), list)]
        seen = list(state.get("seen", []))
        frames: list[Frame] = []
        times = thin(self._times_for(plain, end_time, fps, seen), budget)
        if (self.marked is not None and self.frame_mode == "replace_last" and round_no == 1
                and not _near(end_time, times, fps)):  # the paper's input: the marked last frame is always seen
            times = [*thin(times, budget - 1), end_time]
        if times:
            frames = [f for f in self.tools.frames(times=times) if not _near(f.time, seen, fps)]
            frames = _unique(frames)
        for req in zooms:
            left = budget - len(frames)
            if left <= 0:
                break
            zoom_times = thin(request_times(req, end_time, fps), left)
            if zoom_times:
                box = [min(max(_num(v, 0.0) or 0.0, 0.0), 1.0) for v in req["box"][:4]]
                if len(box) == 4 and box[2] > box[0] and box[3] > box[1]:
                    frames += self.tools.crop(box, times=zoom_times)
        update: AgentState = {"round": round_no, "requests": []}
        if not frames:
            update["done_reason"] = "no new frames to look at"
            update["notes"] = self.note(state, f"round {round_no}: the requests gave no new frames")
            return update
        frames.sort(key=lambda f: (f.time, f.label))
        evidence = list(state.get("evidence", []))
        tracked: Any = state.get("state", {})  # the model's own JSON, whatever shape it chose
        tokens = state.get("tokens_used", 0)
        plan = state.get("plan", {})
        for start in range(0, len(frames), self.batch):
            chunk = frames[start:start + self.batch]
            parts: list[Part] = [Text(
                f"{self.question}\n\nLook for: {plan.get('look_for') or 'whatever decides the answer'}\n"
                f"State so far (after the frames already watched): {json.dumps(tracked, ensure_ascii=False)}\n"
                f"Evidence so far:\n{evidence_digest(evidence, 4000)}\n\n"
                f"Now {len(chunk)} frames, in time order:")]
            for f in chunk:
                is_marked = self._shows_marked(f, end_time, fps)
                if self.timestamps:
                    label = frame_label(f.time) + (f" ({f.label})" if f.label else "")
                    parts.append(Text(label + (" (the prompt frame: objects marked)" if is_marked else "")))
                if is_marked and self.marked is not None:
                    parts.append(Image(self.marked.data, self.marked.media_type, (f.time,)))
                else:
                    parts.append(Image(f.data, f.media_type, (f.time,)))
            if self.marked is not None and self.frame_mode == "append":
                parts += [Text(f"The prompt frame (the video's last frame, {frame_label(end_time)}, objects marked):"),
                          Image(self.marked.data, self.marked.media_type, (end_time,))]
            parts.append(Text("Update the state event by event and reply with the JSON object."))
            text, used = self.ask("observer", parts, OBSERVER_SYSTEM, state)
            tokens += used
            parsed = extract_json(text)
            if isinstance(parsed, dict) and "state" in parsed:
                tracked = parsed["state"]
            evidence.append({"round": round_no, "times": [f.time for f in chunk],
                             "parsed": parsed if isinstance(parsed, dict) else None,
                             "raw": "" if isinstance(parsed, dict) else text})
            if tokens >= self.max_tokens:
                break
        seen = sorted({*seen, *(f.time for f in frames if not f.label)})
        update.update({"evidence": evidence, "state": tracked, "seen": seen, "tokens_used": tokens,
                       "frames_used": state.get("frames_used", 0) + len(frames)})
        return update

    def replanner(self, state: AgentState) -> AgentState:
        left = self.max_frames - state.get("frames_used", 0)
        prompt = (f"{self.question}{self.transcript}\n\nThe video lasts {state['end_time']:.2f} s. "
                  f"Motion timeline:\n{state['motion']}\n"
                  f"Frames already watched at: {_times_text(state.get('seen', []))}\n"
                  f"Tracked state: {json.dumps(state.get('state', {}), ensure_ascii=False)}\n"
                  f"Evidence (time-ordered):\n{evidence_digest(state.get('evidence', []))}\n\n"
                  f"Remaining budget: {left} frames, {self.max_rounds - state.get('round', 0)} rounds.")
        text, used = self.ask("replanner", [Text(prompt)], REPLANNER_SYSTEM, state)
        update: AgentState = {"tokens_used": state.get("tokens_used", 0) + used}
        decision = extract_json(text)
        if not isinstance(decision, dict):
            update["notes"] = self.note(state, "re-planner reply was not JSON: stop observing and answer")
            update.update({"requests": [], "done_reason": "re-planner unusable"})
            return update
        requests = [r for r in decision.get("requests") or [] if isinstance(r, dict)]
        if decision.get("done") is True or not requests:
            update.update({"requests": [], "done_reason": str(decision.get("reason") or "evidence sufficient")})
        else:
            update["requests"] = requests
        return update

    def synthesiser(self, state: AgentState) -> AgentState:
        prompt = (f"{self.question}{self.transcript}\n\nThe video lasts {state.get('end_time', 0):.2f} s.\n"
                  f"Tracked state: {json.dumps(state.get('state', {}), ensure_ascii=False)}\n"
                  f"Evidence (time-ordered):\n{evidence_digest(state.get('evidence', []))}")
        text, used = self.ask("synthesiser", [Text(prompt)], SYNTHESISER_SYSTEM, state)
        answer = extract_answer(text)
        notes = state.get("notes", [])
        if not answer:
            fallback = state.get("state")
            answer = json.dumps(fallback) if fallback else ""
            notes = self.note(state, "synthesiser gave no answer line: answering with the tracked state")
        return {"final_text": text, "answer": answer, "notes": notes,
                "tokens_used": state.get("tokens_used", 0) + used}

    def _shows_marked(self, frame: Frame, end_time: float, fps: float) -> bool:
        """`replace_last`: the video's last frame is shown as the marked prompt frame (not a zoom)."""
        return (self.marked is not None and self.frame_mode == "replace_last" and not frame.label
                and frame.time >= end_time - 0.5 / max(fps, 1.0))

    def _observe_marked_only(self, state: AgentState, round_no: int) -> AgentState:
        """`prompt_frame=only` (EOC-Bench's "1f"): one observation of the marked last frame, nothing else."""
        if round_no > 1:
            return {"round": round_no, "requests": [], "done_reason": "only the prompt frame is shown"}
        assert self.marked is not None
        end_time = state["end_time"]
        parts: list[Part] = [Text(f"{self.question}\n\nThe only frame you get: the video's last frame, "
                                  "with the objects marked:")]
        if self.timestamps:
            parts.append(Text(frame_label(end_time) + " (the prompt frame: objects marked)"))
        parts += [Image(self.marked.data, self.marked.media_type, (end_time,)),
                  Text("Update the state and reply with the JSON object.")]
        text, used = self.ask("observer", parts, OBSERVER_SYSTEM, state)
        parsed = extract_json(text)
        tracked = parsed["state"] if isinstance(parsed, dict) and "state" in parsed else state.get("state", {})
        evidence = [{"round": 1, "times": [end_time], "parsed": parsed if isinstance(parsed, dict) else None,
                     "raw": "" if isinstance(parsed, dict) else text}]
        return {"round": 1, "requests": [], "evidence": evidence, "state": tracked, "seen": [end_time],
                "tokens_used": state.get("tokens_used", 0) + used, "frames_used": 1,
                "done_reason": "only the prompt frame is shown"}

    # -------------------------------------------------------------- routing
    def after_observer(self, state: AgentState) -> str:
        if state.get("done_reason"):
            return "synthesiser"
        if state.get("round", 0) >= self.max_rounds:
            return "synthesiser"
        if state.get("frames_used", 0) >= self.max_frames or state.get("tokens_used", 0) >= self.max_tokens:
            return "synthesiser"
        return "replanner"

    def after_replanner(self, state: AgentState) -> str:
        return "observer" if state.get("requests") else "synthesiser"

    def _first_round_budget(self) -> int:
        return max(1, min(self.max_frames, int(round(self.max_frames * self.first_share))))

    def _times_for(self, requests: list[dict[str, Any]], end_time: float, fps: float, seen: list[float]) -> list[float]:
        times: set[float] = set()
        for req in requests:
            try:
                times.update(request_times(req, end_time, fps))
            except (TypeError, ValueError):
                continue
        return sorted(t for t in times if not _near(t, seen, fps))

    def invoke(self) -> AgentState:
        from langgraph.graph import END, START, StateGraph  # why: langgraph is heavy and this agent's alone

        graph = StateGraph(AgentState)
        graph.add_node("planner", self.planner)
        graph.add_node("observer", self.observer)
        graph.add_node("replanner", self.replanner)
        graph.add_node("synthesiser", self.synthesiser)
        graph.add_edge(START, "planner")
        graph.add_edge("planner", "observer")
        graph.add_conditional_edges("observer", self.after_observer, ["replanner", "synthesiser"])
        graph.add_conditional_edges("replanner", self.after_replanner, ["observer", "synthesiser"])
        graph.add_edge("synthesiser", END)
        app = graph.compile()
        # langgraph types a run's result as a plain dict; it is the graph's AgentState
        return cast(AgentState, app.invoke({}, {"recursion_limit": 4 * self.max_rounds + 10}))


def _near(t: float, seen: list[float], fps: float) -> bool:
    tol = 0.5 / max(fps, 1.0)
    return any(abs(t - s) < tol for s in seen)


def _unique(frames: list[Frame]) -> list[Frame]:
    out: dict[float, Frame] = {}
    for f in frames:
        out.setdefault(round(f.time, 6), f)
    return list(out.values())


def _times_text(times: list[float], limit: int = 80) -> str:
    if not times:
        return "(none)"
    shown = ", ".join(f"{t:.2f}" for t in times[:limit])
    return shown + (f" ... ({len(times)} in all)" if len(times) > limit else "")
