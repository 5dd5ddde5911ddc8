"""The rubric as data: dimensions of any registered kind, each scored from what a judge itemizes.

A rubric is a YAML file (``configs/rubrics/*.yaml``) of dimensions. A dimension's ``kind`` says what a
judge returns for it and how its score is re-derived; each kind is one module of
:mod:`consensus_eval.domain.kinds` (its fields, its reply model, its score, its disagreement rules):

- ``deductions`` (the default): a maximum, star thresholds and categories; each category has a cap and a
  closed set of deduction types, each type a fixed number of points or a range. Score = maximum minus the
  capped deductions and fixed penalties.
- ``likert``: a scale of ``levels`` (consecutive integers, e.g. 1-5), each with its anchor text. The judge
  picks a level; the score is that level (``max`` is the top level).
- ``criteria``: criteria with signed points, from the rubric (``criteria``) or from each case's own
  ``criteria`` (HealthBench's shape). The judge marks each met or not met; the score is the met points
  over the total positive points, clipped to [0, 1] (``max`` is 1).

An installed package adds kinds (docs/kinds.md). ``total`` is the sum over dimensions of ``weight x score``
(``weight`` defaults to 1) and ``star_total = sum(stars x star_weight)`` (the medical_record rubric's star
formula; dimensions without ``stars`` have none). A dimension dumps its common fields, then its kind's; fields
left out while they hold their defaults, so a rubric written before kinds existed dumps (and fingerprints) to
the same bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Annotated, Protocol, TypeVar, overload

import yaml
from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, field_validator, model_validator

from consensus_eval._errors import InputError, UnknownName, UsageError, format_validation_error
from consensus_eval._resources import data_dir, resolve
from consensus_eval.domain.criterion import Criterion as Criterion
from consensus_eval.domain.kinds import Dimension as Dimension
from consensus_eval.domain.kinds.base import check_unique, default_is, of_kind
from consensus_eval.domain.kinds.deductions import (
    Category as Category,
    DeductionType as DeductionType,
    FixedPenalty as FixedPenalty,
)
from consensus_eval.domain.textio import load_yaml, read_bytes


class _Conversation(Protocol):
    """What :meth:`Rubric.conversation_text` reads of a case (a :class:`~consensus_eval.domain.cases.Case`;
    named structurally because cases read the rubric's criteria, not the other way round)."""

    def conversation_as_text(self, roles: Mapping[str, str] | None = None, separator: str = "：") -> str: ...


#: the languages a rubric may say it is written in: those of domain/locale/ (the words the tool reads)
RUBRIC_LANGUAGES = tuple(sorted(p.stem for p in (Path(__file__).parent / "locale").glob("*.json")))


K = TypeVar("K", bound=Dimension)


class _Frozen(BaseModel):
    # a number of a rubric is finite: `points: .nan` or `cap: .inf` is refused (docs/limits.md), naming the field
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


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
    speaker_separator: Annotated[str | None, Field(exclude_if=default_is(None))] = None
    #: the language the rubric is written in (``zh``, ``en``): the default language of the reports'
    #: headings and labels; display only, not part of :attr:`fingerprint`
    language: str | None = None
    #: how the record's section headings are written (:class:`Headings`); not part of :attr:`fingerprint`
    headings: Headings = Headings()
    #: each validated as its kind's class (:mod:`consensus_eval.domain.kinds`), and dumped with its kind's fields
    dimensions: list[SerializeAsAny[Dimension]] = Field(min_length=1)

    @field_validator("language")
    @classmethod
    def _known_language(cls, v: str | None) -> str | None:
        if v is not None and v not in RUBRIC_LANGUAGES:
            raise UsageError(f"unknown language {v!r}: a rubric is written in one of {', '.join(RUBRIC_LANGUAGES)} "
                             "(the languages whose words the tool reads, domain/locale/; its reports' default)")
        return v

    @model_validator(mode="after")
    def _check(self) -> Rubric:
        check_unique("dimension", (d.id for d in self.dimensions))
        across: dict[str, list[str]] = {}
        for d in self.dimensions:
            for what, ids in d.rubric_ids().items():
                across.setdefault(what, []).extend(ids)
        for what, ids in across.items():
            check_unique(what, ids)
        missing = [s for s in self.required_sections if s not in self.sections]
        if missing:
            raise UsageError(f"required_sections {missing} are not listed in sections")
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

    @overload
    def dimension(self, dimension_id: str) -> Dimension: ...

    @overload
    def dimension(self, dimension_id: str, kind: type[K]) -> K: ...

    def dimension(self, dimension_id: str, kind: type[Dimension] = Dimension) -> Dimension:
        """The dimension ``dimension_id`` (KeyError naming the rubric's when it has none); with ``kind`` (a kind's
        class: :mod:`consensus_eval.domain.kinds`), as a dimension of that kind (ValueError when it is another)."""
        try:
            dim = self.dimensions_by_id[dimension_id]
        except KeyError:
            raise UnknownName(f"rubric {self.id!r} has no dimension {dimension_id!r}; "
                           f"it has {list(self.dimensions_by_id)}") from None
        return of_kind(dim, kind)

    def dimensions_of(self, kind: type[K]) -> list[K]:
        """The rubric's dimensions of ``kind`` (a kind's class), in order."""
        return [d for d in self.dimensions if isinstance(d, kind)]

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
