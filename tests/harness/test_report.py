"""The report: a real run on the generated suite, rendered by headless Chromium.

The run uses the host-side baselines (oracle, chance-random) so it needs no
sandbox; the report must show the leaderboard and an attempt's transcript, and
Chromium must render it (screenshot with real pixels, DOM with our tables).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

STATEBOX = [sys.executable, "-m", "statebox.cli"]


@pytest.fixture(scope="module")
def finished_run(tiny_suite, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("run")
    proc = subprocess.run(
        STATEBOX + ["run", "--agent", "oracle", "--agent", "chance-random", "--suite", str(tiny_suite), "--run-dir", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    payload = json.loads(proc.stdout)
    oracle = [r for r in payload["results"] if r["agent"] == "oracle"]
    assert oracle, payload
    for r in oracle:  # the oracle proves the pipeline: ground truth through the scorer is 100%
        headline = {"vstat": "score", "vcbench": "gpa", "cpbench": "accuracy"}[r["bench"]]
        assert r["metrics"][headline] == pytest.approx(1.0), r
    return run_dir


def test_report_json_and_html(finished_run):
    proc = subprocess.run(STATEBOX + ["report", str(finished_run), "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    payload = json.loads(proc.stdout)
    html = Path(payload["report"]).read_text()
    assert "id='leaderboard'" in html and "chance-random" in html and "oracle" in html
    assert "data:image/png;base64," in html  # plots are embedded, the file stands alone
    assert "Transcript" in html and "final_answer" in html
    assert "src='http" not in html and 'src="http' not in html


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium is not installed (scripts/setup/60-report-browser.sh installs it)")
    return exe


CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def test_report_renders_in_headless_chromium(finished_run, tmp_path):
    report = finished_run / "report.html"
    if not report.exists():
        subprocess.run(STATEBOX + ["report", str(finished_run)], check=True, capture_output=True, timeout=300)
    url = report.resolve().as_uri() + "#open=0"
    profile = tmp_path / "profile"
    dom = subprocess.run(
        [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=3000", "--dump-dom", url],
        capture_output=True, text=True, timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'id="leaderboard"' in dom.stdout
    assert "<details class=\"attempt\" open" in dom.stdout  # the script ran and opened a transcript
    from PIL import Image

    def screenshot(fragment: str, name: str) -> Image.Image:
        shot = tmp_path / name
        proc = subprocess.run(
            [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1400,1600",
             "--virtual-time-budget=3000", f"--screenshot={shot}", report.resolve().as_uri() + fragment],
            capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
        return Image.open(shot).convert("L")

    top = screenshot("", "leaderboard.png")
    transcript = screenshot("#focus=0", "transcript.png")
    for image, what in ((top, "leaderboard"), (transcript, "transcript")):
        colours = image.getcolors(maxcolors=1_000_000) or []
        assert len(colours) > 20, f"the {what} screenshot is blank"
    # the focused view shows a different picture than the leaderboard: the transcript rendered
    assert top.tobytes() != transcript.tobytes()
