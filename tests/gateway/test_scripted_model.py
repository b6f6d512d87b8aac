"""The scripted model on its own: script files, hooks, turn selection, the command line."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import anthropic
import httpx
import openai

from statebox.agents.model_clients import anthropic_client
from statebox.sandbox.gateway import Gateway
from statebox.testing.scripted_model import ScriptedModelServer, Turn, load_script

BASH = [{"name": "Bash", "description": "sh", "input_schema": {"type": "object",
                                                            "properties": {"command": {"type": "string"}}}}]


def hook_echo(req):
    return Turn(text=f"saw {req.last_tool_output!r} at turn {req.turn_index}")


def test_script_file_with_template_and_hook(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"shell": "wc -l data.txt"},
                                  {"text_template": "There are {last_output} lines."},
                                  {"hook": f"{__name__}:hook_echo"}]))
    steps = load_script(script)
    with ScriptedModelServer(steps) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
        first = client.messages.create(model="m", max_tokens=8, tools=BASH, messages=[{"role": "user", "content": "go"}])
        call = first.content[0]
        history = [{"role": "user", "content": "go"},
                   {"role": "assistant", "content": [call.model_dump(exclude_none=True)]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "7"}]}]
        second = client.messages.create(model="m", max_tokens=8, tools=BASH, messages=history)
        assert second.content[0].text == "There are 7 lines."
        # The same request again (a client retry) gets the same turn: turns follow the conversation.
        assert client.messages.create(model="m", max_tokens=8, tools=BASH, messages=history).content[0].text == \
            "There are 7 lines."
        third = client.messages.create(model="m", max_tokens=8, tools=BASH, messages=history + [
            {"role": "assistant", "content": "There are 7 lines."}, {"role": "user", "content": "and?"}])
        assert third.content[0].text == "saw '7' at turn 2"
        past_end = client.messages.create(model="m", max_tokens=8, tools=BASH, messages=history + [
            {"role": "assistant", "content": "a"}, {"role": "user", "content": "b"},
            {"role": "assistant", "content": "c"}, {"role": "user", "content": "d"}])
        assert "script exhausted" in past_end.content[0].text and server.model.exhausted
        assert [r.turn_index for r in server.model_requests()] == [0, 1, 1, 2, 3]


def test_sequential_mode_and_error_turn():
    with ScriptedModelServer([Turn(status=500, text="boom"), Turn(text="fine")], index_mode="sequential") as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="x", max_retries=0)
        try:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        except openai.InternalServerError as exc:
            assert exc.body["message"] == "boom"
        else:
            raise AssertionError("the scripted 500 did not surface")
        assert client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}]) \
            .choices[0].message.content == "fine"


def test_command_line_serves_a_script(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"text": "hello from the script"}]))
    proc = subprocess.Popen([sys.executable, "-m", "statebox.testing.scripted_model", "--script", str(script),
                             "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        banner = proc.stdout.readline()
        base = banner.split()[3]
        out = anthropic.Anthropic(base_url=base, api_key="x", max_retries=0).messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
        assert out.content[0].text == "hello from the script"
    finally:
        proc.terminate()
        proc.wait(timeout=5)


def test_bad_script_file_is_one_clear_line(tmp_path):
    script = tmp_path / "bad.json"
    script.write_text(json.dumps([{"shel": "ls"}]))
    done = subprocess.run([sys.executable, "-m", "statebox.testing.scripted_model", "--script", str(script)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "unknown turn keys ['shel']" in done.stderr


def test_gateway_relays_sse_as_it_arrives(tmp_path):
    """Events reach the client while the upstream is still sending, not after it finished."""
    with ScriptedModelServer([Turn(text="x" * 160)], sse_delay_s=0.05) as upstream, Gateway(
        env={}, anthropic_base_url=upstream.base_url, anthropic_api_key="k" * 20
    ) as gw:
        lease = gw.lease("a-sse", tmp_path / "s", tmp_path / "g.jsonl")
        client = anthropic_client(lease, max_retries=0)
        started = time.monotonic()
        arrivals = []
        with client.messages.stream(model="m", max_tokens=8, messages=[{"role": "user", "content": "x"}]) as s:
            for _event in s:
                arrivals.append(time.monotonic() - started)
        assert len(arrivals) >= 10 and arrivals[-1] > 0.5
        # relayed as sent, the events come sse_delay_s apart; held until the upstream finished, all at
        # once. A busy machine only widens the gap (the wait for the first event it can stretch at will)
        assert arrivals[-1] - arrivals[0] > 0.05 * (len(arrivals) - 1) / 2
        lease.close()


def test_unreachable_upstream_is_a_502_in_provider_shape(tmp_path):
    with Gateway(env={}, anthropic_base_url="http://127.0.0.1:9", anthropic_api_key="k" * 20) as gw:
        lease = gw.lease("a-down", tmp_path / "s", tmp_path / "g.jsonl")
        client = anthropic_client(lease, max_retries=0)
        try:
            client.messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "x"}])
        except anthropic.APIStatusError as exc:
            assert exc.status_code == 502 and exc.body["error"]["type"] == "api_error"
        else:
            raise AssertionError("expected a 502")
        line = json.loads((tmp_path / "g.jsonl").read_text())
        assert line["status"] == 502 and "could not reach" in line["error"]
        lease.close()


def test_a_namespaced_tool_call_is_sent_as_the_responses_api_sends_it():
    """Codex groups its subagent tools in a namespace (`multi_agent_v1`) and runs a call only when the item names it:
    a `namespace` turn carries the field in the Responses output (JSON and streamed, read by the real openai client);
    Chat Completions has no such field and gets the plain call."""
    turn = Turn(tool="spawn_agent", namespace="multi_agent_v1", arguments={"message": "look around"})
    with ScriptedModelServer([turn]) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="sk-test")
        tools = [{"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}]
        reply = client.responses.create(model="m", input="hi", tools=tools)
        [call] = [item for item in reply.output if item.type == "function_call"]
        assert (call.name, call.model_dump().get("namespace"), json.loads(call.arguments)) == \
            ("spawn_agent", "multi_agent_v1", {"message": "look around"})
        with client.responses.stream(model="m", input="hi", tools=tools) as stream:
            done = [e.item for e in stream if e.type == "response.output_item.done"]
        assert [(i.name, i.model_dump().get("namespace")) for i in done] == [("spawn_agent", "multi_agent_v1")]
        chat = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                              tools=[{"type": "function", "function": {"name": "spawn_agent"}}])
        assert chat.choices[0].message.tool_calls[0].function.name == "spawn_agent"
