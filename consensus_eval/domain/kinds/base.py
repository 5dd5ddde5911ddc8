"""A rubric kind: what a judge returns for a dimension, and everything that follows from it.

A kind is one class, a subclass of :class:`Dimension`: its pydantic fields are the YAML fields a dimension of
that kind has beside the common ones (``id``, ``name``, ``kind``, ``max``, ``weight``, ``star_weight``, ``stars``,
``description``), its validators check them, and its methods are the kind's rules, each with a default where one
makes sense: the reply model a judge fills (:meth:`Dimension.reply_model`), the score derived from a judgment
(:meth:`Dimension.derive`), the level of measurement of its agreement (:attr:`Dimension.alpha_level`), when judges
or a judge's own runs or two reviewers disagree (:meth:`Dimension.flags`, :meth:`Dimension.runs_disagree`,
:meth:`Dimension.reviewers_apart`). One registration makes a kind known (:func:`register_kind`); an installed
package adds one through the ``consensus_eval.rubric_kinds`` entry-point group, as judge kinds are added
(docs/kinds.md). The built-in kinds are :mod:`~consensus_eval.domain.kinds.deductions`,
:mod:`~consensus_eval.domain.kinds.likert` and :mod:`~consensus_eval.domain.kinds.criteria`.

A dimension is validated as :class:`Dimension` and comes back as its kind's class (``kind`` chooses it; unset:
``deductions``); a rubric dumps each dimension with its kind's fields, after the common ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import pairwise
from types import GenericAlias
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal, NamedTuple, Protocol, Self, TypeVar, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    model_validator,
)

from consensus_eval._errors import UsageError
from consensus_eval.domain.config import ConsensusConfig, EvalConfig
from consensus_eval.domain.criterion import Criterion
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.plugins import Registry
from consensus_eval.domain.scores import DimensionScore
from consensus_eval.domain.sets import duplicates
from consensus_eval.domain.stored import StoredJudgment

if TYPE_CHECKING:
    from typing_extensions import TypeForm

    from consensus_eval.domain.kinds.item_errors import ErrorInput, ItemError

#: a judgment as a judge returns it (validated) or as the store hands it back (a plain read model)
AnyJudgment = Judgment | StoredJudgment

#: the entry-point group through which an installed package adds rubric kinds
RUBRIC_KIND_ENTRY_POINTS = "consensus_eval.rubric_kinds"
#: the kind of a dimension that names none
DEFAULT_KIND = "deductions"
#: Krippendorff's level of measurement of a kind's values (:mod:`consensus_eval.analysis.alpha`'s ``Level``)
AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]
#: how a dimension's judgments are shown (its kind's :attr:`Dimension.view`): itemized deductions and fixed penalties,
#: a level of a scale (a judgment's ``rating``, with its anchor and quotes), or a verdict per criterion. A judgment
#: fills one of these (:class:`~consensus_eval.domain.judgment.Judgment`'s fields), so a kind shows its judgments as
#: one of them; each is named after the kind that brought it (the report's payload and the pages key on the names)
View = Literal["deductions", "likert", "criteria"]
VIEW_DEDUCTIONS: Final = "deductions"
VIEW_LEVELS: Final = "likert"
VIEW_CRITERIA: Final = "criteria"
#: two reviewers' own scores of a dimension further apart than this many points send the case to adjudication
#: (the ``deductions`` kind's rule, :meth:`Dimension.reviewers_apart`)
ADJUDICATE_GAP = 2.0
EPS = 1e-9


def default_is(value: Any) -> Callable[[Any], bool]:
    """``exclude_if`` for a field left out of dumps while it holds its default ``value``."""
    return lambda v: v == value


def check_unique(what: str, ids: Iterable[str]) -> None:
    """Raise ``ValueError`` naming the ids given more than once (``duplicate category id(s): a, b``)."""
    dup = sorted(duplicates(ids))
    if dup:
        raise UsageError(f"duplicate {what} id(s): {', '.join(dup)}")


def fmt_number(x: float) -> str:
    """A number as a rubric writes it: ``2`` for 2.0, ``1.5``."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def fmt_short(x: float) -> str:
    """A figure of a review reason: one decimal at most (``2``, ``1.5``)."""
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _empty(v: list[Any]) -> list[Any]:
    if v:
        raise UsageError("fixed penalties are for kind: deductions; a dimension of this kind has none")
    return v


