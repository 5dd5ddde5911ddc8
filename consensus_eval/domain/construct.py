"""Pydantic models built from checked values, sharing one fields set per class: less memory for the
many small pydantic models a large run's rebuild still holds, through pydantic's public API only.

What is read back from the store is not built here: stored calls, judgments, scores, groundings and the audit's
rows are plain slotted dataclasses (:mod:`consensus_eval.domain.stored`,
:class:`~consensus_eval.execution.store.StoredCall`, :mod:`~consensus_eval.domain.scoring`,
:mod:`~consensus_eval.domain.grounding`, :mod:`~consensus_eval.analysis.audit`). What stays pydantic because it
is written out as JSON (the consensus of each case, the cases) is built here.

A pydantic model instance carries, beside its values, the set of the names of the fields that were given
(``model_fields_set``): a set of 6 names takes 728 bytes, one of 18 2,264, more than the values it describes.
``BaseModel.model_construct(_fields_set, **values)`` uses the set it is given as the instance's
``model_fields_set`` (pydantic's documented contract), so objects built here share their class's one set
(:func:`all_fields`): the same contents, so ``model_fields_set``, ``model_dump(exclude_unset=True)`` and
equality are unchanged. Only a set naming *every* field is ever shared: assigning a field then adds nothing to
it, so no object's set can change through another's. Nothing here writes a model's internals;
:func:`shared_copy` makes a new object instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from consensus_eval._errors import UsageError

M = TypeVar("M", bound=BaseModel)
D = TypeVar("D")

_ALL: dict[type[BaseModel], set[str]] = {}


def all_fields(cls: type[BaseModel]) -> set[str]:
    """The set of every field name of ``cls``, one object per class (never to be changed)."""
    shared = _ALL.get(cls)
    if shared is None:
        shared = _ALL[cls] = set(cls.model_fields)
    return shared


def construct(cls: type[M], **values: Any) -> M:
    """An instance of ``cls`` from checked values, every field given, without validation, with the class's
    shared fields set. Raises ``TypeError`` when a field is missing or unknown."""
    shared = _ALL.get(cls) or all_fields(cls)
    if len(values) != len(shared) or not shared.issuperset(values):
        raise UsageError(f"{cls.__name__}: construct() needs every field and only fields: "
                        f"missing {sorted(shared - set(values))}, unknown {sorted(set(values) - shared)}")
    return cls.model_construct(shared, **values)


def shared_copy(obj: M, *, defaults_given: frozenset[str] = frozenset(), **changes: Any) -> M:
    """``obj`` (with ``changes`` to some of its values) as an object sharing its class's fields set when it
    names every field (module docstring); ``obj`` itself when it already does and nothing changes, a copy
    keeping its own set when it does not name every field. ``defaults_given``: fields counted as given when
    they hold their defaults (fields a model leaves out of its dumps while at their defaults, so a stored
    dump never names them). Use the returned object."""
    cls = type(obj)
    shared = _ALL.get(cls) or all_fields(cls)
    own = obj.model_fields_set
    if own is shared and not changes:
        return obj
    values = dict(iter(obj))    # the (field, value) pairs (dict(obj) would look for obj.keys: pydantic's slow miss)
    values.update(changes)
    if defaults_given and not own.issuperset(defaults_given):
        fields = cls.model_fields
        own = own | {k for k in defaults_given if k in fields and values[k] == fields[k].get_default(
            call_default_factory=True)}
    full = len(own) == len(shared) and own == shared
    return cls.model_construct(shared if full else set(own), **values)


def slots_maker(cls: type[D]) -> Callable[..., D]:
    """A function making an instance of ``cls``, a slotted frozen dataclass, from the values of all its fields in
    their order (positional): the object ``cls(*values)`` makes, each slot set through its descriptor rather than
    by the generated ``__init__``'s ``object.__setattr__`` (x2.4 for the 19 fields of a stored call: a rebuild
    makes a read model of every call, deduction and grounding of a run). Generated once per class, as
    :mod:`dataclasses` generates ``__init__``.

    Args:
        cls: a dataclass with ``slots=True`` whose fields are all ``init`` fields and which has no ``__post_init__``
            (so that ``cls(*values)`` only sets the fields).

    Raises ``UsageError`` for another class."""
    fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
    names = [f.name for f in fields]
    if (not names or "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__")
            or not all(f.init for f in fields)):
        raise UsageError(f"{cls.__name__}: slots_maker() needs a slotted dataclass whose fields are all set by "
                         "__init__, without __post_init__")
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    namespace.update({f"_set_{n}": cls.__dict__[n].__set__ for n in names})
    source = (f"def make({', '.join(names)}):\n    o = _new(_cls)\n"
              + "".join(f"    _set_{n}(o, {n})\n" for n in names) + "    return o\n")
    exec(source, namespace)  # noqa: S102 - the class's own field names, as dataclasses does
    make: Callable[..., D] = namespace["make"]
    return make
