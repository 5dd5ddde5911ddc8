"""Cases to score, loaded from JSONL (one case a line) with errors naming file, line and field.

A line: ``{"id": ..., "conversation": "text" | [{"role": ..., "text": ...}, ...], "record": "...",
"important": false, "system": "scribe-a", "source": "conv-17", "meta": {...}, "criteria": [...]}``. ``record`` is the
AI-generated summary being scored; ``system`` (optional) names what wrote it (a model, a prompt
version), so systems can be compared; ``source`` (optional) names the source conversation, so the same
conversation written up by several systems is compared pair by pair (without it, cases of different
systems with the same conversation text are paired). ``criteria`` (optional): the case's own criteria
``[{"id", "text", "points"}]`` for a rubric's ``criteria`` dimension that has none of its own (HealthBench's
shape); a judge reads them, so they are part of the request hash. ``meta`` is passed through untouched. None of
``system``, ``source``, ``meta`` or ``important`` reaches a judge or a request hash: a judge scores the
record blind to the system that wrote it.

Encoding: a cases file is JSON Lines, and JSON is UTF-8 (RFC 8259), so it is read as UTF-8 only (a
byte-order mark at the start is tolerated); a line that is not UTF-8 is an error naming the file, the
line and the byte, never guessed at (unlike CSV labels, which may be GBK: see
:mod:`consensus_eval.domain.textio`). A case id may not hold control characters or line breaks: ids
are written into CSV files, reports and the store.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from consensus_eval._errors import InputError, format_validation_error
from consensus_eval.domain.criterion import Criterion
from consensus_eval.domain.sets import duplicates
from consensus_eval.domain.textio import jsonl_objects


class Turn(BaseModel):
    """One turn of a conversation: who spoke (``doctor``, ``patient``, ...) and what was said."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(min_length=1)
    text: str


class Case(BaseModel):
    """A case to score: the source conversation and the record generated from it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    conversation: str | list[Turn]
    record: str
    important: StrictBool = False
    system: str | None = Field(default=None, min_length=1, max_length=200)
    source: str | None = Field(default=None, min_length=1, max_length=500)
    meta: dict[str, Any] = {}
    #: the case's own criteria, for a ``criteria`` dimension without criteria of its own (module docstring)
    criteria: Annotated[list[Criterion] | None, Field(exclude_if=lambda v: v is None)] = None

    @field_validator("criteria")
    @classmethod
    def _criteria_ids(cls, v: list[Criterion] | None) -> list[Criterion] | None:
        if v is not None:
            if dup := duplicates(c.id for c in v):
                raise ValueError(f"criterion id {dup[0]!r} is given twice")
            if not any(c.points > 0 for c in v):
                raise ValueError("the criteria need at least one criterion with positive points")
        return v

    @field_validator("id", mode="before")
    @classmethod
    def _id_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("id")
    @classmethod
    def _id_printable(cls, v: str) -> str:
        for i, ch in enumerate(v):
            if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
                raise ValueError(f"the case id {v!r} holds a control character or line break ({ch!r} at position "
                                 f"{i}); ids are written into CSV files and reports, use printable characters")
        if not v.strip():
            raise ValueError("the case id is blank")
        return v

    @field_validator("record")
    @classmethod
    def _record_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the record to score is empty")
        return v

    @field_validator("conversation")
    @classmethod
    def _conversation_not_empty(cls, v: str | list[Turn]) -> str | list[Turn]:
        if (isinstance(v, str) and not v.strip()) or (isinstance(v, list) and not v):
            raise ValueError("the conversation is empty")
        return v

    def conversation_as_text(self, roles: Mapping[str, str] | None = None, separator: str = "：") -> str:
        """The conversation as plain text, one ``label<separator>text`` line per turn (``医生：...``).

        ``roles`` maps a turn's role to its label (the rubric's ``roles``, e.g. ``doctor: 医生``);
        a role it does not list is written as given. ``separator`` follows the label: the rubric's
        :attr:`~consensus_eval.domain.rubric.Rubric.speaker_separator` (use
        :meth:`~consensus_eval.domain.rubric.Rubric.conversation_text`, which passes both). A conversation
        given as text is returned as is.
        """
        if isinstance(self.conversation, str):
            return self.conversation
        names = roles or {}
        return "\n".join(f"{names.get(t.role, t.role)}{separator}{t.text}" for t in self.conversation)

    @property
    def size(self) -> int:
        """Characters of the record and the conversation: what a judge's maximum case size counts."""
        turns = self.conversation if isinstance(self.conversation, str) else "".join(t.text for t in self.conversation)
        return len(self.record) + len(turns)

    @property
    def content(self) -> dict[str, Any]:
        """What a judge reads of the case (the conversation and the record), for request hashes."""
        content = {"conversation": self.model_dump(mode="json")["conversation"], "record": self.record}
        if self.criteria is not None:
            content["criteria"] = [c.model_dump(mode="json") for c in self.criteria]
        return content


@dataclass
class LoadResult:
    """Cases that loaded, and the errors of the lines that did not (``file:line: field: message``)."""

    cases: list[Case] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class CaseFields(BaseModel):
    """Which column of a CSV or Excel cases file holds each field of a case (the config's ``fields``):
    ``fields: {id: 病历号, record: 病历摘要, conversation: 对话}``. By default a column is named as its
    field. Columns that are no field go to the case's ``meta``."""

    model_config = ConfigDict(extra="forbid")

    id: str = "id"
    record: str = "record"
    conversation: str = "conversation"
    important: str = "important"
    system: str = "system"
    source: str = "source"


