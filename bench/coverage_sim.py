"""How often the trust figures' 95% intervals cover the truth at the sizes users have (issue 32 part 6): the
coverage table of docs/validity.md, section "Coverage", is this script's output.

Three figures, each at n = 3, 5, 10, 20, 40, 80, 200, each over ``--reps`` independent simulated studies
(seeded: the same command prints the same table):

- **PPI** (the validity section's prediction-powered mean clinician score of one system): clinicians' scores
  Y ~ N(75, 12) on n spot-checked cases; a biased, compressed panel, 80 + 0.5 (Y - 75) + N(0, 5), on those
  and on 300 more cases. Columns: the interval the report shows (``ppi_mean``'s small-sample t; none below 5
  labels, its coverage in brackets there), ppi-python's normal interval (what the report showed before), and
  the clinicians-only t interval.
- **per system** (the leaderboard's mean panel total of one system): one case per conversation, totals
  100 - Gamma(1.5, 5.5) (most records near the top, a long tail of poor ones: skewness 1.6). Columns: the
  t interval for the cluster design (``cluster_mean``, what the leaderboard shows) and the percentile
  cluster bootstrap of 1,000 resamples it replaced.
- **difference** (the leaderboard's and `compare`'s paired difference of two systems): per conversation a
  shared difficulty and each system's own skewed error, system b 2 points lower on average. Columns: the
  coverage of the t interval of the mean difference, and how often the test of ``paired_test`` (exact
  sign-flip up to 12 pairs, paired t above) rejects at 0.05 when the two systems are the same (its size).

    .venv/bin/python bench/coverage_sim.py [--reps 2000] [--seed 32] [--write]

``--write`` puts the table into docs/validity.md between its ``coverage`` markers.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from consensus_eval.analysis.ppi import MIN_LABELS, ppi_mean_batch  # noqa: E402
from consensus_eval.analysis.systems import MIN_SOURCES, cluster_mean, paired_test  # noqa: E402

SIZES = (3, 5, 10, 20, 40, 80, 200)
START, END = "<!-- coverage:start -->", "<!-- coverage:end -->"


def _covers(low: np.ndarray, high: np.ndarray, truth: float | np.ndarray) -> float:
    return float(((low <= truth) & (truth <= high)).mean())


def ppi_coverage(n: int, reps: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """(shown interval, ppi-python's, clinicians-only) coverage of the mean clinician score."""
    big_n, truth = 300, 75.0
    y = rng.normal(truth, 12, (reps, n + big_n))
    yhat = truth + 5 + 0.5 * (y - truth) + rng.normal(0, 5, y.shape)
    yl, yhl, yhu = y[:, :n], yhat[:, :n], yhat[:, n:]
    _, low, high, _ = ppi_mean_batch(yl, yhl, yhu)
    _, zlow, zhigh, _ = ppi_mean_batch(yl, yhl, yhu, interval="z")
    from scipy import stats

    half = stats.t.ppf(0.975, n - 1) * yl.std(axis=1, ddof=1) / np.sqrt(n)
    m = yl.mean(axis=1)
    return _covers(low, high, truth), _covers(zlow, zhigh, truth), _covers(m - half, m + half, truth)


def _totals(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    return np.asarray(np.clip(100 - rng.gamma(1.5, 5.5, shape), 0, 100))


def system_coverage(n: int, reps: int, rng: np.random.Generator, boot: int = 1000) -> tuple[float, float]:
    """(cluster t, percentile cluster bootstrap) coverage of a system's mean total."""
    truth = float(_totals((2_000_000,), np.random.default_rng(0)).mean())
    x = _totals((reps, n), rng)
    hits_t = 0
    for row in x:
        est = cluster_mean(row, np.ones(n))
        hits_t += est.low is not None and est.high is not None and est.low <= truth <= est.high
    hits_b = 0
    block = max(1, 4_000_000 // (boot * n))
    for start in range(0, reps, block):
        part = x[start:start + block]
        w = rng.multinomial(n, np.full(n, 1 / n), size=(part.shape[0], boot))      # cluster draws
        means = np.einsum("rbn,rn->rb", w, part) / n
        low, high = np.percentile(means, [2.5, 97.5], axis=1)
        hits_b += int(((low <= truth) & (truth <= high)).sum())
    return hits_t / reps, hits_b / reps


def difference_coverage(n: int, reps: int, rng: np.random.Generator) -> tuple[float, float]:
    """(t interval coverage of the mean paired difference, size of the verdict's test at 0.05)."""
    shift = 2.0
    difficulty = rng.gamma(2.0, 4.0, (reps, n))
    a = 100 - difficulty - rng.gamma(1.5, 3.0, (reps, n))
    b = 100 - difficulty - rng.gamma(1.5, 3.0, (reps, n)) - shift
    same = 100 - difficulty - rng.gamma(1.5, 3.0, (reps, n))
    hits = rejections = 0
    for i in range(reps):
        _, low, high, _ = paired_test(a[i] - b[i])
        hits += low is not None and high is not None and low <= shift <= high
        p, _, _, _ = paired_test(a[i] - same[i])
        rejections += p < 0.05
    return hits / reps, rejections / reps


def _pct(x: float) -> str:
    return f"{x:.3f}"


def table(reps: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    rows = []
    for n in SIZES:
        ppi, z, human = ppi_coverage(n, reps, rng)
        t_sys, boot = system_coverage(n, reps, rng)
        diff, size = difference_coverage(n, reps, rng)
        shown = _pct(ppi) if n >= MIN_LABELS else f"({_pct(ppi)}: not shown)"
        human_cell = _pct(human) if n >= MIN_LABELS else f"({_pct(human)}: not shown)"
        sys_cell = _pct(t_sys) + (" (warned)" if n < MIN_SOURCES else "")
        rows.append(f"| {n} | {shown} | {_pct(z)} | {human_cell} | {sys_cell} | {_pct(boot)} | {_pct(diff)} | "
                    f"{_pct(size)} |")
    head = ("| n | PPI, shown (t) | PPI, ppi-python (z) | clinicians only (t) | per system, cluster t | "
            "per system, cluster bootstrap | difference, t | difference test's size |\n"
            "|---:|---:|---:|---:|---:|---:|---:|---:|")
    return head + "\n" + "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=32)
    ap.add_argument("--write", action="store_true", help="put the table into docs/validity.md")
    args = ap.parse_args()
    t0 = time.process_time()
    text = (f"{table(args.reps, args.seed)}\n\n"
            f"`.venv/bin/python bench/coverage_sim.py --reps {args.reps} --seed {args.seed}` "
            f"({args.reps:,} studies per size and figure; the table is deterministic for a seed).")
    print(text)
    print(f"\nCPU {time.process_time() - t0:.1f} s", file=sys.stderr)
    if args.write:
        doc = ROOT / "docs" / "validity.md"
        s = doc.read_text(encoding="utf-8")
        i, j = s.index(START) + len(START), s.index(END)
        doc.write_text(s[:i] + "\n" + text + "\n" + s[j:], encoding="utf-8")
        print(f"wrote {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
