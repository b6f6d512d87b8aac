"""JSON the gateway's own reading or encoding could not take, and requests it failed on, never leave the log silent.

An unpaired UTF-16 surrogate is valid JSON (`"\\ud800"`) and has no UTF-8 form. A client that cuts a string inside a
surrogate pair sends one (JavaScript strings are UTF-16); a model can be asked to write one into a tool call. Before: a
request holding one answered 500 and left no line in gateway.jsonl, and a reply holding one was cut for the client and left no line either (the log
writer raised), so the independent witness lost the very turn that held it. An integer of 5,000 digits (past
Python's 4,300) did the same. Driven by the real anthropic and openai clients against the scripted model.
"""

from __future__ import annotations

import json
import os

import pytest

from statebox.agents.model_clients import anthropic_client, openai_client
from statebox.json_text import json_value
from statebox.policies.model import Budgets
from statebox.sandbox.gateway import Gateway, server as gateway_server
from statebox.sandbox.gateway.accounting import log_line
from statebox.sandbox.gateway.log import StreamAssembler
from statebox.testing.scripted_model import ScriptedModelServer, Turn

from .conftest import DECOY_ANTHROPIC, DECOY_OPENAI
from .test_gateway import BASH, EXEC, log_lines
from .test_gateway_admission import _post

LONE = "\ud800"  # a high surrogate with no low one after it
CUT_EMOJI = "\ud83d"  # the first half of U+1F600, as a UTF-16 cut leaves it


def _serve(script, monkeypatch, socket_dir, tmp_path, budgets=None):
    server = ScriptedModelServer(script, index_mode="sequential")
    server.__enter__()
    monkeypatch.setenv("ANTHROPIC_API_KEY", DECOY_ANTHROPIC)
    monkeypatch.setenv("OPENAI_API_KEY", DECOY_OPENAI)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    gateway = Gateway(env=dict(os.environ))
    gateway.__enter__()
    lease = gateway.lease("attempt-surrogates", socket_dir, tmp_path / "gateway.jsonl",
                          budgets or Budgets(max_output_tokens=100_000))
    return server, gateway, lease


@pytest.fixture
def served(request, monkeypatch, socket_dir, tmp_path):
    server, gateway, lease = _serve(request.param, monkeypatch, socket_dir, tmp_path)
    yield server, lease
    lease.close()
    gateway.__exit__(None, None, None)
    server.__exit__(None, None, None)


def _reserved_nothing(lease) -> bool:
    held = lease.reserved
    return held.input_tokens == 0 and held.output_tokens == 0 and held.cost_usd == 0


@pytest.mark.parametrize("served", [[Turn(text="fine")] * 3], indirect=True)
def test_a_request_holding_an_unpaired_surrogate_goes_upstream_as_sent_and_is_logged(served):
    """As Claude Code (JavaScript) sends it: the SDKs of Python refuse to encode such a string at all."""
    server, lease = served
    text = f"tool output cut inside an emoji {CUT_EMOJI}"
    bodies = [("/v1/messages", "anthropic", {"model": "claude-haiku-4-5", "max_tokens": 32,
                                             "messages": [{"role": "user", "content": text}]}),
              ("/v1/chat/completions", "openai", {"model": "gpt-5-mini", "messages": [{"role": "user", "content": text}]}),
              ("/v1/responses", "openai", {"model": "gpt-5-mini", "input": text})]
    for path, provider, body in bodies:
        raw = json.dumps(body).encode()  # ASCII: the surrogate as its escape, as JSON.stringify writes it
        assert b"\\ud83d" in raw
        reply = _post(lease, path, None, provider, raw=raw)
        assert reply.status_code == 200, reply.text  # before: 500, and no line in the log
    # the provider read the very string the client sent (the escape went on as it came)
    upstream = server.requests
    assert [r.api for r in upstream] == ["anthropic", "chat", "responses"]
    assert upstream[0].body["messages"][0]["content"] == text
    assert upstream[1].body["messages"][0]["content"] == text
    assert upstream[2].body["input"] == text
    # and every request has its line, the surrogate written as U+FFFD and counted
    lines = log_lines(lease)
    assert [line["status"] for line in lines] == [200, 200, 200]
    assert all(line["unpaired_surrogates"] == 1 for line in lines)
    assert lines[0]["request"]["messages"][0]["content"] == text.replace(CUT_EMOJI, "\ufffd")
    assert _reserved_nothing(lease)