#: file name endings read as a table (one case a row, a header row first) rather than JSON Lines
CSV_SUFFIXES = (".csv", ".tsv")
XLSX_SUFFIXES = (".xlsx", ".xlsm")


def load_cases(path: str | Path, *, skip_invalid: bool = False, fields: CaseFields | None = None,
               encoding: str | None = None) -> LoadResult:
    """Load cases from a JSONL file, or from a CSV or Excel (.xlsx) sheet: one case a row under a header
    row, the columns named by ``fields`` (:class:`CaseFields`; CSV in UTF-8 with or without Excel's BOM,
    UTF-16, or GBK, or ``encoding``: :func:`~consensus_eval.domain.textio.read_text`).

    Every line (row) is checked; without ``skip_invalid`` any error raises :class:`InputError` listing all
    of them (nothing runs on a partly bad file). With it, the valid lines load and the errors are
    returned beside them (possibly none: the caller decides whether that is a run). Blank lines are
    ignored; duplicate ids are errors. A JSONL file must be UTF-8 (a BOM is tolerated). Errors name the
    file, the line (row) and the field (for a sheet, also its column).
    """
    p = Path(path)
    if p.suffix.lower() in CSV_SUFFIXES + XLSX_SUFFIXES:
        return _finish(p, _table_cases(p, fields or CaseFields(), encoding), skip_invalid)
    result = LoadResult()
    seen: dict[str, int] = {}
    for where, lineno, data in jsonl_objects(p, result.errors):
        try:
            case = Case.model_validate(data)
        except ValidationError as e:
            detail = format_validation_error(e, data).strip().replace("\n  ", "; ")
            result.errors.append(f"{where}: {detail}")
            continue
        if case.id in seen:
            result.errors.append(f"{where}: id: duplicate case id {case.id!r} (first on line {seen[case.id]})")
            continue
        seen[case.id] = lineno
        result.cases.append(case)
    return _finish(p, result, skip_invalid)


def _finish(p: Path, result: LoadResult, skip_invalid: bool) -> LoadResult:
    if result.errors and not skip_invalid:
        listing = "\n".join(result.errors)
        if any(": not UTF-8 (byte" in e for e in result.errors):
            listing += "\n(a cases file is JSON Lines and must be saved as UTF-8)"
        raise InputError(f"{len(result.errors)} invalid line(s) in {p}; fix them or pass --skip-invalid:\n{listing}")
    if not result.cases and not result.errors:
        raise InputError(f"{p}: no cases (the file is empty)")
    return result


def _table_cases(p: Path, fields: CaseFields, encoding: str | None) -> LoadResult:
    """The cases of a CSV or Excel sheet (:func:`load_cases`)."""
    from consensus_eval.domain.textio import csv_records, read_text, unguard, xlsx_records
    from consensus_eval.domain.words import normal, spelled, words

    if p.is_dir():
        raise InputError(f"{p}: is a folder, not a cases file")
    if p.suffix.lower() in XLSX_SUFFIXES:
        if not p.exists():
            raise InputError(f"{p}: cases file not found")
        rows = xlsx_records(p)
    else:
        rows = csv_records(p, read_text(p, encoding, "cases"))
    result = LoadResult()
    if not rows:
        return result
    header = [h.strip() for h in rows[0][1]]
    column = {name: i for i, name in reversed(list(enumerate(header))) if name}
    wanted = {f: str(col).strip() for f, col in fields.model_dump().items()}
    missing = [f"{col!r} (fields.{f})" for f in ("id", "record", "conversation") if (col := wanted[f]) not in column]
    if missing:
        raise InputError(f"{p}:{rows[0][0]}: the header has no column {', '.join(missing)}; it has: "
                         f"{', '.join(repr(h) for h in header if h)}. Name the columns in the config's `fields` "
                         "(e.g. fields: {id: record_no, record: summary, conversation: dialogue})")
    taken = {column[c] for c in wanted.values() if c in column}
    seen: dict[str, int] = {}
    for row, raw in rows[1:]:
        where = f"{p}:{row}"
        cells = [unguard(c.strip()) for c in raw] + [""] * (len(header) - len(raw))
        data: dict[str, Any] = {}
        bad = []
        for f, col in wanted.items():
            if col not in column:
                continue
            value = cells[column[col]]
            if f == "important":
                said = words("yes_no").get(normal(value))
                if said is None:
                    bad.append(f"{where}: column {col!r} (important): {value!r} is not yes/no "
                               f"({', '.join('/'.join(spelled('yes_no', v)) for v in ('yes', 'no'))})")
                data[f] = said == "yes"
            elif value or f in ("id", "record", "conversation"):
                data[f] = value
        meta = {header[i]: cells[i] for i in range(len(header)) if i not in taken and header[i] and cells[i]}
        if meta:
            data["meta"] = meta
        if bad:
            result.errors.extend(bad)
            continue
        try:
            case = Case.model_validate(data)
        except ValidationError as e:
            for err in e.errors():
                f = str(err["loc"][0]) if err["loc"] else ""
                col = wanted.get(f, f)
                result.errors.append(f"{where}: column {col!r} ({f}): {err['msg']}")
            continue
        if case.id in seen:
            result.errors.append(f"{where}: column {wanted['id']!r} (id): duplicate case id {case.id!r} "
                                 f"(first on line {seen[case.id]})")
            continue
        seen[case.id] = row
        result.cases.append(case)
    return result
