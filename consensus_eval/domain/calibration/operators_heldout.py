"""A held-out family of planting operators: the same deduction types as :mod:`operators`, written differently.

A judge tuned on the built-in suite may have learnt the main operators' words and places rather than the
errors. This family plants the same types with other wording and in other places, so that recall on it
beside recall on the main family shows over-fitting (``--suite builtin-heldout``). What differs, per type:

- value_error: digits transposed or another step (7.8 -> 8.7); the later of two values of one measure takes
  the earlier value; a vital sign or test nobody gave added after the blood pressure (心率76次/分) or the
  HbA1c (糖化白蛋白);
- unit_error: creatinine in mmol/L, HbA1c in mmol/mol, lipids and uric acid in mg/dL, weight in 斤, blood
  pressure in kPa (the main family: glucose in mg/dL, HbA1c in mmol/L);
- drug_name_error: the last same-class drug of the table instead of the first; a drug added to 既往史 after
  a comorbidity's drug instead of to the present illness;
- dose_error: the strength below instead of above, written in the other unit (500mg -> 0.25g, 0.5g ->
  250mg; insulin in 单位); usage_error: the timing changed (睡前 -> 早餐前, 餐后 -> 餐前) or the frequency
  written in words (每日2次 -> 一日三次);
- time_error: units confused (6个月 -> 1年, 1年 -> 6个月, N个月 <-> N周) and calendar months moved;
  time_order_confused: the first event of the present illness moved to its end;
- diagnosis_error: a complication named wrong (糖尿病肾病 -> 糖尿病视网膜病变), else the type at its first
  place only; a denied comorbidity written ``合并X`` (the last item, not the first);
- fact_error: other words turned (缓解 -> 加重, 下降 -> 增加, 停用 -> 继续使用, 未见异常 -> 可见异常); a
  symptom added as ``偶有X。`` at the end of the present illness; a symptom present written as absent (伴X
  -> 无X); a side or site wrong in 既往史 and the examination (左 <-> 右, 上肢 <-> 下肢);
- diabetes_in_past_history: ``患2型糖尿病N年`` at the end of 既往史; cc_duration_missing: the first duration only;
- colloquial: other colloquial words (老想喝水, 小便多, 眼睛看不清, 浑身没力气 ...); time_vague: other vague
  words (近来, 早些年, 前一阵子, 前几天); order_error: 个人史 moved before 既往史; drug_name_nonstandard: short
  names and other brands (二甲, 甘精, 倍他乐克, 优甲乐 ...); dose_unclear: ``1片`` / ``适量`` for the dose;
  usage_unclear: ``遵医嘱`` for frequency and route.

Omissions delete the fragments a base lists (``omit``): there is no wording to vary, so the family uses the
main operators for them (named as in the main family).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from consensus_eval.domain.calibration.operators import (
    DIABETES_TYPE,
    DRUG_BY_NAME,
    FORMS,
    HBA1C,
    NAME_RE,
    OPERATOR_TYPES,
    OPERATORS,
    SECTION_LINE,
    STRENGTH,
    STRENGTHS,
    SYMPTOMS,
    TO_MG,
    BaseCase,
    Edit,
    Operator,
    Plant,
    alternatives,
    diabetes_history,
    dose_options,
    doses,
    family_line,
    fmt,
    inside_quotes,
    is_insulin_unit,
    measures,
    mentions,
    numbers,
    pick,
    same_measure_pairs,
    section,
    swap_edits,
)

# --------------------------------------------------------------------------- accuracy


def value_error_h(b: BaseCase) -> Iterator[Plant]:
    """A measured value with its digits transposed (7.8 -> 8.7, 132 -> 123), else moved by another step than
    the main family's (-0.4 or +1.7; -4 or +17)."""
    conv = numbers(b.conversation)
    for m in measures(b.record):
        old = m.group(2)
        digits = old.replace(".", "")
        options = []
        if len(digits) >= 2 and digits[-1] != digits[-2]:
            swapped = digits[:-2] + digits[-1] + digits[-2]
            options.append(swapped if "." not in old else swapped[:old.index(".")] + "." + swapped[old.index("."):])
        x = float(old)
        small = "." in old or x < 20
        options += [fmt(round(x - 0.4, 1)), fmt(round(x + 1.7, 1))] if small else [str(int(x) - 4), str(int(x) + 17)]
        new = next((o for o in options if o not in conv and o != old and not o.startswith("0")), None)
        if new is not None:
            yield Plant("value_error_h", "value_error", (Edit(m.start(2), m.end(2), new),), label=m.group(1).strip())


