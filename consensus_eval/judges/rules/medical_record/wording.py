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

_COLLOQUIAL_RE = re.compile("|".join(
    re.escape(p) + (f"(?![{COLLOQUIAL_NOT_BEFORE[p]}])" if p in COLLOQUIAL_NOT_BEFORE else "")
    for p in sorted([*COLLOQUIAL_TERMS, "口渴"], key=len, reverse=True)))


def check_colloquial(doc: Doc) -> Iterator[Finding]:
    with_polydipsia: dict[tuple[int, int], bool] = {}  # per sentence: whether it writes 多饮
    for m in _COLLOQUIAL_RE.finditer(doc.rec):
        phrase = m.group()
        if phrase == "口渴":
            a, b = doc.rec_sentences.bounds(m.start())
            if (a, b) not in with_polydipsia:
                with_polydipsia[a, b] = "多饮" in doc.rec[a:b]
            if with_polydipsia[a, b]:
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


# what comes before a vague word, matched at the end of the record up to the word (rec[:m.start()]); a
# match is at most 3 characters long (4 with the line end $ may skip), so only the last 4 are searched
_CLAUSE_START_BEFORE = re.compile(r"(?:^|[\s,;。:、()])(?:患者|病人|其|自)?$")
_NUMBER_BEFORE = re.compile(r"[\d十百]$")
_AFTER_NUMBER_OK = ("多年", "几年", "几个月", "数年", "数月", "数个月")


def check_vague_time(doc: Doc) -> Iterator[Finding]:
    for m in _VAGUE_RE.finditer(doc.rec):
        w = m.group()
        s = m.start()
        if w in ("之前", "以前") and not _CLAUSE_START_BEFORE.search(doc.rec, max(0, s - 4), s):
            continue  # anchored: 3年以前, 服药之前
        if w in _AFTER_NUMBER_OK and _NUMBER_BEFORE.search(doc.rec, max(0, s - 2), s):
            continue  # 10多年, 十几年: a number is given
        yield Finding("time_vague", doc.rq(m.start(), m.end()),
                      f"时间表述不明确“{doc.rq(m.start(), m.end())}”，应写明具体时间", ("record", m.start(), m.end()))
