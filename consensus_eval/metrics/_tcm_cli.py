"""CLI for the TCM metrics (:mod:`consensus_eval.metrics.tcm`): ``consensus-eval metrics tcm TASK PRED GOLD``.

PRED and GOLD are JSONL files, one case a line: an ``id`` plus the fields of the task family (see
:data:`FAMILIES`). Lines are paired by ``id``. Kept light: the standard library, typer and, for the
table only, rich; never litellm.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from consensus_eval._errors import InputError
from consensus_eval._resources import resolve
from consensus_eval.domain.terminal import SafeConsole, guarded
from consensus_eval.domain.textio import escape_controls, json_type, jsonl_values, read_json
from consensus_eval.domain.writable import dumps_json
from consensus_eval.metrics import tcm

EXIT_INPUT_ERROR = 2
MAX_IDS_SHOWN = 5


class TcmInputError(InputError):
    """Unreadable or invalid input; the message names the file, the line and the field."""


# --- records --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """One JSONL line: its case id, 1-based line number and parsed fields."""

    id: str
    line: int
    data: dict[str, Any]


@dataclass(frozen=True)
class Source:
    """The records of one file, by id."""

    path: Path
    records: dict[str, Record]

    def where(self, record: Record) -> str:
        """``file:line`` of a record, for error messages."""
        return f"{self.path}:{record.line}"


@dataclass(frozen=True)
class PairedRecord:
    """A predicted and a gold record with the same id."""

    id: str
    pred: Record
    gold: Record

    def get(self, side: str, name: str) -> Any:
        """The value of field ``name`` on ``side`` ("pred" or "gold"); ``None`` when absent."""
        return (self.pred if side == "pred" else self.gold).data.get(name)


def _case_id(value: Any) -> str | None:
    """A usable case id (non-empty string or integer) as a string, else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def read_jsonl(path: Path, encoding: str | None = None) -> Source:
    """Read a JSONL file of cases (the one JSON Lines reader, :func:`~consensus_eval.domain.textio.jsonl_values`:
    UTF-8, a BOM tolerated, or ``encoding``); raise :class:`TcmInputError` naming file and line on any problem."""
    errors: list[str] = []
    records: dict[str, Record] = {}
    for _, number, data in jsonl_values(path, errors, what="cases", encoding=encoding):
        if errors:
            break
        if not isinstance(data, dict):
            raise TcmInputError(f"{path}:{number}: expected a JSON object, got {json_type(data)}")
        if "id" not in data:
            raise TcmInputError(f"{path}:{number}: field 'id' is missing")
        case_id = _case_id(data["id"])
        if case_id is None:
            raise TcmInputError(
                f"{path}:{number}: field 'id': expected a non-empty string or an integer, got {json_type(data['id'])}"
            )
        if case_id in records:
            raise TcmInputError(
                f"{path}:{number}: field 'id': duplicate id {case_id!r} (first on line {records[case_id].line})"
            )
        records[case_id] = Record(case_id, number, data)
    if errors:   # the first line that is not UTF-8 or not JSON
        raise TcmInputError(errors[0])
    if not records:
        raise TcmInputError(f"{path}: no cases (the file has no JSON line)")
    return Source(path, records)


def _missing(ids: Sequence[str], present: Source, absent: Source) -> str:
    """Message for ids that are in ``present`` but have no line in ``absent``."""
    shown = ", ".join(f"{i!r} ({present.where(present.records[i])})" for i in ids[:MAX_IDS_SHOWN])
    more = f" and {len(ids) - MAX_IDS_SHOWN} more" if len(ids) > MAX_IDS_SHOWN else ""
    return f"{absent.path}: no line with field 'id' = {shown}{more}"


def pair_by_id(pred: Source, gold: Source) -> list[PairedRecord]:
    """Pair the predicted and gold records by id, in gold order; every id must be on both sides."""
    no_pred = [i for i in gold.records if i not in pred.records]
    if no_pred:
        raise TcmInputError(_missing(no_pred, gold, pred))
    no_gold = [i for i in pred.records if i not in gold.records]
    if no_gold:
        raise TcmInputError(_missing(no_gold, pred, gold))
    return [PairedRecord(i, pred.records[i], gold.records[i]) for i in gold.records]


# --- field validation -----------------------------------------------------------------------------

Validator = Callable[[Any], str | None]  # None when valid, else what was expected and found


def _is_scalar(value: Any) -> bool:
    """A JSON scalar: null, string, number or boolean."""
    return value is None or isinstance(value, (str, int, float, bool))


