"""The read model of a run: everything stored, read back in one pass (:func:`read_stored`).

Execution stores and reads; it does not interpret: the scores derived from the calls and the grounding of
their evidence are added by :func:`consensus_eval.analysis.derived.read_run` (what analysis, outputs,
reports and the Python API work from), and the cost totals by :mod:`consensus_eval.analysis.usage`. The calls
are plain read models (:class:`StoredCall`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from consensus_eval._errors import InputError, format_validation_error
from consensus_eval._gc import gc_paused_call
from consensus_eval.domain.cases import Case, Turn
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.construct import all_fields, shared_copy
from consensus_eval.domain.grounding import Grounding
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.scoring import DimensionScore
from consensus_eval.execution.store import Store, StoredCall


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
        return shared_copy(case, defaults_given=_CASE_OPTIONAL,
                           conversation=[shared_copy(t, role=sys.intern(t.role)) for t in case.conversation])
    return shared_copy(case, defaults_given=_CASE_OPTIONAL)


_TURN_KEYS = frozenset(("role", "text"))
_PLAIN_CASE_KEYS = frozenset(("id", "conversation", "record", "important", "system", "source", "meta"))


def _opt_text(v: Any, most: int) -> bool:
    return v is None or (type(v) is str and 0 < len(v) <= most)


def _plain_case(d: Any) -> Case | None:
    """The case a stored case dict (``Case.model_dump()`` as the store wrote it) validates to, built without
    validation, or None when ``d`` is not such a plain dict (then :func:`_stored_case` validates it).

    It is built only when every check :class:`~consensus_eval.domain.cases.Case` makes is seen to pass, on values
    that validation keeps as they are: every field given, exact ``str``/``bool``/``dict``/``list`` types, a
    printable non-blank id (``str.isprintable``: no control character or line break), a non-blank record, a
    non-empty conversation of ``{role, text}`` turns with a role, ``system``/``source`` None or of 1-200/1-500
    characters, no ``criteria`` (a case with criteria is validated). The result equals
    ``_compact_case(Case.model_validate(d))``: the same values and fields sets, roles interned
    (tests/test_stored.py compares the two)."""
    if type(d) is not dict or d.keys() != _PLAIN_CASE_KEYS:
        return None
    cid, conv, record, meta = d["id"], d["conversation"], d["record"], d["meta"]
    if (type(cid) is not str or not cid.isprintable() or not cid.strip() or type(record) is not str
            or not record.strip() or type(d["important"]) is not bool or type(meta) is not dict
            or not _opt_text(d["system"], 200) or not _opt_text(d["source"], 500)):
        return None
    if type(conv) is str:
        if not conv.strip():
            return None
    elif type(conv) is list and conv:
        turns = []
        shared_turn = _TURN_FIELDS
        for t in conv:
            if type(t) is not dict or t.keys() != _TURN_KEYS:
                return None
            role, text = t["role"], t["text"]
            if type(role) is not str or not role or type(text) is not str:
                return None
            turns.append(Turn.model_construct(shared_turn, role=sys.intern(role), text=text))
        conv = turns
    else:
        return None
    if not all(type(k) is str for k in meta):
        return None
    return Case.model_construct(_CASE_FIELDS, id=cid, conversation=conv, record=record, important=d["important"],
                                system=d["system"], source=d["source"], meta=meta, criteria=None)


def _stored_case(d: Any) -> Case:
    """A case of the store's ``cases`` (:func:`_plain_case` when it applies, else validated and compacted)."""
    return _plain_case(d) or _compact_case(Case.model_validate(d))


_CASE_FIELDS = all_fields(Case)
_TURN_FIELDS = all_fields(Turn)


@gc_paused_call
def read_stored(store: Store, *, replies: bool = True) -> StoredRun:
    """Read a run back from its store (no judge is called), one read of each table, nothing derived: ``scores``,
    ``grounding`` and ``judged_scores`` empty (:func:`consensus_eval.analysis.derived.read_run` adds them).

    ``replies=False``: the records without the judges' raw replies (``raw`` None; what a rebuild reads:
    nothing after the judge layer uses them, and they are a large part of a run's memory).

    A run context this version no longer accepts (written by an older consensus-eval whose checks
    were looser) is an :class:`InputError` saying so, not a traceback.
    """
    try:
        rubric = Rubric.model_validate(store.get_meta("rubric"))
        config = EvalConfig.model_validate(store.get_meta("config"))
        cases = [_stored_case(c) for c in store.get_meta("cases", [])]
    except ValidationError as e:
        raise InputError(f"{store.path}: the run recorded in this store is not valid for this version of "
                         f"consensus-eval (rerun `score` into a new folder):\n{format_validation_error(e)}") from None
    records = store.calls(replies=replies)
    missing: dict[str, int] = {}
    batched = store.batched_hashes()
    in_batches = 0
    for request_hash, case_id in store.unstored_plan():
        missing[case_id] = missing.get(case_id, 0) + 1
        in_batches += request_hash in batched
    return StoredRun(rubric=rubric, config=config, cases=cases, invalid_lines=store.get_meta("invalid_lines", []),
                     records=records, scores={}, planned=store.plan_size(), missing=missing, in_batches=in_batches)
