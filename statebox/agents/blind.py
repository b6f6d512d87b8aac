"""`blind`: the model gets the question and its choices, never the video.

VCBench's GPT-4-Turbo row and EC-Bench's "blind text-only" baseline: what a model answers
from the wording of a question alone (priors about counts, the usual answer of a kind of
question). A video agent that does not beat it has not used the video. It runs on the host
(nothing to sandbox: no file of the item reaches it) and talks to its model through the
run's gateway like every model-driven agent, so its requests are logged and budgeted the
same way. The question is worded as every frame-looking agent gets it
(`video_prompts.question_block`: the query time of a streaming question included), after
one sentence saying that no video is shown.

Options: `model`, `provider`, `prompt_template` (fields as mllm's, `num_frames` = 0), and
in `extra`: `api` (`chat` | `responses` for OpenAI), `max_tokens`.
"""

from __future__ import annotations

import time

from statebox.agents.model_turns import ask_for_answer, failures_end_the_attempt, model_session
from statebox.agents.video_prompts import question_block, render_template, template_fields
from statebox.agents.vision_client import DEFAULT_MODELS, Text, VisionClient, model_choice
from statebox.attempt import AgentOptions, AttemptContext, open_gateway
from statebox.recorder import SessionRecorder
from statebox.schema import EventKind, Session, Usage

PREAMBLE = ("You are answering a question about a video that you cannot see: no frame of it is shown to you. "
            "Give your best guess from the question alone.")


def blind_prompt(ctx: AttemptContext, options: AgentOptions) -> str:
    if options.prompt_template:
        return render_template(options.prompt_template, template_fields(ctx.item, ctx.query, num_frames=0))
    return (f"{PREAMBLE}\n\n{question_block(ctx.item, ctx.query)}\n\n"
            "Reason briefly if you need to, then end with a last line of the form: ANSWER: <your answer>")


class BlindAgent:
    name = "blind"
    needs_sandbox = False
    needs_gateway = True
    default_models = DEFAULT_MODELS  # the gateway's model allow-list when the run names no --model (harness/plan.py:pinned_models)

    def __init__(self, options: AgentOptions | None = None) -> None:
        self.options = options or AgentOptions()

    def run(self, ctx: AttemptContext) -> Session:
        options, provider, model = model_choice(ctx, self.options)
        started = ctx.started_at or time.time()
        response = ""
        usage = Usage()
        with SessionRecorder(ctx.attempt_dir, started, limits=ctx.policy.recording) as rec:
            text = blind_prompt(ctx, options)
            rec.add(EventKind.message, text, data={"role": "user", "agent": self.name, "model": model})
            with open_gateway(ctx, provider, f"the {self.name} agent") as access:
                try:
                    with failures_end_the_attempt(rec) as outcome:
                        client = VisionClient(access.lease, model, provider, api=options.extra.get("api", "chat"),
                                              max_tokens=int(options.extra.get("max_tokens", 1024)),
                                              effort=options.effort)
                        response = ask_for_answer(rec, client, [Text(text)], text,
                                                  {"model": model, "provider": provider, "images": 0})
                finally:
                    usage = access.usage
            return model_session(ctx, self.name, rec, outcome, response, usage,
                                 {"model": model, "provider": provider, "video": False})
