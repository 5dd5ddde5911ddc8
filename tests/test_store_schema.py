"""The store's schema versions 6 (the ``human_labels`` kind CHECK lists ``criterion``) and 7 (a plan row per
(request, case)): an older store is upgraded in place when opened writable and read as it is when opened
read-only; a newer one is refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from consensus_eval._errors import InputError
from consensus_eval.execution.store import SCHEMA_VERSION, HumanLabelRecord, Store


def _label_sql(db: Path) -> str:
    with sqlite3.connect(db) as con:
        sql: str = con.execute("SELECT sql FROM sqlite_master WHERE name = 'human_labels'").fetchone()[0]
    return sql


def _store_with_labels(folder: Path) -> Path:
    """A store as this version writes it, with two labels of the kinds a version-5 store could hold."""
    db = folder / "results.sqlite"
    with Store(db) as store:
        store.upsert_human_label(HumanLabelRecord(case_id="c1", dimension="safety", reviewer="li", kind="score",
                                                  value=3, origin="accepted", source="review"))
        store.upsert_human_label(HumanLabelRecord(case_id="c1", dimension="safety", reviewer="li",
                                                  kind="comment", value="see line 2", source="review"))
    return db


def _as_version_5(db: Path) -> None:
    """What consensus-eval wrote at schema 5: meta says 5 and the kind CHECK has no 'criterion'."""
    sql = _label_sql(db)
    assert sql.count("'criterion'") == 1
    narrow = sql.replace(",\n                                           'criterion'", "")
    assert "'criterion'" not in narrow and "CHECK" in narrow
    with sqlite3.connect(db) as con:
        con.executescript(f"""ALTER TABLE human_labels RENAME TO t; {narrow};
            INSERT INTO human_labels SELECT * FROM t; DROP TABLE t;
            CREATE UNIQUE INDEX human_labels_key ON human_labels
                (reviewer, kind, case_id, ifnull(dimension, ''), ifnull(deduction_id, ''));
            UPDATE meta SET value = '5' WHERE key = 'schema_version';""")
    con.close()


def _labels(store: Store) -> list[tuple[str, str | None, object, str]]:
    return sorted((lb.kind, lb.dimension, lb.value, lb.origin) for lb in store.human_labels())


def test_a_new_store_is_version_7_and_its_label_kinds_list_criterion(tmp_path: Path) -> None:
    db = _store_with_labels(tmp_path)
    assert SCHEMA_VERSION == 7
    with Store(db, read_only=True) as store:
        assert store.get_meta("schema_version") == 7
    assert "'criterion'" in _label_sql(db)


def test_a_version_5_store_is_read_as_is_read_only_and_upgraded_in_place_writable(tmp_path: Path) -> None:
    db = _store_with_labels(tmp_path)
    _as_version_5(db)
    with sqlite3.connect(db) as con, pytest.raises(sqlite3.IntegrityError):
        con.execute("INSERT INTO human_labels (case_id, reviewer, kind, labelled_at, source) "
                    "VALUES ('c1', 'li', 'criterion', 1, 'x')")
    con.close()
    expected = [("comment", "safety", "see line 2", "own"), ("score", "safety", 3.0, "accepted")]

    before = db.read_bytes()
    with Store(db, read_only=True) as store:
        assert store.get_meta("schema_version") == 5
        assert _labels(store) == expected
    assert db.read_bytes() == before                     # read-only: nothing written, not even the version

    with Store(db) as store:
        assert store.get_meta("schema_version") == 7
        assert _labels(store) == expected                # every row kept
        store.upsert_human_label(HumanLabelRecord(case_id="c1", dimension="safety", deduction_id="allergy",
                                                  reviewer="li", kind="criterion", value="met", points=5))
        store.upsert_human_label(HumanLabelRecord(case_id="c1", dimension="safety", reviewer="li", kind="score",
                                                  value=4, source="review"))   # the unique key still holds
        assert len(store.human_labels()) == 3
    assert "'criterion'" in _label_sql(db)
    with sqlite3.connect(db) as con:
        assert {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                if r[0].startswith("human_labels")} == {"human_labels"}
    con.close()
    with Store(db, read_only=True) as store:
        assert store.get_meta("schema_version") == 7
        assert sorted((lb.kind, lb.value) for lb in store.human_labels()) == [
            ("comment", "see line 2"), ("criterion", "met"), ("score", 4.0)]


@pytest.mark.parametrize("read_only", [True, False])
def test_a_version_8_store_is_refused_naming_the_file(tmp_path: Path, read_only: bool) -> None:
    db = _store_with_labels(tmp_path)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    con.close()
    before = db.read_bytes()
    with pytest.raises(InputError) as e:
        Store(db, read_only=read_only)
    msg = str(e.value)
    assert msg.startswith(f"{db}: ") and "schema version 8" in msg and "newer consensus-eval" in msg
    assert "reads schema versions 1 to 7" in msg
    if read_only:
        assert db.read_bytes() == before
