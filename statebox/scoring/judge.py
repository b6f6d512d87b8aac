"""EC-Bench enumeration judges: which listed items are true positives, false positives, misses.

The released evaluator asks an LLM (GPT-5 by default) to classify the items and
counts a query correct when precision is 1 (at least one true positive, no false
positive). statebox does the same through the official `openai` or `anthropic`
client (model configurable, base URL from OPENAI_BASE_URL / ANTHROPIC_BASE_URL),
caching every verdict on disk so a re-score costs nothing and is reproducible.
Without an API key it falls back to a deterministic fuzzy matcher; the score
report names the judge used, because the two can disagree.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from statebox.errors import UserError
from statebox.model_names import ANTHROPIC_MODEL, OPENAI_MODEL
from statebox.replace_file import replace_text

PROMPT_VERSION = "ecbench-enum-v1"
SYSTEM_PROMPT = "You are a strict evaluator that outputs JSON only."
JUDGE_PROMPT = """You compare a model's enumeration answer with the ground-truth list for a video question.

Ground-truth answer:
{true_answer}

Model answer:
{generated_answer}

Rules:
- First identify the essential items of the ground-truth answer.
- tp_items: items that appear in both answers; fp_items: items of the model answer that are wrong
  or not in the ground truth; fn_items: ground-truth items missing from the model answer.
- Treat semantically equivalent expressions as the same item, and merge expressions that refer
  to the same real-world object or event (e.g. "fire truck" = "fire engine", "goalkeeper" = "goalie").
- Ignore modifiers unless they change what the item is. Order does not matter.

Reply with one JSON object and nothing else:
{{"tp_items": [], "fp_items": [], "fn_items": [], "reasoning": "", "confidence": 0.0}}
All three arrays must be present (possibly empty); confidence is a number between 0 and 1."""

DEFAULT_MODELS = {"openai": OPENAI_MODEL, "anthropic": ANTHROPIC_MODEL}


@dataclass
class JudgeVerdict:
    tp_items: list[str] = field(default_factory=list)
    fp_items: list[str] = field(default_factory=list)
    fn_items: list[str] = field(default_factory=list)
    reasoning: str = ""
    confidence: float = 0.0
    error: str | None = None  # set when the judge failed; the verdict then counts as incorrect
    steering: str | None = None  # the judge's own words the answer held (`steering_words`): never sent, incorrect

    @property
    def tp(self) -> int:
        return len(self.tp_items)

    @property
    def fp(self) -> int:
        return len(self.fp_items)

    @property
    def fn(self) -> int:
        return len(self.fn_items)


class EnumerationJudge(Protocol):
    name: str  # e.g. "openai:gpt-6.1-sol" or "fuzzy"

    def judge(self, true_answer: str, generated_answer: str) -> JudgeVerdict: ...


# ---------------------------------------------------------------- parsing a judge reply

def parse_verdict(text: str) -> JudgeVerdict:
    """The released parser's reading of a judge reply: optional ``` fence, then one JSON object."""
    body = text.strip()
    if "```" in body:
        start = body.find("```json")
        if start == -1:
            start = body.find("```")
        end = body.find("```", start + 3)
        if start != -1 and end != -1:
            body = body[start + 3 : end].strip()
            if body.startswith("json"):
                body = body[4:].strip()
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError("judge reply is not a JSON object")

    def as_list(key: str) -> list[str]:
        value = data.get(key, [])
        if isinstance(value, list):
            return [str(v).strip() for v in value if str(v).strip()]
        if isinstance(value, str):
            return [value] if value.strip() else []
        return []

    confidence = float(data.get("confidence", 0.0) or 0.0)
    return JudgeVerdict(
        tp_items=as_list("tp_items"),
        fp_items=as_list("fp_items"),
        fn_items=as_list("fn_items"),
        reasoning=str(data.get("reasoning", "")).strip(),
        confidence=max(0.0, min(1.0, confidence)),
    )


# ---------------------------------------------------------------- answers that speak to the judge

# What an enumeration answer never needs to say and an answer written for the judge does: its verdict's keys and
# the heading of the ground truth its prompt shows (a forged one). Case-insensitive, spaces and hyphens alike.
_STEERING = re.compile(r"\b(?:tp|fp|fn)_items\b|\bground[\s_-]*truth[\s_-]*answer\b", re.IGNORECASE)


