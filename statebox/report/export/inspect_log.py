"""A run as an Inspect AI eval log (`.eval` or `.json`), which `inspect view` opens.

Why inspect_ai's own models and writer rather than hand-written JSON: the log format is
inspect_ai's (pydantic `EvalLog` / `EvalSpec` / `EvalSample` / `Score`, the `.eval` zip of one
JSON member per sample); building it with the library that reads it means the fields, the
schema version and the zip layout are whatever the installed reader expects.
`inspect_ai` is heavy (~1 s to import, a large dependency tree), so this module is imported
only by `statebox export` (and imports it at its top: nothing else loads this module).

Mapping (one sample per attempt folder):
- the log: task `statebox`, run id, the run's datasets, agents as the plan's steps, epochs;
  `viewer.trust_content = False` (agents' output is hostile: shown as plain text, never rendered);
  `results` are the shared scorer's per (agent, dataset) numbers (the report's figures), one
  `EvalScore` per pair named `agent/dataset`, its metadata the other score views under the keys
  `run --json` uses: `clean_metrics`, `voided_metrics`, `flagged_as_wrong` (every flagged
  attempt counted wrong).
- a sample: id = attempt id, epoch = statebox epoch + 1 (Inspect counts from 1), input = the
  instruction as the agent got it, choices, target = the query's truth, messages = the
  attempt's conversation (`turns.py`), output = the final response.
- its score `statebox`: value = the per-query metrics as the store holds them (e.g.
  `{"correct": 1.0, "score": 1.0}`), answer = the response, explanation = the audit verdict
  with its findings; metadata: verdict, action, findings, status.
- metadata: item id, dataset, bench, agent, attempt id, query index, status and reason,
  verdict, action, findings, tokens, cost, frames, duration.

Large runs: `.eval` is written with inspect_ai's own `.eval` recorder (the writer
`write_eval_log` itself uses), samples built one at a time from the store and written into
its zip every `BATCH` samples, so memory holds `BATCH` samples plus Inspect's small (thinned)
per-sample summaries, which its writer keeps for `summaries.json`. The recorder is not in
`inspect_ai.log`'s public names; the version range in pyproject and tests/report/test_export.py
(which reads the file back with `read_eval_log` and through `inspect view`) guard it.
`.json` is one JSON document: it is built whole and written by `write_eval_log`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalLog,
    EvalMetric,
    EvalPlan,
    EvalPlanStep,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    write_eval_log,
)
from inspect_ai.log._recorders.eval import EvalRecorder  # inspect's streaming .eval writer (see above)
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ContentReasoning,
    ContentText,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.scorer import Score
from inspect_ai.tool import ToolCall, ToolCallError
from inspect_ai.viewer import ViewerConfig

from statebox import __version__
from statebox.report.export.records import AttemptRecord, RunReader, iso_time
from statebox.report.export.turns import Turn, build_turns, instruction_of, read_events, seq_ranges

SCORER = "statebox"
BATCH = 256  # samples held before they are written into the .eval zip


def verdict_explanation(verdict: str, action: str, findings: list[dict[str, Any]]) -> str:
    """The audit verdict as one readable paragraph: label, policy action, each finding."""
    head = f"audit verdict: {verdict} (action: {action})"
    if not findings:
        return head + "; no findings"
    lines = [head + ";", "findings:"]
    for f in findings:
        event = f.get("event")
        where = f" [event {event}]" if event is not None else ""
        quote = str(f.get("quote") or "")
        quote = f" {quote[:200]!r}" if quote else ""
        rule = f" ({f.get('rule')})" if f.get("rule") else ""
        lines.append(f"- {f.get('category', '?')} / {f.get('severity', '?')}{rule}{where}{quote}")
    return "\n".join(lines)


def _score_value(metrics: dict[str, Any]) -> dict[str, float | None]:
    return {str(k): (None if v is None else float(v)) for k, v in (metrics or {}).items()}


def _messages(turns: list[Turn], model: str) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for t in turns:
        meta: dict[str, Any] = {"events": seq_ranges(t.seqs)}
        if t.time is not None:
            meta["time_s"] = t.time
        if t.role == "user":
            out.append(ChatMessageUser(content=t.text, metadata=meta))
        elif t.role == "system":
            out.append(ChatMessageSystem(content=t.text, metadata=meta))
        elif t.role == "tool":
            out.append(ChatMessageTool(
                content=t.text, metadata=meta, tool_call_id=t.call_id or None, function=t.tool or None,
                error=ToolCallError("unknown", t.text[:500]) if t.error else None,
            ))
        else:
            if t.final:
                meta["final_answer"] = True
            content: str | list[Any] = t.text
            if t.reasoning:
                content = [ContentReasoning(reasoning=t.reasoning), *([ContentText(text=t.text)] if t.text else [])]
            calls = [ToolCall(id=c.id, function=c.name, arguments=c.arguments) for c in t.calls] or None
            out.append(ChatMessageAssistant(content=content, tool_calls=calls, model=model, metadata=meta))
    return out


def build_sample(record: AttemptRecord, model: str) -> EvalSample:
    """One attempt as an Inspect sample (see the module docstring for the mapping)."""
    row = record.row
    turns = build_turns(read_events(record.events_path))
    item = record.item
    instruction = instruction_of(turns) or (item.question if item is not None else "")
    findings = list(row.findings or [])
    metadata = {
        "item_id": row.item_id,
        "dataset": row.dataset,
        "bench": row.bench,
        "agent": row.agent,
        "attempt_id": row.attempt_id,
        "run_id": row.run_id,
        "query_index": row.query_index,
        "epoch": row.epoch,
        "status": row.status,
        "reason": row.reason,
        "verdict": row.verdict,
        "action": row.action,
        "findings": findings,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "cost_usd": row.cost_usd,
        "frames_decoded": row.frames_decoded,
        "frames_model": row.frames_model,
        "retries": row.retries,
        "attempt_dir": str(record.attempt_dir),
        "events_missing": not record.events_path.exists(),
        "trust": record.trust_facts,
    }
    score = Score(
        value=_score_value(row.metrics),
        answer=row.response,
        explanation=verdict_explanation(row.verdict, row.action, findings),
        metadata={"verdict": row.verdict, "action": row.action, "findings": findings, "status": row.status},
    )
    usage = None
    if row.input_tokens or row.output_tokens:
        usage = {model: ModelUsage(input_tokens=int(row.input_tokens), output_tokens=int(row.output_tokens),
                                   total_tokens=int(row.input_tokens) + int(row.output_tokens),
                                   total_cost=float(row.cost_usd) or None)}
    return EvalSample(
        id=row.attempt_id,
        epoch=int(row.epoch) + 1,
        input=instruction,
        choices=list(item.choices) if item is not None and item.choices else None,
        target=record.target,
        messages=_messages(turns, model),
        output=ModelOutput.from_content(model=model, content=row.response),
        scores={SCORER: score},
        metadata=metadata,
        model_usage=usage or {},
        started_at=iso_time(record.started_at) if row.finished_at else None,
        completed_at=iso_time(float(row.finished_at)) if row.finished_at else None,
        total_time=float(row.duration_s),
        working_time=float(row.duration_s),
    )


def _model_name(reader: RunReader, agent: str) -> str:
    """Inspect names a model `provider/name`: the agent's model when it had one, else `statebox/<agent>`."""
    return reader.agent_model(agent) or f"statebox/{agent}"


