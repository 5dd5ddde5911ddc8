"""Build ``schema6/results.sqlite``: a real store as consensus-eval wrote it at schema 6 (commit 489e474, before
label events).

Run once, with the code of that commit: ``python -m tests.data.stores.make_schema6``. The store is kept as the
fixture of the migration to label events (tests/test_label_events.py): its validity figures must come out the same
before and after the upgrade. The run: 3 judges x 60 cases (two systems, tests/test_trust.py's synthetic panel), a
random spot check of 12 cases, a team (li and wang reviewers, chen adjudicator) and labels of every kind and
origin, written through the channels of that version (the review app's model, a sheet import, the store).
"""

from __future__ import annotations

import csv
import shutil
from contextlib import closing
from pathlib import Path

from consensus_eval import api
from consensus_eval.execution.store import HumanLabelRecord, Store
from consensus_eval.review.model import ReviewRun
from tests.test_audit import build_panel_store
from tests.test_trust import _synthetic_panel

HERE = Path(__file__).parent / "schema6"
LI = {"accuracy": 30, "completeness": 35, "standardization": 25}


def build(folder: Path) -> Path:
    panel, cases = _synthetic_panel()
    run = build_panel_store(folder / "run", panel, cases)
    sample = [r.case_id for r in api.spot_check(run, 12, seed=1, stratify="system").sample]
    api.add_reviewer(run, "li")
    api.add_reviewer(run, "wang")
    api.add_reviewer(run, "chen", role="adjudicator")
    with closing(ReviewRun.open(run)) as r:
        rank = {a.case_id: a.rank for a in r.queue.cases}
        for i, cid in enumerate(sample[:10]):          # li, in the app: own scores, then verdicts once revealed
            r.apply("li", {"op": "scores", "case": rank[cid],
                           "scores": {**LI, "accuracy": LI["accuracy"] - (i % 4)}})
            view = r.case_view("li", rank[cid])
            items = [it for d in view.dims for jc in d.judges for it in jc.items]
            for k, it in enumerate(items[:3]):
                r.apply("li", {"op": "verdict", "case": rank[cid], "ids": it.ids,
                               "verdict": ("agree", "disagree", "unsure")[k % 3], "comment": f"li {k}"})
        # the bug of schema 6: once revealed, "accept the panel's score" replaced li's blind score
        r.apply("li", {"op": "scores", "case": rank[sample[9]], "scores": {}, "accepted": list(LI)})
        r.apply("li", {"op": "add", "case": rank[sample[0]], "dimension": "completeness", "type": "fh_absent",
                       "comment": "家族史：未问"})
        r.apply("li", {"op": "comment", "case": rank[sample[1]], "comment": "record hard to read"})
        queue_case = next(a for a in r.queue.cases if a.case_id not in sample and a.needs_review)
        r.apply("li", {"op": "scores", "case": queue_case.rank, "scores": {},
                       "accepted": [d.dimension for d in queue_case.dimensions]})
    # wang, on a sheet: own scores of 6 spot-check cases, 2 of them far from li's
    sheet = folder / "wang.csv"
    with sheet.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["row", "case_id", "dimension", "human_score", "reviewer"])
        for i, cid in enumerate(sample[:6]):
            for d, v in LI.items():
                w.writerow(["score", cid, d, v - (8 if i < 2 and d == "accuracy" else i % 2), "wang"])
    api.import_human(run, sheet, rebuild_outputs=False)
    with closing(ReviewRun.open(run)) as r:
        rank = {a.case_id: a.rank for a in r.queue.cases}
        r.adjudicate("chen", rank[sample[0]], {"accuracy": 26, "completeness": 35, "standardization": 25})
    with Store.open_existing(run) as store:       # an own score from the Python API, on a queue case
        store.upsert_human_label(HumanLabelRecord(case_id=queue_case.case_id, dimension="accuracy", reviewer="wang",
                                                  kind="score", value=33, source="api"))
    return run


def main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        run = build(Path(tmp))
        HERE.mkdir(exist_ok=True)
        shutil.copyfile(run / "results.sqlite", HERE / "results.sqlite")
        with Store(HERE / "results.sqlite", read_only=True) as store:
            assert store.get_meta("schema_version") == 6


if __name__ == "__main__":
    main()