def value_wrong_time_h(b: BaseCase) -> Iterator[Plant]:
    """The later of two values of one measure given the earlier one's value (HbA1c 7.8 today -> 6.9, its
    value at diagnosis)."""
    for a, c in same_measure_pairs(b.record):
        yield Plant("value_wrong_time_h", "value_error", (Edit(c.start(2), c.end(2), a.group(2)),),
                    label=c.group(1).strip())


def hallucinated_result_h(b: BaseCase) -> Iterator[Plant]:
    """A vital sign nobody gave after the blood pressure (``，心率76次/分``), else a test after the HbA1c
    (``，糖化白蛋白19.6%``): a value the conversation never gives (value_error)."""
    bp = re.search(r"血压\d+/\d+mmHg", b.record)
    if bp is not None and "心率" not in b.record and "心率" not in b.conversation:
        yield Plant("hallucinated_result_h", "value_error", (Edit(bp.end(), bp.end(), "，心率76次/分", ((1, 8),)),),
                    label="心率")
        return
    hb = next(HBA1C.finditer(b.record), None)
    if hb is not None and "糖化白蛋白" not in b.conversation:
        yield Plant("hallucinated_result_h", "value_error",
                    (Edit(hb.end(), hb.end(), "，糖化白蛋白19.6%", ((1, 11),)),), label="糖化白蛋白")


_UNIT_SWAPS: tuple[tuple[str, str, str], ...] = (
    (r"(血肌酐)(\d+(?:\.\d+)?)μmol/L", "μmol/L", "mmol/L"), (r"(HbA1c )(\d+(?:\.\d+)?)%", "%", "mmol/mol"),
    (r"(低密度脂蛋白胆固醇|甘油三酯)(\d+(?:\.\d+)?)mmol/L", "mmol/L", "mg/dL"),
    (r"(血尿酸)(\d+(?:\.\d+)?)μmol/L", "μmol/L", "mg/dL"), (r"(体重)(\d+(?:\.\d+)?)kg", "kg", "斤"),
    (r"(血压)(\d+/\d+)mmHg", "mmHg", "kPa"),
)


def unit_error_h(b: BaseCase) -> Iterator[Plant]:
    """A value's unit written wrong, the number unchanged: creatinine in mmol/L, HbA1c in mmol/mol, lipids or
    uric acid in mg/dL, weight in 斤, blood pressure in kPa."""
    for pattern, old, new in _UNIT_SWAPS:
        for m in re.finditer(pattern, b.record):
            a = m.end() - len(old)
            yield Plant("unit_error_h", "unit_error", (Edit(m.start(2), m.end(), m.group(2) + new),),
                        label=b.record[a:m.end()])


def drug_name_error_h(b: BaseCase) -> Iterator[Plant]:
    """A drug replaced by another of its class that the main family does not take: the last of those taken as
    often as it (the main family takes the first), else the second; written with its usual dose and form."""
    for m in NAME_RE.finditer(b.record):
        alt = alternatives(m.group(), b)
        if len(alt) < 2:
            continue
        own = DRUG_BY_NAME[m.group()].per_day
        closest = [x for x in alt if abs(x.per_day - own) == abs(alt[0].per_day - own)]
        new = closest[-1] if len(closest) >= 2 else alt[1]
        yield Plant("drug_name_error_h", "drug_name_error", swap_edits(b, m.start(), new), label=m.group())


