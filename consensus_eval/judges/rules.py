"""The built-in deterministic ``rules`` judge for the seed 000 medical-record rubric.

:func:`check_case` reads one case (the conversation and the record generated from it) and returns,
for each dimension of the rubric, a :class:`~consensus_eval.domain.judgment.Judgment` whose deductions use
the rubric's category and type ids and the type's points (the low end of a range). Everything here is
pure text rules: no model, no network, the same output for the same input. The rules are built to be
precise rather than exhaustive: where a rule cannot tell, it stays silent.

Checks and what they emit (``dimension.category.type``):

1. Sections. Headings ``主诉/现病史/既往史/家族史/个人史`` are found at line starts (``主诉:``,
   ``主诉：``, ``【主诉】``, ``**主诉**：``, ``1. 主诉：``, leading spaces) or after a full stop with a
   colon. Other headings (体格检查, 诊断, 处理意见 ...) end a section; sub-headings of past history
   (手术史, 过敏史 ...) do not.
   - no rubric section heading at all -> ``standardization.structure.structure_confused`` (once), and
     the section-based completeness checks are skipped (nothing can be located);
   - sections out of order -> ``standardization.structure.order_error`` (once);
   - 主诉 missing -> ``cc_symptom_missing`` + ``cc_duration_missing`` (the whole category: neither a
     symptom nor a duration is written);
   - 现病史 missing -> all four ``pi_*_missing`` types (the whole category);
   - 既往史 missing -> the ``ph_*_missing`` types of the diseases the patient affirms in the
     conversation, or, if there are none, ``ph_important_missing`` once;
   - 家族史 missing -> ``fh_absent`` (it is a required section), with the conversation's family
     mention as evidence when there is one;
   - 个人史 is optional: only topics the conversation mentions are checked (check 9).
2. Diabetes affirmed in 既往史 -> fixed penalty ``accuracy.diabetes_in_past_history``. The body is cut
   into clauses at ``，,；;。`` (not at ``、``); a negation word (否认, 无, 没有, 未患, 未发现, 排除 ...)
   earlier in the clause negates every term after it (enumerations with ``、``), unless a turn such as
   ``但``/``有``/``合并`` comes between; a trailing ``否认/阴性/(-)/不详`` negates too. Not counted:
   gestational diabetes (妊娠期糖尿病: a resolved past condition that legitimately belongs in past
   history), ``糖尿病前期`` (not diabetes), ``糖尿病家族史`` and clauses about relatives (misplaced
   family history, not the patient's diabetes). Diabetic complications (``糖尿病肾病``) affirm diabetes
   and do count. Diabetes mentioned outside 既往史 (e.g. ``既往有糖尿病`` in 现病史) does not count.
3. Colloquial terms in the record (:data:`COLLOQUIAL_TERMS`) -> ``terminology.colloquial`` per
   occurrence. ``口渴`` counts only when ``多饮`` is not in the same sentence (the seed's own good
   record writes ``口渴、多饮、多尿``); ``血糖高`` is not matched in ``血糖高于/高达/高峰``.
4. Vague time words (:data:`VAGUE_TIME_WORDS`) -> ``time_expression.time_vague`` per occurrence.
   ``最近``/``近期`` followed by a number or ``一次`` (最近3个月, 最近一次) are concrete; ``之前``/``以前``
   count only at a clause start (``3年以前``, ``服药之前`` are anchored); ``多年/几年/几个月`` after a
   numeral (``十几年``, ``10多年``) are not counted.
5. Drug writing (standardization.drug_writing), per drug of :data:`DRUGS` written in the record,
   looking at all its mentions: ``dose_unclear`` if no mention has a dose (number + mg/g/μg/U/IU/
   单位/片/粒/支/ml), ``usage_unclear`` if no mention has both a frequency and a route (a dosage form
   such as 片/胶囊 implies oral; ``打`` is not a route). Skipped: negated, allergy and family-history
   mentions, drugs the record says were stopped (停用) or used once (曾), and treatment-mode phrases
   (``予胰岛素治疗``). Bare ``胰岛素`` is skipped when the record also names a specific insulin.
   ``drug_name_nonstandard``: a brand or short name (:data:`BRAND_NAMES`, e.g. 诺和锐, 甘精), bare
   ``胰岛素`` while the conversation names the insulin, or a class word (降压药) standing for a drug the
   conversation names.
6. Numbers (accuracy.numbers). Measurements are found by keyword (:data:`MEASURES`: glucose fasting/
   post-meal/random, HbA1c, weight, BMI, blood pressure, lipids, creatinine, eGFR, UACR ...) with the
   first value after it in the same clause (full-width digits and Chinese numerals such as 九点六 are
   read; targets such as ``控制在7以下`` are ignored). A record value equal to a conversation value of
   the same kind, or appearing anywhere in the conversation as a number, is fine; otherwise
   ``value_error`` (paired with the conversation's value of that kind when there is one, else "对话中
   未提及"). A conversation value of a kind the record does not give at all (height excepted), and
   whose number is nowhere in the record, -> ``value_missing`` (once per kind and value). Glucose
   in mg/dL or % (a mmol/L-sized value) and HbA1c in mmol/L -> ``unit_error``.
   Doses go to the drugs category: a record dose for a drug that differs from every dose the
   conversation gives for the same drug (same unit family; tablet count x strength and daily sums
   are accepted) -> ``dose_error``. Frequency per day that differs (每日2次 vs 一天3次), or morning vs
   bedtime timing that contradicts the conversation -> ``usage_error``.
   Durations (年/月/周/天, ``N年前``) in the record that match no duration of the same base (months
   or days) in the conversation -> ``timeline.time_error``; skipped when the conversation dates things
   by calendar year or month (2019年, 3月份), since then the record's relative times are computed.
7. Drug names (accuracy.drugs). A drug the record states positively that the conversation never
   mentions -> ``drug_name_error`` (reason names the conversation's drug of the same class when there
   is an unrecorded one, which is then not also counted missing); a specific insulin in the record is
   not an error when the conversation says only ``胰岛素``. A drug the patient uses or used (said by the
   patient, or confirmed to a doctor's single-drug question; not negated, not hypothetical, not a
   relative's) that the record never names -> ``drug_missing``. Drugs only prescribed by the doctor in
   the conversation are not required (the record need not have a plan section).
8. Chief complaint without any duration (number or 数/几/半 + 年/月/周/天/日) -> ``cc_duration_missing``;
   a chief complaint with no symptom text left once durations are removed -> ``cc_symptom_missing``.
9. Family history present but omitting a relative's diabetes that the conversation affirms ->
   ``fh_diabetes_missing``; omitting a relative's hypertension, coronary disease or stroke ->
   ``fh_other_missing`` (once per disease). Personal history: smoking, drinking, diet and exercise
   each mentioned by the patient (or answered to the doctor's question about it, either way) and
   recorded nowhere in the record -> ``personal_unrecorded`` once per topic (1 point).
10. Past history: hypertension, dyslipidaemia, coronary disease the patient affirms that the record
   does not affirm anywhere outside 家族史 -> ``ph_hypertension_missing`` / ``ph_hyperlipidemia_missing``
   / ``ph_chd_missing``; stroke, gout, thyroid disease, COPD/asthma -> ``ph_other_missing``.
   Present illness: no words of initial diagnosis, treatment, recent course or complications at all
   -> the matching ``pi_*_missing``. Diagnosis: diabetes type in the record (1型/2型) that the
   conversation never gives while it gives another -> ``diagnosis_error``; a complication stated in
   the conversation (diabetic kidney disease / CKD, retinopathy, neuropathy, diabetic foot,
   ketoacidosis) and absent from the record -> ``diagnosis_missing``.

Conversation reading: turns are ``医生/患者/家属:`` lines (or the case's role list). The patient's own
facts come from patient and family turns, clause by clause, skipping clauses about a relative or a
spouse (and the clauses after a relative in the same turn) and turns answering a family question;
``我爸``/``我女儿`` in a family member's turn is the patient, ``她外婆`` is a relative. A doctor's
question about exactly one topic answered ``有/对/是/嗯`` counts as the patient affirming it.

Deduplication: one deduction per (type, evidence span); absence findings per (type, reason).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

from consensus_eval._errors import InputError
from consensus_eval.domain.cases import Case
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.rubric import Rubric

RULES_VERSION = "1"

# ============================================================================ what the judge emits

#: dimension -> category -> deduction types the rules judge can emit (checked by require_compatible)
EMITS: dict[str, dict[str, tuple[str, ...]]] = {
    "accuracy": {
        "numbers": ("value_error", "unit_error", "value_missing"),
        "drugs": ("drug_name_error", "dose_error", "usage_error", "drug_missing"),
        "timeline": ("time_error",),
        "diagnosis": ("diagnosis_error", "diagnosis_missing"),
    },
    "completeness": {
        "chief_complaint": ("cc_symptom_missing", "cc_duration_missing"),
        "present_illness": ("pi_initial_diagnosis_missing", "pi_treatment_missing",
                            "pi_recent_missing", "pi_complications_missing"),
        "past_history": ("ph_hypertension_missing", "ph_hyperlipidemia_missing", "ph_chd_missing",
                         "ph_other_missing", "ph_important_missing"),
        "family_history": ("fh_absent", "fh_diabetes_missing", "fh_other_missing"),
        "personal_history": ("personal_unrecorded",),
    },
    "standardization": {
        "terminology": ("colloquial",),
        "structure": ("order_error", "structure_confused"),
        "drug_writing": ("drug_name_nonstandard", "dose_unclear", "usage_unclear"),
        "time_expression": ("time_vague",),
    },
}
#: dimension -> fixed penalties the rules judge can emit
PENALTIES: dict[str, tuple[str, ...]] = {"accuracy": ("diabetes_in_past_history",)}

_HOME: dict[str, tuple[str, str]] = {
    t: (dim, cat) for dim, cats in EMITS.items() for cat, types in cats.items() for t in types
}
_PENALTY_HOME: dict[str, str] = {p: dim for dim, ps in PENALTIES.items() for p in ps}

# ============================================================================ lexicons (data)

SECTION_ORDER = ("主诉", "现病史", "既往史", "家族史", "个人史")
_SECTION_ALIASES = {"主诉": "主诉", "现病史": "现病史", "既往史": "既往史", "既往病史": "既往史",
                    "家族史": "家族史", "个人史": "个人史", "个人生活史": "个人史"}
#: headings that end a section without being one of the rubric's sections
_OTHER_HEADINGS = ("体格检查", "查体", "专科检查", "辅助检查", "实验室检查", "检查结果", "化验结果",
                   "初步诊断", "临床诊断", "诊断意见", "诊断", "处理意见", "处理", "治疗方案", "治疗计划",
                   "诊疗计划", "诊疗意见", "治疗建议", "建议", "医嘱", "婚育史", "月经史", "婚姻史",
                   "生育史", "一般情况", "基本信息", "患者信息", "备注")

#: colloquial phrase -> standard term (each occurrence in the record is a deduction)
COLLOQUIAL_TERMS: dict[str, str] = {
    "经常口渴": "多饮", "老是口渴": "多饮", "总是口渴": "多饮", "总口渴": "多饮", "特别渴": "多饮",
    "喝水多": "多饮", "喝水很多": "多饮", "喝很多水": "多饮", "喝水特别多": "多饮", "水喝得多": "多饮",
    "尿很多": "多尿", "尿多": "多尿", "尿得多": "多尿", "尿也多": "多尿", "小便多": "多尿",
    "小便很多": "多尿", "尿尿": "排尿", "老上厕所": "尿频", "总上厕所": "尿频", "上厕所": "排尿/尿频",
    "跑厕所": "尿频", "起夜": "夜尿增多",
    "看不清楚": "视物模糊", "看不清": "视物模糊", "看东西模糊": "视物模糊", "看东西不清": "视物模糊",
    "看东西花": "视物模糊", "眼睛模糊": "视物模糊", "眼花": "视物模糊",
    "脚麻": "下肢麻木", "脚发麻": "下肢麻木", "手脚发麻": "肢端麻木", "手脚麻": "肢端麻木",
    "腿麻": "下肢麻木", "手麻": "手指麻木",
    "血糖高": "血糖升高", "血糖很高": "血糖明显升高", "血糖太高": "血糖明显升高", "血糖老高": "血糖升高",
    "血糖挺高": "血糖升高", "血糖比较高": "血糖升高", "血糖有点高": "血糖偏高",
    "血压高": "血压升高", "血脂高": "血脂异常",
    "老是饿": "多食", "总是饿": "多食", "经常饿": "多食", "容易饿": "多食", "饿得快": "多食",
    "吃得多": "多食", "饭量大": "多食",
    "没劲": "乏力", "没力气": "乏力", "没有力气": "乏力", "没啥力气": "乏力", "浑身没劲": "乏力",
    "瘦了": "体重下降", "掉秤": "体重下降",
    "拉肚子": "腹泻", "肚子疼": "腹痛", "肚子痛": "腹痛", "头疼": "头痛", "嘴干": "口干", "嘴巴干": "口干",
    "腿肿": "下肢水肿", "脚肿": "足部水肿", "尿里有泡沫": "泡沫尿", "心里发慌": "心悸",
    "吃药": "服药", "打针": "注射", "抽烟": "吸烟", "喝酒": "饮酒",
}
#: characters that, right after a colloquial phrase, make it part of a standard expression
_COLLOQUIAL_NOT_BEFORE = {
    "血糖高": "于达过峰值低出", "血压高": "于达过峰值低出危", "血脂高": "于达过", "尿多": "次",
    "脚麻": "木", "脚发麻": "木", "手脚麻": "木", "腿麻": "木", "手麻": "木", "眼花": "缭",
}

#: vague time words (each occurrence in the record is a deduction; see the module docstring)
VAGUE_TIME_WORDS = ("很久以前", "很久之前", "很早以前", "好久以前", "好久之前", "很长时间", "挺长时间",
                    "前段时间", "前一段时间", "前阵子", "前些日子", "前些天", "前几天", "这几天", "这段时间",
                    "有一阵子", "一阵子", "一段时间", "那时候", "早些年", "前几年", "前些年", "多年前",
                    "几年前", "数年前", "很久", "好久", "多年", "数年", "几年", "几个月", "数个月", "数月",
                    "近来", "最近", "近期", "之前", "以前")

#: drug class -> generic names
DRUG_CLASSES: dict[str, tuple[str, ...]] = {
    "双胍类": ("二甲双胍",),
    "磺脲类": ("格列美脲", "格列齐特", "格列吡嗪", "格列喹酮", "格列本脲"),
    "α-糖苷酶抑制剂": ("阿卡波糖", "伏格列波糖", "米格列醇"),
    "DPP-4抑制剂": ("西格列汀", "利格列汀", "沙格列汀", "维格列汀", "阿格列汀"),
    "SGLT2抑制剂": ("达格列净", "恩格列净", "卡格列净", "恒格列净"),
    "噻唑烷二酮类": ("吡格列酮", "罗格列酮"),
    "格列奈类": ("瑞格列奈", "那格列奈"),
    "GLP-1受体激动剂": ("利拉鲁肽", "司美格鲁肽", "度拉糖肽", "艾塞那肽", "利司那肽", "贝那鲁肽", "洛塞那肽"),
    "胰岛素": ("门冬胰岛素", "赖脯胰岛素", "谷赖胰岛素", "甘精胰岛素", "地特胰岛素", "德谷胰岛素",
             "精蛋白生物合成人胰岛素", "精蛋白锌重组人胰岛素", "精蛋白人胰岛素", "生物合成人胰岛素",
             "重组人胰岛素", "胰岛素"),
    "钙通道阻滞剂": ("左旋氨氯地平", "氨氯地平", "硝苯地平", "非洛地平"),
    "ARB": ("缬沙坦", "厄贝沙坦", "氯沙坦", "替米沙坦", "坎地沙坦", "奥美沙坦"),
    "ACEI": ("贝那普利", "依那普利", "培哚普利", "卡托普利", "福辛普利"),
    "β受体阻滞剂": ("美托洛尔", "比索洛尔"),
    "利尿剂": ("氢氯噻嗪", "吲达帕胺"),
    "他汀类": ("阿托伐他汀", "瑞舒伐他汀", "辛伐他汀", "普伐他汀", "匹伐他汀"),
    "其他调脂药": ("非诺贝特", "依折麦布"),
    "抗血小板药": ("阿司匹林", "氯吡格雷", "替格瑞洛"),
    "硝酸酯类": ("单硝酸异山梨酯", "硝酸异山梨酯", "硝酸甘油"),
    "神经病变用药": ("甲钴胺", "依帕司他", "硫辛酸"),
    "微循环用药": ("羟苯磺酸钙", "胰激肽原酶"),
}
DRUGS: dict[str, str] = {g: cls for cls, gens in DRUG_CLASSES.items() for g in gens}

#: brand and short names -> generic name (in the record: drug_name_nonstandard)
BRAND_NAMES: dict[str, str] = {
    "格华止": "二甲双胍", "拜糖平": "阿卡波糖", "卡博平": "阿卡波糖", "亚莫利": "格列美脲", "万苏平": "格列美脲",
    "达美康": "格列齐特", "瑞易宁": "格列吡嗪", "糖适平": "格列喹酮", "捷诺维": "西格列汀", "欧唐宁": "利格列汀",
    "安立泽": "沙格列汀", "佳维乐": "维格列汀", "安达唐": "达格列净", "欧唐静": "恩格列净", "诺和龙": "瑞格列奈",
    "艾可拓": "吡格列酮", "诺和力": "利拉鲁肽", "诺和泰": "司美格鲁肽", "度易达": "度拉糖肽", "百泌达": "艾塞那肽",
    "诺和锐": "门冬胰岛素", "优泌乐": "赖脯胰岛素", "来得时": "甘精胰岛素", "长秀霖": "甘精胰岛素",
    "诺和平": "地特胰岛素", "诺和达": "德谷胰岛素", "诺和灵": "重组人胰岛素", "优泌林": "重组人胰岛素",
    "甘舒霖": "重组人胰岛素", "络活喜": "氨氯地平", "拜新同": "硝苯地平", "代文": "缬沙坦", "安博维": "厄贝沙坦",
    "科素亚": "氯沙坦", "洛汀新": "贝那普利", "倍他乐克": "美托洛尔", "立普妥": "阿托伐他汀",
    "拜阿司匹灵": "阿司匹林", "波立维": "氯吡格雷", "弥可保": "甲钴胺",
    # short forms of insulin names
    "甘精": "甘精胰岛素", "门冬": "门冬胰岛素", "赖脯": "赖脯胰岛素", "地特": "地特胰岛素", "德谷": "德谷胰岛素",
}

#: class words that stand in for a drug name -> the classes they cover
CLASS_WORDS: dict[str, frozenset[str]] = {
    "降糖药": frozenset(c for c in DRUG_CLASSES if c not in {
        "钙通道阻滞剂", "ARB", "ACEI", "β受体阻滞剂", "利尿剂", "他汀类", "其他调脂药", "抗血小板药",
        "硝酸酯类", "神经病变用药", "微循环用药"}),
    "降压药": frozenset({"钙通道阻滞剂", "ARB", "ACEI", "β受体阻滞剂", "利尿剂"}),
    "降脂药": frozenset({"他汀类", "其他调脂药"}),
    "调脂药": frozenset({"他汀类", "其他调脂药"}),
    "他汀": frozenset({"他汀类"}),
}

#: measurement kind -> (label, keywords); "bp" is found by its N/N pattern
MEASURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "fpg": ("空腹血糖", ("空腹指尖血糖", "空腹静脉血糖", "空腹血糖", "空腹", "FPG", "FBG")),
    "ppg": ("餐后2小时血糖", ("餐后2小时血糖", "餐后两小时血糖", "餐后二小时血糖", "餐后2h血糖", "餐后血糖",
                         "饭后2小时血糖", "饭后两小时血糖", "饭后血糖", "餐后2小时", "餐后两小时", "餐后2h",
                         "饭后2小时", "饭后两小时", "2hPG", "PPG", "餐后", "饭后")),
    "rbg": ("随机血糖", ("随机指尖血糖", "随机血糖")),
    "glucose": ("血糖", ("指尖血糖", "末梢血糖", "血糖")),
    "hba1c": ("糖化血红蛋白", ("糖化血红蛋白", "HbA1c", "HBA1C", "HbA1C", "A1c", "糖化")),
    "weight": ("体重", ("体重",)),
    "bmi": ("BMI", ("BMI", "体重指数")),
    "height": ("身高", ("身高",)),
    "tg": ("甘油三酯", ("甘油三酯", "TG")),
    "tc": ("总胆固醇", ("总胆固醇", "TC")),
    "ldl": ("低密度脂蛋白胆固醇", ("低密度脂蛋白胆固醇", "低密度脂蛋白", "LDL-C", "LDL")),
    "hdl": ("高密度脂蛋白胆固醇", ("高密度脂蛋白胆固醇", "高密度脂蛋白", "HDL-C", "HDL")),
    "cr": ("肌酐", ("血肌酐", "肌酐", "Scr", "Cr")),
    "ua": ("尿酸", ("血尿酸", "尿酸")),
    "egfr": ("eGFR", ("eGFR",)),
    "uacr": ("尿白蛋白/肌酐比值", ("尿微量白蛋白/肌酐比值", "尿微量白蛋白/肌酐比", "尿白蛋白/肌酐比值", "UACR")),
    "hr": ("心率", ("心率",)),
}
_GLUCOSE_KINDS = frozenset({"fpg", "ppg", "rbg", "glucose"})
#: kinds whose omission from the record is not a deduction
_OPTIONAL_KINDS = frozenset({"height", "hr", "weight_change"})
_WEIGHT_CHANGE = re.compile(r"下降|减轻|减少|降|掉|瘦|轻了|少了|增加|增|涨|长|胖")

#: past-history diseases: (deduction type, label, pattern)
PAST_DISEASES: tuple[tuple[str, str, str], ...] = (
    ("ph_hypertension_missing", "高血压", r"高血压|血压(?:也|有点|有些|一直|比较|偏|都|挺|还)*(?:偏高|高)(?![于达])"),
    ("ph_hyperlipidemia_missing", "高脂血症",
     r"高血脂|高脂血症|血脂异常|高甘油三酯|高胆固醇|(?:血脂|胆固醇|甘油三酯)(?:也|有点|有些|一直|比较|偏|都|挺|还)*(?:偏高|高|异常)(?![于达])"),
    ("ph_chd_missing", "冠心病", r"冠心病|冠状动脉粥样硬化性心脏病|心肌梗死|心梗|心绞痛|支架"),
    ("ph_other_missing", "脑卒中", r"脑梗死|脑梗|脑卒中|中风|脑出血"),
    ("ph_other_missing", "痛风", r"痛风"),
    ("ph_other_missing", "甲状腺疾病", r"甲亢|甲减|甲状腺功能亢进|甲状腺功能减退|桥本"),
    ("ph_other_missing", "慢性肺病", r"慢阻肺|慢性阻塞性肺|哮喘"),
)
_DIABETES_TOPIC = r"糖尿病"

#: family-history diseases: (deduction type, label, pattern)
FAMILY_DISEASES: tuple[tuple[str, str, str], ...] = (
    ("fh_diabetes_missing", "糖尿病", r"糖尿病|血糖(?:也|都|一直|有点)*高"),
    ("fh_other_missing", "高血压", r"高血压|血压(?:也|都|一直|有点)*高"),
    ("fh_other_missing", "冠心病", r"冠心病|心梗|心肌梗死"),
    ("fh_other_missing", "脑卒中", r"脑梗死|脑梗|脑卒中|中风|脑出血"),
)

#: personal-history topics: (label, conversation pattern, record pattern)
PERSONAL_TOPICS: tuple[tuple[str, str, str], ...] = (
    ("吸烟", r"抽烟|吸烟|烟(?:瘾|龄)|抽(?:了|过)?[^,;。]{0,4}烟|戒烟|支烟|包烟", r"吸烟|抽烟|烟"),
    ("饮酒", r"喝酒|饮酒|酒(?:量|瘾)|白酒|啤酒|红酒|黄酒|戒酒", r"饮酒|喝酒|酒"),
    ("饮食", r"饮食|口味|甜食|爱吃|喜欢吃|爱喝|喜欢喝|油腻|零食|饮料|可乐|奶茶|主食|少油|少盐|偏咸|吃得(?:比较|很|挺)?(?:咸|油|甜)",
     r"饮食|膳食|甜食|油腻|口味|零食|饮料|奶茶|主食|进食|喜食|喜饮|嗜|低盐|低脂|偏咸|面食|米饭"),
    ("运动", r"运动|锻炼|散步|跑步|健身|快走|打球|游泳|广场舞|太极|骑车",
     r"运动|锻炼|散步|跑步|健身|步行|快走|活动量|太极|广场舞|久坐|游泳|骑车"),
)

#: complications stated in the conversation that the record must carry: (label, conversation pattern,
#: record pattern; the record may word it more loosely)
DIAGNOSES: tuple[tuple[str, str, str], ...] = (
    ("糖尿病肾病/慢性肾脏病", r"糖尿病肾病|慢性肾脏病|慢性肾病|(?<![A-Za-z])(?:CKD|DKD)(?![A-Za-z])",
     r"糖尿病肾|肾病|肾脏病|肾脏疾病|(?<![A-Za-z])(?:CKD|DKD)(?![A-Za-z])"),
    ("糖尿病视网膜病变", r"视网膜病变", r"视网膜病变|眼底病变|(?<![A-Za-z])DR(?![A-Za-z])"),
    ("糖尿病周围神经病变", r"周围神经病变", r"神经病变|(?<![A-Za-z])DPN(?![A-Za-z])"),
    ("糖尿病足", r"糖尿病足", r"糖尿病足|足溃疡|足部溃疡"),
    ("糖尿病酮症酸中毒", r"酮症酸中毒", r"酮症"),
)

#: present-illness parts: (deduction type, label, pattern of words that show the part is there)
PRESENT_ILLNESS_PARTS: tuple[tuple[str, str, str], ...] = (
    ("pi_initial_diagnosis_missing", "初次诊断情况", r"诊断|确诊|诊为|发现|查出|体检|起病|发病|首次|初次|出现"),
    ("pi_treatment_missing", "治疗历程",
     r"治疗|服用|口服|注射|用药|服药|药物|胰岛素|饮食控制|控制饮食|运动|未予|予|加用|停用|调整|" + "|".join(DRUGS)),
    ("pi_recent_missing", "近期病情",
     r"目前|现在|现为|现口服|现用|现血糖|近\d|近[一两二三四五六七八九十半几]|近期|近来|最近|本次|此次|今年|今日|今天|"
     r"监测|自测|复查|就诊|来院|来诊|门诊|入院|仍|持续|加重|好转|控制不佳|控制欠佳|控制可|控制尚可|控制良好|波动"),
    ("pi_complications_missing", "并发症情况",
     r"并发症|视物模糊|视力|眼底|视网膜|白内障|麻木|疼痛|感觉|蛋白|泡沫尿|肾|神经|足|水肿|心悸|胸闷|跛行|皮肤|"
     r"伤口|溃疡|酮症|低血糖|心脑血管"),
)

# ============================================================================ text helpers

_FULLWIDTH = str.maketrans({**{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)},
                            "\u3000": " ", "µ": "μ", "−": "-"})


def _norm(text: str) -> str:
    """Full-width ASCII to half-width, one character for one (offsets stay valid for the original)."""
    return text.translate(_FULLWIDTH)


_CLAUSE_END = re.compile(r"[,;。!?\n]|\.(?!\d)|[ \t]{2,}")
_SENTENCE_END = re.compile(r"[;。!?\n]|\.(?!\d)")
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _bounds(text: str, pos: int, end_re: re.Pattern[str], lo: int = 0, hi: int | None = None) -> tuple[int, int]:
    """The piece of ``text[lo:hi]`` around ``pos`` delimited by ``end_re``."""
    hi = len(text) if hi is None else hi
    start = lo
    for m in end_re.finditer(text, lo, pos):
        start = m.end()
    m = end_re.search(text, pos, hi)
    return start, (m.start() if m else hi)


def _pieces(text: str, lo: int, hi: int, end_re: re.Pattern[str] = _CLAUSE_END) -> list[tuple[int, int]]:
    """The non-blank pieces of ``text[lo:hi]`` split by ``end_re``, as stripped (start, end) spans."""
    out, start = [], lo
    for m in [*end_re.finditer(text, lo, hi), None]:
        end = m.start() if m else hi
        a, b = start, end
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            out.append((a, b))
        if m:
            start = m.end()
    return out


_CN_DIGIT = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_UNIT = {"十": 10, "百": 100}


def _cn_int(s: str) -> int | None:
    """Chinese numeral to int (三, 十二, 二十四, 一百五 = 150, 一百零五); None for ranges (五六) or junk."""
    total, digit, prev_unit, zero = 0, None, None, False
    for ch in s:
        if ch in _CN_DIGIT:
            d = _CN_DIGIT[ch]
            if d == 0:
                zero = True
                continue
            if digit is not None:
                return None
            digit = d
        elif ch in _CN_UNIT:
            u = _CN_UNIT[ch]
            if prev_unit is not None and u >= prev_unit:
                return None
            total += (1 if digit is None else digit) * u
            digit, prev_unit = None, u
        else:
            return None
    if digit is not None:
        if prev_unit and prev_unit >= 100 and not zero:
            digit *= prev_unit // 10
        total += digit
    elif not total and not zero:
        return None
    return total


def _to_number(s: str) -> float | None:
    """``9.6``, ``九点六``, ``十二``, ``半`` -> float; None if it cannot be read as one number."""
    if re.fullmatch(r"\d+(?:\.\d+)?", s):
        return float(s)
    if s == "半":
        return 0.5
    if "点" in s:
        whole, _, frac = s.partition("点")
        w = float(whole) if whole.isdigit() else _cn_int(whole)
        digits = "".join(str(_CN_DIGIT[c]) if c in _CN_DIGIT else c for c in frac)
        if w is None or not digits.isdigit():
            return None
        return float(f"{int(w)}.{digits}")
    v = _cn_int(s)
    return None if v is None else float(v)


_ARABIC = re.compile(r"\d+(?:\.\d+)?")
_CN_NUMERAL = re.compile(r"[零〇一二两三四五六七八九十百]+(?:点[零〇一二三四五六七八九]+)?")


def _all_numbers(text: str) -> list[float]:
    """Every number written in ``text``: Arabic, and Chinese ones with 十/百/点 (not a lone 一)."""
    out = [float(m.group()) for m in _ARABIC.finditer(text)]
    for m in _CN_NUMERAL.finditer(text):
        s = m.group()
        if re.search("[十百点]", s):
            v = _to_number(s)
            if v is not None:
                out.append(v)
    return out


def _close(a: float, b: float, tol: float = 1e-6) -> bool:
    return abs(a - b) <= tol


def _alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


# ============================================================================ negation, roles, mentions

_KIN = re.compile(r"父亲|母亲|爸爸|妈妈|老爸|老妈|父母|爸妈|哥哥|姐姐|弟弟|妹妹|兄弟|姐妹|爷爷|奶奶|外公|外婆|"
                  r"姥姥|姥爷|外祖父|外祖母|祖父|祖母|舅舅|姑姑|叔叔|伯伯|伯父|叔父|阿姨|姨妈|儿子|女儿|子女|孩子|"
                  r"家里人|家人|家族|亲属|亲戚|其父|其母|一级亲属|爸|妈|哥|姐|弟|妹")
_OTHER_PERSON = re.compile(r"老伴|爱人|丈夫|妻子|老公|老婆|媳妇|同事|朋友|邻居|别人|人家|病友")
_FAMILY_QUESTION = re.compile(r"家里|家人|家族|遗传|父母|爸妈|亲戚|兄弟姐妹|直系|亲属")
_SELF_START = re.compile(r"^(?:我|本人|自己|俺)")
_NEG_CONV = re.compile(r"否认|没有|没|无|未曾|从未|从来没|未|不是|不")
_POST_NEG_CONV = re.compile(r"^(?:倒是|倒|也|都|还|是|的话)?(?:没有|没|不是)(?:$|的|啊|呢|吧|过)")
_NEG_RECORD = re.compile(r"否认|没有|无|未曾|从未|未患|未诊断|未诊|未发现|未见|未有|排除|不伴|不详")
_POST_NEG_RECORD = re.compile(r"^[^,;。\s\d]*?(?:否认|阴性|\(-\)|不详|:\s*(?:无|否认)|均无)")
_AFFIRM_BETWEEN = re.compile(r"但|却|而|然而|可是|不过|合并|伴有|患有")
_YES = re.compile(r"^(?:嗯|对|是的|是|有的|有|得过|查出|确诊|诊断过)")
_UNSURE = re.compile(r"不知道|不清楚|不确定|记不清|不记得")
_QUESTION_WORDS = re.compile(r"吗|么|呢|吧|多少|多久|多长|几|什么|怎么|怎样|哪|有没有|是不是|是否|还是")
_NOT_STATED = re.compile(r"有没有|是否|是不是|排除|预防|避免|防止|筛查|警惕|注意")
_HYPOTHETICAL = re.compile(r"如果|要是|假如|万一|可能|考虑|以后|将来|会不会|能不能|是不是|要不要|建议")
_TENTATIVE = re.compile(r"如果|要是|假如|万一|可能|以后|将来|会不会|能不能|要不要")  # 考虑 X is a diagnosis


def _negated(clause: str, a: int, b: int, neg: re.Pattern[str], post: re.Pattern[str]) -> bool:
    """Whether the term at ``clause[a:b]`` is negated within its clause (see the module docstring)."""
    last = None
    for last in neg.finditer(clause, 0, a):  # noqa: B007 - keep the last match
        pass
    if last is not None:
        between = clause[last.end():a]
        if between.startswith("有"):
            between = between[1:]
        if not _AFFIRM_BETWEEN.search(between):
            return True
    return bool(post.match(clause[b:]))


@dataclass(frozen=True)
class _Turn:
    role: str  # doctor | patient | family | unknown
    start: int
    end: int


_ROLE_LINE = re.compile(r"^[ \t]*(医生|大夫|医师|患者家属|患者|病人|家属|doctor|patient|family|D|P)[ \t]*:[ \t]*",
                        re.M | re.I)
_DOCTORISH = re.compile(r"\?|吗|给您|给你开|我给|建议您|您的")
_ROLES = {"医生": "doctor", "大夫": "doctor", "医师": "doctor", "doctor": "doctor", "d": "doctor",
          "患者": "patient", "病人": "patient", "patient": "patient", "p": "patient",
          "家属": "family", "患者家属": "family", "family": "family"}


def _parse_turns(text: str) -> list[_Turn]:
    """Split a conversation into turns at ``role:`` line starts; lines without a role join the turn."""
    turns: list[_Turn] = []
    matches = list(_ROLE_LINE.finditer(text))
    if not matches:  # unlabelled lines: questions and prescriptions are taken as the doctor's
        return [_Turn("doctor" if _DOCTORISH.search(text, a, b) else "unknown", a, b)
                for a, b in _pieces(text, 0, len(text), re.compile(r"\n"))]
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        turns.append(_Turn(_ROLES[m.group(1).lower()], m.end(), end))
    return turns


# ============================================================================ sections


@dataclass(frozen=True)
class _Section:
    name: str
    canonical: bool
    start: int       # heading start
    body_start: int  # after the heading (and colon)
    body_end: int


_HEADING_NAMES = _alternation([*_SECTION_ALIASES, *_OTHER_HEADINGS])
_LINE_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:(?:\d{1,2}|[一二三四五六七八九十]{1,3})[.、)][ \t]*|\(\d{1,2}\)[ \t]*)?"
    rf"(?:\*\*|【|\[)?[ \t]*(?P<name>{_HEADING_NAMES})[ \t]*(?:\*\*|】|\])?"
    r"(?:[ \t]*:[ \t]*(?:\*\*)?|(?<=】)|(?<=\])|(?=[ \t]|$))",
    re.M)
_INLINE_HEADING = re.compile(rf"(?<=[。;!?])[ \t]*【?(?P<name>{_HEADING_NAMES})】?[ \t]*:")


def _find_sections(text: str) -> list[_Section]:
    hits = sorted([*_LINE_HEADING.finditer(text), *_INLINE_HEADING.finditer(text)], key=lambda m: m.start())
    kept: list[re.Match[str]] = []
    for m in hits:
        if not kept or m.start() >= kept[-1].end():
            kept.append(m)
    out = []
    for i, m in enumerate(kept):
        end = kept[i + 1].start() if i + 1 < len(kept) else len(text)
        name = m.group("name")
        canon = _SECTION_ALIASES.get(name)
        out.append(_Section(canon or name, canon is not None, m.start(), m.end(), end))
    return out


# ============================================================================ drugs

_DRUG_NAMES = {**{g: g for g in DRUGS}, **BRAND_NAMES}
_DRUG_RE = re.compile(_alternation(_DRUG_NAMES))
_INSULIN_NOT_DRUG_AFTER = re.compile(r"抵抗|分泌|释放|水平|敏感|功能|自身抗体|抗体|瘤|泵|原|样|峰|曲线|指数|测定|促泌")
_INSULIN_NOT_DRUG_BEFORE = re.compile(r"(?:空腹|餐后|血清|血|内源性|胰岛|自身)$")
_NEG_USE = re.compile(r"(?:否认|未曾|从未|从来没|未|没有|没|无|不|拒绝)(?:曾|再)?"
                      r"(?:使用|应用|服用|口服|注射|用过|用|服过|服|打过|打|吃过|吃|予|加用|接受)")
_NEG_USE_AFTER = re.compile(r"[^,;。]{0,3}(?:没用过|没打过|没吃过|没用|不用|没有用|未用|未使用)")
_STOPPED = re.compile(r"停用|停药|停掉|已停|停服|停了")
_ONCE_USED = re.compile(r"曾(?:经)?(?:口服|服用|使用|用|注射|应用)?$")
_TREATMENT_MODE = re.compile(r"^\s*(?:口服|皮下注射|注射|静脉)?\s*(?:等)?\s*(?:药物)?\s*治疗")
_CONNECTOR_ONLY = re.compile(r"^[^,;。]*?[、及和与/+]\s*$")
_FORM_ORAL = re.compile(r"(?:钙|钠|钾|盐酸|酒石酸|琥珀酸)?(?:缓释片|控释片|肠溶片|分散片|咀嚼片|片|胶囊|颗粒|滴丸)")
_FORM_INJECTION = re.compile(r"(?:注射液|注射笔|笔)")
_DOSE = re.compile(r"(?P<num>\d+(?:\.\d+)?|[零一二两三四五六七八九十百半]+)\s*"
                   r"(?P<unit>mg|毫克|μg|ug|mcg|微克|IU|iu|U|u|个单位|单位|g|克|片|粒|支|袋|ml|mL|毫升)(?![A-Za-z])")
_DOSE_UNITS = {"mg": ("mass", 1.0), "毫克": ("mass", 1.0), "μg": ("mass", 0.001), "ug": ("mass", 0.001),
               "mcg": ("mass", 0.001), "微克": ("mass", 0.001), "g": ("mass", 1000.0), "克": ("mass", 1000.0),
               "IU": ("unit", 1.0), "iu": ("unit", 1.0), "U": ("unit", 1.0), "u": ("unit", 1.0),
               "个单位": ("unit", 1.0), "单位": ("unit", 1.0), "片": ("count", 1.0), "粒": ("count", 1.0),
               "支": ("count", 1.0), "袋": ("count", 1.0), "ml": ("volume", 1.0), "mL": ("volume", 1.0),
               "毫升": ("volume", 1.0)}
_FREQ = re.compile(r"(?:每|一)\s*(?:日|天)[^\d一两二三四五六,;。]{0,4}?(?:\d+|[一两二三四五六])\s*(?:次|回|顿|针)|"
                   r"(?:\d+|[一两二三四])\s*次\s*/\s*(?:日|天|d)|(?<![A-Za-z])(?:qd|bid|tid|qid|qn|qm|qod|qw|biw|prn|st|q\d+h)(?![A-Za-z])|"
                   r"每晚|每早|每晨|睡前|睡觉前|早晚|早中晚|三餐前|三餐时|三餐后|餐前|餐后|餐时|随餐|饭前|饭后|每餐|每顿|"
                   r"早餐前|晚餐前|早餐后|晚餐后|午餐前|每周\s*(?:\d+|[一两二三])\s*次|晨起|早上|晚上|中午|随第一口饭", re.I)
_FREQ_COUNT = re.compile(r"(?:每|一)\s*(?:日|天)[^\d一两二三四五六,;。]{0,4}?(?P<n>\d+|[一两二三四五六])\s*(?:次|回|针)|"
                         r"(?P<n2>\d+|[一两二三四])\s*次\s*/\s*(?:日|天|d)|"
                         r"(?<![A-Za-z])(?P<abbr>qd|bid|tid|qid|qn|qm)(?![A-Za-z])|(?P<word>早中晚|三餐前|三餐时|三餐后|早晚)", re.I)
_FREQ_WORDS = {"qd": 1, "bid": 2, "tid": 3, "qid": 4, "qn": 1, "qm": 1, "早中晚": 3, "三餐前": 3, "三餐时": 3,
               "三餐后": 3, "早晚": 2}
_ROUTE = re.compile(r"口服|服用|服药|嚼服|嚼碎|含服|舌下|皮下注射|皮下|注射|静脉|静滴|静推|肌注|肌内注射|泵入|吸入|外用|"
                    r"(?<![A-Za-z])(?:po|ih|iv|im)(?![A-Za-z])", re.I)
_MORNING = re.compile(r"早餐前|早饭前|早餐后|早饭后|晨起|早上|每早|每晨|早晨|清晨|(?<![A-Za-z])qm(?![A-Za-z])", re.I)
_EVENING = re.compile(r"睡前|睡觉前|临睡|每晚|晚上|晚餐前|晚饭前|晚餐后|晚饭后|(?<![A-Za-z])qn(?![A-Za-z])", re.I)
_BOTH_TIMES = re.compile(r"早晚|早中晚|三餐|每餐|每顿")


@dataclass(frozen=True)
class _Dose:
    family: str
    value: float
    text: str


@dataclass(frozen=True)
class _DrugHit:
    start: int
    end: int
    surface: str
    generic: str
    nonstandard: bool

    @property
    def cls(self) -> str:
        return DRUGS[self.generic]

    @property
    def insulin(self) -> bool:
        return self.cls == "胰岛素"


def _find_drugs(text: str, lo: int = 0, hi: int | None = None) -> list[_DrugHit]:
    out = []
    for m in _DRUG_RE.finditer(text, lo, len(text) if hi is None else hi):
        s = m.group()
        if s in BRAND_NAMES and len(s) == 2 and re.match(r"氨酸|冬|酸", text[m.end():m.end() + 2]):
            continue  # 门冬氨酸钾镁 is not insulin aspart
        if s == "胰岛素" and (_INSULIN_NOT_DRUG_AFTER.match(text, m.end())
                           or _INSULIN_NOT_DRUG_BEFORE.search(text, max(0, m.start() - 4), m.start())):
            continue
        out.append(_DrugHit(m.start(), m.end(), s, _DRUG_NAMES[s], s in BRAND_NAMES))
    return out


def _doses(text: str) -> list[_Dose]:
    out = []
    for m in _DOSE.finditer(text):
        v = _to_number(m.group("num"))
        if v is None:
            continue
        family, factor = _DOSE_UNITS[m.group("unit")]
        out.append(_Dose(family, v * factor, m.group()))
    return out


def _freq_counts(text: str) -> set[int]:
    out = set()
    for m in _FREQ_COUNT.finditer(text):
        n = m.group("n") or m.group("n2")
        if n:
            v = _to_number(n)
            if v:
                out.add(int(v))
        else:
            out.add(_FREQ_WORDS[(m.group("abbr") or m.group("word")).lower()])
    return out


def _timing(text: str) -> set[str]:
    if _BOTH_TIMES.search(text):
        return {"morning", "evening"}
    return {t for t, rx in (("morning", _MORNING), ("evening", _EVENING)) if rx.search(text)}


# ============================================================================ measurements

_KW_KIND = {kw: kind for kind, (_, kws) in MEASURES.items() for kw in kws}
_MEASURE_KW = re.compile("|".join(
    (rf"(?<![A-Za-z]){re.escape(k)}(?![A-Za-z])" if k.isascii() else re.escape(k))
    for k in sorted(_KW_KIND, key=len, reverse=True)))
_VALUE = re.compile(rf"{_ARABIC.pattern}|{_CN_NUMERAL.pattern}")
_CN_FOLLOW_OK = set("点多左右上下个的了吧啊呢毫公斤千厘米mMkK%")
_FILLER_BAD = re.compile(r"和|与|及|、|分别|或")
_TARGET = re.compile(r"控制在|控制到|控制于|降到|降至|目标|要求|低于|高于|小于|大于|超过|不超过|不到|<|>|≤|≥|正常|参考|应该|应在|要在|保持在|达到|达标")
_THRESHOLD_AFTER = re.compile(r"\s*(?:mmol/L|mmol/l|mmol|%)?\s*(?:以上|以下|以内|之内)")
_APPROX_AFTER = re.compile(r"\s*(?:点多|点几|多|几|来|左右|上下|出头|不到|开外|[-~至到、]\s*\d)")
_UNIT = re.compile(r"\s*(mmol/L|mmol/l|mmol|毫摩尔每升|毫摩尔|mg/dL|mg/dl|mg/g|毫克每克|mg/mmol|μmol/L|umol/L|"
                   r"微摩尔每升|ml/\(min[^)]*\)|ml/min|kg/m2|kg/m²|kg|公斤|千克|斤|cm|厘米|米|mmHg|次/分|bpm|%)?")
_NOT_MEASURE_AFTER = re.compile(r"\s*(?:年|月|日|号|岁|次|天|周|个|小时|分钟|h(?![A-Za-z])|型|倍|级|期|mg|g(?![A-Za-z])|克|"
                                r"U(?![A-Za-z])|IU|单位|片|粒|支|袋|ml|mL|毫升|/\d|:\d)")
_BP = re.compile(r"(?<![\d/.])(?P<s>\d{2,3})\s*/\s*(?P<d>\d{2,3})(?![\d/])(?:\s*mmHg)?")
_BP_WORDS = re.compile(rf"高压\s*(?:是|有|在|大概|差不多)*\s*(?P<s>{_ARABIC.pattern}|{_CN_NUMERAL.pattern})"
                       rf"[^。\n]{{0,12}}?低压\s*(?:是|有|在|大概|差不多)*\s*(?P<d>{_ARABIC.pattern}|{_CN_NUMERAL.pattern})")


@dataclass(frozen=True)
class _Measure:
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


def _read_value(text: str, kind: str, kw_end: int, limit: int) -> _Measure | None:
    """The first measurement value after a keyword, or None (see the module docstring, check 6)."""
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
        unit = unit_m.group(1) or ""
        if not unit and _NOT_MEASURE_AFTER.match(text, m.end()):
            continue
        value = _to_number(num)
        if value is None:
            continue
        end = unit_m.end()
        if kind == "height":
            cm = re.match(r"\s*米\s*(\d{1,2})", text[m.end():])
            if cm and value < 3:
                value, end = value * 100 + float(cm.group(1)), m.end() + cm.end()
            elif unit in ("米", "m") or value < 3:
                value *= 100
        if kind in ("weight", "weight_change") and unit == "斤":
            value /= 2
        if kind == "weight" and _WEIGHT_CHANGE.search(filler):
            if unit not in ("kg", "公斤", "千克", "斤"):
                return None
            kind = "weight_change"
        unit_bad = (kind in _GLUCOSE_KINDS and unit in ("mg/dL", "mg/dl", "%") and value < 35) or \
                   (kind == "hba1c" and unit.startswith(("mmol", "毫摩尔")))
        after = text[m.end():m.end() + 12]
        return _Measure(kind, value, 0, end, num, bool(_APPROX_AFTER.match(after)),
                        bool(_THRESHOLD_AFTER.match(after)), unit_bad)
    return None


def _measures(text: str, lo: int = 0, hi: int | None = None) -> list[_Measure]:
    hi = len(text) if hi is None else hi
    out: list[_Measure] = []
    kws = list(_MEASURE_KW.finditer(text, lo, hi))
    for i, k in enumerate(kws):
        limit = min(kws[i + 1].start() if i + 1 < len(kws) else hi, _bounds(text, k.end(), _CLAUSE_END, lo, hi)[1])
        got = _read_value(text, _KW_KIND[k.group()], k.end(), limit)
        if got is not None:
            out.append(_Measure(got.kind, got.value, k.start(), got.end, got.num, got.approx, got.threshold,
                                got.unit_bad))
    for rx in (_BP, _BP_WORDS):
        for m in rx.finditer(text, lo, hi):
            s, d = _to_number(m.group("s")), _to_number(m.group("d"))
            if s is None or d is None or not (70 <= s <= 260 and 40 <= d <= 160 and s > d):
                continue
            before = text[max(lo, m.start() - 6):m.start()]
            after = text[m.end():m.end() + 4]
            if _TARGET.search(before):
                continue
            approx = bool(re.match(r"\s*(?:左右|上下)", after))
            threshold = bool(re.match(r"\s*(?:以上|以下|以内)", after))
            out.append(_Measure("bp", (s, d), m.start(), m.end(), f"{m.group('s')}/{m.group('d')}", approx, threshold))
    return sorted(out, key=lambda x: x.start)


# ============================================================================ durations

_DURATION = re.compile(r"(?P<num>\d+(?:\.\d+)?|[一二两三四五六七八九十百半数几多]+)(?P<mid>[余多来+个半\s]{0,3})"
                       r"(?P<unit>年|月|周|星期|天|日)(?P<post>[余多半]?)")
_RELATIVE_DAYS = {"去年": ("m", 12.0), "前年": ("m", 24.0), "上个月": ("m", 1.0), "上月": ("m", 1.0),
                  "上周": ("d", 7.0), "上个星期": ("d", 7.0), "昨天": ("d", 1.0), "前天": ("d", 2.0)}
_CALENDAR = re.compile(r"(?:19|20)\d\d\s*年|(?<![个\d])(?:\d{1,2}|十[一二]?|[一二三四五六七八九])\s*月(?!余|多)|"
                       r"今年|年初|年底|年中|春节|过年|开春|夏天|冬天|秋天|春天")


@dataclass(frozen=True)
class _Duration:
    base: str            # "m" (months) or "d" (days)
    value: float | None  # None when vague (几年, 数月, 两三年)
    start: int
    end: int
    text: str


def _durations(text: str, lo: int = 0, hi: int | None = None) -> list[_Duration]:
    hi = len(text) if hi is None else hi
    out = []
    for m in _DURATION.finditer(text, lo, hi):
        num, mid, unit, post = m.group("num"), m.group("mid"), m.group("unit"), m.group("post")
        if re.fullmatch(r"\d{4}", num) or (unit in ("月", "日") and "个" not in mid and re.search(r"[年月]\s*$", text[lo:m.start()])):
            continue  # calendar dates: 2019年, 2019年3月, 3月5日
        if unit == "日" and m.start() > 0 and text[m.start() - 1] in "每今昨次":
            continue
        if unit in ("日", "天", "周") and re.match(r"\s*(?:\d+|[一两二三四五六])\s*(?:次|片|粒|针)", text[m.end():]):
            continue  # 1日3次: a frequency
        if unit == "月" and "个" not in mid and not post and re.match(r"\s*(?:\d|份)", text[m.end():]):
            continue
        value = _to_number(num) if num not in ("数", "几", "多") else None
        if value is not None and ("半" in mid or post == "半"):
            value += 0.5
        base, factor = {"年": ("m", 12), "月": ("m", 1), "周": ("d", 7), "星期": ("d", 7), "天": ("d", 1),
                        "日": ("d", 1)}[unit]
        out.append(_Duration(base, None if value is None else value * factor, m.start(), m.end(), m.group()))
    for word, (base, value) in _RELATIVE_DAYS.items():
        for m in re.finditer(word, text[lo:hi]):
            out.append(_Duration(base, value, lo + m.start(), lo + m.end(), word))
    return sorted(out, key=lambda d: d.start)


# ============================================================================ the case, read once


@dataclass(frozen=True)
class _Finding:
    type: str
    evidence: str
    reason: str
    where: tuple = ()  # (source, start, end[, discriminator]) of the evidence, for de-duplication


class _Doc:
    """A case read once: normalized texts, sections, turns, drug mentions."""

    def __init__(self, case: Case, roles: dict[str, str] | None = None) -> None:
        self.record = case.record
        self.rec = _norm(case.record)
        self.conversation = case.conversation_as_text(roles)
        self.cv = _norm(self.conversation)
        self.sections: dict[str, _Section] = {}
        self.headings = _find_sections(self.rec)
        for s in self.headings:
            if s.canonical and s.name not in self.sections:
                self.sections[s.name] = s
        self.turns = _parse_turns(self.cv)

    # -- quoting (normalization is one character for one, so offsets hold in the original)
    def rq(self, a: int, b: int) -> str:
        return self.record[a:b].strip()

    def cq(self, a: int, b: int) -> str:
        return self.conversation[a:b].strip()

    @property
    def structured(self) -> bool:
        return bool(self.sections)

    def body(self, name: str) -> tuple[int, int] | None:
        s = self.sections.get(name)
        return (s.body_start, s.body_end) if s else None

    def body_text(self, name: str) -> str:
        b = self.body(name)
        return self.rec[b[0]:b[1]] if b else ""

    def in_family_section(self, pos: int) -> bool:
        b = self.body("家族史")
        return bool(b and b[0] <= pos < b[1])

    # -- conversation structure
    def turn_text(self, t: _Turn) -> str:
        return self.cv[t.start:t.end]

    def question_before(self, i: int) -> str:
        """The previous turn's text when it is the doctor's (or an unlabelled) question, else ''."""
        if i == 0:
            return ""
        prev = self.turns[i - 1]
        text = self.turn_text(prev)
        if prev.role in ("doctor", "unknown") and ("?" in text or _QUESTION_WORDS.search(text)):
            return text
        return ""

    def patient_turns(self) -> Iterator[tuple[int, _Turn]]:
        for i, t in enumerate(self.turns):
            if t.role != "doctor":
                yield i, t

    # -- drugs
    @cached_property
    def rec_drugs(self) -> list[_DrugHit]:
        return _find_drugs(self.rec)

    @cached_property
    def rec_drug_mentions(self) -> list[_RecDrug]:
        return _record_drugs(self)

    @cached_property
    def conv_drugs(self) -> list[_ConvDrug]:
        return _conversation_drugs(self)

    def drug_quote(self, d: _RecDrug) -> tuple[str, tuple[int, int]]:
        """The record's text of a drug line: the name up to the end of its first clause."""
        end = min(d.own[1], _bounds(self.rec, d.hit.end, _CLAUSE_END)[1])
        while end > d.hit.end and self.rec[end - 1] in " 、和及与":
            end -= 1
        verb = re.search(r"(?:打|用|注射|口服|服用)$", self.rec[max(0, d.hit.start - 2):d.hit.start])
        start = d.hit.start - (len(verb.group()) if verb else 0)
        return self.rq(start, end), (start, end)


