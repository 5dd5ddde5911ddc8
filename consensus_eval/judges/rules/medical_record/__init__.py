"""The medical-record rules: what the built-in ``rules`` judge checks for the ``medical_record`` rubric.

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
   - 现病史 missing -> the four ``pi_*_missing`` types the conversation gives (see check 10);
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
3. Colloquial terms in the record (:data:`lexicon.COLLOQUIAL_TERMS`) -> ``terminology.colloquial`` per
   occurrence. ``口渴`` counts only when ``多饮`` is not in the same sentence (the seed's own good
   record writes ``口渴、多饮、多尿``); ``血糖高`` is not matched in ``血糖高于/高达/高峰``.
4. Vague time words (:data:`lexicon.VAGUE_TIME_WORDS`) -> ``time_expression.time_vague`` per occurrence.
   ``最近``/``近期`` followed by a number or ``一次`` (最近3个月, 最近一次) are concrete; ``之前``/``以前``
   count only at a clause start (``3年以前``, ``服药之前`` are anchored); ``多年/几年/几个月`` after a
   numeral (``十几年``, ``10多年``) are not counted.
5. Drug writing (standardization.drug_writing), per drug of :data:`lexicon.DRUGS` written in the record,
   looking at all its mentions: ``dose_unclear`` if no mention has a dose (number + mg/g/μg/U/IU/
   单位/片/粒/支/ml) while the conversation gives the drug's dose, ``usage_unclear`` if no mention has
   both a frequency (每日2次, 2次/日, qd/bid/tid/qn/qw, b.i.d. ...) and a route (口服, 皮下注射, po, ih
   ...; a dosage form such as 片/缓释片/胶囊, after the name or in the drug's own text of its clause:
   ``(500mg/片) 1片 bid``, implies oral; ``打`` is not a route; with only ``500mg bid`` and no form the
   route is missing, as the rubric asks 药名+剂量+频率+方式) while
   the conversation gives its frequency or timing: the record cannot state what was not said (a drug
   the patient stopped, named without its dose; a drug the conversation never names). Skipped: negated,
   allergy and family-history mentions, drugs the record says were stopped (停用) or used once (曾), and
   treatment-mode phrases (``予胰岛素治疗``). Bare ``胰岛素`` is skipped when the record also names a
   specific insulin.
   ``drug_name_nonstandard``: a brand or short name (:data:`lexicon.BRAND_NAMES`, e.g. 诺和锐, 甘精), bare
   ``胰岛素`` while the conversation names the insulin, or a class word (降压药) standing for a drug the
   conversation names.
6. Numbers (accuracy.numbers). Measurements are found by keyword (:data:`lexicon.MEASURES`: glucose fasting/
   post-meal/random, HbA1c, weight, BMI, blood pressure, lipids, creatinine, eGFR, UACR ...) with the
   first value after it in the same clause (full-width digits and Chinese numerals such as 九点六 are
   read; targets such as ``控制在7以下`` are ignored). A record value is fine when it is one of the
   conversation's values of its kind: a keyword's value, a number after it (or after a threshold)
   before the next keyword in the same turn (``糖化上次7.8，这次8.1``), a number of the answer to a
   doctor's question naming the kind (``空腹血糖现在多少？`` ``6.5左右``), a number written with a unit of
   that kind (``80公斤``, ``瘦了4斤`` a weight change of 2 kg), a number inside the range an approximate
   value opens from its number (``6点多`` holds 6.5, ``七八`` 7.5, ``5到6`` 5.5; not ``7左右``, whose number
   is said; and not a record range such as ``4.8～12``, whose ends must be said), or the window of an
   approximate value (``9左右``) when the number is said; plain 血糖 and a glucose of known time (空腹/
   餐后/随机) count for each other (``血糖升高7-8年`` is no glucose of 7: a range of years). When
   the conversation gives no value of the kind, or the kind is plain 血糖 (a low or bedtime reading is
   often a bare number), a number said anywhere in it is fine too; when it gives one, a number said only
   elsewhere (the post-meal value written as fasting) is a ``value_error``. Time points (the nearest
   time word before a value in its sentence): a value the record places now (今日, 本次, 目前, 最近, 近3个月
   ...) that the conversation says only before (去年, 上次, N年前, 诊断时 ...), while it gives another
   value of the kind now, is a ``value_error`` (and the reverse); so is a value the record dates
   (2024年3月) that the conversation says only at other times while it gives another value of that
   date. After a next step (后来, 此后) a value has no time point; values at none (平时, 一般) are not
   judged by it. Otherwise ``value_error`` (paired
   with the conversation's value of that kind when there is one, else "对话中未提及"). A
   conversation value of a kind the record does not give at all (height excepted), and
   whose number is nowhere in the record, -> ``value_missing`` (once per kind and value). Units: a value
   in a unit no value of its kind is given in (eGFR in μmol/L, a weight in cm, glucose in %, HbA1c in
   mmol/L), with a number of the size its kind takes in another unit (creatinine 98 mmol/L or 1.1
   μmol/L, HbA1c 8.1 mmol/mol or 65%, glucose 9.6 mg/dL or 162 mmol/L, height 170米), or with another
   unit of its kind than the conversation writes the same number with (150斤 as 150kg) ->
   ``unit_error``, not also a ``value_error`` when the number is the conversation's. HbA1c in mmol/mol
   is read as % (65 mmol/mol is 8.1%). A relative change (``较前下降20%``) or another measure named
   after the keyword (``肌酐清除率``) is not judged for its unit.
   Doses go to the drugs category: a record dose for a drug that differs from every dose the
   conversation gives for the same drug (same unit family; tablet count x strength and daily sums
   are accepted) -> ``dose_error``. Frequency per day that differs (每日2次 vs 一天3次; a range ``每日2-3次``,
   ``一天两三次`` allows each count in it) -> ``usage_error``;
   so is a timing that contradicts the conversation's for the same drug: each timing phrase allows a
   set of (time of day, meal) points (睡前: bedtime; 早餐前: morning before a meal; 餐后: after any meal;
   随餐/第一口饭: with a meal; 晚上: evening or bedtime; 餐前即刻: before or with a meal ...), and the
   record's phrases for the drug allowing none of the conversation's is the error (睡前 ↔ 早餐前/晚餐前/
   餐后, 随餐 ↔ 餐后; 晨服 is morning, 晚服 evening). A timing belongs to the drug it follows in its
   clause or parenthesis, not to a neighbour: phrases are read after each mention up to the next drug's
   text, and before it only after a separator (、，；（）) that follows the previous drug (``…早晚餐后、
   睡前阿托伐他汀``), or from the clause start; a drug joined by 、/和 to the next with no timing of its own
   takes the next one's (``二甲双胍、阿卡波糖 餐后口服``); in the conversation also the rest of the turn,
   or, when that has none, the next turns of its window; never in a clause holding a measurement
   (``饭后两小时13``).
   Durations (年/月/周/天, ``N年前``, 半年 = 6 months, 一年半, 去年 ...; not a gestational age such as
   ``孕28周``, ``孕24+3周``, nor the period of a rate: ``一天吃两次``, ``一天打一针``, ``3个月查一次``,
   ``每3个月``) stand for a window: a range (``七八年``, ``十四五天``, ``5-6年``) from end to end,
   ``3年多`` 3 to 4 years, ``十多年``/``20余年`` up to the next ten. Those of the record whose window meets
   no window of the same base (months or days) in the conversation, nor within a tenth one of the other
   base in days (``半月`` and ``十四五天``) -> ``timeline.time_error``; skipped
   when the conversation dates things by calendar year or month (2019年, 3月份), since then the
   record's relative times are computed. Events: a duration or a calendar date belongs to the events
   named around it (a drug, any insulin as one; diabetes; a complication, comorbidity or symptom of the
   lexicon), in its clause and the next ones of its sentence up to the next time or a word placing
   things at another time (后来, 目前, a vague time ...), else in the clause before, else (conversation)
   in the doctor's question it answers (``胰岛素打了多久？`` ``2年了``); not a relative's, not in 家族史;
   ``N年后`` and ``每N个月`` are no points in time. A record duration whose events the conversation times
   only with other values (and never by the calendar) -> ``time_error``, even when its value is said of
   something else (``近1年口干`` where the patient says ``最近半年口干`` and ``去年体检``). Two events each
   timed once on both sides (relative times or dates) whose order the record reverses -> one
   ``timeline.time_order_confused`` (not also two time errors).
7. Drug names (accuracy.drugs). A drug the record states positively that the conversation never
   mentions -> ``drug_name_error`` (reason names the conversation's drug of the same class when there
   is an unrecorded one, which is then not also counted missing). Insulins: a specific insulin in the
   record that the conversation never names is a ``drug_name_error`` when the conversation names another
   specific insulin (an insulin put for another), and is excused only when the conversation names none
   (says only ``胰岛素``); human insulins (``…人胰岛素``, one product sold under several of these names)
   stand for one another. A drug the patient uses or used (said by the
   patient, or confirmed to a doctor's single-drug question; not negated, not hypothetical, not a
   relative's) that the record never names -> ``drug_missing``. Drugs only prescribed by the doctor in
   the conversation are not required (the record need not have a plan section). A combination product
   (names written one after the other: ``厄贝沙坦氢氯噻嗪``, ``缬沙坦氨氯地平``) is one drug, with its own
   dose and frequency; a part of the conversation's combination (or a combination of drugs it names) is
   no ``drug_name_error``, and a drug inside the record's combination is not missing.
8. Chief complaint without any duration (number or 数/几/半 + 年/月/周/天/日) -> ``cc_duration_missing``;
   a chief complaint with no symptom text left once durations are removed -> ``cc_symptom_missing``.
9. Family history present but omitting a relative's diabetes that the conversation affirms ->
   ``fh_diabetes_missing``; omitting a relative's hypertension, coronary disease or stroke ->
   ``fh_other_missing`` (once per disease); a relative's clause naming another disease (``我妈妈有甲减``)
   is no yes to a question about diabetes. Personal history: smoking, drinking, diet and exercise
   (ball games and hiking among it)
   each mentioned by the patient (or answered to the doctor's question about it, either way) and
   recorded nowhere in the record -> ``personal_unrecorded`` once per topic (1 point).
10. Past history: hypertension, dyslipidaemia, coronary disease the patient affirms that the record
   does not affirm anywhere outside 家族史 -> ``ph_hypertension_missing`` / ``ph_hyperlipidemia_missing``
   / ``ph_chd_missing``; stroke, gout, thyroid disease, COPD/asthma -> ``ph_other_missing``.
   Present illness: no words of initial diagnosis, treatment, recent course (also in other words:
   ``3月12日``, ``本次``, ``1个月来``) or complications at all -> the matching ``pi_*_missing``, each only
   when the conversation gives that part: a treatment (a drug in use, or one the patient affirms: not a
   patient diagnosed at this visit), a recent course, complications spoken of either way. Diagnosis:
   diabetes type in the record (1型/2型) that the conversation never gives while it gives another ->
   ``diagnosis_error``; a complication stated in the conversation (diabetic kidney disease / CKD,
   retinopathy, neuropathy, diabetic foot, ketoacidosis) and absent from the record ->
   ``diagnosis_missing``.

11. Statements against the conversation (``statements``). Negation flips: a comorbidity or complication
   the record affirms (``有冠心病病史``, ``合并冠心病``) that the conversation denies (``没有冠心病``, ``心脏没事``,
   a bare ``都没有`` to a question naming it) and never affirms (nor the doctor, nor a drug for it in use)
   -> ``accuracy.diagnosis.diagnosis_error`` (the rubric's diagnosis category covers 合并症 and 并发症); a
   symptom of a closed list (:data:`lexicon.SYMPTOMS`: 口干, 多尿, 乏力, 视物模糊, 麻木, 水肿 ...) or a habit
   (吸烟, 饮酒) affirmed against a denial, or denied (``无乏力``, ``未出现泡沫尿``) against an affirmation ->
   ``accuracy.course.fact_error`` (a misstated fact of the course). A comorbidity denied by the record is
   ``ph_*_missing`` (check 10), not counted twice. Concepts the conversation states both ways (a course)
   are not judged; symptoms at the limbs are judged per limb group (两只手发麻, 脚倒没事). A symptom at the
   hands written at the feet (or the reverse) where the conversation names it at the other limbs only, and
   a side (左/右) of a site (眼, 足, 下肢, 髋, 膝 ...) told with a finding (麻木, 疼痛, 破溃, 白内障, 骨折, 手术
   ...) that the conversation gives only on the other side -> ``fact_error``. A symptom of the closed list
   that the record affirms in 主诉/现病史 and the conversation, which does talk about symptoms, never
   mentions in any words -> ``fact_error``.

Conversation reading: turns are ``医生/患者/家属:`` lines (or the case's role list). The patient's own
facts come from patient and family turns, clause by clause, skipping clauses about a relative or a
spouse (and the clauses after a relative in the same turn) and turns answering a family question;
``我爸``/``我女儿`` in a family member's turn is the patient, ``她外婆`` is a relative. A doctor's
question about exactly one topic answered ``有/对/是/嗯`` counts as the patient affirming it.

Deduplication: one deduction per (type, evidence span); absence findings per (type, reason).

Cost: time linear in the case's length (figures: bench/README.md, "Rules judge: time per KB"), also for
clauses or turns with no punctuation and long runs of digits. What a check looks up for each mention is
found once per text (clause and sentence delimiters, the turn at a position, each turn's clauses:
``document.Doc``), searches that several mentions of one clause would repeat are answered once or
incrementally, and values are compared through sorted lists.

Where each part lives (each module's docstring repeats the paragraphs of the checks it implements):

- reading: ``lexicon`` (word lists and tables), ``text`` (normalisation, clauses, numbers,
  negation), ``conversation`` (turns; who a clause is about), ``sections`` (record headings),
  ``medication`` (drug names, doses, frequency, route in a text), ``quantities`` (measurements and
  durations in a text), ``document`` (a case read once, with its drug mentions), ``facts`` (what the
  conversation affirms about the patient or a relative, what the record affirms);
- checks: ``structure`` (check 1, structure), ``history`` (checks 1, 2, 9, 10: past, family and
  personal history), ``wording`` (checks 3, 4), ``drugs`` (checks 5, 6 doses and timing, 7), ``numbers``
  (check 6: measurements), ``timeline`` (check 6: durations, order of events), ``complaint`` (checks 1,
  8, 10: chief complaint, present illness),
  ``diagnosis`` (check 10), ``statements`` (check 11: negation flips, a symptom nobody mentioned, the side
  of the body);
- ``findings``: a check's finding, and findings to one judgment per dimension.

Importing this package registers these rules (:class:`~consensus_eval.judges.rules.RubricRules`) for
rubric id ``medical_record``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from consensus_eval.domain.cases import Case
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.rubric import Rubric
from consensus_eval.judges.rules.medical_record.complaint import check_chief_complaint, check_present_illness
from consensus_eval.judges.rules.medical_record.diagnosis import check_diagnosis
from consensus_eval.judges.rules.medical_record.document import Doc
from consensus_eval.judges.rules.medical_record.drugs import check_drug_accuracy, check_drug_writing
from consensus_eval.judges.rules.medical_record.findings import Finding, judgments
from consensus_eval.judges.rules.medical_record.history import (
    check_diabetes_in_past_history,
    check_family_history,
    check_past_history,
    check_personal_history,
)
from consensus_eval.judges.rules.medical_record.numbers import check_numbers
from consensus_eval.judges.rules.medical_record.statements import (
    check_laterality,
    check_negation_flips,
    check_unsaid_symptoms,
)
from consensus_eval.judges.rules.medical_record.structure import check_structure
from consensus_eval.judges.rules.medical_record.timeline import check_durations
from consensus_eval.judges.rules.medical_record.wording import check_colloquial, check_vague_time
from consensus_eval.judges.rules.rubric_rules import RubricRules, register_rules

__all__ = ["EMITS", "PENALTIES", "RULES", "RULES_VERSION", "check_case", "require_compatible"]

RULES_VERSION = "3"

#: dimension -> category -> deduction types the rules judge can emit (checked by require_compatible)
EMITS: dict[str, dict[str, tuple[str, ...]]] = {
    "accuracy": {
        "numbers": ("value_error", "unit_error", "value_missing"),
        "drugs": ("drug_name_error", "dose_error", "usage_error", "drug_missing"),
        "timeline": ("time_error", "time_order_confused"),
        "diagnosis": ("diagnosis_error", "diagnosis_missing"),
        "course": ("fact_error",),
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

#: every check, in the order their findings are listed
_CHECKS: tuple[Callable[[Doc], Iterable[Finding]], ...] = (
    check_structure, check_diabetes_in_past_history, check_colloquial, check_vague_time,
    check_drug_writing, check_drug_accuracy, check_numbers, check_durations, check_chief_complaint,
    check_present_illness, check_past_history, check_family_history, check_personal_history,
    check_diagnosis, check_negation_flips, check_unsaid_symptoms, check_laterality,
)


def require_compatible(rubric: Rubric) -> None:
    """Raise :class:`~consensus_eval._errors.InputError` unless ``rubric`` has every id the rules judge emits."""
    RULES.require_compatible(rubric)


def check_case(case: Case, rubric: Rubric) -> dict[str, Judgment]:
    """Run every rules check on one case; one :class:`Judgment` per dimension of ``rubric``.

    Pure and deterministic. Points come from the rubric (the low end of a range type).
    """
    require_compatible(rubric)
    doc = Doc(case, rubric.roles)
    findings = [f for check in _CHECKS for f in check(doc)]
    return judgments(findings, rubric, EMITS, PENALTIES)


RULES = RubricRules(rubric_id="medical_record", version=RULES_VERSION, check_case=check_case, emits=EMITS,
                    penalties=PENALTIES)
register_rules(RULES)
