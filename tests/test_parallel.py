"""Work beside the main process (:mod:`consensus_eval._parallel`): the result comes back from a forked child, its
error is raised again in the parent, a child that dies is a :class:`WorkerLost`, a block that raises stops the child
(its half-written file removed, the child waited for), and the work runs in place where forking cannot serve. A
rebuild in two processes writes the same bytes as in one.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from consensus_eval import _parallel
from consensus_eval._errors import InputError, WorkerLost
from consensus_eval._parallel import MIN_CASES, PROCESSES_ENV, beside, can_fork
from consensus_eval.domain.writable import atomic_writer
from consensus_eval.execution.store import CHECKED_NAME

#: a run large enough for a second process
BIG = MIN_CASES
forks = pytest.mark.skipif(not can_fork(), reason="this machine cannot fork a second process (one core, no fork)")


@forks
def test_the_result_comes_back_from_another_process() -> None:
    parent = os.getpid()
    with beside(lambda: (os.getpid(), [x * x for x in range(1000)]), cases=BIG) as pending:
        mine = sum(range(1000))
        pid, squares = pending.result()
    assert pid != parent and squares == [x * x for x in range(1000)] and mine == 499500
    assert pending.result() == (pid, squares)   # asked twice: the same


@forks
def test_the_childs_error_is_raised_in_the_parent_as_it_was() -> None:
    def fails() -> None:
        raise InputError("cases.jsonl line 3: field 'id': missing")

    with pytest.raises(InputError, match=r"cases\.jsonl line 3: field 'id': missing"), beside(fails, cases=BIG):
        pass   # not asked for: leaving the block raises it


class _Unpicklable(Exception):
    def __init__(self, a: int, b: int) -> None:   # pickle rebuilds it with one argument: it cannot
        super().__init__(f"{a}/{b}")


@forks
def test_an_error_pickle_cannot_carry_arrives_as_text() -> None:
    def fails() -> None:
        raise _Unpicklable(1, 2)

    with pytest.raises(WorkerLost, match=r"failed: _Unpicklable: 1/2"), beside(fails, cases=BIG) as pending:
        pending.result()


@forks
def test_a_child_killed_is_a_worker_lost_naming_the_signal() -> None:
    def dies() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(WorkerLost, match=r"without its result \(killed by SIGKILL, perhaps out of memory\).*"
                                         rf"{PROCESSES_ENV}=1"), beside(dies, cases=BIG) as pending:
        pending.result()


@forks
def test_a_block_that_raises_stops_the_child_which_removes_its_half_written_file(tmp_path: Path) -> None:
    target = tmp_path / "judgments.jsonl"
    target.write_text("the previous build\n", encoding="utf-8")
    started = tmp_path / "started"

    def writes_for_long() -> None:
        with atomic_writer(target) as f:
            f.write("half of a new build\n")
            f.flush()
            started.touch()
            for _ in range(6000):   # 60 s at most: stopped long before
                time.sleep(0.01)

    child = -1
    with pytest.raises(KeyboardInterrupt), beside(writes_for_long, cases=BIG) as pending:
        child = pending._pid or -1
        for _ in range(6000):
            if started.exists():
                break
            time.sleep(0.01)
        assert started.exists()
        raise KeyboardInterrupt   # Ctrl-C in the parent
    with pytest.raises(ChildProcessError):
        os.waitpid(child, os.WNOHANG)   # reaped: no child outlives its block
    assert target.read_text(encoding="utf-8") == "the previous build\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["judgments.jsonl", "started"]


def test_one_process_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROCESSES_ENV, "1")
    assert not can_fork()
    with beside(os.getpid, cases=BIG) as pending:
        assert pending.result() == os.getpid()


@forks
def test_one_process_beside_another_thread() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not can_fork()
        with beside(os.getpid, cases=BIG) as pending:
            assert pending.result() == os.getpid()
    finally:
        stop.set()
        thread.join()
    assert can_fork()


def test_in_place_the_error_is_raised_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROCESSES_ENV, "1")
    ran = []

    def fails() -> None:
        raise InputError("bad")

    with pytest.raises(InputError, match="bad"), beside(fails, cases=BIG):
        ran.append("block")
    assert ran == []


def test_the_module_says_where_its_figures_are() -> None:
    assert "bench/README.md" in (_parallel.__doc__ or "")


@forks
def test_a_block_error_keeps_what_the_child_wrote_and_is_the_error_raised(tmp_path: Path) -> None:
    target = tmp_path / "judgments.jsonl"

    def writes() -> None:
        with atomic_writer(target) as f:
            f.write("the new build\n")

    with pytest.raises(InputError, match="report-cases: is not a folder"), beside(writes, cases=BIG):
        raise InputError("report-cases: is not a folder")
    assert target.read_text(encoding="utf-8") == "the new build\n"


_KILLED_PARENT = """
import os, signal, sys, time
from pathlib import Path
from consensus_eval._parallel import MIN_CASES, beside
from consensus_eval.domain.writable import atomic_writer

