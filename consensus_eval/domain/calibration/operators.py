"""Planting operators: each plants one error of one deduction type of the ``medical_record`` rubric into a record.

An operator reads a clean :class:`BaseCase` and lists every way it can plant its error there
(:class:`Plant`: edits of the record, the deduction type, and where the error will be). Each plant
reads like a slip a model makes when it writes a record, and is one error, not two:

- a value changed, or given for another time point (value_error); a test result nobody gave added
  (value_error); a unit changed (unit_error);
- a drug swapped for another of its class, written with that drug's usual dose (drug_name_error: 格列美脲片
  2mg -> 格列齐特缓释片60mg, never 阿卡波糖片500mg, which would be a wrong drug and a wrong dose); a drug
  nobody takes added (drug_name_error); a dose or a frequency one step off (dose_error, usage_error);
- a time changed (time_error); two events told in the wrong order, each keeping its own time
  (time_order_confused: the sentences ``3年前…诊断…。1年前加用…。`` swapped; no time is wrong);
- the diabetes type wrong (diagnosis_error); a denied comorbidity written as present (diagnosis_error);
- a course fact wrong (fact_error): 加用 written 停用, a symptom nobody mentioned added, a denied finding
  or habit written as present (无肢体麻木 -> 伴肢体麻木), a body side or site wrong (左足 -> 右足, 双足 -> 双手);
- diabetes written into 既往史 (the fixed penalty); durations left out of the chief complaint;
- a fragment the base lists as deletable (``omit``) deleted: a drug, a value, a diagnosis, the
  complications, a comorbidity of 既往史 (stated there without its drug), family or personal history,
  each paired with the conversation text that states the dropped fact;
- a colloquial word, a brand name, a vague time, two sections swapped, a dose or a usage left out.

Substitutions are found by pattern in the record (a drug written with its dose, a measure followed by its
value, a section heading at a line start). :data:`OPERATORS` maps operator names to operators and
:data:`OPERATOR_TYPES` each to the type it plants; :data:`UNPLANTABLE` lists the rubric's types no operator
plants, with the reason. A second family, written differently, is in
:mod:`~consensus_eval.domain.calibration.operators_heldout`.
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from consensus_eval._errors import UsageError
from consensus_eval.domain.calibration.suite import SpanSource


class Omission(BaseModel):
    """A fragment of a base record an omission operator may delete: the deduction ``type`` it plants,
    the exact ``record`` text deleted, the exact ``conversation`` text stating the dropped fact."""

    model_config = ConfigDict(extra="forbid")

    type: str
    record: str
    conversation: str


class Fact(BaseModel):
    """A fact a base record states (``record``: its exact text) and where the conversation says it
    (``conversation``: exact text), listed so that a reviewer can check the record against the
    conversation clause by clause."""

    model_config = ConfigDict(extra="forbid")

    record: str
    conversation: str


class BaseCase(BaseModel):
    """A clean base case: a conversation and a record correct and complete for it (``note`` says what
    it is about), the fragments omission operators may delete, and the facts the record states with
    where the conversation says them (the built-in bases list them all; a user's records need not)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    note: str = ""
    conversation: str
    record: str
    omit: list[Omission] = []
    facts: list[Fact] = []


@dataclass(frozen=True)
class Edit:
    """Replace ``record[start:end]`` with ``new``. ``marks``: the parts of ``new`` (offsets into it) that
    are the planted error's spans; None: all of ``new`` (nothing for a deletion)."""

    start: int
    end: int
    new: str
    marks: tuple[tuple[int, int], ...] | None = None

    @property
    def spans(self) -> tuple[tuple[int, int], ...]:
        if self.marks is not None:
            return self.marks
        return ((0, len(self.new)),) if self.new else ()


@dataclass(frozen=True)
class Plant:
    """One way to plant an error: the record edits, the deduction type (or fixed penalty id) and,
    for omissions, the conversation span of the dropped fact (else the marked edits are the spans)."""

    operator: str
    type: str
    edits: tuple[Edit, ...]
    conversation_span: tuple[int, int] | None = None
    label: str = ""

    @property
    def region(self) -> tuple[int, int]:
        """The record characters the plant touches (two plants overlapping here are not combined)."""
        return min(e.start for e in self.edits), max(e.end for e in self.edits)

    @property
    def source(self) -> SpanSource:
        return "conversation" if self.conversation_span is not None else "record"


Operator = Callable[[BaseCase], Iterator[Plant]]

# --------------------------------------------------------------------------- drugs


@dataclass(frozen=True)
class Drug:
    """A drug the operators know: its class (a swap stays in it), the dosage forms it is written with
    (the first: the usual one), a usual single dose with its unit ('' for an insulin: units are kept) and
    how many times a day it is usually taken (a swap prefers a drug taken as often)."""

    name: str
    cls: str
    forms: tuple[str, ...]
    dose: str
    per_day: int = 1


#: drugs by class, each with a usual dose: a swap writes the new drug's own dose, not the old one's
DRUGS: tuple[Drug, ...] = (
    Drug("格列美脲", "sulfonylurea", ("片",), "2mg"), Drug("格列齐特", "sulfonylurea", ("缓释片",), "60mg"),
    Drug("格列吡嗪", "sulfonylurea", ("片",), "5mg", 3), Drug("格列喹酮", "sulfonylurea", ("片",), "30mg", 3),
    Drug("瑞格列奈", "glinide", ("片",), "1mg", 3), Drug("那格列奈", "glinide", ("片",), "120mg", 3),
    Drug("阿卡波糖", "agi", ("片",), "50mg", 3), Drug("伏格列波糖", "agi", ("片",), "0.2mg", 3),
    Drug("米格列醇", "agi", ("片",), "50mg", 3),
    Drug("西格列汀", "dpp4", ("片",), "100mg"), Drug("沙格列汀", "dpp4", ("片",), "5mg"),
    Drug("利格列汀", "dpp4", ("片",), "5mg"), Drug("阿格列汀", "dpp4", ("片",), "25mg"),
    Drug("达格列净", "sglt2", ("片",), "10mg"), Drug("恩格列净", "sglt2", ("片",), "10mg"),
    Drug("卡格列净", "sglt2", ("片",), "100mg"),
    Drug("吡格列酮", "tzd", ("片",), "15mg"), Drug("罗格列酮", "tzd", ("片",), "4mg"),
    Drug("司美格鲁肽", "glp1_weekly", ("注射液",), "0.5mg"), Drug("度拉糖肽", "glp1_weekly", ("注射液",), "1.5mg"),
    Drug("利拉鲁肽", "glp1_daily", ("注射液",), "1.2mg"), Drug("利司那肽", "glp1_daily", ("注射液",), "20μg"),
    Drug("门冬胰岛素", "insulin_rapid", ("注射液",), ""), Drug("赖脯胰岛素", "insulin_rapid", ("注射液",), ""),
    Drug("谷赖胰岛素", "insulin_rapid", ("注射液",), ""),
    Drug("甘精胰岛素", "insulin_basal", ("注射液",), ""), Drug("地特胰岛素", "insulin_basal", ("注射液",), ""),
    Drug("德谷胰岛素", "insulin_basal", ("注射液",), ""),
    Drug("氨氯地平", "ccb", ("片",), "5mg"), Drug("非洛地平", "ccb", ("缓释片",), "5mg"),
    Drug("硝苯地平", "ccb", ("控释片",), "30mg"),
    Drug("缬沙坦", "arb", ("胶囊", "片"), "80mg"), Drug("厄贝沙坦", "arb", ("片", "胶囊"), "150mg"),
    Drug("氯沙坦", "arb", ("钾片", "钾"), "50mg"), Drug("替米沙坦", "arb", ("片",), "40mg"),
    Drug("贝那普利", "acei", ("片",), "10mg"), Drug("培哚普利", "acei", ("片",), "4mg"),
    Drug("美托洛尔", "beta_blocker", ("缓释片",), "47.5mg"), Drug("比索洛尔", "beta_blocker", ("片",), "5mg"),
    Drug("阿托伐他汀", "statin", ("钙片",), "20mg"), Drug("瑞舒伐他汀", "statin", ("钙片",), "10mg"),
    Drug("辛伐他汀", "statin", ("片",), "20mg"), Drug("匹伐他汀", "statin", ("钙片",), "2mg"),
    Drug("非诺贝特", "fibrate", ("胶囊", "片"), "200mg"), Drug("苯扎贝特", "fibrate", ("片",), "200mg"),
    Drug("阿司匹林", "antiplatelet", ("肠溶片",), "100mg"), Drug("氯吡格雷", "antiplatelet", ("片",), "75mg"),
    Drug("吲哚布芬", "antiplatelet", ("片",), "100mg"),
    Drug("甲钴胺", "vitamin_b12", ("片",), "0.5mg"), Drug("腺苷钴胺", "vitamin_b12", ("片",), "1.5mg"),
)
DRUG_BY_NAME: dict[str, Drug] = {d.name: d for d in DRUGS}
#: drugs the records write that have no same-class drug to swap with (a premix, metformin, ...)
OTHER_DRUGS = ("二甲双胍", "精蛋白生物合成人胰岛素", "门冬胰岛素30", "左甲状腺素", "噻托溴铵")
#: words that name a drug of a class in a conversation (brand names included): a drug added or swapped in
#: must not be of a class the patient already takes or names
CLASS_WORDS: dict[str, tuple[str, ...]] = {
    "agi": ("拜糖平", "卡博平"), "dpp4": ("捷诺维", "欧唐宁", "安立泽"), "sulfonylurea": ("亚莫利", "达美康"),
    "sglt2": ("安达唐", "欧唐静"), "tzd": ("艾可拓",), "insulin_rapid": ("诺和锐", "优泌乐", "艾倍得"),
    "insulin_basal": ("来得时", "诺和达", "诺和平"), "glp1_weekly": ("诺和泰",), "glp1_daily": ("诺和力",),
}
#: generic name -> brand name, for the dosage forms the brand stands for ('' : written without a form)
BRANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "二甲双胍": ("格华止", ("", "片")), "格列美脲": ("亚莫利", ("", "片")), "阿卡波糖": ("拜糖平", ("", "片")),
    "门冬胰岛素": ("诺和锐", ("", "注射液")), "甘精胰岛素": ("来得时", ("", "注射液")),
    "赖脯胰岛素": ("优泌乐", ("", "注射液")), "德谷胰岛素": ("诺和达", ("", "注射液")),
    "西格列汀": ("捷诺维", ("", "片")), "利格列汀": ("欧唐宁", ("", "片")), "达格列净": ("安达唐", ("", "片")),
    "恩格列净": ("欧唐静", ("", "片")), "司美格鲁肽": ("诺和泰", ("", "注射液")), "氨氯地平": ("络活喜", ("", "片")),
    "缬沙坦": ("代文", ("", "胶囊")), "阿托伐他汀": ("立普妥", ("", "钙片")), "吡格列酮": ("艾可拓", ("", "片")),
    "格列齐特": ("达美康", ("缓释片",)), "甲钴胺": ("弥可保", ("", "片")), "厄贝沙坦": ("安博维", ("", "片")),
    "硝苯地平": ("拜新同", ("控释片",)),
}
_NAMES = sorted({*DRUG_BY_NAME, *OTHER_DRUGS}, key=len, reverse=True)
_DRUG = "|".join(_NAMES)
#: a drug name as written (门冬胰岛素30 is a premix, not 门冬胰岛素 followed by a dose)
_NOT_PREMIX = "(?!30注射液)"
NAME_RE = re.compile(rf"(?:{_DRUG}){_NOT_PREMIX}")
FORMS = "钙片|钠片|钾片|肠溶片|缓释片|控释片|注射液|粉吸入剂|胶囊|片|钾"
_NUM = r"\d+(?:\.\d+)?"
_UNIT = r"(?:mg|g|μg|IU|U|单位)"
_AT = r"(?:早餐前|晚餐前|早|午|晚)"
#: when a drug is taken, and how
_WHEN = "早、晚餐前|三餐前|早餐前|晚餐前|晚餐后|餐前30分钟|餐前|餐后|餐时|睡前|晨起|早晨"
_WAY = "(?:口服|皮下注射|嚼服|吸入)"
#: a drug mention as the base records write it: name, form, an optional label in brackets (（预混30R）,
#: （2mg/片）), the dose (500mg, 0.5g, 早18U、晚14U, 4～6U, 1片), an optional bracket after it, then the
#: frequency (每日2次, bid) and the route or timing (餐后口服, 睡前皮下注射, （晨起）)
MENTION = re.compile(
    rf"(?P<name>{_DRUG}){_NOT_PREMIX}(?P<form>{FORMS})?(?P<label>（[^）\n]*）)? ?"
    rf"(?P<dose>{_AT}?{_NUM}(?:～{_NUM})?{_UNIT}(?:、{_AT}{_NUM}{_UNIT})*|\d+片)(?P<after>（[^）\n]*）)?"
    r"(?P<freq> (?:每[日晚周]\d次|qd|bid|tid|qn|qw)(?![A-Za-z]))?"
    rf"(?P<route>（晨起）| (?:{_WHEN}){_WAY}?| {_WAY})?")
