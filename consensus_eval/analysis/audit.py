"""Where the judges disagree: cases ranked by disagreement, and who deducted what in each.

Everything here works on a stored run (:class:`~consensus_eval.execution.results.StoredRun`) and its
consensus; no judge is ever called, and nothing is printed or written (the console, the reports and
the adjudication sheet render these objects).

**Disagreement score** of a case (higher means a human should look first)::

    disagreement = spread + 5 x star_gaps + 1 x singletons + 2 x mismatches

- ``spread``: max - min of the judges' totals, in points, over the judges with a score on every
  dimension (0 with fewer than two such judges);
- ``star_gaps``: summed over dimensions, max - min of the judges' stars on that dimension (one star
  gap on one dimension weighs as much as 5 points of spread);
- ``singletons``: distinct (judge, dimension, deduction type) that only that judge used, in a
  category where no other judge deducted anything (see *matching* below);
- ``mismatches``: runs whose claimed score or stars differ from the re-derived ones (the judge's
  arithmetic or reading of the rubric disagrees with its own deductions).

**Ranking**: cases with no panel verdict come first, ``failed`` (no judge answered) then
``inconclusive`` (too few judges answered), because a human has to decide them anyway; then
``incomplete`` ones (calls still missing: provisional); then by disagreement, highest first; ties
keep the order of the cases in the run.

**Matching** a deduction of judge J against the other judges that answered the same case and
dimension (any of their successful runs):

- ``type``: another judge made a deduction of the same dimension and deduction type (for a fixed
  penalty: the same penalty);
- ``category``: no other judge used that type, but another deducted in the same category (fixed
  penalties form one pseudo-category per dimension);
- ``none``: no other judge deducted anything in that category: a *singleton*, only J saw it;
- ``no_peer``: no other judge has a successful run on that dimension, so there is nothing to
  compare with (never a singleton).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel

from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.domain.grounding import Grounding
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.scoring import DimensionScore
from consensus_eval.execution.results import StoredRun
from consensus_eval.execution.store import CallRecord

STAR_GAP_WEIGHT = 5.0
SINGLETON_WEIGHT = 1.0
MISMATCH_WEIGHT = 2.0

#: category id and display name given to fixed penalties (outside the rubric's categories)
PENALTY_CATEGORY = "fixed_penalty"
PENALTY_CATEGORY_NAME = "fixed penalty"

Match = Literal["type", "category", "none", "no_peer"]
_STATUS_ORDER = {"failed": 0, "inconclusive": 1, "incomplete": 2, "ok": 3}


class AuditDeduction(BaseModel):
    """One deduction (or fixed penalty) one judge made in one run, with how others matched it.

    ``category``/``type`` are the rubric's display names, ``category_id``/``type_id`` its ids;
    ``points`` are the points of this one occurrence (before the category cap). ``matched_by``
    lists the other judges that made a deduction of the same type (``match == "type"``) or, failing
    that, in the same category (``match == "category"``); it is empty otherwise.
    """

    judge: str
    run: int
    dimension: str
    kind: Literal["deduction", "penalty"]
    category_id: str
    category: str
    type_id: str
    type: str
    points: float
    evidence: str
    reason: str
    match: Match = "no_peer"
    matched_by: list[str] = []
    #: stable id of this deduction across rebuilds: ``{request_hash}#d{i}`` (i-th deduction of the
    #: call's judgment) or ``{request_hash}#p{i}`` (i-th fixed penalty); what human verdicts refer to
    id: str = ""
    #: where its evidence is in the case (None when not computed)
    grounding: Grounding | None = None

    @property
    def singleton(self) -> bool:
        """True when no other judge deducted in this category (and at least one could have)."""
        return self.match == "none"


class Mismatch(BaseModel):
    """A run whose claimed score or stars differ from the score re-derived from its deductions."""

    judge: str
    run: int
    dimension: str
    dimension_name: str
    claimed_score: float | None
    claimed_stars: int | None
    derived_score: float
    derived_stars: int


class JudgeView(BaseModel):
    """One judge on one dimension of one case: its score and everything it deducted.

    ``score`` is the mean of the re-derived scores of its successful runs (None if none),
    ``stars`` the stars of that mean; ``errors`` are the error messages of its failed runs and
    ``comments`` the non-empty comments of its successful runs.
    """

    judge: str
    score: float | None
    stars: int | None
    runs_ok: int
    runs_failed: int
    deductions: list[AuditDeduction]
    errors: list[str]
    comments: list[str]


class DimensionAudit(BaseModel):
    """One dimension of one case, side by side: each judge's view (in panel order).

    ``star_gap`` is max - min of the judges' stars (0 with fewer than two judges with stars).
    """

    dimension: str
    name: str
    max: float
    panel_score: float | None
    star_gap: int
    judges: list[JudgeView]

    @property
    def quiet(self) -> bool:
        """True when every judge answered and none deducted anything (nothing to look at)."""
        return all(v.runs_ok and not v.deductions for v in self.judges)


class CaseAudit(BaseModel):
    """The audit of one case: its place in the ranking, the score's parts, and the details.

    ``rank`` starts at 1. ``spread``, ``star_gaps``, ``singletons`` and ``mismatches`` are the parts
    of ``disagreement`` (module docstring); ``spread`` is None with fewer than two complete judges.
    """

    rank: int = 0
    case_id: str
    status: str
    disagreement: float
    spread: float | None
    star_gaps: int
    singletons: int
    mismatches: int
    total: float | None
    judge_totals: dict[str, float]
    flags: list[str]
    dimensions: list[DimensionAudit]
    mismatch_runs: list[Mismatch]

    def errors_by_judge(self) -> dict[str, list[str]]:
        """Each judge's distinct error messages over the dimensions (judges without errors left out)."""
        out: dict[str, list[str]] = {}
        for dim in self.dimensions:
            for v in dim.judges:
                for e in v.errors:
                    if e not in out.setdefault(v.judge, []):
                        out[v.judge].append(e)
        return {j: es for j, es in out.items() if es}

    def singleton_deductions(self) -> list[AuditDeduction]:
        """Every deduction (per run) that only its judge made."""
        return [d for dim in self.dimensions for jv in dim.judges for d in jv.deductions if d.singleton]


