"""The rules judge on errors written the way a scribe makes them: an insulin put for
another insulin, a value taken from another point of the conversation, units beyond glucose, a timing
changed, a duration changed, two events put in the wrong order. Each on cases written here, with the
clean wording beside it that must stay silent."""

from __future__ import annotations

import pytest

from consensus_eval.domain.judgment import Judgment
from tests.test_rules_judge import CONV, RECORD, edit, found, judge

# --------------------------------------------------------------------------- 1. insulin for insulin

INSULIN_CONV = edit("饭后吃。", "饭后吃；晚上睡前还打甘精胰岛素，12个单位。\n"
                                "医生：胰岛素打了多久？\n患者：2年了。", CONV)
INSULIN_REC = edit("餐后口服。", "餐后口服；2年前加用甘精胰岛素12U 每晚1次 睡前皮下注射。")


def test_the_insulin_the_conversation_names_is_clean() -> None:
    assert found(judge(INSULIN_REC, INSULIN_CONV)) == []
    # a short name or a brand in the conversation names the same insulin
    for said in ("甘精", "来得时"):
        assert found(judge(INSULIN_REC, INSULIN_CONV.replace("甘精胰岛素", said))) == []


@pytest.mark.parametrize("written", ["地特胰岛素", "德谷胰岛素", "门冬胰岛素", "精蛋白生物合成人胰岛素"])
def test_another_insulin_is_a_drug_name_error(written: str) -> None:
    js = judge(INSULIN_REC.replace("甘精胰岛素", written), INSULIN_CONV)
    (d,) = js["accuracy"].deductions
    assert (d.type, d.points, d.evidence) == ("drug_name_error", 3, written)
    assert d.reason == f"对话中为甘精胰岛素，病历记为{written}"
    assert found(js) == ["drug_name_error"]  # the conversation's insulin is not also counted missing


def test_another_insulin_beside_bare_insulin_in_the_record() -> None:
    rec = edit("2年前加用甘精胰岛素12U", "2年前加用胰岛素，地特胰岛素12U", INSULIN_REC)
    assert found(judge(rec, INSULIN_CONV)) == ["drug_name_error"]


def test_a_specific_insulin_is_excused_when_the_conversation_names_none() -> None:
    conv = INSULIN_CONV.replace("甘精胰岛素", "胰岛素")
    for written in ("甘精胰岛素", "地特胰岛素"):
        assert "drug_name_error" not in found(judge(INSULIN_REC.replace("甘精胰岛素", written), conv))


def test_human_insulins_stand_for_one_another() -> None:
    conv = edit("饭后吃。", "饭后吃；还打诺和灵30R，早晚饭前各12个单位。", CONV)
    rec = edit("餐后口服。", "餐后口服；精蛋白生物合成人胰岛素注射液(30R)12U 每日2次 早晚餐前皮下注射。")
    assert found(judge(rec, conv)) == []


def test_two_insulins_one_swapped() -> None:
    conv = edit("饭后吃。", "饭后吃；门冬胰岛素三餐前各打6个单位，睡前打甘精胰岛素14个单位。", CONV)
    rec = edit("餐后口服。", "餐后口服；门冬胰岛素6U 每日3次 三餐前皮下注射，甘精胰岛素14U 每晚1次 睡前皮下注射。")
    assert found(judge(rec, conv)) == []
    bad = judge(rec.replace("门冬胰岛素", "赖脯胰岛素"), conv)
    assert [(d.type, d.reason) for d in bad["accuracy"].deductions] == [
        ("drug_name_error", "对话中为门冬胰岛素，病历记为赖脯胰岛素")]


# --------------------------------------------------------------------------- 2. a value from another point


def accuracy(js: dict[str, Judgment]) -> list[tuple[str, str]]:
    return [(d.type, d.reason) for d in js["accuracy"].deductions]


