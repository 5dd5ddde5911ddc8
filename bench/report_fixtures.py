"""Run folders that show every section of the report, for bench/report_identical.sh: the bundled examples of the
three rubric kinds scored by their offline panels, then a random spot check, two reviewers' labels (blind scores,
deduction verdicts, an added deduction, an accepted score), a calibration and a metrics file.

    python bench/report_fixtures.py OUT_DIR

Run with the code of one side (PYTHONPATH=its worktree, from its worktree): the folders are written once and every
side renders them. Seeded throughout, so two builds with the same code give the same folders (except the minute
written into the reports, which the comparison masks). Calls no network.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

#: name -> (cases, config): every rubric kind, one judge and a panel, one system and two
RUNS = {
    "rules": ("examples/cases.jsonl", "configs/default.yaml"),
    "med": ("examples/cases.jsonl", "configs/offline.yaml"),
    "two": ("examples/cases_two_systems.jsonl", "configs/offline.yaml"),
    "pdqi9": ("examples/pdqi9/cases.jsonl", "configs/pdqi9.offline.yaml"),
    "crit": ("examples/criteria/cases.jsonl", "configs/criteria.offline.yaml"),
}
#: the runs labelled by reviewers (spot check, verdicts, an added deduction)
LABELLED = ("med", "two", "pdqi9", "crit")


def cli(*args: object) -> str:
    """The side's command line (this process's interpreter and PYTHONPATH), its output; stops on a failure."""
    res = subprocess.run([sys.executable, "-c", "from consensus_eval.cli import app; app()", *map(str, args)],
                         capture_output=True, text=True, env=None)
    if res.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(map(str, args))}: exit {res.returncode}\n{res.stdout}\n{res.stderr}")
    return res.stdout


def fill(sheet: Path, reviewer: str, *, verdicts: bool, shift: int, cases: set[str] | None = None,
         accept: bool = False) -> Path:
    """The sheet filled in by ``reviewer``: a score on every score row (the panel's, or 80% of the maximum when
    blind, moved by ``shift``; a likert level stays a level), a verdict on every deduction row (``verdicts``: agree,
    disagree, unsure in turn), on ``cases`` only when given; ``accept``: the first score of a case outside the spot
    check accepted."""
    with sheet.open(encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    turn = 0
    accepted = not accept
    for r in rows:
        if cases is not None and r["case_id"] not in cases:
            continue
        if r["row"] == "score":
            top = float(r["max"] or 0)
            base = float(r["panel_score"]) if r["panel_score"] else round(top * 0.8)
            if top > 10:          # points: moved by a few
                value = max(min(base + shift - (len(out) % 3), top), 0)
            elif top > 1:         # a likert level: a whole one
                value = max(min(round(base) + (shift > 0) - (len(out) % 2), top), 1)
            else:                 # a share
                value = base
            r["human_score"] = f"{value:g}"
            if not accepted and r["panel_score"] and r["sample"] != "spot_check":
                r["human_score"], accepted = "accept", True
        elif r["row"] == "deduction" and verdicts:
            r["human_verdict"] = ("agree", "disagree", "unsure")[turn % 3]
            r["human_comment"] = "checked" if turn % 4 == 0 else ""
            turn += 1
        r["reviewer"] = reviewer
        out.append(r)
    path = sheet.with_name(f"{sheet.stem}-{reviewer}-filled.csv")
    with path.open("w", encoding="utf-8-sig", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(out)
    return path


def added_type(run: Path) -> str | None:
    """A deduction type of the run's first deductions dimension (None: the rubric has none)."""
    from consensus_eval import load_run

    rubric = load_run(run, n_boot=0, replies=False).rubric
    for d in rubric.dimensions:
        for c in getattr(d, "categories", ()):  # only a deductions dimension has them (a likert one: none)
            for t in c.types:
                return t.id
    return None


def label(run: Path) -> None:
    """Spot check, then li (blind, then with the judges shown), then wang (blind, four cases, then verdicts on the
    first cases of the queue), imported."""
    cli("audit", run, "--spot-check", 6, "--seed", 1, *(["--stratify", "system"] if run.name == "two" else []))
    blind = run / "li-blind.csv"
    cli("audit", run, "--export", blind, "--reviewer", "li", "--top", 3)
    cli("human", "import", fill(blind, "li", verdicts=False, shift=-2), "--run", run, "--bootstrap", 200)
    seen = run / "li-seen.csv"
    cli("audit", run, "--export", seen, "--reviewer", "li", "--top", 3)
    filled = fill(seen, "li", verdicts=True, shift=-2, accept=True)
    kind = added_type(run)
    if kind is not None:
        with filled.open(encoding="utf-8-sig", newline="") as f:
            rows = list(csv.DictReader(f))
        rows.append({**{k: "" for k in rows[0]}, "row": "added", "case_id": rows[0]["case_id"],
                     "dimension": rows[0]["dimension"], "type_id": kind, "evidence": "",
                     "human_comment": "missed by every judge", "reviewer": "li"})
        with filled.open("w", encoding="utf-8-sig", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    cli("human", "import", filled, "--run", run, "--bootstrap", 200)
    wang = run / "wang-blind.csv"
    cli("audit", run, "--export", wang, "--reviewer", "wang", "--top", 0)
    with wang.open(encoding="utf-8-sig", newline="") as f:
        spot = [r["case_id"] for r in csv.DictReader(f) if r["sample"] == "spot_check"]
    cli("human", "import", fill(wang, "wang", verdicts=False, shift=1, cases=set(list(dict.fromkeys(spot))[:4])),
        "--run", run, "--bootstrap", 200)
    seen = run / "wang-seen.csv"       # wang's verdicts beside li's: the reviewers' agreement on them
    cli("audit", run, "--export", seen, "--reviewer", "wang", "--top", 2)
    cli("human", "import", fill(seen, "wang", verdicts=True, shift=1), "--run", run, "--bootstrap", 200)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, (cases, config) in RUNS.items():
        cli("score", cases, "-c", config, "--out", out / name)
    for name in LABELLED:
        label(out / name)
    cli("calibrate", "-c", "configs/default.yaml", "--out", out / "calibration", "--sample", 20)
    from consensus_eval import api

    api.attach_calibration(out / "med", out / "calibration" / "calibration.json")
    (out / "med" / "metrics").mkdir(exist_ok=True)
    (out / "med" / "metrics" / "text2dt.json").write_text(json.dumps(
        {"task": "text2dt", "gold": "gold.json", "scores": {"f1": 0.8125, "tree_edit": 0.5}, "n": 12}),
        encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