#: drugs a record may add to a comorbidity's treatment: (words that show the patient takes the class, text)
_COMORBIDITY_DRUGS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("美托洛尔", "比索洛尔", "倍他乐克"), "美托洛尔缓释片47.5mg 每日1次"),
    (("依折麦布",), "依折麦布片10mg 每日1次"), (("氢氯噻嗪", "吲达帕胺"), "氢氯噻嗪片12.5mg 每日1次"),
    (("非布司他", "别嘌醇"), "非布司他片20mg 每日1次"),
)


def hallucinated_drug_h(b: BaseCase) -> Iterator[Plant]:
    """A drug nobody takes added to 既往史 after a comorbidity's drug (``、氢氯噻嗪片12.5mg 每日1次``)
    (drug_name_error: a drug name the conversation never gives)."""
    body = section(b.record, "既往史")
    added = pick([text for words, text in _COMORBIDITY_DRUGS
                  if not any(w in b.record or w in b.conversation for w in words)], b)
    if body is None or added is None:
        return
    m = next((x for x in mentions(b.record) if body[0] <= x.start() < body[1]), None)
    if m is not None:
        edit = Edit(m.end(), m.end(), f"、{added}", ((1, len(added) + 1),))
        yield Plant("hallucinated_drug_h", "drug_name_error", (edit,), label=added.split("片")[0])


def _other_unit(mg: float, unit: str) -> str:
    """``mg`` written in the unit a record would not use here: grams for 250 mg and up given in mg, mg for a
    dose given in g, else mg as given."""
    if unit == "g":
        return f"{fmt(mg)}mg"
    if unit == "mg" and mg >= 250:
        return f"{fmt(mg / 1000)}g"
    return f"{fmt(mg / TO_MG[unit])}{unit}"


def dose_error_h(b: BaseCase) -> Iterator[Plant]:
    """A drug's dose one strength down (else up; never the main family's dose), written in the other unit
    (二甲双胍片500mg -> 0.25g, 0.5g -> 250mg); an insulin 2 units down written in 单位 (14U -> 12单位)."""
    conv = numbers(b.conversation)
    for m in mentions(b.record):
        ds = doses(m)
        if not ds or m.group("after") or m.group("dose").endswith("片"):
            continue
        d = ds[0]
        if is_insulin_unit(d.unit):
            v = int(float(d.value))
            if v > 4 and str(v - 2) not in conv:
                yield Plant("dose_error_h", "dose_error", (Edit(d.start, d.end + len(d.unit), f"{v - 2}单位"),),
                            label=m.group("name"))
            continue
        mg = round(float(d.value) * TO_MG[d.unit], 4)
        strengths = STRENGTHS.get(m.group("name"), ())
        if mg not in strengths:
            continue
        i = strengths.index(mg)
        main = next((x for x in dose_options(d.value, d.unit, m.group("name")) if x not in conv), None)
        options = [*strengths[max(i - 1, 0):i], *strengths[i + 1:i + 2]]
        new = next((x for x in options if fmt(x) not in conv and fmt(x / 1000) not in conv
                    and fmt(x / TO_MG[d.unit]) != main), None)
        if new is not None:
            yield Plant("dose_error_h", "dose_error", (Edit(d.start, d.end + len(d.unit), _other_unit(new, d.unit)),),
                        label=m.group("name"))


#: a drug's timing -> the timing a model may write instead
_TIMING_SWAPS: dict[str, str] = {
    "三餐前": "三餐后", "早餐前": "晚餐前", "晚餐前": "早餐前", "晚餐后": "早餐前", "餐前": "餐后", "餐后": "餐前",
    "餐时": "餐后", "睡前": "早餐前", "晨起": "睡前", "早晨": "睡前",
}
_FREQ_WORDS: dict[str, str] = {
    "每日1次": "一日两次", "每日2次": "一日三次", "每日3次": "一日两次", "qd": "每日两次", "bid": "每日三次",
    "tid": "每日两次", "qn": "每日两次",
}


