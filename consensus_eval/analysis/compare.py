"""Two runs on the same cases, or two systems of one run, compared: did the change move the scores, and
where.

``compare RUN_A RUN_B`` pairs the cases of two output folders by case id (two prompt versions, two
judge models, two generator versions scored on the same cases); ``compare RUN --systems A B`` pairs the
records two systems wrote of the same source conversation (:func:`~consensus_eval.analysis.systems.source_key`).
Every change is ``B - A``: positive means B scored higher.

- per dimension and total (:class:`KeyChange`): the mean paired difference of the panel's scores with its
  95% t interval and a two-sided p value: the exact sign-flip test up to 12 pairs, the paired t test
  above (:func:`~consensus_eval.analysis.systems.paired_test`; the test is named in ``test``);
- the cases that moved most (:class:`CaseMove`), by the absolute change of their total;
- per deduction category (:class:`CategoryChange`): the points taken off and the deductions listed per
  case (each the mean over the judges' runs), in A and in B: which kinds of errors B gained or lost.

:func:`parse_conditions` and :func:`failed_conditions` turn ``--fail-if "total < -1.0"`` into a CI gate:
a condition names a key (``total`` or a dimension id), optionally the bound of its interval (``total.high``:
the upper bound, so ``total.high < 0`` fails only a regression the interval is sure of), an operator
(``<``, ``<=``, ``>``, ``>=``) and a number in points.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from consensus_eval._errors import InputError
from consensus_eval.analysis.agreement import panel_value
from consensus_eval.analysis.audit import PENALTY_CATEGORY, PENALTY_CATEGORY_NAME
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.results import Results
from consensus_eval.analysis.systems import UNNAMED, Test, difference, source_key
from consensus_eval.domain.kinds.deductions import as_deductions, deductions_in

#: how many of the cases that moved most a comparison lists
TOP_MOVES = 10


class KeyChange(BaseModel):
    """``B - A`` on one key over ``n`` paired cases: ``mean_a`` / ``mean_b`` the panel's means, ``diff``
    the mean paired difference, ``low`` / ``high`` its 95% t interval (None when every difference is the
    same and too few pairs stand behind it), ``p`` the two-sided p value of ``test`` (``sign_flip``: exact,
    up to 12 pairs; ``paired_t``) (None below 2 pairs)."""

    key: str
    n: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    low: float | None = None
    high: float | None = None
    p: float | None = None
    test: Test | None = None


class CaseMove(BaseModel):
    """One pair that moved: its case id in A and in B (the same for two runs), the totals and ``diff`` = B - A."""

    case_a: str
    case_b: str
    total_a: float
    total_b: float
    diff: float


class CategoryChange(BaseModel):
    """One deduction category (``dimension.category``; fixed penalties are ``dimension.fixed_penalty``):
    points taken off per case and deductions listed per case, each the mean over the judges' runs, in A
    and in B, averaged over the paired cases; ``points_diff`` / ``count_diff`` are B - A."""

    key: str
    name: str
    points_a: float
    points_b: float
    points_diff: float
    count_a: float
    count_b: float
    count_diff: float


class Comparison(BaseModel):
    """``b`` against ``a`` (module docstring). ``mode``: ``runs`` (two folders, paired by case id) or
    ``systems`` (one folder, paired by source conversation). ``n_pairs``: pairs compared; ``only_a`` /
    ``only_b``: cases without a partner (left out)."""

    a: str
    b: str
    mode: Literal["runs", "systems"]
    n_pairs: int
    only_a: int
    only_b: int
    keys: dict[str, KeyChange]
    moved: list[CaseMove]
    categories: list[CategoryChange]


def compare_runs(a: Results, b: Results, name_a: str = "A", name_b: str = "B") -> Comparison:
    """Run ``b`` against run ``a`` on the cases they share (by id)."""
    if [d.id for d in a.rubric.dimensions] != [d.id for d in b.rubric.dimensions]:
        raise InputError(f"{name_a} and {name_b} use different rubrics ({a.rubric.id}: "
                         f"{', '.join(d.id for d in a.rubric.dimensions)}; {b.rubric.id}: "
                         f"{', '.join(d.id for d in b.rubric.dimensions)}): their scores cannot be compared")
    ids_b = {c.id for c in b.cases}
    pairs = [(c.id, c.id) for c in a.cases if c.id in ids_b]
    if not pairs:
        raise InputError(f"{name_a} and {name_b} share no case id: compare two runs of the same cases")
    return _compare(a, b, pairs, name_a, name_b, "runs", len(a.cases) - len(pairs), len(b.cases) - len(pairs))


def compare_systems(r: Results, sys_a: str, sys_b: str) -> Comparison:
    """System ``sys_b`` against ``sys_a`` in one run, paired by source conversation."""
    if sys_a == sys_b:
        raise InputError(f"--systems {sys_a} {sys_b}: a system compared with itself; name two different systems")
    names = list(dict.fromkeys(c.system or UNNAMED for c in r.cases))
    for s in (sys_a, sys_b):
        if s not in names:
            raise InputError(f"no system {s!r} in this run (its systems: {', '.join(names) or 'none named'})")
    of_a = {source_key(c): c.id for c in r.cases if (c.system or UNNAMED) == sys_a}
    of_b = {source_key(c): c.id for c in r.cases if (c.system or UNNAMED) == sys_b}
    pairs = [(of_a[s], of_b[s]) for s in of_a if s in of_b]
    if not pairs:
        raise InputError(f"{sys_a} and {sys_b} share no source conversation: give cases a `source` (or the same "
                         "conversation) to pair them; the leaderboard compares unpaired systems")
    return _compare(r, r, pairs, sys_a, sys_b, "systems", len(of_a) - len(pairs), len(of_b) - len(pairs))


def _compare(a: Results, b: Results, pairs: Sequence[tuple[str, str]], name_a: str, name_b: str,
             mode: Literal["runs", "systems"], only_a: int, only_b: int) -> Comparison:
    cons_a = {c.case_id: c for c in a.consensus}
    cons_b = {c.case_id: c for c in b.consensus}
    keys = [*(d.id for d in a.rubric.dimensions), "total"]
    changes = {}
    for k in keys:
        va = np.array([_v(cons_a[x], k) for x, _ in pairs], dtype=float)
        vb = np.array([_v(cons_b[y], k) for _, y in pairs], dtype=float)
        both = ~np.isnan(va) & ~np.isnan(vb)
        d = difference(name_b, name_a, k, vb[both], va[both], 0.0) if both.sum() >= 2 else None
        changes[k] = KeyChange(
            key=k, n=int(both.sum()), mean_a=float(va[both].mean()) if both.any() else None,
            mean_b=float(vb[both].mean()) if both.any() else None,
            diff=d.diff if d else (float((vb[both] - va[both]).mean()) if both.any() else None),
            low=d.low if d else None, high=d.high if d else None, p=d.p if d else None, test=d.test if d else None)
    moved = [CaseMove(case_a=x, case_b=y, total_a=ta, total_b=tb, diff=tb - ta) for x, y in pairs
             if (ta := cons_a[x].total) is not None and (tb := cons_b[y].total) is not None]
    moved.sort(key=lambda m: (-abs(m.diff), m.case_a))
    return Comparison(a=name_a, b=name_b, mode=mode, n_pairs=len(pairs), only_a=only_a, only_b=only_b,
                      keys=changes, moved=[m for m in moved if m.diff != 0][:TOP_MOVES],
                      categories=category_changes(a, b, pairs))


def _v(c: CaseConsensus, key: str) -> float:
    v = panel_value(c, key)
    return math.nan if v is None else v


def _per_case(r: Results, case_ids: set[str]) -> dict[tuple[str, str], tuple[float, float]]:
    """(case, category key) -> (points taken, deductions listed), each the mean over the ok calls of the
    category's dimension (judges and runs)."""
    calls: dict[tuple[str, str], int] = {}
    points: dict[tuple[str, str], float] = {}
    counts: dict[tuple[str, str], float] = {}
    for rec in r.records:
        if rec.case_id not in case_ids or rec.status != "ok" or rec.judgment is None:
            continue
        score = r.scores.get(rec.request_hash)
        calls[(rec.case_id, rec.dimension)] = calls.get((rec.case_id, rec.dimension), 0) + 1
        for cs in (score.categories if score else []):
            key = (rec.case_id, f"{rec.dimension}.{cs.id}")
            points[key] = points.get(key, 0.0) + cs.taken
        for d in rec.judgment.deductions:
            key = (rec.case_id, f"{rec.dimension}.{d.category}")
            counts[key] = counts.get(key, 0.0) + 1
        if rec.judgment.fixed_penalties:
            key = (rec.case_id, f"{rec.dimension}.{PENALTY_CATEGORY}")
            points[key] = points.get(key, 0.0) + sum(
                as_deductions(r.rubric.dimension(rec.dimension)).penalties_by_id[p].points
                for p in dict.fromkeys(x.id for x in rec.judgment.fixed_penalties))
            counts[key] = counts.get(key, 0.0) + len({x.id for x in rec.judgment.fixed_penalties})
    out = {}
    for case_id, cat in points.keys() | counts.keys():
        n = calls.get((case_id, cat.split(".", 1)[0]), 0)
        if n:
            out[(case_id, cat)] = (points.get((case_id, cat), 0.0) / n, counts.get((case_id, cat), 0.0) / n)
    return out


