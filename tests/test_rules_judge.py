"""The deterministic rules judge (consensus_eval/judges/rules/): each check on positive and negative
hand-written cases, then the whole judge on examples/cases.jsonl against the defects planted there;
then the registry of rubric rules and the rules judge's request hash."""

from __future__ import annotations

import cProfile
import importlib
import pkgutil
import pstats
import random
import re
import shutil
import sys
import types
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from consensus_eval._errors import InputError
from consensus_eval.domain.cases import Case, Turn, load_cases
from consensus_eval.domain.config import EvalConfig, LLMJudgeConfig, RulesJudgeConfig
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.rubric import Rubric, load_rubric
from consensus_eval.domain.scoring import derive
from consensus_eval.execution.plan import plan
from consensus_eval.judges import build_judge
from consensus_eval.judges.rules import (
    RULES_VERSION,
    RubricRules,
    RulesJudge,
    check_case,
    medical_record,
    register_rules,
    require_compatible,
    rubric_rules as rules_registry,
)
from consensus_eval.judges.rules.medical_record.drugs import _UsageSearch
from consensus_eval.judges.rules.medical_record.lexicon import GLUCOSE_KINDS
from consensus_eval.judges.rules.medical_record.medication import (
    _FREQ_COUNT,
    DOSE,
    FREQ,
    NEG_USE,
    NEG_USE_LONGEST,
    NOT_USAGE,
    ROUTE,
    TREATMENT_MODE,
    treatment_mode_after,
)
from consensus_eval.judges.rules.medical_record.numbers import _Candidates, _distance
from consensus_eval.judges.rules.medical_record.quantities import DURATION, Measure
from consensus_eval.judges.rules.medical_record.text import (
    CLAUSE_END,
    SENTENCE_END,
    Boundaries,
    GrowingSearch,
    Numbers,
    bounds,
    close,
)
from tests.helpers import present

RUBRIC = load_rubric("medical_record")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cases.jsonl"

# A small, clean case: every check below changes one thing in it.
CONV = """医生：您好，哪里不舒服？
患者：我糖尿病3年了，最近半年口干、喝水多。
医生：3年前是怎么发现的？
患者：3年前体检空腹血糖7.9，诊断的2型糖尿病。
医生：现在吃什么药？
患者：二甲双胍片500毫克，一天两次，饭后吃。
医生：今天空腹9.6，糖化8.1%，血压130/80。有没有手脚麻、看东西模糊？
患者：都没有。
医生：有没有高血压、冠心病？
患者：都没有。
医生：家里有人有糖尿病吗？
患者：我母亲有糖尿病。
医生：抽烟喝酒吗？
患者：不抽烟，不喝酒。"""

RECORD = """主诉：血糖升高3年，口干、多饮6个月。
现病史：患者3年前体检发现空腹血糖7.9mmol/L，诊断为“2型糖尿病”，予二甲双胍片500mg 每日2次 餐后口服。近6个月口干、多饮。今日查空腹血糖9.6mmol/L，HbA1c 8.1%，血压130/80mmHg。无肢体麻木、视物模糊。
既往史：否认高血压、冠心病病史。
家族史：母亲患糖尿病。
个人史：否认吸烟、饮酒。"""


def judge(record: str = RECORD, conversation: str | list[Turn] = CONV) -> dict[str, Judgment]:
    return check_case(Case(id="t", conversation=conversation, record=record), RUBRIC)


def found(judgments: dict[str, Judgment]) -> list[str]:
    """Every deduction type and fixed penalty id, in order."""
    return [d.type for j in judgments.values() for d in j.deductions] + \
           [p.id for j in judgments.values() for p in j.fixed_penalties]


def hits(judgments: dict[str, Judgment], type_id: str) -> list[Deduction | PenaltyHit]:
    out: list[Deduction | PenaltyHit] = []
    for j in judgments.values():
        parts: list[Deduction | PenaltyHit] = [*j.deductions, *j.fixed_penalties]
        out += [d for d in parts if getattr(d, "type", getattr(d, "id", None)) == type_id]
    return out


def deductions(items: list[Deduction | PenaltyHit]) -> list[Deduction]:
    """``items``, each asserted a deduction (not a fixed penalty)."""
    assert all(isinstance(d, Deduction) for d in items), items
    return [d for d in items if isinstance(d, Deduction)]


def edit(old: str, new: str, text: str = RECORD) -> str:
    assert old in text, old
    return text.replace(old, new)


def with_past_history(body: str) -> str:
    return edit("既往史：否认高血压、冠心病病史。", f"既往史：{body}")


# --------------------------------------------------------------------------- the baseline and the API


def test_clean_case_has_no_findings() -> None:
    js = judge()
    assert list(js) == ["accuracy", "completeness", "standardization"]
    assert found(js) == []
    assert all(j.comment == "规则判定：0 处问题" and j.claimed_score is None and j.claimed_stars is None
               for j in js.values())


def test_same_case_same_output_and_version() -> None:
    rec = edit("500mg 每日2次 餐后口服", "一天两次")
    assert judge(rec) == judge(rec)
    assert RULES_VERSION == "3"


def test_points_come_from_the_rubric_low_end_and_comment_counts() -> None:
    js = judge(edit("个人史：否认吸烟、饮酒。", "个人史：无特殊。"))  # personal_unrecorded is [1, 2]
    d = deductions(hits(js, "personal_unrecorded"))
    assert [x.points for x in d] == [1.0, 1.0]  # smoking and drinking, once each
    assert js["completeness"].comment == "规则判定：2 处问题"


def test_require_compatible_rejects_a_rubric_without_the_ids() -> None:
    require_compatible(RUBRIC)
    data = RUBRIC.model_dump()
    terms = data["dimensions"][2]["categories"][0]
    terms["types"] = [t for t in terms["types"] if t["id"] != "colloquial"]
    other = Rubric.model_validate(data)
    with pytest.raises(InputError, match=r"standardization\.terminology\.colloquial"):
        require_compatible(other)
    with pytest.raises(InputError, match="rules judge"):
        check_case(Case(id="t", conversation=CONV, record=RECORD), other)


def test_require_compatible_names_a_missing_dimension_and_penalty() -> None:
    data = RUBRIC.model_dump()
    data["dimensions"][0]["fixed_penalties"] = []
    data["dimensions"] = [data["dimensions"][0]]
    with pytest.raises(InputError) as e:
        require_compatible(Rubric.model_validate(data))
    assert "dimension completeness" in str(e.value) and "fixed penalty accuracy.diabetes_in_past_history" in str(e.value)


# --------------------------------------------------------------------------- 1. sections


@pytest.mark.parametrize("style", [
    "{name}:{body}", "{name}：{body}", "  {name}：{body}", "【{name}】{body}", "**{name}**：{body}",
    "{n}. {name}：{body}", "{name}\n{body}",
])
def test_headings_in_many_styles(style: str) -> None:
    parts = [line.split("：", 1) for line in RECORD.splitlines()]
    rec = "\n".join(style.format(name=n, body=b, n=i + 1) for i, (n, b) in enumerate(parts))
    assert found(judge(rec)) == []


