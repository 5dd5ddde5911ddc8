"""The bad-input harness's limits (tests/bad_input_harness.py): CPU time, not wall-clock time, makes an entry a
hang, and a wall-clock liveness bound catches an entry blocked without using CPU; in-process, in a new interpreter
and in a process forked from the warm one (tests/cli_zygote.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tests.bad_input_harness as harness
from tests.bad_input_harness import ROOT, Entry, classify, run_entry
from tests.cli_zygote import Zygote
from tests.helpers import write_cases


@pytest.fixture
def empty_run(tmp_path: Path) -> Path:
    """What run_entry copies to ``{d}/run``: these entries do not read it."""
    run = tmp_path / "scored"
    run.mkdir()
    return run


def _classify(entry: Entry, tmp_path: Path, run: Path) -> tuple[str, str]:
    d = tmp_path / "d"
    d.mkdir()
    return classify(entry, d, run_entry(entry, d, run))


def _spin(d: Path) -> None:
    while True:
        pass


def _two_fifos(d: Path) -> None:
    os.mkfifo(d / "p.json")
    os.mkfifo(d / "g.json")


def _sleep(d: Path) -> None:
    time.sleep(60)


def test_an_in_process_entry_over_its_cpu_limit_is_a_hang(tmp_path: Path, empty_run: Path) -> None:
    cls, why = _classify(Entry("spin", call=_spin, timeout=0.3), tmp_path, empty_run)
    assert (cls, why) == ("hang", "over 0.3 s of CPU")


def test_an_in_process_entry_blocked_without_cpu_is_caught_by_the_liveness_bound(
        tmp_path: Path, empty_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "LIVENESS_MIN_S", 0.5)
    cls, why = _classify(Entry("sleep", call=_sleep, timeout=0.01), tmp_path, empty_run)
    assert cls == "hang" and "liveness bound" in why, why


def test_waiting_costs_an_in_process_entry_no_cpu(tmp_path: Path, empty_run: Path) -> None:
    """0.5 s asleep under a 0.2 s CPU limit is no hang: a loaded machine's wait does not count."""
    cls, why = _classify(Entry("nap", call=lambda d: time.sleep(0.5), exit=0, timeout=0.2), tmp_path, empty_run)
    assert cls == "handled", why


#: an entry about the console's encoding runs in a new interpreter (not forked from the warm one)
NEW_INTERPRETER = {"PYTHONIOENCODING": "utf-8"}


#: a command that only burns CPU, whatever the package's speed: ``python -m timeit`` of an endless loop
SPIN = ("timeit", "-n", "1", "while True: pass")


def test_a_new_interpreter_over_its_cpu_limit_is_killed_and_a_hang(tmp_path: Path) -> None:
    """A new interpreter gets the entry's limit of CPU (SIGXCPU), and that end is classified as a hang."""
    proc = subprocess.run([sys.executable, "-m", *SPIN], preexec_fn=harness._limits(1), capture_output=True,
                          timeout=600)  # a liveness bound: one second of CPU in fact
    assert proc.returncode == -signal.SIGXCPU, proc
    out = harness._ended(proc.returncode, proc.stdout, proc.stderr, 1.0, killed=False)
    entry = Entry("spin", ("score",), exit=0, proc=True, timeout=1, env=NEW_INTERPRETER)
    assert classify(entry, tmp_path, out) == ("hang", "over 1 s of CPU")


