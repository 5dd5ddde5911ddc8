"""What the record states against what the conversation says (check 11 of the package docstring):
negation flips, a symptom nobody mentioned, the wrong side or part of the body.

Negation flips. A concept (a comorbidity or complication of the lexicon, a symptom of the closed list
:data:`~.lexicon.SYMPTOMS`, smoking, drinking) is *denied* by the conversation when a patient-side clause
about the patient negates it (``没有高血压``, ``手脚不麻``), says so in other words (``血压正常``,
``心脏没事``, ``不抽不喝``: :data:`~.lexicon.DISEASES_DENIED_AS`, ``HABITS``), or answers the last question
of the doctor's turn naming it (``有没有手脚麻、看东西模糊？``, ``血压、血脂、心脏呢？``) with a bare no
(``都没有``, ``这些倒没有``); it is *affirmed* when such a clause states it without negation, a question on it
alone is answered yes, the doctor states it (not asking), or, for a comorbidity, the patient uses a drug
for it (an antihypertensive, a statin: 血压正常 on a drug is hypertension controlled) (:class:`_Said`).
Questions, relatives' clauses, hypotheticals and unsure answers say neither. Symptoms told at the limbs
(麻木, 水肿, 溃疡) are kept per limb group: 两只手发麻，脚倒没事 affirms the hands and denies the feet.
The record *affirms* a concept in a clause that names it without negation (``有冠心病病史``, ``合并冠心病``,
``伴肢体麻木``, ``吸烟20年``) and *denies* it in a negated one (``无多饮``, ``未出现视物模糊``, ``否认吸烟``,
``不饮酒``); not in 家族史, not in a clause about a relative, a precaution or a plan (预防, 警惕, 风险, 如,
若, 建议 ...), nor where the record says it went away (``口干症状消失``); ``无明显诱因`` negates nothing.
Only a concept the conversation states one way and never the other is judged, so a course (以前有，现在
没有) stays silent:

- the record affirms what the conversation denies: a comorbidity or complication -> ``diagnosis_error``
  (the rubric's diagnosis category covers 合并症 and 并发症: a comorbidity the patient denies is a wrong
  diagnosis); a symptom or a habit -> ``fact_error`` (the course category: a symptom stated against the
  conversation is a misstated fact of the course, not a number, drug or diagnosis);
- the record denies what the conversation affirms, where the record affirms it nowhere or the denial
  tells no course (目前, 已, 好转 ...: 主诉 双足麻木 but 现病史 近6个月未出现双足麻木 is a contradiction; 起病时
  口干 ... 目前无口干 is a course): a symptom or a habit -> ``fact_error``; a complication ->
  ``diagnosis_error``; a comorbidity is left to ``ph_*_missing`` (the record does not affirm it: one
  error, counted once);
- a symptom at the limbs the record places at the hands where the conversation names it at the feet only
  (or the reverse) -> ``fact_error``.

Symptoms are read in the patient's history (主诉, 现病史, 既往史, 个人史; the whole record when it has no
headings), not in the examination or test sections; diseases and habits anywhere but 家族史.

A symptom nobody mentioned. A symptom of the closed list that the record affirms in 主诉 or 现病史, that the
conversation never mentions in any words (its mention pattern is loose on purpose: 乏力 is mentioned by
``累``, ``没劲``, ``没精神``), while the conversation does talk about symptoms (it mentions another one, or
the doctor asks about them) -> ``fact_error``. Not a low glucose, often told as a value only (最低2.9).

The wrong side. A side (左/右) with a body site (眼, 足/脚, 手, 下肢/腿/股, 上肢, 髋, 膝, 肢体) and a finding
in the same clause (:data:`_FINDINGS`: 麻木, 疼痛, 破溃, 肿, 视力, 白内障, 骨折, 手术, 无力, 动脉 ...) in the
record (not in 家族史, not negated), where the conversation (any speaker, a clause that is no question and
does not negate the finding; ``右侧正常`` after ``左足背动脉搏动减弱`` is the other side of the same site)
gives that finding at that site only on the other side -> ``fact_error``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from consensus_eval.judges.rules.medical_record.conversation import (
    FAMILY_QUESTION,
    KIN,
    OTHER_PERSON,
    SELF_START,
    TENTATIVE,
    UNSURE,
    YES,
    about_relative,
)
from consensus_eval.judges.rules.medical_record.document import Doc
from consensus_eval.judges.rules.medical_record.findings import Finding
from consensus_eval.judges.rules.medical_record.lexicon import (
    DIAGNOSES,
    DISEASE_DRUG_CLASSES,
    DISEASES_ASKED_AS,
    DISEASES_DENIED_AS,
    HABITS,
    PAST_DISEASES,
    SYMPTOMS,
    SYMPTOMS_AT_LIMBS,
    SYMPTOMS_NOT_UNSAID,
)
from consensus_eval.judges.rules.medical_record.text import (
    NEG_CONV,
    NEG_RECORD,
    POST_NEG_CONV,
    POST_NEG_RECORD,
    is_negated,
)

# ============================================================================ concepts

#: comorbidities as the record names them (not a value: 血压偏高 today is no diagnosis of hypertension)
_RECORD_DISEASES = {
    "高血压": r"高血压", "高脂血症": r"高脂血症|高血脂|血脂异常|高甘油三酯血症|高胆固醇血症",
    "冠心病": r"冠心病|冠状动脉粥样硬化性心脏病|心肌梗死|心梗|心绞痛", "脑卒中": r"脑梗死|脑梗|脑卒中|中风|脑出血",
    "痛风": r"痛风", "甲状腺疾病": r"甲亢|甲减|甲状腺功能亢进|甲状腺功能减退|桥本",
    "慢性肺病": r"慢阻肺|慢性阻塞性肺|哮喘",
}


class _Concept:
    """One thing the record may state against the conversation: its kind (``disease``, ``complication``,
    ``symptom``, ``habit``), label, record pattern, conversation statement pattern, mention pattern, and
    the pattern of a denial in other words (血压正常, 不抽不喝)."""

    __slots__ = ("asked", "conv", "kind", "label", "mention", "no", "rec")

    def __init__(self, kind: str, label: str, rec: str, conv: str, mention: str = "", no: str = "",
                 asked: str = "") -> None:
        self.kind, self.label = kind, label
        self.rec, self.conv = re.compile(rec), re.compile(conv)
        self.mention = re.compile(mention or conv)
        self.no = re.compile(no) if no else None
        self.asked = re.compile(f"{conv}|{asked}" if asked else conv)  # what a question on it names


_CONCEPTS: tuple[_Concept, ...] = (
    *(_Concept("disease", label, _RECORD_DISEASES[label], pattern, no=DISEASES_DENIED_AS.get(label, ""),
               asked=DISEASES_ASKED_AS.get(label, "")) for _, label, pattern in PAST_DISEASES),
    *(_Concept("complication", label, rec, conv) for label, conv, rec in DIAGNOSES),
    *(_Concept("symptom", label, rec, conv, mention) for label, rec, conv, mention in SYMPTOMS),
    *(_Concept("habit", label, rec, conv, no=no) for label, rec, conv, no in HABITS),
)
_ANY_STATEMENT = re.compile("|".join(f"(?:{c.conv.pattern})" for c in _CONCEPTS)
                            + "".join(f"|(?:{c.no.pattern})" for c in _CONCEPTS if c.no))

# ============================================================================ the conversation

#: a bare no, the whole first clause of an answer (都没有, 这些倒没有, 没有啊, 不)
_NO_ANSWER = re.compile(r"^(?:这些|这个|那些|都|也|倒|还|暂时|目前|从来|一直|基本)*(?:没有|没|无|否认|从来没有|不)"
                        r"(?:有|有过|过)?(?:的|啊|呀|哦|呢|吧|了)?$")
_ASKS = re.compile(r"有没有|是不是|是否|会不会|吗|么|呢|\?")


#: the limbs a symptom is placed at (手麻 / 脚麻): a clause naming one group only places it there
_UPPER = re.compile(r"手|上肢|胳膊|臂|指(?!标|导|数|南|示)")
_LOWER = re.compile(r"足|脚|下肢|腿|趾|踝|膝")
_SITE_NAMES = {"upper": "手/上肢", "lower": "足/下肢"}


def _site(text: str) -> str:
    """``upper`` or ``lower`` when ``text`` names the limbs of that group only, else ''."""
    up, low = bool(_UPPER.search(text)), bool(_LOWER.search(text))
    return "upper" if up and not low else "lower" if low and not up else ""


_Key = tuple[str, str]  # (concept label, site: upper, lower or '')


class _Said:
    """Per concept and site, a clause of the conversation affirming it and one denying it (see the module
    docstring), found in one pass over the patient-side clauses (a clause naming no concept is skipped).
    A symptom's site is the limb group its clause names (两只手发麻: upper; 脚不麻: lower; 手脚麻: none)."""

    def __init__(self, doc: Doc) -> None:
        self.affirmed: dict[_Key, tuple[int, int]] = {}
        self.denied: dict[_Key, tuple[int, int]] = {}
        for i, turn in doc.patient_turns():
            q = doc.question_before(i)
            if q and FAMILY_QUESTION.search(q):
                continue
            clauses = doc.turn_pieces(i)
            seen_relative = False
            spoken: set[str] = set()  # concepts the answer itself names
            for a, b in clauses:
                cl = doc.cv[a:b]
                rel = about_relative(cl, turn.role)
                seen_relative = seen_relative or rel is True
                if not _ANY_STATEMENT.search(cl):
                    continue
                silent = bool(rel is True or OTHER_PERSON.search(cl) or doc.is_question(a, b) or UNSURE.search(cl)
                              or TENTATIVE.search(cl)
                              or (seen_relative and not SELF_START.match(cl) and rel is not False))
                site = _site(cl)
                for c in _CONCEPTS:
                    m = c.conv.search(cl)
                    no = c.no.search(cl) if c.no else None
                    if m is None and no is None:
                        continue
                    spoken.add(c.label)
                    if silent:
                        continue
                    key = (c.label, site if c.label in SYMPTOMS_AT_LIMBS else "")
                    if no is not None:
                        self.denied.setdefault(key, (a, b))
                    if m is not None:
                        negated = is_negated(cl, m.start(), m.end(), NEG_CONV, POST_NEG_CONV)
                        (self.denied if negated else self.affirmed).setdefault(key, (a, b))
            if q and clauses:
                self._answer(doc, i, clauses[0], spoken)
        self._beyond_the_patient(doc)

    def _beyond_the_patient(self, doc: Doc) -> None:
        """A concept is affirmed too when the doctor states it (您的高血压, 两只脚有点肿; not a question), and a
        comorbidity when the patient uses a drug for it (an antihypertensive, a statin), however the
        patient words it (血压正常 on a drug is hypertension controlled)."""
        for drug in doc.conv_drugs:
            if drug.in_use:
                for label, classes in DISEASE_DRUG_CLASSES.items():
                    if drug.hit.cls in classes:
                        self.affirmed.setdefault((label, ""), drug.window)
        for i, turn in enumerate(doc.turns):
            if turn.role != "doctor":
                continue
            for a, b in doc.turn_pieces(i):
                cl = doc.cv[a:b]
                if not _ANY_STATEMENT.search(cl) or doc.is_question(a, b) or _ASKS.search(cl) \
                        or TENTATIVE.search(cl) or KIN.search(cl):
                    continue
                for c in _CONCEPTS:
                    m = c.conv.search(cl)
                    if m and not is_negated(cl, m.start(), m.end(), NEG_CONV, POST_NEG_CONV):
                        site = _site(cl) if c.label in SYMPTOMS_AT_LIMBS else ""
                        self.affirmed.setdefault((c.label, site), (a, b))

    def _answer(self, doc: Doc, i: int, first: tuple[int, int], spoken: set[str]) -> None:
        """A doctor's question answered with a bare no (every concept it asks about, that the answer does
        not name itself, is denied, at the site the question names) or a yes (a question on one concept)."""
        asked: dict[str, _Key] = {}
        questions = [(a, b) for a, b in doc.turn_pieces(i - 1) if _ASKS.search(doc.cv, a, min(b + 1, len(doc.cv)))]
        for a, b in questions[-1:]:  # the question the answer follows (有没有头晕？平时运动吗？ 没有: exercise)
            for c in _CONCEPTS:
                if c.asked.search(doc.cv, a, b):
                    site = _site(doc.cv[a:b]) if c.label in SYMPTOMS_AT_LIMBS else ""
                    asked.setdefault(c.label, (c.label, site))
        topics = [key for label, key in asked.items() if label not in spoken]
        if not topics:
            return
        answer = doc.cv[first[0]:first[1]]
        if _NO_ANSWER.match(answer):
            for key in topics:
                self.denied.setdefault(key, first)
        elif len(asked) == 1 and YES.match(answer) and not NEG_CONV.match(answer) and not UNSURE.search(answer):
            self.affirmed.setdefault(topics[0], first)

    @staticmethod
    def _at(said: dict[_Key, tuple[int, int]], label: str, site: str) -> tuple[int, int] | None:
        """The first clause of ``said`` on ``label`` at ``site``: at that site or at none; any site for ''."""
        if site:
            return said.get((label, site)) or said.get((label, ""))
        return next((span for (lab, _), span in said.items() if lab == label), None)

    def only_denied(self, label: str, site: str = "") -> tuple[int, int] | None:
        denied = self._at(self.denied, label, site)
        return denied if denied is not None and self._at(self.affirmed, label, site) is None else None

    def only_affirmed(self, label: str, site: str = "") -> tuple[int, int] | None:
        affirmed = self._at(self.affirmed, label, site)
        return affirmed if affirmed is not None and self._at(self.denied, label, site) is None else None

    def affirmed_sites(self, label: str) -> set[str]:
        return {site for lab, site in self.affirmed if lab == label}


