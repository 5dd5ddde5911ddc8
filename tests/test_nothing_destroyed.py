"""docs/limits.md: outputs that never replace what they should not (special files, inputs), written through temporary
files unique per process and writer. (The corpus entries are in tests/hostile_corpus.py, ``kept-*``.)"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from consensus_eval._errors import InputError
from consensus_eval.domain.writable import atomic_writer, check_output_path, check_outputs


def test_two_writers_of_one_output_never_share_a_temporary_file(tmp_path: Path) -> None:
    """Two writers of the same file at once (threads here; processes alike: the name holds the pid) both finish,
    and the file is one of the two whole texts, never a mix; no temporary file is left."""
    target = tmp_path / "report.md"
    both_open = threading.Barrier(2)
    errors: list[BaseException] = []

    def write(text: str) -> None:
        try:
            with atomic_writer(target) as f:
                f.write(text * 1000)
                both_open.wait(timeout=30)   # the two temporary files exist at the same time
                f.write(text * 1000)
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert target.read_text(encoding="utf-8") in ("a" * 2000, "b" * 2000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_a_new_output_has_the_mode_of_a_new_file(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        with atomic_writer(tmp_path / "x.csv") as f:
            f.write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "x.csv").stat().st_mode) == 0o644


@pytest.mark.parametrize("kind", ["fifo", "devnull", "folder"])
def test_only_a_regular_file_is_ever_replaced(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out.csv"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "devnull":
        target.symlink_to(os.devnull)
    else:
        target.mkdir()
    before = os.lstat(target).st_mode
    with pytest.raises(InputError, match=r"out\.csv: is a"):
        check_output_path(target, "the sheet")
    with pytest.raises(InputError, match=r"out\.csv: is a"), atomic_writer(target) as f:
        f.write("x")
    assert os.lstat(target).st_mode == before
    assert not list(tmp_path.glob("*.tmp"))


def test_an_input_is_never_an_output_by_any_spelling(tmp_path: Path) -> None:
    gold = tmp_path / "gold.json"
    gold.write_text("[]", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.json").symlink_to(gold)
    os.link(gold, tmp_path / "hard.json")
    for spelling in (gold, tmp_path / "sub" / ".." / "gold.json", tmp_path / "link.json", tmp_path / "hard.json"):
        with pytest.raises(InputError, match="is the gold file"):
            check_output_path(spelling, "the per-tree file", inputs=[("the gold file", gold)])
    # another file, and a file not there yet, are fine
    assert check_output_path(tmp_path / "new.jsonl", "x", inputs=[("the gold file", gold)]).name == "new.jsonl"
    assert str(check_output_path("-", "x")) == "-"


def test_a_run_folder_refuses_outputs_over_its_inputs(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "report.md").write_text("{}", encoding="utf-8")
    with pytest.raises(InputError, match="is the cases file"):
        check_outputs(out, inputs=[("the cases file", out / "report.md")])
    os.mkfifo(out / "report.html")
    with pytest.raises(InputError, match=r"report\.html: is a named pipe"):
        check_outputs(out)


def test_a_name_too_long_is_a_clear_refusal(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot use this path"):
        check_output_path(tmp_path / ("x" * 300), "the sheet")
    with pytest.raises(InputError, match="cannot use this path"):
        check_outputs(tmp_path / ("x" * 300))
