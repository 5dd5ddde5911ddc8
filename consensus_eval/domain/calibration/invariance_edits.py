"""The invariance probe's cases (``calibrate --suite invariance``; docs/calibration.md): clean records and copies of
them edited without changing their meaning.

A judge that is any good scores a record the same whether its free sections come in another order, its
punctuation is half-width, an abbreviation is spelled out, a unit is written in words, true but irrelevant
sentences pad it, or the name of the system that wrote it stands under it. Each edit here is one of those
(:data:`EDITS`); its word lists are data, per language of the rubric (``invariance.yaml``):

- ``section_order``: the sections the rubric does not order (``体格检查``, ``处理`` ...: headings outside
  ``rubric.sections``) in reverse order, the rubric's own sections where they were (a record with fewer than
  two such sections has nothing to reorder);
- ``whitespace_punctuation``: a blank line after every line, punctuation written another way
  (``，；：`` as ``,;:`` in Chinese; two spaces after a colon or full stop in English);
- ``abbreviation``: every abbreviation the record uses spelled out (``HbA1c`` -> ``糖化血红蛋白``, ``bid`` ->
  ``每日2次``); a record without one gets its spelled-out terms abbreviated instead (``2型糖尿病`` -> ``T2DM``);
- ``units``: every unit written right after a number written another way (``mg`` -> ``毫克``, ``mmol/L`` ->
  ``毫摩尔/升``), the number kept;
- ``length_30`` and ``length_100``: sentences true of any record and irrelevant to its score (they say where
  the record comes from: no clinical fact, number, drug or symptom) added at the ends of its sections after the
  first, until the record is at least 30% (100%) longer;
- ``system_name``: a last line naming the system that wrote the record (the case's ``system``, else a
  default name).

An edit that finds nothing to change in a record makes no copy of it (``not_applied`` says why, per edit).
The copies keep the record's conversation, system and case criteria; their ids are the record's with
``~<n>`` (the edit's place in :data:`EDITS`), so the id a judge reads does not say which edit was made. The
clean records themselves are marked important: they are judged ``important_runs`` times, which is what the
probe's run-to-run noise is measured on.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from consensus_eval._errors import InputError, UsageError
from consensus_eval.domain.cases import Case
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.sections import Section, Sections, fold_width

#: the edits, in the order their copies are numbered (``<id>~1`` is section_order)
EDITS: tuple[str, ...] = ("section_order", "whitespace_punctuation", "abbreviation", "units", "length_30",
                          "length_100", "system_name")
#: the fewest runs of each clean record (``important_runs``): what the run-to-run noise is measured on
RUNS = 3
#: how much longer each length edit makes a record (at least)
LENGTH_EDITS: dict[str, float] = {"length_30": 0.3, "length_100": 1.0}
_DATA = Path(__file__).with_name("invariance.yaml")


@dataclass(frozen=True)
class Words:
    """One language's word lists (``invariance.yaml``)."""

    punctuation: dict[str, str]
    spell_out: dict[str, str]
    abbreviate: dict[str, str]
    units: dict[str, str]
    filler: tuple[str, ...]
    system_name: str
    default_system: str


@cache
def words(language: str) -> Words | None:
    """The word lists of ``language`` (None for a language the file does not have)."""
    data: dict[str, Any] = yaml.safe_load(_DATA.read_text(encoding="utf-8"))
    found = data.get(language)
    if found is None:
        return None
    return Words(punctuation=dict(found["punctuation"]), spell_out=dict(found["spell_out"]),
                 abbreviate=dict(found["abbreviate"]), units=dict(found["units"]), filler=tuple(found["filler"]),
                 system_name=str(found["system_name"]), default_system=str(found["default_system"]))


@dataclass(frozen=True)
class InvarianceCase:
    """A case of the probe: a clean record (``edit`` None) or a copy of the clean record ``base`` edited by
    ``edit``; ``length_ratio`` is the copy's length over the record's."""

    case: Case
    base: str
    edit: str | None = None
    length_ratio: float = 1.0

    def to_line(self) -> dict[str, Any]:
        """The JSONL line of this case (``invariance.jsonl``): the case, then ``base``, ``edit``, ``length_ratio``."""
        line = self.case.model_dump(mode="json", exclude_defaults=True)
        line["conversation"] = self.case.model_dump(mode="json")["conversation"]
        return {**line, "base": self.base, "edit": self.edit, "length_ratio": round(self.length_ratio, 4)}


