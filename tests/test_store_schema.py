"""The store's numbered migrations (consensus_eval.execution.migrations): each step is tested from a fixture store
of its version, made from the DDL that version of consensus-eval wrote (tests/data/stores/schema<N>.sql, taken from
the commit that set it) with a row in every table; every older store upgrades in place to the current schema,
keeping every row (its labels become their first events); a read-only opening writes nothing and reads an older
store through an upgraded copy in memory; a store of a newer version is refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import cast

import pytest

from consensus_eval._errors import InputError
from consensus_eval.execution import labels, migrations
from consensus_eval.execution.migrations import SCHEMA, SCHEMA_VERSION, STEPS, version_of
from consensus_eval.execution.store import HumanLabelRecord, Store
from tests.conftest import ROOT

DDL = ROOT / "tests" / "data" / "stores"
#: the labels of the fixtures that have a human_labels table (schema 3 on): (kind, dimension, value, origin)
LABELS = [("score", "accuracy", 30.0, "own"), ("verdict", "accuracy", "agree", "own"),
          ("comment", None, None, "own")]
#: the cases of every fixture (one ``meta.cases`` value before schema 11)
CASES = [{"id": "001", "record": "主诉：头痛三天。"}, {"id": "002", "record": "主诉：咳嗽。", "system": "a"}]


def _ddl(version: int) -> str:
    return (DDL / f"schema{version}.sql").read_text(encoding="utf-8")


def _insert_events(con: sqlite3.Connection, events: list[labels.LabelEvent]) -> None:
    """Insert events into a label_events table of any version (the columns it has: schema 10 added two)."""
    have = {r[1] for r in con.execute("PRAGMA table_info(label_events)")}
    cols = [c for c in labels.EVENT_COLUMNS if c in have]
    con.executemany(f"INSERT INTO label_events ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                    ([getattr(ev, c) for c in cols] for ev in events))


def _fixture(path: Path, version: int) -> Path:
    """A store as consensus-eval wrote it at ``version``: its DDL, one call, its plan row, the run's meta, and (from
    schema 3) three labels; from schema 4 a batch, from 5 a spot check and (6) a criterion label."""
    con = sqlite3.connect(path)
    con.executescript(_ddl(version))
    cols = {r[1] for r in con.execute("PRAGMA table_info(calls)")}
    row = {"request_hash": "h1", "case_id": "001", "dimension": "accuracy", "judge": "rules", "run": 0,
           "status": "ok", "judgment": json.dumps({"dimension": "accuracy", "deductions": []}), "finished_at": 1.0}
    if "error_kind" in cols:
        row["error_kind"] = None
    con.execute(f"INSERT INTO calls ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", list(row.values()))
    con.execute("INSERT INTO plan VALUES ('h1', '001', 'accuracy', 'rules', 0, 0)")
    con.executemany("INSERT INTO meta VALUES (?, ?)", [("schema_version", str(version)), ("config", "{}"),
                                                       ("rubric", "{}"), ("cases", json.dumps(CASES))])
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "human_labels" in tables:
        for i, (kind, dim, value, _) in enumerate(LABELS):
            con.execute("INSERT INTO human_labels (case_id, dimension, deduction_id, reviewer, kind, value, "
                        "labelled_at, source) VALUES ('001', ?, ?, 'li', ?, ?, ?, 'sheet.csv')",
                        (dim, "h1#d0" if kind == "verdict" else None, kind, value, 10.0 + i))
    if "batches" in tables:
        con.execute("INSERT INTO batches (key, judge, state, n_calls, created_at, updated_at) "
                    "VALUES ('b1', 'rules', 'collected', 1, 1, 1)")
    if "label_events" in tables:  # schema 8: the labels as their first events
        _insert_events(con, [labels.LabelEvent(
            reviewer="li", case_id="001", dimension=dim, deduction_id="h1#d0" if kind == "verdict" else None,
            kind=cast("labels.LabelKind", kind), value=cast("float | str | None", value),
            phase="blind" if kind == "score" else "revealed", source="sheet.csv",
            at=10.0 + i) for i, (kind, dim, value, _) in enumerate(LABELS)])
        _insert_events(con, [labels.LabelEvent(
            reviewer="li", case_id="001", dimension="safety", deduction_id="meds", kind="criterion", value="met",
            points=5, phase="blind", source="review", at=13.0)])
    if "spot_checks" in tables:
        con.execute("INSERT INTO spot_checks (case_id, position, probability, stratum, seed, drawn_at) "
                    "VALUES ('001', 0, 0.5, 'all', 0, 1)")
    if version >= 6 and "human_labels" in tables:
        con.execute("INSERT INTO human_labels (case_id, dimension, deduction_id, reviewer, kind, value, points, "
                    "labelled_at, source, origin) VALUES ('001', 'safety', 'meds', 'li', 'criterion', 'met', 5, 13, "
                    "'review', 'own')")
    con.commit()
    con.close()
    return path


def _shape(con: sqlite3.Connection) -> dict[str, list[str]]:
    """Every table and its columns (SQLite's own table aside)."""
    tables = sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                    if r[0] != "sqlite_sequence")
    return {t: sorted(r[1] for r in con.execute(f"PRAGMA table_info({t})")) for t in tables}


