"""Human labels at scale: export the adjudication sheet of every case, fill it in, import it (read
back + stored + every output rebuilt), and the time of one reviewer's click (one upsert).

Builds a run of N cases x J judges straight into a store (tests/big_run.py), then times:
``audit --export`` of all cases (load + audit + write), the import's parts (reading the sheet back
against the run, replacing the reviewer's labels in the store), the rebuild of every output with
the human section (bootstrap ``--bootstrap``), and ``--clicks`` single-label upserts (median).

    .venv/bin/python bench/human_bench.py --cases 2000 --judges 4 --out /tmp/human-bench
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from consensus_eval.analysis.derived import read_run
from consensus_eval.analysis.human import read_labels
from consensus_eval.api import load_run, rebuild
from consensus_eval.execution.store import HumanLabelRecord, Store
from consensus_eval.output.files import write_adjudication_csv
from tests.big_run import build_big_run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--judges", type=int, default=4)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--clicks", type=int, default=200)
    ap.add_argument("--out", type=Path, default=Path("/tmp/human-bench"))
    args = ap.parse_args()
    run = args.out / f"run-{args.cases}x{args.judges}"
    if run.exists():
        shutil.rmtree(run)
    build_big_run(run, args.cases, args.judges)

    t = time.perf_counter()
    results = load_run(run, n_boot=0)
    sheet = write_adjudication_csv(args.out / "sheet.csv", results.audit, judges=results.judges)
    t_export = time.perf_counter() - t
    rows = list(csv.DictReader(io.StringIO(sheet.read_text(encoding="utf-8-sig"))))
    for i, r in enumerate(rows):
        r["reviewer"] = "bench"
        if r["row"] == "score":
            r["human_score"] = r["panel_score"] or "0"
        else:
            r["human_verdict"] = ("同意", "不同意", "unsure")[i % 3]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\r\n")
    w.writeheader()
    w.writerows(rows)
    filled = args.out / "filled.csv"
    filled.write_bytes(buf.getvalue().encode("gb18030"))

    with Store.open_existing(run) as store:
        stored = read_run(store)
        t = time.perf_counter()
        found = read_labels(filled, stored)
        t_read = time.perf_counter() - t
        t = time.perf_counter()
        store.replace_human_labels_of(found.source, found.labels)
        t_store = time.perf_counter() - t
        t = time.perf_counter()
        store.replace_human_labels_of(found.source, found.labels)      # the same sheet again: replaced
        t_again = time.perf_counter() - t
        n_labels = len(store.human_labels())
        clicks = []
        for i in range(args.clicks):
            lb = HumanLabelRecord(case_id=stored.cases[i % len(stored.cases)].id, dimension="accuracy",
                                  reviewer="clicker", kind="score", value=float(i % 40), source="review")
            t = time.perf_counter()
            store.upsert_human_label(lb)
            clicks.append(time.perf_counter() - t)
    t = time.perf_counter()
    after = rebuild(run, n_boot=args.bootstrap)
    t_rebuild = time.perf_counter() - t
    h = after.reliability.human
    assert h is not None
    print(f"{args.cases} cases x {args.judges} judges: sheet {len(rows)} rows, {sheet.stat().st_size / 1e6:.1f} MB; "
          f"{n_labels} labels stored")
    print(f"export (load + audit + write): {t_export:.2f} s")
    print(f"import: read back {t_read:.2f} s, store {t_store:.2f} s, same sheet again {t_again:.2f} s")
    print(f"rebuild every output with the human section (bootstrap {args.bootstrap}): {t_rebuild:.2f} s")
    print(f"one click (upsert): median {statistics.median(clicks) * 1000:.2f} ms, "
          f"max {max(clicks) * 1000:.2f} ms over {len(clicks)}")
    print(f"human section: {h.n_cases} cases, {h.n_verdicts} verdicts, precision "
          + ", ".join(f"{j} {p.precision.value:.2f}" for j, p in h.precision.items() if p.precision.value is not None))


if __name__ == "__main__":
    main()