def test_a_new_interpreter_blocked_without_cpu_is_killed_by_the_liveness_bound(
        tmp_path: Path, empty_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A named pipe nobody writes: the command blocks opening it, using no CPU."""
    monkeypatch.setattr(harness, "LIVENESS_MIN_S", 3.0)
    entry = Entry("fifo", ("metrics", "text2dt", "{d}/p.json", "{d}/g.json"), exit=0, proc=True, timeout=0.1,
                  env=NEW_INTERPRETER,
                  setup=_two_fifos)
    cls, why = _classify(entry, tmp_path, empty_run)
    assert cls == "hang" and "liveness bound" in why, why


# --------------------------------------------------------------------------- the warm process (tests/cli_zygote.py)


def test_a_forked_command_is_a_process_of_its_own(tmp_path: Path) -> None:
    """What ``python -m consensus_eval.cli`` gives: the exit code, stdout and stderr apart, the working folder and
    the environment it was given."""
    cases = write_cases(tmp_path / "cases.jsonl", 2)
    env = {**os.environ, "COLUMNS": "70"}  # the zygote's own is unset (80): the child's console reads the child's
    ended = Zygote.run(["score", str(cases), "--dry-run"], env=env, cwd=ROOT, cpu_s=60,
                       memory=harness.SUBPROCESS_MEMORY, liveness_s=600)
    assert (ended.status, ended.killed) == (0, False), ended.stderr.decode()
    lines = ended.stdout.decode().splitlines()
    assert max(map(len, lines)) == 70, lines
    assert any(line.split() == ["│", "rules", "│", "rules", "│", "6", "│", "0", "│", "0", "│", "0.0000", "│", "0.0000",
                                "│", "0.0000", "│"] for line in lines), lines
    assert ended.cpu_s > 0
    refused = Zygote.run(["score", "missing.jsonl"], env=env, cwd=tmp_path, liveness_s=600)
    assert refused.status == 2 and b"missing.jsonl" in refused.stdout + refused.stderr
    assert b"Traceback" not in refused.stdout + refused.stderr and b"Warning" not in refused.stderr, refused


def test_a_forked_command_is_a_popen(tmp_path: Path) -> None:
    """:meth:`Zygote.popen` as ``subprocess.Popen``: a pid of its own, text pipes (stderr into stdout), stdin, poll
    while it runs, a signal's exit status, and two commands at once."""
    stdin_reader = Zygote.popen(["-n", "1", "-r", "1", "import sys; print(sys.stdin.read().upper(), file=sys.stderr)"],
                                module="timeit", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    assert stdin_reader.pid not in (os.getpid(), os.getppid())
    assert stdin_reader.poll() is None  # it waits for its stdin
    sleeper = Zygote.popen(["-n", "1", "-r", "1", "import time; time.sleep(600)"], module="timeit")
    sleeper.send_signal(signal.SIGTERM)
    assert sleeper.wait(600) == -signal.SIGTERM  # a liveness bound
    out, err = stdin_reader.communicate("ça va\r\n", timeout=600)
    assert out.startswith("ÇA VA\n\n1 loop, best of 1: ") and (err, stdin_reader.returncode) == (None, 0), out


def test_a_forked_command_ends_on_an_uncaught_ctrl_c_as_the_interpreter_does(tmp_path: Path) -> None:
    """An uncaught KeyboardInterrupt: the traceback, then the end by SIGINT (-2; 130 in a shell), not exit 1 (the
    interpreter, run on the same script, is the oracle)."""
    script = tmp_path / "interrupted.py"
    script.write_text("raise KeyboardInterrupt\n", encoding="utf-8")
    ended = Zygote.run([str(script)], module="cProfile", env={**os.environ}, cwd=tmp_path, liveness_s=600)
    real = subprocess.run([sys.executable, "-m", "cProfile", str(script)], cwd=tmp_path, capture_output=True,
                          check=False)
    assert (ended.status, ended.killed) == (real.returncode, False) == (-signal.SIGINT, False), ended
    assert ended.stderr.rstrip().endswith(b"KeyboardInterrupt") and real.stderr.rstrip().endswith(b"KeyboardInterrupt")


def test_a_forked_command_over_its_cpu_limit_is_ended_by_sigxcpu(tmp_path: Path) -> None:
    ended = Zygote.run(list(SPIN[1:]), module=SPIN[0], env={**os.environ}, cwd=ROOT, cpu_s=1,
                       memory=harness.SUBPROCESS_MEMORY, liveness_s=600)
    assert ended.status == -signal.SIGXCPU and not ended.killed and ended.cpu_s > 0.5, ended


def test_a_forked_command_blocked_without_cpu_is_killed_at_the_liveness_bound(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p.json")
    ended = Zygote.run(["metrics", "text2dt", str(tmp_path / "p.json"), str(tmp_path / "p.json")],
                       env={**os.environ}, cwd=ROOT, liveness_s=2)
    assert ended.killed and ended.status == -signal.SIGKILL


def test_a_forked_command_ends_with_the_tests_process_that_started_it() -> None:
    """A tests' process killed (kill -9) while its forked command runs leaves no process behind: the command's
    monitor kills it, and the zygote ends."""
    code = ("import sys, time; from tests.cli_zygote import Zygote\n"
            "f = Zygote.popen(['-n', '1', '-r', '1', 'import time; time.sleep(600)'], module='timeit')\n"
            "print(f.pid, Zygote._running().proc.pid, flush=True); time.sleep(600)")
    client = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert client.stdout is not None
    pids = [int(p) for p in client.stdout.readline().split()]
    assert len(pids) == 2, pids
    client.kill()
    client.wait()
    deadline = time.monotonic() + 600  # a liveness bound: the monitor looks every 0.05 s
    while any(_alive(p) for p in pids):
        assert time.monotonic() < deadline, f"still running: {[p for p in pids if _alive(p)]}"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie not yet reaped by init does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
