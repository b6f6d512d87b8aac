"""The attempt folder's file names have one owner, `statebox/attempt_folder.py`: a bare literal of
any of them (`"events.jsonl"`, `"gateway.jsonl"`, `"run.json"`, `"attempts"`, ...) anywhere else in
statebox/ fails here, so a renamed or added file is one constant, not a hunt through ten modules.

Read from the source with `ast` (string constants, f-string pieces; docstrings are prose and
exempt). `"attempts"` is also an ordinary word of JSON payloads, so it counts only where it names
a path (not as a dict key or a subscript). `statebox/tracker/runtime/` is exempt: it is the
in-container tracker (`sbtracker`), which runs without statebox installed and writes its output
files under the names `attempt_folder.TRACKER_FILES` records."""

from __future__ import annotations

import ast
from pathlib import Path

import statebox
from statebox.attempt_folder import ATTEMPTS_DIR, OWNED_NAMES, TRACKER_OUT_DIR

PACKAGE = Path(statebox.__file__).parent
OWNER = PACKAGE / "attempt_folder.py"
EXEMPT = (PACKAGE / "tracker" / "runtime",)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def _not_a_path(tree: ast.AST) -> set[int]:
    """String constants used as a dict key or a subscript: a JSON field, not a file."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            ids.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, ast.Subscript):
            ids.add(id(node.slice))
    return ids


def bare_names(source: str, filename: str = "<module>") -> list[tuple[int, str]]:
    """(line, literal) of each bare attempt-folder file name in a module's source."""
    tree = ast.parse(source, filename=filename)
    prose = _docstrings(tree)
    keys = _not_a_path(tree)
    found = []
    for node in sorted(ast.walk(tree), key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in prose:
            continue
        value = node.value
        if value == ATTEMPTS_DIR and id(node) in keys:
            continue
        if value in OWNED_NAMES or value.startswith(TRACKER_OUT_DIR + "/"):
            found.append((node.lineno, value))
    return found


def test_no_bare_attempt_file_name_outside_the_attempt_folder_module() -> None:
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == OWNER or any(path.is_relative_to(e) for e in EXEMPT):
            continue
        hits = bare_names(path.read_text(), str(path))
        if hits:
            offenders[str(path.relative_to(PACKAGE))] = hits
    assert offenders == {}


def test_the_owner_names_them(tmp_path: Path) -> None:
    """The scan would pass vacuously on a module that names no file; the owner names every one."""
    assert {v for _, v in bare_names(OWNER.read_text())} >= OWNED_NAMES


def test_the_scan_finds_a_planted_literal(tmp_path: Path) -> None:
    module = tmp_path / "planted.py"
    module.write_text('"""A docstring may say events.jsonl."""\n'
                      'from pathlib import Path\n'
                      'def f(d: Path, name: str) -> list[object]:\n'
                      '    """Reads gateway.jsonl."""\n'
                      '    payload = {"attempts": 3}\n'
                      '    return [d / "events.jsonl", d / "attempts" / "x", f"tracker-out/{name}", payload["attempts"]]\n')
    assert bare_names(module.read_text()) == [(6, "events.jsonl"), (6, "attempts"), (6, "tracker-out/")]