#: a kind's ``fixed_penalties``: always empty, and dumped as ``[]`` (what a likert or criteria dimension dumped
#: before kinds were modules: their rubrics keep their fingerprints)
NoFixedPenalties = Annotated[list[Any], AfterValidator(_empty)]


class Flag(BaseModel):
    """Why a case's panel verdict is disputed, as data a report renders in its language: ``code`` ``spread`` (the
    judges' totals ``value`` points apart, over ``limit``), ``star_gap`` (a dimension's stars ``value`` apart, at
    least ``limit``; ``dimension`` its id), or a code of the dimension's kind (:attr:`Dimension.flag_texts`:
    ``likert``'s ``level_gap``, ``criteria``'s ``split``)."""

    code: str
    value: float
    limit: float
    dimension: str | None = None

    @property
    def text(self) -> str:
        """The flag in English, as consensus.csv writes it (``CaseConsensus.flags``)."""
        return _FLAG_TEXTS[self.code].format(dimension=self.dimension, value=self.value, limit=self.limit)


#: each flag code's English text (``str.format`` with ``dimension``, ``value``, ``limit``), kinds' codes added as
#: they register, in that order (:func:`flag_rank`)
_FLAG_TEXTS: dict[str, str] = {"spread": "totals spread {value:g} > {limit:g}",
                               "star_gap": "{dimension} stars differ by {value:g}"}


def flag_rank(code: str) -> int:
    """Where flags of ``code`` come in a case's list: ``spread``, ``star_gap``, then the kinds' codes in the order
    the kinds registered."""
    return list(_FLAG_TEXTS).index(code) if code in _FLAG_TEXTS else len(_FLAG_TEXTS)


class Reason(NamedTuple):
    """A review reason a kind's flags give a case (the audit's ``ReviewReason``, whose ``code`` is the flags'):
    ``subjects`` (what it is about: ``Accurate 2``), ``text`` (in English), the figure ``value`` and the threshold
    ``limit`` it is compared with (None where it has none)."""

    subjects: list[str]
    text: str
    value: float | None = None
    limit: float | None = None


class JudgeScoreView(Protocol):
    """What a kind's disagreement rule reads of one judge on one dimension of one case (the consensus'
    ``JudgeScore``): the mean of its runs' scores, and its verdict per criterion (a ``criteria`` dimension)."""

    @property
    def mean(self) -> float | None: ...

    @property
    def criteria(self) -> Mapping[str, bool]: ...


class ConsensusView(Protocol):
    """What a kind reads of the panel's verdict on one case (the consensus' ``CaseConsensus``): each judge's score
    of each dimension."""

    @property
    def case_id(self) -> str: ...

    @property
    def judges(self) -> Mapping[str, Mapping[str, JudgeScoreView]]: ...


