"""When a panel's verdict on a case is disputed: the one rule the consensus flags cases by, the audit's review
reasons follow and adaptive runs add runs by (``consensus.flag_spread`` / ``flag_spread_share``,
``flag_star_gap``, ``flag_level_gap`` and ``flag_split_share`` of the config). Every threshold is in the
rubric's own units:

- ``spread``: the judges' totals (of the judges who scored every dimension) further apart than
  :func:`spread_limit`: ``flag_spread`` points when the config gives them, else ``flag_spread_share`` (0.1)
  of the range of the rubric's total (10 points of 0-100, 3.6 of PDQI-9's 9-45, 0.1 of a criteria rubric's
  0-1);
- ``star_gap``: a dimension's stars (of each judge's mean score) ``flag_star_gap`` or more apart; only a
  dimension with star thresholds has stars;
- ``level_gap``: a ``likert`` dimension's ratings (each judge's mean rating) ``flag_level_gap`` or more
  levels apart;
- ``split``: a ``criteria`` dimension whose criteria the judges disagree on (each judge's own verdict, its
  majority over its runs: :func:`split_criteria`), at least ``flag_split_share`` of them and one at least
  (:func:`splits_needed`; the default flags any). Any number of judges can disagree: three judges split
  2-1 on a criterion. The panel's verdict on a criterion is another thing: its majority, ``split`` only on
  a tie (:func:`majority`).

A judge's claimed score differing from the re-derived one is a fact about the judge (judge quality), not
about the case: it never flags a case.

Two reviewers' own scores send a case to adjudication by the same rule on a ``likert`` dimension (levels
``flag_level_gap`` or more apart), and more than :data:`ADJUDICATE_GAP` points apart on another
(:func:`reviewers_apart`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel

from consensus_eval.domain.config import ConsensusConfig
from consensus_eval.domain.rubric import Rubric

#: two reviewers' own scores of a dimension that is not ``likert`` further apart than this many points send the
#: case to adjudication (:func:`reviewers_apart`)
ADJUDICATE_GAP = 2.0

#: the panel's verdict on one criterion: met by more than half of the judges that answered, not met by
#: more than half, or ``split`` (a tie)
Majority = Literal["met", "not met", "split"]


class Flag(BaseModel):
    """Why a case's panel verdict is disputed, as data a report renders in its language: ``code``
    ``spread`` (the judges' totals ``value`` points apart, over ``limit``), ``star_gap`` (a dimension's
    stars ``value`` apart, at least ``limit``; ``dimension`` its id), ``level_gap`` (a likert dimension's
    ratings ``value`` levels apart, at least ``limit``) or ``split`` (the judges disagree on ``value``
    criteria of a criteria dimension, at least ``limit``: :func:`splits_needed`)."""

    code: Literal["spread", "star_gap", "level_gap", "split"]
    value: float
    limit: float
    dimension: str | None = None

    @property
    def text(self) -> str:
        """The flag in English, as consensus.csv writes it (``CaseConsensus.flags``)."""
        if self.code == "spread":
            return f"totals spread {self.value:g} > {self.limit:g}"
        if self.code == "level_gap":
            return f"{self.dimension} ratings differ by {self.value:g} levels"
        if self.code == "split":
            return f"{self.dimension}: judges split on {self.value:g} criteria"
        return f"{self.dimension} stars differ by {self.value:g}"


def majority(verdicts: Sequence[bool]) -> Majority | None:
    """The panel's verdict on one criterion from the verdicts of the judges that answered (each judge's own
    majority over its runs): ``met`` by more than half, ``not met`` by more than half, else ``split``;
    None when nobody answered."""
    if not verdicts:
        return None
    met = sum(verdicts)
    if 2 * met > len(verdicts):
        return "met"
    if 2 * met < len(verdicts):
        return "not met"
    return "split"


def spread_limit(rubric: Rubric, config: ConsensusConfig) -> float:
    """How far apart, in points of the rubric's total, the judges' totals may be before a case is flagged:
    ``flag_spread`` when the config gives it, else ``flag_spread_share`` of the range of the total (the sum
    over dimensions of weight x (max - lowest score))."""
    if config.flag_spread is not None:
        return config.flag_spread
    return config.flag_spread_share * sum(d.weight * (d.max - d.low) for d in rubric.dimensions)


def split_criteria(verdicts: Mapping[str, Sequence[bool]]) -> list[str]:
    """The criteria the judges disagree on, in order: ``verdicts`` is criterion id -> each judge's own verdict
    (its majority over its runs; a judge whose runs split evenly gives none); a criterion is split when its
    verdicts are not all the same."""
    return [cid for cid, v in verdicts.items() if len(set(v)) > 1]


def splits_needed(n_criteria: int, config: ConsensusConfig) -> int:
    """How many of a criteria dimension's ``n_criteria`` criteria the judges must disagree on for the case to be
    flagged: ``flag_split_share`` of them, rounded up, and one at least."""
    return max(1, math.ceil(config.flag_split_share * n_criteria - 1e-9))


def levels_apart(gap: float, config: ConsensusConfig) -> bool:
    """Whether two ratings of a ``likert`` dimension ``gap`` levels apart are a dispute: ``flag_level_gap`` or
    more levels (default 2)."""
    return gap >= config.flag_level_gap


def reviewers_apart(kind: str, gap: float, config: ConsensusConfig) -> bool:
    """Whether two reviewers' own scores of one dimension of ``kind``, ``gap`` apart, send the case to
    adjudication: on a ``likert`` dimension the panel's rule (:func:`levels_apart`), on another dimension more
    than :data:`ADJUDICATE_GAP` points."""
    return levels_apart(gap, config) if kind == "likert" else gap > ADJUDICATE_GAP


def disagreement(rubric: Rubric, totals: Sequence[float], stars: Mapping[str, Sequence[int]], config: ConsensusConfig,
                 ratings: Mapping[str, Sequence[float]] | None = None,
                 splits: Mapping[str, tuple[int, int]] | None = None) -> list[Flag]:
    """The flags of a case (module docstring): ``totals`` of the judges who scored every dimension,
    ``stars`` per dimension (with stars) of each judge that scored it, ``ratings`` per likert dimension of
    each judge that rated it, ``splits`` per criteria dimension: ``(criteria the judges disagree on, criteria
    with a verdict)`` (:func:`split_criteria`)."""
    flags = []
    limit = spread_limit(rubric, config)
    if len(totals) >= 2 and (spread := max(totals) - min(totals)) > limit:
        flags.append(Flag(code="spread", value=spread, limit=limit))
    for d, s in stars.items():
        if len(s) >= 2 and max(s) - min(s) >= config.flag_star_gap:
            flags.append(Flag(code="star_gap", value=max(s) - min(s), limit=config.flag_star_gap, dimension=d))
    for d, r in (ratings or {}).items():
        if len(r) >= 2 and levels_apart(max(r) - min(r), config):
            flags.append(Flag(code="level_gap", value=max(r) - min(r), limit=config.flag_level_gap, dimension=d))
    for d, (n, of) in (splits or {}).items():
        if n and n >= (need := splits_needed(of, config)):
            flags.append(Flag(code="split", value=n, limit=need, dimension=d))
    return flags
