"""The rules judge, second pass: correct records written in free wording draw no deduction
(gestational ages, approximate number words, combination drugs, doses never said, a visit that diagnoses,
timing words in a list of drugs, frequencies, abbreviations), and errors with a clear signature in the
conversation are found (a denied disease or finding affirmed, an affirmed one denied, the wrong side of
the body, a symptom nobody mentioned). Each error beside the clean wording that must stay silent."""

from __future__ import annotations

import pytest

from consensus_eval.domain.judgment import Judgment
from tests.test_rules_judge import RECORD, found, judge


def deductions(js: dict[str, Judgment]) -> list[tuple[str, str]]:
    return [(d.type, d.reason) for j in js.values() for d in j.deductions]


# --------------------------------------------------------------------------- a. gestational age

GDM_CONV = """医生：您好，怀孕多少周了？
患者：现在孕28周了，第一胎。
医生：什么时候发现血糖高的？
患者：孕24周加3天做的糖耐量，空腹5.6，1小时10.8，2小时9.1，医生说是妊娠期糖尿病，到现在4周了。
医生：怎么控制的？
患者：一直控制饮食，每天散步半小时，没用药。
医生：最近血糖怎么样？
患者：最近空腹5.2左右，餐后2小时6.5左右。
医生：有没有看东西模糊、手脚发麻？
患者：没有。
医生：以前有高血压吗？家里人有糖尿病吗？
患者：以前没有，我妈妈有糖尿病。
医生：抽烟喝酒吗？
患者：都不。"""

GDM_REC = """主诉：孕28周，发现血糖升高4周。
现病史：患者孕24+3周行OGTT：空腹血糖5.6mmol/L，1小时10.8mmol/L，2小时9.1mmol/L，诊断为“妊娠期糖尿病”。予饮食控制及运动，每日散步30分钟，未用药。目前空腹血糖5.2mmol/L左右，餐后2小时血糖6.5mmol/L左右。无视物模糊、肢体麻木。
既往史：否认高血压病史。
家族史：母亲患糖尿病。
个人史：否认吸烟、饮酒。"""


@pytest.mark.parametrize("written", ["孕24+3周", "孕24周+3天", "孕24周3天", "妊娠24周零3天", "孕二十四周"])
def test_a_gestational_age_is_no_duration(written: str) -> None:
    assert found(judge(GDM_REC.replace("孕24+3周", written), GDM_CONV)) == []


def test_the_time_since_the_diagnosis_is_still_judged() -> None:
    # the gestational age no longer hides what is a duration: 4周 written as 3周
    rec = GDM_REC.replace("发现血糖升高4周", "发现血糖升高3周")
    assert [t for t, _ in deductions(judge(rec, GDM_CONV))] == ["time_error"]


# --------------------------------------------------------------------------- b. approximate number words

RANGE_CONV = """医生：您好，糖尿病多久了？
患者：得糖尿病七八年了，十一二岁的时候我爸就查出糖尿病了。
医生：最近怎么样？
患者：最近十四五天老是口干，晚上起来三四次。
医生：测血糖了吗？
患者：空腹6点多，饭后两小时十点几。
医生：吃什么药？
患者：二甲双胍，一次一片500毫克，一天两三次，吃了五六年了。
医生：有高血压吗？
患者：没有。
医生：家里还有谁有糖尿病？
患者：就我爸。
医生：抽烟吗？
患者：不抽。"""

RANGE_REC = "\n".join([
    "主诉：血糖升高8年，口干半月。",
    "现病史：患者8年前诊断为2型糖尿病，5年前开始口服二甲双胍片500mg 每日2-3次 餐后口服。近2周口干，夜尿3-4次。"
    "自测空腹血糖6.5mmol/L，餐后2小时血糖10.5mmol/L。无视物模糊、肢体麻木。",
    "既往史：否认高血压病史。",
    "家族史：父亲患糖尿病。",
    "个人史：否认吸烟。"])