def _v_labels(value: Any) -> str | None:
    """A label or a list of labels: a string, an array of strings (nulls allowed) or null."""
    if value is None or isinstance(value, str):
        return None
    if isinstance(value, list):
        for i, item in enumerate(value):
            if item is not None and not isinstance(item, str):
                return f"expected a string or an array of strings, but item {i} is {json_type(item)}"
        return None
    return f"expected a string or an array of strings, got {json_type(value)}"


def _v_text(value: Any) -> str | None:
    """Free text: a string or null."""
    return None if value is None or isinstance(value, str) else f"expected a string, got {json_type(value)}"


def _v_object(value: Any) -> str | None:
    """Any JSON object, or null."""
    return None if value is None or isinstance(value, dict) else f"expected an object, got {json_type(value)}"


def _v_features(value: Any) -> str | None:
    """An object feature -> scalar value (or array of scalars), or null."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"expected an object of feature -> value, got {json_type(value)}"
    for key, item in value.items():
        ok = _is_scalar(item) or (isinstance(item, list) and all(_is_scalar(x) for x in item))
        if not ok:
            return f"expected an object of feature -> value, but {key!r} is {json_type(item)}"
    return None


def _v_classes(value: Any) -> str | None:
    """An object symptom -> class (string or null), or null."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"expected an object of symptom -> class, got {json_type(value)}"
    for key, item in value.items():
        if item is not None and not isinstance(item, str):
            return f"expected an object of symptom -> class (a string), but {key!r} is {json_type(item)}"
    return None


def _v_dialogue(value: Any) -> str | None:
    """An array of turn objects whose optional ``role`` is a string, or null."""
    if value is None:
        return None
    if not isinstance(value, list):
        return f'expected an array of turns like {{"role": "doctor", "content": "..."}}, got {json_type(value)}'
    for i, turn in enumerate(value):
        if not isinstance(turn, dict):
            return f"expected an array of turn objects, but turn {i} is {json_type(turn)}"
        if "role" in turn and not isinstance(turn["role"], str):
            return f"turn {i}: 'role' must be a string, got {json_type(turn['role'])}"
    return None


