"""What the trust figures add to a rebuild: the leaderboard, the decision study (G/D-study) and the validity
section with its prediction-powered estimates, at N cases x 4 judges (issue 21: at most +10%).

The store is ``tests/big_run.py``'s synthetic run (N cases x 4 judges x 3 dimensions), its cases given
two systems (``scribe-a`` / ``scribe-b``, each conversation written up by both: a paired design), a
random spot check of 300 cases stratified by system, and a clinician's own scores on those 300 cases
plus a second clinician on 100 of them. Each repeat is a fresh process on a fresh copy of the store:

- ``rebuild``: ``consensus_eval.api.rebuild`` (every output, 1,000 bootstrap resamples): what ``score``
  does at its end; the trust figures are computed inside it (the leaderboard for the report, the decision
  study and the validity section for reliability.json);
- then, on the same results, each trust figure again, timed alone, then called once more under
  tracemalloc for its peak (tracemalloc slows allocation-heavy code, so it is never on while timing): the
  leaderboard (cluster t intervals; a cluster bootstrap of 1,000 resamples until issue 32), the decision
  study, the validity section (PPI included). ``baseline`` = rebuild - their sum; ``added`` = their sum / baseline.

    .venv/bin/python bench/trust_bench.py --cases 20000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.big_run import build_big_run  # noqa: E402

CHILD = r"""
import json, sys, time, tracemalloc
sys.path.insert(0, {root!r})
from consensus_eval import api
from consensus_eval._gc import gc_paused
from consensus_eval.analysis.decision import decision_studies
from consensus_eval.analysis.judge_validity import validity_report
from consensus_eval.analysis.systems import leaderboard
t = time.perf_counter()
res = api.rebuild({folder!r}, n_boot={boot})
rebuild = time.perf_counter() - t
assert res.leaderboard is not None and res.reliability.validity is not None and res.reliability.decision
out = {{"rebuild": rebuild}}
dims = [d.id for d in res.rubric.dimensions]
for name, fn in (
        ("leaderboard", lambda: leaderboard(res.cases, res.consensus, dims, res.judges)),
        ("decision", lambda: decision_studies(res.run, res.consensus)),
        ("validity", lambda: validity_report(res.run, res.consensus, res.review, res.spot_checks))):
    t = time.perf_counter()
    with gc_paused():               # as inside the rebuild (its analysis runs with the collector paused)
        fn()
    out[name] = time.perf_counter() - t
    tracemalloc.start()             # memory on a second call: tracemalloc slows allocation-heavy code
    fn()
    out[name + "_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
print("RESULT " + json.dumps(out))
"""


def prepare(store: Path, n: int, judges: int) -> None:
    """The big run, with two systems per conversation, a spot check and clinicians' scores."""
    from consensus_eval.api import load_run, spot_check
    from consensus_eval.execution.store import HumanLabelRecord, Store

    build_big_run(store, n, judges)
    db = sqlite3.connect(store / "results.sqlite")
    for position, body in db.execute("SELECT position, body FROM cases").fetchall():
        c = json.loads(body)
        c["system"] = "scribe-a" if position % 2 == 0 else "scribe-b"
        c["source"] = f"conv-{position // 2}"
        db.execute("UPDATE cases SET body = ? WHERE position = ?", (json.dumps(c, ensure_ascii=False), position))
    db.commit()
    db.close()
    sample = [r.case_id for r in spot_check(store, 300, seed=1, stratify="system").sample]
    totals = {c.case_id: c.total for c in load_run(store, n_boot=0).consensus}
    with Store.open_existing(store) as s:
        labels = []
        for i, cid in enumerate(sample):
            for reviewer in ("li", "wang") if i < 100 else ("li",):
                base = (totals[cid] or 80) - 60 - (i % 5) * 0.5 - (1 if reviewer == "wang" else 0)
                scores = (("accuracy", max(0.0, min(40.0, base))), ("completeness", 32.0), ("standardization", 22.0))
                for d, v in scores:
                    labels.append(HumanLabelRecord(case_id=cid, dimension=d, reviewer=reviewer, kind="score",
                                                   value=v, source="bench"))
        s.replace_human_labels_of("bench", {r: [lb for lb in labels if lb.reviewer == r] for r in ("li", "wang")})


def one_run(store: Path, boot: int) -> tuple[dict[str, float], float]:
    with tempfile.TemporaryDirectory(prefix="trust-bench-") as tmp:
        folder = Path(tmp) / "run"
        folder.mkdir()
        shutil.copy(store / "results.sqlite", folder / "results.sqlite")
        code = CHILD.format(root=str(ROOT), folder=str(folder), boot=boot)
        proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-c", code], cwd=ROOT,
                              capture_output=True, text=True, check=True)
    out = json.loads(re.search(r"RESULT (.*)", proc.stdout).group(1))  # type: ignore[union-attr]
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))  # type: ignore[union-attr]
    return out, rss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--judges", type=int, default=4)
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--stores", type=Path, default=Path("/tmp/trust-bench"))
    args = ap.parse_args()
    store = args.stores / f"{args.cases}x{args.judges}"
    if not (store / "results.sqlite").is_file():
        prepare(store, args.cases, args.judges)
    runs = [one_run(store, args.boot) for _ in range(args.repeats)]
    with open("/proc/loadavg", encoding="ascii") as f:
        load = f.read().split()[0]

    def med(key: str) -> float:
        return statistics.median(r[key] for r, _ in runs)

    added = med("leaderboard") + med("decision") + med("validity")
    sums = [r["leaderboard"] + r["decision"] + r["validity"] for r, _ in runs]
    ratios = [s / (r["rebuild"] - s) for s, (r, _) in zip(sums, runs, strict=True)]
    print(f"{args.cases} cases x {args.judges} judges, {args.repeats} fresh processes (load {load})")
    rebuilds = ", ".join(f"{r['rebuild']:.1f}" for r, _ in runs)
    print(f"rebuild {med('rebuild'):.1f} s (runs: {rebuilds}), "
          f"peak RSS {statistics.median(m for _, m in runs):.0f} MB")
    for k in ("leaderboard", "decision", "validity"):
        print(f"  {k:12s} {med(k):6.2f} s (runs: {', '.join(f'{r[k]:.2f}' for r, _ in runs)}), "
              f"tracemalloc peak {med(k + '_peak_mb'):.1f} MB")
    print(f"trust figures {added:.2f} s = +{100 * statistics.median(ratios):.1f}% of the rebuild without them "
          f"(median of the runs' ratios: {', '.join(f'{100 * x:.1f}%' for x in ratios)})")


if __name__ == "__main__":
    main()
