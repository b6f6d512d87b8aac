"""Shared test fixtures.

Docker-backed tests use the `docker_engine` fixture: on CI (CI=true) a missing engine
is a failure, never a silent skip; elsewhere the test is skipped with the reason printed.
Every test that needs the engine carries the `docker` mark, so `make test-fast`
(`-m "not docker"`) runs without one; a test that asks for `docker_engine` without the mark
stops the collection (below), as it would otherwise fail or skip in the fast run.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
import xdist_groups  # tests/ is on sys.path (rootdir-relative conftest import, as ray_cluster in tests/harness)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("STATEBOX_SHARED", REPO_ROOT.parent / "shared"))

# Off a terminal, long commands print a plain progress line every STATEBOX_PROGRESS_INTERVAL seconds
# on stderr (statebox/progress.py). Tests read the stderr of the commands they start and several hold
# it to one error line, so how many progress lines come before it would depend on the machine's
# speed: the tests' commands print them once an hour unless a test asks for them
# (tests/harness/test_progress.py sets its own interval).
os.environ.setdefault("STATEBOX_PROGRESS_INTERVAL", "3600")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _refuse_unmarked_engine_tests(items)
    xdist_groups.hand_to_controller(config, items)


def _refuse_unmarked_engine_tests(items: list[pytest.Item]) -> None:
    unmarked = [item.nodeid for item in items
                if "docker_engine" in getattr(item, "fixturenames", ()) and item.get_closest_marker("docker") is None]
    if unmarked:
        raise pytest.UsageError("these tests use docker_engine but lack the docker mark "
                                "(add `pytestmark = pytest.mark.docker` or `@pytest.mark.docker`): " + ", ".join(unmarked))


# ---------------------------------------------------------------- parallel runs (tests/xdist_groups.py)

@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    if node.config.getvalue("dist") == "loadgroup":
        xdist_groups.tell_worker(node, _plan_file(node.config))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadgroup":
        return None  # another --dist mode: pytest-xdist's own
    return xdist_groups.GroupScheduling(config, log, _plan_file(config))


_PLAN_FILE = pytest.StashKey[Path]()


def _plan_file(config: pytest.Config) -> Path:
    if _PLAN_FILE not in config.stash:
        folder = Path(tempfile.mkdtemp(prefix="statebox-xdist-"))
        config.stash[_PLAN_FILE] = folder / "plan.json"
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    return config.stash[_PLAN_FILE]


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED_DIR.exists():
        pytest.fail(f"the shared folder is missing at {SHARED_DIR} (set STATEBOX_SHARED)")
    return SHARED_DIR


def _engine_problem() -> str | None:
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
        client.close()
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        return f"no Docker engine reachable ({type(exc).__name__}: {exc})"


@pytest.fixture(scope="session")
def docker_engine():
    """A reachable Docker engine, or a loud skip (local) / failure (CI)."""
    problem = _engine_problem()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the Docker tests: {problem}")
        pytest.skip(f"skipped: {problem}")
    from statebox.sandbox.docker import SandboxEngine

    return SandboxEngine()


@pytest.fixture()
def limited_dir(tmp_path):
    """Factory: a size- and inode-limited folder (its own tmpfs) a container's uid 1000 may write.

    The engine refuses writable storage that the kernel does not limit, so tests use these
    wherever a plain folder used to do; each is unmounted at teardown.
    """
    from statebox.sandbox.workspace import limited_folder

    made = []

    def make(size_mb: int = 64, inodes: int = 10_000) -> Path:
        folder = limited_folder(size_mb, inodes=inodes, root=tmp_path / "limited")
        made.append(folder)
        return folder.path

    yield make
    for folder in made:
        folder.cleanup()


@pytest.fixture(scope="session", autouse=True)
def _no_mounts_left_behind(tmp_path_factory):
    """Unmount any limited folder a test forgot, so pytest can remove its temp folders."""
    yield
    from statebox.sandbox import limited_fs

    limited_fs.unmount_all(tmp_path_factory.getbasetemp())


# The model keys as the session found them. A test (or a fixture) that sets one for its own use and leaves it set
# hands it to every later test of its worker: the red team's decoy key, left set, made a later `statebox demo` in the
# same worker take it for a real key, add the real agent on the real API and hang to its deadline, in one test order
# and not another.
MODEL_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "HF_TOKEN")
_MODEL_KEYS_AT_START = {key: os.environ.get(key) for key in MODEL_KEYS}


@pytest.fixture(autouse=True)
def _no_model_key_left_behind():
    """Each test leaves the model keys of its worker's environment as the session found them."""
    yield
    changed = [key for key in MODEL_KEYS if os.environ.get(key) != _MODEL_KEYS_AT_START[key]]
    assert not changed, f"{', '.join(changed)} changed in this worker's environment and left so: restore it " \
                        "(monkeypatch.setenv, or put it back once the work that needs it is done)"


@pytest.fixture(scope="session")
def tiny_suite(tmp_path_factory) -> Path:
    """The built-in tiny suite, generated once per test session; returns the suite folder."""
    from statebox.benchmarks.synthetic.suite import make_suite

    out = tmp_path_factory.mktemp("suite")
    make_suite(out, size="tiny", seed=0)
    return out


def default_signal_dispositions() -> None:
    """`preexec_fn` for a child a test will signal: SIGINT and SIGHUP back to their defaults.

    A test run started in the background (`cmd &` in a script: SIGINT ignored) or under nohup
    (SIGHUP ignored) hands those dispositions to every child, and statebox rightly leaves an
    ignored signal ignored; a test of what statebox does on the signal must not depend on how
    the test run itself was started.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
