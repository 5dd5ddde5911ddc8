"""What makes a large run of the rules judge fast: outcomes committed together, the rules judge's worker
processes (:mod:`consensus_eval.judges.rules.pool`), no litellm for a panel without an LLM judge."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from consensus_eval import api
from consensus_eval.domain.cases import Case
from consensus_eval.domain.judgment import CallOutcome
from consensus_eval.domain.rubric import Dimension, Rubric
from consensus_eval.execution.execute import execute
from consensus_eval.execution.store import CallRecord, Store
from consensus_eval.judges.rules import RulesJudge, check_case
from consensus_eval.judges.rules.pool import CasePool, WorkerGone
from tests.big_run import big_cases

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "default.yaml"


class CountingStore(Store):
    """A store that counts its transactions of calls (how many calls each committed)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.transactions: list[int] = []

    def record_many(self, recs: Sequence[CallRecord]) -> None:
        self.transactions.append(len(recs))
        super().record_many(recs)


def _committed(db: Path) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT count(*) FROM calls").fetchone()[0])
    finally:
        con.close()


def _judgments(db: Path) -> dict[str, str]:
    con = sqlite3.connect(db)
    try:
        return dict(con.execute("SELECT request_hash, judgment FROM calls WHERE status = 'ok'").fetchall())
    finally:
        con.close()


def test_a_deterministic_judges_outcomes_are_committed_together(tmp_path: Path) -> None:
    prep = api.prepare(big_cases(60), CONFIG)
    store = CountingStore(tmp_path / "results.sqlite")
    with store:
        asyncio.run(execute(prep.calls, prep.judges, prep.rubric, store))
    assert sum(store.transactions) == len(prep.calls) == 180
    # one commit per call before (180); a flush every half second or 1,000 calls now, and one at the end
    assert len(store.transactions) <= 30, store.transactions


class CostlyRules(RulesJudge):
    """The rules judge as if each call cost something to make again (an LLM judge): checks, at the start of
    each call and after one turn of the event loop, that every call landed before it is committed."""

    deterministic = False
    db: Path
    seen: list[tuple[int, int]]

    async def judge(self, case: Case, dimension: Dimension, messages: list[dict[str, str]],
                    run: int = 0) -> CallOutcome:
        await asyncio.sleep(0)   # any request a call sends comes after at least this
        self.seen.append((len(self.seen), _committed(self.db)))
        return await super().judge(case, dimension, messages, run)


def test_a_costly_judges_outcome_is_committed_before_the_next_call_goes_out(tmp_path: Path) -> None:
    prep = api.prepare(big_cases(8), {"rubric": "medical_record", "judges": [
        {"name": "rules", "kind": "rules", "concurrency": 1}]})
    judge = CostlyRules(prep.judges[0].config, prep.rubric)  # type: ignore[arg-type]
    judge.db, judge.seen = tmp_path / "results.sqlite", []
    with Store(judge.db) as store:
        asyncio.run(execute(prep.calls, [judge], prep.rubric, store))
    assert len(judge.seen) == 24
    assert all(committed == landed for landed, committed in judge.seen), judge.seen


class FailingStore(Store):
    def record_many(self, recs: Sequence[CallRecord]) -> None:
        raise sqlite3.OperationalError("database or disk is full")


def test_a_commit_that_fails_stops_the_run_with_its_error(tmp_path: Path) -> None:
    prep = api.prepare(big_cases(30), CONFIG)
    with FailingStore(tmp_path / "results.sqlite") as store, \
            pytest.raises(sqlite3.OperationalError, match="disk is full"):
        asyncio.run(execute(prep.calls, prep.judges, prep.rubric, store))


# --------------------------------------------------------------------------- the rules judge's workers


