"""How a run ends: exit codes, the failure summary, interrupts with real signals, incomplete cases."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import respx
from typer.testing import CliRunner

from tests.cli_zygote import Forked, Zygote
from tests.conftest import ROOT, write_config
from tests.fake_server import FakeConfig, FakeServer
from tests.helpers import cli_run, ok_count, write_cases, write_panel

ENV = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
       "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def _statuses(out: Path) -> dict[str, str]:
    with open(out / "consensus.csv", encoding="utf-8") as f:
        return {r["case_id"]: r["status"] for r in csv.DictReader(f)}


def _start_and_wait_for(cmd: list[str], cwd: Path, db: Path, rows: int, stdout: int = subprocess.PIPE) -> Forked:
    # a real process (it gets the signals), forked from a warm one: no seconds of imports (tests/cli_zygote.py)
    proc = Zygote.popen(cmd, env=ENV, cwd=cwd, stdout=stdout, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600  # a liveness bound (every wall-clock bound here is one), not a deadline
    while proc.poll() is None and ok_count(db) < rows and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, f"the run ended before it could be interrupted: {proc.communicate()}"
    return proc


@contextmanager
def _score_in_flight(tmp_path: Path, rows: int,
                     stdout: int = subprocess.PIPE) -> Iterator[tuple[Forked, list[str], Path, FakeServer]]:
    """`score` of 20 cases in a process of its own against a slow fake server (kept up until the block ends),
    yielded once ``rows`` judgments are stored: (the process, its command, its output folder, the server).
    ``stdout``: the process's (a pipe of ours, or a descriptor)."""
    cases = write_cases(tmp_path / "cases.jsonl", n=20)
    with FakeServer(FakeConfig(seed=3, latency_ms=400.0, max_lifetime_s=600)) as srv:
        cfg = write_panel(tmp_path / "panel.yaml", srv.url, concurrency=2)
        out = tmp_path / "out"
        cmd = ["score", str(cases), "--config", str(cfg), "--out", str(out)]
        yield _start_and_wait_for(cmd, tmp_path, out / "results.sqlite", rows, stdout), cmd, out, srv


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_stops_the_run_rebuilds_the_outputs_and_the_rerun_resumes(tmp_path: Path,
                                                                            sig: signal.Signals) -> None:
    with _score_in_flight(tmp_path, rows=6) as (proc, cmd, out, srv):
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 130, stdout + stderr
        assert "Traceback" not in stdout + stderr
        stored = ok_count(out / "results.sqlite")
        # one language for the run, the rubric's (Chinese): "interrupted: N of 120 judgments stored; rerun ..."
        assert f"已中断：120 个评判中已存储 {stored} 个；重新运行同一命令即可继续" in stdout
        # the outputs were rebuilt from what is stored: the cases with calls missing say so
        statuses = _statuses(out)
        assert "incomplete" in statuses.values() and len(statuses) == 20
        assert "本次运行尚未完成" in (out / "report.md").read_text(encoding="utf-8")   # the rubric is Chinese
        assert 'id="incomplete"' in (out / "report.html").read_text(encoding="utf-8")

        srv.cfg.latency_ms = 0.0  # slow to be interrupted in flight; the rerun need not be (its ~110 calls: 11 s)
        again = cli_run(cmd, env=ENV, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"从存储恢复 {stored} 次" in again.stdout    # "N resumed from the store"
    assert set(_statuses(out).values()) == {"ok"}
    assert "本次运行尚未完成" not in (out / "report.md").read_text(encoding="utf-8")


_ACK = "press Ctrl-C again to exit at once"  # the first signal's handler says it has run


def _stderr_until(proc: Forked, needle: str, timeout: float) -> str:
    """What ``proc`` writes to stderr up to ``needle`` (and what came with it), read from the pipe as it comes; fails
    after ``timeout`` s or at end of file. Read below the text wrapper, whose buffer stays empty: a later
    ``communicate()`` returns the rest."""
    assert proc.stderr is not None
    fd, raw = proc.stderr.fileno(), b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while needle.encode() not in raw:
            left = deadline - time.monotonic()
            assert left > 0, f"stderr did not get there within {timeout} s: {raw!r}"
            if sel.select(left):
                chunk = os.read(fd, 65536)
                assert chunk, f"stderr closed first: {raw!r}"
                raw += chunk
    return raw.decode()


def _full_pipe() -> tuple[int, int, bytes]:
    """A pipe (read end, write end) whose buffer is full, and what fills it: a write to it waits for a reader."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    filled = bytearray()
    for size in (65536, 1):
        with contextlib.suppress(BlockingIOError):
            while True:
                filled += b"x" * os.write(w, b"x" * size)
    os.set_blocking(w, True)  # the flag is the open file's, which the child shares: it waits, it does not fail
    return r, w, bytes(filled)


def test_a_second_ctrl_c_exits_at_once_without_a_traceback(tmp_path: Path) -> None:
    # the second signal must come while the command runs: the graceful stop takes well under a second, and a test
    # slowed by the load could find it ended. So its stdout is a full pipe: its first write (the summary, once the
    # outputs are rebuilt, after the run) waits for us, and we read it only once the second signal is sent.
    r, w, filled = _full_pipe()
    with _score_in_flight(tmp_path, rows=4, stdout=w) as (proc, _cmd, _out, _srv):
        os.close(w)
        proc.send_signal(signal.SIGINT)
        # the first signal's handler has installed the second one before it says so (consensus_eval/cli.py)
        err = _stderr_until(proc, _ACK, timeout=600)
        proc.send_signal(signal.SIGINT)
        with open(r, "rb") as f:  # to its end, first: were the command to go on, it could (and end)
            stdout = f.read()
        _none, rest = proc.communicate(timeout=600)
        stderr = err + rest
    assert stdout.startswith(filled)
    output = stdout[len(filled):].decode("utf-8", "replace") + stderr
    assert proc.returncode == 130, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output
    assert "interrupted again: exiting now" in stderr


def test_stop_event_of_the_api_leaves_incomplete_cases(tmp_path: Path) -> None:
    from consensus_eval import api
    from consensus_eval.analysis.results import Results
    from consensus_eval.execution.execute import Progress

    cases = write_cases(tmp_path / "cases.jsonl", n=6)

    async def go() -> Results:
        stop = asyncio.Event()
        done = 0

        def hook(p: Progress) -> None:
            nonlocal done
            done = p.done
            if p.done >= 3:
                stop.set()

        with FakeServer(FakeConfig(seed=5, latency_ms=100.0, max_lifetime_s=600)) as srv:
            cfg = write_panel(tmp_path / "panel.yaml", srv.url, concurrency=1)
            return await api.run_async(api.prepare(cases, cfg), tmp_path / "out", hook, n_boot=0, stop=stop)

    results = asyncio.run(go())
    assert results.progress is not None and results.progress.interrupted
    assert 0 < results.run.missing_calls < 36
    incomplete = [c for c in results.consensus if c.status == "incomplete"]
    assert incomplete and all(c.missing_calls > 0 for c in incomplete)
    assert sum(c.missing_calls for c in results.consensus) == results.run.missing_calls
    assert results.audit[-1].status == "incomplete" or results.audit[0].status in ("failed", "inconclusive",
                                                                                    "incomplete")


# --------------------------------------------------------------------------- exit codes and the failure summary

RULES_AND_BROKEN = """\
  - name: rules
    kind: rules
  - name: broken
    model: openai/broken
    api_base: http://broken.test/v1
    api_key_env: JUDGE_A_KEY
    max_retries: 0
    max_reasks: 0
"""


def _two_cases(tmp_path: Path) -> Path:
    return write_cases(tmp_path / "cases.jsonl", n=2)


def test_a_run_with_failures_exits_3_and_says_which_judge_failed_and_why(tmp_path: Path, api_keys: str) -> None:
    from consensus_eval.cli import app

    cfg = write_config(tmp_path / "c.yaml", RULES_AND_BROKEN, important_runs=1)
    with respx.mock(using="httpx") as mock:
        mock.post("http://broken.test/v1/chat/completions").mock(
            return_value=httpx.Response(401, json={"error": {"message": "invalid key", "type": "auth"}}))
        res = CliRunner().invoke(app, ["score", str(_two_cases(tmp_path)), "--config", str(cfg),
                                       "--out", str(tmp_path / "out"), "--lang", "en"])
    assert res.exit_code == 3, res.output
    tail = res.output.strip().splitlines()[-6:]
    text = "\n".join(tail)
    assert "6 of 12 planned call(s) failed (50.0%)" in text
    assert "broken: 6 failed" in text and "401" in text
    assert "completed with failures: exit 3" in text
    assert api_keys not in res.output
    # every output was written all the same
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {"consensus.csv", "report.html", "judgments.jsonl"}


def test_allow_failures_accepts_a_share_of_failed_calls(tmp_path: Path, api_keys: str) -> None:
    from consensus_eval.cli import app

    cfg = write_config(tmp_path / "c.yaml", RULES_AND_BROKEN, important_runs=1)
    with respx.mock(using="httpx") as mock:
        mock.post("http://broken.test/v1/chat/completions").mock(return_value=httpx.Response(401, json={}))
        ok = CliRunner().invoke(app, ["score", str(_two_cases(tmp_path)), "--config", str(cfg),
                                      "--out", str(tmp_path / "a"), "--allow-failures", "0.5", "--lang", "en"])
        strict = CliRunner().invoke(app, ["score", str(_two_cases(tmp_path)), "--config", str(cfg),
                                          "--out", str(tmp_path / "b"), "--allow-failures", "0.49"])
    assert ok.exit_code == 0, ok.output
    assert "within --allow-failures 0.5" in ok.output
    assert strict.exit_code == 3, strict.output


def test_cases_below_the_quorum_are_counted(tmp_path: Path, api_keys: str) -> None:
    from consensus_eval.cli import app

    cfg = write_config(tmp_path / "c.yaml", RULES_AND_BROKEN, important_runs=1, consensus="{min_judges: 2}")
    with respx.mock(using="httpx") as mock:
        mock.post("http://broken.test/v1/chat/completions").mock(return_value=httpx.Response(401, json={}))
        res = CliRunner().invoke(app, ["score", str(_two_cases(tmp_path)), "--config", str(cfg),
                                       "--out", str(tmp_path / "out"), "--lang", "en"])
    assert res.exit_code == 3
    assert "cases without a panel verdict: 2 inconclusive (below the quorum)" in res.output


def test_a_clean_run_exits_0(tmp_path: Path) -> None:
    from consensus_eval.cli import app

    res = CliRunner().invoke(app, ["score", str(_two_cases(tmp_path)), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert "failed" not in res.output.strip().splitlines()[-1] or "0 failed" in res.output


def test_the_end_of_a_run_never_formats_its_result() -> None:
    """asyncio.run's own SIGINT handler holds the main task, and its check at the end (signal.getsignal)
    formatted that task, the whole result included: minutes for a large run. The CLI's handlers go
    in first, so nothing formats the result."""
    from consensus_eval.cli import _run_until_done_or_interrupted

    class Big:
        formatted = 0

        def __repr__(self) -> str:
            Big.formatted += 1
            return "Big()"

    async def run(stop: asyncio.Event) -> Big:
        return Big()

    assert isinstance(_run_until_done_or_interrupted(run), Big)
    assert Big.formatted == 0