# ============================================================================ conversation facts


def _is_question_clause(doc: _Doc, a: int, b: int) -> bool:
    return doc.cv[b:b + 1] == "?" or bool(re.search(r"(?:吗|么|呢)$", doc.cv[a:b]))


def _about_relative(cl: str, role: str) -> bool | None:
    """True: the clause is about a relative of the patient; False: about the patient; None: not a clause
    about a relative at all (no kin word). In a family member's turn, 我爸/我女儿 is the patient."""
    m = _KIN.search(cl)
    if not m:
        return None
    if role == "family":
        before = cl[max(0, m.start() - 1):m.start()]
        if before in ("我", "俺") or cl[m.start():m.end()] in ("女儿", "儿子", "孩子"):
            return False
        return True if before in ("他", "她", "其") else None
    return True


def _self_affirmed(doc: _Doc, pattern: str, topics: list[str]) -> tuple[int, int] | None:
    """Span of a patient-side clause affirming that the patient has ``pattern`` (or None)."""
    rx = re.compile(pattern)
    for i, turn in doc.patient_turns():
        q = doc.question_before(i)
        if q and _FAMILY_QUESTION.search(q):
            continue
        clauses = _pieces(doc.cv, turn.start, turn.end)
        seen_relative = found = False
        for a, b in clauses:
            cl = doc.cv[a:b]
            rel = _about_relative(cl, turn.role)
            seen_relative = seen_relative or rel is True
            m = rx.search(cl)
            if not m:
                continue
            found = True
            if rel is True or _OTHER_PERSON.search(cl) or _is_question_clause(doc, a, b) or _UNSURE.search(cl):
                continue
            if seen_relative and not _SELF_START.match(cl) and rel is not False:
                continue
            if not _negated(cl, m.start(), m.end(), _NEG_CONV, _POST_NEG_CONV):
                return a, b
        if not found and clauses and q and rx.search(q) and sum(bool(re.search(t, q)) for t in topics) == 1:
            a, b = clauses[0]
            first = doc.cv[a:b]
            if _YES.match(first) and not _NEG_CONV.match(first) and not _UNSURE.search(first):
                return a, b
    return None


