"""The rubric as data: dimensions of three kinds, each scored from what a judge itemizes.

A rubric is a YAML file (``configs/rubrics/*.yaml``) of dimensions. A dimension's ``kind`` says what a
judge returns for it and how its score is re-derived (:mod:`consensus_eval.domain.scoring`):

- ``deductions`` (the default): a maximum, star thresholds and categories; each category has a cap and a
  closed set of deduction types, each type a fixed number of points or a range. Score = maximum minus the
  capped deductions and fixed penalties.
- ``likert``: a scale of ``levels`` (consecutive integers, e.g. 1-5), each with its anchor text. The judge
  picks a level; the score is that level (``max`` is the top level).
- ``criteria``: criteria with signed points, from the rubric (``criteria``) or from each case's own
  ``criteria`` (HealthBench's shape). The judge marks each met or not met; the score is the met points
  over the total positive points, clipped to [0, 1] (``max`` is 1).

``total`` is the sum over dimensions of ``weight x score`` (``weight`` defaults to 1) and
``star_total = sum(stars x star_weight)`` (the medical_record rubric's star formula; dimensions without
``stars`` have none).
The fields a kind adds are left out of a dump when they hold their defaults, so a rubric written before
kinds existed dumps (and fingerprints) to the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from consensus_eval._errors import InputError, UnknownName, UsageError, format_validation_error
from consensus_eval._resources import data_dir, resolve
from consensus_eval.domain.sets import duplicates
from consensus_eval.domain.textio import load_yaml, read_bytes


class _Conversation(Protocol):
    """What :meth:`Rubric.conversation_text` reads of a case (a :class:`~consensus_eval.domain.cases.Case`;
    named structurally because cases read the rubric's criteria, not the other way round)."""

    def conversation_as_text(self, roles: Mapping[str, str] | None = None, separator: str = "：") -> str: ...

_EPS = 1e-9


#: the languages a rubric may say it is written in: those of domain/locale/ (the words the tool reads)
RUBRIC_LANGUAGES = tuple(sorted(p.stem for p in (Path(__file__).parent / "locale").glob("*.json")))


class _Frozen(BaseModel):
    # a number of a rubric is finite: `points: .nan` or `cap: .inf` is refused (issue 34), naming the field
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
            raise ValueError(f"points must be > 0 and a range must be [low, high] with low <= high, got {v!r}")
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
        return self.low - _EPS <= points <= self.high + _EPS

    def points_text(self) -> str:
        """Human text of the points, e.g. ``"2"`` or ``"1-2"``."""
        return f"{_fmt(self.low)}-{_fmt(self.high)}" if self.is_range else _fmt(self.low)


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


#: what a judge returns for a dimension and how its score is derived (module docstring)
DimensionKind = Literal["deductions", "likert", "criteria"]


class Criterion(_Frozen):
    """One criterion of a ``criteria`` dimension (HealthBench's shape): ``points`` > 0 for what a good answer
    does, < 0 for what it must not do (met means the fault is there)."""

    id: Annotated[str, Field(min_length=1)]
    text: Annotated[str, Field(min_length=1)]
    points: float
    tags: list[str] = []

    @field_validator("points")
    @classmethod
    def _nonzero(cls, v: float) -> float:
        if v == 0:
            raise ValueError("a criterion's points must not be 0 (positive: to be met; negative: a fault)")
        return v


def _default(value: Any) -> Any:
    """``exclude_if`` for a field a kind adds: drop it from dumps while it holds its default."""
    return lambda v: v == value


class Dimension(_Frozen):
    """A scored dimension of one :data:`DimensionKind` (module docstring).

    ``deductions``: ``max`` points, minus capped category deductions and fixed penalties. ``likert``: the
    level a judge picks among ``levels``. ``criteria``: met points over positive points, in [0, 1].
    """

    id: str
    name: str
    kind: Annotated[DimensionKind, Field(exclude_if=_default("deductions"))] = "deductions"
    max: Annotated[float, Field(gt=0)]
    #: the dimension's weight in the rubric's total (sum of weight x score)
    weight: Annotated[float, Field(ge=0, exclude_if=_default(1))] = 1
    star_weight: Annotated[float, Field(ge=0)] = 0
    #: minimum score for 5/4/3/2 stars; required for ``deductions``, optional for the other kinds
    stars: Annotated[dict[int, float] | None, Field(exclude_if=_default(None))] = None
    description: str = ""
    categories: Annotated[list[Category], Field(exclude_if=_default([]))] = []
    fixed_penalties: list[FixedPenalty] = []
    #: ``likert``: level -> its anchor text, consecutive integer levels (``{1: "not at all", ..., 5: "extremely"}``)
    levels: Annotated[dict[int, str], Field(exclude_if=_default({}))] = {}
    #: ``criteria``: the rubric's own criteria; empty: each case brings its ``criteria``
    criteria: Annotated[list[Criterion], Field(exclude_if=_default([]))] = []

    @model_validator(mode="before")
    @classmethod
    def _derived_max(cls, data: Any) -> Any:
        """A likert dimension's ``max`` is its top level and a criteria dimension's is 1, unless given."""
        if isinstance(data, dict) and "max" not in data:
            if data.get("kind") == "likert":
                try:
                    return {**data, "max": max(int(k) for k in data["levels"])}
                except (KeyError, TypeError, ValueError):   # no levels, or not integers: their own error says so,
                    return {**data, "max": 1}                # with no "max: Field required" beside it
            if data.get("kind") == "criteria":
                return {**data, "max": 1}
        return data

    @model_validator(mode="after")
    def _check(self) -> Dimension:
        if self.kind != "deductions":
            return self._check_other_kind()
        if not self.categories:
            raise ValueError("a deductions dimension needs categories (at least one)")
        if self.stars is None:
            raise ValueError("a deductions dimension needs stars: thresholds for 5, 4, 3 and 2 stars")
        caps = sum(c.cap for c in self.categories)
        if abs(caps - self.max) > _EPS:
            listing = " + ".join(f"{c.id} {_fmt(c.cap)}" for c in self.categories)
            raise ValueError(f"category caps sum to {_fmt(caps)} ({listing}), not the maximum {_fmt(self.max)}")
        if sorted(self.stars) != [2, 3, 4, 5]:
            raise ValueError(f"stars must give thresholds for 5, 4, 3 and 2 stars, got keys {sorted(self.stars)}")
        thresholds = [self.stars[s] for s in (5, 4, 3, 2)]
        if not all(a > b for a, b in pairwise(thresholds)):
            raise ValueError(f"star thresholds must decrease strictly from 5 to 2 stars, got {thresholds}")
        if thresholds[0] > self.max or thresholds[-1] < 0:
            raise ValueError(f"star thresholds {thresholds} must lie within 0..{_fmt(self.max)}")
        _unique("category", (c.id for c in self.categories))
        _unique("deduction type", (t.id for c in self.categories for t in c.types))
        _unique("fixed penalty", (p.id for p in self.fixed_penalties))
        return self

    def _check_other_kind(self) -> Dimension:
        if self.categories or self.fixed_penalties:
            raise UsageError(f"a {self.kind} dimension has no categories or fixed_penalties (those are for "
                             f"kind: deductions)")
        if self.kind == "likert":
            if self.criteria:
                raise UsageError("a likert dimension has levels, not criteria")
            levels = sorted(self.levels)
            if len(levels) < 2 or levels != list(range(levels[0], levels[-1] + 1)):
                raise UsageError(f"a likert dimension needs levels: at least two consecutive integers with their "
                                 f"anchor text (1: ..., 5: ...), got {levels}")
            if abs(self.max - levels[-1]) > _EPS:
                raise UsageError(f"a likert dimension's max is its top level {levels[-1]}, got {_fmt(self.max)}")
        else:
            if self.levels:
                raise UsageError("a criteria dimension has criteria, not levels")
            if abs(self.max - 1) > _EPS:
                raise UsageError(f"a criteria dimension scores 0-1 (met points over positive points): max is 1, "
                                 f"got {_fmt(self.max)}")
            _unique("criterion", (c.id for c in self.criteria))
            if self.criteria and not any(c.points > 0 for c in self.criteria):
                raise UsageError("a criteria dimension needs at least one criterion with positive points")
        if self.stars is not None:
            thresholds = [self.stars.get(s) for s in (5, 4, 3, 2)]
            if sorted(self.stars) != [2, 3, 4, 5]:
                raise UsageError(f"stars must give thresholds for 5, 4, 3 and 2 stars, got keys {sorted(self.stars)}")
            if not all(a > b for a, b in pairwise(t for t in thresholds if t is not None)):
                raise UsageError(f"star thresholds must decrease strictly from 5 to 2 stars, got {thresholds}")
        return self

    @property
    def level_range(self) -> tuple[int, int]:
        """A likert dimension's lowest and highest level (``(1, 5)``); ValueError for another kind."""
        if self.kind != "likert":
            raise UsageError(f"dimension {self.id!r} is a {self.kind} dimension, it has no levels")
        return min(self.levels), max(self.levels)

    @property
    def low(self) -> float:
        """The lowest score the dimension can take: 0, or a likert scale's lowest level."""
        return float(min(self.levels)) if self.kind == "likert" else 0.0

    @cached_property
    def categories_by_id(self) -> dict[str, Category]:
        return {c.id: c for c in self.categories}

    @cached_property
    def penalties_by_id(self) -> dict[str, FixedPenalty]:
        return {p.id: p for p in self.fixed_penalties}

    def find_type(self, type_id: str) -> tuple[Category, DeductionType]:
        """The category and deduction type with id ``type_id`` (KeyError if none)."""
        for c in self.categories:
            if type_id in c.types_by_id:
                return c, c.types_by_id[type_id]
        raise UnknownName(type_id)

    def stars_for(self, score: float) -> int | None:
        """Stars for a score: the highest star whose threshold the score reaches, else 1; None for a
        dimension without ``stars``.

        Fractional scores (averaged runs) are compared as they are: 37.5 on accuracy is 4 stars.
        """
        if self.stars is None:
            return None
        for star in (5, 4, 3, 2):
            if score + _EPS >= self.stars[star]:
                return star
        return 1


class Headings(_Frozen):
    """How a record's section headings are written, beside the rubric's ``sections``: ``aliases`` (a
    heading as written -> the section it is: ``既往病史: 既往史``), ``other`` (headings that end a section
    without being one: ``体格检查``), ``numerals`` (the characters of the language's own numbering of
    headings, ``一二三``, beside ``1.``), ``sentence_ends`` (after which a heading may start inside a line).
    Reading data, not what a judge is asked: left out of :attr:`Rubric.fingerprint`."""

    aliases: dict[str, str] = {}
    other: list[str] = []
    numerals: str = ""
    sentence_ends: str = ".;!?"


class Rubric(_Frozen):
    """A scoring rubric: dimensions with categories, deduction types, caps and star thresholds."""

    id: str
    name: str
    version: str = "1"
    prompts: str | None = None
    sections: list[str] = []
    required_sections: list[str] = []
    #: how a conversation's speakers are written out (``doctor: 医生``); roles not listed as given
    roles: dict[str, str] = {}
    #: what follows a speaker's label in a conversation given as turns (``医生：...``, ``Clinician: ...``);
    #: unset: ``：`` for a rubric in Chinese (``language: zh`` or none given), ``": "`` for any other language
    speaker_separator: Annotated[str | None, Field(exclude_if=_default(None))] = None
    #: the language the rubric is written in (``zh``, ``en``): the default language of the reports'
    #: headings and labels; display only, not part of :attr:`fingerprint`
    language: str | None = None
    #: how the record's section headings are written (:class:`Headings`); not part of :attr:`fingerprint`
    headings: Headings = Headings()
    dimensions: list[Dimension] = Field(min_length=1)

    @field_validator("language")
    @classmethod
    def _known_language(cls, v: str | None) -> str | None:
        if v is not None and v not in RUBRIC_LANGUAGES:
            raise ValueError(f"unknown language {v!r}: a rubric is written in one of {', '.join(RUBRIC_LANGUAGES)} "
                             "(the languages whose words the tool reads, domain/locale/; its reports' default)")
        return v

    @model_validator(mode="after")
    def _check(self) -> Rubric:
        _unique("dimension", (d.id for d in self.dimensions))
        _unique("category", (c.id for d in self.dimensions for c in d.categories))
        missing = [s for s in self.required_sections if s not in self.sections]
        if missing:
            raise ValueError(f"required_sections {missing} are not listed in sections")
        return self

    @cached_property
    def fingerprint(self) -> str:
        """A hash of the rubric's content: part of every request hash, so edits invalidate results.
        ``language`` and ``headings`` are left out: they change how reports are labelled and records read,
        not what a judge is asked (a judge that reads records has its own version in the request hash)."""
        return hashlib.sha256(self.model_dump_json(exclude={"language", "headings"}).encode()).hexdigest()[:16]

    @property
    def separator(self) -> str:
        """The text after a speaker's label in a conversation (:attr:`speaker_separator`, else by language)."""
        if self.speaker_separator is not None:
            return self.speaker_separator
        return "：" if self.language in (None, "zh") else ": "

    def conversation_text(self, case: _Conversation) -> str:
        """``case``'s conversation as a judge reads it and as quotes are grounded in: one line per turn, the
        speaker written by :attr:`roles`, then :attr:`separator`, then what was said."""
        return case.conversation_as_text(self.roles, self.separator)

    @cached_property
    def dimensions_by_id(self) -> dict[str, Dimension]:
        return {d.id: d for d in self.dimensions}

    def dimension(self, dimension_id: str) -> Dimension:
        try:
            return self.dimensions_by_id[dimension_id]
        except KeyError:
            raise UnknownName(f"rubric {self.id!r} has no dimension {dimension_id!r}; "
                           f"it has {list(self.dimensions_by_id)}") from None

    @property
    def max_total(self) -> float:
        """The highest total: sum of weight x max."""
        return sum(d.weight * d.max for d in self.dimensions)

    def total(self, scores: Mapping[str, float]) -> float:
        """The rubric's total of dimension ``scores``: sum of weight x score (a plain sum when every weight is 1)."""
        return sum(scores[d.id] * d.weight for d in self.dimensions if d.id in scores)

    @property
    def kinds(self) -> set[str]:
        """The kinds of the rubric's dimensions."""
        return {d.kind for d in self.dimensions}

    def star_total(self, stars: Mapping[str, float]) -> float:
        """The seed's star formula: sum over dimensions of stars x star_weight."""
        return sum(stars[d.id] * d.star_weight for d in self.dimensions if d.id in stars)

    def total_stars(self, scores: dict[str, float]) -> dict[str, int | None]:
        return {d: self.dimension(d).stars_for(s) for d, s in scores.items()}


def _unique(what: str, ids: Iterable[str]) -> None:
    dup = sorted(duplicates(ids))
    if dup:
        raise UsageError(f"duplicate {what} id(s): {', '.join(dup)}")


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def is_rubric_path(ref: str | Path) -> bool:
    """Whether a rubric reference is a path (it has a folder separator or a ``.yaml``/``.yml`` suffix, or is a
    :class:`~pathlib.Path`) rather than the name of a bundled rubric (``medical_record``, ``pdqi9``)."""
    text = str(ref)
    return isinstance(ref, Path) or "/" in text or "\\" in text or Path(text).suffix.lower() in (".yaml", ".yml")


def rubric_file(ref: str | Path) -> Path:
    """The file a rubric reference loads: a path as written (relative to the working directory; a bundled
    ``configs/rubrics/...`` path is found from anywhere), a name always the bundled rubric of that name, never a
    file or folder of the working directory. A name that a rubric file in the working directory also answers to
    (``pdqi9.yaml`` beside ``rubric: pdqi9``) is refused naming both, as is a name no bundled rubric has.

    Raises:
        InputError: the reference is ambiguous, or names no rubric.
    """
    if is_rubric_path(ref):
        p = resolve(Path(ref), "configs")
        if not p.is_file():
            raise InputError(f"{ref}: rubric file not found" + (" (it is a folder)" if p.is_dir() else ""))
        return p
    name = str(ref)
    bundled_dir = data_dir("configs") / "rubrics"
    bundled = bundled_dir / f"{name}.yaml"
    local = [q for q in (Path(f"{name}.yaml"), Path(f"{name}.yml")) if q.is_file()]
    if bundled.is_file() and local:
        raise InputError(f"rubric: {name} is ambiguous: it names the bundled rubric {bundled} and the working "
                         f"directory has {local[0]}; write `rubric: ./{local[0]}` for your file, or rename it to use "
                         f"the bundled one")
    if not bundled.is_file():
        known = ", ".join(sorted(q.stem for q in bundled_dir.glob("*.yaml")))
        mine = f"; for your file write a path: `rubric: ./{local[0]}`" if local else \
            "; for a rubric file of your own write its path (`rubric: ./my_rubric.yaml`)"
        raise InputError(f"{name}: rubric file not found: no bundled rubric is named {name!r} "
                         f"(bundled: {known}){mine}")
    return bundled


def load_rubric(path: str | Path) -> Rubric:
    """Load and validate a rubric YAML file: a bundled rubric by name, or a file by path (:func:`rubric_file`).

    ``load_rubric("medical_record")`` and ``load_rubric("configs/rubrics/medical_record.yaml")``
    both work after a non-editable install. Errors name the file and the field.
    """
    p = rubric_file(path)
    try:
        data = load_yaml(read_bytes(p, "rubric").decode("utf-8"), p)  # duplicate keys, alias bombs refused
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"{p}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise InputError(f"{p}: a rubric must be a mapping with id, name and dimensions")
    try:
        return Rubric.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{p}: invalid rubric:\n{format_validation_error(e, data)}") from None
