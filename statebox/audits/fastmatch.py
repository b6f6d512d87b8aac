"""One combined pattern over raw bytes, with RE2 when it is installed.

Why: Python's backtracking `re` runs a 200-way alternation at ~10 MB/s, RE2's
automaton at several hundred; the auditor's prefilter must keep up with
`grep -E` (perf/audit_throughput.py measures it). Patterns here are written in
the common subset of RE2, Python `re` and POSIX ERE (no lookaround, no
backreferences) so the very same list can be handed to grep.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from itertools import count
from typing import Any, Callable, Iterable, Iterator

from statebox.audits.line_repeats import repeated_runs

Run = tuple[int, int, int]  # (start in a line, start in the line before, length) of a stretch it repeats

try:  # google-re2 (a declared dependency); the fallback keeps statebox working without it, slowly
    import re2 as _re2
except ImportError:  # pragma: no cover - exercised only where the wheel is missing
    _re2 = None
try:  # the binding's engine, asked directly per hit (match_bounds); absent or laid out otherwise: `search`
    _UNANCHORED: Any = _re2._re2.RE2.Anchor.UNANCHORED if _re2 is not None else None
except AttributeError:  # pragma: no cover - a binding laid out otherwise
    _UNANCHORED = None

ENGINE = "re2" if _re2 is not None else "re"


def combined(patterns: list[str]) -> str:
    return "(?im)" + "|".join(f"(?:{p})" for p in patterns)


def compile_any(patterns: list[str]) -> Any:
    """A compiled case-insensitive, multi-line pattern over bytes matching any of `patterns`."""
    source = combined(patterns).encode()
    if _re2 is not None:
        opts = _re2.Options()
        opts.max_mem = 64 << 20
        # callers ask only whether and where: without capture groups RE2 answers from its DFA alone
        # instead of re-running a submatch engine over every hit
        opts.never_capture = True
        return _re2.compile(source, opts)
    return re.compile(source)


class AnyLiteral:
    """Whether a text holds any of a few ASCII literals: `any(literal in text for literal in literals)`, by one
    RE2 pass over the text's UTF-8 bytes instead of one pass per literal.

    Why: the rules' gates and `events.derive` ask this of whole sessions and of every tool output (six names of an
    environment over a session's text, ten names of a listing of `/` over each output): one search per literal
    was a tenth of auditing the CLIs' own files. Exact: RE2 in Latin-1 mode reads each byte as one character, and
    in UTF-8 an ASCII byte is always that ASCII character, never part of another, so a literal occurs in the
    bytes where it occurs in the text; a lone surrogate (JSON may hold one) is passed through as its own three
    bytes, none of them ASCII. Without RE2: the literals one by one."""

    def __init__(self, literals: Iterable[str]) -> None:
        self.literals = tuple(literals)
        if not self.literals or not all(literal and literal.isascii() for literal in self.literals):
            raise ValueError("AnyLiteral takes non-empty ASCII literals")
        self._bounds: Callable[[bytes, int, int], tuple[int, int]] | None = None
        if _re2 is not None:
            opts = _re2.Options()
            opts.encoding = _re2.Options.Encoding.LATIN1
            opts.never_capture = True
            # asked through `match_bounds`: the binding's `search` costs ~2.5 us of wrapping per call, and derive asks
            # this of every tool output (a tenth of a second on 100 MB of the CLIs' own files)
            self._bounds = match_bounds(_re2.compile(b"|".join(re.escape(literal.encode()) for literal in self.literals), opts))

    def found_in(self, text: str) -> bool:
        if self._bounds is None:  # pragma: no cover - exercised only where the wheel is missing
            return any(map(text.__contains__, self.literals))
        data = text.encode("utf-8", "surrogatepass")
        return self._bounds(data, 0, len(data))[0] >= 0


_ENGINE_CONVENTION: bool | None = None


def _engine_convention_holds() -> bool:
    """Whether the installed binding's engine answers as `match_bounds` reads it, asked once per process on a
    probe whose hits `search` also gives: `Match` is the binding's private call, and a google-re2 release
    that changed it (the dependency is `>=1.1`) must send us back to `search`, not to wrong line numbers."""
    global _ENGINE_CONVENTION
    if _ENGINE_CONVENTION is None:
        probe, data = compile_any([r"b+c", r"z"]), b"a\nxbbc\nbc\n"
        try:
            engine = probe._regexp.Match
            spans = [engine(_UNANCHORED, data, pos, len(data))[0] for pos in (0, 6, 9)]
            found = [probe.search(data, pos) for pos in (0, 6, 9)]
            _ENGINE_CONVENTION = spans == [(3, 6), (7, 9), (-1, -1)] and \
                [(m.start(), m.end()) if m else (-1, -1) for m in found] == spans
        except Exception:  # noqa: BLE001 - any other shape of the private call: not ours to read
            _ENGINE_CONVENTION = False
    return _ENGINE_CONVENTION


def match_bounds(matcher: Any) -> Callable[[bytes, int, int], tuple[int, int]]:
    """(start, end) of `matcher.search(data, pos, endpos)`'s match, (-1, -1) for none.

    Why: google-re2's `search` wraps each call in a generator and a match object (~2.5 us); a session log
    has a hit every few lines, and those wrappers were a third of its scan. Where the probe above says the
    binding's engine answers as read, it is asked directly (the very call `search` makes for bytes:
    `Match(UNANCHORED, data, pos, endpos)`), so the bounds are the same; Python's `re` and other bindings
    go through `search`."""
    engine = getattr(getattr(matcher, "_regexp", None), "Match", None)
    if engine is not None and _UNANCHORED is not None and _engine_convention_holds():
        return lambda data, pos, endpos: engine(_UNANCHORED, data, pos, endpos)[0]

    def bounds(data: bytes, pos: int, endpos: int) -> tuple[int, int]:
        m = matcher.search(data, pos, endpos)
        return (-1, -1) if m is None else (m.start(), m.end())
    return bounds


def matching_lines(matcher: Any, data: bytes) -> set[int]:
    """1-based numbers of the lines of `data` in which a match of `matcher` starts, searched from each line's start
    (one search per hit line)."""
    lines = _scan_lines(matcher, data, within_lines=False)
    assert lines is not None  # only a scan asked to stay within lines gives up
    return lines


def lines_matching_within(matcher: Any, data: bytes) -> set[int] | None:
    """`matching_lines`, or None where a match it finds holds a newline.

    Why: with no such match, the lines found are exactly those in which a match starts (the scan visits every
    line's start), so the scan of an alternation `A|B` finds every line `matching_lines` finds for A or for B.
    A match across a newline makes the caller scan each pattern alone (the alternation's leftmost match there
    may be A's where B's would have started in the same line and ended in it)."""
    return _scan_lines(matcher, data, within_lines=True)


def _scan_lines(matcher: Any, data: bytes, within_lines: bool) -> set[int] | None:
    search = match_bounds(matcher)
    lines: set[int] = set()
    count_nl = data.count
    find = data.find
    pos = 0
    line_no = 1
    counted_to = 0
    size = len(data)
    while pos < size:
        start, end = search(data, pos, size)
        if start < 0:
            break
        line_no += count_nl(b"\n", counted_to, start)
        lines.add(line_no)
        nl = find(b"\n", start)
        if nl < 0:
            break
        if within_lines and nl < end:
            return None
        # on from the next line, whatever the match spans: a match reaching into the next line (a torn line's end
        # and the newline after it) made the scan skip that line, and a trigger there was never read
        line_no += 1
        counted_to = pos = nl + 1
    return lines


# The only non-ASCII characters RE2's case-insensitive UTF-8 matching equates with an ASCII letter
# (Unicode simple case folding): K U+212A KELVIN SIGN with `k`, ſ U+017F LATIN SMALL LETTER LONG S
# with `s` (tests/audits/test_fastmatch.py checks every code point).
SHORT_LINE = 600  # a line this short is read whole: finding its repeated stretches would cost more (at 8192 the
# early lines of a log, read whole, each re-sent the prompt to the output triggers: a prompt naming `/tmp.` kept them all)
FOLDS_TO_ASCII = ("\u212a".encode(), "\u017f".encode())
# The rules match secret values with Python's `re.I`, which also equates `i` with U+0130 (İ, whose simple lower case
# is `i`) and U+0131 (ı): RE2 does not. A line holding either, where a value holds an `i`, is kept (`Literals`).
I_FOLDS = ("\u0130".encode(), "\u0131".encode())


class Literals:
    """Case-insensitive search for a few literal strings (an attempt's secret values): the same lines as
    `matching_lines(compile_any([re.escape(v.lower()) for v in values]), data)`, found faster.

    Why: a per-attempt RE2 pattern of literals costs a compile and scans at ~200 MB/s (case folding
    defeats its literal search), and it runs over every byte of the gateway log. For ASCII values
    without a newline, on data without a character that folds to ASCII, `bytes.lower` plus `bytes.find`
    gives the same answer at memory speed; anything else takes RE2, compiled on first need.
    """

    def __init__(self, values: Iterable[str]) -> None:
        self.values = [v.lower() for v in values]
        self._plain = all(v.isascii() and "\n" not in v and v for v in self.values)
        needles = list(dict.fromkeys(v.encode() for v in self.values)) if self._plain else []
        # a line holding a value that holds another one (the original name holds its stem) holds that one too:
        # only values holding no other are looked for, one pass over the data fewer each
        self._needles = [n for n in needles if not any(o != n and o in n for o in needles)]
        self._leads = [rare_byte(n) for n in self._needles]
        # how far a window reaches past new bytes for an occurrence straddling its edge (plain search only)
        self.margin = max(len(n) for n in self._needles) - 1 if self._needles else 0
        self._regex: Any = None
        self._has_i = any("i" in v for v in self.values)

    def i_fold_lines(self, data: bytes, spans: list[tuple[int, int]] | None = None) -> set[int]:
        """1-based numbers of the lines of `data` holding an I_FOLDS character, where a value holds an `i`: a superset
        of the lines where the rules' Python `re.I` finds a value only by reading one as `i` (RE2 and `bytes.lower`
        do not; such characters are rare in a session, so their lines are simply read)."""
        if not self._has_i or data.isascii():  # isascii: ~30 GB/s; both characters are two bytes led by 0xC4
            return set()
        starts = [at for at in occurrences(data, I_FOLDS[0][:1], -1) if data[at:at + 2] in I_FOLDS]
        if not starts:
            return set()
        if spans is None:
            return {data.count(b"\n", 0, at) + 1 for at in starts}
        ends = [end for _, end in spans]
        return {bisect_left(ends, at) + 1 for at in starts}

    def regex(self) -> Any:
        if self._regex is None:
            self._regex = compile_any([re.escape(v) for v in self.values])
        return self._regex

    def _plain_for(self, data: bytes) -> bool:
        """Whether `bytes.lower` + `bytes.find` give RE2's answer on `data` (isascii: ~30 GB/s)."""
        return self._plain and (data.isascii() or not any(f in data for f in FOLDS_TO_ASCII))

    def lines(self, data: bytes) -> set[int]:
        """1-based numbers of the lines of `data` holding a value (and `i_fold_lines`)."""
        return self._lines(data) | self.i_fold_lines(data)

    def _lines(self, data: bytes) -> set[int]:
        if not self._plain_for(data):
            return matching_lines(self.regex(), data)
        low = data.lower()
        starts: list[int] = []
        for needle in self._needles:
            at = low.find(needle)
            while at >= 0:
                starts.append(at)
                nl = low.find(b"\n", at)  # the rest of this line adds nothing
                at = low.find(needle, nl + 1) if nl >= 0 else -1
        lines: set[int] = set()
        line_no, counted_to = 1, 0
        for at in sorted(starts):
            line_no += low.count(b"\n", counted_to, at)
            counted_to = at
            lines.add(line_no)
        return lines

    def lines_in(self, data: bytes, spans: list[tuple[int, int]], runs: list[list[Run]] | None = None,
                 read: "NewBytes | None" = None) -> set[int]:
        """`lines(data)`, found as `_lines_in` says (plus `i_fold_lines`)."""
        return self._lines_in(data, spans, runs, read) | self.i_fold_lines(data, spans)

    def _lines_in(self, data: bytes, spans: list[tuple[int, int]], runs: list[list[Run]] | None,
                  read: "NewBytes | None") -> set[int]:
        """`_lines(data)` for a log whose lines re-send stretches of the line before (a gateway log; `spans`:
        `line_spans(data)`): only each line's new bytes are read, and the values found inside a stretch
        it repeats are carried over from the line before (line_repeats.py).

        Exact: a line's occurrences are those inside a repeated stretch (the previous line's, at the
        same place in the stretch: the bytes are equal) plus those found by reading everything outside
        the stretches widened by the longest value less one byte (what straddles a stretch's edge).
        `runs`: `line_runs(data, spans)` when the caller already has them (found once for every scan); `read`: the
        bytes read, when the caller has them joined for every scan (`NewBytes`, its margin at least this one's;
        reading more bytes of a line finds no occurrence that is not one).

        Plain search is RE2's answer on data without a character folding to ASCII (`_plain_for`); that is
        first asked of the bytes read only: every byte of a repeated stretch equals a byte of the line before,
        so by induction from the first line (read whole) some read byte, and read bytes that are all ASCII
        mean data that is all ASCII. Else the whole data is asked, and RE2 reads it where a fold is in it."""
        if not self._plain:
            return matching_lines(self.regex(), data)
        margin = self.margin
        if read is None or read.margin < margin:
            if runs is None:
                runs = line_runs(data, spans)  # equal bytes are equal lowered: stretches are found on the data as it is
            read = NewBytes(data, spans, runs, margin, separated=False)
        runs = read.runs
        windows, owners = read.windows, read.owners
        if not windows:
            return set()  # an empty log
        low = read.joined.lower()
        if not low.isascii() and not self._plain_for(data):
            return matching_lines(self.regex(), data)
        offsets: list[int] = []  # where each window starts in `low`
        at_low = 0
        for lo, hi in windows:
            offsets.append(at_low)
            at_low += hi - lo + 1
        found_in: dict[int, set[tuple[int, int]]] = {}  # line -> (start in data, length) of each occurrence read
        for needle, lead in zip(self._needles, self._leads):
            for i in occurrences(low, needle, lead):
                w = bisect_right(offsets, i) - 1
                found_in.setdefault(owners[w], set()).add((windows[w][0] + i - offsets[w], len(needle)))
        if not found_in:
            return set()
        lines: set[int] = set()
        found_before: list[tuple[int, int]] = []  # (start, length) of every occurrence in the line before
        for line_no, repeats in zip(count(1), runs):
            found = found_in.get(line_no, set())
            if found_before:
                for at, p_at, length in repeats:
                    for s, n in found_before:
                        if p_at <= s and s + n <= p_at + length:
                            found.add((s - p_at + at, n))
            if found:
                lines.add(line_no)
            found_before = sorted(found)
        return lines


# Lower-case letters rarest in English text and code, rarest first: a value holding one is looked for by that byte
# first (`occurrences`). Only speed depends on this guess; the answer does not. Not `v` nor `k`: at ~1% of letters
# they stand far more often than `occurrences`' budget of one check per KiB, so a lead of either paid that budget
# in wasted checks before falling back to `bytes.find` (on the perf corpus, `blocks_..._src.mp4` by its `k` and
# `/data/annotations/answers.csv` by its `v` cost 9.4 ms against 5.2 ms by `bytes.find`).
RARE_LETTERS = b"qjzx"


_RARE_SINGLES = [RARE_LETTERS[i:i + 1] for i in range(len(RARE_LETTERS))]


def rare_byte(needle: bytes) -> int:
    """The offset in `needle` of its rarest letter by RARE_LETTERS (its first place), or -1 where it holds none
    of them: the first of RARE_LETTERS, rarest first, that `needle` holds (one `find` each, not a step per byte)."""
    for letter in _RARE_SINGLES:
        at = needle.find(letter)
        if at >= 0:
            return at
    return -1


def occurrences(data: bytes, needle: bytes, lead: int) -> Iterator[int]:
    """Every start of `needle` in `data`, in order (what `data.find(needle, i + 1)` from each gives).

    Why a lead byte: `bytes.find` skips by the needle's last byte, and a short needle ending in a digit crawls
    over digit-heavy tool output (an item id like `q928`: half the secret scan's time), while one byte is
    found by memchr. With `lead` (the offset of a rare letter, `rare_byte`) each place that byte stands is
    checked for the whole needle there; a byte no rarer than the data makes it (more checks than one per KiB
    of data, plus a few) sends the rest of the search to `bytes.find`, so the worst case is that plus the
    checks already made."""
    if lead < 0 or len(needle) == 1:
        i = data.find(needle)
        while i >= 0:
            yield i
            i = data.find(needle, i + 1)
        return
    byte = needle[lead:lead + 1]
    budget = len(data) // 1024 + 16
    find, startswith = data.find, data.startswith
    at = find(byte, lead)
    while at >= 0:
        if startswith(needle, at - lead):
            yield at - lead
        budget -= 1
        if budget < 0:  # the byte is not rare here: the rest by bytes.find, from the next place a start could be
            i = find(needle, at - lead + 1)
            while i >= 0:
                yield i
                i = find(needle, i + 1)
            return
        at = find(byte, at + 1)


class NewBytes:
    """What the gateway scans read of a log whose lines repeat the line before: every line's bytes outside the
    stretches it repeats (`runs`), each stretch of them widened by `margin` bytes (an occurrence of a literal
    straddling a stretch's edge) and, `separated`, out to the nearest SEPARATOR on either side (a `Windowed`
    match touching them); the same around every junction of two stretches, where bytes of the line before that
    were not next to each other now are. A line without stretches is read whole. Overlapping windows of a line
    are merged; all are joined by newlines (no window holds one), once for both scans.

    Reading more of a line than a scan needs never changes its answer: a literal found is an occurrence in the
    line, and a `Windowed` pattern's match in a part of a line is one of the line (it holds no anchor)."""

    def __init__(self, data: bytes, spans: list[tuple[int, int]], runs: list[list[Run]], margin: int, separated: bool) -> None:
        self.runs, self.margin, self.separated = runs, margin, separated
        windows: list[tuple[int, int]] = []  # (start, end) in data
        owners: list[int] = []  # the line each window lies in
        for line_no, (start, end), repeats in zip(count(1), spans, runs):
            if not repeats:
                if end > start:
                    windows.append((start, end))
                    owners.append(line_no)
                continue
            pos = start
            first = len(windows)
            for at, _, length in repeats + [(end, 0, 0)]:
                if at > pos or start < at < end:  # new bytes [pos, at), or a junction of two stretches at `at`
                    lo, hi = max(start, pos - margin), min(end, at + margin)
                    if separated:
                        lo, hi = min(lo, _separator_before(data, start, pos)), max(hi, _separator_after(data, at, end))
                    if hi > lo:
                        if len(windows) > first and lo <= windows[-1][1]:  # overlaps this line's window before
                            windows[-1] = (windows[-1][0], max(hi, windows[-1][1]))
                        else:
                            windows.append((lo, hi))
                            owners.append(line_no)
                pos = at + length
        self.windows, self.owners = windows, owners
        view = memoryview(data)
        self.joined = b"\n".join([view[lo:hi] for lo, hi in windows])


def line_runs(data: bytes, spans: list[tuple[int, int]]) -> list[list[Run]]:
    """The stretches each line of `data` repeats from the line before (line_repeats.repeated_runs; none for the
    first line and for short lines), found once and shared by every scan of a gateway log."""
    view = memoryview(data)
    out: list[list[Run]] = []
    before: tuple[int, int] | None = None
    for start, end in spans:
        out.append(repeated_runs(data, view, (start, end), before) if before is not None and end - start > SHORT_LINE else [])
        before = (start, end)
    return out


# Bytes no match of a `Windowed` pattern can hold (checked on its source, `holds_no_separator`): a match that
# touches a line's new bytes lies between the nearest of them on either side. Single ASCII bytes, so never
# part of a UTF-8 sequence, and no character case-folds to one of them.
SEPARATORS = (b",", b"}", b"\\")
NEAR, REACH = 64, 4096  # how far a window looks back for a separator first, then at a time (up to the line's edge: exact either way)
# Pattern syntax that could match a separator or a newline, or assert on a context a window cuts off:
# any escape but of plain punctuation, `.`, negated classes, anchors, and a literal separator.
_RISKY = re.compile(r'\\[^\[\]"(){|*+?/:-]|[.^$,}]')
_RANGE = re.compile(r"(.)-(.)")


def holds_no_separator(patterns: list[str]) -> bool:
    """Whether no match of any of `patterns` can contain a SEPARATOR or a newline, read conservatively from
    their source: only literal characters, classes of them and their ranges, groups and repetition.
    A pattern this cannot vouch for makes `Windowed` read every byte (the same answer, slower)."""
    seps = {ord(b) for b in SEPARATORS} | {ord("\n")}
    for p in patterns:
        if _RISKY.search(p):
            return False
        if any(ord(lo) <= sep <= ord(hi) for lo, hi in _RANGE.findall(p) for sep in seps):
            return False
    return True


class Windowed:
    """A pattern over a log whose lines repeat the line before (a gateway log), read only where a line is new.

    `lines_in` gives `matching_lines(compile_any(patterns), data)`. Why it may skip bytes: the patterns hold no
    anchor nor word boundary, so whether bytes match does not depend on what surrounds them; a match lying
    inside a stretch a line repeats is then a match of the line before at the same place. So when the line
    before has no match at all, a line has one exactly when one touches its new bytes; and such a match
    lies between the nearest SEPARATORs around those bytes (no match holds one), so searching those windows
    is enough. Where two stretches meet with no new byte between them (they repeat bytes of the line before
    that are not next to each other there), a match across the junction is new too: the window around the
    junction is read as well. A line after a line with a match is read whole. Patterns `holds_no_separator` cannot vouch
    for are searched over every byte."""

    def __init__(self, patterns: list[str]) -> None:
        self.regex = compile_any(patterns)
        # a pattern matching the empty string matches every line, repeated or not
        self.windowed = holds_no_separator(patterns) and self.regex.search(b"") is None

    def lines_in(self, data: bytes, spans: list[tuple[int, int]], runs: list[list[Run]],
                 read: "NewBytes | None" = None) -> set[int]:
        """`read`: the bytes read when the caller joined them for every scan (`NewBytes`, separated)."""
        if not self.windowed:
            return matching_lines(self.regex, data)
        if read is None or not read.separated:
            read = NewBytes(data, spans, runs, 0, separated=True)
        windows, owners = read.windows, read.owners
        # windows hold no newline and no match crosses one: each is a line of its own for matching_lines
        found = {owners[n - 1] for n in matching_lines(self.regex, read.joined)} if windows else set()
        if not found:
            return set()  # a line with a match is one whose new bytes hold one, or follows such a line
        lines: set[int] = set()
        before_hit = False
        search = self.regex.search
        for line_no, (start, end), repeats in zip(count(1), spans, runs):
            hit = line_no in found or bool(repeats and before_hit and search(data, start, end) is not None)
            if hit:
                lines.add(line_no)
            before_hit = hit
        return lines


def _separator_before(data: bytes, start: int, at: int) -> int:
    """Where a window ending past `at` must start: just after the last SEPARATOR before `at` (else `start`)."""
    hi = at
    reach = NEAR
    rfind = data.rfind
    while hi > start:
        lo = max(start, hi - reach)
        last = max(rfind(b",", lo, hi), rfind(b"}", lo, hi), rfind(b"\\", lo, hi))
        if last >= 0:
            return last + 1
        hi = lo
        reach = REACH
    return start


_SEPARATOR = re.compile(b"[" + re.escape(b"".join(SEPARATORS)) + b"]")


def _separator_after(data: bytes, at: int, end: int) -> int:
    """Where a window starting before `at` must end: at the first SEPARATOR from `at` on (else `end`)."""
    m = _SEPARATOR.search(data, at, end)
    return end if m is None else m.start()
