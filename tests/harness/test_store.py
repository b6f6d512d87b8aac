"""The result store: one row per attempt, never duplicated, readable while written."""

from __future__ import annotations

import sqlite3

import pytest

from statebox.errors import DataError
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


@pytest.mark.parametrize("extra, words", [
    ("CREATE TRIGGER keep_clean AFTER UPDATE OF verdict ON results BEGIN "
     "UPDATE results SET verdict = 'clean', findings = '[]' WHERE attempt_id = NEW.attempt_id; END;", "trigger keep_clean"),
    ("CREATE TRIGGER no_new AFTER INSERT ON results BEGIN DELETE FROM results WHERE attempt_id = NEW.attempt_id; END;",
     "trigger no_new"),
    ("CREATE VIEW shown AS SELECT * FROM results WHERE verdict = 'clean';", "view shown"),
    ("CREATE INDEX by_agent ON results (agent);", "index by_agent"),
])
def test_a_store_holding_anything_but_statebox_s_table_is_refused_untouched(tmp_path, extra, words):
    """A run folder someone hands over for re-auditing is theirs: a trigger in its store ran inside statebox's own
    writes (`statebox audit RUN` wrote `contaminated`, the trigger put `clean` back, and the report showed clean).
    The store may hold statebox's table and its primary key's index, nothing else (an allow-list of the schema)."""
    store = ResultStore(tmp_path)
    store.add(_row(1))
    store.close()
    path = tmp_path / "results.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(extra)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    before = path.read_bytes()
    with pytest.raises(DataError, match=words) as info:
        ResultStore(tmp_path)
    assert str(info.value).startswith(str(path)) and "left untouched" in str(info.value)
    assert path.read_bytes() == before


# A handed-over store's cells are someone else's too: the report reads its rows without re-validating them (at 100k
# rows pydantic costs), so a cell of the wrong kind was a traceback deep in the report, the export or `--resume`
# (a findings cell nested 100,000 deep: RecursionError in all three).
_DEEP = "[" * 100_000 + "]" * 100_000
_HOSTILE_CELLS = [
    ("findings", _DEEP, "findings"),
    ("findings", "{\"category\": \"network\"}", "findings"),
    ("findings", "[1, 2]", "findings"),
    ("findings", "not json", "findings"),
    ("metrics", "\"high\"", "metrics"),
    ("metrics", "{\"score\": \"high\"}", "metrics"),
    ("metrics", "{\"score\": " + _DEEP + "}", "metrics"),
    ("query_index", "first", "query_index"),
    ("epoch", 1.5, "epoch"),
    ("verdict", b"\x01", "verdict"),  # a blob (an integer there is stored as text: TEXT affinity)
    ("duration_s", "slow", "duration_s"),
    ("agent", b"\x00blob", "agent"),
]


def _spoiled_store(tmp_path, column, value):
    store = ResultStore(tmp_path)
    store.add(_row(1))
    store.add(_row(2))
    store.close()
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        db.execute(f"UPDATE results SET {column} = ? WHERE attempt_id = 'a-2'", (value,))
        db.commit()
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return tmp_path / "results.sqlite"


@pytest.mark.parametrize("column, value, named", _HOSTILE_CELLS)
def test_a_stored_cell_of_the_wrong_kind_is_one_line_for_the_store_and_the_report(tmp_path, column, value, named):
    from statebox.errors import UserError
    from statebox.report.data import connect_readonly, iter_rows

    path = _spoiled_store(tmp_path, column, value)
    before = path.read_bytes()
    with pytest.raises(UserError) as info:
        ResultStore(tmp_path).rows()
    assert "a-2" in str(info.value) and named in str(info.value)
    with pytest.raises(UserError) as info:
        list(iter_rows(connect_readonly(tmp_path)))
    assert "a-2" in str(info.value) and named in str(info.value)
    assert path.read_bytes() == before