# ============================================================================ the record

#: a clause about a precaution, a risk, a plan or a condition states nothing of the patient
_HEDGE = re.compile(r"预防|避免|警惕|注意|风险|如有|如出现|若|可能|排除|筛查|建议|必要时|宣教|教育|告知|指导|防止|以防|"
                    r"考虑|待查|\?")
#: after the term: it went away or changed (口干症状消失, 多饮较前好转): neither yes nor no now
_RESOLVED_AFTER = re.compile(r"[^,;。]{0,6}?(?:消失|缓解|好转|改善|减轻|不明显|已无|未再)")
#: 无明显诱因 / 无诱因 negates nothing after it
_NO_CAUSE = re.compile(r"(?:无|没有)(?:明显)?(?:诱因|原因)")
#: 不 before a habit negates it (不吸烟, 不饮酒), read as 无
_NOT_HABIT = re.compile(r"不(?=吸烟|抽烟|饮酒|喝酒)")


def _regions(doc: Doc, kind: str) -> list[tuple[int, int]]:
    """Where the record states the patient's concepts of ``kind``: symptoms in the history sections (主诉,
    现病史, 既往史, 个人史), the rest anywhere but 家族史 (the whole record when it has no headings)."""
    if not doc.structured:
        return [(0, len(doc.rec))]
    if kind == "symptom":
        return sorted((s.body_start, s.body_end) for s in doc.sections.values() if s.name != "家族史")
    fam = doc.body("家族史")
    if fam is None:
        return [(0, len(doc.rec))]
    return [(0, fam[0]), (fam[1], len(doc.rec))]


