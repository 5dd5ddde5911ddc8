"""Rebuilding a large run from its store: time and peak memory against the number of cases.

Builds (once per size) a run of N cases x J judges written straight into a store
(:func:`tests.big_run.build_big_run`: the bundled examples made distinct, 0-4 deductions per call quoting
the record), then, for each size and each source tree, runs ``--repeats`` fresh processes, each doing
what ``score`` does at its end (:func:`consensus_eval.api.rebuild`: read, derive, ground, consensus,
audit, reliability with ``--boot`` resamples, judgments.jsonl, consensus.csv/jsonl, reliability.json,
report.md, report.html) on a copy of the store; it reports the median wall time and the median peak
RSS (``/usr/bin/time -v``, "Maximum resident set size").

``--tree`` (repeatable) names source trees to compare, e.g. a ``git worktree add /tmp/base <commit>``
of the code before a change: each is run with its own code on the same stores, and the ratio to the
first tree is printed.

    .venv/bin/python bench/scale_bench.py --cases 5000 10000 20000 --tree /tmp/base --tree . --repeats 3
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.big_run import build_big_run  # noqa: E402

CHILD = """
import sys, time
sys.path.insert(0, {tree!r})
from consensus_eval import api
t = time.perf_counter()
api.rebuild({folder!r}, n_boot={boot})
print("WALL", time.perf_counter() - t)
"""


def one_run(tree: Path, store: Path, boot: int) -> tuple[float, float]:
    """(seconds inside rebuild, peak RSS in MB) of one fresh process rebuilding a copy of ``store``."""
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        folder = Path(tmp) / "run"
        folder.mkdir()
        shutil.copy(store / "results.sqlite", folder / "results.sqlite")
        code = CHILD.format(tree=str(tree), folder=str(folder), boot=boot)
        proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-c", code], cwd=tree,
                              capture_output=True, text=True, check=True)
    wall = float(re.search(r"WALL (\S+)", proc.stdout).group(1))  # type: ignore[union-attr]
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))  # type: ignore[union-attr]
    return wall, rss_kb / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, nargs="+", default=[5000, 10000, 20000])
    ap.add_argument("--judges", type=int, default=4)
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tree", type=Path, action="append", default=None,
                    help="source tree to run (repeatable; default: this one)")
    ap.add_argument("--stores", type=Path, default=Path("/tmp/scale-bench"))
    args = ap.parse_args()
    trees = [t.resolve() for t in (args.tree or [ROOT])]
    for n in args.cases:
        store = args.stores / f"{n}x{args.judges}"
        if not (store / "results.sqlite").is_file():
            build_big_run(store, n, args.judges)
        first: tuple[float, float] | None = None
        for tree in trees:
            runs = [one_run(tree, store, args.boot) for _ in range(args.repeats)]
            wall = statistics.median(w for w, _ in runs)
            rss = statistics.median(r for _, r in runs)
            with open("/proc/loadavg", encoding="ascii") as f:
                load = f.read().split()[0]
            ratio = "" if first is None else f"  x{first[0] / wall:.2f} faster, x{first[1] / rss:.2f} less memory"
            print(f"{n:6d} cases x {args.judges} judges  {tree!s:30s}  rebuild {wall:7.1f} s "
                  f"(runs: {', '.join(f'{w:.1f}' for w, _ in runs)})  peak RSS {rss:6.0f} MB  "
                  f"load {load}{ratio}", flush=True)
            first = first or (wall, rss)
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))


if __name__ == "__main__":
    main()
