"""The models statebox asks when the user names none, written once.

Why one module: the Anthropic default was written in four places (the ReAct agent, the audit's second pass, the
scoring judge, the demo's real agent) and all four named `claude-sonnet-4-5`, which Anthropic retires on
2026-11-30 (the `anthropic` SDK's `DEPRECATED_MODELS`). From that day a user with a key would get a refused
request from each of them, and the gateway, which pins the default when a run names no `--model`, would pin a model
that no longer answers. `tests/test_model_names.py` fails as soon as the SDK the lockfile installs lists a default
here as deprecated, months before its retirement, so the next move is made on a working day, not on a user's run.

A default is a choice that moves numbers (the judge decides open-ended scores): every caller records the model it
used (the judge's `provider:model` name, the run's plan, the audit's cached verdicts), so a changed default is
visible in what it wrote. The frame-reading agents' defaults (`agents/vision_client.py`) are named here too.

OpenAI's defaults were `gpt-5` (the judge, the demo's codex) and `gpt-4.1` (the frame-reading agents): OpenAI shuts the
first down on 2026-12-11 and the second on 2027-01-14 (`model_retirement.OPENAI_SHUTDOWNS`). Both are now
`gpt-6.1-sol`, the replacement OpenAI's deprecations page names for `gpt-5`, at $2/$10 a million tokens (gpt-4.1 was
$2/$8). What it changes on the wire, and how the callers meet it: it reasons by default, so it takes no sampling
parameters (`vision_client.takes_temperature` leaves them out) and counts its reasoning in the completion cap (the
frame-reading agents ask it for low effort, the lowest it takes, unless the run names one); it calls tools only
through the Responses API, which Codex speaks, while the judge and the frame-reading agents send no tools. The
pinned Codex CLI (0.169) knows it by name.
Bottom layer: names, nothing imported.
"""

from __future__ import annotations

ANTHROPIC_MODEL = "claude-sonnet-4-6"  # legacy, still served; Sonnet 5.x changes sampling and tool-forcing rules
OPENAI_MODEL = "gpt-6.1-sol"  # the judge, the demo's codex
OPENAI_VISION_MODEL = "gpt-6.1-sol"  # the frame-reading agents (mllm, video agent, blind) on OpenAI's Chat Completions