@pytest.mark.parametrize("old, new", [
    ("", ""),
    ("血糖升高8年", "血糖升高7-8年"), ("8年前诊断", "7年前诊断"), ("口干半月", "口干15天"), ("近2周", "近14天"),
    ("5年前开始", "5～6年前开始"), ("每日2-3次", "每日3次"), ("空腹血糖6.5", "空腹血糖6.8"),
])
def test_approximate_number_words_are_ranges(old: str, new: str) -> None:
    assert found(judge(RANGE_REC.replace(old, new), RANGE_CONV)) == []


@pytest.mark.parametrize("old, new, error", [
    ("8年前诊断", "10年前诊断", "time_error"), ("口干半月", "口干1个月", "time_error"),
    ("空腹血糖6.5", "空腹血糖7.5", "value_error"), ("每日2-3次", "每日1次", "usage_error"),
])
def test_values_outside_the_range_are_still_errors(old: str, new: str, error: str) -> None:
    assert [t for t, _ in deductions(judge(RANGE_REC.replace(old, new), RANGE_CONV))] == [error]


def test_a_range_of_years_is_no_glucose_value() -> None:
    # 血糖升高7-8年: 7 is the start of a range of years, not a glucose of 7
    assert found(judge(RANGE_REC.replace("血糖升高8年", "血糖升高7-8年"), RANGE_CONV)) == []
    conv = RANGE_CONV.replace("空腹6点多", "空腹6.2")
    assert found(judge(RANGE_REC.replace("6.5mmol", "6.2mmol").replace("血糖升高8年", "血糖升高7-8年"), conv)) == []


# --------------------------------------------------------------------------- c. combination drugs

COMBO_CONV = """医生：现在吃什么药？
患者：二甲双胍格列本脲片，一次一片，一天两次，早晚饭前吃。血压吃厄贝沙坦氢氯噻嗪，一天一片，早上吃。
医生：血糖控制怎么样？
患者：空腹7.2。
医生：糖尿病多久了？
患者：5年。
医生：有没有看东西模糊、手脚发麻？
患者：没有。
医生：家里有人有糖尿病吗？
患者：没有。
医生：抽烟吗？
患者：不抽。"""

COMBO_REC = "\n".join([
    "主诉：血糖升高5年。",
    "现病史：患者5年前诊断2型糖尿病，现口服二甲双胍格列本脲片(250mg/1.25mg) 1片 每日2次 早晚餐前，"
    "空腹血糖7.2mmol/L。无视物模糊、肢体麻木。",
    "既往史：高血压病史，口服厄贝沙坦氢氯噻嗪片(150mg/12.5mg) 1片 每日1次 晨起口服。",
    "家族史：否认糖尿病家族史。",
    "个人史：否认吸烟。"])


@pytest.mark.parametrize("name", ["厄贝沙坦氢氯噻嗪", "缬沙坦氨氯地平", "氯沙坦钾氢氯噻嗪", "奥美沙坦酯氢氯噻嗪"])
def test_a_combination_is_one_drug(name: str) -> None:
    rec = COMBO_REC.replace("厄贝沙坦氢氯噻嗪", name)
    assert found(judge(rec, COMBO_CONV.replace("厄贝沙坦氢氯噻嗪", name))) == []
    # its first part alone was read before: the combination's dose and frequency went "missing"


def test_a_combination_is_read_whole() -> None:
    from consensus_eval.judges.rules.medical_record.medication import find_drugs

    (h,) = find_drugs("口服厄贝沙坦氢氯噻嗪片")
    assert (h.surface, h.parts, h.cls) == ("厄贝沙坦氢氯噻嗪", ("厄贝沙坦", "氢氯噻嗪"), "ARB")
    names = [h.surface for h in find_drugs("德谷门冬双胰岛素、二甲双胍、阿卡波糖")]
    assert names == ["德谷门冬双胰岛素", "二甲双胍", "阿卡波糖"]


