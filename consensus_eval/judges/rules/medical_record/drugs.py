"""Drugs: how the record writes them and whether it has them right (checks 5, 6 (doses) and 7).

Drug writing (``standardization.drug_writing``), per drug of
:data:`~consensus_eval.judges.rules.medical_record.lexicon.DRUGS` written in the record, looking at all
its mentions: ``dose_unclear`` if no mention has a dose (number + mg/g/μg/U/IU/单位/片/粒/支/ml),
``usage_unclear`` if no mention has both a frequency (qd/bid/tid/qn/qw and their dotted forms b.i.d.
count) and a route (a dosage form such as 片/缓释片/胶囊, after the name or in the drug's own text of its
clause, implies oral: :func:`_form_written`; ``打`` is not a route; ``500mg bid`` alone lacks the route,
which the rubric asks for: 药名+剂量+频率+方式); each only when the conversation gives that drug's dose
(resp. its frequency or timing: :class:`_SaidOfDrugs`), since the record cannot state what was not said (a
drug the patient stopped, named without its dose; a drug the conversation never names). Skipped: negated,
allergy and family-history mentions, drugs the record says were stopped (停用) or used once (曾), and
treatment-mode phrases (``予胰岛素治疗``). Bare ``胰岛素`` is skipped when the record also names a specific
insulin. ``drug_name_nonstandard``: a brand or short name
(:data:`~consensus_eval.judges.rules.medical_record.lexicon.BRAND_NAMES`, e.g. 诺和锐, 甘精), bare
``胰岛素`` while the conversation names the insulin, or a class word (降压药) standing for a drug the
conversation names.

Drug names (``accuracy.drugs``). A drug the record states positively that the conversation never
mentions -> ``drug_name_error`` (reason names the conversation's drug of the same class when there is
an unrecorded one, which is then not also counted missing). Insulins: a specific insulin in the record
that the conversation never names is a ``drug_name_error`` when the conversation names another specific
insulin, and is excused only when the conversation names none (says only ``胰岛素``); human insulins
(``…人胰岛素``, one product sold under several of these names) stand for one another, also when the
record is checked for the conversation's drugs. A drug the patient uses or used (said by the patient,
or confirmed to a doctor's single-drug question; not negated, not hypothetical, not a relative's) that
the record never names -> ``drug_missing``. Drugs only prescribed by the doctor in the conversation are
not required (the record need not have a plan section). Combinations (``厄贝沙坦氢氯噻嗪``, one drug): a
part of the conversation's combination, or a combination of drugs the conversation names, is no
``drug_name_error``; a drug inside the record's combination, or a combination of which the record names
a part, is not missing.

Doses and usage (``accuracy.drugs``): a record dose for a drug that differs from every dose the
conversation gives for the same drug (same unit family; tablet count x strength and daily sums are
accepted) -> ``dose_error``. Frequency per day that differs (每日2次 vs 一天3次) -> ``usage_error``; so
is a timing that contradicts the conversation's for the same drug: each timing phrase
(:data:`~consensus_eval.judges.rules.medical_record.medication.TIMING_PHRASES`) allows a set of (time of
day, meal) points, and the record's phrases allowing none of the conversation's is the error (睡前 ↔
早餐前/晚餐前/餐后, 随餐 ↔ 餐后; 晚上 and 睡前, 早上 and 早餐前, 餐前即刻 and 餐时 agree). A timing belongs to
the drug it follows in its clause or parenthesis, not to a neighbour (``氨氯地平5mg qd 晨服、阿托伐他汀20mg
qn 睡前``: 睡前 is not the amlodipine's): phrases are read after each mention up to the next drug's text,
and before it only after a separator following the previous drug (:func:`_lead_in`: ``…、睡前阿托伐他汀``)
or from its clause start; a drug joined to the next with no timing of its own takes the next one's; in
the conversation also the rest of the turn, or, when that has none, the next turns of its window; never
in a clause holding a measurement (``饭后两小时13``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from consensus_eval.judges.rules.medical_record.document import ConvDrug, Doc, RecDrug
from consensus_eval.judges.rules.medical_record.findings import Finding
from consensus_eval.judges.rules.medical_record.lexicon import CLASS_WORDS
from consensus_eval.judges.rules.medical_record.medication import (
    CONNECTOR_ONLY,
    DOSE,
    FORM_INJECTION,
    FORM_ORAL,
    FREQ,
    ROUTE,
    TIMING,
    TIMING_PHRASES,
    doses,
    drug_class,
    freq_counts,
)
from consensus_eval.judges.rules.medical_record.text import Numbers, all_numbers, to_number


def check_drug_writing(doc: Doc) -> Iterator[Finding]:
    drugs = doc.rec_drug_mentions
    groups: dict[str, list[RecDrug]] = {}
    for d in drugs:
        if not d.skip_writing:
            groups.setdefault(d.hit.generic, []).append(d)
    spans = [d.usage for d in drugs if not d.skip_writing]
    has_freq_in, has_route_in = _UsageSearch(doc.rec, FREQ, spans), _UsageSearch(doc.rec, ROUTE, spans)
    said = _SaidOfDrugs(doc)
    for generic, ds in groups.items():
        first = ds[0]
        evidence, ev_span = doc.drug_quote(first)
        gives_dose, gives_usage = said.of(generic, first.hit.parts)
        if gives_dose and not any(DOSE.search(doc.rec, *d.own) for d in ds):
            yield Finding("dose_unclear", evidence, f"“{first.hit.surface}”未写明剂量（数值+单位）",
                          ("record", *ev_span))
        if not gives_usage:
            continue  # the record cannot state a frequency the conversation never gives
        has_freq = any(has_freq_in.found(*d.usage) for d in ds)
        has_route = any(has_route_in.found(*d.usage) or _form_written(doc, d) for d in ds)
        missing = [w for w, ok in (("用药频率", has_freq), ("给药途径", has_route)) if not ok]
        if missing:
            yield Finding("usage_unclear", evidence, f"“{first.hit.surface}”未写明{'、'.join(missing)}",
                          ("record", *ev_span))
    # names: brand or short names, bare insulin, class words
    conv_specific = sorted({c.hit.generic for c in doc.conv_drugs if c.hit.insulin and c.hit.generic != "胰岛素"})
    rec_specific = any(d.hit.insulin and d.hit.generic != "胰岛素" for d in drugs)
    for d in drugs:
        h = d.hit
        if h.nonstandard:
            yield Finding("drug_name_nonstandard", h.surface,
                          f"药名“{h.surface}”为商品名或简称，应写通用名{h.generic}", ("record", h.start, h.end))
        elif h.generic == "胰岛素" and not rec_specific and conv_specific and not d.negated:
            yield Finding("drug_name_nonstandard", h.surface,
                          f"病历仅写“胰岛素”，未写明种类（对话中为{'、'.join(conv_specific)}）",
                          ("record", h.start, h.end))
    yield from _class_word_findings(doc)


#: a number that may be a dose said without its unit (二甲双胍500，一天两次): not a count, a time or a date
_BARE_DOSE = re.compile(r"(?<![\d.])\d+(?:\.\d+)?(?![\d.])(?!\s*(?:次|回|年|月|周|星期|天|日|岁|点|号|%|小时|分|个|斤|"
                        r"公斤|kg|mmol|/))")


def _form_written(doc: Doc, d: RecDrug) -> bool:
    """Whether the record writes a dosage form that implies the route for the mention ``d``: right after the
    name (二甲双胍缓释片, 甘精胰岛素注射液) or elsewhere in its own text of its clause (``二甲双胍(500mg/片)
    1片 bid``, ``阿卡波糖 50mg×1片 tid``): tablets, capsules, granules are taken by mouth."""
    if FORM_ORAL.match(doc.rec, d.hit.end) or FORM_INJECTION.match(doc.rec, d.hit.end):
        return True
    end = min(d.own[1], doc.rec_clauses.stop(d.hit.end))
    return bool(FORM_ORAL.search(doc.rec, d.hit.end, end))


class _SaidOfDrugs:
    """Whether the conversation gives each drug's dose and its frequency (or timing), around any of its
    mentions: from the clause the name is in (or the previous drug's name) to the end of the mention's
    window (:class:`~.document.ConvDrug`). A dose is a number and a unit, or a number the conversation does
    not use as a count, a time or a measurement (``二甲双胍500，一天两次``); drugs joined by 和/、 share the
    frequency after the last (``阿司匹林100毫克和氯吡格雷75毫克，每天各一次``). Found once per conversation, by
    generic name: a combination's also gives its parts'; a mention of bare ``胰岛素`` gives every insulin's,
    and a human insulin's every human insulin's."""

    def __init__(self, doc: Doc) -> None:
        self.by_generic: dict[str, tuple[bool, bool]] = {}
        convs = doc.conv_drugs
        next_usage = False  # of the next mention, for one joined to it (阿司匹林100毫克和氯吡格雷75毫克，每天各一次)
        for i in range(len(convs) - 1, -1, -1):
            c = convs[i]
            ti = doc.turn_at(c.hit.start)
            turn_start = doc.turns[ti].start if ti is not None else 0
            lo = max(doc.cv_clauses.start(c.hit.start, turn_start), doc.cv_drug_end_before(c.hit.start))
            spans = ((lo, c.hit.start), c.window)
            dose = any(DOSE.search(doc.cv, a, b) for a, b in spans) or any(
                not doc.in_measure_clause("conversation", m.start())
                for a, b in spans for m in _BARE_DOSE.finditer(doc.cv, a, b))
            usage = any(FREQ.search(doc.cv, a, b) for a, b in spans)
            if i + 1 < len(convs) and c.window[1] == convs[i + 1].hit.start \
                    and CONNECTOR_ONLY.match(doc.cv[c.window[0]:c.window[1]]):
                usage = usage or next_usage
            next_usage = usage
            keys = [c.hit.generic, *c.hit.parts]
            if c.hit.insulin:
                keys.append("胰岛素*")  # some insulin
                if _human_insulin(c.hit.generic):
                    keys.append("人胰岛素*")
            for k in keys:
                d0, u0 = self.by_generic.get(k, (False, False))
                self.by_generic[k] = (d0 or dose, u0 or usage)

    def of(self, generic: str, parts: tuple[str, ...]) -> tuple[bool, bool]:
        """(whether the conversation gives a dose, a frequency or timing) of the record's drug ``generic``."""
        keys = [generic, *parts]
        if drug_class(generic) == "胰岛素":
            keys.append("胰岛素")  # the conversation's bare 胰岛素 stands for the record's insulin
            if generic == "胰岛素":
                keys.append("胰岛素*")
            if _human_insulin(generic):
                keys.append("人胰岛素*")
        got = [self.by_generic.get(k, (False, False)) for k in keys]
        return any(d for d, _ in got), any(u for _, u in got)


class _UsageSearch:
    """``bool(rx.search(text, a, e))`` for the usage spans ``(a, e)`` of the record's drug mentions, each
    span from its clause start: the mentions of one clause share ``a``, so a long clause with many
    drugs would be searched from its start once per drug. For FREQ and ROUTE, whose only lookahead is
    ``(?![A-Za-z])`` at the end of a match (lookbehinds see the text before the window either way): a
    match inside ``text[a:e]`` is one inside the widest span from ``a`` too, unless it ends at ``e`` and
    a letter follows there (the window hides it); so after one search of the widest span, a narrower
    one is searched from where that found its first match (or not at all if none), unless a letter
    follows it. Each span is answered once.
    """

    def __init__(self, text: str, rx: re.Pattern[str], spans: list[tuple[int, int]]) -> None:
        self.text, self.rx = text, rx
        self.letter = re.compile("[A-Za-z]", rx.flags)  # as (?![A-Za-z]) reads under rx's flags
        self.widest: dict[int, int] = {}
        for a, e in spans:
            self.widest[a] = max(e, self.widest.get(a, e))
        self.first: dict[int, int | None] = {}  # a -> start of the first match in the widest span
        self.answers: dict[tuple[int, int], bool] = {}

    def found(self, a: int, e: int) -> bool:
        got = self.answers.get((a, e))
        if got is None:
            got = self.answers[a, e] = self._search(a, e)
        return got

    def _search(self, a: int, e: int) -> bool:
        widest = self.widest[a]
        if a not in self.first:
            m = self.rx.search(self.text, a, widest)
            self.first[a] = m.start() if m else None
        first = self.first[a]
        if e == widest:
            return first is not None
        if self.letter.match(self.text, e):
            return bool(self.rx.search(self.text, a, e))
        return first is not None and bool(self.rx.search(self.text, first, e))


def _class_word_findings(doc: Doc) -> Iterator[Finding]:
    """A class word (降压药) in the record standing for a drug the patient named and the record did not."""
    rec_generics = {h.generic for h in doc.rec_drugs}
    for word, classes in CLASS_WORDS.items():
        m = re.search(word, doc.rec)
        if not m:
            continue
        named = sorted({c.hit.generic for c in doc.conv_drugs
                        if c.in_use and c.hit.cls in classes and c.hit.generic not in rec_generics})
        if named:
            yield Finding("drug_name_nonstandard", word, f"病历写“{word}”，未写明药名（对话中为{'、'.join(named)}）",
                          ("record", m.start(), m.end()))


def _covered(generic: str, rec_generics: set[str]) -> bool:
    """Whether the record names ``generic`` (bare 胰岛素 and a specific insulin cover each other, and human
    insulins one another)."""
    if generic in rec_generics:
        return True
    if drug_class(generic) == "胰岛素":
        return "胰岛素" in rec_generics \
            or (generic == "胰岛素" and any(drug_class(g) == "胰岛素" for g in rec_generics)) \
            or (_human_insulin(generic) and any(_human_insulin(g) for g in rec_generics))
    return False


def _human_insulin(generic: str) -> bool:
    """Human insulins (重组人胰岛素, 精蛋白生物合成人胰岛素 ...): one product is sold under several of these
    names (诺和灵 R/N/30R), so they stand for one another."""
    return generic.endswith("人胰岛素")


def _insulin_named(generic: str, conv_generics: set[str], rec_generics: set[str]) -> bool:
    """Whether the conversation names the record's insulin ``generic``: the same insulin, another human
    insulin for a human insulin, or bare 胰岛素 unless the conversation names a specific insulin that the
    record does not (then the record's insulin stands in its place: an insulin put for another)."""
    if generic == "胰岛素":
        return any(drug_class(g) == "胰岛素" for g in conv_generics)
    specific = {g for g in conv_generics if drug_class(g) == "胰岛素" and g != "胰岛素"}
    if _human_insulin(generic) and any(_human_insulin(g) for g in specific):
        return True
    replaced = {g for g in specific if not _covered_specific(g, rec_generics)}
    return not replaced and ("胰岛素" in conv_generics or bool(specific))


def _covered_specific(generic: str, rec_generics: set[str]) -> bool:
    """Whether the record names the specific insulin ``generic`` (or another human insulin for one)."""
    return generic in rec_generics or (_human_insulin(generic) and any(_human_insulin(g) for g in rec_generics))


def check_drug_accuracy(doc: Doc) -> Iterator[Finding]:
    rec = doc.rec_drug_mentions
    rec_generics = {d.hit.generic for d in rec}
    rec_parts = {p for d in rec for p in d.hit.parts}
    conv = doc.conv_drugs
    conv_generics = {c.hit.generic for c in conv}
    conv_parts = {p for c in conv for p in c.hit.parts}
    in_use: dict[str, ConvDrug] = {}
    for c in conv:
        if c.in_use:
            in_use.setdefault(c.hit.generic, c)
    consumed: set[str] = set()
    seen: set[str] = set()
    for d in rec:
        h = d.hit
        if d.negated or h.generic in seen:
            continue
        seen.add(h.generic)
        if h.generic in conv_generics or (h.insulin and _insulin_named(h.generic, conv_generics, rec_generics)):
            continue
        if h.generic in conv_parts or (h.parts and all(p in conv_generics | conv_parts for p in h.parts)):
            continue  # a part of the conversation's combination, or a combination of drugs it names
        # a specific insulin put for another: the conversation's specific insulin the record does not name
        # (bare 胰岛素 in the record covers it for drug_missing, not as the name that was replaced)
        partner = next((c for g, c in in_use.items() if c.hit.cls == h.cls and g not in consumed and (
            g not in rec_generics and g != "胰岛素" if h.insulin else not _covered(g, rec_generics))), None)
        if partner:
            consumed.add(partner.hit.generic)
            reason = f"对话中为{partner.hit.surface}，病历记为{h.surface}"
        else:
            reason = f"对话中未提及{h.surface}"
        yield Finding("drug_name_error", doc.rq(h.start, h.end), reason, ("record", h.start, h.end))
    class_words = [w for w in CLASS_WORDS if w in doc.rec]
    for g, c in in_use.items():
        if g in consumed or _covered(g, rec_generics):
            continue
        if g in rec_parts or any(p in rec_generics | rec_parts for p in c.hit.parts):
            continue  # the record's combination holds it, or the record names a part of the combination
        if any(c.hit.cls in CLASS_WORDS[w] for w in class_words):
            continue  # the record wrote a class word instead: drug_name_nonstandard
        a, b = doc.cv_clauses.bounds(c.hit.start)
        yield Finding("drug_missing", doc.cq(a, b), f"对话中患者使用{c.hit.surface}，病历未记录",
                      ("conversation", a, b, g))
    yield from _dose_and_usage_errors(doc, rec, conv)


def _dose_and_usage_errors(doc: Doc, rec: list[RecDrug], conv: list[ConvDrug]) -> Iterator[Finding]:
    by_generic: dict[str, list[ConvDrug]] = {}
    for c in conv:
        by_generic.setdefault(c.hit.generic, []).append(c)
    rec_by_generic: dict[str, list[RecDrug]] = {}  # in the order the record first names them
    for d in rec:
        if not d.negated:
            rec_by_generic.setdefault(d.hit.generic, []).append(d)
    rec_timing: dict[int, tuple[_Points, list[str]]] | None = None
    for generic, rds in rec_by_generic.items():
        cws = by_generic.get(generic)
        if not cws or generic == "胰岛素":
            continue
        conv_text = " ".join(doc.cv[slice(*c.window)] for c in cws)
        yield from _dose_errors(doc, rds, conv_text)
        if rec_timing is None:
            rec_timing = _record_timing(doc)
        yield from _usage_errors(doc, rds, conv_text, cws, rec_timing)


def _dose_errors(doc: Doc, rds: list[RecDrug], conv_text: str) -> Iterator[Finding]:
    """A record dose that matches no dose of the conversation's text about the drug (see the module docstring)."""
    cdoses = doses(conv_text)
    accepted: dict[str, list[float]] = {}  # family -> values: the doses, and tablet count x strength
    for x in cdoses:
        accepted.setdefault(x.family, []).append(x.value)
    masses = list(dict.fromkeys(x.value for x in cdoses if x.family == "mass"))  # equal values, equal products
    counts = list(dict.fromkeys(x.value for x in cdoses if x.family == "count"))
    if masses and counts:
        accepted["mass"].extend(m * n for m in masses for n in counts)
    close_to = {family: Numbers(values) for family, values in accepted.items()}
    numbers = Numbers(all_numbers(conv_text))
    shown: dict[str, str] = {}
    for d in rds:
        rdoses = doses(doc.rec[slice(*d.own)])
        totals: dict[str, float] = {}
        for rd in rdoses:
            ok = close_to.get(rd.family)
            if ok is None:
                continue
            if rd.family not in totals:
                totals[rd.family] = sum(x.value for x in rdoses if x.family == rd.family)
            if ok.has_close(rd.value) or ok.has_close(totals[rd.family]):
                continue
            written = re.match(r"\d[\d.]*", rd.text)  # the dose's number, when written in digits
            if written and numbers.has_close(to_number(written.group()) or -1):
                continue
            if rd.family not in shown:
                shown[rd.family] = "、".join(dict.fromkeys(x.text for x in cdoses if x.family == rd.family))
            quote, span = doc.drug_quote(d)
            yield Finding("dose_error", quote, f"对话中{d.hit.surface}剂量为{shown[rd.family]}，病历记为{rd.text}",
                          ("record", *span))
            break


def _usage_errors(doc: Doc, rds: list[RecDrug], conv_text: str, cws: list[ConvDrug],
                  rec_timing: dict[int, tuple[_Points, list[str]]]) -> Iterator[Finding]:
    conv_counts = freq_counts(conv_text)
    conv_said = "/".join(map(str, sorted(conv_counts)))
    conv_points, conv_words = _conversation_timing(doc, cws)
    for d in rds:
        own = doc.rec[slice(*d.own)]
        counts = freq_counts(own)
        ev, span = doc.drug_quote(d)
        where = ("record", *span)
        if counts and conv_counts and not counts & conv_counts:
            yield Finding("usage_error", ev, f"对话中{d.hit.surface}为每日{conv_said}次，"
                                              f"病历记为每日{'/'.join(map(str, sorted(counts)))}次", where)
            continue
        points, words = rec_timing[d.hit.start]
        if points and conv_points and not points & conv_points:
            yield Finding("usage_error", ev, f"对话中{d.hit.surface}于{'、'.join(conv_words)}使用，"
                                              f"病历记为{'、'.join(words)}", where)


_Points = frozenset[tuple[str, str]]


#: what separates a drug's text from the next drug's in a list (the texts are normalized: ，；（） are ,;())
_LIST_SEPARATORS = frozenset("、,;。\n():")


def _lead_in(text: str, clause_start: int, prev_end: int, start: int) -> int:
    """Where the text that belongs to the drug named at ``start`` begins before its name: its clause's start
    when no drug comes before it in the clause; else after the last separator (、，；（）：) following the
    previous drug's name (``…早晚餐后、睡前阿托伐他汀``: 睡前 is the statin's), and nowhere (``start``) without
    one (``二甲双胍500mg 早晚餐后 阿卡波糖``: 早晚餐后 follows 二甲双胍 and is its)."""
    if prev_end <= clause_start:
        return clause_start
    for i in range(start - 1, prev_end - 1, -1):
        if text[i] in _LIST_SEPARATORS:
            return i + 1
    return start


def _record_timing(doc: Doc) -> dict[int, tuple[_Points, list[str]]]:
    """The timing of each record drug mention (by its start): the phrases after its name up to the next
    drug's text (not into its clause: 早餐前门冬…，睡前甘精…: 睡前 is 甘精's; nor into what leads in to it:
    ``氨氯地平5mg 晨服、睡前阿托伐他汀``), those that lead in to its name (:func:`_lead_in`), and, for a drug
    joined by 、/和/及 to the next with no timing of its own, those of the next drug (二甲双胍、阿卡波糖
    餐后口服), found from the last back so a long list is read once. A timing belongs to the drug it
    follows, not to a neighbour (``氨氯地平5mg 晨服、阿托伐他汀20mg 睡前``: 睡前 is not the amlodipine's)."""
    out: dict[int, tuple[_Points, list[str]]] = {}
    ms = doc.rec_drug_mentions
    leads = [_lead_in(doc.rec, d.usage[0], doc.rec_drug_end_before(d.hit.start), d.hit.start) for d in ms]
    for i in range(len(ms) - 1, -1, -1):
        d = ms[i]
        end = d.own[1]
        if end < doc.rec_sentences.stop(d.hit.start):  # the next drug is in this sentence
            nxt = doc.rec_clauses.start(end, d.hit.end)
            # in a later clause: up to that clause; in this one: up to what leads in to it
            end = nxt if nxt > d.hit.end or i + 1 == len(ms) else leads[i + 1]
        points, words = _timing(doc, "record", [(leads[i], d.hit.start), (d.hit.end, end)])
        if not points and d.usage[1] > d.own[1] and i + 1 < len(ms):  # joined: the next drug's usage
            points, words = out[ms[i + 1].hit.start]
        out[d.hit.start] = (points, words)
    return out


def _timing(doc: Doc, source: str, spans: list[tuple[int, int]]) -> tuple[_Points, list[str]]:
    """The (time, meal) points the timing phrases of ``spans`` allow (their union) and the phrases, leaving
    out phrases in a clause that holds a measurement (``饭后两小时13``)."""
    text = doc.rec if source == "record" else doc.cv
    points: set[tuple[str, str]] = set()
    words: dict[str, None] = {}
    for a, b in spans:
        for m in TIMING.finditer(text, a, b):
            if not doc.in_measure_clause(source, m.start()):
                points |= TIMING_PHRASES[m.group()]
                words[m.group()] = None
    return frozenset(points), list(words)


def _conversation_timing(doc: Doc, cws: list[ConvDrug]) -> tuple[_Points, list[str]]:
    """When the conversation says a drug is taken: the timing phrases in its mentions' clauses (from the
    previous drug on) and the rest of their turns; when these have none, those of the next turns of the
    mentions' windows."""
    own: list[tuple[int, int]] = []
    later: list[tuple[int, int]] = []
    for c in cws:
        ti = doc.turn_at(c.hit.start)
        turn_start, turn_end = (doc.turns[ti].start, doc.turns[ti].end) if ti is not None else (0, c.window[1])
        clause_start = doc.cv_clauses.start(c.hit.start, turn_start)
        prefix = _lead_in(doc.cv, clause_start, doc.cv_drug_end_before(c.hit.start), c.hit.start)
        end = min(c.window[1], turn_end)
        if end < turn_end:  # the next drug is in this turn: up to its clause (早上打门冬，晚上打甘精), not
            # into what leads in to it (氨氯地平5毫克早上吃、睡前吃阿托伐他汀)
            nxt = doc.cv_clauses.start(end, c.hit.end)
            end = nxt if nxt > c.hit.end else _lead_in(doc.cv, clause_start, c.hit.end, end)
        own += [(prefix, c.hit.start), (c.window[0], end)]
        if c.window[1] > turn_end:
            later.append((turn_end, c.window[1]))
    points, words = _timing(doc, "conversation", own)
    return (points, words) if points else _timing(doc, "conversation", later)
