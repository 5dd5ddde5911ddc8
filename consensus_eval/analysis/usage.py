"""What a run's calls cost, per judge: calls, attempts, tokens, USD and what the prompt cache saved.

Execution stores each call's attempts, tokens and cost (:class:`~consensus_eval.execution.store.StoredCall`);
the totals are read from them here (:func:`usage_by_judge`, :func:`run_usage`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel

from consensus_eval._errors import StateError
from consensus_eval.execution.pricing import saving_per_cached_token
from consensus_eval.execution.store import CallRecord, StoredCall
from consensus_eval.execution.stored_run import StoredRun


class JudgeUsage(BaseModel):
    """One judge's calls over a run: ``ok`` / ``failed`` calls, HTTP ``attempts`` (re-asks and retries
    included), tokens, and ``cost`` in USD (calls whose cost is unknown count 0 here).

    ``cached_tokens`` are the prompt tokens the provider served from its prompt cache (billed at its
    cache rate, included in ``cost`` that way); ``cache_hit_rate`` is their share of ``prompt_tokens``
    (None without prompt tokens); ``saved`` the USD those hits saved against the full input price
    (:func:`consensus_eval.execution.pricing.saving_per_cached_token`; None when the judge's prices
    are unknown).
    """

    ok: int = 0
    failed: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float = 0.0
    cache_hit_rate: float | None = None
    saved: float | None = None


def usage_by_judge(records: Iterable[StoredCall | CallRecord],
                   saving_per_cached_token: Mapping[str, float | None] | None = None) -> dict[str, JudgeUsage]:
    """Per judge (in the order judges first appear): calls ok / failed, attempts, tokens and cost, summed
    over every stored call in order; the cache hit rate, and the money saved from each judge's USD saved per
    cached token (by judge name)."""
    sums = UsageSums()
    sums.add(records)
    return sums.usage(saving_per_cached_token)


class UsageSums:
    """The running sums of :func:`usage_by_judge`, added to a batch of records at a time: batches added in the run's
    order give the same sums, so the same floats, as one pass over the run."""

    def __init__(self, *, keep_costs: bool = False) -> None:
        #: per judge, in the order judges first appear: ok, failed, attempts, prompt, cached, completion, reasoning
        #: tokens, cost
        self.sums: dict[str, list[int | float]] = {}
        #: ``keep_costs``: per judge, each call's cost in order, so that sums made elsewhere (another process's part
        #: of the run) continue these to the same float (:meth:`merge`)
        self.costs: dict[str, list[float]] | None = {} if keep_costs else None

    def add(self, records: Iterable[StoredCall | CallRecord]) -> None:
        """Add ``records`` (the next calls of the run, in its order) to the sums.

        Args:
            records: The calls, ok and failed.
        """
        sums, costs = self.sums, self.costs
        for r in records:
            t = sums.get(r.judge)
            if t is None:
                t = sums[r.judge] = [0, 0, 0, 0, 0, 0, 0, 0.0]
            t[0 if r.status == "ok" else 1] += 1
            t[2] += r.attempts
            t[3] += r.prompt_tokens or 0
            t[4] += r.cached_tokens or 0
            t[5] += r.completion_tokens or 0
            t[6] += r.reasoning_tokens or 0
            t[7] += r.cost or 0.0
            if costs is not None:
                costs.setdefault(r.judge, []).append(r.cost or 0.0)

    def merge(self, later: UsageSums) -> None:
        """Add the sums of ``later`` (the calls that come after these in the run, summed apart with ``keep_costs``):
        counts added, costs added call by call, as one pass over both would have added them.

        Args:
            later: The sums of the next calls of the run.
        """
        if later.costs is None:
            raise StateError("UsageSums.merge: the later sums must keep their calls' costs (keep_costs=True)")
        for name, theirs in later.sums.items():
            t = self.sums.setdefault(name, [0, 0, 0, 0, 0, 0, 0, 0.0])
            for k in range(7):
                t[k] += theirs[k]
            cost = t[7]
            for c in later.costs.get(name, ()):
                cost += c
            t[7] = cost
            if self.costs is not None:
                self.costs.setdefault(name, []).extend(later.costs.get(name, ()))

    def usage(self, saving_per_cached_token: Mapping[str, float | None] | None = None) -> dict[str, JudgeUsage]:
        """Per judge, what the calls added so far used (:func:`usage_by_judge`).

        Args:
            saving_per_cached_token: Each judge's USD saved per cached token, by judge name.
        """
        rates = saving_per_cached_token or {}
        out: dict[str, JudgeUsage] = {}
        for name, (ok, failed, attempts, prompt, cached, completion, reasoning, cost) in self.sums.items():
            rate = rates.get(name)
            # sums of checked values: built without validation, as the running totals were
            out[name] = JudgeUsage.model_construct(
                ok=ok, failed=failed, attempts=attempts, prompt_tokens=prompt, cached_tokens=cached,
                completion_tokens=completion, reasoning_tokens=reasoning, cost=cost,
                cache_hit_rate=cached / prompt if prompt else None, saved=None if rate is None else cached * rate)
        return out


def run_usage(run: StoredRun) -> dict[str, JudgeUsage]:
    """Per judge of a stored run: calls, attempts, tokens, cost and cache savings (:func:`usage_by_judge`, each
    judge's saving per cached token from its config)."""
    return usage_by_judge(run.records, {j.name: saving_per_cached_token(j) for j in run.config.judges})