def category_changes(a: Results, b: Results, pairs: Sequence[tuple[str, str]]) -> list[CategoryChange]:
    """Per deduction category, B against A over ``pairs`` (a case of A, its partner in B): what B gained or lost
    (:class:`CategoryChange`), the largest change of points first."""
    pa = _per_case(a, {x for x, _ in pairs})
    pb = _per_case(b, {y for _, y in pairs})
    names = {f"{d.id}.{c.id}": f"{d.name} / {c.name}" for d in deductions_in(a.rubric.dimensions)
             for c in d.categories}
    names.update({f"{d.id}.{PENALTY_CATEGORY}": f"{d.name} / {PENALTY_CATEGORY_NAME}" for d in a.rubric.dimensions})
    out = []
    n = len(pairs)
    for key, name in names.items():
        sa = [pa.get((x, key), (0.0, 0.0)) for x, _ in pairs]
        sb = [pb.get((y, key), (0.0, 0.0)) for _, y in pairs]
        points_a, points_b = sum(p for p, _ in sa) / n, sum(p for p, _ in sb) / n
        count_a, count_b = sum(c for _, c in sa) / n, sum(c for _, c in sb) / n
        if points_a or points_b or count_a or count_b:
            out.append(CategoryChange(key=key, name=name, points_a=points_a, points_b=points_b,
                                      points_diff=points_b - points_a, count_a=count_a, count_b=count_b,
                                      count_diff=count_b - count_a))
    out.sort(key=lambda c: (-abs(c.points_diff), c.key))
    return out