def _expected_shape(version: int) -> dict[str, list[str]]:
    con = sqlite3.connect(":memory:")
    con.executescript(SCHEMA if version == SCHEMA_VERSION else _ddl(version))
    shape = _shape(con)
    con.close()
    return shape


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_each_step_takes_a_store_of_its_version_to_the_next(tmp_path: Path, version: int) -> None:
    db = _fixture(tmp_path / "results.sqlite", version)
    con = sqlite3.connect(db, isolation_level=None)
    assert version_of(con) == version
    before = {t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in _shape(con)}
    step = STEPS[version]
    assert step is not None
    con.execute("BEGIN")
    step(con)
    con.execute("COMMIT")
    got = _shape(con)
    want = _expected_shape(version + 1)
    # the tables and columns that version wrote (a step may write a table in its later form: the labels' table
    # gets the columns of schema 6 at once, and the team's tables, made lazily before 6, may come earlier)
    assert set(want) <= set(got) and all(set(want[t]) <= set(got[t]) for t in want), (got, want)
    assert set(got) - set(want) <= {"reviewers", "assignments"}
    moved = version + 1 == 11       # meta.cases became the cases table's rows
    for table, n in before.items():
        if table in got:
            assert con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == n - (moved and table == "meta"), table
    if moved:
        assert [json.loads(b) for b, in con.execute("SELECT body FROM cases ORDER BY position")] == CASES
        assert con.execute("SELECT case_id FROM cases ORDER BY position").fetchall() == [("001",), ("002",)]
    if version + 1 == 8:          # the labels: each became its first event; the table went
        assert "human_labels" not in got
        assert con.execute("SELECT COUNT(*) FROM label_events").fetchone()[0] == before["human_labels"]
    con.close()


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_an_older_store_is_read_as_current_read_only_and_upgraded_in_place_writable(tmp_path: Path,
                                                                                    version: int) -> None:
    db = _fixture(tmp_path / "results.sqlite", version)
    labels = LABELS if version >= 3 else []
    before = db.read_bytes()
    with Store(db, read_only=True) as store:        # an upgraded copy in memory: nothing written
        got = [(lb.kind, lb.dimension, lb.value, lb.origin) for lb in store.human_labels()]
        assert [c.request_hash for c in store.calls()] == ["h1"]
        assert store.get_meta("schema_version") == SCHEMA_VERSION
        assert store.cases() == CASES and store.get_meta("cases") is None
    assert db.read_bytes() == before
    assert got[:len(labels)] == labels
    with Store(db) as store:
        assert store.cases() == CASES and store.get_meta("cases") is None
        assert [(lb.kind, lb.dimension, lb.value, lb.origin) for lb in store.human_labels()][:len(labels)] == labels
        assert [(ev.op, ev.at) for ev in store.label_events()][:len(labels)] == [
            ("set", 10.0 + i) for i in range(len(labels))]
        store.upsert_human_label(HumanLabelRecord(case_id="001", dimension="safety", deduction_id="allergy",
                                                  reviewer="li", kind="criterion", value="met", points=5))
        if version >= 5:   # drawn in the fixture: an own score of a spot-check case, upgraded as a blind one
            assert next(lb for lb in store.human_labels() if lb.kind == "score").phase == "blind"
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert _shape(con) == _expected_shape(SCHEMA_VERSION)    # the same schema as a new store
    assert con.execute("SELECT COUNT(*) FROM batch_calls").fetchone()[0] == 0
    con.close()


