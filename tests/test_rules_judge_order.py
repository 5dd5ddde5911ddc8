"""The rules judge's order of events (timeline.py) and durations (quantities.py) against free wording of a
correct record: a rate is no time of events (一天一包), a relative's disease is not the
patient's event (我妈冠心病), a habit's duration is the habit's (抽了二十年). Each with a real order error that
is still found."""

from __future__ import annotations

import pytest

from consensus_eval.judges.rules.medical_record.quantities import durations
from tests.test_rules_judge import found, judge

CONV = """医生：您好，哪里不舒服？
患者：糖尿病7年，一直吃二甲双胍，500毫克一天两次，饭后吃。
医生：最近怎么样？
患者：最近半年口干、喝水多。
医生：今天空腹9.6，糖化8.1%。有没有高血压？
患者：没有。
医生：家里人有什么病？
患者：我妈冠心病，{smoke}
医生：喝酒吗？
患者：不喝酒。"""
REC = """主诉：血糖升高7年，口干、多饮6个月。
现病史：患者7年前诊断为“2型糖尿病”，予二甲双胍片500mg 每日2次 餐后口服。近6个月口干、多饮。\
今日查空腹血糖9.6mmol/L，HbA1c 8.1%。
既往史：否认高血压病史。
家族史：母亲患冠心病。
个人史：{smoke}否认饮酒。"""
SMOKED = "以前一天一包抽了二十年，现在戒了。"
WRITTEN = "吸烟20年，每日1包，已戒烟，"


@pytest.mark.parametrize("text", ["一天一包", "以前一天一包", "一天一支", "一天两片", "一日三次", "每天半包",
                                  "一天半包", "一天二两", "一天一瓶啤酒", "之前一天一支烟"])
def test_a_rate_is_no_duration(text: str) -> None:
    assert durations(text) == []


@pytest.mark.parametrize("text, read", [("近3个月2次低血糖", ["3个月"]), ("一天半了", ["一天半"]),
                                        ("一年半前", ["一年半"])])
def test_durations_beside_counts_are_still_read(text: str, read: list[str]) -> None:
    assert [d.text for d in durations(text)] == read


def test_a_correct_record_with_a_relatives_disease_and_a_smoking_rate() -> None:
    # the clinician's report: 一天 (a rate) in a clause after 我妈冠心病 timed 冠心病 "one day ago", and the
    # record's 吸烟20年 timed it 20 years ago: a false time_order_confused against diabetes 7年
    conv = CONV.format(smoke=SMOKED)
    assert found(judge(REC.format(smoke=WRITTEN), conv)) == []
    # the same record with the relative's disease in the smoking sentence
    rec = REC.format(smoke="吸烟20年，每日1包，已戒烟，母亲冠心病；")
    assert "time_order_confused" not in found(judge(rec, conv))


def test_a_relatives_disease_is_never_timed_for_the_patient() -> None:
    conv = CONV.format(smoke="我自己冠心病3年了，不抽烟。").replace("我妈冠心病，", "我爸高血压，")
    rec = REC.format(smoke="否认吸烟，").replace("否认高血压病史。", "冠心病3年。") \
        .replace("母亲患冠心病", "父亲患高血压")
    assert found(judge(rec, conv)) == []
    # the patient's own events in the wrong order are still found
    swapped = rec.replace("冠心病3年。", "冠心病10年。").replace("患者7年前诊断", "患者2年前诊断")
    assert "time_order_confused" in found(judge(swapped, conv))


def test_a_habits_duration_is_the_habits() -> None:
    conv = CONV.format(smoke="").replace("患者：我妈冠心病，\n", "患者：我妈冠心病。\n") \
        .replace("医生：喝酒吗？\n患者：不喝酒。", "医生：您自己有冠心病吗？\n患者：有，冠心病3年了，抽了二十年，"
                                           "一天一包。\n医生：喝酒吗？\n患者：不喝酒。")
    rec = REC.format(smoke=WRITTEN).replace("否认高血压病史。", "冠心病3年，否认高血压病史。")
    assert found(judge(rec, conv)) == []
    # the record writing the habit's duration for the disease: the disease's time is still judged
    wrong = rec.replace("冠心病3年，", "冠心病20年，")
    assert "time_error" in found(judge(wrong, conv)) or "time_order_confused" in found(judge(wrong, conv))


def test_a_time_after_a_relatives_disease_is_not_the_patients() -> None:
    # 二十年了 after 我爸冠心病 is the father's: the patient's own 冠心病 stays timed once (3 years), so an order
    # error of the patient's events is found
    conv = CONV.format(smoke="不抽烟。").replace("我妈冠心病，", "我爸冠心病，二十年了。") \
        .replace("患者：没有。", "患者：没有。我自己冠心病3年了。")
    rec = REC.format(smoke="否认吸烟，").replace("否认高血压病史。", "冠心病3年，否认高血压病史。") \
        .replace("母亲患冠心病", "父亲患冠心病")
    assert "time_order_confused" not in found(judge(rec, conv))
    swapped = rec.replace("冠心病3年，", "冠心病10年，").replace("患者7年前诊断", "患者2年前诊断")
    assert "time_order_confused" in found(judge(swapped, conv))
