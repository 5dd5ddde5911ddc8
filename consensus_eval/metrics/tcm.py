"""TCM (traditional Chinese medicine) metrics, sections 1 to 9 of their definitions.

The definitions came with reference code, called "the seed" below (its section numbers: "seed 9.2").
Every ``calculate_*`` function keeps the seed's name and argument order, and gives the seed's numbers on ordinary
input (well-formed lists of clean labels, equal lengths, positive doses). Where the seed's code
crashes or silently misbehaves, these functions follow the rules below instead; each function's
docstring repeats the rules that matter for it.

Rules shared by all functions
-----------------------------
* **Labels are normalised** before any comparison: every string label (syndrome, symptom, herb,
  feature value, pulse type, dictionary key) goes through :func:`normalize_label`, i.e. Unicode NFKC
  then ``strip()``. So ``"黄芪 "``, ``"黄芪\u3000"`` and ``"黄芪"`` are the same herb, and full-width
  ASCII (``"ＡＢ"``) equals half-width (``"AB"``). A label that is empty after normalisation is dropped.
* **A string is one label**, never a collection of characters: where the seed calls ``set(x)`` on a
  list of labels, passing ``"脾虚"`` instead of ``["脾虚"]`` would split it into ``{"脾", "虚"}``;
  here it is the single label ``"脾虚"``. Duplicate labels count once.
* **None**: in a reference it means "no gold for this item", and the item is left out of the
  denominator; in a prediction it means "no answer", and the item is scored as wrong (or as an empty
  answer). A whole ``None`` prediction list or dictionary is treated as empty.
* **Paired lists must have equal lengths**: a mismatch raises ``ValueError`` naming both arguments
  and their lengths (the seed silently truncated in four functions).
* **Nothing to score gives 0.0**, as in the seed (empty case lists, no common herb, ...).
  **A broken configuration raises ValueError** instead of dividing by zero: an empty list of required
  aspects, a tolerance outside ``[0, 1)``, negative or all-zero weights, an empty baseline for the
  fusion gain, non-finite numbers.
* **Two empty label sets are identical**: their Jaccard similarity is 1.0 (the package's one
  Jaccard, :func:`consensus_eval.domain.sets.jaccard`), where the seed's code writes 0.0 for 0/0.
  Seed 9.2's human-AI agreement keeps its own rule on top: a case where either side is empty scores 0.
* **Text coverage** (description completeness, explanation keywords) is a case-insensitive substring
  test on NFKC-normalised text.

Per-case functions (syndrome correlations, P/R/F1 of one prescription, dosage of one prescription)
score one case; the ``consensus-eval metrics tcm`` command averages them over cases.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from consensus_eval._errors import UsageError
from consensus_eval.domain.sets import jaccard

__all__ = [
    "DEFAULT_SYNDROME_SIMILARITY",
    "DEFAULT_TCM_WEIGHTS",
    "DOCTOR_ROLES",
    "FACE_ASPECTS",
    "INQUIRY_REQUIRED_INFO",
    "PULSE_ASPECTS",
    "PULSE_FEATURES",
    "SOUND_ASPECTS",
    "SOUND_FEATURES",
    "TONGUE_ASPECTS",
    "TONGUE_FEATURES",
    "calculate_clinical_relevance",
    "calculate_comprehensive_score",
    "calculate_diagnosis_relevance",
    "calculate_dosage_rationality",
    "calculate_explanation_rationality",
    "calculate_face_description_completeness",
    "calculate_face_syndrome_correlation",
    "calculate_feature_recognition_accuracy",
    "calculate_fusion_gain",
    "calculate_human_ai_agreement",
    "calculate_inquiry_completeness",
    "calculate_inquiry_efficiency",
    "calculate_modal_consistency",
    "calculate_prescription_accuracy",
    "calculate_prescription_syndrome_match",
    "calculate_pulse_classification_accuracy",
    "calculate_pulse_feature_accuracy",
    "calculate_pulse_interpretation_completeness",
    "calculate_pulse_syndrome_correlation",
    "calculate_sound_classification_accuracy",
    "calculate_sound_description_completeness",
    "calculate_sound_feature_recognition_detail",
    "calculate_sound_syndrome_correlation",
    "calculate_symptom_classification_accuracy",
    "calculate_symptom_recognition_rate",
    "calculate_syndrome_differentiation_accuracy",
    "calculate_tcm_professionalism_score",
    "calculate_tongue_description_completeness",
    "calculate_tongue_feature_recognition_accuracy",
    "calculate_tongue_syndrome_correlation",
    "calculate_voice_analysis_accuracy",
    "normalize_dosages",
    "normalize_label",
]

# --- constants from the seed ----------------------------------------------------------------------

#: Required aspects of a face description (the example in the seed's docstring; the seed has no default).
FACE_ASPECTS: tuple[str, ...] = ("面色", "形体", "神态", "表情")
#: Required aspects of a tongue description (seed 2.2 default).
TONGUE_ASPECTS: tuple[str, ...] = ("舌质", "舌色", "舌形", "舌苔", "舌苔颜色", "舌苔厚薄")
#: Required aspects of a sound description (seed 3.4 default).
SOUND_ASPECTS: tuple[str, ...] = ("音色", "强度", "持续时间", "节律", "病理特征")
#: Required aspects of a pulse interpretation (seed 5.4 default).
PULSE_ASPECTS: tuple[str, ...] = ("脉象类型", "脉率", "脉势", "脉位", "脉体", "临床意义")
#: Information an inquiry must collect (the example in the seed's docstring; the seed has no default).
INQUIRY_REQUIRED_INFO: tuple[str, ...] = ("主诉", "发病时间", "伴随症状", "既往史")

#: Tongue feature keys scored by seed 2.1.
TONGUE_FEATURES: tuple[str, ...] = ("tongue_color", "tongue_shape", "tongue_coating")
#: Sound feature keys scored by seed 3.2.
SOUND_FEATURES: tuple[str, ...] = ("sound_type", "intensity", "frequency", "quality", "rhythm")
#: Pulse feature keys scored by seed 5.2.
PULSE_FEATURES: tuple[str, ...] = ("rate", "strength", "rhythm", "depth", "width")

#: Similarity the seed gives to a pair of different syndromes missing from the similarity matrix.
DEFAULT_SYNDROME_SIMILARITY = 0.1

#: Default weights of the TCM professionalism score (seed 8.1).
DEFAULT_TCM_WEIGHTS: dict[str, float] = {
    "望诊": 0.15,
    "闻诊": 0.10,
    "问诊": 0.20,
    "切诊": 0.15,
    "四诊合参": 0.20,
    "方剂推荐": 0.20,
}

#: Dialogue roles counted as doctor turns by the inquiry efficiency (compared case-insensitively).
DOCTOR_ROLES: frozenset[str] = frozenset({"doctor", "医生"})

_PULSE_JOINER = "兼"  # "浮兼数": a floating and rapid pulse


# --- small helpers --------------------------------------------------------------------------------


def normalize_label(value: str) -> str:
    """Return ``value`` in Unicode NFKC form without surrounding whitespace.

    NFKC folds full-width ASCII letters, digits and punctuation to their half-width forms
    (``"，"`` becomes ``","``, ``"Ａ"`` becomes ``"A"``) and the ideographic space to a space;
    CJK ideographs themselves are unchanged. The result is the key used for every comparison.
    """
    return unicodedata.normalize("NFKC", value).strip()


def _norm_value(value: object) -> object:
    """Normalise a compared value: strings by :func:`normalize_label`, lists and tuples item by item."""
    if isinstance(value, str):
        return normalize_label(value)
    if isinstance(value, (list, tuple)):
        return [_norm_value(item) for item in value]
    return value


def _same(predicted: Any, reference: Any) -> bool:
    """Whether a predicted value equals a reference value after normalisation; ``None`` never matches."""
    if predicted is None or reference is None:
        return False
    return _norm_value(predicted) == _norm_value(reference)


def _labels(labels: Any) -> list[Hashable]:
    """Return the distinct normalised labels of ``labels``, in first-seen order.

    ``None`` gives ``[]``; a string is one label; any other iterable (list, tuple, set, dict keys)
    gives its items. ``None`` items and labels empty after normalisation are dropped.
    """
    if labels is None:
        return []
    if isinstance(labels, str):
        labels = [labels]
    elif not isinstance(labels, Iterable):
        raise UsageError(f"expected a label or a list of labels, got {type(labels).__name__}")
    seen: dict[Hashable, None] = {}
    for item in labels:
        if item is None:
            continue
        key = normalize_label(item) if isinstance(item, str) else item
        if key == "":
            continue
        seen[key] = None
    return list(seen)


def _check_lengths(**sequences: Sequence[Any]) -> None:
    """Raise ``ValueError`` naming each argument and its length unless all lengths are equal."""
    lengths = {name: len(seq) for name, seq in sequences.items()}
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{name} has {n} item{'' if n == 1 else 's'}" for name, n in lengths.items())
        raise UsageError(f"mismatched lengths: {detail}; they must be paired one to one")


def _as_list(values: Iterable[Any] | None, name: str) -> list[Any]:
    """Materialise an argument that holds one item per case (``None`` is an empty list)."""
    if values is None:
        return []
    if isinstance(values, (str, bytes, Mapping)):
        raise UsageError(f"{name} must be a list with one item per case, got {type(values).__name__}")
    return list(values)


def _feature_dict(value: Any, where: str) -> dict[Any, Any]:
    """Return a case's feature dictionary with normalised keys (``None`` is an empty dictionary)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UsageError(f"{where} must be a mapping of feature -> value, got {type(value).__name__}")
    return {(normalize_label(k) if isinstance(k, str) else k): v for k, v in value.items()}