def test_a_new_store_is_created_at_the_current_version_and_its_history_is_append_only(tmp_path: Path) -> None:
    db = tmp_path / "results.sqlite"
    with Store(db) as store:
        store.upsert_human_label(HumanLabelRecord(case_id="c1", dimension="safety", reviewer="li", kind="score",
                                                  value=3, source="review"))
        assert store.get_meta("schema_version") == SCHEMA_VERSION == 11
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 11
    assert _shape(con) == _expected_shape(SCHEMA_VERSION)
    for sql in ("UPDATE label_events SET value = 4", "DELETE FROM label_events"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            con.execute(sql)
    con.close()


@pytest.mark.parametrize("read_only", [True, False])
def test_a_store_of_a_newer_version_is_refused_naming_the_file(tmp_path: Path, read_only: bool) -> None:
    db = tmp_path / "results.sqlite"
    Store(db).close()
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 12")
    con.commit()
    con.close()
    before = db.read_bytes()
    with pytest.raises(InputError) as e:
        Store(db, read_only=read_only)
    msg = str(e.value)
    assert msg.startswith(f"{db}: ") and "schema version 12" in msg and "newer consensus-eval" in msg
    assert "reads schema versions 1 to 11" in msg
    if read_only:
        assert db.read_bytes() == before


def test_a_store_whose_version_is_not_a_number_is_refused(tmp_path: Path) -> None:
    db = _fixture(tmp_path / "results.sqlite", 7)
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = '\"six\"' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    with pytest.raises(InputError, match="not a consensus-eval store"):
        Store(db)


def test_the_steps_are_numbered_one_per_version() -> None:
    assert len(STEPS) == SCHEMA_VERSION and STEPS[0] is None and all(STEPS[1:])
    assert [s.__name__ for s in STEPS[1:] if s] == [f"_to_{n}" for n in range(2, SCHEMA_VERSION + 1)]
    assert migrations.SCHEMA.count("CREATE TABLE") == 12


def test_a_spot_check_drawn_before_the_split_is_split_by_the_same_draw(tmp_path: Path) -> None:
    """Schema 9: spot_checks.part. A sample of an older store reads back without parts; asking for the same draw
    again splits it (the same cases, the draw's seed) without a redraw, and the split is stored."""
    from consensus_eval import api
    from consensus_eval.analysis.spotcheck import split
    from consensus_eval.domain.cases import load_cases

    out = tmp_path / "run"
    api.run(api.prepare(load_cases(ROOT / "examples" / "cases.jsonl").cases, "configs/default.yaml"), out)
    drawn = api.spot_check(out, 6, seed=4).sample
    assert sorted(r.part or "" for r in drawn) == ["heldout"] * 3 + ["tuning"] * 3
    con = sqlite3.connect(out / "results.sqlite")
    con.execute("UPDATE spot_checks SET part = NULL")  # as step 9 leaves a sample drawn before it
    con.commit()
    con.close()
    with Store(out / "results.sqlite", read_only=True) as store:
        assert {r.part for r in store.spot_checks()} == {None}
    again = api.spot_check(out, 6, seed=4)
    assert not again.drawn and [(r.case_id, r.part) for r in again.sample] == [(r.case_id, r.part) for r in drawn]
    with Store(out / "results.sqlite", read_only=True) as store:
        assert [r.part for r in store.spot_checks()] == [r.part for r in drawn]
    assert split(drawn, 4) == drawn  # a function of the sample and the seed


@pytest.mark.parametrize("read_only", [True, False])
@pytest.mark.parametrize("value", ['[{"id": "001"', '{"id": "001"}', '[{"record": "no id"}]'])
def test_a_damaged_cases_value_of_an_older_store_is_refused_and_nothing_is_written(tmp_path: Path, read_only: bool,
                                                                                  value: str) -> None:
    """Schema 11 moves ``meta.cases`` into the cases table; a value that is not a list of cases with an id stops
    the step: the store, named, is left as it was."""
    db = _fixture(tmp_path / "results.sqlite", 10)
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = ? WHERE key = 'cases'", (value,))
    con.commit()
    con.close()
    before, rows = db.read_bytes(), _rows(db)
    with pytest.raises(InputError) as e:
        Store(db, read_only=read_only)
    msg = str(e.value)
    assert msg.startswith(f"{db}: damaged store: meta 'cases' is not ") and "move it away" in msg
    assert _rows(db) == rows        # the step rolled back (a writable opening may switch the journal's mode)
    if read_only:
        assert db.read_bytes() == before


def _rows(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return list(con.iterdump())
    finally:
        con.close()


def test_a_run_s_cases_are_rows_so_no_value_grows_with_the_run(tmp_path: Path) -> None:
    """SQLite refuses a value above its length limit (1 GB by default: about 370,000 records of 2.7 KB as one
    JSON list). With the limit lowered to 10,000 bytes, 40 cases of 1,000 characters (~3 KB each in UTF-8) are
    stored and read back in order; as one meta value, the way schema 10 kept them, they are refused."""
    cases = [{"id": f"c{i:03d}", "record": "主诉" * 500} for i in range(40)]
    with Store(tmp_path / "results.sqlite") as store:
        store._db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 10_000)
        store.set_cases(cases)
        assert store.cases() == cases
        with pytest.raises(sqlite3.DataError, match="too big"):
            store._db.execute("INSERT INTO meta VALUES ('old_cases', ?)", (json.dumps(cases, ensure_ascii=False),))
        store.set_cases(cases[:3])  # replaced, not added to
        assert store.cases() == cases[:3]
        with pytest.raises(Exception, match="set_cases"):
            store.set_meta("cases", cases)
