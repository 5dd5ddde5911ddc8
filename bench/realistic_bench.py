"""A realistic run (issue 16 section 7): the example panel's three LLM judges, 1,000 cases, latency
lognormal with median 8 s, the panel's rpm limits, through the real ``score`` path (``api.prepare`` +
``api.run``: plan, pacing, litellm + instructor over HTTP, store, consensus, reliability, reports).

Every run starts a fresh fake server process (``tests/fake_server.py`` via ``spawn``: lognormal latency
with sigma 0.5, capped at 30 s; its prompt cache on: DeepSeek's 64-token blocks for the deepseek judge,
OpenAI's 128-token blocks from 1,024 for the others) and points each LLM judge of
``configs/panel.example.yaml`` at it (``api_base``). The cases are ``tests/big_run.big_cases``: the 16
bundled examples made distinct (every digit of a record redrawn, a note appended, a conversation turn
varied), every 7th case important (143 of 1,000), so a fixed plan makes 3 x (1,000 + 2 x 143) = 3,858
calls per LLM judge.

Variants (``--variant``, repeatable):

- ``panel``: the panel as written: concurrency 8 / 16 / 8, rpm 120 / 500 / 60, runs 1, important_runs 3
  (the old default: a fixed number of workers per judge);
- ``auto``: the same with ``concurrency: auto`` (the default now: in flight sized from rpm x latency);
- ``adaptive``: ``auto`` with ``important_runs: adaptive`` and README's block (min_runs 1, max_runs 3,
  run_spread 4, run_star_gap null; ``flag_spread: 15``);
- ``batch``: ``auto`` with ``batch: true`` on the judges whose provider has a batch API here (gpt:
  ``BATCH_PROVIDERS``), polled every 30 s (scaled); the fake server completes a batch
  :data:`BATCH_DELAY_S` after it was created (scaled; real providers: minutes to 24 h); the run waits
  for it (``run_async(..., wait=True)``, as ``score --wait``). A batch judge has no rpm bound.

``--scale k`` shrinks time k-fold: latency median 8/k s (cap 30/k s), every rpm x k. Little's law keeps
the same number of calls in flight as at full scale, so the ratio of the wall time to the bound is
scale-free (times are reported at full scale: measured x k); start-up and the outputs' rebuild are not
scaled and are reported apart.

The bound, per judge: ``max(attempts / rpm, attempts x mean latency / concurrency)`` (``auto``: its cap,
``max_concurrency`` 256), with the mean of the latencies the server drew for that judge; the slowest
judge bounds the run. ``calls wall``: from the first call's start to the last call's landing.

``--no-cache``: the fake server reports no cached tokens (a provider without a prompt cache): the billed
cost should then equal the cached runs' ``without caching``.

Cost: ``cost`` as the run was billed (cached prompt tokens at the cache rate: deepseek and gpt from
litellm's bundled price map, qwen from the config at DashScope's 10 % for cached tokens); ``without
caching``: ``cost + saved`` (the cached tokens at the full input price).

    .venv/bin/python bench/realistic_bench.py --variant auto --scale 1 --json full.json        # ~65 min
    .venv/bin/python bench/realistic_bench.py --variant panel --variant auto --variant adaptive \\
        --scale 20 --repeat 3 --json scaled.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from consensus_eval import api, quiet_libraries  # noqa: E402
from consensus_eval.domain.config import BATCH_PROVIDERS, EvalConfig, LLMJudgeConfig  # noqa: E402
from consensus_eval.execution.execute import Progress  # noqa: E402
from tests.big_run import big_cases  # noqa: E402
from tests.fake_server import FakeConfig, spawn  # noqa: E402

KEYS = ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "DASHSCOPE_API_KEY")
MEDIAN_MS = 8000.0
CAP_MS = 30_000.0
ADAPTIVE = {"min_runs": 1, "max_runs": 3, "run_spread": 4, "run_star_gap": None}
VARIANTS = ("panel", "auto", "adaptive", "batch")
#: seconds (at full scale) the fake server takes to complete a batch
BATCH_DELAY_S = 600.0


def panel(variant: str, api_base: str, scale: float) -> EvalConfig:
    """configs/panel.example.yaml with each LLM judge pointed at ``api_base``, rpm x ``scale``, and the
    variant's concurrency and runs policy (module docstring)."""
    data = yaml.safe_load((ROOT / "configs" / "panel.example.yaml").read_text(encoding="utf-8"))
    for j in data["judges"]:
        if j.get("kind") == "rules":
            continue
        j["api_base"] = api_base
        j["rpm"] = j["rpm"] * scale
        if variant != "panel":
            j["concurrency"] = "auto"
        if variant == "batch" and j["model"].split("/")[0] in BATCH_PROVIDERS:
            j["batch"] = True
            j["batch_poll_s"] = 30.0 / scale
            j["api_base"] = api_base + "/v1"  # the files and batches endpoints are under /v1
    if variant == "adaptive":
        data["important_runs"] = "adaptive"
        data["adaptive"] = dict(ADAPTIVE)
        data["consensus"]["flag_spread"] = 15
    return EvalConfig.model_validate(data)