def test_fasting_written_with_the_post_meal_value() -> None:
    conv = edit("今天空腹9.6", "今天空腹9.6，餐后两小时12.5", CONV)
    rec = edit("今日查空腹血糖9.6mmol/L", "今日查空腹血糖12.5mmol/L，餐后2小时血糖12.5mmol/L")
    assert accuracy(judge(rec, conv)) == [
        ("value_error", "对话中空腹血糖为9.6，病历记为12.5（12.5为对话中餐后2小时血糖的值）")]
    # before: a number said anywhere in the conversation was fine; it still is for a kind it gives no value of
    clean = edit("今日查空腹血糖9.6mmol/L", "今日查空腹血糖9.6mmol/L，餐后2小时血糖12.5mmol/L")
    assert found(judge(clean, conv)) == []


def test_a_number_said_elsewhere_is_fine_for_a_kind_without_a_value() -> None:
    conv = edit("今天空腹9.6", "今天空腹9.6，体重70公斤，身高165", CONV)
    rec = edit("血压130/80mmHg。", "血压130/80mmHg，体重70kg，身高165cm，BMI 25.7kg/m²。")
    assert accuracy(judge(rec, conv)) == [("value_error", "对话中未提及BMI25.7")]
    conv_bmi = edit("身高165", "身高165，算下来体重指数25.7", conv)
    assert found(judge(rec, conv_bmi)) == []


LAST_YEAR = edit("今天空腹9.6，糖化8.1%", "去年糖化7.5%，今天空腹9.6，糖化8.1%", CONV)


def test_this_visits_value_written_with_last_years() -> None:
    rec = edit("HbA1c 8.1%", "HbA1c 7.5%")
    assert accuracy(judge(rec, LAST_YEAR)) == [
        ("value_error", "对话中本次糖化血红蛋白为8.1，病历记为7.5（7.5为对话中此前的值）")]
    # both written at their own time points: clean
    both = edit("今日查空腹血糖9.6mmol/L，HbA1c 8.1%", "1年前HbA1c 7.5%。今日查空腹血糖9.6mmol/L，HbA1c 8.1%")
    assert found(judge(both, LAST_YEAR)) == []


def test_an_earlier_value_written_with_this_visits() -> None:
    rec = edit("空腹血糖7.9mmol/L", "空腹血糖9.6mmol/L")  # 3年前体检: the diagnosis' value
    assert accuracy(judge(rec, CONV)) == [
        ("value_error", "对话中此前空腹血糖为7.9，病历记为9.6（9.6为对话中本次的值）")]


def test_a_dated_value_is_the_conversations_value_of_that_date() -> None:
    conv = edit("我糖尿病3年了", "我2024年3月体检空腹血糖6.9，糖尿病3年了", CONV).replace("今天空腹9.6", "今天空腹6.4")
    rec = edit("今日查空腹血糖9.6mmol/L", "2024年3月体检空腹血糖6.9mmol/L，今日查空腹血糖6.4mmol/L")
    assert found(judge(rec, conv)) == []
    swapped = rec.replace("体检空腹血糖6.9", "体检空腹血糖6.4")
    assert accuracy(judge(swapped, conv)) == [
        ("value_error", "对话中2024年3月空腹血糖为6.9，病历记为6.4（6.4为对话中其他时间的值）")]
    # a date the conversation gives no value of may be today's
    assert found(judge(edit("今日查空腹血糖9.6", "2024年6月查空腹血糖9.6"), CONV)) == []


def test_after_a_next_step_a_value_has_no_time_point() -> None:
    conv = edit("3年前体检空腹血糖7.9", "3年前体检空腹血糖7.9，后来一般空腹9.6左右", CONV)
    rec = edit("空腹血糖7.9mmol/L，", "空腹血糖7.9mmol/L，此后空腹血糖9.6mmol/L左右，")
    assert found(judge(rec, conv)) == []


def test_values_without_a_time_point_are_not_judged_by_it() -> None:
    conv = edit("今天空腹9.6，糖化8.1%", "今天空腹9.6，糖化8.1%。平时在家测空腹7左右", CONV)
    rec = edit("今日查空腹血糖9.6mmol/L", "自测空腹血糖7mmol/L左右，今日查空腹血糖9.6mmol/L")
    assert found(judge(rec, conv)) == []
    # a record value at no time point: any of the conversation's values (7.9 was 3 years ago)
    rec = edit("今日查空腹血糖9.6mmol/L", "自测空腹血糖7.9mmol/L，今日查空腹血糖9.6mmol/L")
    assert found(judge(rec, CONV)) == []


