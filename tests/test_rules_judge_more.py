"""The rules judge on errors written the way a scribe makes them (issue 23, part 7): an insulin put for
another insulin, a value taken from another point of the conversation, units beyond glucose, a timing
changed, a duration changed, two events put in the wrong order. Each on cases written here, with the
clean wording beside it that must stay silent."""

from __future__ import annotations

import pytest

from tests.test_rules_judge import CONV, edit, found, judge

# --------------------------------------------------------------------------- 1. insulin for insulin

INSULIN_CONV = edit("饭后吃。", "饭后吃；晚上睡前还打甘精胰岛素，12个单位。\n"
                                "医生：胰岛素打了多久？\n患者：2年了。", CONV)
INSULIN_REC = edit("餐后口服。", "餐后口服；2年前加用甘精胰岛素12U 每晚1次 睡前皮下注射。")


def test_the_insulin_the_conversation_names_is_clean():
    assert found(judge(INSULIN_REC, INSULIN_CONV)) == []
    # a short name or a brand in the conversation names the same insulin
    for said in ("甘精", "来得时"):
        assert found(judge(INSULIN_REC, INSULIN_CONV.replace("甘精胰岛素", said))) == []


@pytest.mark.parametrize("written", ["地特胰岛素", "德谷胰岛素", "门冬胰岛素", "精蛋白生物合成人胰岛素"])
def test_another_insulin_is_a_drug_name_error(written):
    js = judge(INSULIN_REC.replace("甘精胰岛素", written), INSULIN_CONV)
    (d,) = js["accuracy"].deductions
    assert (d.type, d.points, d.evidence) == ("drug_name_error", 3, written)
    assert d.reason == f"对话中为甘精胰岛素，病历记为{written}"
    assert found(js) == ["drug_name_error"]  # the conversation's insulin is not also counted missing


def test_another_insulin_beside_bare_insulin_in_the_record():
    rec = edit("2年前加用甘精胰岛素12U", "2年前加用胰岛素，地特胰岛素12U", INSULIN_REC)
    assert found(judge(rec, INSULIN_CONV)) == ["drug_name_error"]


def test_a_specific_insulin_is_excused_when_the_conversation_names_none():
    conv = INSULIN_CONV.replace("甘精胰岛素", "胰岛素")
    for written in ("甘精胰岛素", "地特胰岛素"):
        assert "drug_name_error" not in found(judge(INSULIN_REC.replace("甘精胰岛素", written), conv))


def test_human_insulins_stand_for_one_another():
    conv = edit("饭后吃。", "饭后吃；还打诺和灵30R，早晚饭前各12个单位。", CONV)
    rec = edit("餐后口服。", "餐后口服；精蛋白生物合成人胰岛素注射液(30R)12U 每日2次 早晚餐前皮下注射。")
    assert found(judge(rec, conv)) == []


def test_two_insulins_one_swapped():
    conv = edit("饭后吃。", "饭后吃；门冬胰岛素三餐前各打6个单位，睡前打甘精胰岛素14个单位。", CONV)
    rec = edit("餐后口服。", "餐后口服；门冬胰岛素6U 每日3次 三餐前皮下注射，甘精胰岛素14U 每晚1次 睡前皮下注射。")
    assert found(judge(rec, conv)) == []
    bad = judge(rec.replace("门冬胰岛素", "赖脯胰岛素"), conv)
    assert [(d.type, d.reason) for d in bad["accuracy"].deductions] == [
        ("drug_name_error", "对话中为门冬胰岛素，病历记为赖脯胰岛素")]
