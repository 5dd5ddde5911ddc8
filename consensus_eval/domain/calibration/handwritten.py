"""A held-out calibration set of errors written by hand (docs/calibration.md).

``handwritten.yaml`` holds diabetes outpatient conversations and the records written from them, each
record either clean (a paraphrase that states exactly what the conversation says) or carrying one or
two errors written freely, the way a clinician or a careless AI scribe makes them: an insulin swapped
for another insulin, a value taken from another point of the conversation, creatinine in mmol/L, a
bedtime dose moved to breakfast, 半年 written as 1年, events in the wrong order, hallucinated symptoms,
drugs and results, negation flips, the wrong side or body site, omissions in 既往史 and 家族史,
colloquial wording, trade names, drugs without dose or timing, vague times, wrong or imprecise
diagnoses, and so on over the three dimensions of the medical_record rubric.

The set is **held out**: it was written without reading the rules judge, the built-in suite's
operators or their base cases, and it is never used to tune the rules judge or the operators. Its
recall is reported beside the recall on the synthetic (operator-planted) suite, as a check on how
far that figure carries over to errors worded by a different hand.

A case of the YAML: ``id``, ``note`` (what the case is about), ``conversation`` (one ``医生：...`` /
``患者：...`` / ``家属：...`` line per turn, the rubric's role labels), ``record`` and ``errors``, a list
of ``{type, quote, conversation_quote, why}``: ``type`` a deduction type id or a fixed-penalty id of
the rubric; ``quote`` text of the record and ``conversation_quote`` text of the conversation (as the
prompt shows it), at least one of them, each occurring exactly once; ``why`` one sentence. An empty
``errors`` list is a clean control.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from consensus_eval._errors import InputError
from consensus_eval.domain.calibration.suite import (
    PlantedError,
    PlantedSpan,
    SpanSource,
    SuiteCase,
    check_expectation,
)
from consensus_eval.domain.cases import Case, Turn
from consensus_eval.domain.kinds.deductions import deductions_in
from consensus_eval.domain.rubric import Rubric

#: the hand-written set shipped with the package
HANDWRITTEN_PATH = Path(__file__).with_name("handwritten.yaml")
#: the ``operator`` of every planted error of the set
OPERATOR = "handwritten"

_cache: dict[tuple[str, str, str], list[SuiteCase]] = {}


def handwritten_suite(rubric: Rubric, path: str | Path = HANDWRITTEN_PATH) -> list[SuiteCase]:
    """The hand-written set as suite cases under ``rubric`` (cached per rubric and file).

    Raises :class:`InputError` naming the case (and the quote) when a case does not fit: an unknown
    speaker, an unknown type, a quote that does not occur exactly once, a duplicate id.
    """
    p = Path(path)
    key = (rubric.id, rubric.fingerprint, str(p.resolve()))
    if key not in _cache:
        _cache[key] = build_suite(_read(p), rubric, source=str(p))
    return [c.model_copy(deep=True) for c in _cache[key]]


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"{path}: cannot read the hand-written set: {e.strerror or e}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not valid YAML: {e}") from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise InputError(f"{path}: expected a mapping with `cases`, a list of mappings")
    return cases


def build_suite(cases: list[dict[str, Any]], rubric: Rubric, *, source: str = "handwritten") -> list[SuiteCase]:
    """Suite cases from the YAML's ``cases`` entries (module docstring); see :func:`handwritten_suite`."""
    out: list[SuiteCase] = []
    seen: set[str] = set()
    for i, raw in enumerate(cases):
        case_id = str(raw.get("id") or f"#{i}")
        where = f"{source}: case {case_id}"
        if case_id in seen:
            raise InputError(f"{where}: duplicate case id")
        seen.add(case_id)
        conversation = _text(raw, "conversation", where)
        record = _text(raw, "record", where)
        case = Case(id=case_id, conversation=_turns(conversation, rubric, where), record=record)
        shown = case.conversation_as_text(rubric.roles)
        if shown != conversation:
            raise InputError(f"{where}: the turns do not give back the conversation")
        errors = raw.get("errors")
        if not isinstance(errors, list):
            raise InputError(f"{where}: errors: expected a list ([] for a clean control)")
        expected = [_planted(e, rubric, record, shown, f"{where}: errors[{j}]") for j, e in enumerate(errors)]
        problems = check_expectation(case, expected, rubric)
        if problems:
            raise InputError(f"{where}: " + "; ".join(problems))
        out.append(SuiteCase(case=case, expected=expected))
    if not out:
        raise InputError(f"{source}: no cases")
    return out


def _text(raw: dict[str, Any], field: str, where: str) -> str:
    value = raw.get(field)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: {field}: expected non-empty text")
    return value.strip()


def _turns(conversation: str, rubric: Rubric, where: str) -> list[Turn]:
    roles = {label: role for role, label in rubric.roles.items()}
    turns = []
    for line in conversation.split("\n"):
        label, sep, text = line.partition("：")
        if not sep or label not in roles:
            raise InputError(f"{where}: a conversation line without a known speaker "
                             f"({', '.join(roles)}): {line!r}")
        turns.append(Turn(role=roles[label], text=text))
    return turns


def _planted(raw: Any, rubric: Rubric, record: str, conversation: str, where: str) -> PlantedError:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a mapping with type, quote and/or conversation_quote, why")
    type_id = raw.get("type")
    if not isinstance(type_id, str):
        raise InputError(f"{where}: type: missing")
    if not isinstance(raw.get("why"), str) or not raw["why"].strip():
        raise InputError(f"{where}: why: missing")
    spans = []
    sources: tuple[tuple[str, SpanSource, str], ...] = (
        ("quote", "record", record), ("conversation_quote", "conversation", conversation))
    for field, source, text in sources:
        quote = raw.get(field)
        if quote is None:
            continue
        if not isinstance(quote, str) or not quote:
            raise InputError(f"{where}: {field}: expected non-empty text")
        count = text.count(quote)
        if count != 1:
            raise InputError(f"{where}: {field} {quote!r} occurs {count} times in the {source}, not exactly once")
        start = text.index(quote)
        spans.append(PlantedSpan(source=source, start=start, end=start + len(quote), text=quote))
    if not spans:
        raise InputError(f"{where}: give a quote (record) or a conversation_quote (for an omission)")
    found = []
    for dim in deductions_in(rubric.dimensions):
        if type_id in dim.penalties_by_id:
            found.append(PlantedError(operator=OPERATOR, dimension=dim.id, category=type_id, type=type_id,
                                      points=dim.penalties_by_id[type_id].points, penalty=True, spans=spans))
        else:
            try:
                cat, dtype = dim.find_type(type_id)
            except KeyError:
                continue
            found.append(PlantedError(operator=OPERATOR, dimension=dim.id, category=cat.id, type=type_id,
                                      points=dtype.low, spans=spans))
    if len(found) != 1:
        what = "is no deduction type or fixed penalty" if not found else "is ambiguous (in several dimensions)"
        raise InputError(f"{where}: type {type_id!r} {what} of the rubric {rubric.id!r}")
    return found[0]