def test_headings_on_one_line() -> None:
    assert found(judge(RECORD.replace("\n", ""))) == []


def test_missing_family_history_quotes_the_conversation() -> None:
    js = judge(edit("家族史：母亲患糖尿病。\n", ""))
    (d,) = deductions(hits(js, "fh_absent"))
    assert d.category == "family_history" and d.points == 4 and d.evidence == "我母亲有糖尿病"
    assert found(js) == ["fh_absent"]


def test_missing_chief_complaint_takes_both_types() -> None:
    js = judge(edit("主诉：血糖升高3年，口干、多饮6个月。\n", ""))
    assert sorted(found(js)) == ["cc_duration_missing", "cc_symptom_missing"]


def test_missing_present_illness_takes_its_four_parts() -> None:
    rec = "\n".join(line for line in RECORD.splitlines() if not line.startswith("现病史"))
    js = judge(rec)
    assert {d.type for d in js["completeness"].deductions} == {
        "pi_initial_diagnosis_missing", "pi_treatment_missing", "pi_recent_missing", "pi_complications_missing"}


def test_missing_past_history() -> None:
    rec = edit("既往史：否认高血压、冠心病病史。\n", "")
    assert found(judge(rec)) == ["ph_important_missing"]
    conv = edit("患者：都没有。\n医生：家里", "患者：有高血压，5年了。\n医生：家里", CONV)
    assert found(judge(rec, conv)) == ["ph_hypertension_missing"]


def test_no_headings_is_structure_confused_only() -> None:
    rec = "".join(line.split("：", 1)[1] for line in RECORD.splitlines())
    assert found(judge(rec)) == ["structure_confused"]  # section checks are skipped, content checks run


def test_wrong_order_once() -> None:
    lines = RECORD.splitlines()
    rec = "\n".join([lines[4], lines[2], lines[0], lines[3], lines[1]])
    js = judge(rec)
    assert found(js) == ["order_error"]
    assert "应为主诉→现病史→既往史→家族史→个人史" in js["standardization"].deductions[0].reason


def test_other_headings_end_a_section() -> None:
    rec = RECORD + "\n诊断：2型糖尿病\n处理意见：继续二甲双胍片500mg 每日2次 餐后口服。"
    assert found(judge(rec)) == []


# --------------------------------------------------------------------------- 2. diabetes in past history


@pytest.mark.parametrize("body", [
    "2型糖尿病病史10年，否认高血压。",
    "否认高血压，有糖尿病史。",
    "否认高血压但有糖尿病。",
    "高血压、糖尿病病史5年。",
    "否认冠心病；T2DM 8年。",
    "糖尿病肾病3年。",
    "高血压病史5年\n糖尿病病史3年",
])
def test_affirmed_diabetes_in_past_history(body: str) -> None:
    rec = with_past_history(body)
    (p,) = check_case(Case(id="t", conversation=CONV, record=rec), RUBRIC)["accuracy"].fixed_penalties
    assert p.id == "diabetes_in_past_history" and p.evidence and p.evidence in rec


def test_diabetes_penalty_is_ten_points_outside_the_caps() -> None:
    js = judge(with_past_history("2型糖尿病病史3年，否认高血压。"))
    assert found(js) == ["diabetes_in_past_history"]
    assert derive(RUBRIC.dimension("accuracy"), js["accuracy"]).score == 30


@pytest.mark.parametrize("body", [
    "否认高血压、糖尿病、冠心病病史。",
    "无糖尿病。",
    "否认糖尿病。",
    "无高血压及糖尿病病史。",
    "高血压、糖尿病病史均否认。",
    "糖尿病(-)，高血压(-)。",
    "糖尿病史不详。",
    "妊娠期糖尿病史，产后血糖正常。",
    "有糖尿病家族史。",
    "父亲糖尿病。",
    "糖尿病前期2年。",
    "没有糖尿病、冠心病。",
])
def test_negated_or_other_diabetes_mentions_do_not_trigger(body: str) -> None:
    assert judge(with_past_history(body))["accuracy"].fixed_penalties == []


def test_diabetes_outside_past_history_does_not_trigger() -> None:
    rec = edit("近6个月口干", "既往有糖尿病史3年。近6个月口干")
    assert judge(rec)["accuracy"].fixed_penalties == []


# --------------------------------------------------------------------------- 3. colloquial terms


@pytest.mark.parametrize("phrase, standard", [
    ("尿很多", "多尿"), ("看不清楚", "视物模糊"), ("脚麻", "下肢麻木"), ("经常口渴", "多饮"), ("没劲", "乏力"),
    ("手脚发麻", "肢端麻木"), ("老是饿", "多食"), ("上厕所", "排尿/尿频"),
])
def test_colloquial_terms(phrase: str, standard: str) -> None:
    js = judge(edit("近6个月口干、多饮。", f"近6个月口干、多饮，{phrase}。"))
    (d,) = js["standardization"].deductions
    assert (d.type, d.category, d.points, d.evidence) == ("colloquial", "terminology", 1, phrase)
    assert standard in d.reason


def test_colloquial_each_occurrence_and_blood_sugar() -> None:
    js = judge(edit("主诉：血糖升高3年", "主诉：血糖高3年", edit("近6个月口干、多饮。", "近6个月血糖高，口干、多饮。")))
    assert [d.evidence for d in js["standardization"].deductions] == ["血糖高", "血糖高"]


def test_thirst_alone_is_colloquial_but_not_beside_polydipsia() -> None:
    assert found(judge(edit("口干、多饮6个月", "口渴6个月"))) == ["colloquial"]
    assert found(judge(edit("口干、多饮6个月", "口渴、多饮6个月"))) == []


@pytest.mark.parametrize("text", ["血糖升高", "血糖高于正常", "血糖高峰出现在餐后", "双足麻木", "口干", "多尿"])
def test_standard_terms_are_not_colloquial(text: str) -> None:
    # (双足麻木 is a fact_error here: the patient denies numbness; rules2 part 2)
    assert "colloquial" not in found(judge(edit("近6个月口干、多饮。", f"近6个月口干、多饮，{text}。")))


# --------------------------------------------------------------------------- 4. vague time


@pytest.mark.parametrize("phrase", ["很久以前", "最近", "前段时间", "这几天", "近期", "多年前", "一段时间"])
def test_vague_time(phrase: str) -> None:
    js = judge(edit("近6个月口干、多饮。", f"{phrase}口干、多饮。"))
    assert [(d.type, d.evidence) for d in js["standardization"].deductions] == [("time_vague", phrase)]


def test_clause_initial_before_is_vague() -> None:
    js = judge(edit("近6个月口干、多饮。", "近6个月口干、多饮，以前血糖控制可。"))
    assert found(js) == ["time_vague"]