STRENGTH = re.compile(rf"（({_NUM})(mg|g|μg)/片）")
_DOSE_NUM = re.compile(rf"({_NUM})(～{_NUM})?({_UNIT})")
#: frequencies a model may write instead (one step off)
FREQ_SWAPS: dict[str, str] = {
    "每日1次": "每日2次", "每日2次": "每日3次", "每日3次": "每日2次", "每晚1次": "每日2次", "每周1次": "每日1次",
    "qd": "bid", "bid": "tid", "tid": "bid", "qn": "bid", "qw": "qd",
}
#: the strengths (mg) a drug is made in: a changed dose is the next one up (else down), a dose that exists
STRENGTHS: dict[str, tuple[float, ...]] = {
    "二甲双胍": (250, 500, 850, 1000), "格列美脲": (1, 2, 3, 4), "格列齐特": (30, 60, 90), "格列喹酮": (15, 30, 60),
    "瑞格列奈": (0.5, 1, 2), "阿卡波糖": (25, 50, 100), "西格列汀": (25, 50, 100), "利格列汀": (2.5, 5),
    "达格列净": (5, 10), "恩格列净": (10, 25), "吡格列酮": (15, 30, 45), "司美格鲁肽": (0.25, 0.5, 1),
    "利拉鲁肽": (0.6, 1.2, 1.8), "氨氯地平": (2.5, 5, 10), "硝苯地平": (30, 60), "缬沙坦": (40, 80, 160),
    "厄贝沙坦": (75, 150, 300), "氯沙坦": (50, 100), "贝那普利": (5, 10, 20), "美托洛尔": (23.75, 47.5, 95),
    "阿托伐他汀": (10, 20, 40), "瑞舒伐他汀": (5, 10, 20), "非诺贝特": (160, 200), "阿司匹林": (25, 100, 300),
    "氯吡格雷": (25, 75), "甲钴胺": (0.5, 1.5),
}
#: dose in mg -> doses in mg a model may write instead, for a drug not in :data:`STRENGTHS`
DOSE_SWAPS: dict[float, tuple[float, ...]] = {
    0.2: (0.3,), 0.25: (0.5,), 0.5: (1, 0.25), 1: (0.5, 2), 1.2: (1.8, 0.6), 1.5: (3, 0.75), 2: (4, 1),
    4: (8, 2), 5: (2.5, 7.5), 10: (25, 5), 15: (45, 7.5), 18: (9,), 20: (40, 10), 25: (50, 12.5), 30: (90, 60),
    40: (80, 20), 47.5: (95, 23.75), 50: (25, 75), 60: (90, 120), 75: (150, 50), 80: (160, 40), 100: (50, 25),
    120: (60, 180), 150: (75, 300), 200: (160, 100), 500: (850, 250), 850: (500, 1000), 1000: (850, 750),
}
TO_MG = {"mg": 1.0, "g": 1000.0, "μg": 0.001}


