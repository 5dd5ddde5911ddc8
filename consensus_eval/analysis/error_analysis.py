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

What differs by rubric kind is :data:`ITEM_ERRORS`: one small function per way a kind shows its judgments (the
dimension's ``view``: itemized deductions, criteria verdicts, a level), as the report's drill-downs do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from consensus_eval.analysis.agreement import judge_value, panel_value
from consensus_eval.analysis.audit import AuditDeduction, deductions_of
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.human import CaseReview, HumanReview
from consensus_eval.analysis.judge_validity import PANEL
from consensus_eval.domain.cases import Case
from consensus_eval.domain.kinds.base import VIEW_CRITERIA, VIEW_DEDUCTIONS, VIEW_LEVELS, View
from consensus_eval.domain.kinds.deductions import Deductions
from consensus_eval.domain.rubric import Dimension, Rubric
from consensus_eval.execution.store import SpotCheckRecord, StoredCall
from consensus_eval.execution.stored_run import StoredRun

ErrorKind = Literal["miss", "false_alarm"]
#: which cases an analysis covers (module docstring, "Which cases")
Part = Literal["tuning", "spot_check", "labelled"]
Band = Literal["low", "mid", "high"]
BANDS: tuple[Band, ...] = ("low", "mid", "high")
#: the cases kept per item (the ones that move the score most)
TOP_CASES = 5


class ErrorCase(BaseModel):
    """One error on one case: ``points`` how far it moves the score, ``judge`` whose (None: the panel's judges all
    missed it), ``evidence`` the quote (the clinician's for a deduction they added, else the judge's), ``reason`` the
    judge's, ``comment`` the clinicians'."""

    case_id: str
    kind: ErrorKind
    points: float
    judge: str | None = None
    evidence: str = ""
    reason: str | None = None
    comment: str | None = None


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


@dataclass(frozen=True)
class CaseData:
    """What the per-kind functions read of one case on one dimension: the ok calls per judge, the panel's
    consensus, the clinicians' review, the case itself."""

    case: Case
    calls: dict[str, list[StoredCall]]
    consensus: CaseConsensus | None
    review: CaseReview


#: one error found by a kind's function: (rater, item id, item name, error)
Found = tuple[str, str, str, ErrorCase]


def _decided(verdicts: dict[str, str], reference: str | None) -> str | None:
    """The clinicians' verdict on a deduction: the adjudicator's, else the reviewers' when they all gave the same."""
    if reference is not None:
        return reference
    values = set(verdicts.values())
    return values.pop() if len(values) == 1 else None


def _comments(review: CaseReview, dimension: str, deduction_id: str | None = None) -> str | None:
    said = [lb.comment for lb in review.comments if lb.comment and lb.dimension in (None, dimension)
            and (deduction_id is None or lb.deduction_id in (None, deduction_id))]
    return "; ".join(dict.fromkeys(said)) or None


def _deduction_errors(dim: Dimension, data: CaseData, rubric: Rubric) -> list[Found]:
    """``deductions``: misses from the deductions the clinicians added, false alarms from their verdicts."""
    found: list[Found] = []
    given: dict[str, list[AuditDeduction]] = {
        j: [d for r in calls for d in deductions_of(rubric, r)] for j, calls in data.calls.items()}
    names = dim.type_names if isinstance(dim, Deductions) else {}
    for added in data.review.added:
        if added.dimension != dim.id or added.value is None:
            continue
        item = str(added.value)
        err = ErrorCase(case_id=data.case.id, kind="miss", points=abs(float(added.points or 0.0)),
                        evidence=added.evidence or "", comment=added.comment)
        found.append((PANEL, item, names.get(item, item), err))
        for judge, ds in given.items():
            if not any(d.type_id == item for d in ds):
                found.append((judge, item, names.get(item, item), err))
    seen: set[tuple[str, str]] = set()
    for judge, ds in given.items():
        for did in dict.fromkeys(d.id for d in ds if not d.copy_of):   # a verdict is on a deduction id, once
            d = next(x for x in ds if x.id == did)                      # (a repeated fixed penalty: charged once)
            if _decided(dict(data.review.verdicts.get(did, {})), data.review.reference_verdicts.get(did)) \
                    != "disagree":
                continue
            err = ErrorCase(case_id=data.case.id, kind="false_alarm", points=abs(d.points), judge=judge,
                            evidence=d.evidence, reason=d.reason, comment=_comments(data.review, dim.id, did))
            found.append((judge, d.type_id, d.type, err))
            if (d.type_id, d.evidence) not in seen:
                seen.add((d.type_id, d.evidence))
                found.append((PANEL, d.type_id, d.type, err))
    return found


def _criterion_errors(dim: Dimension, data: CaseData, rubric: Rubric) -> list[Found]:
    """``criteria``: the clinicians' verdict on each criterion (the adjudicator's, else the reviewers' when they
    all gave the same) against each judge's (its first run's) and the panel's majority (none on a tie)."""
    criteria = {c.id: c for c in dim.judged_criteria(data.case.criteria)}
    mine = {r: v[dim.id] for r, v in data.review.criteria.items() if dim.id in v}
    found: list[Found] = []
    for cid, crit in criteria.items():
        ref = data.review.reference_criteria.get(dim.id, {}).get(cid)
        given = {r: v[cid] for r, v in mine.items() if cid in v}
        met = ref if ref is not None else (next(iter(given.values())) if len(set(given.values())) == 1 else None)
        if met is None:
            continue
        fault = met != (crit.points > 0)
        said: dict[str, tuple[bool, str, str]] = {}
        for judge, calls in data.calls.items():
            for r in calls:
                v = next((v for v in (r.judgment.verdicts if r.judgment else []) if v.id == cid), None)
                if v is not None:
                    said[judge] = (v.met, v.evidence, v.reason)
                    break
        majority = (data.consensus.criteria.get(dim.id, {}).get(cid) if data.consensus else None)
        if majority in ("met", "not met"):
            said[PANEL] = (majority == "met", "", "")
        for rater, (j_met, evidence, reason) in said.items():
            j_fault = j_met != (crit.points > 0)
            if j_fault == fault:
                continue
            err = ErrorCase(case_id=data.case.id, kind="miss" if fault else "false_alarm", points=abs(crit.points),
                            judge=None if rater == PANEL else rater, evidence=evidence, reason=reason or None,
                            comment=_comments(data.review, dim.id))
            found.append((rater, cid, crit.text, err))
    return found


def _likert_errors(dim: Dimension, data: CaseData, rubric: Rubric) -> list[Found]:
    """``likert``: the rating against the clinicians' score: above it a miss (too lenient), below a false alarm."""
    human = data.review.human.get(dim.id)
    if human is None or data.consensus is None:
        return []
    found: list[Found] = []
    for rater in [PANEL, *data.calls]:
        value = _rater_value(data.consensus, rater, dim.id)
        if value is None or value == human:
            continue
        calls = data.calls.get(rater, [])
        quotes = [q for r in calls if r.judgment for q in r.judgment.evidence]
        reason = next((r.judgment.comment for r in calls if r.judgment and r.judgment.comment), None)
        err = ErrorCase(case_id=data.case.id, kind="miss" if value > human else "false_alarm",
                        points=abs(value - human), judge=None if rater == PANEL else rater,
                        evidence="; ".join(dict.fromkeys(quotes)), reason=reason,
                        comment=_comments(data.review, dim.id))
        found.append((rater, dim.id, dim.name, err))
    return found


#: per way a kind shows its judgments (:attr:`~consensus_eval.domain.kinds.base.Dimension.view`: a plug-in kind
#: shows its own as one of the three): the errors of the raters on one dimension of one case
ITEM_ERRORS: dict[View, Callable[[Dimension, CaseData, Rubric], list[Found]]] = {
    VIEW_DEDUCTIONS: _deduction_errors, VIEW_CRITERIA: _criterion_errors, VIEW_LEVELS: _likert_errors}


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
            data = CaseData(cases[cid], {j: calls.get((cid, dim.id), {}).get(j, []) for j in run.judges},
                            cons.get(cid), review.cases[cid])
            for rater, item, name, err in ITEM_ERRORS[dim.view](dim, data, rubric):
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