#: a denial that may tell a course (目前无口干 after 起病时口干): not a contradiction of an affirmation
_COURSE = re.compile(r"目前|(?<![出发表体实再呈])现|已|仍|好转|消失|缓解|改善|未再|不再|此后|之后|后来|治疗后|"
                     r"用药后|较前")


class _Stated:
    """The record's clauses naming a concept in the given regions, each with whether it affirms or denies
    it, the limb group it names (:func:`_site`), and whether it tells a course (目前, 已, 好转 ...)."""

    def __init__(self, doc: Doc, rx: re.Pattern[str], regions: list[tuple[int, int]], sited: bool = False) -> None:
        self.clauses: list[tuple[int, int, bool, str, bool]] = []  # (start, end, affirms, site, course)
        seen: set[int] = set()
        for lo, hi in regions:
            for m in rx.finditer(doc.rec, lo, hi):
                a, b = doc.rec_clause(m.start(), lo, hi)
                if a in seen:
                    continue
                seen.add(a)
                cl = doc.rec[a:b]
                if KIN.search(cl) or _HEDGE.search(cl) or _RESOLVED_AFTER.match(doc.rec, m.end(), b):
                    continue
                cl = _NOT_HABIT.sub("无", _NO_CAUSE.sub(lambda x: " " * len(x.group()), cl))
                negated = is_negated(cl, m.start() - a, m.end() - a, NEG_RECORD, POST_NEG_RECORD)
                self.clauses.append((a, b, not negated, _site(cl) if sited else "", bool(_COURSE.search(cl))))

    def affirms(self, site: str | None = None) -> list[tuple[int, int, str]]:
        """(start, end, site) of the affirming clauses (at a site compatible with ``site``, if given)."""
        return [(a, b, s) for a, b, yes, s, _ in self.clauses if yes and (site is None or _meets(s, site))]

    def contradicted_denials(self) -> list[tuple[int, int, str]]:
        """The denials to judge against the conversation: those at a site (or none) where the record affirms
        the concept nowhere, and those telling no course (主诉 双足麻木 but 现病史 近6个月未出现双足麻木)."""
        return [(a, b, s) for a, b, yes, s, course in self.clauses
                if not yes and (not course or not self.affirms(s))]