@dataclass(frozen=True)
class Dose:
    """A dose number of a drug mention: where it is in the record, its text and unit."""

    start: int
    end: int
    value: str
    unit: str


def mentions(record: str) -> list[re.Match[str]]:
    """The drug mentions of ``record`` written with a dose (:data:`MENTION`)."""
    return list(MENTION.finditer(record))


def doses(m: re.Match[str]) -> list[Dose]:
    """The dose numbers of a mention: the strength of ``（2mg/片）1片``, else each number of its dose
    (a range ``4～6U`` is left out: it is not one dose)."""
    if m.group("dose").endswith("片"):
        s = STRENGTH.fullmatch(m.group("label") or "")
        return [Dose(m.start("label") + s.start(1), m.start("label") + s.end(1), s.group(1), s.group(2))] if s else []
    a = m.start("dose")
    return [Dose(a + d.start(1), a + d.end(1), d.group(1), d.group(3)) for d in _DOSE_NUM.finditer(m.group("dose"))
            if not d.group(2)]


def is_insulin_unit(unit: str) -> bool:
    return unit in ("U", "IU", "单位")


def dose_options(value: str, unit: str, name: str = "") -> list[str]:
    """Doses (in ``unit``, as written) a model may write for ``value`` of drug ``name``: an insulin 4 units
    up or 2 down; a drug of :data:`STRENGTHS` the next strength up, then down; else :data:`DOSE_SWAPS`."""
    if is_insulin_unit(unit):
        v = int(float(value))
        return [str(v + 4), str(v - 2)] if v > 2 else [str(v + 2)]
    mg = round(float(value) * TO_MG[unit], 4)
    strengths = STRENGTHS.get(name, ())
    if mg in strengths:
        i = strengths.index(mg)
        options: tuple[float, ...] = (*strengths[i + 1:i + 2], *strengths[max(i - 1, 0):i])
    else:
        options = DOSE_SWAPS.get(mg, ())
    return [fmt(x / TO_MG[unit]) for x in options]


def alternatives(name: str, b: BaseCase) -> list[Drug]:
    """Drugs of ``name``'s class that neither the record nor the conversation names, those taken as often
    as it first, then in table order."""
    d = DRUG_BY_NAME.get(name)
    if d is None:
        return []
    same = [x for x in DRUGS if x.cls == d.cls and x.name != name and x.name not in b.record
            and x.name not in b.conversation]
    return sorted(same, key=lambda x: abs(x.per_day - d.per_day))


