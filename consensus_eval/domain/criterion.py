"""One criterion a record is judged by (HealthBench's shape): a ``criteria`` dimension's own, or a case's.

Its own module because two things read it that do not read each other: a case (its ``criteria``,
:mod:`consensus_eval.domain.cases`) and the ``criteria`` rubric kind (:mod:`consensus_eval.domain.kinds.criteria`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Criterion(BaseModel):
    """One criterion of a ``criteria`` dimension (HealthBench's shape): ``points`` > 0 for what a good answer
    does, < 0 for what it must not do (met means the fault is there)."""

    # a number of a rubric is finite: `points: .nan` or `cap: .inf` is refused (docs/limits.md), naming the field
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    id: Annotated[str, Field(min_length=1)]
    text: Annotated[str, Field(min_length=1)]
    points: float
    tags: list[str] = []

    @field_validator("points")
    @classmethod
    def _nonzero(cls, v: float) -> float:
        if v == 0:
            raise ValueError("a criterion's points must not be 0 (positive: to be met; negative: a fault)")
        return v