def _meets(a: str, b: str) -> bool:
    """Whether two sites can be the same limbs ('' is any)."""
    return not a or not b or a == b


# ============================================================================ the checks


def check_negation_flips(doc: Doc) -> Iterator[Finding]:
    said = _Said(doc)
    for c in _CONCEPTS:
        stated = _Stated(doc, c.rec, _regions(doc, c.kind), c.label in SYMPTOMS_AT_LIMBS)
        type_id = "diagnosis_error" if c.kind in ("disease", "complication") else "fact_error"
        for a, b, site in stated.affirms():
            denied = said.only_denied(c.label, site)
            if denied is not None:
                yield Finding(type_id, doc.rq(a, b),
                              f"对话中患者否认{c.label}（“{doc.cq(*denied)}”），病历记为有{c.label}",
                              ("record", a, b, c.label))
                break
            sites = said.affirmed_sites(c.label)
            if site and sites and site not in sites and "" not in sites:  # 两只手发麻 written 双足麻木
                (other,) = sites - {site} or {""}
                yield Finding("fact_error", doc.rq(a, b), f"对话中{c.label}在{_SITE_NAMES.get(other, other)}，"
                                                          f"病历记为{_SITE_NAMES[site]}", ("record", a, b, c.label))
                break
        else:
            if c.kind == "disease":
                continue  # a comorbidity the record does not affirm: ph_*_missing
            for a, b, site in stated.contradicted_denials():
                affirmed = said.only_affirmed(c.label, site)
                if affirmed is not None:
                    yield Finding(type_id, doc.rq(a, b),
                                  f"对话中患者有{c.label}（“{doc.cq(*affirmed)}”），病历记为无{c.label}",
                                  ("record", a, b, c.label))
                    break


