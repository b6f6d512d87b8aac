"""`statebox export`: a run in the formats of the viewers people already use.

`inspect`: an Inspect AI eval log (`.eval`, or `.json`), one sample per attempt, that
`inspect view` opens (`inspect_log.py`). `atif`: Harbor's Agent Trajectory Interchange Format,
one trajectory per attempt (`atif.py`). Both read the run through `records.py` (the store
read-only, the run's items, each attempt's events.jsonl) and turn events into a conversation
through `turns.py`.

Bad input is one line and exit 2, checked before anything is written: a missing folder, a
folder that is not a run, an unknown format, an `--out` that cannot be written.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from statebox.errors import UserError
from statebox.replace_file import inspect_log_holding, refuse_unless_replaceable
from statebox.report.export.atif import write_atif
from statebox.report.export.records import RunReader, check_run_dir

FORMATS = ("inspect", "atif")
INSPECT_SUFFIXES = (".eval", ".json")


@dataclass
class ExportResult:
    format: str
    out: Path
    attempts: int


def check_out(fmt: str, out: Path) -> None:
    """Refuse an `--out` the format cannot use, or that cannot be written, before any work."""
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r} (choose one of {', '.join(FORMATS)})")
    if fmt == "inspect":
        if out.suffix not in INSPECT_SUFFIXES:
            raise UserError(f"{out}: an Inspect log is a .eval or .json file (give --out RUN.eval)")
        if out.is_dir():
            raise UserError(f"{out}: is a folder (give --out a file name ending in .eval or .json)")
        parent = out.parent
    else:
        if out.exists() and not out.is_dir():
            raise UserError(f"{out}: exists and is not a folder (ATIF is written as one folder per attempt)")
        parent = out if out.exists() else out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        # a real file, not os.access: root passes access checks on folders nothing can be made in (/proc)
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise UserError(f"{out}: cannot write there ({exc.strerror or exc})") from exc
    if fmt == "inspect":
        # inspect_ai put its log in place of a FIFO there (and would of a device, or of a user's own data.json)
        refuse_unless_replaceable(out, inspect_log_holding(out))


def export_run(run_dir: Path, fmt: str, out: Path) -> ExportResult:
    """Export the run in `run_dir` as `fmt` to `out`; returns what was written."""
    out = Path(out)
    check_run_dir(Path(run_dir))
    check_out(fmt, out)
    with RunReader(Path(run_dir)) as reader:
        if fmt == "inspect":
            from statebox.report.export.inspect_log import write_inspect_log  # why: inspect_ai (~1 s), this format only

            out.parent.mkdir(parents=True, exist_ok=True)
            n = write_inspect_log(reader, out.resolve())
        else:
            n = write_atif(reader, out)
    return ExportResult(format=fmt, out=out, attempts=n)