def test_errors_of_a_combination() -> None:
    # another combination of the class is a drug name error (its partner named), not a missing drug
    rec = COMBO_REC.replace("厄贝沙坦氢氯噻嗪", "缬沙坦氢氯噻嗪")
    assert deductions(judge(rec, COMBO_CONV)) == [
        ("drug_name_error", "对话中为厄贝沙坦氢氯噻嗪，病历记为缬沙坦氢氯噻嗪")]
    # its dose and frequency are the combination's
    rec = COMBO_REC.replace("1片 每日2次", "2片 每日2次")
    assert [t for t, _ in deductions(judge(rec, COMBO_CONV))] == ["dose_error"]
    rec = COMBO_REC.replace("1片 每日2次 早晚餐前", "1片 每日1次 早餐前")
    assert [t for t, _ in deductions(judge(rec, COMBO_CONV))] == ["usage_error"]


# --------------------------------------------------------------------------- d. a dose the conversation never gives

UNSAID_CONV = """医生：现在吃什么药？
患者：二甲双胍500毫克，一天两次，饭后。以前吃过一段阿卡波糖，胃胀就停了。
医生：还吃别的吗？
患者：还吃阿司匹林。
医生：糖尿病多久了？
患者：3年。
医生：血糖多少？
患者：空腹7.5。
医生：有没有手脚麻、看东西模糊？
患者：没有。
医生：家里人有糖尿病吗？
患者：没有。
医生：抽烟吗？
患者：不抽。"""

UNSAID_REC = "\n".join([
    "主诉：血糖升高3年。",
    "现病史：患者3年前诊断2型糖尿病，曾服阿卡波糖，因腹胀停药。现口服二甲双胍片500mg 每日2次 餐后口服，另服阿司匹林。"
    "空腹血糖7.5mmol/L。无视物模糊、肢体麻木。",
    "既往史：否认高血压病史。",
    "家族史：否认糖尿病家族史。",
    "个人史：否认吸烟。"])


@pytest.mark.parametrize("old, new", [
    ("", ""), ("曾服阿卡波糖，因腹胀停药", "服阿卡波糖后腹胀，改为二甲双胍"), ("另服阿司匹林", "另服阿司匹林 口服"),
])
def test_a_dose_the_conversation_never_gives_is_not_unclear(old: str, new: str) -> None:
    assert found(judge(UNSAID_REC.replace(old, new), UNSAID_CONV)) == []


def test_a_dose_the_conversation_gives_is_required() -> None:
    conv = UNSAID_CONV.replace("还吃阿司匹林。", "还吃阿司匹林100毫克和氯吡格雷75毫克，每天各一次。")
    rec = UNSAID_REC.replace("另服阿司匹林", "另服阿司匹林 口服；氯吡格雷75mg 每日1次 口服")
    assert [(d.type, d.evidence) for j in judge(rec, conv).values() for d in j.deductions] == [
        ("dose_unclear", "阿司匹林 口服"), ("usage_unclear", "阿司匹林 口服")]
    # a dose said without its unit is a dose said (二甲双胍500，一天两次)
    conv = UNSAID_CONV.replace("二甲双胍500毫克", "二甲双胍500")
    rec = UNSAID_REC.replace("二甲双胍片500mg", "二甲双胍片")
    assert found(judge(rec, conv)) == ["dose_unclear"]


# --------------------------------------------------------------------------- e. present illness parts

NEW_CONV = """医生：您好，哪里不舒服？
患者：这一个月老是口干，喝水多，人也瘦了4斤。
医生：以前查过血糖吗？
患者：没查过，今天第一次查。
医生：今天空腹血糖11.2，糖化9.5%，可以诊断糖尿病。以前有高血压吗？
患者：没有。
医生：家里人有糖尿病吗？
患者：我妈有。
医生：抽烟喝酒吗？
患者：不抽不喝。"""

NEW_REC = "\n".join([
    "主诉：口干、多饮1个月。",
    "现病史：患者1个月来口干、多饮，体重下降2kg。3月12日查空腹血糖11.2mmol/L，HbA1c 9.5%，诊断为糖尿病。",
    "既往史：否认高血压病史。",
    "家族史：母亲患糖尿病。",
    "个人史：否认吸烟、饮酒。"])


@pytest.mark.parametrize("old, new", [
    ("", ""), ("患者1个月来口干", "患者口干"), ("3月12日查", "本次查"), ("3月12日查", "目前查"),
])
def test_a_patient_diagnosed_at_this_visit(old: str, new: str) -> None:
    # nothing treated yet: no treatment to record; the recent course in other words; complications never
    # spoken of: nothing to record either
    assert found(judge(NEW_REC.replace(old, new), NEW_CONV)) == []