# --------------------------------------------------------------------------- --fail-if

_CONDITION = re.compile(r"^\s*([A-Za-z_][\w-]*)(?:\.(mean|low|high))?\s*(<=|>=|<|>)\s*"
                        r"([+-]?\d+(?:\.\d*)?|[+-]?\.\d+)\s*$")


class Condition(BaseModel):
    """``key[.bound] op value``: fails when the change (``B - A``) of ``key``'s ``bound`` (``mean``: the
    mean difference; ``low`` / ``high``: its interval's bounds) satisfies ``op value``."""

    text: str
    key: str
    bound: Literal["mean", "low", "high"]
    op: Literal["<", "<=", ">", ">="]
    value: float


def condition_parts(text: str, example: str) -> list[str]:
    """The conditions of one ``--fail-if`` text (separated by ``,`` or `` or ``); an :class:`InputError` for an empty
    one (an unset CI variable must not switch the gate off), showing ``example``."""
    parts = re.split(r",|\bor\b", text)
    for part in parts:
        if not part.strip():
            raise InputError(f"--fail-if {text!r}: an empty condition; write {example} (an unset variable in a CI "
                             "script gives an empty --fail-if: set it, or leave --fail-if out)")
    return parts


def bound_words(bound: str) -> str:
    """What a condition's ``bound`` checks, in words: ``change`` or ``lower`` / ``upper bound of the change``."""
    return "change" if bound == "mean" else f"{'lower' if bound == 'low' else 'upper'} bound of the change"


def holds(figure: float, op: str, value: float) -> bool:
    """Whether ``figure op value`` (``op``: ``<``, ``<=``, ``>``, ``>=``)."""
    return {"<": figure < value, "<=": figure <= value, ">": figure > value, ">=": figure >= value}[op]


def parse_conditions(texts: Sequence[str], keys: Sequence[str]) -> list[Condition]:
    """Conditions from ``--fail-if`` texts (each may hold several, separated by ``,`` or `` or ``);
    an :class:`InputError` names a condition that does not parse or names an unknown key, and an empty
    one (an unset CI variable must not switch the gate off)."""
    out = []
    for text in texts:
        for part in condition_parts(text, "KEY OP NUMBER, e.g. \"total < -1.0\""):
            m = _CONDITION.match(part)
            if m is None:
                raise InputError(f"--fail-if {part.strip()!r}: write KEY OP NUMBER, e.g. \"total < -1.0\" or "
                                 "\"accuracy.high < 0\" (KEY: total or a dimension id, optionally .low/.high/.mean; "
                                 "OP: < <= > >=)")
            key, bound, op, value = m.groups()
            if key not in keys:
                raise InputError(f"--fail-if {part.strip()!r}: no key {key!r}; the keys are {', '.join(keys)}")
            out.append(Condition.model_validate({"text": " ".join(part.split()), "key": key,
                                                 "bound": bound or "mean", "op": op, "value": float(value)}))
    return out


def failed_conditions(conditions: Sequence[Condition], comparison: Comparison) -> list[str]:
    """The reasons of the conditions that hold (empty: the gate passes). A condition whose figure is
    missing (no pair, or no interval below 2 pairs) holds: a gate never passes on nothing."""
    reasons = []
    for c in conditions:
        change = comparison.keys[c.key]
        figure = {"mean": change.diff, "low": change.low, "high": change.high}[c.bound]
        if figure is None:
            reasons.append(f"{c.text}: no {c.bound} to check ({change.n} paired cases)")
            continue
        if holds(figure, c.op, c.value):
            reasons.append(f"{c.text}: the {bound_words(c.bound)} of {c.key} ({comparison.b} - {comparison.a}) is "
                           f"{figure:+.2f}")
    return reasons