def _v_modal(value: Any) -> str | None:
    """An object examination -> labels, or null."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"expected an object of examination -> syndromes, got {json_type(value)}"
    for key, item in value.items():
        problem = _v_labels(item)
        if problem:
            return f"examination {key!r}: {problem}"
    return None


def _is_dose(value: Any) -> bool:
    """A dose: a number (not a boolean) or null."""
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _v_doses(value: Any) -> str | None:
    """An object herb -> dose or an array of [herb, dose] pairs, with no conflicting duplicate herb."""
    if value is None:
        return None
    if isinstance(value, dict):
        for herb, dose in value.items():
            if not _is_dose(dose):
                return f"expected an object of herb -> dose (a number), but {herb!r} is {json_type(dose)}"
    elif isinstance(value, list):
        for i, pair in enumerate(value):
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and _is_dose(pair[1])):
                return f"expected an array of [herb, dose] pairs, but item {i} is not one"
    else:
        return f"expected an object of herb -> dose, got {json_type(value)}"
    try:
        tcm.normalize_dosages(value, "dosages")  # duplicates, negative or non-finite doses
    except (TypeError, ValueError) as exc:
        return str(exc).removeprefix("dosages: ")
    return None


def _v_herbs(value: Any) -> str | None:
    """Herb names: an array of strings, or an object herb -> dose (its herbs are used)."""
    if isinstance(value, dict):
        return _v_doses(value)
    problem = _v_labels(value)
    if problem is None:
        return None
    return problem.replace("a string or an array of strings", "an array of herb names or an object herb -> dose")


# --- task families --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldSpec:
    """A field a task family reads: its JSON name, validator, side and meaning."""

    name: str
    validate: Validator
    side: str  # "both": compared pred vs gold; "pred" or "gold": read from that side only
    help: str


@dataclass(frozen=True)
class Options:
    """Command options the metrics need."""

    aspects: list[str] | None = None
    tolerance: float = 0.2
    knowledge: dict[str, Any] = field(default_factory=dict)
    #: encoding of PRED and GOLD (None: UTF-8, with or without BOM: JSON Lines are UTF-8)
    encoding: str | None = None


@dataclass(frozen=True)
class Row:
    """One reported metric: name, value and number of cases it was computed over."""

    metric: str
    value: float
    cases: int


Compute = Callable[[list[PairedRecord], Options], list[Row]]


@dataclass(frozen=True)
class Family:
    """A task family: its fields and the function computing its metrics."""

    name: str
    title: str
    fields: tuple[FieldSpec, ...]
    compute: Compute


def _with(cases: list[PairedRecord], side: str, name: str) -> list[PairedRecord]:
    """The cases whose ``side`` record carries a non-null ``name``."""
    return [c for c in cases if c.get(side, name) is not None]


def _values(cases: list[PairedRecord], side: str, name: str) -> list[Any]:
    """The values of field ``name`` on ``side`` for each case (``None`` where absent)."""
    return [c.get(side, name) for c in cases]


def _mean_rows(metric: str, per_case: Sequence[float | dict[str, float]], n: int) -> list[Row]:
    """Average per-case values (floats, or dictionaries of floats) over cases into rows."""
    if not per_case:
        return []
    dicts = [case for case in per_case if isinstance(case, dict)]
    if dicts:
        return [Row(f"{metric}.{k}", sum(d[k] for d in dicts) / n, n) for k in dicts[0]]
    return [Row(metric, sum(case for case in per_case if not isinstance(case, dict)) / n, n)]


def _dict_rows(metric: str, result: dict[str, float], n: int) -> list[Row]:
    """One row per key of a metric returning a dictionary (feature accuracies, P/R/F1)."""
    return [Row(f"{metric}.{k}", v, n) for k, v in result.items()]


def _compared(cases: list[PairedRecord], name: str,
              fn: Callable[[list[Any], list[Any]], float | dict[str, float]], metric: str) -> list[Row]:
    """``fn(predicted values, gold values)`` of field ``name`` over the cases whose gold carries it: one row,
    or one per key of a dictionary result (feature accuracies, P/R/F1); none when no gold carries it."""
    scored = _with(cases, "gold", name)
    if not scored:
        return []
    result = fn(_values(scored, "pred", name), _values(scored, "gold", name))
    if isinstance(result, dict):
        return _dict_rows(metric, result, len(scored))
    return [Row(metric, result, len(scored))]


def _completeness_row(cases: list[PairedRecord], name: str, fn: Callable[..., float], metric: str,
                      opts: Options) -> list[Row]:
    """Completeness over the cases whose prediction carries the text field ``name``."""
    scored = _with(cases, "pred", name)
    if not scored:
        return []
    return [Row(metric, fn(_values(scored, "pred", name), opts.aspects), len(scored))]


def _mean_over(cases: list[PairedRecord], name: str, metric: str,
               per_case: Callable[[PairedRecord], float | dict[str, float]], side: str = "gold") -> list[Row]:
    """The mean of ``per_case`` over the cases whose ``side`` record carries ``name`` (:func:`_mean_rows`)."""
    scored = _with(cases, side, name)
    return _mean_rows(metric, [per_case(c) for c in scored], len(scored))


def _syndrome_rows(cases: list[PairedRecord], per_case: Callable[[PairedRecord], float]) -> list[Row]:
    """Mean syndrome correlation over the cases whose gold carries ``syndromes``."""
    return _mean_over(cases, "syndromes", "syndrome_correlation", per_case)


def _looked_at(features: Callable[[list[Any], list[Any]], dict[str, float]], description: Callable[..., float],
               knowledge_key: str, syndromes: Callable[[Any, Any, Any], float]) -> Compute:
    """face and tongue: feature accuracy, description completeness and syndrome correlation (read with the
    knowledge entry ``knowledge_key``), by the family's three metrics."""
    def compute(cases: list[PairedRecord], opts: Options) -> list[Row]:
        knowledge = opts.knowledge.get(knowledge_key)
        return (
            _compared(cases, "features", features, "feature_accuracy")
            + _completeness_row(cases, "description", description, "description_completeness", opts)
            + _syndrome_rows(cases, lambda c: syndromes(c.get("pred", "syndromes"), c.get("gold", "syndromes"),
                                                        knowledge))
        )
    return compute


#: face: feature accuracy (seed 1.1), description completeness (1.2), syndrome correlation (1.3)
_face = _looked_at(tcm.calculate_feature_recognition_accuracy, tcm.calculate_face_description_completeness,
                   "syndrome_similarity", tcm.calculate_face_syndrome_correlation)
#: tongue: feature accuracy (seed 2.1), description completeness (2.2), syndrome correlation (2.3)
_tongue = _looked_at(tcm.calculate_tongue_feature_recognition_accuracy, tcm.calculate_tongue_description_completeness,
                     "tongue_knowledge_base", tcm.calculate_tongue_syndrome_correlation)