def usage_error_h(b: BaseCase) -> Iterator[Plant]:
    """A drug's timing changed (睡前 -> 早餐前, 餐后 -> 餐前, 早餐前 -> 晚餐前); for a drug written without a
    timing, its frequency written in words and one step off (每日2次 -> 一日三次)."""
    for m in mentions(b.record):
        route = m.group("route") or ""
        when = next((w for w in _TIMING_SWAPS if w in route), None)
        if when is not None:
            a = m.start("route") + route.index(when)
            yield Plant("usage_error_h", "usage_error", (Edit(a, a + len(when), _TIMING_SWAPS[when]),),
                        label=m.group("name"))
        elif m.group("freq") and m.group("freq").strip() in _FREQ_WORDS:
            old = m.group("freq").strip()
            a = m.start("freq") + 1
            yield Plant("usage_error_h", "usage_error", (Edit(a, a + len(old), _FREQ_WORDS[old]),),
                        label=m.group("name"))


def time_error_h(b: BaseCase) -> Iterator[Plant]:
    """A time of the present illness with its unit confused: 6个月 -> 1年 and 1年 -> 6个月 (半年 and a year),
    N个月 -> N周, N周 -> N个月; a calendar month moved by 2."""
    body = section(b.record, "现病史")
    if body is None:
        return
    for m in re.finditer(r"(?<![\d.])(\d+)(个月|年|周)(?=前|内|后)", b.record[body[0]:body[1]]):
        n, unit = m.group(1), m.group(2)
        new = {("6", "个月"): "1年", ("1", "年"): "6个月"}.get((n, unit))
        if new is None:
            new = {"个月": f"{n}周", "周": f"{n}个月"}.get(unit)
        a = body[0] + m.start()
        if new is not None and new not in b.conversation:
            yield Plant("time_error_h", "time_error", (Edit(a, a + len(m.group()), new),))
    for m in re.finditer(r"\d{4}年(\d{1,2})月", b.record[body[0]:body[1]]):
        month = int(m.group(1))
        new = str(month + 2 if month <= 10 else month - 2)
        a = body[0] + m.start(1)
        yield Plant("time_error_h", "time_error", (Edit(a, a + len(m.group(1)), new),))


_DATED_START = re.compile(r"(?:患者)?(?:\d+(?:年|个月|周)前|\d{4}年\d{1,2}月|孕\d+周)")


def time_order_confused_h(b: BaseCase) -> Iterator[Plant]:
    """The first event of the present illness (a sentence that starts with its time) moved to the end of the
    present illness, after the recent course; its time kept. One error: the course told out of order."""
    body = section(b.record, "现病史")
    if body is None:
        return
    sentences = [(a.start(), a.end()) for a in re.finditer(r"[^。]+。", b.record[body[0]:body[1]])]
    dated = [i for i, (a, _) in enumerate(sentences) if _DATED_START.match(b.record, body[0] + a)]
    if len(sentences) < 3 or not dated or dated[0] == len(sentences) - 1:
        return
    i = dated[0]
    a, z = sentences[i]
    a += body[0]
    z += body[0]
    if b.record.startswith("患者", a):
        a += 2
    moved = b.record[a:z]
    rest = b.record[z:body[1]]
    new = rest + moved
    k = len(moved.split("，")[0])
    yield Plant("time_order_confused_h", "time_order_confused",
                (Edit(a, body[1], new, ((len(rest), len(rest) + k),)),))


_COMPLICATION_SWAPS: dict[str, str] = {
    "糖尿病肾病": "糖尿病视网膜病变", "糖尿病视网膜病变": "糖尿病肾病", "糖尿病周围神经病变": "糖尿病自主神经病变",
    "糖尿病酮症酸中毒": "糖尿病高渗状态", "2型糖尿病酮症": "2型糖尿病酮症酸中毒",
}


