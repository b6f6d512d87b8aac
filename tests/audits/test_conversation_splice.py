"""Kept gateway lines parsed without the conversation items read before (sessions/conversation_splice.py) give
exactly the drafts of parsing every kept line whole (`gateway_log.parse_lines` on the decoded text).

The agent controls the bytes of tool outputs and tool inputs: `}]}]` and `"response"` inside strings (where the
splice guesses an item ends), a `messages` list nested in a tool input or in metadata before the real one, a
duplicated `messages` key (the last wins), history rewritten by compaction, conversations interleaved, items
nested up to orjson's depth limit, lines that are not UTF-8. Each must give the whole-line answer.
"""

from __future__ import annotations

import json
import random

import pytest

from statebox.sessions import conversation_splice, gateway_log


def _whole(data: bytes, spans: list[tuple[int, int]], keep: set[int]) -> list:
    return gateway_log.parse_lines(data[a:b].decode("utf-8", "replace") if n in keep else ""
                                   for n, (a, b) in enumerate(spans, start=1))


def _spans(data: bytes) -> list[tuple[int, int]]:
    spans, at = [], 0
    for line in data.split(b"\n"):
        spans.append((at, at + len(line)))
        at += len(line) + 1
    return spans


def _spliced(data: bytes, keep: set[int]) -> tuple[list, int]:
    """The drafts of `parse_kept_lines`, and how many lines it read by splicing."""
    used = []
    original = conversation_splice.Splicer.read

    def read(self, *args):
        obj = original(self, *args)
        used.append(obj is not None)
        return obj

    conversation_splice.Splicer.read = read
    try:
        return gateway_log.parse_kept_lines(data, _spans(data), keep.__contains__), sum(used)
    finally:
        conversation_splice.Splicer.read = original


_TEXTS = ["ls -la", "caf\u00e9 \u212a", 'x}]}]y', '"response": {"content": [', '}]}], "response"', "\\", "[1, 2]}]}]",
          '{"role": "user"}', "0" * 50, "\u2028"]


def _tool_input(rng: random.Random) -> dict:
    pick = rng.random()
    if pick < 0.2:
        return {"messages": [{"role": "user", "content": [{"type": "text", "text": rng.choice(_TEXTS)}]}]}
    if pick < 0.3:
        return {"n": [[{"a": [{"b": 1}]}]]}
    return {"command": rng.choice(_TEXTS)}


def _log(rng: random.Random) -> bytes:
    conversations = [[{"role": "user", "content": [{"type": "text", "text": "task %d %s" % (c, rng.choice(_TEXTS))}]}]
                     for c in range(rng.randint(1, 3))]
    lines = []
    for n in range(rng.randint(2, 14)):
        c = rng.randrange(len(conversations))
        history = conversations[c]
        call = "toolu_%d_%d" % (c, n)
        history.append({"role": "assistant", "content": [{"type": "tool_use", "id": call, "name": "Bash",
                                                          "input": _tool_input(rng)}]})
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call,
                                                     "content": rng.choice(_TEXTS) * rng.randint(1, 3)}]})
        if rng.random() < 0.1 and len(history) > 3:
            del history[1:3]  # compaction: the history is rewritten
        request: dict = {"model": "m", "system": "sys"}
        if rng.random() < 0.15:
            request["metadata"] = {"messages": [{"role": "user", "content": [{"type": "text", "text": "decoy"}]}]}
        request["messages"] = history
        if rng.random() < 0.3:
            request["tools"] = [{"name": "Bash", "input_schema": {"type": "object", "required": [{"x": [1]}]}}]
        line = json.dumps({"time": n, "request": request,
                           "response": {"content": [{"type": "text", "text": rng.choice(_TEXTS)}]}},
                          ensure_ascii=rng.random() < 0.5)
        if rng.random() < 0.1:  # the same key twice: orjson keeps the last
            line = line.replace('"messages": [', '"messages": [{"role": "user", "content": "dup"}], "messages": [', 1)
        raw = line.encode()
        if rng.random() < 0.05:
            raw = raw.replace(b"task", b"t\xffask")  # not UTF-8: the text path (decoded with U+FFFD)
        lines.append(raw)
    return b"\n".join(lines)


@pytest.mark.parametrize("seed", range(60))
def test_spliced_lines_parse_as_whole_lines(seed):
    rng = random.Random(seed)
    data = _log(rng)
    count = data.count(b"\n") + 1
    keep = {n for n in range(1, count + 1) if rng.random() < 0.6}
    drafts, _ = _spliced(data, keep)
    assert drafts == _whole(data, _spans(data), keep)


def test_a_plain_conversation_is_read_by_splicing():
    """The splice is used (not only correct by falling back): every line after the first of one conversation."""
    rng = random.Random(1)
    history = [{"role": "user", "content": [{"type": "text", "text": "task"}]}]
    lines = []
    for n in range(6):
        history.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": "ls"}}]})
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "out %d" % rng.randint(0, 9)}]})
        lines.append(json.dumps({"request": {"messages": history}, "response": {"content": [{"type": "text", "text": "ok"}]}}).encode())
    data = b"\n".join(lines)
    keep = set(range(1, 7))
    drafts, used = _spliced(data, keep)
    assert drafts == _whole(data, _spans(data), keep)
    assert used == 5