def _sound(cases: list[PairedRecord], opts: Options) -> list[Row]:
    """sound: classification (seed 3.1), feature detail (3.2), syndromes (3.3), description (3.4), voice (3.5)."""
    rows = _compared(cases, "sound_type", tcm.calculate_sound_classification_accuracy, "classification_accuracy")
    rows += _compared(cases, "features", tcm.calculate_sound_feature_recognition_detail, "feature_detail")
    rows += _compared(cases, "voice", tcm.calculate_voice_analysis_accuracy, "voice_accuracy")
    rows += _completeness_row(cases, "description", tcm.calculate_sound_description_completeness,
                              "description_completeness", opts)
    smap = opts.knowledge.get("sound_syndrome_map")
    rows += _syndrome_rows(cases, lambda c: tcm.calculate_sound_syndrome_correlation(
        c.get("gold", "sound_features"), c.get("pred", "syndromes"), c.get("gold", "syndromes"), smap))
    return rows


def _inquiry(cases: list[PairedRecord], opts: Options) -> list[Row]:
    """inquiry: symptom recognition and classification, completeness, efficiency, diagnosis (seed 4.1-4.5)."""
    required = opts.aspects if opts.aspects is not None else list(tcm.INQUIRY_REQUIRED_INFO)
    rows = _compared(cases, "symptoms", tcm.calculate_symptom_recognition_rate, "symptom_recognition")
    rows += _compared(cases, "symptom_classes", tcm.calculate_symptom_classification_accuracy,
                      "symptom_classification_accuracy")
    collected = _with(cases, "pred", "collected")
    if collected:
        value = tcm.calculate_inquiry_completeness(_values(collected, "pred", "collected"), required)
        rows.append(Row("inquiry_completeness", value, len(collected)))
    talked = _with(cases, "pred", "dialogue")
    if talked:
        value = tcm.calculate_inquiry_efficiency(
            _values(talked, "pred", "dialogue"), _values(talked, "pred", "collected"), required)
        rows.append(Row("inquiry_efficiency", value, len(talked)))
    rows += _compared(cases, "diagnoses", tcm.calculate_diagnosis_relevance, "diagnosis_relevance")
    return rows


def _pulse(cases: list[PairedRecord], opts: Options) -> list[Row]:
    """pulse: classification (seed 5.1), features (5.2), syndrome correlation (5.3), interpretation (5.4)."""
    rows = _compared(cases, "pulse", tcm.calculate_pulse_classification_accuracy, "classification_accuracy")
    rows += _compared(cases, "features", tcm.calculate_pulse_feature_accuracy, "feature_accuracy")
    rows += _completeness_row(cases, "interpretation", tcm.calculate_pulse_interpretation_completeness,
                              "interpretation_completeness", opts)
    pmap = opts.knowledge.get("pulse_syndrome_map")
    rows += _syndrome_rows(cases, lambda c: tcm.calculate_pulse_syndrome_correlation(
        c.get("pred", "syndromes"), c.get("gold", "syndromes"), c.get("gold", "pulse_features"), pmap))
    return rows


def _syndrome(cases: list[PairedRecord], opts: Options) -> list[Row]:
    """syndrome: differentiation P/R/F1 (seed 6.3), modal consistency (6.1), clinical relevance (6.4)."""
    rows = _mean_over(cases, "syndromes", "differentiation", lambda c: tcm.calculate_syndrome_differentiation_accuracy(
        c.get("pred", "syndromes"), c.get("gold", "syndromes")))
    rows += _mean_over(cases, "modal", "modal_consistency", lambda c: tcm.calculate_modal_consistency(
        c.get("pred", "modal")), side="pred")
    cmap = opts.knowledge.get("syndrome_clinical_map")
    if cmap:
        rows += _mean_over(cases, "clinical_features", "clinical_relevance", lambda c: tcm.calculate_clinical_relevance(
            c.get("pred", "syndromes"), c.get("gold", "clinical_features"), cmap))
    return rows


def _prescription(cases: list[PairedRecord], opts: Options) -> list[Row]:
    """prescription: herb P/R/F1 (seed 7.1), explanation (7.3), prescription-syndrome match (7.4)."""
    rows = _mean_over(cases, "herbs", "herbs", lambda c: tcm.calculate_prescription_accuracy(
        c.get("pred", "herbs"), c.get("gold", "herbs")))
    explained = [c for c in cases if c.get("gold", "keywords") is not None or c.get("gold", "reasonings") is not None]
    rows += _mean_rows("explanation", [
        tcm.calculate_explanation_rationality(
            c.get("pred", "explanation"), c.get("gold", "keywords"), c.get("gold", "reasonings"))
        for c in explained], len(explained))
    psmap = opts.knowledge.get("prescription_syndrome_map")
    if psmap:
        rows += _mean_over(cases, "syndromes", "syndrome_match", lambda c: tcm.calculate_prescription_syndrome_match(
            c.get("pred", "name"), c.get("gold", "syndromes"), psmap))
    return rows


