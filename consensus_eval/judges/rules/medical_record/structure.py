"""Check 1 (sections), structure part: ``standardization.structure``.

- no rubric section heading at all -> ``structure_confused`` (once), and the section-based
  completeness checks are skipped (nothing can be located);
- sections out of order -> ``order_error`` (once).
"""

from __future__ import annotations

from collections.abc import Iterator

from consensus_eval.judges.rules.medical_record.document import Doc
from consensus_eval.judges.rules.medical_record.findings import Finding
from consensus_eval.judges.rules.medical_record.lexicon import SECTION_ORDER


def check_structure(doc: Doc) -> Iterator[Finding]:
    if not doc.structured:
        yield Finding("structure_confused", "", "未识别到主诉、现病史、既往史、家族史等模块标题，病历结构混乱")
        return
    order = sorted(doc.sections.values(), key=lambda s: s.start)
    names = [s.name for s in order]
    expected = sorted(names, key=SECTION_ORDER.index)
    if names != expected:
        worst = -1
        for s in order:
            if SECTION_ORDER.index(s.name) < worst:
                yield Finding("order_error", doc.rq(s.start, s.body_start),
                              f"模块顺序为{'→'.join(names)}，应为{'→'.join(expected)}",
                              ("record", s.start, s.body_start))
                return
            worst = max(worst, SECTION_ORDER.index(s.name))
