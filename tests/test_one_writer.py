"""docs/limits.md, 'One writer per run'. A command that writes a run holds its lock; a second writer is refused at once
naming the holder (exit 6, nothing written) or waits with --wait-lock; a damaged store is never written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from consensus_eval.cli import app
from consensus_eval.execution.lock import LOCK_NAME, acquire, holder, release, run_lock
from consensus_eval.execution.store import STORE_NAME, Store
from tests.bad_input_harness import EXAMPLES, scored_run_in
from tests.cli_zygote import Zygote
from tests.fake_server import FakeConfig, FakeServer
from tests.helpers import cli_run, lock_held_elsewhere

ROOT = Path(__file__).resolve().parents[1]
SHEET = "case_id,accuracy,completeness,standardization\ncase-01,30,30,20\n"


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scored_run_in(tmp_path_factory.mktemp("one-writer"))


@pytest.fixture
def run(scored: Path, tmp_path: Path) -> Path:
    shutil.copytree(scored, tmp_path / "run")
    return tmp_path / "run"


@pytest.fixture
def held(run: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the run's lock (`test holder`) for the test's duration."""
    with lock_held_elsewhere(run, "test holder") as proc:
        yield proc


def labels(run: Path) -> int:
    con = sqlite3.connect(f"file:{run / STORE_NAME}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT COUNT(*) FROM label_events WHERE op != 'reveal'").fetchone()[0])  # label events
    finally:
        con.close()