def _dosage(cases: list[PairedRecord], opts: Options) -> list[Row]:
    """dosage: mean dosage rationality over cases (seed 7.2)."""
    scored = _with(cases, "gold", "dosages")
    per_case = []
    for c in scored:
        try:
            per_case.append(tcm.calculate_dosage_rationality(c.get("pred", "dosages"), c.get("gold", "dosages"),
                                                             opts.tolerance))
        except ValueError as exc:  # defensive: the validator already normalised both sides
            raise TcmInputError(f"case {c.id!r} (pred line {c.pred.line}, gold line {c.gold.line}): "
                                f"field 'dosages': {exc}") from None
    return _mean_rows("dosage_rationality", per_case, len(scored))


def _agreement(cases: list[PairedRecord], opts: Options) -> list[Row]:
    """agreement: human-AI agreement (seed 9.2), gold = expert, pred = model."""
    return _compared(cases, "diagnoses", lambda pred, gold: tcm.calculate_human_ai_agreement(gold, pred),
                     "human_ai_agreement")


_FEATURES = "object feature -> value"
_SYNDROMES = FieldSpec("syndromes", _v_labels, "both", "syndromes (array of strings)")

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("face", "望诊 face (seed 1)", (
            FieldSpec("features", _v_features, "both", f'{_FEATURES}, e.g. {{"face_color": "淡白"}}'),
            FieldSpec("description", _v_text, "pred", "text, scored for --aspects (default 面色,形体,神态,表情)"),
            _SYNDROMES,
        ), _face),
        Family("tongue", "望诊 tongue (seed 2)", (
            FieldSpec("features", _v_features, "both", f"{_FEATURES}: tongue_color, tongue_shape, tongue_coating"),
            FieldSpec("description", _v_text, "pred", "text, scored for --aspects (default 舌质,舌色,舌形,舌苔,...)"),
            _SYNDROMES,
        ), _tongue),
        Family("sound", "闻诊 sound and voice (seed 3)", (
            FieldSpec("sound_type", _v_text, "both", "sound class, e.g. 咳嗽"),
            FieldSpec("features", _v_features, "both",
                      f"{_FEATURES}: sound_type, intensity, frequency, quality, rhythm"),
            FieldSpec("voice", _v_features, "both", f'{_FEATURES}, e.g. {{"tone": "低沉"}}'),
            FieldSpec("description", _v_text, "pred",
                      "text, scored for --aspects (default 音色,强度,持续时间,节律,病理特征)"),
            _SYNDROMES,
            FieldSpec("sound_features", _v_labels, "gold", "sound cues for the knowledge sound_syndrome_map"),
        ), _sound),
        Family("inquiry", "问诊 inquiry (seed 4)", (
            FieldSpec("symptoms", _v_labels, "both", "array of symptoms"),
            FieldSpec("symptom_classes", _v_classes, "both", "object symptom -> TCM class"),
            FieldSpec("collected", _v_object, "pred", "object category -> info, scored for --aspects "
                                                       "(default 主诉,发病时间,伴随症状,既往史)"),
            FieldSpec("dialogue", _v_dialogue, "pred", 'array of {"role": "doctor"|"patient", "content": ...}'),
            FieldSpec("diagnoses", _v_labels, "both", "diagnosis or array of diagnoses"),
        ), _inquiry),
        Family("pulse", "切诊 pulse (seed 5)", (
            FieldSpec("pulse", _v_labels, "both", "pulse type, 兼 for compound (弦兼数), or an array of types"),
            FieldSpec("features", _v_features, "both", f"{_FEATURES}: rate, strength, rhythm, depth, width"),
            FieldSpec("interpretation", _v_text, "pred", "text, scored for --aspects (default 脉象类型,脉率,...)"),
            _SYNDROMES,
            FieldSpec("pulse_features", _v_labels, "gold", "pulse cues for the knowledge pulse_syndrome_map"),
        ), _pulse),
        Family("syndrome", "四诊合参 syndrome differentiation (seed 6)", (
            _SYNDROMES,
            FieldSpec("modal", _v_modal, "pred", "object examination -> syndromes, e.g. {\"望诊\": [...]}"),
            FieldSpec("clinical_features", _v_labels, "gold", "observed features, for syndrome_clinical_map"),
        ), _syndrome),
        Family("prescription", "方剂 prescription composition and explanation (seed 7.1, 7.3, 7.4)", (
            FieldSpec("herbs", _v_herbs, "both", "array of herb names (or object herb -> dose)"),
            FieldSpec("explanation", _v_text, "pred", "text explaining the prescription"),
            FieldSpec("keywords", _v_labels, "gold", "keywords the explanation should contain"),
            FieldSpec("reasonings", _v_labels, "gold", "reasonings, clauses split on commas"),
            FieldSpec("name", _v_text, "pred", "formula name, for prescription_syndrome_map"),
            FieldSpec("syndromes", _v_labels, "gold", "syndromes the formula should treat"),
        ), _prescription),
        Family("dosage", "方剂 dosage (seed 7.2)", (
            FieldSpec("dosages", _v_doses, "both", "object herb -> dose in grams (or [herb, dose] pairs)"),
        ), _dosage),
        Family("agreement", "人机一致性 human-AI agreement (seed 9.2): gold = expert, pred = model", (
            FieldSpec("diagnoses", _v_labels, "both", "diagnosis or array of diagnoses"),
        ), _agreement),
    )
}

