"""Issue 24: the gateway admits only what an evaluation needs, and budgets hold at any concurrency.

Unit tests of the allow-list tables (statebox/sandbox/gateway/admission.py), then the same
requests over a real gateway in front of the scripted model, which records what it received:
every hostile body is 400 naming its field and never reaches the upstream; disallowed headers
and beta values are dropped; GET bodies and encoded bodies are refused; concurrent requests
never get more than the budget.
"""

from __future__ import annotations

import gzip
import json
import socket
import threading

import pytest

from statebox.agents.model_clients import host_http_client
from statebox.policies.model import Budgets, GatewayLimits
from statebox.sandbox.gateway import Gateway
from statebox.sandbox.gateway.admission import (
    ANTHROPIC_BETAS,
    BODY_FIELDS,
    HIGH_SEVERITY_KINDS,
    REQUEST_HEADERS,
    RESPONSES_ITEMS,
    RESPONSES_TOOLS,
    ANTHROPIC_BLOCKS,
    Refused,
    check_body,
    check_encoding,
    filter_headers,
)
from statebox.testing.scripted_model import ScriptedModelServer, ScriptRequest, Turn

from .conftest import DECOY_ANTHROPIC
from .hostile_bodies import (
    ALLOWED_BETA,
    HOSTILE,
    HOSTILE_BETAS,
    HOSTILE_HEADERS,
    MARK,
    anthropic_body,
    chat_body,
    responses_body,
)

TABLE_OF_PATH = {"/v1/messages": "anthropic", "/v1/messages/count_tokens": "count_tokens",
                 "/v1/responses": "responses", "/v1/chat/completions": "chat"}

