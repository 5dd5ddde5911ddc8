"""The built-in base records against their conversations (docs/calibration.md): each base lists what its record
states and where the conversation says it (``facts``); every quote is found where it says, and every number
of the record lies inside a listed fact (no unlisted fact). The bases vary in shape: authors' styles, drug
formats, informants, diabetes types, sections."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from consensus_eval.domain.calibration.generator import base_cases
from consensus_eval.domain.calibration.operators import BaseCase, Fact

#: a number of the record: digits not glued to a Latin letter before them (the 1 of HbA1c is a name)
_NUMBER = re.compile(r"(?<![A-Za-z\d.])\d+(?:\.\d+)?")
#: drug names the bases write (generic names); each must lie inside a listed fact
_DRUGS = re.compile(r"二甲双胍|格列美脲|格列齐特|格列喹酮|阿卡波糖|西格列汀|利格列汀|达格列净|"
                    r"恩格列净|吡格列酮|瑞格列奈|司美格鲁肽|利拉鲁肽|[门冬赖脯谷赖甘精德谷地特]{2}胰岛素|"
                    r"精蛋白生物合成人胰岛素|氨氯地平|硝苯地平|缬沙坦|厄贝沙坦|氯沙坦|贝那普利|美托洛尔|"
                    r"阿托伐他汀|瑞舒伐他汀|非诺贝特|阿司匹林|氯吡格雷|甲钴胺|左甲状腺素|噻托溴铵")


def uncovered(b: BaseCase) -> list[str]:
    """What of ``b``'s record no fact covers, and which quotes are not where they say: ``kind: text``."""
    out = [f"record quote not in the record: {f.record!r}" for f in b.facts if f.record not in b.record]
    out += [f"conversation quote not in the conversation: {f.conversation!r}" for f in b.facts
            if f.conversation not in b.conversation]
    covered = [False] * len(b.record)
    for f in b.facts:
        for m in re.finditer(re.escape(f.record), b.record):
            covered[m.start():m.end()] = [True] * (m.end() - m.start())
    for pattern, kind in ((_NUMBER, "number"), (_DRUGS, "drug"), (re.compile(r"“[^”]+”"), "diagnosis")):
        for m in pattern.finditer(b.record):
            if not all(covered[m.start():m.end()]):
                out.append(f"{kind} outside every fact: {b.record[max(0, m.start() - 10):m.end() + 4]!r}")
    return out


@pytest.mark.parametrize("base", base_cases(), ids=lambda b: b.id)
def test_every_fact_of_the_record_is_listed_with_its_source(base: BaseCase) -> None:
    assert len(base.facts) >= 8, base.id
    assert uncovered(base) == []
    for o in base.omit:
        assert o.record in base.record and o.conversation in base.conversation, (base.id, o)


def test_the_check_catches_an_unlisted_fact_and_a_wrong_quote() -> None:
    b = base_cases()[0]
    record = b.record.replace("今日血压132/82mmHg。", "今日血压132/82mmHg，心率76次/分。")
    changed = b.model_copy(update={"record": record})
    assert uncovered(changed) == ["number outside every fact: '/82mmHg，心率76次/分。'"]
    wrong = b.model_copy(update={"facts": [*b.facts, Fact(record="空腹血糖7.9mmol/L", conversation="空腹7.9左右")]})
    assert uncovered(wrong) == ["conversation quote not in the conversation: '空腹7.9左右'"]
    dropped = b.model_copy(update={"facts": [f for f in b.facts if "格列美脲" not in f.record]})
    assert "drug outside every fact: '餐后口服。1年前加用格列美脲片2mg'" in uncovered(dropped)


def test_the_bases_vary_in_shape() -> None:
    bases = base_cases()
    assert len(bases) >= 40 and len({b.id for b in bases}) == len(bases)

    def count(pred: Callable[..., bool]) -> int:
        return sum(1 for b in bases if pred(b))

    # diabetes types, informants, patients with many drugs
    assert count(lambda b: "1型糖尿病" in b.record) >= 4
    assert count(lambda b: "“2型糖尿病" in b.record or "患“2型糖尿病" in b.record) >= 25
    assert count(lambda b: "妊娠期糖尿病" in b.record) >= 3
    assert count(lambda b: "\n家属：" in b.conversation) >= 5
    assert count(lambda b: len(set(_DRUGS.findall(b.record))) >= 5) >= 3
    # drug formats: Latin frequencies, grams, tablet counts, insulin units written U / IU, brands said in the talk
    assert count(lambda b: re.search(r"\d(?:mg|g|IU|U) (?:qd|bid|tid|qn)\b", b.record) is not None) >= 4
    assert count(lambda b: re.search(r"\d\.?\d*g ", b.record) is not None) >= 5
    assert count(lambda b: "1片" in b.record or "2片" in b.record) >= 2
    assert count(lambda b: "IU" in b.record) >= 1 and count(lambda b: re.search(r"\dU ", b.record) is not None) >= 10
    brands = ("格华止", "拜糖平", "亚莫利", "诺和锐", "来得时", "诺和灵", "艾倍得", "诺和达", "捷诺维", "安达唐",
              "拜阿司匹灵")
    assert count(lambda b: any(x in b.conversation for x in brands)) >= 6
    # calendar dates, sections beyond the rubric's five, records written without 患者
    assert count(lambda b: re.search(r"\d{4}年\d{1,2}月", b.record) is not None) >= 5
    for heading in ("体格检查", "辅助检查", "诊断", "处理"):
        assert count(lambda b, h=heading: f"\n{h}：" in b.record) >= 1, heading
    assert count(lambda b: "\n处理：" in b.record) >= 5
    assert count(lambda b: not b.record.split("\n")[1].startswith("现病史：患者")) >= 5
    # body sites an operator can get wrong
    assert count(lambda b: re.search(r"[左右](?:足|眼|髋|下肢|侧)", b.record) is not None) >= 5
    assert count(lambda b: "双手" in b.record) >= 1