def _jaccard(a: set[Hashable], b: set[Hashable]) -> float:
    """The package's one Jaccard (:func:`consensus_eval.domain.sets.jaccard`): two empty sets are
    identical and score 1.0, where the seed's code divides 0 by 0 and writes 0.0 (a documented
    deviation: predicting no label for a case whose reference has none is right, not wrong)."""
    return jaccard(a, b)


def _prf(predicted: set[Hashable], reference: set[Hashable]) -> dict[str, float]:
    """Set precision, recall and F1, each in [0, 1]; an empty side gives 0.0 for its ratio (seed)."""
    hits = len(predicted & reference)
    precision = hits / len(predicted) if predicted else 0.0
    recall = hits / len(reference) if reference else 0.0
    f1 = 2 * precision * recall / (precision + recall) if (precision + recall) > 0 else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _mean(values: Sequence[float]) -> float:
    """Arithmetic mean; 0.0 for no values (the seed's convention for "nothing to score")."""
    return sum(values) / len(values) if values else 0.0


def _finite(value: Any, name: str) -> float:
    """Return ``value`` as a float, or raise ``ValueError`` unless it is a finite real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise UsageError(f"{name} must be finite, got {value!r}")
    return number


def _aspects(required: Iterable[str] | None, default: Sequence[str], name: str) -> list[str]:
    """Return the distinct normalised, case-folded required aspects; raise if none is left."""
    raw = default if required is None else required
    if isinstance(raw, str):
        raw = [raw]
    aspects = list(dict.fromkeys(a.casefold() for a in _labels(raw) if isinstance(a, str)))
    if not aspects:
        raise UsageError(f"{name} is empty: at least one required aspect is needed")
    return aspects


def _text(value: Any, where: str) -> str:
    """Return a free-text answer NFKC-normalised and case-folded (``None`` is the empty text)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UsageError(f"{where} must be a string, got {type(value).__name__}")
    return unicodedata.normalize("NFKC", value).casefold()


def _coverage(text: str, aspects: Sequence[str]) -> float:
    """Share of ``aspects`` that occur in ``text`` (both already normalised), in [0, 1]."""
    return sum(1 for aspect in aspects if aspect in text) / len(aspects)


def _mean_completeness(texts: Iterable[Any] | None, aspects: Sequence[str], name: str) -> float:
    """Mean over texts of the share of required aspects each text mentions, in [0, 1]."""
    items = _as_list(texts, name)
    return _mean([_coverage(_text(t, f"{name}[{i}]"), aspects) for i, t in enumerate(items)])


def _tally_features(
    predictions: Any, references: Any, features: Sequence[str] | None
) -> tuple[dict[Any, int], dict[Any, int]]:
    """Count, per feature key, the scored references and the correct predictions.

    ``features`` fixes the keys scored (seed 2.1, 3.2, 5.2); ``None`` scores every key found in the
    references, in first-seen order (seed 1.1, 3.5). A reference value of ``None`` is not scored.
    """
    preds = _as_list(predictions, "predictions")
    refs = _as_list(references, "references")
    _check_lengths(predictions=preds, references=refs)
    correct: dict[Any, int] = {}
    count: dict[Any, int] = {}
    for i, (pred_raw, ref_raw) in enumerate(zip(preds, refs, strict=True)):
        pred = _feature_dict(pred_raw, f"predictions[{i}]")
        ref = _feature_dict(ref_raw, f"references[{i}]")
        keys = features if features is not None else list(ref)
        for key in keys:
            if ref.get(key) is None:
                continue
            count[key] = count.get(key, 0) + 1
            correct.setdefault(key, 0)
            if _same(pred.get(key), ref[key]):
                correct[key] += 1
    return correct, count


def _overall(correct: Mapping[Any, int], count: Mapping[Any, int]) -> float:
    """Micro accuracy over all scored features, in [0, 1]; 0.0 when nothing was scored."""
    total = sum(count.values())
    return sum(correct.values()) / total if total > 0 else 0.0


