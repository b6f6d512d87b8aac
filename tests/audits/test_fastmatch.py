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


def test_a_value_spelt_with_a_folding_character_is_found_as_re2_finds_it():
    data = "{\"text\": \"x\"}\n{\"text\": \"see BLOC\u212aS_1234_\u017fRC.mp4\"}\n".encode()
    assert Literals(["blocks_1234_src.mp4"]).lines(data) == {2} == _re2_lines(["blocks_1234_src.mp4"], data)


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


# -- the gateway evidence triggers, read only where a gateway line is new (fastmatch.Windowed) ------------------


def _gateway_like_log(rng: random.Random, pieces: list[str]) -> bytes:
    """Lines that re-send the conversation so far (so most of each line repeats the line before), with hostile
    pieces in the messages, in the replies and on the edges where one line stops repeating the one before."""
    conversation: list[str] = []
    lines = []
    tools = '"tools": [' + ", ".join('{"name": "t%d", "description": "%s"}' % (i, "d" * rng.randint(200, 400)) for i in range(40)) + "]"
    for n in range(rng.randint(3, 14)):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        if conversation and rng.random() < 0.4:  # the last message grows (a streamed turn): a trigger straddles its end
            conversation[-1] = conversation[-1][:-2] + text + "]}"
        else:
            conversation.append('{"role": "user", "content": [%s]}' % text)
        if rng.random() < 0.15 and len(conversation) > 2:
            conversation = conversation[1:]  # compaction: the history is rewritten
        head = '{"time": %d, ' % rng.randint(0, 10 ** rng.randint(1, 9)) if rng.random() < 0.5 else "{"
        reply = '"response": {"content": [%s]}}' % "".join(rng.choice(pieces) for _ in range(rng.randint(0, 4)))
        if rng.random() < 0.1:
            lines.append("")
        lines.append(head + '"request": {"messages": [' + ", ".join(conversation) + "], " + tools + "}, " + reply)
    return "\n".join(lines).encode()


_EVIDENCE_PIECES = [
    '"refused": "mcp"', '"refused":    "', '"type": "server_tool_use"', '"type": "web_search_tool_result"',
    '"type":"mcp_call"', '"mcp_servers": [', '"container": {', '"background": true', '"web_search_requests": 2',
    '"web_search_requests": 0', '"TYPE": "SERVER_TOOL_USE"', '"type": "\u212aind_tool_use"', '"type": "web_\u017fearch"',
    '\\"refused\\": \\"x\\"', '"refus', 'ed": "', '"type": ', '"mcp_', 'servers": [', " " * 5000, "x" * 9000,
    '"text": "ok"', ", ", "}", "\\\\", "\u00e9", '"\u212a": 1', "\xff",
]


@pytest.mark.parametrize("seed", range(40))
def test_windowed_evidence_finds_the_lines_re2_finds_over_every_byte(seed):
    """Triggers inside repeated stretches (so in many lines), split across a line's edge with the stretch it
    repeats, spelt with folding characters, behind runs of spaces longer than any window's first reach,
    escaped (not a trigger): the windowed scan gives exactly the lines a search over every byte gives."""
    from statebox.audits.events import line_spans
    from statebox.audits.fastmatch import Windowed, line_runs
    from statebox.sessions.gateway_log import EVIDENCE_TRIGGERS

    rng = random.Random(seed)
    evidence = Windowed(EVIDENCE_TRIGGERS)
    assert evidence.windowed
    pieces = _EVIDENCE_PIECES if seed % 4 else [p for p in _EVIDENCE_PIECES if p not in (", ", "}", "\\\\")]
    data = _gateway_like_log(rng, pieces).replace(b"\xc3\xbf", b"\xff")  # some invalid UTF-8 too
    spans = line_spans(data)
    runs = line_runs(data, spans)
    assert any(runs), "the log must repeat itself, or the windows are never used"
    assert evidence.lines_in(data, spans, runs) == matching_lines(compile_any(EVIDENCE_TRIGGERS), data)


