"""Finished runs of a likert and of a criteria rubric written straight into a store (as tests/big_run.py does
for medical_record), for the tests of the human side of rubric kinds: audit, review app, labels, validity and
report. No judge runs.

``build_kinds_run(folder, kind)``: ``kind`` ``likert`` (tests/data/kinds_human/likert.yaml, three attributes
1-5) or ``criteria`` (tests/data/kinds_human/criteria.yaml: the rubric's own four criteria, and each case's
own criteria on ``case_points`` when ``per_case``). English discharge notes; judges ``judge-a``..; for each
case a seeded "true" level (or met / not met per criterion), each judge's rating one level off it now and
then (a criterion's verdict flipped now and then), with evidence quoting the note; the true answers are in each
case's ``meta["truth"]``. Each judgment carries the claimed score equal to the derived one
(``quote_conversation``: the evidence quotes the patient's turn). Seeded: the same arguments give the same store.
"""

from __future__ import annotations

import random
from pathlib import Path

from consensus_eval.domain.cases import Case, Turn
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.judgment import CriterionVerdict, Judgment
from consensus_eval.domain.kinds import Likert, of_kind
from consensus_eval.domain.rubric import Criterion, Rubric, load_rubric
from consensus_eval.domain.scoring import criteria_of, derive
from consensus_eval.execution.store import CallRecord, PlannedCall, Store

DATA = Path(__file__).resolve().parent / "data" / "kinds_human"

_DRUGS = [("metformin", "500 mg twice a day"), ("lisinopril", "10 mg daily"), ("atorvastatin", "20 mg at night"),
          ("amlodipine", "5 mg daily"), ("aspirin", "81 mg daily")]
_PROBLEMS = ["chest pain", "shortness of breath", "a fall at home", "poorly controlled diabetes", "a urinary infection"]


def kinds_rubric(kind: str) -> Rubric:
    return load_rubric(DATA / f"{kind}.yaml")


def kinds_cases(n: int, seed: int = 0, *, per_case: bool = False) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        drug, dose = _DRUGS[i % len(_DRUGS)]
        problem = _PROBLEMS[(i * 3) % len(_PROBLEMS)]
        days = rng.randrange(2, 15)
        conv = [Turn(role="doctor", text="What brought you in? Any allergies?"),
                Turn(role="patient", text=f"I came in with {problem}. I am allergic to penicillin."),
                Turn(role="doctor", text=f"Keep taking {drug} {dose}, and come back in {days} days.")]
        record = (f"Reason for admission: {problem}.\nAllergies: penicillin.\nMedications: {drug} {dose}.\n"
                  f"Plan: follow-up in {days} days.")
        crit = None
        if per_case:
            crit = [Criterion(id="problem", text=f"Names the presenting problem ({problem})", points=4),
                    Criterion(id="days", text=f"Gives the follow-up interval of {days} days", points=2),
                    Criterion(id="alarm", text="Tells the patient which symptoms should bring them back", points=2)]
        out.append(Case(id=f"note-{i:03d}", conversation=conv, record=record, criteria=crit))
    return out


def build_kinds_run(folder: Path, kind: str, n_cases: int = 12, n_judges: int = 3, seed: int = 0, *,
                    runs: int = 1, per_case: bool = False, noise: float = 0.25,
                    quote_conversation: bool = False) -> Path:
    """Fill ``folder/results.sqlite`` with a finished run of the ``kind`` rubric (module docstring)."""
    rng = random.Random(seed)
    rubric = kinds_rubric(kind)
    if kind == "criteria" and not per_case:
        rubric = rubric.model_copy(update={"dimensions": [d for d in rubric.dimensions if d.verdict_items()]})
    judges = [f"judge-{chr(ord('a') + k)}" for k in range(n_judges)]
    config = EvalConfig.model_validate({"judges": [{"name": j, "model": f"openai/{j}"} for j in judges],
                                        "runs": runs})
    cases = kinds_cases(n_cases, seed, per_case=per_case)
    planned = [PlannedCall(f"{c.id}|{j}|{d.id}|{r}", c.id, d.id, j, r)
               for c in cases for j in judges for d in rubric.dimensions for r in range(runs)]
    truth: dict[tuple[str, str], object] = {}
    for c in cases:
        for d in rubric.dimensions:
            if d.kind == "likert":
                truth[c.id, d.id] = rng.randint(*of_kind(d, Likert).level_range)
            else:
                truth[c.id, d.id] = {k.id: rng.random() < 0.6 for k in criteria_of(d, c.criteria)}
    # the "true" answers, kept in each case's meta (passed through untouched; no judge reads it) for the tests
    cases = [c.model_copy(update={"meta": {"truth": {d.id: truth[c.id, d.id] for d in rubric.dimensions}}})
             for c in cases]
    by_id = {c.id: c for c in cases}
    folder.mkdir(parents=True, exist_ok=True)
    with Store(folder / "results.sqlite") as store:
        store.set_meta("rubric", rubric.model_dump(mode="json"))
        store.set_meta("config", config.model_dump(mode="json"))
        store.set_cases(c.model_dump(mode="json") for c in cases)
        store.set_plan(planned)
        for p in planned:
            case = by_id[p.case_id]
            dim = rubric.dimension(p.dimension)
            quote = case.record.splitlines()[rng.randrange(len(case.record.splitlines()))]
            if quote_conversation and isinstance(case.conversation, list):   # what the patient said
                quote = case.conversation[1].text
            if dim.kind == "likert":
                lo, hi = of_kind(dim, Likert).level_range
                t = truth[case.id, dim.id]
                assert isinstance(t, int)
                rating = min(hi, max(lo, t + (rng.choice((-1, 1)) if rng.random() < noise else 0)))
                judgment = Judgment(dimension=dim.id, rating=rating, evidence=[quote],
                                    comment=f"{dim.anchors[rating]}.")
            else:
                t2 = truth[case.id, dim.id]
                assert isinstance(t2, dict)
                judgment = Judgment(dimension=dim.id, verdicts=[
                    CriterionVerdict(id=k, met=(m if rng.random() >= noise / 2 else not m),
                                     evidence=quote if m else "", reason="stated in the note" if m else "not found")
                    for k, m in t2.items()])
            score = derive(dim, judgment, case.criteria)
            judgment.claimed_score = score.score
            store.record(CallRecord(status="ok", judgment=judgment, raw=judgment.model_dump_json(),
                                    request_hash=p.request_hash, case_id=p.case_id, dimension=p.dimension,
                                    judge=p.judge, run=p.run, model=f"openai/{p.judge}", prompt_tokens=900,
                                    completion_tokens=200, cost=0.001, latency_s=1.0))
    return folder