def _family_affirmed(doc: _Doc, pattern: str, topics: list[str]) -> tuple[int, int] | None:
    """Span of a clause affirming that a relative of the patient has ``pattern`` (or None)."""
    rx = re.compile(pattern)
    for i, turn in doc.patient_turns():
        q = doc.question_before(i)
        fam_q = bool(q and (_FAMILY_QUESTION.search(q) or _KIN.search(q)))
        single = bool(q and rx.search(q) and sum(bool(re.search(t, q)) for t in topics) == 1)
        clauses = _pieces(doc.cv, turn.start, turn.end)
        for k, (a, b) in enumerate(clauses):
            cl = doc.cv[a:b]
            rel = _about_relative(cl, turn.role)
            if rel is False or (rel is None and (not fam_q or _SELF_START.match(cl) or _OTHER_PERSON.search(cl))):
                continue
            m = rx.search(cl)
            if m:
                if not _negated(cl, m.start(), m.end(), _NEG_CONV, _POST_NEG_CONV) and not _UNSURE.search(cl):
                    return a, b
                continue
            if _NEG_CONV.search(cl) or _UNSURE.search(cl):
                continue
            if any(re.search(t, cl) for t in topics):
                continue  # "我爸有高血压" answers with another disease
            if rel and re.search(r"有|是|得", cl):
                prev = doc.cv[clauses[k - 1][0]:clauses[k - 1][1]] if k else ""
                if (prev and rx.search(prev) and re.search(r"也|都", cl)) or single:
                    return a, b
            if k == 0 and fam_q and single and _YES.match(cl):
                return a, b
    return None


