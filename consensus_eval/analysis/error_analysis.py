"""What the judges get wrong against the clinicians, item by item: the error analysis of the quality-control loop
(docs/qc-loop.md; ``reliability.json`` ``errors``, the report's error-analysis section, the console).

Per judge and for the panel, per item of each dimension (a deduction type or fixed penalty, a criterion, a likert
dimension's rating), on the cases the clinicians labelled:

- a **miss**: the clinicians saw a fault the rater did not report: a deduction type they added where the judge
  gave none of that type (for the panel: every deduction they added); a criterion whose clinicians' verdict is a
  fault (a positive criterion not met, a negative one met) where the rater's is not; a likert rating above the
  clinicians' score (too lenient);
- a **false alarm**: the rater reported a fault the clinicians rejected: a deduction they disagreed with (the
  adjudicator's reference verdict where there is one, else every reviewer's who gave a verdict); a criterion the
  other way round; a likert rating below the clinicians' score;

each with its cases (the quote, the judge's reason, the clinicians' comment or evidence), ranked by how many points
the error moves the score; the items are ranked by the points all their errors move. Plus, per dimension and total,
the rater's bias (rater - clinicians) and MAE split by the clinicians' score band (thirds of the dimension's range).
No interval is shown: at the 5 to 40 labelled cases users have, counts of a few errors per item carry no interval
worth showing, and the counts with their cases are what a prompt author reads.

**Which cases.** When the run's spot check is split, only its **tuning** part (what a prompt may be changed on;
the held-out part stays unseen, for ``compare --against-clinicians``); a spot check drawn before the split: its
cases; no spot check: every case a clinician labelled (the review queue's, chosen by disagreement: ``part`` says so).

What differs by rubric kind is the kind's own
:meth:`~consensus_eval.domain.kinds.base.Dimension.item_errors` (:mod:`consensus_eval.domain.kinds.item_errors`):
``deductions``, ``criteria`` and ``likert`` each find their items' errors; a kind without items gives none, and its
dimensions get the bias and MAE by band only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from consensus_eval.analysis.agreement import judge_value, panel_value
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.human import HumanReview
from consensus_eval.analysis.judge_validity import PANEL
from consensus_eval.domain.kinds.item_errors import ErrorCase, ErrorInput
from consensus_eval.execution.store import SpotCheckRecord, StoredCall
from consensus_eval.execution.stored_run import StoredRun

#: which cases an analysis covers (module docstring, "Which cases")
Part = Literal["tuning", "spot_check", "labelled"]
Band = Literal["low", "mid", "high"]
BANDS: tuple[Band, ...] = ("low", "mid", "high")
#: the cases kept per item (the ones that move the score most)
TOP_CASES = 5


class ItemErrors(BaseModel):
    """One item of a dimension (a deduction type, a criterion, a likert rating): ``name`` as the rubric shows it,
    how many ``misses`` and ``false_alarms``, the ``points`` they move in all, and the ``cases`` that move it most
    (at most :data:`TOP_CASES`, largest first)."""

    dimension: str
    item: str
    name: str
    misses: int = 0
    false_alarms: int = 0
    points: float = 0.0
    cases: list[ErrorCase] = []


class BandError(BaseModel):
    """The rater against the clinicians on the cases whose clinicians' score is in ``band``: ``n`` cases, ``bias``
    (rater - clinicians, points) and ``mae`` (None without a case)."""

    band: Band
    n: int
    bias: float | None = None
    mae: float | None = None


class RaterErrors(BaseModel):
    """One rater's errors: ``items`` with at least one error, ranked (most points moved first); ``bands`` per
    dimension id and ``total``."""

    rater: str
    items: list[ItemErrors] = []
    bands: dict[str, list[BandError]] = {}


class ErrorAnalysis(BaseModel):
    """The error analysis of a run (module docstring): ``part`` which cases, ``cases`` how many of them a clinician
    labelled, ``raters`` the panel first, then each judge."""

    part: Part
    cases: int
    raters: dict[str, RaterErrors]


def _rater_value(c: CaseConsensus, rater: str, key: str) -> float | None:
    if rater != PANEL and rater not in c.judges:
        return None
    v = panel_value(c, key) if rater == PANEL else judge_value(c, rater, key)
    return None if v is None or v != v else float(v)


def analysed_cases(review: HumanReview, spot_checks: Sequence[SpotCheckRecord]) -> tuple[Part, list[str]]:
    """Which cases an error analysis covers, in order (module docstring, "Which cases")."""
    if spot_checks and all(r.part is not None for r in spot_checks):
        return "tuning", [r.case_id for r in spot_checks if r.part == "tuning" and r.case_id in review.cases]
    if spot_checks:
        return "spot_check", [r.case_id for r in spot_checks if r.case_id in review.cases]
    return "labelled", list(review.cases)


def _band(value: float, top: float) -> Band:
    return BANDS[min(2, max(0, int(3 * value / top)))] if top > 0 else "mid"


def _bands(pairs: list[tuple[float, float]], top: float) -> list[BandError]:
    out = []
    for band in BANDS:
        d = [r - h for r, h in pairs if _band(h, top) == band]
        out.append(BandError(band=band, n=len(d), bias=sum(d) / len(d) if d else None,
                             mae=sum(abs(x) for x in d) / len(d) if d else None))
    return out


def error_analysis(run: StoredRun, consensus: Sequence[CaseConsensus], review: HumanReview,
                   spot_checks: Sequence[SpotCheckRecord] = ()) -> ErrorAnalysis:
    """The error analysis of a run against its clinicians' labels (module docstring)."""
    rubric = run.rubric
    part, case_ids = analysed_cases(review, spot_checks)
    cases = {c.id: c for c in run.cases}
    cons = {c.case_id: c for c in consensus}
    calls: dict[tuple[str, str], dict[str, list[StoredCall]]] = {}
    for r in run.records:
        if r.status == "ok":
            calls.setdefault((r.case_id, r.dimension), {}).setdefault(r.judge, []).append(r)
    raters = [PANEL, *run.judges]
    items: dict[str, dict[tuple[str, str], ItemErrors]] = {r: {} for r in raters}
    for cid in case_ids:
        if cid not in cases:
            continue
        for dim in rubric.dimensions:
            data = ErrorInput(cid, cases[cid].criteria,
                              {j: calls.get((cid, dim.id), {}).get(j, []) for j in run.judges}, cons.get(cid),
                              review.cases[cid], PANEL)
            for rater, item, name, err in dim.item_errors(data):
                it = items[rater].setdefault((dim.id, item), ItemErrors(dimension=dim.id, item=item, name=name))
                it.misses += err.kind == "miss"
                it.false_alarms += err.kind == "false_alarm"
                it.points += err.points
                it.cases.append(err)
    out: dict[str, RaterErrors] = {}
    tops = {d.id: d.max for d in rubric.dimensions} | {"total": rubric.max_total}
    for rater in raters:
        ranked = sorted(items[rater].values(), key=lambda i: (-i.points, -(i.misses + i.false_alarms), i.dimension,
                                                              i.item))
        for it in ranked:
            it.cases = sorted(it.cases, key=lambda e: (-e.points, e.case_id, e.kind))[:TOP_CASES]
            it.points = round(it.points, 6)
        bands = {}
        for key, top in tops.items():
            pairs = [(v, h) for cid in case_ids if cid in cons and (h := review.cases[cid].human.get(key)) is not None
                     and (v := _rater_value(cons[cid], rater, key)) is not None]
            bands[key] = _bands(pairs, top)
        out[rater] = RaterErrors(rater=rater, items=ranked, bands=bands)
    labelled = sum(1 for cid in case_ids if review.cases[cid].human)
    return ErrorAnalysis(part=part, cases=labelled, raters=out)
