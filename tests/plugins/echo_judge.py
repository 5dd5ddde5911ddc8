"""A judge kind added from outside the package: one module, one registration (docs/api.md's example).

``kind: echo`` judges deduct nothing and claim full marks; ``penalty_type`` (optional) makes them
deduct one occurrence of that deduction type on every dimension that has it.
"""

from __future__ import annotations

from typing import Literal

from consensus_eval import CallOutcome, Deduction, JudgeConfig, Judgment, register_judge
from consensus_eval.domain.cases import Case
from consensus_eval.domain.kinds import Deductions
from consensus_eval.domain.rubric import Dimension, Rubric


class EchoConfig(JudgeConfig):
    kind: Literal["echo"] = "echo"
    penalty_type: str | None = None

    IDENTITY_FIELDS = ("kind", "penalty_type")


class EchoJudge:
    deterministic = True
    reads_prompt = False
    version = "echo-1"
    max_case_chars: int | None = None

    def __init__(self, config: EchoConfig, rubric: Rubric) -> None:
        self.config = config

    async def judge(self, case: Case, dimension: Dimension, messages: list[dict[str, str]],
                    run: int = 0) -> CallOutcome:
        deductions = []
        t = self.config.penalty_type
        types = {t.id for c in dimension.categories for t in c.types} if isinstance(dimension, Deductions) else set()
        if t is not None and t in types and isinstance(dimension, Deductions):
            cat, typ = dimension.find_type(t)
            deductions.append(Deduction(category=cat.id, type=typ.id, points=typ.low, evidence=case.record[:10]))
        return CallOutcome(status="ok", judgment=Judgment(dimension=dimension.id, deductions=deductions,
                                                          claimed_score=dimension.max), model="echo")

    async def check(self) -> tuple[bool, str]:
        return True, "echo"

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return 0

    def prices(self) -> tuple[float, float] | None:
        return 0.0, 0.0


register_judge(EchoConfig, EchoJudge)
