"""Benchmark: the review queue of a large run, from the store to what the console prints.

The run is :func:`tests.big_run.build_big_run` (the bundled examples made distinct per case, 0-4
deductions per judge and dimension, about one quote in eight invented), written once into ``--folder``
and reused. Timed with ``time.perf_counter``, each step ``--runs`` times, the median reported:

- ``load``: :func:`consensus_eval.api.load_run` (one read of the store, every score derived, every quote
  grounded) and the consensus;
- ``audit``: :func:`consensus_eval.analysis.audit.audit` (every case audited and ranked);
- ``queue``: :func:`consensus_eval.analysis.audit.review_queue` (headline and counts);
- ``print``: what ``audit`` prints by default (``--top 10``: the queue, the totals, the judge quality and
  ten drill-downs) to a console that discards it.

``--memory``: also what the audit's rows hold once built (``tracemalloc``, one more audit): the total and the
source lines that allocated most of it.

    python bench/audit_bench.py [--cases 2000] [--judges 4] [--runs 3] [--folder /tmp/audit-bench] [--memory]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console

from consensus_eval.analysis.audit import audit, review_queue
from consensus_eval.api import load_run
from consensus_eval.output.audit_console import print_audit
from tests.big_run import build_big_run


def timed(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """The median time of ``runs`` calls of ``fn`` and the last result."""
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--judges", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--folder", type=Path, default=Path("/tmp/audit-bench"))
    ap.add_argument("--memory", action="store_true", help="also the memory the audit's rows hold (tracemalloc)")
    args = ap.parse_args()
    folder = args.folder / f"{args.cases}x{args.judges}"
    if not (folder / "results.sqlite").is_file():
        build_big_run(folder, args.cases, args.judges)
    t_load, results = timed(lambda: load_run(folder, n_boot=0), args.runs)
    run, cons = results.run, results.consensus
    t_audit, audits = timed(lambda: audit(run, cons), args.runs)
    t_queue, queue = timed(lambda: review_queue(audits, len(run.judges)), args.runs)
    quality = results.judge_quality

    def show() -> int:
        sink = io.StringIO()
        print_audit(Console(file=sink, width=120), queue, 10, quality)
        return len(sink.getvalue().splitlines())

    t_print, lines = timed(show, args.runs)
    print(f"{args.cases} cases x {args.judges} judges x {len(run.rubric.dimensions)} dimensions, "
          f"{len(run.records)} judgments; median of {args.runs}")
    print(f"  load (read, derive, ground, consensus)  {t_load:6.2f} s")
    print(f"  audit (every case, ranked)              {t_audit:6.2f} s")
    print(f"  review_queue                            {t_queue:6.3f} s")
    print(f"  print audit --top 10                    {t_print:6.2f} s ({lines} lines)")
    print(f"  {queue.headline}; by reason {queue.by_reason}")
    if args.memory:
        held(lambda: audit(run, cons))


def held(fn: Callable[[], Any], top: int = 8) -> None:
    """Print the memory what ``fn`` returns holds (allocated during the call and still alive with its result),
    in total and by the source lines that allocated most of it."""
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    out = fn()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    stats = after.compare_to(before, "lineno")
    print(f"  held by the audit's rows                {sum(s.size_diff for s in stats) / 1e6:6.1f} MB")
    for s in stats[:top]:
        frame = s.traceback[0]
        print(f"    {s.size_diff / 1e6:6.1f} MB  {s.count_diff:9,d} blocks  {Path(frame.filename).name}:{frame.lineno}")
    del out


if __name__ == "__main__":
    main()