def _topic_mentioned(doc: _Doc, pattern: str) -> tuple[int, int] | None:
    """Span of the patient's clause that speaks of ``pattern`` (either way), or answers a question on it."""
    rx = re.compile(pattern)
    for i, turn in doc.patient_turns():
        q = doc.question_before(i)
        clauses = _pieces(doc.cv, turn.start, turn.end)
        for a, b in clauses:
            cl = doc.cv[a:b]
            if rx.search(cl) and _about_relative(cl, turn.role) is not True and not _OTHER_PERSON.search(cl) \
                    and not _is_question_clause(doc, a, b):
                return a, b
        if clauses and q and rx.search(q) and not _FAMILY_QUESTION.search(q):
            return clauses[0]
    return None


@dataclass(frozen=True)
class _ConvDrug:
    hit: _DrugHit
    in_use: bool  # the patient uses or used it (required in the record)
    window: tuple[int, int]


def _conversation_drugs(doc: _Doc) -> list[_ConvDrug]:
    hits = _find_drugs(doc.cv)
    out = []
    for idx, h in enumerate(hits):
        ti = next((i for i, t in enumerate(doc.turns) if t.start <= h.start < t.end), None)
        if ti is None:
            continue
        turn = doc.turns[ti]
        a, b = _bounds(doc.cv, h.start, _CLAUSE_END, turn.start, turn.end)
        clause = doc.cv[a:b]
        rel = _about_relative(clause, turn.role)
        negated = bool(_NEG_USE.search(doc.cv, a, h.start) or _NEG_USE_AFTER.match(doc.cv, h.end, b))
        if turn.role == "doctor":
            in_use = False
            q = doc.turn_text(turn)
            same_turn = [x for x in hits if turn.start <= x.start < turn.end]
            if ti + 1 < len(doc.turns) and doc.turns[ti + 1].role != "doctor" and len(same_turn) == 1 \
                    and ("?" in q or _QUESTION_WORDS.search(q)):
                nxt = doc.turns[ti + 1]
                first = _pieces(doc.cv, nxt.start, nxt.end)
                first_text = doc.cv[first[0][0]:first[0][1]] if first else ""
                in_use = bool(re.match(r"^(?:嗯|对|是|有|在用|在吃|在打|用着|吃着|打着|用的|吃的|打的|用过|吃过|打过)",
                                       first_text)) and not _NEG_CONV.match(first_text)
        else:
            q = doc.question_before(ti)
            in_use = not negated and not _HYPOTHETICAL.search(clause) and rel is not True and "过敏" not in clause \
                and not (q and _FAMILY_QUESTION.search(q))
        # window: the rest of the turn up to the next drug, then up to two drug-free turns after it
        nxt_drug = hits[idx + 1].start if idx + 1 < len(hits) else len(doc.cv)
        end = min(turn.end, nxt_drug)
        if end == turn.end:
            for t in doc.turns[ti + 1:ti + 3]:
                if any(t.start <= x.start < t.end for x in hits):
                    break
                end = t.end
        out.append(_ConvDrug(h, in_use, (h.end, end)))
    return out


