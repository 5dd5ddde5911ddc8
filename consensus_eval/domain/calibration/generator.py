"""The built-in calibration suite: clean base cases (``base_cases.yaml``) and seeded planted errors.

:func:`build_suite` is deterministic: the same seed gives a byte-identical suite (:func:`dumps_suite`).
The default suite (seed :data:`DEFAULT_SEED`) holds, for each operator of the family (``main``:
:data:`~consensus_eval.domain.calibration.operators.OPERATORS`; ``heldout``: the same types written
differently, :data:`~consensus_eval.domain.calibration.operators_heldout.HELDOUT_OPERATORS`), up to
:data:`PER_TYPE` single-error cases drawn from every place it can plant its error, two-error cases
(two operators planted in one record, in parts of it that do not touch) until every operator is planted at
least :data:`MIN_PER_TYPE` times, and clean controls (the same in both families): every base case in
each heading style of :data:`STYLES` (``主诉：``, ``【主诉】``, ``**主诉**：``, ``1. 主诉：``; the base files write
the first; the sections after 个人史 (体格检查, 辅助检查, 诊断, 处理) are written in the same style), its text
otherwise byte-identical to the base (any deduction on it is a false alarm). Not several copies
of one record: a call is identified by what the judge reads, so a copy would be the same call (the
store keeps one), telling nothing new. Each planted case is written in a heading style drawn with the seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Literal

import yaml

from consensus_eval._errors import UnknownName, UsageError
from consensus_eval.domain.calibration.operators import OPERATORS, BaseCase, Operator, Plant
from consensus_eval.domain.calibration.operators_heldout import HELDOUT_OPERATORS
from consensus_eval.domain.calibration.suite import PlantedError, PlantedSpan, SuiteCase
from consensus_eval.domain.cases import Case, Turn
from consensus_eval.domain.kinds.deductions import deductions_in
from consensus_eval.domain.rubric import Rubric, load_rubric

BASE_CASES = Path(__file__).with_name("base_cases.yaml")
DEFAULT_SEED = 15
PER_TYPE = 12
MIN_PER_TYPE = 10
N_PAIRS = 50
#: the rubric the built-in suite is written for
RUBRIC_ID = "medical_record"


#: heading styles models write: style -> (section name, line number) -> the heading text
STYLES: dict[str, Callable[[str, int], str]] = {
    "plain": lambda name, i: f"{name}：",
    "bracket": lambda name, i: f"【{name}】",
    "bold": lambda name, i: f"**{name}**：",
    "numbered": lambda name, i: f"{i}. {name}：",
}
_HEADING = re.compile(r"^(主诉|现病史|既往史|家族史|个人史|体格检查|辅助检查|诊断|处理)：", re.M)
#: a family of operators: the main one, or the held-out one (the same types, written differently)
Family = Literal["main", "heldout"]
FAMILIES: dict[str, dict[str, Operator]] = {"main": OPERATORS, "heldout": HELDOUT_OPERATORS}


def restyle(record: str, style: str) -> tuple[str, list[tuple[int, int, int]]]:
    """``record`` (written ``主诉：`` style) with its headings in ``style``, and the edits made
    (position, old length, new length) for moving spans."""
    edits: list[tuple[int, int, int]] = []
    out: list[str] = []
    pos = 0
    for i, m in enumerate(_HEADING.finditer(record), start=1):
        new = STYLES[style](m.group(1), i)
        out += [record[pos:m.start()], new]
        edits.append((m.start(), m.end() - m.start(), len(new)))
        pos = m.end()
    out.append(record[pos:])
    return "".join(out), edits


def _moved(x: int, edits: list[tuple[int, int, int]]) -> int:
    """Where position ``x`` of the record is after the heading ``edits`` (a span starting at a heading's
    first character starts at the new heading's; one ending after a heading includes all of it)."""
    for p, old, _ in edits:
        if p < x < p + old:
            raise UsageError("a planted span starts or ends inside a heading")
    return x + sum(new - old for p, old, new in edits if p + old <= x)


@cache
def base_cases() -> tuple[BaseCase, ...]:
    """The clean base cases shipped with the package."""
    data = yaml.safe_load(BASE_CASES.read_text(encoding="utf-8"))
    return tuple(BaseCase.model_validate(d) for d in data)


def expectation(rubric: Rubric, type_id: str) -> tuple[str, str, float, bool]:
    """(dimension, category, points, penalty) of a deduction type or fixed penalty id of ``rubric``
    (points: the type's points, the low end of a range)."""
    for dim in deductions_in(rubric.dimensions):
        if type_id in dim.penalties_by_id:
            return dim.id, type_id, dim.penalties_by_id[type_id].points, True
        try:
            cat, typ = dim.find_type(type_id)
        except KeyError:
            continue
        return dim.id, cat.id, typ.low, False
    raise UnknownName(f"the rubric {rubric.id!r} has no deduction type or fixed penalty {type_id!r}")


def overlaps(a: Plant, b: Plant) -> bool:
    """True when two plants touch the same record characters (or are adjacent): not combined."""
    (a0, a1), (b0, b1) = a.region, b.region
    return a0 <= b1 and b0 <= a1


def apply(base: BaseCase, plants: list[Plant], rubric: Rubric, case_id: str, style: str = "plain",
          conversation: str | list[Turn] | None = None) -> SuiteCase:
    """The suite case with ``plants`` planted in ``base`` (plants must not overlap), its headings
    written in ``style`` (:data:`STYLES`). ``conversation``: the case's conversation as the user gave it
    (its text as the prompt shows it must be ``base.conversation``); by default read from the base."""
    edits = sorted(((e, p) for p in plants for e in p.edits), key=lambda ep: (ep[0].start, ep[0].end))
    out: list[str] = []
    pos = 0
    spans: dict[int, list[PlantedSpan]] = {id(p): [] for p in plants}
    deleted_at: dict[int, list[int]] = {id(p): [] for p in plants}
    for e, p in edits:
        if e.start < pos:
            raise UsageError(f"{case_id}: overlapping edits")
        out.append(base.record[pos:e.start])
        at = sum(len(s) for s in out)
        for a, z in e.spans:
            spans[id(p)].append(PlantedSpan(source="record", start=at + a, end=at + z, text=e.new[a:z]))
        if not e.new and not _HEADING.search(base.record[e.start:e.end]):
            deleted_at[id(p)].append(at)
        out.append(e.new)
        pos = e.end
    out.append(base.record[pos:])
    record, moves = restyle("".join(out), style)
    for lst in spans.values():
        for i, s in enumerate(lst):
            a, z = _moved(s.start, moves), _moved(s.end, moves)
            lst[i] = PlantedSpan(source="record", start=a, end=z, text=record[a:z])
    expected = []
    for p in plants:
        dim, cat, points, penalty = expectation(rubric, p.type)
        also: list[PlantedSpan] = []
        if p.conversation_span is not None:
            j, k = p.conversation_span
            found = [PlantedSpan(source="conversation", start=j, end=k, text=base.conversation[j:k])]
            also = [ln for at in deleted_at[id(p)] if (ln := _line_of(record, _moved(at, moves))) is not None]
        else:
            found = spans[id(p)]
            if dim == "accuracy" and not penalty:
                also = [s for e in p.edits for s in _stated(base.conversation, base.record[e.start:e.end], base.record,
                                                            e.end)]
        expected.append(PlantedError(operator=p.operator, dimension=dim, category=cat, type=p.type, points=points,
                                     penalty=penalty, spans=found, also=_unique(also)))
    case = Case(id=case_id, conversation=turns(base, rubric) if conversation is None else conversation, record=record)
    return SuiteCase(case=case, base=base.id, expected=expected)


def _line_of(record: str, pos: int) -> PlantedSpan | None:
    """The record line (its section: one section a line in the base records) around ``pos``: what an
    omission left its fact out of. None for an empty line."""
    a = record.rfind("\n", 0, pos) + 1
    z = record.find("\n", pos)
    z = len(record) if z < 0 else z
    return PlantedSpan(source="record", start=a, end=z, text=record[a:z]) if record[a:z].strip() else None


#: at most this many places in the conversation may state the replaced text (more: too common to point at)
MAX_STATED = 3


def _stated(conversation: str, old: str, record: str, end: int) -> list[PlantedSpan]:
    """Where the conversation states the text a substitution replaced (``old``, which ended at ``end`` of
    the base record): its correct value, quoted by a judge as often as the record's wrong one. A number is
    matched whole (not inside a longer number); a one-digit number with the character after it in the
    record (``3`` of ``3年前`` as ``3年``). Empty when the conversation does not say it or says it more than
    :data:`MAX_STATED` times."""
    old = old.strip()
    if not old:
        return []
    if old.isdigit() and len(old) == 1:
        old += record[end:end + 1]
    pattern = re.escape(old)
    if old[0].isdigit():
        pattern = r"(?<![\d.])" + pattern
    if old[-1].isdigit():
        pattern += r"(?![\d.])"
    found = [m for m in re.finditer(pattern, conversation)]
    if not found or len(found) > MAX_STATED:
        return []
    return [PlantedSpan(source="conversation", start=m.start(), end=m.end(), text=m.group()) for m in found]


def _unique(spans: list[PlantedSpan]) -> list[PlantedSpan]:
    out: list[PlantedSpan] = []
    for s in spans:
        if s not in out:
            out.append(s)
    return out


def turns(base: BaseCase, rubric: Rubric) -> list[Turn]:
    """The base conversation as a list of turns (the shape of examples/cases.jsonl), read from its
    ``医生：`` / ``患者：`` lines with the rubric's role labels; shown to a judge it is the same text."""
    roles = {label: role for role, label in rubric.roles.items()}
    out = []
    for line in base.conversation.split("\n"):
        label, sep, text = line.partition("：")
        if not sep or label not in roles:
            raise UsageError(f"base case {base.id}: a conversation line without a known speaker: {line!r}")
        out.append(Turn(role=roles[label], text=text))
    if "\n".join(f"{rubric.roles[t.role]}：{t.text}" for t in out) != base.conversation:
        raise UsageError(f"base case {base.id}: the turns do not give back the conversation")
    return out


def clean_control(base: BaseCase, case_id: str, rubric: Rubric, style: str = "plain",
                  conversation: str | list[Turn] | None = None) -> SuiteCase:
    """A clean control: the base case as is (nothing planted), its headings in ``style``."""
    record = restyle(base.record, style)[0]
    conv = turns(base, rubric) if conversation is None else conversation
    return SuiteCase(case=Case(id=case_id, conversation=conv, record=record), base=base.id)


def candidates(bases: tuple[BaseCase, ...] | None = None,
               family: Family = "main") -> dict[str, list[tuple[BaseCase, Plant]]]:
    """Every plant every operator of ``family`` can make in every base case, by operator, in a fixed order."""
    ops = FAMILIES[family]
    out: dict[str, list[tuple[BaseCase, Plant]]] = {t: [] for t in ops}
    for b in bases or base_cases():
        for type_id, op in ops.items():
            out[type_id].extend((b, p) for p in op(b))
    return out


def build_suite(seed: int = DEFAULT_SEED, rubric: Rubric | None = None, family: Family = "main") -> list[SuiteCase]:
    """The built-in suite for ``seed`` (module docstring): clean controls, single-error cases, then
    two-error cases, planted by the operators of ``family``. Same seed, same suite (byte for byte);
    another seed draws other plants."""
    return plant_suite(base_cases(), rubric or load_rubric(RUBRIC_ID), seed, family=family)


def plant_suite(bases: Sequence[BaseCase], rub: Rubric, seed: int, *, styles: Mapping[str, list[str]] | None = None,
                conversations: Mapping[str, str | list[Turn]] | None = None,
                family: Family = "main") -> list[SuiteCase]:
    """A suite planted into ``bases`` with ``seed``: each base as a clean control in each of its heading
    ``styles`` (base id -> styles; default every style of :data:`STYLES`), up to :data:`PER_TYPE`
    single-error cases per type, then two-error cases (:func:`build_suite`). ``conversations``: each
    base's conversation as its case gave it (default: read from the base)."""
    rng = random.Random(seed)
    cands = candidates(tuple(bases), family)
    every = list(STYLES)

    def styles_of(b: BaseCase) -> list[str]:
        return list(styles[b.id]) if styles is not None else every

    def conv(b: BaseCase) -> str | list[Turn] | None:
        return conversations.get(b.id) if conversations is not None else None

    suite = [clean_control(b, f"{b.id}~clean" + ("" if s == styles_of(b)[0] else f"~{s}"), rub, s, conv(b))
             for s in every for b in bases if s in styles_of(b)]
    records: set[str] = {c.case.record for c in suite}
    count = dict.fromkeys(cands, 0)
    for type_id, lst in cands.items():
        picked = rng.sample(lst, min(PER_TYPE, len(lst)))
        for n, (b, p) in enumerate(picked, start=1):
            sc = apply(b, [p], rub, f"{b.id}~{type_id}~{n}", rng.choice(styles_of(b)), conv(b))
            if sc.case.record in records:
                continue
            records.add(sc.case.record)
            suite.append(sc)
            count[type_id] += 1
    pairs = 0
    types = [t for t in cands if cands[t]]
    attempts = 0
    while types and attempts < 20000 and (pairs < N_PAIRS or any(count[t] < MIN_PER_TYPE for t in types)):
        attempts += 1
        needy = [t for t in types if count[t] < MIN_PER_TYPE]
        t1 = rng.choice(needy or types)
        b, p1 = rng.choice(cands[t1])
        others = [(t, q) for t in types if t != t1 for bb, q in cands[t] if bb.id == b.id and not overlaps(p1, q)]
        if not others:
            continue
        t2, p2 = rng.choice(others)
        sc = apply(b, [p1, p2], rub, f"{b.id}~{t1}+{t2}~{pairs + 1}", rng.choice(styles_of(b)), conv(b))
        if sc.case.record in records:
            continue
        records.add(sc.case.record)
        suite.append(sc)
        pairs += 1
        count[t1] += 1
        count[t2] += 1
    return suite


@cache
def builtin_suite(seed: int = DEFAULT_SEED, family: Family = "main") -> tuple[SuiteCase, ...]:
    """The built-in suite of ``family`` (cached per seed and family)."""
    return tuple(build_suite(seed, family=family))


def sample(suite: list[SuiteCase] | tuple[SuiteCase, ...], n: int, seed: int) -> list[SuiteCase]:
    """``n`` cases of ``suite`` drawn without replacement with ``seed`` (all of it when n >= its size),
    in suite order; clean controls and planted cases in the suite's proportions (at least one clean
    control when the suite has one and n >= 2), so a sample still measures false alarms."""
    if n >= len(suite):
        return list(suite)
    rng = random.Random(seed)
    clean = [i for i, c in enumerate(suite) if c.clean]
    planted = [i for i, c in enumerate(suite) if not c.clean]
    k = round(n * len(clean) / len(suite))
    if clean and n >= 2:
        k = max(k, 1)
    k = min(k, len(clean), n)
    keep = set(rng.sample(clean, k)) | set(rng.sample(planted, min(n - k, len(planted))))
    return [c for i, c in enumerate(suite) if i in keep]