def test_present_illness_parts_the_conversation_gives_are_required() -> None:
    conv = NEW_CONV.replace("没查过，今天第一次查。", "半年前查过，空腹7.8，一直控制饮食，没吃药。")
    assert "pi_treatment_missing" in found(judge(NEW_REC, conv))
    assert found(judge(NEW_REC.replace("诊断为糖尿病。", "诊断为糖尿病。半年前起饮食控制。"), conv)) == []
    conv = NEW_CONV.replace("以前有高血压吗？", "有没有手脚麻、看东西模糊？\n患者：没有。\n医生：以前有高血压吗？")
    assert found(judge(NEW_REC, conv)) == ["pi_complications_missing"]
    rec = NEW_REC.replace("诊断为糖尿病。", "诊断为糖尿病。无肢体麻木、视物模糊。")
    assert found(judge(rec, conv)) == []
    # no recent words at all, while the conversation speaks of this month
    rec = NEW_REC.replace("患者1个月来口干、多饮，体重下降2kg。3月12日查", "患者口干、多饮，体重下降2kg。查")
    assert found(judge(rec, NEW_CONV)) == ["pi_recent_missing"]


# --------------------------------------------------------------------------- f. a timing belongs to its drug

LIST_CONV = """医生：现在吃什么药？
患者：二甲双胍一次500毫克，一天两次，早晚饭后吃。血压吃氨氯地平，一次5毫克，早上吃一片；还吃阿托伐他汀20毫克，晚上睡前吃。
医生：糖尿病多久了？
患者：5年。
医生：空腹多少？
患者：空腹7.2。
医生：有没有手脚麻？
患者：没有。
医生：家里人有糖尿病吗？
患者：没有。
医生：抽烟吗？
患者：不抽。"""

LIST = "二甲双胍片500mg bid 早晚餐后、氨氯地平片5mg qd 晨服、阿托伐他汀钙片20mg qn 睡前"
LIST_REC = "\n".join([
    "主诉：血糖升高5年。",
    f"现病史：患者5年前诊断2型糖尿病，现口服{LIST}。空腹血糖7.2mmol/L。无肢体麻木。",
    "既往史：高血压病史。",
    "家族史：否认糖尿病家族史。",
    "个人史：否认吸烟。"])


@pytest.mark.parametrize("written", [
    LIST,
    "氨氯地平片5mg 每日1次 晨服、阿托伐他汀钙片20mg 每日1次 睡前；二甲双胍片500mg bid 早晚餐后",
    "氨氯地平片5mg qd（早晨）、阿托伐他汀钙片20mg qn（睡前）、二甲双胍片500mg bid（早晚餐后）",
    "二甲双胍片500mg 每日2次 早晚餐后，晨服氨氯地平片5mg 每日1次，睡前阿托伐他汀钙片20mg 每日1次",
    "二甲双胍片500mg bid 早晚餐后 氨氯地平片5mg qd 早上 阿托伐他汀钙片20mg qn 睡前",
])
def test_a_timing_belongs_to_the_drug_it_follows(written: str) -> None:
    assert found(judge(LIST_REC.replace(LIST, written), LIST_CONV)) == []


@pytest.mark.parametrize("said", [
    "早上吃氨氯地平5毫克，二甲双胍500毫克一天两次早晚饭后，阿托伐他汀20毫克睡前。",
    "氨氯地平5毫克早上吃 二甲双胍500毫克一天两次早晚饭后吃 阿托伐他汀20毫克睡前吃",
])
def test_a_timing_belongs_to_its_drug_in_the_conversation(said: str) -> None:
    conv = LIST_CONV.replace(LIST_CONV.split("\n")[1][3:], said)
    assert found(judge(LIST_REC, conv)) == []