# ============================================================================ checks


def _check_structure(doc: _Doc) -> Iterator[_Finding]:
    if not doc.structured:
        yield _Finding("structure_confused", "", "未识别到主诉、现病史、既往史、家族史等模块标题，病历结构混乱")
        return
    order = sorted(doc.sections.values(), key=lambda s: s.start)
    names = [s.name for s in order]
    expected = sorted(names, key=SECTION_ORDER.index)
    if names != expected:
        worst = -1
        for s in order:
            if SECTION_ORDER.index(s.name) < worst:
                yield _Finding("order_error", doc.rq(s.start, s.body_start),
                               f"模块顺序为{'→'.join(names)}，应为{'→'.join(expected)}",
                               ("record", s.start, s.body_start))
                return
            worst = max(worst, SECTION_ORDER.index(s.name))


def _check_diabetes_in_past_history(doc: _Doc) -> Iterator[_Finding]:
    body = doc.body("既往史")
    if body is None:
        return
    for m in re.finditer(r"糖尿病|(?<![A-Za-z])(?:T1DM|T2DM|DM)(?![A-Za-z])", doc.rec[:body[1]]):
        if m.start() < body[0]:
            continue
        a, b = _bounds(doc.rec, m.start(), _CLAUSE_END, body[0], body[1])
        clause = doc.rec[a:b]
        if re.search(r"(?:妊娠期?|孕期|怀孕时|怀孕期间)$", doc.rec[a:m.start()]):
            continue  # gestational diabetes: a resolved past condition
        if re.match(r"前期|家族", doc.rec[m.end():]) or _KIN.search(clause):
            continue  # prediabetes; family history written in the wrong place
        if _negated(clause, m.start() - a, m.end() - a, _NEG_RECORD, _POST_NEG_RECORD):
            continue
        yield _Finding("diabetes_in_past_history", doc.rq(a, b),
                       f"既往史肯定记载糖尿病（“{doc.rq(a, b)}”），糖尿病应写在主诉和现病史中",
                       ("record", a, b))
        return


