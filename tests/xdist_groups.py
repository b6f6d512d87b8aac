"""How `make test` shares the suite among pytest-xdist workers (`-n 4 --dist loadgroup`).

A test is its own unit of work, sent to whichever worker is free, unless it shares something
with other tests: then its whole group goes to one worker, which runs it in collection order.
A test's group is
- its `xdist_group(name)` mark, for state no fixture shows;
- else its module, when it uses a fixture wider than a function that is made for this module's
  tests: a module/class/package fixture (a finished run, a container barrage), or a session
  fixture of a sub-folder's conftest (the red-team barrage). Spread over several workers, each
  would make it again. Session fixtures of tests/conftest.py (the engine, the tiny suite) are
  cheap and made once per worker.
Everything else a test touches is its own already: its containers carry its process id and run
id (statebox/sandbox/docker.py removes only its own), its folders are under its `tmp_path`, its
ports are free ones, its Ray cluster lives under a root named after its process.

The groups are decided on the workers (only they collect) and reach the controller's scheduler
through a file named in each worker's `workerinput`. pytest-xdist's own loadgroup cannot do this:
with pytest 9.2 and pytest-xdist 3.8 it ignores every xdist_group mark (it rewrites the old
`_nodeid` attribute, which pytest no longer reads: pytest-xdist issue #1386).

Units go out longest first, so that no long test starts last while the other workers idle. The
length is guessed from the marks, as a fresh checkout has no timings: a `slow` test as a few
minutes, a `docker` test as a few seconds, any other as next to nothing.
"""

from __future__ import annotations

import inspect
import json
from collections import OrderedDict
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

TESTS_DIR = Path(__file__).resolve().parent
ROOT_CONFTEST = TESTS_DIR / "conftest.py"
WORKERINPUT_KEY = "statebox_groups_file"

# a rough guess of a test's seconds from its marks (only the order of the units depends on it)
GUESSED_SECONDS = {"slow": 120.0, "docker": 10.0}
UNMARKED_SECONDS = 0.5


def group_of(item: pytest.Item) -> str | None:
    """The group `item` must run in (one worker, in order), or None when it may run anywhere."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    fixture_info = getattr(item, "_fixtureinfo", None)
    if fixture_info is None:
        return None
    for defs in fixture_info.name2fixturedefs.values():
        if defs and _made_for_one_module(defs[-1]):
            return item.nodeid.split("::", 1)[0]
    return None


def _made_for_one_module(fixture: pytest.FixtureDef) -> bool:
    if fixture.scope in ("module", "class", "package"):
        return True
    if fixture.scope != "session":
        return False
    try:
        source = Path(inspect.getsourcefile(fixture.func) or "").resolve()
    except TypeError:  # a built-in plugin's fixture
        return False
    return source.is_relative_to(TESTS_DIR) and source != ROOT_CONFTEST


def guessed_seconds(item: pytest.Item) -> float:
    for mark, seconds in GUESSED_SECONDS.items():
        if item.get_closest_marker(mark) is not None:
            return seconds
    return UNMARKED_SECONDS


def hand_to_controller(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Worker: leave each test's group and guessed length where the controller's scheduler reads them."""
    target = getattr(config, "workerinput", {}).get(WORKERINPUT_KEY)
    if not target:
        return  # not an xdist worker under `--dist loadgroup`
    plan = {"groups": {item.nodeid: group for item in items if (group := group_of(item)) is not None},
            "seconds": {item.nodeid: guessed_seconds(item) for item in items}}
    partial = Path(f"{target}.{config.workerinput['workerid']}")
    partial.write_text(json.dumps(plan))
    partial.replace(target)  # whole or absent: every worker collects the same tests, the last one wins


def tell_worker(node, plan_file: Path) -> None:
    """Controller: where the worker leaves the plan."""
    node.workerinput[WORKERINPUT_KEY] = str(plan_file)


class GroupScheduling(LoadScopeScheduling):
    """pytest-xdist's scope scheduling, with a scope per group and one per test outside any group,
    handed out longest (guessed) first."""

    def __init__(self, config: pytest.Config, log, plan_file: Path) -> None:
        super().__init__(config, log)
        self.plan_file = plan_file
        self._plan: dict[str, dict] | None = None
        self._ordered = False

    @property
    def plan(self) -> dict[str, dict]:
        if self._plan is None:  # first needed once every worker has collected (and written the file)
            self._plan = json.loads(self.plan_file.read_text())
        return self._plan

    def _split_scope(self, nodeid: str) -> str:
        return self.plan["groups"].get(nodeid, nodeid)

    def _assign_work_unit(self, node) -> None:
        if not self._ordered:  # the work queue is whole by the first assignment
            self._ordered = True
            seconds = self.plan["seconds"]
            self.workqueue = OrderedDict(sorted(self.workqueue.items(),
                                                key=lambda unit: -sum(seconds.get(n, UNMARKED_SECONDS) for n in unit[1])))
        super()._assign_work_unit(node)
