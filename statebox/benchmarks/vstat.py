"""VSTAT: `vstat_qa_clean.json`, a `{"data": {task: [doc, ...]}}` mapping (or the bare mapping).

Docs carry no id: the official harness identifies them by position, so an item
id is `<source_task>:<index within that task's list>` unless the doc has an `id`.
The answer kind follows the released task code: choices -> MCQ letter; an answer
that `int()` accepts -> number (MRA); anything else -> free text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from statebox.benchmarks import LoadResult
from statebox.benchmarks._io import as_label, bounded, field
from statebox.datafiles import NUMBER_DIGITS, read_json, too_many_digits, type_name
from statebox.errors import DataError
from statebox.schema import AnswerType, Item, Query

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# Taxonomy fields kept as labels when a doc has them (the paper's four label axes + task).
LABEL_KEYS = (
    "source_task",
    "video_source",
    "source",
    "state_element_type",
    "state_element",
    "state_structure",
    "perceptual_complexity",
    "perceptual_challenge",
    "category",
)
CORE_KEYS = {"id", "video_id", "video_path", "question", "answer", "choices", "answer_index"}


def load(path: Path) -> LoadResult:
    payload = read_json(path)
    data = payload["data"] if isinstance(payload, dict) and "data" in payload else payload
    if not isinstance(data, dict):
        raise DataError(path, 1, f"expected {{\"data\": {{task: [doc, ...]}}}} or a task mapping, got {type_name(data)}")
    items: list[Item] = []
    warnings: list[str] = []
    for task, docs in data.items():
        if not isinstance(docs, list):
            raise DataError(path, None, f"task '{task}': expected a list of docs, got {type_name(docs)}")
        for index, doc in enumerate(docs):
            where = f"data[{task!r}][{index}]"
            if not isinstance(doc, dict):
                raise DataError(path, None, f"{where}: expected an object, got {type_name(doc)}")
            items.append(_item(doc, str(task), index, path, where))
    kinds = {k: sum(1 for i in items if i.answer_type == k) for k in ("mcq", "number", "text")}
    if kinds["text"]:
        warnings.append(f"{kinds['text']} VSTAT questions have free-text answers (scored by exact text match)")
    return LoadResult(items=items, warnings=warnings)


def _item(doc: dict[str, Any], task: str, index: int, path: Path, where: str) -> Item:
    question = field(doc, "question", (str,), path, None, where=where)
    video = field(doc, "video_path", (str,), path, None, where=where)
    if "answer" not in doc or doc["answer"] is None:
        raise DataError(path, None, f"{where}: missing field 'answer'")
    answer = str(doc["answer"]).strip()
    choices = doc.get("choices") or []
    if not isinstance(choices, list):
        raise DataError(path, None, f"{where}: field 'choices' must be an array, got {type_name(choices)}")
    source_task = str(doc.get("source_task") or task)
    item_id = str(doc["id"]) if doc.get("id") is not None else f"{source_task}:{index}"

    answer_type: AnswerType
    if choices:
        answer_type = "mcq"
        target: Any = _mcq_letter(answer, doc.get("answer_index"))
    else:
        try:
            target = int(answer)
            answer_type = "number"
        except ValueError:
            target = answer
            answer_type = "text"
        if answer_type == "number":
            bounded(target, path, None, f"{where}: field 'answer'")
        elif answer.lstrip("+-").isdigit() and too_many_digits(answer):  # past the 4,300 digits `int` reads
            raise DataError(path, None, f"{where}: field 'answer' must be a finite number under 10^{NUMBER_DIGITS}, "
                                        f"got {len(answer)} digits")

    labels = {"source_task": source_task}
    for key in LABEL_KEYS:
        value = as_label(doc.get(key))
        if value is not None:
            labels[key] = value
    labels["answer_kind"] = answer_type
    meta = {k: v for k, v in doc.items() if k not in CORE_KEYS and k not in LABEL_KEYS}
    meta.update({"video_id": doc.get("video_id"), "answer_raw": doc["answer"], "position": index})
    return Item(
        id=item_id,
        benchmark="vstat",
        video=video,
        question=question,
        choices=[str(c) for c in choices],
        answer_type=answer_type,
        target=target,
        queries=[Query(index=0, time=None, target=target)],
        labels=labels,
        meta=meta,
    )


def _mcq_letter(answer: str, answer_index: Any) -> str:
    """The released code's rule: a single letter answer as is, else the letter of `answer_index`."""
    upper = answer.strip().upper()
    if len(upper) == 1 and upper in LETTERS:
        return upper
    try:
        return LETTERS[int(answer_index)]
    except (TypeError, ValueError, IndexError, OverflowError):  # OverflowError: an index of 1e999 (inf) in the file
        return upper