@pytest.mark.parametrize("text", ["最近3个月口干、多饮。", "近6个月口干、多饮，最近一次HbA1c 8.1%。",
                                  "最近两周口干、多饮。", "近6个月口干、多饮，服药之前血糖更高。"])
def test_concrete_times_are_not_vague(text: str) -> None:
    assert "time_vague" not in found(judge(edit("近6个月口干、多饮。", text)))


# --------------------------------------------------------------------------- 5. drug writing


def test_drug_without_dose_and_route() -> None:
    js = judge(edit("二甲双胍片500mg 每日2次 餐后口服", "二甲双胍 一天两次"))  # the seed's own bad example
    ds = {d.type: d for d in js["standardization"].deductions}
    assert set(ds) == {"dose_unclear", "usage_unclear"}
    assert ds["dose_unclear"].evidence == "二甲双胍 一天两次" and ds["dose_unclear"].category == "drug_writing"
    assert "给药途径" in ds["usage_unclear"].reason and "频率" not in ds["usage_unclear"].reason


def test_drug_without_frequency() -> None:
    js = judge(edit("二甲双胍片500mg 每日2次 餐后口服", "口服二甲双胍500mg"))
    assert found(js) == ["usage_unclear"] and "用药频率" in js["standardization"].deductions[0].reason


def test_tablet_form_implies_oral_route() -> None:
    assert found(judge(edit("500mg 每日2次 餐后口服", "500mg 每日2次"))) == []


def test_injected_insulin_is_nonstandard_when_the_conversation_names_it() -> None:
    conv = edit("二甲双胍片500毫克，一天两次，饭后吃。", "二甲双胍片500毫克，一天两次，饭后吃；还打甘精胰岛素，睡前12个单位。", CONV)
    rec = edit("餐后口服。", "餐后口服，打胰岛素。")
    assert sorted(found(judge(rec, conv))) == ["dose_unclear", "drug_name_nonstandard", "usage_unclear"]
    rec_ok = edit("餐后口服。", "餐后口服，甘精胰岛素12U 睡前皮下注射。")
    assert found(judge(rec_ok, conv)) == []


@pytest.mark.parametrize("said, sentence", [
    ("没用过胰岛素。", "未使用胰岛素。"),
    ("以前吃过格列美脲，后来停了。", "曾口服格列美脲，后停用。"),
    ("怀孕时打过胰岛素。", "3年前孕期予胰岛素治疗。"),
    ("我对阿司匹林过敏。", "对阿司匹林过敏。"),
])
def test_drug_mentions_that_need_no_dose(said: str, sentence: str) -> None:
    conv = edit("都没有。\n医生：家里", f"都没有。{said}\n医生：家里", CONV)
    assert found(judge(edit("近6个月口干", sentence + "近6个月口干"), conv)) == []


def test_enumerated_drugs_share_their_usage() -> None:
    conv = edit("饭后吃。", "饭后吃，阿卡波糖50毫克一天三次。", CONV)
    rec = edit("予二甲双胍片500mg 每日2次 餐后口服", "予二甲双胍片500mg、阿卡波糖片50mg 每日3次 口服")
    assert "usage_unclear" not in found(judge(rec, conv))


def test_brand_name_is_nonstandard() -> None:
    conv = edit("二甲双胍片500毫克", "格华止500毫克", CONV)
    js = judge(edit("二甲双胍片500mg", "格华止500mg"), conv)
    (d,) = js["standardization"].deductions
    assert (d.type, d.evidence) == ("drug_name_nonstandard", "格华止") and "二甲双胍" in d.reason


# --------------------------------------------------------------------------- 6. numbers


def test_wrong_value_names_both_values() -> None:
    js = judge(edit("今日查空腹血糖9.6mmol/L", "今日查空腹血糖8.6mmol/L"))
    (d,) = js["accuracy"].deductions
    assert (d.type, d.category, d.points) == ("value_error", "numbers", 2)
    assert d.reason == "对话中空腹血糖为9.6，病历记为8.6" and d.evidence == "空腹血糖8.6mmol/L"


def test_fabricated_value() -> None:
    js = judge(edit("血压130/80mmHg。", "血压130/80mmHg，甘油三酯2.3mmol/L。"))
    (d,) = js["accuracy"].deductions
    assert d.type == "value_error" and d.reason == "对话中未提及甘油三酯2.3"


def test_value_missing_from_record() -> None:
    js = judge(edit("，HbA1c 8.1%", ""))
    (d,) = js["accuracy"].deductions
    assert (d.type, d.points, d.evidence) == ("value_missing", 1.5, "糖化8.1%")


def test_blood_pressure_missing_and_wrong() -> None:
    assert found(judge(edit("，血压130/80mmHg", ""))) == ["value_missing"]
    js = judge(edit("血压130/80mmHg", "血压150/80mmHg"))
    assert [d.reason for d in js["accuracy"].deductions] == ["对话中血压为130/80，病历记为150/80"]


def test_unit_error_without_value_error() -> None:
    js = judge(edit("空腹血糖9.6mmol/L", "空腹血糖9.6mg/dL"))
    assert [(d.type, d.points) for d in js["accuracy"].deductions] == [("unit_error", 1)]


@pytest.mark.parametrize("said", ["空腹九点六", "空腹是９.６", "空腹9.60"])
def test_numbers_are_normalised(said: str) -> None:
    assert found(judge(conversation=edit("空腹9.6", said, CONV))) == []


def test_targets_and_weights_in_jin() -> None:
    conv = edit("都没有。\n医生：家里", "都没有。体重150斤，空腹血糖要控制在7以下。\n医生：家里", CONV)
    rec = edit("，血压130/80mmHg", "，血压130/80mmHg，体重75kg")
    assert found(judge(rec, conv)) == []


def test_values_of_another_kind_are_not_confused() -> None:
    conv = edit("今天空腹9.6", "今天空腹9.6，餐后两小时12.5", CONV)
    js = judge(edit("今日查空腹血糖9.6mmol/L", "今日查空腹血糖9.6mmol/L，餐后2小时血糖12.5mmol/L"), conv)
    assert found(js) == []


# --------------------------------------------------------------------------- 6. doses, usage, durations


def test_dose_error() -> None:
    js = judge(edit("二甲双胍片500mg", "二甲双胍片1000mg"))
    (d,) = js["accuracy"].deductions
    assert (d.type, d.category, d.points) == ("dose_error", "drugs", 2)
    assert d.reason == "对话中二甲双胍剂量为500毫克，病历记为1000mg"


@pytest.mark.parametrize("said, written", [
    ("二甲双胍缓释片，500毫克一片，每天吃2片", "二甲双胍缓释片1000mg 每日1次 口服"),
    ("二甲双胍片0.5克，一天两次，饭后吃", "二甲双胍片500mg 每日2次 餐后口服"),
])
def test_equivalent_doses(said: str, written: str) -> None:
    conv = edit("二甲双胍片500毫克，一天两次，饭后吃", said, CONV)
    assert found(judge(edit("二甲双胍片500mg 每日2次 餐后口服", written), conv)) == []


