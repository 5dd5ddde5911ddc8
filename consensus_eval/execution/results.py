"""The read model of a run: everything stored, read back in one pass, every score derived once.

:func:`read_run` is the only place results are loaded from a store; analysis, outputs, reports and
the Python API all work from the :class:`StoredRun` it returns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from pydantic import BaseModel, ValidationError

from consensus_eval._errors import InputError, format_validation_error
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.scoring import DimensionScore, derive
from consensus_eval.execution.store import CallRecord, Store


def derive_all(rubric: Rubric, records: Iterable[CallRecord]) -> dict[str, DimensionScore]:
    """Re-derived score of every ``ok`` record, by request hash (failed calls have none)."""
    return {r.request_hash: derive(rubric.dimension(r.dimension), r.judgment)
            for r in records if r.status == "ok" and r.judgment is not None}


class JudgeUsage(BaseModel):
    """One judge's calls over a run: ``ok`` / ``failed`` calls, HTTP ``attempts`` (re-asks and retries
    included), tokens, and ``cost`` in USD (calls whose cost is unknown count 0 here)."""

    ok: int = 0
    failed: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float = 0.0


def usage_by_judge(records: Iterable[CallRecord]) -> dict[str, JudgeUsage]:
    """Per judge: calls ok / failed, attempts, tokens and cost, summed over every stored call."""
    totals: dict[str, JudgeUsage] = {}
    for r in records:
        t = totals.setdefault(r.judge, JudgeUsage())
        if r.status == "ok":
            t.ok += 1
        else:
            t.failed += 1
        t.attempts += r.attempts
        t.prompt_tokens += r.prompt_tokens or 0
        t.cached_tokens += r.cached_tokens or 0
        t.completion_tokens += r.completion_tokens or 0
        t.reasoning_tokens += r.reasoning_tokens or 0
        t.cost += r.cost or 0.0
    return totals


@dataclass(frozen=True)
class StoredRun:
    """A run as stored: its context (rubric, config, cases), every call of the current plan, and the
    score re-derived from each successful call's deductions (``scores``, by request hash).

    ``planned`` is the number of calls the plan has; ``len(records)`` of them are stored (ok or failed);
    ``missing`` counts, per case, the planned calls with nothing stored yet (an interrupted run).
    """

    rubric: Rubric
    config: EvalConfig
    cases: list[Case]
    invalid_lines: list[str]
    records: list[CallRecord]
    scores: dict[str, DimensionScore]
    planned: int
    missing: dict[str, int]

    @property
    def judges(self) -> list[str]:
        """Judge names, in panel order."""
        return [j.name for j in self.config.judges]

    @property
    def missing_calls(self) -> int:
        """Planned calls with nothing stored yet (0 for a finished run)."""
        return sum(self.missing.values())

    @cached_property
    def usage(self) -> dict[str, JudgeUsage]:
        """Per judge: calls, attempts, tokens and cost (:func:`usage_by_judge`)."""
        return usage_by_judge(self.records)


def read_run(store: Store) -> StoredRun:
    """Read a run back from its store (no judge is called): one read of each table, one derivation.

    A run context this version no longer accepts (written by an older consensus-eval whose checks
    were looser) is an :class:`InputError` saying so, not a traceback.
    """
    try:
        rubric = Rubric.model_validate(store.get_meta("rubric"))
        config = EvalConfig.model_validate(store.get_meta("config"))
        cases = [Case.model_validate(c) for c in store.get_meta("cases", [])]
    except ValidationError as e:
        raise InputError(f"{store.path}: the run recorded in this store is not valid for this version of "
                         f"consensus-eval (rerun `score` into a new folder):\n{format_validation_error(e)}") from None
    records = store.calls()
    stored = {r.request_hash for r in records}
    plan = store.plan()
    missing: dict[str, int] = {}
    for p in plan:
        if p.request_hash not in stored:
            missing[p.case_id] = missing.get(p.case_id, 0) + 1
    return StoredRun(rubric=rubric, config=config, cases=cases, invalid_lines=store.get_meta("invalid_lines", []),
                     records=records, scores=derive_all(rubric, records), planned=len(plan), missing=missing)
