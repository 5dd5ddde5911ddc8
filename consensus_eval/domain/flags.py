"""When a panel's verdict on a case is disputed: the one rule the consensus flags cases by and adaptive runs
add runs by (``consensus.flag_spread``, ``consensus.flag_star_gap`` of the config).

- ``spread``: the judges' totals (of the judges who scored every dimension) more than ``flag_spread``
  points apart;
- ``star_gap``: a dimension's stars (of each judge's mean score) ``flag_star_gap`` or more apart.

A judge's claimed score differing from the re-derived one is a fact about the judge (judge quality), not
about the case: it never flags a case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel

from consensus_eval.domain.config import ConsensusConfig


class Flag(BaseModel):
    """Why a case's panel verdict is disputed, as data a report renders in its language: ``code``
    ``spread`` (the judges' totals ``value`` points apart, over ``limit``) or ``star_gap`` (a dimension's
    stars ``value`` apart, at least ``limit``; ``dimension`` its id)."""

    code: Literal["spread", "star_gap"]
    value: float
    limit: float
    dimension: str | None = None

    @property
    def text(self) -> str:
        """The flag in English, as consensus.csv writes it (``CaseConsensus.flags``)."""
        if self.code == "spread":
            return f"totals spread {self.value:g} > {self.limit:g}"
        return f"{self.dimension} stars differ by {self.value:g}"


def disagreement(totals: Sequence[float], stars: Mapping[str, Sequence[int]], config: ConsensusConfig) -> list[Flag]:
    """The flags of a case (module docstring): ``totals`` of the judges who scored every dimension,
    ``stars`` per dimension of each judge that scored it."""
    flags = []
    if len(totals) >= 2 and (spread := max(totals) - min(totals)) > config.flag_spread:
        flags.append(Flag(code="spread", value=spread, limit=config.flag_spread))
    for d, s in stars.items():
        if len(s) >= 2 and max(s) - min(s) >= config.flag_star_gap:
            flags.append(Flag(code="star_gap", value=max(s) - min(s), limit=config.flag_star_gap, dimension=d))
    return flags
