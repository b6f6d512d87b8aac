"""What an export reads of a run: its rows, one at a time, each with its item and folder.

Why a module of its own: the Inspect and ATIF writers are two views of the same thing
(one attempt = one sample / one trajectory), so they share one reader. It goes through the
existing read paths: the store read-only (`report_data.connect_readonly` / `iter_rows`,
never the run lock, so a run can be exported while it goes on), the run's datasets through
`plan.load_datasets` plus the impossible items and twins `plan.trust_plan` mixed in (the truth
of each query), and the attempt folder (`events.jsonl`, the
host-written transcript). Rows stream from a cursor: memory holds the items, never the rows.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from statebox.attempt import provider_for_model
from statebox.attempt_folder import ATTEMPTS_DIR, EVENTS_FILE, is_attempt_name
from statebox.errors import DataError, UserError
from statebox.harness.plan import RunConfig, load_datasets, trust_plan
from statebox.report.data import (
    DatasetInfo,
    connect_readonly,
    count_rows,
    iter_rows,
    summarise,
    target_text,
)
from statebox.report.aggregate import AgentDatasetScore
from statebox.harness.store import RESULTS_FILE
from statebox.harness.trust import TrustItem
from statebox.schema import Item

EXPORT_ORDER = "agent, dataset, item_id, query_index, epoch"


def iso_time(epoch_s: float) -> str:
    """Seconds since the epoch as an ISO 8601 UTC timestamp (both formats want ISO strings)."""
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).isoformat()


@dataclass(slots=True)
class AttemptRecord:
    """One finished attempt: its stored row (ResultRow's attributes), its item and its folder."""

    row: Any  # report_data.LiteRow: the stored columns as attributes
    item: Item | None  # None when the run's annotation no longer holds the item
    attempt_dir: Path
    trust: TrustItem | None = None  # an impossible item or a counterfactual twin (harness/trust.py)

    @property
    def trust_facts(self) -> dict[str, str] | None:
        """What the item was built as, for an impossible item or a twin (unlabelled to the agent)."""
        if self.trust is None:
            return None
        return {"kind": self.trust.kind, "construction": self.trust.construction, "source_id": self.trust.source_id}

    @property
    def target(self) -> str:
        if self.item is None:
            return ""
        query = next((q for q in self.item.queries if q.index == self.row.query_index), None)
        value = query.target if query is not None and query.target is not None else self.item.target
        return target_text(value)

    @property
    def started_at(self) -> float:
        return max(0.0, float(self.row.finished_at) - float(self.row.duration_s))

    @property
    def events_path(self) -> Path:
        return self.attempt_dir / EVENTS_FILE


def check_run_dir(run_dir: Path) -> Path:
    """The folder, if it is a run folder; else one line naming what is wrong."""
    if not run_dir.exists():
        raise UserError(f"{run_dir}: no such run folder")
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: not a folder (give a run folder: statebox run --run-dir)")
    if not (run_dir / RESULTS_FILE).is_file():
        raise UserError(f"{run_dir}: not a statebox run folder (no {RESULTS_FILE})")
    return run_dir


class RunReader:
    """A run folder opened for export: config, items, row count, and the rows as records."""

    def __init__(self, run_dir: Path) -> None:
        run_dir = check_run_dir(Path(run_dir))
        self.run_dir = run_dir
        self.config = RunConfig.load(run_dir)
        self.loaded = load_datasets(self.config)
        self._items: dict[tuple[str, str], Item] = {
            (d.spec.label, item.id): item for d in self.loaded for item in d.items
        }
        # impossible items and twins the run mixed in (pure planning from run.json: writes nothing)
        self._trust: dict[tuple[str, str], TrustItem] = {
            (t.label, t.item.id): t for t in trust_plan(self.config, self.loaded).items
        }
        self._items.update({key: t.item for key, t in self._trust.items()})
        self.conn: sqlite3.Connection = connect_readonly(run_dir)
        self.n_rows, _ = count_rows(self.conn)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "RunReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def records(self) -> Iterator[AttemptRecord]:
        """Every stored attempt, one at a time, in (agent, dataset, item, query, epoch) order."""
        attempts = self.run_dir / ATTEMPTS_DIR
        for _, row in iter_rows(self.conn, order=EXPORT_ORDER):
            # the attempt id names the folder (and the export's): refused unless it is one folder name
            name = str(row.attempt_id)
            if not is_attempt_name(name):
                raise DataError(self.run_dir / RESULTS_FILE, None, f"attempt id {name!r:.80} (item {row.item_id!r:.80}) "
                                "is no attempt folder's name; statebox makes agent-<16 hex>")
            key = (row.dataset, row.item_id)
            yield AttemptRecord(row=row, item=self._items.get(key), attempt_dir=attempts / name, trust=self._trust.get(key))

    def scores(self) -> list[AgentDatasetScore]:
        """Per (agent, dataset) scores through the one shared scorer (the report's pass)."""
        infos = [DatasetInfo.build(d.spec.label, d.spec.bench, d.items) for d in self.loaded]
        return summarise(self.run_dir, infos, conn=self.conn).scores

    def time_span(self) -> tuple[float, float]:
        """(first start, last finish) over the stored rows, in seconds since the epoch."""
        lo, hi = self.conn.execute("SELECT MIN(finished_at - duration_s), MAX(finished_at) FROM results").fetchone()
        return float(lo or 0.0), float(hi or 0.0)

    def agent_model(self, agent: str) -> str | None:
        """The model an agent was run with, as `provider/model` (its options' `model` and
        `provider`, else the one provider rule), when it had one."""
        options = self.config.agent_options.get(agent) or {}
        model = options.get("model") if isinstance(options, dict) else None
        if not model:
            return None
        provider = options.get("provider") or provider_for_model(str(model))
        return f"{provider}/{model}"