def _feature_accuracy(predictions: Any, references: Any, features: Sequence[str] | None) -> dict[Any, float]:
    """Accuracy per scored feature key, in the order of ``features`` (``None``: every key, first seen first),
    keys no reference carries left out, then ``"overall"``: :func:`_tally_features`, :func:`_overall`."""
    correct, count = _tally_features(predictions, references, features)
    keys = count if features is None else [key for key in features if count.get(key)]
    accuracy: dict[Any, float] = {key: correct[key] / count[key] for key in keys}
    accuracy["overall"] = _overall(correct, count)
    return accuracy


def _label_map(mapping: Mapping[Any, Any] | None, name: str) -> dict[Hashable, set[Hashable]]:
    """Normalise a ``key -> labels`` knowledge map (keys and label lists); ``None`` is empty."""
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise UsageError(f"{name} must be a mapping, got {type(mapping).__name__}")
    out: dict[Hashable, set[Hashable]] = {}
    for key, labels in mapping.items():
        norm_key = normalize_label(key) if isinstance(key, str) else key
        out.setdefault(norm_key, set()).update(_labels(labels))
    return out


def _expected_from_map(cues: Any, mapping: Mapping[Hashable, set[Hashable]]) -> set[Hashable]:
    """Union of the labels that ``mapping`` gives for each cue (sound or pulse feature, syndrome)."""
    expected: set[Hashable] = set()
    for cue in _labels(cues):
        expected |= mapping.get(cue, set())
    return expected


def _with_expected(basic: float, predicted: set[Hashable], cues: Any, mapping: Mapping[Any, Any], name: str,
                   weight: float) -> float:
    """``weight * basic + (1 - weight) * |predicted ∩ expected| / |expected|``, where ``expected`` is what the
    knowledge map ``mapping`` (argument ``name``) gives for ``cues``; ``basic`` when it gives nothing."""
    expected = _expected_from_map(cues, _label_map(mapping, name))
    if not expected:
        return basic
    return weight * basic + (1.0 - weight) * (len(predicted & expected) / len(expected))


# --- 1. face (望诊: 面诊) ---------------------------------------------------------------------------


def calculate_feature_recognition_accuracy(
    predictions: Sequence[Mapping[str, Any] | None], references: Sequence[Mapping[str, Any] | None]
) -> dict[str, float]:
    """Accuracy of face features (seed 1.1), per feature key and ``"overall"``, each in [0, 1].

    For every key of every reference dictionary, the case counts once and is correct when the
    prediction has the same (normalised) value. ``"overall"`` is the micro accuracy over all
    scored (case, key) pairs. A reference value of ``None`` is not scored; a missing or ``None``
    prediction is wrong. No reference feature gives ``{"overall": 0.0}``.
    Raises ``ValueError`` when the two lists differ in length.
    """
    return _feature_accuracy(predictions, references, None)


def calculate_face_description_completeness(
    predictions: Sequence[str | None], required_aspects: Sequence[str] | None = None
) -> float:
    """Mean share of required face aspects each description mentions (seed 1.2), in [0, 1].

    An aspect is covered when it occurs as a substring of the description (case-insensitive,
    NFKC-normalised, as the seed lower-cases the description). ``required_aspects`` defaults to
    :data:`FACE_ASPECTS` (the seed's example; the seed itself has no default). A ``None``
    description covers nothing. No description gives 0.0; an empty ``required_aspects`` raises
    ``ValueError`` (the seed divided by zero).
    """
    aspects = _aspects(required_aspects, FACE_ASPECTS, "required_aspects")
    return _mean_completeness(predictions, aspects, "predictions")


def _matrix(matrix: Mapping[Any, Mapping[Any, Any]]) -> dict[Hashable, dict[Hashable, float]]:
    """Normalise a syndrome similarity matrix; each similarity must be a number in [0, 1]."""
    out: dict[Hashable, dict[Hashable, float]] = {}
    for row_key, row in matrix.items():
        if not isinstance(row, Mapping):
            raise UsageError(f"syndrome_similarity_matrix[{row_key!r}] must be a mapping")
        a = normalize_label(row_key) if isinstance(row_key, str) else row_key
        for col_key, value in row.items():
            b = normalize_label(col_key) if isinstance(col_key, str) else col_key
            sim = _finite(value, f"syndrome_similarity_matrix[{row_key!r}][{col_key!r}]")
            if not 0.0 <= sim <= 1.0:
                raise UsageError(
                    f"syndrome_similarity_matrix[{row_key!r}][{col_key!r}] must be in [0, 1], got {value!r}"
                )
            out.setdefault(a, {})[b] = sim
    return out


def _pair_similarity(a: Hashable, b: Hashable, matrix: Mapping[Hashable, Mapping[Hashable, float]]) -> float:
    """Similarity of two syndromes: ``matrix[a][b]``, else ``matrix[b][a]``, else 1.0 if equal, else 0.1."""
    if b in matrix.get(a, {}):
        return matrix[a][b]
    if a in matrix.get(b, {}):
        return matrix[b][a]
    return 1.0 if a == b else DEFAULT_SYNDROME_SIMILARITY


def calculate_face_syndrome_correlation(
    predicted_syndromes: Sequence[str] | str | None,
    reference_syndromes: Sequence[str] | str | None,
    syndrome_similarity_matrix: Mapping[str, Mapping[str, float]] | None = None,
) -> float:
    """How close the syndromes derived from the face are to the reference ones (seed 1.3), in [0, 1].

    Without a matrix: Jaccard similarity of the two label sets. With a matrix: the mean similarity
    over all (predicted, reference) pairs, where a pair missing from the matrix gets
    :data:`DEFAULT_SYNDROME_SIMILARITY` (0.1) as in the seed, except that the matrix is read in both
    directions and an identical pair missing from it counts 1.0 (the seed gave 0.1 even to a
    syndrome compared with itself). Either list empty gives 0.0. Duplicates count once.
    """
    predicted = _labels(predicted_syndromes)
    reference = _labels(reference_syndromes)
    if not predicted or not reference:
        return 0.0
    if syndrome_similarity_matrix is None:
        return _jaccard(set(predicted), set(reference))
    matrix = _matrix(syndrome_similarity_matrix)
    total = 0.0
    for pred in predicted:
        for ref in reference:
            total += _pair_similarity(pred, ref, matrix)
    return total / (len(predicted) * len(reference))


# --- 2. tongue (望诊: 舌诊) -------------------------------------------------------------------------


def calculate_tongue_feature_recognition_accuracy(
    predictions: Sequence[Mapping[str, Any] | None], references: Sequence[Mapping[str, Any] | None]
) -> dict[str, float]:
    """Accuracy of tongue colour, shape and coating (seed 2.1), each in [0, 1], plus ``"overall"``.

    Only the keys of :data:`TONGUE_FEATURES` are scored; other keys are ignored. The result always
    has the four keys ``tongue_color``, ``tongue_shape``, ``tongue_coating`` and ``overall`` (micro
    accuracy over all scored features); a key no reference carries gets 0.0, as in the seed.
    A reference value of ``None`` is not scored; a missing or ``None`` prediction is wrong.
    Raises ``ValueError`` when the two lists differ in length.
    """
    return dict.fromkeys(TONGUE_FEATURES, 0.0) | _feature_accuracy(predictions, references, TONGUE_FEATURES)


