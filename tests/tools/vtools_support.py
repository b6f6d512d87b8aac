"""vtools as agents call it, for the tests: the real script run in a subprocess, `--root` pointing it at
the test's folder instead of /workspace (test_vtools.py, test_vtools_audio.py)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

VTOOLS = Path(__file__).resolve().parents[2] / "statebox" / "tools" / "vtools.py"


def load_vtools():
    spec = importlib.util.spec_from_file_location("vtools_module", VTOOLS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def vt(*args: str, root: Path, cwd: Path | None = None, ok: bool = True) -> dict | subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(VTOOLS), *args, "--root", str(root)], cwd=cwd or root,
                          capture_output=True, text=True, timeout=120)
    if not ok:
        return proc
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