def test_frequency_and_timing_errors() -> None:
    assert found(judge(edit("每日2次", "每日3次"))) == ["usage_error"]
    conv = edit("饭后吃。", "饭后吃；甘精胰岛素12个单位，睡前打。", CONV)
    rec = edit("餐后口服。", "餐后口服，甘精胰岛素12U 每日1次 早餐前皮下注射。")
    js = judge(rec, conv)
    assert found(js) == ["usage_error"] and "睡前" in js["accuracy"].deductions[0].reason


def test_duration_errors() -> None:
    js = judge(edit("主诉：血糖升高3年", "主诉：血糖升高5年"))
    (d,) = js["accuracy"].deductions
    assert (d.type, d.category) == ("time_error", "timeline") and "5年" in d.reason
    assert found(judge(edit("近6个月", "近半年"))) == []
    dated = edit("我糖尿病3年了", "我2021年查出糖尿病", CONV)
    assert "time_error" not in found(judge(edit("主诉：血糖升高3年", "主诉：血糖升高5年"), dated))


# --------------------------------------------------------------------------- 7. drug names


def test_drug_in_record_not_in_conversation() -> None:
    js = judge(edit("餐后口服。", "餐后口服，阿卡波糖片50mg 每日3次 随餐嚼服。"))
    assert [(d.type, d.points, d.reason) for d in js["accuracy"].deductions] == [
        ("drug_name_error", 3, "对话中未提及阿卡波糖")]


def test_wrong_drug_of_the_same_class_is_one_error() -> None:
    js = judge(edit("二甲双胍片500mg", "格列齐特片500mg"), edit("二甲双胍片500毫克", "格列美脲片500毫克", CONV))
    assert [(d.type, d.reason) for d in js["accuracy"].deductions] == [
        ("drug_name_error", "对话中为格列美脲，病历记为格列齐特")]


def test_drug_missing_from_record() -> None:
    conv = edit("饭后吃。", "饭后吃。还有西格列汀100毫克，每天1次。", CONV)
    js = judge(conversation=conv)
    (d,) = js["accuracy"].deductions
    assert (d.type, d.points) == ("drug_missing", 2) and "西格列汀" in d.evidence


@pytest.mark.parametrize("turns", [
    "医生：用过胰岛素吗？\n患者：没有，没用过胰岛素。",
    "医生：用过胰岛素吗？\n患者：没有。",
    "医生：我再给您加上西格列汀100毫克，每天一次。\n患者：好的。",
    "医生：以后可能要打胰岛素。\n患者：好。",
    "医生：您母亲用什么药？\n患者：我妈打胰岛素。",
])
def test_drugs_the_record_need_not_carry(turns: str) -> None:
    assert found(judge(conversation=CONV + "\n" + turns)) == []


def test_confirmed_drug_is_required() -> None:
    conv = CONV + "\n医生：您是不是也在吃阿司匹林？\n患者：对，每天一片。"
    assert found(judge(conversation=conv)) == ["drug_missing"]


# --------------------------------------------------------------------------- 8. chief complaint


@pytest.mark.parametrize("cc, missing", [
    ("多饮、血糖控制不佳。", True), ("血糖升高。", True), ("血糖升高10余年。", False), ("多饮半年。", False),
    ("口干、多饮2周。", False),
])
def test_chief_complaint_duration(cc: str, missing: bool) -> None:
    js = judge(edit("血糖升高3年，口干、多饮6个月。", cc))
    assert ("cc_duration_missing" in found(js)) is missing


# --------------------------------------------------------------------------- 9. family and personal history


def test_family_history_without_the_diabetes_said() -> None:
    js = judge(edit("家族史：母亲患糖尿病。", "家族史：不详。"))
    (d,) = js["completeness"].deductions
    assert (d.type, d.points, d.evidence) == ("fh_diabetes_missing", 3, "我母亲有糖尿病")
    js = judge(edit("家族史：母亲患糖尿病。", "家族史：否认家族遗传病史。"))
    assert found(js) == ["fh_diabetes_missing"]


def test_family_other_disease() -> None:
    conv = edit("我母亲有糖尿病。", "我母亲有糖尿病，父亲有高血压。", CONV)
    assert found(judge(conversation=conv)) == ["fh_other_missing"]
    assert found(judge(edit("母亲患糖尿病。", "母亲患糖尿病，父亲患高血压。"), conv)) == []


@pytest.mark.parametrize("answer", ["没有，我父母都没有糖尿病。", "我父母那一辈没听说有糖尿病。", "不清楚。",
                                    "没有，我爸有高血压。"])
def test_family_history_not_affirmed(answer: str) -> None:
    conv = edit("我母亲有糖尿病。", answer, CONV)
    rec = edit("家族史：母亲患糖尿病。", "家族史：否认糖尿病家族史。")
    assert "fh_diabetes_missing" not in found(judge(rec, conv))


def test_family_member_speaking_about_the_patient() -> None:
    conv = [Turn(role="doctor", text="家里有人有糖尿病吗？"), Turn(role="family", text="我爸就是糖尿病14年了，他妈妈也有。")]
    rec = edit("家族史：母亲患糖尿病。", "家族史：祖母患糖尿病。")
    js = judge(rec, conv)
    assert "fh_diabetes_missing" not in found(js) and "ph_hypertension_missing" not in found(js)
    rec_bad = edit("家族史：母亲患糖尿病。", "家族史：不详。")
    assert hits(judge(rec_bad, conv), "fh_diabetes_missing")[0].evidence == "他妈妈也有"


def test_personal_history_unrecorded_once_per_topic() -> None:
    rec = edit("\n个人史：否认吸烟、饮酒。", "")
    js = judge(rec)
    assert [(d.type, d.evidence) for d in js["completeness"].deductions] == [
        ("personal_unrecorded", "不抽烟"), ("personal_unrecorded", "不抽烟")] or \
        [d.type for d in js["completeness"].deductions] == ["personal_unrecorded"] * 2
    assert "吸烟" in js["completeness"].deductions[0].reason and "饮酒" in js["completeness"].deductions[1].reason


def test_personal_topics_only_when_the_patient_speaks_of_them() -> None:
    conv = CONV + "\n医生：以后要多运动，少吃甜食。\n患者：好的。"
    assert found(judge(conversation=conv)) == []
    conv = CONV + "\n医生：平时运动吗？\n患者：很少。"
    assert found(judge(conversation=conv)) == ["personal_unrecorded"]
    assert found(judge(edit("否认吸烟、饮酒。", "否认吸烟、饮酒，缺乏运动。"), conv)) == []


# --------------------------------------------------------------------------- 10. past history, present illness, diagnosis


