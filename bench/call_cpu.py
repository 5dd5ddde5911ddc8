"""CPU per judge call (issue 38 part 4): a 720-call run (3 LLM judges x 80 cases x 3 dimensions, the
``score`` path: ``api.prepare`` + ``api.run_async``) against the fake provider (tests/fake_server.py, its
own process, latency lognormal median ``--latency-ms``), profiled with cProfile, and its imports.

Prints, for the import of ``consensus_eval.api`` + the judge layer (litellm and instructor included) and
for the run (calls, store, the rebuild of the outputs), the CPU seconds (getrusage) and the profile's own
time (tottime) per package: ours (consensus_eval), litellm, instructor, openai, pydantic, httpx/aiohttp,
asyncio and the standard library, the rest; ``--top N`` lists the N functions of ours with the most
tottime and the N with the most cumulative time. ``--no-profile`` measures CPU only (cProfile's own cost
is about as large as the work it measures on this path).

``--layers``: what each layer adds, each in a fresh process on the same 720 requests (the judge's own, as
``LLMJudge.request`` renders them), 64 at a time, the first 20 left out as warm-up: ``openai`` (the bare
openai SDK client, ``chat.completions.create``), ``litellm`` (``litellm.acompletion``), ``instructor``
(``create_with_completion`` over litellm with the judge's response model, parsed and validated), ``judge``
(``LLMJudge.judge``: ours on top: pacing, the retry loop, usage and cost, scrubbing, the outcome) and
``run`` (the ``score`` path: the runner, the store; the rebuild apart). CPU per call of each, and the
differences: what litellm, instructor and ours add.

    .venv/bin/python bench/call_cpu.py                      # profile
    .venv/bin/python bench/call_cpu.py --no-profile --repeat 3  # CPU per call, median of 3 processes
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("PACING_BENCH_TREE") or str(ROOT))

PACKAGES = ("consensus_eval", "litellm", "instructor", "openai", "pydantic", "pydantic_core", "httpx", "httpcore",
            "aiohttp", "jinja2", "tiktoken", "tokenizers", "asyncio", "sqlite3", "json", "numpy", "scipy")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def package_of(filename: str) -> str:
    """The package a profiled function's file belongs to (``~`` for built-ins)."""
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins"
    parts = Path(filename).parts
    for name in PACKAGES:
        if name in parts:
            return name
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].split(".")[0]
    if "lib" in parts and any(p.startswith("python3") for p in parts):
        return "stdlib"
    return "other"


def by_package(stats: pstats.Stats) -> dict[str, float]:
    """The profile's own time (tottime) summed per package."""
    out: dict[str, float] = {}
    for (filename, _line, _name), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        pkg = package_of(filename)
        out[pkg] = out.get(pkg, 0.0) + tt
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def top_ours(stats: pstats.Stats, n: int, key: int) -> list[tuple[str, float]]:
    rows = [(f"{Path(f).name}:{line} {name}", v[key]) for (f, line, name), v in stats.stats.items()  # type: ignore[attr-defined]
            if package_of(f) == "consensus_eval"]
    return [(name, round(t, 3)) for name, t in sorted(rows, key=lambda r: -r[1])[:n]]


