"""The result store: one row per attempt, never duplicated, readable while written."""

from __future__ import annotations

import sqlite3

from statebox.harness.store import ResultRow, ResultStore


def _row(i: int, **kw) -> ResultRow:
    base = dict(attempt_id=f"a-{i}", run_id="r", agent="x", dataset="d", bench="vstat", item_id=f"t:{i}")
    base.update(kw)
    return ResultRow(**base)


def test_add_is_idempotent_and_roundtrips(tmp_path):
    store = ResultStore(tmp_path)
    assert store.add(_row(1, response="B", metrics={"score": 1.0}, findings=[{"category": "network"}]))
    assert not store.add(_row(1, response="C"))  # replay of the same attempt: ignored
    assert store.count() == 1
    (row,) = store.rows()
    assert row.response == "B" and row.metrics == {"score": 1.0} and row.findings == [{"category": "network"}]
    assert store.done_ids() == {"a-1"}
    store.close()


def test_store_uses_wal_so_reports_read_during_a_run(tmp_path):
    store = ResultStore(tmp_path)
    store.add(_row(1))
    mode = sqlite3.connect(tmp_path / "results.sqlite").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    reader = ResultStore(tmp_path)
    store.add(_row(2))
    assert reader.count() == 2
    store.close()
    reader.close()


def test_update_verdict_rewrites_only_audit_columns(tmp_path):
    store = ResultStore(tmp_path)
    store.add(_row(1, response="7"))
    store.update_verdict("a-1", "contaminated", "void", [{"category": "honeytoken"}])
    (row,) = store.rows()
    assert (row.verdict, row.action, row.response) == ("contaminated", "void", "7")
    store.close()
