"""The rules judge behind the :class:`~consensus_eval.judges.base.Judge` protocol: it runs the rules
registered for its rubric (``registry.py``) once per case and serves each dimension from that."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from consensus_eval._errors import InputError
from consensus_eval._parallel import usable_cpus
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import RulesJudgeConfig
from consensus_eval.domain.judgment import CallOutcome, Judgment
from consensus_eval.domain.rubric import Dimension, Rubric
from consensus_eval.judges.rules.pool import POOL_FROM, CasePool
from consensus_eval.judges.rules.rubric_rules import rules_for


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
        # one check per case, shared by its dimensions' calls (which may be in flight at once), with the
        # dimensions not served yet: a case's entry goes once every dimension has had its judgment (a run of
        # 100,000 cases must not keep them all)
        self._cache: dict[str, tuple[asyncio.Task[dict[str, Judgment]], set[str]]] = {}
        #: the worker processes of a large run (:meth:`open`), None: cases are checked in threads
        self._pool: CasePool | None = None
        #: the fewest cases to check for which :meth:`open` starts worker processes
        self.pool_from = POOL_FROM
        #: how many worker processes :meth:`open` starts (1: none, the cases are checked in threads)
        self.processes = usable_cpus()

    def open(self, cases: Sequence[Case]) -> None:
        """The cases the runner will ask about, in order (repeats ignored): with :attr:`pool_from` or more of
        them and more than one core, they are checked in worker processes (:mod:`.pool`) until :meth:`close`."""
        distinct = list({c.id: c for c in cases}.values())
        if self._pool is None and self.processes > 1 and len(distinct) >= self.pool_from:
            self._pool = CasePool(self.rubric, distinct, self.processes)

    async def close(self) -> None:
        """End the worker processes of :meth:`open`, if it started any."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def judge(self, case: Case, dimension: Dimension, messages: list[dict[str, str]],
                    run: int = 0) -> CallOutcome:
        entry = self._cache.get(case.id)
        if entry is None:
            # off the event loop: a long record must not stall the LLM judges or delay Ctrl-C
            check = (self._pool.check(case) if self._pool is not None and self._pool.knows(case.id)
                     else asyncio.to_thread(self.rules.check_case, case, self.rubric))
            entry = self._cache[case.id] = (asyncio.create_task(check), {d.id for d in self.rubric.dimensions})
        task, unserved = entry
        try:
            judgment = (await task)[dimension.id]
        finally:
            unserved.discard(dimension.id)
            if not unserved and self._cache.get(case.id) is entry:
                del self._cache[case.id]
        return CallOutcome(status="ok", judgment=judgment, raw=None, model="rules",
                           prompt_tokens=0, completion_tokens=0, cost=0.0)

    async def check(self) -> tuple[bool, str]:
        return True, "built-in, offline"

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return 0

    def prices(self) -> tuple[float, float] | None:
        return 0.0, 0.0