def swap_edits(b: BaseCase, at: int, new: Drug) -> tuple[Edit, ...]:
    """The edits that put ``new`` in place of the drug named at ``at``: the name, its form when the new
    drug is not made in it, and its dose (the new drug's usual dose; an insulin keeps its units). One
    error: the drug is wrong, and what is written with it is plausible for the drug written."""
    m = next((x for x in mentions(b.record) if x.start("name") == at), None)
    old = NAME_RE.match(b.record, at)
    assert old is not None
    edits = [Edit(at, old.end(), new.name)]
    if m is None:
        return tuple(edits)
    form = m.group("form") or ""
    new_form = new.forms[0] if form and form not in new.forms else form
    ds = doses(m)
    d = ds[0] if len(ds) == 1 and not is_insulin_unit(ds[0].unit) and not m.group("after") else None
    new_dose = new.dose if d is not None and new.dose and f"{d.value}{d.unit}" != new.dose else None
    if new_form == form and new_dose is None:
        return tuple(edits)
    # the form and the dose in one edit, from the form to the end of the dose (what it replaces is not a
    # statement of the conversation: only the drug's name is)
    a = m.start("form") if form else m.end("name")
    z = d.end + len(d.unit) if d is not None else m.end("form")
    text = b.record[a:z]
    if new_form != form:
        text = new_form + text[len(form):]
    if new_dose is not None and d is not None:
        k = d.start - a + len(new_form) - len(form)
        text = text[:k] + new_dose + text[k + len(d.value) + len(d.unit):]
    edits.append(Edit(a, z, text))
    return tuple(edits)


# --------------------------------------------------------------------------- text helpers

_MEASURE = re.compile(r"(空腹血糖|餐后2小时血糖|餐后血糖最高|餐后血糖|最低血糖|随机血糖|测血糖|查血糖|[12]小时血糖|"
                      r"HbA1c |血肌酐|低密度脂蛋白胆固醇|甘油三酯|血尿酸|尿白蛋白/肌酐比值|估算肾小球滤过率|BMI |体重|"
                      r"腰围|血压|心率)(\d+(?:\.\d+)?)(?:/(\d+))?")
_GLUCOSE_UNIT = re.compile(r"(血糖)(\d+(?:\.\d+)?)mmol/L")
HBA1C = re.compile(r"HbA1c (\d+(?:\.\d+)?)%")
_AGO = re.compile(r"(\d+)(年|个月)前")
_DATE = re.compile(r"(\d{4})年(\d{1,2})月")
DIABETES_TYPE = re.compile(r"([12])型糖尿病")
SECTION_LINE = re.compile(r"^(主诉|现病史|既往史|家族史|个人史)：.*$", re.M)
#: an event's time at the start of a sentence or clause: 3年前, 6个月前, 2023年8月, 孕24周
_DATED = re.compile(r"(?:患者)?(?:\d+(?:年|个月|周)前|\d{4}年\d{1,2}月|孕\d+周)")


def section(record: str, name: str) -> tuple[int, int] | None:
    """[start, end) of a section's body (after ``name：``, to the end of its line)."""
    m = re.search(rf"^{name}：(.*)$", record, re.M)
    return (m.start(1), m.end(1)) if m else None


def in_section(record: str, pos: int, *names: str) -> bool:
    """True when ``pos`` of ``record`` is in the body of one of the sections ``names``."""
    return any(s is not None and s[0] <= pos < s[1] for s in (section(record, n) for n in names))


def numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:\.\d+)?", text))


def fmt(x: float) -> str:
    """``x`` written as a record writes a number (no trailing zeros)."""
    return f"{x:.2f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def inside_quotes(record: str, pos: int) -> bool:
    """True when ``pos`` is inside a quoted diagnosis (“…”)."""
    return record.rfind("“", 0, pos) > record.rfind("”", 0, pos)


def units(record: str, body: tuple[int, int], sep: str) -> list[tuple[int, int]]:
    """The pieces of ``record[body]`` between the delimiters ``sep`` (delimiters left out)."""
    out: list[tuple[int, int]] = []
    a = body[0]
    for m in re.finditer(f"[{sep}]", record[body[0]:body[1]]):
        z = body[0] + m.start()
        if z > a:
            out.append((a, z))
        a = body[0] + m.end()
    if a < body[1]:
        out.append((a, body[1]))
    return out


