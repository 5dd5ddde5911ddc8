"""Throughput of the judge layer against a local fake OpenAI-compatible server.

N cases x 3 dimensions x J judges x R runs, through ``consensus_eval.api.prepare/run`` (litellm +
instructor + the store), against ``tests/fake_server.py`` running in its own process with latency L;
each judge has C workers. In the same client process, the same calls are then made with the bare
``openai.AsyncOpenAI`` client, unpatched, as shipped (same messages, same tool schema, J x C
workers, the arguments parsed with ``json.loads``): the floor for Python overhead. The client calls
``consensus_eval.judges.quiet.quiet_libraries()`` first, as the command line does (litellm's bundled
price map, library loggers silenced); nothing else is set or patched.

Three regimes, one command each:

    python bench/throughput.py --regime realistic  # 300 cases, 3 judges, L lognormal median 8 s, C = 32
    python bench/throughput.py --regime latency    # 1,000 cases, 3 judges, 1 run, L = 500 ms, C = 32
    python bench/throughput.py --regime cpu        # L = 0: CPU ms per call vs bare openai

Reported per repeat (each repeat: a fresh server process and a fresh client process) and as the
median over ``--repeat`` repeats:

- calls/s from the first call to the last landing, the bound ``min(J x C / mean L, J x rate limit)``
  (for a lognormal L the mean is median x exp(sigma^2 / 2)) and their ratio; the mean latency the
  server actually drew in each phase; with L > 0, what a client with zero overhead would reach with
  those same latencies (J x C workers, simulated: the bound less the run's tail);
- CPU ms per call of the client process only (``resource.getrusage(RUSAGE_SELF)`` over the same
  window; the server runs in another process) and the share of one core it amounts to, for the judge
  layer and for bare openai, and their ratio, printed LAST;
- the 1-minute load average at the start and end of each phase (the machine may be shared);
- start-up: from the client process's start (``/proc/self/stat``) to the first request the server
  received, with its parts (imports, prepare).

``--profile FILE.html`` profiles the judge-layer phase with pyinstrument (one repeat); ``--server-log
FILE`` keeps the server's log of every request (arrival and end times) per repeat.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REGIMES = {
    # what users feel: 2,700 calls at a real model's latency (issue 11: 8 +- 4 s, C = 32)
    "realistic": dict(cases=300, judges=3, runs=1, latency_ms=8000.0, latency_dist="lognormal", concurrency=32,
                      max_lifetime_s=1800.0),
    "latency": dict(cases=1000, judges=3, runs=1, latency_ms=500.0, latency_dist="fixed", concurrency=32,
                    max_lifetime_s=900.0),
    "cpu": dict(cases=300, judges=3, runs=1, latency_ms=0.0, latency_dist="fixed", concurrency=32,
                max_lifetime_s=900.0),
}
MODELS = ["openai/fake-judge-a", "openai/fake-judge-strict", "openai/fake-judge-lenient",
          "openai/fake-judge-d", "openai/fake-judge-e", "openai/fake-judge-f"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def process_start_time() -> float:
    """Wall-clock time at which this process started (Linux /proc)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start_ticks = int(fields[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - uptime + start_ticks / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------- workload files


def write_cases(path: Path, n: int) -> None:
    """``n`` cases cycled from the bundled examples, each with its own id (so its own prompt)."""
    examples = [json.loads(x) for x in (ROOT / "examples" / "cases.jsonl").read_text(encoding="utf-8").splitlines()
                if x.strip()]
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            d = dict(examples[i % len(examples)])
            d["id"] = f"bench-{i:05d}"
            d["important"] = False
            f.write(json.dumps(d, ensure_ascii=False) + "\n")


def write_config(path: Path, url: str, judges: int, runs: int, concurrency: int, mode: str) -> None:
    lines = [f"rubric: medical_record\nruns: {runs}\nimportant_runs: {runs}\njudges:\n"]
    for j in range(judges):
        lines.append(
            f"  - name: judge-{j}\n    model: {MODELS[j % len(MODELS)]}{'' if j < len(MODELS) else f'-{j}'}\n"
            f"    api_base: {url}/v1\n    mode: {mode}\n    concurrency: {concurrency}\n"
            f"    timeout_s: 60\n    max_retries: 4\n    max_reasks: 2\n"
            f"    input_cost_per_token: 0.000001\n    output_cost_per_token: 0.000002\n")
    path.write_text("".join(lines), encoding="utf-8")


def _get(url: str) -> object:
    import urllib.request

    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def _load() -> float:
    """1-minute load average of the machine (the bench shares it with other work)."""
    return os.getloadavg()[0]


def served(log: list[dict], concurrency: int) -> dict:
    """What the server did in one phase: mean latency it drew, and the calls/s a client with zero
    overhead would reach with those latencies (``concurrency`` workers per model, each call started
    the moment a worker is free, in the order the server received them; the tail included)."""
    done = [e for e in log if e.get("t_end")]
    if not done:
        return {"mean_latency_s": 0.0, "ideal_calls_per_s": None}
    by_model: dict[str, list[float]] = {}
    for e in sorted(done, key=lambda e: e["t"]):
        by_model.setdefault(e["model"], []).append(e["t_end"] - e["t"])
    makespan = 0.0
    for lats in by_model.values():
        free = [0.0] * concurrency
        for lat in lats:
            start = heapq.heappop(free)
            heapq.heappush(free, start + lat)
        makespan = max(makespan, max(free))
    mean = sum(e["t_end"] - e["t"] for e in done) / len(done)
    return {"mean_latency_s": mean, "ideal_calls_per_s": len(done) / makespan if makespan > 0 else None}


# ---------------------------------------------------------------------- the client process


def client(args: argparse.Namespace) -> dict:
    """One measured run in this (fresh) process: judge layer, then bare openai; returns figures."""
    t_proc = process_start_time()
    t0 = time.time()
    from consensus_eval.judges.quiet import quiet_libraries

    quiet_libraries()  # as the CLI does, before litellm's first import (it imports litellm itself)
    from consensus_eval import api
    from consensus_eval.judges import llm  # noqa: F401 - the judge layer
    t_import = time.time()
    work = Path(args.workdir)
    prep = api.prepare(work / "cases.jsonl", work / "config.yaml", check_keys=False)
    t_prepared = time.time()
    n_calls = len(prep.calls)
    concurrency = prep.judges[0].config.concurrency
    marks: dict[str, float] = {}

    def hook(p) -> None:  # noqa: ANN001
        if "t_first" not in marks:
            marks["t_first"], marks["cpu_first"], marks["load_start"] = time.time(), _cpu(), _load()
        if p.done == p.total - p.skipped:
            marks["t_last"], marks["cpu_last"], marks["load_end"] = time.time(), _cpu(), _load()
            marks["failed"] = p.failed

    profiler = None
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.001, async_mode="disabled")
        profiler.start()
    if args.cprofile:
        import cProfile

        cp = cProfile.Profile()
        cp.enable()
    api.run(prep, work / "out", hook)
    t_done = time.time()
    if args.cprofile:
        cp.disable()
        cp.dump_stats(args.cprofile)
    if profiler:
        profiler.stop()
        from pyinstrument.renderers import ConsoleRenderer

        Path(args.profile).write_text(profiler.output_html(), encoding="utf-8")
        profiler.last_session.save(str(Path(args.profile).with_suffix(".pyisession")))
        Path(args.profile).with_suffix(".txt").write_text(profiler.output(ConsoleRenderer(
            unicode=False, color=False, flat=True, show_all=True)), encoding="utf-8")
    stats = _get(args.url + "/_stats")
    log = _get(args.url + "/_log")
    wall, cpu = marks["t_last"] - marks["t_first"], marks["cpu_last"] - marks["cpu_first"]
    judge = {
        "calls": n_calls, "failed": marks.get("failed", 0),
        "wall_s": wall, "calls_per_s": n_calls / wall,
        "cpu_ms_per_call": 1000 * cpu / n_calls, "cpu_share": cpu / wall,
        "load_start": marks["load_start"], "load_end": marks["load_end"],
        "server_requests": stats["requests"],
        "startup_s": stats["first_t"] - t_proc,
        "interpreter_s": t0 - t_proc, "import_s": t_import - t0, "prepare_s": t_prepared - t_import,
        "rebuild_s": t_done - marks["t_last"],
        **served(log, concurrency),
    }
    server_cpu_before = stats["cpu_s"]
    bare = {} if args.no_openai else bare_openai(args, prep)
    if bare:
        stats2 = _get(args.url + "/_stats")
        bare["server_cpu_ms_per_call"] = 1000 * (stats2["cpu_s"] - server_cpu_before) / bare["calls"]
        bare.update(served(_get(args.url + "/_log")[len(log):], concurrency))
    layers = layer_costs(prep) if args.layers else {}
    return {"judge": judge, "openai": bare, "layers": layers}


def _pool(prep, make_call) -> dict:  # noqa: ANN001
    """Run ``make_call(judge, call)`` for every planned call, J x C workers; CPU ms per call."""
    import asyncio

    async def main() -> dict:
        queues = {j.config.name: [c for c in prep.calls if c.planned.judge == j.config.name] for j in prep.judges}

        async def worker(judge) -> None:  # noqa: ANN001
            q = queues[judge.config.name]
            while q:
                await make_call(judge, q.pop())

        t, c = time.time(), _cpu()
        await asyncio.gather(*(worker(j) for j in prep.judges for _ in range(j.config.concurrency)))
        wall, cpu = time.time() - t, _cpu() - c
        return {"calls_per_s": len(prep.calls) / wall, "cpu_ms_per_call": 1000 * cpu / len(prep.calls)}

    return asyncio.run(main())


def layer_costs(prep) -> dict:  # noqa: ANN001
    """CPU per call of each layer alone, same calls: litellm.acompletion (request kwargs built
    beforehand), LLMJudge.judge (instructor + litellm + retry/usage wrapper, no store)."""
    import instructor
    import litellm
    from instructor.processing.response import handle_response_model

    from consensus_eval.domain.judgment import response_model
    from consensus_eval.judges.llm import MODES

    kwargs = {}
    for call in prep.calls:
        judge = next(j for j in prep.judges if j.config.name == call.planned.judge)
        _, kw = handle_response_model(response_model(prep.rubric, call.planned.dimension),
                                      mode=MODES[judge.config.mode], messages=[dict(m) for m in call.messages])
        kwargs[call.planned.request_hash] = {"model": judge.config.model, **judge._params(), **kw}

    async def via_litellm(judge, call) -> None:  # noqa: ANN001
        resp = await litellm.acompletion(**kwargs[call.planned.request_hash])
        json.loads(resp.choices[0].message.tool_calls[0].function.arguments
                   if resp.choices[0].message.tool_calls else resp.choices[0].message.content)

    async def via_judge(judge, call) -> None:  # noqa: ANN001
        out = await judge.judge(call.case, prep.rubric.dimension(call.planned.dimension), call.messages)
        assert out.status == "ok", out.error

    del instructor
    return {"litellm": _pool(prep, via_litellm), "judge_no_store": _pool(prep, via_judge)}



def bare_openai(args: argparse.Namespace, prep) -> dict:  # noqa: ANN001
    """The same calls with openai.AsyncOpenAI as shipped: J x C workers, tool schema precomputed,
    arguments parsed."""
    import asyncio

    import instructor
    import openai
    from instructor.processing.response import handle_response_model

    from consensus_eval.domain.judgment import response_model
    from consensus_eval.judges.llm import MODES

    work = []  # (judge index, request kwargs), built before the clock starts
    by_judge = {j.config.name: i for i, j in enumerate(prep.judges)}
    for call in prep.calls:
        judge = prep.judges[by_judge[call.planned.judge]]
        cfg = judge.config
        _, kw = handle_response_model(response_model(prep.rubric, call.planned.dimension), mode=MODES[cfg.mode],
                                      messages=[dict(m) for m in call.messages])
        work.append((by_judge[call.planned.judge], {
            "model": cfg.model.split("/", 1)[1], "temperature": cfg.temperature, "max_tokens": cfg.max_tokens,
            **kw}))

    async def main() -> dict:
        clients = [openai.AsyncOpenAI(base_url=args.url + "/v1", api_key="none", max_retries=0, timeout=60)
                   for _ in prep.judges]
        queues: list[list[dict]] = [[] for _ in prep.judges]
        for j, kw in work:
            queues[j].append(kw)
        errors = 0

        async def worker(j: int) -> None:
            nonlocal errors
            q = queues[j]
            while q:
                kw = q.pop()
                resp = await clients[j].chat.completions.create(**kw)
                msg = resp.choices[0].message
                text = msg.tool_calls[0].function.arguments if msg.tool_calls else msg.content
                try:
                    json.loads(text)
                except ValueError:
                    errors += 1

        load_start = _load()
        t, c = time.time(), _cpu()
        await asyncio.gather(*(worker(j) for j, judge in enumerate(prep.judges)
                               for _ in range(judge.config.concurrency)))
        wall, cpu = time.time() - t, _cpu() - c
        load_end = _load()
        for cl in clients:
            await cl.close()
        return {"calls": len(work), "wall_s": wall, "calls_per_s": len(work) / wall,
                "cpu_ms_per_call": 1000 * cpu / len(work), "cpu_share": cpu / wall,
                "load_start": load_start, "load_end": load_end, "parse_errors": errors}

    del instructor
    return asyncio.run(main())


# ---------------------------------------------------------------------- the orchestrator


def one_repeat(args: argparse.Namespace, i: int) -> dict:
    sys.path.insert(0, str(ROOT))
    from tests.fake_server import FakeConfig, spawn

    srv_cfg = FakeConfig(seed=args.seed, latency_ms=args.latency_ms, latency_dist=args.latency_dist,
                         latency_sigma=args.latency_sigma, rate_limit=args.rate_limit,
                         max_requests=10 * args.cases * 3 * args.judges * args.runs + 1000,
                         max_lifetime_s=args.max_lifetime_s, keep_log=True,
                         log_file=f"{args.server_log}.{i + 1}" if args.server_log else None)
    proc, url = spawn(srv_cfg)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
            work = Path(tmp)
            write_cases(work / "cases.jsonl", args.cases)
            write_config(work / "config.yaml", url, args.judges, args.runs, args.concurrency, args.mode)
            cmd = [sys.executable, str(Path(__file__).resolve()), "--client", "--workdir", str(work), "--url", url]
            if args.no_openai:
                cmd.append("--no-openai")
            if args.layers:
                cmd.append("--layers")
            if args.profile:
                cmd += ["--profile", args.profile]
            if args.cprofile:
                cmd += ["--cprofile", args.cprofile]
            env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
            out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT,
                                 timeout=args.max_lifetime_s)
            if out.returncode != 0:
                raise RuntimeError(f"client failed:\n{out.stderr[-4000:]}")
            return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _phase_line(name: str, r: dict, bound: float | None) -> str:
    line = (f"{name} {r['calls_per_s']:.2f} calls/s"
            + (f" ({r['calls_per_s'] / bound:.3f} of bound)" if bound else "")
            + f", {r['cpu_ms_per_call']:.3f} CPU ms/call, {100 * r['cpu_share']:.1f} % of one core")
    if bound and r.get("ideal_calls_per_s"):
        line += (f", server mean latency {r['mean_latency_s']:.3f} s, zero-overhead client "
                 f"{r['ideal_calls_per_s']:.2f} calls/s ({r['calls_per_s'] / r['ideal_calls_per_s']:.3f} of it)")
    return line + f", load {r['load_start']:.2f} -> {r['load_end']:.2f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--regime", choices=sorted(REGIMES), default="latency")
    p.add_argument("--cases", type=int)
    p.add_argument("--judges", type=int)
    p.add_argument("--runs", type=int)
    p.add_argument("--latency-ms", type=float, help="fixed latency, or the median of a lognormal one")
    p.add_argument("--latency-dist", choices=["fixed", "lognormal"])
    p.add_argument("--latency-sigma", type=float, default=None,
                   help="lognormal shape (default: the fake server's, 0.5)")
    p.add_argument("--concurrency", type=int)
    p.add_argument("--rate-limit", type=float, default=None, help="server requests/s per model")
    p.add_argument("--mode", default="tools", choices=["tools", "json", "json_schema", "md_json"])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-openai", action="store_true", help="skip the bare openai comparison")
    p.add_argument("--profile", help="profile the judge-layer phase with pyinstrument into this HTML file")
    p.add_argument("--layers", action="store_true",
                   help="also time litellm alone and the judge without the store, same calls")
    p.add_argument("--cprofile", help="profile the judge-layer phase with cProfile into this .prof file")
    p.add_argument("--max-lifetime-s", type=float, help="hard limit per repeat (server and client)")
    p.add_argument("--json", help="also write all figures to this JSON file")
    p.add_argument("--server-log", help="the fake server's request log (JSON lines) into FILE.<repeat>")
    # internal: the measured client process
    p.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.client:
        print(json.dumps(client(args)))
        return 0
    for k, v in REGIMES[args.regime].items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.profile or args.cprofile:
        args.repeat = 1

    n = args.cases * 3 * args.judges * args.runs
    bound = None
    sys.path.insert(0, str(ROOT))
    from tests.fake_server import FakeConfig

    if args.latency_sigma is None:
        args.latency_sigma = FakeConfig.latency_sigma
    mean_s = None
    if args.latency_ms > 0:
        # lognormal: --latency-ms is the median; the bound needs the mean, median x exp(sigma^2 / 2)
        mean_s = args.latency_ms / 1000 * (math.exp(args.latency_sigma ** 2 / 2)
                                           if args.latency_dist == "lognormal" else 1.0)
        bound = args.judges * args.concurrency / mean_s
    if args.rate_limit:
        bound = min(bound or float("inf"), args.judges * args.rate_limit)
    dist = (f"lognormal, median {args.latency_ms:g} ms, sigma {args.latency_sigma:g}, mean {1000 * mean_s:.0f} ms"
            if args.latency_dist == "lognormal" else f"fixed {args.latency_ms:g} ms")
    print(f"regime {args.regime}: {args.cases} cases x 3 dimensions x {args.judges} judges x {args.runs} run(s) "
          f"= {n} calls; latency {dist}, concurrency {args.concurrency}/judge, mode {args.mode}; "
          f"{os.cpu_count()} CPUs; load {_load():.2f}", flush=True)
    if bound:
        print(f"bound min(J x C / mean L, rate limits) = {bound:.2f} calls/s", flush=True)
    results = []
    for i in range(args.repeat):
        r = one_repeat(args, i)
        results.append(r)
        j, o = r["judge"], r["openai"]
        print(f"  repeat {i + 1}: " + _phase_line("judge layer", j, bound)
              + f"; start-up {j['startup_s']:.2f} s (import {j['import_s']:.2f}, prepare {j['prepare_s']:.2f}), "
              f"failed {j['failed']}, server requests {j['server_requests']}", flush=True)
        if o:
            print("            " + _phase_line("bare openai", o, bound)
                  + f" (server {o['server_cpu_ms_per_call']:.3f} CPU ms/call); judge layer / bare openai: "
                  f"calls/s {j['calls_per_s'] / o['calls_per_s']:.3f}, "
                  f"CPU/call {j['cpu_ms_per_call'] / o['cpu_ms_per_call']:.2f}x", flush=True)
        for name, lay in r.get("layers", {}).items():
            print(f"    layer {name}: {lay['calls_per_s']:.1f} calls/s, {lay['cpu_ms_per_call']:.3f} CPU ms/call",
                  flush=True)

    def med(side: str, key: str) -> float:
        return statistics.median(r[side][key] for r in results)

    summary = {"args": {k: v for k, v in vars(args).items() if k not in ("client", "workdir", "url")},
               "calls": n, "bound_calls_per_s": bound, "repeats": results,
               "median": {"judge_calls_per_s": med("judge", "calls_per_s"),
                          "judge_cpu_ms_per_call": med("judge", "cpu_ms_per_call"),
                          "judge_cpu_share": med("judge", "cpu_share"),
                          "startup_s": med("judge", "startup_s"), "import_s": med("judge", "import_s"),
                          "prepare_s": med("judge", "prepare_s"), "rebuild_s": med("judge", "rebuild_s")}}
    m = summary["median"]
    print(f"median of {args.repeat}: judge layer {m['judge_calls_per_s']:.2f} calls/s, "
          f"{m['judge_cpu_ms_per_call']:.3f} CPU ms/call, {100 * m['judge_cpu_share']:.1f} % of one core; "
          f"start-up {m['startup_s']:.2f} s (imports {m['import_s']:.2f} s, prepare {m['prepare_s']:.2f} s); "
          f"outputs rebuilt in {m['rebuild_s']:.2f} s")
    if bound:
        m["ratio_to_bound"] = m["judge_calls_per_s"] / bound
        if all(r["judge"].get("ideal_calls_per_s") for r in results):
            m["judge_ideal_calls_per_s"] = med("judge", "ideal_calls_per_s")
            m["judge_over_ideal"] = statistics.median(
                r["judge"]["calls_per_s"] / r["judge"]["ideal_calls_per_s"] for r in results)
            print(f"zero-overhead client with the latencies the server drew (judge-layer phase): "
                  f"{m['judge_ideal_calls_per_s']:.2f} calls/s; judge layer reaches {m['judge_over_ideal']:.3f} of it")
    if not args.no_openai:
        m["openai_calls_per_s"] = med("openai", "calls_per_s")
        m["openai_cpu_ms_per_call"] = med("openai", "cpu_ms_per_call")
        m["openai_cpu_share"] = med("openai", "cpu_share")
        m["calls_per_s_ratio_judge_over_openai"] = statistics.median(
            r["judge"]["calls_per_s"] / r["openai"]["calls_per_s"] for r in results)
        m["cpu_ratio_judge_over_openai"] = statistics.median(
            r["judge"]["cpu_ms_per_call"] / r["openai"]["cpu_ms_per_call"] for r in results)
        print(f"bare openai: {m['openai_calls_per_s']:.2f} calls/s, {m['openai_cpu_ms_per_call']:.3f} CPU ms/call, "
              f"{100 * m['openai_cpu_share']:.1f} % of one core")
        if bound and all(r["openai"].get("ideal_calls_per_s") for r in results):
            m["openai_over_ideal"] = statistics.median(
                r["openai"]["calls_per_s"] / r["openai"]["ideal_calls_per_s"] for r in results)
            print(f"bare openai reaches {m['openai_over_ideal']:.3f} of its zero-overhead client")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    # the ratios, last
    if bound:
        print(f"RATIO achieved / bound = {m['ratio_to_bound']:.3f}")
    if not args.no_openai:
        print(f"RATIO judge layer / bare openai calls/s = {m['calls_per_s_ratio_judge_over_openai']:.3f}")
        print(f"RATIO judge layer / bare openai CPU per call = {m['cpu_ratio_judge_over_openai']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