@dataclass
class InvarianceSuite:
    """The probe's cases: each clean record, then its edited copies; ``not_applied``: edit -> record id -> why
    that edit made no copy of it (a key of :data:`NOT_APPLIED`)."""

    cases: list[InvarianceCase]
    not_applied: dict[str, dict[str, str]] = field(default_factory=dict)


_ASCII_WORD = "A-Za-z0-9_"


def _terms(table: dict[str, str], ascii_bounded: bool = True) -> re.Pattern[str] | None:
    """One pattern matching any key of ``table``, longest first; ASCII keys only as whole words."""
    if not table:
        return None
    parts = []
    for k in sorted(table, key=len, reverse=True):
        edge = k[:1].isascii() and k[:1].isalnum() and ascii_bounded
        tail = k[-1:].isascii() and k[-1:].isalnum() and ascii_bounded
        parts.append(("(?<![" + _ASCII_WORD + "])" if edge else "") + re.escape(k)
                     + ("(?![" + _ASCII_WORD + "])" if tail else ""))
    return re.compile("|".join(parts))


def _replace_all(text: str, table: dict[str, str]) -> tuple[str, int]:
    pattern = _terms(table)
    if pattern is None:
        return text, 0
    return pattern.subn(lambda m: table[m.group(0)], text)


def _blocks(record: str, sections: Sections) -> tuple[str, list[Section], list[tuple[str, str]]] | None:
    """``record`` as the text before its first heading and, per section, (its text, the line breaks after it);
    None when it has no heading."""
    found = sections.find(fold_width(record))
    if not found:
        return None
    blocks = []
    for s in found:
        text = record[s.start:s.body_end]
        content = text.rstrip("\r\n")
        blocks.append((content, text[len(content):]))
    return record[:found[0].start], found, blocks


def section_order(record: str, rubric: Rubric) -> str | None:
    """The sections the rubric does not order, in reverse order (module docstring); None: fewer than two."""
    split = _blocks(record, Sections.of(rubric))
    if split is None:
        return None
    head, found, blocks = split
    free = [i for i, s in enumerate(found) if not s.canonical]
    if len(free) < 2:
        return None
    contents = [c for c, _ in blocks]
    for i, j in zip(free, reversed(free), strict=True):
        contents[i] = blocks[j][0]
    out = head + "".join(c + tail if tail or k == len(blocks) - 1 else c + "\n"
                         for k, (c, (_, tail)) in enumerate(zip(contents, blocks, strict=True)))
    return out if out != record else None


def whitespace_punctuation(record: str, w: Words) -> str | None:
    """A blank line after every line, punctuation written another way (module docstring)."""
    out, _ = _replace_all(record, w.punctuation)
    out = re.sub(r"\n(?=.)", "\n\n", out)
    return out if out != record else None


def abbreviation(record: str, w: Words) -> str | None:
    """Every abbreviation spelled out; without one, the spelled-out terms abbreviated (module docstring)."""
    out, n = _replace_all(record, w.spell_out)
    if not n:
        out, n = _replace_all(record, w.abbreviate)
    return out if n and out != record else None


def units(record: str, w: Words) -> str | None:
    """Every unit right after a number written another way (module docstring)."""
    if not w.units:
        return None
    alternation = "|".join(re.escape(u) for u in sorted(w.units, key=len, reverse=True))
    pattern = re.compile(rf"(?<=\d)([ \t]?)({alternation})(?![A-Za-z/])")
    out, n = pattern.subn(lambda m: m.group(1) + w.units[m.group(2)], record)
    return out if n and out != record else None


def _sentence_gap(w: Words) -> str:
    """What goes before an added sentence: nothing in a language written without spaces, else a space."""
    return "" if all(not s[:1].isascii() for s in w.filler) else " "


def lengthen(record: str, rubric: Rubric, w: Words, ratio: float, seed_key: str) -> str | None:
    """``record`` with filler sentences added at the ends of its sections after the first (at the end of the
    record when it has fewer than two sections), in turn, until it is at least ``ratio`` longer."""
    if not w.filler or not record:
        return None
    target = len(record) * ratio
    start = int(hashlib.sha256(seed_key.encode()).hexdigest()[:8], 16) % len(w.filler)
    gap = _sentence_gap(w)
    split = _blocks(record, Sections.of(rubric))
    if split is None or len(split[2]) < 2:
        head, slots = "", [[record.rstrip("\r\n"), record[len(record.rstrip("\r\n")):]]]
    else:
        head, slots = split[0], [[c, t] for c, t in split[2]]
    places = list(range(1, len(slots))) or [0]
    added, k = 0, 0
    while added < target:
        sentence = w.filler[(start + k) % len(w.filler)]
        slot = slots[places[k % len(places)]]
        slot[0] += gap + sentence
        added += len(gap) + len(sentence)
        k += 1
    return head + "".join(c + (t or ("\n" if i < len(slots) - 1 else "")) for i, (c, t) in enumerate(slots))


