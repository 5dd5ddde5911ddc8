"""Scores re-derived from a judgment's itemized deductions: never taken from the judge.

DESIGN.md, "Decisions on the seed 000 rubric"::

    score = max(0, max - sum_c min(sum of category c's deductions, cap_c) - fixed penalties)
    stars = the highest star whose threshold the score reaches ("at least"), else 1
"""

from __future__ import annotations

import math

from pydantic import BaseModel

from consensus_eval.domain.construct import all_fields
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.rubric import Dimension


class CategoryScore(BaseModel):
    """What one category took off: ``deducted`` (sum of its deductions) and ``taken`` (capped)."""

    id: str
    name: str
    cap: float
    deducted: float
    taken: float
    n: int


class DimensionScore(BaseModel):
    """A dimension's re-derived score, and whether the judge's own claim agrees with it."""

    dimension: str
    max: float
    score: float
    stars: int
    categories: list[CategoryScore]
    penalties: float
    claimed_score: float | None = None
    claimed_stars: int | None = None

    @property
    def claim_mismatch(self) -> bool:
        """True when the judge's claimed score or stars differ from the re-derived ones."""
        bad_score = self.claimed_score is not None and abs(self.claimed_score - self.score) > 1e-6
        bad_stars = self.claimed_stars is not None and self.claimed_stars != self.stars
        return bad_score or bad_stars


def derive(dimension: Dimension, judgment: Judgment) -> DimensionScore:
    """Re-derive a dimension's score from a judgment's deductions and fixed penalties.

    Each category takes off ``min(sum of its deductions, cap)``; each fixed penalty that applies is
    taken off once, outside the caps; the result is floored at 0. Raises ``ValueError`` for a deduction whose
    category or type the dimension does not have (judgments are validated before they get here).
    """
    per_cat: dict[str, list[float]] = {c.id: [] for c in dimension.categories}
    for d in judgment.deductions:
        try:
            cat, typ = dimension.find_type(d.type)
        except KeyError:
            raise ValueError(f"dimension {dimension.id!r} has no deduction type {d.type!r}") from None
        if cat.id != d.category:
            raise ValueError(f"deduction type {d.type!r} belongs to category {cat.id!r}, not {d.category!r}")
        if not typ.accepts(d.points):
            raise ValueError(f"{d.points} points is outside {typ.points_text()} for type {typ.id!r}")
        per_cat[cat.id].append(d.points)
    # built from checked values (the rubric's and a validated judgment's), with the types validation
    # would give them (floats for sums of no deduction too): no validation needed, a rebuild derives
    # every stored call's score
    cats = [
        CategoryScore.model_construct(all_fields(CategoryScore), id=c.id, name=c.name, cap=c.cap,
                                      deducted=float(sum(per_cat[c.id])), taken=float(min(sum(per_cat[c.id]), c.cap)),
                                      n=len(per_cat[c.id]))
        for c in dimension.categories
    ]
    unknown = [p.id for p in judgment.fixed_penalties if p.id not in dimension.penalties_by_id]
    if unknown:
        raise ValueError(f"dimension {dimension.id!r} has no fixed penalty {unknown[0]!r}")
    # a fixed penalty applies once, however many times a judge lists it ("直接扣10分")
    penalties = sum(dimension.penalties_by_id[pid].points
                    for pid in dict.fromkeys(p.id for p in judgment.fixed_penalties))
    score = max(0.0, dimension.max - sum(c.taken for c in cats) - penalties)
    score = round(score, 9)
    if math.isclose(score, round(score)):
        score = float(round(score))
    return DimensionScore.model_construct(
        all_fields(DimensionScore),
        dimension=dimension.id, max=float(dimension.max), score=score, stars=dimension.stars_for(score),
        categories=cats, penalties=float(penalties),
        claimed_score=None if judgment.claimed_score is None else float(judgment.claimed_score),
        claimed_stars=judgment.claimed_stars,
    )

