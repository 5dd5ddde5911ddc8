"""Which rules the ``rules`` judge runs for a rubric: one :class:`RubricRules` per rubric id.

The medical-record rules (``medical_record/``) register themselves when this package is imported. A
third-party package adds rules for its own rubric with one call::

    register_rules(RubricRules(rubric_id="my_rubric", version="1", check_case=check_case, emits=EMITS))

and makes them found by declaring that module in the ``consensus_eval.rules`` entry-point group
(see :mod:`consensus_eval.domain.plugins`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from consensus_eval._errors import InputError
from consensus_eval.domain.cases import Case
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.kinds import Deductions
from consensus_eval.domain.plugins import Registry
from consensus_eval.domain.rubric import Rubric

RULES_ENTRY_POINTS = "consensus_eval.rules"


@dataclass(frozen=True)
class RubricRules:
    """The rules of one rubric.

    - ``rubric_id``: the rubric they check (matched against ``Rubric.id``);
    - ``version``: enters the rules judge's version, so bump it when what the rules find changes;
    - ``check_case(case, rubric)``: one :class:`Judgment` per dimension of the rubric (pure,
      deterministic);
    - ``emits``: dimension -> category -> deduction types ``check_case`` can emit;
    - ``penalties``: dimension -> fixed penalty ids ``check_case`` can emit.
    """

    rubric_id: str
    version: str
    check_case: Callable[[Case, Rubric], dict[str, Judgment]]
    emits: Mapping[str, Mapping[str, tuple[str, ...]]]
    penalties: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def require_compatible(self, rubric: Rubric) -> None:
        """Raise :class:`InputError` unless ``rubric`` has every id these rules emit, naming what it lacks."""
        missing: list[str] = []
        for dim_id, cats in self.emits.items():
            found = rubric.dimensions_by_id.get(dim_id)
            dim = found if isinstance(found, Deductions) else None
            if dim is None:
                missing.append(f"dimension {dim_id}" + (f" of kind deductions (it is {found.kind})" if found else ""))
                continue
            for cat_id, types in cats.items():
                cat = dim.categories_by_id.get(cat_id)
                if cat is None:
                    missing.append(f"category {dim_id}.{cat_id}")
                    continue
                missing += [f"deduction type {dim_id}.{cat_id}.{t}" for t in types if t not in cat.types_by_id]
        for dim_id, pens in self.penalties.items():
            holder = rubric.dimensions_by_id.get(dim_id)
            if isinstance(holder, Deductions):
                missing += [f"fixed penalty {dim_id}.{p}" for p in pens if p not in holder.penalties_by_id]
        if missing:
            raise InputError(
                f"rubric {rubric.id!r} cannot be used with the rules judge, which implements the checks of the "
                f"{self.rubric_id!r} rubric; the rubric lacks: {', '.join(missing)}. "
                "Use LLM judges only for this rubric.")


def _no_rules(rubric_id: str, known: list[str]) -> InputError:
    return InputError(
        f"no rules are registered for rubric {rubric_id!r} (rules exist for: {', '.join(known) or 'none'}); a judge "
        "of `kind: rules` needs them. Use LLM judges only for this rubric, or install a package that "
        f"registers rules for it (entry-point group {RULES_ENTRY_POINTS}).")


_RULES: Registry[RubricRules] = Registry("rubric rules", RULES_ENTRY_POINTS, _no_rules)


def register_rules(rules: RubricRules) -> None:
    """Make ``rules`` the rules of rubric ``rules.rubric_id`` (replacing any registered before)."""
    _RULES.register(rules.rubric_id, rules)


def rules_for(rubric: Rubric) -> RubricRules:
    """The rules registered for ``rubric`` (by its id), loading the ``consensus_eval.rules`` plugins once
    if none are; :class:`InputError` if there are still none."""
    return _RULES.get(rubric.id)