def test_several_values_after_one_keyword() -> None:
    conv = edit("糖化8.1%", "糖化上次7.8，这次8.1%", CONV)
    rec = edit("HbA1c 8.1%", "本次HbA1c 8.1%，上次HbA1c 7.8%")
    assert found(judge(rec, conv)) == []
    assert accuracy(judge(edit("HbA1c 8.1%", "本次HbA1c 7.8%"), conv)) == [
        ("value_error", "对话中本次糖化血红蛋白为8.1，病历记为7.8（7.8为对话中此前的值）")]


def test_an_approximate_value_covers_what_it_stands_for() -> None:
    conv = edit("今天空腹9.6", "平时空腹7点多，饭后7.5。今天空腹9.6", CONV)
    rec = edit("今日查空腹血糖9.6mmol/L", "自测空腹血糖7.5mmol/L，餐后血糖7.5mmol/L；今日查空腹血糖9.6mmol/L")
    assert found(judge(rec, conv)) == []
    # a precise value inside the range 7点多 opens (7 to 8) cannot be shown wrong (a clinician's review: 6点多
    # written 6.5 is no error); one outside it is, and so is one beside a number said as such (7左右: 7 is said)
    rec = edit("今日查空腹血糖9.6mmol/L", "自测空腹血糖7.3mmol/L，餐后血糖7.5mmol/L；今日查空腹血糖9.6mmol/L")
    assert found(judge(rec, conv)) == []
    assert found(judge(rec.replace("7.3", "8.3"), conv)) == ["value_error"]
    assert found(judge(rec, conv.replace("7点多", "7左右"))) == ["value_error"]


@pytest.mark.parametrize("text, kinds", [
    ("去年糖化7.5%，今天糖化8.1%", ["past", "present"]),
    ("3年前体检空腹7.9，这次空腹9.6", ["past", "present"]),
    ("两年多前查过，目前", ["past", "present"]),
    ("诊断时空腹10，现在", ["past", "present"]),
    ("最近空腹7左右，近3个月", ["present", "present"]),
    ("3年前空腹9，后来", ["past", None]),
    ("2024年3月空腹6.9，2023年", ["date:2024-3", "date:2023-0"]),
    ("平时空腹一般8左右", []),
])
def test_time_points(text: str, kinds: list[str | None]) -> None:
    from consensus_eval.judges.rules.medical_record.quantities import Anchors

    a = Anchors(text)
    assert [a.at(len(text), 0)] == [kinds[-1] if kinds else None]
    assert a._kinds == kinds


def test_a_value_written_with_its_unit_is_of_that_kind() -> None:
    conv = edit("今天空腹9.6", "今天体重70公斤，空腹9.6", CONV) + "\n医生：以前多重？\n患者：以前有160斤。"
    rec = edit("血压130/80mmHg。", "血压130/80mmHg，体重70kg（既往体重80kg）。")
    assert found(judge(rec, conv)) == []
    assert accuracy(judge(rec.replace("80kg", "85kg"), conv)) == [("value_error", "对话中未提及体重85")]


# --------------------------------------------------------------------------- 3. units beyond glucose

LABS = edit("血压130/80。", "血压130/80，肌酐98，eGFR 85，体重150斤。", CONV)
LABS_REC = edit("血压130/80mmHg。", "血压130/80mmHg，血肌酐98μmol/L，eGFR 85ml/(min·1.73m²)，体重75kg。")


def units(js: dict[str, Judgment]) -> list[tuple[str, str, str]]:
    return [(d.type, d.evidence, d.reason) for d in js["accuracy"].deductions]


def test_labs_in_their_units_are_clean() -> None:
    assert found(judge(LABS_REC, LABS)) == []
    for written in ("eGFR 85mL/min/1.73m²", "eGFR 85ml/min"):
        assert found(judge(LABS_REC.replace("eGFR 85ml/(min·1.73m²)", written), LABS)) == []


