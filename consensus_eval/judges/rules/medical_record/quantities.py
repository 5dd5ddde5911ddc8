"""Measurements and durations written in a text (check 6 of the package docstring, the reading part).

Measurements are found by keyword (:data:`~consensus_eval.judges.rules.medical_record.lexicon.MEASURES`:
glucose fasting/post-meal/random, HbA1c, weight, BMI, blood pressure, lipids, creatinine, eGFR,
UACR ...) with the first value after it in the same clause (full-width digits and Chinese numerals
such as 九点六 are read; targets such as ``控制在7以下`` are ignored; ``左右``/``多``/ranges make a value
approximate, ``以上``/``以下`` a threshold). Blood pressure is also found by its ``N/N`` pattern or as
``高压 ... 低压 ...``. Each value keeps its unit's usual form (:func:`unit_form`); a value in a unit its
kind is never given in, or of the size its kind takes in another unit (:func:`unit_wrong`), is marked
as a unit error; HbA1c in mmol/mol is read as %. An approximate value has a window
(:func:`approx_window`: ``7点多`` [7, 8], ``9左右`` ±0.5, ``5到6`` [5, 6] ...). :func:`later_values`
reads the numbers after a keyword's value (``糖化上次7.8，这次8.1``), :func:`unit_values` every number
written with a unit, as a value of each kind measured in that unit, and :class:`Anchors` the
time-point words (今天/本次 now, 去年/N年前 before).

Durations are ``N年/月/周/天`` (and ``N年前``, ``去年``, ``上个月`` ...), in months or days; calendar
dates (2019年, 3月5日), frequencies and rates (1日3次, 一天吃两次, 一天打一针, 一日三餐, 三天打一次,
3个月查一次, 每3个月; not 近3个月2次低血糖, a span) and gestational ages (``孕28周``, ``孕24+3周``, ``妊娠24周3天``,
``怀孕7个月``: how far a pregnancy is, not how long ago or how long something lasted) are not durations.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from consensus_eval.judges.rules.medical_record.lexicon import GLUCOSE_KINDS, MEASURES
from consensus_eval.judges.rules.medical_record.text import (
    ARABIC,
    CLAUSE_END,
    CN_NUMERAL,
    Boundaries,
    letter_bounded,
    to_number,
)

# ============================================================================ measurements

_WEIGHT_CHANGE = re.compile(r"下降|减轻|减少|降|掉|瘦|轻了|少了|增加|增|涨|长|胖")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_KW_KIND = {kw: kind for kind, (_, kws) in MEASURES.items() for kw in kws}
_MEASURE_KW = re.compile("|".join(letter_bounded(k) if k.isascii() else re.escape(k)
                                   for k in sorted(_KW_KIND, key=len, reverse=True)))
_VALUE = re.compile(rf"{ARABIC.pattern}|{CN_NUMERAL.pattern}")
_CN_FOLLOW_OK = set("点多左右上下个的了吧啊呢毫公斤千厘米mMkK%")
_FILLER_BAD = re.compile(r"和|与|及|、|分别|或")
_TARGET = re.compile(r"控制在|控制到|控制于|降到|降至|目标|要求|低于|高于|小于|大于|超过|不超过|不到|<|>|≤|≥|"
                     r"正常|参考|应该|应在|要在|保持在|达到|达标")
_THRESHOLD_AFTER = re.compile(r"\s*(?:mmol/L|mmol/l|mmol|%)?\s*(?:以上|以下|以内|之内)")
_APPROX_AFTER = re.compile(r"\s*(?:点多|点几|多|几|来|左右|上下|出头|不到|开外|[-~至到、]\s*\d)")
_UNIT = re.compile(r"\s*(mmol/mol|毫摩尔/摩尔|毫摩尔每摩尔|mmol/L|mmol/l|mmol|毫摩尔每升|毫摩尔|"
                   r"mg/dL|mg/dl|mg/g|毫克每克|mg/mmol|μmol/L|μmol/l|umol/L|umol/l|微摩尔每升|微摩尔|[mM][lL]/\(min[^)]*\)|"
                   r"[mM][lL]/min(?:/1\.73\s*m[2²])?|毫升每分|kg/m2|kg/m²|kg|公斤|千克|斤|cm|厘米|米|mmHg|次/分|bpm|%)?")
#: a unit as written -> its usual form
UNIT_FORMS = {"mmol/mol": "mmol/mol", "毫摩尔/摩尔": "mmol/mol", "毫摩尔每摩尔": "mmol/mol",
              "mmol/L": "mmol/L", "mmol/l": "mmol/L", "mmol": "mmol/L", "毫摩尔每升": "mmol/L", "毫摩尔": "mmol/L",
              "mg/dL": "mg/dL", "mg/dl": "mg/dL", "mg/g": "mg/g", "毫克每克": "mg/g", "mg/mmol": "mg/mmol",
              "μmol/L": "μmol/L", "μmol/l": "μmol/L", "umol/L": "μmol/L", "umol/l": "μmol/L", "微摩尔每升": "μmol/L",
              "微摩尔": "μmol/L", "毫升每分": "ml/min", "kg/m2": "kg/m2",
              "kg/m²": "kg/m2", "kg": "kg", "公斤": "kg", "千克": "kg", "斤": "斤", "cm": "cm", "厘米": "cm", "米": "m",
              "mmHg": "mmHg", "次/分": "次/分", "bpm": "次/分", "%": "%"}
_LIPIDS = ("tg", "tc", "ldl", "hdl")
#: a unit's usual form -> the kinds of measurement given in it
UNIT_KINDS: dict[str, tuple[str, ...]] = {
    "mmol/L": (*sorted(GLUCOSE_KINDS), *_LIPIDS), "mg/dL": (*sorted(GLUCOSE_KINDS), *_LIPIDS, "cr", "ua"),
    "%": ("hba1c",), "mmol/mol": ("hba1c",), "kg": ("weight", "weight_change"), "斤": ("weight", "weight_change"),
    "cm": ("height",), "m": ("height",), "μmol/L": ("cr", "ua"), "ml/min": ("egfr",), "mg/g": ("uacr",),
    "mg/mmol": ("uacr",), "kg/m2": ("bmi",), "次/分": ("hr",)}


def unit_form(unit: str) -> str:
    """The usual form of a unit as ``_UNIT`` reads it ('' for none)."""
    return "ml/min" if unit[:3].lower() == "ml/" else UNIT_FORMS.get(unit, "")


#: per kind and unit: the values that unit cannot carry, (low, high): below low or above high is the
#: size of a value in another unit (98 mmol/L creatinine is a μmol/L value, 65% HbA1c a mmol/mol one)
_UNIT_SIZES: dict[tuple[str, str], tuple[float, float]] = {
    **{(k, "mmol/L"): (0, 70) for k in GLUCOSE_KINDS}, **{(k, "mg/dL"): (35, 2000) for k in GLUCOSE_KINDS},
    ("hba1c", "%"): (0, 25), ("hba1c", "mmol/mol"): (20, 250),
    ("cr", "mmol/L"): (0, 5), ("cr", "μmol/L"): (15, 3000), ("cr", "mg/dL"): (0, 30),
    ("ua", "mmol/L"): (0, 3), ("ua", "μmol/L"): (30, 2000), ("ua", "mg/dL"): (0, 30),
    **{(k, "mmol/L"): (0, 40) for k in _LIPIDS}, **{(k, "mg/dL"): (15, 3000) for k in _LIPIDS},
    ("height", "cm"): (3, 260), ("height", "m"): (0, 3),
}
_CHANGE = re.compile(r"下降|降低|减少|减轻|升高|增加|增高|上升|较前|较上次|变化|波动|达标率|比例|清除率|比值|比率")


def unit_wrong(kind: str, form: str, value: float, filler: str = "") -> bool:
    """Whether a value of ``kind`` written with the unit ``form`` (its usual form) is in a wrong unit: a
    unit no value of that kind is given in (eGFR in μmol/L, a weight in cm), or a value of the size the
    kind takes in another unit (:data:`_UNIT_SIZES`). A relative change (``eGFR较前下降20%``) or another
    measure named after the keyword (``肌酐清除率``) is not judged."""
    if not form or form == "mmHg" or _CHANGE.search(filler):
        return False
    if kind not in UNIT_KINDS.get(form, ()):
        return True
    lo, hi = _UNIT_SIZES.get((kind, form), (float("-inf"), float("inf")))
    return not lo <= value <= hi


@dataclass(frozen=True)
class UnitValue:
    """A number written with a unit, as a value of one kind measured in that unit."""

    kind: str
    value: float  # in the kind's unit (120斤: a weight of 60)
    raw: float    # as written
    unit: str     # the unit's usual form


def unit_values(text: str) -> list[UnitValue]:
    """Every number of ``text`` written with a unit, once for each kind measured in that unit (``62公斤``:
    weight 62; ``120斤``: weight 60): a value of that kind, wherever it is written."""
    out = []
    for m in _VALUE.finditer(text):
        unit_m = _UNIT.match(text, m.end())
        assert unit_m is not None
        form = unit_form(unit_m.group(1) or "")
        value = to_number(m.group()) if form else None
        if value is None:
            continue
        for kind in UNIT_KINDS.get(form, ()):
            out.append(UnitValue(kind, value / 2 if form == "斤" else value, value, form))
    return out


_NOT_MEASURE_AFTER = re.compile(r"(?:\s*(?:-|~|～|到|至)\s*\d+(?:\.\d+)?)?"  # 7-8年: a range of durations
                                r"\s*(?:年|月|日|号|岁|次|天|周|个|小时|分钟|h(?![A-Za-z])|型|倍|级|期|"
                                r"mg|g(?![A-Za-z])|克|"
                                r"U(?![A-Za-z])|IU|单位|片|粒|支|袋|ml|mL|毫升|/\d|:\d)")
_BP = re.compile(r"(?<![\d/.])(?P<s>\d{2,3})\s*/\s*(?P<d>\d{2,3})(?![\d/])(?:\s*mmHg)?")
_BP_WORDS = re.compile(rf"高压\s*(?:是|有|在|大概|差不多)*\s*(?P<s>{ARABIC.pattern}|{CN_NUMERAL.pattern})"
                       rf"[^。\n]{{0,12}}?低压\s*(?:是|有|在|大概|差不多)*\s*(?P<d>{ARABIC.pattern}|{CN_NUMERAL.pattern})")


_YEAR = re.compile(r"(?:19|20)\d\d")
_METRES_CM = re.compile(r"\s*米\s*(\d{1,2})")


@dataclass(frozen=True)
class Measure:
    kind: str
    value: float | tuple[float, float]
    start: int       # keyword start (or the value's, for a bare blood pressure)
    end: int         # end of the value and its unit
    num: str         # the value as written
    approx: bool     # 左右, 多, ranges: matchable, never required
    threshold: bool  # 以上/以下: neither compared nor required
    unit_bad: bool = False
    window: tuple[float, float] | None = None  # what an approximate value stands for (approx_window)
    unit: str = ""   # the unit's usual form (unit_form), '' if none is written
    ranged: bool = False  # a range (5到6, 4.8～12, 七八): its ends are values, not a point inside it

    @property
    def label(self) -> str:
        return "血压" if self.kind == "bp" else ("体重变化" if self.kind == "weight_change" else MEASURES[self.kind][0])


_RANGE_TO = re.compile(r"\s*[-~～至到、]\s*\d")
_APPROX_KIND = re.compile(r"\s*(?:(?P<frac>点多|点几)|(?P<more>多|几|来|出头|开外)|(?P<about>左右|上下)|"
                          rf"(?P<under>不到)|[-~～至到、]\s*(?P<to>{ARABIC.pattern}))")


def approx_window(value: float, text: str, pos: int) -> tuple[float, float] | None:
    """The values an approximate number at ``text[..pos]`` stands for, from what follows it: ``7点多``
    [7, 8]; ``10多`` [10, 11], ``70多`` [70, 80]; ``9左右`` ±0.5 (±3% from 20 up); ``不到7`` [6, 7];
    ``5到6`` [5, 6]. None if the number is not approximate."""
    m = _APPROX_KIND.match(text, pos)
    if m is None:
        return None
    if m.group("frac"):
        return value, value + 1
    if m.group("more"):
        return value, value + (10 if value >= 20 and value % 10 == 0 else 1)
    if m.group("under"):
        return value - 1, value
    to = m.group("to")
    if to is not None:
        other = float(to)
        return min(value, other), max(value, other)
    d = 0.5 if value < 20 else 0.03 * value
    return value - d, value + d


def _read_value(text: str, kind: str, kw_end: int, limit: int) -> Measure | None:
    """The first measurement value after a keyword, or None (see the module docstring)."""
    for m in _VALUE.finditer(text, kw_end, limit):
        filler = text[kw_end:m.start()]
        if len(filler) > 12 or _FILLER_BAD.search(filler) or _TARGET.search(filler):
            return None
        num = m.group()
        if _YEAR.fullmatch(num):
            continue  # a year (a date), not a value
        nxt = text[m.end():m.end() + 1]
        if not num[0].isdigit() and _CJK.match(nxt) and nxt not in _CN_FOLLOW_OK:
            continue
        unit_m = _UNIT.match(text, m.end())
        assert unit_m is not None  # every part of _UNIT is optional: it always matches
        unit = unit_m.group(1) or ""
        if not unit and _NOT_MEASURE_AFTER.match(text, m.end()):
            continue
        value = to_number(num)
        rng = numeral_range(num) if value is None else None  # 七八: 7 to 8, never exactly 7
        if rng is not None:
            value = rng[0]
        if value is None:
            continue
        end, raw = unit_m.end(), value
        if kind == "height":
            cm = _METRES_CM.match(text, m.end())
            if cm and value < 3:
                value, end = value * 100 + float(cm.group(1)), cm.end()
            elif unit in ("米", "m") or value < 3:
                value *= 100
        if kind in ("weight", "weight_change") and unit == "斤":
            value /= 2
        if kind == "weight" and _WEIGHT_CHANGE.search(filler):
            if unit not in ("kg", "公斤", "千克", "斤"):
                return None
            kind = "weight_change"
        form = unit_form(unit)
        unit_bad = unit_wrong(kind, form, raw, filler)
        if kind == "hba1c" and form == "mmol/mol" and not unit_bad:
            value = round(value / 10.929 + 2.15, 1)  # IFCC to NGSP: 65 mmol/mol is 8.1%
        after = text[m.end():m.end() + 12]
        if rng is not None:
            window: tuple[float, float] | None = (value, value * rng[1] / rng[0])
        else:
            window = approx_window(value, text, m.end()) or (approx_window(value, text, end) if unit else None)
        ranged = rng is not None or bool(_RANGE_TO.match(text, m.end()) or (unit and _RANGE_TO.match(text, end)))
        return Measure(kind, value, 0, end, num, rng is not None or bool(_APPROX_AFTER.match(after)),
                       bool(_THRESHOLD_AFTER.match(after)), unit_bad, window, form, ranged)
    return None


def keyword_kinds(text: str, lo: int, hi: int) -> list[tuple[int, str]]:
    """(start, kind) of the measurement keywords of ``text[lo:hi]``, in order."""
    return [(k.start(), _KW_KIND[k.group()]) for k in _MEASURE_KW.finditer(text, lo, hi)]


@dataclass(frozen=True)
class Value:
    """A number written after a measurement's own value, before the next keyword (``空腹上次7.8，这次8.1``:
    8.1): read as another value of the same measurement."""

    value: float
    start: int
    end: int  # of its unit
    num: str  # the number as written
    window: tuple[float, float] | None  # approximate: what it stands for (approx_window)


def later_values(text: str, lo: int, hi: int) -> list[Value]:
    """The numbers of ``text[lo:hi]`` that can be a measurement value: not a year, a dose, a count, a
    duration or a date (what follows them, as for a keyword's first value), not a target or threshold."""
    out = []
    for m in _VALUE.finditer(text, lo, hi):
        num = m.group()
        if _YEAR.fullmatch(num):
            continue
        nxt = text[m.end():m.end() + 1]
        if not num[0].isdigit() and _CJK.match(nxt) and nxt not in _CN_FOLLOW_OK:
            continue
        unit_m = _UNIT.match(text, m.end())
        assert unit_m is not None
        if not unit_m.group(1) and _NOT_MEASURE_AFTER.match(text, m.end()):
            continue
        after = text[m.end():m.end() + 12]
        if _THRESHOLD_AFTER.match(after) or _TARGET.search(text, max(lo, m.start() - 4), m.start()):
            continue
        value = to_number(num)
        rng = numeral_range(num) if value is None else None  # 十二三: 12 to 13
        if rng is not None:
            out.append(Value(rng[0], m.start(), unit_m.end(), num, rng))
        elif value is not None:
            window = approx_window(value, text, m.end()) or approx_window(value, text, unit_m.end())
            out.append(Value(value, m.start(), unit_m.end(), num, window))
    return out


# ============================================================================ time points

#: words that place a value now (this visit, these weeks) or before it (a date, N年前, 上次 ...); a next
#: step (后来, 此后) places what follows it at no known point; 平时/一般 are no time words
PRESENT = "present"
PAST = "past"
_ANCHOR = re.compile(
    r"(?P<present>今天|今日|今晨|今早|本次|此次|这次|这回|目前|现在|刚才|刚刚|当前|最近|近期|近来|"
    r"近\s*(?:\d+|[一二两三四五六七八九十半几数]+)\s*(?:个)?\s*(?:年|月|周|星期|天|日))|"
    r"(?P<past>去年|前年|上次|上回|以前|之前|当时|那时|那会|初诊|起病时|诊断时|确诊时|发现时|刚诊断|刚发现|刚查出|"
    r"上个月|上月|上周|上星期|昨天|前天|"
    r"(?:(?<!\d)\d+(?:\.\d+)?|[一二两三四五六七八九十半几数]+)\s*(?:多|余)?\s*个?\s*(?:多|余|半)?\s*"
    r"(?:年|月|周|星期|天|日)\s*(?:多|余|半)?\s*前)|"
    r"(?P<none>后来|此后|之后|以后|随后|然后)|"
    r"(?P<date>(?<!\d)(?P<y>(?:19|20)\d\d)\s*年(?:\s*(?P<mo>1[0-2]|0?[1-9])\s*月)?)")


class Anchors:
    """The time-point words of one text (:data:`PRESENT`: 今天, 本次, 目前 ...; :data:`PAST`: 去年, 上次,
    N年前, 诊断时 ...), found once; :meth:`at` gives the nearest one before a position."""

    __slots__ = ("_ends", "_kinds", "_starts")

    def __init__(self, text: str) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._kinds: list[str | None] = []
        for m in _ANCHOR.finditer(text):
            self._starts.append(m.start())
            self._ends.append(m.end())
            if m.group("date"):
                kind: str | None = f"date:{m.group('y')}-{int(m.group('mo') or 0)}"
            else:
                kind = PRESENT if m.group("present") else PAST if m.group("past") else None
            self._kinds.append(kind)

    def at(self, pos: int, lo: int) -> str | None:
        """The kind of the last anchor ending at or before ``pos`` and starting at or after ``lo``: PRESENT,
        PAST, ``date:YYYY-M`` for a calendar date (M 0 for a year alone: a date may be today), None for
        none or for a next step."""
        i = bisect_right(self._ends, pos) - 1
        return self._kinds[i] if i >= 0 and self._starts[i] >= lo else None


def measures(text: str, lo: int = 0, hi: int | None = None, clauses: Boundaries | None = None) -> list[Measure]:
    """The measurements in ``text[lo:hi]``; ``clauses``: the text's clause delimiters, if already found."""
    hi = len(text) if hi is None else hi
    clauses = Boundaries(text, CLAUSE_END) if clauses is None else clauses
    out: list[Measure] = []
    kws = list(_MEASURE_KW.finditer(text, lo, hi))
    for i, k in enumerate(kws):
        limit = min(kws[i + 1].start() if i + 1 < len(kws) else hi, clauses.stop(k.end(), hi))
        got = _read_value(text, _KW_KIND[k.group()], k.end(), limit)
        if got is not None:
            out.append(Measure(got.kind, got.value, k.start(), got.end, got.num, got.approx, got.threshold,
                               got.unit_bad, got.window, got.unit, got.ranged))
    for rx in (_BP, _BP_WORDS):
        for m in rx.finditer(text, lo, hi):
            s, d = to_number(m.group("s")), to_number(m.group("d"))
            if s is None or d is None or not (70 <= s <= 260 and 40 <= d <= 160 and s > d):
                continue
            before = text[max(lo, m.start() - 6):m.start()]
            after = text[m.end():m.end() + 4]
            if _TARGET.search(before):
                continue
            approx = bool(re.match(r"\s*(?:左右|上下)", after))
            threshold = bool(re.match(r"\s*(?:以上|以下|以内)", after))
            out.append(Measure("bp", (s, d), m.start(), m.end(), f"{m.group('s')}/{m.group('d')}", approx, threshold))
    return sorted(out, key=lambda x: x.start)


# ============================================================================ durations

# A number starts where its run of digits (or of numerals) starts: a number that fails there fails at
# every later start inside the run too (the run can be read from its start), and without the
# lookbehinds the scan would retry each one, in time quadratic in the run's length (10,000 digits took
# seconds). No match ends inside a run, so the run's start has been tried, except after a 半 or 多 that
# ends a match (3年多, 一年半: after a unit), so a numeral is refused only after a 半/多 that follows
# something else.
DURATION = re.compile(r"(?P<num>(?<!\d)\d+(?:\.\d+)?"
                      r"|(?<![一二两三四五六七八九十百数几])(?<![^年月周期天日][半多])[一二两三四五六七八九十百半数几多]+)"
                      r"(?P<mid>[余多来+个半\s]{0,3})(?P<unit>年|月|周|星期|天|日)(?P<post>[余多半]?)")
_RELATIVE_DAYS = {"去年": ("m", 12.0), "前年": ("m", 24.0), "上个月": ("m", 1.0), "上月": ("m", 1.0),
                  "上周": ("d", 7.0), "上个星期": ("d", 7.0), "昨天": ("d", 1.0), "前天": ("d", 2.0)}
CALENDAR = re.compile(r"(?:19|20)\d\d\s*年|(?<![个\d])(?:\d{1,2}|十[一二]?|[一二三四五六七八九])\s*月(?!余|多)|"
                      r"今年|年初|年底|年中|春节|过年|开春|夏天|冬天|秋天|春天")


@dataclass(frozen=True)
class Duration:
    base: str            # "m" (months) or "d" (days)
    value: float | None  # None when vague (几年, 数月) or a range (七八年, 5-6年)
    start: int
    end: int
    text: str
    #: what it stands for, in the base's units: (v, v) for an exact value; a range (七八年, 十四五天, 5-6年)
    #: from its low end to its high end; an approximate one (3年多, 10余年) up to the next unit (3 to 4 years;
    #: 10 to 20 for a round ten: 十多年, 20余年), 十来年 a unit either way; None when vague (几年, 数月)
    window: tuple[float, float] | None = None


_NUM = r"(?:\d+(?:\.\d+)?|[一二两三四五六七八九十]+)"
#: a gestational age: 孕/妊娠/怀孕/停经 and weeks (with days: 24+3周, 24周+3天, 24周零3天) or months
GESTATIONAL_AGE = re.compile(
    rf"(?:孕|妊娠|怀孕|停经|孕龄|胎龄)(?:期|了|已|约|第|到|至)?\s*{_NUM}\s*"
    rf"(?:(?:\+|加|又|零)\s*{_NUM}\s*)?(?:周|星期|个?月)(?:\s*(?:\+|加|又|零)?\s*{_NUM}\s*天)?")
#: a count of doses or times after a period (一天吃两次, 一天打一针, 一日三餐, 3个月查一次, 一天一包, 一天半包烟): the
#: period is a rate's
_RATE_AFTER = re.compile(r"[^\d,;。、\n前后了过来内间里]{0,3}?(?P<n>\d+|[一两二三四五六七八九十]{1,2}|半)\s*"
                         r"(?:次|回|顿|针|片|粒|支|袋|颗|餐|包|盒|瓶|罐|听|杯|碗|两|斤|个单位|单位|U|u|IU|mg|毫克|g|克)")
#: words that make a period before a count a span of time (近3个月2次低血糖: two lows in the last 3 months); not
#: 以前/之前/从前 (以前一天一包: in the past, a pack a day)
_SPAN_BEFORE = re.compile(r"(?:近|最近|过去|这|(?<![以之从])前|头)$")
_FREQUENCY_AFTER = re.compile(r"\s*(?:\d+|[一两二三四五六])\s*(?:次|片|粒|针)")
_MONTH_DAY_AFTER = re.compile(r"\s*(?:\d|份)")


def _after_year_or_month(text: str, lo: int, pos: int) -> bool:
    """Whether ``text[lo:pos]`` ends with 年 or 月 and blanks: ``re.search(r"[年月]\\s*$", text[lo:pos])``."""
    i = pos
    while i > lo and text[i - 1].isspace():  # \s is str.isspace; the blanks before each duration are its own
        i -= 1
    return i > lo and text[i - 1] in "年月"


def durations(text: str, lo: int = 0, hi: int | None = None) -> list[Duration]:
    hi = len(text) if hi is None else hi
    out = []
    # gestational ages, found once: a duration inside one is none (孕24+3周 holds no "3周")
    ga_starts, ga_ends = [], []
    for g in GESTATIONAL_AGE.finditer(text, lo, hi):
        ga_starts.append(g.start())
        ga_ends.append(g.end())
    for m in DURATION.finditer(text, lo, hi):
        k = bisect_right(ga_starts, m.start()) - 1
        if k >= 0 and m.start() < ga_ends[k]:
            continue
        if not _is_duration(text, lo, m):
            continue
        base, factor = {"年": ("m", 12), "月": ("m", 1), "周": ("d", 7), "星期": ("d", 7), "天": ("d", 1),
                        "日": ("d", 1)}[m.group("unit")]
        value, window, start = _value_window(text, lo, m, factor)
        out.append(Duration(base, None if value is None else value * factor, start, m.end(), text[start:m.end()],
                            window))
    for word, (base, value) in _RELATIVE_DAYS.items():
        for m in re.finditer(word, text[lo:hi]):
            out.append(Duration(base, value, lo + m.start(), lo + m.end(), word, (value, value)))
    return sorted(out, key=lambda d: d.start)


def _is_duration(text: str, lo: int, m: re.Match[str]) -> bool:
    """Whether the :data:`DURATION` match ``m`` is a duration: not a calendar date, a frequency, a period of
    something repeated or a rate."""
    num, mid, unit, post = m.group("num"), m.group("mid"), m.group("unit"), m.group("post")
    if re.fullmatch(r"\d{4}", num) or (unit in ("月", "日") and "个" not in mid
                                        and _after_year_or_month(text, lo, m.start())):
        return False  # calendar dates: 2019年, 2019年3月, 3月5日
    if unit == "日" and m.start() > 0 and text[m.start() - 1] in "每今昨次":
        return False
    if unit in ("日", "天", "周") and _FREQUENCY_AFTER.match(text, m.end()):
        return False  # 1日3次: a frequency
    if m.start() > lo and text[m.start() - 1] == "每":
        return False  # 每3个月, 每周: a period of something repeated, no time
    if post == "半" and num in ("一", "1") and _RATE_AFTER.match(text, m.end() - 1):
        return False  # 一天半包: half a pack a day, not a day and a half ago
    rate = _RATE_AFTER.match(text, m.end())
    if rate and (num in ("一", "1") or rate.group("n") in ("一", "1", "半")) \
            and not _SPAN_BEFORE.search(text, max(lo, m.start() - 2), m.start()):
        return False  # 一天吃一次, 一天打一针, 一日三餐, 三天打一次, 3个月查一次: a frequency, not one day ago
    return not (unit == "月" and "个" not in mid and not post and _MONTH_DAY_AFTER.match(text, m.end()))


def _value_window(text: str, lo: int, m: re.Match[str], factor: int
                  ) -> tuple[float | None, tuple[float, float] | None, int]:
    """The duration ``m``'s value in its unit (None when only a window is known), its window in the base unit
    (``factor`` base units a unit), and where it starts (a range's low end written before it)."""
    num, mid, post = m.group("num"), m.group("mid"), m.group("post")
    value = to_number(num) if num not in ("数", "几", "多") else None
    if value is None and len(num) > 1 and num.endswith("多"):  # 十多年, 二十多天: 多 read with the number
        value, mid = to_number(num[:-1]), "多" + mid
    half = 0.5 if "半" in mid or post == "半" else 0.0
    window: tuple[float, float] | None = None
    start = m.start()
    if value is None:
        got = numeral_range(num)  # 七八年, 十四五天, 两三个月
        if got is not None:
            window = (got[0] * factor, (got[1] + half) * factor)
    else:
        value += half
        before = _RANGE_BEFORE.search(text, max(lo, start - 12), start)  # 5-6年, 三到四年
        low = to_number(before.group("lo")) if before else None
        if before and low is not None and low < value:
            window, value, start = (low * factor, value * factor), None, before.start()
        elif "来" in mid:  # 十来年: about ten years, a year either way
            window = ((value - 1) * factor, (value + 1) * factor)
        elif _APPROX.search(mid + post):  # 3年多, 10余年: up to the next unit (ten units for a round ten)
            step = 10 if value >= 10 and value % 10 == 0 else 1
            window = (value * factor, (value + step) * factor)
        else:
            window = (value * factor, value * factor)
    return value, window, start


_APPROX = re.compile(r"[多余来+]")
#: the low end of a range written before a duration's number (5-6年, 5～6年, 5到6年, 三至四年)
_RANGE_BEFORE = re.compile(r"(?P<lo>(?<!\d)\d+(?:\.\d+)?|(?<![一二两三四五六七八九十])[一二两三四五六七八九十]+)"
                           r"\s*(?:-|~|～|—|到|至)\s*$")
_RANGE_DIGITS = "一二三四五六七八九"


def numeral_range(s: str) -> tuple[float, float] | None:
    """Two numerals in a row, one apart, for an approximate range: 七八 (7, 8), 两三 (2, 3), 十四五 (14, 15),
    十一二 (11, 12), 三四十 (30, 40), 一两 (1, 2); None for anything else (a number, 几, junk)."""
    m = re.fullmatch(r"(?P<tens>[一二三四五六七八九]?十)?(?P<a>[一两二三四五六七八九])(?P<b>[两二三四五六七八九])"
                     r"(?P<ten>十)?", s)
    if m is None or (m.group("tens") and m.group("ten")):
        return None
    a, b = (_RANGE_DIGITS.index(c.replace("两", "二")) + 1 for c in (m.group("a"), m.group("b")))
    if b != a + 1:
        return None
    if m.group("ten"):
        return a * 10.0, b * 10.0
    tens = m.group("tens")
    base = 0 if tens is None else 10 * (1 if tens == "十" else _RANGE_DIGITS.index(tens[0]) + 1)
    return float(base + a), float(base + b)


class Windows:
    """Closed intervals, to ask whether any meets a given one (or holds a value) in O(log n): sorted by their
    low end, with the highest high end of each prefix (an interval [lo, hi] meets [a, b] iff lo <= b and
    hi >= a). The numbers and timeline checks both ask it."""

    def __init__(self, windows: list[tuple[float, float]]) -> None:
        windows.sort()
        self.lows = [lo for lo, _ in windows]
        self.highs: list[float] = []
        for _, hi in windows:
            self.highs.append(max(hi, self.highs[-1]) if self.highs else hi)

    def meets(self, a: float, b: float, tol: float = 1e-6) -> bool:
        i = bisect_right(self.lows, b + tol) - 1
        return i >= 0 and self.highs[i] >= a - tol

    def holds(self, v: float, tol: float = 1e-6) -> bool:
        return self.meets(v, v, tol)