@pytest.mark.parametrize("answer, expected", [
    ("有高血压，5年了。", ["ph_hypertension_missing"]),
    ("有，5年了。", []),  # a question about two diseases: a bare yes is not attributed
    ("血脂有点高，没吃药。", ["ph_hyperlipidemia_missing"]),
    ("冠心病3年，放过支架。", ["ph_chd_missing"]),
    ("我没有高血压，也没有冠心病。", []),
    ("我老伴有高血压。", []),
    ("不知道有没有高血压。", []),
])
def test_past_history_diseases(answer: str, expected: list[str]) -> None:
    conv = edit("患者：都没有。\n医生：家里", f"患者：{answer}\n医生：家里", CONV)
    assert found(judge(conversation=conv)) == expected


def test_single_topic_question_answered_yes() -> None:
    conv = CONV + "\n医生：血压高吗？\n患者：有，吃着药呢。"
    assert found(judge(conversation=conv)) == ["ph_hypertension_missing"]


def test_comorbidity_recorded_elsewhere_is_not_missing() -> None:
    conv = edit("患者：都没有。\n医生：家里", "患者：有高血压，5年了。\n医生：家里", CONV)
    rec = edit("否认高血压、冠心病病史。", "高血压病史5年；否认冠心病病史。")
    assert found(judge(rec, conv)) == []


def test_present_illness_without_complications() -> None:
    js = judge(edit("无肢体麻木、视物模糊。", ""))
    assert found(js) == ["pi_complications_missing"]


def test_diabetes_type_error_and_missing_complication() -> None:
    js = judge(edit("诊断为“2型糖尿病”", "诊断为“1型糖尿病”"))
    assert [(d.type, d.points) for d in js["accuracy"].deductions] == [("diagnosis_error", 3)]
    conv = CONV + "\n医生：尿蛋白高，诊断糖尿病肾病。\n患者：好的。"
    js = judge(conversation=conv)
    assert [(d.type, d.evidence) for d in js["accuracy"].deductions] == [("diagnosis_missing", "诊断糖尿病肾病")]
    assert found(judge(edit("无肢体麻木", "诊断糖尿病肾病。无肢体麻木"), conv)) == []


# --------------------------------------------------------------------------- de-duplication and evidence


def test_evidence_is_quoted_from_the_record_or_conversation() -> None:
    rec = edit("血糖升高3年，口干、多饮6个月", "血糖高，口渴", edit("500mg 每日2次 餐后口服", "一天两次"))
    rec = edit("家族史：母亲患糖尿病。", "家族史：不详。", rec)
    js = judge(rec)
    for j in js.values():
        parts: list[Deduction | PenaltyHit] = [*j.deductions, *j.fixed_penalties]
        for d in parts:
            assert d.evidence == "" or d.evidence in rec or d.evidence in CONV, d
    keys = Counter((d.type, d.evidence, d.reason) for j in js.values() for d in j.deductions)
    assert max(keys.values()) == 1


# --------------------------------------------------------------------------- the examples

#: defect tag (as written in examples/cases.jsonl meta.defects) -> deduction types that catch it
TAG_TYPES: dict[str, set[str]] = {
    "wrong_value": {"value_error"}, "fabricated_value": {"value_error"}, "omitted_value": {"value_missing"},
    "wrong_unit": {"unit_error"}, "wrong_drug_name": {"drug_name_error"}, "fabricated_drug": {"drug_name_error"},
    "omitted_drug": {"drug_missing"}, "wrong_dose": {"dose_error"}, "wrong_usage": {"usage_error"},
    "wrong_time": {"time_error"}, "wrong_diagnosis": {"diagnosis_error"}, "missing_complication": {"diagnosis_missing"},
    "diabetes_in_past_history": {"diabetes_in_past_history"}, "missing_module_family_history": {"fh_absent"},
    "missing_module_personal_history": {"personal_unrecorded"},
    "missing_comorbidity": {"ph_hypertension_missing", "ph_hyperlipidemia_missing", "ph_chd_missing",
                            "ph_other_missing", "drug_missing"},
    "colloquial_term": {"colloquial"}, "vague_time": {"time_vague"}, "wrong_section_order": {"order_error"},
    "chief_complaint_no_duration": {"cc_duration_missing"},
    "drug_no_dose": {"dose_unclear", "usage_unclear", "drug_name_nonstandard"},
}


def _example_cases() -> list[Case]:
    if not EXAMPLES.is_file():
        pytest.skip("examples/cases.jsonl not written yet")
    return load_cases(EXAMPLES).cases


def _tags(case: Case) -> list[str]:
    return [d.split(":", 1)[0].strip() for d in case.meta.get("defects", [])]


def test_examples_every_output_derives() -> None:
    for case in _example_cases():
        for dim_id, j in check_case(case, RUBRIC).items():
            s = derive(RUBRIC.dimension(dim_id), j)  # raises on an unknown category/type or points out of range
            assert 0 <= s.score <= s.max


def test_examples_diabetes_in_past_history_exactly_where_planted() -> None:
    for case in _example_cases():
        penalized = bool(check_case(case, RUBRIC)["accuracy"].fixed_penalties)
        assert penalized == ("diabetes_in_past_history" in _tags(case)), case.id


def test_examples_good_cases_are_near_full_marks() -> None:
    good = [c for c in _example_cases() if not _tags(c)]
    assert good
    for case in good:
        js = check_case(case, RUBRIC)
        total = sum(derive(RUBRIC.dimension(d), j).score for d, j in js.items())
        assert total >= 98, (case.id, found(js))


def test_examples_planted_defects_are_caught_and_little_else() -> None:
    caught = planted = 0
    for case in _example_cases():
        types = set(found(check_case(case, RUBRIC)))
        allowed: set[str] = set()
        for tag in _tags(case):
            if tag in TAG_TYPES:
                planted += 1
                caught += bool(types & TAG_TYPES[tag])
                allowed |= TAG_TYPES[tag]
        unexplained = types - allowed
        assert len(unexplained) <= 1, (case.id, unexplained)
    assert planted and caught / planted >= 0.8, (caught, planted)


# --------------------------------------------------------------------------- realistic wording, false alarms

REAL_CONV = """医生：您好，哪里不舒服？
患者：我是2型糖尿病，查出来快5年了。最近两个月晚上起夜多，一晚上三四次，口也干。
医生：现在用什么药控制？
患者：早上吃一片格华止，0.5的，晚上也一片。还有拜糖平，一次一片，一天三次，吃饭的时候嚼。
医生：血糖测了没？
患者：空腹七点多，饭后没测。上个月查的糖化是百分之七点八。
医生：今天空腹血糖7.6，正常应该在6.1以下。血压145/90，有点高。以前血压高吗？
患者：血压高好几年了，没吃药。
医生：有没有看东西模糊、手脚麻？
患者：左脚有时候麻。
医生：家里人有糖尿病吗？
患者：我爸妈都没有，我姐姐有。
医生：抽烟吗？
患者：抽，一天半包。酒不喝。
医生：那血压药要吃起来，我给您开氨氯地平5毫克，每天一次。糖尿病肾病也要定期筛查。"""

