"""A run folder someone else hands `statebox audit` is hostile: what the auditor reads and writes there.

Why: a run folder travels (a tarball from a colleague, a shared disk, a paper's artifact), and tar keeps links,
FIFOs and modification times. The attacks below each had a failing test before their fix:

- a log that is a symbolic link was followed, so the audit read (and quoted from) a file outside the folder;
- a log that is a FIFO or a device was taken for a missing log (its size is 0), so the attempt was judged on
  the logs left, `clean` where the FIFO stood for the one that showed the cheat;
- a log that is a folder ended the audit with a traceback;
- `verdict.json.tmp` planted as a link: writing the verdict wrote through it, over any file the user can write.

Every read of an attempt folder's files now goes through one door (`attempt_folder.read_attempt_file`: no link
followed, a regular file only, under `MAX_ATTEMPT_FILE_BYTES`), each refusal one line naming the file and exit 2;
every whole-file write goes through `replace_file` (a fresh temporary name the writer creates itself, then a
rename). The report and the export read through the same door (tests/report/test_hostile_attempt_files.py).
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

from statebox import attempt_folder
from statebox.audits.verdict import audit_run
from statebox.cli import app
from statebox.errors import UserError

CORPUS = Path(__file__).parent / "corpus"

# (a corpus attempt, a file of it the auditor reads); the first three are the file that shows the cheat
READ_FILES = [
    ("cheat_env_dump__claude", "claude.stream.jsonl"),
    ("cheat_env_dump__gateway", "gateway.jsonl"),
    ("cheat_filesystem_walk__events", "events.jsonl"),
    ("cheat_filesystem_walk__events", "attempt.json"),
    ("cheat_filesystem_walk__events", "response.txt"),
]


def _run(tmp_path: Path, name: str, extra: tuple[str, ...] = ()) -> Path:
    """A run folder of two attempts: the corpus attempt `name` and an honest one (so --jobs has work to share)."""
    run = tmp_path / "run"
    shutil.copytree(CORPUS / name, run / "attempts" / name)
    shutil.copytree(CORPUS / "honest_script__shell", run / "attempts" / "honest_script__shell")
    for other in extra:
        (run / "attempts" / name / other).write_text("x")
    return run


def _audit(run: Path, *more: str):
    return CliRunner().invoke(app, ["audit", str(run), "--json", "--no-write", *more])


def _one_line_error(result, *words: str) -> str:
    """The command ended on a `UserError` (which `statebox.cli.main` prints as one line, exit 2: see
    `test_the_command_line_says_it_in_one_line_and_exits_2`), its message one line holding `words`."""
    assert isinstance(result.exception, UserError), result.output
    line = str(result.exception)
    assert "\n" not in line
    for word in words:
        assert word in line, line
    return line


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize(("attempt", "name"), READ_FILES)
def test_a_log_that_is_a_link_is_refused_not_followed(tmp_path, attempt, name, jobs):
    run = _run(tmp_path, attempt)
    inside = run / "attempts" / attempt / name
    outside = tmp_path / "elsewhere" / name
    outside.parent.mkdir()
    shutil.move(inside, outside)
    inside.symlink_to(outside)
    line = _one_line_error(_audit(run, "--jobs", jobs), "symbolic link")
    assert str(inside) in line


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("attempt", "name"), READ_FILES)
def test_a_log_that_is_a_fifo_is_refused_not_taken_for_missing(tmp_path, attempt, name):
    """Before: skipped as empty, so `cheat_*` audited on what was left (clean for the first three). No read of the
    FIFO may block: nobody writes to it."""
    run = _run(tmp_path, attempt)
    inside = run / "attempts" / attempt / name
    inside.unlink()
    os.mkfifo(inside)
    _one_line_error(_audit(run), str(inside), "FIFO")


@pytest.mark.parametrize(("attempt", "name"), READ_FILES[:3])
def test_a_log_that_is_a_link_to_a_device_is_refused(tmp_path, attempt, name):
    run = _run(tmp_path, attempt)
    inside = run / "attempts" / attempt / name
    inside.unlink()
    inside.symlink_to("/dev/zero")
    _one_line_error(_audit(run), str(inside), "symbolic link")


@pytest.mark.parametrize(("attempt", "name"), READ_FILES)
def test_a_log_that_is_a_folder_is_one_line_not_a_traceback(tmp_path, attempt, name):
    run = _run(tmp_path, attempt)
    inside = run / "attempts" / attempt / name
    inside.unlink()
    inside.mkdir()
    _one_line_error(_audit(run), str(inside), "folder")


@pytest.mark.parametrize(("attempt", "name"), READ_FILES)
def test_the_same_refusals_where_the_folder_listing_does_not_answer(tmp_path, attempt, name):
    """A name that is not ASCII makes the folder's one listing defer to the file system (`_Listing.authoritative`):
    that path asks each file by its own door, and refuses alike."""
    run = _run(tmp_path, attempt, extra=("n\u00e9.txt",))
    inside = run / "attempts" / attempt / name
    outside = tmp_path / name
    shutil.move(inside, outside)
    inside.symlink_to(outside)
    _one_line_error(_audit(run), str(inside), "symbolic link")
    inside.unlink()
    os.mkfifo(inside)
    _one_line_error(_audit(run), str(inside), "FIFO")


@pytest.mark.timeout(120)
def test_the_command_line_says_it_in_one_line_and_exits_2(tmp_path):
    """The real command, in its own process: a FIFO in place of events.jsonl (nobody writes to it, so a blocking
    read would never return) is one line on stderr, exit 2, and the verdict already written is kept."""
    run = _run(tmp_path, "cheat_filesystem_walk__events")
    folder = run / "attempts" / "cheat_filesystem_walk__events"
    (folder / "verdict.json").write_text('{"kept": true}')
    (folder / "events.jsonl").unlink()
    os.mkfifo(folder / "events.jsonl")
    done = subprocess.run([sys.executable, "-m", "statebox.cli", "audit", str(run), "--json"], capture_output=True,
                          text=True, timeout=100)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "FIFO" in lines[0] and str(folder / "events.jsonl") in lines[0], done.stderr
    assert (folder / "verdict.json").read_text() == '{"kept": true}'


def test_a_log_over_the_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    folder = _run(tmp_path, "cheat_filesystem_walk__events") / "attempts" / "cheat_filesystem_walk__events"
    before = [r.verdict.verdict for r in audit_run(folder, None, write=False)]
    assert before != ["clean"]
    size = max(p.stat().st_size for p in folder.iterdir())
    assert size == (folder / "events.jsonl").stat().st_size
    monkeypatch.setattr(attempt_folder, "MAX_ATTEMPT_FILE_BYTES", size - 1)
    with pytest.raises(UserError, match="events.jsonl: .* over the .* cap"):
        audit_run(folder, None, write=False)
    monkeypatch.setattr(attempt_folder, "MAX_ATTEMPT_FILE_BYTES", size)
    assert [r.verdict.verdict for r in audit_run(folder, None, write=False)] == before


def test_an_honest_run_folder_still_audits_after_the_doors(tmp_path):
    """The doors refuse only what statebox never writes: each corpus layout (events, gateway, CLI raw logs) audits."""
    run = tmp_path / "run"
    for name in ("cheat_env_dump__claude", "cheat_env_dump__codex", "cheat_env_dump__gateway", "cheat_env_dump__shell",
                 "honest_script__shell", "honest_opencv__claude"):
        shutil.copytree(CORPUS / name, run / "attempts" / name)
    result = _audit(run)
    assert result.exit_code == 0, result.output
    verdicts = {a["attempt"]: a["verdict"] for a in json.loads(result.stdout)["attempts"]}
    assert verdicts["honest_script__shell"] == "clean" and verdicts["cheat_env_dump__codex"] != "clean"


# ---------------------------------------------------------------------------------------------------------------
# writing into the handed folder
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("planted", "jobs"), [("verdict.json.tmp", "1"), ("verdict.json", "2")])
def test_the_verdict_is_not_written_through_a_planted_link(tmp_path, planted, jobs):
    """A link at the verdict's old temporary name was written through; a link at verdict.json itself must be
    replaced by the verdict, not followed (in a worker process too)."""
    run = _run(tmp_path, "cheat_env_dump__gateway")
    folder = run / "attempts" / "cheat_env_dump__gateway"
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    (folder / planted).symlink_to(victim)
    result = CliRunner().invoke(app, ["audit", str(run), "--json", "--jobs", jobs])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "the user's own file\n"
    written = folder / "verdict.json"
    assert not written.is_symlink() and json.loads(written.read_text())["verdict"] == "suspicious"


def test_the_audit_page_is_not_written_through_a_link_planted_at_its_temporary_name(tmp_path):
    run = _run(tmp_path, "cheat_env_dump__gateway")
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    page = run / "audit.html"
    (run / ".audit.html.tmp").symlink_to(victim)
    result = CliRunner().invoke(app, ["audit", str(run), "--no-write", "--html", str(page)])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "the user's own file\n"
    assert "suspicious" in page.read_text() and not page.is_symlink()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("record", ["honeytokens/snapshot.json", "honeytokens/plan.json", "plan.json"])
@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_the_decoy_records_come_through_the_same_door(tmp_path, record, kind):
    """The decoy records (`honeytokens.decoy_evidence`) were read by `Path.read_text`: a link followed, a FIFO
    waited on for ever. Now refused alike."""
    run = _run(tmp_path, "cheat_honeytoken__events")
    path = run / "attempts" / "cheat_honeytoken__events" / record
    path.parent.mkdir(exist_ok=True)
    if kind == "link":
        target = tmp_path / "elsewhere.json"
        target.write_text('{"taken_at_ns": 1, "atime_probe": true, "decoys": []}')
        path.symlink_to(target)
    else:
        os.mkfifo(path)
    _one_line_error(_audit(run), str(path), "symbolic link" if kind == "link" else "FIFO")
