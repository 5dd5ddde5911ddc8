"""Pacing (issue 16, section 4): the new limiter (consensus_eval/judges/pacing.py) against the old one
(asyncio-throttle 1.0.2 as llm.py used it: ``Throttler(k, 60k/rpm)`` with k = rpm // 60, and a fixed
number of workers), in the same run.

Parts (``--part``, default all):

- ``windows``: 400 waiters, each acquiring, "sending" for uniform(0, 2) s and acquiring again, at rpm
  300 and 1,200, on a simulated clock (an event loop whose clock jumps to the next timer: exact and
  instant): the most releases in any sliding 1 s and 60 s window, FIFO inversions, and the limiter's
  wake-ups (timer callbacks) per release; aiolimiter 1.3.0 too when it is importable
  (``PYTHONPATH=<unpacked wheel>``), configured both ways. (The old limiter polls every 10 ms per
  waiter: 5 million polls per simulated minute and a half, too slow to simulate: it is measured in
  real time, next.)
- ``cpu``: the same 400 waiters in real time for ``--cpu-s`` seconds per limiter, old and new, at rpm
  300 and 1,200: CPU of this process (getrusage) as a share of one core, and the same window counts
  from the real release times.
- ``deepseek``: the example panel's deepseek judge (rpm 120) with latency lognormal median 30 s
  (sigma 0.5), 1,000 cases x 3 dimensions, on the simulated clock, pacing only (no HTTP): wall time
  and requests/min, old (concurrency 8) vs new (auto).
- ``scaled``: the same judge through the whole judge layer (litellm + instructor) against the fake
  server (tests/fake_server.py, its own process) with time shrunk ``--scale`` times: rpm 120 x scale,
  latency median 30 s / scale. Little's law keeps the in-flight count the same as at full scale (60),
  so requests/min divided by the scale is the real-scale figure.
- ``hiddensim``: ``concurrency: auto`` alone (pacing only, no HTTP) against a simulated provider that
  accepts at most ``--hidden-rpm`` requests in any sliding 60 s window (429 at once above it,
  Retry-After: when the window frees), latency lognormal median 8 s, 256 workers, one simulated hour;
  ``--decrease`` values (the multiplicative decrease, default the module's) are compared, and with
  ``--old-ref REF`` the pacing module as it was at commit REF (loaded from git) beside the current one:
  accepted requests/min and the 429 share over the whole hour and in minutes 0-10, 10-30 and 30-60,
  and ``--seeds N`` latency seeds (median).
- ``hidden``: a provider limit the client is not told: the fake server accepts at most ``--hidden-rpm``
  requests per minute in a sliding window (429 at once above it, with or without Retry-After), latency
  lognormal median 8 s; time shrunk ``--scale`` times as above (window 60 s / scale). The judge has no
  rpm: old = concurrency 8 (the old default), new = auto (AIMD), and with ``--old-ref REF`` auto as
  the pacing module was at REF. Sustained rate = requests answered 200 per minute after the first 30 %
  of the phase, and over the whole phase; 429 share of all requests. The window the current pacing
  assumes a provider counts over (``RATE_WINDOW_S``, a minute) shrinks with the scale too.

The old limiter is no longer a dependency: the comparison needs ``pip install asyncio-throttle==1.0.2``.

    . .venv/bin/activate && python bench/pacing_bench.py --repeat 3            # all parts
    python bench/pacing_bench.py --part hidden --hidden-rpm 300 --scale 10 --seconds 150
    python bench/pacing_bench.py --part hiddensim --old-ref 94d3ba6 --seeds 5   # the slow start before/after
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
import time
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from asyncio_throttle import throttler as old_throttler_module  # noqa: E402 - the old limiter, for comparison

from consensus_eval.judges.pacing import Pacing, Spacer, Ticket  # noqa: E402
from tests.pacing_sim import VirtualLoop, hidden_window, lognormal  # noqa: E402

T = TypeVar("T")


# ---------------------------------------------------------------------- simulated clock


def virtual(main: Callable[[], Awaitable[T]]) -> T:
    """tests.pacing_sim's simulated clock, with the old throttler reading it too."""
    loop = VirtualLoop()
    asyncio.set_event_loop(loop)
    # the old throttler reads time.monotonic(): give it the simulated clock
    old_throttler_module.time = types.SimpleNamespace(monotonic=loop.time)  # type: ignore[assignment]
    try:
        return loop.run_until_complete(main())
    finally:
        old_throttler_module.time = time
        asyncio.set_event_loop(None)
        loop.close()


# ---------------------------------------------------------------------- the limiters compared


