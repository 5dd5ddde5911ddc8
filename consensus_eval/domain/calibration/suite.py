"""A calibration suite: cases with planted errors and what a judge should find in each.

A suite case is an ordinary :class:`~consensus_eval.domain.cases.Case` plus its expectation: the
errors planted in it (:class:`PlantedError`: dimension, category, type, points, and where the error
is, as character spans). A clean control has no planted error: a judge should deduct nothing.

A suite file is JSON Lines, one case a line: the fields of a cases file (``id``, ``conversation``,
``record``, ``important``, ``meta``) plus ``base`` (the clean case it was made from; optional) and
``expected`` (a list, empty for a clean control)::

    {"id": "base-01-dose_error-1", "conversation": "医生：...", "record": "主诉：...", "base": "base-01",
     "expected": [{"operator": "dose_error", "dimension": "accuracy", "category": "drugs",
                   "type": "dose_error", "points": 2,
                   "spans": [{"source": "record", "start": 97, "end": 100, "text": "850"}]}]}

``spans[].source`` is ``record`` (characters of the record) or ``conversation`` (characters of the
conversation as the prompt shows it: one ``医生：...`` line per turn, the rubric's role labels); an
omission (a drug dropped) points at the conversation, where the dropped fact is stated.
``text`` must equal that slice: the loader checks it. ``also`` (optional, the same shape) lists the other
side of the same error, which also earns credit: the conversation's statement of the fact a substitution
changed, the record section an omission left it out of. A fixed penalty is planted with ``penalty: true``
and its id as both ``category`` and ``type``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from consensus_eval._errors import InputError, format_validation_error
from consensus_eval.domain.cases import Case
from consensus_eval.domain.kinds.deductions import as_deductions
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.textio import jsonl_objects

SpanSource = Literal["record", "conversation"]


class PlantedSpan(BaseModel):
    """Where a planted error is: ``text == <source text>[start:end]`` (characters, end exclusive)."""

    model_config = ConfigDict(extra="forbid")

    source: SpanSource
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    text: str


class PlantedError(BaseModel):
    """One planted error and the deduction it should draw: ``type`` of ``category`` of ``dimension``,
    worth ``points`` (the rubric's points; the low end of a range). ``penalty``: a fixed penalty (its
    id is both ``category`` and ``type``). ``operator`` names the generator operator that planted it
    (free text in a user suite). A judge finds it when it deducts in ``category`` with evidence that
    overlaps one of ``spans`` (where the error is: the record's wrong text, or for an omission the
    conversation's statement of the dropped fact) or one of ``also`` (the other side of the same error:
    the conversation's statement of the fact a substitution changed, the record section an omission left
    it out of), and is not much longer than it (:mod:`consensus_eval.analysis.calibration`)."""

    model_config = ConfigDict(extra="forbid")

    operator: str = ""
    dimension: str
    category: str
    type: str
    points: float = Field(ge=0)
    penalty: bool = False
    spans: list[PlantedSpan] = Field(min_length=1)
    also: list[PlantedSpan] = []


class SuiteCase(BaseModel):
    """A case of a calibration suite: the case, the clean case it came from, and its planted errors
    (empty for a clean control)."""

    case: Case
    base: str | None = None
    expected: list[PlantedError] = []

    @property
    def clean(self) -> bool:
        """True for a clean control (nothing planted: any deduction is a false alarm)."""
        return not self.expected

    def to_line(self) -> dict[str, Any]:
        """The JSONL line of this case (the suite file format of the module docstring)."""
        line = self.case.model_dump(mode="json", exclude_defaults=True)
        line["conversation"] = self.case.model_dump(mode="json")["conversation"]
        if self.base is not None:
            line["base"] = self.base
        line["expected"] = [e.model_dump(mode="json", exclude_defaults=True) for e in self.expected]
        return line


def dumps_suite(cases: list[SuiteCase]) -> str:
    """The suite as JSONL text (one case a line, keys in a fixed order: byte-identical for equal suites)."""
    return "".join(json.dumps(c.to_line(), ensure_ascii=False) + "\n" for c in cases)


def check_expectation(case: Case, expected: list[PlantedError], rubric: Rubric) -> list[str]:
    """What is wrong with ``expected`` for ``case`` under ``rubric`` (``field: message`` strings)."""
    errors: list[str] = []
    conversation = case.conversation_as_text(rubric.roles)
    for i, e in enumerate(expected):
        where = f"expected[{i}]"
        try:
            dim = as_deductions(rubric.dimension(e.dimension))
        except KeyError:
            errors.append(f"{where}.dimension: the rubric {rubric.id!r} has no dimension {e.dimension!r}")
            continue
        except ValueError as err:
            errors.append(f"{where}.dimension: {err}")
            continue
        if e.penalty:
            if e.type not in dim.penalties_by_id:
                errors.append(f"{where}.type: dimension {dim.id!r} has no fixed penalty {e.type!r}")
        else:
            try:
                cat, _ = dim.find_type(e.type)
            except KeyError:
                errors.append(f"{where}.type: dimension {dim.id!r} has no deduction type {e.type!r}")
            else:
                if cat.id != e.category:
                    errors.append(f"{where}.category: type {e.type!r} belongs to category {cat.id!r}, "
                                  f"not {e.category!r}")
        for field, spans in (("spans", e.spans), ("also", e.also)):
            for j, s in enumerate(spans):
                text = case.record if s.source == "record" else conversation
                if not 0 <= s.start <= s.end <= len(text):
                    errors.append(f"{where}.{field}[{j}]: [{s.start}, {s.end}) is outside the {s.source} "
                                  f"({len(text)} characters)")
                elif text[s.start:s.end] != s.text:
                    errors.append(f"{where}.{field}[{j}].text: {s.text!r} is not the {s.source} at "
                                  f"[{s.start}, {s.end}) (which reads {text[s.start:s.end]!r})")
    return errors


def load_suite(path: str | Path, rubric: Rubric) -> list[SuiteCase]:
    """Load a suite file (module docstring) checked against ``rubric``.

    Every line is checked; any error raises :class:`InputError` listing them all as
    ``file:line: field: message``. Blank lines are ignored; duplicate ids are errors.
    """
    p = Path(path)
    errors: list[str] = []
    out: list[SuiteCase] = []
    seen: dict[str, int] = {}
    for where, lineno, data in jsonl_objects(p, errors, file="a calibration suite", reading="the calibration suite",
                                             item="a suite case"):
        if "expected" not in data:
            errors.append(f"{where}: expected: missing (a list of planted errors; [] for a clean control)")
            continue
        payload = {"base": data.pop("base", None), "expected": data.pop("expected"), "case": data}
        try:
            sc = SuiteCase.model_validate(payload)
        except ValidationError as e:
            detail = format_validation_error(e, payload).strip().replace("\n  ", "; ")
            errors.append(f"{where}: {detail.replace('case.', '')}")
            continue
        problems = check_expectation(sc.case, sc.expected, rubric)
        if problems:
            errors.extend(f"{where}: {m}" for m in problems)
            continue
        if sc.case.id in seen:
            errors.append(f"{where}: id: duplicate case id {sc.case.id!r} (first on line {seen[sc.case.id]})")
            continue
        seen[sc.case.id] = lineno
        out.append(sc)
    if errors:
        raise InputError(f"{len(errors)} invalid line(s) in the calibration suite {p}:\n" + "\n".join(errors))
    if not out:
        raise InputError(f"{p}: no cases (the calibration suite is empty)")
    return out