def _spec(reader: RunReader) -> EvalSpec:
    config = reader.config
    start, _ = reader.time_span()
    labels = [d.spec.label for d in reader.loaded]
    return EvalSpec(
        eval_id=f"statebox-{config.run_id}",
        run_id=config.run_id,
        created=iso_time(start),
        task="statebox",
        task_id=config.run_id,
        task_version=0,
        task_description="statebox run: agents on video state-tracking benchmarks, in sandboxes, audited",
        task_args={"agents": config.agents, "datasets": labels, "limit": config.limit, "policy": config.policy},
        solver="statebox",
        solver_args={"agents": config.agents},
        dataset=EvalDataset(name=",".join(labels), location=config.suite or None, samples=reader.n_rows),
        model="statebox/" + "+".join(config.agents),
        config=EvalConfig(epochs=config.epochs),
        packages={"statebox": __version__},
        # what agents printed is hostile: the viewer shows it as plain text (no markdown images or
        # links fetched when someone opens the log, bidi/invisible characters made visible)
        viewer=ViewerConfig(trust_content=False),
        metadata={
            "statebox_run_dir": str(reader.run_dir),
            "policy": config.policy,
            "suite": config.suite,
            "datasets": [d.spec.model_dump() for d in reader.loaded],
            "agent_options": json.loads(json.dumps(config.agent_options, default=str)),
        },
    )


