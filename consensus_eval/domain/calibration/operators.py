"""Planting operators: one per deduction type of the seed 000 rubric that a record's text can carry.

An operator reads a clean :class:`BaseCase` and lists every way it can plant its error there
(:class:`Plant`: edits of the record, the deduction type, and where the error will be). Each plant
reads like a slip a model makes when it writes a record: a number changed, a drug swapped for one of
its class, a clause left out, a brand name, a colloquial word, a vague time, two sections swapped.
Substitutions are found by pattern in the record; omissions delete the fragments the base case lists
(``omit``), each paired with the conversation text that states the dropped fact.

:data:`UNPLANTABLE` lists the rubric's types no operator plants, with the reason.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

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

# --------------------------------------------------------------------------- tables

#: generic -> drugs of the same class (or use) a model may write in its place
DRUG_SWAPS: dict[str, tuple[str, ...]] = {
    "二甲双胍": ("阿卡波糖", "格列美脲"), "格列美脲": ("格列齐特", "格列吡嗪"), "格列齐特": ("格列美脲", "格列吡嗪"),
    "阿卡波糖": ("伏格列波糖",), "西格列汀": ("沙格列汀", "利格列汀"), "利格列汀": ("西格列汀",),
    "达格列净": ("恩格列净",), "恩格列净": ("达格列净",), "吡格列酮": ("罗格列酮",),
    "门冬胰岛素": ("赖脯胰岛素",), "赖脯胰岛素": ("门冬胰岛素",), "甘精胰岛素": ("地特胰岛素",),
    "德谷胰岛素": ("甘精胰岛素",), "司美格鲁肽": ("利拉鲁肽", "度拉糖肽"), "氨氯地平": ("硝苯地平",),
    "缬沙坦": ("厄贝沙坦", "氯沙坦"), "厄贝沙坦": ("缬沙坦",), "阿托伐他汀": ("瑞舒伐他汀",),
    "瑞舒伐他汀": ("阿托伐他汀",), "甲钴胺": ("依帕司他",),
}
#: generic name as written (with its dosage form) -> brand name
BRANDS: dict[str, str] = {
    "二甲双胍片": "格华止", "格列美脲片": "亚莫利", "阿卡波糖片": "拜糖平", "门冬胰岛素": "诺和锐",
    "甘精胰岛素": "来得时", "赖脯胰岛素": "优泌乐", "德谷胰岛素": "诺和达", "西格列汀片": "捷诺维",
    "利格列汀片": "欧唐宁", "达格列净片": "安达唐", "恩格列净片": "欧唐静", "司美格鲁肽注射液": "诺和泰",
    "氨氯地平片": "络活喜", "缬沙坦胶囊": "代文", "阿托伐他汀钙片": "立普妥", "吡格列酮片": "艾可拓",
    "格列齐特缓释片": "达美康", "甲钴胺片": "弥可保", "厄贝沙坦片": "安博维",
}
#: standard term -> colloquial wording (the seed's own examples first)
COLLOQUIAL: dict[str, str] = {
    "多饮": "喝水多", "多尿": "尿多", "视物模糊": "看东西模糊", "肢体麻木": "手脚发麻", "双足麻木": "脚麻",
    "乏力": "没劲", "口干": "嘴干", "心悸": "心里发慌", "双下肢水肿": "腿肿", "泡沫尿": "尿里有泡沫",
    "血糖明显升高": "血糖很高", "血糖升高": "血糖高", "吸烟": "抽烟",
}
#: dose -> doses a model may write instead (none of them a multiple a tablet count could explain)
DOSE_SWAPS: dict[str, tuple[str, ...]] = {
    "500": ("850", "250"), "1000": ("850", "750"), "2": ("4", "1"), "5": ("2.5", "7.5"), "10": ("25", "5"),
    "15": ("45", "7.5"), "20": ("40", "10"), "30": ("90", "60"), "50": ("25", "75"), "80": ("160", "40"),
    "100": ("50", "25"), "150": ("75", "300"), "0.5": ("1", "0.25"),
}
_DRUG_NAMES = sorted({*DRUG_SWAPS, "阿司匹林", "左甲状腺素", "精蛋白生物合成人胰岛素"}, key=len, reverse=True)
_DRUG = "|".join(_DRUG_NAMES)
_FORM = r"(?:钙片|钠片|肠溶片|缓释片|注射液|胶囊|片)?"
#: a drug mention as the base records write it: name, form, dose, then frequency and route
_MENTION = re.compile(rf"({_DRUG}){_FORM}(\d+(?:\.\d+)?)(mg|μg|U)"
                      r"((?: 每[日周晚]\d次)?(?: [^，；。、\n]*?(?:口服|皮下注射|嚼服))?)")
_MEASURE = re.compile(r"(空腹血糖|餐后2小时血糖|餐后血糖最高|餐后血糖|最低血糖|测血糖|HbA1c |血肌酐|低密度脂蛋白胆固醇|"
                      r"尿白蛋白/肌酐比值|BMI |体重|血压)(\d+(?:\.\d+)?)(?:/(\d+))?")
_GLUCOSE_UNIT = re.compile(r"(血糖)(\d+(?:\.\d+)?)mmol/L")
_HBA1C = re.compile(r"HbA1c (\d+(?:\.\d+)?)%")
_FREQ = re.compile(r"每日(\d)次")
_AGO = re.compile(r"(\d+)(年|个月)前")
_TYPE = re.compile(r"([12])型糖尿病")
_SECTION_LINE = re.compile(r"^(主诉|现病史|既往史|家族史|个人史)：.*$", re.M)


def _section(record: str, name: str) -> tuple[int, int] | None:
    """[start, end) of a section's body (after ``name：``, to the end of its line)."""
    m = re.search(rf"^{name}：(.*)$", record, re.M)
    return (m.start(1), m.end(1)) if m else None


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:\.\d+)?", text))


