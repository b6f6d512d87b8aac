"""`--dist loadgroup` as `make test` runs it (tests/xdist_groups.py): the tests sharing a module's
fixture or an xdist_group mark run on one worker, the others spread over the workers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent

SUITE = {
    # the hooks of tests/conftest.py, in a suite of its own
    "conftest.py": f"""
        import importlib.util, sys
        sys.path.insert(0, {str(TESTS_DIR)!r})
        spec = importlib.util.spec_from_file_location("statebox_tests_conftest", {str(TESTS_DIR / "conftest.py")!r})
        real = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(real)
        pytest_collection_modifyitems = real.pytest_collection_modifyitems
        pytest_configure_node = real.pytest_configure_node
        pytest_xdist_make_scheduler = real.pytest_xdist_make_scheduler
        """,
    "test_shared.py": """
        import os, time, pytest

        @pytest.fixture(scope="module")
        def made_once():
            return os.getpid()

        @pytest.mark.parametrize("k", range(6))
        def test_shares(made_once, k):
            time.sleep(0.2)
            assert made_once == os.getpid()

        @pytest.mark.parametrize("k", range(6))
        def test_free(k):
            time.sleep(0.2)
        """,
    "test_marked.py": """
        import time, pytest
        pytestmark = pytest.mark.xdist_group("together")

        @pytest.mark.parametrize("k", range(4))
        def test_marked(k):
            time.sleep(0.2)
        """,
}


def _workers_by_test(tmp_path: Path) -> dict[str, str]:
    for name, text in SUITE.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadgroup", "-v",
                           "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = dict((test, worker) for worker, test in re.findall(r"\[(gw\d+)\] (?:\[ *\d+%\] )?PASSED (\S+)", done.stdout))
    assert len(found) == 16, done.stdout[-3000:]
    return found


def test_a_modules_shared_fixture_and_a_marked_group_stay_on_one_worker_the_rest_spread(tmp_path):
    workers = _workers_by_test(tmp_path)
    shared = {w for t, w in workers.items() if "test_shares" in t}
    marked = {w for t, w in workers.items() if "test_marked" in t}
    free = {w for t, w in workers.items() if "test_free" in t}
    assert len(shared) == 1 and len(marked) == 1, workers
    assert len(free) > 1, workers  # xdist's own loadgroup (issue #1386) or loadscope would keep the module together