@pytest.mark.parametrize("served", [[Turn(shell=f"cat /data/annotations/answers.csv # {LONE}")] * 2],
                         indirect=True)
def test_a_reply_whose_tool_call_holds_an_unpaired_surrogate_reaches_the_client_and_the_log(served):
    server, lease = served
    client = anthropic_client(lease, max_retries=0)
    ask = dict(model="claude-haiku-4-5", max_tokens=64, tools=BASH, messages=[{"role": "user", "content": "count"}])
    whole = client.messages.create(**ask)
    [call] = [b for b in whole.content if b.type == "tool_use"]
    assert call.input["command"] == f"cat /data/annotations/answers.csv # {LONE}"  # relayed as the upstream sent it
    # streamed, read as raw events (the Python SDK's incremental reader trips on an escape cut between two deltas)
    sse = _post(lease, "/v1/messages", dict(ask, stream=True))
    assert sse.status_code == 200 and "message_stop" in sse.text  # the whole stream, its end marker too
    partial = "".join(json.loads(line[6:])["delta"]["partial_json"] for line in sse.text.splitlines()
                      if line.startswith("data: ") and '"input_json_delta"' in line)
    assert json.loads(partial)["command"].endswith(LONE)
    lines = log_lines(lease)
    assert len(lines) == len(server.requests) == 2  # before: no line for either, and both replies cut
    for line in lines:
        assert line["status"] == 200 and line["unpaired_surrogates"] == 1
        logged = json.dumps(line["response"])
        assert "cat /data/annotations/answers.csv # \\ufffd" in logged  # the auditor reads the call
    assert _reserved_nothing(lease)


@pytest.mark.parametrize("served", [[Turn(text="fine")] * 3], indirect=True)
def test_a_body_python_cannot_read_is_refused_and_logged(served):
    server, lease = served
    huge = b"1" + b"0" * 5000  # past Python's 4,300-digit limit for reading an integer
    body = b'{"model": "claude-haiku-4-5", "max_tokens": ' + huge + b', "messages": [{"role": "user", "content": "x"}]}'
    reply = _post(lease, "/v1/messages", None, raw=body)
    assert reply.status_code == 400 and reply.json()["error"]["message"].startswith("statebox gateway: body")
    [line] = log_lines(lease)
    assert line["status"] == 400 and line["refused_field"] == "body"
    assert server.requests == [] and _reserved_nothing(lease)


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e999"])
@pytest.mark.parametrize("served", [[Turn(text="fine")] * 3], indirect=True)
def test_a_body_holding_a_number_json_has_not_is_refused_and_logged(served, number: bytes):
    """NaN and Infinity are no JSON (RFC 8259), and a float past the largest double reads as infinity. Python's reader
    took them, the body passed its checks (`temperature` is any number) and was forwarded re-serialised as `NaN` /
    `Infinity`: not JSON, so what the provider made of it was its own parser's guess (found by this session's probe:
    200, the upstream got `temperature: inf`). Refused as `body`, as any text that is not JSON."""
    server, lease = served
    body = (b'{"model": "claude-haiku-4-5", "max_tokens": 16, "temperature": ' + number
            + b', "messages": [{"role": "user", "content": "x"}]}')
    reply = _post(lease, "/v1/messages", None, raw=body)
    assert reply.status_code == 400 and reply.json()["error"]["message"].startswith("statebox gateway: body")
    [line] = log_lines(lease)
    assert line["status"] == 400 and line["refused_field"] == "body"
    assert server.requests == [] and _reserved_nothing(lease)


