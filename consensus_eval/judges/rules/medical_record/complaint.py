"""Chief complaint and present illness (checks 1, 8 and 10 of the package docstring).

主诉 missing -> ``cc_symptom_missing`` + ``cc_duration_missing`` (the whole category: neither a symptom
nor a duration is written). A chief complaint without any duration (number or 数/几/半 +
年/月/周/天/日) -> ``cc_duration_missing``; a chief complaint with no symptom text left once
durations are removed -> ``cc_symptom_missing``.

现病史 missing -> all four ``pi_*_missing`` types (the whole category). Present illness with no words
of initial diagnosis, treatment, recent course or complications at all -> the matching
``pi_*_missing``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from consensus_eval.judges.rules.medical_record.document import Doc
from consensus_eval.judges.rules.medical_record.findings import Finding
from consensus_eval.judges.rules.medical_record.lexicon import PRESENT_ILLNESS_PARTS
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


def check_present_illness(doc: Doc) -> Iterator[Finding]:
    if not doc.structured:
        return
    s = doc.sections.get("现病史")
    for type_id, label, pattern in PRESENT_ILLNESS_PARTS:
        if s is None:
            yield Finding(type_id, "", f"病历缺少现病史模块（无{label}）")
        elif not re.search(pattern, doc.rec[s.body_start:s.body_end]):
            yield Finding(type_id, doc.rq(s.start, min(s.body_end, s.body_start + 40)), f"现病史未记载{label}")
