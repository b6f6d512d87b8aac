"""Every string a page shows that an agent or a handed-over dataset wrote, run by a real browser: shown as text, never run.

The report (one file and split), the live view (`statebox view`) and the audit's HTML report render answers,
transcripts, findings, questions, choices, labels and dataset names that came from a session or an annotation
file. Each gets a payload that, if it ever reached the DOM as markup, sets an attribute on the page's root element:
an `<img onerror>` in element text, the same after `">` and `'>` (a quoted attribute), after `</script>` (a JSON
block) and after `</textarea></style></title>`, and a `${...}` (a template literal). Chromium opens each page at the
views that show those strings (the table, an opened attempt, a focused transcript, a search); the test asserts the
root element never got the attribute and no payload element exists, and that every planted field was shown as text
in some view (so a view that silently dropped a field would not pass for a safe one).

A hunt on 2026-12-01 found no hole here (every view escapes): this is the guard that keeps it so, and it fails when
the page's `vis()` or the server-side escape is bypassed (checked by hand: `vis = s => String(s)` fails it). The
second wall is each page's policy (`statebox/page_policy.py`): markup put into a page unescaped, as a missed escape
would put it, must not run while the page's own script does; before it, it ran in the report, the split report and
the audit page (whose policy allowed inline scripts).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from statebox.report.page import PAGE_POLICY, write_report_output
from tests.conftest import default_signal_dispositions
from tests.report.chromium_support import dump_dom, dump_url

STATEBOX = [sys.executable, "-m", "statebox.cli"]
DATASETS = ("shell_game", "eoc_objects")  # a VSTAT dataset (question, choices, labels) and an EOC one, to keep it quick
MARK = "data-pwned"


def payload(tag: str) -> str:
    """Markup that, once parsed as HTML or run as a template, marks the page's root element with `tag`."""
    act = f"document.documentElement.setAttribute('{MARK}','{tag}')"
    return (f"<img src=x onerror=\"{act}\">"
            f"\"><img src=x onerror=\"{act}\">"
            f"'><img src=x onerror=\"{act}\">"
            f"</script><img src=x onerror=\"{act}\">"
            f"</textarea></style></title><svg onload=\"{act}\">"
            f"${{{act}}}")


DATASET_TAGS = ("question", "choice", "label", "family")
STORE_TAGS = ("response", "reason", "category", "quote")
EVENT_TAGS = ("event", "command")