class LoadSampler:
    """The 1-minute load average every ``every_s`` seconds (a daemon thread)."""

    def __init__(self, every_s: float = 30.0) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._every = every_s
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self._every):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def measure(variant: str, scale: float, n_cases: int, seed: int, out: Path, cache: bool = True) -> dict[str, Any]:
    """One run of ``variant`` on a fresh server; every figure at full scale (module docstring)."""
    cfg = FakeConfig(seed=seed, latency_ms=MEDIAN_MS / scale, latency_dist="lognormal",
                     latency_max_ms=CAP_MS / scale, prompt_cache=cache, max_lifetime_s=6 * 3600,
                     max_requests=1_000_000, batch_delay_s=BATCH_DELAY_S / scale)
    proc, url = spawn(cfg)
    last_landing = [0.0]
    started = [0.0]

    def hook(p: Progress) -> None:
        started[0] = p.started
        last_landing[0] = time.monotonic()

    try:
        config = panel(variant, url, scale)
        cases = big_cases(n_cases, seed)
        with LoadSampler() as load:
            t0 = time.monotonic()
            prep = api.prepare(cases, config)
            t_prep = time.monotonic()
            res = asyncio.run(api.run_async(prep, out, hook, wait=variant == "batch"))
            t_end = time.monotonic()
        log = _get(url + "/_log")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    calls_wall = (last_landing[0] - started[0]) * scale
    drawn: dict[str, list[float]] = {}
    for e in log:
        if e.get("t_end") is not None and str(e.get("status")) == "200":
            drawn.setdefault(e["model"], []).append(e["t_end"] - e["t"])
    judges: dict[str, Any] = {}
    for jc in config.judges:
        if not isinstance(jc, LLMJudgeConfig):
            continue
        u = res.usage[jc.name]
        pr = res.progress.pacing.get(jc.name) if res.progress is not None else None
        model_lat = [v for m, vs in drawn.items() if m in jc.model or jc.model.endswith(m) for v in vs]
        lat = statistics.fmean(model_lat) * scale if model_lat else math.nan
        attempts = pr.requests if pr is not None else u.attempts
        rpm_full = (jc.rpm or math.inf) / scale
        conc = jc.max_concurrency if jc.concurrency == "auto" else jc.concurrency
        batch = bool(getattr(jc, "batch", False))
        bound_rpm = 0.0 if batch else attempts / rpm_full * 60
        bound_conc = 0.0 if batch or math.isnan(lat) else attempts * lat / conc
        judges[jc.name] = {
            "calls_ok": u.ok, "calls_failed": u.failed, "attempts": attempts,
            "rate_limited": pr.rate_limited if pr is not None else None,
            "prompt_tokens": u.prompt_tokens, "cached_tokens": u.cached_tokens,
            "completion_tokens": u.completion_tokens, "hit_rate": u.cache_hit_rate,
            "cost": u.cost, "saved": u.saved, "cost_without_cache": u.cost + (u.saved or 0.0),
            "mean_latency_s": lat, "rpm": rpm_full, "concurrency": jc.concurrency, "batch": batch,
            "bound_s": max(bound_rpm, bound_conc), "bound_by": "rpm" if bound_rpm >= bound_conc else "concurrency",
            "achieved_rpm": pr.achieved_rpm / scale if pr is not None else None,
            "mean_in_flight": pr.mean_in_flight if pr is not None else None,
            "binding": pr.binding if pr is not None else None,
            "summary": pr.explain() if pr is not None else None,
        }
    bound = max(j["bound_s"] for j in judges.values())
    return {
        "variant": variant if cache else f"{variant}, no cache", "scale": scale, "cases": n_cases, "seed": seed,
        "calls_wall_s": calls_wall, "bound_s": bound, "ratio": calls_wall / bound,
        "bound_judge": max(judges, key=lambda n: judges[n]["bound_s"]),
        "startup_s": t_prep - t0, "run_s": t_end - t_prep,
        "rebuild_s": max(0.0, t_end - last_landing[0]),
        "rounds": res.progress.rounds if res.progress is not None else None,
        "cost": sum(j["cost"] for j in judges.values()),
        "cost_without_cache": sum(j["cost_without_cache"] for j in judges.values()),
        "load": {"min": min(load.samples), "max": max(load.samples),
                 "mean": statistics.fmean(load.samples)},
        "judges": judges,
    }


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _line(r: dict[str, Any]) -> str:
    head = (f"{r['variant']:9} x{r['scale']:g}  calls wall {r['calls_wall_s'] / 60:6.1f} min  bound "
            f"{r['bound_s'] / 60:6.1f} min ({r['bound_judge']})  ratio {r['ratio']:.3f}  rounds {r['rounds']}  "
            f"cost ${r['cost']:.2f} (without caching ${r['cost_without_cache']:.2f})  start-up "
            f"{r['startup_s']:.1f} s, rebuild {r['rebuild_s']:.1f} s  load {r['load']['min']:.1f}-"
            f"{r['load']['max']:.1f} (mean {r['load']['mean']:.1f})")
    rows = [head]
    for name, j in r["judges"].items():
        rows.append(
            f"    {name:9} {j['calls_ok']:5d} ok {j['calls_failed']:3d} failed {j['attempts']:5d} attempts "
            f"({j['rate_limited']} 429)  L {j['mean_latency_s']:.2f} s  bound {j['bound_s'] / 60:5.1f} min "
            f"({'batch' if j['batch'] else j['bound_by']})  {_num(j['achieved_rpm'])} req/min  in flight "
            f"{_num(j['mean_in_flight'])}  "
            f"tokens {j['prompt_tokens']:,} (cached {j['cached_tokens']:,}, {j['hit_rate'] or 0:.1%}) + "
            f"{j['completion_tokens']:,}  ${j['cost']:.2f} / ${j['cost_without_cache']:.2f}  [{j['summary']}]")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", action="append", choices=VARIANTS, help="repeatable (default: auto)")
    ap.add_argument("--scale", type=float, default=1.0, help="time shrunk k-fold: latency / k, rpm x k")
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each variant (fresh server each)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-cache", action="store_true",
                    help="the fake server reports no cached tokens (the billed cost is then the full price)")
    ap.add_argument("--json", type=Path, help="append every run's figures here (a JSON list, rewritten after each run)")
    args = ap.parse_args()
    quiet_libraries()
    for k in KEYS:
        os.environ.setdefault(k, "sk-bench-not-a-real-key-000000")
    results: list[dict[str, Any]] = []
    tmp = Path(tempfile.mkdtemp(prefix="realistic-"))
    try:
        for rep in range(args.repeat):
            for variant in args.variant or ["auto"]:
                r = measure(variant, args.scale, args.cases, args.seed, tmp / f"{variant}-{rep}", not args.no_cache)
                r["repeat"] = rep
                results.append(r)
                print(_line(r), flush=True)
                if args.json:
                    args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
                shutil.rmtree(tmp / f"{variant}-{rep}", ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.repeat > 1:
        print("\nmedians:")
        for variant in args.variant or ["auto"]:
            rs = [r for r in results if r["variant"].split(",")[0] == variant]
            print(f"  {variant:9} calls wall {statistics.median(r['calls_wall_s'] for r in rs) / 60:.1f} min, "
                  f"ratio to the bound {statistics.median(r['ratio'] for r in rs):.3f} "
                  f"({', '.join(format(r['ratio'], '.3f') for r in rs)}), cost "
                  f"${statistics.median(r['cost'] for r in rs):.2f} (without caching "
                  f"${statistics.median(r['cost_without_cache'] for r in rs):.2f})")


if __name__ == "__main__":
    main()