def diagnosis_error_h(b: BaseCase) -> Iterator[Plant]:
    """A complication named wrong at its first place (糖尿病肾病 -> 糖尿病视网膜病变); a record without one gets
    the diabetes type wrong at its first place only (the main family changes it everywhere) or, where the
    record gives it once, another diagnosis (2型糖尿病 -> 糖尿病前期, 1型 -> 特殊类型糖尿病, 妊娠期糖尿病 ->
    糖尿病合并妊娠)."""
    for old, new in _COMPLICATION_SWAPS.items():
        i = b.record.find(old)
        if i >= 0 and new not in b.record:
            yield Plant("diagnosis_error_h", "diagnosis_error", (Edit(i, i + len(old), new),), label=old)
            return
    ms = [x for x in DIABETES_TYPE.finditer(b.record) if not family_line(b.record, x.start())]
    if len(ms) >= 2:
        m = ms[0]
        yield Plant("diagnosis_error_h", "diagnosis_error",
                    (Edit(m.start(1), m.end(1), "1" if m.group(1) == "2" else "2"),))
    elif ms:
        m = ms[0]
        yield Plant("diagnosis_error_h", "diagnosis_error",
                    (Edit(m.start(), m.end(), "糖尿病前期" if m.group(1) == "2" else "特殊类型糖尿病"),))
    else:
        i = b.record.find("妊娠期糖尿病")
        if i >= 0:
            yield Plant("diagnosis_error_h", "diagnosis_error", (Edit(i, i + 6, "糖尿病合并妊娠"),))


def negated_history_affirmed_h(b: BaseCase) -> Iterator[Plant]:
    """The last comorbidity the patient denies written as present with 合并: ``否认高血压、冠心病病史`` ->
    ``否认高血压病史，合并冠心病`` (diagnosis_error)."""
    body = section(b.record, "既往史")
    if body is None:
        return
    for m in re.finditer(r"否认([^，；。、\n]+(?:、[^，；。、\n]+)*)病史", b.record[body[0]:body[1]]):
        items = m.group(1).split("、")
        item = items[-1]
        if re.search(r"\d|糖尿病|其他", item):
            continue
        rest = f"否认{'、'.join(items[:-1])}病史，" if items[:-1] else ""
        new = f"{rest}合并{item}"
        a = body[0] + m.start()
        yield Plant("negated_history_affirmed_h", "diagnosis_error",
                    (Edit(a, a + len(m.group()), new, ((len(rest), len(new)),)),), label=item)


#: words of the course that a model may turn into their opposite
_TURNS: tuple[tuple[str, str], ...] = (
    ("缓解", "加重"), ("下降", "增加"), ("停用", "继续使用"), ("未见异常", "可见异常"),
)


def fact_error_h(b: BaseCase) -> Iterator[Plant]:
    """The course misstated with other words: 缓解 -> 加重, 下降 -> 增加, 停用 -> 继续使用, 未见异常 -> 可见异常
    (the first of each in the present illness)."""
    body = section(b.record, "现病史")
    if body is None:
        return
    for word, new in _TURNS:
        i = b.record.find(word, *body)
        if i >= 0:
            yield Plant("fact_error_h", "fact_error", (Edit(i, i + len(word), new),), label=word)


def hallucinated_symptom_h(b: BaseCase) -> Iterator[Plant]:
    """A symptom nobody mentioned added at the end of the present illness as ``偶有X。`` (fact_error)."""
    body = section(b.record, "现病史")
    options = [s for s, words in SYMPTOMS if s not in b.record and not any(w in b.conversation for w in words)]
    sym = pick(options[::-1], b)
    if body is None or sym is None:
        return
    text = f"偶有{sym}。"
    yield Plant("hallucinated_symptom_h", "fact_error", (Edit(body[1], body[1], text, ((0, len(text) - 1),)),),
                label=sym)