@pytest.mark.parametrize("old, new", [
    ("血肌酐98μmol/L", "血肌酐98mmol/L"),              # a μmol/L-sized creatinine in mmol/L
    ("eGFR 85ml/(min·1.73m²)", "eGFR 85μmol/L"),      # eGFR in a concentration
    ("体重75kg", "体重150kg"),                          # the conversation's 150斤 as kg
    ("HbA1c 8.1%", "HbA1c 8.1mmol/mol"),              # a %-sized HbA1c in mmol/mol
])
def test_a_wrong_unit_is_one_unit_error(old: str, new: str) -> None:
    js = judge(LABS_REC.replace(old, new), LABS)
    assert found(js) == ["unit_error"]
    (d,) = js["accuracy"].deductions
    assert (d.points, d.evidence) == (1, new)


def test_the_unit_the_conversation_uses() -> None:
    js = judge(LABS_REC.replace("体重75kg", "体重150kg"), LABS)
    assert units(js) == [("unit_error", "体重150kg", "对话中体重为150斤，病历记为150kg")]
    conv = edit("肌酐98", "肌酐1.1mg/dL", LABS)
    js = judge(LABS_REC.replace("血肌酐98μmol/L", "血肌酐1.1μmol/L"), conv)
    assert units(js) == [("unit_error", "血肌酐1.1μmol/L", "对话中肌酐为1.1mg/dL，病历记为1.1μmol/L")]
    assert found(judge(LABS_REC.replace("血肌酐98μmol/L", "血肌酐1.1mg/dL"), conv)) == []


def test_hba1c_in_mmol_per_mol() -> None:
    conv = edit("糖化8.1%", "糖化65mmol/mol", CONV)
    assert found(judge(edit("HbA1c 8.1%", "HbA1c 65mmol/mol"), conv)) == []
    assert found(judge(RECORD, conv)) == []  # 65 mmol/mol is 8.1%
    js = judge(edit("HbA1c 8.1%", "HbA1c 65%"), conv)
    assert units(js) == [("unit_error", "HbA1c 65%", "对话中糖化血红蛋白为65mmol/mol，病历记为65%")]
    # a number the conversation never says, in a wrong unit: both errors
    assert units(judge(edit("HbA1c 8.1%", "HbA1c 65%"))) == [
        ("unit_error", "HbA1c 65%", "糖化血红蛋白65的单位错误"),
        ("value_error", "HbA1c 65%", "对话中糖化血红蛋白为8.1，病历记为65")]


@pytest.mark.parametrize("text", ["身高1.7cm", "身高170米", "BMI 26.8kg", "空腹血糖162mmol/L"])
def test_other_impossible_units(text: str) -> None:
    rec = edit("血压130/80mmHg。", f"血压130/80mmHg，{text}。")
    assert "unit_error" in found(judge(rec))


@pytest.mark.parametrize("text", ["肌酐清除率60ml/min", "eGFR较前下降20%", "身高1米70", "身高170cm", "尿酸420μmol/L"])
def test_not_unit_errors(text: str) -> None:
    rec = edit("血压130/80mmHg。", f"血压130/80mmHg，{text}。")
    assert "unit_error" not in found(judge(rec))


# --------------------------------------------------------------------------- 4. timing


def with_drugs(said: str, written: str) -> tuple[str, str]:
    """CONV and RECORD with one more drug line: ``said`` by the patient, ``written`` in the record."""
    return edit("餐后口服。", f"餐后口服；{written}。"), edit("饭后吃。", f"饭后吃。{said}", CONV)


@pytest.mark.parametrize("said, written", [
    ("甘精胰岛素每天睡前打12个单位。", "甘精胰岛素12U 每日1次 晚餐前皮下注射"),
    ("甘精胰岛素每天睡前打12个单位。", "甘精胰岛素12U 每日1次 早上皮下注射"),
    ("阿卡波糖50毫克，一天三次，吃第一口饭的时候嚼碎。", "阿卡波糖片50mg 每日3次 餐后口服"),
    ("格列美脲2毫克，每天早饭前吃一次。", "格列美脲片2mg 每日1次 晚餐后口服"),
    ("门冬胰岛素三餐前各打6个单位。", "门冬胰岛素6U 每日3次 三餐后皮下注射"),
])
def test_a_changed_timing_is_a_usage_error(said: str, written: str) -> None:
    rec, conv = with_drugs(said, written)
    js = judge(rec, conv)
    assert found(js) == ["usage_error"]
    (d,) = js["accuracy"].deductions
    assert d.evidence == written and d.reason.startswith("对话中") and "病历记为" in d.reason


