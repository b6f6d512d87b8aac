"""Tracker test fixtures: the tracker image, the shipped weights, and the tiny suite's classes."""

from __future__ import annotations

from pathlib import Path

import pytest

from statebox.tracker import container as tc


@pytest.fixture(scope="session")
def tracker_image(docker_engine) -> str:
    """The tracker image (built by scripts/setup/50-tracker-image.sh; built here if missing)."""
    return tc.tracker_image(progress=print)


@pytest.fixture(scope="session")
def shipped_weights() -> Path:
    path = tc.SHIPPED_WEIGHTS
    assert path.is_file(), f"the shipped weights {path} are missing"
    return path


@pytest.fixture()
def writable_dir(limited_dir) -> Path:
    """A size-limited folder (its own tmpfs) the container's uid 1000 may write."""
    return limited_dir(256)
