"""A store is checked whole (SQLite's ``quick_check``) once per state of its file, not at every open
(execution/store.py's docstring, docs/limits.md "Damaged stores"): the checks are counted, and a store changed from
outside after its check (bytes rewritten, its modification time put back, a copy) is checked again and refused
when damaged."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from consensus_eval import InputError, api
from consensus_eval.execution import store as store_mod
from consensus_eval.execution.store import CHECKED_NAME, STORE_NAME, Store
from tests.bad_input_harness import _read_only
from tests.big_run import build_big_run


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """The stores SQLite's whole-file check reads, one entry per check, in order."""
    seen: list[Path] = []
    real = store_mod._quick_check

    def counted(db: sqlite3.Connection, path: Path) -> None:
        seen.append(Path(path))
        real(db, path)

    monkeypatch.setattr(store_mod, "_quick_check", counted)
    yield seen


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return build_big_run(tmp_path / "run", 12, 2)


def _read(folder: Path) -> int:
    """Open ``folder``'s store read-only and read its cases (what report, audit and export begin with)."""
    with Store.open_existing(folder, read_only=True) as store:
        return store.case_count()


def _damage_calls(path: Path) -> None:
    """The calls table's root page header overwritten, as a disk or a copy damages a page."""
    con = sqlite3.connect(path)
    try:
        size = con.execute("PRAGMA page_size").fetchone()[0]
        page = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'calls'").fetchone()[0]
    finally:
        con.close()
    with open(path, "r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\xff" * 64)


def test_a_store_written_and_closed_is_not_read_whole_again_by_its_readers(run: Path, checks: list[Path]) -> None:
    assert (run / CHECKED_NAME).is_file()   # the writer that made it recorded it
    assert [_read(run) for _ in range(3)] == [12, 12, 12]
    api.rebuild(run, n_boot=0)
    _read(run)
    assert checks == []


def test_a_store_written_from_outside_is_checked_again_once(run: Path, checks: list[Path]) -> None:
    path = run / STORE_NAME
    path.write_bytes(path.read_bytes())   # the same bytes, written by something else
    assert [_read(run) for _ in range(3)] == [12, 12, 12]
    assert checks == [path]


def test_a_store_damaged_after_its_check_is_refused_even_with_its_times_put_back(run: Path,
                                                                                 checks: list[Path]) -> None:
    path = run / STORE_NAME
    _read(run)
    before = path.stat()
    _damage_calls(path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))   # the change time cannot be put back
    damaged = path.read_bytes()
    for opening in (lambda: _read(run), lambda: api.rebuild(run, n_boot=0), lambda: api.load_run(run, n_boot=0)):
        with pytest.raises(InputError, match="the store is damaged"):
            opening()
    assert path.read_bytes() == damaged   # nothing written to it
    assert checks == [path, path, path]   # never recorded whole: checked at each open


def test_a_copy_of_a_run_is_checked_once_where_it_is(run: Path, tmp_path: Path, checks: list[Path]) -> None:
    copy = Path(shutil.copytree(run, tmp_path / "copy"))
    assert (copy / CHECKED_NAME).is_file()   # the original's record came with it, and names another file
    assert [_read(copy) for _ in range(2)] == [12, 12]
    assert checks == [copy / STORE_NAME]


def test_a_store_with_a_journal_beside_it_is_checked_at_each_open(run: Path, checks: list[Path]) -> None:
    with Store.open_existing(run) as writer:   # a writer at work: its WAL journal is beside the store
        assert (run / f"{STORE_NAME}-wal").exists()
        assert [_read(run) for _ in range(2)] == [12, 12]
        assert writer.case_count() == 12
    assert checks == [run / STORE_NAME] * 2
    _read(run)   # closed by the writer that found it whole: recorded again
    assert len(checks) == 2


def test_a_read_only_folder_is_checked_at_each_open_and_nothing_is_written(checks: list[Path]) -> None:
    base = Path(tempfile.mkdtemp(prefix="ce-check-"))   # reachable by the user a root test runs as (_read_only)
    try:
        base.chmod(0o755)
        run = build_big_run(base / "run", 12, 2)
        (run / CHECKED_NAME).unlink()
        names = sorted(p.name for p in run.iterdir())
        with _read_only(run):
            assert [_read(run) for _ in range(2)] == [12, 12]
        assert checks == [run / STORE_NAME] * 2
        assert sorted(p.name for p in run.iterdir()) == names
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_stale_or_unreadable_record_means_a_check(run: Path, checks: list[Path]) -> None:
    (run / CHECKED_NAME).write_text("not json", encoding="ascii")
    _read(run)
    assert checks == [run / STORE_NAME]
    _read(run)   # the check rewrote the record
    assert len(checks) == 1


def test_a_store_written_from_outside_during_its_check_is_not_recorded_whole(run: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (run / CHECKED_NAME).unlink()
    real = store_mod._quick_check
    seen: list[Path] = []

    def written_meanwhile(db: sqlite3.Connection, path: Path) -> None:
        real(db, path)
        seen.append(path)
        if len(seen) == 1:   # the file rewritten after the check read it, before its identity is recorded
            path.write_bytes(path.read_bytes())

    monkeypatch.setattr(store_mod, "_quick_check", written_meanwhile)
    _read(run)
    assert not (run / CHECKED_NAME).exists()
    _read(run)
    _read(run)
    assert len(seen) == 2   # checked again, then recorded


def test_a_store_of_another_name_leaves_no_record(tmp_path: Path) -> None:
    """A merge writes its store under a temporary name, then renames it: no record is left under that name."""
    part = tmp_path / f".{STORE_NAME}.merging-1"
    with Store(part) as store:
        store.set_meta("config", {})
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".checked")) == []