@pytest.mark.parametrize("said, written", [
    ("甘精胰岛素每天睡前打12个单位。", "甘精胰岛素12U 每晚1次 睡前皮下注射"),
    ("甘精胰岛素每天晚上打12个单位。", "甘精胰岛素12U 每日1次 睡前皮下注射"),
    ("格列美脲2毫克，每天早上吃一次。", "格列美脲片2mg 每日1次 早餐前口服"),
    ("门冬胰岛素每次吃饭前马上打6个单位，一天三次。", "门冬胰岛素6U 每日3次 餐时皮下注射"),
    ("门冬胰岛素餐前即刻打6个单位，一天三次。", "门冬胰岛素6U 每日3次 随餐皮下注射"),
    ("阿卡波糖50毫克，一天三次，吃第一口饭的时候嚼碎。", "阿卡波糖片50mg 每日3次 随餐嚼服"),
])
def test_the_same_timing_in_other_words_is_clean(said: str, written: str) -> None:
    rec, conv = with_drugs(said, written)
    assert found(judge(rec, conv)) == []


def test_timing_is_read_around_each_drug() -> None:
    said = "早上打门冬胰岛素8个单位，晚上睡前打甘精胰岛素14个单位。"
    written = "门冬胰岛素8U 每日1次 早餐前皮下注射，甘精胰岛素14U 每晚1次 睡前皮下注射"
    rec, conv = with_drugs(said, written)
    assert found(judge(rec, conv)) == []
    swapped = "门冬胰岛素8U 每日1次 睡前皮下注射，甘精胰岛素14U 每日1次 早餐前皮下注射"
    rec, conv = with_drugs(said, swapped)
    assert found(judge(rec, conv)) == ["usage_error", "usage_error"]


def test_a_glucose_time_is_not_a_drug_timing() -> None:
    said = "甘精胰岛素14个单位。\n医生：血糖多少？\n患者：饭后两小时13左右。"
    rec, conv = with_drugs(said, "甘精胰岛素14U 每晚1次 睡前皮下注射")
    assert found(judge(rec, conv)) == []
    # the conversation's own answer about when is read from the next turns
    said = "甘精胰岛素14个单位。\n医生：什么时候打？\n患者：早上起来打。"
    rec, conv = with_drugs(said, "甘精胰岛素14U 每晚1次 睡前皮下注射")
    assert found(judge(rec, conv)) == ["usage_error"]


def test_timing_in_a_later_clause_of_the_drugs_sentence() -> None:
    rec, conv = with_drugs("甘精胰岛素每天睡前打12个单位。", "甘精胰岛素12U 每日1次，晚餐前皮下注射")
    assert found(judge(rec, conv)) == ["usage_error"]


# --------------------------------------------------------------------------- precision on free wording


def test_an_insulin_whose_brand_the_lexicon_lacks_is_not_a_swap() -> None:
    # 艾倍得 (insulin glulisine) is not in the lexicon: the record's 谷赖胰岛素 replaces no insulin the
    # conversation names (诺和达 is 德谷胰岛素, recorded)
    conv = edit("饭后吃。", "饭后吃。三餐前打艾倍得，每次6个单位；睡前打诺和达14个单位，一直打胰岛素。", CONV)
    rec = edit("餐后口服。", "餐后口服；谷赖胰岛素6U 每日3次 三餐前皮下注射，德谷胰岛素14U 每晚1次 睡前皮下注射。")
    assert found(judge(rec, conv)) == []
    # 德谷 put as 地特 is still found (谷赖 then has no named insulin to stand for and is flagged too)
    js = judge(rec.replace("德谷", "地特"), conv)
    assert "地特胰岛素" in [d.evidence for d in js["accuracy"].deductions if d.type == "drug_name_error"]