def calculate_tongue_description_completeness(
    predictions: Sequence[str | None], required_aspects: Sequence[str] | None = None
) -> float:
    """Mean share of required tongue aspects each description mentions (seed 2.2), in [0, 1].

    ``required_aspects`` defaults to :data:`TONGUE_ASPECTS`. Substring test, case-insensitive and
    NFKC-normalised. Note that, as in the seed, ``"舌苔颜色"`` in a text also covers ``"舌苔"``.
    No description gives 0.0; an empty ``required_aspects`` raises ``ValueError``.
    """
    aspects = _aspects(required_aspects, TONGUE_ASPECTS, "required_aspects")
    return _mean_completeness(predictions, aspects, "predictions")


def _tongue_kb(kb: Mapping[Any, Any]) -> dict[Hashable, dict[str, set[Hashable]]]:
    """Normalise a tongue knowledge base ``{syndrome: {tongue feature type: [values]}}``."""
    out: dict[Hashable, dict[str, set[Hashable]]] = {}
    for syndrome, features in kb.items():
        key = normalize_label(syndrome) if isinstance(syndrome, str) else syndrome
        if not isinstance(features, Mapping):
            raise UsageError(f"tcm_knowledge_base[{syndrome!r}] must be a mapping of feature type -> values")
        out[key] = {
            normalize_label(ftype): set(_labels(values))
            for ftype, values in features.items()
            if isinstance(ftype, str)
        }
    return out


def _kb_similarity(a: Mapping[str, set[Hashable]], b: Mapping[str, set[Hashable]]) -> float:
    """Pooled Jaccard of the tongue features two syndromes share in the knowledge base, in [0, 1]."""
    shared = total = 0
    for ftype in TONGUE_FEATURES:
        if ftype in a and ftype in b:
            shared += len(a[ftype] & b[ftype])
            total += len(a[ftype] | b[ftype])
    return shared / total if total > 0 else 0.0


def calculate_tongue_syndrome_correlation(
    predicted_syndromes: Sequence[str] | str | None,
    reference_syndromes: Sequence[str] | str | None,
    tcm_knowledge_base: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
) -> float:
    """How well the syndromes derived from the tongue match the reference ones (seed 2.3), in [0, 1].

    Simple correlation: |P ∩ R| / max(|P|, |R|) over distinct labels. Without a knowledge base that
    is the result. With one (``{syndrome: {"tongue_color": [...], "tongue_shape": [...],
    "tongue_coating": [...]}}``), each predicted syndrome gets its best pooled Jaccard of tongue
    features against any reference syndrome (0 if either is not in the base); their mean is the
    semantic correlation, and the result is ``0.4 * simple + 0.6 * semantic``. A feature value given
    as a string is one value (the seed split it into characters). Both lists empty give 0.0.
    """
    predicted = _labels(predicted_syndromes)
    reference = _labels(reference_syndromes)
    longest = max(len(predicted), len(reference))
    simple = len(set(predicted) & set(reference)) / longest if longest > 0 else 0.0
    if tcm_knowledge_base is None:
        return simple
    kb = _tongue_kb(tcm_knowledge_base)
    semantic = 0.0
    for pred in predicted:
        best = 0.0
        for ref in reference:
            if pred in kb and ref in kb:
                best = max(best, _kb_similarity(kb[pred], kb[ref]))
        semantic += best
    semantic /= len(predicted) if predicted else 1.0
    return 0.4 * simple + 0.6 * semantic


# --- 3. sound (闻诊) --------------------------------------------------------------------------------


def calculate_sound_classification_accuracy(
    predictions: Sequence[Any], references: Sequence[Any]
) -> float:
    """Share of sounds classified as the reference type (seed 3.1), in [0, 1].

    Labels are compared after normalisation. A ``None`` reference is left out; a ``None``
    prediction is wrong. No scored case gives 0.0. Raises ``ValueError`` on mismatched lengths.
    """
    preds = _as_list(predictions, "predictions")
    refs = _as_list(references, "references")
    _check_lengths(predictions=preds, references=refs)
    scored = [(p, r) for p, r in zip(preds, refs, strict=True) if r is not None]
    correct = sum(_same(p, r) for p, r in scored)
    return correct / len(scored) if scored else 0.0


def calculate_sound_feature_recognition_detail(
    predictions: Sequence[Mapping[str, Any] | None], references: Sequence[Mapping[str, Any] | None]
) -> dict[str, float]:
    """Accuracy per sound feature (seed 3.2) and ``"overall"``, each in [0, 1].

    Scores the keys of :data:`SOUND_FEATURES` (type, intensity, frequency, quality, rhythm); the
    result holds only the keys some reference carries, plus ``"overall"`` (micro accuracy; 0.0 when
    nothing is scored). ``None`` reference values are not scored; ``None`` predictions are wrong.
    Raises ``ValueError`` on mismatched lengths.
    """
    return _feature_accuracy(predictions, references, SOUND_FEATURES)


def calculate_sound_syndrome_correlation(
    sound_features: Sequence[str] | str | None,
    predicted_syndromes: Sequence[str] | str | None,
    reference_syndromes: Sequence[str] | str | None,
    sound_syndrome_map: Mapping[str, Sequence[str]] | None = None,
) -> float:
    """How well predicted syndromes match the reference and the sounds heard (seed 3.3), in [0, 1].

    Basic correlation: Jaccard of predicted and reference syndromes. With ``sound_syndrome_map``
    (``{sound feature: [syndromes]}``), the syndromes expected from ``sound_features`` are
    collected; if there are any, the result is ``0.5 * basic + 0.5 * |P ∩ expected| / |expected|``.
    An empty reference gives 0.0.
    """
    predicted = set(_labels(predicted_syndromes))
    reference = set(_labels(reference_syndromes))
    if not reference:
        return 0.0
    basic = _jaccard(predicted, reference)
    if sound_syndrome_map is None:
        return basic
    return _with_expected(basic, predicted, sound_features, sound_syndrome_map, "sound_syndrome_map", 0.5)


def calculate_sound_description_completeness(
    descriptions: Sequence[str | None], required_aspects: Sequence[str] | None = None
) -> float:
    """Mean share of required sound aspects each description mentions (seed 3.4), in [0, 1].

    ``required_aspects`` defaults to :data:`SOUND_ASPECTS`. Substring test, case-insensitive and
    NFKC-normalised. No description gives 0.0; an empty ``required_aspects`` raises ``ValueError``.
    """
    aspects = _aspects(required_aspects, SOUND_ASPECTS, "required_aspects")
    return _mean_completeness(descriptions, aspects, "descriptions")


