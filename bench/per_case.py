"""One call per case (``call: per_case``, issue 16 section 6) against one call per dimension.

1. ``tokens``: ``score --dry-run``'s count of what is sent (messages plus instructor's schema, litellm's
   tokenizer) on the 16 example cases with configs/panel.example.yaml, every LLM judge once with
   ``call: per_dimension`` and once with ``call: per_case``: requests, prompt tokens per (case, run),
   and the input cost with the provider's prompt cache at best (every request after the first serves
   the prefix it shares with the others of its kind from the cache; ``JudgeEstimate.cached_cost``).
   Nothing is sent.
2. ``score``: the example panel scoring the cases both ways on the fake server with its prompt cache on
   (DeepSeek's 64-token blocks for deepseek, OpenAI's 128 from 1,024 for the others; a prefix is
   cached once a reply containing it has gone out), latency lognormal, the panel's concurrency, rpm
   dropped: requests, prompt tokens and cached tokens as the fake counts them (2 characters a token,
   the tool schema left out), hit rate and cost. A run, not an upper bound: what requests in flight
   together and the order replies go out leave of the cache.
3. ``calibrate``: the calibration suite (``consensus-eval calibrate``) through two fake judges, each
   in both modes, on the local fake server (tests/fake_server.py; no network): ``oracle`` (scripted: a
   deduction for every planted error, in its category with the planted text as evidence) and
   ``generated`` (the fake's own replies: deductions drawn from hidden defects, evidence a random
   stretch of the case). What this can show: that the per-case path (one prompt, one combined schema,
   the reply split into three records, grounding, the recall measure) loses nothing an identical reply
   would give, and the suite's noise floor for a judge whose answers are random draws. What it cannot
   show: whether a real model finds as much when asked everything at once; that is the same command
   with real judges (configs/per_case.example.yaml, README "One call per case").

    .venv/bin/python bench/per_case.py tokens
    .venv/bin/python bench/per_case.py score [--cases N] [--latency-ms 300]
    .venv/bin/python bench/per_case.py calibrate [--sample N] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from consensus_eval import api, quiet_libraries  # noqa: E402
from consensus_eval.domain.calibration.suite import SuiteCase  # noqa: E402
from consensus_eval.domain.config import EvalConfig  # noqa: E402
from consensus_eval.domain.rubric import Rubric  # noqa: E402
from consensus_eval.execution.pricing import saving_per_cached_token  # noqa: E402
from tests.fake_server import FakeConfig, FakeServer  # noqa: E402

MODES = ("per_dimension", "per_case")


def panel(call: str) -> EvalConfig:
    data = yaml.safe_load((ROOT / "configs" / "panel.example.yaml").read_text(encoding="utf-8"))
    for j in data["judges"]:
        if j.get("kind", "llm") == "llm" and "model" in j:
            j["call"] = call
    return EvalConfig.model_validate(data)


def tokens() -> list[dict[str, Any]]:
    rows = []
    for call in MODES:
        prep = api.prepare(ROOT / "examples" / "cases.jsonl", panel(call), check_keys=False)
        case_runs = len({(c.planned.case_id, c.planned.run) for c in prep.calls if c.planned.judge == "deepseek"})
        for e in api.dry_run(prep):
            if not e.prompt_tokens:
                continue
            cfg = prep.config.judge(e.judge)
            judge = next(j for j in prep.judges if j.config.name == e.judge)
            price = judge.prices()
            saving = saving_per_cached_token(cfg)
            input_cost = e.prompt_tokens * price[0] if price else None
            cached_input = (None if input_cost is None or saving is None
                            else input_cost - e.cached_tokens * saving)
            rows.append({"judge": e.judge, "mode": getattr(cfg, "mode", ""), "call": call, "requests": e.calls,
                         "case_runs": case_runs, "prompt_tokens": e.prompt_tokens,
                         "per_case_run": e.prompt_tokens / case_runs, "cacheable": e.cached_tokens,
                         "input_cost": input_cost, "input_cost_cached": cached_input,
                         "prefix_share": e.prefix_share})
    return rows


def print_tokens(rows: list[dict[str, Any]]) -> None:
    print("| judge (mode) | call | requests | prompt tokens | per (case, run) | change | input $ "
          "| with cache at best $ |")
    print("|---|---|---|---|---|---|---|---|")
    base = {r["judge"]: r for r in rows if r["call"] == "per_dimension"}
    for r in rows:
        b = base[r["judge"]]
        change = "" if r is b else f"{r['prompt_tokens'] / b['prompt_tokens'] - 1:+.1%}"
        money = "" if r["input_cost"] is None else f"{r['input_cost']:.4f}"
        cached = "" if r["input_cost_cached"] is None else f"{r['input_cost_cached']:.4f}"
        if r is not b and r["input_cost_cached"] is not None and b["input_cost_cached"]:
            cached += f" ({r['input_cost_cached'] / b['input_cost_cached'] - 1:+.1%})"
        print(f"| {r['judge']} ({r['mode']}) | {r['call']} | {r['requests']} | {r['prompt_tokens']:,} | "
              f"{r['per_case_run']:,.0f} | {change} | {money} | {cached} |")


def panel_on(api_base: str, call: str) -> EvalConfig:
    """The example panel with every LLM judge on ``api_base`` (rpm dropped: pacing is not measured)."""
    cfg = panel(call)
    judges = [j.model_copy(update={"api_base": api_base, "rpm": None}) if getattr(j, "model", None) else j
              for j in cfg.judges]
    return cfg.model_copy(update={"judges": judges})


def score(n_cases: int, latency_ms: float) -> list[dict[str, Any]]:
    for k in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "DASHSCOPE_API_KEY"):
        os.environ.setdefault(k, "sk-bench-not-a-real-key-000000")
    lines = [json.loads(x) for x in (ROOT / "examples" / "cases.jsonl").read_text(encoding="utf-8").splitlines()
             if x.strip()]
    cases = [lines[i % len(lines)] | ({"id": f"ex-{i:04d}-{lines[i % len(lines)]['id']}"} if n_cases > len(lines)
                                      else {}) for i in range(max(n_cases, len(lines)))]
    rows = []
    for call in MODES:
        with FakeServer(FakeConfig(seed=16, prompt_cache=True, latency_ms=latency_ms, latency_dist="lognormal",
                                   max_lifetime_s=1800)) as srv, tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            res = api.run(api.prepare(cases, panel_on(srv.url + "/v1", call)), tmp, n_boot=0)
            wall = time.perf_counter() - start
            requests = len(srv.log)
        for name, u in res.usage.items():
            if not u.prompt_tokens:
                continue
            rows.append({"judge": name, "call": call, "cases": len(cases), "requests": u.attempts,
                         "prompt_tokens": u.prompt_tokens, "cached_tokens": u.cached_tokens,
                         "hit_rate": u.cache_hit_rate, "cost": u.cost, "saved": u.saved, "wall_s": wall,
                         "server_requests": requests})
    return rows


def print_score(rows: list[dict[str, Any]]) -> None:
    print("| judge | call | requests | prompt tokens (fake's count) | cached | hit rate | uncached | cost $ |")
    print("|---|---|---|---|---|---|---|---|")
    base = {r["judge"]: r for r in rows if r["call"] == "per_dimension"}
    for r in rows:
        b = base[r["judge"]]
        uncached = r["prompt_tokens"] - r["cached_tokens"]
        change = "" if r is b else f" ({uncached / (b['prompt_tokens'] - b['cached_tokens']) - 1:+.0%})"
        cost = f"{r['cost']:.4f}" + ("" if r is b else f" ({r['cost'] / b['cost'] - 1:+.0%})")
        print(f"| {r['judge']} | {r['call']} | {r['requests']:,} | {r['prompt_tokens']:,} | {r['cached_tokens']:,} | "
              f"{(r['hit_rate'] or 0):.1%} | {uncached:,}{change} | {cost} |")


def oracle_replies(suite: list[SuiteCase], rubric: Rubric, model: str) -> dict[str, dict[str, dict[str, Any]]]:
    """The fake server's scripted replies of a judge that deducts every planted error (its category and
    type, the planted text as evidence) and nothing else."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for sc in suite:
        per_dim = {}
        for dim in rubric.dimensions:
            items, pens = [], []
            for e in (x for x in sc.expected if x.dimension == dim.id):
                quote = e.spans[0].text
                if e.penalty:
                    pens.append({"id": e.type, "evidence": quote, "reason": "planted"})
                else:
                    items.append({"category": e.category, "type": e.type, "points": e.points, "evidence": quote,
                                  "reason": "planted"})
            per_dim[dim.id] = {"deductions": items, "fixed_penalties": pens, "score": 0, "stars": 1,
                               "comment": "oracle"}
        out[f"{model}|{sc.case.id}"] = per_dim
    return out


