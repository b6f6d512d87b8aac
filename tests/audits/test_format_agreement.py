"""The same thing in each format gets the same verdict: every string literal of the test suite as a later command in a
run folder, a Claude Code file, a Codex rollout and an Inspect log of another harness (its `bash` tool); as what a tool
printed in each; as the agent's text in the CLIs' files and the Inspect log; as a path a file tool opens in a run
folder's gateway log and a Claude Code file (literal_hunt.AGREEING), read in full. Issue 26's auditor judges other harnesses' logs with the rules it judges its own runs by: a reader that dropped or
misread an action in one format would show here as a verdict the others do not give. Measured when added (2026-11-30):
every literal agrees in every group (the two fixture item ids aside, which the writers do not share).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import literal_hunt  # noqa: E402

CHUNKS = 4
LITERALS = literal_hunt.test_suite_literals()


def test_a_disagreement_is_found():
    """The check can fail: the fixtures' item ids differ, so a text naming one is the original name's finding in the
    run folder only (agreement leaves those texts out unless told otherwise)."""
    texts = ["echo Q517", "ls -la"]
    found = literal_hunt.agreement(texts, literal_hunt.AGREEING["command"], leave_out=())
    assert [text for text, _ in found] == ["echo Q517"]
    assert found[0][1]["run_command"][0] == "contaminated" and found[0][1]["inspect_command"][0] == "clean"
    assert literal_hunt.agreement(texts, literal_hunt.AGREEING["command"]) == []


@pytest.mark.slow
@pytest.mark.parametrize("group", sorted(literal_hunt.AGREEING))
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_every_literal_gets_one_verdict_in_every_format(group: str, chunk: int):
    """Every literal; for commands and outputs also the mutations of those `--full` flags as a command."""
    texts = LITERALS[chunk::CHUNKS]
    if group in ("command", "output"):
        flagged = [text for text in texts if literal_hunt.flagged_by_full(text)]
        texts = texts + list(dict.fromkeys(mutate(text) for text in flagged for mutate in literal_hunt.MUTATIONS.values()))
    found = literal_hunt.agreement(texts, literal_hunt.AGREEING[group])
    assert not found, "\n".join(f"{text[:100]!r}: {each}" for text, each in found[:20])