TcmTask = enum.Enum("TcmTask", {name: name for name in FAMILIES}, type=str)  # type: ignore[misc]

KNOWLEDGE_KEYS: dict[str, str] = {
    "syndrome_similarity": "face: {syndrome: {syndrome: similarity in [0, 1]}}",
    "tongue_knowledge_base": 'tongue: {syndrome: {"tongue_color": [...], "tongue_shape": [...], '
                             '"tongue_coating": [...]}}',
    "sound_syndrome_map": "sound: {sound feature: [syndromes]}, read with gold sound_features",
    "pulse_syndrome_map": "pulse: {pulse feature: [syndromes]}, read with gold pulse_features",
    "syndrome_clinical_map": "syndrome: {syndrome: [clinical features]}, read with gold clinical_features",
    "prescription_syndrome_map": "prescription: {formula name: [syndromes]}, read with pred name",
}

# One call per knowledge key that makes the metric parse (and so validate) the whole mapping.
_KNOWLEDGE_PROBES: dict[str, Callable[[Any], object]] = {
    "syndrome_similarity": lambda m: tcm.calculate_face_syndrome_correlation(["?"], ["?"], m),
    "tongue_knowledge_base": lambda m: tcm.calculate_tongue_syndrome_correlation(["?"], ["?"], m),
    "sound_syndrome_map": lambda m: tcm.calculate_sound_syndrome_correlation(["?"], ["?"], ["?"], m),
    "pulse_syndrome_map": lambda m: tcm.calculate_pulse_syndrome_correlation(["?"], ["?"], ["?"], m),
    "syndrome_clinical_map": lambda m: tcm.calculate_clinical_relevance(["?"], ["?"], m),
    "prescription_syndrome_map": lambda m: tcm.calculate_prescription_syndrome_match("?", ["?"], m),
}


def validate_fields(family: Family, source: Source, side: str) -> None:
    """Check the type of every field of ``family`` present on ``side``; raise naming file, line, field."""
    specs = [s for s in family.fields if s.side in ("both", side)]
    for record in source.records.values():
        for spec in specs:
            if spec.name in record.data:
                problem = spec.validate(record.data[spec.name])
                if problem:
                    raise TcmInputError(f"{source.where(record)}: field {spec.name!r}: {problem}")


def load_knowledge(path: Path | None) -> dict[str, Any]:
    """Read the optional knowledge JSON file (similarity matrix and maps) and validate each entry."""
    if path is None:
        return {}
    data = read_json(path, "knowledge")   # UTF-8 JSON, as every JSON file (textio)
    if not isinstance(data, dict):
        raise TcmInputError(f"{path}: expected a JSON object with keys {', '.join(KNOWLEDGE_KEYS)}")
    for key, value in data.items():
        if key not in KNOWLEDGE_KEYS:
            raise TcmInputError(f"{path}: unknown key {key!r}; known keys: {', '.join(KNOWLEDGE_KEYS)}")
        if not isinstance(value, dict):
            raise TcmInputError(f"{path}: key {key!r}: expected an object, got {json_type(value)}")
        try:
            _KNOWLEDGE_PROBES[key](value)
        except (TypeError, ValueError) as exc:
            raise TcmInputError(f"{path}: key {key!r}: {exc}") from None
    return data


def parse_aspects(raw: str | None) -> list[str] | None:
    """Split ``--aspects`` on commas (ASCII, full-width or 、); ``None`` keeps the task's default."""
    if raw is None:
        return None
    for sep in ("，", "、"):
        raw = raw.replace(sep, ",")
    aspects = [a.strip() for a in raw.split(",") if a.strip()]
    if not aspects:
        raise TcmInputError("--aspects is empty: give a comma-separated list such as 舌质,舌苔")
    return aspects


