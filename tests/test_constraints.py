"""The libraries a fresh `make setup` installs are the ones the tests last passed with (constraints.txt).

Why: pyproject names lower bounds only; before constraints.txt each fresh machine took each library's newest
release, and anthropic 2.15.0, out between two CI runs of one commit, failed four tests that had passed. The sandbox
image pins the libraries that decode video to the host's versions (the same frames on both sides of the wall), so
those pins and the host's must agree."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
SANDBOX_PINS = ROOT / "statebox/sandbox/image/requirements-sandbox.txt"
TRACKER_LOCK = ROOT / "statebox/sandbox/image/requirements-tracker.txt"
TRACKER_DOCKERFILE = ROOT / "statebox/sandbox/image/Dockerfile.tracker"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*$")
# trackeval declares the GUI build, which setup removes for the headless one (scripts/setup/10-venv.sh)
REMOVED_BY_SETUP = {"opencv-python"}


def pins(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _PIN.match(line.strip())
        assert match is not None, f"{path.name}: not an exact pin: {line!r}"
        found[canonicalize_name(match.group(1))] = match.group(2)
    return found


def test_every_line_of_the_lock_is_an_exact_pin_and_it_holds_the_libraries_statebox_names() -> None:
    locked = pins(ROOT / "constraints.txt")
    assert len(locked) > 100  # the whole resolved set, not a hand-picked few
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    named = [*project["dependencies"], *(d for extra in project["optional-dependencies"].values() for d in extra)]
    missing = sorted(str(canonicalize_name(Requirement(d).name)) for d in named
                     if canonicalize_name(Requirement(d).name) not in locked)
    assert not missing, f"constraints.txt lacks {missing}: rerun scripts/update-constraints.sh"
    for requirement in map(Requirement, named):  # and each pin meets pyproject's own bounds
        version = locked[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version, prereleases=True), f"{requirement}: locked at {version}"


def test_the_installed_libraries_are_the_locked_versions() -> None:
    locked = pins(ROOT / "constraints.txt")
    drifted = []
    for name, version in locked.items():
        if name in REMOVED_BY_SETUP:
            continue
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            drifted.append(f"{name} not installed")
            continue
        if installed != version:
            drifted.append(f"{name} {installed} (locked {version})")
    assert not drifted, f"the venv is not the lock's: {drifted}; run make setup"


def test_the_sandbox_decodes_with_the_hosts_versions() -> None:
    locked = pins(ROOT / "constraints.txt")
    sandbox = pins(SANDBOX_PINS)
    assert sandbox and {name: locked.get(name) for name in sandbox} == sandbox


def test_the_tracker_lock_agrees_with_the_sandbox_and_with_the_dockerfiles_own_pins() -> None:
    """The tracker image installs under both files at once: a package pinned differently in each would fail its
    build on a fresh machine only (a warm engine answers from its layer cache)."""
    tracker = pins(TRACKER_LOCK)
    sandbox = pins(SANDBOX_PINS)
    assert len(tracker) > 50  # the whole venv, not the six packages the Dockerfile names
    assert {name: tracker[name] for name in sandbox if name in tracker} == {
        name: version for name, version in sandbox.items() if name in tracker}
    named = dict(re.findall(r"\b([a-z][a-z0-9_-]*)==([0-9][^\s;\\]*)", TRACKER_DOCKERFILE.read_text(encoding="utf-8")))
    assert {"torch", "ultralytics", "supervision", "trackers"} <= set(named)
    for name, version in named.items():
        if canonicalize_name(name) in tracker:
            assert tracker[canonicalize_name(name)] == version, f"{name}: Dockerfile {version}, lock {tracker[name]}"
