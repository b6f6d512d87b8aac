"""Headless Chromium for the report tests: the page's own script run as a reader's browser runs it.

Shared by the report's tests (tests/report/test_report.py) and the hostile-strings test
(tests/report/test_report_hostile_strings.py); the flags are the ones this machine's closed network needs
(platform notes: without the background-networking flags Chromium's connections are refused, many at a time).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium is not installed (scripts/setup/60-report-browser.sh installs it)")
    return exe


CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
]


def dump_dom(report: Path, fragment: str, profile: Path, budget_ms: int = 5000) -> str:
    """The DOM of a report file once its script has run (`fragment`: the URL hash it opens with)."""
    return dump_url(report.resolve().as_uri() + fragment, profile, budget_ms)


def dump_url(url: str, profile: Path, budget_ms: int = 5000) -> str:
    """The DOM of any page (a report file's URI, `statebox view`'s address) once its script has run."""
    proc = subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def screenshot(report: Path, fragment: str, shot: Path, profile: Path, size: str = "1400,1000"):
    proc = subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={size}",
         "--virtual-time-budget=5000", f"--screenshot={shot}", report.resolve().as_uri() + fragment],
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    return Image.open(shot).convert("RGB")
