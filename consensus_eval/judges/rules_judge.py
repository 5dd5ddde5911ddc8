"""The rules judge behind the :class:`Judge` interface (the checks live in ``rules.py``)."""

from __future__ import annotations

from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import RulesJudgeConfig
from consensus_eval.judges import rules
from consensus_eval.domain.judgment import CallOutcome
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.rubric import Dimension, Rubric


class RulesJudge:
    """Deterministic, offline, free: runs every rules check once per case and serves each dimension."""

    deterministic = True
    reads_prompt = False

    def __init__(self, config: RulesJudgeConfig, rubric: Rubric) -> None:
        rules.require_compatible(rubric)
        self.config = config
        self.rubric = rubric
        self.version = f"rules-{rules.RULES_VERSION}"
        self._cache: dict[str, dict[str, Judgment]] = {}

    async def judge(self, case: Case, dimension: Dimension, messages: list[dict[str, str]], run: int = 0) -> CallOutcome:
        if case.id not in self._cache:
            self._cache[case.id] = rules.check_case(case, self.rubric)
        judgment = self._cache[case.id][dimension.id]
        return CallOutcome(status="ok", judgment=judgment, raw=None, model="rules",
                           prompt_tokens=0, completion_tokens=0, cost=0.0)

    async def check(self) -> tuple[bool, str]:
        return True, "built-in, offline"

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return 0

    def prices(self) -> tuple[float, float] | None:
        return 0.0, 0.0
