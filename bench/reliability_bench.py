"""The reliability stage's bootstraps at 100,000 to 1,000,000 cases, without a store: a report's figures
(issue 38: what a 1,000,000 x 4 rebuild needs), on synthetic ratings.

Per size: ``--interval`` interval figures (scores of 4 judges, 0-40 points) and ``--ordinal`` stars figures (1-5),
1,000 resamples, in one process, the way reliability_report takes them: inside ``shared_draws``, through
``JointBootstrap`` when the tree has it (one pass over the resamples for the chunked figures), else one
``alpha_with_ci`` per figure. Prints CPU, wall and peak RSS, and a SHA-256 of every interval (the trees must agree).

    .venv/bin/python bench/reliability_bench.py --cases 100000 1000000 --tree /tmp/base --tree .
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import hashlib, json, resource, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from consensus_eval.analysis import alpha as al
assert al.__file__.startswith(sys.argv[1]), al.__file__
n, n_int, n_ord, boot = (int(x) for x in sys.argv[2:6])
rng = np.random.default_rng(2026)
truth = rng.integers(0, 40, n)
figures = [((truth[None, :] + rng.normal(0, 3 + k, (4, n))).round(), "interval") for k in range(n_int)]
stars = np.clip(truth // 8 + 1, 1, 5)
figures += [(np.clip(stars[None, :] + rng.integers(-1, 2, (4, n)), 1, 5).astype(float), "ordinal")
            for _ in range(n_ord)]
for data, _ in figures[1::3]:
    data[rng.random(data.shape) < 0.02] = np.nan          # a few failed calls: other numbers of ratings
t, w = time.process_time(), time.perf_counter()
with al.shared_draws():
    if hasattr(al, "JointBootstrap"):
        joint = al.JointBootstrap(boot)
        out = [joint.alpha(d, level) for d, level in figures]
        joint.finish()
    else:
        out = [al.alpha_with_ci(d, level, boot) for d, level in figures]
cpu, wall = time.process_time() - t, time.perf_counter() - w
digest = hashlib.sha256(json.dumps([a.model_dump() for a in out]).encode()).hexdigest()[:16]
print(json.dumps({"cpu": cpu, "wall": wall, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                  "sha": digest}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--interval", type=int, default=19, help="interval figures (a 3-dimension rubric: 19)")
    ap.add_argument("--ordinal", type=int, default=3, help="stars figures")
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--tree", type=Path, action="append", default=None)
    args = ap.parse_args()
    trees = [t.resolve() for t in (args.tree or [Path(__file__).resolve().parents[1]])]
    for n in args.cases:
        for tree in trees:
            load = os.getloadavg()[0]
            got = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(n), str(args.interval),
                                  str(args.ordinal), str(args.boot)], check=True, capture_output=True, text=True)
            r = json.loads(got.stdout.strip().splitlines()[-1])
            print(f"{n:>9,} cases  {tree}  CPU {r['cpu']:7.1f} s  wall {r['wall']:7.1f} s  peak {r['rss_mb']:,} MB  "
                  f"intervals {r['sha']}  (load {load:.1f})", flush=True)


if __name__ == "__main__":
    main()