@pytest.mark.parametrize("args", [
    ("human", "import", "{d}/s.csv", "--run", "{run}"),
    ("audit", "{run}", "--spot-check", "2"),
    ("audit", "{run}", "--human", "{d}/s.csv"),
    ("report", "{run}", "--human", "{d}/s.csv"),
    # team changes too: the holder writes data (exclusive); beside the review server they run
    # (tests/test_team_beside_review.py)
    ("reviewers", "add", "ann", "--run", "{run}"),
    ("reviewers", "remove", "ann", "--run", "{run}"),
    ("reviewers", "assign", "--run", "{run}", "--per-case", "1"),
    ("score", "{d}/cases.jsonl", "--out", "{run}"),
], ids=lambda a: "-".join(a[:2]).replace("{run}", "run").replace("{d}/", ""))
def test_a_second_writer_is_refused_at_once_naming_the_holder(args: tuple[str, ...], run: Path,
                                                               held: subprocess.Popen[str]) -> None:
    d = run.parent
    (d / "s.csv").write_text(SHEET, encoding="utf-8")
    (d / "cases.jsonl").write_text(EXAMPLES.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    before = (run / STORE_NAME).read_bytes()
    res = CliRunner().invoke(app, [a.replace("{run}", str(run)).replace("{d}", str(d)) for a in args])
    assert res.exit_code == 6, res.output
    assert f"being written by `test holder` (pid {held.pid}" in res.output
    assert "--wait-lock" in res.output
    assert (run / STORE_NAME).read_bytes() == before   # nothing written


def test_readers_run_beside_a_writer(run: Path, held: subprocess.Popen[str]) -> None:
    for args in (("audit", str(run)), ("reliability", str(run), "--bootstrap", "0"), ("report", str(run)),
                 ("reviewers", "list", "--run", str(run))):
        res = CliRunner().invoke(app, list(args))
        assert res.exit_code == 0, res.output


def test_wait_lock_waits_for_the_holder_then_writes(run: Path, held: subprocess.Popen[str]) -> None:
    (run.parent / "s.csv").write_text(SHEET, encoding="utf-8")
    waiter = Zygote.popen(["human", "import", str(run.parent / "s.csv"), "--run", str(run), "--wait-lock"], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)   # a process of its own, warm
    assert waiter.stderr is not None
    line = waiter.stderr.readline()
    assert f"waiting for `test holder` (pid {held.pid}" in line, line
    assert waiter.poll() is None and labels(run) == 0
    held.communicate("")          # the holder lets go
    out, err = waiter.communicate()
    assert waiter.returncode == 0, out + err
    assert labels(run) == 3


def test_a_killed_holder_leaves_no_lock_behind(run: Path, held: subprocess.Popen[str]) -> None:
    assert holder(run) is not None and holder(run)["pid"] == held.pid  # type: ignore[index]
    held.send_signal(signal.SIGKILL)
    held.wait()
    assert (run / LOCK_NAME).exists()   # the file stays, the lock does not: the system dropped it
    (run.parent / "s.csv").write_text(SHEET, encoding="utf-8")
    res = CliRunner().invoke(app, ["human", "import", str(run.parent / "s.csv"), "--run", str(run)])
    assert res.exit_code == 0, res.output
    assert not (run / LOCK_NAME).exists()   # taken over, and removed when let go


def test_the_lock_is_re_entrant_in_a_process_and_shared_by_its_threads(tmp_path: Path) -> None:
    first = acquire(tmp_path, "outer")
    assert first is not None and holder(tmp_path) == {**holder(tmp_path), "command": "outer"}  # type: ignore[dict-item]
    inner: list[object] = []
    t = threading.Thread(target=lambda: inner.append(acquire(tmp_path, "inner")))
    t.start()
    t.join()
    assert inner == [first] and first.count == 2
    with Store(tmp_path / STORE_NAME) as store:   # a store opened to write shares the hold
        store.set_meta("x", 1)
        assert first.count == 3
    release(first)
    release(first)
    assert first.count == 0 and not (tmp_path / LOCK_NAME).exists()


def test_a_thread_that_finds_the_lock_just_taken_by_another_thread_of_the_process_shares_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window between one thread locking the run's file and recording its hold: a second thread of the same
    process arriving then shares the hold once it is recorded, instead of being refused as if another process had
    the run (what CI met in test_two_connections_write_at_the_same_time). The first thread is held in that window
    by an event until the second has either finished (refused: the fault) or is blocked behind the first: no
    timing."""
    from consensus_eval.execution import lock

    in_window, leave_window, second_stuck_or_done = threading.Event(), threading.Event(), threading.Event()
    take, gate = lock._take_mode, lock._gate

    def take_then_pause(*args: object, **kwargs: object) -> tuple[int, int]:
        fds = take(*args, **kwargs)  # type: ignore[arg-type]
        if threading.current_thread().name == "first":
            in_window.set()
            leave_window.wait()
        return fds

    class Watched:
        """The folder's gate, telling when the second thread has to wait for it."""

        def __init__(self, real: threading.Lock) -> None:
            self.real = real

        def __enter__(self) -> None:
            if not self.real.acquire(blocking=False):
                if threading.current_thread().name == "second":
                    second_stuck_or_done.set()
                self.real.acquire()

        def __exit__(self, *exc: object) -> None:
            self.real.release()

    monkeypatch.setattr(lock, "_take_mode", take_then_pause)
    monkeypatch.setattr(lock, "_gate", lambda key: Watched(gate(key)))
    got: dict[str, object] = {}

    def take_it(name: str) -> None:
        try:
            got[name] = acquire(tmp_path, name)
        except Exception as e:  # noqa: BLE001 - asserted below
            got[name] = e
        finally:
            if name == "second":
                second_stuck_or_done.set()

    first = threading.Thread(target=take_it, args=("first",), name="first")
    second = threading.Thread(target=take_it, args=("second",), name="second")
    try:
        first.start()
        in_window.wait()
        second.start()
        second_stuck_or_done.wait()
    finally:
        leave_window.set()
        first.join()
        second.join()
    hold = got["first"]
    assert isinstance(hold, lock.Hold) and got["second"] is hold and hold.count == 2
    release(hold)
    release(hold)
    assert not (tmp_path / LOCK_NAME).exists()


def test_no_lock_is_taken_for_a_folder_that_is_not_there(tmp_path: Path) -> None:
    with run_lock(tmp_path / "nope", create=False) as hold:
        assert hold is None
    assert not (tmp_path / "nope").exists()


def _slow_panel(path: Path, url: str) -> Path:
    path.write_text(f"""\
rubric: medical_record
judges:
  - name: slow
    model: openai/fake-slow
    api_base: {url}/v1
    api_key_env: ONE_WRITER_KEY
    concurrency: 1
    max_retries: 0
    input_cost_per_token: 0
    output_cost_per_token: 0
""", encoding="utf-8")
    return path


def test_two_concurrent_score_runs_one_wins_the_other_is_refused_and_nothing_is_lost(tmp_path: Path) -> None:
    """Done-when: two `score` processes into one folder: the first writes every call; the second is refused at once
    (exit 6, naming the first's pid), writes nothing, and a rerun after it resumes with nothing to call."""
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(EXAMPLES.read_text(encoding="utf-8").splitlines(keepends=True)[:2]), encoding="utf-8")
    out = tmp_path / "out"
    env = {**os.environ, "ONE_WRITER_KEY": "sk-test-one-writer"}
    with FakeServer(FakeConfig(seed=5, latency_ms=300, max_lifetime_s=300)) as srv:
        config = _slow_panel(tmp_path / "panel.yaml", srv.url)
        cmd = ["score", str(cases), "-c", str(config), "--out", str(out)]
        # the first writer: a process of its own, forked from a warm one (tests/cli_zygote.py)
        first = Zygote.popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while (holder(out) or {}).get("pid") != first.pid:   # until it holds the run (6 calls of 0.3 s each)
            assert first.poll() is None
            time.sleep(0.01)
        second = CliRunner().invoke(app, cmd, env=env)   # this process: the second writer
        rest, err = first.communicate()
        n_first = len(srv.log)
        third = cli_run(cmd, cwd=ROOT, env=env)
        assert len(srv.log) == n_first   # the rerun called nothing: all was stored by the first
    assert first.returncode == 0, rest + err
    assert second.exit_code == 6, second.output
    assert f"`consensus-eval score` (pid {first.pid}" in second.output
    assert third.returncode == 0, third.stdout + third.stderr   # and it made no call (the server's log above)
    with Store.open_existing(out, read_only=True) as store:
        assert len([c for c in store.calls() if c.status == "ok"]) == 6
    assert json.loads((out / "reliability.json").read_text(encoding="utf-8"))