_COLLOQUIAL_RE = re.compile("|".join(
    re.escape(p) + (f"(?![{_COLLOQUIAL_NOT_BEFORE[p]}])" if p in _COLLOQUIAL_NOT_BEFORE else "")
    for p in sorted([*COLLOQUIAL_TERMS, "口渴"], key=len, reverse=True)))


def _check_colloquial(doc: _Doc) -> Iterator[_Finding]:
    for m in _COLLOQUIAL_RE.finditer(doc.rec):
        phrase = m.group()
        if phrase == "口渴":
            a, b = _bounds(doc.rec, m.start(), _SENTENCE_END)
            if "多饮" in doc.rec[a:b]:
                continue
            standard = "多饮"
        else:
            standard = COLLOQUIAL_TERMS[phrase]
        yield _Finding("colloquial", doc.rq(m.start(), m.end()),
                       f"口语化表述“{doc.rq(m.start(), m.end())}”，应为“{standard}”", ("record", m.start(), m.end()))


_VAGUE_RE = re.compile("|".join(
    re.escape(w) + (r"(?!\s*(?:\d|[一两二三四五六七八九十半]+\s*个?\s*(?:年|月|周|星期|天|日|次|小时)|一次))"
                    if w in ("最近", "近期") else "")
    for w in sorted(VAGUE_TIME_WORDS, key=len, reverse=True)))


def _check_vague_time(doc: _Doc) -> Iterator[_Finding]:
    for m in _VAGUE_RE.finditer(doc.rec):
        w = m.group()
        before = doc.rec[:m.start()]
        if w in ("之前", "以前") and not re.search(r"(?:^|[\s,;。:、()])(?:患者|病人|其|自)?$", before):
            continue  # anchored: 3年以前, 服药之前
        if w in ("多年", "几年", "几个月", "数年", "数月", "数个月") and re.search(r"[\d十百]$", before):
            continue  # 10多年, 十几年: a number is given
        yield _Finding("time_vague", doc.rq(m.start(), m.end()),
                       f"时间表述不明确“{doc.rq(m.start(), m.end())}”，应写明具体时间", ("record", m.start(), m.end()))


@dataclass(frozen=True)
class _RecDrug:
    hit: _DrugHit
    negated: bool
    skip_writing: bool
    own: tuple[int, int]    # from the name to the next drug or the sentence end
    usage: tuple[int, int]  # clause start to the end of its group's usage text


