"""Scores re-derived from what a judge itemized: never taken from the judge's word.

By the dimension's kind (each kind's :meth:`~consensus_eval.domain.kinds.base.Dimension.derive`)::

    deductions: score = max(0, max - sum_c min(sum of category c's deductions, cap_c) - fixed penalties)
    likert:     score = the level picked (one of the dimension's levels)
    criteria:   score = clip(sum of met criteria's points / sum of positive points, 0, 1)   (HealthBench)
    stars = the highest star whose threshold the score reaches ("at least"), else 1; none without ``stars``
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from consensus_eval.domain.cases import Case
from consensus_eval.domain.construct import slots_maker
from consensus_eval.domain.criterion import Criterion
from consensus_eval.domain.kinds.base import AnyJudgment as AnyJudgment, Dimension
from consensus_eval.domain.kinds.criteria import criteria_of as criteria_of
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.scores import (
    CategoryScore as CategoryScore,
    CriterionResult as CriterionResult,
    DimensionScore as DimensionScore,
)


def derive(dimension: Dimension, judgment: AnyJudgment,
           criteria: Sequence[Criterion] | None = None) -> DimensionScore:
    """Re-derive a dimension's score from a judgment, by the dimension's kind (module docstring;
    :meth:`~consensus_eval.domain.kinds.base.Dimension.derive`).

    ``criteria``: the case's own criteria, for a dimension that judges by them (:func:`criteria_of`); ignored by
    the other kinds. Raises ``ValueError`` for a judgment that does not fit the dimension (judgments are
    validated before they get here).
    """
    return dimension.derive(judgment, criteria)


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
        per_case = any(d.uses_case_criteria for d in rubric.dimensions)
        #: the cases' own criteria, by case id (only when a dimension judges by them)
        self._criteria: dict[str, list[Criterion]] = (
            {c.id: c.criteria for c in cases if c.criteria is not None} if per_case else {})

    def __call__(self, dimension: str, judgment: AnyJudgment, case_id: str | None = None) -> DimensionScore:
        """``derive(rubric.dimension(dimension), judgment, case criteria)``, or the same score derived before."""
        deductions, penalties = judgment.deductions, judgment.fixed_penalties   # (lists, not generators: per call)
        key: tuple[object, ...] = (
            dimension, tuple([(d.category, d.type, float(d.points).hex()) for d in deductions]) if deductions else (),
            tuple([p.id for p in penalties]) if penalties else (), _exact(judgment.claimed_score),
            judgment.claimed_stars)
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
                shared = tuple([share((c.id, c.name, _exact(c.cap), _exact(c.deducted), _exact(c.taken), c.n), c)
                                for c in hit.categories])
                if any(c is not mine for c, mine in zip(shared, hit.categories, strict=True)):
                    hit = _score(hit.dimension, hit.max, hit.score, hit.stars, shared, hit.penalties,
                                 hit.claimed_score, hit.claimed_stars, hit.criteria)   # replace(categories=shared)
            self._scores[key] = hit
        return hit


#: a score made from its fields' values in order, slot by slot (:func:`~consensus_eval.domain.construct.slots_maker`)
_score = slots_maker(DimensionScore)


def _exact(x: float | None) -> object:
    """A float as a key that tells apart what ``==`` does not (0.0 and -0.0); None as is."""
    return None if x is None else float(x).hex()
