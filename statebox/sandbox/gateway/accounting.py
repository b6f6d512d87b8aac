"""Accounting: who may call (a lease's token), what it may spend (the policy's budgets), what it spent.

A lease is one attempt's door: its random token is the only credential an agent holds;
its usage and `exceeded` are what the harness reads when the attempt ends. Per-attempt
model budgets: allow-list, requests, tokens and cost.

Budgets hold at admission, not after the fact (issue 24: 16 concurrent requests with
`max_tokens` 900 against a 1,000-token budget were all served, 14.5x the budget). Each
generation request reserves its worst case before it goes upstream (`reserve`): its max
output tokens, clamped to what remains, plus an input estimate from its size. What is
spent plus what is reserved never passes a budget; a request whose worst case cannot fit
is clamped (its max-token field rewritten down) or refused (429, `budget` in the message).
The reply settles the reservation to its real usage (`settle`); a reply whose usage is
unknown (a broken stream) is charged its whole reservation. Reservations happen on the
gateway's one event-loop thread under the lease's budget lock, the same lock that counts
requests, so no interleaving of concurrent requests can overspend.
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statebox.capped_log import CappedFile
from statebox.json_text import well_formed
from statebox.policies.model import Budgets, GatewayLimits
from statebox.sandbox.gateway.log import redact_text, usage_of
from statebox.sandbox.gateway.routes import Provider
from statebox.schema import Usage

# USD per million tokens (input, output), list prices, by exact model name: a name here prices itself and its dated
# snapshots (`claude-opus-4-1-20250805`, `gpt-5-2025-08-07`: `SNAPSHOT`), nothing else. Why not by prefix, as before
# the seventeenth session: a family's prefix priced its dearer siblings at the family's rate, so `gpt-5-pro` ($15/$120)
# paid `gpt-5`'s $1.25/$10 and `o3-pro` ($20/$80) paid `o3`'s $2/$8, and a cost budget tripped ten times too late. A
# model not named here (nor in the policy's `budgets.prices_per_mtok`, which is read by prefix as its users write it)
# has no price, and under a cost budget is refused before it is sent: fail closed, and the refusal says how to price it.
# Sources, read 2026-11-30: Anthropic's model pages (platform.claude.com/docs/.../models/*/overview; Claude 5 has one
# rate over its whole 1M context); OpenAI's model and pricing pages as quoted by several independent price trackers
# (GPT-5.2, GPT-5.4/5.5 and their pro/mini/nano, GPT-6 Sol and 6.1 Sol; GPT-5.1 kept GPT-5's rate). Left unpriced, so
# refused under a cost budget: models whose price the sources disagree on or quote "from" a figure (GPT-5.6, GPT-6
# Astra and Luna, Claude Haiku 5.5, Claude Fable), Claude Opus 4.7 (no official page read), and every `-pro` model of
# the GPT-5 generation but 5.4's and 5.5's.
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "claude-opus-5-5": (4.0, 20.0),
    "claude-opus-5": (5.0, 25.0),
    "claude-sonnet-5-5": (2.0, 10.0),
    "claude-sonnet-5": (2.0, 10.0),
    "claude-opus-4-8": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4-0": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4-0": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-3-5-sonnet": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "gpt-6.1-sol": (2.0, 10.0),
    "gpt-6-sol": (2.0, 10.0),
    "gpt-5.5-pro": (30.0, 180.0),
    "gpt-5.5": (5.0, 30.0),
    "gpt-5.4-pro": (30.0, 180.0),
    "gpt-5.4-mini": (0.75, 4.5),
    "gpt-5.4-nano": (0.2, 1.25),
    "gpt-5.4": (2.5, 15.0),
    "gpt-5.2": (1.75, 14.0),
    "gpt-5.1": (1.25, 10.0),
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
# A dated snapshot of a listed name: Anthropic's `-YYYYMMDD`, OpenAI's `-YYYY-MM-DD`.
SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})\Z")
# Long-context rates: a request whose input passes the threshold pays (input x, output x) of the listed rates for the
# whole request (Claude Sonnet 4.x and Opus 4.6 past 200K input tokens, $6/$22.50 and $10/$37.50; OpenAI's GPT-5.4,
# GPT-5.5 and GPT-6.x Sol past 272K, e.g. 6.1 Sol's $4/$15). Without them a long conversation was charged half of its
# input. Where a source gave no long-context rate for a GPT-6 Sol model the same rule is assumed: over-charging trips a
# budget early, never late.
LONG_CONTEXT: dict[str, tuple[int, float, float]] = {
    **{name: (200_000, 2.0, 1.5) for name in ("claude-sonnet-4-6", "claude-sonnet-4-5", "claude-sonnet-4-0",
                                               "claude-sonnet-4", "claude-opus-4-6")},
    **{name: (272_000, 2.0, 1.5) for name in ("gpt-6.1-sol", "gpt-6-sol", "gpt-5.5", "gpt-5.5-pro", "gpt-5.4",
                                               "gpt-5.4-pro", "gpt-5.4-mini", "gpt-5.4-nano")},
}


@dataclass(frozen=True)
class Rate:
    """What one model costs: USD per million (input, output) tokens, and past `long_from` input tokens (if any) the
    long-context rates, which a provider applies to the whole request."""

    price: tuple[float, float]
    long_from: int | None = None
    long_price: tuple[float, float] = (0.0, 0.0)

    def for_input(self, input_tokens: int) -> tuple[float, float]:
        return self.long_price if self.long_from is not None and input_tokens > self.long_from else self.price

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        rate_in, rate_out = self.for_input(input_tokens)
        return (input_tokens * rate_in + output_tokens * rate_out) / 1_000_000


FREE = Rate((0.0, 0.0))  # an unpriced model where no cost budget asks for a price


# Input estimate of a reservation: an upper bound on what a body can cost as input.
# Text: one token per INPUT_BYTES_PER_TOKEN bytes of the serialised body (tokenizers average
# 3-4 characters a token, and JSON framing adds bytes). Images: IMAGE_TOKENS each (Anthropic
# caps an image near 1,600 tokens; OpenAI's patch-based models near 2,500), their base64 bytes
# not counted as text.
INPUT_BYTES_PER_TOKEN = 2
IMAGE_TOKENS = 3_000
# No supported model writes more than this in one reply; a request with no max-token field and
# more budget left than this reserves this much (and the field is not written: providers refuse
# a cap over the model's own ceiling).
OUTPUT_CEILING = 128_000


def _listed_name(model: str, table: dict[str, tuple[float, float]]) -> str | None:
    """The name of `table` that prices `model`: itself, or the name it is a dated snapshot of."""
    if model in table:
        return model
    base = SNAPSHOT.sub("", model)
    return base if base != model and base in table else None


def rate_lookup(model: str, prices: dict[str, tuple[float, float]] | None = None,
                extra: dict[str, tuple[float, float]] | None = None) -> Rate | None:
    """What `model` costs, or None when nothing prices it.

    `prices`: the gateway's table (exact names and their dated snapshots; default `PRICES_PER_MTOK`). `extra`: the
    policy's prices, by prefix as documented. The longer key wins (a policy prefix equal to a table name replaces it),
    the order of when both were prefixes: every model a policy priced before is still priced."""
    table = PRICES_PER_MTOK if prices is None else prices
    listed = _listed_name(model, table)
    stated = max((p for p in (extra or {}) if model.startswith(p)), key=len, default=None)
    if stated is not None and (listed is None or len(stated) >= len(listed)):
        rate_in, rate_out = (extra or {})[stated]
        return Rate((rate_in, rate_out))
    if listed is None:
        return None
    rate_in, rate_out = table[listed]
    long = LONG_CONTEXT.get(listed) if prices is None else None
    if long is None:
        return Rate((rate_in, rate_out))
    threshold, times_in, times_out = long
    return Rate((rate_in, rate_out), threshold, (rate_in * times_in, rate_out * times_out))


def price_lookup(model: str, prices: dict[str, tuple[float, float]] | None = None,
                 extra: dict[str, tuple[float, float]] | None = None) -> tuple[float, float] | None:
    """USD/Mtok (input, output) of `model` below any long-context threshold, or None when nothing prices it."""
    rate = rate_lookup(model, prices, extra)
    return None if rate is None else rate.price


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
    reserved: Usage = field(default_factory=Usage)  # worst cases of the requests in flight (see `reserve`)
    _budget_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _gateway: Any = field(default=None, repr=False)  # the Gateway serving it (server.py)
    _server: Any = field(default=None, repr=False)
    _log_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _log: CappedFile | None = field(default=None, repr=False)
    _connections: set = field(default_factory=set, repr=False)
    # requests sent upstream whose line is not written yet (server.InFlight): the close writes any left
    _in_flight: set = field(default_factory=set, repr=False)
    _bucket: list = field(default_factory=list, repr=False)  # [tokens, monotonic time of the last refill]
    _folded: dict = field(default_factory=dict, repr=False)  # kind -> [last line's time, refusals folded since]
    _secrets: list = field(default_factory=list, repr=False)

    def close(self) -> None:
        """Stop accepting connections (a request in flight is logged as it is cut), remove the socket, close the
        log (idempotent). The server goes first: the log closed first was reopened by the cut requests' lines."""
        if self._gateway is not None and self._server is not None:
            self._gateway._close_server(self._server)
            self._server = None
        self._flush_folded()
        with self._log_lock:
            if self._log is not None:
                self._log.close()
                self._log = None
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
        raw = log_line(record, secrets_)
        with self._log_lock:
            if self._log is None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                self._log = CappedFile(self.log_path, int(self.limits.max_log_mb * 1024 * 1024))
            if not self._log.write(raw):
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
        record.setdefault("refused_kind", kind)
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