def test_an_answer_gives_the_value_the_question_asks_for() -> None:
    conv = CONV + "\n医生：空腹血糖现在多少？\n患者：6.5左右。"
    rec = edit("今日查空腹血糖9.6mmol/L", "目前自测空腹血糖6.5mmol/L左右，今日查空腹血糖9.6mmol/L")
    assert found(judge(rec, conv)) == []


def test_a_plain_glucose_reading_keeps_the_old_rule() -> None:
    conv = CONV + "\n医生：有没有低血糖？\n患者：上周有一次，测了3.1，睡前一般7到8。"
    rec = edit("今日查空腹血糖9.6mmol/L", "1周前低血糖1次，血糖3.1mmol/L，睡前血糖7～8mmol/L；今日查空腹血糖9.6mmol/L")
    assert found(judge(rec, conv)) == []


def test_values_after_a_threshold_are_values_of_its_kind() -> None:
    conv = edit("今天空腹9.6", "平时空腹经常在10以上，餐后7到8。今天空腹9.6", CONV)
    rec = edit("今日查空腹血糖9.6mmol/L", "空腹血糖多在10mmol/L以上，餐后血糖7～8mmol/L；今日查空腹血糖9.6mmol/L")
    assert found(judge(rec, conv)) == []


# --------------------------------------------------------------------------- 5. durations


@pytest.mark.parametrize("text, months", [
    ("半年", 6), ("近半年", 6), ("一年半", 18), ("1年半", 18), ("两年", 24), ("十二年", 144), ("三个月", 3),
    ("半个月", 0.5), ("两年半前", 30), ("去年", 12),
])
def test_durations_are_read_in_months(text: str, months: float) -> None:
    from consensus_eval.judges.rules.medical_record.quantities import durations

    (d,) = durations(text)
    assert (d.base, d.value) == ("m", months)


WITH_LAST_YEAR = edit("最近半年口干、喝水多。", "最近半年口干、喝水多。去年体检还好。", CONV)


def test_half_a_year_written_as_a_year() -> None:
    rec = edit("口干、多饮6个月", "口干、多饮1年", edit("近6个月口干", "近1年口干"))
    js = judge(rec, WITH_LAST_YEAR)  # 1年 is said (去年), but not of the dry mouth
    assert [(d.type, d.evidence, d.reason) for d in js["accuracy"].deductions] == [
        ("time_error", "口干、多饮1年", "对话中口干、多饮的时间为半年，病历记为“1年”"),
        ("time_error", "近1年口干、多饮", "对话中口干、多饮的时间为半年，病历记为“1年”")]
    assert found(judge(edit("近6个月口干", "近半年口干"), WITH_LAST_YEAR)) == []
    # a calendar word elsewhere no longer hides it
    dated = WITH_LAST_YEAR + "\n医生：今年体检了吗？\n患者：还没。"
    assert found(judge(edit("近6个月口干", "近1年口干"), dated)) == ["time_error"]


def test_an_event_dated_by_the_calendar_is_not_judged_by_durations() -> None:
    conv = edit("最近半年口干、喝水多。", "2024年3月开始口干、喝水多，最近半年更明显。去年体检还好。", CONV)
    assert "time_error" not in found(judge(edit("近6个月口干", "近1年口干"), conv))


def test_an_approximate_duration_stands_for_the_years_up_to_the_next() -> None:
    conv = edit("我糖尿病3年了", "我糖尿病3年多了", CONV)
    assert found(judge(RECORD, conv)) == []


def test_an_answer_times_what_the_question_names() -> None:
    conv = edit("饭后吃。", "饭后吃；睡前打甘精胰岛素12个单位。\n医生：胰岛素打了多久？\n患者：2年了。", CONV)
    rec = edit("餐后口服。", "餐后口服；2年前加用甘精胰岛素12U 每晚1次 睡前皮下注射。")
    assert found(judge(rec, conv)) == []
    js = judge(rec.replace("2年前加用", "3年前加用"), conv)  # 3年 is said, of the diabetes
    assert [(d.type, d.reason) for d in js["accuracy"].deductions] == [
        ("time_error", "对话中胰岛素的时间为2年，病历记为“3年”")]


def test_a_relatives_duration_times_nothing_of_the_patient() -> None:
    conv = edit("我母亲有糖尿病。", "我母亲有糖尿病，口干半年了。", CONV)
    assert found(judge(RECORD, conv)) == []


