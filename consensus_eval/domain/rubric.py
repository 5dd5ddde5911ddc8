"""The rubric as data: dimensions, categories with caps, deduction types, star thresholds.

A rubric is a YAML file (``configs/rubrics/*.yaml``): dimensions, each with a maximum, star
thresholds and categories; each category has a cap and closed set of deduction types, each type a
fixed number of points or a range. Scores are re-derived from judgments in
:mod:`consensus_eval.domain.scoring`; ``total`` is the sum of dimension scores and
``star_total = sum(stars x star_weight)`` (the seed's star formula).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from consensus_eval._errors import InputError, format_validation_error
from consensus_eval._resources import resolve
from consensus_eval.domain.textio import load_yaml

_EPS = 1e-9


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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
    """A penalty taken outside the category caps (seed 000: diabetes in past history, -10)."""

    id: str
    name: str
    points: Annotated[float, Field(gt=0)]
    description: str = ""


class Dimension(_Frozen):
    """A scored dimension: ``max`` points, minus capped category deductions and fixed penalties."""

    id: str
    name: str
    max: Annotated[float, Field(gt=0)]
    star_weight: Annotated[float, Field(ge=0)] = 0
    stars: dict[int, float]
    description: str = ""
    categories: list[Category] = Field(min_length=1)
    fixed_penalties: list[FixedPenalty] = []

    @model_validator(mode="after")
    def _check(self) -> Dimension:
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
        raise KeyError(type_id)

    def stars_for(self, score: float) -> int:
        """Stars for a score: the highest star whose threshold the score reaches, else 1.

        Fractional scores (averaged runs) are compared as they are: 37.5 on accuracy is 4 stars.
        """
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
    #: the language the rubric is written in (``zh``, ``en``): the default language of the reports'
    #: headings and labels; display only, not part of :attr:`fingerprint`
    language: str | None = None
    #: how the record's section headings are written (:class:`Headings`); not part of :attr:`fingerprint`
    headings: Headings = Headings()
    dimensions: list[Dimension] = Field(min_length=1)

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

    @cached_property
    def dimensions_by_id(self) -> dict[str, Dimension]:
        return {d.id: d for d in self.dimensions}

    def dimension(self, dimension_id: str) -> Dimension:
        try:
            return self.dimensions_by_id[dimension_id]
        except KeyError:
            raise KeyError(f"rubric {self.id!r} has no dimension {dimension_id!r}; "
                           f"it has {list(self.dimensions_by_id)}") from None

    @property
    def max_total(self) -> float:
        return sum(d.max for d in self.dimensions)

    def star_total(self, stars: Mapping[str, float]) -> float:
        """The seed's star formula: sum over dimensions of stars x star_weight."""
        return sum(stars[d.id] * d.star_weight for d in self.dimensions if d.id in stars)

    def total_stars(self, scores: dict[str, float]) -> dict[str, int]:
        return {d: self.dimension(d).stars_for(s) for d, s in scores.items()}


def _unique(what: str, ids: Iterable[str]) -> None:
    seen: set[str] = set()
    dup = sorted({i for i in ids if i in seen or seen.add(i)})  # type: ignore[func-returns-value]
    if dup:
        raise ValueError(f"duplicate {what} id(s): {', '.join(dup)}")


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def load_rubric(path: str | Path) -> Rubric:
    """Load and validate a rubric YAML file; bundled rubrics are found by name or relative path.

    ``load_rubric("medical_record")`` and ``load_rubric("configs/rubrics/medical_record.yaml")``
    both work after a non-editable install. Errors name the file and the field.
    """
    p = Path(path)
    if p.suffix not in (".yaml", ".yml") and not p.exists():
        p = Path("configs/rubrics") / f"{path}.yaml"
    p = resolve(p, "configs")
    if not p.is_file():
        raise InputError(f"{path}: rubric file not found")
    try:
        data = load_yaml(p.read_text(encoding="utf-8"), p)  # duplicate keys, alias bombs refused, naming the line
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"{p}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise InputError(f"{p}: a rubric must be a mapping with id, name and dimensions")
    try:
        return Rubric.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{p}: invalid rubric:\n{format_validation_error(e, data)}") from None
