"""Per-benchmark scoring rules (one module each); see `statebox.scoring.core.Rules`."""

from __future__ import annotations

import importlib
from types import ModuleType

from statebox.errors import UserError
from statebox.schema import BENCHMARKS


def rules_for(bench: str) -> ModuleType:
    if bench not in BENCHMARKS:
        raise UserError(f"unknown benchmark '{bench}' (expected one of: {', '.join(BENCHMARKS)})")
    return importlib.import_module(f"statebox.scoring.rules.{bench}")
