"""The ``deductions`` rubric kind (the default): a maximum, star thresholds and categories; each category has a cap
and a closed set of deduction types, each type a fixed number of points or a range. The judge itemizes what it
deducts, one occurrence of a type at a time, with a quote; the score is re-derived::

    score = max(0, max - sum_c min(sum of category c's deductions, cap_c) - fixed penalties)

Fixed penalties (medical_record: diabetes written into past history, -10) are taken outside the category caps,
once per dimension however many times a judge lists them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from consensus_eval._errors import UnknownName, UsageError
from consensus_eval.domain.config import ConsensusConfig, EvalConfig
from consensus_eval.domain.construct import slots_maker
from consensus_eval.domain.criterion import Criterion
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.kinds.base import (
    ADJUDICATE_GAP,
    EPS,
    VIEW_DEDUCTIONS,
    AnyJudgment,
    Dimension,
    Reply,
    check_unique,
    default_is,
    fmt_number,
    list_of,
    literal_of,
    of_kind,
    reply_name,
)
from consensus_eval.domain.kinds.item_errors import (
    ErrorCallView,
    ErrorCase,
    ErrorInput,
    ItemError,
    comments_on,
    decided,
)
from consensus_eval.domain.scores import CategoryScore, DimensionScore
from consensus_eval.domain.stored import StoredDeduction, StoredPenalty

if TYPE_CHECKING:
    from typing_extensions import TypeForm


class _Frozen(BaseModel):
    # a number of a rubric is finite: `points: .nan` or `cap: .inf` is refused (docs/limits.md), naming the field
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class DeductionType(_Frozen):
    """One kind of deduction, taken once per occurrence.

    ``points`` is a fixed number (``2`` for "每处扣2分") or an inclusive range ``[low, high]``
    (``[1, 2]`` for "扣1-2分"), in which case the judge picks the value.
    """

    id: str
    name: str
    points: float | tuple[float, float]

    @field_validator("points")
    @classmethod
    def _positive(cls, v: float | tuple[float, float]) -> float | tuple[float, float]:
        lo, hi = (v, v) if isinstance(v, (int, float)) else v
        if lo <= 0 or hi < lo:
            raise UsageError(f"points must be > 0 and a range must be [low, high] with low <= high, got {v!r}")
        return v

    @property
    def is_range(self) -> bool:
        return not isinstance(self.points, (int, float))

    @property
    def low(self) -> float:
        return self.points[0] if self.is_range else self.points  # type: ignore[index,return-value]

    @property
    def high(self) -> float:
        return self.points[1] if self.is_range else self.points  # type: ignore[index,return-value]

    def accepts(self, points: float) -> bool:
        """Whether ``points`` is a legal value for one occurrence of this type."""
        return self.low - EPS <= points <= self.high + EPS

    def points_text(self) -> str:
        """Human text of the points, e.g. ``"2"`` or ``"1-2"``."""
        return f"{fmt_number(self.low)}-{fmt_number(self.high)}" if self.is_range else fmt_number(self.low)


class Category(_Frozen):
    """A category of deductions; together they take off at most ``cap`` points."""

    id: str
    name: str
    cap: Annotated[float, Field(gt=0)]
    scope: str = ""
    types: list[DeductionType] = Field(min_length=1)

    @cached_property
    def types_by_id(self) -> dict[str, DeductionType]:
        return {t.id: t for t in self.types}


class FixedPenalty(_Frozen):
    """A penalty taken outside the category caps (medical_record: diabetes written into past history, -10)."""

    id: str
    name: str
    points: Annotated[float, Field(gt=0)]
    description: str = ""


class Deductions(Dimension):
    """A ``deductions`` dimension (module docstring): ``max`` points, minus capped category deductions and fixed
    penalties."""

    kind: Annotated[Literal["deductions"], Field(exclude_if=default_is("deductions"))] = "deductions"
    categories: list[Category] = Field(default_factory=list)
    fixed_penalties: list[FixedPenalty] = Field(default_factory=list)

    calibrates = True
    view = VIEW_DEDUCTIONS

    @model_validator(mode="after")
    def _check(self) -> Deductions:
        if not self.categories:
            raise UsageError("a deductions dimension needs categories (at least one)")
        if self.stars is None:
            raise UsageError("a deductions dimension needs stars: thresholds for 5, 4, 3 and 2 stars")
        caps = sum(c.cap for c in self.categories)
        if abs(caps - self.max) > EPS:
            listing = " + ".join(f"{c.id} {fmt_number(c.cap)}" for c in self.categories)
            raise UsageError(f"category caps sum to {fmt_number(caps)} ({listing}), not the maximum "
                             f"{fmt_number(self.max)}")
        thresholds = [self.stars[s] for s in (5, 4, 3, 2)]
        if thresholds[0] > self.max or thresholds[-1] < 0:
            raise UsageError(f"star thresholds {thresholds} must lie within 0..{fmt_number(self.max)}")
        check_unique("category", (c.id for c in self.categories))
        check_unique("deduction type", (t.id for c in self.categories for t in c.types))
        check_unique("fixed penalty", (p.id for p in self.fixed_penalties))
        return self

    @cached_property
    def categories_by_id(self) -> dict[str, Category]:
        return {c.id: c for c in self.categories}

    @cached_property
    def penalties_by_id(self) -> dict[str, FixedPenalty]:
        return {p.id: p for p in self.fixed_penalties}

    @cached_property
    def type_names(self) -> dict[str, str]:
        """Each deduction type's and fixed penalty's name, by id."""
        return {t.id: t.name for c in self.categories for t in c.types} | {p.id: p.name for p in self.fixed_penalties}

    def find_type(self, type_id: str) -> tuple[Category, DeductionType]:
        """The category and deduction type with id ``type_id`` (KeyError if none)."""
        for c in self.categories:
            if type_id in c.types_by_id:
                return c, c.types_by_id[type_id]
        raise UnknownName(type_id)

    def _given(self, calls: Sequence[ErrorCallView]) -> dict[str, tuple[str, float, str, str]]:
        """A judge's deductions and fixed penalties in its calls: id -> (type id, points, quote, reason); a fixed
        penalty listed again in a call is charged once and judged once: its first listing only."""
        out: dict[str, tuple[str, float, str, str]] = {}
        for r in calls:
            if r.judgment is None:
                continue
            deductions: Sequence[Deduction | StoredDeduction] = r.judgment.deductions
            penalties: Sequence[PenaltyHit | StoredPenalty] = r.judgment.fixed_penalties
            for i, d in enumerate(deductions):
                out[f"{r.request_hash}#d{i}"] = (d.type, float(d.points), d.evidence, d.reason)
            seen: set[str] = set()
            for i, p in enumerate(penalties):
                if p.id not in seen and p.id in self.penalties_by_id:
                    seen.add(p.id)
                    out[f"{r.request_hash}#p{i}"] = (p.id, float(self.penalties_by_id[p.id].points), p.evidence,
                                                      p.reason)
        return out

    def item_errors(self, data: ErrorInput) -> list[ItemError]:
        """Per deduction type (or fixed penalty): a miss for each deduction the clinicians added (``row = added``),
        for the panel and for every judge that gave none of that type on the case; a false alarm for each deduction
        the clinicians disagreed with (the adjudicator's verdict, else every reviewer's), for its judge, and once
        per quote for the panel."""
        names = self.type_names
        given = {j: self._given(calls) for j, calls in data.calls.items()}
        found = []
        for added in data.review.added:
            if added.dimension != self.id or added.value is None:
                continue
            item = str(added.value)
            miss = ItemError(data.panel_name, item, names.get(item, item), ErrorCase(
                case_id=data.case_id, kind="miss", points=abs(float(added.points or 0.0)),
                evidence=added.evidence or "", comment=added.comment))
            found.append(miss)
            found += [miss._replace(rater=j) for j, ds in given.items() if all(t != item for t, *_ in ds.values())]
        quoted: set[tuple[str, str]] = set()
        for judge, ds in given.items():
            for did, (item, points, evidence, reason) in ds.items():
                if decided(data.review.verdicts.get(did, {}), data.review.reference_verdicts.get(did)) != "disagree":
                    continue
                alarm = ItemError(judge, item, names.get(item, item), ErrorCase(
                    case_id=data.case_id, kind="false_alarm", points=abs(points), judge=judge, evidence=evidence,
                    reason=reason, comment=comments_on(data.review, self.id, did)))
                found.append(alarm)
                if (item, evidence) not in quoted:
                    quoted.add((item, evidence))
                    found.append(alarm._replace(rater=data.panel_name))
        return found

    def rubric_ids(self) -> Mapping[str, Sequence[str]]:
        return {"category": [c.id for c in self.categories]}

    def reply_model(self, case_criteria: Sequence[Criterion] | None = None) -> type[Reply]:
        """Closed sets of the dimension's categories, types and fixed penalties; each deduction's points
        checked against its type's; the judge's own score and stars (kept, compared, never trusted)."""
        dim = self
        cat_ids = [c.id for c in dim.categories]
        type_ids = [t.id for c in dim.categories for t in c.types]
        type_help = "; ".join(f"{t.id} ({c.id}, {t.points_text()})" for c in dim.categories for t in c.types)

        def _check(self: BaseModel) -> BaseModel:
            cat, typ = dim.find_type(self.type)  # type: ignore[attr-defined]
            if cat.id != self.category:  # type: ignore[attr-defined]
                raise UsageError(f"type {typ.id!r} belongs to category {cat.id!r}, not {self.category!r}")  # type: ignore[attr-defined]
            pts = self.points  # type: ignore[attr-defined]
            if typ.is_range:
                if pts is None or not typ.accepts(pts):
                    raise UsageError(
                        f"type {typ.id!r} takes {typ.points_text()} points; give a value in that range, got {pts}")
            elif pts is not None and not typ.accepts(pts):
                raise UsageError(f"type {typ.id!r} takes exactly {typ.points_text()} points, got {pts}")
            return self

        deduction = create_model(
            reply_name(dim, "Deduction"),
            __config__=ConfigDict(extra="forbid"),
            # pydantic documents decorated validators here but annotates the values as plain callables
            __validators__={"_check": model_validator(mode="after")(_check)},  # type: ignore[dict-item]
            category=(literal_of(cat_ids), Field(description="category id")),
            type=(literal_of(type_ids), Field(description=f"deduction type id: {type_help}")),
            points=(float | None, Field(None, description="the type's points; for a range type, a value in the range")),
            evidence=(str, Field(description="verbatim quote from the record or conversation")),
            reason=(str, Field(description="why this is a deduction")),
        )
        fixed_penalties: tuple[TypeForm[Any], Any]
        if dim.fixed_penalties:
            penalty = create_model(
                reply_name(dim, "Penalty"),
                __config__=ConfigDict(extra="forbid"),
                id=(literal_of([p.id for p in dim.fixed_penalties]), Field(description="fixed penalty id")),
                evidence=(str, ""),
                reason=(str, ""),
            )
            fixed_penalties = (list_of(penalty), Field(default_factory=list, description="fixed penalties that apply"))
        else:
            fixed_penalties = (list[None], Field(default_factory=list, max_length=0))
        return create_model(
            reply_name(dim),
            __base__=DeductionsReply,
            deductions=(list_of(deduction), Field(description="one item per occurrence; empty if nothing to deduct")),
            score=(float, Field(ge=0, le=dim.max, description=f"your score, 0-{dim.max:g}")),
            stars=(int, Field(ge=1, le=5, description="your stars, 1-5")),
            comment=(str, Field(description="a short comment")),
            fixed_penalties=fixed_penalties,
        )

    def derive(self, judgment: AnyJudgment, case_criteria: Sequence[Criterion] | None = None) -> DimensionScore:
        """Each category takes off ``min(sum of its deductions, cap)``; each fixed penalty that applies is taken off
        once, outside the caps; the result is floored at 0. Raises ``ValueError`` for a deduction whose category or
        type the dimension does not have (judgments are validated before they get here)."""
        per_cat: dict[str, list[float]] = {c.id: [] for c in self.categories}
        for d in judgment.deductions:
            try:
                cat, typ = self.find_type(d.type)
            except KeyError:
                raise UsageError(f"dimension {self.id!r} has no deduction type {d.type!r}") from None
            if cat.id != d.category:
                raise UsageError(f"deduction type {d.type!r} belongs to category {cat.id!r}, not {d.category!r}")
            if not typ.accepts(d.points):
                raise UsageError(f"{d.points} points is outside {typ.points_text()} for type {typ.id!r}")
            per_cat[cat.id].append(d.points)
        # floats for sums of no deduction too (the types the fields declare)
        cats = tuple([_category(c.id, c.name, float(c.cap), float(sum(per_cat[c.id])),
                                float(min(sum(per_cat[c.id]), c.cap)), len(per_cat[c.id]))
                      for c in self.categories])
        unknown = [p.id for p in judgment.fixed_penalties if p.id not in self.penalties_by_id]
        if unknown:
            raise UsageError(f"dimension {self.id!r} has no fixed penalty {unknown[0]!r}")
        # a fixed penalty applies once, however many times a judge lists it ("直接扣10分")
        penalties = sum(self.penalties_by_id[pid].points
                        for pid in dict.fromkeys(p.id for p in judgment.fixed_penalties))
        score = max(0.0, self.max - sum(c.taken for c in cats) - penalties)
        score = round(score, 9)
        if math.isclose(score, round(score)):
            score = float(round(score))
        return DimensionScore(dimension=self.id, max=float(self.max), score=score, stars=self.stars_for(score),
                              categories=cats, penalties=float(penalties), **self.claims(judgment))

    def runs_disagree(self, scores: Sequence[float], config: EvalConfig) -> bool:
        """The judge's runs are more than ``adaptive.run_spread`` points apart, or their stars
        ``adaptive.run_star_gap`` or more apart."""
        a = config.adaptive
        if max(scores) - min(scores) > a.run_spread:
            return True
        if a.run_star_gap is None:
            return False
        stars = [st for s in scores if (st := self.stars_for(s)) is not None]
        return bool(stars) and max(stars) - min(stars) >= a.run_star_gap

    def reviewers_apart(self, gap: float, config: ConsensusConfig) -> bool:
        """More than :data:`~consensus_eval.domain.kinds.base.ADJUDICATE_GAP` points apart."""
        return gap > ADJUDICATE_GAP


#: a category line made from its fields' values in order, slot by slot
#: (:func:`~consensus_eval.domain.construct.slots_maker`: a large run derives one per category of each distinct score)
_category = slots_maker(CategoryScore)


class DeductionsReply(Reply):
    """A ``deductions`` dimension's reply: deductions of the dimension's types, the fixed penalties that apply, the
    judge's own score, stars and comment (its fields: :meth:`Deductions.reply_model`)."""

    def to_judgment(self, dimension: Dimension) -> Judgment:
        """The judgment, with each deduction's points from the rubric (a range type's: the judge's value)."""
        assert isinstance(dimension, Deductions)
        deductions = []
        for d in self.deductions:  # type: ignore[attr-defined]
            _, typ = dimension.find_type(d.type)
            points = d.points if typ.is_range else typ.low
            deductions.append(Deduction(category=d.category, type=d.type, points=points,
                                        evidence=d.evidence, reason=d.reason))
        return Judgment(
            dimension=dimension.id,
            deductions=deductions,
            fixed_penalties=[PenaltyHit(id=p.id, evidence=p.evidence, reason=p.reason)
                             for p in self.fixed_penalties],  # type: ignore[attr-defined]
            claimed_score=self.score,  # type: ignore[attr-defined]
            claimed_stars=self.stars,  # type: ignore[attr-defined]
            comment=self.comment,  # type: ignore[attr-defined]
        )


def deductions_in(dimensions: Iterable[Dimension]) -> list[Deductions]:
    """The ``deductions`` dimensions among ``dimensions``, in order: those whose categories, deduction types and
    fixed penalties name what judges deduct (other kinds itemize no deductions)."""
    return [d for d in dimensions if isinstance(d, Deductions)]


def as_deductions(dimension: Dimension) -> Deductions:
    """``dimension`` as a ``deductions`` dimension: what a judgment's deductions and fixed penalties are read
    against (ValueError for a dimension of another kind, which itemizes none)."""
    return of_kind(dimension, Deductions)