def _record_drugs(doc: _Doc) -> list[_RecDrug]:
    hits = [h for h in doc.rec_drugs if not doc.in_family_section(h.start)]
    stopped = {h.generic for h in hits
               if _STOPPED.search(doc.rec, *_bounds(doc.rec, h.start, _CLAUSE_END))}
    specific_insulin = any(h.insulin and h.generic != "胰岛素" for h in hits)
    own_ends, usage_ends = [], []
    for i, h in enumerate(hits):
        s_end = _bounds(doc.rec, h.start, _SENTENCE_END)[1]
        nxt = hits[i + 1].start if i + 1 < len(hits) and hits[i + 1].start < s_end else s_end
        own_ends.append(nxt)
    for i in range(len(hits) - 1, -1, -1):  # a drug joined to the next by 、/和/及 shares its usage
        joined = i + 1 < len(hits) and own_ends[i] == hits[i + 1].start and \
            _CONNECTOR_ONLY.match(doc.rec[hits[i].end:own_ends[i]])
        usage_ends.insert(0, usage_ends[0] if joined else own_ends[i])
    out = []
    for i, h in enumerate(hits):
        a, b = _bounds(doc.rec, h.start, _CLAUSE_END)
        clause = doc.rec[a:b]
        negated = bool(_NEG_USE.search(doc.rec, a, h.start) or _NEG_USE_AFTER.match(doc.rec, h.end, b)
                       or (re.search(r"否认|无|未曾|从未", doc.rec[a:h.start]) and re.search(r"使用史|用药史|治疗史", clause)))
        rest = re.sub(_DRUG_RE.pattern + r"|[、及和与]|片|胶囊", "", doc.rec[h.end:b])
        skip = (negated or "过敏" in clause or h.generic in stopped
                or bool(_ONCE_USED.search(doc.rec[a:h.start])) or bool(_TREATMENT_MODE.match(rest))
                or (h.generic == "胰岛素" and specific_insulin))
        out.append(_RecDrug(h, negated, skip, (h.end, own_ends[i]), (a, usage_ends[i])))
    return out


def _check_drug_writing(doc: _Doc) -> Iterator[_Finding]:
    drugs = doc.rec_drug_mentions
    groups: dict[str, list[_RecDrug]] = {}
    for d in drugs:
        if not d.skip_writing:
            groups.setdefault(d.hit.generic, []).append(d)
    for generic, ds in groups.items():
        first = ds[0]
        evidence, ev_span = doc.drug_quote(first)
        if not any(_DOSE.search(doc.rec, *d.own) for d in ds):
            yield _Finding("dose_unclear", evidence, f"“{first.hit.surface}”未写明剂量（数值+单位）",
                           ("record", *ev_span))
        has_freq = any(_FREQ.search(doc.rec, *d.usage) for d in ds)
        has_route = any(_ROUTE.search(doc.rec, *d.usage) or _FORM_ORAL.match(doc.rec, d.hit.end)
                        or _FORM_INJECTION.match(doc.rec, d.hit.end) for d in ds)
        missing = [w for w, ok in (("用药频率", has_freq), ("给药途径", has_route)) if not ok]
        if missing:
            yield _Finding("usage_unclear", evidence, f"“{first.hit.surface}”未写明{'、'.join(missing)}",
                           ("record", *ev_span))
    # names: brand or short names, bare insulin, class words
    conv_specific = sorted({c.hit.generic for c in doc.conv_drugs if c.hit.insulin and c.hit.generic != "胰岛素"})
    rec_specific = any(d.hit.insulin and d.hit.generic != "胰岛素" for d in drugs)
    for d in drugs:
        h = d.hit
        if h.nonstandard:
            yield _Finding("drug_name_nonstandard", h.surface,
                           f"药名“{h.surface}”为商品名或简称，应写通用名{h.generic}", ("record", h.start, h.end))
        elif h.generic == "胰岛素" and not rec_specific and conv_specific and not d.negated:
            yield _Finding("drug_name_nonstandard", h.surface,
                           f"病历仅写“胰岛素”，未写明种类（对话中为{'、'.join(conv_specific)}）", ("record", h.start, h.end))
    yield from _class_word_findings(doc)


def _class_word_findings(doc: _Doc) -> Iterator[_Finding]:
    """A class word (降压药) in the record standing for a drug the patient named and the record did not."""
    rec_generics = {h.generic for h in doc.rec_drugs}
    for word, classes in CLASS_WORDS.items():
        m = re.search(word, doc.rec)
        if not m:
            continue
        named = sorted({c.hit.generic for c in doc.conv_drugs
                        if c.in_use and c.hit.cls in classes and c.hit.generic not in rec_generics})
        if named:
            yield _Finding("drug_name_nonstandard", word, f"病历写“{word}”，未写明药名（对话中为{'、'.join(named)}）",
                           ("record", m.start(), m.end()))


def _covered(generic: str, rec_generics: set[str]) -> bool:
    """Whether the record names ``generic`` (bare 胰岛素 and a specific insulin cover each other)."""
    if generic in rec_generics:
        return True
    if DRUGS[generic] == "胰岛素":
        return "胰岛素" in rec_generics or (generic == "胰岛素" and any(DRUGS[g] == "胰岛素" for g in rec_generics))
    return False


def _check_drug_accuracy(doc: _Doc) -> Iterator[_Finding]:
    rec = doc.rec_drug_mentions
    rec_generics = {d.hit.generic for d in rec}
    conv = doc.conv_drugs
    conv_generics = {c.hit.generic for c in conv}
    in_use: dict[str, _ConvDrug] = {}
    for c in conv:
        if c.in_use:
            in_use.setdefault(c.hit.generic, c)
    consumed: set[str] = set()
    seen: set[str] = set()
    for d in rec:
        h = d.hit
        if d.negated or h.generic in seen:
            continue
        seen.add(h.generic)
        if h.generic in conv_generics or (h.insulin and _covered(h.generic, conv_generics)):
            continue
        partner = next((c for g, c in in_use.items() if c.hit.cls == h.cls and not _covered(g, rec_generics)
                        and g not in consumed), None)
        if partner:
            consumed.add(partner.hit.generic)
            reason = f"对话中为{partner.hit.surface}，病历记为{h.surface}"
        else:
            reason = f"对话中未提及{h.surface}"
        yield _Finding("drug_name_error", doc.rq(h.start, h.end), reason, ("record", h.start, h.end))
    class_words = [w for w in CLASS_WORDS if w in doc.rec]
    for g, c in in_use.items():
        if g in consumed or _covered(g, rec_generics):
            continue
        if any(c.hit.cls in CLASS_WORDS[w] for w in class_words):
            continue  # the record wrote a class word instead: drug_name_nonstandard
        a, b = _bounds(doc.cv, c.hit.start, _CLAUSE_END)
        yield _Finding("drug_missing", doc.cq(a, b), f"对话中患者使用{c.hit.surface}，病历未记录",
                       ("conversation", a, b, g))
    yield from _dose_and_usage_errors(doc, rec, conv)


def _dose_and_usage_errors(doc: _Doc, rec: list[_RecDrug], conv: list[_ConvDrug]) -> Iterator[_Finding]:
    for generic in dict.fromkeys(d.hit.generic for d in rec if not d.negated):
        cws = [c for c in conv if c.hit.generic == generic]
        rds = [d for d in rec if d.hit.generic == generic and not d.negated]
        if not cws or generic == "胰岛素":
            continue
        conv_text = " ".join(doc.cv[slice(*c.window)] for c in cws)
        cdoses = _doses(conv_text)
        accepted = {(x.family, x.value) for x in cdoses}
        for m in (x for x in cdoses if x.family == "mass"):
            for n in (x for x in cdoses if x.family == "count"):
                accepted.add(("mass", m.value * n.value))
        numbers = _all_numbers(conv_text)
        for d in rds:
            rdoses = _doses(doc.rec[slice(*d.own)])
            for rd in rdoses:
                if not any(f == rd.family for f, _ in accepted):
                    continue
                total = sum(x.value for x in rdoses if x.family == rd.family)
                if any(f == rd.family and (_close(v, rd.value) or _close(v, total)) for f, v in accepted):
                    continue
                if any(_close(n, _to_number(re.match(r"[\d.]+", rd.text).group()) or -1) for n in numbers
                       if re.match(r"\d", rd.text)):
                    continue
                shown = "、".join(dict.fromkeys(x.text for x in cdoses if x.family == rd.family))
                quote, span = doc.drug_quote(d)
                yield _Finding("dose_error", quote, f"对话中{d.hit.surface}剂量为{shown}，病历记为{rd.text}",
                               ("record", *span))
                break
        yield from _usage_errors(doc, rds, conv_text)


def _usage_errors(doc: _Doc, rds: list[_RecDrug], conv_text: str) -> Iterator[_Finding]:
    conv_counts, conv_times = _freq_counts(conv_text), _timing(conv_text)
    for d in rds:
        own = doc.rec[slice(*d.own)]
        counts, times = _freq_counts(own), _timing(own)
        ev, span = doc.drug_quote(d)
        where = ("record", *span)
        if counts and conv_counts and not counts & conv_counts:
            yield _Finding("usage_error", ev, f"对话中{d.hit.surface}为每日{'/'.join(map(str, sorted(conv_counts)))}次，"
                                              f"病历记为每日{'/'.join(map(str, sorted(counts)))}次", where)
        elif len(times) == 1 and conv_times and not times & conv_times:
            said = {"morning": "早晨", "evening": "晚间/睡前"}
            yield _Finding("usage_error", ev, f"对话中{d.hit.surface}于{said[next(iter(conv_times))]}使用，"
                                              f"病历记为{said[next(iter(times))]}", where)


def _check_numbers(doc: _Doc) -> Iterator[_Finding]:
    rec = [m for m in _measures(doc.rec) if not doc.in_family_section(m.start)]
    conv = _measures(doc.cv)
    conv_numbers = _all_numbers(doc.cv) + [m.value for m in conv if isinstance(m.value, float)]
    rec_numbers = _all_numbers(doc.rec)
    used = {id(c) for c in conv for r in rec if c.kind == r.kind and _same_value(c, r)}

    def said(v: float) -> bool:
        return any(_close(v, n, 0.051) for n in conv_numbers)

    for r in rec:
        span = ("record", r.start, r.end)
        if r.unit_bad:
            yield _Finding("unit_error", doc.rq(r.start, r.end), f"{r.label}{r.num}的单位错误", span)
        if r.threshold:
            continue
        same = [c for c in conv if c.kind == r.kind]
        if any(_same_value(c, r) for c in same):
            continue
        if (isinstance(r.value, tuple) and all(said(v) for v in r.value)) or \
                (isinstance(r.value, float) and said(r.value)):
            continue
        cands = [c for c in same if not c.threshold and id(c) not in used] or \
                [c for c in conv if not c.threshold and id(c) not in used and
                 {c.kind, r.kind} <= _GLUCOSE_KINDS and "glucose" in (c.kind, r.kind)]
        if cands:
            best = min(cands, key=lambda c: _distance(c, r))
            used.add(id(best))
            reason = f"对话中{best.label}为{best.num}，病历记为{r.num}"
        else:
            reason = f"对话中未提及{r.label}{r.num}"
        yield _Finding("value_error", doc.rq(r.start, r.end), reason, span)
    rec_kinds = {r.kind for r in rec}
    reported: set[tuple] = set()
    for c in conv:
        if c.approx or c.threshold or id(c) in used or c.kind in _OPTIONAL_KINDS or c.kind in rec_kinds:
            continue
        if c.kind in _GLUCOSE_KINDS and ("glucose" in rec_kinds or (c.kind == "glucose" and rec_kinds & _GLUCOSE_KINDS)):
            continue
        values = c.value if isinstance(c.value, tuple) else (c.value,)
        if all(any(_close(v, n, 0.051) for n in rec_numbers) for v in values) or (c.kind, c.value) in reported:
            continue
        reported.add((c.kind, c.value))
        yield _Finding("value_missing", doc.cq(c.start, c.end), f"对话中{c.label}为{c.num}，病历未记录",
                       ("conversation", c.start, c.end))


