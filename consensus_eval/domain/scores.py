"""A dimension's score as derived from a judgment: plain read models (:mod:`consensus_eval.domain.scoring` derives
them, each rubric kind by its own rule: :meth:`~consensus_eval.domain.kinds.base.Dimension.derive`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class CategoryScore:
    """What one category of a ``deductions`` dimension took off: ``deducted`` (sum of its deductions) and
    ``taken`` (capped)."""

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
    every stored call's score, and calls that score alike share one: :class:`~consensus_eval.domain.scoring.Deriver`).

    ``stars`` is None for a dimension without star thresholds; ``categories`` lists a ``deductions`` dimension's
    categories, ``criteria`` a ``criteria`` dimension's criteria as scored (empty for every other kind)."""

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
