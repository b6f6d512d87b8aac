"""The literal hunt in CI (literal_hunt.py says what and why): every string literal of the test suite as a later command
in a run folder (events.jsonl and gateway log, and the gateway log alone), a Claude Code file and a Codex rollout, and
as a path Read opens, read by the fast path and by `--full`; a literal `--full` flags as a command is also put in
every place (outputs, agent text), and its mutations (a tab for each space, a line break or a wrapper before, folding
letters) in every command place. The fast path must give the same verdicts and findings everywhere.

Split in CHUNKS by the literal's place in the sorted list, so xdist spreads it; the literals are those of this
checkout's tests, so the hunt grows with the suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import literal_hunt  # noqa: E402

CHUNKS = 16
LITERALS = literal_hunt.test_suite_literals()


def test_the_hunt_has_literals_and_places():
    """The harvest found the suite's literals (thousands), among them commands --full flags: the hunt can fail."""
    assert len(LITERALS) > 1000
    assert literal_hunt.flagged_by_full("ANTHROPIC_BASE_URL") and not literal_hunt.flagged_by_full("ls -la")
    assert set(literal_hunt.FIRST) <= set(literal_hunt.PLACES)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_every_literal_reads_the_same_both_ways(chunk: int):
    """A literal in the FIRST places (a command in each format, a path Read opens); one --full flags as a command, in
    every place, and its mutations as commands."""
    texts = LITERALS[chunk::CHUNKS]
    flagged = [text for text in texts if literal_hunt.flagged_by_full(text)]
    mutated = list(dict.fromkeys(mutate(text) for text in flagged for mutate in literal_hunt.MUTATIONS.values()))
    found = literal_hunt.differences(texts, literal_hunt.FIRST) + literal_hunt.differences(flagged) + \
        literal_hunt.differences(mutated, literal_hunt.COMMANDS)
    assert not found, "\n".join(f"{place}: {text[:100]!r}\n  fast {fast}\n  full {full}" for place, text, fast, full in found[:20])