def _pids_alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def test_the_workers_judge_as_the_rules_do_in_this_process(rubric: Rubric) -> None:
    cases = big_cases(40, seed=3)

    async def run() -> tuple[list[object], list[int]]:
        pool = CasePool(rubric, cases, processes=2)
        # asked out of order and each case three times (its dimensions), as the runner's workers do
        order = [c for c in cases[::-1] for _ in range(3)]
        got = await asyncio.gather(*(pool.check(c) for c in order))
        pids = pool.pids
        await pool.close()  # waits for them
        return list(got), pids

    got, pids = asyncio.run(run())
    expected = {c.id: check_case(c, rubric) for c in cases}
    assert got == [expected[c.id] for c in cases[::-1] for _ in range(3)]
    assert len(pids) == 2 and not _pids_alive(pids)


def test_a_run_in_worker_processes_stores_what_a_run_in_threads_stores(tmp_path: Path) -> None:
    prep = api.prepare(big_cases(50, seed=5), CONFIG)
    stores = {}
    for name, pool_from in (("threads", 10**9), ("workers", 1)):
        judge = prep.judges[0]
        assert isinstance(judge, RulesJudge)
        judge.pool_from, judge.processes = pool_from, 2
        with Store(tmp_path / name / "results.sqlite") as store:
            progress = asyncio.run(execute(prep.calls, [judge], prep.rubric, store))
        assert progress.done == 150 and not progress.failed
        stores[name] = _judgments(tmp_path / name / "results.sqlite")
    assert len(stores["threads"]) == 150
    assert stores["workers"] == stores["threads"]


def test_a_worker_that_dies_fails_its_cases_and_the_rest_without_hanging(rubric: Rubric) -> None:
    cases = big_cases(200, seed=4)

    async def run() -> tuple[int, list[str]]:
        pool = CasePool(rubric, cases, processes=2)
        await pool.check(cases[0])
        for pid in pool.pids:
            os.kill(pid, signal.SIGKILL)
        outcomes = await asyncio.gather(*(pool.check(c) for c in cases[1:]), return_exceptions=True)
        await pool.close()
        ok = sum(isinstance(o, dict) for o in outcomes)
        return ok, [str(o) for o in outcomes if isinstance(o, WorkerGone)]

    ok, gone = asyncio.run(run())
    # the chunks already back are served; every other case fails, saying why
    assert gone and ok + len(gone) == 199
    assert all("rules worker process ended" in g for g in gone)


def test_the_workers_end_when_the_run_is_killed(tmp_path: Path) -> None:
    code = """
import asyncio, sys
from consensus_eval.domain.rubric import load_rubric
from consensus_eval.judges.rules.pool import CasePool
from tests.big_run import big_cases

async def main():
    cases = big_cases(64)
    pool = CasePool(load_rubric("medical_record"), cases, processes=2)
    await pool.check(cases[0])
    print(*pool.pids, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2 and len(_pids_alive(pids)) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # the workers' input closed with their parent: each reads end of file and exits (no work left: a bound
    # on a hang, not a deadline on work)
    for _ in range(600):
        if not _pids_alive(pids):
            break
        time.sleep(0.1)
    assert not _pids_alive(pids)


def test_a_panel_without_an_llm_judge_does_not_import_litellm(tmp_path: Path) -> None:
    code = f"""
import json, sys
from consensus_eval.cli import app
code = None
try:
    app(["score", {str(ROOT / "examples" / "cases.jsonl")!r}, "--out", {str(tmp_path / "out")!r}])
except SystemExit as e:
    code = e.code
