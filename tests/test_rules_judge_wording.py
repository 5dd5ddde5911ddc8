"""The rules judge, second pass (issue 23 part 7): correct records written in free wording draw no deduction
(gestational ages, approximate number words, combination drugs, doses never said, a visit that diagnoses,
timing words in a list of drugs, frequencies, abbreviations), and errors with a clear signature in the
conversation are found (a denied disease or finding affirmed, an affirmed one denied, the wrong side of
the body, a symptom nobody mentioned). Each error beside the clean wording that must stay silent."""

from __future__ import annotations

import pytest

from tests.test_rules_judge import found, judge


def deductions(js: dict) -> list[tuple[str, str]]:
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
def test_a_gestational_age_is_no_duration(written):
    assert found(judge(GDM_REC.replace("孕24+3周", written), GDM_CONV)) == []


def test_the_time_since_the_diagnosis_is_still_judged():
    # the gestational age no longer hides what is a duration: 4周 written as 3周
    rec = GDM_REC.replace("发现血糖升高4周", "发现血糖升高3周")
    assert [t for t, _ in deductions(judge(rec, GDM_CONV))] == ["time_error"]
