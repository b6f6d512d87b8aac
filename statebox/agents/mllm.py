"""`mllm`: the plain multimodal baseline — N frames (or an fps), the question, one request.

This is the baseline lmms-eval users know and the seeds' frame-budget sweeps use
(16/32/64/128 frames; 1 fps for Gemini-style runs): frames are sampled uniformly with
lmms-eval's index rule (`np.linspace(0, n_frames - 1, N).astype(int)`), decoded by
`vtools` inside the attempt's sandbox, optionally labelled with their timestamps, and
sent in one request in the provider's native image format. For a streaming query the
frames cover only the video up to the query time.

Options (AgentOptions): `model`, `provider`, `frames` (N, default 32) or `fps`,
`timestamps` (label each frame with its time, default on), `prompt_template` (a file
with {question} {options} {answer_format} {query_time} {num_frames} fields), and in
`extra`: `max_side` (pixels, default 768), `api` (`chat` | `responses` for OpenAI),
`max_tokens`, `max_frames` (cap for --fps, default 512), `vtools` (`sandbox` | `local`),
`prompt_frame` (`replace_last` | `append` | `only`: where EOC-Bench's marked frame goes, see
`video_prompts.prompt_frame_mode`; default the paper's `replace_last`).

Workspace extras (issue 17): an item with visual prompts gets the host's prompt_frame.png in
place of the last sampled frame (the paper's input), and with the policy's `media.transcripts`
the workspace's transcript.txt goes in as a text part after the frames (EC-Bench's
with-subtitles condition).
"""

from __future__ import annotations

import time

import numpy as np

from statebox.attempt import AgentOptions, AttemptContext, open_gateway
from statebox.agents.model_turns import ask_for_answer, failures_end_the_attempt, model_session
from statebox.agents.vision_client import (
    Image,
    Part,
    Text,
    DEFAULT_MODELS,
    VisionClient,
    model_choice,
)
from statebox.agents.video_prompts import (
    frame_label,
    marked_image,
    prompt_frame_legend,
    prompt_frame_mode,
    question_block,
    render_template,
    template_fields,
    transcript_section,
)
from statebox.errors import UserError
from statebox.recorder import SessionRecorder
from statebox.sandbox.workspace import last_frame_time
from statebox.schema import EventKind, Session, Usage
from statebox.tools.sandboxed import open_video_tools
from statebox.tools.video_tools import Frame, VideoTools, VtoolsError

DEFAULT_FRAMES = 32


def sample_frames(tools: VideoTools, options: AgentOptions) -> tuple[list[Frame], str]:
    """The baseline's frames and a phrase saying how they were chosen."""
    max_frames = int(options.extra.get("max_frames", 512))
    if options.fps:
        frames = tools.frames(fps=float(options.fps), max_frames=max_frames + 1)
        if len(frames) > max_frames:  # lmms-eval's rule when an fps asks for too many: uniform subsample
            keep = np.linspace(0, len(frames) - 1, max_frames).astype(int).tolist()
            frames = [frames[i] for i in keep]
        return frames, f"at {options.fps:g} frame(s) per second"
    n = int(options.frames or DEFAULT_FRAMES)
    if n <= 0:
        raise UserError(f"mllm: --frames must be positive, got {n}")
    return tools.frames(uniform=n), "uniformly"


def build_parts(frames: list[Frame], text: str, timestamps: bool, marked: Image | None = None,
                mode: str = "replace_last", transcript: str = "") -> list[Part]:
    """Frames first (time order, each after its label), then the question — lmms-eval's layout.

    `marked`: EOC-Bench's prompt frame (the last frame with the objects drawn), placed by `mode`:
    `replace_last` puts it in the last sampled frame's place (EOC-Bench's repo replaces the final
    sampled index with the marked last frame), `append` after the frames, `only` alone.
    `transcript`: the transcription section, after the frames and before the question.
    """
    ordered = sorted(frames, key=lambda f: f.time)
    if marked is not None and mode == "only":
        ordered = []
    elif marked is not None and mode == "replace_last" and ordered:
        ordered = ordered[:-1]
    parts: list[Part] = []
    for f in ordered:
        if timestamps:
            parts.append(Text(frame_label(f.time)))
        parts.append(Image(f.data, f.media_type, (f.time,)))
    if marked is not None:
        if timestamps:
            parts.append(Text(frame_label(marked.times[0])))
        parts.append(marked)
    if transcript:
        parts.append(Text(transcript))
    parts.append(Text(text))
    return parts


def prompt_frame_image(ctx: AttemptContext, frames: list[Frame], mode: str = "replace_last") -> Image | None:
    """The workspace's prompt_frame.png as an image part (None for items without prompts), dated
    by the frame it stands for: the video's last frame (the last uniformly sampled one when there
    are frames; else the cut's end, else the clean copy's last frame time)."""
    last_sampled = max((f.time for f in frames), default=None)
    if last_sampled is not None:
        time = last_sampled
    elif ctx.workspace is not None and ctx.workspace.duration_s is not None:
        time = ctx.workspace.duration_s
    else:
        time = _last_frame_time(ctx)
    return marked_image(ctx, time)


