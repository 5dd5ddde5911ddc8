"""Typed judge outputs: the contract between every judge and the scoring.

A :class:`Judgment` is what any judge (rules or LLM) returns for one (case, dimension): a list of
itemized deductions, the fixed penalties that apply, and the judge's own claimed score and stars
(kept, compared, never trusted); for a ``likert`` dimension the level picked and its quotes, for a
``criteria`` dimension a verdict per criterion. :func:`response_model` builds, from the rubric, the
pydantic model an LLM must fill, by the dimension's kind: categories and deduction types are closed sets,
points are checked against the rubric; a likert rating is one of the dimension's levels; criterion ids are
the case's (or the rubric's) criteria, each judged exactly once. A reply that breaks the rubric is a
validation error (and is re-asked), never scored.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from types import GenericAlias
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from consensus_eval._errors import UsageError
from consensus_eval.domain.rubric import Criterion, Dimension, Rubric

if TYPE_CHECKING:
    from typing_extensions import TypeForm


class Deduction(BaseModel):
    """One occurrence of a rubric deduction type.

    ``category`` and ``type`` are rubric ids; ``points`` is the rubric's value for the type (or the
    judge's choice within its range); ``evidence`` quotes the record or conversation.
    """

    model_config = ConfigDict(extra="forbid")

    category: str
    type: str
    points: float
    evidence: str = ""
    reason: str = ""


class PenaltyHit(BaseModel):
    """A fixed penalty of the rubric that applies (medical_record: diabetes written into past history)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    evidence: str = ""
    reason: str = ""


class CriterionVerdict(BaseModel):
    """A judge's verdict on one criterion of a ``criteria`` dimension: ``met`` or not, with the quote that
    shows it (``evidence``) and why (``reason``)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    met: bool
    evidence: str = ""
    reason: str = ""


class Judgment(BaseModel):
    """A judge's verdict on one dimension of one case, by the dimension's kind: ``deductions`` and
    ``fixed_penalties`` (kind ``deductions``), the level picked (``rating``, kind ``likert``, with its
    ``evidence``), or a verdict per criterion (``verdicts``, kind ``criteria``). The fields of the other
    kinds are left out of dumps while empty, so a deductions judgment dumps as it did before kinds."""

    model_config = ConfigDict(extra="forbid")

    dimension: str
    deductions: list[Deduction] = []
    fixed_penalties: list[PenaltyHit] = []
    claimed_score: float | None = None
    claimed_stars: int | None = None
    comment: str = ""
    #: ``likert``: the level the judge picked
    rating: Annotated[int | None, Field(exclude_if=lambda v: v is None)] = None
    #: ``likert``: quotes of the record or conversation the rating rests on
    evidence: Annotated[list[str], Field(exclude_if=lambda v: not v)] = []
    #: ``criteria``: one verdict per criterion
    verdicts: Annotated[list[CriterionVerdict], Field(exclude_if=lambda v: not v)] = []


def quotes_of(judgment: Judgment) -> list[str]:
    """Every quote a judgment gives as evidence, whatever its kind: each deduction's and fixed penalty's,
    a likert rating's quotes, each criterion verdict's (what grounding looks for in the case; a verdict
    ``not met`` may have nothing to quote, and an empty quote of one is not asked for again)."""
    return ([d.evidence for d in judgment.deductions] + [p.evidence for p in judgment.fixed_penalties]
            + list(judgment.evidence) + [v.evidence for v in judgment.verdicts if v.evidence or v.met])


#: Why a call failed, by cause. Only ``rate_limit``, ``server_error``, ``timeout`` and ``connection``
#: (a dropped connection) are worth another attempt; ``connection_refused`` (refused, DNS, TLS),
#: ``authentication``, ``not_found`` (model or endpoint) and ``local`` (an exception raised on this
#: machine) cannot succeed by retrying; ``bad_request`` is the request's fault; ``invalid_reply``:
#: the replies failed validation against the rubric after every re-ask; ``record_too_long``: the case
#: is over the judge's documented maximum and was not sent.
ErrorKind = Literal["rate_limit", "server_error", "timeout", "connection", "connection_refused", "authentication",
                    "not_found", "bad_request", "invalid_reply", "local", "record_too_long"]


class CallOutcome(BaseModel):
    """The outcome of one judge call (all its attempts): what every judge returns.

    ``status`` is ``ok`` with a validated ``judgment``, or ``failed`` with ``error`` saying why; a
    failed call is never scored. Token counts and cost cover every attempt (re-asks included);
    ``cost`` is None when unknown (never 0 for "unknown").
    """

    status: Literal["ok", "failed"]
    judgment: Judgment | None = None
    raw: str | None = None
    error: str | None = None
    #: what kind of failure (:data:`ErrorKind`), None for an ok call
    error_kind: ErrorKind | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost: float | None = None
    attempts: int = 1


# --------------------------------------------------------------------------- LLM response models


class _ReplyBase(BaseModel):
    """Common shape of an LLM reply; subclasses narrow the ids to the rubric's closed sets."""

    def to_judgment(self, dimension: Dimension) -> Judgment:
        """Convert a validated reply to a :class:`Judgment`, taking fixed points from the rubric."""
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