class CallView(Protocol):
    """What a kind reads of one stored call (``StoredCall``)."""

    @property
    def dimension(self) -> str: ...

    @property
    def judge(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def judgment(self) -> AnyJudgment | None: ...


class PanelView(ConsensusView, Protocol):
    """A case's consensus as a kind's report block reads it: each judge's scores, and the panel's verdict per
    criterion of each dimension that judges by criteria (``CaseConsensus.criteria``)."""

    @property
    def criteria(self) -> Mapping[str, Mapping[str, str]]: ...


class CaseView(Protocol):
    """What a kind reads of a case: its id and its own criteria (None: it brings none)."""

    @property
    def id(self) -> str: ...

    @property
    def criteria(self) -> Sequence[Criterion] | None: ...


class RunView(Protocol):
    """A run as a kind's report block reads it (``Results``): its calls, its judges (in panel order), each case's
    consensus and the cases."""

    @property
    def records(self) -> Sequence[CallView]: ...

    @property
    def judges(self) -> Sequence[str]: ...

    @property
    def consensus(self) -> Sequence[PanelView]: ...

    @property
    def cases(self) -> Sequence[CaseView]: ...


class Table(NamedTuple):
    """A table of a report block: ``header``, ``rows`` of cells (text), which columns are ``numeric`` (aligned
    right), and ``id`` (its HTML id)."""

    id: str
    header: list[str]
    rows: list[list[str]]
    numeric: list[bool]


B = TypeVar("B")
B_co = TypeVar("B_co", covariant=True)


class ReportKit(Protocol[B_co]):
    """What the report gives a kind's block (:meth:`Dimension.report_block`): its words in the report's language
    (``t``, the report's catalogue with the kinds' own keys: :attr:`Dimension.messages`), its number formats, and
    its block (language-neutral: report.md and report.html render it the same)."""

    def t(self, key: str, /, **values: Any) -> str: ...

    def num(self, x: float | None) -> str: ...

    def fixed(self, x: float | None) -> str: ...

    def percent(self, x: float | None) -> str: ...

    def block(self, id: str, title: str, *, paragraphs: Sequence[str] = (), tables: Sequence[Table] = (),
              notes: Sequence[str] = ()) -> B_co: ...


class Reply(BaseModel):
    """An LLM judge's reply to one dimension: a kind's reply model subclasses it (:meth:`Dimension.reply_model`),
    its ids closed sets of the dimension's, and turns a validated reply into a :class:`Judgment`."""

    def to_judgment(self, dimension: Dimension) -> Judgment:
        """The judgment this reply gives (the kind's model says how)."""
        raise NotImplementedError(f"{type(self).__name__} does not say how it becomes a Judgment")


#: the name of the whole-case reply model (:func:`~consensus_eval.domain.replies.case_response_model`)
CASE_MODEL_NAME = "CaseJudgment"


def reply_name(dim: Dimension, suffix: str = "Judgment") -> str:
    """The name of a model of a dimension's reply, ``<Id><suffix>``; never the whole-case model's name, which a
    dimension with id ``case`` would otherwise get (that one is ``CaseDimensionJudgment``)."""
    name = f"{dim.id.title()}{suffix}"
    return f"{dim.id.title()}Dimension{suffix}" if name == CASE_MODEL_NAME else name


def literal_of(values: Sequence[Any]) -> TypeForm[Any]:
    """``Literal[*values]``: a closed set of ids or levels, known only at run time."""
    return cast("TypeForm[Any]", Literal[tuple(values)])


def list_of(model: type[BaseModel]) -> TypeForm[Any]:
    """``list[model]`` (the very same object) for a model class built at run time, which a type checker cannot
    take as a type argument."""
    return cast("TypeForm[Any]", GenericAlias(list, (model,)))


class Dimension(BaseModel):
    """A scored dimension of a rubric: the fields every kind has, and the kind's rules (module docstring). Validated
    as ``Dimension``, it comes back as its kind's class, which adds the kind's own fields."""

    # a number of a rubric is finite: `points: .nan` or `cap: .inf` is refused (docs/limits.md), naming the field
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    id: str
    name: str
    #: the kind's name (:func:`register_kind`); a kind's class narrows it to its own and gives it as the default
    kind: str
    max: Annotated[float, Field(gt=0)]
    #: the dimension's weight in the rubric's total (sum of weight x score)
    weight: Annotated[float, Field(ge=0, exclude_if=default_is(1))] = 1
    star_weight: Annotated[float, Field(ge=0)] = 0
    #: minimum score for 5/4/3/2 stars (a kind may require them: ``deductions`` does)
    stars: Annotated[dict[int, float] | None, Field(exclude_if=default_is(None))] = None
    description: str = ""

    #: Krippendorff's level of measurement of the values judges agree on (:mod:`~consensus_eval.analysis.reliability`)
    alpha_level: ClassVar[AlphaLevel] = "interval"
    #: the English text of each flag code the kind raises (:meth:`flags`; :class:`Flag`)
    flag_texts: ClassVar[Mapping[str, str]] = {}
    #: the kind's own catalogue keys, by language (``{"en": {"key": "text"}, "zh": {...}}``): words of its report
    #: block, review widget, flags and reasons that the report's and the review pages' catalogues do not have
    messages: ClassVar[Mapping[str, Mapping[str, str]]] = {}
    #: whether judges can be calibrated on errors planted for them to find (a suite of planted deductions)
    calibrates: ClassVar[bool] = False
    #: how its judgments are shown (:data:`VIEW_DEDUCTIONS`, :data:`VIEW_LEVELS`, :data:`VIEW_CRITERIA`): by default
    #: a level of a scale (a judgment's ``rating``; the scale is :attr:`anchors`)
    view: ClassVar[View] = VIEW_LEVELS
    #: whether a judge gives a verdict per criterion (a derived score's ``criteria``): the consensus keeps each
    #: judge's and the panel's verdict per criterion (``JudgeScore.criteria``, ``CaseConsensus.criteria``)
    by_criteria: ClassVar[bool] = False

    @model_validator(mode="wrap")
    @classmethod
    def _by_kind(cls, data: Any, handler: ModelWrapValidatorHandler[Dimension]) -> Dimension:
        """``Dimension.model_validate(data)``: the dimension as its kind's class (a kind's class validates itself)."""
        if cls is Dimension and isinstance(data, Mapping):
            kind = data.get("kind", DEFAULT_KIND)
            if not isinstance(kind, str):
                raise UsageError(f"kind must be the name of a rubric kind ({', '.join(kind_names())}), got {kind!r}")
            sub = kind_class(kind)
            for key in data:
                owner = next((k for k in _KINDS.items() if k is not sub and key in k.model_fields
                              and key not in sub.model_fields), None)
                if owner is not None:
                    raise UsageError(f"a {kind} dimension has no {key} ({key} is a field of kind: "
                                     f"{owner.model_fields['kind'].default})")
            return sub.model_validate(data)
        return handler(data)

    @model_validator(mode="after")
    def _check_stars(self) -> Dimension:
        if self.stars is not None:
            if sorted(self.stars) != [2, 3, 4, 5]:
                raise UsageError(f"stars must give thresholds for 5, 4, 3 and 2 stars, got keys {sorted(self.stars)}")
            thresholds = [self.stars[s] for s in (5, 4, 3, 2)]
            if not all(a > b for a, b in pairwise(thresholds)):
                raise UsageError(f"star thresholds must decrease strictly from 5 to 2 stars, got {thresholds}")
        return self

    # ------------------------------------------------------------------ the kind's rules (defaults)

    @property
    def low(self) -> float:
        """The lowest score the dimension can take (0 by default; a likert scale's lowest level)."""
        return 0.0

    def stars_for(self, score: float) -> int | None:
        """Stars for a score: the highest star whose threshold the score reaches, else 1; None for a
        dimension without ``stars``.

        Fractional scores (averaged runs) are compared as they are: 37.5 on accuracy is 4 stars.
        """
        if self.stars is None:
            return None
        for star in (5, 4, 3, 2):
            if score + EPS >= self.stars[star]:
                return star
        return 1

    def rubric_ids(self) -> Mapping[str, Sequence[str]]:
        """Ids of the dimension's that must be unique across the rubric, by what they name (``deductions``:
        ``{"category": [...]}``); none by default."""
        return {}

    @property
    def uses_case_criteria(self) -> bool:
        """Whether the dimension judges a case by the case's own ``criteria`` (a ``criteria`` dimension without
        criteria of its own); False by default."""
        return False

    @property
    def anchors(self) -> Mapping[int, str]:
        """A rated dimension's scale: each rating a judge may give (a judgment's ``rating``) with its anchor text;
        empty by default (a dimension not rated on a scale: its judgments carry no rating)."""
        return {}

    def judged_criteria(self, case_criteria: Sequence[Criterion] | None) -> list[Criterion]:
        """The criteria a case is judged by (a dimension that judges by criteria: its own, else the case's);
        none by default."""
        return []

    def verdict_items(self) -> list[str]:
        """The ids of the items the panel gives a verdict on in every case (consensus.csv writes a column for
        each): none by default; a ``criteria`` dimension's own criteria."""
        return []

    def case_key(self, case_criteria: Sequence[Criterion] | None) -> tuple[str, ...]:
        """What of a case the dimension's reply model depends on (the ids of the case's criteria, for a dimension
        that :attr:`uses_case_criteria`); ``()`` by default: one reply model for every case."""
        return ()

    def reply_model(self, case_criteria: Sequence[Criterion] | None = None) -> type[Reply]:
        """The pydantic model an LLM judge fills for this dimension (``case_criteria``: the case's criteria, for a
        dimension that :attr:`uses_case_criteria`): closed sets of the dimension's ids, checked as the rubric
        says, so a reply that breaks the rubric fails validation (and is re-asked). Every kind gives one."""
        raise NotImplementedError(f"rubric kind {self.kind!r} gives no reply model")

    def derive(self, judgment: AnyJudgment, case_criteria: Sequence[Criterion] | None = None) -> DimensionScore:
        """The dimension's score re-derived from a judgment, never taken from the judge's word. Raises
        ``ValueError`` for a judgment that does not fit the dimension. Every kind gives one."""
        raise NotImplementedError(f"rubric kind {self.kind!r} derives no score")

    def claims(self, judgment: AnyJudgment) -> dict[str, Any]:
        """The judge's own claims a derived score keeps beside it (compared, never trusted)."""
        return {"claimed_score": None if judgment.claimed_score is None else float(judgment.claimed_score),
                "claimed_stars": judgment.claimed_stars}

    def runs_disagree(self, scores: Sequence[float], config: EvalConfig) -> bool:
        """Whether one judge's runs on a case (their scores, two at least) disagree enough to ask it again
        (:mod:`~consensus_eval.execution.adaptive`); by default: any two scores differ."""
        return max(scores) != min(scores)

    def flags(self, judges: Sequence[JudgeScoreView], config: ConsensusConfig) -> list[Flag]:
        """The flags the judges' scores of this dimension on one case raise (beside the rubric's ``spread`` and
        ``star_gap``, which every kind has): codes of :attr:`flag_texts`; none by default."""
        return []

    def export_fields(self, judgment: AnyJudgment | None, score: DimensionScore | None, call: str,
                      where: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        """The kind's own fields of a call's line in judgments.jsonl (after its deductions and fixed penalties,
        which every line has), for a call whose ``judgment`` is None when it failed; ``where(quote_id)`` gives a
        quote's grounding fields (quote ids: ``{call}#e{i}`` for the judgment's i-th evidence quote, ``{call}#v{i}``
        for its i-th verdict's). None by default (a deductions call's line is what it was before kinds)."""
        return {}

    def agreement_values(self, cons: Sequence[ConsensusView], judges: Sequence[str],
                         case_criteria: Mapping[str, Sequence[Criterion] | None]) -> list[list[float | None]]:
        """One row per judge, the values Krippendorff's alpha of this dimension is computed on (at
        :attr:`alpha_level`); by default each case's mean score (None: the judge has none). ``case_criteria``: each
        case's own criteria, by case id."""
        return [[c.judges[j][self.id].mean for c in cons] for j in judges]

    @classmethod
    def review_reason(cls, flagged: Sequence[tuple[str, Flag, Sequence[str]]]) -> Reason | None:
        """The review reason of the kind's flags of one code on one case: ``flagged`` lists each flagged
        dimension's name, its flag and the items its judges split on (criterion ids; none for a kind without
        items), in rubric order. By default each dimension's name with the flag's figure, and the flags' texts.
        Its words in another language: the catalogue key ``why_<code>`` with ``subjects``, ``n`` (how many),
        ``value`` and ``limit``; ``r_<code>``, ``reason_<code>`` and ``con_why_<code>`` name it (:attr:`messages`)."""
        return Reason([f"{name} {fmt_short(f.value)}" for name, f, _ in flagged],
                      "; ".join(f.text for _, f, _ in flagged), limit=flagged[0][1].limit) if flagged else None

    @classmethod
    def report_block(cls, dims: Sequence[Self], run: RunView, kit: ReportKit[B]) -> B | None:
        """The kind's own section of a run's report, over ``dims`` (the rubric's dimensions of this kind, in
        order), or None (the default: no section beyond what every dimension gets)."""
        return None

    def reviewers_apart(self, gap: float, config: ConsensusConfig) -> bool:
        """Whether two reviewers' own scores of this dimension, ``gap`` apart, send the case to adjudication; by
        default: more than ``flag_spread_share`` (0.1) of the dimension's range, the spread flag's share."""
        return gap > config.flag_spread_share * (self.max - self.low) + EPS

    def item_errors(self, data: ErrorInput) -> list[ItemError]:
        """Each rater's misses and false alarms against the clinicians on this dimension of one case, item by item
        (:mod:`~consensus_eval.domain.kinds.item_errors`); none by default (the error analysis then gives the
        dimension's bias and MAE only)."""
        return []


K = TypeVar("K", bound=Dimension)


def _unknown(kind: str, known: list[str]) -> UsageError:
    return UsageError(f"unknown rubric kind {kind!r}; known kinds: {', '.join(known)} "
                      f"(an installed plugin can add more: entry-point group {RUBRIC_KIND_ENTRY_POINTS})")


class _Kinds(Registry[type[Dimension]]):
    def items(self) -> list[type[Dimension]]:
        """The kinds registered so far, in registration order."""
        return list(self._items.values())


_KINDS = _Kinds("rubric kind", RUBRIC_KIND_ENTRY_POINTS, _unknown)


def register_kind(cls: type[K]) -> type[K]:
    """Make ``kind: <cls's kind>`` valid in rubrics (``cls``: a :class:`Dimension` subclass whose ``kind`` is a
    ``Literal`` with the kind's name as its default); returns ``cls``, so it can decorate the class."""
    kind = cls.model_fields["kind"].default
    if not isinstance(kind, str) or not kind:
        raise UsageError(f"{cls.__name__}.kind needs a default naming the kind, e.g. kind: Literal['mine'] = 'mine'")
    unknown = set(cls.flag_texts) & {"spread", "star_gap"}
    if unknown:
        raise UsageError(f"{cls.__name__}.flag_texts redefines the rubric's own flags {sorted(unknown)}")
    _KINDS.register(kind, cls)
    _FLAG_TEXTS.update(cls.flag_texts)
    return cls


def kind_class(kind: str) -> type[Dimension]:
    """The class of rubric kind ``kind`` (installed plugins are loaded on the first unknown kind)."""
    return _KINDS.get(kind)


def of_kind(dimension: Dimension, kind: type[K]) -> K:
    """``dimension`` as a dimension of ``kind`` (its class), to read the kind's own fields: UsageError naming both
    kinds when it is of another one."""
    if not isinstance(dimension, kind):
        raise UsageError(f"dimension {dimension.id!r} is a {dimension.kind} dimension, not a "
                         f"{kind.model_fields['kind'].default} one")
    return dimension


def registered_kinds() -> list[type[Dimension]]:
    """The kinds registered so far, in registration order (the built-in ones first)."""
    return _KINDS.items()


def kind_messages(lang: str) -> dict[str, str]:
    """Every registered kind's own catalogue keys in ``lang`` (:attr:`Dimension.messages`)."""
    return {k: v for kind in _KINDS.items() for k, v in kind.messages.get(lang, {}).items()}


def kind_names() -> list[str]:
    """The names of the rubric kinds registered so far, sorted."""
    return _KINDS.names()
