"""Adaptive runs and cascades (issue 16 section 3) on a simulation with known truth.

Pure Python: synthetic judges produce re-derived dimension scores with set bias, noise and miss rates
around a known true score per case and dimension; the policies decide with the tool's own stopping rule
(:func:`consensus_eval.execution.adaptive.decide`, the real ``medical_record`` rubric and its stars).
Every policy reads the same draws (run ``k`` of a judge on a case is one fixed number), so the
comparisons are paired.

The model, per judge (``JUDGES``), case and dimension (maximum M: 40, 35, 25):

- true score ``T = M - D``, ``D ~ Gamma(2, 0.09 M)`` (mean deductions 18 % of M), clipped to [0, M];
- the judge's score of run k: ``T + bias + p + e_k - miss_k``, rounded to 0.5 and clipped, with a
  persistent error ``p ~ N(0, persist)`` (the judge's view of this case, the same in every run: reruns
  cannot average it away), run noise ``e_k ~ N(0, noise)``, and, with probability ``miss``, a missed
  deduction, which raises the score: ``miss_k ~ -U(3, 8)`` (a missed error means points not taken);
- cost per call from the example panel's models at list prices, 3,000 prompt and 1,500 output tokens.

Policies (``important_runs`` of every case): ``fixed-1``, ``fixed-3`` (the baseline: seed 000's 3 runs
of important cases), and ``adaptive`` (min_runs 1, max_runs 3) over a grid of ``run_spread`` (points),
``run_star_gap`` (1 or off) and the panel's ``flag_spread`` (totals; ``flag_star_gap`` 2). The cascade:
deepseek and qwen in stage 1, gpt (the most expensive) in stage 2, with fixed-1 or adaptive runs.

Measured: LLM calls and cost; MAE of the panel score to the truth per dimension and of the total;
Krippendorff's interval alpha across judges of their totals (a judge's total: the mean of its runs).

    .venv/bin/python bench/adaptive_bench.py --cases 2000 --seed 1
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from dataclasses import dataclass

from consensus_eval.analysis.alpha import krippendorff_alpha
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.rubric import Rubric, load_rubric
from consensus_eval.execution.adaptive import JudgeRuns, decide

MAX_RUNS = 3


@dataclass(frozen=True)
class SimJudge:
    name: str
    bias: float      # points per dimension (+: lenient)
    persist: float   # sd of the judge's persistent error on a case and dimension
    noise: float     # sd of run-to-run noise
    miss: float      # probability a run misses a deduction
    cost: float      # USD per call


def _cost(p_in: float, p_out: float) -> float:
    return 3000 * p_in + 1500 * p_out


JUDGES = (
    SimJudge("deepseek", -1.0, 2.0, 2.5, 0.10, _cost(0.55e-6, 2.19e-6)),
    SimJudge("gpt", 0.5, 1.5, 1.5, 0.05, _cost(2.0e-6, 8.0e-6)),
    SimJudge("qwen", 1.5, 2.5, 3.0, 0.15, _cost(1.6e-6, 6.4e-6)),
)


@dataclass
class World:
    rubric: Rubric
    dims: list[str]
    truth: list[dict[str, float]]                    # case -> dim -> true score
    draws: list[dict[str, dict[str, list[float]]]]   # case -> judge -> dim -> MAX_RUNS run scores


def make_world(n: int, seed: int, noise_scale: float = 1.0) -> World:
    rubric = load_rubric("medical_record")
    dims = [d.id for d in rubric.dimensions]
    top = {d.id: float(d.max) for d in rubric.dimensions}
    rng = random.Random(seed)
    truth, draws = [], []
    for _ in range(n):
        t = {d: min(top[d], max(0.0, top[d] - rng.gammavariate(2.0, 0.09 * top[d]))) for d in dims}
        truth.append(t)
        per_judge: dict[str, dict[str, list[float]]] = {}
        for j in JUDGES:
            per_judge[j.name] = {}
            for d in dims:
                p = rng.gauss(0, j.persist)
                runs = []
                for _k in range(MAX_RUNS):
                    s = t[d] + j.bias + p + rng.gauss(0, j.noise * noise_scale)
                    if rng.random() < min(1.0, j.miss * noise_scale):
                        s += rng.uniform(3, 8)
                    runs.append(min(top[d], max(0.0, round(s * 2) / 2)))
                per_judge[j.name][d] = runs
        draws.append(per_judge)
    return World(rubric, dims, truth, draws)


@dataclass
class Outcome:
    policy: str
    calls: int
    cost: float
    mae: dict[str, float]
    mae_total: float
    alpha: float | None
    stage2_share: float | None = None
    by_judge: dict[str, int] | None = None   # calls per judge
    rounds: int = 1                          # the most rounds a case took


def _config(run_spread: float, star_gap: int | None, flag_spread: float, judges: list[str],
            stage2: str | None = None, min_runs: int = 1, flag_star_gap: int = 2) -> EvalConfig:
    return EvalConfig.model_validate({
        "important_runs": "adaptive",
        "adaptive": {"min_runs": min_runs, "max_runs": MAX_RUNS, "run_spread": run_spread, "run_star_gap": star_gap},
        "consensus": {"flag_spread": flag_spread, "flag_star_gap": flag_star_gap},
        "judges": [{"name": j, "model": f"openai/{j}", **({"stage": 2} if j == stage2 else {})} for j in judges],
    })


def simulate(world: World, policy: str, *, judges: list[str], config: EvalConfig | None = None,
             fixed: int = 1, stage2: str | None = None, flag_spread: float = 10.0) -> Outcome:
    """One policy over every case: adaptive with ``config``, else ``fixed`` runs per judge; with ``stage2``
    a cascade (that judge asked by :func:`decide`'s cascade rule, ``flag_spread`` for a fixed one)."""
    stage = {j: (2 if j == stage2 else 1) for j in judges}
    adaptive = config is not None
    cfg = config if config is not None else _config(math.inf, None, flag_spread, judges, stage2)
    first = cfg.adaptive.min_runs if adaptive else fixed
    calls = 0
    cost = 0.0
    price = {j.name: j.cost for j in JUDGES}
    err: dict[str, list[float]] = {d: [] for d in world.dims}
    err_total: list[float] = []
    totals: dict[str, list[float | None]] = {j: [] for j in judges}
    asked2 = 0
    by_judge = dict.fromkeys(judges, 0)
    most_rounds = 1
    for case, truth in zip(world.draws, world.truth, strict=True):
        rounds = 1
        state = {j: {d: JudgeRuns(first, tuple(case[j][d][:first])) for d in world.dims}
                 for j in judges if stage[j] == 1}
        while True:
            adds = decide(state, world.rubric, cfg, adaptive=adaptive, stage=stage, first={j: first for j in judges})
            if not adds:
                break
            rounds += 1
            grown = {j: dict(v) for j, v in state.items()}
            for a in adds:
                old = grown.setdefault(a.judge, {}).get(a.dimension, JudgeRuns(0, ()))
                assert a.run == old.planned
                grown[a.judge][a.dimension] = JudgeRuns(old.planned + 1,
                                                        (*old.scores, case[a.judge][a.dimension][a.run]))
            state = grown
        asked2 += stage2 is not None and stage2 in state
        most_rounds = max(most_rounds, rounds)
        for j, by_dim in state.items():
            n = sum(r.planned for r in by_dim.values())
            by_judge[j] += n
            calls += n
            cost += n * price[j]
        for j in judges:
            totals[j].append(sum(statistics.fmean(state[j][d].scores) for d in world.dims) if j in state else None)
        panel = {d: statistics.fmean(statistics.fmean(state[j][d].scores) for j in state) for d in world.dims}
        for d in world.dims:
            err[d].append(abs(panel[d] - truth[d]))
        err_total.append(abs(sum(panel.values()) - sum(truth.values())))
    alpha = krippendorff_alpha([totals[j] for j in judges], "interval").value
    return Outcome(policy, calls, cost, {d: statistics.fmean(v) for d, v in err.items()}, statistics.fmean(err_total),
                   alpha, asked2 / len(world.draws) if stage2 else None, by_judge, most_rounds)


#: the example panel's rate limits (configs/panel.example.yaml), requests per minute
RPM = {"deepseek": 120, "gpt": 500, "qwen": 60}
#: latency lognormal, median 8 s, sigma 0.5 (issue 16 section 7): its 99th percentile, seconds
P99_S = 8 * math.exp(2.326 * 0.5)


def realistic(seed: int) -> None:
    """Section 7's regime for the runs policy: 1,000 important cases, the example panel's rpm limits,
    latency median 8 s. The wall time is bounded below by the slowest judge's calls / rpm (every judge
    paced at its rpm, in parallel); a plan that grows waits at the end of each round for its slowest
    call, about a 99th-percentile latency per round more."""
    world = make_world(1000, seed)
    names = [j.name for j in JUDGES]
    pols = [simulate(world, "fixed-3", judges=names, fixed=3), simulate(world, "fixed-2", judges=names, fixed=2),
            simulate(world, "fixed-1", judges=names, fixed=1)]
    for flag in (10.0, 15.0):
        pols.append(simulate(world, f"adaptive: run_spread 4, flag_spread {flag:g}", judges=names,
                             config=_config(4.0, None, flag, names)))
        pols.append(simulate(world, f"cascade (gpt stage 2), fixed-1, flag_spread {flag:g}", judges=names, fixed=1,
                             stage2="gpt", flag_spread=flag))
    print(f"\nrealistic regime: 1,000 important cases, rpm {RPM}, latency median 8 s (p99 {P99_S:.0f} s), "
          f"seed {seed}\n")
    print("| policy | calls deepseek / gpt / qwen | cost $ | bound by rpm (min) | rounds | + round ends (min) |"
          " worst MAE change vs fixed-3 |")
    print("|---|---|---|---|---|---|---|")
    base = pols[0]
    for o in pols:
        assert o.by_judge is not None
        bound = max(o.by_judge[j] / RPM[j] for j in names)
        print(f"| {o.policy} | {' / '.join(f'{o.by_judge[j]:,}' for j in names)} | {o.cost:,.2f} | {bound:.0f} | "
              f"{o.rounds} | {bound + (o.rounds - 1) * P99_S / 60:.0f} | "
              f"{max(o.mae[d] - base.mae[d] for d in o.mae):+.2f} |")


def _row(o: Outcome, base: Outcome) -> str:
    saved = 1 - o.calls / base.calls
    dmae = max(o.mae[d] - base.mae[d] for d in o.mae)
    return (f"| {o.policy} | {o.calls:,} | {saved:+.1%} | {o.cost:,.2f} | "
            + " | ".join(f"{o.mae[d]:.2f}" for d in o.mae)
            + f" | {dmae:+.2f} | {o.mae_total:.2f} | {'-' if o.alpha is None else f'{o.alpha:.3f}'}"
            + (f" | {o.stage2_share:.0%}" if o.stage2_share is not None else " | -") + " |")


def overhead(n: int) -> None:
    """The cost of one decision round in the tool: :func:`grow` over ``n`` important cases x 3 dimensions x 3
    LLM judges (first round, every call stored ok; judgments with one deduction each), no call made."""
    import time

    from consensus_eval.domain.cases import Case
    from consensus_eval.domain.judgment import Deduction, Judgment
    from consensus_eval.execution.adaptive import grow
    from consensus_eval.execution.plan import plan
    from consensus_eval.execution.store import CallRecord
    from consensus_eval.judges import build_judge

    names = [j.name for j in JUDGES]
    cfg = _config(4.0, None, 10.0, names)
    rubric = load_rubric("medical_record")
    judges = [build_judge(j, rubric) for j in cfg.judges]
    cases = [Case(id=f"c{i}", conversation="医生：哪里不舒服？患者：口渴多饮一月。", record="主诉：口渴多饮1月。",
                  important=True) for i in range(n)]
    t0 = time.perf_counter()
    first = plan(cases, rubric, cfg, judges)
    t1 = time.perf_counter()
    one = {"accuracy": Deduction(category="numbers", type="value_error", points=2.0),
           "completeness": Deduction(category="family_history", type="fh_absent", points=4.0),
           "standardization": Deduction(category="terminology", type="colloquial", points=1.0)}
    rng = random.Random(0)
    records = [CallRecord(request_hash=c.planned.request_hash, case_id=c.planned.case_id, dimension=c.planned.dimension,
                          judge=c.planned.judge, run=0, status="ok",
                          judgment=Judgment(dimension=c.planned.dimension,
                                            deductions=[one[c.planned.dimension]] * rng.randint(0, 3)))
               for c in first]
    t2 = time.perf_counter()
    added = grow(first, records, rubric, cfg, judges)
    t3 = time.perf_counter()
    print(f"{n:,} cases, {len(first):,} first-round calls: plan {t1 - t0:.2f} s, grow {t3 - t2:.2f} s "
          f"({len(added):,} calls added, their prompts rendered)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--realistic", action="store_true", help="section 7's regime (1,000 cases, rpm limits) only")
    ap.add_argument("--overhead", type=int, metavar="N", help="time one decision round of the tool on N cases only")
    ap.add_argument("--noise-scale", type=float, default=1.0,
                    help="multiply every judge's run noise and miss rate (2: judges twice as unstable)")
    args = ap.parse_args()
    if args.realistic:
        realistic(args.seed)
        return
    if args.overhead:
        overhead(args.overhead)
        return
    world = make_world(args.cases, args.seed, args.noise_scale)
    names = [j.name for j in JUDGES]
    base = simulate(world, "fixed-3", judges=names, fixed=3)
    rows = [base, simulate(world, "fixed-2", judges=names, fixed=2), simulate(world, "fixed-1", judges=names, fixed=1)]
    for spread in (2.0, 4.0, 8.0):
        cfg = _config(spread, None, math.inf, names, min_runs=2, flag_star_gap=99)
        rows.append(simulate(world, f"adaptive, own runs only (min_runs 2, panel rule off): run_spread {spread:g}",
                             judges=names, config=cfg))
    for flag in (6.0, 10.0, 15.0):
        for star in (1, None):
            for spread in (2.0, 4.0, 6.0, 10.0):
                cfg = _config(spread, star, flag, names)
                rows.append(simulate(world, f"adaptive: run_spread {spread:g}, run_star_gap {star or 'off'}, "
                                            f"flag_spread {flag:g}", judges=names, config=cfg))
    head = ("| policy | calls | calls saved vs fixed-3 | cost $ | "
            + " | ".join(f"MAE {d}" for d in world.dims)
            + " | worst MAE change vs fixed-3 (points) | MAE total | alpha (totals, interval) | stage 2 asked |")
    rule = "|" + "---|" * (head.count("|") - 1)
    print(f"{args.cases} important cases, 3 judges, seed {args.seed}, noise x{args.noise_scale:g}\n")
    print(head)
    print(rule)
    for o in rows:
        print(_row(o, base))
    print("\ncascade: deepseek + qwen in stage 1, gpt in stage 2\n")
    print(head)
    print(rule)
    c_rows = [base, rows[2]]
    for flag in (6.0, 10.0, 15.0):
        c_rows.append(simulate(world, f"cascade, fixed-1, flag_spread {flag:g}", judges=names, fixed=1,
                               stage2="gpt", flag_spread=flag))
        c_rows.append(simulate(world, f"cascade, adaptive: run_spread 4, run_star_gap off, flag_spread {flag:g}",
                               judges=names, config=_config(4.0, None, flag, names, "gpt"), stage2="gpt"))
    c_rows.append(simulate(world, "stage 1 alone (deepseek + qwen), fixed-1", judges=["deepseek", "qwen"], fixed=1))
    c_rows.append(simulate(world, "stage 1 alone (deepseek + qwen), fixed-3", judges=["deepseek", "qwen"], fixed=3))
    for o in c_rows:
        print(_row(o, base))


if __name__ == "__main__":
    main()