def dated_pairs(record: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Adjacent events of the present illness that each start with their own time (sentences, else
    clauses), as ((start, end), (start, end)) of their text without a leading 患者 or delimiter."""
    body = section(record, "现病史")
    if body is None:
        return []
    out = []
    for sep, gaps in (("。", ("。",)), ("，。；", ("，", "；"))):
        pieces = units(record, body, sep)
        for (a0, a1), (b0, b1) in itertools.pairwise(pieces):
            ma, mb = _DATED.match(record, a0), _DATED.match(record, b0)
            if ma is None or mb is None or record[a1:b0] not in gaps:
                continue
            if sep != "。" and record[b1:b1 + 1] not in ("。", ""):
                continue  # a clause the next clause goes on from: swapping would move what follows it
            a0 += 2 if record.startswith("患者", a0) else 0
            b0 += 2 if record.startswith("患者", b0) else 0
            if ((a0, a1), (b0, b1)) not in out:
                out.append(((a0, a1), (b0, b1)))
    return out


def measures(record: str) -> list[re.Match[str]]:
    """The measured values of ``record`` (a label followed by its value), ranges (``8.5～9.0``) left out."""
    return [m for m in _MEASURE.finditer(record)
            if record[m.end():m.end() + 1] != "～" and record[m.start(2) - 1:m.start(2)] != "～"]


def same_measure_pairs(record: str) -> list[tuple[re.Match[str], re.Match[str]]]:
    """Pairs of values of one measure written at two places (two time points) with different values."""
    ms = [m for m in measures(record) if m.group(3) is None]
    return [(a, c) for i, a in enumerate(ms) for c in ms[i + 1:]
            if a.group(1).strip() == c.group(1).strip() and a.group(2) != c.group(2)]


def family_line(record: str, pos: int) -> bool:
    return in_section(record, pos, "家族史")


def diabetes_history(b: BaseCase) -> tuple[tuple[int, int], str, str] | None:
    """What writing the patient's diabetes into 既往史 needs: the body of 既往史, the patient's diabetes type
    (``2型糖尿病``, the first not in 家族史) and the chief complaint's first duration (``3年``); ``None`` when
    the record lacks one of them."""
    body = section(b.record, "既往史")
    typ = next((m for m in DIABETES_TYPE.finditer(b.record) if not family_line(b.record, m.start())), None)
    cc = re.search(r"^主诉：[^\n]*?(\d+)(年|个月)", b.record, re.M)
    if body is None or typ is None or cc is None:
        return None
    return body, typ.group(), cc.group(1) + cc.group(2)


def pick(options: list[str], b: BaseCase) -> str | None:
    """One of ``options`` for base ``b``, the same one every run (so that the bases do not all get the same
    added drug, symptom or test)."""
    return options[zlib.crc32(b.id.encode()) % len(options)] if options else None


# --------------------------------------------------------------------------- accuracy


def value_error(b: BaseCase) -> Iterator[Plant]:
    """A measured value changed (空腹血糖8.3 -> 9.1): a number the conversation never gives."""
    conv = numbers(b.conversation)
    for m in _MEASURE.finditer(b.record):
        old = m.group(2)
        x = float(old)
        steps = (0.8, 1.3, -0.7) if "." in old or x < 20 else (6, 11, -5)
        for step in steps:
            new = fmt(round(x + step, 1)) if "." in old or x < 20 else str(int(x + step))
            if "." in old and "." not in new:
                new += ".0"
            if new not in conv and float(new) > 0:
                yield Plant("value_error", "value_error", (Edit(m.start(2), m.end(2), new),), label=m.group(1).strip())
                break


def value_wrong_time(b: BaseCase) -> Iterator[Plant]:
    """A value given for the wrong time point: where the record gives one measure at two times (空腹血糖
    7.9 at diagnosis, 8.3 at the check after), the earlier place takes the later value. One wrong number
    (value_error), and a number the conversation does give, for another time."""
    for a, c in same_measure_pairs(b.record):
        yield Plant("value_wrong_time", "value_error", (Edit(a.start(2), a.end(2), c.group(2)),),
                    label=a.group(1).strip())


def unit_error(b: BaseCase) -> Iterator[Plant]:
    """A glucose value written in mg/dL, or HbA1c in mmol/L, with the number unchanged."""
    for m in _GLUCOSE_UNIT.finditer(b.record):
        yield Plant("unit_error", "unit_error", (Edit(m.start(2), m.end(), f"{m.group(2)}mg/dL"),))
    for m in HBA1C.finditer(b.record):
        yield Plant("unit_error", "unit_error", (Edit(m.start(1), m.end(), f"{m.group(1)}mmol/L"),))


def dose_error(b: BaseCase) -> Iterator[Plant]:
    """A drug's dose changed one step (二甲双胍片500mg -> 850mg, 0.5g -> 0.85g, 14U -> 18U), to a dose the
    conversation never gives; the first dose of each mention."""
    conv = numbers(b.conversation)
    for m in mentions(b.record):
        ds = doses(m)
        if not ds or m.group("after"):
            continue
        d = ds[0]
        new = next((x for x in dose_options(d.value, d.unit, m.group("name")) if x not in conv), None)
        if new is not None:
            yield Plant("dose_error", "dose_error", (Edit(d.start, d.end, new),), label=m.group("name"))


def usage_error(b: BaseCase) -> Iterator[Plant]:
    """A drug's frequency changed one step (每日2次 -> 每日3次, bid -> tid, 每周1次 -> 每日1次)."""
    for m in mentions(b.record):
        if m.group("freq"):
            old = m.group("freq").strip()
            a = m.start("freq") + 1
            if old in FREQ_SWAPS:
                yield Plant("usage_error", "usage_error", (Edit(a, a + len(old), FREQ_SWAPS[old]),),
                            label=m.group("name"))


def drug_name_error(b: BaseCase) -> Iterator[Plant]:
    """A drug replaced by another of its class that neither the record nor the conversation names, written
    with that drug's usual dose and form (格列美脲片2mg -> 格列齐特缓释片60mg, 氨氯地平片5mg -> 非洛地平片5mg;
    an insulin keeps its units: 门冬胰岛素8U -> 赖脯胰岛素8U): one error, the drug."""
    for m in NAME_RE.finditer(b.record):
        alt = alternatives(m.group(), b)
        if alt:
            yield Plant("drug_name_error", "drug_name_error", swap_edits(b, m.start(), alt[0]), label=m.group())


#: drugs a record may add that the patient never takes: (class, how it is written)
ADDED_DRUGS: tuple[tuple[str, str], ...] = (
    ("agi", "阿卡波糖片50mg 每日3次 餐时嚼服"), ("dpp4", "西格列汀片100mg 每日1次 口服"),
    ("sulfonylurea", "格列美脲片2mg 每日1次 早餐前口服"), ("sglt2", "达格列净片10mg 每日1次 口服"),
    ("tzd", "吡格列酮片15mg 每日1次 口服"),
)


def class_named(cls: str, b: BaseCase) -> bool:
    """True when the record or the conversation names a drug of class ``cls`` (a brand included)."""
    words = [d.name for d in DRUGS if d.cls == cls] + list(CLASS_WORDS.get(cls, ()))
    return any(w in b.record or w in b.conversation for w in words)


def hallucinated_drug(b: BaseCase) -> Iterator[Plant]:
    """A drug the patient never takes added after the first full drug mention of the present illness
    (``，阿卡波糖片50mg 每日3次 餐时嚼服``), of a class neither the record nor the conversation names.
    Typed drug_name_error: the rubric's drugs category (药物名称、剂量、频率、方式) is where a wrong drug goes,
    and a drug name the conversation never gives is a wrong drug name (not a dose, a usage or an omission)."""
    body = section(b.record, "现病史")
    added = pick([text for cls, text in ADDED_DRUGS if not class_named(cls, b)], b)
    if body is None or added is None:
        return
    m = next((x for x in mentions(b.record) if body[0] <= x.start() < body[1] and x.group("route")), None)
    if m is not None:
        edit = Edit(m.end(), m.end(), f"，{added}", ((1, len(added) + 1),))
        yield Plant("hallucinated_drug", "drug_name_error", (edit,), label=added.split("片")[0])


def time_error(b: BaseCase) -> Iterator[Plant]:
    """A time in the present illness changed (3年前 -> 5年前, 2023年8月 -> 2022年8月): a time the
    conversation never gives."""
    body = section(b.record, "现病史")
    if body is None:
        return
    for m in _AGO.finditer(b.record, *body):
        n, unit = int(m.group(1)), m.group(2)
        for new in (n + 2, n + 3, n + 1):
            if f"{new}{unit}" not in b.conversation and f"{new}{unit}" not in b.record:
                yield Plant("time_error", "time_error", (Edit(m.start(1), m.end(1), str(new)),))
                break
    for m in _DATE.finditer(b.record, *body):
        year = str(int(m.group(1)) - 1)
        if year not in b.conversation:
            yield Plant("time_error", "time_error", (Edit(m.start(1), m.end(1), year),))


def time_order_confused(b: BaseCase) -> Iterator[Plant]:
    """Two events of the present illness told in the wrong order, each with its own time kept: two adjacent
    sentences (or clauses) that each start with their time are swapped (``3年前…诊断…。1年前加用格列美脲…。``
    -> ``1年前加用格列美脲…。3年前…诊断…。``). No time is wrong; the course reads out of order (the later
    event first), which is the one error. Spans: the first clause of each moved event (its time and what
    happened), not the whole sentences (a quote of a whole section should not land on them)."""
    for (a0, a1), (c0, c1) in dated_pairs(b.record):
        first, second, gap = b.record[a0:a1], b.record[c0:c1], b.record[a1:c0]
        new = second + gap + first
        k1, k2 = (len(x.split("，")[0]) for x in (second, first))
        marks = ((0, k1), (len(second) + len(gap), len(second) + len(gap) + k2))
        yield Plant("time_order_confused", "time_order_confused", (Edit(a0, c1, new, marks),))


def diagnosis_error(b: BaseCase) -> Iterator[Plant]:
    """The diabetes type written wrong (2型糖尿病 -> 1型糖尿病) everywhere the record gives the patient's (not
    a relative's) type; for gestational diabetes without a type, 妊娠期糖尿病 -> 2型糖尿病."""
    ms = [m for m in DIABETES_TYPE.finditer(b.record) if not family_line(b.record, m.start())]
    if ms:
        swap = {"1": "2", "2": "1"}
        yield Plant("diagnosis_error", "diagnosis_error",
                    tuple(Edit(m.start(1), m.end(1), swap[m.group(1)]) for m in ms))
        return
    gdm = [m for m in re.finditer("妊娠期糖尿病", b.record) if not family_line(b.record, m.start())]
    if gdm:
        yield Plant("diagnosis_error", "diagnosis_error", tuple(Edit(m.start(), m.end(), "2型糖尿病") for m in gdm))


def negated_history_affirmed(b: BaseCase) -> Iterator[Plant]:
    """A comorbidity the patient denies written as present: in 既往史 ``否认高脂血症、冠心病病史`` ->
    ``有高脂血症病史，否认冠心病病史`` (one item; ``否认冠心病病史`` -> ``有冠心病病史``). Typed diagnosis_error:
    the rubric's diagnosis category covers 合并症, and a comorbidity the conversation denies is a wrong one."""
    body = section(b.record, "既往史")
    if body is None:
        return
    for m in re.finditer(r"否认([^，；。、\n]+(?:、[^，；。、\n]+)*)病史", b.record[body[0]:body[1]]):
        items = m.group(1).split("、")
        a = body[0] + m.start()
        for i, item in enumerate(items):
            if re.search(r"\d|糖尿病|其他", item):
                continue
            rest = items[:i] + items[i + 1:]
            tail = f"，否认{'、'.join(rest)}病史" if rest else ""
            new = f"有{item}病史{tail}"
            yield Plant("negated_history_affirmed", "diagnosis_error",
                        (Edit(a, a + len(m.group()), new, ((0, len(item) + 3),)),), label=item)
            break


def fact_error(b: BaseCase) -> Iterator[Plant]:
    """The course misstated: a drug added written as stopped (加用 -> 停用), poor control written as good."""
    body = section(b.record, "现病史")
    if body is None:
        return
    for word, new in (("加用", "停用"), ("控制不佳", "控制良好")):
        i = b.record.find(word, *body)
        if i >= 0:
            yield Plant("fact_error", "fact_error", (Edit(i, i + len(word), new),))


#: symptoms a record may add, each with the words that show the conversation talks about it
SYMPTOMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("乏力", ("乏力", "没劲", "没力气", "累")), ("视物模糊", ("模糊", "看不清", "看东西", "眼")),
    ("肢体麻木", ("麻",)), ("多尿", ("尿",)), ("皮肤瘙痒", ("痒",)), ("头晕", ("晕",)),
    ("心悸", ("心慌", "心悸", "心跳")), ("体重下降", ("瘦", "体重", "公斤")),
)