# --------------------------------------------------------------------------- building the audit


def audit(run: StoredRun, cons: Sequence[CaseConsensus]) -> list[CaseAudit]:
    """Every case of a run, audited and ranked (module docstring: score, ranking, matching)."""
    by_case: dict[str, list[CallRecord]] = {}
    for r in run.records:
        by_case.setdefault(r.case_id, []).append(r)
    audits = [_audit_case(run.rubric, run.judges, c, by_case.get(c.case_id, []), run.scores) for c in cons]
    return rank(audits)


def rank(audits: Iterable[CaseAudit]) -> list[CaseAudit]:
    """Sort: failed, inconclusive, incomplete, then by disagreement (highest first); set ``rank`` from 1."""
    ordered = sorted(audits, key=lambda a: (_STATUS_ORDER.get(a.status, 4), -a.disagreement))
    for i, a in enumerate(ordered, 1):
        a.rank = i
    return ordered


def disagreement_score(spread: float | None, star_gaps: int, singletons: int, mismatches: int) -> float:
    """``spread + 5 x star_gaps + 1 x singletons + 2 x mismatches`` (a missing spread counts 0)."""
    return ((spread or 0.0) + STAR_GAP_WEIGHT * star_gaps + SINGLETON_WEIGHT * singletons
            + MISMATCH_WEIGHT * mismatches)


def _audit_case(rubric: Rubric, judges: Sequence[str], cons: CaseConsensus, records: list[CallRecord],
                derived: dict[str, DimensionScore]) -> CaseAudit:
    dims = [_audit_dimension(rubric, judges, cons, d.id, records, derived) for d in rubric.dimensions]
    mismatches = _mismatches(rubric, records, derived)
    singletons = len({(x.judge, x.dimension, x.type_id)
                      for dim in dims for jv in dim.judges for x in jv.deductions if x.singleton})
    star_gaps = sum(d.star_gap for d in dims)
    return CaseAudit(
        case_id=cons.case_id, status=cons.status,
        disagreement=disagreement_score(cons.spread, star_gaps, singletons, len(mismatches)),
        spread=cons.spread, star_gaps=star_gaps, singletons=singletons, mismatches=len(mismatches),
        total=cons.total, judge_totals=cons.judge_totals, flags=cons.flags,
        dimensions=dims, mismatch_runs=mismatches,
    )