folder = Path(sys.argv[1])

def writes_for_long():
    with atomic_writer(folder / "judgments.jsonl") as f:
        f.write("half of a new build\\n")
        f.flush()
        (folder / "child").write_text(str(os.getpid()))
        for _ in range(6000):
            time.sleep(0.01)

with beside(writes_for_long, cases=MIN_CASES):
    for _ in range(6000):
        if (folder / "child").exists():
            break
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGKILL)
"""


@forks
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="the system's parent-death signal is Linux's")
def test_a_child_whose_parent_is_killed_stops_and_removes_its_half_written_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "judgments.jsonl").write_text("the previous build\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", _KILLED_PARENT, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    child = int((tmp_path / "child").read_text())
    for _ in range(6000):   # the child's exit follows its parent's: wait for it (60 s at most)
        if not Path(f"/proc/{child}").exists() or "Z" in _state(child):
            break
        time.sleep(0.01)
    assert not Path(f"/proc/{child}").exists() or "Z" in _state(child)
    assert (tmp_path / "judgments.jsonl").read_text(encoding="utf-8") == "the previous build\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["child", "judgments.jsonl"]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _outputs(folder: Path) -> dict[str, bytes]:
    """Every output file's bytes, the minute the reports were written masked (not the store, nor the record of its file
    found whole: CHECKED_NAME)."""
    return {str(p.relative_to(folder)): re.sub(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC", b"<minute>", p.read_bytes())
            for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.startswith(("results.sqlite", CHECKED_NAME))}


@forks
def test_a_rebuild_in_several_processes_writes_what_one_process_writes(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # judgments.jsonl and consensus beside the analysis, the bootstraps beside the audit, every other page file of
    # report.html beside the others: the same bytes as one process writing them one after the other
    from consensus_eval import api
    from consensus_eval.output.report import write_reports
    from tests.test_audit import build_panel_store
    from tests.test_report_pages import _cases

    monkeypatch.setattr(_parallel, "MIN_CASES", 0)   # 7 cases: forked as a large run is
    written = {}
    real_fork = os.fork
    forked: list[int] = []

    def counting_fork() -> int:
        pid = real_fork()
        if pid:
            forked.append(pid)
        return pid

    for processes in ("1", "several"):
        if processes == "1":
            monkeypatch.setenv(PROCESSES_ENV, "1")
        else:
            monkeypatch.delenv(PROCESSES_ENV)
        out = tmp_path / processes / "run"   # the same name: the reports name the folder
        build_panel_store(out, cases=_cases(7))
        forked.clear()
        monkeypatch.setattr(os, "fork", counting_fork)
        results = api.rebuild(out, n_boot=200)
        write_reports(results, out, "en", stem="report.en", page=3)   # 7 cases: report.html and 2 page files
        monkeypatch.setattr(os, "fork", real_fork)
        assert len(forked) == (0 if processes == "1" else 3), forked
        written[processes] = _outputs(out)
    assert "report.en-cases/0003.html" in written["1"]
    assert written["several"] == written["1"], [k for k in written["1"] if written["1"][k] != written["several"].get(k)]


def test_one_process_when_memory_would_not_hold_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parallel, "_room_for_a_copy", lambda: False)
    assert not can_fork()
    with beside(os.getpid, cases=BIG) as pending:
        assert pending.result() == os.getpid()


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc")
def test_the_room_for_a_copy_is_read_from_the_system() -> None:
    held = _parallel._kib("/proc/self/status", "VmRSS:")
    free = _parallel._kib("/proc/meminfo", "MemAvailable:")
    assert held is not None and free is not None and held > 0
    # the room is at most the system's available memory (a container's limit may cut it further)
    assert not _parallel._room_for_a_copy() or free >= 2 * held * 0.9
    assert _parallel._kib("/proc/self/status", "NoSuchKey:") is None
    assert _parallel._kib("/nonexistent", "VmRSS:") is None


@forks
def test_a_small_run_stays_in_one_process() -> None:
    with beside(os.getpid, cases=MIN_CASES - 1) as pending:
        assert pending.result() == os.getpid()
    with beside(os.getpid, cases=MIN_CASES) as pending:
        assert pending.result() != os.getpid()