def steering_words(answer: str) -> str | None:
    """The judge's own words in a model answer (`tp_items`, `Ground-truth answer`), or None.

    Why: the judge reads the answer inside its prompt, so an answer can carry a verdict or a forged ground truth,
    and a judge that follows it scores a wrong answer correct (an agent that cheats where it can would try). The
    released evaluator sends every answer; statebox sends none that holds these words, counts it incorrect and says
    how many (`JudgeVerdict.steering`). A plain list of items never holds them."""
    match = _STEERING.search(answer)
    return match.group(0) if match else None


# ---------------------------------------------------------------- the LLM judge

def default_cache_dir() -> Path:
    override = os.environ.get("STATEBOX_JUDGE_CACHE")
    return Path(override) if override else Path.home() / ".cache" / "statebox" / "judge"


class LLMJudge:
    """An LLM judge through the official client; every verdict cached on disk by (model, prompt, answers)."""

    def __init__(self, provider: str, model: str | None = None, *, cache_dir: Path | None = None,
                 max_retries: int = 3, retry_interval_s: float = 2.0, timeout_s: float = 120.0) -> None:
        if provider not in DEFAULT_MODELS:
            raise UserError(f"unknown judge provider '{provider}' (expected openai or anthropic)")
        self.provider = provider
        self.model = model or os.environ.get("STATEBOX_JUDGE_MODEL") or DEFAULT_MODELS[provider]
        self.name = f"{provider}:{self.model}"
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.max_retries = max_retries
        self.retry_interval_s = retry_interval_s
        self.timeout_s = timeout_s
        self.calls = 0  # requests actually sent (cache misses), for reports and tests
        self._client: Any = None  # openai.OpenAI or anthropic.Anthropic, made on first use

    def _cache_path(self, true_answer: str, generated_answer: str) -> Path:
        key = json.dumps([PROMPT_VERSION, self.provider, self.model, true_answer, generated_answer])
        return self.cache_dir / f"{hashlib.sha256(key.encode()).hexdigest()}.json"

    def judge(self, true_answer: str, generated_answer: str) -> JudgeVerdict:
        steering = steering_words(generated_answer)
        if steering is not None:
            return JudgeVerdict(error=f"the answer holds the judge's own words ({steering!r}): not sent to the judge",
                                steering=steering)
        path = self._cache_path(true_answer, generated_answer)
        if path.exists():
            try:
                return JudgeVerdict(**json.loads(path.read_text(encoding="utf-8")))
            except (ValueError, TypeError):
                pass  # a damaged cache entry is simply asked again
        verdict = self._ask(true_answer, generated_answer)
        if verdict.error is None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            replace_text(path, json.dumps(verdict.__dict__))
        return verdict

    def _ask(self, true_answer: str, generated_answer: str) -> JudgeVerdict:
        prompt = JUDGE_PROMPT.format(true_answer=true_answer, generated_answer=generated_answer)
        last_error = ""
        for attempt in range(1, self.max_retries + 1):
            try:
                self.calls += 1
                return parse_verdict(self._complete(prompt))
            except Exception as exc:  # noqa: BLE001 - any failure is retried, then recorded
                last_error = f"{type(exc).__name__}: {exc}"
                if attempt < self.max_retries:
                    time.sleep(self.retry_interval_s)
        # As the released evaluator: a judge that keeps failing gives tp=fp=fn=0 (incorrect).
        return JudgeVerdict(error=last_error or "judge failed")

    def _complete(self, prompt: str) -> str:
        if self.provider == "openai":
            if self._client is None:
                import openai  # optional SDK, needed only when an OpenAI judge is used

                self._client = openai.OpenAI(timeout=self.timeout_s, max_retries=0)
            response = self._client.chat.completions.create(
                model=self.model,
                messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}],
            )
            return response.choices[0].message.content or ""
        if self._client is None:
            import anthropic  # optional SDK, needed only when an Anthropic judge is used

            self._client = anthropic.Anthropic(timeout=self.timeout_s, max_retries=0)
        message = self._client.messages.create(
            model=self.model,
            max_tokens=2048,
            system=SYSTEM_PROMPT,
            messages=[{"role": "user", "content": prompt}],
        )
        return "".join(getattr(block, "text", "") for block in message.content)


# ---------------------------------------------------------------- the fuzzy fallback

_SPLIT = re.compile(r"\s*(?:,|;|\n|→|->|=>|\band\b|\bthen\b)\s*", re.IGNORECASE)
_ARTICLES = re.compile(r"\b(?:the|a|an)\b")
_NON_WORD = re.compile(r"[^\w\s]")
MATCH_THRESHOLD = 0.8


