"""Scores re-derived from what a judge itemized: never taken from the judge's word.

By the dimension's kind (:mod:`consensus_eval.domain.rubric`)::

    deductions: score = max(0, max - sum_c min(sum of category c's deductions, cap_c) - fixed penalties)
    likert:     score = the level picked (one of the dimension's levels)
    criteria:   score = clip(sum of met criteria's points / sum of positive points, 0, 1)   (HealthBench)
    stars = the highest star whose threshold the score reaches ("at least"), else 1; none without ``stars``
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from consensus_eval._errors import UsageError
from consensus_eval.domain.cases import Case
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.rubric import Criterion, Dimension, Rubric
from consensus_eval.domain.stored import StoredJudgment

#: a judgment as a judge returns it (validated) or as the store hands it back (a plain read model)
AnyJudgment = Judgment | StoredJudgment


@dataclass(slots=True, frozen=True)
class CategoryScore:
    """What one category took off: ``deducted`` (sum of its deductions) and ``taken`` (capped)."""

    id: str
    name: str
    cap: float
    deducted: float
    taken: float
    n: int


@dataclass(slots=True, frozen=True)
class CriterionResult:
    """One criterion of a ``criteria`` dimension as scored: its points and whether the judge found it met."""

    id: str
    points: float
    met: bool


@dataclass(slots=True, frozen=True)
class DimensionScore:
    """A dimension's re-derived score, and whether the judge's own claim agrees with it: a plain read model,
    derived from checked values (the rubric's and a judgment's), never changed once made (a rebuild derives
    every stored call's score, and calls that score alike share one: :class:`Deriver`).

    ``stars`` is None for a dimension without star thresholds; ``criteria`` lists a ``criteria`` dimension's
    criteria as scored (empty for every other kind)."""

    dimension: str
    max: float
    score: float
    stars: int | None
    categories: tuple[CategoryScore, ...]
    penalties: float
    claimed_score: float | None = None
    claimed_stars: int | None = None
    criteria: tuple[CriterionResult, ...] = ()

    @property
    def claim_mismatch(self) -> bool:
        """True when the judge's claimed score or stars differ from the re-derived ones."""
        bad_score = self.claimed_score is not None and abs(self.claimed_score - self.score) > 1e-6
        bad_stars = self.claimed_stars is not None and self.claimed_stars != self.stars
        return bad_score or bad_stars


def derive(dimension: Dimension, judgment: AnyJudgment,
           criteria: Sequence[Criterion] | None = None) -> DimensionScore:
    """Re-derive a dimension's score from a judgment, by the dimension's kind (module docstring).

    ``criteria``: a ``criteria`` dimension's criteria for this case (:func:`criteria_of`); ignored by the
    other kinds. Raises ``ValueError`` for a judgment that does not fit the dimension (judgments are
    validated before they get here).
    """
    if dimension.kind == "likert":
        return _derive_likert(dimension, judgment)
    if dimension.kind == "criteria":
        return _derive_criteria(dimension, judgment, dimension.criteria or criteria or [])
    return _derive_deductions(dimension, judgment)


def criteria_of(dimension: Dimension, case_criteria: Sequence[Criterion] | None) -> list[Criterion]:
    """The criteria a ``criteria`` dimension judges a case by: the rubric's own, else the case's. Raises
    ``ValueError`` when there are none."""
    found = list(dimension.criteria or case_criteria or [])
    if not found:
        raise UsageError(f"dimension {dimension.id!r} has no criteria of its own and the case gives none "
                         f"(a case's \"criteria\": [{{\"id\", \"text\", \"points\"}}])")
    return found


def _derive_likert(dimension: Dimension, judgment: AnyJudgment) -> DimensionScore:
    if judgment.rating is None or judgment.rating not in dimension.levels:
        raise UsageError(f"dimension {dimension.id!r} takes a level among {sorted(dimension.levels)}, "
                         f"got {judgment.rating!r}")
    score = float(judgment.rating)
    return DimensionScore(dimension=dimension.id, max=float(dimension.max), score=score,
                          stars=dimension.stars_for(score), categories=(), penalties=0.0,
                          claimed_score=_opt_float(judgment.claimed_score), claimed_stars=judgment.claimed_stars)


def _derive_criteria(dimension: Dimension, judgment: AnyJudgment, criteria: Sequence[Criterion]) -> DimensionScore:
    if not criteria:
        criteria_of(dimension, None)  # raises, naming what is missing
    by_id = {c.id: c for c in criteria}
    met: dict[str, bool] = {}
    for v in judgment.verdicts:
        if v.id not in by_id:
            raise UsageError(f"dimension {dimension.id!r} has no criterion {v.id!r} for this case")
        if v.id in met:
            raise UsageError(f"criterion {v.id!r} is judged twice")
        met[v.id] = v.met
    missing = [c.id for c in criteria if c.id not in met]
    if missing:
        raise UsageError(f"criteria not judged: {', '.join(missing)}")
    positive = sum(c.points for c in criteria if c.points > 0)
    achieved = sum(c.points for c in criteria if met[c.id])
    score = min(1.0, max(0.0, achieved / positive))
    score = round(score, 12)
    return DimensionScore(dimension=dimension.id, max=1.0, score=score, stars=dimension.stars_for(score),
                          categories=(), penalties=0.0,
                          claimed_score=_opt_float(judgment.claimed_score), claimed_stars=judgment.claimed_stars,
                          criteria=tuple(CriterionResult(c.id, float(c.points), met[c.id]) for c in criteria))


def _derive_deductions(dimension: Dimension, judgment: AnyJudgment) -> DimensionScore:
    """Re-derive a deductions dimension's score from a judgment's deductions and fixed penalties.

    Each category takes off ``min(sum of its deductions, cap)``; each fixed penalty that applies is
    taken off once, outside the caps; the result is floored at 0. Raises ``ValueError`` for a deduction whose
    category or type the dimension does not have (judgments are validated before they get here).
    """
    per_cat: dict[str, list[float]] = {c.id: [] for c in dimension.categories}
    for d in judgment.deductions:
        try:
            cat, typ = dimension.find_type(d.type)
        except KeyError:
            raise UsageError(f"dimension {dimension.id!r} has no deduction type {d.type!r}") from None
        if cat.id != d.category:
            raise UsageError(f"deduction type {d.type!r} belongs to category {cat.id!r}, not {d.category!r}")
        if not typ.accepts(d.points):
            raise UsageError(f"{d.points} points is outside {typ.points_text()} for type {typ.id!r}")
        per_cat[cat.id].append(d.points)
    # floats for sums of no deduction too (the types the fields declare)
    cats = tuple(CategoryScore(c.id, c.name, float(c.cap), float(sum(per_cat[c.id])),
                               float(min(sum(per_cat[c.id]), c.cap)), len(per_cat[c.id]))
                 for c in dimension.categories)
    unknown = [p.id for p in judgment.fixed_penalties if p.id not in dimension.penalties_by_id]
    if unknown:
        raise UsageError(f"dimension {dimension.id!r} has no fixed penalty {unknown[0]!r}")
    # a fixed penalty applies once, however many times a judge lists it ("直接扣10分")
    penalties = sum(dimension.penalties_by_id[pid].points
                    for pid in dict.fromkeys(p.id for p in judgment.fixed_penalties))
    score = max(0.0, dimension.max - sum(c.taken for c in cats) - penalties)
    score = round(score, 9)
    if math.isclose(score, round(score)):
        score = float(round(score))
    return DimensionScore(dimension=dimension.id, max=float(dimension.max), score=score,
                          stars=dimension.stars_for(score), categories=cats, penalties=float(penalties),
                          claimed_score=_opt_float(judgment.claimed_score), claimed_stars=judgment.claimed_stars)


def _opt_float(x: float | None) -> float | None:
    return None if x is None else float(x)


class Deriver:
    """:func:`~consensus_eval.domain.scoring.derive` with a memory: judgments that give the same inputs
    to the derivation (dimension, each deduction's category, type and points in order, the fixed
    penalties' ids in order, the claimed score and stars) get the same :class:`DimensionScore` object,
    derived once; the category lines of the scores derived are shared the same way. Values are those
    ``derive`` gives, to the bit (floats are compared by their exact value and sign).

    The other kinds' inputs are part of the key too: a likert ``rating``; a criteria dimension's verdicts
    and the criteria they are scored by (the rubric's own, else the case's, from ``cases`` by the
    ``case_id`` a call gives)."""

    def __init__(self, rubric: Rubric, cases: Iterable[Case] = ()) -> None:
        self.rubric = rubric
        self._scores: dict[tuple[object, ...], DimensionScore] = {}
        self._categories: dict[tuple[object, ...], CategoryScore] = {}
        per_case = any(d.kind == "criteria" and not d.criteria for d in rubric.dimensions)
        #: the cases' own criteria, by case id (only when a criteria dimension reads them)
        self._criteria: dict[str, list[Criterion]] = (
            {c.id: c.criteria for c in cases if c.criteria is not None} if per_case else {})

    def __call__(self, dimension: str, judgment: AnyJudgment, case_id: str | None = None) -> DimensionScore:
        """``derive(rubric.dimension(dimension), judgment, case criteria)``, or the same score derived before."""
        key: tuple[object, ...] = (
            dimension, tuple((d.category, d.type, _exact(d.points)) for d in judgment.deductions),
            tuple(p.id for p in judgment.fixed_penalties), _exact(judgment.claimed_score), judgment.claimed_stars)
        criteria: list[Criterion] | None = None
        if judgment.rating is not None or judgment.verdicts:
            if judgment.verdicts and case_id is not None:
                criteria = self._criteria.get(case_id)
            key = (*key, judgment.rating, tuple((v.id, v.met) for v in judgment.verdicts),
                   tuple((c.id, _exact(c.points)) for c in criteria or ()))
        hit = self._scores.get(key)
        if hit is None:
            hit = derive(self.rubric.dimension(dimension), judgment, criteria)
            if hit.categories:
                share = self._categories.setdefault
                hit = replace(hit, categories=tuple(
                    share((c.id, c.name, _exact(c.cap), _exact(c.deducted), _exact(c.taken), c.n), c)
                    for c in hit.categories))
            self._scores[key] = hit
        return hit


def _exact(x: float | None) -> object:
    """A float as a key that tells apart what ``==`` does not (0.0 and -0.0); None as is."""
    return None if x is None else float(x).hex()