def test_the_sentinel_must_land_in_the_messages_list_the_normaliser_reads():
    """A `messages` list in metadata comes first in each line: the splice learns that one, and the sentinel lands
    there, not in the request's own list; the line must then be parsed whole, and the result is the same."""
    lines = []
    history = [{"role": "user", "content": [{"type": "text", "text": "task"}]}]
    for n in range(4):
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": f"out {n}"}]})
        body = {"metadata": {"messages": [{"role": "user", "content": [{"type": "text", "text": "decoy"}]}]}, "messages": history}
        lines.append(json.dumps({"request": body, "response": {}}).encode())
    data = b"\n".join(lines)
    keep = {1, 2, 3, 4}
    drafts, used = _spliced(data, keep)
    assert used == 0
    assert drafts == _whole(data, _spans(data), keep)


def test_items_nested_to_orjsons_limit_are_refused_as_the_whole_line_is():
    """A line adds an item nested so deep that the whole line passes orjson's nesting limit: the whole line is
    not JSON to orjson (so it is kept unparsed), and the splice must not take the item as JSON by parsing it
    shallower than it stands in the line."""
    task = '{"role": "user", "content": [{"type": "text", "text": "task"}]}, {"role": "assistant", "content": [{"type": "text", "text": "hm"}]}'
    first = ('{"request": {"messages": [%s]}, "response": {}}' % task).encode()
    refused = []
    for depth in range(1012, 1024):
        deep = "[" * depth + "]" * depth
        item = '{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x", "deep": %s}]}' % deep
        data = first + b"\n" + ('{"request": {"messages": [%s, %s]}, "response": {}}' % (task, item)).encode()
        keep = {1, 2}
        whole = _whole(data, _spans(data), keep)
        refused.append(any(d.data.get("unparsed") for _, d in whole))
        assert _spliced(data, keep)[0] == whole, depth
    assert any(refused) and not all(refused)  # the limit lies inside the range tried


def test_a_list_learnt_before_the_request_messages_is_not_taken_for_them():
    """The first `"messages": [` of each line is a list in metadata whose items end as conversation items do; the
    request's own list ends otherwise. The splice learns the metadata list, its sentinel lands there, and the
    line is parsed whole: the request's first message is not replaced by the metadata's items."""
    decoy = '{"messages": [{"role": "user", "content": [{"type": "text", "text": "decoy"}]}]}'
    lines = []
    history = ['{"role": "user", "content": "task"}']
    for n in range(4):
        history.append('{"role": "user", "content": "out %d"}' % n)
        lines.append(('{"request": {"metadata": %s, "messages": [%s]}, "response": {}}' % (decoy, ", ".join(history))).encode())
    data = b"\n".join(lines)
    keep = {1, 2, 3, 4}
    assert _spliced(data, keep)[0] == _whole(data, _spans(data), keep)


def test_bytes_after_the_known_items_that_only_parse_as_a_number_s_tail_are_not_skipped():
    """The line adds `.5, {item}` right after the known items' `}`: `[0` + that + `]` parses (as 0.5 and the item),
    but the line is not JSON. The added bytes count only when they parse as items after a comma."""
    first = '{"request": {"messages": [{"role": "user", "content": [{"type": "text", "text": "task"}]}]}, "response": {}}'
    second = first.replace('"task"}]}]}', '"task"}]}.5, {"role": "user", "content": [{"type": "text", "text": "n"}]}]}')
    data = (first + "\n" + second).encode()
    keep = {1, 2}
    whole = _whole(data, _spans(data), keep)
    assert any(d.data.get("unparsed") for _, d in whole)
    assert _spliced(data, keep)[0] == whole


def test_a_rewritten_first_item_and_a_returning_system_prompt_read_as_whole_lines():
    """The normaliser skips hashing a first item that is the very object hashed before (a spliced line) and
    re-checking a system prompt equal to the last one: a first item rewritten by compaction (a new object, the
    conversation read again) and a system prompt that changes and comes back must give the whole-line drafts."""
    lines = []
    history = [{"role": "user", "content": [{"type": "text", "text": "task"}]}]
    systems = ["sys A", "sys A", "sys B", "sys A", "sys C", "sys C", "sys B", "sys A"]
    for n, system in enumerate(systems):
        if n == 4:  # compaction: the first turn is summarised, the rest kept
            history[0] = {"role": "user", "content": [{"type": "text", "text": "summary of the task"}]}
        history.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": "ls"}}]})
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "out %d" % (n % 3)}]})
        lines.append(json.dumps({"request": {"system": system, "messages": history},
                                 "response": {"content": [{"type": "text", "text": "ok"}]}}).encode())
    data = b"\n".join(lines)
    keep = set(range(1, len(lines) + 1))
    drafts, used = _spliced(data, keep)
    whole = _whole(data, _spans(data), keep)
    assert drafts == whole
    assert used >= 2  # lines 2 and 6 (same system prompt as the line before) at least
    assert [d.text for _, d in whole if d.data.get("role") == "system"] == ["sys A", "sys B", "sys C"]
    assert sum(d.text == "summary of the task" for _, d in whole) == 1
    assert sum(d.kind.value == "tool_output" for _, d in whole) == len(lines)  # compaction re-read them: seen, not repeated
