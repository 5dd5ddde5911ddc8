"""Past, family and personal history (checks 1, 2, 9 and 10 of the package docstring).

Diabetes affirmed in 既往史 -> fixed penalty ``accuracy.diabetes_in_past_history``. The body is cut
into clauses at ``，,；;。`` (not at ``、``); a negation word (否认, 无, 没有, 未患, 未发现, 排除 ...)
earlier in the clause negates every term after it (enumerations with ``、``), unless a turn such as
``但``/``有``/``合并`` comes between; a trailing ``否认/阴性/(-)/不详`` negates too. Not counted:
gestational diabetes (妊娠期糖尿病: a resolved past condition that legitimately belongs in past
history), ``糖尿病前期`` (not diabetes), ``糖尿病家族史`` and clauses about relatives (misplaced family
history, not the patient's diabetes). Diabetic complications (``糖尿病肾病``) affirm diabetes and do
count. Diabetes mentioned outside 既往史 (e.g. ``既往有糖尿病`` in 现病史) does not count.

Past history: hypertension, dyslipidaemia, coronary disease the patient affirms that the record does
not affirm anywhere outside 家族史 -> ``ph_hypertension_missing`` / ``ph_hyperlipidemia_missing`` /
``ph_chd_missing``; stroke, gout, thyroid disease, COPD/asthma -> ``ph_other_missing``. 既往史 missing
-> those types for the diseases the patient affirms, or, if there are none, ``ph_important_missing``
once.

Family history: 家族史 missing -> ``fh_absent`` (it is a required section), with the conversation's
family mention as evidence when there is one. Present but omitting a relative's diabetes that the
conversation affirms -> ``fh_diabetes_missing``; omitting a relative's hypertension, coronary disease
or stroke -> ``fh_other_missing`` (once per disease).

Personal history (个人史 is optional: only topics the conversation mentions are checked): smoking,
drinking, diet and exercise each mentioned by the patient (or answered to the doctor's question about
it, either way) and recorded nowhere in the record -> ``personal_unrecorded`` once per topic.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from consensus_eval.judges.rules.medical_record.conversation import KIN
from consensus_eval.judges.rules.medical_record.document import Doc
from consensus_eval.judges.rules.medical_record.facts import (
    family_affirmed,
    record_affirms,
    self_affirmed,
    topic_mentioned,
)
from consensus_eval.judges.rules.medical_record.findings import Finding
from consensus_eval.judges.rules.medical_record.lexicon import (
    DIABETES_TOPIC,
    FAMILY_DISEASES,
    PAST_DISEASES,
    PERSONAL_TOPICS,
)
from consensus_eval.judges.rules.medical_record.text import NEG_RECORD, POST_NEG_RECORD, is_negated

_DIABETES = re.compile(r"糖尿病|(?<![A-Za-z])(?:T1DM|T2DM|DM)(?![A-Za-z])")
_GESTATIONAL = re.compile(r"(?:妊娠期?|孕期|怀孕时|怀孕期间)$")
_NOT_DIABETES_AFTER = re.compile(r"前期|家族")


def check_diabetes_in_past_history(doc: Doc) -> Iterator[Finding]:
    body = doc.body("既往史")
    if body is None:
        return
    for m in _DIABETES.finditer(doc.rec[:body[1]]):
        if m.start() < body[0]:
            continue
        a, b = doc.rec_clause(m.start(), body[0], body[1])
        clause = doc.rec[a:b]
        # (the clause has no line end: $ is the end of rec[a:m.start()]; the longest word is 4 characters)
        if _GESTATIONAL.search(doc.rec, max(a, m.start() - 4), m.start()):
            continue  # gestational diabetes: a resolved past condition
        if _NOT_DIABETES_AFTER.match(doc.rec, m.end()) or KIN.search(clause):
            continue  # prediabetes; family history written in the wrong place
        if is_negated(clause, m.start() - a, m.end() - a, NEG_RECORD, POST_NEG_RECORD):
            continue
        yield Finding("diabetes_in_past_history", doc.rq(a, b),
                      f"既往史肯定记载糖尿病（“{doc.rq(a, b)}”），糖尿病应写在主诉和现病史中",
                      ("record", a, b))
        return


def check_past_history(doc: Doc) -> Iterator[Finding]:
    topics = [p for _, _, p in PAST_DISEASES] + [DIABETES_TOPIC]
    emitted = False
    for type_id, label, pattern in PAST_DISEASES:
        span = self_affirmed(doc, pattern, topics)
        if span is None or record_affirms(doc, pattern):
            continue
        emitted = True
        yield Finding(type_id, doc.cq(*span), f"对话中患者有{label}病史，病历既往史未记录",
                      ("conversation", *span, label))
    if doc.structured and "既往史" not in doc.sections and not emitted:
        yield Finding("ph_important_missing", "", "病历缺少既往史模块")


def check_family_history(doc: Doc) -> Iterator[Finding]:
    if not doc.structured:
        return
    topics = [p for _, _, p in FAMILY_DISEASES]
    body = doc.body("家族史")
    for type_id, label, pattern in FAMILY_DISEASES:
        span = family_affirmed(doc, pattern, topics)
        if body is None:
            if type_id == "fh_diabetes_missing":
                ev = doc.cq(*span) if span else ""
                yield Finding("fh_absent", ev, "病历缺少家族史模块" + (f"（对话中提及家族{label}史）" if span else ""))
            continue
        if span is None or record_affirms(doc, pattern, *body, skip_family=False):
            continue
        yield Finding(type_id, doc.cq(*span), f"对话中提及家族{label}史，病历家族史未记录",
                      ("conversation", *span, label))


def check_personal_history(doc: Doc) -> Iterator[Finding]:
    for label, conv_pattern, rec_pattern in PERSONAL_TOPICS:
        span = topic_mentioned(doc, conv_pattern)
        if span is None or re.search(rec_pattern, doc.rec):
            continue
        yield Finding("personal_unrecorded", doc.cq(*span), f"对话中提及{label}情况，病历未记录",
                      ("conversation", *span, label))