def test_a_trigger_only_in_the_repeated_part_of_a_line_is_found_in_every_line_that_repeats_it():
    from statebox.audits.events import line_spans
    from statebox.audits.fastmatch import Windowed, line_runs
    from statebox.sessions.gateway_log import EVIDENCE_TRIGGERS

    history = '{"role": "assistant", "content": [{"type": "server_tool_use", "name": "web_search"}]}, ' + \
        '{"role": "user", "content": "%s"}' % ("y" * 20000)
    lines = [('{"request": {"messages": [%s%s]}, "response": {"content": []}}' % (history, ', {"n": %d}' % n * n))
             for n in range(1, 5)]
    data = "\n".join(lines).encode()
    spans = line_spans(data)
    runs = line_runs(data, spans)
    assert all(runs[1:]), "every line after the first repeats the history"
    assert Windowed(EVIDENCE_TRIGGERS).lines_in(data, spans, runs) == {1, 2, 3, 4}


def test_patterns_whose_matches_could_hold_a_separator_are_read_over_every_byte():
    """The windows are exact only for patterns no match of which holds a separator: anything else (a dot, a
    negated class, an escape class, an anchor, a range over a separator, a literal comma) falls back."""
    from statebox.audits.events import line_spans
    from statebox.audits.fastmatch import Windowed, holds_no_separator, line_runs
    from statebox.sessions.gateway_log import EVIDENCE_TRIGGERS

    assert holds_no_separator(EVIDENCE_TRIGGERS)
    for risky in ['"a".*"b"', '"a"[^x]"b"', r'"a"\W"b"', r'"a"\s"b"', '^"a"', '"a"$', '"a"[ -~]"b"', '"a", "b"',
                  '"a"}', r'"a"\x2c', r'"a"\\', r'"a"\b']:
        assert not holds_no_separator([risky]), risky
    # where windows would answer wrong (a match of this pattern may hold a comma or a brace), the fallback answers as
    # RE2 does: the first of some seeded two-line logs, the second line repeating the first, where they differ
    risky = ['"refused":[^"]*"']
    rng = random.Random(0)
    parts = ['{"request": {"refused":', ", ", "z" * 10, "z" * 700, "z" * 9000, '"', "}"]
    for _ in range(20_000):
        first = "".join(rng.choice(parts) for _ in range(rng.randint(2, 6)))
        data = (first + "\n" + first + "".join(rng.choice(parts) for _ in range(rng.randint(0, 3)))).encode()
        spans = line_spans(data)
        runs = line_runs(data, spans)
        fallback = Windowed(risky)
        assert not fallback.windowed
        assert fallback.lines_in(data, spans, runs) == matching_lines(compile_any(risky), data)
        fallback.windowed = True  # what the windows alone would say
        if fallback.lines_in(data, spans, runs) != matching_lines(compile_any(risky), data):
            assert runs[1], "the second line repeats the first"
            break
    else:
        pytest.fail("no log where the windows alone answer otherwise than RE2: the case this test guards was not met")


@pytest.mark.parametrize("trigger", ['"refused":    "', '"type": "server_tool_use"', '"mcp_servers": [', '"background": true',
                                     '"web_search_requests": 2', '"type": "\u212aind_tool_use"'])
def test_a_trigger_split_where_a_line_stops_repeating_the_line_before_is_found(trigger):
    """A streamed turn grows: the line before ends its message with the head of a trigger, this line adds the
    rest. The windows reach back past the repeated bytes to the last separator, so the split trigger is found."""
    from statebox.audits.events import line_spans
    from statebox.audits.fastmatch import Windowed, line_runs
    from statebox.sessions.gateway_log import EVIDENCE_TRIGGERS

    head = '{"request": {"messages": [{"role": "user", "content": "%s"}, {"role": "assistant", "content": [' % ("q" * 9000)
    evidence = Windowed(EVIDENCE_TRIGGERS)
    for cut in range(1, len(trigger)):
        data = (head + trigger[:cut] + "]}]}}\n" + head + trigger + "]}]}}").encode()
        spans = line_spans(data)
        runs = line_runs(data, spans)
        assert runs[1] and runs[1][0][2] >= len(head), "the second line repeats the first up to the cut"
        assert evidence.lines_in(data, spans, runs) == matching_lines(compile_any(EVIDENCE_TRIGGERS), data) == {2}, cut