def test_a_timing_put_on_the_wrong_drug_is_still_found() -> None:
    rec = LIST_REC.replace("氨氯地平片5mg qd 晨服", "氨氯地平片5mg qd 睡前")
    assert deductions(judge(rec, LIST_CONV)) == [("usage_error", "对话中氨氯地平于早上使用，病历记为睡前")]


# --------------------------------------------------------------------------- g. a frequency is no time

RATE_CONV = """医生：糖尿病多久了？
患者：5年了，5年前体检查出来的，一直吃二甲双胍，每天吃两次。上周又加了阿卡波糖，每天三次，每次一片。
医生：胰岛素呢？
患者：上个月开始打的甘精，每天打一针，每次10个单位，睡前打。
医生：最近血糖怎么样？
患者：近2周空腹7点多。
医生：有没有手脚麻？
患者：没有。
医生：家里人有糖尿病吗？
患者：没有。
医生：抽烟吗？
患者：不抽。"""

RATE_REC = "\n".join([
    "主诉：血糖升高5年。",
    "现病史：患者5年前体检诊断2型糖尿病，予二甲双胍片500mg 一天吃两次 餐后口服。"
    "1周前加用阿卡波糖片50mg 每日3次 随餐嚼服。目前甘精胰岛素10U 一天打一针 睡前皮下注射。"
    "近2周空腹血糖7点多。无肢体麻木。",
    "既往史：否认高血压病史。",
    "家族史：否认糖尿病家族史。",
    "个人史：否认吸烟。"])


def test_a_frequency_is_no_time_of_events() -> None:
    # 一天吃两次 / 一天打一针 were read as "one day ago": two time errors and an order error (二甲双胍 after
    # 阿卡波糖) on a correct record
    assert found(judge(RATE_REC, RATE_CONV)) == []


@pytest.mark.parametrize("text, read", [
    ("一天吃一次", []), ("一天打一针", []), ("一日三餐", []), ("一天两三次", []), ("三天打一次", []),
    ("一周打一针", []), ("3个月查一次糖化", []), ("每3个月复查", []), ("半年查一次眼底", []),
    ("近3个月2次低血糖", ["3个月"]), ("3年前打一针", ["3年"]), ("吃了一年,一天一次", ["一年"]), ("2年了", ["2年"]),
])
def test_rates_are_not_durations(text: str, read: list[str]) -> None:
    from consensus_eval.judges.rules.medical_record.quantities import durations

    assert [d.text for d in durations(text)] == read


# --------------------------------------------------------------------------- h. abbreviations of frequency


@pytest.mark.parametrize("written", [
    "二甲双胍片 500mg bid", "二甲双胍缓释片 500mg bid 餐后", "二甲双胍(500mg/片) 1片 bid 餐后", "二甲双胍 0.5g×1片 bid",
    "二甲双胍 500mg 1片 每日2次", "盐酸二甲双胍片 0.5g BID", "二甲双胍肠溶胶囊 0.5g bid", "二甲双胍片 0.5g b.i.d.",
    "二甲双胍 0.5g bid po", "二甲双胍 0.5g b.i.d. p.o.",
])
def test_an_abbreviated_frequency_with_a_dosage_form_is_complete_usage(written: str) -> None:
    assert found(judge(RECORD.replace("二甲双胍片500mg 每日2次 餐后口服", written))) == []


def test_an_abbreviated_frequency_without_form_or_route_lacks_the_route() -> None:
    # the rubric asks 药名 + 剂量 + 频率 + 方式: "500mg bid" gives no route (nor a form that implies one)
    js = judge(RECORD.replace("二甲双胍片500mg 每日2次 餐后口服", "二甲双胍 500mg bid"))
    assert deductions(js) == [("usage_unclear", "“二甲双胍”未写明给药途径")]
    # the frequency of an abbreviation is read (q.d. is once a day: the conversation says twice)
    js = judge(RECORD.replace("二甲双胍片500mg 每日2次 餐后口服", "二甲双胍片 500mg q.d."))
    assert [t for t, _ in deductions(js)] == ["usage_error"]


# --------------------------------------------------------------------------- part 2: against the conversation