#: a doctor asking about symptoms in general
_ASKS_SYMPTOMS = re.compile(r"不舒服|症状|哪里不好|怎么不好|什么情况")


def check_unsaid_symptoms(doc: Doc) -> Iterator[Finding]:
    symptoms = [c for c in _CONCEPTS if c.kind == "symptom"]
    mentioned = {c.label for c in symptoms if c.mention.search(doc.cv)}
    if not mentioned and not _ASKS_SYMPTOMS.search(doc.cv):
        return  # the conversation does not talk about symptoms: absence says nothing
    regions = [r for r in _regions(doc, "symptom")] if not doc.structured else sorted(
        (s.body_start, s.body_end) for s in doc.sections.values() if s.name in ("主诉", "现病史"))
    for c in symptoms:
        if c.label in mentioned or c.label in SYMPTOMS_NOT_UNSAID:
            continue
        for a, b, _ in _Stated(doc, c.rec, regions).affirms()[:1]:
            yield Finding("fact_error", doc.rq(a, b), f"对话中未提及{c.label}，病历记为有{c.label}",
                          ("record", a, b, c.label))


# ============================================================================ the side of the body

_SIDE_SITE = re.compile(r"(?P<side>左|右)(?:侧|边)?(?:的)?"
                        r"(?P<site>眼睛|眼|下肢|上肢|肢体|胳膊|足|脚|手|腿|股|髋|膝|踝)?")
_SITE_GROUPS = {"眼睛": "眼", "眼": "眼", "下肢": "下肢", "腿": "下肢", "足": "下肢", "脚": "下肢", "踝": "下肢",
                "股": "下肢", "上肢": "上肢", "胳膊": "上肢", "手": "上肢", "髋": "髋", "膝": "膝", "肢体": "肢体"}