#: the feature keys a family scores, where it has a fixed list (other keys are ignored by its metrics)
FIXED_FEATURE_KEYS: dict[str, tuple[str, ...]] = {
    "tongue": tcm.TONGUE_FEATURES,
    "sound": tcm.SOUND_FEATURES,
    "pulse": tcm.PULSE_FEATURES,
}


def check_task_fields(task: str, pred: Source, gold: Source) -> None:
    """Refuse the files of another task before they are scored as zeros.

    - A compared field (side ``both``) the gold carries but no prediction line has at all (not even
      as ``null``): the predictions are of another task (or another field name).
    - tongue, sound, pulse: a gold ``features`` object with none of the keys the task scores.
    - face (free feature keys): gold ``features`` whose keys all belong to tongue, sound or pulse.
    """
    family = FAMILIES[task]
    for spec in family.fields:
        if spec.side != "both":
            continue
        in_gold = [r for r in gold.records.values() if r.data.get(spec.name) is not None]
        if in_gold and not any(spec.name in r.data for r in pred.records.values()):
            raise TcmInputError(
                f"{pred.path}: no line has the field {spec.name!r} that task {task!r} compares "
                f"({gold.where(in_gold[0])} has it): are these predictions of another task? "
                f"(write \"{spec.name}\": null for a case with no answer)")
    expected = FIXED_FEATURE_KEYS.get(task)
    featured = [r for r in gold.records.values() if isinstance(r.data.get("features"), dict) and r.data["features"]]
    if expected is not None:
        for r in featured:
            found = list(r.data["features"])
            if not any(k in expected for k in found):
                raise TcmInputError(
                    f"{gold.where(r)}: field 'features': none of the keys task {task!r} scores "
                    f"({', '.join(expected)}); this line has {', '.join(map(str, found))}: "
                    "are these the files of another task?")
    elif task == "face" and featured:
        keys = {k for r in featured for k in r.data["features"]}
        for other, other_keys in FIXED_FEATURE_KEYS.items():
            if keys <= set(other_keys):
                raise TcmInputError(
                    f"{gold.path}: field 'features': every key ({', '.join(sorted(keys))}) is a {other} "
                    f"feature, none a face feature (face_color, ...): are these the files of task {other!r}?")
    _check_own_fields(task, pred, gold)


def _check_own_fields(task: str, pred: Source, gold: Source) -> None:
    """Refuse files that carry fields of other tasks and none that ``task`` reads besides ``syndromes`` (which
    most tasks share): scored, only the shared field would count (``metrics tcm pulse`` on syndrome files
    scored their syndromes alone and exited 0)."""
    fields = {spec.name for spec in FAMILIES[task].fields}
    own = fields - {_SYNDROMES.name}
    present = {k for source in (pred, gold) for r in source.records.values() for k, v in r.data.items()
               if v is not None}
    if not own or present & own or not present & fields:  # none of its fields at all: "nothing to score" later
        return
    others = {name: {spec.name for spec in f.fields} for name, f in FAMILIES.items() if name != task}
    foreign = sorted(present & set().union(*others.values()) - fields)
    if not foreign:
        return
    tasks = [name for name, names in others.items() if names & set(foreign)]
    raise TcmInputError(
        f"{pred.path}, {gold.path}: no line has a field task {task!r} reads besides syndromes (expected "
        f"{', '.join(sorted(own))}); the lines have {', '.join(foreign)}, fields of task(s) {', '.join(tasks)}: "
        "are these the files of another task?")


def evaluate_files(task: str, pred_path: Path, gold_path: Path, opts: Options) -> dict[str, Any]:
    """Read, validate and pair the two files, compute the task's metrics; return a JSON-ready summary."""
    family = FAMILIES[task]
    pred = read_jsonl(pred_path, opts.encoding)
    gold = read_jsonl(gold_path, opts.encoding)
    validate_fields(family, pred, "pred")
    validate_fields(family, gold, "gold")
    check_task_fields(task, pred, gold)
    cases = pair_by_id(pred, gold)
    try:
        rows = family.compute(cases, opts)
    except (TypeError, ValueError) as exc:  # defensive: field types were validated above
        raise TcmInputError(str(exc)) from None
    if not rows:
        gold_fields = [s.name for s in family.fields if s.side in ("both", "gold")]
        pred_fields = [s.name for s in family.fields if s.side == "pred"]
        raise TcmInputError(
            f"nothing to score for task {task!r}: {gold_path} has none of the fields {', '.join(gold_fields)}"
            + (f" and {pred_path} none of {', '.join(pred_fields)}" if pred_fields else "")
            + (" (some metrics also need --knowledge)" if task in ("syndrome", "prescription") else "")
        )
    return {
        "task": task,
        "pred": str(pred_path),
        "gold": str(gold_path),
        "cases": len(cases),
        "metrics": {r.metric: r.value for r in rows},
        "cases_per_metric": {r.metric: r.cases for r in rows},
    }


