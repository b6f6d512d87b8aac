"""`statebox report` and `statebox export` on a run folder someone handed over: its attempt files are read
through the attempt folder's one door (`attempt_folder.read_attempt_file` / `open_attempt_file`).

Why: a tarball keeps links and FIFOs. Before, an `events.jsonl` that was a link to a file of the user's was
followed, and its `{...}` lines were spliced into the report's transcripts (a page the user may publish) or
into the Inspect/ATIF export; a FIFO there hung `statebox report` and `statebox export` for ever (nobody writes
to it). Now each is one line naming the file (`DataError`, which the command line prints with exit 2), and
nothing of the linked file is written anywhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statebox.cli import app
from statebox.errors import UserError

STATEBOX = [sys.executable, "-m", "statebox.cli"]
SECRET = '{"auths": {"registry.example": {"auth": "b2thcGktc2VjcmV0LTc="}}, "note": "okapi-secret-7"}\n'


@pytest.fixture(scope="module")
def small_run(tiny_suite, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("hostile") / "run"
    proc = subprocess.run(STATEBOX + ["run", "--agent", "oracle", "--suite", str(tiny_suite), "--limit", "2",
                                      "--run-dir", str(run_dir), "--json"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


def _planted(small_run: Path, tmp_path: Path, kind: str) -> tuple[Path, Path]:
    """A copy of the run whose first attempt's events.jsonl is a link to a JSON secret, or a FIFO."""
    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    events = sorted((run / "attempts").glob("*/events.jsonl"))[0]
    events.unlink()
    if kind == "link":
        secret = tmp_path / "docker-config.json"
        secret.write_text(SECRET)
        events.symlink_to(secret)
    else:
        os.mkfifo(events)
    return run, events


def _every_written_text(root: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file() and not p.is_symlink()
                   and p.suffix in (".html", ".js", ".json", ".eval", ".jsonl"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["link", "fifo"])
@pytest.mark.parametrize("single", [True, False])
def test_report_refuses_a_planted_events_file_in_one_line(small_run, tmp_path, kind, single):
    from statebox.report.page import write_report_output

    run, events = _planted(small_run, tmp_path, kind)
    with pytest.raises(UserError) as caught:
        write_report_output(run, run / "page.html", single_file=single, split_over=0)
    line = str(caught.value)
    assert "\n" not in line and str(events) in line
    assert ("symbolic link" if kind == "link" else "FIFO") in line
    assert not (run / "page.html").exists()
    assert "okapi-secret-7" not in _every_written_text(run)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["link", "fifo"])
@pytest.mark.parametrize("fmt", ["inspect", "atif"])
def test_export_refuses_a_planted_events_file_in_one_line(small_run, tmp_path, kind, fmt):
    run, events = _planted(small_run, tmp_path, kind)
    out = tmp_path / ("out.eval" if fmt == "inspect" else "out")
    result = CliRunner().invoke(app, ["export", str(run), "--format", fmt, "--out", str(out)])
    assert isinstance(result.exception, UserError), result.output
    assert str(events) in str(result.exception)
    assert "okapi-secret-7" not in _every_written_text(tmp_path / "out") + (out.read_text(errors="replace") if out.is_file() else "")


@pytest.mark.timeout(120)
def test_the_command_line_gives_one_line_and_exit_2(small_run, tmp_path):
    run, events = _planted(small_run, tmp_path, "fifo")
    proc = subprocess.run(STATEBOX + ["report", str(run)], capture_output=True, text=True, timeout=100)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "FIFO" in lines[0] and str(events) in lines[0], proc.stderr


def test_an_unplanted_run_still_reports_and_exports(small_run, tmp_path):
    """The door refuses only what statebox never writes: the same run, untouched, reports and exports."""
    from statebox.report.page import write_report_output

    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    made = write_report_output(run, run / "page.html", split_over=0)
    assert made.transcripts_written > 0
    result = CliRunner().invoke(app, ["export", str(run), "--format", "atif", "--out", str(tmp_path / "atif")])
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "atif").glob("*/agent/trajectory.json"))
    assert json.loads(next((tmp_path / "atif").glob("*/agent/trajectory.json")).read_text())["steps"]


