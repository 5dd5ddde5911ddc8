"""Pacing: the limiter (consensus_eval/judges/pacing.py) alone, through the judge layer on simulated time,
and through the whole ``score`` path against the fake provider in real time beside Inspect AI. Every
workload is a fixed number of requests or calls run to completion (no phase is cut off at a time).

Parts (``--part``, repeatable; default ``windows deepseek hiddensim judgesim``):

- ``windows``: 400 waiters, each acquiring, "sending" for uniform(0, 2) s and acquiring again, at rpm
  300 and 1,200, on a simulated clock (an event loop whose clock jumps to the next timer: exact and
  instant): the most releases in any sliding 1 s and 60 s window, FIFO inversions, and the limiter's
  wake-ups (timer callbacks) per release; aiolimiter 1.3.0 too when it is importable
  (``PYTHONPATH=<unpacked wheel>``), configured both ways.
- ``cpu``: the same 400 waiters in real time until each limiter has made 65 s worth of releases at rpm
  300 and 1,200: CPU of this process (getrusage) per second, and the same window counts.
- ``deepseek``: the example panel's deepseek judge (rpm 120) with latency lognormal median 30 s
  (sigma 0.5), 1,000 cases x 3 dimensions, on the simulated clock, pacing only (no HTTP): wall time and
  requests/min of ``concurrency: auto``.
- ``hiddensim``: ``concurrency: auto`` alone (pacing only, no HTTP) against a simulated provider that
  accepts at most ``--hidden-rpm`` requests in any sliding 60 s window (429 at once above it; the
  worker waits until the window frees, as a Retry-After says), latency lognormal median 8 s, 256
  workers, ``--sim-requests`` requests to completion (default 18,000: an hour at 300/min); with
  ``--old-ref REF`` the pacing module as it was at commit REF (loaded from git) beside the current one;
  ``--seeds N`` latency seeds (median).
- ``judgesim``: the judge layer itself (``LLMJudge.judge``: litellm, instructor, the pacing, the
  retries) on simulated time against an in-process provider with a hidden sliding-window limit
  (``tests.pacing_sim.judge_layer``), for each ``--workload``: ``60x3`` (3 judges, 240 calls each,
  60/min each) and ``300`` (1 judge, 1,050 calls, 300/min), ``--seeds N``.
- ``scaled``: the deepseek judge through the judge layer (litellm + instructor) against the fake
  server (tests/fake_server.py, its own process) with time shrunk ``--scale`` times: rpm 120 x scale,
  latency median 30 s / scale, ``--calls`` calls to completion.
- ``provider``: real time, full scale, issue 38's comparison: the fake server accepts at most
  ``--hidden-rpm`` requests per model in any sliding 60 s window (429 at once above it, Retry-After:
  when the window frees), latency lognormal median 8 s (sigma 0.5, at most 30 s). Each client runs in
  its own process on the same ``--judges`` x ``--calls`` judge calls (the same rendered prompts), to
  completion: ``consensus-eval`` (``api.prepare`` + ``api.run_async``: the ``score`` path, ``concurrency:
  auto``, no rpm, the judges at once) and, with ``--inspect-python PATH``, Inspect AI
  (bench/inspect_client.py: its adaptive connections, every setting at its default). From the server's
  log, per model: the share of requests answered 429, the accepted requests per minute over the calls'
  sending time (first arrival to last accepted arrival) and over their wall time (to the last reply) as
  shares of the hidden limit, accepted per minute of the run; per client: CPU seconds and peak RSS of
  its process (``os.wait4``), its wall time against the bound (calls / limit + the mean latency), and
  consensus-eval's learned rate (its run summary), the learned window's guard it used (quantiles) and,
  with one judge, how late its requests reached the server (``send_lag_s``: the k-th arrival against
  the k-th send, wall clock; ``guard_needed``: how much later than its send the request a limit's worth
  of places earlier reached it than each one did). ``--repeat N`` alternates the clients N times;
  ``--tree DIR`` adds consensus-eval as in another copy of the repository (``git archive REF``) beside;
  ``--keep-logs DIR`` keeps each run's server log and sends.

    .venv/bin/python bench/pacing_bench.py                                        # the simulated parts
    .venv/bin/python bench/pacing_bench.py --part judgesim --seeds 3
    .venv/bin/python bench/pacing_bench.py --part provider --hidden-rpm 60 --judges 3 --calls 240 \\
        --repeat 3 --inspect-python /tmp/inspect/bin/python --json provider60.json
    .venv/bin/python bench/pacing_bench.py --part provider --hidden-rpm 300 --judges 1 --calls 1050 --repeat 3 \\
        --inspect-python /tmp/inspect/bin/python
    .venv/bin/python bench/pacing_bench.py --part hiddensim --old-ref e9ef2aa --seeds 5   # before/after

The limiter before issue 16 (asyncio-throttle 1.0.2, not a dependency) is measured beside the current one
in ``cpu`` and ``deepseek`` only when it is installed (``pip install asyncio-throttle==1.0.2``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from consensus_eval.judges.pacing import Pacing, Spacer, Ticket  # noqa: E402
from tests.pacing_sim import Figures, VirtualLoop, figures, hidden_workload, judge_layer, lognormal  # noqa: E402

try:  # the limiter before issue 16, for comparison: not a dependency
    from asyncio_throttle import throttler as old_throttler_module  # type: ignore[import-not-found]
except ImportError:
    old_throttler_module = None

T = TypeVar("T")


# ---------------------------------------------------------------------- simulated clock


def virtual(main: Callable[[], Awaitable[T]]) -> T:
    """tests.pacing_sim's simulated clock, with the old throttler (when installed) reading it too."""
    loop = VirtualLoop()
    asyncio.set_event_loop(loop)
    if old_throttler_module is not None:  # it reads time.monotonic(): give it the simulated clock
        old_throttler_module.time = types.SimpleNamespace(monotonic=loop.time)
    try:
        return loop.run_until_complete(main())
    finally:
        if old_throttler_module is not None:
            old_throttler_module.time = time
        asyncio.set_event_loop(None)
        loop.close()