@pytest.mark.parametrize("served", [[Turn(text="fine")] * 3], indirect=True)
def test_a_request_the_gateway_fails_on_is_logged_and_holds_no_reservation(served, monkeypatch):
    server, lease = served

    def broken(*args, **kwargs):
        raise RuntimeError("a bug between admission and the upstream")
    monkeypatch.setattr(gateway_server, "filter_headers", broken)
    reply = _post(lease, "/v1/messages", {"model": "claude-haiku-4-5", "max_tokens": 16,
                                          "messages": [{"role": "user", "content": "x"}]})
    assert reply.status_code == 500 and "RuntimeError" in reply.json()["error"]["message"]
    [line] = log_lines(lease)
    assert line["status"] == 500 and "a bug between admission and the upstream" in line["error"]
    assert line["path"] == "/v1/messages" and "refused" not in line  # failed, not refused by a rule
    assert server.requests == []
    assert _reserved_nothing(lease)  # before: its worst case stayed reserved, counted against the budget


@pytest.mark.parametrize("served", [[Turn(tool="exec_command", arguments={"cmd": f"ls {LONE}"}), Turn(text="3")]],
                         indirect=True)
def test_a_responses_reply_with_a_surrogate_in_its_arguments_is_logged(served):
    """OpenAI's tool arguments are a JSON text inside the reply: the model's `\\ud800` is six characters there, so
    the reply itself holds no surrogate; the line must hold the call as sent."""
    server, lease = served
    reply = openai_client(lease, max_retries=0).responses.create(model="gpt-5-mini", input="count", tools=EXEC)
    [call] = [item for item in reply.output if item.type == "function_call"]
    assert json.loads(call.arguments)["cmd"] == f"ls {LONE}"
    [line] = log_lines(lease)
    assert line["status"] == 200 and "unpaired_surrogates" not in line
    assert "\\\\ud800" in json.dumps(line["response"])


def test_the_log_line_of_a_record_with_unpaired_surrogates_is_utf8_and_counts_them():
    record = {"request": {"messages": [{"content": f"a{LONE}b", f"key{CUT_EMOJI}": [LONE, "ok é"]}]}, "status": 200}
    line = log_line(record)
    back = json.loads(line.decode("utf-8"))  # raised before, when the line was encoded
    assert back["unpaired_surrogates"] == 3
    assert back["request"]["messages"][0] == {"content": "a\ufffdb", "key\ufffd": ["\ufffd", "ok é"]}
    assert json.loads(log_line({"status": 200, "text": "ok é"})) == {"status": 200, "text": "ok é"}  # untouched
    redacted = log_line({"key": "sk-secret-value-1234"}, ["sk-secret-value-1234"])
    assert redacted.endswith(b"\n") and b"sk-secret-value-1234" not in redacted  # redacted, one line


HUGE = "1" + "0" * 5000  # a number a model may write into a tool call: past Python's 4,300 digits


def test_a_reply_holding_an_integer_too_long_for_python_keeps_the_call_beside_it():
    """Before: json raised ValueError (not JSONDecodeError) on it, so the reply assembler and the reply reader
    raised; the stream was cut for the client and the request left no line. Now its digits are read as text and the
    call beside it is read whole, streamed or not."""
    call = '{"pad": ' + HUGE + ', "command": "cat /data/annotations/answers.csv"}'
    whole = ('{"type": "message", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": ' + call
             + '}], "usage": {"input_tokens": 1, "output_tokens": 2}}')
    reply = gateway_server.Gateway._reply_of(None, [whole.encode()], {})
    assert reply["content"][0]["input"]["command"] == "cat /data/annotations/answers.csv"
    assert reply["content"][0]["input"]["pad"] == HUGE and reply["usage"]["output_tokens"] == 2

    assembler = StreamAssembler("anthropic")
    events = [("message_start", {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                                                     "content": [], "usage": {"input_tokens": 1}}}),
              ("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "tool_use", "id": "t", "name": "Bash", "input": {}}}),
              ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                       "delta": {"type": "input_json_delta", "partial_json": call}}),
              ("content_block_stop", {"type": "content_block_stop", "index": 0}),
              ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                                 "usage": {"output_tokens": 5}}),
              ("message_stop", {"type": "message_stop"})]
    for event, data in events:
        assembler.feed(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
    assert assembler.finished and assembler.error is None
    assert assembler.result()["content"][0]["input"]["command"] == "cat /data/annotations/answers.csv"
    assert json_value(call)["pad"] == HUGE  # the one reader every door shares