#: findings a side is told with: (key, record pattern, conversation pattern)
_FINDINGS: tuple[tuple[str, re.Pattern[str], re.Pattern[str]], ...] = tuple(
    (key, re.compile(rec), re.compile(conv)) for key, rec, conv in (
        ("麻木", r"麻", r"麻(?!烦|醉|将|辣|油)"),
        ("疼痛", r"痛(?!风)|疼", r"痛(?!风)|疼"),
        ("破溃", r"溃|破", r"溃|破|烂|伤口|口子"),
        ("肿", r"肿(?!瘤)", r"肿(?!瘤)"),
        ("视力", r"视物|视力|模糊|看不清|出血|玻璃体|眼底", r"看不清|模糊|视力|出血|玻璃体|眼底"),
        ("白内障", r"白内障", r"白内障"),
        ("骨折", r"骨折", r"骨折|摔"),
        ("手术", r"手术|置换|截肢|术", r"手术|置换|开刀|换|截"),
        ("无力", r"无力|乏力|瘫|活动不利", r"无力|没劲|没力气|不利索|不灵活|瘫|不好使"),
        ("动脉", r"动脉|搏动|脉", r"动脉|搏动|脉"),
        ("发凉", r"凉|冷|皮温", r"凉|冷"),
    ))


def _meets_site(a: str, b: str) -> bool:
    """Whether two site groups can name the same part (肢体 is any limb)."""
    limbs = ("上肢", "下肢", "肢体")
    return a == b or ("肢体" in (a, b) and a in limbs and b in limbs)


def _findings(cl: str, neg: re.Pattern[str], post: re.Pattern[str], record: bool) -> list[str]:
    """The findings (:data:`_FINDINGS`) the clause ``cl`` names without negating them."""
    out = []
    for key, rec, conv in _FINDINGS:
        m = (rec if record else conv).search(cl)
        if m and not is_negated(cl, m.start(), m.end(), neg, post):
            out.append(key)
    return out


def check_laterality(doc: Doc) -> Iterator[Finding]:
    rec: list[tuple[tuple[int, int], str, str, str]] = []  # (clause, side, site group, finding)
    for lo, hi in _regions(doc, "disease"):
        for m in _SIDE_SITE.finditer(doc.rec, lo, hi):
            if not m.group("site"):
                continue
            clause = doc.rec_clause(m.start(), lo, hi)
            if KIN.search(doc.rec, *clause):
                continue
            side, site = m.group("side"), _SITE_GROUPS[m.group("site")]
            rec += [(clause, side, site, key)
                    for key in _findings(doc.rec[clause[0]:clause[1]], NEG_RECORD, POST_NEG_RECORD, True)]
    if not rec:
        return
    conv: set[tuple[str, str, str]] = set()  # (side, site group, finding)
    last: tuple[int, str, list[str]] | None = None  # the turn, site and findings of the last mention with a site
    for m in _SIDE_SITE.finditer(doc.cv):
        ti = doc.turn_at(m.start())
        if ti is None:
            continue
        turn = doc.turns[ti]
        a, b = doc.cv_clauses.bounds(m.start(), turn.start, turn.end)
        cl = doc.cv[a:b]
        if doc.is_question(a, b) or _ASKS.search(cl) or about_relative(cl, turn.role) is True or TENTATIVE.search(cl):
            continue
        keys = _findings(cl, NEG_CONV, POST_NEG_CONV, False)
        if m.group("site"):
            site = _SITE_GROUPS[m.group("site")]
            last = (ti, site, keys)
        elif last is not None and last[0] == ti and m.group(0)[-1] in "侧边":
            site, keys = last[1], keys or last[2]  # 左足背动脉搏动减弱，右侧正常: the other side of the same
        else:
            continue
        conv |= {(m.group("side"), site, key) for key in keys}
    flagged: set[tuple[int, int]] = set()
    for clause, side, site, key in rec:
        said = {s for s, g, k in conv if k == key and _meets_site(g, site)}
        if not said or side in said or clause in flagged:
            continue
        flagged.add(clause)
        yield Finding("fact_error", doc.rq(*clause), f"对话中{key}在{'、'.join(sorted(said))}侧，病历记为{side}侧",
                      ("record", *clause, "side"))