def new_symptom(b: BaseCase) -> str | None:
    """A symptom of :data:`SYMPTOMS` that neither the record nor the conversation mentions."""
    return pick([s for s, words in SYMPTOMS if s not in b.record and not any(w in b.conversation for w in words)], b)


def hallucinated_symptom(b: BaseCase) -> Iterator[Plant]:
    """A symptom nobody mentioned added to a symptom list of the present illness (``伴口干、多饮`` ->
    ``伴口干、多饮、乏力``; ``出现视物模糊`` -> ``出现视物模糊、乏力``). Typed fact_error: the course category
    (症状变化情况) is where a misstated symptom goes; no number, drug or diagnosis is wrong."""
    body = section(b.record, "现病史")
    sym = new_symptom(b)
    if body is None or sym is None:
        return
    for m in re.finditer(r"(?:伴|出现)([^，；。、\n\d]{1,8}(?:、[^，；。、\n\d]{1,8})*)(?=[，；。])",
                         b.record[body[0]:body[1]]):
        at = body[0] + m.end()
        yield Plant("hallucinated_symptom", "fact_error", (Edit(at, at, f"、{sym}", ((1, len(sym) + 1),)),), label=sym)


def negated_finding_affirmed(b: BaseCase) -> Iterator[Plant]:
    """A finding or habit the patient denies written as present: ``无肢体麻木、视物模糊`` -> ``伴肢体麻木，无视物
    模糊`` in the present illness, ``否认吸烟、饮酒`` -> ``有吸烟史，否认饮酒`` in 个人史 (one item). Typed
    fact_error: a symptom or habit stated against the conversation, not a number, drug or diagnosis."""
    items_re = r"([^，；。、\n\d]+(?:、[^，；。、\n\d]+)*)"
    for name, pattern, yes, no in (("现病史", rf"(?<=[，；。：])无{items_re}", "伴", "无"),
                                   ("个人史", rf"否认{items_re}", "有", "否认")):
        body = section(b.record, name)
        if body is None:
            continue
        for m in re.finditer(pattern, b.record[body[0] - 1:body[1]]):
            items = m.group(1).split("、")
            if "不适" in items[0]:
                continue
            a = body[0] - 1 + m.start()
            first = f"{yes}{items[0]}" + ("史" if name == "个人史" else "")
            rest = f"，{no}{'、'.join(items[1:])}" if items[1:] else ""
            yield Plant("negated_finding_affirmed", "fact_error",
                        (Edit(a, a + len(m.group()), first + rest, ((0, len(first)),)),), label=items[0])