def test_common_length_finds_a_difference_at_every_boundary_of_its_guesses():
    """The first difference just before, at and after each place `common_length` guesses (the last 512 and 4096
    bytes, its gallops, the XOR span), in lines long and short, and no difference at all."""
    from statebox.audits.line_repeats import TAILS, XOR_SPAN, common_length

    rng = random.Random(7)
    for size in (1, 200, 300, 600, 5000, 9000, 40_000, 300_000):
        a = bytes(rng.choice(b"abc\\\"{},\n\xc3") for _ in range(size))
        places = {0, 1, size // 2, size - 1, size}
        for edge in (*TAILS, XOR_SPAN, 256, 4096 * 5, 4096 * 21):
            places |= {edge - 1, edge, edge + 1, size - edge - 1, size - edge, size - edge + 1}
        for at in sorted(p for p in places if 0 <= p <= size):
            flip = (0x01, 0x80, 0x5A)[at % 3]  # the difference in the byte's low, high or several bits
            b = a[:at] + (bytes([a[at] ^ flip]) + a[at + 1:] if at < size else b"")
            for extra in (b"", b"tail"):
                data = a + extra + b"\n" + b
                limit = min(len(a) + len(extra), len(b))
                expected = next((i for i in range(limit) if data[i] != data[len(a) + len(extra) + 1 + i]), limit)
                view = memoryview(data)
                assert common_length(data, view, 0, len(a) + len(extra) + 1, limit) == expected, (size, at, extra)
                got = common_length(data, view, 0, len(a) + len(extra) + 1, limit, 256)
                assert got == (expected if expected >= 256 else 0) or got == expected, (size, at)


@pytest.mark.parametrize("where", ["first line", "new bytes", "stretch edge"])
def test_a_folded_spelling_in_a_repeating_log_takes_re2_wherever_it_stands(where):
    """`lines_in` asks only the bytes it reads whether a character folding to ASCII (K U+212A, ſ U+017F) is there;
    a folded spelling of a value in the first line (then repeated by every line), in one line's new bytes, or
    with the bytes of its K split where a line stops repeating the line before (the next line completes it)
    must still send the log to RE2 and get its lines."""
    from statebox.audits.events import line_spans

    value = "blocks_1234_src.mp4"
    folded = "BLOC\u212aS_1234_\u017fRC.mp4".encode()
    split = folded.index(b"\xe2") + 1
    history = [b'{"role": "user", "content": "' + b"x" * 9000 + b'"}']
    lines = []
    for n in range(6):
        if where == "first line" and n == 0:
            history[0] = b'{"role": "user", "content": "' + folded + b" " + b"x" * 9000 + b'"}'
        if where == "new bytes" and n == 3:
            history.append(b'{"role": "user", "content": "see ' + folded + b'"}')
        elif where == "stretch edge" and n == 3:
            history[-1] = history[-1][:-2] + folded[:split] + b'"}'
        elif where == "stretch edge" and n == 4:
            history[-1] = history[-1][:-2 - split] + folded + b'"}'
        else:
            history.append(b'{"role": "user", "content": "frame %d %s"}' % (n, b"y" * 300))
        lines.append(b'{"time": %d, "request": {"messages": [%s]}, "response": {"content": "ok"}}' % (n, b", ".join(history)))
    data = b"\n".join(lines)
    expected = _re2_lines([value], data)
    assert expected  # RE2 folds the spelling to the value
    assert Literals([value]).lines_in(data, line_spans(data)) == expected


# -- the static triggers and provider items over a gateway log's reply halves, searched joined (events._replies_matching)


_REPLY_PATTERNS = [r"foo\s+bar", r"^start", r"end$", r"\bword\b", r"x[^y]*z", r"\bcurl\s", r"a\Wb"]
_REPLY_PIECES = ["foo", " ", "bar", "start", "end", "word", "swordfish", "x", "y", "z", "curl", "a", "b", "\t", "é",
                 '"type": "web_search_call"', '"type": "function_call"', '"type":"mcp_list_tools"', "\u212a", "\\n"]


@pytest.mark.parametrize("seed", range(40))
def test_replies_searched_joined_match_as_each_searched_alone(seed, monkeypatch):
    """Matches at a reply's edges (`^`, `$`, word edges), ones a join by newlines would let reach across two
    replies (`\\s`, a negated class), provider items: the replies found are the ones each search alone finds,
    with RE2's engine asked directly and through `search` (as where the binding's private call answers otherwise)."""
    from statebox.audits import fastmatch
    from statebox.audits.events import _replies_matching
    from statebox.sessions.gateway_log import has_provider_item

    rng = random.Random(seed)
    static = compile_any(rng.sample(_REPLY_PATTERNS, k=rng.randint(1, len(_REPLY_PATTERNS))))
    replies = ["".join(rng.choice(_REPLY_PIECES) for _ in range(rng.randint(0, 6))).encode() for _ in range(rng.randint(1, 30))]
    data = b"".join(b"{" + r + b"}\n" for r in replies)
    spans, at = [], 0
    for r in replies:
        spans.append((at + 1, at + 1 + len(r)))
        at += len(r) + 3
    expected = [i for i, r in enumerate(replies) if static.search(r) is not None or has_provider_item(r)]
    assert fastmatch._engine_convention_holds()
    assert _replies_matching(static, data, spans) == expected
    monkeypatch.setattr(fastmatch, "_ENGINE_CONVENTION", False)
    assert _replies_matching(static, data, spans) == expected


def test_a_pattern_that_tells_a_text_edge_from_a_newline_makes_each_reply_searched_alone():
    """`\\A` matches at a reply's own start but not after the newline that joins it to the reply before; `\\z` the
    same at its end. Such a pattern is searched reply by reply."""
    from statebox.audits.events import _replies_matching

    replies = [b"zzz", b"abc tail", b"head xyz"]
    data = b"\n".join(replies)
    spans = [(0, 3), (4, 12), (13, 21)]
    for pattern, expected in ((r"\Aabc", [1]), (r"xyz\z", [2])):
        static = compile_any([pattern])
        assert [i for i, r in enumerate(replies) if static.search(r) is not None] == expected
        assert _replies_matching(static, data, spans) == expected


def test_a_match_reaching_across_replies_neither_counts_nor_hides_the_next_reply():
    """Joined, `x[^y]*z` runs from the first reply over the newline to the end of the second: the first reply alone
    has no match, and the second must still be searched from its own start (it holds `foo bar`)."""
    from statebox.audits.events import _replies_matching

    replies = [b"x", b"foo bar z"]
    static = compile_any([r"x[^y]*z", r"foo\s+bar"])
    assert static.search(b"\n".join(replies)).span() == (0, 11)
    assert _replies_matching(static, b"\n".join(replies), [(0, 1), (2, 11)]) == [1]


# -- kept gateway lines read by orjson as bytes (gateway_log.parse_raw_lines) --------------------------------------

_REQUEST = '{"request": {"system": "sys", "messages": [{"role": "user", "content": "%s"}]}, "response": {"content": [{"type": "text", "text": "ok"}]}}'


@pytest.mark.parametrize("line", [
    (_REQUEST % "plain").encode(),
    (_REQUEST % "caf\u00e9 \u212a").encode(),
    b"\xc2\x85" + (_REQUEST % "after a NEL").encode() + "\u2028".encode(),  # Unicode whitespace str.strip removes
    b"\x1c" + (_REQUEST % "after a separator").encode(),
    (_REQUEST % "bad \xff byte").encode("latin-1"),  # not UTF-8: decoded with U+FFFD first
    (_REQUEST % "bad").encode()[:-7] + b"\xe2\x84",  # torn in a character
    b" \t" + (_REQUEST % "json whitespace").encode() + b"\r ",
    "\ufeff".encode() + (_REQUEST % "bom").encode(),
    b"\xc2\xa0", b"   ", b"[1, 2]", b'"just a string"', b"{not json",
])
def test_a_kept_gateway_line_read_as_bytes_gives_the_drafts_of_its_decoded_text(line):
    """Lines orjson cannot take as bytes (not UTF-8, Unicode whitespace around them) must take the text path:
    decoded with replacement, stripped, then parsed or kept unparsed."""
    from statebox.sessions import gateway_log

    first = (_REQUEST % "first").encode()
    lines = [first, b"", line]
    assert gateway_log.parse_raw_lines(lines) == gateway_log.parse_lines([raw.decode("utf-8", "replace") for raw in lines])
    assert gateway_log.parse_raw_lines([memoryview(raw) for raw in lines]) == gateway_log.parse_raw_lines(lines)


@pytest.mark.parametrize("call_id", ["toolu_1", 7, None, ["x"], "caf\u00e9"])
@pytest.mark.parametrize("text", ["plain", "na\u00efve \u212a", ""])
def test_a_tool_result_is_emitted_once_whatever_its_call_id_and_text_are_made_of(call_id, text):
    """`_first` keys all-ASCII strings by themselves and anything else (a number, null, a list, non-ASCII) by a
    hash: a result re-sent in the next request is still recognised, and a different one is not taken for it."""
    from statebox.sessions.gateway_log import GatewayNormaliser

    def request(*results):
        return {"request": {"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call_id, "content": r} for r in results]}]}, "response": {}}

    normaliser = GatewayNormaliser()
    first = normaliser.feed(request(text))
    assert [d.text for d in first] == [text]
    normaliser._last.clear()  # as after a compaction: the whole history is read again
    again = normaliser.feed(request(text, text + "!"))
    assert [d.text for d in again] == [text + "!"]


def _junction_log(middle: bytes) -> bytes:
    """Two long lines; the second drops three bytes of the first right before an anchor (`"messages": [`), so it
    repeats two stretches of the line before that meet with no new byte between them, where `middle` stood."""
    head = b'{"pad": "' + b"a" * 9000 + b'", "container": '
    tail = b'"messages": [{"role": "user", "content": "' + b"b" * 600 + b'"}]}'
    return head + middle + tail + b"\n" + head + tail


def test_a_trigger_across_the_junction_of_two_repeated_stretches_is_found():
    """Bytes of the line before that were not next to each other there are here: `"container": ` then
    `"messages"` make a trigger no byte of which is new. The window around the junction is read (a hostile
    log need not be JSON; the line is then kept, as a search over every byte keeps it)."""
    from statebox.audits.events import line_spans
    from statebox.audits.fastmatch import Windowed, line_runs
    from statebox.sessions.gateway_log import EVIDENCE_TRIGGERS

    data = _junction_log(b"1, ")
    spans = line_spans(data)
    runs = line_runs(data, spans)
    assert len(runs[1]) == 2 and runs[1][0][0] + runs[1][0][2] == runs[1][1][0], "two stretches that meet"
    assert Windowed(EVIDENCE_TRIGGERS).lines_in(data, spans, runs) == matching_lines(compile_any(EVIDENCE_TRIGGERS), data) == {2}


def test_a_value_across_the_junction_of_two_repeated_stretches_is_found():
    from statebox.audits.events import line_spans
    from statebox.audits.fastmatch import line_runs

    data = _junction_log(b"1, ")  # the second line holds `"container": "messages"`, the first does not
    spans = line_spans(data)
    runs = line_runs(data, spans)
    assert len(runs[1]) == 2 and runs[1][0][0] + runs[1][0][2] == runs[1][1][0], "two stretches that meet"
    assert Literals(['r": "mess']).lines_in(data, spans, runs) == _re2_lines(['r": "mess'], data) == {2}


@pytest.mark.parametrize("seed", range(30))
def test_both_gateway_scans_over_one_shared_read_find_the_lines_re2_finds(seed):
    """The witness scan joins the bytes it reads once for the evidence triggers and the secrets (`NewBytes`, the
    evidence windows widened by the longest value): each scan's answer over that shared read is RE2's over
    every byte, and so is the prefilter's whole answer against scanning each alone."""
    from statebox.audits.events import line_spans
    from statebox.audits.fastmatch import NewBytes, Windowed, line_runs
    from statebox.sessions.gateway_log import EVIDENCE_TRIGGERS

    rng = random.Random(seed)
    values = ["blocks_1234_src.mp4", "juniper-4411x", 'mark-77q"}, {"role']  # the last holds separators
    pieces = _EVIDENCE_PIECES + ["blocks_1234", "_src.mp4", "JUNIPER-4411X", "juniper-4411", "x", "mark-77Q", '"}, {"role']
    data = _gateway_like_log(rng, pieces)
    if seed % 3 == 0:
        data += b"\n" + _junction_log(b"juniper-4411x, ")
    spans = line_spans(data)
    runs = line_runs(data, spans)
    evidence, secrets = Windowed(EVIDENCE_TRIGGERS), Literals(values)
    read = NewBytes(data, spans, runs, secrets.margin, separated=True)
    assert evidence.lines_in(data, spans, runs, read) == matching_lines(compile_any(EVIDENCE_TRIGGERS), data)
    assert secrets.lines_in(data, spans, runs, read) == _re2_lines(values, data)
    # a read with too small a margin for the values is not used (the values' own read is made)
    assert secrets.lines_in(data, spans, runs, NewBytes(data, spans, runs, 0, separated=True)) == _re2_lines(values, data)


def test_a_shared_read_narrower_than_the_values_need_is_not_used():
    """A value holding separators straddles where a line stops repeating the line before: the evidence windows
    alone (back to the last separator) miss its head; a read made with too small a margin must not be used."""
    from statebox.audits.events import line_spans
    from statebox.audits.fastmatch import NewBytes, line_runs

    head = b'{"pad": "' + b"a" * 9000 + b'mark-77q"}, {"ro'
    data = head + b"X" * 300 + b"\n" + head + b'le": "user"}'
    spans = line_spans(data)
    runs = line_runs(data, spans)
    assert runs[1] and runs[1][0][2] == len(head), "the second line repeats the first up to the value's tail"
    secrets = Literals(['mark-77q"}, {"role'])
    narrow = NewBytes(data, spans, runs, 0, separated=True)
    assert secrets.lines_in(data, spans, runs, narrow) == _re2_lines(['mark-77q"}, {"role'], data) == {2}


@pytest.mark.parametrize("seed", range(30))
def test_occurrences_by_a_rare_lead_byte_are_every_find(seed):
    """A value is looked for by its rarest letter first, and by `bytes.find` once that letter proves common: the
    starts are every start `find` gives, in order, whether the letter is rare, common (the switch happens in
    the middle of a run of overlapping occurrences) or absent."""
    from statebox.audits.fastmatch import occurrences, rare_byte

    rng = random.Random(seed)
    needle = rng.choice([b"q928", b"qq", b"aqa", b"juniper-55x", b"xx-x", b"blocks_1_src.mp4", b"q", b"1234"])
    alphabet = rng.choice([b"q9281", b"qx-", b"abcq", b"juniper-5x", b"0123456789", needle + b" "])
    size = rng.choice([10, 500, 5000, 40000])
    data = bytes(rng.choice(alphabet) for _ in range(size))
    if rng.random() < 0.5:
        data = data[: size // 2] + needle * rng.randint(1, 50) + data[size // 2:]
    expected, i = [], data.find(needle)
    while i >= 0:
        expected.append(i)
        i = data.find(needle, i + 1)
    lead = rare_byte(needle)
    assert list(occurrences(data, needle, lead)) == expected
    for k in range(len(needle)):  # any lead byte gives the same starts
        assert list(occurrences(data, needle, k)) == expected


@pytest.mark.parametrize("seed", range(60))
def test_evidence_carried_rotated_split_or_dropped_across_repeated_lines_is_found_as_re2_finds_it(seed):
    """An agent shaping its requests against the windowed scan: a line repeated exactly, a line that is the line
    before rotated (every byte repeated, one junction), a provider-tool trigger written in two halves around the
    point where the line stops repeating, a trigger dropped from a repeated line. The lines kept are the ones RE2
    finds over every byte."""
    import json

    from statebox.audits.events import line_spans
    from statebox.audits.fastmatch import Windowed, line_runs
    from statebox.sessions.gateway_log import EVIDENCE_TRIGGERS

    rng = random.Random(seed)
    trigger = rng.choice(['"type": "web_search_20250305"', '"mcp_servers": [', '"background": true', '"refused": "tools"',
                          '"web_search_requests": 3'])
    lines = [json.dumps({"request": {"messages": [{"role": "user", "content": "x" * rng.randint(9000, 12000)}]}})]
    for _ in range(rng.randint(3, 8)):
        before = lines[-1]
        op = rng.randrange(5)
        if op == 0:
            line = before
        elif op == 1:
            cut = rng.randrange(1, len(before))
            line = before[cut:] + before[:cut]
        elif op == 2:
            half, at = rng.randrange(1, len(trigger)), rng.randrange(len(before) // 2)
            line = before[:at] + trigger[:half] + trigger[half:] + before[at:]
        elif op == 3:
            line = before.replace(trigger, "", 1)
        else:
            line = before[:-1] + "," + trigger + "}"
        lines.append(line)
    data = ("\n".join(lines) + "\n").encode()
    spans = line_spans(data)
    assert Windowed(EVIDENCE_TRIGGERS).lines_in(data, spans, line_runs(data, spans)) == \
        matching_lines(compile_any(EVIDENCE_TRIGGERS), data)


def test_rare_byte_is_the_first_place_of_the_rarest_rare_letter_a_value_holds():
    """`rare_byte` asks one `find` per rare letter instead of a step per byte: the same offset as ranking every
    byte by RARE_LETTERS and taking the least (rank, place)."""
    from statebox.audits.fastmatch import RARE_LETTERS, rare_byte

    def ranked(needle: bytes) -> int:
        found = [(RARE_LETTERS.index(b), k) for k, b in enumerate(needle) if b in RARE_LETTERS]
        return min(found)[1] if found else -1

    rng = random.Random(11)
    for _ in range(20000):
        needle = bytes(rng.choice(b"abqjzxvk01_-./QJK") for _ in range(rng.randint(0, 12)))
        assert rare_byte(needle) == ranked(needle), needle


@pytest.mark.parametrize("seed", range(30))
def test_one_scan_of_an_alternation_finds_every_line_each_patterns_scan_finds(seed):
    """events.jsonl's static triggers and always-parsed kinds are scanned as one alternation
    (`fastmatch.lines_matching_within`): where no match it finds holds a newline, its lines are those in which
    a match starts, a superset of each pattern's own scan; where one does, it answers None and the caller
    scans each alone (what it did before)."""
    from statebox.audits.fastmatch import lines_matching_within

    rng = random.Random(seed)
    a, b = [r"[^a-z0-9_.-]env", r"/etc\b", r"x\s+y"], [r"\"kind\": *\"message\""]
    words = ["env", "x", "y", "/etc", '"kind": "message"', '{"seq": 1}', "ls", " ", "\n", "abc", "\t"]
    data = "".join(rng.choice(words) for _ in range(rng.randint(0, 60))).encode()
    both = lines_matching_within(compile_any(a + b), data)
    separate = matching_lines(compile_any(a), data) | matching_lines(compile_any(b), data)
    if both is None:
        return
    assert both >= separate
    compiled = [re.compile(p.encode(), re.I | re.M) for p in a + b]
    starts = {data.count(b"\n", 0, i) + 1 for i in range(len(data) + 1) if any(c.match(data, i) for c in compiled)}
    assert both == starts


def test_a_value_holding_another_is_not_looked_for_and_the_lines_are_the_same():
    """The original name holds its stem: only the stem is searched (one pass fewer), and the lines found are
    RE2's for both values, also where only the name, only the stem, or the name split across two lines is."""
    values = ["blocks_1234_src.mp4", "blocks_1234_src", "BLOCKS_1234_SRC", "juniper-4411x"]
    lits = Literals(values)
    assert lits._needles == [b"blocks_1234_src", b"juniper-4411x"]
    data = b"a blocks_1234_src.mp4\nb\nBlocks_1234_Src only\nblocks_1234\n_src.mp4\nx juniper-4411X\n"
    assert lits.lines(data) == _re2_lines(values, data) == {1, 3, 6}


@pytest.mark.parametrize("seed", range(4))
def test_any_literal_is_any_literal_in_the_text(seed):
    """`AnyLiteral.found_in` (one RE2 pass over the text's UTF-8 bytes, Latin-1 mode) answers what `any(literal in
    text ...)` answers, for each literal set the auditor asks it of, on texts holding those literals, their pieces,
    other cases, non-ASCII characters, lone surrogates (as JSON may decode them) and regex punctuation."""
    from statebox.audits import events, rules
    from statebox.audits.fastmatch import AnyLiteral

    rng = random.Random(seed)
    sets = [events._LISTING_WITNESS, rules._ENV_OUTPUT_GATE, rules._ENV_OUTPUT_NAMED, rules._CLAIM_LITERALS,
            rules._CACHE_CODE, rules._ENV_CODE, rules._CODE_WALKER, AnyLiteral(["a.b", "(x", "[", "\\d", "$"])]
    pieces = ["\u00e9", "\u0130", "\u212a", "\ud800", "\udfff", "\U0001f600", "\n", " ", "=", ".", "(", "\\", "ab", "x"]
    for literals in sets:
        words = list(literals.literals) + [w[:-1] for w in literals.literals if len(w) > 1] + \
            [w.upper() for w in literals.literals] + [w[1:] for w in literals.literals if len(w) > 1]
        texts = [""] + ["".join(rng.choice(words + pieces) for _ in range(rng.randint(0, 8))) for _ in range(3000)]
        found = 0
        for text in texts:
            expected = any(literal in text for literal in literals.literals)
            assert literals.found_in(text) == expected, (literals.literals, text)
            found += expected
        assert 100 < found < len(texts) - 100  # both answers were asked


def test_any_literal_takes_only_ascii_literals():
    from statebox.audits.fastmatch import AnyLiteral

    for bad in ([], [""], ["caf\u00e9"]):
        with pytest.raises(ValueError):
            AnyLiteral(bad)
