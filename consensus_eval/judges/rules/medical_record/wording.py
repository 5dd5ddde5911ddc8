"""Wording of the record (checks 3 and 4 of the package docstring).

Colloquial terms in the record (:data:`~consensus_eval.judges.rules.medical_record.lexicon.COLLOQUIAL_TERMS`)
-> ``terminology.colloquial`` per occurrence. ``口渴`` counts only when ``多饮`` is not in the same
sentence (the seed's own good record writes ``口渴、多饮、多尿``); ``血糖高`` is not matched in
``血糖高于/高达/高峰``.

Vague time words (:data:`~consensus_eval.judges.rules.medical_record.lexicon.VAGUE_TIME_WORDS`)
-> ``time_expression.time_vague`` per occurrence. ``最近``/``近期`` followed by a number or ``一次``
(最近3个月, 最近一次) are concrete; ``之前``/``以前`` count only at a clause start (``3年以前``,
``服药之前`` are anchored); ``多年/几年/几个月`` after a numeral (``十几年``, ``10多年``) are not counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from consensus_eval.judges.rules.medical_record.document import Doc
from consensus_eval.judges.rules.medical_record.findings import Finding
from consensus_eval.judges.rules.medical_record.lexicon import COLLOQUIAL_NOT_BEFORE, COLLOQUIAL_TERMS, VAGUE_TIME_WORDS
from consensus_eval.judges.rules.medical_record.text import SENTENCE_END, bounds

_COLLOQUIAL_RE = re.compile("|".join(
    re.escape(p) + (f"(?![{COLLOQUIAL_NOT_BEFORE[p]}])" if p in COLLOQUIAL_NOT_BEFORE else "")
    for p in sorted([*COLLOQUIAL_TERMS, "口渴"], key=len, reverse=True)))


def check_colloquial(doc: Doc) -> Iterator[Finding]:
    for m in _COLLOQUIAL_RE.finditer(doc.rec):
        phrase = m.group()
        if phrase == "口渴":
            a, b = bounds(doc.rec, m.start(), SENTENCE_END)
            if "多饮" in doc.rec[a:b]:
                continue
            standard = "多饮"
        else:
            standard = COLLOQUIAL_TERMS[phrase]
        yield Finding("colloquial", doc.rq(m.start(), m.end()),
                      f"口语化表述“{doc.rq(m.start(), m.end())}”，应为“{standard}”", ("record", m.start(), m.end()))


_VAGUE_RE = re.compile("|".join(
    re.escape(w) + (r"(?!\s*(?:\d|[一两二三四五六七八九十半]+\s*个?\s*(?:年|月|周|星期|天|日|次|小时)|一次))"
                    if w in ("最近", "近期") else "")
    for w in sorted(VAGUE_TIME_WORDS, key=len, reverse=True)))


def check_vague_time(doc: Doc) -> Iterator[Finding]:
    for m in _VAGUE_RE.finditer(doc.rec):
        w = m.group()
        before = doc.rec[:m.start()]
        if w in ("之前", "以前") and not re.search(r"(?:^|[\s,;。:、()])(?:患者|病人|其|自)?$", before):
            continue  # anchored: 3年以前, 服药之前
        if w in ("多年", "几年", "几个月", "数年", "数月", "数个月") and re.search(r"[\d十百]$", before):
            continue  # 10多年, 十几年: a number is given
        yield Finding("time_vague", doc.rq(m.start(), m.end()),
                      f"时间表述不明确“{doc.rq(m.start(), m.end())}”，应写明具体时间", ("record", m.start(), m.end()))
