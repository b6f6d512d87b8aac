"""Every provider's methods have the protocol's signatures (statebox/sandbox/provider.py).

A `runtime_checkable` Protocol compares method names only, and mypy only checks the calls it
sees: the protocol once declared `run_init(self)` while the runner called `run_init(run_id)`
and both implementations took `run_id`. This holds each provider registered by name
(`PROVIDERS`, imported, not started: no Docker needed) and the harness's per-attempt wrapper
to the protocol, parameter by parameter: names, kinds, order, the types, and a default
wherever the protocol has one (a provider may add defaults, never drop one).
"""

from __future__ import annotations

import importlib
import inspect
import typing
from typing import Any, Protocol

import pytest

from statebox.harness.attempt_sandbox import AttemptSandboxes
from statebox.sandbox.docker import RunningSandbox
from statebox.sandbox.provider import PROVIDERS, Sandbox, SandboxProvider


def _protocol_methods(protocol: type) -> list[str]:
    return sorted(name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_"))


def _provider_classes() -> dict[str, type]:
    classes: dict[str, type] = {"attempt-wrapper": AttemptSandboxes}
    for name, target in PROVIDERS.items():
        module, factory = target.split(":")
        made = getattr(importlib.import_module(module), factory)
        assert inspect.isclass(made), f"provider {name}: {target} is not a class; give this test its class"
        classes[name] = made
    return classes


def signature_drift(protocol: type, impl: type) -> list[str]:
    """What in `impl`'s public methods disagrees with `protocol`'s (empty: nothing)."""
    problems = []
    for name in _protocol_methods(protocol):
        want_fn = getattr(protocol, name)
        got_fn = getattr(impl, name, None)
        if got_fn is None:
            problems.append(f"{name}: missing")
            continue
        want = list(inspect.signature(want_fn).parameters.values())
        got = list(inspect.signature(got_fn).parameters.values())
        want_types: dict[str, Any] = typing.get_type_hints(want_fn)
        got_types: dict[str, Any] = typing.get_type_hints(got_fn)
        if [(p.name, p.kind) for p in want] != [(p.name, p.kind) for p in got]:
            problems.append(f"{name}{inspect.signature(got_fn)} != protocol {name}{inspect.signature(want_fn)}")
            continue
        for w, g in zip(want, got):
            if w.default is not inspect.Parameter.empty and g.default is inspect.Parameter.empty:
                problems.append(f"{name}: parameter {w.name} lost the protocol's default")
            if w.name in want_types and want_types[w.name] != got_types.get(w.name):
                problems.append(f"{name}: parameter {w.name} is {got_types.get(w.name)}, protocol says {want_types[w.name]}")
        want_ret, got_ret = want_types.get("return"), got_types.get("return")
        covariant = inspect.isclass(want_ret) and inspect.isclass(got_ret) and issubclass(got_ret, want_ret)
        if want_ret != got_ret and not covariant:  # a provider may return a narrower type (its own Sandbox)
            problems.append(f"{name}: returns {got_types.get('return')}, protocol says {want_types.get('return')}")
    return problems


@pytest.mark.parametrize("name", sorted(_provider_classes()))
def test_each_provider_matches_the_protocol(name: str) -> None:
    assert signature_drift(SandboxProvider, _provider_classes()[name]) == []


def test_the_check_sees_the_drift_that_happened(tmp_path: object) -> None:
    """The protocol's old `run_init(self)` against a provider taking `run_id`: reported."""

    class OldProtocol(Protocol):
        def run_init(self) -> None: ...

        def attempt_init(self, attempt_id: str) -> None: ...

    class Provider:
        def run_init(self, run_id: str = "") -> None: ...

        def attempt_init(self, attempt_id: int) -> None: ...

    drift = signature_drift(OldProtocol, Provider)
    assert len(drift) == 2 and drift[0].startswith("attempt_init: parameter attempt_id") and drift[1].startswith("run_init(")


def test_the_started_sandbox_matches_its_protocol() -> None:
    """What Docker's `start` returns (`RunningSandbox`) against `Sandbox`, method by method."""
    assert _protocol_methods(Sandbox) == ["exec", "read_file", "stop", "write_file"]
    assert signature_drift(Sandbox, RunningSandbox) == []