# ---------------------------------------------------------------------- the limiters compared


class OldLimiter:
    """llm.py's limiter before issue 16: asyncio-throttle, k per 60k/rpm s, polling every 10 ms."""

    def __init__(self, rpm: float) -> None:
        k = max(1, int(rpm // 60))
        self.throttler = old_throttler_module.Throttler(rate_limit=k, period=60.0 * k / rpm)
        self.polls = 0
        real_sleep = asyncio.sleep

        async def counting_sleep(s: float) -> None:
            self.polls += 1
            await real_sleep(s)

        old_throttler_module.asyncio = types.SimpleNamespace(sleep=counting_sleep)

    async def acquire(self) -> None:
        await self.throttler.acquire()

    def wakeups(self) -> int:
        return self.polls


class NewLimiter:
    def __init__(self, rpm: float) -> None:
        self.spacer = Spacer(rpm)

    async def acquire(self) -> None:
        await self.spacer.acquire()

    def wakeups(self) -> int:
        return self.spacer.wakeups


def limiters() -> dict[str, Callable[[float], Any]]:
    """The limiters compared in real time: the current one, and the old one when it is installed."""
    made: dict[str, Callable[[float], Any]] = {"new (Spacer)": NewLimiter}
    if old_throttler_module is not None:
        made = {"old (asyncio-throttle)": OldLimiter, **made}
    return made


def aiolimiters() -> dict[str, Callable[[float], Any]]:
    try:
        from aiolimiter import AsyncLimiter  # type: ignore[import-not-found]
    except ImportError:
        return {}

    class Aio:
        def __init__(self, limiter: Any) -> None:
            self.limiter = limiter

        async def acquire(self) -> None:
            await self.limiter.acquire()

        def wakeups(self) -> int:
            return -1  # not counted

    return {"aiolimiter(rpm/60 per 1 s)": lambda rpm: Aio(AsyncLimiter(rpm / 60, 1.0)),
            "aiolimiter(1 per 60/rpm s)": lambda rpm: Aio(AsyncLimiter(1, 60.0 / rpm))}


def max_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    best, j = 0, 0
    for i, t in enumerate(times):
        while j < len(times) and times[j] < t + window - 1e-6:
            j += 1
        best = max(best, j - i)
    return best


async def waiters_workload(limiter: Any, n_waiters: int, total: int, seed: int) -> tuple[list[float], int]:
    """``n_waiters`` workers acquire, 'send' for uniform(0, 2) s, repeat, until ``total`` releases.
    Returns release times and FIFO inversions (releases that overtook an earlier arrival)."""
    loop = asyncio.get_running_loop()
    rng = random.Random(seed)
    times: list[float] = []
    pairs: list[tuple[int, float]] = []
    seq = 0

    async def worker() -> None:
        nonlocal seq
        while len(times) < total:
            seq += 1
            mine = seq
            await limiter.acquire()
            times.append(loop.time())
            pairs.append((mine, loop.time()))
            await asyncio.sleep(rng.uniform(0.0, 2.0))

    await asyncio.gather(*(worker() for _ in range(n_waiters)))
    by_arrival = [t for _, t in sorted(pairs)]
    inversions = sum(1 for a, b in itertools.pairwise(by_arrival) if b < a - 1e-9)
    return times, inversions


def part_windows() -> list[dict[str, Any]]:
    rows = []
    makers: dict[str, Callable[[float], Any]] = {"new (Spacer)": NewLimiter, **aiolimiters()}
    for rpm in (300, 1200):
        total = int(rpm * 1.5)
        for name, make in makers.items():
            def run(make: Callable[[float], Any] = make, rpm: int = rpm, total: int = total
                    ) -> tuple[list[float], int, int]:
                async def main() -> tuple[list[float], int, int]:
                    limiter = make(rpm)
                    times, inversions = await waiters_workload(limiter, 400, total, seed=rpm)
                    return times, inversions, limiter.wakeups()
                return virtual(main)

            every, inversions, wakeups = run()
            times = every[:total]
            span = max(times) - min(times)
            rows.append({"rpm": rpm, "limiter": name, "releases": len(every),
                         "max_per_1s": max_in_window(times, 1.0), "allowed_per_1s": rpm / 60,
                         "max_per_60s": max_in_window(times, 60.0), "allowed_per_60s": rpm,
                         "achieved_rpm": round((len(times) - 1) / span * 60, 1) if span else None,
                         "fifo_inversions": inversions, "wakeups": wakeups,
                         "wakeups_per_release": round(wakeups / len(every), 2) if wakeups >= 0 else None})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def part_cpu(seconds: float) -> list[dict[str, Any]]:
    """Each limiter releases ``seconds`` worth of requests at its rpm to 400 waiters, in real time."""
    rows = []
    for rpm, (name, make) in [(r, m) for r in (300, 1200) for m in limiters().items()]:
        if old_throttler_module is not None:
            old_throttler_module.asyncio = asyncio
        total = int(rpm * seconds / 60)
        times: list[float] = []

        async def main(make: Any = make, rpm: int = rpm, times: list[float] = times,
                       total: int = total) -> tuple[float, float]:
            limiter = make(rpm)
            rng = random.Random(1)

            async def worker() -> None:
                while len(times) < total:
                    await limiter.acquire()
                    times.append(time.monotonic())
                    await asyncio.sleep(rng.uniform(0.0, 2.0))

            c0, t0 = _cpu(), time.monotonic()
            await asyncio.gather(*(worker() for _ in range(400)))
            return _cpu() - c0, time.monotonic() - t0

        cpu, wall = asyncio.run(main())
        kept = times[:total]
        rows.append({"limiter": name, "rpm": rpm, "waiters": 400, "releases": total, "seconds": round(wall, 1),
                     "max_per_1s": max_in_window(kept, 1.0), "max_per_60s": max_in_window(kept, 60.0),
                     "cpu_s": round(cpu, 2), "core_share": round(cpu / wall, 3), "load": os.getloadavg()[0]})
        print(json.dumps(rows[-1]), flush=True)
    if old_throttler_module is not None:
        old_throttler_module.asyncio = asyncio
    return rows


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------------- deepseek at 30 s, simulated


class OldPacing:
    """The old judge layer's pacing, behind the new interface: the old throttler per attempt, no
    in-flight limit of its own (the old runner's fixed workers were the limit)."""

    def __init__(self, rpm: float | None) -> None:
        self.limiter = OldLimiter(rpm) if rpm else None
        self.requests = 0
        old_throttler_module.asyncio = asyncio

    async def acquire(self, tokens: float = 0.0) -> Ticket:
        if self.limiter is not None:
            await self.limiter.acquire()
        self.requests += 1
        return Ticket(sent_at=asyncio.get_running_loop().time(), charged_tokens=0.0, busy=False)

    def release(self, ticket: Ticket, *, tokens: int | None = None, rate_limited: bool = False) -> None:
        return None

    def report(self) -> None:
        return None


def part_deepseek(calls: int = 3000) -> list[dict[str, Any]]:
    rows = []
    variants: list[tuple[str, int, Callable[[], Any]]] = [
        ("new: concurrency auto", 256, lambda: Pacing(rpm=120, concurrency="auto"))]
    if old_throttler_module is not None:
        variants.insert(0, ("old: concurrency 8, asyncio-throttle", 8, lambda: OldPacing(120)))
    for name, workers, make in variants:
        async def main(workers: int = workers, make: Any = make, name: str = name) -> dict[str, Any]:
            loop = asyncio.get_running_loop()
            pacing = make()
            rng = random.Random(30)
            lat = [lognormal(rng, 30.0, 0.5, cap=300.0) for _ in range(calls)]
            queue = list(range(calls))
            sends: list[float] = []

            async def worker() -> None:
                while queue:
                    i = queue.pop()
                    ticket = await pacing.acquire(0)
                    sends.append(loop.time())
                    await asyncio.sleep(lat[i])
                    pacing.release(ticket, tokens=1)

            await asyncio.gather(*(worker() for _ in range(workers)))
            wall = loop.time()
            report = pacing.report()
            return {"judge": name, "calls": calls, "mean_latency_s": round(sum(lat) / calls, 1),
                    "wall_h": round(wall / 3600, 2), "requests_per_min": round(calls / wall * 60, 1),
                    "bound_h": round(calls / 120 / 60 + sum(lat) / calls / 3600, 2),
                    "binding": report.binding if report else None,
                    "limit_final": report.limit_final if report else workers}

        rows.append(virtual(main))
        print(json.dumps(rows[-1]), flush=True)
    return rows


# ---------------------------------------------------------------------- a hidden limit, simulated


def pacing_at(ref: str) -> types.ModuleType:
    """consensus_eval/judges/pacing.py as it was at commit ``ref`` (from git), as a module."""
    src = subprocess.run(["git", "show", f"{ref}:consensus_eval/judges/pacing.py"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    name = f"_pacing_at_{ref}"
    mod = types.ModuleType(name)
    sys.modules[name] = mod  # dataclasses look their module up
    exec(compile(src, f"{ref}:consensus_eval/judges/pacing.py", "exec"), mod.__dict__)
    return mod


def _shares(f: Figures) -> dict[str, Any]:
    return {"share_429": round(f.share_429, 4), "sustained": round(f.sustained, 3), "wall": round(f.wall, 3),
            "first_minutes": f.per_minute[:4], "minutes": round((f.last_reply - f.first) / 60, 2)}


def part_hiddensim(hidden_rpm: float, requests: int, old_ref: str | None = None,
                   seeds: int = 1) -> list[dict[str, Any]]:
    import consensus_eval.judges.pacing as pacing_module

    rows = []
    versions: list[tuple[str, types.ModuleType]] = [("now", pacing_module)]
    if old_ref:
        versions.insert(0, (old_ref, pacing_at(old_ref)))
    for version, module in versions:
        per_seed = []
        for seed in range(1, seeds + 1):
            pacing = module.Pacing(concurrency="auto")
            per_seed.append(_shares(figures(hidden_workload(pacing, hidden_rpm, requests, seed), hidden_rpm)))
        row: dict[str, Any] = {"version": version, "hidden_rpm": hidden_rpm, "requests": requests, "seeds": seeds}
        for k in ("share_429", "sustained", "wall", "minutes"):
            row[k] = statistics.median(r[k] for r in per_seed)
            row[k + "_seeds"] = [r[k] for r in per_seed]
        row["first_minutes_seed1"] = per_seed[0]["first_minutes"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


WORKLOADS = {"60x3": (60.0, 3, 240), "300": (300.0, 1, 1050)}


def part_judgesim(workloads: list[str], seeds: int) -> list[dict[str, Any]]:
    """The judge layer on simulated time (tests.pacing_sim.judge_layer), each workload and seed."""
    os.environ.setdefault("JUDGE_A_KEY", "sk-bench")
    rows = []
    for name in workloads:
        hidden_rpm, judges, calls = WORKLOADS[name]
        for seed in range(1, seeds + 1):
            c0 = _cpu()
            for run in judge_layer(hidden_rpm, calls, judges=judges, seed=seed):
                report = run.judge.pacing_report()
                rows.append({"workload": name, "seed": seed, "judge": run.judge.config.name,
                             "calls": calls, "hidden_rpm": hidden_rpm, **_shares(run.figures),
                             "learned": round(report.learned_rpm / hidden_rpm, 3) if report.learned_rpm else None,
                             "cpu_s": round(_cpu() - c0, 1)})
                print(json.dumps(rows[-1]), flush=True)
    return rows


# ---------------------------------------------------------------------- through the judge layer, real time


def _get(url: str) -> Any:
    import urllib.request

    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def _cases(n: int) -> list[Any]:
    from tests.big_run import big_cases

    return big_cases(n, seed=38)


def part_scaled(scale: float, calls: int) -> list[dict[str, Any]]:
    """The deepseek judge (rpm 120 x scale, latency / scale) through the judge layer, ``calls`` to completion."""
    from consensus_eval.domain.config import LLMJudgeConfig
    from consensus_eval.domain.prompts import render
    from consensus_eval.domain.rubric import load_rubric
    from consensus_eval.judges.llm import LLMJudge
    from tests.fake_server import FakeConfig, spawn

    cfg = FakeConfig(seed=16, latency_ms=30_000 / scale, latency_dist="lognormal", latency_sigma=0.5,
                     latency_max_ms=300_000 / scale, max_lifetime_s=6 * 3600, fault_free_after=None)
    proc, url = spawn(cfg, cwd=ROOT)
    try:
        rubric = load_rubric("medical_record")
        judge = LLMJudge(LLMJudgeConfig(name="deepseek", model="openai/fake-deepseek", api_base=url + "/v1",
                                        rpm=120 * scale, input_cost_per_token=0, output_cost_per_token=0), rubric)
        work = [(c, d) for c in _cases(calls // 3 + 1) for d in rubric.dimensions][:calls]

        async def main() -> None:
            queue = list(reversed(work))

            async def worker() -> None:
                while queue:
                    case, d = queue.pop()
                    await judge.judge(case, d, render(rubric, d, case))

            await asyncio.gather(*(worker() for _ in range(judge.config.max_workers)))

        t0 = time.time()
        asyncio.run(main())
        t1 = time.time()
        log = _get(url + "/_log")
    finally:
        proc.terminate()
        proc.wait(10)
    report = judge.pacing_report()
    row = {"scale": scale, "calls": calls, "wall_s": round(t1 - t0, 1),
           "requests_per_min_full_scale": round(len(log) / (t1 - t0) * 60 / scale, 1),
           "max_per_1s_scaled": max_in_window([e["t"] for e in log], 1.0),
           "explain": report.explain() if report else None, "load": os.getloadavg()[0]}
    print(json.dumps(row), flush=True)
    return [row]


# ---------------------------------------------------------------------- issue 38: real time, beside Inspect AI


def _provider_config(url: str, judges: int) -> dict[str, Any]:
    return {"rubric": "medical_record", "runs": 1, "important_runs": 1,
            "judges": [{"name": f"hidden-{k}", "model": f"openai/hidden-{k}", "api_base": url + "/v1",
                        "api_key_env": "PACING_BENCH_KEY", "input_cost_per_token": 0, "output_cost_per_token": 0}
                       for k in range(judges)]}


def client_ours(url: str, judges: int, calls: int, out: Path) -> dict[str, Any]:
    """consensus-eval's ``score`` path as a client (run in its own process by :func:`part_provider`)."""
    c0, t0 = _cpu(), time.monotonic()
    from consensus_eval import api
    from consensus_eval.judges.quiet import quiet_libraries

    quiet_libraries()
    c1, t1 = _cpu(), time.monotonic()
    prep = api.prepare(_cases(calls // 3 + 1)[: -(-calls // 3)], _provider_config(url, judges))
    landed = [c1, t1]
    sends, guards = _watch_sends()

    def hook(p: Any) -> None:
        landed[0], landed[1] = _cpu(), time.monotonic()

    res = asyncio.run(api.run_async(prep, out, hook, n_boot=1000))
    c2, t2 = _cpu(), time.monotonic()
    pacing = res.progress.pacing if res.progress is not None else {}
    return {"client": "consensus-eval", "import_cpu_s": c1 - c0, "import_wall_s": t1 - t0,
            "calls_cpu_s": landed[0] - c1, "calls_wall_s": landed[1] - t1, "rebuild_cpu_s": c2 - landed[0],
            "rebuild_wall_s": t2 - landed[1],
            "failed": res.progress.failed if res.progress is not None else None,
            "learned_rpm": {n: r.learned_rpm for n, r in pacing.items()},
            "summary": {n: r.explain() for n, r in pacing.items()},
            "sends": sends, "guard_s": _quantiles(guards)}


def _watch_sends() -> tuple[list[float], list[float]]:
    """Records each attempt's send (wall clock, as the server's log; when :meth:`Pacing.acquire` returns)
    and the learned window's guard then (:meth:`AutoLimit.guard_s`, once a limit is learned)."""
    from consensus_eval.judges import pacing as pacing_module

    sends: list[float] = []
    guards: list[float] = []
    acquire = pacing_module.Pacing.acquire

    async def watched(self: Any, tokens: float = 0.0) -> Any:
        ticket = await acquire(self, tokens)
        sends.append(time.time())
        if self.auto is not None and self.auto.allowed is not None:
            guards.append(self.auto.guard_s(ticket.sent_at))
        return ticket

    pacing_module.Pacing.acquire = watched  # type: ignore[method-assign]
    return sends, guards


def _quantiles(xs: list[float]) -> dict[str, float] | None:
    if not xs:
        return None
    q = sorted(xs)
    return {"min": round(q[0], 3), "p50": round(q[len(q) // 2], 3), "p99": round(q[int(len(q) * 0.99)], 3),
            "max": round(q[-1], 3)}


def _send_lag(sends: list[float], arrivals: list[float], hidden_rpm: float) -> dict[str, Any] | None:
    """How late requests reached the server: the k-th arrival against the k-th send (both sorted: the
    server's window counts arrivals as the client's counts sends), and the guard that window needed: how
    much later than its send the oldest request of a full window arrived than the newest (quantiles)."""
    if len(sends) != len(arrivals) or not sends:
        return None
    lag = [a - s for a, s in zip(sorted(arrivals), sorted(sends), strict=True)]
    n = int(hidden_rpm)
    needed = _quantiles([lag[k - n] - lag[k] for k in range(n, len(lag))])
    return {**(_quantiles(lag) or {}), "guard_needed": needed}


def _prompts(url: str, judges: int, calls: int, path: Path) -> int:
    """The rendered prompts of the first judge's calls, as bench/inspect_client.py reads them."""
    from consensus_eval import api

    os.environ.setdefault("PACING_BENCH_KEY", "sk-bench")
    prep = api.prepare(_cases(calls // 3 + 1)[: -(-calls // 3)], _provider_config(url, judges))
    mine = [c for c in prep.calls if c.planned.judge == "hidden-0"]
    with path.open("w", encoding="utf-8") as fh:
        for c in mine:
            fh.write(json.dumps({"id": f"{c.case.id}/{c.planned.dimension}", "messages": c.messages},
                                ensure_ascii=False) + "\n")
    return len(mine)


def _run_client(args: list[str], env: dict[str, str]) -> tuple[dict[str, Any], float, float]:
    """A client process to completion: its last JSON line, its CPU seconds and peak RSS (MB)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, env=env, cwd=ROOT, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"client {args[:3]} exited {proc.returncode}")
    last = [line for line in out.splitlines() if line.startswith("{")][-1]
    return json.loads(last), usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def part_provider(hidden_rpm: float, judges: int, calls: int, repeat: int,
                  inspect_python: str | None, trees: list[Path], keep_logs: Path | None = None) -> list[dict[str, Any]]:
    from tests.fake_server import FakeConfig, spawn

    clients = ["consensus-eval"] + [f"consensus-eval@{t.name}" for t in trees] + (["inspect"] if inspect_python else [])
    rows = []
    for r in range(repeat):
        for client in clients:
            cfg = FakeConfig(seed=38 + r, latency_ms=8_000, latency_dist="lognormal", latency_sigma=0.5,
                             latency_max_ms=30_000, hidden_rpm=hidden_rpm, hidden_window_s=60.0, hidden_retry_after=1,
                             max_lifetime_s=3600, fault_free_after=None, max_requests=1_000_000)
            proc, url = spawn(cfg, cwd=ROOT)
            load0 = os.getloadavg()[0]
            try:
                with tempfile.TemporaryDirectory() as tmp:
                    env = {**os.environ, "PACING_BENCH_KEY": "sk-bench", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
                    if "@" in client:
                        env["PACING_BENCH_TREE"] = str(next(t for t in trees if client.endswith("@" + t.name)))
                    if client == "inspect":
                        assert inspect_python is not None
                        n = _prompts(url, judges, calls, Path(tmp) / "prompts.jsonl")
                        assert n == calls, n
                        args = [inspect_python, str(ROOT / "bench" / "inspect_client.py"), "--url", url,
                                "--prompts", str(Path(tmp) / "prompts.jsonl"),
                                "--models", ",".join(f"hidden-{k}" for k in range(judges))]
                    else:
                        args = [sys.executable, str(Path(__file__).resolve()), "--client", "ours", "--url", url,
                                "--judges", str(judges), "--calls", str(calls), "--out", str(Path(tmp) / "run")]
                    said, cpu, rss = _run_client(args, env)
                log = _get(url + "/_log")
            finally:
                proc.terminate()
                proc.wait(10)
            sends = said.pop("sends", None)
            if keep_logs is not None:  # the raw figures, to look into one run
                keep_logs.mkdir(parents=True, exist_ok=True)
                (keep_logs / f"{client.replace('/', '_')}-{hidden_rpm:g}-{r + 1}.json").write_text(
                    json.dumps({"server_log": log, "sends": sends}), encoding="utf-8")
            if sends is not None and judges == 1:  # one model: its sends against its arrivals
                said["send_lag_s"] = _send_lag(sends, [e["t"] for e in log], hidden_rpm)
            row = {"repeat": r + 1, "client": client, "hidden_rpm": hidden_rpm, "judges": judges, "calls": calls,
                   "cpu_s": round(cpu, 1), "peak_rss_mb": round(rss), "load": [round(load0, 2),
                                                                              round(os.getloadavg()[0], 2)],
                   **_provider_figures(log, hidden_rpm, calls), "client_said": said}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def _provider_figures(log: list[dict[str, Any]], hidden_rpm: float, calls: int) -> dict[str, Any]:
    """Per model (judge), from the server's log: :class:`tests.pacing_sim.Figures`, and the wall time
    against the bound (calls / limit + the mean latency drawn)."""
    per: dict[str, Any] = {}
    for model in sorted({e["model"] for e in log}):
        mine = [e for e in log if e["model"] == model]
        entries = [(e["t"], 200 if e["status"] == 200 else 429 if e["status"] == 429 else -1,
                    e["t_end"] if e["t_end"] is not None else e["t"]) for e in mine]
        f = figures(entries, hidden_rpm)
        lat = [e["t_end"] - e["t"] for e in mine if e["status"] == 200 and e["t_end"] is not None]
        bound = calls / hidden_rpm * 60 + statistics.fmean(lat)
        accepted = sorted(e["t"] for e in mine if e["status"] == 200)
        # how early each 429'd request came: until the oldest accepted one in its window would have left it
        early = [bisect_first(accepted, e["t"] - 60.0) + 60.0 - e["t"] for e in mine if e["status"] == 429]
        per[model] = {**_shares(f), "requests": f.requests, "other": sum(1 for x in entries if x[1] == -1),
                      "early_429_s": [round(x, 2) for x in sorted(early)],
                      "wall_s": round(f.last_reply - f.first, 1), "wall_over_bound": round((f.last_reply - f.first)
                                                                                         / bound, 3)}
    return per


def bisect_first(times: list[float], after: float) -> float:
    """The first of the sorted ``times`` after ``after``."""
    import bisect

    i = bisect.bisect_right(times, after)
    return times[i] if i < len(times) else after


def median_rows(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per row position: the median of every numeric field over the repeats, and the values."""
    out = []
    for rows in zip(*runs, strict=True):
        merged = dict(rows[0])
        for k, v in rows[0].items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                vals = [r[k] for r in rows]
                merged[k] = statistics.median(vals)
                merged[k + "_runs"] = vals
        out.append(merged)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", action="append",
                   choices=["windows", "cpu", "deepseek", "hiddensim", "judgesim", "scaled", "provider"])
    p.add_argument("--repeat", type=int, default=1, help="cpu, provider: repeats")
    p.add_argument("--cpu-s", type=float, default=65.0, help="cpu: seconds' worth of releases per limiter")
    p.add_argument("--scale", type=float, default=10.0)
    p.add_argument("--calls", type=int, help="scaled: calls (default 1,800); provider: calls per judge (default 240)")
    p.add_argument("--hidden-rpm", type=float, default=300.0)
    p.add_argument("--judges", type=int, default=3, help="provider: judges (models) at once")
    p.add_argument("--inspect-python", help="provider: Inspect AI's interpreter (bench/inspect_client.py)")
    p.add_argument("--tree", type=Path, action="append",
                   help="provider: also consensus-eval as in this copy of the repository (git archive REF)")
    p.add_argument("--old-ref", help="hiddensim: also the pacing module as at this commit (git)")
    p.add_argument("--seeds", type=int, default=1, help="hiddensim, judgesim: seeds (median)")
    p.add_argument("--sim-requests", type=int, default=18_000, help="hiddensim: requests to completion")
    p.add_argument("--workload", action="append", choices=sorted(WORKLOADS), help="judgesim: workloads")
    p.add_argument("--json", type=Path)
    p.add_argument("--keep-logs", type=Path, help="provider: write each run's server log and sends to this folder")
    p.add_argument("--client", choices=["ours"], help=argparse.SUPPRESS)  # provider's client process
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.client:
        if os.environ.get("PACING_BENCH_TREE"):  # the package of --tree, not the one this file was loaded with
            for name in [m for m in sys.modules if m == "consensus_eval" or m.startswith("consensus_eval.")]:
                del sys.modules[name]
            sys.path.insert(0, os.environ["PACING_BENCH_TREE"])
        print(json.dumps(client_ours(args.url, args.judges, args.calls, args.out)), flush=True)
        return
    from consensus_eval.judges.quiet import quiet_libraries

    quiet_libraries()
    parts = args.part or ["windows", "deepseek", "hiddensim", "judgesim"]
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
    for part in parts:
        print(f"== {part}", flush=True)
        if part == "windows":
            results[part] = part_windows()
        elif part == "cpu":
            results[part] = median_rows([part_cpu(args.cpu_s) for _ in range(args.repeat)])
        elif part == "deepseek":
            results[part] = part_deepseek()
        elif part == "hiddensim":
            results[part] = part_hiddensim(args.hidden_rpm, args.sim_requests, args.old_ref, args.seeds)
        elif part == "judgesim":
            results[part] = part_judgesim(args.workload or sorted(WORKLOADS), args.seeds)
        elif part == "scaled":
            results[part] = part_scaled(args.scale, args.calls or 1800)
        else:
            results[part] = part_provider(args.hidden_rpm, args.judges, args.calls or 240, args.repeat,
                                          args.inspect_python, args.tree or [], args.keep_logs)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