# What the real CLIs and the SDK agents send (shapes captured from Claude Code 2.1 and Codex 0.169
# through the scripted model; see test_real_cli_* in tests/agents for the live check).
CLAUDE_CODE_BODY = {
    "model": "claude-sonnet-4-6", "max_tokens": 32000, "stream": True, "temperature": 1,
    "metadata": {"user_id": "user_abc_account__session_1"},
    "system": [{"type": "text", "text": "You are Claude Code", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object", "properties": {}},
               "cache_control": {"type": "ephemeral"}}],
    "thinking": {"type": "enabled", "budget_tokens": 8000, "display": "updates"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "count the flashes"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "video.mp4", "is_error": False},
            {"type": "text", "text": "<system-reminder>x</system-reminder>"}]},
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                  "data": "iVBORw0KGgo="}}]},
        # Claude Code 2.1.330 sends a system-role message after the first user turn (the demo's cheating run)
        {"role": "system", "content": [{"type": "text", "text": "<system-reminder>y</system-reminder>",
                                        "output_config": {"effort": "high"}}], "output_config": {"effort": "high"}},
    ],
}
CODEX_BODY = {
    "model": "gpt-5-codex", "instructions": "You are Codex", "stream": True, "store": False,
    "tool_choice": "auto", "parallel_tool_calls": False, "prompt_cache_key": "0199-abc",
    "reasoning": {"effort": "medium", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
    "text": {"verbosity": "medium"},
    "tools": [{"type": "function", "name": "shell", "description": "run", "strict": False,
               "parameters": {"type": "object", "properties": {}}},
              {"type": "custom", "name": "apply_patch", "description": "patch",
               "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
              {"type": "local_shell"},
              {"type": "namespace", "name": "multi_agent_v1", "description": "sub-agents", "tools": [
                  {"type": "function", "name": "close_agent", "strict": False, "parameters": {"type": "object"}}]}],
    "client_metadata": {"session_id": "01a2", "x-codex-turn-metadata": "{\"model\":\"gpt-5-codex\"}"},
    "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "count"}]},
        {"type": "reasoning", "summary": [], "content": None, "encrypted_content": "gAAA"},
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "video.mp4"},
        {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "ok"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done",
                                                              "annotations": []}]},
    ],
}
SDK_CHAT_BODY = {"model": "gpt-4o", "max_completion_tokens": 64, "temperature": 0.0, "n": 1, "stream": False,
                 "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": [
                     {"type": "text", "text": "q"},
                     {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ", "detail": "low"}}]},
                              {"role": "assistant", "content": None, "tool_calls": [
                                  {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                              {"role": "tool", "tool_call_id": "c1", "content": "out"}],
                 "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}],
                 "tool_choice": {"type": "function", "function": {"name": "bash"}}}


# ---------------------------------------------------------------------------
# The tables
# ---------------------------------------------------------------------------


def test_every_table_entry_says_why_it_is_there():
    rows = [*ANTHROPIC_BLOCKS.values(), *RESPONSES_ITEMS.values(), *RESPONSES_TOOLS.values()]
    rows += [row for table in BODY_FIELDS.values() for row in table.values()]
    assert rows and all(len(row.reason) > 4 for row in rows)
    for table in (REQUEST_HEADERS["anthropic"], REQUEST_HEADERS["openai"], ANTHROPIC_BETAS):
        assert all(len(why) > 4 for why in table.values())
    # no table admits a provider-side door, whatever its spelling
    for table in BODY_FIELDS.values():
        assert not {"mcp_servers", "container", "background", "previous_response_id", "conversation", "betas",
                    "web_search_options", "prompt"} & set(table)
    assert not [b for b in ANTHROPIC_BETAS if b.startswith(("web-", "code-execution", "mcp", "files-", "skills",
                                                            "computer"))]


@pytest.mark.parametrize("table, body", [("anthropic", CLAUDE_CODE_BODY), ("responses", CODEX_BODY),
                                         ("chat", SDK_CHAT_BODY), ("anthropic", anthropic_body()),
                                         ("responses", responses_body()), ("chat", chat_body()),
                                         ("count_tokens", {"model": "m", "messages": [{"role": "user",
                                                                                       "content": "x"}]})])
def test_what_the_clients_send_is_admitted(table, body):
    check_body(table, body)


@pytest.mark.parametrize("case", HOSTILE, ids=lambda c: c.name)
def test_each_provider_side_feature_is_refused_by_the_table(case):
    with pytest.raises(Refused) as info:
        check_body(TABLE_OF_PATH[case.path], case.body)
    assert info.value.field == case.field and info.value.kind == case.kind
    assert info.value.message.startswith(f"statebox gateway: {case.field}")


def test_refusals_name_the_field_and_allowed_values():
    with pytest.raises(Refused, match=r"^statebox gateway: tools\[1\]\.type: tool type 'web_search_20250305'"):
        check_body("anthropic", anthropic_body(tools=[{"name": "a", "input_schema": {}},
                                                      {"type": "web_search_20250305", "name": "w"}]))
    with pytest.raises(Refused, match="statebox gateway: body: must be a JSON object"):
        check_body("chat", ["not", "an", "object"])
    with pytest.raises(Refused) as info:
        check_body("responses", responses_body(store=True))
    assert info.value.kind in HIGH_SEVERITY_KINDS


def test_headers_and_betas_come_from_allow_lists():
    kept, dropped = filter_headers("anthropic", {
        "anthropic-version": "2023-06-01", "content-type": "application/json", "x-stainless-lang": "js",
        "anthropic-beta": ",".join([ALLOWED_BETA, *HOSTILE_BETAS, "claude-code-20250219"]), **HOSTILE_HEADERS})
    assert kept["anthropic-beta"] == f"{ALLOWED_BETA},claude-code-20250219"
    assert set(kept) == {"anthropic-version", "content-type", "x-stainless-lang", "anthropic-beta"}
    assert set(HOSTILE_HEADERS) <= set(dropped)
    assert {f"anthropic-beta={b}" for b in HOSTILE_BETAS} <= set(dropped)
    kept, dropped = filter_headers("openai", {"openai-beta": "responses=experimental", "originator": "codex_cli_rs",
                                              "openai-organization": "org", "openai-project": "p"})
    assert kept == {"openai-beta": "responses=experimental", "originator": "codex_cli_rs"}
    check_encoding({"content-encoding": "identity"})
    with pytest.raises(Refused, match="content-encoding"):
        check_encoding({"content-encoding": "gzip"})


# ---------------------------------------------------------------------------
# Over a real gateway, the scripted model recording what reached it
# ---------------------------------------------------------------------------


@pytest.fixture
def lease(gateway, socket_dir, tmp_path):
    """A lease whose rate cap these tests never reach: they send dozens of requests back to back, and
    under the default 20 requests/s a fast moment of the machine turned a 400 into a 429."""
    lease = gateway.lease("attempt-1", socket_dir, tmp_path / "gateway.jsonl", Budgets(),
                          limits=GatewayLimits(max_requests_per_s=1000, max_connections=64))
    yield lease
    lease.close()


def _post(lease, path, body, provider="anthropic", headers=None, raw=None):
    auth = ({"x-api-key": lease.token, "anthropic-version": "2023-06-01"} if provider == "anthropic"
            else {"authorization": f"Bearer {lease.token}"})
    with host_http_client(lease) as http:
        return http.post(f"http://localhost{path}", headers={**auth, **(headers or {})},
                         content=raw if raw is not None else json.dumps(body).encode())


def _records(lease):
    return [json.loads(line) for line in lease.log_path.read_text().splitlines()]


def test_hostile_bodies_are_refused_before_the_upstream(lease, scripted):
    for case in HOSTILE:
        reply = _post(lease, case.path, case.body, case.provider)
        assert reply.status_code == 400, (case.name, reply.text)
        error = reply.json()["error"]
        assert error["message"].startswith(f"statebox gateway: {case.field}"), (case.name, error)
        if case.provider == "anthropic":
            assert reply.json()["type"] == "error" and error["type"] == "invalid_request_error"
        else:
            assert error["type"] == "invalid_request_error"
    assert scripted.requests == []  # nothing reached the provider
    records = _records(lease)
    assert [(r["refused_field"], r["refused_kind"], r["status"]) for r in records] == [
        (c.field, c.kind, 400) for c in HOSTILE]
    assert all(r["refused"].startswith("statebox gateway:") for r in records)
    assert MARK not in lease.log_path.read_text()  # a refused body is never logged
    assert lease.usage.requests == 0 and lease.exceeded is None  # a refused field costs no budget


def test_disallowed_headers_and_betas_are_dropped(lease, scripted):
    reply = _post(lease, "/v1/messages", anthropic_body(), headers={
        "anthropic-beta": ",".join([ALLOWED_BETA, *HOSTILE_BETAS]), **HOSTILE_HEADERS})
    assert reply.status_code == 200
    seen = scripted.requests[-1].headers
    assert seen["anthropic-beta"] == ALLOWED_BETA and seen["x-api-key"] == DECOY_ANTHROPIC
    for name in HOSTILE_HEADERS:
        assert name not in seen and name.replace("_", "-") not in seen or name == "x_api_key"
    assert "openai-organization" not in seen and "openai-project" not in seen
    record = _records(lease)[-1]
    assert set(HOSTILE_HEADERS) <= set(record["dropped_headers"])
    assert f"anthropic-beta={HOSTILE_BETAS[0]}" in record["dropped_headers"]


def _raw(lease, payload: bytes) -> bytes:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(str(lease.host_socket_path or lease.socket_path))
    s.sendall(payload)
    s.shutdown(socket.SHUT_WR)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return data


def test_get_with_a_smuggled_request_is_refused(lease, scripted):
    inner = json.dumps(anthropic_body(model="claude-opus-4-5")).encode()
    smuggled = (b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: " + lease.token.encode()
                + b"\r\nanthropic-version: 2023-06-01\r\ncontent-type: application/json\r\ncontent-length: "
                + str(len(inner)).encode() + b"\r\n\r\n" + inner)
    for method, target in ((b"GET", b"/v1/models"), (b"GET", b"/v1/models/claude-x"), (b"GET", b"/"),
                           (b"HEAD", b"/")):
        head = (method + b" " + target + b" HTTP/1.1\r\nHost: localhost\r\nx-api-key: " + lease.token.encode()
                + b"\r\nanthropic-version: 2023-06-01\r\nContent-Length: " + str(len(smuggled)).encode()
                + b"\r\n\r\n")
        reply = _raw(lease, head + smuggled)
        assert reply.startswith(b"HTTP/1.1 400 "), reply[:200]
        assert reply.count(b"HTTP/1.1 ") == 1  # the body was never read as a second request
    assert scripted.requests == []  # the upstream saw neither the GET nor the smuggled POST
    records = _records(lease)
    assert len(records) == 4 and all(r["refused_kind"] == "framing" and r["status"] == 400 for r in records)


def test_encoded_bodies_are_refused(lease, scripted):
    body = gzip.compress(json.dumps({"model": "claude-opus-4-5", "messages": [{"role": "user", "content": MARK}]})
                         .encode())
    for path in ("/v1/messages/count_tokens", "/v1/messages"):
        reply = _post(lease, path, None, headers={"content-encoding": "gzip"}, raw=body)
        assert reply.status_code == 400 and "content-encoding" in reply.json()["error"]["message"]
    not_json = _post(lease, "/v1/messages/count_tokens", None, raw=b"\x1f\x8b\x08garbage")
    assert not_json.status_code == 400 and "statebox gateway: body" in not_json.json()["error"]["message"]
    assert scripted.requests == []
    assert [r["refused_kind"] for r in _records(lease)] == ["encoding", "encoding", "field"]


# ---------------------------------------------------------------------------
# Budgets at admission
# ---------------------------------------------------------------------------


def _usage_is_max_tokens(req: ScriptRequest) -> Turn:
    """An upstream that spends every token it is allowed, slowly, so concurrent requests overlap."""
    cap = req.body.get("max_tokens") or req.body.get("max_output_tokens") or req.body.get("max_completion_tokens")
    return Turn(text="x", usage={"input_tokens": 10, "output_tokens": int(cap)}, delay_s=0.5)


@pytest.fixture
def greedy(socket_dir, tmp_path):
    """A gateway whose upstream charges max tokens: (gateway, upstream, new_lease(budgets))."""
    with ScriptedModelServer([_usage_is_max_tokens] * 200, index_mode="sequential") as up, Gateway(
        env={}, anthropic_base_url=up.base_url, openai_base_url=up.openai_base_url,
        anthropic_api_key="k" * 20, openai_api_key="k" * 20,
    ) as gw:
        def new_lease(budgets: Budgets, name: str = "a-greedy"):
            return gw.lease(name, socket_dir / name, tmp_path / f"{name}.jsonl", budgets,
                            limits=GatewayLimits(max_requests_per_s=1000, max_connections=64))
        yield gw, up, new_lease


def _concurrently(lease, n: int, body: dict) -> list[int]:
    statuses: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(n)

    def one() -> None:
        start.wait()
        status = _post(lease, "/v1/messages", body).status_code
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return statuses


@pytest.mark.parametrize("budget", [{"max_output_tokens": 1000, "max_total_tokens": None},
                                    {"max_total_tokens": 1000}])
def test_sixteen_concurrent_requests_never_pass_the_budget(greedy, budget):
    gw, up, new_lease = greedy
    lease = new_lease(Budgets(**budget))
    statuses = _concurrently(lease, 16, anthropic_body(max_tokens=900))
    granted = [r.body["max_tokens"] for r in up.requests]
    spent = lease.usage.output_tokens + (lease.usage.input_tokens if "max_total_tokens" in budget
                                         and budget["max_total_tokens"] else 0)
    print(f"\n16 concurrent requests, max_tokens 900, budget {budget}: statuses {sorted(statuses)}, "
          f"granted {granted}, spent {lease.usage}")
    assert len(statuses) == 16 and set(statuses) <= {200, 429} and 200 in statuses
    assert sum(granted) <= 1000 and spent <= 1000  # unguarded, this was 14,400
    assert lease.reserved.output_tokens == 0 and lease.reserved.input_tokens == 0  # every reservation settled
    refused = [r for r in _records(lease) if r.get("refused")]
    assert refused and all(r["status"] == 429 and "budget" in r["refused"] and r["refused_kind"] == "budget"
                           for r in refused)


def test_a_huge_max_tokens_is_clamped_and_a_missing_one_gets_the_remainder(greedy):
    gw, up, new_lease = greedy
    lease = new_lease(Budgets(max_output_tokens=1000, max_total_tokens=None))
    assert _post(lease, "/v1/messages", anthropic_body(max_tokens=64000)).status_code == 200
    assert up.requests[-1].body["max_tokens"] == 1000
    record = _records(lease)[-1]
    assert record["clamped"] == {"field": "max_tokens", "requested": 64000, "cap": 1000}
    assert lease.usage.output_tokens == 1000
    # spent: the next request is refused, 429 naming the budget
    over = _post(lease, "/v1/messages", anthropic_body(max_tokens=5))
    assert over.status_code == 429 and "budget" in over.json()["error"]["message"]
    lease2 = new_lease(Budgets(max_output_tokens=700, max_total_tokens=None), "a-nofield")
    reply = _post(lease2, "/v1/responses", responses_body(), provider="openai")
    assert reply.status_code == 200 and up.requests[-1].body["max_output_tokens"] == 700
    lease3 = new_lease(Budgets(max_output_tokens=700, max_total_tokens=None), "a-chat")
    assert _post(lease3, "/v1/chat/completions", chat_body(), provider="openai").status_code == 200
    assert up.requests[-1].body["max_completion_tokens"] == 700


def test_a_model_without_a_price_is_refused_under_a_cost_budget(greedy):
    gw, up, new_lease = greedy
    lease = new_lease(Budgets(max_cost_usd=1.0, max_total_tokens=None))
    reply = _post(lease, "/v1/messages", anthropic_body(model="mystery-model-1"))
    assert reply.status_code == 429
    message = reply.json()["error"]["message"]
    assert "budget" in message and "mystery-model-1" in message and "prices_per_mtok" in message
    assert up.requests == []
    priced = new_lease(Budgets(max_cost_usd=1.0, max_total_tokens=None,
                               prices_per_mtok={"mystery-model": (1.0, 2.0)}), "a-priced")
    assert _post(priced, "/v1/messages", anthropic_body(model="mystery-model-1")).status_code == 200
    assert priced.usage.cost_usd == pytest.approx((10 * 1.0 + 16 * 2.0) / 1e6)


@pytest.mark.parametrize("model", ["CLAUDE-OPUS-5-5", " claude-opus-5-5", "claude-haiku-5-5", "Claude-Sonnet-5-5"])
def test_a_model_spelt_past_the_price_table_is_refused_not_free(greedy, model):
    """An agent under a cost budget naming a priced model in another case or with a leading blank (or a model priced
    only "from" a figure) must not reach the provider at $0: no prefix of the table matches, so it is refused."""
    gw, up, new_lease = greedy
    lease = new_lease(Budgets(max_cost_usd=1.0, max_total_tokens=None))
    reply = _post(lease, "/v1/messages", anthropic_body(model=model))
    assert reply.status_code == 429 and "prices_per_mtok" in reply.json()["error"]["message"]
    assert up.requests == [] and lease.usage.cost_usd == 0


@pytest.mark.parametrize("model", ["gpt-5-pro", "gpt-5-pro-2025-10-06", "o3-pro", "gpt-5.6-sol", "gpt-6-astra",
                                   "gpt-4o-audio-preview", "claude-opus-4-7-thinking",
                                   # a listed model's snapshot spelt past its date, or in another case
                                   "gpt-5-2025-08-07\n", "gpt-5-2025-08-07-pro", "GPT-5-2025-08-07"])
def test_a_dearer_sibling_is_not_charged_its_family_price(greedy, model):
    """An attack on the price table's prefixes: `gpt-5-pro` ($15/$120) matched the `gpt-5` prefix ($1.25/$10) and
    `o3-pro` ($20/$80) matched `o3` ($2/$8), so a cost budget was charged a tenth of what the provider bills and
    tripped ten times too late. A model the table does not name exactly (or as a dated snapshot of a name) has no price: under a
    cost budget it is refused before it is sent."""
    gw, up, new_lease = greedy
    lease = new_lease(Budgets(max_cost_usd=1.0, max_total_tokens=None))
    reply = _post(lease, "/v1/chat/completions", chat_body(model=model, max_completion_tokens=64), provider="openai")
    assert reply.status_code == 429 and "prices_per_mtok" in reply.json()["error"]["message"]
    assert up.requests == [] and lease.usage.cost_usd == 0


@pytest.mark.parametrize("model, price", [
    ("gpt-5", (1.25, 10.0)), ("gpt-5-2025-08-07", (1.25, 10.0)), ("gpt-5.5", (5.0, 30.0)),
    ("gpt-6.1-sol", (2.0, 10.0)), ("claude-opus-4-1-20250805", (15.0, 75.0)), ("claude-sonnet-4-6", (3.0, 15.0)),
])
def test_a_named_model_and_its_dated_snapshot_pay_the_listed_price(greedy, model, price):
    gw, up, new_lease = greedy
    _assert_charged_at(new_lease(Budgets(max_cost_usd=1.0, max_total_tokens=None)), model, price)


def test_a_policy_price_is_a_prefix_as_documented(greedy):
    """The policy's own prices keep their documented prefix reading: the user who prices `gpt-5-pro` prices its
    snapshots and variants, and a longer entry of the built-in table still wins over a shorter policy prefix."""
    gw, up, new_lease = greedy
    for model, budget, price in (("gpt-5-pro-2025-10-06", {"gpt-5-pro": (15.0, 120.0)}, (15.0, 120.0)),
                                 ("gpt-5.5", {"gpt-": (9.0, 9.0)}, (5.0, 30.0))):
        lease = new_lease(Budgets(max_cost_usd=1.0, max_total_tokens=None, prices_per_mtok=budget), f"a-{model}")
        _assert_charged_at(lease, model, price)


def _assert_charged_at(lease, model: str, price: tuple[float, float]) -> None:
    """One chat request for `model` is served and the lease is charged its reply's usage at `price` (USD/Mtok)."""
    reply = _post(lease, "/v1/chat/completions", chat_body(model=model, max_completion_tokens=64), provider="openai")
    assert reply.status_code == 200
    used = reply.json()["usage"]
    assert lease.usage.cost_usd == pytest.approx((used["prompt_tokens"] * price[0]
                                                  + used["completion_tokens"] * price[1]) / 1e6)


def test_cost_budget_clamps_output_to_what_money_is_left(greedy):
    gw, up, new_lease = greedy
    # $0.01 at $10/Mtok output: at most 1,000 output tokens, less the input estimate's cost
    lease = new_lease(Budgets(max_cost_usd=0.01, max_total_tokens=None, prices_per_mtok={"m-": (0.0, 10.0)}))
    statuses = _concurrently(lease, 8, anthropic_body(model="m-1", max_tokens=900))
    assert 200 in statuses and lease.usage.cost_usd <= 0.01 + 1e-12
    assert sum(r.body["max_tokens"] for r in up.requests) <= 1000


@pytest.mark.parametrize("block, kind", [
    ({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "vcbench answers"}},
     "server_tool"),
    ({"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "fetch", "server_name": "x", "input": {}}, "mcp"),
])
def test_a_system_role_message_is_no_side_door_for_provider_blocks(block, kind):
    """The system role is admitted because Claude Code sends one; its content goes through the same
    block table, so a provider-run block hidden there is refused like anywhere else."""
    body = {"model": "claude-opus-4-5", "max_tokens": 64, "messages": [
        {"role": "user", "content": "count the cubes"},
        {"role": "system", "content": [block], "output_config": {"effort": "high"}}]}
    with pytest.raises(Refused) as refused:
        check_body("anthropic", body)
    assert refused.value.kind == kind and refused.value.field.startswith("messages[1].content[0]")