def system_name(record: str, w: Words, system: str | None) -> str:
    """``record`` with a last line naming ``system`` (else the language's default name)."""
    line = w.system_name.format(system=system or w.default_system)
    return record.rstrip("\r\n") + "\n" + line


#: why an edit made no copy of a record (:attr:`InvarianceSuite.not_applied`)
NOT_APPLIED: dict[str, str] = {
    "no_free_sections": "fewer than two sections the rubric does not order",
    "no_word_lists": "no word lists for the rubric's language (invariance.yaml)",
    "nothing_to_change": "nothing to change",
    "no_abbreviation": "no abbreviation to spell out and no term to abbreviate",
    "no_unit": "no unit written right after a number",
    "empty_record": "an empty record",
}


def edit(name: str, case: Case, rubric: Rubric) -> tuple[str | None, str]:
    """The record of ``case`` edited by ``name`` and, when nothing changed, None and why (a key of
    :data:`NOT_APPLIED`)."""
    record = case.record
    if name == "section_order":
        return section_order(record, rubric), "no_free_sections"
    w = words(rubric.language or "zh")
    if w is None:
        return None, "no_word_lists"
    if name == "whitespace_punctuation":
        return whitespace_punctuation(record, w), "nothing_to_change"
    if name == "abbreviation":
        return abbreviation(record, w), "no_abbreviation"
    if name == "units":
        return units(record, w), "no_unit"
    if name in LENGTH_EDITS:
        return lengthen(record, rubric, w, LENGTH_EDITS[name], f"{case.id}|{name}"), "empty_record"
    if name == "system_name":
        return system_name(record, w, case.system), ""
    raise UsageError(f"unknown edit {name!r}")


def invariance_suite(cases: Sequence[Case], rubric: Rubric) -> InvarianceSuite:
    """The probe's cases for the clean records ``cases`` (module docstring). Raises :class:`InputError` when an
    edited copy's id would be a case id already given."""
    out = InvarianceSuite(cases=[])
    ids = {c.id for c in cases}
    for c in cases:
        out.cases.append(InvarianceCase(case=c.model_copy(update={"important": True}), base=c.id))
        for k, name in enumerate(EDITS, 1):
            record, why = edit(name, c, rubric)
            if record is None:
                out.not_applied.setdefault(name, {})[c.id] = why
                continue
            new_id = f"{c.id}~{k}"
            if new_id in ids:
                raise InputError(f"the invariance probe names the copies of a record <id>~<n>, and {new_id!r} is "
                                 f"already a case id: rename that case")
            out.cases.append(InvarianceCase(case=c.model_copy(update={"id": new_id, "record": record,
                                                                      "important": False}),
                                            base=c.id, edit=name, length_ratio=len(record) / max(1, len(c.record))))
    return out


def builtin_records(rubric: Rubric) -> list[Case]:
    """The built-in suite's clean base records (``medical_record``), each as its clean control in the plain
    heading style, under the base record's id."""
    from consensus_eval.domain.calibration.generator import base_cases, clean_control

    return [clean_control(b, b.id, rubric).case for b in base_cases()]


def sample_records(records: Sequence[Case], n: int, seed: int) -> list[Case]:
    """``n`` of ``records`` drawn without replacement with ``seed``, in their order (all when n >= their number)."""
    if n >= len(records):
        return list(records)
    keep = set(random.Random(seed).sample(range(len(records)), n))
    return [c for i, c in enumerate(records) if i in keep]


def merged_cases(probe: InvarianceSuite, others: Sequence[Case]) -> list[Case]:
    """The probe's cases, then each of ``others`` (a planted suite's) whose id the probe does not have: a clean
    control that is one of the probe's records is judged once, as the probe's (important) record. Raises
    :class:`InputError` when the two give one id to different texts."""
    out = [c.case for c in probe.cases]
    mine = {c.id: c for c in out}
    for c in others:
        found = mine.get(c.id)
        if found is None:
            out.append(c)
        elif found.content != c.content:
            raise InputError(f"the case id {c.id!r} names two different cases: a record of the invariance probe "
                             "and a case of the planted suite; rename one")
    return out
