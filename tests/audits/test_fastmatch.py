"""The prefilter's literal search (`fastmatch.Literals`) answers exactly as the RE2 pattern it replaces.

`Literals` finds an attempt's secret values with `bytes.lower` + `bytes.find` instead of a case-insensitive
RE2 alternation; that is only the same answer if no non-ASCII character folds to an ASCII one under RE2's
case folding other than the two it checks for. The first test proves that claim over every code point;
the second compares both searches on hostile data (folding characters, invalid UTF-8, values at line
edges, values that overlap, non-ASCII values that must take the RE2 path).
"""

from __future__ import annotations

import random
import re

import pytest

from statebox.audits.fastmatch import ENGINE, FOLDS_TO_ASCII, Literals, compile_any, matching_lines

pytestmark = pytest.mark.skipif(ENGINE != "re2", reason="the folding claim is about RE2 (google-re2 is a dependency)")


def test_only_kelvin_and_long_s_fold_to_ascii_in_re2():
    matcher = compile_any(["[a-z0-9]"])
    folding = []
    for cp in range(0x80, 0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        encoded = chr(cp).encode()
        if matcher.search(encoded) is not None:
            folding.append(encoded)
    assert sorted(folding) == sorted(FOLDS_TO_ASCII)


def _re2_lines(values: list[str], data: bytes) -> set[int]:
    return matching_lines(compile_any([re.escape(v.lower()) for v in values]), data)


@pytest.mark.parametrize("seed", range(40))
def test_literals_find_the_lines_re2_finds(seed):
    rng = random.Random(seed)
    values = rng.sample(["blocks_1234_src.mp4", "Juniper-4411x", "88231", "/data/annotations/answers.csv", "q-17 item",
                         "clip.mp4", "stRASSe", "Kelvin", "naïve_clip", "abcabc"], k=rng.randint(1, 4))
    pieces = [b"\n", b"{\"a\": \"", b"\\n", b" ", b"\xc3", b"\xe2\x84", b"\xff\xfe", b"x", "é".encode(),
              "\u212a".encode(), "\u017f".encode(), b"ABCAB", b"\"}\n"]
    parts: list[bytes] = []
    for _ in range(rng.randint(5, 80)):
        roll = rng.random()
        if roll < 0.25:
            value = rng.choice(values)
            value = "".join(c.upper() if rng.random() < 0.5 else c for c in value)
            parts.append(value.encode())
        elif roll < 0.4 and any(c in "ks" for v in values for c in v.lower()):
            v = rng.choice(values).lower()
            if "k" in v or "s" in v:  # folds to the value in RE2 only
                parts.append(v.replace("k", "\u212a").replace("s", "\u017f").encode())
        else:
            parts.append(rng.choice(pieces))
    data = b"".join(parts)
    lits = Literals(values)
    assert lits.lines(data) == _re2_lines(values, data)
    assert lits.search(data) == (compile_any([re.escape(v.lower()) for v in values]).search(data) is not None)


def test_a_value_spelt_with_a_folding_character_is_found_as_re2_finds_it():
    data = "{\"text\": \"x\"}\n{\"text\": \"see BLOC\u212aS_1234_\u017fRC.mp4\"}\n".encode()
    assert Literals(["blocks_1234_src.mp4"]).lines(data) == {2} == _re2_lines(["blocks_1234_src.mp4"], data)
    assert Literals(["blocks_1234_src.mp4"]).search(data)


@pytest.mark.parametrize("seed", range(30))
def test_lines_in_a_log_that_repeats_its_lines_are_the_lines_re2_finds(seed):
    """A gateway-like log (each line re-sends the conversation so far after a varying header, then the same
    long tool list): values inside the repeated stretches, on their edges, split across them, and only in
    the new part of a line; `lines_in` must give exactly RE2's lines."""
    from statebox.audits.events import line_spans

    rng = random.Random(seed)
    # the last value straddles the end of a repeated stretch: a message's end, then the next one's start
    values = ["blocks_1234_src.mp4", "juniper-4411x", "882310", 'mark-77q"}, {"role']
    tools = '"tools": [' + ", ".join('{"name": "t%d", "description": "%s"}' % (i, "x" * rng.randint(50, 400)) for i in range(60)) + "]"
    conversation: list[str] = []
    lines = []
    for n in range(rng.randint(3, 12)):
        words = ["frame", "count", "/workspace/v.mp4", "blocks_1234", "_src.mp4", "JUNIPER-4411X", "88231", "0", "\\n", "x" * 3000, "mark-77q"]
        conversation.append('{"role": "user", "content": "%s"}' % " ".join(rng.choice(words) for _ in range(rng.randint(1, 60))))
        if rng.random() < 0.2 and len(conversation) > 2:
            conversation = conversation[1:]  # compaction: the history is rewritten
        header = '{"time": %d, "request_headers": {"content-length": "%d"}, ' % (rng.randint(0, 10 ** rng.randint(1, 9)), n)
        reply = '"response": {"content": "%s"}}' % rng.choice(["ok", "blocks_1234_src.mp4", "no"])
        lines.append(header + '"request": {"messages": [' + ", ".join(conversation) + "], " + tools + "}, " + reply)
    data = "\n".join(lines).encode()
    for some in (values, values[-1:], values[1:2]):
        assert Literals(some).lines_in(data, line_spans(data)) == _re2_lines(some, data), some


def test_new_event_is_the_event_model_construct_makes():
    from statebox.audits.events import new_event
    from statebox.schema import Event, EventKind

    made = new_event(3, EventKind.tool_call, "gateway.jsonl", 7, "ls /", {"tool": "Bash"}, time=1.5)
    built = Event.model_construct(seq=3, kind=EventKind.tool_call, time=1.5, source="gateway.jsonl", line=7, text="ls /",
                                  data={"tool": "Bash"})
    for slot in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"):
        assert getattr(made, slot) == getattr(built, slot), slot
    assert made == built and made.model_dump() == built.model_dump()


@pytest.mark.parametrize("seed", range(20))
def test_common_length_is_the_length_of_the_equal_prefix(seed):
    from statebox.audits.line_repeats import common_length

    rng = random.Random(seed)
    shared = bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 20000)))
    a = shared + bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 300)))
    b = shared + bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 300)))
    data = a + b"\n" + b
    limit = min(len(a), len(b))
    expected = next((i for i in range(limit) if a[i] != b[i]), limit)
    assert common_length(data, memoryview(data), 0, len(a) + 1, limit) == expected
    got = common_length(data, memoryview(data), 0, len(a) + 1, limit, 256)
    assert got == expected if expected >= 256 else got in (0, expected)  # below the floor only "short" matters