def _last_frame_time(ctx: AttemptContext) -> float:
    """The clean copy's last frame time, read from the host-only video store (the agent cannot touch it)."""
    if ctx.workspace is None or not ctx.item.prompts:
        return float(ctx.query.time or 0.0)
    try:
        return last_frame_time(ctx.workspace.video_store / ctx.workspace.video_name)
    except Exception:  # noqa: BLE001 - any decode failure (PyAV's own errors included) only loses the label's time
        return float(ctx.query.time or 0.0)


WHERE = {"replace_last": "shown as the last image", "append": "shown as the last image",
         "only": "shown as the image above"}


def prompt_text(ctx: AttemptContext, frames: list[Frame], how: str, options: AgentOptions,
                marked: bool = False, mode: str = "replace_last") -> str:
    n = len(frames)
    if options.prompt_template:
        legend = prompt_frame_legend(ctx, WHERE[mode]) if marked else ""
        text = render_template(options.prompt_template,
                               template_fields(ctx.item, ctx.query, num_frames=n, visual_prompts=legend))
        return text if legend in text else f"{legend}\n{text}"  # marks never reach the model unexplained
    stamps = " Each frame is preceded by its timestamp in seconds." if options.timestamps else ""
    if marked:  # the paper's system-prompt sentence: which colour is which <object N>
        stamps += " " + prompt_frame_legend(ctx, WHERE[mode])
    if marked and mode == "only":
        head = "The image above is the last frame of a video (the moment the question is asked)."
    else:
        head = f"The images above are {n} frames sampled {how} from a video, in time order."
    return (f"{head}{stamps}\n\n"
            f"{question_block(ctx.item, ctx.query)}\n\n"
            "Reason briefly if you need to, then end with a last line of the form: ANSWER: <your answer>")


class MllmAgent:
    name = "mllm"
    needs_sandbox = True
    needs_gateway = True
    default_models = DEFAULT_MODELS  # the gateway's model allow-list when the run names no --model (harness/plan.py:pinned_models)
    budgets = ("frames", "fps")  # the options a `--frames a,b` / `--fps a,b` sweep varies (harness/plan.py)

    def __init__(self, options: AgentOptions | None = None) -> None:
        self.options = options or AgentOptions()
        prompt_frame_mode(self.options, self.name)  # a bad -o prompt_frame stops the run before it starts

    def run(self, ctx: AttemptContext) -> Session:
        options, provider, model = model_choice(ctx, self.options)
        started = ctx.started_at or time.time()
        response = ""
        usage = Usage()
        with SessionRecorder(ctx.attempt_dir, started, limits=ctx.policy.recording) as rec:
            rec.add(EventKind.message, ctx.instruction, data={"role": "user", "agent": self.name, "model": model})
            with open_gateway(ctx, provider, f"the {self.name} agent") as access:
                try:
                    with failures_end_the_attempt(rec) as outcome:
                        client = VisionClient(access.lease, model, provider, api=options.extra.get("api", "chat"),
                                              max_tokens=int(options.extra.get("max_tokens", 2048)),
                                              effort=options.effort)
                        frame_mode = prompt_frame_mode(options, self.name)
                        marked_only = frame_mode == "only" and marked_image(ctx, 0.0) is not None
                        frames: list[Frame] = []
                        how = ""
                        if not marked_only:  # "1f": the marked last frame alone, nothing to decode
                            with open_video_tools(ctx, mode=options.extra.get("vtools", "sandbox"),
                                                  max_side=options.extra.get("max_side", 768),
                                                  on_decoded=lambda ts: rec.add_frames(decoded=ts)) as tools:
                                frames, how = sample_frames(tools, options)
                            if not frames:
                                raise VtoolsError("no frames could be decoded")
                        marked = prompt_frame_image(ctx, frames, frame_mode)
                        text = prompt_text(ctx, frames, how, options, marked=marked is not None, mode=frame_mode)
                        transcript = transcript_section(ctx)
                        parts = build_parts(frames, text, options.timestamps, marked, frame_mode, transcript)
                        shown = [t for p in parts if isinstance(p, Image) for t in p.times]
                        response = ask_for_answer(rec, client, parts, text,
                                                  {"model": model, "provider": provider, "images": len(shown), "times": shown,
                                                   "prompt_frame": frame_mode if marked is not None else None,
                                                   "transcript_chars": len(transcript)}, shown=shown)
                finally:
                    usage = access.usage
            return model_session(ctx, self.name, rec, outcome, response, usage,
                                 {"model": model, "provider": provider, "frames_requested": options.frames or None,
                             "fps": options.fps, "timestamps": options.timestamps,
                             "prompt_frame": options.extra.get("prompt_frame", "replace_last") if ctx.item.prompts else None})

