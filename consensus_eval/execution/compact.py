"""Less memory per stored call read back from the store.

:func:`compact_record` makes a call and its judgment, deductions and fixed penalties objects that share
their class's fields set (:mod:`consensus_eval.domain.construct`), and makes the short strings every call
repeats (case id, dimension, judge, model, status, category and type ids) one object each
(``sys.intern``) instead of one per call. The values and equality are those of the record given.
Measured: bench/README.md, "Post-processing at scale".
"""

from __future__ import annotations

import sys
from typing import Any, TypeVar

from pydantic import BaseModel

from consensus_eval.domain.construct import shared_copy
from consensus_eval.domain.judgment import Judgment

M = TypeVar("M", bound=BaseModel)

_INTERNED = ("case_id", "dimension", "judge", "model", "status", "error_kind")
#: a judgment's fields of the other dimension kinds, left out of its stored dump while empty
_KIND_FIELDS = frozenset({"rating", "evidence", "verdicts"})


def compact_record(rec: M) -> M:
    """A stored call (a :class:`~consensus_eval.execution.store.CallRecord`) as the same values in less
    memory (module docstring). Use the returned object."""
    changes = _interned(rec, _INTERNED)
    judgment = getattr(rec, "judgment", None)
    if isinstance(judgment, Judgment):
        changes["judgment"] = shared_copy(
            judgment, defaults_given=_KIND_FIELDS, **_interned(judgment, ("dimension",)),
            deductions=[shared_copy(d, **_interned(d, ("category", "type"))) for d in judgment.deductions],
            fixed_penalties=[shared_copy(p, **_interned(p, ("id",))) for p in judgment.fixed_penalties])
    return shared_copy(rec, **changes)


def _interned(obj: BaseModel, keys: tuple[str, ...]) -> dict[str, Any]:
    out = {}
    for k in keys:
        v = getattr(obj, k, None)
        if type(v) is str:
            out[k] = sys.intern(v)
    return out