before = "litellm" in sys.modules
import litellm, consensus_eval.judges.llm
print(json.dumps([code, before, litellm.suppress_debug_info, litellm.telemetry]))
"""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    # scored without litellm; once the LLM judge layer imports it, it is made quiet as the command asked
    assert json.loads(res.stdout.strip().splitlines()[-1]) == [0, False, True, False]


def test_a_command_that_computes_no_interval_does_not_import_scipy_stats() -> None:
    """``scipy.stats`` takes about 1.3 s of CPU to import on the 2-core machine (40% of a dry run's start):
    imported where an interval or a rank is computed (``intervals.scipy_stats``), not at the CLI's start."""
    code = f"""
import json, sys
from consensus_eval.cli import app
code = None
try:
    app(["score", {str(ROOT / "examples" / "cases.jsonl")!r}, "--dry-run"])
except SystemExit as e:
    code = e.code
before = "scipy.stats" in sys.modules
from consensus_eval.analysis.agreement import spearman
print(json.dumps([code, before, spearman([1, 2, 2, 3], [1, 3, 2, 4]), "scipy.stats" in sys.modules]))
"""
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    code_, before, rho, after = json.loads(res.stdout.strip().splitlines()[-1])
    assert (code_, before, after) == (0, False, True)   # imported on first use, and only then
    assert rho == pytest.approx(0.9486832980505138)      # scipy's value with ties


@pytest.mark.parametrize("config", ["configs/panel.example.yaml", "configs/per_case.example.yaml",
                                    "configs/default.yaml"])
def test_the_plans_request_hashes_are_the_documented_ones(config: str) -> None:
    """The plan dumps what a judge reads once per case and each hash's head once (no protocol check per call):
    each hash is still the SHA-256 of the JSON list [identity, version, rubric fingerprint, dimension, run,
    what the judge reads] (execution.plan.request_hash)."""
    import hashlib

    prep = api.prepare(ROOT / "examples" / "cases.jsonl", ROOT / config, check_keys=False)
    judges = {j.config.name: j for j in prep.judges}
    assert prep.calls
    for call in prep.calls:
        p, judge = call.planned, judges[call.planned.judge]
        reads = call.messages if judge.reads_prompt else call.case.content
        blob = json.dumps([judge.config.identity, judge.version, prep.rubric.fingerprint, p.dimension, p.run, reads],
                          ensure_ascii=False, separators=(",", ":"))
        assert p.request_hash == hashlib.sha256(blob.encode()).hexdigest()


def test_prepare_makes_no_collector_pass() -> None:
    """Loading the cases and planning their calls make millions of objects on a large run, none in a cycle
    to collect: the cyclic collector is paused meanwhile (consensus_eval._gc), not woken thousands of times to
    traverse them. Counted with gc.callbacks (a work count, not a time)."""
    import gc

    passes: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    cases = big_cases(2000, seed=11)
    gc.callbacks.append(count)
    try:
        prep = api.prepare(cases, CONFIG)
    finally:
        gc.callbacks.remove(count)
    assert len(prep.calls) == 6000
    # at most the one pass of the youngest generation due when the collector is on again (the prepare of these
    # 2,000 cases woke it 38 times before)
    assert passes in ([], [0]), passes
    assert gc.isenabled()


def _workers_of(pid: int) -> list[int]:
    """The rules judge's worker processes whose parent is ``pid``."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            status = (d / "status").read_text()
            cmdline = (d / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = next((int(x.split()[1]) for x in status.splitlines() if x.startswith("PPid:")), 0)
        if ppid == pid and b"consensus_eval.judges.rules.worker" in cmdline:
            found.append(int(d.name))
    return found


@pytest.mark.slow
def test_ctrl_c_stops_a_run_in_worker_processes_and_ends_them(tmp_path: Path) -> None:
    """SIGINT to `score` of 1,200 cases (the rules judge in worker processes): the run stops, the outputs are
    rebuilt from what is stored (exit 130, cases incomplete), and no worker is left."""
    from tests.helpers import cli_command, ok_count

    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(c.model_dump(mode="json", exclude_none=True), ensure_ascii=False) + "\n"
                             for c in big_cases(1200, seed=12)), encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.Popen([*cli_command(), "score", str(cases), "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers: list[int] = []
    try:
        # until its workers run and some calls are stored (a bound on a hang, not a deadline on work)
        for _ in range(3000):
            if len(workers) < 2:   # looked up again until both run: the second may start after the first is seen
                workers = _workers_of(proc.pid)
            if len(workers) >= 2 and ok_count(out / "results.sqlite") >= 60:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        assert len(workers) >= 2
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and stdout
    assert not _pids_alive(workers)
    assert 0 < ok_count(out / "results.sqlite") < 3600
    import csv

    with (out / "consensus.csv").open(encoding="utf-8", newline="") as f:
        statuses = {row["status"] for row in csv.DictReader(f)}
    assert "incomplete" in statuses and (out / "report.html").is_file()