def _literal(values: list[str]) -> TypeForm[Any]:
    """``Literal[*values]``: a closed set of ids, known only at run time."""
    return cast("TypeForm[Any]", Literal[tuple(values)])


def _list_of(model: type[BaseModel]) -> TypeForm[Any]:
    """``list[model]`` (the very same object) for a model class built at run time, which a type
    checker cannot take as a type argument."""
    return cast("TypeForm[Any]", GenericAlias(list, (model,)))


class _LikertReplyBase(_ReplyBase):
    """A ``likert`` dimension's reply: the level picked (``rating``, a closed set of the dimension's
    levels), verbatim quotes it rests on (``evidence``) and a comment. The rating is the score
    (:func:`~consensus_eval.domain.scoring.derive` checks it again)."""

    def to_judgment(self, dimension: Dimension) -> Judgment:
        return Judgment(dimension=dimension.id, rating=self.rating,  # type: ignore[attr-defined]
                        evidence=list(self.evidence), comment=self.comment)  # type: ignore[attr-defined]


class _CriteriaReplyBase(_ReplyBase):
    """A ``criteria`` dimension's reply: one verdict per criterion of the case (ids a closed set, each
    exactly once: a reply missing one or giving one twice fails validation and is re-asked). The score
    is re-derived from the verdicts and the criteria's points, never taken from the judge."""

    def to_judgment(self, dimension: Dimension) -> Judgment:
        return Judgment(dimension=dimension.id, comment=self.comment,  # type: ignore[attr-defined]
                        verdicts=[CriterionVerdict(id=v.id, met=v.met, evidence=v.evidence, reason=v.reason)
                                  for v in self.verdicts])  # type: ignore[attr-defined]


#: response models by (rubric fingerprint, dimension, criterion ids): bounded, since per-case criteria
#: make one model per distinct set of ids (the oldest built is dropped first)
_MODELS: OrderedDict[tuple[str, str, tuple[str, ...]], type[_ReplyBase]] = OrderedDict()
MAX_CACHED_MODELS = 512


def _cached(cache: OrderedDict[Any, Any], key: Any, build: Callable[[], Any]) -> Any:
    """``cache[key]``, built with ``build()`` when absent; at most :data:`MAX_CACHED_MODELS` entries."""
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = build()
        while len(cache) > MAX_CACHED_MODELS:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return hit


#: the name of the whole-case reply model (:func:`case_response_model`)
CASE_MODEL_NAME = "CaseJudgment"


def _judgment_name(dim: Dimension) -> str:
    """The name of a dimension's reply model, ``<Id>Judgment``; never the whole-case model's name, which a
    dimension with id ``case`` would otherwise get (that one is ``CaseDimensionJudgment``)."""
    name = f"{dim.id.title()}Judgment"
    return f"{dim.id.title()}DimensionJudgment" if name == CASE_MODEL_NAME else name


