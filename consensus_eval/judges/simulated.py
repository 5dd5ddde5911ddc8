"""The ``simulated`` judge: a demo device for trying the tool offline. It never gives a real judgment.

A panel of simulated judges shows a newcomer what a panel gives (alpha with intervals, flagged cases, a review
queue, a leaderboard) with no key and no network, for a rubric of the built-in kinds (a plug-in kind's dimension
is a failed call: judge it with an LLM). Each judge is a seeded *persona* that reads the case itself with plain
text rules and returns the typed :class:`Judgment` an LLM judge would (deductions, a likert level, criterion
verdicts, each with quotes of the case); the scores are re-derived from it like any judge's. Every output labels
such a judge "simulated".

What every persona reads in a case (:class:`Reading`, the same for all of them):

- ``wrong``: record sentences holding a number the conversation never says (altered or invented values);
- ``missing``: conversation clauses holding a number the record never gives (omissions);
- ``section``: required sections of the rubric the record lacks;
- ``unclear``: record sentences few of whose words the conversation has (reworded, or invented);
- for a rubric with rules registered (``medical_record``), the rules judge's own findings (``rules``).

A finding becomes a deduction of the type whose name and category say they are about it (``wrong`` goes to a
type of errors, ``missing`` to one of omissions...: :data:`SIGNAL_WORDS`), lowers a likert dimension by what
the dimension's name and description say it rates, and a criterion is met when the record carries the words it
names (a fault: outside a negation). The personas differ in what they see and how hard they score:

- ``strict``: sees nearly everything, takes a range type's top points, rates half a level low;
- ``lenient``: overlooks a share of the findings, takes a range type's bottom points, rates half a level high,
  needs fewer of a criterion's words to call it met;
- ``misses_category``: never sees one category of each deductions dimension (chosen by the seed), nor
  omissions on a likert dimension, nor faults named by a negative criterion;
- ``over_calls``: false alarms: deducts the ``unclear`` sentences too, sees faults easily.

Each also slips at random, seeded by (judge seed, persona, case, dimension, run, finding): the same config gives
the same judgments on every machine, and repeated runs of a case differ a little, as an LLM's would.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from consensus_eval._errors import InputError, JudgeError
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import SimulatedJudgeConfig
from consensus_eval.domain.judgment import CallOutcome, CriterionVerdict, Deduction, Judgment, PenaltyHit
from consensus_eval.domain.kinds import Criteria, Deductions, Likert
from consensus_eval.domain.kinds.deductions import deductions_in
from consensus_eval.domain.rubric import Criterion, DeductionType, Dimension, Rubric
from consensus_eval.domain.sections import Sections

#: what a finding is about (module docstring)
Signal = Literal["wrong", "missing", "section", "unclear", "rules"]

#: what the judge knows of words, per language, as data (simulated.json)
_WORDS = json.loads(Path(__file__).with_suffix(".json").read_text(encoding="utf-8"))


def _any_of(fragments: dict[str, list[str]]) -> re.Pattern[str]:
    return re.compile("|".join(f for lang in fragments.values() for f in lang))


#: the words (regular expressions, on the lower-cased text) by which a deduction type, a category or a dimension
#: says it is about a signal: the demo's only knowledge of what a rubric's ids mean
SIGNAL_WORDS: dict[Signal, re.Pattern[str]] = {k: _any_of(v) for k, v in _WORDS["signals"].items()}
#: how much each kind of finding weighs, in likert levels (on a 1-5 scale) and as seen by default (0-1)
_LEVELS: dict[Signal, float] = {"wrong": 1.0, "missing": 0.6, "section": 0.8, "unclear": 0.3, "rules": 0.7}
_SALIENCE: dict[Signal, float] = {"wrong": 0.9, "missing": 0.7, "section": 0.95, "unclear": 0.35, "rules": 0.85}


@dataclass(frozen=True)
class _Manner:
    """How a persona judges: ``bias`` added to a finding's salience (seen at 0.5 or more), ``levels`` taken off a
    likert rating, the share of a criterion's words that makes it met, ``fault`` the same for a negative one (None:
    faults never seen), ``points`` where in a range type's points it deducts (0 bottom, 1 top)."""

    bias: float
    levels: float
    met: float
    fault: float | None
    points: float
    unclear: float = 0.0     # added to the salience of ``unclear`` findings (false alarms)
    blind: bool = False      # misses one category per deductions dimension, and omissions on a likert one


