"""What every judge is: something that turns one case and dimension into a :class:`CallOutcome`."""

from __future__ import annotations

from typing import Protocol

from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import JudgeConfig
from consensus_eval.domain.rubric import Dimension

from consensus_eval.domain.judgment import CallOutcome

__all__ = ["CallOutcome", "Judge"]
class Judge(Protocol):
    """A judge of the panel. ``version`` enters every request hash (bump it to invalidate)."""

    config: JudgeConfig
    version: str
    #: deterministic judges are run once per (case, dimension), whatever ``runs`` says
    deterministic: bool

    async def judge(self, case: Case, dimension: Dimension, messages: list[dict[str, str]], run: int = 0) -> CallOutcome:
        """Judge one dimension of one case (``run``: which repetition); never raises for a judge-side failure."""
        ...