REAL_RECORD = """## 主诉
多尿、口干2个月，发现血糖升高5年。

## 现病史
患者5年前诊断为2型糖尿病，目前口服二甲双胍片0.5g bid、阿卡波糖片50mg tid（随餐嚼服）。近2个月夜尿增多（3～4次/晚），伴口干。自测空腹血糖7mmol/L余；1个月前HbA1c 7.8%。今日空腹血糖7.6mmol/L，血压145/90mmHg。偶有左足麻木，无视物模糊。

## 既往史
高血压病史5年，未规律治疗。否认冠心病、脑卒中病史。

## 家族史
姐姐患糖尿病，父母无糖尿病。

## 个人史
吸烟，约10支/日；不饮酒。

## 处理
加用氨氯地平片5mg qd 口服；定期筛查糖尿病肾病。"""


def test_realistic_record_with_colloquial_conversation_is_clean() -> None:
    assert found(judge(REAL_RECORD, REAL_CONV)) == []


def test_unlabelled_conversation_lines() -> None:
    bare = "\n".join(line.split("：", 1)[1] for line in REAL_CONV.splitlines())
    assert found(judge(REAL_RECORD, bare)) == []


def test_realistic_defects() -> None:
    rec = edit("姐姐患糖尿病，父母无糖尿病。", "父母无糖尿病。", REAL_RECORD)
    rec = edit("高血压病史5年，未规律治疗。", "", rec)
    rec = edit("二甲双胍片0.5g bid", "格华止 一天两次", rec)
    js = judge(rec, REAL_CONV)
    assert sorted(found(js)) == ["dose_unclear", "drug_name_nonstandard", "fh_diabetes_missing",
                                 "ph_hypertension_missing"]
    assert hits(js, "fh_diabetes_missing")[0].evidence == "我姐姐有"


@pytest.mark.parametrize("sentence", [
    "予门冬氨酸钾镁口服。",                 # not insulin aspart
    "查胰岛素释放试验示胰岛素分泌延迟。",    # a lab test, not a drug
    "空腹血糖(2023年5月)9.6mmol/L。",       # a year is not a value
    "近6个月口干、多饮。",
])
def test_not_drugs_not_values(sentence: str) -> None:
    assert found(judge(edit("近6个月口干、多饮。", sentence))) == []


def test_a_frequency_is_not_a_duration() -> None:
    rec = edit("二甲双胍片500mg 每日2次 餐后口服", "二甲双胍片500mg 1日2次 餐后口服")
    assert found(judge(rec)) == []


def test_screening_is_not_a_stated_complication() -> None:
    conv = CONV + "\n医生：以后每年查一次眼底，看看有没有视网膜病变。\n患者：好。"
    assert found(judge(conversation=conv)) == []


# --------------------------------------------------------------------------- rules per rubric, the judge


def other_rubric(rubric_id: str) -> Rubric:
    """The medical-record rubric under another id (same dimensions, categories and types)."""
    return Rubric.model_validate({**RUBRIC.model_dump(), "id": rubric_id})