def criterion_ids(dimension: Dimension, case_criteria: Sequence[Criterion] | None) -> tuple[str, ...]:
    """The ids of the criteria a ``criteria`` dimension judges a case by (the rubric's own, else the
    case's; ValueError when neither has any); ``()`` for a dimension of another kind."""
    if dimension.kind != "criteria":
        return ()
    found = dimension.criteria or case_criteria
    if not found:
        raise UsageError(f"dimension {dimension.id!r} has no criteria of its own and the case gives none "
                         f"(a case's \"criteria\": [{{\"id\", \"text\", \"points\"}}])")
    return tuple(c.id for c in found)


def _build_likert_model(dim: Dimension) -> type[_ReplyBase]:
    levels = sorted(dim.levels)
    anchors = "; ".join(f"{k}: {dim.levels[k]}" for k in levels)
    return create_model(
        _judgment_name(dim),
        __base__=_LikertReplyBase,
        rating=(cast("TypeForm[Any]", Literal[tuple(levels)]),
                Field(description=f"the level that fits, one of {levels} ({anchors})"[:2000])),
        evidence=(list[str], Field(description="verbatim quotes of the record or conversation the rating rests on")),
        comment=(str, Field(description="a short comment")),
    )


def _build_criteria_model(dim: Dimension, ids: tuple[str, ...]) -> type[_ReplyBase]:
    verdict = create_model(
        f"{dim.id.title()}Verdict",
        __config__=ConfigDict(extra="forbid"),
        id=(_literal(list(ids)), Field(description="criterion id")),
        met=(bool, Field(description="true when the record meets the criterion (for a negative criterion: "
                                     "when the fault it names is there)")),
        evidence=(str, Field(description="verbatim quote from the record or conversation")),
        reason=(str, Field(description="why it is met or not")),
    )

    def _each_once(self: BaseModel) -> BaseModel:
        seen = [v.id for v in self.verdicts]  # type: ignore[attr-defined]
        twice = sorted({i for i in seen if seen.count(i) > 1})
        missing = [i for i in ids if i not in seen]
        if twice or missing:
            parts = ([f"criteria judged more than once: {', '.join(twice)}"] if twice else []) + (
                [f"criteria not judged: {', '.join(missing)}"] if missing else [])
            raise UsageError("give exactly one verdict per criterion; " + "; ".join(parts))
        return self

    return create_model(
        _judgment_name(dim),
        __base__=_CriteriaReplyBase,
        __validators__={"_each_once": model_validator(mode="after")(_each_once)},  # type: ignore[dict-item]
        verdicts=(_list_of(verdict), Field(description=f"one verdict per criterion, each of {list(ids)} once")),
        comment=(str, Field(description="a short comment")),
    )


def _build_response_model(rubric: Rubric, dimension_id: str) -> type[_ReplyBase]:
    dim = rubric.dimension(dimension_id)
    cat_ids = [c.id for c in dim.categories]
    type_ids = [t.id for c in dim.categories for t in c.types]
    type_help = "; ".join(
        f"{t.id} ({c.id}, {t.points_text()})" for c in dim.categories for t in c.types
    )

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
        f"{dim.id.title()}Deduction",
        __config__=ConfigDict(extra="forbid"),
        # pydantic documents decorated validators here but annotates the values as plain callables
        __validators__={"_check": model_validator(mode="after")(_check)},  # type: ignore[dict-item]
        category=(_literal(cat_ids), Field(description="category id")),
        type=(_literal(type_ids), Field(description=f"deduction type id: {type_help}")),
        points=(float | None, Field(None, description="the type's points; for a range type, a value in the range")),
        evidence=(str, Field(description="verbatim quote from the record or conversation")),
        reason=(str, Field(description="why this is a deduction")),
    )
    fixed_penalties: tuple[TypeForm[Any], Any]
    if dim.fixed_penalties:
        penalty = create_model(
            f"{dim.id.title()}Penalty",
            __config__=ConfigDict(extra="forbid"),
            id=(_literal([p.id for p in dim.fixed_penalties]), Field(description="fixed penalty id")),
            evidence=(str, ""),
            reason=(str, ""),
        )
        fixed_penalties = (_list_of(penalty), Field(default_factory=list, description="fixed penalties that apply"))
    else:
        fixed_penalties = (list[None], Field(default_factory=list, max_length=0))
    return create_model(
        _judgment_name(dim),
        __base__=_ReplyBase,
        deductions=(_list_of(deduction), Field(description="one item per occurrence; empty if nothing to deduct")),
        score=(float, Field(ge=0, le=dim.max, description=f"your score, 0-{dim.max:g}")),
        stars=(int, Field(ge=1, le=5, description="your stars, 1-5")),
        comment=(str, Field(description="a short comment")),
        fixed_penalties=fixed_penalties,
    )