def affirmed_finding_denied_h(b: BaseCase) -> Iterator[Plant]:
    """A symptom the patient has written as absent: ``伴口干、多饮`` -> ``伴口干，无多饮`` (the last item),
    ``伴乏力`` -> ``无乏力``, ``出现视物模糊`` -> ``未出现视物模糊`` (one symptom) (fact_error)."""
    body = section(b.record, "现病史")
    if body is None:
        return
    for m in re.finditer(r"(?<!未)出现([^，；。、\n\d]{2,8})(?=[，；。])", b.record[body[0]:body[1]]):
        a = body[0] + m.start()
        yield Plant("affirmed_finding_denied_h", "fact_error", (Edit(a, a, "未", ((0, 1),)),), label=m.group(1))
    for m in re.finditer(r"伴([^，；。、\n\d]{1,8}(?:、[^，；。、\n\d]{1,8})*)(?=[，；。])", b.record[body[0]:body[1]]):
        items = m.group(1).split("、")
        a = body[0] + m.start()
        head = f"伴{'、'.join(items[:-1])}，" if items[:-1] else ""
        new = f"{head}无{items[-1]}"
        yield Plant("affirmed_finding_denied_h", "fact_error",
                    (Edit(a, a + len(m.group()), new, ((len(head), len(new)),)),), label=items[-1])


def laterality_h(b: BaseCase) -> Iterator[Plant]:
    """A side or site wrong in 既往史, the examination or the tests (左 <-> 右, 下肢 <-> 上肢); the main family
    plants it in the chief complaint and the present illness."""
    for name in ("既往史", "体格检查", "辅助检查"):
        body = section(b.record, name)
        if body is None:
            continue
        for m in re.finditer(r"[左右](?=足|眼|髋|下肢|侧|手|膝)|下肢|上肢", b.record[body[0]:body[1]]):
            a = body[0] + m.start()
            if inside_quotes(b.record, a):
                continue
            new = {"左": "右", "右": "左", "下肢": "上肢", "上肢": "下肢"}[m.group()]
            yield Plant("laterality_h", "fact_error", (Edit(a, a + len(m.group()), new),), label=m.group())


def diabetes_in_past_history_h(b: BaseCase) -> Iterator[Plant]:
    """Diabetes written into 既往史 at its end: ``；患2型糖尿病3年`` before its last full stop."""
    found = diabetes_history(b)
    if found is None:
        return
    body, typ, duration = found
    at = body[1] - 1 if b.record[body[1] - 1] == "。" else body[1]
    text = f"；患{typ}{duration}"
    yield Plant("diabetes_in_past_history_h", "diabetes_in_past_history", (Edit(at, at, text, ((1, len(text)),)),))


# --------------------------------------------------------------------------- completeness


def cc_duration_missing_h(b: BaseCase) -> Iterator[Plant]:
    """The chief complaint without the first of its durations (血糖升高3年，控制不佳6个月 -> 血糖升高，控制不佳6个月),
    where it gives two."""
    body = section(b.record, "主诉")
    if body is None:
        return
    ms = list(re.finditer(r"\d+(?:年|个月|周|天)", b.record[body[0]:body[1]]))
    if len(ms) >= 2:  # with one duration, leaving out the first is what the main family does
        m = ms[0]
        text = b.record[body[0]:body[1]]
        new = text[:m.start()] + text[m.end():]
        yield Plant("cc_duration_missing_h", "cc_duration_missing", (Edit(body[0], body[1], new),))


# --------------------------------------------------------------------------- standardization

#: standard term -> another colloquial wording (not the main family's)
COLLOQUIAL_H: dict[str, str] = {
    "多饮": "老想喝水", "多尿": "小便多", "视物模糊": "眼睛看不清", "肢体麻木": "手脚发木", "双足麻木": "两只脚发木",
    "乏力": "浑身没力气", "口干": "嘴里发干", "心悸": "心里扑通扑通跳", "双下肢水肿": "两条腿肿", "泡沫尿": "小便起泡",
    "体重下降": "人瘦了", "夜尿增多": "晚上起夜多", "出冷汗": "冒冷汗", "控制不佳": "控制得不好", "饮酒": "喝酒",
}