def calculate_voice_analysis_accuracy(
    predictions: Sequence[Mapping[str, Any] | None], references: Sequence[Mapping[str, Any] | None]
) -> float:
    """Micro accuracy of voice features such as tone, speed and volume (seed 3.5), in [0, 1].

    Every key of every reference counts once. ``None`` reference values are not scored; ``None``
    predictions are wrong. Nothing scored gives 0.0. Raises ``ValueError`` on mismatched lengths.
    """
    correct, count = _tally_features(predictions, references, None)
    return _overall(correct, count)


# --- 4. inquiry (问诊) ------------------------------------------------------------------------------


def calculate_symptom_recognition_rate(
    predictions: Sequence[Sequence[str] | None], references: Sequence[Sequence[str] | None]
) -> dict[str, float]:
    """Macro-averaged precision, recall and F1 of recognised symptoms (seed 4.1), each in [0, 1].

    Each case gets set P/R/F1 (an empty prediction has precision 0, an empty reference recall 0,
    as in the seed); the three are averaged over cases. A ``None`` reference leaves the case out.
    No case gives all zeros. Raises ``ValueError`` on mismatched lengths (the seed truncated).
    """
    preds = _as_list(predictions, "predictions")
    refs = _as_list(references, "references")
    _check_lengths(predictions=preds, references=refs)
    per_case = [_prf(set(_labels(p)), set(_labels(r))) for p, r in zip(preds, refs, strict=True) if r is not None]
    return {m: _mean([case[m] for case in per_case]) for m in ("precision", "recall", "f1")}


def calculate_symptom_classification_accuracy(
    symptom_classifications: Sequence[Mapping[str, Any] | None],
    reference_classifications: Sequence[Mapping[str, Any] | None],
) -> float:
    """Share of classified symptoms given the reference TCM class (seed 4.2), in [0, 1].

    Only symptoms that are both in the reference and in the prediction are counted (a symptom the
    model did not classify is not counted, as in the seed); a ``None`` reference class is not
    counted; a ``None`` predicted class is wrong. Symptom names and classes are normalised.
    Nothing counted gives 0.0. Raises ``ValueError`` on mismatched lengths (the seed truncated).
    """
    preds = _as_list(symptom_classifications, "symptom_classifications")
    refs = _as_list(reference_classifications, "reference_classifications")
    _check_lengths(symptom_classifications=preds, reference_classifications=refs)
    total = correct = 0
    for i, (pred_raw, ref_raw) in enumerate(zip(preds, refs, strict=True)):
        pred = _feature_dict(pred_raw, f"symptom_classifications[{i}]")
        ref = _feature_dict(ref_raw, f"reference_classifications[{i}]")
        for symptom, ref_class in ref.items():
            if ref_class is None or symptom not in pred:
                continue
            total += 1
            correct += _same(pred[symptom], ref_class)
    return correct / total if total > 0 else 0.0


def _collected(value: Any) -> bool:
    """Whether an inquiry field holds information: not None, not blank text, not an empty container.

    Unlike the seed's truthiness test, ``0`` and ``False`` count as collected ("no fever" is an answer).
    """
    if value is None:
        return False
    if isinstance(value, str):
        return value.strip() != ""
    if isinstance(value, (Mapping, list, tuple, set, frozenset)):
        return len(value) > 0
    return True


def _covered_categories(info: Any, required: Sequence[str], where: str) -> int:
    """Number of required categories that ``info`` (a case's collected information) fills."""
    collected = _feature_dict(info, where)
    return sum(1 for category in required if _collected(collected.get(category)))


def _required_info(required_info: Iterable[str] | None) -> list[str]:
    """Distinct normalised required categories; raise ``ValueError`` when there is none."""
    raw = [required_info] if isinstance(required_info, str) else (required_info or [])
    required = [c for c in _labels(raw) if isinstance(c, str)]
    if not required:
        raise UsageError("required_info is empty: at least one required category is needed")
    return required


def calculate_inquiry_completeness(
    collected_info: Sequence[Mapping[str, Any] | None], required_info: Sequence[str]
) -> float:
    """Mean share of required information categories collected per inquiry (seed 4.3), in [0, 1].

    A category is collected when the case's dictionary has it with a non-empty value (see
    :func:`_collected`: ``0``/``False`` count, blank strings do not). Category names are normalised.
    No case gives 0.0; an empty ``required_info`` raises ``ValueError`` (the seed divided by zero).
    """
    required = _required_info(required_info)
    infos = _as_list(collected_info, "collected_info")
    return _mean(
        [_covered_categories(info, required, f"collected_info[{i}]") / len(required) for i, info in enumerate(infos)]
    )


def _doctor_turns(dialogue: Any, where: str) -> int:
    """Number of turns whose ``role`` is a doctor role (:data:`DOCTOR_ROLES`, case-insensitive)."""
    if dialogue is None:
        return 0
    if isinstance(dialogue, (str, Mapping)) or not isinstance(dialogue, Iterable):
        raise UsageError(f"{where} must be a list of turns, got {type(dialogue).__name__}")
    turns = 0
    for j, turn in enumerate(dialogue):
        if not isinstance(turn, Mapping):
            raise UsageError(f"{where}[{j}] must be a mapping with a 'role', got {type(turn).__name__}")
        role = turn.get("role")
        if isinstance(role, str) and normalize_label(role).casefold() in DOCTOR_ROLES:
            turns += 1
    return turns


def calculate_inquiry_efficiency(
    dialogues: Sequence[Sequence[Mapping[str, Any]] | None],
    collected_info: Sequence[Mapping[str, Any] | None],
    required_info: Sequence[str],
) -> float:
    """Required information gathered per doctor question, damped for very short inquiries (seed 4.4).

    Per case: ``covered / q * (1 - exp(-0.5 * q))`` with ``q`` the number of doctor turns
    (role ``"doctor"`` or ``"医生"``, case-insensitive; a turn without a role is not a doctor turn)
    and ``covered`` the required categories collected; ``q = 0`` scores 0. The mean over cases is
    returned. Range: [0, 0.394 * len(required_info)] — as in the seed it is **not** capped at 1
    (e.g. 4 categories in 2 questions give 2 * 0.632 = 1.26); values near or above 1 mean several
    categories per question. No case gives 0.0. Raises ``ValueError`` on mismatched lengths (the
    seed truncated) or an empty ``required_info``.
    """
    required = _required_info(required_info)
    dialogs = _as_list(dialogues, "dialogues")
    infos = _as_list(collected_info, "collected_info")
    _check_lengths(dialogues=dialogs, collected_info=infos)
    scores: list[float] = []
    for i, (dialogue, info) in enumerate(zip(dialogs, infos, strict=True)):
        questions = _doctor_turns(dialogue, f"dialogues[{i}]")
        if questions == 0:
            scores.append(0.0)
            continue
        covered = _covered_categories(info, required, f"collected_info[{i}]")
        scores.append(covered / questions * (1 - math.exp(-0.5 * questions)))
    return _mean(scores)