def _fmt(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


# --------------------------------------------------------------------------- accuracy


def value_error(b: BaseCase) -> Iterator[Plant]:
    """A measured value changed (空腹血糖8.3 -> 9.1): a number the conversation never gives."""
    conv = _numbers(b.conversation)
    for m in _MEASURE.finditer(b.record):
        old = m.group(2)
        x = float(old)
        steps = (0.8, 1.3, -0.7) if "." in old or x < 20 else (6, 11, -5)
        for step in steps:
            new = _fmt(round(x + step, 1)) if "." in old or x < 20 else str(int(x + step))
            if "." in old and "." not in new:
                new += ".0"
            if new not in conv and float(new) > 0:
                yield Plant("value_error", "value_error", (Edit(m.start(2), m.end(2), new),), label=m.group(1).strip())
                break


def unit_error(b: BaseCase) -> Iterator[Plant]:
    """A glucose value written in mg/dL, or HbA1c in mmol/L, with the number unchanged."""
    for m in _GLUCOSE_UNIT.finditer(b.record):
        yield Plant("unit_error", "unit_error", (Edit(m.start(2), m.end(), f"{m.group(2)}mg/dL"),))
    for m in _HBA1C.finditer(b.record):
        yield Plant("unit_error", "unit_error", (Edit(m.start(1), m.end(), f"{m.group(1)}mmol/L"),))


def dose_error(b: BaseCase) -> Iterator[Plant]:
    """A drug's dose changed (二甲双胍片500mg -> 850mg), to a dose the conversation never gives."""
    conv = _numbers(b.conversation)
    for m in _MENTION.finditer(b.record):
        old, unit = m.group(2), m.group(3)
        options = DOSE_SWAPS.get(old, ()) if unit != "U" else (str(int(float(old)) + 4), str(int(float(old)) - 2))
        for new in options:
            if new not in conv:
                yield Plant("dose_error", "dose_error", (Edit(m.start(2), m.end(2), new),), label=m.group(1))
                break


def usage_error(b: BaseCase) -> Iterator[Plant]:
    """A drug's daily frequency changed (每日2次 -> 每日3次)."""
    for m in _FREQ.finditer(b.record):
        old = int(m.group(1))
        new = 2 if old != 2 else 3
        yield Plant("usage_error", "usage_error", (Edit(m.start(), m.end(), f"每日{new}次"),))


def drug_name_error(b: BaseCase) -> Iterator[Plant]:
    """A drug replaced by another of its class that the conversation never mentions (格列美脲 -> 格列齐特)."""
    for m in re.finditer(_DRUG, b.record):
        for new in DRUG_SWAPS.get(m.group(), ()):
            if new not in b.conversation and new not in b.record:
                yield Plant("drug_name_error", "drug_name_error", (Edit(m.start(), m.end(), new),), label=m.group())
                break


def time_error(b: BaseCase) -> Iterator[Plant]:
    """A time in the present illness changed (3年前 -> 5年前): a duration the conversation never gives."""
    body = _section(b.record, "现病史")
    if body is None:
        return
    for m in _AGO.finditer(b.record, *body):
        n, unit = int(m.group(1)), m.group(2)
        for new in (n + 2, n + 3, n + 1):
            if f"{new}{unit}" not in b.conversation and f"{new}{unit}" not in b.record:
                yield Plant("time_error", "time_error", (Edit(m.start(1), m.end(1), str(new)),))
                break


def time_order_confused(b: BaseCase) -> Iterator[Plant]:
    """Two times of the present illness swapped (3年前诊断…1年前加用 -> 1年前诊断…3年前加用)."""
    body = _section(b.record, "现病史")
    if body is None:
        return
    ms = [m for m in _AGO.finditer(b.record, *body)]
    for i, a in enumerate(ms):
        for c in ms[i + 1:]:
            if a.group() != c.group():
                yield Plant("time_order_confused", "time_order_confused",
                            (Edit(a.start(), a.end(), c.group()), Edit(c.start(), c.end(), a.group())))
                break


def diagnosis_error(b: BaseCase) -> Iterator[Plant]:
    """The diabetes type written wrong (2型糖尿病 -> 1型糖尿病), everywhere the record gives it."""
    ms = list(_TYPE.finditer(b.record))
    if ms:
        swap = {"1": "2", "2": "1"}
        yield Plant("diagnosis_error", "diagnosis_error",
                    tuple(Edit(m.start(1), m.end(1), swap[m.group(1)]) for m in ms))


def fact_error(b: BaseCase) -> Iterator[Plant]:
    """The course misstated: a drug added written as stopped (加用 -> 停用), poor control written as good."""
    body = _section(b.record, "现病史")
    if body is None:
        return
    for word, new in (("加用", "停用"), ("控制不佳", "控制良好")):
        i = b.record.find(word, *body)
        if i >= 0:
            yield Plant("fact_error", "fact_error", (Edit(i, i + len(word), new),))


def diabetes_in_past_history(b: BaseCase) -> Iterator[Plant]:
    """Diabetes written into 既往史 (the fixed penalty): ``2型糖尿病病史3年；`` at its start."""
    body = _section(b.record, "既往史")
    typ = _TYPE.search(b.record)
    cc = re.search(r"^主诉：[^\n]*?(\d+)(年|个月)", b.record, re.M)
    if body is None or typ is None or cc is None:
        return
    text = f"{typ.group()}病史{cc.group(1)}{cc.group(2)}；"
    yield Plant("diabetes_in_past_history", "diabetes_in_past_history", (Edit(body[0], body[0], text),))


# --------------------------------------------------------------------------- completeness


def cc_duration_missing(b: BaseCase) -> Iterator[Plant]:
    """The chief complaint without its durations (血糖升高3年，控制不佳6个月 -> 血糖升高，控制不佳)."""
    body = _section(b.record, "主诉")
    if body is None:
        return
    text = b.record[body[0]:body[1]]
    new = re.sub(r"\d+(?:年|个月|周|天)", "", text)
    if new != text:
        yield Plant("cc_duration_missing", "cc_duration_missing", (Edit(body[0], body[1], new),))


def _omission(type_id: str) -> Operator:
    def op(b: BaseCase) -> Iterator[Plant]:
        for o in b.omit:
            if o.type != type_id:
                continue
            i = b.record.find(o.record)
            j = b.conversation.find(o.conversation)
            if i < 0 or j < 0:
                raise ValueError(f"base case {b.id}: omit {o.type}: text not found")
            yield Plant(type_id, type_id, (Edit(i, i + len(o.record), ""),),
                        conversation_span=(j, j + len(o.conversation)))
    op.__doc__ = f"The fragment a base case lists for {type_id} deleted (the span is the conversation's statement)."
    op.__name__ = type_id
    return op


# --------------------------------------------------------------------------- standardization


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
    body = _section(b.record, "现病史")
    if body is not None:
        m2 = _AGO.search(b.record, *body)
        if m2 is not None:
            new = "几年前" if m2.group(2) == "年" else "前段时间"
            yield Plant("time_vague", "time_vague", (Edit(m2.start(), m2.end(), new),))


def order_error(b: BaseCase) -> Iterator[Plant]:
    """Two adjacent sections swapped (家族史 written before 既往史, 个人史 before 家族史); the span is both
    lines (either heading is out of place relative to the other)."""
    lines = list(_SECTION_LINE.finditer(b.record))
    for a, c in itertools.pairwise(lines):
        if (a.group(1), c.group(1)) in (("既往史", "家族史"), ("家族史", "个人史")):
            gap = b.record[a.end():c.start()]
            yield Plant("order_error", "order_error",
                        (Edit(a.start(), c.end(), c.group() + gap + a.group()),))


def drug_name_nonstandard(b: BaseCase) -> Iterator[Plant]:
    """A generic name written as its brand (二甲双胍片 -> 格华止)."""
    for generic, brand in BRANDS.items():
        i = b.record.find(generic)
        if i >= 0 and (i == 0 or b.record[i - 1] not in "旋"):
            yield Plant("drug_name_nonstandard", "drug_name_nonstandard", (Edit(i, i + len(generic), brand),),
                        label=generic)


def dose_unclear(b: BaseCase) -> Iterator[Plant]:
    """A drug written without its dose (二甲双胍片500mg 每日2次 -> 二甲双胍片 每日2次)."""
    for m in _MENTION.finditer(b.record):
        if b.record.count(m.group(1)) != 1 or not m.group(4):
            continue
        yield Plant("dose_unclear", "dose_unclear",
                    (Edit(m.start(), m.end(), b.record[m.start():m.start(2)] + m.group(4)),), label=m.group(1))


def usage_unclear(b: BaseCase) -> Iterator[Plant]:
    """A drug written without frequency and route (二甲双胍片500mg 每日2次 餐后口服 -> 二甲双胍片500mg)."""
    for m in _MENTION.finditer(b.record):
        if b.record.count(m.group(1)) != 1 or " 每" not in m.group(4):
            continue
        yield Plant("usage_unclear", "usage_unclear", (Edit(m.start(), m.end(), b.record[m.start():m.end(3)]),),
                    label=m.group(1))


#: deduction type (or fixed penalty id) -> its operator, in rubric order
OPERATORS: dict[str, Operator] = {
    "value_error": value_error, "unit_error": unit_error, "value_missing": _omission("value_missing"),
    "drug_name_error": drug_name_error, "dose_error": dose_error, "usage_error": usage_error,
    "drug_missing": _omission("drug_missing"),
    "time_error": time_error, "time_order_confused": time_order_confused,
    "diagnosis_error": diagnosis_error, "diagnosis_missing": _omission("diagnosis_missing"),
    "fact_error": fact_error,
    "diabetes_in_past_history": diabetes_in_past_history,
    "cc_duration_missing": cc_duration_missing,
    "pi_complications_missing": _omission("pi_complications_missing"),
    "fh_absent": _omission("fh_absent"), "fh_diabetes_missing": _omission("fh_diabetes_missing"),
    "fh_other_missing": _omission("fh_other_missing"),
    "personal_unrecorded": _omission("personal_unrecorded"),
    "colloquial": colloquial, "order_error": order_error,
    "drug_name_nonstandard": drug_name_nonstandard, "dose_unclear": dose_unclear, "usage_unclear": usage_unclear,
    "time_vague": time_vague,
}

#: deduction types of the seed 000 rubric that no operator plants, and why
UNPLANTABLE: dict[str, str] = {
    "time_unclear": "the same text defect as standardization.time_vague (a vague time); planted vague times are "
                    "counted there, and a time_unclear deduction on them is not a false alarm",
    "diagnosis_imprecise": "a matter of degree (how precise is precise enough), no single wrong span",
    "logic_error": "needs reasoning across sentences that contradicts itself; not separable from fact_error",
    "cc_symptom_missing": "a chief complaint reduced to its duration ('3年。') is not what a model writes",
    "cc_nonstandard": "a range type (1-2 points) judged by degree, no single wrong span",
    "pi_initial_diagnosis_missing": "deleting the diagnosis sentence also drops the drug started with it "
                                    "(drug_missing): not a single error in these records (not planted yet)",
    "pi_treatment_missing": "the treatment sentences carry every drug: deleting them is several drug_missing "
                            "errors at once (not planted yet)",
    "pi_recent_missing": "the recent-course sentence carries the recent values: deleting it is also value_missing "
                         "(not planted yet)",
    "pi_incomplete": "a range type judged by degree, no single wrong span",
    "ph_hypertension_missing": "the comorbidity sentence carries its drug: deleting it is also drug_missing "
                               "(not planted yet)",
    "ph_hyperlipidemia_missing": "as ph_hypertension_missing (not planted yet)",
    "ph_chd_missing": "as ph_hypertension_missing (not planted yet)",
    "ph_other_missing": "as ph_hypertension_missing (not planted yet)",
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