@pytest.mark.parametrize("single", [True, False])
def test_a_link_at_the_files_folder_is_replaced_never_followed(small_run, tmp_path, single):
    """A handed-over run whose `page_files` is a link to a folder of the user's: `rmtree` refused it with a traceback
    (found by probe). The link is removed where a split report needs the name, and what it named is untouched."""
    from statebox.report.page import write_report_output

    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "t-0123.js").write_text("the user's own script\n")
    (run / "page_files").symlink_to(mine)
    made = write_report_output(run, run / "page.html", single_file=single, split_over=0)
    assert made.single_file is single and (run / "page.html").is_file()
    assert sorted(p.name for p in mine.iterdir()) == ["t-0123.js"]
    assert (mine / "t-0123.js").read_text() == "the user's own script\n"
    assert (run / "page_files").is_symlink() is single


def test_a_file_at_the_files_folder_is_one_line(small_run, tmp_path):
    from statebox.report.page import write_report_output

    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    (run / "page_files").write_text("the user's notes\n")
    with pytest.raises(UserError, match="page_files: holds what no report wrote"):
        write_report_output(run, run / "page.html", split_over=0)
    assert (run / "page_files").read_text() == "the user's notes\n" and not (run / "page.html").exists()


@pytest.mark.parametrize("single", [True, False])
def test_a_folder_of_the_user_s_at_the_files_name_is_kept(small_run, tmp_path, single):
    """`--out ~/notes.html` removed a folder `~/notes_files` of the user's whole when the report split (found by probe):
    only a folder of a report's chunk scripts is replaced; any other is one line (split) or left alone (one file)."""
    from statebox.report.page import write_report_output

    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    notes = tmp_path / "notes_files"
    notes.mkdir()
    (notes / "draft.md").write_text("the user's draft\n")
    (notes / "old.js").write_text("// a script of the user's\n")
    if single:
        write_report_output(run, tmp_path / "notes.html", single_file=True)
    else:
        with pytest.raises(UserError, match="notes_files: holds what no report wrote"):
            write_report_output(run, tmp_path / "notes.html", split_over=0)
    assert sorted(p.name for p in notes.iterdir()) == ["draft.md", "old.js"]


@pytest.mark.parametrize("attempt_id", ["..", ".", "", "../../escape", "a\\b"])
@pytest.mark.parametrize("fmt", ["atif", "inspect"])
def test_a_stored_attempt_id_that_names_no_attempt_folder_is_one_line(small_run, tmp_path, attempt_id, fmt):
    """A handed-over run's results.sqlite with an attempt id `..` made `export --format atif --out OUT` write
    `OUT/../agent/trajectory.json`, outside OUT (found by probe; the id was cut to its basename, and `..` is its own).
    An id that is not one folder's name is one line, and nothing is written outside --out."""
    import sqlite3

    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    conn = sqlite3.connect(run / "results.sqlite")
    first = conn.execute("SELECT attempt_id FROM results ORDER BY rowid LIMIT 1").fetchone()[0]
    conn.execute("UPDATE results SET attempt_id = ? WHERE attempt_id = ?", (attempt_id, first))
    conn.commit()
    conn.close()
    box = tmp_path / "box"
    box.mkdir()
    out = box / ("out.eval" if fmt == "inspect" else "out")
    result = CliRunner().invoke(app, ["export", str(run), "--format", fmt, "--out", str(out)])
    assert isinstance(result.exception, UserError), result.output
    assert "is no attempt folder's name" in str(result.exception) and "\n" not in str(result.exception)
    assert not (tmp_path / "agent").exists() and not (box / "agent").exists()