def _mean_case_jaccard(predicted: Sequence[Any], reference: Sequence[Any], empty_scores_zero: bool) -> float:
    """Mean per-case Jaccard of diagnosis label sets, skipping cases whose reference is ``None``.

    With ``empty_scores_zero`` a case where either side is empty scores 0 (seed 9.2); otherwise the
    plain Jaccard applies (0 unless both are empty, which also gives 0).
    """
    scores: list[float] = []
    for pred, ref in zip(predicted, reference, strict=True):
        if ref is None:
            continue
        p, r = set(_labels(pred)), set(_labels(ref))
        scores.append(0.0 if empty_scores_zero and (not p or not r) else _jaccard(p, r))
    return _mean(scores)


def calculate_diagnosis_relevance(
    predicted_diagnoses: Sequence[Sequence[str] | str | None],
    reference_diagnoses: Sequence[Sequence[str] | str | None],
) -> float:
    """Mean per-case Jaccard similarity of predicted and reference diagnoses (seed 4.5), in [0, 1].

    Each item is a diagnosis string or a list of them (any non-string iterable counts as a list;
    the seed wrapped tuples and sets as one label). A ``None`` reference leaves the case out; a
    ``None`` prediction scores 0. No case gives 0.0. Raises ``ValueError`` on mismatched lengths.
    """
    preds = _as_list(predicted_diagnoses, "predicted_diagnoses")
    refs = _as_list(reference_diagnoses, "reference_diagnoses")
    _check_lengths(predicted_diagnoses=preds, reference_diagnoses=refs)
    return _mean_case_jaccard(preds, refs, empty_scores_zero=False)


# --- 5. pulse (切诊) --------------------------------------------------------------------------------


def _pulse_types(pulse: Any) -> list[Hashable]:
    """Component pulse types: a string is split on 兼 (``"浮兼数"`` -> 浮, 数); a list is taken as is."""
    if isinstance(pulse, str):
        return _labels(normalize_label(pulse).split(_PULSE_JOINER))
    return _labels(pulse)


def _pulse_score(pred: Any, ref: Any) -> float:
    """1.0 for an exact match, else the share of common types over the longer side, in [0, 1]."""
    if pred is None:
        return 0.0
    if _same(pred, ref):
        return 1.0
    pred_types, ref_types = _pulse_types(pred), _pulse_types(ref)
    common = set(pred_types) & set(ref_types)
    if not common:
        return 0.0
    return len(common) / max(len(pred_types), len(ref_types))


def calculate_pulse_classification_accuracy(
    predictions: Sequence[str | Sequence[str] | None], references: Sequence[str | Sequence[str] | None]
) -> float:
    """Pulse type accuracy with partial credit for compound pulses (seed 5.1), in [0, 1].

    An exact match scores 1. Otherwise a compound pulse written with 兼 (``"弦兼数"``) or given as a
    list is split into types, and the case scores |common types| / max(number of types on either
    side). Unlike the seed, a string on one side and a list on the other are also compared
    (the seed gave them 0), and duplicate types count once. A ``None`` reference leaves the case
    out; a ``None`` prediction scores 0. No case gives 0.0. Raises ``ValueError`` on mismatched lengths.
    """
    preds = _as_list(predictions, "predictions")
    refs = _as_list(references, "references")
    _check_lengths(predictions=preds, references=refs)
    scores = [_pulse_score(p, r) for p, r in zip(preds, refs, strict=True) if r is not None]
    return _mean(scores)


def calculate_pulse_feature_accuracy(
    predictions: Sequence[Mapping[str, Any] | None], references: Sequence[Mapping[str, Any] | None]
) -> dict[str, float]:
    """Accuracy per pulse feature (rate, strength, rhythm, depth, width; seed 5.2) and ``"overall"``.

    Each value is in [0, 1]. Only keys of :data:`PULSE_FEATURES` are scored and the result holds
    the keys some reference carries, plus ``"overall"`` (micro accuracy; 0.0 when nothing is scored).
    ``None`` reference values are not scored; ``None`` predictions are wrong.
    Raises ``ValueError`` on mismatched lengths.
    """
    return _feature_accuracy(predictions, references, PULSE_FEATURES)


def calculate_pulse_syndrome_correlation(
    predicted_syndromes: Sequence[str] | str | None,
    reference_syndromes: Sequence[str] | str | None,
    pulse_features: Sequence[str] | str | None = None,
    pulse_syndrome_map: Mapping[str, Sequence[str]] | None = None,
) -> float:
    """How well predicted syndromes match the reference and the pulse felt (seed 5.3), in [0, 1].

    Basic correlation: Jaccard of predicted and reference syndromes (0.0 when both are empty).
    With pulse features and a ``{pulse feature: [syndromes]}`` map that yield expected syndromes,
    the result is ``0.6 * basic + 0.4 * |P ∩ expected| / |expected|``.
    """
    predicted = set(_labels(predicted_syndromes))
    reference = set(_labels(reference_syndromes))
    basic = _jaccard(predicted, reference)
    if not _labels(pulse_features) or not pulse_syndrome_map:
        return basic
    return _with_expected(basic, predicted, pulse_features, pulse_syndrome_map, "pulse_syndrome_map", 0.6)


def calculate_pulse_interpretation_completeness(
    interpretations: Sequence[str | None], required_aspects: Sequence[str] | None = None
) -> float:
    """Mean share of required aspects each pulse interpretation mentions (seed 5.4), in [0, 1].

    ``required_aspects`` defaults to :data:`PULSE_ASPECTS`. Substring test, case-insensitive and
    NFKC-normalised. No interpretation gives 0.0; an empty ``required_aspects`` raises ``ValueError``.
    """
    aspects = _aspects(required_aspects, PULSE_ASPECTS, "required_aspects")
    return _mean_completeness(interpretations, aspects, "interpretations")


# --- 6. four examinations combined (四诊合参) -------------------------------------------------------


def calculate_modal_consistency(modal_diagnoses: Mapping[str, Sequence[str] | str | None]) -> float:
    """Mean pairwise Jaccard agreement between the diagnoses of each examination (seed 6.1), in [0, 1].

    ``modal_diagnoses`` maps an examination (望诊, 问诊, ...) to its diagnoses. Examinations with
    no diagnosis are ignored; with one examination or none left the diagnoses are vacuously
    consistent and the result is 1.0, as in the seed. A diagnosis given as a string is one label.
    """
    if not isinstance(modal_diagnoses, Mapping):
        raise UsageError(f"modal_diagnoses must be a mapping, got {type(modal_diagnoses).__name__}")
    sets = [s for s in (set(_labels(d)) for d in modal_diagnoses.values()) if s]
    if len(sets) <= 1:
        return 1.0
    pairs = [_jaccard(sets[i], sets[j]) for i in range(len(sets)) for j in range(i + 1, len(sets))]
    return _mean(pairs)


