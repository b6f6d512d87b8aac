"""The run side never imports the report side: `statebox/harness/` (planning, running, the store, the
trust figures) may be imported by `statebox/report/`, never the other way round, so a report change
cannot reach into an attempt. Read from the source (every import, also those inside functions), so a
lazy import cannot hide the arrow; import-linter checks the same rule in `make typecheck`."""

from __future__ import annotations

import ast
from pathlib import Path

import statebox

PACKAGE = Path(statebox.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_no_module_of_the_harness_imports_the_report_package() -> None:
    offenders = {str(path.relative_to(PACKAGE)): sorted(m for m in _imported_modules(path)
                                                         if m == "statebox.report" or m.startswith("statebox.report."))
                 for path in sorted((PACKAGE / "harness").rglob("*.py"))}
    assert {name: mods for name, mods in offenders.items() if mods} == {}


def test_the_scan_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    """The check above would pass vacuously if the scan missed lazy imports; it does not."""
    module = tmp_path / "lazy.py"
    module.write_text("def f():\n    from statebox.report.page import write_report_output\n    import statebox.report\n")
    assert {"statebox.report.page", "statebox.report"} <= _imported_modules(module)