# --------------------------------------------------------------------------- 6. order of events

ORDER_CONV = edit("我糖尿病3年了，最近半年口干、喝水多。", "我糖尿病5年了，最近半年口干、喝水多。", CONV)
ORDER_CONV = edit("3年前是怎么发现的？", "5年前是怎么发现的？", ORDER_CONV)
ORDER_CONV = edit("3年前体检空腹血糖7.9", "5年前体检空腹血糖7.9", ORDER_CONV)
ORDER_CONV = edit("饭后吃。", "饭后吃。2年前开始打甘精胰岛素，睡前10个单位。", ORDER_CONV)
ORDER_REC = edit("主诉：血糖升高3年", "主诉：血糖升高5年", edit("患者3年前体检", "患者5年前体检"))
ORDER_REC = edit("餐后口服。", "餐后口服。2年前加用甘精胰岛素10U 每晚1次 睡前皮下注射。", ORDER_REC)


def test_events_in_their_order_are_clean() -> None:
    assert found(judge(ORDER_REC, ORDER_CONV)) == []


def test_two_events_swapped_are_one_order_error() -> None:
    rec = ORDER_REC.replace("患者5年前体检", "患者2年前体检").replace("2年前加用甘精", "5年前加用甘精")
    js = judge(rec, ORDER_CONV)
    (d,) = js["accuracy"].deductions
    assert (d.type, d.category, d.points) == ("time_order_confused", "timeline", 3)
    assert d.evidence == "现病史：患者2年前体检发现空腹血糖7.9mmol/L"
    assert d.reason == "对话中糖尿病（5年）在胰岛素（2年）之前，病历记为糖尿病“2年”、胰岛素“5年”，先后颠倒"


def test_order_by_calendar_dates() -> None:
    conv = edit("我糖尿病3年了", "我2021年查出糖尿病", CONV)
    conv = edit("饭后吃。", "饭后吃。2023年开始打甘精胰岛素，睡前10个单位。", conv)
    rec = edit("餐后口服。", "餐后口服。2023年加用甘精胰岛素10U 每晚1次 睡前皮下注射。",
               edit("主诉：血糖升高3年", "主诉：血糖升高3年", edit("患者3年前体检", "患者2021年体检")))
    assert "time_order_confused" not in found(judge(rec, conv))
    swapped = rec.replace("患者2021年体检", "患者2023年体检").replace("2023年加用", "2021年加用")
    assert "time_order_confused" in found(judge(swapped, conv))
    # relative times in the record against dates in the conversation: the order still shows
    relative = rec.replace("患者2021年体检", "患者1年前体检").replace("2023年加用", "3年前加用")
    assert "time_order_confused" in found(judge(relative, conv))


def test_no_order_when_an_event_is_timed_on_one_side_only() -> None:
    rec = edit("近6个月口干、多饮。", "近6个月口干、多饮，2年前出现视物模糊。")
    assert "time_order_confused" not in found(judge(rec, CONV))


def test_a_relatives_other_disease_is_no_yes_to_the_diabetes_question() -> None:
    conv = edit("我母亲有糖尿病。", "没有，我妈妈有甲减。", CONV)
    rec = edit("家族史：母亲患糖尿病。", "家族史：母亲患甲状腺功能减退症；否认糖尿病家族史。")
    assert found(judge(rec, conv)) == []
    conv_yes = edit("我母亲有糖尿病。", "有，我妈妈有。", CONV)
    assert found(judge(rec, conv_yes)) == ["fh_diabetes_missing"]


@pytest.mark.parametrize("said, written", [("每周踢两次足球。", "每周踢足球2次。"), ("周末打篮球。", "周末打篮球。"),
                                           ("每天早上爬山。", "每日晨起爬山。")])
def test_ball_games_and_hiking_are_exercise(said: str, written: str) -> None:
    conv = CONV + f"\n医生：平时运动吗？\n患者：{said}"
    assert found(judge(edit("否认吸烟、饮酒。", f"否认吸烟、饮酒；{written}"), conv)) == []
    assert found(judge(RECORD, conv)) == ["personal_unrecorded"]