def calculate_fusion_gain(single_modal_scores: Mapping[str, float | None], multimodal_score: float) -> float:
    """Relative gain of the multimodal score over the mean single-modality score (seed 6.2).

    ``max(0, (multimodal - mean) / mean)``; when the mean is 0 or below: 0.0 if ``multimodal_score``
    is 0, else 1.0, as in the seed. Range: [0, +inf) — e.g. 0.5 -> 0.75 is a gain of 0.5; it is
    not capped at 1. Modalities scored ``None`` are ignored. Raises ``ValueError`` when no
    single-modality score is left (the seed divided by zero) or a score is not a finite number.
    """
    values = [
        _finite(v, f"single_modal_scores[{k!r}]") for k, v in dict(single_modal_scores).items() if v is not None
    ]
    if not values:
        raise UsageError("single_modal_scores is empty: the fusion gain needs at least one single-modality score")
    multimodal = _finite(multimodal_score, "multimodal_score")
    mean_single = sum(values) / len(values)
    if mean_single <= 0:
        return 0.0 if multimodal == 0 else 1.0
    return max(0.0, (multimodal - mean_single) / mean_single)


def calculate_syndrome_differentiation_accuracy(
    predicted_syndromes: Sequence[str] | str | None, reference_syndromes: Sequence[str] | str | None
) -> dict[str, float]:
    """Set precision, recall and F1 of the differentiated syndromes of one case (seed 6.3), in [0, 1].

    Labels are normalised and deduplicated; a string is one syndrome. An empty prediction has
    precision 0, an empty reference recall 0, and F1 is 0 when both are 0.
    """
    return _prf(set(_labels(predicted_syndromes)), set(_labels(reference_syndromes)))


def calculate_clinical_relevance(
    diagnosis_result: Sequence[str] | str | None,
    clinical_features: Sequence[str] | str | None,
    syndrome_clinical_map: Mapping[str, Sequence[str]] | None = None,
) -> float:
    """F1 between the clinical features the diagnosed syndromes imply and those observed (seed 6.4).

    ``syndrome_clinical_map`` maps a syndrome to its typical clinical features; the features of all
    diagnosed syndromes are pooled and compared with ``clinical_features``. In [0, 1]. No map, no
    expected feature or no observed feature gives 0.0, as in the seed.
    """
    if not syndrome_clinical_map:
        return 0.0
    expected = _expected_from_map(diagnosis_result, _label_map(syndrome_clinical_map, "syndrome_clinical_map"))
    observed = set(_labels(clinical_features))
    if not expected or not observed:
        return 0.0
    return _prf(expected, observed)["f1"]


# --- 7. prescription (方剂推荐) ----------------------------------------------------------------------


def calculate_prescription_accuracy(
    predicted_herbs: Iterable[str] | None, reference_herbs: Iterable[str] | None
) -> dict[str, float]:
    """Precision, recall and F1 of the herbs of one prescription (seed 7.1), each in [0, 1].

    Herb names are normalised (NFKC + strip, so ``"黄芪 "`` and full-width punctuation match their
    clean forms) and duplicates count once. A dictionary of herb -> dose counts by its herbs.
    An empty prediction has precision 0, an empty reference recall 0.
    """
    return _prf(set(_labels(predicted_herbs)), set(_labels(reference_herbs)))


def normalize_dosages(dosages: Any, name: str = "dosages") -> dict[Hashable, float | None]:
    """Return ``{herb: dose}`` with normalised herb names, checking every dose.

    Accepts a mapping herb -> dose or a list of ``(herb, dose)`` pairs; ``None`` is empty. A dose
    must be a finite number >= 0, or ``None`` (unknown). The same herb twice (after NFKC + strip,
    so ``"黄芪"`` and ``"黄芪　"`` are one herb) with equal doses is kept once; with different
    doses it raises ``ValueError``, as do empty herb names and negative or non-numeric doses.
    ``name`` is the argument name used in error messages.
    """
    if dosages is None:
        return {}
    if isinstance(dosages, Mapping):
        items = list(dosages.items())
    elif isinstance(dosages, Iterable) and not isinstance(dosages, str):
        items = []
        for pair in dosages:
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise UsageError(f"{name} must be a mapping herb -> dose or a list of (herb, dose) pairs")
            items.append((pair[0], pair[1]))
    else:
        raise UsageError(f"{name} must be a mapping herb -> dose, got {type(dosages).__name__}")
    out: dict[Hashable, float | None] = {}
    for herb_raw, dose_raw in items:
        herb = normalize_label(herb_raw) if isinstance(herb_raw, str) else herb_raw
        if herb is None or herb == "":
            raise UsageError(f"{name}: empty herb name")
        dose = None if dose_raw is None else _finite(dose_raw, f"{name}: dose of {herb_raw!r}")
        if dose is not None and dose < 0:
            raise UsageError(f"{name}: dose of {herb_raw!r} must not be negative, got {dose_raw!r}")
        if herb in out and out[herb] != dose:
            raise UsageError(f"{name}: herb {herb!r} is listed twice with different doses ({out[herb]!r} and {dose!r})")
        out[herb] = dose
    return out


def _dose_score(pred: float | None, ref: float, tolerance: float) -> float:
    """Score of one herb's dose in [0, 1]: 1 within ``tolerance`` relative error, then linear decay.

    The score falls linearly from 1 at ``tolerance`` to 0 at a relative error of 1 (100 % off).
    A reference dose of 0 scores 1 only for a predicted 0 (the relative error is undefined);
    a missing (``None``) predicted dose scores 0.
    """
    if pred is None:
        return 0.0
    if ref == 0:
        return 1.0 if pred == 0 else 0.0
    relative_error = abs(pred - ref) / ref
    if relative_error <= tolerance:
        return 1.0
    return max(0.0, 1.0 - (relative_error - tolerance) / (1.0 - tolerance))


def calculate_dosage_rationality(
    predicted_dosages: Mapping[str, float | None] | None,
    reference_dosages: Mapping[str, float | None] | None,
    tolerance: float = 0.2,
) -> float:
    """Mean dose score over the herbs both prescriptions contain (seed 7.2), in [0, 1].

    Per herb, relative error ``|pred - ref| / ref``: within ``tolerance`` scores 1, beyond it the
    score decays linearly to 0 at a relative error of 1 (see :func:`_dose_score`). Herbs in only
    one prescription are ignored (their presence is what :func:`calculate_prescription_accuracy`
    measures). Choices where the seed crashed: a reference dose of 0 scores 1 for a predicted 0 and
    0 otherwise; a ``None`` reference dose leaves the herb out; a ``None`` predicted dose scores 0;
    herb names are normalised, and a herb listed twice with different doses raises ``ValueError``.
    Either side empty or no common herb gives 0.0. ``tolerance`` must be in [0, 1) (the seed divided
    by zero at 1); negative or non-numeric doses raise ``ValueError``.
    """
    tol = _finite(tolerance, "tolerance")
    if not 0.0 <= tol < 1.0:
        raise UsageError(f"tolerance must be in [0, 1), got {tolerance!r}")
    predicted = normalize_dosages(predicted_dosages, "predicted_dosages")
    reference = normalize_dosages(reference_dosages, "reference_dosages")
    if not predicted or not reference:
        return 0.0
    scores = [
        _dose_score(predicted[herb], ref_dose, tol)
        for herb, ref_dose in reference.items()
        if herb in predicted and ref_dose is not None
    ]
    return _mean(scores)