SAID_CONV = """医生：今天来看什么？
患者：糖尿病4年了，这两个月嘴里老是干，喝水也多，人也没什么劲。
医生：以前有什么病？高血压、血脂、心脏呢？
患者：高血压没有，血脂也不高，心脏挺好的。
医生：有没有尿里泡沫多、脚肿？
患者：都没有。
医生：手脚麻吗？
患者：两只手的指尖发麻，脚倒没事。
医生：还有哪里不好？
患者：右边膝盖走路疼，快半年了。
医生：平时吃什么药？
患者：二甲双胍，一次500毫克，一天两次，饭后吃。
医生：抽烟喝酒吗？
患者：不抽，酒偶尔喝一点。
医生：家里人有糖尿病吗？
患者：没有。"""

SAID_REC = "\n".join([
    "主诉：血糖升高4年，口干、多饮、乏力2个月。",
    "现病史：患者4年前诊断2型糖尿病，口服二甲双胍片500mg 每日2次 餐后口服。近2个月口干、多饮、乏力，"
    "双手指尖麻木，无泡沫尿，无双下肢水肿。右膝关节行走后疼痛半年。",
    "既往史：否认高血压、高脂血症、冠心病病史。",
    "家族史：否认糖尿病家族史。",
    "个人史：不吸烟，偶有饮酒。"])


def test_the_record_as_the_conversation_says_it_is_clean() -> None:
    assert found(judge(SAID_REC, SAID_CONV)) == []


@pytest.mark.parametrize("old, new, error", [
    # a comorbidity the patient denies, written as present (denied in other words: 血脂也不高): diagnosis_error
    ("否认高血压、高脂血症、冠心病病史。", "有高脂血症病史；否认高血压、冠心病病史。", "diagnosis_error"),
    ("否认高血压、高脂血症、冠心病病史。", "否认高血压、高脂血症病史，合并冠心病。", "diagnosis_error"),
    # a finding denied to a doctor's question (都没有), written as present: fact_error
    ("无泡沫尿，", "伴泡沫尿，", "fact_error"),
    # a symptom the patient has, written as absent
    ("口干、多饮、乏力，", "口干、多饮，无乏力，", "fact_error"),
    # a habit denied
    ("不吸烟，", "有吸烟史，", "fact_error"),
    # numbness at the hands written at the feet
    ("双手指尖麻木", "双足麻木", "fact_error"),
    # the other knee
    ("右膝关节", "左膝关节", "fact_error"),
    # a symptom nobody mentioned
    ("近2个月口干、多饮、乏力，", "近2个月口干、多饮、乏力，伴皮肤瘙痒，", "fact_error"),
])
def test_the_record_against_the_conversation(old: str, new: str, error: str) -> None:
    assert [t for t, _ in deductions(judge(SAID_REC.replace(old, new), SAID_CONV))] == [error]


def test_what_the_conversation_does_not_settle_stays_silent() -> None:
    # a course (以前有，现在没有): neither way
    conv = SAID_CONV.replace("两只手的指尖发麻，脚倒没事。", "以前手麻，现在不麻了。")
    for rec in (SAID_REC.replace("双手指尖麻木，", "无肢体麻木，"), SAID_REC):
        assert "fact_error" not in found(judge(rec, conv))
    # 血压正常 on an antihypertensive is hypertension controlled, not denied
    conv = SAID_CONV.replace("高血压没有，血脂也不高", "血压正常，吃着氨氯地平，一天一片5毫克，血脂也不高")
    rec = SAID_REC.replace("否认高血压、高脂血症、冠心病病史。",
                           "高血压病史，口服氨氯地平片5mg 每日1次；否认高脂血症、冠心病病史。")
    assert found(judge(rec, conv)) == []
    # a symptom the conversation words otherwise (没什么劲 for 乏力, 嘴里老是干 for 口干) is no hallucination;
    # a conversation that never speaks of symptoms says nothing of their absence
    bare = "医生：今天来复查？\n患者：对，拿药。\n医生：血糖多少？\n患者：空腹7.2。"
    rec = "主诉：血糖升高4年。\n现病史：4年前诊断2型糖尿病，近2个月乏力。空腹血糖7.2mmol/L。"
    assert "fact_error" not in found(judge(rec, bare))
