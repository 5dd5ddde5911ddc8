"""When a panel's verdict on a case is disputed: the one rule the consensus flags cases by, the audit's review
reasons follow and adaptive runs add runs by (``consensus.flag_spread`` / ``flag_spread_share``,
``flag_star_gap`` and the rubric kinds' own thresholds of the config). Every threshold is in the rubric's own
units:

- ``spread``: the judges' totals (of the judges who scored every dimension) further apart than
  :func:`spread_limit`: ``flag_spread`` points when the config gives them, else ``flag_spread_share`` (0.1)
  of the range of the rubric's total (10 points of 0-100, 3.6 of PDQI-9's 9-45, 0.1 of a criteria rubric's
  0-1);
- ``star_gap``: a dimension's stars (of each judge's mean score) ``flag_star_gap`` or more apart; only a
  dimension with star thresholds has stars;
- each dimension's kind's own flags (:meth:`~consensus_eval.domain.kinds.base.Dimension.flags`): a ``likert``
  dimension's ``level_gap`` (ratings ``flag_level_gap`` or more levels apart), a ``criteria`` dimension's
  ``split`` (the judges disagree on at least ``flag_split_share`` of its criteria, one at least).

A judge's claimed score differing from the re-derived one is a fact about the judge (judge quality), not
about the case: it never flags a case.

Two reviewers' own scores send a case to adjudication by the dimension's kind's rule
(:meth:`~consensus_eval.domain.kinds.base.Dimension.reviewers_apart`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from consensus_eval.domain.config import ConsensusConfig
from consensus_eval.domain.kinds.base import Dimension, Flag, JudgeScoreView, flag_rank

__all__ = ["Flag", "disagreement", "spread_limit"]


class _Rubric(Protocol):
    """What the rules read of a rubric (:class:`~consensus_eval.domain.rubric.Rubric`)."""

    @property
    def dimensions(self) -> Sequence[Dimension]: ...


def spread_limit(rubric: _Rubric, config: ConsensusConfig) -> float:
    """How far apart, in points of the rubric's total, the judges' totals may be before a case is flagged:
    ``flag_spread`` when the config gives it, else ``flag_spread_share`` of the range of the total (the sum
    over dimensions of weight x (max - lowest score))."""
    if config.flag_spread is not None:
        return config.flag_spread
    return config.flag_spread_share * sum(d.weight * (d.max - d.low) for d in rubric.dimensions)


def disagreement(rubric: _Rubric, totals: Sequence[float], stars: Mapping[str, Sequence[int]], config: ConsensusConfig,
                 judges: Mapping[str, Sequence[JudgeScoreView]] | None = None) -> list[Flag]:
    """The flags of a case (module docstring): ``totals`` of the judges who scored every dimension,
    ``stars`` per dimension (with stars) of each judge that scored it, ``judges`` per dimension each judge's
    score of it (its mean and criterion verdicts), which the dimension's kind reads for its own flags. Listed
    ``spread``, ``star_gap``, then the kinds' flags by code (in the order the kinds registered), each in
    rubric order."""
    flags = []
    limit = spread_limit(rubric, config)
    if len(totals) >= 2 and (spread := max(totals) - min(totals)) > limit:
        flags.append(Flag(code="spread", value=spread, limit=limit))
    for d, s in stars.items():
        if len(s) >= 2 and max(s) - min(s) >= config.flag_star_gap:
            flags.append(Flag(code="star_gap", value=max(s) - min(s), limit=config.flag_star_gap, dimension=d))
    own = [f for dim in rubric.dimensions if judges and dim.id in judges for f in dim.flags(judges[dim.id], config)]
    return flags + sorted(own, key=lambda f: flag_rank(f.code))
