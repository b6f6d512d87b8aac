"""A sandbox engine wrapper that counts containers: how the grouped-tracker tests (tests/tracker,
tests/harness/test_cluster_tracker_groups.py) prove that a group shares one container."""

from __future__ import annotations


class CountingEngine:
    """The real engine, counting the containers it runs."""

    def __init__(self, engine) -> None:
        self._engine = engine
        self.runs = 0

    def run(self, *args, **kwargs):
        self.runs += 1
        return self._engine.run(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._engine, name)