def _plan(reader: RunReader) -> EvalPlan:
    return EvalPlan(name="statebox", steps=[
        EvalPlanStep(solver=agent, params={"model": reader.agent_model(agent)} if reader.agent_model(agent) else {})
        for agent in reader.config.agents
    ])


def _results(reader: RunReader) -> EvalResults:
    scores = []
    for s in reader.scores():
        metrics = {name: EvalMetric(name=name, value=float(value))
                   for name, value in s.report.metrics.items() if value is not None}
        scores.append(EvalScore(
            name=f"{s.agent}/{s.dataset}", scorer=SCORER, scored_samples=s.n,
            metrics=metrics,
            metadata={"bench": s.bench, "headline": s.headline, "verdict_counts": s.verdict_counts,
                      "clean_metrics": s.clean.metrics if s.clean else None, "voided_metrics": s.voided.metrics,
                      "flagged_as_wrong": s.flagged_view.metrics},
        ))
    return EvalResults(total_samples=reader.n_rows, completed_samples=reader.n_rows, scores=scores)


def _stats(reader: RunReader) -> EvalStats:
    start, end = reader.time_span()
    return EvalStats(started_at=iso_time(start), completed_at=iso_time(end))


def _samples(reader: RunReader) -> Iterator[EvalSample]:
    models: dict[str, str] = {}
    for record in reader.records():
        agent = record.row.agent
        model = models.get(agent) or models.setdefault(agent, _model_name(reader, agent))
        yield build_sample(record, model)


async def _stream_eval(reader: RunReader, out: Path) -> int:
    spec, plan = _spec(reader), _plan(reader)
    recorder = EvalRecorder(str(out.parent))
    await recorder.log_init(spec, str(out), clean=True)
    await recorder.log_start(spec, plan)
    # the recorder's zip in progress: buffered samples go into it every BATCH samples. Not the
    # recorder's flush(), which copies the whole file to the destination each time (quadratic);
    # not write_through, which re-filters every summary so far per sample (quadratic too: a 20k
    # attempt run did not finish in 10 minutes).
    zip_log = recorder.data[recorder._log_file_key(spec)]
    pending = written = 0
    for sample in _samples(reader):
        await recorder.log_sample(spec, sample)
        pending += 1
        written += 1
        if pending >= BATCH:
            await zip_log.write_buffered_samples()
            pending = 0
    await recorder.log_finish(spec, "success", _stats(reader), _results(reader), None)
    return written


def write_inspect_log(reader: RunReader, out: Path) -> int:
    """Write the run to `out` (`.eval`: streamed zip; `.json`: one document); returns samples written."""
    if out.suffix == ".eval":
        return asyncio.run(_stream_eval(reader, out))
    samples = list(_samples(reader))
    log = EvalLog(eval=_spec(reader), plan=_plan(reader), status="success", stats=_stats(reader),
                  results=_results(reader), samples=samples)
    write_eval_log(log, str(out), format="json")
    return len(samples)
