"""Accounting: who may call (a lease's token), what it may spend (the policy's budgets), what it spent.

A lease is one attempt's door: its random token is the only credential an agent holds;
its usage and `exceeded` are what the harness reads when the attempt ends. Per-attempt
model budgets: allow-list, requests, tokens and cost.

A budget is checked twice: before a request goes upstream (is the model
allowed, is anything already spent) and after its reply (add the usage; once a
limit is passed the attempt is over, even if the agent stops by itself — the
harness reads `exceeded` and ends the attempt with status `error`).
"""

from __future__ import annotations

import fnmatch
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statebox.capped_log import CappedFile
from statebox.policies.model import Budgets, GatewayLimits
from statebox.sandbox.gateway.log import redact_text, usage_of
from statebox.sandbox.gateway.routes import Provider
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


@dataclass
class GatewayLease:
    """One attempt's door to the gateway. `exceeded` says why model access was cut off (None: it was not)."""

    attempt_id: str
    socket_dir: Path
    socket_path: Path
    token: str
    log_path: Path
    budgets: Budgets
    usage: Usage = field(default_factory=Usage)
    exceeded: str | None = None
    requests_logged: int = 0
    host_socket_path: Path | None = None  # what host-side clients connect to (a short link when the path is long)
    limits: GatewayLimits = field(default_factory=GatewayLimits)
    refused: dict[str, int] = field(default_factory=dict)  # refusals by reason kind (all of them, logged or folded)
    _gateway: Any = field(default=None, repr=False)  # the Gateway serving it (server.py)
    _server: Any = field(default=None, repr=False)
    _log_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _log: CappedFile | None = field(default=None, repr=False)
    _connections: set = field(default_factory=set, repr=False)
    _bucket: list = field(default_factory=list, repr=False)  # [tokens, monotonic time of the last refill]
    _folded: dict = field(default_factory=dict, repr=False)  # kind -> [last line's time, refusals folded since]
    _secrets: list = field(default_factory=list, repr=False)

    def close(self) -> None:
        """Stop accepting connections, remove the socket, close the log (idempotent)."""
        with self._log_lock:
            if self._log is not None:
                self._log.close()
                self._log = None
        if self._gateway is not None and self._server is not None:
            self._gateway._close_server(self._server)
            self._server = None
        self._flush_folded()
        for path in {self.socket_path, self.host_socket_path or self.socket_path}:
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def __enter__(self) -> "GatewayLease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write_log(self, record: dict[str, Any], secrets_: list[str]) -> None:
        """Append one record under the lease's log cap (`limits.max_log_mb`).

        At the cap the log ends with one marker line and the lease's model access is cut
        (`exceeded`): the auditor must be able to read every request that reached a model,
        so no request is served once it could not be logged.
        """
        line = redact_text(json.dumps(record, ensure_ascii=False, default=str), secrets_)
        with self._log_lock:
            if self._log is None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                self._log = CappedFile(self.log_path, int(self.limits.max_log_mb * 1024 * 1024))
            if not self._log.write((line + "\n").encode()):
                if not self.exceeded:
                    self.exceeded = (f"gateway.jsonl reached its cap of {self.limits.max_log_mb:g} MB; "
                                     "model access cut (raise gateway.max_log_mb in the policy)")
                return
            self.requests_logged += 1

    # -- flood control (called on the gateway's loop thread only) --
    def take_request_slot(self) -> bool:
        """Token bucket: `max_requests_per_s` sustained, bursts of one second's worth."""
        rate = self.limits.max_requests_per_s
        burst = max(1.0, rate)
        now = time.monotonic()
        if not self._bucket:
            self._bucket[:] = [burst, now]
        tokens = min(burst, self._bucket[0] + (now - self._bucket[1]) * rate)
        self._bucket[:] = [tokens, now]
        if tokens < 1.0:
            return False
        self._bucket[0] = tokens - 1.0
        return True

    def log_refusal(self, kind: str, record: dict[str, Any], fold: bool = False) -> None:
        """Log a refusal; `fold` ones (floods) at most once a second per kind, with a count of those folded."""
        self.refused[kind] = self.refused.get(kind, 0) + 1
        if fold:
            now = time.monotonic()
            last, folded = self._folded.get(kind, (-1e9, 0))
            if now - last < 1.0:
                self._folded[kind] = (last, folded + 1)
                return
            self._folded[kind] = (now, 0)
            if folded:
                record["folded_before"] = folded
        self.write_log(record, self._secrets)

    def _flush_folded(self) -> None:
        for kind, (_, folded) in list(self._folded.items()):
            if folded:
                self.write_log({"time": round(time.time(), 3), "attempt_id": self.attempt_id, "refused_kind": kind,
                                "folded_before": folded, "refused": f"{folded} more {kind} refusals"}, self._secrets)
            self._folded[kind] = (-1e9, 0)


def account(lease: GatewayLease, api: str, model: str, reply: Any, record: dict[str, Any],
            prices: dict[str, tuple[float, float]] | None = None) -> None:
    """Add one reply's usage (tokens, cost at `prices`) to the lease; past a budget the lease is `exceeded`."""
    inp, out = usage_of(api, reply)
    price_in, price_out = price_of(model, prices)
    cost = (inp * price_in + out * price_out) / 1_000_000
    lease.usage.input_tokens += inp
    lease.usage.output_tokens += out
    lease.usage.cost_usd += cost
    record["usage"] = {"input_tokens": inp, "output_tokens": out, "cost_usd": round(cost, 6)}
    why = exceeded_after(lease.usage, lease.budgets)
    if why and not lease.exceeded:
        lease.exceeded = why
        record["exceeded"] = why


def _bearer(value: str | None) -> str | None:
    if value and value.lower().startswith("bearer "):
        return value[7:].strip()
    return None


def _budget_status(provider: Provider) -> tuple[int, str]:
    """Anthropic answers a spent balance with 400 invalid_request_error; OpenAI with 429 insufficient_quota."""
    return (400, "invalid_request_error") if provider == "anthropic" else (429, "insufficient_quota")
