"""JSON an agent or its model shapes, nested past Python's json recursion, read by the host while a run is live.

The attack: json reads nested arrays by recursion, so text nested a few thousand deep raised RecursionError,
which readers catching `json.JSONDecodeError` let through. The model writes such text as a tool call's input
(streamed through the gateway as `input_json_delta`, printed by the CLI in its stream-json); the agent prints
it from a command (a line that looks like a vtools report, a line that looks like a cap marker), writes it as
its answer file or as any line of a data file handed to `statebox score`. Each reader below ended in a
traceback: the gateway's log of that reply, the live recorder of the session, the frame accounting, the
reading of a predictions file. Each now treats such text as the malformed text it is (`json_text.json_value`).
No container is needed: the readers are the host's, fed the very bytes the sandbox side would send.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statebox.agents.cli_common import LiveStream
from statebox.agents.frames_accounting import decoded_from_text, gateway_bodies
from statebox.agents.video_prompts import extract_json
from statebox.capped_log import CAP_REACHED, is_marker
from statebox.datafiles import read_json, read_json_or_jsonl
from statebox.errors import DataError
from statebox.recorder import SessionRecorder
from statebox.sandbox.gateway.log import StreamAssembler
from statebox.sessions.claude_stream import parse_line as claude_stream_line
from statebox.sessions import EventDraft

DEEP = "[" * 5000 + "]" * 5000


def _sse(event: str, payload: dict) -> bytes:  # type: ignore[type-arg]
    return f"event: {event}\ndata: {json.dumps(payload)}\n\n".encode()


def test_the_gateway_logs_a_streamed_reply_whose_model_wrote_a_too_deep_tool_input() -> None:
    assembler = StreamAssembler("anthropic")
    for chunk in (
        _sse("message_start", {"type": "message_start", "message": {"id": "m1", "role": "assistant", "usage": {"input_tokens": 3}}}),
        _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}}),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "input_json_delta", "partial_json": '{"command": ' + DEEP + "}"}}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse("message_stop", {"type": "message_stop"}),
    ):
        assembler.feed(chunk)
    reply = assembler.result()
    assert assembler.finished
    assert reply["content"][0]["input"] == '{"command": ' + DEEP + "}"  # logged as the text the model wrote


def test_the_live_recorder_keeps_a_too_deep_stream_line_as_a_message(tmp_path: Path) -> None:
    recorder = SessionRecorder(tmp_path)

    class Normaliser:
        def feed(self, obj: dict, line_no: int = 0) -> list[EventDraft]:  # type: ignore[type-arg]
            return claude_stream_line(obj, line_no)

    stream = LiveStream(recorder, Normaliser(), "claude.stream.jsonl")
    stream(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t0", "name": "Bash", "input": {"command": "ls"}}]}}))
    stream('{"type": "assistant", "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", '
           '"name": "Bash", "input": {"x": ' + DEEP + "}}]}}")
    recorder.close()
    kinds = [json.loads(line)["kind"] for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert kinds[0] == "tool_call" and "message" in kinds[1:]  # both lines recorded, the deep one unparsed


def test_frame_accounting_reads_past_a_too_deep_vtools_like_line(tmp_path: Path) -> None:
    text = '{"tool":"vtools", "decoded_times": ' + DEEP + "}\n" + '{"tool":"vtools", "decoded_times": [1.5, 2.0]}'
    assert decoded_from_text(text) == [1.5, 2.0]
    log = tmp_path / "gateway.jsonl"
    log.write_text('{"api": "anthropic", "request": ' + DEEP + "}\n"
                   + json.dumps({"api": "anthropic", "request": {"model": "m", "messages": []}}) + "\n")
    assert gateway_bodies(log) == [("anthropic", {"model": "m", "messages": []})]


def test_a_too_deep_line_is_no_cap_marker_and_no_json_object_of_a_model_reply() -> None:
    assert not is_marker('{"statebox": "' + CAP_REACHED + '", "x": ' + DEEP + "}")
    assert extract_json("The answer: {\"x\": " + DEEP + "} and then {\"answer\": 4}") == {"answer": 4}
    assert extract_json("```json\n{\"x\": " + DEEP + "}\n```") is None


@pytest.mark.parametrize("name", ["preds.json", "preds.jsonl"])
def test_a_predictions_file_nested_too_deep_is_one_error_naming_it(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text('{"id": "q1", "response": ' + DEEP + "}\n")
    with pytest.raises(DataError, match="nested too deeply"):
        read_json_or_jsonl(path)
    with pytest.raises(DataError, match="nested too deeply"):
        read_json(path)


def test_a_line_separator_inside_a_string_keeps_its_jsonl_line_whole(tmp_path: Path) -> None:
    """The gateway writes its log with non-ASCII unescaped (U+2028 included, which the agent's output may hold),
    and a user's predictions file may hold it the same way: both are read a line per "\\n", never per
    `str.splitlines` (which cut such a line in two, so its request or prediction was skipped or refused)."""
    log = tmp_path / "gateway.jsonl"
    body = {"model": "m", "messages": [{"role": "user", "content": "frame\u2028at 2 s"}]}
    log.write_text(json.dumps({"api": "anthropic", "request": body}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert gateway_bodies(log) == [("anthropic", body)]
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text(json.dumps({"id": "q1", "response": "4\u2028apples"}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert read_json_or_jsonl(predictions) == [(1, {"id": "q1", "response": "4\u2028apples"})]