def render_table(summary: dict[str, Any]) -> None:
    """Print the metrics as a rich table."""
    from rich.table import Table

    family = FAMILIES[summary["task"]]
    table = Table(title=f"TCM {family.name}: {summary['cases']} cases paired by id", caption=family.title)
    table.add_column("Metric", no_wrap=True)
    table.add_column("Value", justify="right")
    table.add_column("Cases", justify="right")  # cases carrying the metric's field
    for metric, value in summary["metrics"].items():
        table.add_row(metric, f"{value:.4f}", str(summary["cases_per_metric"][metric]))
    SafeConsole().print(table)  # a label from the files may hold control characters: shown escaped


def _help() -> str:
    """The command help: usage, then each family's fields (built from :data:`FAMILIES`)."""
    lines = [
        "TCM metrics over two JSONL files, one case a line, paired by `id`.",
        "",
        "Each line holds an `id` plus the fields of TASK below (other fields are ignored). A metric is"
        " reported when its field is present: compared fields are read from GOLD and PRED (a missing"
        " PRED value scores as no answer), [pred] and [gold] fields from that file only. Labels are compared"
        " after NFKC normalisation and strip. Exit code 2 on unreadable or invalid input.",
        "",
        "Example: consensus-eval metrics tcm tongue examples/tcm/tongue_pred.jsonl examples/tcm/tongue_gold.jsonl",
    ]
    for family in FAMILIES.values():
        lines += ["", f"{family.name} — {family.title}:"]
        for spec in family.fields:
            tag = "" if spec.side == "both" else f" [{spec.side}]"
            lines += ["", f"  • {spec.name}{tag}: {spec.help}"]
    return "\n".join(lines)


def tcm_command(
    task: Annotated[TcmTask, typer.Argument(
        metavar="TASK", help="Task family.", show_default=False, case_sensitive=False)],
    pred: Annotated[Path, typer.Argument(metavar="PRED", help="Predictions, JSONL.", show_default=False)],
    gold: Annotated[Path, typer.Argument(metavar="GOLD", help="Gold references, JSONL.", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary instead of a table.")] = False,
    aspects: Annotated[str | None, typer.Option(
        "--aspects", help="Comma-separated required aspects (face, tongue, sound descriptions; pulse "
                          "interpretation) or required information categories (inquiry). Default: the seed's list.",
        show_default=False)] = None,
    tolerance: Annotated[float, typer.Option(
        "--tolerance", help="dosage: relative dose error scored in full; the score then falls linearly to 0 "
                            "at 100% error. In [0, 1).")] = 0.2,
    knowledge: Annotated[Path | None, typer.Option(
        "--knowledge", help="JSON object with any of: " + "; ".join(
            f"{k} ({v})" for k, v in KNOWLEDGE_KEYS.items()), show_default=False)] = None,
    encoding: Annotated[str | None, typer.Option(
        "--encoding", help="Encoding of PRED and GOLD (default: UTF-8, with or without BOM, as JSON Lines are).",
        show_default=False)] = None,
) -> None:
    try:
        if not 0.0 <= tolerance < 1.0:
            raise TcmInputError(f"--tolerance must be in [0, 1), got {tolerance}")
        opts = Options(
            aspects=parse_aspects(aspects),
            tolerance=tolerance,
            knowledge=load_knowledge(None if knowledge is None else resolve(knowledge, "examples")),
            encoding=encoding,
        )
        summary = evaluate_files(task.value, resolve(pred, "examples"), resolve(gold, "examples"), opts)
    except InputError as exc:  # TcmInputError, and read_text's errors
        typer.echo(f"error: {escape_controls(str(exc))}", err=True)
        raise typer.Exit(EXIT_INPUT_ERROR) from None
    if as_json:
        typer.echo(dumps_json(summary, ensure_ascii=False, indent=2))
    else:
        render_table(summary)


tcm_command.__doc__ = _help()


def register(app: typer.Typer) -> None:
    """Add the `tcm` command to the `metrics` sub-app."""
    app.command("tcm")(guarded(tcm_command))
