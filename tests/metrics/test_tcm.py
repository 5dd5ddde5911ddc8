"""Tests of the TCM metrics (seed 001) and of `consensus-eval metrics tcm`.

Every expected value is computed by hand in the comment above it. Values marked "seed: same" were
also checked against the seed's own code (run from a scratch copy outside the repository); values
marked "seed: X" show where, and why, this implementation deliberately differs.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from consensus_eval._errors import InputError
from consensus_eval.metrics.commands import metrics_app
from consensus_eval.metrics.tcm import (
    calculate_clinical_relevance,
    calculate_comprehensive_score,
    calculate_diagnosis_relevance,
    calculate_dosage_rationality,
    calculate_explanation_rationality,
    calculate_face_description_completeness,
    calculate_face_syndrome_correlation,
    calculate_feature_recognition_accuracy,
    calculate_fusion_gain,
    calculate_human_ai_agreement,
    calculate_inquiry_completeness,
    calculate_inquiry_efficiency,
    calculate_modal_consistency,
    calculate_prescription_accuracy,
    calculate_prescription_syndrome_match,
    calculate_pulse_classification_accuracy,
    calculate_pulse_feature_accuracy,
    calculate_pulse_interpretation_completeness,
    calculate_pulse_syndrome_correlation,
    calculate_sound_classification_accuracy,
    calculate_sound_description_completeness,
    calculate_sound_feature_recognition_detail,
    calculate_sound_syndrome_correlation,
    calculate_symptom_classification_accuracy,
    calculate_symptom_recognition_rate,
    calculate_syndrome_differentiation_accuracy,
    calculate_tcm_professionalism_score,
    calculate_tongue_description_completeness,
    calculate_tongue_feature_recognition_accuracy,
    calculate_tongue_syndrome_correlation,
    calculate_voice_analysis_accuracy,
    normalize_dosages,
    normalize_label,
)

approx = pytest.approx
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "tcm"


# --- normalisation ----------------------------------------------------------------------------------


def test_normalize_label_nfkc_and_strip() -> None:
    # NFKC folds full-width parentheses and the ideographic space; strip removes the edges.
    assert normalize_label("　枳实（炒） ") == "枳实(炒)"
    assert normalize_label("ＡＢ１") == "AB1"
    assert normalize_label("黄芪") == "黄芪"


# --- 1. face ------------------------------------------------------------------------------------------


class TestFace:
    def test_feature_accuracy(self) -> None:
        # face_color: case 1 淡白=淡白, case 2 萎黄=萎黄 -> 2/2 = 1.0
        # face_shape: case 1 消瘦!=正常, case 2 missing in pred -> 0/2 = 0.0
        # overall: 2 correct / 4 scored = 0.5          (seed: same)
        preds = [{"face_color": "淡白", "face_shape": "消瘦"}, {"face_color": "萎黄"}]
        refs = [{"face_color": "淡白", "face_shape": "正常"}, {"face_color": "萎黄", "face_shape": "消瘦"}]
        assert calculate_feature_recognition_accuracy(preds, refs) == {
            "face_color": 1.0, "face_shape": 0.0, "overall": 0.5}

    def test_feature_accuracy_none_and_normalisation(self) -> None:
        # face_color "淡白　" (ideographic space) == "淡白" -> correct; face_shape: ref None -> not scored;
        # luster: pred None -> wrong. overall 1/2 = 0.5
        preds = [{"face_color": "淡白　", "face_shape": "消瘦", "luster": None}]
        refs = [{"face_color": "淡白", "face_shape": None, "luster": "少华"}]
        assert calculate_feature_recognition_accuracy(preds, refs) == {
            "face_color": 1.0, "luster": 0.0, "overall": 0.5}

    def test_feature_accuracy_empty_and_mismatch(self) -> None:
        assert calculate_feature_recognition_accuracy([], []) == {"overall": 0.0}
        with pytest.raises(ValueError, match=r"predictions has 2 items, references has 1 item\b"):
            calculate_feature_recognition_accuracy([{}, {}], [{}])

    def test_description_completeness(self) -> None:
        # default aspects 面色, 形体, 神态, 表情:
        # "面色萎黄，形体消瘦" covers 2/4 = 0.5; "神态自如" covers 1/4 = 0.25; mean 0.375  (seed: same)
        texts = ["面色萎黄，形体消瘦", "神态自如"]
        assert calculate_face_description_completeness(texts, ["面色", "形体", "神态", "表情"]) == 0.375
        assert calculate_face_description_completeness(texts) == 0.375

    def test_description_completeness_edges(self) -> None:
        # None description covers nothing: (1/1 + 0)/2 = 0.5
        assert calculate_face_description_completeness(["面色红", None], ["面色"]) == 0.5
        # case-insensitive on both sides: "Pale" found in "pale face" (seed: 0, it lower-cased only the text)
        assert calculate_face_description_completeness(["pale face"], ["Pale"]) == 1.0
        # duplicate aspects count once: 1/1
        assert calculate_face_description_completeness(["面色红"], ["面色", "面色 "]) == 1.0
        assert calculate_face_description_completeness([], ["面色"]) == 0.0
        with pytest.raises(ValueError, match="required_aspects is empty"):
            calculate_face_description_completeness(["面色红"], [])  # seed: ZeroDivisionError

    def test_syndrome_correlation_jaccard(self) -> None:
        # {脾虚, 湿盛} vs {脾虚, 气虚, 湿盛}: 2 / 3     (seed: same)
        assert calculate_face_syndrome_correlation(["脾虚", "湿盛"], ["脾虚", "气虚", "湿盛"]) == approx(2 / 3)
        assert calculate_face_syndrome_correlation([], ["脾虚"]) == 0.0
        # a string is one label: "脾虚" vs ["脾虚"] = 1 (seed: set("脾虚") = {脾, 虚} -> 0)
        assert calculate_face_syndrome_correlation("脾虚", ["脾虚"]) == 1.0

    def test_syndrome_correlation_matrix(self) -> None:
        # pairs (A,C) = 0.8 from the matrix, (B,C) missing -> default 0.1; mean (0.8 + 0.1) / 2 = 0.45  (seed: same)
        matrix = {"A": {"C": 0.8}}
        assert calculate_face_syndrome_correlation(["A", "B"], ["C"], matrix) == approx(0.45)
        # the matrix is read both ways: {C: {A: 0.8}} gives the same 0.45 (seed: 0.1 + 0.1 -> 0.1)
        assert calculate_face_syndrome_correlation(["A", "B"], ["C"], {"C": {"A": 0.8}}) == approx(0.45)
        # an identical pair missing from the matrix is 1.0 (seed: 0.1)
        assert calculate_face_syndrome_correlation(["A"], ["A"], {}) == 1.0
        with pytest.raises(ValueError, match=r"must be in \[0, 1\]"):
            calculate_face_syndrome_correlation(["A"], ["C"], {"A": {"C": 80}})


# --- 2. tongue ----------------------------------------------------------------------------------------


class TestTongue:
    def test_feature_accuracy(self) -> None:
        # color: 淡红=淡红, 红=红 -> 2/2; shape: 瘦薄!=胖大 -> 0/1; coating: 白腻!=黄腻 -> 0/1;
        # "moisture" is not a tongue feature of seed 2.1 and is ignored; overall 2/4 = 0.5   (seed: same)
        preds = [{"tongue_color": "淡红", "tongue_coating": "白腻", "moisture": "润"},
                 {"tongue_color": "红", "tongue_shape": "瘦薄"}]
        refs = [{"tongue_color": "淡红", "tongue_coating": "黄腻", "moisture": "燥"},
                {"tongue_color": "红", "tongue_shape": "胖大"}]
        assert calculate_tongue_feature_recognition_accuracy(preds, refs) == {
            "tongue_color": 1.0, "tongue_shape": 0.0, "tongue_coating": 0.0, "overall": 0.5}

    def test_feature_accuracy_always_four_keys(self) -> None:
        # only colours in the references: shape and coating report 0.0, as in the seed
        result = calculate_tongue_feature_recognition_accuracy([{"tongue_color": "红"}], [{"tongue_color": "红"}])
        assert result == {"tongue_color": 1.0, "tongue_shape": 0.0, "tongue_coating": 0.0, "overall": 1.0}
        assert calculate_tongue_feature_recognition_accuracy([], []) == {
            "tongue_color": 0.0, "tongue_shape": 0.0, "tongue_coating": 0.0, "overall": 0.0}
        # a None prediction dictionary is empty: 0/1
        assert calculate_tongue_feature_recognition_accuracy([None], [{"tongue_color": "红"}])["overall"] == 0.0

    def test_description_completeness(self) -> None:
        # 6 default aspects 舌质 舌色 舌形 舌苔 舌苔颜色 舌苔厚薄
        # "舌质淡红，舌苔白腻": 舌质, 舌苔 -> 2/6
        # "舌苔颜色黄，舌苔厚薄适中": 舌苔, 舌苔颜色, 舌苔厚薄 -> 3/6
        # mean (2/6 + 3/6) / 2 = 5/12     (seed: same)
        assert calculate_tongue_description_completeness(
            ["舌质淡红，舌苔白腻", "舌苔颜色黄，舌苔厚薄适中"]) == approx(5 / 12)
        with pytest.raises(ValueError):
            calculate_tongue_description_completeness(["舌质"], ["", "  "])

    def test_syndrome_correlation(self) -> None:
        # simple: |{阴虚}| / max(2, 1) = 0.5
        assert calculate_tongue_syndrome_correlation(["阴虚", "内热"], ["阴虚"]) == 0.5
        # with the knowledge base: 阴虚 vs 阴虚: colour 1/1, coating 1/1 -> 2/2 = 1
        # 内热 vs 阴虚: colour {红}∩{红} 1 of 1, coating {黄} vs {少苔} 0 of 2 -> 1/3
        # semantic (1 + 1/3) / 2 = 2/3; result 0.4 * 0.5 + 0.6 * 2/3 = 0.6   (seed: same)
        kb = {"阴虚": {"tongue_color": ["红"], "tongue_coating": ["少苔"]},
              "内热": {"tongue_color": ["红"], "tongue_coating": ["黄"]}}
        assert calculate_tongue_syndrome_correlation(["阴虚", "内热"], ["阴虚"], kb) == approx(0.6)
        assert calculate_tongue_syndrome_correlation([], [], kb) == 0.0

    def test_syndrome_correlation_string_feature_is_one_value(self) -> None:
        # A: coating "黄腻" (a string), B: ["黄腻"]: one shared value of one -> kb similarity 1.0
        # simple 0 (A != B); result 0.6 * 1.0 = 0.6 (seed: set("黄腻") = {黄, 腻} vs {黄腻} -> 0.0)
        kb: dict[str, dict[str, str | list[str]]] = {"A": {"tongue_coating": "黄腻"}, "B": {"tongue_coating": ["黄腻"]}}
        assert calculate_tongue_syndrome_correlation(["A"], ["B"], kb) == approx(0.6)


# --- 3. sound -----------------------------------------------------------------------------------------


class TestSound:
    def test_classification_accuracy(self) -> None:
        # 咳嗽=咳嗽, 喘息!=咳嗽, 呃逆=呃逆 -> 2/3   (seed: same)
        assert calculate_sound_classification_accuracy(
            ["咳嗽", "喘息", "呃逆"], ["咳嗽", "咳嗽", "呃逆"]) == approx(2 / 3)
        # "咳嗽　" normalises to 咳嗽; the None reference is left out -> 1/1
        assert calculate_sound_classification_accuracy(["咳嗽　", "x"], ["咳嗽", None]) == 1.0
        assert calculate_sound_classification_accuracy([], []) == 0.0
        with pytest.raises(ValueError, match="predictions has 1 item, references has 2 items"):
            calculate_sound_classification_accuracy(["a"], ["a", "b"])

    def test_feature_detail(self) -> None:
        # sound_type 2/2, intensity 0/1, rhythm 1/1; "pitch" is not a seed 3.2 feature; overall 3/4  (seed: same)
        preds = [{"sound_type": "咳嗽", "intensity": "强"}, {"sound_type": "喘息", "rhythm": "规律"}]
        refs = [{"sound_type": "咳嗽", "intensity": "弱", "pitch": "高"}, {"sound_type": "喘息", "rhythm": "规律"}]
        assert calculate_sound_feature_recognition_detail(preds, refs) == {
            "sound_type": 1.0, "intensity": 0.0, "rhythm": 1.0, "overall": 0.75}
        assert calculate_sound_feature_recognition_detail([], []) == {"overall": 0.0}

    def test_syndrome_correlation(self) -> None:
        # basic: {痰湿阻肺} ∩ / ∪ of 3 = 1/3; expected from 咳声重浊: {痰湿阻肺, 痰热壅肺}, both predicted -> 2/2
        # 0.5 * 1/3 + 0.5 * 1 = 2/3    (seed: same)
        smap = {"咳声重浊": ["痰湿阻肺", "痰热壅肺"]}
        pred = ["痰湿阻肺", "肺气虚", "痰热壅肺"]
        assert calculate_sound_syndrome_correlation(["咳声重浊"], pred, ["痰湿阻肺"], smap) == approx(2 / 3)
        assert calculate_sound_syndrome_correlation(["咳声重浊"], pred, ["痰湿阻肺"]) == approx(1 / 3)
        # no sound feature in the map -> basic
        assert calculate_sound_syndrome_correlation(["喘息"], pred, ["痰湿阻肺"], smap) == approx(1 / 3)
        assert calculate_sound_syndrome_correlation(["咳声重浊"], pred, [], smap) == 0.0

    def test_description_completeness(self) -> None:
        # 5 default aspects; "音色低沉，强度弱，节律规整" covers 音色, 强度, 节律 -> 3/5   (seed: same)
        assert calculate_sound_description_completeness(["音色低沉，强度弱，节律规整"]) == approx(0.6)

    def test_voice_accuracy(self) -> None:
        # tone right, speed wrong, volume missing -> 1/3   (seed: same)
        assert calculate_voice_analysis_accuracy(
            [{"tone": "平稳", "speed": "缓慢"}], [{"tone": "平稳", "speed": "急促", "volume": "低沉"}]) == approx(1 / 3)
        assert calculate_voice_analysis_accuracy([], []) == 0.0


# --- 4. inquiry ---------------------------------------------------------------------------------------


REQUIRED = ["主诉", "发病时间", "伴随症状", "既往史"]


class TestInquiry:
    def test_symptom_recognition(self) -> None:
        # case 1: {头痛, 发热, 乏力} vs {头痛, 发热, 恶寒}: P 2/3, R 2/3, F1 2/3
        # case 2: {咳嗽} vs {咳嗽, 咽痛}: P 1, R 1/2, F1 2*1*0.5/1.5 = 2/3
        # means: P 5/6, R 7/12, F1 2/3      (seed: same)
        result = calculate_symptom_recognition_rate([["头痛", "发热", "乏力"], ["咳嗽"]],
                                                    [["头痛", "发热", "恶寒"], ["咳嗽", "咽痛"]])
        assert result == approx({"precision": 5 / 6, "recall": 7 / 12, "f1": 2 / 3})

    def test_symptom_recognition_edges(self) -> None:
        assert calculate_symptom_recognition_rate([], []) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
        # both empty: 0 everywhere, as in the seed
        assert calculate_symptom_recognition_rate([[]], [[]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
        # mismatched lengths raise (seed: zip silently dropped the extra case)
        with pytest.raises(ValueError, match="predictions has 2 items, references has 1 item"):
            calculate_symptom_recognition_rate([["a"], ["b"]], [["a"]])

    def test_symptom_classification(self) -> None:
        # 头痛 right, 发热 wrong, 恶寒 not classified by the model -> not counted: 1/2   (seed: same)
        assert calculate_symptom_classification_accuracy(
            [{"头痛": "阳明头痛", "发热": "风热"}],
            [{"头痛": "阳明头痛", "发热": "风寒", "恶寒": "表寒"}]) == 0.5
        assert calculate_symptom_classification_accuracy([{}], [{"头痛": "x"}]) == 0.0
        with pytest.raises(ValueError, match="symptom_classifications has 0 items, reference_classifications has 1"):
            calculate_symptom_classification_accuracy([], [{}])

    def test_inquiry_completeness(self) -> None:
        # case 1: 主诉, 发病时间 filled; "" and None are not -> 2/4
        # case 2: all four -> 4/4; mean 0.75     (seed: same)
        infos: list[dict[str, object]] = [{"主诉": "头痛", "发病时间": "2天", "伴随症状": "", "既往史": None},
                 {"主诉": "胃痛", "发病时间": "1月", "伴随症状": ["嗳气"], "既往史": "无"}]
        assert calculate_inquiry_completeness(infos, REQUIRED) == 0.75
        assert calculate_inquiry_completeness([], REQUIRED) == 0.0

    def test_inquiry_completeness_deviations(self) -> None:
        # 0 is an answer (seed: falsy, not collected): 1/4
        assert calculate_inquiry_completeness([{"发病时间": 0}], REQUIRED) == 0.25
        # blank text is not (seed: "  " is truthy, collected): 0/4
        assert calculate_inquiry_completeness([{"既往史": "  "}], REQUIRED) == 0.0
        # None info dictionary: nothing collected
        assert calculate_inquiry_completeness([None], REQUIRED) == 0.0
        with pytest.raises(ValueError, match="required_info is empty"):
            calculate_inquiry_completeness([{}], [])  # seed: ZeroDivisionError

    def test_inquiry_efficiency(self) -> None:
        # case 1: 2 doctor turns, 3 of 4 categories: 3/2 * (1 - e^-1) = 1.5 * 0.6321205588 = 0.9481808382
        # case 2: 4 doctor turns, 2 categories: 2/4 * (1 - e^-2) = 0.5 * 0.8646647168 = 0.4323323584
        # case 3: no doctor turn -> 0
        # mean (0.9481808382 + 0.4323323584 + 0) / 3 = 0.4601710655   (seed: same)
        d = {"role": "doctor", "content": "?"}
        p = {"role": "patient", "content": "."}
        dialogues = [[d, p, d, p], [d, d, p, d, d], [p]]
        infos = [{"主诉": "a", "发病时间": "b", "伴随症状": "c"}, {"主诉": "a", "既往史": "b"}, {"主诉": "a"}]
        expected = (1.5 * (1 - math.exp(-1)) + 0.5 * (1 - math.exp(-2))) / 3
        assert expected == approx(0.4601710655)
        assert calculate_inquiry_efficiency(dialogues, infos, REQUIRED) == approx(expected)

    def test_inquiry_efficiency_edges(self) -> None:
        # one doctor turn covering 4 categories: 4 * (1 - e^-0.5) = 1.5738 > 1: not capped, as in the seed
        assert calculate_inquiry_efficiency([[{"role": "doctor"}]], [dict.fromkeys(REQUIRED, "x")], REQUIRED) == approx(
            4 * (1 - math.exp(-0.5)))
        # roles "Doctor" and 医生 count; a turn without a role is not a doctor turn (seed: KeyError)
        # 2 doctor turns, 1 category: 1/2 * (1 - e^-1) = 0.3160602794
        dialogue = [{"role": "Doctor"}, {"role": "医生"}, {"content": "no role"}]
        assert calculate_inquiry_efficiency([dialogue], [{"主诉": "x"}], REQUIRED) == approx(0.5 * (1 - math.exp(-1)))
        assert calculate_inquiry_efficiency([], [], REQUIRED) == 0.0
        with pytest.raises(ValueError, match="dialogues has 1 item, collected_info has 0 items"):
            calculate_inquiry_efficiency([[]], [], REQUIRED)

    def test_diagnosis_relevance(self) -> None:
        # 感冒 vs 感冒: 1; {胃痛, 肝胃不和} vs {胃痛}: 1/2; mean 0.75    (seed: same)
        assert calculate_diagnosis_relevance(["感冒", ["胃痛", "肝胃不和"]], ["感冒", ["胃痛"]]) == 0.75
        # a tuple is a list of diagnoses (seed: the tuple itself was one label -> 0)
        assert calculate_diagnosis_relevance([("a", "b")], [["a", "b"]]) == 1.0
        # None reference left out -> only case 1 counts
        assert calculate_diagnosis_relevance(["感冒", "x"], ["感冒", None]) == 1.0
        assert calculate_diagnosis_relevance([], []) == 0.0


# --- 5. pulse -----------------------------------------------------------------------------------------


class TestPulse:
    def test_classification_with_partial_matches(self) -> None:
        # 浮=浮: 1; 弦兼数=弦兼数: 1; 沉兼细 vs 沉兼弱: common {沉} / max(2, 2) = 0.5;
        # [滑, 数] vs [滑, 数, 有力]: 2 / 3; total (1 + 1 + 0.5 + 2/3) / 4 = 19/24   (seed: same)
        preds = ["浮", "弦兼数", "沉兼细", ["滑", "数"]]
        refs = ["浮", "弦兼数", "沉兼弱", ["滑", "数", "有力"]]
        assert calculate_pulse_classification_accuracy(preds, refs) == approx(19 / 24)
        # order of a compound pulse does not matter: 2/2   (seed: same)
        assert calculate_pulse_classification_accuracy(["数兼弦"], ["弦兼数"]) == 1.0

    def test_classification_edges(self) -> None:
        # string vs list compared after splitting on 兼: 2/2 (seed: 0, mixed types skipped)
        assert calculate_pulse_classification_accuracy(["弦兼数"], [["弦", "数"]]) == 1.0
        # None prediction scores 0; None reference is left out -> 0/1
        assert calculate_pulse_classification_accuracy([None, "浮"], ["浮", None]) == 0.0
        assert calculate_pulse_classification_accuracy([], []) == 0.0
        with pytest.raises(ValueError):
            calculate_pulse_classification_accuracy(["浮"], [])

    def test_feature_accuracy(self) -> None:
        # rate right, strength wrong, depth missing -> overall 1/3; per feature 1, 0, 0   (seed: same)
        result = calculate_pulse_feature_accuracy([{"rate": "迟", "strength": "有力"}],
                                                  [{"rate": "迟", "strength": "无力", "depth": "沉"}])
        assert result == approx({"rate": 1.0, "strength": 0.0, "depth": 0.0, "overall": 1 / 3})

    def test_syndrome_correlation(self) -> None:
        # basic: {肝火上炎} / {肝火上炎, 阴虚} = 1/2
        # expected from 弦, 数: {肝郁气滞, 肝火上炎, 阴虚}; predicted 2 of 3
        # 0.6 * 0.5 + 0.4 * 2/3 = 0.5666...    (seed: same)
        pmap = {"弦": ["肝郁气滞", "肝火上炎"], "数": ["肝火上炎", "阴虚"]}
        pred = ["肝火上炎", "阴虚"]
        assert calculate_pulse_syndrome_correlation(pred, ["肝火上炎"], ["弦", "数"], pmap) == approx(0.3 + 0.8 / 3)
        assert calculate_pulse_syndrome_correlation(pred, ["肝火上炎"]) == 0.5
        assert calculate_pulse_syndrome_correlation(pred, ["肝火上炎"], [], pmap) == 0.5
        assert calculate_pulse_syndrome_correlation([], []) == 1.0  # two empty sets agree (domain.sets.jaccard)

    def test_interpretation_completeness(self) -> None:
        # 6 default aspects; covers 脉象类型, 脉率, 临床意义 -> 3/6   (seed: same)
        assert calculate_pulse_interpretation_completeness(["脉象类型为弦脉，脉率偏快，临床意义为肝郁"]) == 0.5
        assert calculate_pulse_interpretation_completeness([]) == 0.0


# --- 6. four examinations combined --------------------------------------------------------------------


class TestCombined:
    def test_modal_consistency(self) -> None:
        # A = {脾虚湿盛}, B = {脾虚, 湿盛}, C = {脾虚湿盛, 脾虚}; 闻诊 empty is ignored
        # AB 0/3 = 0, AC 1/2, BC 1/3 -> mean (0 + 1/2 + 1/3) / 3 = 5/18   (seed: same)
        modal = {"望诊": ["脾虚湿盛"], "问诊": ["脾虚", "湿盛"], "切诊": ["脾虚湿盛", "脾虚"], "闻诊": []}
        assert calculate_modal_consistency(modal) == approx(5 / 18)

    def test_modal_consistency_edges(self) -> None:
        assert calculate_modal_consistency({"望诊": ["脾虚"]}) == 1.0  # one examination: vacuously consistent
        assert calculate_modal_consistency({}) == 1.0
        # a string is one diagnosis (seed: set("脾虚") = {脾, 虚} vs {脾虚} -> 0)
        assert calculate_modal_consistency({"望诊": "脾虚", "问诊": ["脾虚"]}) == 1.0

    def test_fusion_gain(self) -> None:
        # mean single (0.6 + 0.8) / 2 = 0.7; (0.84 - 0.7) / 0.7 = 0.2   (seed: same)
        assert calculate_fusion_gain({"望诊": 0.6, "问诊": 0.8}, 0.84) == approx(0.2)
        assert calculate_fusion_gain({"望诊": 0.6, "问诊": 0.8}, 0.5) == 0.0  # a loss is floored at 0
        assert calculate_fusion_gain({"望诊": 0.0}, 0.0) == 0.0  # zero baseline, zero result
        assert calculate_fusion_gain({"望诊": 0.0}, 0.3) == 1.0  # zero baseline, positive result
        # gain above 1 is allowed: (0.9 - 0.3) / 0.3 = 2
        assert calculate_fusion_gain({"望诊": 0.3}, 0.9) == approx(2.0)

    def test_fusion_gain_edges(self) -> None:
        # None scores are ignored: baseline 0.6, (0.9 - 0.6) / 0.6 = 0.5
        assert calculate_fusion_gain({"望诊": 0.6, "切诊": None}, 0.9) == approx(0.5)
        with pytest.raises(ValueError, match="single_modal_scores is empty"):
            calculate_fusion_gain({}, 0.5)  # seed: ZeroDivisionError
        with pytest.raises(ValueError, match="finite"):
            calculate_fusion_gain({"望诊": float("nan")}, 0.5)

    def test_syndrome_differentiation(self) -> None:
        # {脾虚, 湿盛, 气虚} vs {脾虚, 湿盛}: P 2/3, R 1, F1 2 * 2/3 / (5/3) = 0.8   (seed: same)
        assert calculate_syndrome_differentiation_accuracy(["脾虚", "湿盛", "气虚"], ["脾虚", "湿盛"]) == approx(
            {"precision": 2 / 3, "recall": 1.0, "f1": 0.8})
        assert calculate_syndrome_differentiation_accuracy([], []) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
        # duplicates and spacing: {脾虚} vs {脾虚} -> all 1
        assert calculate_syndrome_differentiation_accuracy(["脾虚", "脾虚 "], "脾虚")["f1"] == 1.0

    def test_clinical_relevance(self) -> None:
        # expected {纳差, 便溏, 舌胖, 苔白腻}, observed {纳差, 便溏, 乏力}: overlap 2
        # P 2/4, R 2/3, F1 2 * (1/2)(2/3) / (7/6) = 4/7   (seed: same)
        cmap = {"脾虚湿盛": ["纳差", "便溏", "舌胖", "苔白腻"]}
        assert calculate_clinical_relevance(["脾虚湿盛"], ["纳差", "便溏", "乏力"], cmap) == approx(4 / 7)
        assert calculate_clinical_relevance(["脾虚湿盛"], ["纳差"]) == 0.0  # no map
        assert calculate_clinical_relevance(["未知"], ["纳差"], cmap) == 0.0  # nothing expected


# --- 7. prescription ----------------------------------------------------------------------------------


class TestPrescription:
    def test_accuracy(self) -> None:
        # 炙甘草 != 甘草: 3 common of 4 and 4 -> P = R = F1 = 0.75   (seed: same)
        assert calculate_prescription_accuracy(
            ["党参", "白术", "茯苓", "炙甘草"], ["党参", "白术", "茯苓", "甘草"]) == {
            "precision": 0.75, "recall": 0.75, "f1": 0.75}

    def test_accuracy_normalises_herb_names(self) -> None:
        # "黄芪　" (ideographic space), " 党参" and a duplicate 黄芪 -> {黄芪, 党参}: all 1.0
        # (seed: {"黄芪　", " 党参", "黄芪"} vs {黄芪, 党参} -> P 1/3, R 1/2)
        assert calculate_prescription_accuracy(["黄芪　", " 党参", "黄芪"], ["黄芪", "党参"])["f1"] == 1.0
        # full-width parentheses fold to ASCII: 枳实（炒） == 枳实(炒)
        assert calculate_prescription_accuracy(["枳实（炒）"], ["枳实(炒)"])["precision"] == 1.0
        assert calculate_prescription_accuracy([], ["黄芪"]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}

    def test_dosage_rationality(self) -> None:
        # 黄芪 30 vs 30: error 0 -> 1; 党参 18 vs 15: error 3/15 = 0.2 <= 0.2 -> 1
        # 白术 15 vs 10: error 0.5 -> 1 - (0.5 - 0.2) / 0.8 = 0.625; 当归 5 vs 10: error 0.5 -> 0.625
        # 甘草 only predicted: ignored. mean (1 + 1 + 0.625 + 0.625) / 4 = 0.8125   (seed: same)
        pred = {"黄芪": 30, "党参": 18, "白术": 15, "当归": 5, "甘草": 6}
        ref = {"黄芪": 30, "党参": 15, "白术": 10, "当归": 10}
        assert calculate_dosage_rationality(pred, ref) == approx(0.8125)

    def test_dosage_linear_decay_and_tolerance(self) -> None:
        # error 1.0 (20 vs 10): 1 - 0.8 / 0.8 = 0; error 2.0: clamped at 0
        assert calculate_dosage_rationality({"a": 20}, {"a": 10}) == 0.0
        assert calculate_dosage_rationality({"a": 30}, {"a": 10}) == 0.0
        # tolerance 0: error 0.1 -> 1 - 0.1 / 1 = 0.9
        assert calculate_dosage_rationality({"a": 11}, {"a": 10}, tolerance=0.0) == approx(0.9)
        with pytest.raises(ValueError, match=r"tolerance must be in \[0, 1\)"):
            calculate_dosage_rationality({"a": 11}, {"a": 10}, tolerance=1.0)  # seed: ZeroDivisionError

    def test_dosage_edges(self) -> None:
        # reference dose 0: 1 for a predicted 0, else 0 (seed: ZeroDivisionError)
        assert calculate_dosage_rationality({"a": 0}, {"a": 0}) == 1.0
        assert calculate_dosage_rationality({"a": 3}, {"a": 0}) == 0.0
        # None reference dose: herb left out -> only b (1.0); None predicted dose: 0 -> (0 + 1) / 2
        assert calculate_dosage_rationality({"a": 10, "b": 5}, {"a": None, "b": 5}) == 1.0
        assert calculate_dosage_rationality({"a": None, "b": 5}, {"a": 10, "b": 5}) == 0.5
        # herb names normalised, pairs accepted, equal duplicates collapse: 黄芪 30 vs 30 -> 1
        # (herb, dose) pairs: accepted at runtime, outside the Mapping signature
        assert calculate_dosage_rationality([("黄芪　", 30), ("黄芪", 30)], {"黄芪": 30}) == 1.0  # type: ignore[arg-type]
        assert calculate_dosage_rationality({}, {"a": 1}) == 0.0
        assert calculate_dosage_rationality({"b": 1}, {"a": 1}) == 0.0  # no common herb
        with pytest.raises(ValueError, match="listed twice with different doses"):
            calculate_dosage_rationality([("黄芪", 30), ("黄芪 ", 15)], {"黄芪": 30})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="must not be negative"):
            normalize_dosages({"a": -1})
        with pytest.raises(ValueError, match="must be a number"):
            normalize_dosages({"a": "30g"})

    def test_explanation_rationality(self) -> None:
        # keywords: 清热, 解毒 found, 凉血 not -> 2/3
        # reasonings: "黄连苦寒" found -> hit; 黄芩苦寒 / 泻火解毒 not found -> 1/2
        # overall 0.4 * 2/3 + 0.6 * 1/2 = 0.5666...   (seed: same)
        result = calculate_explanation_rationality(
            "本方清热解毒，黄连苦寒", ["清热", "解毒", "凉血"], ["黄连苦寒,清热燥湿", "黄芩苦寒,泻火解毒"])
        assert result == approx({"keyword_coverage": 2 / 3, "reasoning_coverage": 0.5,
                                 "overall_rationality": 0.4 * 2 / 3 + 0.3})

    def test_explanation_edges(self) -> None:
        # full-width comma splits too: "清热解毒" found -> 1/1 (seed: whole sentence not found -> 0)
        assert calculate_explanation_rationality("清热解毒", [], ["黄芩苦寒，清热解毒"])["reasoning_coverage"] == 1.0
        # trailing comma: no empty clause matching everything -> 0/1 (seed: "" in text -> 1/1)
        assert calculate_explanation_rationality("本方", [], ["凉血止血,"])["reasoning_coverage"] == 0.0
        assert calculate_explanation_rationality(None, ["清热"], []) == {
            "keyword_coverage": 0.0, "reasoning_coverage": 0.0, "overall_rationality": 0.0}

    def test_prescription_syndrome_match(self) -> None:
        # indicated {脾气虚} vs diagnosed {脾气虚, 湿盛}: 1/2   (seed: same)
        psmap = {"四君子汤": ["脾气虚"]}
        assert calculate_prescription_syndrome_match("四君子汤", ["脾气虚", "湿盛"], psmap) == 0.5
        assert calculate_prescription_syndrome_match("四君子汤 ", ["脾气虚"], psmap) == 1.0  # name normalised
        assert calculate_prescription_syndrome_match(["党参", "白术"], ["脾气虚"], psmap) == 0.0  # herbs: unnamed
        assert calculate_prescription_syndrome_match("归脾汤", ["脾气虚"], psmap) == 0.0
        assert calculate_prescription_syndrome_match("四君子汤", ["脾气虚"]) == 0.0


# --- 8. composite scores -------------------------------------------------------------------------------


class TestComposite:
    def test_professionalism_all_dimensions(self) -> None:
        # .15*.8 + .10*.7 + .20*.85 + .15*.75 + .20*.8 + .20*.7
        # = .12 + .07 + .17 + .1125 + .16 + .14 = .7725    (seed: same)
        scores = {"望诊": 0.8, "闻诊": 0.7, "问诊": 0.85, "切诊": 0.75, "四诊合参": 0.8, "方剂推荐": 0.7}
        assert calculate_tcm_professionalism_score(scores) == approx(0.7725)

    def test_professionalism_renormalises(self) -> None:
        # 望诊 .15 and 问诊 .20 renormalised over .35: (.8*.15 + .6*.2) / .35 = .24 / .35 = 0.685714   (seed: same)
        assert calculate_tcm_professionalism_score({"望诊": 0.8, "问诊": 0.6, "其他": 1.0}) == approx(0.24 / 0.35)
        # None score: dimension left out -> only 望诊 -> 0.8
        assert calculate_tcm_professionalism_score({"望诊": 0.8, "问诊": None}) == approx(0.8)
        assert calculate_tcm_professionalism_score({"其他": 1.0}) == 0.0
        with pytest.raises(ValueError, match="sum to 0"):
            calculate_tcm_professionalism_score({"a": 0.5}, {"a": 0.0})  # seed: ZeroDivisionError
        with pytest.raises(ValueError, match="negative"):
            calculate_tcm_professionalism_score({"a": 0.5}, {"a": -1.0})

    def test_comprehensive(self) -> None:
        # 0.3 * 0.8 + 0.7 * 0.6 = 0.24 + 0.42 = 0.66; weights 1, 1 -> (0.8 + 0.6) / 2 = 0.7   (seed: same)
        assert calculate_comprehensive_score(0.8, 0.6) == approx(0.66)
        assert calculate_comprehensive_score(0.8, 0.6, 1, 1) == approx(0.7)
        with pytest.raises(ValueError, match="at least one weight"):
            calculate_comprehensive_score(0.8, 0.6, 0, 0)  # seed: ZeroDivisionError
        with pytest.raises(ValueError, match="general_score"):
            calculate_comprehensive_score(None, 0.6)  # type: ignore[arg-type]  # bad input: no general score


# --- 9. human-AI agreement ----------------------------------------------------------------------------


class TestAgreement:
    def test_agreement(self) -> None:
        # {脾虚湿盛} = {脾虚湿盛}: 1; {肝郁气滞, 脾虚} vs {肝郁气滞}: 1/2; {阴虚火旺} vs {阴虚火旺, 心火亢盛}: 1/2
        # mean 2/3     (seed: same)
        human = [["脾虚湿盛"], ["肝郁气滞", "脾虚"], "阴虚火旺"]
        ai = [["脾虚湿盛"], ["肝郁气滞"], ["阴虚火旺", "心火亢盛"]]
        assert calculate_human_ai_agreement(human, ai) == approx(2 / 3)

    def test_agreement_edges(self) -> None:
        assert calculate_human_ai_agreement([[]], [["a"]]) == 0.0  # an empty side scores 0, as in the seed
        assert calculate_human_ai_agreement([None, "a"], ["b", "a"]) == 1.0  # None expert: case left out
        assert calculate_human_ai_agreement([], []) == 0.0
        with pytest.raises(ValueError, match="human_diagnoses has 2 items, ai_diagnoses has 1 item"):
            calculate_human_ai_agreement(["a", "b"], ["a"])


# --- CLI ----------------------------------------------------------------------------------------------


@pytest.fixture
def cli() -> typer.Typer:
    return metrics_app  # `consensus-eval metrics`, where `tcm` is a sub-command


def run(cli: typer.Typer, *args: str | Path) -> Result:
    return CliRunner().invoke(cli, ["tcm", *map(str, args)])


def write(path: Path, rows: list[object] | str) -> Path:
    text = rows if isinstance(rows, str) else "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.write_text(text, encoding="utf-8")
    return path


FAMILIES = ["face", "tongue", "sound", "inquiry", "pulse", "syndrome", "prescription", "dosage", "agreement"]


@pytest.mark.parametrize("task", FAMILIES)
def test_cli_examples_run(cli: typer.Typer, task: str) -> None:
    result = run(cli, task, EXAMPLES / f"{task}_pred.jsonl", EXAMPLES / f"{task}_gold.jsonl",
                 "--knowledge", EXAMPLES / "knowledge.json", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["task"] == task and summary["cases"] >= 2
    assert summary["metrics"] and all(0.0 <= v <= 2.0 for v in summary["metrics"].values())


def test_cli_values_dosage_and_agreement(cli: typer.Typer) -> None:
    # dosage d1: 1, 1, 0.625, 0.625 -> 0.8125; d2: 柴胡 10/12 (err 1/6) 1, 白芍 1, "枳实　" = 枳实 1,
    # 甘草 3/6 (err 0.5) 0.625 -> 0.90625; mean 0.859375
    result = run(cli, "dosage", EXAMPLES / "dosage_pred.jsonl", EXAMPLES / "dosage_gold.jsonl", "--json")
    assert json.loads(result.stdout)["metrics"] == {"dosage_rationality": approx(0.859375)}
    # agreement: 1, 1/2, 1/2 -> 2/3
    result = run(cli, "agreement", EXAMPLES / "agreement_pred.jsonl", EXAMPLES / "agreement_gold.jsonl", "--json")
    assert json.loads(result.stdout)["metrics"]["human_ai_agreement"] == approx(2 / 3)


def test_cli_tongue_values_and_table(cli: typer.Typer, tmp_path: Path) -> None:
    # case a: color right, coating wrong; case b: color missing in pred -> color 1/2, coating 0/1, overall 1/3
    # syndromes: a {阴虚} vs {阴虚, 内热}: 1/2; b: no gold syndromes -> left out; mean 0.5 over 1 case
    pred = write(tmp_path / "p.jsonl", [
        {"id": "a", "features": {"tongue_color": "红", "tongue_coating": "白"}, "syndromes": ["阴虚"]},
        {"id": 2, "features": {}}])
    gold = write(tmp_path / "g.jsonl", [
        {"id": 2, "features": {"tongue_color": "淡"}},
        {"id": "a", "features": {"tongue_color": "红", "tongue_coating": "黄"}, "syndromes": ["阴虚", "内热"]}])
    result = run(cli, "tongue", pred, gold, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["metrics"]["feature_accuracy.tongue_color"] == 0.5
    assert summary["metrics"]["feature_accuracy.overall"] == approx(1 / 3)
    assert summary["metrics"]["syndrome_correlation"] == 0.5
    assert summary["cases_per_metric"]["syndrome_correlation"] == 1
    table = run(cli, "tongue", pred, gold)
    assert table.exit_code == 0 and "feature_accuracy.overall" in table.stdout and "0.3333" in table.stdout


def test_cli_aspects_option(cli: typer.Typer, tmp_path: Path) -> None:
    # --aspects 舌质，舌苔 (full-width comma): "舌质红" covers 1 of 2 -> 0.5
    pred = write(tmp_path / "p.jsonl", [{"id": "a", "description": "舌质红"}])
    gold = write(tmp_path / "g.jsonl", [{"id": "a"}])
    result = run(cli, "tongue", pred, gold, "--aspects", "舌质，舌苔", "--json")
    assert json.loads(result.stdout)["metrics"] == {"description_completeness": 0.5}


def assert_input_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_cli_missing_id(cli: typer.Typer, tmp_path: Path) -> None:
    pred = write(tmp_path / "pred.jsonl", [{"id": "a", "syndromes": []}, {"syndromes": ["x"]}])
    gold = write(tmp_path / "gold.jsonl", [{"id": "a", "syndromes": []}])
    assert_input_error(run(cli, "syndrome", pred, gold), "pred.jsonl:2", "'id'", "missing")


def test_cli_malformed_line(cli: typer.Typer, tmp_path: Path) -> None:
    pred = write(tmp_path / "pred.jsonl", '{"id": "a"}\n\n{"id": "b", oops}\n')
    gold = write(tmp_path / "gold.jsonl", [{"id": "a"}])
    assert_input_error(run(cli, "syndrome", pred, gold), "pred.jsonl:3", "not valid JSON")
    write(pred, "[1, 2]\n")
    assert_input_error(run(cli, "syndrome", pred, gold), "pred.jsonl:1", "expected a JSON object")


def test_cli_unpaired_and_duplicate_ids(cli: typer.Typer, tmp_path: Path) -> None:
    pred = write(tmp_path / "pred.jsonl", [{"id": "a", "diagnoses": "x"}])
    gold = write(tmp_path / "gold.jsonl", [{"id": "a", "diagnoses": "x"}, {"id": "b", "diagnoses": "y"}])
    assert_input_error(run(cli, "agreement", pred, gold), "pred.jsonl: no line with field 'id' = 'b'", "gold.jsonl:2")
    assert_input_error(run(cli, "agreement", gold, pred), "pred.jsonl: no line with field 'id' = 'b'")
    write(gold, [{"id": "a"}, {"id": "a"}])
    assert_input_error(run(cli, "agreement", pred, gold), "gold.jsonl:2", "duplicate id 'a'", "line 1")


def test_cli_bad_field_type(cli: typer.Typer, tmp_path: Path) -> None:
    pred = write(tmp_path / "pred.jsonl", [{"id": "a", "herbs": ["党参", 3]}])
    gold = write(tmp_path / "gold.jsonl", [{"id": "a", "herbs": ["党参"]}])
    assert_input_error(run(cli, "prescription", pred, gold), "pred.jsonl:1", "field 'herbs'", "item 1 is a number")


def test_cli_dosage_conflict_names_line(cli: typer.Typer, tmp_path: Path) -> None:
    pred = write(tmp_path / "pred.jsonl", [{"id": "a", "dosages": {"a": 1}},
                                           {"id": "b", "dosages": [["黄芪", 30], ["黄芪　", 15]]}])
    gold = write(tmp_path / "gold.jsonl", [{"id": "a", "dosages": {"a": 1}}, {"id": "b", "dosages": {"黄芪": 30}}])
    assert_input_error(run(cli, "dosage", pred, gold), "pred.jsonl:2", "field 'dosages'", "different doses")


def test_cli_other_errors(cli: typer.Typer, tmp_path: Path) -> None:
    gold = write(tmp_path / "gold.jsonl", [{"id": "a", "other": 1}])
    assert_input_error(run(cli, "face", gold, gold), "nothing to score", "features")
    assert_input_error(run(cli, "face", tmp_path / "nope.jsonl", gold), "nope.jsonl: cases file not found")
    assert_input_error(run(cli, "dosage", gold, gold, "--tolerance", "1.5"), "--tolerance")
    kb = tmp_path / "kb.json"
    kb.write_text('{"unknown_map": {}}', encoding="utf-8")
    assert_input_error(run(cli, "face", gold, gold, "--knowledge", kb), "kb.json", "unknown key 'unknown_map'")
    assert run(cli, "bogus", gold, gold).exit_code == 2


def test_cli_help_lists_families(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["tcm", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for family in FAMILIES:
        assert family in result.stdout


def test_cli_import_is_light() -> None:
    # In a fresh interpreter: importing the metrics CLI (TCM's and Text2DT's commands) pulls none of the
    # heavy libraries (the judge layer, numpy, pydantic); what that costs in seconds is not asserted here
    # (a shared machine is noisy).
    heavy = {"litellm", "instructor", "openai", "httpx", "numpy", "pydantic", "rapidfuzz", "jinja2"}
    code = (
        "import sys; import consensus_eval.metrics.commands;"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({sorted(heavy)!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_cli_reads_json_lines_as_every_command_does(cli: typer.Typer, tmp_path: Path) -> None:
    # JSON Lines are UTF-8 (a BOM tolerated), read by the one reader of every command (textio.jsonl_values): a
    # file saved as GBK is refused as `score` refuses it, naming the line and the byte; --encoding gbk reads it.
    rows = [{"id": "a", "syndromes": ["气虚", "血瘀"]}, {"id": "b", "syndromes": ["阴虚"]}]
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n"
    gold = tmp_path / "gold.jsonl"
    gold.write_text(text, encoding="utf-8")
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    result = run(cli, "syndrome", bom, gold, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["metrics"]["differentiation.f1"] == 1.0
    gbk = tmp_path / "gbk.jsonl"
    gbk.write_bytes(text.encode("gbk"))
    refused = run(cli, "syndrome", gbk, gold, "--json")
    assert refused.exit_code == 2 and f"{gbk}:1: not UTF-8 (byte" in refused.output, refused.output
    from consensus_eval.domain.cases import load_cases

    with pytest.raises(InputError, match=f"{re.escape(str(gbk))}:1: not UTF-8 \\(byte"):
        load_cases(gbk)     # the same answer from `score`
    gold.write_bytes(text.encode("gbk"))
    read = run(cli, "syndrome", gbk, gold, "--json", "--encoding", "gbk")
    assert read.exit_code == 0, read.output


def test_cli_encoding_option(cli: typer.Typer, tmp_path: Path) -> None:
    # Traditional-Chinese files saved as Big5 read with --encoding big5.
    rows = [{"id": "a", "syndromes": ["氣虛"]}]
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n"
    pred, gold = tmp_path / "pred.jsonl", tmp_path / "gold.jsonl"
    pred.write_bytes(text.encode("big5"))
    gold.write_bytes(text.encode("big5"))  # --encoding names the encoding of both files
    ok = run(cli, "syndrome", pred, gold, "--json", "--encoding", "big5")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["metrics"]["differentiation.f1"] == 1.0
    # a file that is not in the named encoding is refused, naming file, line and byte
    gold.write_text(text, encoding="utf-8")
    wrong = run(cli, "syndrome", pred, gold, "--json", "--encoding", "big5")
    assert wrong.exit_code == 2 and "gold.jsonl: cases file is not big5 text: line 1" in wrong.stderr, wrong.output