def _distance(a: _Measure, b: _Measure) -> float:
    va = a.value if isinstance(a.value, tuple) else (a.value,)
    vb = b.value if isinstance(b.value, tuple) else (b.value,)
    return sum(abs(x - y) for x, y in zip(va, vb)) if len(va) == len(vb) else float("inf")


def _same_value(a: _Measure, b: _Measure) -> bool:
    if isinstance(a.value, tuple) or isinstance(b.value, tuple):
        return a.value == b.value
    return _close(a.value, b.value, 0.051 if a.kind in ("weight", "height", "weight_change") else 1e-6)


def _check_durations(doc: _Doc) -> Iterator[_Finding]:
    if _CALENDAR.search(doc.cv):
        return
    conv = [d for d in _durations(doc.cv) if d.value is not None]
    fam = doc.body("家族史")
    for r in _durations(doc.rec):
        if r.value is None or (fam and fam[0] <= r.start < fam[1]):
            continue
        same_base = [c for c in conv if c.base == r.base]
        if not same_base or any(_close(c.value, r.value) for c in same_base):  # type: ignore[arg-type]
            continue
        a, b = _bounds(doc.rec, r.start, _CLAUSE_END)
        said = "、".join(dict.fromkeys(c.text for c in same_base))
        yield _Finding("time_error", doc.rq(a, b), f"病历时间“{doc.rq(r.start, r.end)}”与对话不符（对话中的时间：{said}）",
                       ("record", r.start, r.end))


def _check_chief_complaint(doc: _Doc) -> Iterator[_Finding]:
    if not doc.structured:
        return
    s = doc.sections.get("主诉")
    if s is None:
        yield _Finding("cc_symptom_missing", "", "病历缺少主诉模块（无主要症状描述）")
        yield _Finding("cc_duration_missing", "", "病历缺少主诉模块（无症状持续时间）")
        return
    text = doc.rec[s.body_start:s.body_end]
    quote = doc.rq(s.start, s.body_end)
    core = re.sub(r"[^\u4e00-\u9fffA-Za-z]", "", _DURATION.sub("", text))
    if len(core) < 2:
        yield _Finding("cc_symptom_missing", quote, "主诉未写明主要症状", ("record", s.start, s.body_end))
    if not _DURATION.search(text):
        yield _Finding("cc_duration_missing", quote, f"主诉“{doc.rq(s.body_start, s.body_end)}”未写明症状持续时间",
                       ("record", s.start, s.body_end))


def _check_present_illness(doc: _Doc) -> Iterator[_Finding]:
    if not doc.structured:
        return
    s = doc.sections.get("现病史")
    for type_id, label, pattern in PRESENT_ILLNESS_PARTS:
        if s is None:
            yield _Finding(type_id, "", f"病历缺少现病史模块（无{label}）")
        elif not re.search(pattern, doc.rec[s.body_start:s.body_end]):
            yield _Finding(type_id, doc.rq(s.start, min(s.body_end, s.body_start + 40)), f"现病史未记载{label}")


def _record_affirms(doc: _Doc, pattern: str, lo: int = 0, hi: int | None = None, skip_family: bool = True) -> bool:
    hi = len(doc.rec) if hi is None else hi
    for m in re.finditer(pattern, doc.rec[:hi]):
        if m.start() < lo or (skip_family and doc.in_family_section(m.start())):
            continue
        a, b = _bounds(doc.rec, m.start(), _CLAUSE_END, lo, hi)
        clause = doc.rec[a:b]
        if skip_family and _KIN.search(clause):
            continue
        if not _negated(clause, m.start() - a, m.end() - a, _NEG_RECORD, _POST_NEG_RECORD):
            return True
    return False


def _check_past_history(doc: _Doc) -> Iterator[_Finding]:
    topics = [p for _, _, p in PAST_DISEASES] + [_DIABETES_TOPIC]
    emitted = False
    for type_id, label, pattern in PAST_DISEASES:
        span = _self_affirmed(doc, pattern, topics)
        if span is None or _record_affirms(doc, pattern):
            continue
        emitted = True
        yield _Finding(type_id, doc.cq(*span), f"对话中患者有{label}病史，病历既往史未记录",
                       ("conversation", *span, label))
    if doc.structured and "既往史" not in doc.sections and not emitted:
        yield _Finding("ph_important_missing", "", "病历缺少既往史模块")


def _check_family_history(doc: _Doc) -> Iterator[_Finding]:
    if not doc.structured:
        return
    topics = [p for _, _, p in FAMILY_DISEASES]
    body = doc.body("家族史")
    for type_id, label, pattern in FAMILY_DISEASES:
        span = _family_affirmed(doc, pattern, topics)
        if body is None:
            if type_id == "fh_diabetes_missing":
                ev = doc.cq(*span) if span else ""
                yield _Finding("fh_absent", ev, "病历缺少家族史模块" + (f"（对话中提及家族{label}史）" if span else ""))
            continue
        if span is None or _record_affirms(doc, pattern, *body, skip_family=False):
            continue
        yield _Finding(type_id, doc.cq(*span), f"对话中提及家族{label}史，病历家族史未记录", ("conversation", *span, label))


def _check_personal_history(doc: _Doc) -> Iterator[_Finding]:
    for label, conv_pattern, rec_pattern in PERSONAL_TOPICS:
        span = _topic_mentioned(doc, conv_pattern)
        if span is None or re.search(rec_pattern, doc.rec):
            continue
        yield _Finding("personal_unrecorded", doc.cq(*span), f"对话中提及{label}情况，病历未记录",
                       ("conversation", *span, label))


_DM_TYPE = re.compile(r"(?P<t>[12一二ⅠⅡ]|I{1,2})\s*型\s*糖尿病|(?<![A-Za-z])T(?P<t2>[12])DM(?![A-Za-z])")
_TYPE_NAMES = {"1": "1", "一": "1", "Ⅰ": "1", "I": "1", "2": "2", "二": "2", "Ⅱ": "2", "II": "2"}


def _check_diagnosis(doc: _Doc) -> Iterator[_Finding]:
    conv_types = {_TYPE_NAMES[m.group("t") or m.group("t2")] for m in _DM_TYPE.finditer(doc.cv)}
    for m in _DM_TYPE.finditer(doc.rec):
        t = _TYPE_NAMES[m.group("t") or m.group("t2")]
        if not conv_types or t in conv_types or doc.in_family_section(m.start()):
            continue
        a, b = _bounds(doc.rec, m.start(), _CLAUSE_END)
        if _negated(doc.rec[a:b], m.start() - a, m.end() - a, _NEG_RECORD, _POST_NEG_RECORD) or \
                re.search(r"不是|并非|排除", doc.rec[a:m.start()]):
            continue
        said = "、".join(f"{x}型糖尿病" for x in sorted(conv_types))
        yield _Finding("diagnosis_error", doc.rq(m.start(), m.end()),
                       f"对话中为{said}，病历记为{doc.rq(m.start(), m.end())}", ("record", m.start(), m.end()))
    for label, conv_pattern, rec_pattern in DIAGNOSES:
        span = _conversation_states(doc, conv_pattern)
        if span and not re.search(rec_pattern, doc.rec):
            yield _Finding("diagnosis_missing", doc.cq(*span), f"对话中明确{label}，病历未记录",
                           ("conversation", *span))


def _conversation_states(doc: _Doc, pattern: str) -> tuple[int, int] | None:
    """A non-question, non-negated clause of any speaker stating ``pattern`` about the patient."""
    rx = re.compile(pattern)
    for turn in doc.turns:
        for a, b in _pieces(doc.cv, turn.start, turn.end):
            cl = doc.cv[a:b]
            m = rx.search(cl)
            if not m or _is_question_clause(doc, a, b) or _about_relative(cl, turn.role) is True \
                    or _TENTATIVE.search(cl) or _UNSURE.search(cl) or _NOT_STATED.search(cl):
                continue
            if not _negated(cl, m.start(), m.end(), _NEG_CONV, _POST_NEG_CONV):
                return a, b
    return None


_CHECKS: tuple[Callable[[_Doc], Iterable[_Finding]], ...] = (
    _check_structure, _check_diabetes_in_past_history, _check_colloquial, _check_vague_time,
    _check_drug_writing, _check_drug_accuracy, _check_numbers, _check_durations, _check_chief_complaint,
    _check_present_illness, _check_past_history, _check_family_history, _check_personal_history,
    _check_diagnosis,
)

# ============================================================================ public API


def require_compatible(rubric: Rubric) -> None:
    """Raise :class:`InputError` unless ``rubric`` has every id the rules judge emits."""
    missing = []
    for dim_id, cats in EMITS.items():
        dim = rubric.dimensions_by_id.get(dim_id)
        if dim is None:
            missing.append(f"dimension {dim_id}")
            continue
        for cat_id, types in cats.items():
            cat = dim.categories_by_id.get(cat_id)
            if cat is None:
                missing.append(f"category {dim_id}.{cat_id}")
                continue
            missing += [f"deduction type {dim_id}.{cat_id}.{t}" for t in types if t not in cat.types_by_id]
    for dim_id, pens in PENALTIES.items():
        dim = rubric.dimensions_by_id.get(dim_id)
        if dim is not None:
            missing += [f"fixed penalty {dim_id}.{p}" for p in pens if p not in dim.penalties_by_id]
    if missing:
        raise InputError(
            f"rubric {rubric.id!r} cannot be used with the rules judge, which implements the checks of the "
            f"medical-record rubric (configs/rubrics/medical_record.yaml); the rubric lacks: {', '.join(missing)}. "
            "Use LLM judges only for this rubric.")


def check_case(case: Case, rubric: Rubric) -> dict[str, Judgment]:
    """Run every rules check on one case; one :class:`Judgment` per dimension of ``rubric``.

    Pure and deterministic. Points come from the rubric (the low end of a range type).
    """
    require_compatible(rubric)
    doc = _Doc(case, rubric.roles)
    findings = [f for check in _CHECKS for f in check(doc)]
    return _judgments(findings, rubric)


def _judgments(findings: list[_Finding], rubric: Rubric) -> dict[str, Judgment]:
    deductions: dict[str, list[Deduction]] = {d.id: [] for d in rubric.dimensions}
    penalties: dict[str, list[PenaltyHit]] = {d.id: [] for d in rubric.dimensions}
    seen: set[tuple] = set()
    for f in findings:
        key = (f.type, f.where) if f.where else (f.type, f.evidence, f.reason)
        if key in seen:
            continue
        seen.add(key)
        if f.type in _PENALTY_HOME:
            penalties[_PENALTY_HOME[f.type]].append(PenaltyHit(id=f.type, evidence=f.evidence, reason=f.reason))
            continue
        dim_id, cat_id = _HOME[f.type]
        _, typ = rubric.dimension(dim_id).find_type(f.type)
        deductions[dim_id].append(Deduction(category=cat_id, type=f.type, points=typ.low,
                                            evidence=f.evidence, reason=f.reason))
    return {
        d.id: Judgment(dimension=d.id, deductions=deductions[d.id], fixed_penalties=penalties[d.id],
                       claimed_score=None, claimed_stars=None,
                       comment=f"rules: {len(deductions[d.id]) + len(penalties[d.id])} findings")
        for d in rubric.dimensions
    }