@pytest.fixture(scope="module")
def hostile_run(tiny_suite, tmp_path_factory) -> Path:
    """A finished run whose every shown string carries a payload: the dataset's through its annotation file (the
    loaders keep them), the answers, reasons, findings and transcripts as an agent's session leaves them."""
    suite = tmp_path_factory.mktemp("hostile") / "suite"
    shutil.copytree(tiny_suite, suite)
    spec = json.loads((suite / "suite.json").read_text())
    spec["datasets"] = [d for d in spec["datasets"] if d["family"] in DATASETS]
    spec["datasets"][0]["family"] = "shell" + payload("family")
    (suite / "suite.json").write_text(json.dumps(spec))
    annotations = suite / "shell_game" / "vstat.json"
    data = json.loads(annotations.read_text())
    for item in data["data"]["shell_game"]:
        item["question"] = "Which cup? " + payload("question")
        item["choices"] = [choice + payload("choice") for choice in item["choices"]]
        item["perceptual_challenge"] = item["labels"]["perceptual_challenge"] = "glare" + payload("label")
    annotations.write_text(json.dumps(data))

    run_dir = suite.parent / "run"
    proc = subprocess.run(STATEBOX + ["run", "--agent", "oracle", "--agent", "chance-random", "--suite", str(suite),
                                      "--run-dir", str(run_dir), "--limit", "2"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]

    findings = [{"category": "network" + payload("category"), "severity": "high", "event": 0, "quote": "curl " + payload("quote")}]
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        db.execute("UPDATE results SET response = ?, reason = ?, verdict = 'contaminated', action = 'void', findings = ?",
                   ("B " + payload("response"), "stopped " + payload("reason"), json.dumps(findings)))
    attempts = sorted((run_dir / "attempts").iterdir())
    assert len(attempts) == 8
    for folder in attempts:
        events = [{"seq": 0, "kind": "shell_command", "text": "cat /data/annotations/qa.json # " + payload("command"),
                   "data": {"tool": "Bash"}},
                  {"seq": 1, "kind": "model_text", "text": "I will look. " + payload("event")}]
        (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run_dir


def _ran_nothing(dom: str, where: str) -> None:
    root = re.search(r"<html[^>]*>", dom)
    assert root is not None and MARK not in root.group(0), f"{where}: a planted script ran ({root.group(0) if root else dom[:200]})"
    assert '<img src="x"' not in dom and "<svg onload" not in dom, f"{where}: a planted element is in the DOM"


def _shown(dom: str) -> set[str]:
    """The planted tags shown as text: serialised text escapes `<`, markup or a JSON block does not."""
    return set(re.findall(r"&lt;img src=x onerror=\"document\.documentElement\.setAttribute\('" + MARK + r"','([a-z]+)'\)", dom))


def _views(open_page) -> set[str]:
    shown: set[str] = set()
    for fragment in ("", "#open=0", "#open=5", "#focus=2", "#q=Which%20cup"):
        dom = open_page(fragment)
        _ran_nothing(dom, fragment or "the table")
        shown |= _shown(dom)
    return shown


@pytest.mark.parametrize("split", [False, True], ids=["one-file", "split"])
def test_report_shows_hostile_strings_as_text(hostile_run, tmp_path, split):
    out = tmp_path / "report.html"
    result = write_report_output(hostile_run, out, split_over=1 if split else 1 << 40)
    assert result.single_file is not split
    shown = _views(lambda fragment: dump_dom(out, fragment, tmp_path / "profile"))
    assert shown >= {*DATASET_TAGS, *STORE_TAGS, *EVENT_TAGS}, f"planted fields not shown: {set(DATASET_TAGS + STORE_TAGS + EVENT_TAGS) - shown}"


@contextlib.contextmanager
def live_view(run_dir: Path) -> Iterator[str]:
    """`statebox view RUN --port 0` running; yields its address."""
    viewer = subprocess.Popen(STATEBOX + ["view", str(run_dir), "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, preexec_fn=default_signal_dispositions)
    try:
        line = viewer.stdout.readline()  # type: ignore[union-attr]
        found = re.search(r"(http://127\.0\.0\.1:\d+/\?token=[\w-]+)", line)
        assert found, f"no URL from statebox view: {line!r}"
        yield found.group(1)
    finally:
        viewer.send_signal(signal.SIGINT)
        try:
            viewer.wait(timeout=10)
        except subprocess.TimeoutExpired:
            viewer.kill()


def test_live_view_shows_hostile_strings_as_text(hostile_run, tmp_path):
    with live_view(hostile_run) as url:
        shown = _views(lambda fragment: dump_url(url + fragment, tmp_path / "profile"))
    assert shown >= {*DATASET_TAGS, *STORE_TAGS, *EVENT_TAGS}, f"planted fields not shown: {set(DATASET_TAGS + STORE_TAGS + EVENT_TAGS) - shown}"


def test_live_view_answers_carry_a_policy(hostile_run):
    """The page's answer carries the page's policy; every other answer (a fragment or JSON opened on its own) one
    under which nothing runs, and `nosniff`, so a JSON answer holding markup is never read as a page."""
    with live_view(hostile_run) as url:
        base, token = url.split("?", 1)
        for path in ("", "fragment/summary", "api/status", "api/rows?after=0"):
            with urllib.request.urlopen(base + path + ("&" if "?" in path else "?") + token, timeout=60) as answer:
                policy = answer.headers.get("Content-Security-Policy") or ""
                assert answer.headers.get("X-Content-Type-Options") == "nosniff", path
                directives = dict((d.strip().split(" ", 1) + [""])[:2] for d in policy.split(";"))
                assert directives.get("default-src") == "'none'", (path, policy)
                if path:  # nothing runs: no script-src, so default-src 'none' covers scripts
                    assert "script-src" not in directives, (path, policy)
                else:
                    assert policy == PAGE_POLICY and directives["script-src"].startswith("'sha256-"), policy
                    assert "'unsafe-inline'" not in directives["script-src"], policy


def test_audit_report_shows_hostile_strings_as_text(hostile_run, tmp_path):
    page = tmp_path / "audit.html"
    proc = subprocess.run(STATEBOX + ["audit", str(hostile_run), "--no-write", "--html", str(page)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = dump_dom(page, "", tmp_path / "profile")
    _ran_nothing(dom, "the audit report")
    assert "command" in _shown(dom), "the audit report did not show the finding's command"


@pytest.mark.parametrize("page_kind", ["report", "split", "audit"])
def test_policy_stops_markup_an_escape_missed(hostile_run, tmp_path, page_kind):
    """The second wall: markup that got into a page unescaped (as a missed escape would put it) does not run, while
    the page's own script does (its table rows, and the split report's chunk scripts it loads)."""
    page = tmp_path / "page.html"
    if page_kind == "audit":
        proc = subprocess.run(STATEBOX + ["audit", str(hostile_run), "--no-write", "--html", str(page)],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
    else:
        write_report_output(hostile_run, page, split_over=1 if page_kind == "split" else 1 << 40)
    text = page.read_text(encoding="utf-8")
    missed = (f"<img src=x onerror=\"document.documentElement.setAttribute('{MARK}','handler')\">"
              f"<script>document.documentElement.setAttribute('{MARK}','script')</script>")
    page.write_text(text.replace("<body>", "<body>" + missed, 1), encoding="utf-8")
    dom = dump_dom(page, "#open=0", tmp_path / "profile")
    root = re.search(r"<html[^>]*>", dom)
    assert root is not None and MARK not in root.group(0), f"markup a page did not write ran: {root.group(0) if root else ''}"
    assert '<img src="x"' in dom  # the markup is there (as the missed escape put it); only its script is stopped
    if page_kind == "audit":
        assert 'id="f-count"' in dom and re.search(r'id="f-count"[^>]*>\d+ of \d+', dom), "the audit page's own script did not run"
    else:
        assert 'class="arow' in dom, "the report's own script did not run (no attempt rows)"
        assert "I will look." in dom, "the opened attempt's transcript (a chunk the page's script loads) is not shown"