def one(url: str, judges: int, cases: int, profile: bool, top: int) -> dict[str, Any]:
    """One process's import and run (called in a fresh process by :func:`main`)."""
    prof = cProfile.Profile() if profile else None
    c0 = _cpu()
    if prof:
        prof.enable()
    from consensus_eval import api
    from consensus_eval.judges import llm  # noqa: F401 - the judge layer (litellm, instructor) is imported lazily
    from consensus_eval.judges.quiet import quiet_libraries
    from tests.big_run import big_cases

    if prof:
        prof.disable()
    c1 = _cpu()
    quiet_libraries()
    if os.environ.get("CALL_CPU_FREEZE"):  # as the command line: what is alive when prepare ends is frozen
        from consensus_eval._gc import freeze_when_done

        freeze_when_done()
    out: dict[str, Any] = {"import_cpu_s": round(c1 - c0, 2)}
    if prof:
        out["import_by_package"] = {k: round(v, 2) for k, v in by_package(pstats.Stats(prof)).items() if v >= 0.05}
    config = {"rubric": "medical_record", "runs": 1, "important_runs": 1,
              "judges": [{"name": f"j{k}", "model": f"openai/fake-{k}", "api_base": url + "/v1",
                          "api_key_env": "CALL_CPU_KEY", "input_cost_per_token": 0, "output_cost_per_token": 0}
                         for k in range(judges)]}
    landed = [0.0]

    def hook(p: Any) -> None:
        landed[0] = _cpu()

    prof2 = cProfile.Profile() if profile else None
    gc_time = [0.0, 0.0, 0.0]
    gc_count = [0, 0, 0]
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:  # the collector's passes during the run, timed
        if phase == "start":
            started[0] = time.process_time()
        else:
            gc_time[info["generation"]] += time.process_time() - started[0]
            gc_count[info["generation"]] += 1

    gc.callbacks.append(on_gc)
    with tempfile.TemporaryDirectory() as tmp:
        c2 = _cpu()
        if prof2:
            prof2.enable()
        prep = api.prepare(big_cases(cases, seed=38), config)
        res = asyncio.run(api.run_async(prep, Path(tmp) / "run", hook))
        if prof2:
            prof2.disable()
        c3 = _cpu()
    gc.callbacks.remove(on_gc)
    n = len(prep.calls)
    assert res.progress is not None and res.progress.done == n, "every call ran"
    out.update({"calls": n, "failed": res.progress.failed, "run_cpu_s": round(c3 - c2, 2),
                "calls_cpu_s": round(landed[0] - c2, 2), "rebuild_cpu_s": round(c3 - landed[0], 2),
                "cpu_ms_per_call": round((landed[0] - c2) / n * 1000, 2),
                "gc_s_by_generation": [round(t, 2) for t in gc_time], "gc_passes": gc_count})
    if prof2:
        if os.environ.get("CALL_CPU_PROFILE"):  # the run's profile, for pstats
            prof2.dump_stats(os.environ["CALL_CPU_PROFILE"])
        stats = pstats.Stats(prof2)
        out["run_by_package"] = {k: round(v, 2) for k, v in by_package(stats).items() if v >= 0.05}
        out["ours_tottime"] = top_ours(stats, top, 2)
        out["ours_cumtime"] = top_ours(stats, top, 3)
    return out


LAYERS = ("openai", "litellm", "instructor", "judge")


