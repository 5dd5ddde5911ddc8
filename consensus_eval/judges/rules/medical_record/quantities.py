"""Measurements and durations written in a text (check 6 of the package docstring, the reading part).

Measurements are found by keyword (:data:`~consensus_eval.judges.rules.medical_record.lexicon.MEASURES`:
glucose fasting/post-meal/random, HbA1c, weight, BMI, blood pressure, lipids, creatinine, eGFR,
UACR ...) with the first value after it in the same clause (full-width digits and Chinese numerals
such as 九点六 are read; targets such as ``控制在7以下`` are ignored; ``左右``/``多``/ranges make a value
approximate, ``以上``/``以下`` a threshold). Blood pressure is also found by its ``N/N`` pattern or as
``高压 ... 低压 ...``. Glucose in mg/dL or % (a mmol/L-sized value) and HbA1c in mmol/L are marked
as a unit error.

Durations are ``N年/月/周/天`` (and ``N年前``, ``去年``, ``上个月`` ...), in months or days; calendar
dates (2019年, 3月5日) and frequencies (1日3次) are not durations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from consensus_eval.judges.rules.medical_record.lexicon import GLUCOSE_KINDS, MEASURES
from consensus_eval.judges.rules.medical_record.text import ARABIC, CLAUSE_END, CN_NUMERAL, Boundaries, to_number

# ============================================================================ measurements

_WEIGHT_CHANGE = re.compile(r"下降|减轻|减少|降|掉|瘦|轻了|少了|增加|增|涨|长|胖")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_KW_KIND = {kw: kind for kind, (_, kws) in MEASURES.items() for kw in kws}
_MEASURE_KW = re.compile("|".join(
    (rf"(?<![A-Za-z]){re.escape(k)}(?![A-Za-z])" if k.isascii() else re.escape(k))
    for k in sorted(_KW_KIND, key=len, reverse=True)))
_VALUE = re.compile(rf"{ARABIC.pattern}|{CN_NUMERAL.pattern}")
_CN_FOLLOW_OK = set("点多左右上下个的了吧啊呢毫公斤千厘米mMkK%")
_FILLER_BAD = re.compile(r"和|与|及|、|分别|或")
_TARGET = re.compile(r"控制在|控制到|控制于|降到|降至|目标|要求|低于|高于|小于|大于|超过|不超过|不到|<|>|≤|≥|"
                     r"正常|参考|应该|应在|要在|保持在|达到|达标")
_THRESHOLD_AFTER = re.compile(r"\s*(?:mmol/L|mmol/l|mmol|%)?\s*(?:以上|以下|以内|之内)")
_APPROX_AFTER = re.compile(r"\s*(?:点多|点几|多|几|来|左右|上下|出头|不到|开外|[-~至到、]\s*\d)")
_UNIT = re.compile(r"\s*(mmol/L|mmol/l|mmol|毫摩尔每升|毫摩尔|mg/dL|mg/dl|mg/g|毫克每克|mg/mmol|μmol/L|umol/L|"
                   r"微摩尔每升|ml/\(min[^)]*\)|ml/min|kg/m2|kg/m²|kg|公斤|千克|斤|cm|厘米|米|mmHg|次/分|bpm|%)?")
_NOT_MEASURE_AFTER = re.compile(r"\s*(?:年|月|日|号|岁|次|天|周|个|小时|分钟|h(?![A-Za-z])|型|倍|级|期|"
                                r"mg|g(?![A-Za-z])|克|"
                                r"U(?![A-Za-z])|IU|单位|片|粒|支|袋|ml|mL|毫升|/\d|:\d)")
_BP = re.compile(r"(?<![\d/.])(?P<s>\d{2,3})\s*/\s*(?P<d>\d{2,3})(?![\d/])(?:\s*mmHg)?")
_BP_WORDS = re.compile(rf"高压\s*(?:是|有|在|大概|差不多)*\s*(?P<s>{ARABIC.pattern}|{CN_NUMERAL.pattern})"
                       rf"[^。\n]{{0,12}}?低压\s*(?:是|有|在|大概|差不多)*\s*(?P<d>{ARABIC.pattern}|{CN_NUMERAL.pattern})")


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

    @property
    def label(self) -> str:
        return "血压" if self.kind == "bp" else ("体重变化" if self.kind == "weight_change" else MEASURES[self.kind][0])


def _read_value(text: str, kind: str, kw_end: int, limit: int) -> Measure | None:
    """The first measurement value after a keyword, or None (see the module docstring)."""
    for m in _VALUE.finditer(text, kw_end, limit):
        filler = text[kw_end:m.start()]
        if len(filler) > 12 or _FILLER_BAD.search(filler) or _TARGET.search(filler):
            return None
        num = m.group()
        if re.fullmatch(r"(?:19|20)\d\d", num):
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
        if value is None:
            continue
        end = unit_m.end()
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
        unit_bad = (kind in GLUCOSE_KINDS and unit in ("mg/dL", "mg/dl", "%") and value < 35) or \
                   (kind == "hba1c" and unit.startswith(("mmol", "毫摩尔")))
        after = text[m.end():m.end() + 12]
        return Measure(kind, value, 0, end, num, bool(_APPROX_AFTER.match(after)),
                       bool(_THRESHOLD_AFTER.match(after)), unit_bad)
    return None


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
                               got.unit_bad))
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
    value: float | None  # None when vague (几年, 数月, 两三年)
    start: int
    end: int
    text: str


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
    for m in DURATION.finditer(text, lo, hi):
        num, mid, unit, post = m.group("num"), m.group("mid"), m.group("unit"), m.group("post")
        if re.fullmatch(r"\d{4}", num) or (unit in ("月", "日") and "个" not in mid
                                            and _after_year_or_month(text, lo, m.start())):
            continue  # calendar dates: 2019年, 2019年3月, 3月5日
        if unit == "日" and m.start() > 0 and text[m.start() - 1] in "每今昨次":
            continue
        if unit in ("日", "天", "周") and _FREQUENCY_AFTER.match(text, m.end()):
            continue  # 1日3次: a frequency
        if unit == "月" and "个" not in mid and not post and _MONTH_DAY_AFTER.match(text, m.end()):
            continue
        value = to_number(num) if num not in ("数", "几", "多") else None
        if value is not None and ("半" in mid or post == "半"):
            value += 0.5
        base, factor = {"年": ("m", 12), "月": ("m", 1), "周": ("d", 7), "星期": ("d", 7), "天": ("d", 1),
                        "日": ("d", 1)}[unit]
        out.append(Duration(base, None if value is None else value * factor, m.start(), m.end(), m.group()))
    for word, (base, value) in _RELATIVE_DAYS.items():
        for m in re.finditer(word, text[lo:hi]):
            out.append(Duration(base, value, lo + m.start(), lo + m.end(), word))
    return sorted(out, key=lambda d: d.start)