def colloquial_h(b: BaseCase) -> Iterator[Plant]:
    """A standard term written in another colloquial way (多饮 -> 老想喝水, 乏力 -> 浑身没力气), its last
    occurrence."""
    taken: list[tuple[int, int]] = []
    for term, new in COLLOQUIAL_H.items():
        i = b.record.rfind(term)
        if i >= 0 and not any(a < i + len(term) and i < z for a, z in taken):
            taken.append((i, i + len(term)))
            yield Plant("colloquial_h", "colloquial", (Edit(i, i + len(term), new),), label=term)


def time_vague_h(b: BaseCase) -> Iterator[Plant]:
    """A precise time made vague with other words: 近6个月 -> 近来, 3年前 -> 早些年, 6个月前 -> 前一阵子,
    1周前 -> 前几天 (the first of each in the present illness)."""
    body = section(b.record, "现病史")
    if body is None:
        return
    for pattern, new in ((r"近\d+(?:个月|周)", "近来"), (r"\d+年前", "早些年"), (r"\d+个月前", "前一阵子"),
                         (r"\d+周前", "前几天")):
        m = re.compile(pattern).search(b.record, *body)
        if m is not None:
            yield Plant("time_vague_h", "time_vague", (Edit(m.start(), m.end(), new),))


def order_error_h(b: BaseCase) -> Iterator[Plant]:
    """个人史 moved up to before 既往史 (the main family swaps two adjacent sections); the spans are the moved line
    and the 既往史 line it now precedes."""
    lines = {m.group(1): m for m in SECTION_LINE.finditer(b.record)}
    past, personal = lines.get("既往史"), lines.get("个人史")
    if past is None or personal is None or personal.start() < past.start():
        return
    between = b.record[past.start():personal.start()]
    new = personal.group() + "\n" + between.rstrip("\n")
    at = len(personal.group()) + 1
    edit = Edit(past.start(), personal.end(), new, ((0, at - 1), (at, at + len(past.group()))))
    yield Plant("order_error_h", "order_error", (edit,))


#: generic name (with the forms it stands for) -> a short name or another brand a model may write
SHORT_NAMES: dict[str, tuple[str, tuple[str, ...]]] = {
    "二甲双胍": ("二甲", ("", "片")), "阿卡波糖": ("阿卡", ("", "片")), "甘精胰岛素": ("甘精", ("", "注射液")),
    "门冬胰岛素": ("门冬", ("", "注射液")), "德谷胰岛素": ("德谷", ("", "注射液")),
    "地特胰岛素": ("地特", ("", "注射液")), "赖脯胰岛素": ("赖脯", ("", "注射液")),
    "阿托伐他汀": ("阿托", ("", "钙片")), "瑞舒伐他汀": ("瑞舒", ("", "钙片")), "美托洛尔": ("倍他乐克", ("缓释片",)),
    "阿司匹林": ("拜阿司匹灵", ("", "肠溶片")), "氯吡格雷": ("波立维", ("", "片")), "左甲状腺素": ("优甲乐", ("钠片",)),
    "瑞格列奈": ("诺和龙", ("", "片")), "格列喹酮": ("糖适平", ("", "片")), "利拉鲁肽": ("诺和力", ("", "注射液")),
    "门冬胰岛素30": ("诺和锐30", ("注射液",)), "精蛋白生物合成人胰岛素": ("诺和灵30R", ("注射液",)),
    "西格列汀": ("西格", ("", "片")), "达格列净": ("达格", ("", "片")),
}


def drug_name_nonstandard_h(b: BaseCase) -> Iterator[Plant]:
    """A generic name written as a short name or another brand (二甲双胍片 -> 二甲, 美托洛尔缓释片 -> 倍他乐克,
    左甲状腺素钠片 -> 优甲乐), last mention of each drug."""
    for name, (short, forms) in SHORT_NAMES.items():
        found = [m for m in re.finditer(rf"{name}(?!30注射液)({FORMS})?", b.record)
                 if (m.group(1) or "") in forms and not (name == "门冬胰岛素" and b.record.startswith("30", m.end()))]
        if found:
            m = found[-1]
            yield Plant("drug_name_nonstandard_h", "drug_name_nonstandard", (Edit(m.start(), m.end(), short),),
                        label=name)