def layer(url: str, name: str, calls: int, workers: int = 64, warm: int = 20) -> dict[str, Any]:
    """CPU of ``calls`` requests through one layer (module docstring), after ``warm`` unmeasured ones."""
    from consensus_eval.domain.config import LLMJudgeConfig
    from consensus_eval.domain.prompts import render
    from consensus_eval.domain.rubric import load_rubric
    from consensus_eval.judges.llm import LLMJudge
    from consensus_eval.judges.quiet import quiet_libraries
    from tests.big_run import big_cases

    quiet_libraries()
    rubric = load_rubric("medical_record")
    judge = LLMJudge(LLMJudgeConfig(name="j", model="openai/fake-0", api_base=url + "/v1", api_key_env="CALL_CPU_KEY",
                                    input_cost_per_token=0, output_cost_per_token=0), rubric)
    work = [(c, d) for c in big_cases((calls + warm) // 3 + 1, seed=38) for d in rubric.dimensions][:calls + warm]
    params = {k: v for k, v in judge._params().items() if k != "timeout"}  # noqa: SLF001 - the bench reads what is sent
    # rendered before the clock starts (a run renders its prompts when it plans its calls)
    prompts = {(c.id, d.id): render(rubric, d, c) for c, d in work}
    bodies = {(c.id, d.id): judge.request(prompts[c.id, d.id], d.id, c) for c, d in work} \
        if name in ("openai", "litellm") else {}

    if name == "openai":
        import openai

        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0)

        async def one(case: Any, d: Any) -> None:
            await client.chat.completions.create(model="fake-0", temperature=0.0, max_tokens=4096,
                                                 **bodies[case.id, d.id])
    elif name == "litellm":
        import litellm

        async def one(case: Any, d: Any) -> None:
            await litellm.acompletion(model="openai/fake-0", **bodies[case.id, d.id], **params)
    elif name == "instructor":
        import instructor
        import litellm

        client2 = instructor.from_litellm(litellm.acompletion, mode=instructor.Mode.TOOLS)

        async def one(case: Any, d: Any) -> None:
            await client2.chat.completions.create_with_completion(
                model="openai/fake-0", response_model=judge._response_model(d.id, case),  # noqa: SLF001
                messages=prompts[case.id, d.id], max_retries=2, **params)
    else:
        async def one(case: Any, d: Any) -> None:
            out = await judge.judge(case, d, prompts[case.id, d.id])
            assert out.status == "ok", out.error

    async def go(items: list[Any]) -> None:
        queue = list(reversed(items))

        async def worker() -> None:
            while queue:
                await one(*queue.pop())

        await asyncio.gather(*(worker() for _ in range(workers)))

    async def both() -> tuple[float, float]:
        await go(work[:warm])
        c0 = _cpu()
        await go(work[warm:])
        return c0, _cpu()

    c0, c1 = asyncio.run(both())
    return {"layer": name, "calls": calls, "cpu_s": round(c1 - c0, 2),
            "cpu_ms_per_call": round((c1 - c0) / calls * 1000, 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--judges", type=int, default=3)
    p.add_argument("--cases", type=int, default=80)
    p.add_argument("--latency-ms", type=float, default=1000.0)
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--layers", action="store_true", help="what each layer adds (module docstring)")
    p.add_argument("--one", help=argparse.SUPPRESS)  # the child: the server's URL
    p.add_argument("--layer", help=argparse.SUPPRESS)  # the child of --layers: which layer
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    if args.one and args.layer:
        print(json.dumps(layer(args.one, args.layer, args.judges * args.cases * 3)), flush=True)
        return
    if args.one:
        print(json.dumps(one(args.one, args.judges, args.cases, not args.no_profile, args.top)), flush=True)
        return
    runs = []
    steps: list[str | None] = [*LAYERS, None] if args.layers else [None]
    for _ in range(args.repeat):
        for step in steps:
            runs.append(_child(args, step))
    if args.repeat > 1 or args.layers:
        for step in steps:
            mine = [r for r in runs if r.get("layer") == step] if args.layers else runs
            key = "cpu_ms_per_call"
            print(f"median {step or 'run'} {key}: {statistics.median(r[key] for r in mine)} ({[r[key] for r in mine]})")
    if args.repeat > 1 and not args.layers:
        for k in ("import_cpu_s", "calls_cpu_s", "rebuild_cpu_s", "process_cpu_s", "peak_rss_mb"):
            print(f"median {k}: {statistics.median(r[k] for r in runs)} ({[r[k] for r in runs]})")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1), encoding="utf-8")


def _child(args: argparse.Namespace, step: str | None) -> dict[str, Any]:
    """One measuring process (a layer, or the whole run) against a fresh fake server."""
    from tests.fake_server import FakeConfig, spawn

    proc, url = spawn(FakeConfig(seed=38, latency_ms=args.latency_ms, latency_dist="lognormal",
                                 fault_free_after=None, max_lifetime_s=3600), cwd=ROOT)
    try:
        env = {**os.environ, "CALL_CPU_KEY": "sk-bench", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        cmd = [sys.executable, __file__, "--one", url, "--judges", str(args.judges), "--cases", str(args.cases),
               "--top", str(args.top)] + (["--no-profile"] if args.no_profile or args.layers else [])
        if step is not None:
            cmd += ["--layer", step]
        t0 = time.monotonic()
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        assert child.stdout is not None
        said = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("the measured process failed")
        row: dict[str, Any] = json.loads(said.strip().splitlines()[-1])
        row.update(process_cpu_s=round(usage.ru_utime + usage.ru_stime, 2),
                   peak_rss_mb=round(usage.ru_maxrss / 1024), wall_s=round(time.monotonic() - t0, 1),
                   load=round(os.getloadavg()[0], 2))
    finally:
        proc.terminate()
        proc.wait(10)
    print(json.dumps(row), flush=True)
    return row


if __name__ == "__main__":
    main()