def _reasoning_parts(reasoning: Hashable) -> list[str]:
    """Clauses of a reference reasoning: split on commas (ASCII or full-width), blanks dropped."""
    if not isinstance(reasoning, str):
        raise UsageError(f"a reference reasoning must be a string, got {type(reasoning).__name__}")
    return [part.strip().casefold() for part in unicodedata.normalize("NFKC", reasoning).split(",") if part.strip()]


def calculate_explanation_rationality(
    explanation: str | None, reference_keywords: Sequence[str] | None, reference_reasonings: Sequence[str] | None
) -> dict[str, float]:
    """Keyword and reasoning coverage of a prescription explanation (seed 7.3), each in [0, 1].

    ``keyword_coverage``: share of reference keywords found in the explanation. ``reasoning_coverage``:
    share of reference reasonings with at least one clause (split on commas) found in it.
    ``overall_rationality = 0.4 * keyword_coverage + 0.6 * reasoning_coverage``. Substring tests are
    case-insensitive on NFKC text, so a full-width comma ``，`` splits like ``,`` (the seed split on
    ``,`` only). Empty clauses are dropped (in the seed, ``"黄连苦寒,"`` produced an empty clause that
    matched every text), as are empty keywords and reasonings; duplicates count once. No keyword
    (or no reasoning) gives 0.0 for that coverage, as in the seed.
    """
    text = _text(explanation, "explanation")
    keywords = list(dict.fromkeys(k.casefold() for k in _labels(reference_keywords) if isinstance(k, str)))
    keyword_coverage = _coverage(text, keywords) if keywords else 0.0
    reasonings = [parts for parts in (_reasoning_parts(r) for r in _labels(reference_reasonings)) if parts]
    hits = sum(1 for parts in reasonings if any(part in text for part in parts))
    reasoning_coverage = hits / len(reasonings) if reasonings else 0.0
    return {
        "keyword_coverage": keyword_coverage,
        "reasoning_coverage": reasoning_coverage,
        "overall_rationality": 0.4 * keyword_coverage + 0.6 * reasoning_coverage,
    }


def calculate_prescription_syndrome_match(
    prescription: str | Sequence[str] | None,
    syndromes: Sequence[str] | str | None,
    prescription_syndrome_map: Mapping[str, Sequence[str]] | None = None,
) -> float:
    """Jaccard of a formula's indicated syndromes and the diagnosed syndromes (seed 7.4), in [0, 1].

    ``prescription`` is a formula name looked up (normalised) in ``prescription_syndrome_map``.
    A list of herbs cannot be named, so it scores 0.0 (the seed looked up the placeholder name
    "未知方剂", with the same result for any real map). No map, an unknown formula or no syndrome
    on either side gives 0.0.
    """
    if not prescription_syndrome_map or not isinstance(prescription, str):
        return 0.0
    indicated = _label_map(prescription_syndrome_map, "prescription_syndrome_map").get(normalize_label(prescription))
    diagnosed = set(_labels(syndromes))
    if not indicated or not diagnosed:
        return 0.0
    return _jaccard(indicated, diagnosed)


# --- 8. composite scores (综合评价) ------------------------------------------------------------------


def calculate_tcm_professionalism_score(
    scores: Mapping[str, float | None], weights: Mapping[str, float] | None = None
) -> float:
    """Weighted mean of the per-examination scores (seed 8.1), within the range of the scores used.

    Default weights: :data:`DEFAULT_TCM_WEIGHTS` (望诊 .15, 闻诊 .10, 问诊 .20, 切诊 .15,
    四诊合参 .20, 方剂推荐 .20). Only dimensions with both a score and a weight are used and their
    weights are renormalised to sum to 1; a ``None`` score leaves its dimension out. Dimension names
    are normalised. No usable dimension gives 0.0, as in the seed. Negative weights, weights summing
    to 0 over the used dimensions (the seed divided by zero) and non-finite scores raise ``ValueError``.
    """
    raw_weights = DEFAULT_TCM_WEIGHTS if weights is None else weights
    weight_map = {normalize_label(k): _finite(v, f"weights[{k!r}]") for k, v in raw_weights.items()}
    negative = [k for k, w in weight_map.items() if w < 0]
    if negative:
        raise UsageError(f"weights must not be negative: {negative}")
    used = {
        normalize_label(k): _finite(v, f"scores[{k!r}]")
        for k, v in scores.items()
        if v is not None and normalize_label(k) in weight_map
    }
    if not used:
        return 0.0
    total_weight = sum(weight_map[dim] for dim in used)
    if total_weight <= 0:
        raise UsageError(f"the weights of the scored dimensions {sorted(used)} sum to 0")
    return sum(score * (weight_map[dim] / total_weight) for dim, score in used.items())


def calculate_comprehensive_score(
    general_score: float, tcm_score: float, general_weight: float = 0.3, tcm_weight: float = 0.7
) -> float:
    """Weighted mean of the general and the TCM score (seed 8.2), between the two scores.

    The weights are renormalised to sum to 1 (default 0.3 general, 0.7 TCM). Scores and weights must
    be finite numbers, weights non-negative and not both 0 (the seed divided by zero); otherwise
    ``ValueError``.
    """
    general = _finite(general_score, "general_score")
    tcm = _finite(tcm_score, "tcm_score")
    gw = _finite(general_weight, "general_weight")
    tw = _finite(tcm_weight, "tcm_weight")
    if gw < 0 or tw < 0:
        raise UsageError(f"weights must not be negative, got general_weight={gw}, tcm_weight={tw}")
    total = gw + tw
    if total <= 0:
        raise UsageError("general_weight + tcm_weight is 0: at least one weight must be positive")
    return general * (gw / total) + tcm * (tw / total)


# --- 9. human evaluation (人工评价) ------------------------------------------------------------------


def calculate_human_ai_agreement(
    human_diagnoses: Sequence[Sequence[str] | str | None], ai_diagnoses: Sequence[Sequence[str] | str | None]
) -> float:
    """Mean per-case Jaccard agreement between expert and model diagnoses (seed 9.2), in [0, 1].

    Each item is a diagnosis string or a list of them (any non-string iterable counts as a list).
    A case where either side is empty scores 0, as in the seed; a ``None`` expert diagnosis leaves
    the case out, a ``None`` model diagnosis scores 0. No case gives 0.0. Raises ``ValueError`` on
    mismatched lengths.
    """
    humans = _as_list(human_diagnoses, "human_diagnoses")
    ais = _as_list(ai_diagnoses, "ai_diagnoses")
    _check_lengths(human_diagnoses=humans, ai_diagnoses=ais)
    return _mean_case_jaccard(ais, humans, empty_scores_zero=True)