def dose_unclear_h(b: BaseCase) -> Iterator[Plant]:
    """A drug's dose written as a tablet count without strength (``1片``) or, for an injection, ``适量``."""
    for m in mentions(b.record):
        if b.record.count(m.group("name")) != 1 or m.group("dose").endswith("片") or STRENGTH.fullmatch(
                m.group("label") or ""):
            continue
        form = m.group("form") or ""
        new = "适量" if form == "注射液" or "胰岛素" in m.group("name") or "鲁肽" in m.group("name") else (
            "1粒" if form == "胶囊" else "1片" if form else None)
        if new is None:
            continue
        z = m.end("after") if m.group("after") else m.end("dose")
        lead = " " if b.record[m.start("dose") - 1] == " " else ""
        a = m.start("dose") - len(lead)
        yield Plant("dose_unclear_h", "dose_unclear", (Edit(a, z, lead + new),), label=m.group("name"))


def usage_unclear_h(b: BaseCase) -> Iterator[Plant]:
    """A drug's frequency and route replaced by ``遵医嘱``."""
    for m in mentions(b.record):
        if b.record.count(m.group("name")) != 1 or not m.group("freq"):
            continue
        z = m.end("route") if m.group("route") else m.end("freq")
        yield Plant("usage_unclear_h", "usage_unclear", (Edit(m.start("freq"), z, " 遵医嘱"),), label=m.group("name"))


_OMISSIONS = [name for name in OPERATORS if name.endswith("_missing") and name != "cc_duration_missing"] + [
    "fh_absent", "personal_unrecorded"]

#: operator name -> operator of the held-out family (the omissions are the main family's, by their names)
HELDOUT_OPERATORS: dict[str, Operator] = {
    "value_error_h": value_error_h, "value_wrong_time_h": value_wrong_time_h,
    "hallucinated_result_h": hallucinated_result_h, "unit_error_h": unit_error_h,
    "drug_name_error_h": drug_name_error_h, "hallucinated_drug_h": hallucinated_drug_h, "dose_error_h": dose_error_h,
    "usage_error_h": usage_error_h, "time_error_h": time_error_h, "time_order_confused_h": time_order_confused_h,
    "diagnosis_error_h": diagnosis_error_h, "negated_history_affirmed_h": negated_history_affirmed_h,
    "fact_error_h": fact_error_h, "hallucinated_symptom_h": hallucinated_symptom_h,
    "affirmed_finding_denied_h": affirmed_finding_denied_h, "laterality_h": laterality_h,
    "diabetes_in_past_history_h": diabetes_in_past_history_h, "cc_duration_missing_h": cc_duration_missing_h,
    "colloquial_h": colloquial_h, "time_vague_h": time_vague_h, "order_error_h": order_error_h,
    "drug_name_nonstandard_h": drug_name_nonstandard_h, "dose_unclear_h": dose_unclear_h,
    "usage_unclear_h": usage_unclear_h,
    **{name: OPERATORS[name] for name in _OMISSIONS},
}
#: operator name -> the deduction type (or fixed penalty id) it plants
HELDOUT_TYPES: dict[str, str] = {
    **{name: OPERATOR_TYPES[name] for name in _OMISSIONS},
    **{name: name.removesuffix("_h") for name in HELDOUT_OPERATORS if name.endswith("_h")},
    "value_wrong_time_h": "value_error", "hallucinated_result_h": "value_error",
    "hallucinated_drug_h": "drug_name_error",
    "negated_history_affirmed_h": "diagnosis_error", "hallucinated_symptom_h": "fact_error",
    "affirmed_finding_denied_h": "fact_error", "laterality_h": "fact_error",
}

__all__ = ["COLLOQUIAL_H", "HELDOUT_OPERATORS", "HELDOUT_TYPES", "SHORT_NAMES"]

