"""Progress off a terminal (issue 27): a long command written to a file or a pipe prints a plain
progress line at least every interval (STATEBOX_PROGRESS_INTERVAL), with done/total, running,
failed, elapsed and ETA; on a terminal the rich bars as before (statebox/progress.py)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from statebox.agents import base
from statebox.agents.baselines import HostAgent
from statebox.cli import app
from statebox.errors import UserError
from statebox.progress import INTERVAL_ENV, ProgressDisplay, progress_interval

LINE = re.compile(r"^\[progress\] run: (\d+)/(\d+) done, running<=(\d+), (\d+) failed, elapsed (\d+:\d\d:\d\d), ETA (\S+)$")
SLEEP_S = 0.4


class SlowAnswerAgent(HostAgent):
    """A host agent that takes SLEEP_S per answer: a run long enough for several progress intervals."""

    name = "slow-answer"

    def answer(self, ctx) -> str:
        time.sleep(SLEEP_S)
        return "3"


def _dataset(tmp_path: Path, n: int) -> tuple[Path, Path]:
    videos = tmp_path / "videos"
    videos.mkdir()
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=5:duration=1",
                    "-pix_fmt", "yuv420p", str(videos / "clip.mp4")], check=True)
    docs = [{"source_task": "t", "video_id": "c", "video_path": "clip.mp4", "question": f"q{i}?", "answer": "3",
             "choices": [], "answer_index": -1} for i in range(n)]
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"data": {"t": docs}}))
    return data, videos


def test_run_to_a_file_prints_progress_lines_every_interval(tmp_path, monkeypatch):
    monkeypatch.setitem(base.AGENT_MODULES, "slow-answer", f"{__name__}:SlowAnswerAgent")
    monkeypatch.setenv(INTERVAL_ENV, "0.5")
    n = 8
    data, videos = _dataset(tmp_path, n)
    started = time.monotonic()
    result = CliRunner().invoke(app, ["run", "--agent", "slow-answer", "--bench", "vstat", "--data", str(data),
                                      "--videos", str(videos), "--run-dir", str(tmp_path / "run"), "-c", "1"])
    wall = time.monotonic() - started
    assert result.exit_code == 0, result.output[-3000:]
    lines = [line for line in result.output.splitlines() if line.startswith("[progress] run:")]
    assert not [line for line in lines if "starting" in line], lines  # nothing before there is work to count
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    # one line per 0.5 s while the 8 x 0.4 s of answers run (at least 6), one at the end
    assert wall >= n * SLEEP_S
    assert len(lines) >= int(n * SLEEP_S / 0.5), lines
    done = [int(m.group(1)) for m in parsed if m]
    assert done == sorted(done) and done[-1] == n and done[0] < n, lines
    final = parsed[-1]
    assert final.group(2) == str(n) and final.group(3) == "0" and final.group(4) == "0" and final.group(6) == "0:00:00"
    middle = [m for m in parsed if 0 < int(m.group(1)) < n]
    assert middle and all(re.fullmatch(r"\d+:\d\d:\d\d", m.group(6)) for m in middle), lines  # an ETA once work is done
    assert not [l for l in result.output.splitlines() if "━" in l and f"{n}/{n}" in l]  # no rich bar off a terminal


def test_plain_display_lines_and_content():
    out = io.StringIO()
    console = Console(file=out, force_terminal=False)
    with ProgressDisplay("job", console, slots=2, interval=0.05) as display:
        display.add("a", total=10)
        display.add("b", total=4)
        display.update("a", done=3, failed=1, note="item 3")
        time.sleep(0.3)
        display.update("b", done=4)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 4, lines
    assert lines[-1].startswith("[progress] job: a 3/10, b 4/4 | 7/14 done, running<=2, 1 failed, elapsed ")
    assert "ETA " in lines[-1] and lines[-1].endswith("(item 3)")


def test_a_task_without_total_is_a_heartbeat_and_a_terminal_gets_no_plain_line():
    out = io.StringIO()
    with ProgressDisplay("sandbox build x", Console(file=out, force_terminal=False), interval=0.05) as display:
        display.add("build")
        display.update("build", note="building layer 2")
        time.sleep(0.2)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(re.fullmatch(r"\[progress\] sandbox build x: (starting, )?elapsed \d:\d\d:\d\d( \(building layer 2\))?", l)
                                   for l in lines), lines
    terminal = io.StringIO()
    with ProgressDisplay("t", Console(file=terminal, force_terminal=True), interval=0.05) as display:
        display.add("build")
        time.sleep(0.15)
    assert "[progress]" not in terminal.getvalue()


def test_no_line_before_there_is_work_so_an_early_error_stays_one_line():
    """A command that fails while it starts (a refused cluster, a bad input found late) must leave its one
    error line alone on stderr: the display says nothing until a task exists, however long that takes."""
    out = io.StringIO()
    with pytest.raises(RuntimeError):
        with ProgressDisplay("run", Console(file=out, force_terminal=False), interval=0.05):
            time.sleep(0.3)
            raise RuntimeError("refused")
    assert out.getvalue() == ""


@pytest.mark.parametrize("value", ["0", "-1", "soon", "1e9"])
def test_a_bad_interval_is_a_user_error(monkeypatch, value):
    monkeypatch.setenv(INTERVAL_ENV, value)
    with pytest.raises(UserError, match=INTERVAL_ENV):
        progress_interval()


def test_a_quick_command_off_a_terminal_says_nothing_and_a_long_one_ends_with_its_state():
    """`quiet_if_quick` (statebox audit): the verdicts of a moment's audit come alone; an audit that lasted an
    interval said where it was, and says how it ended."""
    quick = io.StringIO()
    with ProgressDisplay("audit", Console(file=quick, force_terminal=False), interval=3600, quiet_if_quick=True) as display:
        display.add("files", total=4)
        display.update("files", done=4)
    assert quick.getvalue() == ""
    slow = io.StringIO()
    with ProgressDisplay("audit", Console(file=slow, force_terminal=False), interval=0.05, quiet_if_quick=True) as display:
        display.add("files", total=4)
        display.update("files", done=1)
        deadline = time.monotonic() + 10
        while "[progress]" not in slow.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        display.update("files", done=4, note="9 sessions judged")
    lines = slow.getvalue().splitlines()
    assert lines[0].startswith("[progress] audit: 1/4 done")
    assert lines[-1].startswith("[progress] audit: 4/4 done") and lines[-1].endswith("(9 sessions judged)")
