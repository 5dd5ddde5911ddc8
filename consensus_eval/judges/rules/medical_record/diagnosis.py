"""Diagnosis (check 10 of the package docstring, ``accuracy.diagnosis``).

Diabetes type in the record (1型/2型) that the conversation never gives while it gives another ->
``diagnosis_error``; a complication stated in the conversation (diabetic kidney disease / CKD,
retinopathy, neuropathy, diabetic foot, ketoacidosis) and absent from the record ->
``diagnosis_missing``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from consensus_eval.judges.rules.medical_record.document import Doc
from consensus_eval.judges.rules.medical_record.facts import conversation_states
from consensus_eval.judges.rules.medical_record.findings import Finding
from consensus_eval.judges.rules.medical_record.lexicon import DIAGNOSES
from consensus_eval.judges.rules.medical_record.text import NEG_RECORD, POST_NEG_RECORD, is_negated

_DM_TYPE = re.compile(r"(?P<t>[12一二ⅠⅡ]|I{1,2})\s*型\s*糖尿病|(?<![A-Za-z])T(?P<t2>[12])DM(?![A-Za-z])")
_TYPE_NAMES = {"1": "1", "一": "1", "Ⅰ": "1", "I": "1", "2": "2", "二": "2", "Ⅱ": "2", "II": "2"}


def check_diagnosis(doc: Doc) -> Iterator[Finding]:
    conv_types = {_TYPE_NAMES[m.group("t") or m.group("t2")] for m in _DM_TYPE.finditer(doc.cv)}
    for m in _DM_TYPE.finditer(doc.rec):
        t = _TYPE_NAMES[m.group("t") or m.group("t2")]
        if not conv_types or t in conv_types or doc.in_family_section(m.start()):
            continue
        a, b = doc.rec_clause(m.start())
        if is_negated(doc.rec[a:b], m.start() - a, m.end() - a, NEG_RECORD, POST_NEG_RECORD) or \
                re.search(r"不是|并非|排除", doc.rec[a:m.start()]):
            continue
        said = "、".join(f"{x}型糖尿病" for x in sorted(conv_types))
        yield Finding("diagnosis_error", doc.rq(m.start(), m.end()),
                      f"对话中为{said}，病历记为{doc.rq(m.start(), m.end())}", ("record", m.start(), m.end()))
    for label, conv_pattern, rec_pattern in DIAGNOSES:
        span = conversation_states(doc, conv_pattern)
        if span and not re.search(rec_pattern, doc.rec):
            yield Finding("diagnosis_missing", doc.cq(*span), f"对话中明确{label}，病历未记录",
                          ("conversation", *span))