def calibrate(sample: int | None) -> dict[str, Any]:
    os.environ.setdefault("FAKE_KEY", "sk-fake-0000")
    with FakeServer(FakeConfig(seed=1, fault_free_after=1, max_lifetime_s=3600)) as srv, \
            tempfile.TemporaryDirectory() as tmp:
        judges = [{"name": f"{m}-{'dim' if call == 'per_dimension' else 'case'}", "model": f"openai/{m}",
                   "api_base": f"{srv.url}/v1", "api_key_env": "FAKE_KEY", "mode": "tools", "call": call,
                   "concurrency": 8, "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}
                  for m in ("oracle", "generated") for call in MODES]
        config = EvalConfig.model_validate({"runs": 1, "important_runs": 1, "judges": judges})
        prep = api.prepare_calibration(config, sample=sample)
        srv.cfg.replies.update(oracle_replies(prep.suite, prep.prepared.rubric, "oracle"))
        start = time.perf_counter()
        results, report = asyncio.run(api.calibrate_async(prep, Path(tmp) / "run", n_boot=0))
        elapsed = time.perf_counter() - start
        log = list(srv.log)
    out: dict[str, Any] = {"suite_cases": report.suite_cases, "errors": report.errors, "seconds": elapsed,
                           "judges": {}}
    for name, jc in report.judges.items():
        if name not in results.usage:
            continue
        u = results.usage[name]
        f, t = jc.overall.found, jc.overall.type_match
        out["judges"][name] = {
            "requests": u.attempts, "prompt_tokens": u.prompt_tokens,
            "found": [f.k, f.n, f.value, f.low, f.high], "type_matched": [t.k, t.n, t.value, t.low, t.high],
            "false_alarms_per_clean": jc.false_alarms_per_case, "precision": jc.precision.value,
            "mae": {d: e.mae for d, e in jc.score_error.items()}}
    out["server_requests"] = len(log)
    out["comparisons"] = [m.model_dump() for m in report.comparisons]
    out["recommendation"] = [line for line in report.recommendation if "one call per case" in line]
    return out


def print_calibration(res: dict[str, Any]) -> None:
    print(f"{res['suite_cases']} suite cases, {res['errors']} planted errors; {res['server_requests']} requests "
          f"served by the fake, {res['seconds']:.0f} s")
    print("| judge | requests | prompt tokens (fake's count) | recall [95% CI] | type matched | "
          "items per clean record | precision | MAE acc / comp / std |")
    print("|---|---|---|---|---|---|---|---|")
    for name, j in res["judges"].items():
        k, n, v, lo, hi = j["found"]
        tk, tn, tv, _, _ = j["type_matched"]
        mae = " / ".join("-" if x is None else f"{x:.2f}" for x in j["mae"].values())
        fa = "-" if j["false_alarms_per_clean"] is None else f"{j['false_alarms_per_clean']:.2f}"
        prec = "-" if j["precision"] is None else f"{j['precision']:.0%}"
        print(f"| {name} | {j['requests']:,} | {j['prompt_tokens']:,} | {v:.0%} [{lo:.0%}-{hi:.0%}] ({k}/{n}) | "
              f"{tv:.0%} ({tk}/{tn}) | {fa} | {prec} | {mae} |")
    for line in res["recommendation"]:
        print(f"- {line}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("tokens", "score", "calibrate"))
    p.add_argument("--cases", type=int, default=16, help="score: the 16 examples, repeated under new ids")
    p.add_argument("--latency-ms", type=float, default=300.0, help="score: median latency of the fake server")
    p.add_argument("--sample", type=int, default=None, help="suite cases drawn (default: the whole suite)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    quiet_libraries()
    if args.what == "tokens":
        rows = tokens()
        print_tokens(rows)
        data: Any = rows
    elif args.what == "score":
        data = score(args.cases, args.latency_ms)
        print_score(data)
    else:
        data = calibrate(args.sample)
        print_calibration(data)
    if args.json:
        args.json.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
