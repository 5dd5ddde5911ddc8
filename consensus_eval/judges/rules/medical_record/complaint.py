"""Chief complaint and present illness (checks 1, 8 and 10 of the package docstring).

主诉 missing -> ``cc_symptom_missing`` + ``cc_duration_missing`` (the whole category: neither a symptom
nor a duration is written). A chief complaint without any duration (number or 数/几/半 +
年/月/周/天/日) -> ``cc_duration_missing``; a chief complaint with no symptom text left once
durations are removed -> ``cc_symptom_missing``.

现病史 missing -> the four ``pi_*_missing`` types (the whole category). Present illness with no words
of initial diagnosis, treatment, recent course or complications at all -> the matching
``pi_*_missing`` (recent course also in other words: 3月12日, 本次, 近来, 1个月来 ...). Each only when the
conversation gives that part (:data:`~.lexicon.PRESENT_ILLNESS_SAID`): a treatment (a drug the patient
uses or used, or a treatment the patient affirms: 控制饮食, 打胰岛素; not a patient diagnosed at this
visit, nothing treated yet), a recent course (最近, 现在, 今天, 这一个月 ... by anyone), complications
spoken of either way (有没有手脚麻？没有); the initial diagnosis always.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from consensus_eval.judges.rules.medical_record.document import Doc
from consensus_eval.judges.rules.medical_record.facts import self_affirmed, topic_mentioned
from consensus_eval.judges.rules.medical_record.findings import Finding
from consensus_eval.judges.rules.medical_record.lexicon import PRESENT_ILLNESS_PARTS, PRESENT_ILLNESS_SAID
from consensus_eval.judges.rules.medical_record.quantities import DURATION


def check_chief_complaint(doc: Doc) -> Iterator[Finding]:
    if not doc.structured:
        return
    s = doc.sections.get("主诉")
    if s is None:
        yield Finding("cc_symptom_missing", "", "病历缺少主诉模块（无主要症状描述）")
        yield Finding("cc_duration_missing", "", "病历缺少主诉模块（无症状持续时间）")
        return
    text = doc.rec[s.body_start:s.body_end]
    quote = doc.rq(s.start, s.body_end)
    core = re.sub(r"[^\u4e00-\u9fffA-Za-z]", "", DURATION.sub("", text))
    if len(core) < 2:
        yield Finding("cc_symptom_missing", quote, "主诉未写明主要症状", ("record", s.start, s.body_end))
    if not DURATION.search(text):
        yield Finding("cc_duration_missing", quote, f"主诉“{doc.rq(s.body_start, s.body_end)}”未写明症状持续时间",
                      ("record", s.start, s.body_end))


def _conversation_gives(doc: Doc, type_id: str) -> bool:
    """Whether the conversation gives the present-illness part ``type_id`` (see the module docstring)."""
    said = PRESENT_ILLNESS_SAID.get(type_id)
    if said is None:
        return True
    if type_id == "pi_treatment_missing":
        return any(c.in_use for c in doc.conv_drugs) or self_affirmed(doc, said, [said]) is not None
    if type_id == "pi_recent_missing":
        return re.search(said, doc.cv) is not None
    return topic_mentioned(doc, said) is not None


def check_present_illness(doc: Doc) -> Iterator[Finding]:
    if not doc.structured:
        return
    s = doc.sections.get("现病史")
    for type_id, label, pattern in PRESENT_ILLNESS_PARTS:
        if not _conversation_gives(doc, type_id):
            continue
        if s is None:
            yield Finding(type_id, "", f"病历缺少现病史模块（无{label}）")
        elif not re.search(pattern, doc.rec[s.body_start:s.body_end]):
            yield Finding(type_id, doc.rq(s.start, min(s.body_end, s.body_start + 40)), f"现病史未记载{label}")
