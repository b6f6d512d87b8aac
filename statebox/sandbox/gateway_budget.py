"""Per-attempt model budgets: allow-list, requests, tokens and cost.

A budget is checked twice: before a request goes upstream (is the model
allowed, is anything already spent) and after its reply (add the usage; once a
limit is passed the attempt is over, even if the agent stops by itself — the
harness reads `exceeded` and ends the attempt with status `error`).
"""

from __future__ import annotations

import fnmatch

from statebox.policies.model import Budgets
from statebox.schema import Usage

# USD per million tokens (input, output), list prices; the longest matching prefix wins.
# Unknown models cost 0 (a cost budget then never trips): say so in reports rather than guess.
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-3-5-sonnet": (3.0, 15.0),
    "claude-haiku-4": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "gpt-5-nano": (0.05, 0.4),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5": (1.25, 10.0),
    "gpt-4.1-nano": (0.1, 0.4),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4o-mini": (0.15, 0.6),
    "gpt-4o": (2.5, 10.0),
    "o4-mini": (1.1, 4.4),
    "o3": (2.0, 8.0),
}


def price_of(model: str, prices: dict[str, tuple[float, float]] | None = None) -> tuple[float, float]:
    table = prices if prices is not None else PRICES_PER_MTOK
    best = ""
    for prefix in table:
        if model.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return table[best] if best else (0.0, 0.0)


def model_allowed(model: str, budgets: Budgets) -> bool:
    return not budgets.models or any(fnmatch.fnmatchcase(model, pattern) for pattern in budgets.models)


def exceeded_before(usage: Usage, budgets: Budgets) -> str | None:
    """Why no further request may go out, or None."""
    if budgets.max_requests is not None and usage.requests >= budgets.max_requests:
        return f"request budget exceeded: {usage.requests} model requests made, limit {budgets.max_requests}"
    return exceeded_after(usage, budgets)


def exceeded_after(usage: Usage, budgets: Budgets) -> str | None:
    """Whether the usage so far passes a token or cost limit."""
    total = usage.input_tokens + usage.output_tokens
    if budgets.max_input_tokens is not None and usage.input_tokens > budgets.max_input_tokens:
        return f"input token budget exceeded: {usage.input_tokens} used, limit {budgets.max_input_tokens}"
    if budgets.max_output_tokens is not None and usage.output_tokens > budgets.max_output_tokens:
        return f"output token budget exceeded: {usage.output_tokens} used, limit {budgets.max_output_tokens}"
    if budgets.max_total_tokens is not None and total > budgets.max_total_tokens:
        return f"token budget exceeded: {total} tokens used, limit {budgets.max_total_tokens}"
    if budgets.max_cost_usd is not None and usage.cost_usd > budgets.max_cost_usd:
        return f"cost budget exceeded: ${usage.cost_usd:.4f} spent, limit ${budgets.max_cost_usd:.4f}"
    return None
