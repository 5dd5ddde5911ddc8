"""Numbers and times of the record against the conversation (check 6 of the package docstring).

Measurements (``accuracy.numbers``; read by ``quantities.py``): a record value equal to a conversation
value of the same kind, or appearing anywhere in the conversation as a number, is fine; otherwise
``value_error`` (paired with the conversation's value of that kind when there is one, else "对话中未
提及"). A conversation value of a kind the record does not give at all (height excepted), and whose
number is nowhere in the record, -> ``value_missing`` (once per kind and value). Glucose in mg/dL or %
(a mmol/L-sized value) and HbA1c in mmol/L -> ``unit_error``.

Durations (年/月/周/天, ``N年前``) in the record that match no duration of the same base (months or
days) in the conversation -> ``timeline.time_error``; skipped when the conversation dates things by
calendar year or month (2019年, 3月份), since then the record's relative times are computed.
"""

from __future__ import annotations

from collections.abc import Iterator

from consensus_eval.judges.rules.medical_record.document import Doc
from consensus_eval.judges.rules.medical_record.findings import Finding
from consensus_eval.judges.rules.medical_record.lexicon import GLUCOSE_KINDS, OPTIONAL_KINDS
from consensus_eval.judges.rules.medical_record.quantities import CALENDAR, Measure, durations, measures
from consensus_eval.judges.rules.medical_record.text import CLAUSE_END, all_numbers, bounds, close


def check_numbers(doc: Doc) -> Iterator[Finding]:
    rec = [m for m in measures(doc.rec) if not doc.in_family_section(m.start)]
    conv = measures(doc.cv)
    conv_numbers = all_numbers(doc.cv) + [m.value for m in conv if isinstance(m.value, float)]
    rec_numbers = all_numbers(doc.rec)
    used = {id(c) for c in conv for r in rec if c.kind == r.kind and _same_value(c, r)}

    def said(v: float) -> bool:
        return any(close(v, n, 0.051) for n in conv_numbers)

    for r in rec:
        span = ("record", r.start, r.end)
        if r.unit_bad:
            yield Finding("unit_error", doc.rq(r.start, r.end), f"{r.label}{r.num}的单位错误", span)
        if r.threshold:
            continue
        same = [c for c in conv if c.kind == r.kind]
        if any(_same_value(c, r) for c in same):
            continue
        if (isinstance(r.value, tuple) and all(said(v) for v in r.value)) or \
                (isinstance(r.value, float) and said(r.value)):
            continue
        cands = [c for c in same if not c.threshold and id(c) not in used] or \
                [c for c in conv if not c.threshold and id(c) not in used and
                 {c.kind, r.kind} <= GLUCOSE_KINDS and "glucose" in (c.kind, r.kind)]
        if cands:
            best = min(cands, key=lambda c: _distance(c, r))
            used.add(id(best))
            reason = f"对话中{best.label}为{best.num}，病历记为{r.num}"
        else:
            reason = f"对话中未提及{r.label}{r.num}"
        yield Finding("value_error", doc.rq(r.start, r.end), reason, span)
    rec_kinds = {r.kind for r in rec}
    reported: set[tuple[str, float | tuple[float, float]]] = set()
    for c in conv:
        if c.approx or c.threshold or id(c) in used or c.kind in OPTIONAL_KINDS or c.kind in rec_kinds:
            continue
        if c.kind in GLUCOSE_KINDS and ("glucose" in rec_kinds or (c.kind == "glucose" and rec_kinds & GLUCOSE_KINDS)):
            continue
        values = c.value if isinstance(c.value, tuple) else (c.value,)
        if all(any(close(v, n, 0.051) for n in rec_numbers) for v in values) or (c.kind, c.value) in reported:
            continue
        reported.add((c.kind, c.value))
        yield Finding("value_missing", doc.cq(c.start, c.end), f"对话中{c.label}为{c.num}，病历未记录",
                      ("conversation", c.start, c.end))


def _distance(a: Measure, b: Measure) -> float:
    va = a.value if isinstance(a.value, tuple) else (a.value,)
    vb = b.value if isinstance(b.value, tuple) else (b.value,)
    return sum(abs(x - y) for x, y in zip(va, vb, strict=True)) if len(va) == len(vb) else float("inf")


def _same_value(a: Measure, b: Measure) -> bool:
    if isinstance(a.value, tuple) or isinstance(b.value, tuple):
        return a.value == b.value
    return close(a.value, b.value, 0.051 if a.kind in ("weight", "height", "weight_change") else 1e-6)


def check_durations(doc: Doc) -> Iterator[Finding]:
    if CALENDAR.search(doc.cv):
        return
    conv = [d for d in durations(doc.cv) if d.value is not None]
    fam = doc.body("家族史")
    for r in durations(doc.rec):
        if r.value is None or (fam and fam[0] <= r.start < fam[1]):
            continue
        same_base = [c for c in conv if c.base == r.base]
        if not same_base or any(c.value is not None and close(c.value, r.value) for c in same_base):
            continue
        a, b = bounds(doc.rec, r.start, CLAUSE_END)
        said = "、".join(dict.fromkeys(c.text for c in same_base))
        yield Finding("time_error", doc.rq(a, b),
                      f"病历时间“{doc.rq(r.start, r.end)}”与对话不符（对话中的时间：{said}）",
                      ("record", r.start, r.end))
