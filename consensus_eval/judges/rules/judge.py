"""The rules judge behind the :class:`~consensus_eval.judges.base.Judge` protocol: it runs the rules
registered for its rubric (``registry.py``) once per case and serves each dimension from that."""

from __future__ import annotations

import asyncio

from consensus_eval._errors import InputError
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import RulesJudgeConfig
from consensus_eval.domain.judgment import CallOutcome, Judgment
from consensus_eval.domain.rubric import Dimension, Rubric
from consensus_eval.judges.rules.registry import rules_for


class RulesJudge:
    """Deterministic, offline, free: runs every rules check once per case and serves each dimension."""

    deterministic = True
    reads_prompt = False
    #: the largest case the rules read (record + conversation, characters); docs/judges.md, ``max_case_chars``
    max_case_chars: int | None = 1_000_000

    def __init__(self, config: RulesJudgeConfig, rubric: Rubric) -> None:
        try:
            rules = rules_for(rubric)
            rules.require_compatible(rubric)
        except InputError as e:  # the rules belong to their rubric: say which judge of the config asks for them
            raise InputError(f"judge {config.name!r} (kind: rules) cannot score rubric {rubric.id!r}: {e} "
                             f"Remove judge {config.name!r} from the config's judges and score with LLM "
                             f"judges.") from None
        self.config = config
        self.rubric = rubric
        self.rules = rules
        self.version = f"rules-{rules.rubric_id}-{rules.version}"
        # one check per case, shared by its dimensions' calls (which may be in flight at once)
        self._cache: dict[str, asyncio.Task[dict[str, Judgment]]] = {}

    async def judge(self, case: Case, dimension: Dimension, messages: list[dict[str, str]],
                    run: int = 0) -> CallOutcome:
        task = self._cache.get(case.id)
        if task is None:
            # off the event loop: a long record must not stall the LLM judges or delay Ctrl-C
            check = asyncio.to_thread(self.rules.check_case, case, self.rubric)
            task = self._cache[case.id] = asyncio.create_task(check)
        judgment = (await task)[dimension.id]
        return CallOutcome(status="ok", judgment=judgment, raw=None, model="rules",
                           prompt_tokens=0, completion_tokens=0, cost=0.0)

    async def check(self) -> tuple[bool, str]:
        return True, "built-in, offline"

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return 0

    def prices(self) -> tuple[float, float] | None:
        return 0.0, 0.0