_SIDE = re.compile(r"([左右])(?=足|眼|髋|下肢|侧|手|上肢|膝)")


def laterality(b: BaseCase) -> Iterator[Plant]:
    """A body side or site written wrong at one place of the chief complaint or present illness (左足 ->
    右足, 右眼 -> 左眼, 双足麻木 -> 双手麻木, 双手手指 -> 双足足趾); quoted diagnoses are left alone. Typed
    fact_error: a finding stated on the wrong part of the body is a misstated fact of the course."""
    for name in ("主诉", "现病史"):
        body = section(b.record, name)
        if body is None:
            continue
        for m in _SIDE.finditer(b.record, *body):
            if not inside_quotes(b.record, m.start()):
                new = "右" if m.group(1) == "左" else "左"
                yield Plant("laterality", "fact_error", (Edit(m.start(), m.end(), new),),
                            label=m.group() + b.record[m.end()])
        for m in re.finditer(r"双手手指|双足(?=麻木)|双手(?=麻木)", b.record[body[0]:body[1]]):
            new = {"双手手指": "双足足趾", "双足": "双手", "双手": "双足"}[m.group()]
            a = body[0] + m.start()
            yield Plant("laterality", "fact_error", (Edit(a, a + len(m.group()), new),), label=m.group())


_ADDED_RESULTS: tuple[tuple[str, str], ...] = (
    ("甘油三酯", "甘油三酯1.8mmol/L"), ("低密度", "低密度脂蛋白胆固醇3.2mmol/L"), ("尿酸", "血尿酸386μmol/L"),
    ("转氨酶", "谷丙转氨酶32U/L"), ("肌酐", "血肌酐76μmol/L"),
)


def hallucinated_result(b: BaseCase) -> Iterator[Plant]:
    """A test result nobody gave added after the record's HbA1c (``HbA1c 7.8%`` -> ``HbA1c 7.8%，甘油三酯
    1.8mmol/L``), of a test neither the record nor the conversation mentions. Typed value_error: the numbers
    category covers every laboratory value, and a value the conversation never gives is a wrong value."""
    added = pick([text for word, text in _ADDED_RESULTS if word not in b.record and word not in b.conversation], b)
    if added is None:
        return
    last = None
    for m in HBA1C.finditer(b.record):
        last = m
    if last is not None:
        at = last.end()
        yield Plant("hallucinated_result", "value_error", (Edit(at, at, f"，{added}", ((1, len(added) + 1),)),),
                    label=added)


def diabetes_in_past_history(b: BaseCase) -> Iterator[Plant]:
    """Diabetes written into 既往史 (the fixed penalty): ``2型糖尿病病史3年；`` at its start."""
    found = diabetes_history(b)
    if found is None:
        return
    body, typ, duration = found
    text = f"{typ}病史{duration}；"
    yield Plant("diabetes_in_past_history", "diabetes_in_past_history", (Edit(body[0], body[0], text),))


# --------------------------------------------------------------------------- completeness


def cc_duration_missing(b: BaseCase) -> Iterator[Plant]:
    """The chief complaint without its durations (血糖升高3年，控制不佳6个月 -> 血糖升高，控制不佳)."""
    body = section(b.record, "主诉")
    if body is None:
        return
    text = b.record[body[0]:body[1]]
    new = re.sub(r"\d+(?:年|个月|周|天)", "", text)
    if new != text:
        yield Plant("cc_duration_missing", "cc_duration_missing", (Edit(body[0], body[1], new),))


def omission(type_id: str) -> Operator:
    """The operator that deletes the fragments a base case lists for ``type_id`` (``omit``)."""
    def op(b: BaseCase) -> Iterator[Plant]:
        for o in b.omit:
            if o.type != type_id:
                continue
            i = b.record.find(o.record)
            j = b.conversation.find(o.conversation)
            if i < 0 or j < 0:
                raise UsageError(f"base case {b.id}: omit {o.type}: text not found")
            yield Plant(type_id, type_id, (Edit(i, i + len(o.record), ""),),
                        conversation_span=(j, j + len(o.conversation)))
    op.__doc__ = f"The fragment a base case lists for {type_id} deleted (the span is the conversation's statement)."
    op.__name__ = type_id
    return op


# --------------------------------------------------------------------------- standardization

#: standard term -> colloquial wording (the seed's own examples first)
COLLOQUIAL: dict[str, str] = {
    "多饮": "喝水多", "多尿": "尿多", "视物模糊": "看东西模糊", "肢体麻木": "手脚发麻", "双足麻木": "脚麻",
    "乏力": "没劲", "口干": "嘴干", "心悸": "心里发慌", "双下肢水肿": "腿肿", "泡沫尿": "尿里有泡沫",
    "血糖明显升高": "血糖很高", "血糖升高": "血糖高", "吸烟": "抽烟",
}


def colloquial(b: BaseCase) -> Iterator[Plant]:
    """A standard term written colloquially (多饮 -> 喝水多, 视物模糊 -> 看东西模糊), one occurrence."""
    taken: list[tuple[int, int]] = []
    for term, new in COLLOQUIAL.items():
        if term == "多饮" and "口渴" in b.record:
            continue  # 口渴 without 多饮 would be a second colloquial term
        i = b.record.find(term)
        if i >= 0 and not any(a < i + len(term) and i < z for a, z in taken):
            taken.append((i, i + len(term)))
            yield Plant("colloquial", "colloquial", (Edit(i, i + len(term), new),), label=term)


def time_vague(b: BaseCase) -> Iterator[Plant]:
    """A precise time made vague (近6个月 -> 最近, 3年前 -> 几年前)."""
    for m in re.finditer(r"近\d+(?:个月|周)", b.record):
        yield Plant("time_vague", "time_vague", (Edit(m.start(), m.end(), "最近"),))
    body = section(b.record, "现病史")
    if body is not None:
        m2 = _AGO.search(b.record, *body)
        if m2 is not None:
            new = "几年前" if m2.group(2) == "年" else "前段时间"
            yield Plant("time_vague", "time_vague", (Edit(m2.start(), m2.end(), new),))


def order_error(b: BaseCase) -> Iterator[Plant]:
    """Two adjacent sections swapped (家族史 written before 既往史, 个人史 before 家族史); the span is both
    lines (either heading is out of place relative to the other)."""
    lines = list(SECTION_LINE.finditer(b.record))
    for a, c in itertools.pairwise(lines):
        if (a.group(1), c.group(1)) in (("既往史", "家族史"), ("家族史", "个人史")):
            gap = b.record[a.end():c.start()]
            yield Plant("order_error", "order_error",
                        (Edit(a.start(), c.end(), c.group() + gap + a.group()),))


