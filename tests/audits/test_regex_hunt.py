"""The regex hunt: strings generated from each regex the rules judge by (every module-level pattern of
`statebox.audits.rules`, `actions` and `lexicon`), put in every place the literal hunt knows (commands, outputs, agent
text in a run folder, a Claude Code file and a Codex rollout) and read both ways: the fast path must give --full's
verdicts and findings.

Why from the regexes: a rule fires on what its regex matches, the fast path reads a line only where a trigger matches
its bytes, and the two are written apart. A string the regex matches is the likeliest to show a trigger that does not
cover it. Its first run (2026-11-30) found CACHE_CODE's `HF_HUB_CACHE` in no trigger and the regexes' `\\s` (any
whitespace Python knows: VT, FF, U+0085, U+2000-U+200A...) where the triggers took a space: 203 differences in 15,000
strings, 0 since (`rules.ODD_BLANK`).

hypothesis's `from_regex` writes the strings (a maintained generator that knows Python's regex syntax); derandomized,
so every run draws the same ones.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statebox.audits import actions, lexicon, rules

sys.path.insert(0, str(Path(__file__).parent))
import literal_hunt  # noqa: E402

EXAMPLES = 150  # strings drawn per regex
LONGEST = 400


def _patterns() -> dict[str, re.Pattern[str]]:
    found: dict[str, re.Pattern[str]] = {}
    for module in (rules, actions, lexicon):
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                found[f"{module.__name__.rsplit('.', 1)[-1]}.{name}"] = value
    return found


PATTERNS = _patterns()


def drawn(pattern: re.Pattern[str]) -> list[str]:
    """EXAMPLES strings holding a match of `pattern`, as a log can hold them (UTF-8, no NUL), the same every run."""
    out: list[str] = []
    strategy = st.from_regex(pattern, fullmatch=False).filter(lambda s: 3 <= len(s) <= LONGEST and "\x00" not in s)

    @settings(max_examples=EXAMPLES, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(text: str) -> None:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return
        out.append(text)

    collect()
    return list(dict.fromkeys(out))


def test_the_hunt_covers_the_rules_regexes():
    """The regexes the rules judge by are found (the hunt cannot silently shrink to nothing), CACHE_CODE among them."""
    assert len(PATTERNS) >= 30, sorted(PATTERNS)
    assert "rules.CACHE_CODE" in PATTERNS and "rules.GATEWAY_ENDPOINT" in PATTERNS


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_strings_a_rule_regex_matches_read_the_same_both_ways(name: str):
    texts = drawn(PATTERNS[name])
    assert texts, f"{name}: no string drawn"
    found = literal_hunt.differences(texts)
    assert not found, "\n".join(f"{place}: {text[:100]!r}\n  fast {fast}\n  full {full}" for place, text, fast, full in found[:20])
