"""EC-Bench: counting (official number normalisation), enumeration (judge), evidence-span IoU.

Denominators follow the released evaluator: a query whose response is empty
(or missing) leaves every official denominator (`counting_accuracy`,
`counting_mae/rmse`, `enumeration_accuracy`, `span_miou`); `*_all` variants
count it as wrong so abstaining cannot raise a score. MAE/RMSE use the first
(smallest) normalised number on both sides, over queries where both parse.
Enumeration is correct when the judge finds precision 1 (>= 1 true positive, no
false positive); statebox also reports the stricter "all listed" (no miss) and
"exact set" readings and micro precision/recall/F1.

A response in the paper's output JSON (`{"results": [{"answer": ..., "clips": [[...]]}]}`,
what `statebox run` asks agents for) is split into its answer and its clips
(`parsing.ecbench_answer_and_clips`), so `statebox run` and `statebox score` on the
same responses give the same span IoU; clips given beside the response win.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from statebox.schema import Item, ScoreRow
from statebox.scoring.core import Answers, ScoredTable, table_from_rows
from statebox.scoring.judge import EnumerationJudge, FuzzyJudge, JudgeVerdict
from statebox.scoring.metrics import precision_recall_f1
from statebox.scoring.parsing import ecbench_answer_and_clips, ecbench_normalize, ecbench_numbers
from statebox.scoring.spans import hull_iou, parse_clips, union_iou

HEADLINE = (
    "counting_accuracy",
    "counting_accuracy_all",
    "counting_mae",
    "counting_rmse",
    "span_miou",
    "enumeration_accuracy",
)
COLUMNS = (
    "counting_accuracy", "counting_accuracy_all", "_abs_err", "_sq_err", "span_miou", "span_miou_hull",
    "enumeration_accuracy", "enumeration_accuracy_all", "enumeration_all_listed", "enumeration_exact_set",
    "_tp", "_fp", "_fn", "enumeration_f1_macro", "overall_accuracy",
)
# Metrics the released summary prints as 0.0 when nothing qualifies (reproduced at the top level only).
OFFICIAL_ZERO = ("counting_accuracy", "counting_mae", "counting_rmse", "span_miou", "enumeration_accuracy",
                 "enumeration_precision", "enumeration_recall", "enumeration_f1", "overall_accuracy")
JUDGE_WORKERS = 8


def _is_empty(response: str | None) -> bool:
    return response is None or not str(response).strip()


def split_answer(response: str | None, clips: Any) -> tuple[str | None, Any]:
    """(answer text, clips): a reply in the official JSON yields both; clips given beside it win."""
    if response is None:
        return None, clips
    parsed = ecbench_answer_and_clips(str(response))
    if parsed is None:
        return response, clips
    text, json_clips = parsed
    return text, clips if clips is not None else json_clips


def counting_row(target: str, response: str) -> dict[str, float]:
    truth, predicted = ecbench_normalize(target), ecbench_normalize(response)
    match = float(bool(truth) and bool(predicted) and truth == predicted)
    row = {"counting_accuracy": match, "counting_accuracy_all": match, "overall_accuracy": match}
    t_numbers, p_numbers = ecbench_numbers(truth), ecbench_numbers(predicted)
    if t_numbers and p_numbers:
        diff = p_numbers[0] - t_numbers[0]
        row["_abs_err"], row["_sq_err"] = abs(diff), diff**2
    return row


def enumeration_row(verdict: JudgeVerdict) -> dict[str, float]:
    precision, recall, f1 = precision_recall_f1(verdict.tp, verdict.fp, verdict.fn)
    correct = float(math.isclose(precision, 1.0))
    return {
        "enumeration_accuracy": correct,
        "enumeration_accuracy_all": correct,
        "enumeration_all_listed": float(verdict.tp > 0 and verdict.fn == 0),
        "enumeration_exact_set": float(verdict.tp > 0 and verdict.fn == 0 and verdict.fp == 0),
        "_tp": float(verdict.tp), "_fp": float(verdict.fp), "_fn": float(verdict.fn),
        "enumeration_f1_macro": f1,
        "overall_accuracy": correct,
    }


def span_values(item: Item, clips: Any) -> dict[str, float]:
    truth = parse_clips(item.meta.get("clips", ""))
    predicted = parse_clips(clips)
    union = union_iou(truth, predicted)
    if union is None:
        return {}
    return {"span_miou": union, "span_miou_hull": hull_iou(truth, predicted)}  # type: ignore[dict-item]


def score_table(items: list[Item], answers: Answers, judge: EnumerationJudge | None = None) -> ScoredTable:
    judge = judge or FuzzyJudge()
    rows: list[dict[str, float]] = []
    enumeration_jobs: list[tuple[int, str, str]] = []
    failures = missing = 0
    any_clips = empty = 0
    for index, item in enumerate(items):
        answer = answers.get((item.id, 0))
        missing += answer is None
        counting = item.labels.get("task_type") == "Counting"
        response, clips = split_answer(answer.response, answer.clips) if answer else (None, None)
        any_clips += clips is not None
        if _is_empty(response):
            empty += 1
            rows.append({"counting_accuracy_all": 0.0} if counting else {"enumeration_accuracy_all": 0.0})
            continue
        assert response is not None
        if counting:
            row = counting_row(str(item.target), response)
            failures += not ecbench_normalize(response)
        else:
            row = {}
            enumeration_jobs.append((index, str(item.target), response))
        row.update(span_values(item, clips))
        rows.append(row)

    judge_errors = steered = 0
    workers = 1 if isinstance(judge, FuzzyJudge) else JUDGE_WORKERS
    with ThreadPoolExecutor(max_workers=workers) as pool:
        verdicts = list(pool.map(lambda job: judge.judge(job[1], job[2]), enumeration_jobs))
    for (index, _, _), verdict in zip(enumeration_jobs, verdicts):
        rows[index].update(enumeration_row(verdict))
        steered += verdict.steering is not None
        judge_errors += verdict.error is not None and verdict.steering is None

    warnings = [f"EC-Bench enumeration judged by {judge.name}"]
    if isinstance(judge, FuzzyJudge) and enumeration_jobs:
        warnings.append("no LLM judge configured (OPENAI_API_KEY / ANTHROPIC_API_KEY): enumeration used the "
                        "deterministic fuzzy matcher, which can differ from the official GPT judge")
    if steered:
        warnings.append(f"{steered} enumeration answer{'s' if steered != 1 else ''} held the judge's own words "
                        "(its verdict keys or a ground-truth heading): not sent to the judge, counted incorrect")
    if judge_errors:
        warnings.append(f"the judge failed on {judge_errors} enumeration answers: counted incorrect (as the released code)")
    if empty:
        warnings.append(f"{empty} EC-Bench queries have an empty or missing response: left out of the official "
                        "denominators, counted wrong in the *_all metrics")
    if items and not any_clips:
        warnings.append("no predicted clips were given: span_miou is 0 for every answered query with evidence spans")
    return ScoredTable(values=table_from_rows(COLUMNS, rows), parse_failures=failures, queries=len(items),
                       missing=missing, warnings=warnings, extra={"judge": judge.name})


def _ratio(a: Any, b: Any) -> Any:
    """a / b, 0 where b == 0 (the released code's convention), NaN where either is NaN."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(b == 0, 0.0, a / np.where(b == 0, 1.0, b))
    out = np.where(np.isnan(a) | np.isnan(b), np.nan, out)
    return out if out.ndim else float(out)


def derive(means: dict[str, Any]) -> dict[str, Any]:
    tp, fp, fn = means["_tp"], means["_fp"], means["_fn"]
    precision = _ratio(tp, np.add(tp, fp))
    recall = _ratio(tp, np.add(tp, fn))
    f1 = _ratio(np.multiply(2, np.multiply(precision, recall)), np.add(precision, recall))
    out = {name: means[name] for name in COLUMNS if not name.startswith("_")}
    out["counting_mae"] = means["_abs_err"]
    out["counting_rmse"] = np.sqrt(means["_sq_err"])
    out.update({"enumeration_precision": precision, "enumeration_recall": recall, "enumeration_f1": f1})
    return out


def score_query(item: Item, query_index: int, response: str, clips: Any = None,
                judge: EnumerationJudge | None = None) -> ScoreRow:
    text, clips = split_answer(response, clips)
    if text is None or _is_empty(text):
        return ScoreRow(item_id=item.id, query_index=query_index, parsed=None, parse_ok=False,
                        metrics={"correct": 0.0})
    response = text
    metrics: dict[str, float] = {}
    if item.labels.get("task_type") == "Counting":
        parsed: Any = ecbench_normalize(response)
        row = counting_row(str(item.target), response)
        metrics["correct"] = row["counting_accuracy"]
        if "_abs_err" in row:
            metrics["abs_error"] = row["_abs_err"]
        ok = bool(parsed)
    else:
        verdict = (judge or FuzzyJudge()).judge(str(item.target), response)
        precision, recall, f1 = precision_recall_f1(verdict.tp, verdict.fp, verdict.fn)
        parsed = {"tp": verdict.tp_items, "fp": verdict.fp_items, "fn": verdict.fn_items}
        metrics.update({"correct": float(math.isclose(precision, 1.0)), "precision": precision,
                        "recall": recall, "f1": f1})
        ok = verdict.error is None
    spans = span_values(item, clips)
    if "span_miou" in spans:
        metrics["span_iou"] = spans["span_miou"]
    return ScoreRow(item_id=item.id, query_index=query_index, parsed=parsed, parse_ok=ok, metrics=metrics)