class BudgetRefused(Exception):
    """A generation request whose worst case does not fit what the budgets have left (429, `budget` named)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Reservation:
    """What one admitted request may spend at most; `settle` turns it into real usage."""

    input_tokens: int
    output_tokens: int
    rate: Rate  # FREE when the model is unpriced and no cost budget asks for a price

    @property
    def cost_usd(self) -> float:
        return self.rate.cost_usd(self.input_tokens, self.output_tokens)


def input_estimate(text_bytes: int, images: int) -> int:
    """The input tokens a body of `text_bytes` (images left out) and `images` images can cost at most."""
    return -(-text_bytes // INPUT_BYTES_PER_TOKEN) + images * IMAGE_TOKENS


def _left(limit: int | float | None, used: float, reserved: float) -> float | None:
    return None if limit is None else limit - used - reserved


def reserve(lease: GatewayLease, model: str, estimate_in: int, requested_out: int | None,
            prices: dict[str, tuple[float, float]] | None = None) -> tuple[Reservation, int | None]:
    """Admit one generation request: count it, reserve its worst case, say its output cap.

    Returns the reservation and the output cap the request must carry (None: leave the body as
    it is, the budgets do not bound it). Raises `BudgetRefused` (and marks the lease `exceeded`)
    when the request cannot fit. Runs under the lease's budget lock: counting the request and
    reserving its tokens is one step, whatever else is in flight.
    """
    with lease._budget_lock:
        try:
            return _reserve_locked(lease, model, estimate_in, requested_out, prices)
        except BudgetRefused as exc:
            if not lease.exceeded:  # the attempt cannot go on within its budget: the harness ends it
                lease.exceeded = exc.message
            raise


def _reserve_locked(lease: GatewayLease, model: str, estimate_in: int, requested_out: int | None,
                    prices: dict[str, tuple[float, float]] | None) -> tuple[Reservation, int | None]:
    b = lease.budgets
    if lease.exceeded:
        raise BudgetRefused(lease.exceeded)
    why = exceeded_before(lease.usage, b)
    if why:
        lease.exceeded = why
        raise BudgetRefused(why)
    rate = rate_lookup(model, prices, b.prices_per_mtok)
    if rate is None:
        if b.max_cost_usd is not None:
            raise BudgetRefused(
                f"statebox gateway: cost budget: no price for model {model!r}, so its spend cannot be "
                "bounded; add one to the policy (budgets.prices_per_mtok: {\"" + model[:60]
                + "\": [USD per million input tokens, USD per million output tokens]}) or drop max_cost_usd")
        rate = FREE
    price = rate.for_input(estimate_in)  # the estimate bounds the input: past a threshold, the long-context rate
    used, held = lease.usage, lease.reserved
    left_in = _left(b.max_input_tokens, used.input_tokens, held.input_tokens)
    left_out = _left(b.max_output_tokens, used.output_tokens, held.output_tokens)
    left_total = _left(b.max_total_tokens, used.input_tokens + used.output_tokens,
                       held.input_tokens + held.output_tokens)
    left_cost = _left(b.max_cost_usd, used.cost_usd, held.cost_usd)
    cost_in = estimate_in * price[0] / 1_000_000
    for left, limit, what in ((left_in, b.max_input_tokens, "input token"),
                              (left_total, b.max_total_tokens, "token")):
        if left is not None and estimate_in > left:
            raise BudgetRefused(
                f"statebox gateway: {what} budget exceeded: this request needs up to {estimate_in} input tokens "
                f"(estimated from its size), {max(0, int(left))} of the limit {limit} are left")
    if left_cost is not None and cost_in > left_cost:
        raise BudgetRefused(f"statebox gateway: cost budget exceeded: this request's input costs up to "
                            f"${cost_in:.4f}, ${max(0.0, left_cost):.4f} of the limit ${b.max_cost_usd:.4f} "
                            "are left")
    rooms = [r for r in (left_out, None if left_total is None else left_total - estimate_in) if r is not None]
    if left_cost is not None and price[1] > 0:
        rooms.append((left_cost - cost_in) * 1_000_000 / price[1])
    room = int(min(rooms)) if rooms else None
    if room is not None and room < 1:
        raise BudgetRefused("statebox gateway: budget exceeded: no output tokens left for this request "
                            f"(limits: output {b.max_output_tokens}, total {b.max_total_tokens}, "
                            f"cost {b.max_cost_usd})")
    cap: int | None
    if requested_out is not None:
        cap = requested_out if room is None else min(requested_out, room)
    elif room is not None and room < OUTPUT_CEILING:
        cap = room  # no field: the remainder becomes the request's cap
    else:
        cap = None
    reserved_out = cap if cap is not None else OUTPUT_CEILING
    reservation = Reservation(input_tokens=estimate_in, output_tokens=reserved_out, rate=rate)
    lease.usage.requests += 1
    held.input_tokens += reservation.input_tokens
    held.output_tokens += reservation.output_tokens
    held.cost_usd += reservation.cost_usd
    return reservation, cap


def settle(lease: GatewayLease, api: str, reservation: Reservation, reply: Any, record: dict[str, Any],
           *, complete: bool, status: int) -> None:
    """Release a reservation and charge the reply's real usage (its whole worst case when unknown).

    `complete`: the reply ended normally. A broken or abandoned stream is charged the larger of
    what it reported and what it reserved, since its final usage never arrived. An error status
    with no usage costs nothing (providers do not bill refused requests).
    """
    inp, out = usage_of(api, reply)
    has_usage = isinstance(reply, dict) and isinstance(reply.get("usage"), dict) and bool(reply.get("usage"))
    if status < 400 and (not complete or not has_usage):
        inp, out = max(inp, reservation.input_tokens), max(out, reservation.output_tokens)
        record["usage_charged"] = "reservation"  # the worst case, since the real usage is unknown
    cost = reservation.rate.cost_usd(inp, out)  # the real input decides the long-context rate
    with lease._budget_lock:
        held = lease.reserved
        held.input_tokens -= reservation.input_tokens
        held.output_tokens -= reservation.output_tokens
        held.cost_usd = max(0.0, held.cost_usd - reservation.cost_usd)
        lease.usage.input_tokens += inp
        lease.usage.output_tokens += out
        lease.usage.cost_usd += cost
        why = exceeded_after(lease.usage, lease.budgets)
        if why and not lease.exceeded:
            lease.exceeded = why
            record["exceeded"] = why
    record["usage"] = {"input_tokens": inp, "output_tokens": out, "cost_usd": round(cost, 6)}


def _bearer(value: str | None) -> str | None:
    if value and value.lower().startswith("bearer "):
        return value[7:].strip()
    return None


def _budget_status(provider: Provider) -> tuple[int, str]:
    """A budget refusal is 429 (issue 24's contract), in each provider's error type for it."""
    return (429, "rate_limit_error") if provider == "anthropic" else (429, "insufficient_quota")


def log_line(record: dict[str, Any], secrets_: list[str] | None = None) -> bytes:
    """A gateway.jsonl line (its newline included): the record as UTF-8 JSON, `secrets_` redacted; an unpaired
    surrogate in it (a request or a reply may hold one: valid JSON, `"\\ud800"`) written as U+FFFD, and the line says
    how many (`unpaired_surrogates`). Encoded once: a line holds the whole conversation.

    Why: the line was encoded as it stood, so a reply whose tool call held one raised in the log writer: the request
    that reached a model left no line, and its reply never reached the client. The relayed bytes are the upstream's
    own; only the log's copy is made text every reader takes."""
    try:
        return (redact_text(json.dumps(record, ensure_ascii=False, default=str), secrets_ or []) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        cleaned, lost = well_formed(json.loads(json.dumps(record, default=str)))  # `default` objects as the line has them
        text = json.dumps({**cleaned, "unpaired_surrogates": lost}, ensure_ascii=False)
        return (redact_text(text, secrets_ or []) + "\n").encode("utf-8")
