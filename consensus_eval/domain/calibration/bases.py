"""Planting errors into the user's own records (``calibrate --bases MY_CASES.jsonl``).

The built-in suite is made from base records written for it. A team's own records are the better test:
its scribes' formats, its patients. :func:`user_suite` reads a cases file of records a clinician has
checked as clean and plants the built-in operators' errors into them, with the same seeded generator
(:func:`~consensus_eval.domain.calibration.generator.plant_suite`): each record is a clean control as
given (byte for byte), and planted copies keep its heading style and its conversation as given.

Operators find their places by pattern (a drug written with its dose, a measurement followed by its
value, a section heading at a line start). A record in another format gives some of them no place:
:class:`Planting` says per record which types could be planted and, for a record where nothing could be,
why (each operator's own description of what it looks for). Omissions need the fragments a clinician
marks as deletable (``omit`` in the built-in base file), which a cases file does not have: they are not
planted into user records.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from consensus_eval.domain.calibration.generator import STYLES, candidates, plant_suite, restyle
from consensus_eval.domain.calibration.operators import OPERATORS, BaseCase
from consensus_eval.domain.calibration.suite import SuiteCase
from consensus_eval.domain.cases import Case
from consensus_eval.domain.rubric import Rubric

_NAMES = "主诉|现病史|既往史|家族史|个人史"
#: a heading written in each style, at a line start (the name is group 1)
_STYLE_HEADINGS: dict[str, re.Pattern[str]] = {
    "plain": re.compile(rf"^({_NAMES})：", re.M),
    "bracket": re.compile(rf"^【({_NAMES})】", re.M),
    "bold": re.compile(rf"^\*\*({_NAMES})\*\*：", re.M),
    "numbered": re.compile(rf"^\d+\. ({_NAMES})：", re.M),
}


def heading_style(record: str) -> str | None:
    """The heading style (:data:`~consensus_eval.domain.calibration.generator.STYLES`) ``record`` writes
    most of its section headings in; None when it has none at a line start."""
    counts = {s: len(p.findall(record)) for s, p in _STYLE_HEADINGS.items()}
    best = max(counts, key=lambda s: counts[s])
    return best if counts[best] else None


def plain_headings(record: str, style: str) -> str:
    """``record`` with its ``style`` headings written ``主诉：`` (what the operators read)."""
    return _STYLE_HEADINGS[style].sub(lambda m: f"{m.group(1)}：", record)


@dataclass
class Planting:
    """What could be planted into each user record: ``types`` (record id -> type -> places found) and
    ``nothing`` (record id -> why no error could be planted: the operators' descriptions of what they
    look for)."""

    types: dict[str, dict[str, int]] = field(default_factory=dict)
    nothing: dict[str, str] = field(default_factory=dict)


def _doc(type_id: str) -> str:
    doc = (OPERATORS[type_id].__doc__ or type_id).strip().splitlines()[0]
    return f"{type_id} ({doc.rstrip('.')})"


def user_suite(cases: list[Case], rubric: Rubric, seed: int) -> tuple[list[SuiteCase], Planting]:
    """The suite planted into ``cases`` (module docstring) and what could be planted where."""
    bases: list[BaseCase] = []
    styles: dict[str, list[str]] = {}
    conversations = {}
    planting = Planting()
    for c in cases:
        style = heading_style(c.record)
        record = c.record if style is None else plain_headings(c.record, style)
        if style is not None and restyle(record, style)[0] != c.record:
            # numbered headings that do not count 1, 2, 3 ... over the rubric's sections: keep the record as is
            style, record = "plain", c.record
        bases.append(BaseCase(id=c.id, conversation=c.conversation_as_text(rubric.roles), record=record))
        styles[c.id] = [style or "plain"]
        conversations[c.id] = c.conversation
    found = candidates(tuple(bases))
    for b in bases:
        per_type = {t: sum(1 for bb, _ in lst if bb.id == b.id) for t, lst in found.items()}
        planting.types[b.id] = {t: n for t, n in per_type.items() if n}
        if not planting.types[b.id]:
            planting.nothing[b.id] = (
                "no section heading at a line start (主诉：, 【主诉】, **主诉**：, 1. 主诉：), and no other place"
                if heading_style(b.record) is None else
                "no operator found a place; they look for: " + "; ".join(_doc(t) for t in OPERATORS))
    suite = plant_suite(bases, rubric, seed, styles=styles, conversations=conversations) if bases else []
    return suite, planting


__all__ = ["STYLES", "Planting", "heading_style", "plain_headings", "user_suite"]
