"""Reference agents that need no sandbox: the two chance baselines, the query-index prior
and the oracle.

They anchor every leaderboard: an agent that does not beat `chance-frequency` (or, on a
streaming benchmark, `query-index-prior`) has learned nothing from the pixels, and
`oracle` proves the pipeline from ground truth through the scorer reaches 100% on the
generated suite (on EC-Bench items it answers in the paper's JSON with the true evidence spans,
so span IoU is proven too). None of them sees a video, so a run of them needs no `--videos`.
The model-driven prior (`blind`: the question without the video) is agents/blind.py.
"""

from __future__ import annotations

import json
import random
from typing import Any

from statebox.attempt import AgentOptions, AttemptContext
from statebox.recorder import SessionRecorder
from statebox.schema import AttemptStatus, EventKind, Item, Session  # noqa: F401 - Session is the return type
from statebox.scoring import chance_response


def format_target(item: Item, target: Any) -> str:
    """Write a ground-truth value as the response text a perfect model would give."""
    if isinstance(target, (list, tuple, set)):
        return ",".join(str(v) for v in sorted(target))
    if isinstance(target, float) and target.is_integer():
        return str(int(target))
    if item.answer_type == "mcq" and isinstance(target, int) and item.choices:
        return "ABCDEFGH"[target]
    return str(target)


class HostAgent:
    """An agent that answers on the host, with no sandbox and no model: subclasses give `answer`;
    this records it as a session of two events (the question, the answer)."""

    name = "baseline"
    needs_sandbox = False
    needs_gateway = False

    def __init__(self, options: AgentOptions) -> None:
        self.options = options

    def answer(self, ctx: AttemptContext) -> str:
        raise NotImplementedError

    def run(self, ctx: AttemptContext) -> Session:
        with SessionRecorder(ctx.attempt_dir, limits=ctx.policy.recording) as rec:
            rec.add(EventKind.message, ctx.item.question, data={"role": "user"})
            status: AttemptStatus = "ok"
            reason = ""
            try:
                response = self.answer(ctx)
            except ValueError as exc:
                response, status, reason = "", "error", str(exc)
            rec.add(EventKind.final_answer, response)
            return rec.session(ctx.attempt.attempt_id, self.name, status=status, reason=reason, response=response)


def _rng(ctx: AttemptContext) -> random.Random:
    """Seeded per attempt, so a resumed run answers exactly as the uninterrupted one."""
    return random.Random(f"{ctx.attempt.attempt_id}|{ctx.options.extra.get('seed', 0)}")


class ChanceRandomAgent(HostAgent):
    name = "chance-random"

    def answer(self, ctx: AttemptContext) -> str:
        items = ctx.dataset_items or [ctx.item]
        return chance_response(ctx.item.benchmark, ctx.item, ctx.query.index, items, "random", _rng(ctx))


class ChanceFrequencyAgent(HostAgent):
    name = "chance-frequency"

    def answer(self, ctx: AttemptContext) -> str:
        items = ctx.dataset_items or [ctx.item]
        return chance_response(ctx.item.benchmark, ctx.item, ctx.query.index, items, "frequency", _rng(ctx))


class QueryIndexPriorAgent(HostAgent):
    """VCBench's index-counting leak as a baseline: at the i-th query point of an item (i from 0)
    answer i + 1. Query points are placed just after count changes, so the index tracks the
    count; on the released vcbench_eval.jsonl this scores 0.451 GPA, above every model of the
    paper (../shared/reference/vcbench_ecbench.md, A7). Number answers only: on a multiple-
    choice or text item the attempt ends with status `error` rather than a meaningless guess."""

    name = "query-index-prior"

    def answer(self, ctx: AttemptContext) -> str:
        if ctx.item.answer_type != "number":
            raise ValueError(f"query-index-prior answers number questions only (this one is {ctx.item.answer_type})")
        return str(ctx.query.index + 1)


class OracleAgent(HostAgent):
    """Answers from ground truth; only meaningful (and only allowed) on the generated suite."""

    name = "oracle"

    def answer(self, ctx: AttemptContext) -> str:
        if not ctx.options.extra.get("suite"):
            raise ValueError("the oracle runs only on the generated suite (--suite DIR)")
        target = ctx.query.target if ctx.query.target is not None else ctx.item.target
        if ctx.item.benchmark == "ecbench":  # the paper's output JSON, so the span path is proven too
            return ecbench_reply(format_target(ctx.item, target), ctx.item)
        return format_target(ctx.item, target)


def ecbench_reply(answer: str, item: Item) -> str:
    """EC-Bench's official output (Fig. 13) for `answer` with the item's evidence spans as its clips:
    `{"results":[{"query_id":1,"answer":...,"clips":[["HH:MM:SS","HH:MM:SS"], ...]}]}`."""
    def hms(seconds: float) -> str:
        whole = int(round(seconds))
        return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"

    clips = [[hms(span.start), hms(span.end)] for span in item.evidence]
    return json.dumps({"results": [{"query_id": 1, "answer": answer, "clips": clips}]})
