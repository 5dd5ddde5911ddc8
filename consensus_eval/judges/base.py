"""What every judge is: something that turns one rendered prompt into a :class:`CallOutcome`."""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel

from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import JudgeConfig
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.rubric import Dimension


class CallOutcome(BaseModel):
    """The outcome of one judge call (all its attempts).

    ``status`` is ``ok`` with a validated ``judgment``, or ``failed`` with ``error`` saying why; a
    failed call is never scored. Token counts and cost cover every attempt (re-asks included).
    """

    status: Literal["ok", "failed"]
    judgment: Judgment | None = None
    raw: str | None = None
    error: str | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost: float | None = None
    attempts: int = 1


class Judge(Protocol):
    """A judge of the panel. ``version`` enters every request hash (bump it to invalidate)."""

    config: JudgeConfig
    version: str
    #: deterministic judges are run once per (case, dimension), whatever ``runs`` says
    deterministic: bool

    async def judge(self, case: Case, dimension: Dimension, messages: list[dict[str, str]], run: int = 0) -> CallOutcome:
        """Judge one dimension of one case (``run``: which repetition); never raises for a judge-side failure."""
        ...
