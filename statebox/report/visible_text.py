"""Characters an attacker uses to make text read differently from what it is, shown as visible
escapes (`<U+202E>`) wherever statebox shows agent-controlled text to a person: the HTML report,
the live view and the terminal (leaderboards, `statebox audit`).

Why: a transcript, an answer, a file name or a finding's evidence comes from the agent. A
right-to-left override (U+202E) or an isolate (U+2066-2069) makes a command read reversed to
the reviewer; a zero-width space or a soft hyphen splits a word the auditor's reader would
search for; a C0/C1 control (ESC, backspace, carriage return) rewrites a terminal line. None of
them is visible, so each is replaced by its code point in angle brackets.

The set (`INVISIBLE_RANGES`), an allow-list's mirror: every control (Unicode Cc) but newline
and tab, every format character (Cf: bidi embeddings, overrides, isolates and marks,
zero-width characters, the BOM, soft hyphen, tags, interlinear annotation), the line and
paragraph separators (Zl, Zp), and the default-ignorable code points that render as nothing
(the Hangul fillers, U+034F, U+17B4/5, Mongolian variation selectors, and the unassigned
default-ignorable blocks, so a character Unicode assigns there later is covered already).
Left out on purpose: the variation selectors U+FE00-FE0F and U+E0100-E01EF (they only pick
the glyph of the character before them, and one follows nearly every emoji).
`tests/report/test_visible_text.py` checks the table against `unicodedata`'s categories.

One table, two spellings of it, so every view escapes the same characters:
- `visible(text)` for what Python renders: the terminal (rich tables, `statebox audit`) and the
  report's server-side HTML (`visible_html`);
- `JS_CLASS`, the same set as a JavaScript regex class, for the page's `vis()`, which renders
  every agent-controlled string the page shows from its data: the attempt table, answers,
  findings and transcripts, in the report and in the live view alike.
Why transcripts are escaped in the page and not in the report's bytes: the report splices
events.jsonl into its chunks as bytes with one memchr-speed `<` pass (~0.1 ms/MB); a byte regex
for these characters' UTF-8 and JSON escapes measured 90-140 ms/MB on transcript-like JSON (its
backslashes, one per escaped newline or quote, each start a match attempt), and even the
cheapest exact check, `b"\\u" in body`, 5-8 ms/MB: more than the whole ASCII splice. The page
decodes the JSON anyway, and every string it shows passes through `vis()`.
"""

from __future__ import annotations

import html
import re

# (first, last) code points, inclusive, sorted
INVISIBLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x0008), (0x000B, 0x001F),  # C0 controls but \t (09) and \n (0A)
    (0x007F, 0x009F),  # DEL, C1 controls
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),  # Arabic/Syriac format, ALM
    (0x0890, 0x0891), (0x08E2, 0x08E2),
    (0x115F, 0x1160),  # Hangul choseong/jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels (invisible)
    (0x180B, 0x180F),  # Mongolian free variation selectors, vowel separator
    (0x200B, 0x200F),  # zero-width space/non-joiner/joiner, LRM, RLM
    (0x2028, 0x202E),  # line/paragraph separators, LRE RLE PDF LRO RLO
    (0x2060, 0x206F),  # word joiner, invisible operators, LRI RLI FSI PDI, deprecated format
    (0x3164, 0x3164),  # Hangul filler
    (0xFEFF, 0xFEFF),  # BOM / zero-width no-break space
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFFB),  # default-ignorable (unassigned), interlinear annotation
    (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE00FF),  # tags (ASCII smuggling) and default-ignorable
    (0xE01F0, 0xE0FFF),  # default-ignorable (unassigned)
)


def _class(fmt: str) -> str:
    return "".join(fmt.format(a) if a == b else fmt.format(a) + "-" + fmt.format(b) for a, b in INVISIBLE_RANGES)


_PATTERN = re.compile("[" + _class("\\U{:08x}") + "]")


def escape_of(code_point: int) -> str:
    """The visible spelling of one hidden character."""
    return f"<U+{code_point:04X}>"


def _sub(match: re.Match[str]) -> str:
    return escape_of(ord(match.group()))


def visible(text: str) -> str:
    """TEXT with every hidden character spelt `<U+XXXX>`; text without one comes back as it is."""
    return _PATTERN.sub(_sub, text)


def has_hidden(text: str) -> bool:
    return _PATTERN.search(text) is not None


def visible_html(text: object) -> str:
    """html.escape of the visible spelling: safe in element text and in quoted attributes alike."""
    return html.escape(visible(str(text)))


# JavaScript (a regex with the `u` flag): `[\u{0}-\u{8}...]`
JS_CLASS = "[" + _class("\\u{{{:X}}}") + "]"
