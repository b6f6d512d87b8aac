"""Hidden characters in agent-controlled text are shown, not obeyed (issue 24, "The report shows
what an attacker hides"): bidi controls, zero-width and other format characters, C0/C1
controls. One table (statebox/report/visible_text.py) for the terminal, the report's HTML and
the page's script; the page itself is checked in test_report_hidden_text.py (Chromium)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import unicodedata

import pytest
from rich.console import Console

from statebox.report.aggregate import score_run
from statebox.report.assets import PAGE_JS
from statebox.harness.store import ResultRow
from statebox.report.leaderboard import leaderboard_table
from statebox.report.visible_text import INVISIBLE_RANGES, JS_CLASS, visible, visible_html
from statebox.schema import Item, Query

STATEBOX = [sys.executable, "-m", "statebox.cli"]

ATTACKS = [
    "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",  # embeddings, pop, overrides
    "\u2066", "\u2067", "\u2068", "\u2069",  # isolates
    "\u200b", "\u200c", "\u200d", "\u200e", "\u200f",  # zero-width, marks
    "\u2028", "\u2029", "\ufeff", "\u00ad", "\u061c", "\u2060", "\u180e",
    "\U000e0041",  # a tag character (ASCII smuggling)
    "\x00", "\x07", "\x08", "\x1b", "\r", "\x7f", "\x85", "\x9b",  # C0, DEL, C1 (NEL, CSI)
    "\u3164", "\u115f",  # Hangul fillers (invisible identifiers)
]


def _hidden(cp: int) -> bool:
    return any(a <= cp <= b for a, b in INVISIBLE_RANGES)


def test_every_control_format_and_separator_character_is_in_the_table():
    """Python's Unicode database: every Cc (but \\n, \\t), Cf, Zl and Zp code point is covered."""
    missing = [f"U+{cp:04X}" for cp in range(0x110000)
               if unicodedata.category(chr(cp)) in ("Cc", "Cf", "Zl", "Zp") and cp not in (9, 10) and not _hidden(cp)]
    assert not missing, missing


@pytest.mark.parametrize("char", ATTACKS, ids=lambda c: f"U+{ord(c):04X}")
def test_each_hiding_character_is_spelt_out(char):
    shown = visible(f"rm -rf {char}/tmp")
    assert shown == f"rm -rf <U+{ord(char):04X}>/tmp"
    assert char not in shown


def test_ordinary_text_is_left_alone():
    text = "naïve café 日本語 ✔️ 👍🏽 tab\there\nnew line — “quotes” …"
    assert visible(text) == text  # emoji with their variation selector, CJK, accents, \t, \n


def test_html_spelling_is_escaped_and_attribute_safe():
    assert visible_html("<b>x\u202e</b>'\"") == "&lt;b&gt;x&lt;U+202E&gt;&lt;/b&gt;&#x27;&quot;"


def test_the_page_script_escapes_exactly_what_python_escapes():
    """The page's regex (JS_CLASS, built from the same table) run by node: the same characters
    as Python's, on every range's ends and around them."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (the agent CLIs' setup installs it)")
    assert "__INVISIBLE_CLASS__" not in PAGE_JS and JS_CLASS in PAGE_JS
    probe = sorted({cp for a, b in INVISIBLE_RANGES for cp in (a - 1, a, b, b + 1) if 0 <= cp < 0x110000
                    and not 0xD800 <= cp <= 0xDFFF} | {0x41, 0xE9, 0x65E5, 0x1F44D, 0xFE0F})
    script = (f"const re = /{JS_CLASS}/u; const cps = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "process.stdout.write(JSON.stringify(cps.filter(c => re.test(String.fromCodePoint(c)))));")
    out = subprocess.run([node, "-e", script], input=json.dumps(probe), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [cp for cp in probe if _hidden(cp)]


def _scores(dataset: str, agent: str):
    """A real scoring (the shared scorer) of a tiny VCBench-shaped dataset with hostile names."""
    items = [Item(id=f"q{k}", benchmark="vcbench", video="v.mp4", question="how many?", answer_type="number",
                  queries=[Query(index=i, time=1.0 + i, target=i + 1) for i in range(2)]) for k in range(3)]
    rows = [ResultRow(attempt_id=f"{a}-{i.id}-{q.index}", run_id="r", agent=a, dataset=dataset, bench="vcbench",
                      item_id=i.id, query_index=q.index, response=str(q.target), duration_s=1.0)
            for a in (agent, "chance-random") for i in items for q in i.queries]
    return score_run(rows, {dataset: items})


def test_terminal_leaderboard_shows_hidden_characters_and_reads_no_markup():
    scores = _scores("cup\u202edrops[bold red]x", "agent\u2066x")
    console = Console(width=120, record=True, color_system=None)
    console.print(leaderboard_table(scores))
    text = console.export_text()
    assert "cup<U+202E>drops[bold red]x" in text and "agent<U+2066>x" in text
    assert "\u202e" not in text and "\u2066" not in text


def test_statebox_audit_prints_hidden_characters_visibly(tmp_path):
    session = tmp_path / "session.txt"
    session.write_text("cat /opt/labels.json # \u202eevil\u2066 \x1b[2J\n")
    done = subprocess.run(STATEBOX + ["audit", str(session), "--format", "text", "--item-id", "item\u202e1",
                                      "--honeytoken-path", "/opt/labels.json"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert "contaminated: 1" in done.stdout
    assert "<U+202E>evil<U+2066> <U+001B>[2J" in done.stdout and "item<U+202E>1" in done.stdout
    for char in ("\u202e", "\u2066", "\x1b"):
        assert char not in done.stdout