class OldLimiter:
    """llm.py's limiter before this change: asyncio-throttle, k per 60k/rpm s, polling every 10 ms."""

    def __init__(self, rpm: float) -> None:
        k = max(1, int(rpm // 60))
        self.throttler = old_throttler_module.Throttler(rate_limit=k, period=60.0 * k / rpm)
        self.polls = 0
        real_sleep = asyncio.sleep

        async def counting_sleep(s: float) -> None:
            self.polls += 1
            await real_sleep(s)

        old_throttler_module.asyncio = types.SimpleNamespace(sleep=counting_sleep)  # type: ignore[assignment]

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
    rows = []
    for rpm, (name, make) in [(r, m) for r in (300, 1200)
                              for m in (("old (asyncio-throttle)", OldLimiter), ("new (Spacer)", NewLimiter))]:
        old_throttler_module.asyncio = asyncio  # type: ignore[assignment]
        times: list[float] = []

        async def main(make: Any = make, rpm: int = rpm, times: list[float] = times) -> tuple[int, float, float]:
            limiter = make(rpm)
            rng = random.Random(1)
            released = 0
            stop = time.monotonic() + seconds

            async def worker() -> None:
                nonlocal released
                while time.monotonic() < stop:
                    await limiter.acquire()
                    times.append(time.monotonic())
                    released += 1
                    await asyncio.sleep(rng.uniform(0.0, 2.0))

            tasks = [asyncio.create_task(worker()) for _ in range(400)]
            c0, t0 = _cpu(), time.monotonic()
            await asyncio.sleep(seconds)
            c1, t1 = _cpu(), time.monotonic()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return released, c1 - c0, t1 - t0

        released, cpu, wall = asyncio.run(main())
        rows.append({"limiter": name, "rpm": rpm, "waiters": 400, "seconds": round(wall, 1), "released": released,
                     "max_per_1s": max_in_window(times, 1.0), "max_per_60s": max_in_window(times, 60.0),
                     "cpu_s": round(cpu, 2), "core_share": round(cpu / wall, 3), "load": os.getloadavg()[0]})
        print(json.dumps(rows[-1]), flush=True)
    old_throttler_module.asyncio = asyncio  # type: ignore[assignment]
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
        old_throttler_module.asyncio = asyncio  # type: ignore[assignment]

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
    for name, workers, make in (("old: concurrency 8, asyncio-throttle", 8, lambda: OldPacing(120)),
                                ("new: concurrency auto", 256, lambda: Pacing(rpm=120, concurrency="auto"))):
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


def pacing_at(ref: str) -> types.ModuleType:
    """consensus_eval/judges/pacing.py as it was at commit ``ref`` (from git), as a module."""
    src = subprocess.run(["git", "show", f"{ref}:consensus_eval/judges/pacing.py"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    name = f"_pacing_at_{ref}"
    mod = types.ModuleType(name)
    sys.modules[name] = mod  # dataclasses look their module up
    exec(compile(src, f"{ref}:consensus_eval/judges/pacing.py", "exec"), mod.__dict__)
    return mod


def part_hiddensim(hidden_rpm: float, decreases: list[float], seconds: float = 3600.0, old_ref: str | None = None,
                   seeds: int = 1) -> list[dict[str, Any]]:
    import consensus_eval.judges.pacing as pacing_module

    rows = []
    versions: list[tuple[str, types.ModuleType]] = [("now", pacing_module)]
    if old_ref:
        versions.insert(0, (old_ref, pacing_at(old_ref)))
    for (version, module), decrease in itertools.product(versions, decreases):
        default = module.DECREASE
        module.DECREASE = decrease
        per_seed = [_hiddensim_once(module, hidden_rpm, seconds, seed) for seed in range(1, seeds + 1)]
        module.DECREASE = default
        row: dict[str, Any] = {"version": version, "decrease": decrease, "hidden_rpm": hidden_rpm, "seeds": seeds}
        for k in per_seed[0]:
            row[k] = round(statistics.median(r[k] for r in per_seed), 4)
            if seeds > 1:
                row[k + "_seeds"] = [r[k] for r in per_seed]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def _hiddensim_once(module: types.ModuleType, hidden_rpm: float, seconds: float, seed: int) -> dict[str, float]:
    log = hidden_window(module.Pacing(concurrency="auto"), hidden_rpm, seconds, seed, run=virtual)
    row: dict[str, float] = {}
    for lo, hi in ((0, seconds), (0, 600), (600, 1800), (1800, seconds), (0, 60), (60, 180)):
        part = [st for t, st in log if lo <= t < hi]
        ok = sum(1 for st in part if st == 200)
        span = f"{lo // 60}_{int(hi) // 60}"
        row[f"ok_per_min_{span}"] = round(ok / ((hi - lo) / 60), 1)
        row[f"ratio_{span}"] = round(ok / ((hi - lo) / 60) / hidden_rpm, 3)
        n429 = sum(1 for st in part if st == 429)
        row[f"share_429_{span}"] = round(n429 / max(1, len(part)), 4)
    return row


# ---------------------------------------------------------------------- through the judge layer


def _cases(n: int) -> list[Any]:
    from consensus_eval.domain.cases import Case

    examples = [json.loads(x) for x in (ROOT / "examples" / "cases.jsonl").read_text(encoding="utf-8").splitlines()
                if x.strip()]
    out = []
    for i in range(n):
        d = dict(examples[i % len(examples)])
        out.append(Case(id=f"pace-{i:05d}", conversation=d.get("conversation", ""),
                        record=d["record"] + f"\n(序号 {i})"))
    return out


def judge_phase(url: str, *, name: str, concurrency: int | str, rpm: float | None,
                old: bool | types.ModuleType, seconds: float, n_cases: int) -> dict[str, Any]:
    """Run the judge layer's calls (workers as the runner makes them) for ``seconds``, then stop."""
    from consensus_eval.domain.config import LLMJudgeConfig
    from consensus_eval.domain.prompts import render
    from consensus_eval.domain.rubric import load_rubric
    from consensus_eval.judges.llm import LLMJudge

    rubric = load_rubric("medical_record")
    cfg = LLMJudgeConfig(name=name, model="openai/fake-deepseek", api_base=url + "/v1", mode="tools",
                         concurrency=concurrency, rpm=rpm, timeout_s=300, max_retries=8, max_reasks=2,
                         input_cost_per_token=0, output_cost_per_token=0)
    judge = LLMJudge(cfg, rubric)
    if isinstance(old, types.ModuleType):  # the pacing module of an older commit
        judge._pacing = old.Pacing(rpm=rpm, concurrency=concurrency, max_concurrency=cfg.max_concurrency)
    elif old:
        judge._pacing = OldPacing(rpm)  # type: ignore[assignment]
    calls = [(c, d) for c in _cases(n_cases) for d in rubric.dimensions]
    queue = list(reversed(calls))
    done = 0

    async def main() -> None:
        nonlocal done

        async def worker() -> None:
            nonlocal done
            while queue:
                case, d = queue.pop()
                await judge.judge(case, d, render(rubric, d, case))
                done += 1

        tasks = [asyncio.create_task(worker()) for _ in range(min(cfg.max_workers, len(queue)))]
        await asyncio.wait(tasks, timeout=seconds)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    t0 = time.time()
    asyncio.run(main())
    report = judge.pacing_report()
    return {"t0": t0, "t1": time.time(), "judgments": done,
            "report": None if report is None else {k: getattr(report, k) for k in (
                "binding", "requests", "rate_limited", "achieved_rpm", "limit_final", "limit_min", "limit_max",
                "cuts", "mean_latency_s", "mean_in_flight")},
            "explain": report.explain() if report else None}


def server_figures(log: list[dict[str, Any]], t0: float, t1: float, warm: float, scale: float) -> dict[str, Any]:
    start = t0 + (t1 - t0) * warm
    window = [e for e in log if start <= e["t"] <= t1]
    minutes = (t1 - start) / 60
    ok = sum(1 for e in window if e["status"] == 200)
    n429 = sum(1 for e in window if e["status"] == 429)
    every = [e for e in log if t0 <= e["t"] <= t1]
    return {"sustained_ok_per_min_scaled": round(ok / minutes, 1),
            "sustained_ok_per_min_real": round(ok / minutes / scale, 2),
            "share_429_sustained": round(n429 / max(1, len(window)), 4),
            "share_429_all": round(sum(1 for e in every if e["status"] == 429) / max(1, len(every)), 4),
            "requests": len(every)}


PHASES: tuple[tuple[str, int | str, bool], ...] = (
    ("old: concurrency 8, asyncio-throttle", 8, True), ("new: concurrency auto", "auto", False))


def part_scaled(scale: float, seconds: float) -> list[dict[str, Any]]:
    from tests.fake_server import FakeConfig, spawn

    rows = []
    for name, conc, old in PHASES:
        cfg = FakeConfig(seed=16, latency_ms=30_000 / scale, latency_dist="lognormal", latency_sigma=0.5,
                         latency_max_ms=300_000 / scale, max_lifetime_s=seconds + 120, fault_free_after=None)
        proc, url = spawn(cfg, cwd=ROOT)
        try:
            res = judge_phase(url, name="deepseek", concurrency=conc, rpm=120 * scale, old=old, seconds=seconds,
                              n_cases=4000)
            log = _get(url + "/_log")
        finally:
            proc.terminate()
            proc.wait(10)
        row = {"judge": name, "scale": scale, "seconds": seconds,
               **server_figures(log, res["t0"], res["t1"], 0.3, scale),
               "max_per_1s_scaled": max_in_window([e["t"] for e in log], 1.0),
               "explain": res["explain"], "load": os.getloadavg()[0]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def part_hidden(scale: float, seconds: float, hidden_rpm: float, retry_after: bool,
                old_ref: str | None = None, fixed: bool = True) -> list[dict[str, Any]]:
    from tests.fake_server import FakeConfig, spawn

    rows = []
    phases: list[tuple[str, int | str, bool | types.ModuleType]] = list(PHASES if fixed else PHASES[1:])
    if old_ref:
        phases.insert(1, (f"auto as at {old_ref}", "auto", pacing_at(old_ref)))
    import consensus_eval.judges.pacing as pacing_module

    window = pacing_module.RATE_WINDOW_S
    for name, conc, old in phases:
        cfg = FakeConfig(seed=17, latency_ms=8_000 / scale, latency_dist="lognormal", latency_sigma=0.5,
                         latency_max_ms=30_000 / scale, hidden_rpm=hidden_rpm * scale, hidden_window_s=60 / scale,
                         hidden_retry_after=int(retry_after), max_lifetime_s=seconds + 120, fault_free_after=None)
        proc, url = spawn(cfg, cwd=ROOT)
        pacing_module.RATE_WINDOW_S = window / scale  # the client's assumed minute shrinks with the provider's
        try:
            res = judge_phase(url, name="hidden", concurrency=conc, rpm=None, old=old, seconds=seconds, n_cases=6000)
            log = _get(url + "/_log")
        finally:
            pacing_module.RATE_WINDOW_S = window
            proc.terminate()
            proc.wait(10)
        fig = server_figures(log, res["t0"], res["t1"], 0.3, scale)
        whole = server_figures(log, res["t0"], res["t1"], 0.0, scale)
        fig["whole_ok_per_min_real"] = whole["sustained_ok_per_min_real"]
        fig["ratio_whole"] = round(whole["sustained_ok_per_min_real"] / hidden_rpm, 3)
        row = {"judge": name, "hidden_rpm": hidden_rpm, "retry_after": retry_after, "scale": scale,
               "seconds": seconds, **fig,
               "ratio_to_hidden": round(fig["sustained_ok_per_min_real"] / hidden_rpm, 3),
               "explain": res["explain"], "report": res["report"], "load": os.getloadavg()[0]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def _get(url: str) -> Any:
    import urllib.request

    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def median_rows(runs: list[list[dict[str, Any]]], key: str) -> list[dict[str, Any]]:
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
    p.add_argument("--part", action="append", choices=["windows", "cpu", "deepseek", "hiddensim", "scaled", "hidden"])
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--cpu-s", type=float, default=65.0)
    p.add_argument("--scale", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=120.0)
    p.add_argument("--hidden-rpm", type=float, default=300.0)
    p.add_argument("--no-retry-after", action="store_true")
    p.add_argument("--decrease", type=float, action="append", help="hiddensim: multiplicative decrease(s) to compare")
    p.add_argument("--old-ref", help="hiddensim, hidden: also the pacing module as at this commit (git)")
    p.add_argument("--seeds", type=int, default=1, help="hiddensim: latency seeds (median)")
    p.add_argument("--no-fixed", action="store_true", help="hidden: leave out the old fixed concurrency 8 phase")
    p.add_argument("--sim-seconds", type=float, default=3600.0, help="hiddensim: simulated seconds")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    from consensus_eval.judges.quiet import quiet_libraries

    quiet_libraries()
    parts = args.part or ["windows", "cpu", "deepseek", "hiddensim", "scaled", "hidden"]
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
    for part in parts:
        runs = []
        for r in range(args.repeat if part in ("cpu", "scaled", "hidden") else 1):
            print(f"== {part} repeat {r + 1}", flush=True)
            if part == "windows":
                runs.append(part_windows())
            elif part == "cpu":
                runs.append(part_cpu(args.cpu_s))
            elif part == "deepseek":
                runs.append(part_deepseek())
            elif part == "hiddensim":
                from consensus_eval.judges.pacing import DECREASE

                runs.append(part_hiddensim(args.hidden_rpm, args.decrease or [DECREASE], args.sim_seconds,
                                           args.old_ref, args.seeds))
            elif part == "scaled":
                runs.append(part_scaled(args.scale, args.seconds))
            else:
                runs.append(part_hidden(args.scale, args.seconds, args.hidden_rpm, not args.no_retry_after,
                                        args.old_ref, not args.no_fixed))
        results[part] = median_rows(runs, "judge")
        print(f"== {part} (median of {len(runs)})", flush=True)
        for row in results[part]:
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("_runs")}), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