@pytest.fixture
def rules_registry_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rules registered in a test are forgotten after it."""
    monkeypatch.setattr(rules_registry._RULES, "_items", dict(rules_registry._RULES._items))


def test_rules_judge_serves_the_medical_record_rubric() -> None:
    judge = RulesJudge(RulesJudgeConfig(name="rules"), RUBRIC)
    assert judge.version == f"rules-medical_record-{RULES_VERSION}"
    assert judge.deterministic and not judge.reads_prompt
    built = build_judge(RulesJudgeConfig(name="rules"), RUBRIC)
    assert isinstance(built, RulesJudge) and built.version == judge.version


def test_rubric_without_registered_rules_is_refused(rules_registry_copy: None) -> None:
    with pytest.raises(InputError, match=r"no rules are registered for rubric 'no_such_rubric'") as e:
        RulesJudge(RulesJudgeConfig(name="rules"), other_rubric("no_such_rubric"))
    assert "kind: rules" in str(e.value)
    with pytest.raises(InputError, match="no_such_rubric"):
        build_judge(RulesJudgeConfig(name="rules"), other_rubric("no_such_rubric"))


async def test_registered_rules_serve_their_rubric(rules_registry_copy: None) -> None:
    seen: list[str] = []

    def tiny(case: Case, rubric: Rubric) -> dict[str, Judgment]:
        seen.append(case.id)
        return {d.id: Judgment(dimension=d.id, comment=f"tiny {rubric.id}") for d in rubric.dimensions}

    other = other_rubric("other")
    register_rules(RubricRules(rubric_id="other", version="7", check_case=tiny,
                               emits={"standardization": {"terminology": ("colloquial",)}}))
    judge = RulesJudge(RulesJudgeConfig(name="rules"), other)
    assert judge.version == "rules-other-7"
    case = Case(id="t", conversation=CONV, record=RECORD)
    outcomes = [await judge.judge(case, d, []) for d in other.dimensions]
    assert [present(o.judgment).comment for o in outcomes] == ["tiny other"] * 3
    assert all(o.status == "ok" and o.cost == 0.0 for o in outcomes)
    assert seen == ["t"]  # run once per case, every dimension served from it
    # the medical-record rubric keeps its own rules
    assert RulesJudge(RulesJudgeConfig(name="rules"), RUBRIC).version == f"rules-medical_record-{RULES_VERSION}"
    # the registered rules' emits are checked against the rubric they are used with
    register_rules(RubricRules(rubric_id="other", version="7", check_case=tiny,
                               emits={"standardization": {"terminology": ("colloquial", "slang")}}))
    with pytest.raises(InputError, match=r"standardization\.terminology\.slang"):
        RulesJudge(RulesJudgeConfig(name="rules"), other)


def test_rules_request_hash_follows_the_case_not_the_prompt_templates(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts"
    shutil.copytree(Path(__file__).resolve().parents[1] / "prompts", prompts)
    llm_config = LLMJudgeConfig(name="j", model="openai/x", api_base="http://x.test/v1")
    judges = [RulesJudge(RulesJudgeConfig(name="rules"), RUBRIC), build_judge(llm_config, RUBRIC)]
    config = EvalConfig(judges=[RulesJudgeConfig(name="rules"), llm_config], prompts_dir=str(prompts))

    def hashes(record: str = RECORD) -> dict[tuple[str, str], str]:
        calls = plan([Case(id="t", conversation=CONV, record=record)], RUBRIC, config, judges)
        return {(c.planned.judge, c.planned.dimension): c.planned.request_hash for c in calls}

    def of(judge: str, got: dict[tuple[str, str], str]) -> dict[str, str]:
        return {dim: h for (j, dim), h in got.items() if j == judge}

    before = hashes()
    template = prompts / "medical_record" / "accuracy.j2"  # a child template: text counts inside its block
    text = template.read_text(encoding="utf-8")
    assert text.rstrip().endswith("{% endblock %}")
    template.write_text(text.rstrip()[:-len("{% endblock %}")] + "- 请逐条核对对话与病历。\n{% endblock %}\n",
                        encoding="utf-8")
    after = hashes()
    assert of("rules", after) == of("rules", before)
    assert of("j", after)["accuracy"] != of("j", before)["accuracy"]
    assert of("j", after)["completeness"] == of("j", before)["completeness"]
    changed = hashes(edit("空腹血糖9.6mmol/L", "空腹血糖9.7mmol/L"))
    assert all(changed[k] != after[k] for k in after if k[0] == "rules")


# --------------------------------------------------------------------------- cost: linear in the case's length
# (clause bounds were once found by rescanning the record from its start for each keyword, and other
# steps redid work per mention: 51 s at 530 KB; bench/rules_bench.py measures the time per KB). Timed tests
# are not used here (shared, noisy machines): the work of a check is counted instead, as the function calls
# cProfile sees (Python and built-in) and the characters the regular expressions of the rules walk over
# (every pattern of the package and every re.search/match/sub/... it makes, counted to where each search
# stops). Before the fix, doubling the examples' case multiplied both by about 4.


class _CountingPattern:
    """A compiled pattern that adds to ``walked[0]`` the characters each call walks over (to the match's end,
    or to the window's end when nothing is found; ``finditer`` as it is consumed)."""

    def __init__(self, rx: re.Pattern[str], walked: list[int]) -> None:
        self._rx, self._walked, self.pattern, self.flags = rx, walked, rx.pattern, rx.flags

    def _to(self, string: str, pos: int, endpos: int, m: re.Match[str] | None) -> re.Match[str] | None:
        self._walked[0] += 1 + max(0, (m.end() if m else min(endpos, len(string))) - pos)
        return m

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self._to(string, pos, endpos, self._rx.search(string, pos, endpos))

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        m = self._rx.match(string, pos, endpos)
        self._walked[0] += 1 + (m.end() - pos if m else 0)
        return m

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        m = self._rx.fullmatch(string, pos, endpos)
        self._walked[0] += 1 + (m.end() - pos if m else 0)
        return m

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
        last = pos
        for m in self._rx.finditer(string, pos, endpos):
            self._walked[0] += 1 + m.end() - last
            last = m.end()
            yield m
        self._walked[0] += max(0, min(endpos, len(string)) - last)

    def sub(self, repl: str, string: str, count: int = 0) -> str:
        self._walked[0] += 1 + len(string)
        return self._rx.sub(repl, string, count)


def _work(case: Case, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(function calls, characters walked by regular expressions) of one check of ``case``: deterministic,
    unlike its time."""
    walked = [0]
    proxies: dict[int, _CountingPattern] = {}

    def compiled(p: str | re.Pattern[str] | _CountingPattern, flags: int = 0) -> _CountingPattern:
        return p if isinstance(p, _CountingPattern) else _CountingPattern(re.compile(p, flags), walked)

    shim = types.SimpleNamespace(**{k: getattr(re, k) for k in dir(re) if not k.startswith("__")})
    shim.compile = compiled
    shim.search = lambda p, s, flags=0: compiled(p, flags).search(s)
    shim.match = lambda p, s, flags=0: compiled(p, flags).match(s)
    shim.fullmatch = lambda p, s, flags=0: compiled(p, flags).fullmatch(s)
    shim.finditer = lambda p, s, flags=0: compiled(p, flags).finditer(s)
    shim.sub = lambda p, r, s, count=0, flags=0: compiled(p, flags).sub(r, s, count)
    with monkeypatch.context() as m:
        for info in pkgutil.iter_modules(medical_record.__path__):
            module = importlib.import_module(f"{medical_record.__name__}.{info.name}")
            for name, value in list(vars(module).items()):
                if isinstance(value, re.Pattern):  # one proxy per pattern: identity checks still hold
                    m.setattr(module, name, proxies.setdefault(id(value), _CountingPattern(value, walked)))
            if getattr(module, "re", None) is re:
                m.setattr(module, "re", shim)
        profile = cProfile.Profile()
        profile.enable()
        try:
            check_case(case, RUBRIC)
        finally:
            profile.disable()
    # Stats.total_calls is set by Stats but not in typeshed's stub
    return pstats.Stats(profile).total_calls, walked[0]  # type: ignore[attr-defined]


def _copies(n: int) -> Case:
    """The 16 example cases' records and conversations, repeated to ``n`` copies, the values shifted per round."""
    cases = _example_cases()
    records, conversations = [], []
    for i in range(n):
        c, shift = cases[i % len(cases)], i // len(cases)

        def vary(text: str, shift: int = shift) -> str:
            return re.sub(r"\d+\.\d", lambda m: f"{float(m.group()) + 0.1 * (shift % 7):.1f}", text)

        records.append(vary(c.record))
        conversations.append(vary(c.conversation_as_text(RUBRIC.roles)))
    return Case(id=f"copies-{n}", record="\n".join(records), conversation="\n".join(conversations))


def _degenerate(unit: str, n: int) -> Case:
    if unit == "drug list in one clause":  # no clause end: one clause with n drugs, joined or not
        body = "".join(("、" if i % 3 else "") + ("二甲双胍片500mg", "格列美脲", "阿卡波糖")[i % 3] for i in range(n))
        return Case(id="d", record=edit("予二甲双胍片500mg 每日2次 餐后口服", f"予{body}"), conversation=CONV)
    # a transcript without punctuation: one long turn of the patient
    said = "".join(("我吃二甲双胍500毫克", "没吃过格列美脲", "我爸有高血压", "空腹血糖7点多")[i % 4] for i in range(n))
    return Case(id="d", record=RECORD, conversation=f"医生：吃什么药\n患者：{said}")


@pytest.mark.parametrize("kind", ["examples", "drug list in one clause", "unpunctuated conversation"])
def test_doubling_the_case_doubles_the_work(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if kind == "examples":  # a record of ~96 KB (and a conversation of ~125 KB), then twice that
        small, large = _copies(250), _copies(500)
        assert 90_000 < len(small.record) < 100_000
    else:  # these were quadratic in the clause's or turn's length: 4x the characters walked
        small, large = _degenerate(kind, 2_000), _degenerate(kind, 4_000)
    (calls, walked), (calls2, walked2) = _work(small, monkeypatch), _work(large, monkeypatch)
    assert walked > len(small.record) + len(small.conversation)  # the counting sees the scans
    assert 1.7 < calls2 / calls < 2.4, (calls, calls2)
    assert 1.7 < walked2 / walked < 2.4, (walked, walked2)


def test_a_large_case_is_judged_the_same_each_time() -> None:
    big, other = _copies(120), _copies(17)
    first = check_case(big, RUBRIC)
    assert sum(len(j.deductions) for j in first.values()) > 100
    check_case(other, RUBRIC)  # nothing carries over from one case to the next
    assert check_case(big, RUBRIC) == first
    assert check_case(Case(id="again", record=big.record, conversation=big.conversation), RUBRIC) == first


def test_boundaries_give_what_bounds_gives() -> None:
    rng = random.Random(12)
    for _ in range(400):
        text = "".join(rng.choice(",.;。!?\n \t \t1a") for _ in range(rng.randint(0, 9)))
        for end_re in (CLAUSE_END, SENTENCE_END):
            index = Boundaries(text, end_re)
            for lo in range(len(text) + 1):
                for pos in range(len(text) + 1):
                    for hi in [*range(len(text) + 1), None]:
                        assert index.bounds(pos, lo, hi) == bounds(text, pos, end_re, lo, hi), (text, lo, pos, hi)
    with pytest.raises(ValueError):
        Boundaries("a", re.compile(","))


def test_numbers_has_close_as_any_close() -> None:
    rng = random.Random(3)
    pool = [0.0, 0.5, 1.0, 7.2, 7.25, 7.3, 100.0, 1e300, float("inf"), float("nan")]
    for _ in range(3_000):
        ns = [rng.choice(pool) + rng.choice([0.0, 0.05, 0.051, -0.051, 1e-7]) for _ in range(rng.randint(0, 6))]
        v = rng.choice(pool) + rng.choice([0.0, 0.05, 1e-6, 2e-6])
        tol = rng.choice([1e-6, 0.051])
        assert Numbers(ns).has_close(v, tol) == any(close(v, n, tol) for n in ns), (ns, v, tol)


def _measure(kind: str, value: float | tuple[float, float], threshold: bool = False) -> Measure:
    return Measure(kind, value, 0, 1, str(value), False, threshold)


def test_value_error_pairing_takes_what_min_took() -> None:
    """_Candidates.take against the list-and-min it replaces (ties, infinities, pairs, glucose kinds)."""
    rng = random.Random(5)
    values: list[float | tuple[float, float]] = [5.0, 5.5, 6.0, 6.0, 7.0, 7.5, float("inf"), (120.0, 80.0),
                                                  (130.0, 80.0), (130.0, 85.0)]
    kinds = ["fpg", "ppg", "glucose", "hba1c", "bp"]
    for _ in range(1_500):
        conv = [_measure(rng.choice(kinds), rng.choice(values), rng.random() < 0.1) for _ in range(rng.randint(0, 10))]
        used = {i for i in range(len(conv)) if rng.random() < 0.2}
        expected_used = set(used)
        pool = _Candidates(conv, used)
        for _ in range(rng.randint(1, 8)):
            r = _measure(rng.choice(kinds), rng.choice([*values, 5.8, 6.5, (125.0, 82.0)]))
            same = [i for i, c in enumerate(conv) if c.kind == r.kind]
            cands = [i for i in same if not conv[i].threshold and i not in expected_used] or \
                [i for i, c in enumerate(conv) if not c.threshold and i not in expected_used
                 and {c.kind, r.kind} <= GLUCOSE_KINDS and "glucose" in (c.kind, r.kind)]
            want = min(cands, key=lambda i: _distance(conv[i], r)) if cands else None
            got = pool.take(r)
            assert got is (conv[want] if want is not None else None), (conv, r, want)
            if want is not None:
                expected_used.add(want)
        assert used == expected_used


def test_guarded_number_patterns_match_as_before() -> None:
    """The run-start lookbehinds of DURATION, DOSE and FREQ change no match (they only spare rescans)."""
    guards = ["(?<!\\d)", "(?<![一二两三四五六七八九十百数几])", "(?<![^年月周期天日][半多])",
              "(?<![零一二两三四五六七八九十百半])"]

    def unguarded(rx: re.Pattern[str]) -> re.Pattern[str]:
        pattern = rx.pattern
        for g in guards:
            pattern = pattern.replace(g, "")
        assert pattern != rx.pattern
        return re.compile(pattern, rx.flags)

    patterns = [(rx, unguarded(rx)) for rx in (DURATION, DOSE, FREQ, _FREQ_COUNT)]
    rng = random.Random(7)
    alphabet = [*"0123456789.一二三十百半多几零余个 年月日天周期次片/dmgq每", "星期", "个单位", "3年多", "一年半", "qd"]
    for _ in range(6_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        for new, old in patterns:
            assert [(m.span(), m.groupdict()) for m in new.finditer(text)] == \
                [(m.span(), m.groupdict()) for m in old.finditer(text)], (new.pattern, text)
    # and a long run is read once (10,000 digits took 9 s, 20,000 took 41 s)
    assert [m.group() for m in DURATION.finditer("1" * 200_000 + "年")] == ["1" * 200_000 + "年"]


def test_incremental_searches_answer_as_the_plain_ones() -> None:
    rng = random.Random(9)
    drugs = ["二甲双胍", "阿卡波糖", "胰岛素", "甘精", "门冬"]
    after = [*" \t口服皮下注射静脉等药物治疗、及和与片胶囊x", *drugs, "治疗", "  "]
    for _ in range(3_000):
        text = "".join(rng.choice(after) for _ in range(rng.randint(0, 14)))
        stop = rng.randint(0, len(text))
        ends = sorted(rng.sample(range(stop + 1), rng.randint(0, min(5, stop + 1))))
        assert treatment_mode_after(text, ends, stop) == \
            [bool(TREATMENT_MODE.match(NOT_USAGE.sub("", text[e:stop]))) for e in ends], (text, ends, stop)
    negations = [*"否认未曾从来没有无不拒绝再使用应服口注射过打吃予加接受x，", "从来没", "服用"]
    usage = [*"qdbhtiopvmx12 次/日天dD每早晚餐前后口服注射ſK，", "qd", "q8h", "po", "每日2次", "2次/日", "饭后"]
    for _ in range(3_000):
        text = "".join(rng.choice(negations) for _ in range(rng.randint(0, 16)))
        search = GrowingSearch(text, NEG_USE, NEG_USE_LONGEST)
        lo = rng.randint(0, len(text))
        for hi in sorted(rng.randint(lo, len(text)) for _ in range(4)):
            assert search.search(lo, hi) == bool(NEG_USE.search(text, lo, hi)), (text, lo, hi)
        text = "".join(rng.choice(usage) for _ in range(rng.randint(0, 16)))
        spans = [(a, rng.randint(a, len(text))) for a in (rng.randint(0, len(text)) for _ in range(5))]
        for rx in (FREQ, ROUTE):
            found = _UsageSearch(text, rx, spans)
            for a, e in spans:
                assert found.found(a, e) == bool(rx.search(text, a, e)), (text, rx.pattern[:9], a, e)