def _audit_dimension(rubric: Rubric, judges: Sequence[str], cons: CaseConsensus, dim_id: str,
                     records: list[CallRecord], derived: dict[str, DimensionScore]) -> DimensionAudit:
    dim = rubric.dimension(dim_id)
    recs = [r for r in records if r.dimension == dim_id]
    views = [_judge_view(rubric, cons, j, dim_id, [r for r in recs if r.judge == j], derived) for j in judges]
    _match_deductions(views)
    stars = [v.stars for v in views if v.stars is not None]
    return DimensionAudit(
        dimension=dim_id, name=dim.name, max=dim.max, panel_score=cons.scores.get(dim_id),
        star_gap=(max(stars) - min(stars)) if len(stars) >= 2 else 0, judges=views,
    )


def _judge_view(rubric: Rubric, cons: CaseConsensus, judge: str, dim_id: str, recs: list[CallRecord],
                derived: dict[str, DimensionScore]) -> JudgeView:
    ok = [r for r in recs if r.request_hash in derived]
    score = cons.judges.get(judge, {}).get(dim_id)
    return JudgeView(
        judge=judge,
        score=score.mean if score else None,
        stars=score.stars if score else None,
        runs_ok=len(ok), runs_failed=len(recs) - len(ok),
        deductions=[d for r in ok for d in deductions_of(rubric, r)],
        errors=[r.error or "failed" for r in recs if r.request_hash not in derived],
        comments=[r.judgment.comment for r in ok if r.judgment and r.judgment.comment],
    )


def deductions_of(rubric: Rubric, rec: CallRecord) -> list[AuditDeduction]:
    """The deductions and fixed penalties of one successful call, with the rubric's display names."""
    if rec.judgment is None:
        return []
    dim = rubric.dimension(rec.dimension)
    items = []
    for i, d in enumerate(rec.judgment.deductions):
        cat, typ = dim.find_type(d.type)
        items.append(AuditDeduction(
            id=f"{rec.request_hash}#d{i}", judge=rec.judge, run=rec.run, dimension=rec.dimension, kind="deduction",
            category_id=cat.id, category=cat.name, type_id=typ.id, type=typ.name,
            points=d.points, evidence=d.evidence, reason=d.reason))
    for i, p in enumerate(rec.judgment.fixed_penalties):
        pen = dim.penalties_by_id[p.id]
        items.append(AuditDeduction(
            id=f"{rec.request_hash}#p{i}", judge=rec.judge, run=rec.run, dimension=rec.dimension, kind="penalty",
            category_id=PENALTY_CATEGORY, category=PENALTY_CATEGORY_NAME, type_id=pen.id, type=pen.name,
            points=pen.points, evidence=p.evidence, reason=p.reason))
    return items


def _match_deductions(views: list[JudgeView]) -> None:
    """Set ``match`` and ``matched_by`` of every deduction against the other judges' (in place)."""
    answered = [v for v in views if v.runs_ok]
    types = {v.judge: {d.type_id for d in v.deductions} for v in answered}
    cats = {v.judge: {d.category_id for d in v.deductions} for v in answered}
    for v in answered:
        peers = [p.judge for p in answered if p.judge != v.judge]
        for d in v.deductions:
            same_type = [p for p in peers if d.type_id in types[p]]
            same_cat = [p for p in peers if d.category_id in cats[p]]
            if not peers:
                d.match, d.matched_by = "no_peer", []
            elif same_type:
                d.match, d.matched_by = "type", same_type
            elif same_cat:
                d.match, d.matched_by = "category", same_cat
            else:
                d.match, d.matched_by = "none", []


def _mismatches(rubric: Rubric, records: list[CallRecord], derived: dict[str, DimensionScore]) -> list[Mismatch]:
    out = []
    for r in records:
        s = derived.get(r.request_hash)
        if s is not None and s.claim_mismatch:
            out.append(Mismatch(judge=r.judge, run=r.run, dimension=r.dimension,
                                dimension_name=rubric.dimension(r.dimension).name,
                                claimed_score=s.claimed_score, claimed_stars=s.claimed_stars,
                                derived_score=s.score, derived_stars=s.stars))
    return out
