"""Rubric kinds: one module per kind behind one protocol (:mod:`~consensus_eval.domain.kinds.base`).

Importing this package registers the built-in kinds, ``deductions`` (the default), ``likert`` and ``criteria``, in
that order (a case's flags are listed by kind in the order the kinds registered); an installed package adds more
through the ``consensus_eval.rubric_kinds`` entry-point group (docs/kinds.md).
"""

from consensus_eval.domain.kinds.base import Dimension, kind_class, kind_names, of_kind, register_kind
from consensus_eval.domain.kinds.criteria import Criteria
from consensus_eval.domain.kinds.deductions import Deductions
from consensus_eval.domain.kinds.likert import Likert

register_kind(Deductions)
register_kind(Likert)
register_kind(Criteria)

__all__ = ["Criteria", "Deductions", "Dimension", "Likert", "kind_class", "kind_names", "of_kind", "register_kind"]