PERSONAS: dict[str, _Manner] = {
    "strict": _Manner(bias=0.15, levels=0.3, met=0.6, fault=0.55, points=1.0),
    "lenient": _Manner(bias=-0.15, levels=-0.3, met=0.5, fault=0.65, points=0.0),
    "misses_category": _Manner(bias=0.05, levels=0.0, met=0.55, fault=None, points=0.5, blind=True),
    "over_calls": _Manner(bias=0.1, levels=0.1, met=0.55, fault=0.45, points=0.5, unclear=0.4),
}
#: the most findings of one kind a reading keeps (the first ones), and deductions one judgment gives
MAX_FINDINGS, MAX_DEDUCTIONS = 6, 8
#: how far a persona's random slip moves a finding's salience, a likert rating (levels) and a criterion's share
_NOISE, _LEVEL_NOISE, _MET_NOISE = 0.3, 0.45, 0.1


@dataclass(frozen=True)
class Finding:
    """Something a reading found: its ``signal``, the ``quote`` of the case it rests on (empty for a missing
    section), a stable ``key``; for a ``rules`` finding the rubric ids the rules gave it."""

    signal: Signal
    quote: str
    key: str
    category: str | None = None
    type: str | None = None
    points: float | None = None
    penalty: str | None = None


_SPLIT = re.compile(r"[\n。；;！？!?]|(?<!\d)\.(?!\d)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_LATIN = re.compile(r"[a-z][a-z']{3,}")
_CJK = re.compile(r"[\u3400-\u9fff]+")
_NUMBER_WORDS: dict[str, str] = {w: v for lang in _WORDS["numbers"].values() for w, v in lang.items()}
_STOP = frozenset(w for lang in _WORDS["stop"].values() for w in lang)
_NEGATION = _any_of(_WORDS["negations"])

def _pieces(text: str) -> list[str]:
    """The sentences (or clauses) of ``text``, each a verbatim piece of it, stripped; the empty ones dropped."""
    return [p.strip() for p in _SPLIT.split(text) if len(p.strip()) >= 2]


def _numbers(text: str) -> set[str]:
    found = {f"{float(n):g}" for n in _NUMBER.findall(text)}
    lowered = text.lower()
    found |= {v for w, v in _NUMBER_WORDS.items() if (re.search(rf"\b{w}\b", lowered) if w.isascii() else w in text)}
    return found


def terms(text: str) -> set[str]:
    """The words a reading compares: numbers, Latin words of four letters or more (not the commonest), and the
    two-character pieces of Chinese text."""
    lowered = text.lower()
    out = {w.rstrip("s") for w in _LATIN.findall(lowered)} - _STOP | {
        f"{float(n):g}" for n in _NUMBER.findall(lowered)}
    for run in _CJK.findall(text):
        out |= {run} if len(run) == 1 else {run[i:i + 2] for i in range(len(run) - 1)}
    return out


def _affirmed(sentence: str) -> str:
    """A sentence up to its first negation (``Denies fever`` affirms nothing about fever)."""
    m = _NEGATION.search(sentence.lower())
    return sentence if m is None else sentence[:m.start()]


@dataclass
class Reading:
    """What the text rules find in one case (module docstring): the same for every persona."""

    sentences: list[str]
    findings: list[Finding]
    #: the words of the whole record, those outside a negation, and the conversation's
    record_terms: set[str] = field(default_factory=set)
    affirmed_terms: set[str] = field(default_factory=set)
    conversation_terms: set[str] = field(default_factory=set)


def read_case(case: Case, rubric: Rubric) -> Reading:
    """Read ``case`` against ``rubric`` (module docstring)."""
    conversation = rubric.conversation_text(case)
    sentences = _pieces(case.record)
    conv_numbers, rec_numbers = _numbers(conversation), _numbers(case.record)
    conv_terms = terms(conversation)
    found: dict[Signal, list[Finding]] = {"wrong": [], "missing": [], "section": [], "unclear": []}
    for s in sentences:
        if _numbers(s) - conv_numbers:
            found["wrong"].append(Finding("wrong", s, f"w:{s}"))
        else:
            mine = terms(s)
            if len(mine) >= 4 and len(mine & conv_terms) / len(mine) < 0.3:
                found["unclear"].append(Finding("unclear", s, f"u:{s}"))
    for clause in _pieces(conversation):
        if _numbers(clause) - rec_numbers and not any(f.quote == clause for f in found["missing"]):
            found["missing"].append(Finding("missing", clause, f"m:{clause}"))
    present = {s.name for s in Sections.of(rubric).find(case.record)}
    found["section"] = [Finding("section", "", f"s:{name}") for name in rubric.required_sections
                        if name not in present]
    findings = [f for kind in found.values() for f in kind[:MAX_FINDINGS]]
    return Reading(sentences=sentences, findings=findings, record_terms=terms(case.record),
                   affirmed_terms=set().union(*(terms(_affirmed(s)) for s in sentences)) if sentences else set(),
                   conversation_terms=conv_terms)


def _key(case: Case) -> tuple[str, str, str]:
    return case.id, case.record, str(case.conversation)


def _uniform(*parts: object) -> float:
    """A number in [0, 1) fixed by ``parts`` (the same on every machine and in every process)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2 ** 64


class UnknownKind(JudgeError, ValueError):
    """A dimension of a kind the simulated judge does not judge: its call fails (``local``)."""


class SimulatedJudge:
    """A simulated judge of the panel (module docstring): offline, free, seeded; labelled simulated everywhere."""

    deterministic = False        # runs differ a little (seeded by the run), as an LLM's do
    reads_prompt = False         # it reads the case itself: its request hash covers the case, not a prompt
    max_case_chars: int | None = 1_000_000
    version = "simulated-2"

    def __init__(self, config: SimulatedJudgeConfig, rubric: Rubric) -> None:
        self.config = config
        self.rubric = rubric
        self.manner = PERSONAS[config.persona]
        # what its judgments say, in the rubric's language (its own, else Chinese for a rubric named in Chinese)
        self._lang = rubric.language if rubric.language in _WORDS["reasons"] else \
            "zh" if _CJK.search(rubric.name) else "en"
        self._words: dict[str, str] = _WORDS["reasons"][self._lang]
        # per case (its id and text: an edited case is read again), read once for all its dimensions
        self._readings: dict[tuple[str, str, str], Reading] = {}
        self._rules: dict[tuple[str, str, str], dict[str, Judgment]] = {}
        self._check: Callable[[Case, Rubric], dict[str, Judgment]] | None = None
        try:
            from consensus_eval.judges.rules import rules_for

            rules = rules_for(rubric)
            rules.require_compatible(rubric)
            self._check = rules.check_case
        except InputError:   # no rules for this rubric: the text rules alone
            pass
        # where each kind of finding goes: the rubric's deduction types that say they are about it
        self._types: dict[Signal, list[tuple[str, str, str]]] = {}
        for signal, words in SIGNAL_WORDS.items():
            self._types[signal] = [
                (d.id, c.id, t.id) for d in deductions_in(rubric.dimensions) for c in d.categories
                for t in c.types if words.search(f"{t.id} {t.name} {c.id} {c.name} {c.scope}".lower())]
        # a kind of finding no type is about goes to any type of the first deductions dimension
        first = next(iter(deductions_in(rubric.dimensions)), None)
        self._fallback = [(first.id, c.id, t.id) for c in first.categories for t in c.types] if first else []

    # ------------------------------------------------------------------ the Judge protocol

    async def judge(self, case: Case, dimension: Dimension, messages: list[dict[str, str]],
                    run: int = 0) -> CallOutcome:
        try:
            judgment = self.judgment(case, dimension, run)
        except UnknownKind as e:
            return CallOutcome(status="failed", error_kind="local", model=f"simulated/{self.config.persona}",
                               error=str(e))
        return CallOutcome(status="ok", judgment=judgment, raw=None, model=f"simulated/{self.config.persona}",
                           prompt_tokens=0, completion_tokens=0, cost=0.0)

    async def check(self) -> tuple[bool, str]:
        return True, f"simulated ({self.config.persona}, seed {self.config.seed}): a demo device, offline"

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return 0

    def prices(self) -> tuple[float, float] | None:
        return 0.0, 0.0

    # ------------------------------------------------------------------ judging

    def judgment(self, case: Case, dimension: Dimension, run: int = 0) -> Judgment:
        """The persona's judgment of one dimension of ``case`` in repetition ``run``."""
        reading = self._readings.get(_key(case))
        if reading is None:
            reading = self._readings[_key(case)] = read_case(case, self.rubric)
        comment = _WORDS["comment"][self._lang].format(persona=self.config.persona)
        if isinstance(dimension, Likert):
            rating, quotes = self._rating(reading, dimension, case.id, run)
            return Judgment(dimension=dimension.id, rating=rating, evidence=quotes, comment=comment)
        if isinstance(dimension, Criteria):
            criteria = list(dimension.criteria or case.criteria or [])
            return Judgment(dimension=dimension.id, comment=comment,
                            verdicts=[self._verdict(reading, c, case.id, dimension.id, run) for c in criteria])
        if not isinstance(dimension, Deductions):
            raise UnknownKind(f"the simulated judge judges deductions, likert and criteria dimensions, not "
                              f"{dimension.kind} ({dimension.id}): give this rubric an LLM judge")
        deductions, penalties = self._deductions(reading, case, dimension, run)
        return Judgment(dimension=dimension.id, deductions=deductions, fixed_penalties=penalties, comment=comment)

    def _seen(self, f: Finding, case_id: str, dim: str, run: int) -> bool:
        m, c = self.manner, self.config
        salience = _SALIENCE[f.signal] + m.bias + (m.unclear if f.signal == "unclear" else 0.0)
        slip = (2 * _uniform(c.seed, c.persona, case_id, dim, run, f.key) - 1) * _NOISE
        return salience + slip >= 0.5

    def _blind_category(self, dimension: Deductions) -> str | None:
        if not self.manner.blind or not dimension.categories:
            return None
        return dimension.categories[int(_uniform(self.config.seed, dimension.id) * len(dimension.categories))].id

    def _findings(self, reading: Reading, case: Case, dimension: Deductions) -> list[Finding]:
        """The findings of ``reading`` for a deductions dimension, each with its category and type."""
        out: list[Finding] = []
        if self._check is not None:   # the rules' own findings, with their ids
            judged = self._rules.get(_key(case))
            if judged is None:
                judged = self._rules[_key(case)] = self._check(case, self.rubric)
            j = judged[dimension.id]
            out += [Finding("rules", d.evidence, f"r:{d.type}:{d.evidence}", d.category, d.type, d.points)
                    for d in j.deductions]
            out += [Finding("rules", p.evidence, f"p:{p.id}", penalty=p.id) for p in j.fixed_penalties]
        for f in reading.findings:
            if self._check is not None and f.signal != "unclear":
                continue     # the rules read numbers and sections better than the text rules
            candidates = self._types[f.signal] or self._fallback
            if not candidates:
                continue
            dim_id, cat, typ = candidates[int(_uniform(f.signal, f.key) * len(candidates))]
            if dim_id == dimension.id:
                out.append(Finding(f.signal, f.quote, f.key, cat, typ))
        return out

    def _deductions(self, reading: Reading, case: Case, dimension: Deductions,
                    run: int) -> tuple[list[Deduction], list[PenaltyHit]]:
        blind = self._blind_category(dimension)
        deductions: list[Deduction] = []
        penalties: list[PenaltyHit] = []
        for f in self._findings(reading, case, dimension):
            if not self._seen(f, case.id, dimension.id, run):
                continue
            if f.penalty is not None:
                penalties.append(PenaltyHit(id=f.penalty, evidence=f.quote, reason=self._reason(f)))
                continue
            if f.category == blind or f.type is None or f.category is None or len(deductions) >= MAX_DEDUCTIONS:
                continue
            typ = dimension.categories_by_id[f.category].types_by_id[f.type]
            deductions.append(Deduction(category=f.category, type=f.type, points=self._points(typ, f.points),
                                        evidence=f.quote, reason=self._reason(f)))
        return deductions, penalties

    def _points(self, typ: DeductionType, given: float | None) -> float:
        if not typ.is_range:
            return typ.low
        if given is not None and self.manner.points == 0.5:
            return given
        return round(typ.low + (typ.high - typ.low) * self.manner.points, 1)

    def _reason(self, f: Finding) -> str:
        return self._words[f.signal].format(section=f.key[2:]) + self._words["simulated"]

    def _rating(self, reading: Reading, dimension: Likert, case_id: str, run: int) -> tuple[int, list[str]]:
        low, top = dimension.level_range
        text = f"{dimension.id} {dimension.name} {dimension.description}".lower()
        about = {s for s, words in SIGNAL_WORDS.items() if words.search(text)}
        drop, quotes = 0.0, list[str]()
        for f in reading.findings:
            if self.manner.blind and f.signal == "missing":
                continue
            if not self._seen(f, case_id, dimension.id, run):
                continue
            weight = (1.0 if f.signal in about else 0.25) if about else 0.5
            drop += _LEVELS[f.signal] * weight
            if weight == 1.0 and f.quote and len(quotes) < 3:
                quotes.append(f.quote)
        c = self.config
        slip = (2 * _uniform(c.seed, c.persona, case_id, dimension.id, run, "level") - 1) * _LEVEL_NOISE
        raw = top - (drop + self.manner.levels) * (top - low) / 4 + slip
        return max(low, min(top, round(raw))), quotes

    def _verdict(self, reading: Reading, criterion: Criterion, case_id: str, dim: str, run: int) -> CriterionVerdict:
        wanted = terms(criterion.text)
        c, m = self.config, self.manner
        slip = (2 * _uniform(c.seed, c.persona, case_id, dim, run, criterion.id) - 1) * _MET_NOISE
        if criterion.points > 0:
            share = len(wanted & reading.record_terms) / len(wanted) if wanted else 0.0
            met = share + slip >= m.met
            quote = max(reading.sentences, key=lambda s: len(terms(s) & wanted), default="")
        else:   # a fault: its words outside a negation, in a sentence saying one of them the conversation does not
            share = len(wanted & reading.affirmed_terms) / len(wanted) if wanted else 0.0
            quote = max(reading.sentences, key=lambda s: len(terms(_affirmed(s)) & wanted), default="")
            novel = bool(terms(_affirmed(quote)) & wanted - reading.conversation_terms)
            met = m.fault is not None and share + slip >= m.fault and (novel or m.unclear > 0)
        quote = quote if met else ""
        return CriterionVerdict(id=criterion.id, met=met, evidence=quote,
                                reason=self._words["criterion"].format(share=round(100 * share)))
