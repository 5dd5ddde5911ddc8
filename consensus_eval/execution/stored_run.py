"""The read model of a run: everything stored, read back in one pass (:func:`read_stored`).

Execution stores and reads; it does not interpret: the scores derived from the calls and the grounding of
their evidence are added by :func:`consensus_eval.analysis.derived.read_run` (what analysis, outputs,
reports and the Python API work from), and the cost totals by :mod:`consensus_eval.analysis.usage`. The calls
are plain read models (:class:`StoredCall`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from consensus_eval._errors import InputError, UsageError, format_validation_error
from consensus_eval._gc import gc_paused_call
from consensus_eval.domain.cases import Case, Turn
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.construct import all_fields, shared_copy
from consensus_eval.domain.grounding import Grounding
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.scoring import DimensionScore
from consensus_eval.execution.store import PlanOrderError, Store, StoredCall


@dataclass(frozen=True)
class StoredRun:
    """A run as stored: its context (rubric, config, cases), every call of the current plan, and (once
    analysis has derived them: :func:`consensus_eval.analysis.derived.read_run`) the score re-derived from each
    successful call's deductions (``scores``, by request hash; empty as read by :func:`read_stored`).

    ``records`` carry ``raw`` (the judge's reply as given) unless read with ``replies=False`` (a rebuild);
    ``scores`` may share one object between calls that score alike
    (:class:`~consensus_eval.domain.scoring.Deriver`).
    ``planned`` is the number of calls the plan has; ``len(records)`` of them are stored (ok or failed);
    ``missing`` counts, per case, the planned calls with nothing stored yet (an interrupted run).

    ``grounding``: where each deduction's evidence is in its case, by deduction id (``{request_hash}#d{i}``
    / ``#p{i}``; :func:`consensus_eval.analysis.derived.ground_all`). ``judged_scores``: under ``ungrounded:
    drop``, the score derived from every deduction the judge gave, for the calls that lost some (``scores``
    excludes them); empty otherwise. What the judge's own claim is compared with: :meth:`score_as_judged`.
    """

    rubric: Rubric
    config: EvalConfig
    cases: list[Case]
    invalid_lines: list[str]
    records: list[StoredCall]
    scores: dict[str, DimensionScore]
    planned: int
    missing: dict[str, int]
    grounding: dict[str, Grounding] = field(default_factory=dict)
    judged_scores: dict[str, DimensionScore] = field(default_factory=dict)
    #: planned calls not stored yet that are in a provider batch still running (``batch: true`` judges):
    #: rerunning ``score`` collects them; 0 when no batch is pending
    in_batches: int = 0

    def score_as_judged(self, request_hash: str) -> DimensionScore | None:
        """The score derived from every deduction the judge gave (before ``drop``), None for a failed call."""
        return self.judged_scores.get(request_hash) or self.scores.get(request_hash)

    @property
    def judges(self) -> list[str]:
        """Judge names, in panel order."""
        return [j.name for j in self.config.judges]

    @property
    def missing_calls(self) -> int:
        """Planned calls with nothing stored yet (0 for a finished run)."""
        return sum(self.missing.values())


#: a case's field left out of its dump while unset (a criteria rubric's per-case criteria)
_CASE_OPTIONAL = frozenset({"criteria"})


def _compact_case(case: Case) -> Case:
    """``case`` and its turns as objects sharing their classes' fields sets, the roles interned
    (:mod:`consensus_eval.domain.construct`; the same values)."""
    if isinstance(case.conversation, list):
        # a validated turn names both its fields (both required): built as shared_copy would build it, without
        # its generic steps (0.65 -> 0.34 s per 100,000 turns)
        fields, construct_turn, intern = all_fields(Turn), Turn.model_construct, sys.intern
        return shared_copy(case, defaults_given=_CASE_OPTIONAL,
                           conversation=[construct_turn(fields, role=intern(t.role), text=t.text)
                                         for t in case.conversation])
    return shared_copy(case, defaults_given=_CASE_OPTIONAL)


@gc_paused_call
def read_stored(store: Store, *, replies: bool = True) -> StoredRun:
    """Read a run back from its store (no judge is called), one read of each table, nothing derived: ``scores``,
    ``grounding`` and ``judged_scores`` empty (:func:`consensus_eval.analysis.derived.read_run` adds them).

    ``replies=False``: the records without the judges' raw replies (``raw`` None; what a rebuild reads:
    nothing after the judge layer uses them, and they are a large part of a run's memory).

    A run context this version no longer accepts (written by an older consensus-eval whose checks
    were looser) is an :class:`InputError` saying so, not a traceback.
    """
    context = _context(store)
    with _valid(store):
        cases = [_compact_case(Case.model_validate(c)) for c in store.cases()]
    records = store.calls(replies=replies)
    missing, in_batches = _missing(store)
    return StoredRun(cases=cases, records=records, scores={}, missing=missing, in_batches=in_batches, **context)


def read_stored_by_cases(store: Store, per_batch: int = 2000, *, replies: bool = True,
                         span: Span | None = None) -> Iterator[StoredRun]:
    """:func:`read_stored`, ``per_batch`` cases at a time: each run it yields holds the run's context (rubric,
    config, ``planned``, ``invalid_lines``), the next ``per_batch`` cases in the run's order and their calls
    in plan order, with their ``missing`` counts (at least one run, with no case for a run without any). What a
    reader whose memory must not grow with the run reads (``export --parquet``): each case's calls are read once,
    streamed out of the store (:meth:`~consensus_eval.execution.store.Store.calls_in_plan_order`).

    Only a plan that gives each case's calls one after the other can be read so: a plan that grows by rounds
    (adaptive runs, a cascade) is refused before anything is yielded, and any other plan whose case comes back
    after the next one's calls is refused when that call is met, after the runs before it were yielded; either
    way with :class:`~consensus_eval.execution.store.PlanOrderError`, whose caller reads the whole run
    (:func:`read_stored`).

    ``span``: only some consecutive cases (one of :func:`spans`), read as if they were the whole run."""
    if per_batch < 1:
        raise UsageError(f"per_batch must be at least 1, not {per_batch}")
    context = _context(store)
    if context["config"].grows:
        raise PlanOrderError(f"{store.path}: a plan that grows by rounds gives a case's calls in each round")
    missing, in_batches = _missing(store)
    span = span or Span()
    calls = (r for chunk in store.calls_in_plan_order(replies=replies, rows=span.rows) for r in chunk)
    nxt = next(calls, None)
    batch: list[Case] = []
    records: list[StoredCall] = []
    done: set[str] = set()   # the cases whose calls have all been read
    for body in store.iter_cases(*span.cases):
        with _valid(store):
            case = _compact_case(Case.model_validate(body))
        while nxt is not None and nxt.case_id == case.id:
            records.append(nxt)
            nxt = next(calls, None)
        done.add(case.id)
        batch.append(case)
        if len(batch) == per_batch:
            yield _part(context, batch, records, missing, in_batches)
            batch, records = [], []
        if nxt is not None and nxt.case_id in done:
            raise PlanOrderError(f"{store.path}: the calls of case {nxt.case_id!r} are not together in the plan")
    if nxt is not None:   # a call of a case that is not among the run's cases, or that came back after it
        raise PlanOrderError(f"{store.path}: the plan's calls of case {nxt.case_id!r} are not in the cases' order")
    if batch or not done:
        yield _part(context, batch, records, missing, in_batches)


@dataclass(frozen=True)
class Span:
    """Consecutive cases of a run, from the ``cases[0]``-th to before the ``cases[1]``-th (None: the last), and the
    plan's rows of their calls (:meth:`~consensus_eval.execution.store.Store.calls_in_plan_order`'s ``rows``);
    the default is the whole run."""

    cases: tuple[int, int | None] = (0, None)
    rows: tuple[int, int | None] = (0, None)


def spans(store: Store, ways: int, per_batch: int = 1) -> list[Span]:
    """The run cut into at most ``ways`` spans of about as many cases, each a multiple of ``per_batch`` cases but
    the last: what :func:`read_stored_by_cases` reads in ``ways`` processes. One span (the whole run) when
    ``ways`` is 1, when the run has too few cases, when a cut falls on a case with no planned call, or when the cuts'
    first calls are not in the cases' order (a plan in another order: its one span is refused as it is read). Each cut
    is one pass over the plan (:meth:`~consensus_eval.execution.store.Store.plan_row_of`)."""
    n = store.case_count()
    size = -(-n // max(ways, 1))
    size = -(-size // per_batch) * per_batch   # a whole number of parts: the same parts as in one process
    cuts = list(range(size, n, size))
    found = [store.plan_row_of(c) for c in cuts]
    rows = [r for r in found if r is not None]
    if not cuts or len(rows) < len(cuts) or rows != sorted(set(rows)):
        return [Span()]   # the cases' calls not in the cases' order: read as one span, which says so
    at = list(zip(cuts, rows, strict=True))
    starts: list[tuple[int, int]] = [(0, 0), *at]
    ends: list[tuple[int | None, int | None]] = [*at, (None, None)]
    return [Span(cases=(c0, c1), rows=(r0, r1)) for (c0, r0), (c1, r1) in zip(starts, ends, strict=True)]


def _part(context: dict[str, Any], cases: list[Case], records: list[StoredCall], missing: dict[str, int],
          in_batches: int) -> StoredRun:
    """One run of :func:`read_stored_by_cases`: ``cases`` and their ``records``; ``in_batches`` is the whole
    run's (a count of the run, not of its cases)."""
    gaps = {c.id: missing[c.id] for c in cases if c.id in missing}
    return StoredRun(cases=cases, records=records, scores={}, missing=gaps, in_batches=in_batches, **context)


def _context(store: Store) -> dict[str, Any]:
    """What every read of a run holds whatever its cases: rubric, config, ``invalid_lines``, ``planned``."""
    with _valid(store):
        rubric = Rubric.model_validate(store.get_meta("rubric"))
        config = EvalConfig.model_validate(store.get_meta("config"))
    return {"rubric": rubric, "config": config, "invalid_lines": store.get_meta("invalid_lines", []),
            "planned": store.plan_size()}


def _missing(store: Store) -> tuple[dict[str, int], int]:
    """Per case, the planned calls with nothing stored; and how many of those are in a provider batch."""
    missing: dict[str, int] = {}
    batched = store.batched_hashes()
    in_batches = 0
    for request_hash, case_id in store.unstored_plan():
        missing[case_id] = missing.get(case_id, 0) + 1
        in_batches += request_hash in batched
    return missing, in_batches


@contextmanager
def _valid(store: Store) -> Iterator[None]:
    """A run context this version no longer accepts is an :class:`InputError` saying so."""
    try:
        yield
    except ValidationError as e:
        raise InputError(f"{store.path}: the run recorded in this store is not valid for this version of "
                         f"consensus-eval (rerun `score` into a new folder):\n{format_validation_error(e)}") from None
