"""How often the paired bootstrap intervals of `compare --against-clinicians` cover the true change, at the sizes of
a held-out part users have (issue 36; docs/qc-loop.md, "How sure"; consensus_eval/analysis/paired_boot.py).

Each simulated study: ``n`` held-out cases labelled by clinicians, two versions of a judge scoring them, the figures
of both versions against the clinicians and the paired bootstrap interval of each change, as the comparison computes
them (:func:`~consensus_eval.analysis.paired_boot.score_changes`, :func:`verdict_changes`). Two worlds:

- **better**: version A misses a deduction type: on 40% of the cases it scores 4 points too high; B does not. The
  clinicians' totals are N(70, 10); both versions share a case effect N(0, 3) (the same model reading the same
  record) and have their own noise N(0, 4), A 2 points lenient throughout. Items: 3 per case, deserved with
  probability 0.4; A takes a deserved one with probability 0.6 (B 0.85) and an undeserved one with 0.15 (both).
- **same**: A and B are the same version asked twice (independent noise, the same case effect).

The truth of each change is its value on 400,000 cases of the same world. Coverage is the share of studies whose
interval holds it; an interval that is not shown (below MIN_CASES) is counted apart.

    .venv/bin/python bench/heldout_coverage_sim.py [--reps 1000] [--seed 36] [--boot 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from consensus_eval.analysis import paired_boot  # noqa: E402
from consensus_eval.analysis.paired_boot import (  # noqa: E402
    icc_a1_batch,
    multiplicities,
    score_changes,
    verdict_batch,
    verdict_changes,
)

SIZES = (6, 8, 10, 15, 20, 30, 40)
ITEMS_PER_CASE = 3
FIGURES = ("icc", "mae", "bias", "kappa", "f1")


def world(n: int, rng: np.random.Generator, same: bool) -> tuple[np.ndarray, ...]:
    """One study's data: (A, B, clinicians) totals, and per item (A yes, B yes, clinicians yes, case index)."""
    human = rng.normal(70, 10, n)
    shared = rng.normal(0, 3, n)
    miss_a = rng.random(n) < 0.4
    a = human + 2 + shared + rng.normal(0, 4, n) + 4 * miss_a
    if same:
        miss_b = rng.random(n) < 0.4
        b = human + 2 + shared + rng.normal(0, 4, n) + 4 * miss_b
    else:
        b = human + shared + rng.normal(0, 4, n)
    m = n * ITEMS_PER_CASE
    case_of = np.repeat(np.arange(n), ITEMS_PER_CASE)
    ref = rng.random(m) < 0.4
    sens_b = 0.6 if same else 0.85
    ya = np.where(ref, rng.random(m) < 0.6, rng.random(m) < 0.15)
    yb = np.where(ref, rng.random(m) < sens_b, rng.random(m) < 0.15)
    return a, b, human, ya, yb, ref, case_of


def truth(rng: np.random.Generator, same: bool) -> dict[str, float]:
    a, b, human, ya, yb, ref, _ = world(400_000, rng, same)
    one = np.ones((1, len(ref)))
    ka, fa = verdict_batch(ya, ref, one)
    kb, fb = verdict_batch(yb, ref, one)
    return {"icc": float(icc_a1_batch(b, human) - icc_a1_batch(a, human)),
            "mae": float(np.abs(b - human).mean() - np.abs(a - human).mean()),
            "bias": float((b - human).mean() - (a - human).mean()),
            "kappa": float(kb[0] - ka[0]), "f1": float(fb[0] - fa[0])}


def coverage(n: int, reps: int, boot: int, rng: np.random.Generator, same: bool,
             true: dict[str, float]) -> dict[str, tuple[float, float, float]]:
    """figure -> (coverage, share of studies with an interval, median width)."""
    hits = {f: 0 for f in FIGURES}
    shown = {f: 0 for f in FIGURES}
    widths: dict[str, list[float]] = {f: [] for f in FIGURES}
    for r in range(reps):
        a, b, human, ya, yb, ref, case_of = world(n, rng, same)
        counts = multiplicities(n, boot, int(rng.integers(2**31)) + r)
        got = {**score_changes(a, b, human, counts), **verdict_changes(ya, yb, ref, case_of, counts)}
        for f in FIGURES:
            c = got[f]
            if c.low is None or c.high is None:
                continue
            shown[f] += 1
            hits[f] += c.low <= true[f] <= c.high
            widths[f].append(c.high - c.low)
    return {f: (hits[f] / shown[f] if shown[f] else float("nan"), shown[f] / reps,
                float(np.median(widths[f])) if widths[f] else float("nan")) for f in FIGURES}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--boot", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=36)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    paired_boot.MIN_CASES.update(dict.fromkeys(FIGURES, 0))   # measured at every size, MIN_CASES' own included
    started = time.process_time()
    for same in (False, True):
        true = truth(rng, same)
        print(f"\nworld: {'same (A = B)' if same else 'better (B fixes a missed type)'}; true changes: "
              + ", ".join(f"{f} {v:+.3f}" for f, v in true.items()))
        print("| n | " + " | ".join(f"{f}" for f in FIGURES) + " |")
        print("|---|" + "---|" * len(FIGURES))
        for n in SIZES:
            cov = coverage(n, args.reps, args.boot, rng, same, true)
            cells = [f"{c:.3f} (w {w:.2f})" if s == 1 else (f"{c:.3f} [{s:.0%} shown]" if s else "none")
                     for c, s, w in (cov[f] for f in FIGURES)]
            print(f"| {n} | " + " | ".join(cells) + " |", flush=True)
    print(f"\n{args.reps} studies per size, {args.boot} resamples each, seed {args.seed}; "
          f"CPU {time.process_time() - started:.0f} s")


if __name__ == "__main__":
    main()