def response_model(rubric: Rubric, dimension_id: str,
                   case_criteria: Sequence[Criterion] | None = None) -> type[_ReplyBase]:
    """The pydantic model an LLM judge fills for ``dimension_id`` of ``rubric``, by the dimension's kind:
    deductions (closed sets of categories and types), ``likert`` (a level of the dimension), ``criteria``
    (one verdict per criterion of the case: ``case_criteria`` when the dimension has none of its own, so
    the model is per case). Cached by (rubric fingerprint, dimension, criterion ids), bounded."""
    dim = rubric.dimension(dimension_id)
    ids = criterion_ids(dim, case_criteria)

    def build() -> type[_ReplyBase]:
        if dim.kind == "likert":
            return _build_likert_model(dim)
        if dim.kind == "criteria":
            return _build_criteria_model(dim, ids)
        return _build_response_model(rubric, dimension_id)

    model: type[_ReplyBase] = _cached(_MODELS, (rubric.fingerprint, dimension_id, ids), build)
    return model


class _CaseReplyBase(_ReplyBase):
    """Common shape of a whole-case reply (``call: per_case``): one field per rubric dimension, each
    that dimension's reply model (:func:`response_model`)."""

    def part(self, dimension: Dimension) -> _ReplyBase:
        """The reply to one dimension (validated like a reply of its own)."""
        reply: _ReplyBase = getattr(self, dimension.id)
        return reply

    def to_judgment(self, dimension: Dimension) -> Judgment:
        """The judgment of one dimension, from its part of the reply."""
        return self.part(dimension).to_judgment(dimension)


_CASE_MODELS: OrderedDict[tuple[str, tuple[str, ...]], type[_CaseReplyBase]] = OrderedDict()


def case_response_model(rubric: Rubric, case_criteria: Sequence[Criterion] | None = None) -> type[_CaseReplyBase]:
    """The pydantic model an LLM judge fills when asked every dimension of a case in one call: one
    required field per dimension of ``rubric`` (in rubric order, named by its id), each the dimension's
    own :func:`response_model`, so each part is checked against the rubric exactly as a reply to that
    dimension alone would be. A reply missing a dimension fails validation (and is re-asked).
    ``case_criteria``: the case's criteria, for a ``criteria`` dimension without its own. Cached (bounded)."""
    ids = tuple(i for d in rubric.dimensions for i in criterion_ids(d, case_criteria) if not d.criteria)

    def build() -> type[_CaseReplyBase]:
        fields: dict[str, Any] = {
            d.id: (response_model(rubric, d.id, case_criteria),
                   Field(description=f"the {d.id} dimension ({d.name}, {d.low:g}-{d.max:g})"))
            for d in rubric.dimensions}
        return create_model(CASE_MODEL_NAME, __base__=_CaseReplyBase, **fields)

    model: type[_CaseReplyBase] = _cached(_CASE_MODELS, (rubric.fingerprint, ids), build)
    return model
