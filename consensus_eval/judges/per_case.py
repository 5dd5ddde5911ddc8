"""One call per case (``call: per_case``): the dimension calls of one (case, run) answered by one request.

Execution stays per dimension: the plan, the request hashes, the store, resumption and the reports see
one call per (case, dimension, judge, run) as always. A judge in ``per_case`` mode coalesces them:

- the first dimension of a (case, run) to be asked starts the whole-case request (an asyncio task kept
  under the key ``(case id, run)``); the other dimensions of that (case, run) await the same task;
- each dimension then takes its slice (:func:`split`): its part of the reply as its judgment, and its
  share of the request's attempts, tokens and cost; a failed request fails every dimension with the
  same reason and kind;
- the entry is freed once every dimension expected for the key has taken its slice.

Which dimensions are expected: the runner says so before it starts (:meth:`CaseCalls.expect`, from the
calls not yet stored: after an interruption only the missing dimensions of a case are asked, so the
request's tokens and cost go to them alone); without that, every dimension of the rubric.

Shares. Integers (attempts, prompt, cached, completion and reasoning tokens) are divided evenly, the
remainder on the first expected dimension in rubric order, so the records of a request sum exactly to
it; the cost likewise, ``cost / n`` each and the rest (``cost - (n - 1) x cost / n``) on the first, so
the sum equals the cost to floating-point rounding (a few units in the last place). An unknown cost
(None) stays None on every dimension.

Cancellation. A dimension's waiter that is cancelled (the run was stopped) stops waiting; when no
dimension waits any more, the request itself is cancelled and its entry dropped, so a resumed run asks
again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from pydantic import Field

from consensus_eval.domain.cases import Case
from consensus_eval.domain.judgment import CallOutcome, Judgment
from consensus_eval.domain.rubric import Dimension, Rubric

#: the response-model key of the whole case (beside the dimension ids)
CASE = "*"

#: the request of one (case, run): ``(case, the rendered whole-case messages, run)`` -> its outcome
AskCase = Callable[[Case, list[dict[str, str]], int], Awaitable[CallOutcome]]


class CaseOutcome(CallOutcome):
    """The outcome of one whole-case request: a :class:`CallOutcome` (status, error, the request's
    attempts, tokens and cost) with, when ``ok``, the judgment of every dimension by its id."""

    judgments: dict[str, Judgment] = Field(default_factory=dict)


def split(outcome: CallOutcome, dimension: str, among: list[str]) -> CallOutcome:
    """The slice of a whole-case ``outcome`` that ``dimension`` records, when the request is shared by
    the dimensions ``among`` (in rubric order; the first carries the remainders: see the module).

    ``ok``: the dimension's judgment from the reply (a dimension not in the reply's judgments fails as
    ``invalid_reply``, which a validated reply never does). ``failed``: the request's error and kind."""
    n = len(among)
    first = among and dimension == among[0]
    mine = dimension in among

    def share(total: int | None) -> int | None:
        if total is None:
            return None
        if not mine:
            return 0
        q, r = divmod(total, n)
        return q + r if first else q

    cost: float | None = None
    if outcome.cost is not None:
        each = outcome.cost / n if mine else 0.0
        cost = outcome.cost - each * (n - 1) if first else each
    status = outcome.status
    judgment: Judgment | None = None
    error, kind = outcome.error, outcome.error_kind
    if status == "ok":
        judgments = outcome.judgments if isinstance(outcome, CaseOutcome) else {}
        judgment = judgments.get(dimension)
        if judgment is None:
            status, kind, error = "failed", "invalid_reply", f"the reply has no part for dimension {dimension!r}"
    return CallOutcome(
        status=status, judgment=judgment, raw=outcome.raw, error=error, error_kind=kind, model=outcome.model,
        prompt_tokens=share(outcome.prompt_tokens), cached_tokens=share(outcome.cached_tokens),
        completion_tokens=share(outcome.completion_tokens), reasoning_tokens=share(outcome.reasoning_tokens),
        cost=cost, attempts=share(outcome.attempts) or 0,
    )


@dataclass
class _Entry:
    task: asyncio.Task[CallOutcome]
    #: the dimensions that share the request (rubric order)
    among: list[str]
    taken: set[str] = field(default_factory=set)
    waiting: int = 0


class CaseCalls:
    """The whole-case requests of one judge in flight, keyed by ``(case id, run)`` (see the module)."""

    def __init__(self, rubric: Rubric, ask: AskCase) -> None:
        self.rubric = rubric
        self._ask = ask
        self._entries: dict[tuple[str, int], _Entry] = {}
        self._expected: dict[tuple[str, int], set[str]] = {}

    def expect(self, calls: Iterable[tuple[str, int, str]]) -> None:
        """The dimension calls about to be made, as ``(case id, run, dimension)``: each (case, run)'s
        request is shared by these dimensions only (replacing what an earlier round said of the key)."""
        fresh: dict[tuple[str, int], set[str]] = {}
        for case_id, run, dimension in calls:
            fresh.setdefault((case_id, run), set()).add(dimension)
        self._expected.update(fresh)

    def pending(self) -> int:
        """Requests started or awaited and not yet taken by every dimension (0 after a complete run)."""
        return len(self._entries)

    async def take(self, case: Case, dimension: Dimension, messages: list[dict[str, str]], run: int) -> CallOutcome:
        """``dimension``'s slice of the (case, run)'s request, starting it if no dimension has."""
        key = (case.id, run)
        entry = self._entries.get(key)
        if entry is None:
            expected = self._expected.get(key)
            among = [d.id for d in self.rubric.dimensions if expected is None or d.id in expected]
            task = asyncio.get_running_loop().create_task(self._ask_safely(case, messages, run))
            entry = self._entries[key] = _Entry(task, among)
        entry.waiting += 1
        try:
            outcome = await asyncio.shield(entry.task)
        except asyncio.CancelledError:
            entry.waiting -= 1
            if entry.waiting == 0 and not entry.task.done():
                entry.task.cancel()
                self._drop(key, entry)
            raise
        entry.waiting -= 1
        entry.taken.add(dimension.id)
        if entry.taken.issuperset(entry.among):
            self._drop(key, entry)
        return split(outcome, dimension.id, entry.among)

    async def _ask_safely(self, case: Case, messages: list[dict[str, str]], run: int) -> CallOutcome:
        try:
            return await self._ask(case, messages, run)
        except Exception as e:  # noqa: BLE001 - a bug fails every dimension of the request, not the run
            return CallOutcome(status="failed", error_kind="local", error=f"{type(e).__name__}: {e}")

    def _drop(self, key: tuple[str, int], entry: _Entry) -> None:
        if self._entries.get(key) is entry:
            del self._entries[key]
            self._expected.pop(key, None)