def drug_name_nonstandard(b: BaseCase) -> Iterator[Plant]:
    """A generic name written as its brand, form included (二甲双胍片 -> 格华止, 格列齐特缓释片 -> 达美康),
    first mention of each drug."""
    for name, (brand, forms) in BRANDS.items():
        for m in re.finditer(rf"{name}{_NOT_PREMIX}({FORMS})?", b.record):
            if (m.group(1) or "") in forms and (m.start() == 0 or b.record[m.start() - 1] not in "旋"):
                yield Plant("drug_name_nonstandard", "drug_name_nonstandard", (Edit(m.start(), m.end(), brand),),
                            label=name)
                break


def dose_unclear(b: BaseCase) -> Iterator[Plant]:
    """A drug written without its dose (二甲双胍片500mg 每日2次 -> 二甲双胍片 每日2次), where the record names
    the drug once."""
    for m in mentions(b.record):
        if b.record.count(m.group("name")) != 1 or not (m.group("freq") or m.group("route")):
            continue
        label = m.group("label") or ""
        head = b.record[m.start():m.end("form") if m.group("form") else m.end("name")]
        if label and not STRENGTH.fullmatch(label):
            head += label
        new = head + (m.group("freq") or "") + (m.group("route") or "")
        yield Plant("dose_unclear", "dose_unclear", (Edit(m.start(), m.end(), new),), label=m.group("name"))


def usage_unclear(b: BaseCase) -> Iterator[Plant]:
    """A drug written without frequency and route (二甲双胍片500mg 每日2次 餐后口服 -> 二甲双胍片500mg), where
    the record names the drug once."""
    for m in mentions(b.record):
        if b.record.count(m.group("name")) != 1 or not m.group("freq"):
            continue
        end = m.end("after") if m.group("after") else m.end("dose")
        yield Plant("usage_unclear", "usage_unclear", (Edit(m.start(), m.end(), b.record[m.start():end]),),
                    label=m.group("name"))


#: operator name -> operator, in rubric order; each plants one error of :data:`OPERATOR_TYPES`
OPERATORS: dict[str, Operator] = {
    "value_error": value_error, "value_wrong_time": value_wrong_time, "hallucinated_result": hallucinated_result,
    "unit_error": unit_error, "value_missing": omission("value_missing"),
    "drug_name_error": drug_name_error, "hallucinated_drug": hallucinated_drug, "dose_error": dose_error,
    "usage_error": usage_error, "drug_missing": omission("drug_missing"),
    "time_error": time_error, "time_order_confused": time_order_confused,
    "diagnosis_error": diagnosis_error, "negated_history_affirmed": negated_history_affirmed,
    "diagnosis_missing": omission("diagnosis_missing"),
    "fact_error": fact_error, "hallucinated_symptom": hallucinated_symptom,
    "negated_finding_affirmed": negated_finding_affirmed, "laterality": laterality,
    "diabetes_in_past_history": diabetes_in_past_history,
    "cc_duration_missing": cc_duration_missing,
    "pi_complications_missing": omission("pi_complications_missing"),
    "ph_hypertension_missing": omission("ph_hypertension_missing"),
    "ph_hyperlipidemia_missing": omission("ph_hyperlipidemia_missing"),
    "ph_chd_missing": omission("ph_chd_missing"), "ph_other_missing": omission("ph_other_missing"),
    "fh_absent": omission("fh_absent"), "fh_diabetes_missing": omission("fh_diabetes_missing"),
    "fh_other_missing": omission("fh_other_missing"),
    "personal_unrecorded": omission("personal_unrecorded"),
    "colloquial": colloquial, "order_error": order_error,
    "drug_name_nonstandard": drug_name_nonstandard, "dose_unclear": dose_unclear, "usage_unclear": usage_unclear,
    "time_vague": time_vague,
}
#: operator name -> the deduction type (or fixed penalty id) it plants (an operator named after a type plants it)
OPERATOR_TYPES: dict[str, str] = {
    **{name: name for name in OPERATORS},
    "value_wrong_time": "value_error", "hallucinated_result": "value_error", "hallucinated_drug": "drug_name_error",
    "negated_history_affirmed": "diagnosis_error", "hallucinated_symptom": "fact_error",
    "negated_finding_affirmed": "fact_error", "laterality": "fact_error",
}

#: deduction types of the ``medical_record`` rubric that no operator plants, and why
UNPLANTABLE: dict[str, str] = {
    "time_unclear": "the same text defect as standardization.time_vague (a vague time); planted vague times are "
                    "counted there, and a time_unclear deduction on them is not a false alarm",
    "diagnosis_imprecise": "a matter of degree (how precise is precise enough), no single wrong span",
    "logic_error": "needs reasoning across sentences that contradicts itself; not separable from fact_error",
    "cc_symptom_missing": "a chief complaint reduced to its duration ('3年。') is not what a model writes",
    "cc_nonstandard": "a range type (1-2 points) judged by degree, no single wrong span",
    "pi_initial_diagnosis_missing": "the sentence of the first diagnosis carries the diabetes type and the values it "
                                    "was made on: deleting it is also diagnosis_missing or value_missing",
    "pi_treatment_missing": "the treatment sentences carry every drug: deleting them is several drug_missing "
                            "errors at once",
    "pi_recent_missing": "the recent-course sentence carries the recent values and symptoms: deleting it is also "
                         "value_missing",
    "pi_incomplete": "a range type judged by degree, no single wrong span",
    "ph_important_missing": "the rubric charges it for a past history left out altogether, which also drops "
                            "every comorbidity (several errors)",
    "fh_incomplete": "a range type judged by degree, no single wrong span",
    "term_error": "a wrong medical term that is neither a wrong diagnosis nor a colloquial word has no "
                  "reliable text signature",
    "structure_confused": "a record without its headings breaks every section-based check: not a single error",
    "hierarchy_missing": "a range type judged by layout, no single wrong span",
    "time_expression_confused": "mixed time units are a matter of degree; overlaps time_order_confused",
    "unprofessional": "a range type about the whole record, no single wrong span",
}


def plantable_types() -> set[str]:
    """The deduction types (and fixed penalty ids) the operators of :data:`OPERATORS` plant."""
    return set(OPERATOR_TYPES.values())
