"""Less memory per object for the millions of small pydantic models a large run's rebuild holds.

A pydantic model instance carries, beside its ``__dict__``, a set of the names of the fields that were
given (``__pydantic_fields_set__``): a set of 6 names takes 728 bytes, one of 18 (a stored call) 2,264,
more than the values it describes. A rebuild of 20,000 cases x 4 judges holds about four million such
objects (calls, judgments, deductions, scores, groundings, audit lines), nearly all with every field
given. :func:`share_fields_set` gives such an object the one set its class shares (:func:`all_fields`):
the same contents, so ``model_fields_set``, ``model_dump(exclude_unset=True)`` and equality are
unchanged. Only a set naming *every* field is ever shared: assigning a field (pydantic adds its name to
the set) then adds nothing, so no object's set can change through another's. Objects built from
checked values with every field: :func:`construct` (or ``model_construct(all_fields(cls), ...)``).

:func:`compact_record` does that for a call read back from the store and its judgment, and makes the
short strings every call repeats (case id, dimension, judge, model, status, category and type ids) one
object each (``sys.intern``) instead of one per call. Measured: bench/README.md, "Post-processing at
scale".
"""

from __future__ import annotations

import sys
from typing import Any, TypeVar

from pydantic import BaseModel

from consensus_eval.domain.judgment import Judgment

M = TypeVar("M", bound=BaseModel)

_ALL: dict[type[BaseModel], set[str]] = {}
_ORDER: dict[type[BaseModel], tuple[str, ...]] = {}


def all_fields(cls: type[BaseModel]) -> set[str]:
    """The set of every field name of ``cls``, one object per class (never to be changed)."""
    shared = _ALL.get(cls)
    if shared is None:
        shared = _ALL[cls] = set(cls.model_fields)
    return shared


def share_fields_set(obj: M) -> M:
    """``obj`` with its fields set replaced by its class's shared one (:func:`all_fields`) when it names
    every field (module docstring); unchanged otherwise. Returns ``obj``."""
    own = obj.__pydantic_fields_set__
    shared = _ALL.get(type(obj)) or all_fields(type(obj))
    if own is not shared and len(own) == len(shared) and own == shared:
        _set(obj, "__pydantic_fields_set__", shared)
    return obj


def construct(cls: type[M], **values: Any) -> M:
    """An instance of ``cls`` from checked values, every field given, without validation: what
    ``cls.model_construct(all_fields(cls), **values)`` makes (the same ``__dict__``, the class's shared
    fields set), without its per-field loop over aliases and defaults, for the hot paths of a rebuild
    (an audit makes one object per deduction of the run). Raises ``TypeError`` when a field is missing
    or unknown."""
    shared = _ALL.get(cls) or all_fields(cls)
    if len(values) != len(shared) or not shared.issuperset(values):
        raise TypeError(f"{cls.__name__}: construct() needs every field and only fields: "
                        f"missing {sorted(shared - set(values))}, unknown {sorted(set(values) - shared)}")
    order = _ORDER.get(cls)
    if order is None:
        order = _ORDER[cls] = tuple(cls.model_fields)
    obj = cls.__new__(cls)
    _set(obj, "__dict__", {name: values[name] for name in order})   # in field order, as pydantic's
    _set(obj, "__pydantic_fields_set__", shared)
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


_set = object.__setattr__


_INTERNED = ("case_id", "dimension", "judge", "model", "status", "error_kind")


def compact_record(rec: M) -> M:
    """A stored call (a :class:`~consensus_eval.execution.store.CallRecord`) made smaller in place
    (module docstring): shared fields sets for it, its judgment and every deduction and fixed penalty;
    its repeated short strings interned. Values and equality are unchanged. Returns ``rec``."""
    _intern(rec.__dict__, _INTERNED)
    share_fields_set(rec)
    judgment = rec.__dict__.get("judgment")
    if isinstance(judgment, Judgment):
        _intern(judgment.__dict__, ("dimension",))
        share_fields_set(judgment)
        for d in judgment.deductions:
            _intern(d.__dict__, ("category", "type"))
            share_fields_set(d)
        for p in judgment.fixed_penalties:
            _intern(p.__dict__, ("id",))
            share_fields_set(p)
    return rec


def _intern(values: dict[str, Any], keys: tuple[str, ...]) -> None:
    for k in keys:
        v = values.get(k)
        if type(v) is str:
            values[k] = sys.intern(v)