def split_items(text: str) -> list[str]:
    """Items of an enumeration answer: split on commas, semicolons, newlines, arrows and 'and'."""
    parts = [p.strip(" .:-*•\t") for p in _SPLIT.split(str(text))]
    return [p for p in parts if p and p.lower() not in ("none", "n/a")]


def _normal(item: str) -> str:
    text = _NON_WORD.sub(" ", item.lower())
    text = _ARTICLES.sub(" ", text)
    words = [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in text.split()]
    return " ".join(words)


def _similar(a: str, b: str) -> float:
    return _similar_at_least(a, b, 0.0)


def _similar_at_least(a: str, b: str, threshold: float) -> float:
    """How similar two normalised items are where that is at least `threshold`; below it, some value below it (0.0
    where difflib's upper bounds, `real_quick_ratio` and `quick_ratio`, already are: the full ratio cannot be more)."""
    if not a or not b:
        return 0.0
    if a == b:
        return 1.0
    wa, wb = set(a.split()), set(b.split())
    if wa and wb and (wa <= wb or wb <= wa):
        return 0.9
    matcher = difflib.SequenceMatcher(None, a, b)
    if matcher.real_quick_ratio() < threshold or matcher.quick_ratio() < threshold:
        return 0.0
    return matcher.ratio()


class FuzzyJudge:
    """Deterministic stand-in for the LLM judge: greedy one-to-one matching of normalised items."""

    name = "fuzzy"

    def judge(self, true_answer: str, generated_answer: str) -> JudgeVerdict:
        """Greedy one-to-one matching: the pairs at or above MATCH_THRESHOLD, most similar first (ties: earlier items).

        The answer is the model's, so its length is the agent's to choose: each item is normalised once, each
        distinct (item, truth) pair compared once, a pair is dropped as soon as difflib's cheap upper bounds say it
        is below the threshold (it could never be matched: the greedy pass stopped at the first such pair), and the
        duplicates are found against one set. Before, 100,000 items against one row's truth took 21 s and the line
        limit allowed ~5 minutes a row; the matches are the same."""
        truth = split_items(true_answer)
        predicted = split_items(generated_answer)
        norm_truth = [_normal(t) for t in truth]
        norm_pred = [_normal(p) for p in predicted]
        scores: dict[tuple[str, str], float] = {}
        pairs = []
        for i, np_ in enumerate(norm_pred):
            for j, nt in enumerate(norm_truth):
                score = scores.get((np_, nt))
                if score is None:
                    score = scores[(np_, nt)] = _similar_at_least(np_, nt, MATCH_THRESHOLD)
                if score >= MATCH_THRESHOLD:
                    pairs.append((score, i, j))
        pairs.sort(key=lambda x: (-x[0], x[1], x[2]))
        used_p: set[int] = set()
        used_t: set[int] = set()
        for score, i, j in pairs:
            if i in used_p or j in used_t:
                continue
            used_p.add(i)
            used_t.add(j)
        matched = {norm_pred[k] for k in used_p}
        duplicates = {i for i in range(len(predicted)) if i not in used_p and norm_pred[i] in matched}
        return JudgeVerdict(
            tp_items=[predicted[i] for i in sorted(used_p)],
            fp_items=[predicted[i] for i in range(len(predicted)) if i not in used_p and i not in duplicates],
            fn_items=[truth[j] for j in range(len(truth)) if j not in used_t],
            reasoning="fuzzy string matching (no LLM judge configured)",
            confidence=1.0,
        )


def make_judge(kind: str = "auto", model: str | None = None, cache_dir: Path | None = None) -> EnumerationJudge:
    """`auto`: OpenAI when OPENAI_API_KEY is set, else Anthropic when ANTHROPIC_API_KEY is, else fuzzy."""
    kind = kind or "auto"
    if kind == "auto":
        if os.environ.get("OPENAI_API_KEY"):
            kind = "openai"
        elif os.environ.get("ANTHROPIC_API_KEY"):
            kind = "anthropic"
        else:
            kind = "fuzzy"
    if kind == "fuzzy":
        return FuzzyJudge()
    key = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}.get(kind)
    if key is None:
        raise UserError(f"unknown judge '{kind}' (expected auto, openai, anthropic or fuzzy)")
    if not os.environ.get(key):
        raise UserError(f"the {kind} judge needs {key} in the environment (or use --judge fuzzy)")
    return LLMJudge(kind, model, cache_dir=cache_dir)
