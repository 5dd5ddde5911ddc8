"""A case read once (:class:`Doc`): normalized texts, sections, turns, and the drug mentions of the
record and of the conversation, which several checks share.

Record drug mentions (:class:`RecDrug`) carry whether they are negated, and whether the drug-writing
check skips them: negated, allergy and family-history mentions, drugs the record says were stopped
(停用) or used once (曾), treatment-mode phrases (``予胰岛素治疗``), and bare ``胰岛素`` when the record
also names a specific insulin. Drugs joined by ``、``/``和``/``及`` share the usage text after the last.

Conversation drug mentions (:class:`ConvDrug`) carry whether the patient uses or used the drug: said by
the patient (not negated, not hypothetical, not a relative's, not an allergy, not an answer to a family
question), or confirmed to a doctor's single-drug question. Drugs only prescribed by the doctor are
not in use.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from consensus_eval.domain.cases import Case
from consensus_eval.domain.sections import Section, find_sections
from consensus_eval.judges.rules.medical_record.conversation import (
    FAMILY_QUESTION,
    HYPOTHETICAL,
    QUESTION_WORDS,
    Turn,
    about_relative,
    parse_turns,
)
from consensus_eval.judges.rules.medical_record.lexicon import SECTIONS
from consensus_eval.judges.rules.medical_record.medication import (
    CONNECTOR_ONLY,
    NEG_USE,
    NEG_USE_AFTER,
    NEG_USE_LONGEST,
    ONCE_USED,
    STOPPED,
    DrugHit,
    find_drugs,
    treatment_mode_after,
)
from consensus_eval.judges.rules.medical_record.quantities import Duration, Measure, durations, keyword_kinds, measures
from consensus_eval.judges.rules.medical_record.text import (
    CLAUSE_END,
    NEG_CONV,
    SENTENCE_END,
    Boundaries,
    GrowingSearch,
    norm,
    pieces,
)

#: a clause ending as a question does (吃药了吗, 什么时候呢)
_QUESTION_END = re.compile(r"(?:吗|么|呢)$")


class Doc:
    """A case read once: normalized texts, sections, turns, drug mentions.

    What the checks look up many times is found once here, so that a check costs time in proportion
    to the text's length: clause and sentence delimiters (:class:`Boundaries`; ``rec_clause(pos)`` in
    O(log n)), the turn at a position (by bisection), each turn's clauses and the question before it.
    """

    def __init__(self, case: Case, roles: dict[str, str] | None = None) -> None:
        self.record = case.record
        self.rec = norm(case.record)
        self.conversation = case.conversation_as_text(roles)
        self.cv = norm(self.conversation)
        self.sections: dict[str, Section] = {}
        self.headings = find_sections(self.rec, SECTIONS)
        for s in self.headings:
            if s.canonical and s.name not in self.sections:
                self.sections[s.name] = s
        self.turns = parse_turns(self.cv)
        self._turn_starts = [t.start for t in self.turns]
        self._questions: dict[int, str] = {}
        self._turn_pieces: dict[int, list[tuple[int, int]]] = {}
        self._starts: dict[str, list[int]] = {}

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

    # -- clauses and sentences (delimiters found once per text)
    @cached_property
    def rec_clauses(self) -> Boundaries:
        return Boundaries(self.rec, CLAUSE_END)

    @cached_property
    def rec_sentences(self) -> Boundaries:
        return Boundaries(self.rec, SENTENCE_END)

    @cached_property
    def cv_clauses(self) -> Boundaries:
        return Boundaries(self.cv, CLAUSE_END)

    @cached_property
    def cv_sentences(self) -> Boundaries:
        return Boundaries(self.cv, SENTENCE_END)

    def rec_clause(self, pos: int, lo: int = 0, hi: int | None = None) -> tuple[int, int]:
        """The record's clause around ``pos`` (within ``rec[lo:hi]``): ``bounds(rec, pos, CLAUSE_END, lo, hi)``."""
        return self.rec_clauses.bounds(pos, lo, hi)

    # -- conversation structure
    def turn_text(self, t: Turn) -> str:
        return self.cv[t.start:t.end]

    def turn_at(self, pos: int) -> int | None:
        """Index of the turn whose text holds ``pos`` (turns are disjoint and in order), or None."""
        i = bisect_right(self._turn_starts, pos) - 1
        return i if i >= 0 and pos < self.turns[i].end else None

    def turn_pieces(self, i: int) -> list[tuple[int, int]]:
        """The clauses of turn ``i``: ``pieces(cv, turn.start, turn.end)``, found once."""
        got = self._turn_pieces.get(i)
        if got is None:
            t = self.turns[i]
            got = self._turn_pieces[i] = pieces(self.cv, t.start, t.end)
        return got

    def question_before(self, i: int) -> str:
        """The previous turn's text when it is the doctor's (or an unlabelled) question, else ''."""
        if i == 0:
            return ""
        got = self._questions.get(i)
        if got is None:
            prev = self.turns[i - 1]
            text = self.turn_text(prev)
            asks = prev.role in ("doctor", "unknown") and ("?" in text or QUESTION_WORDS.search(text))
            got = self._questions[i] = text if asks else ""
        return got

    def is_question(self, a: int, b: int) -> bool:
        """Whether the conversation's clause ``cv[a:b]`` is a question: ``?`` after it, or 吗/么/呢 at its end."""
        return self.cv[b:b + 1] == "?" or _QUESTION_END.search(self.cv, a, b) is not None

    def patient_turns(self) -> Iterator[tuple[int, Turn]]:
        for i, t in enumerate(self.turns):
            if t.role != "doctor":
                yield i, t

    # -- measurements (keyword and value; quantities.measures), found once
    @cached_property
    def rec_measures(self) -> list[Measure]:
        return measures(self.rec, clauses=self.rec_clauses)

    @cached_property
    def cv_measures(self) -> list[Measure]:
        return measures(self.cv, clauses=self.cv_clauses)

    @cached_property
    def cv_keywords(self) -> list[tuple[int, str]]:
        """(start, kind) of every measurement keyword of the conversation, in order."""
        return keyword_kinds(self.cv, 0, len(self.cv))

    # -- durations (quantities.durations), found once
    @cached_property
    def rec_durations(self) -> list[Duration]:
        return durations(self.rec)

    @cached_property
    def cv_durations(self) -> list[Duration]:
        return durations(self.cv)

    def in_measure_clause(self, source: str, pos: int) -> bool:
        """Whether the clause around ``pos`` of the record (``source`` "record") or the conversation holds a
        measurement (``饭后两小时13``: its 饭后 is not when a drug is taken)."""
        starts = self._measure_starts(source)
        a, b = (self.rec_clauses if source == "record" else self.cv_clauses).bounds(pos)
        k = bisect_left(starts, a)
        return k < len(starts) and starts[k] < b

    def _measure_starts(self, source: str) -> list[int]:
        got = self._starts.get(source)
        if got is None:
            ms = self.rec_measures if source == "record" else self.cv_measures
            got = self._starts[source] = sorted(m.start for m in ms)
        return got

    # -- drugs
    @cached_property
    def rec_drugs(self) -> list[DrugHit]:
        return find_drugs(self.rec)

    @cached_property
    def rec_drug_mentions(self) -> list[RecDrug]:
        return _record_drugs(self)

    @cached_property
    def conv_drugs(self) -> list[ConvDrug]:
        return _conversation_drugs(self)

    def rec_drug_end_before(self, pos: int) -> int:
        """Where the last drug name of the record ending at or before ``pos`` ends (0 if none)."""
        return _end_before(self._drug_ends("record"), pos)

    def cv_drug_end_before(self, pos: int) -> int:
        """Where the last drug name of the conversation ending at or before ``pos`` ends (0 if none)."""
        return _end_before(self._drug_ends("conversation"), pos)

    def _drug_ends(self, source: str) -> list[int]:
        key = f"drugs:{source}"
        got = self._starts.get(key)
        if got is None:
            hits = self.rec_drugs if source == "record" else [c.hit for c in self.conv_drugs]
            got = self._starts[key] = sorted(h.end for h in hits)
        return got

    def drug_quote(self, d: RecDrug) -> tuple[str, tuple[int, int]]:
        """The record's text of a drug line: the name up to the end of its first clause."""
        end = min(d.own[1], self.rec_clauses.stop(d.hit.end))
        while end > d.hit.end and self.rec[end - 1] in " 、和及与":
            end -= 1
        verb = re.search(r"(?:打|用|注射|口服|服用)$", self.rec[max(0, d.hit.start - 2):d.hit.start])
        start = d.hit.start - (len(verb.group()) if verb else 0)
        return self.rq(start, end), (start, end)


def _end_before(ends: list[int], pos: int) -> int:
    i = bisect_right(ends, pos) - 1
    return ends[i] if i >= 0 else 0


@dataclass(frozen=True)
class ConvDrug:
    hit: DrugHit
    in_use: bool  # the patient uses or used it (required in the record)
    window: tuple[int, int]


_CONFIRMS_USE = re.compile(r"^(?:嗯|对|是|有|在用|在吃|在打|用着|吃着|打着|用的|吃的|打的|用过|吃过|打过)")


def _conversation_drugs(doc: Doc) -> list[ConvDrug]:
    hits = find_drugs(doc.cv)
    starts = [h.start for h in hits]  # in order (found left to right)

    def hits_in(t: Turn) -> int:
        return bisect_left(starts, t.end) - bisect_left(starts, t.start)

    clause_facts: dict[tuple[int, int], tuple[bool | None, bool]] = {}  # per clause: about a relative, hedged
    neg_use = GrowingSearch(doc.cv, NEG_USE, NEG_USE_LONGEST)  # cv[a:h.start], a clause's mentions in order
    out = []
    for idx, h in enumerate(hits):
        ti = doc.turn_at(h.start)
        if ti is None:
            continue
        turn = doc.turns[ti]
        a, b = doc.cv_clauses.bounds(h.start, turn.start, turn.end)
        got = clause_facts.get((a, b))
        if got is None:
            clause = doc.cv[a:b]
            got = clause_facts[a, b] = (about_relative(clause, turn.role),
                                        bool(HYPOTHETICAL.search(clause)) or "过敏" in clause)
        rel, hedged = got
        negated = bool(neg_use.search(a, h.start) or NEG_USE_AFTER.match(doc.cv, h.end, b))
        if turn.role == "doctor":
            in_use = False
            if ti + 1 < len(doc.turns) and doc.turns[ti + 1].role != "doctor" and hits_in(turn) == 1:
                q = doc.turn_text(turn)
                if "?" in q or QUESTION_WORDS.search(q):
                    first = doc.turn_pieces(ti + 1)
                    first_text = doc.cv[first[0][0]:first[0][1]] if first else ""
                    in_use = bool(_CONFIRMS_USE.match(first_text)) and not NEG_CONV.match(first_text)
        else:
            q = doc.question_before(ti)
            in_use = not negated and not hedged and rel is not True and not (q and FAMILY_QUESTION.search(q))
        # window: the rest of the turn up to the next drug, then up to two drug-free turns after it
        nxt_drug = hits[idx + 1].start if idx + 1 < len(hits) else len(doc.cv)
        end = min(turn.end, nxt_drug)
        if end == turn.end:
            for t in doc.turns[ti + 1:ti + 3]:
                if hits_in(t):
                    break
                end = t.end
        out.append(ConvDrug(h, in_use, (h.end, end)))
    return out


@dataclass(frozen=True)
class RecDrug:
    hit: DrugHit
    negated: bool
    skip_writing: bool
    own: tuple[int, int]    # from the name to the next drug or the sentence end
    usage: tuple[int, int]  # clause start to the end of its group's usage text


def _record_drugs(doc: Doc) -> list[RecDrug]:
    hits = [h for h in doc.rec_drugs if not doc.in_family_section(h.start)]
    clauses = [doc.rec_clause(h.start) for h in hits]
    stopped_clauses = {(a, b) for a, b in set(clauses) if STOPPED.search(doc.rec, a, b)}
    stopped = {h.generic for h, clause in zip(hits, clauses, strict=True) if clause in stopped_clauses}
    specific_insulin = any(h.insulin and h.generic != "胰岛素" for h in hits)
    own_ends: list[int] = []
    for i, h in enumerate(hits):
        s_end = doc.rec_sentences.stop(h.start)
        nxt = hits[i + 1].start if i + 1 < len(hits) and hits[i + 1].start < s_end else s_end
        own_ends.append(nxt)
    usage_ends: list[int] = []  # built from the last drug back, reversed below
    for i in range(len(hits) - 1, -1, -1):  # a drug joined to the next by 、/和/及 shares its usage
        joined = i + 1 < len(hits) and own_ends[i] == hits[i + 1].start and \
            CONNECTOR_ONLY.match(doc.rec[hits[i].end:own_ends[i]])
        usage_ends.append(usage_ends[-1] if joined else own_ends[i])
    usage_ends.reverse()
    # per clause (a clause may hold many mentions): what does not depend on the mention; whether each
    # mention is followed by a treatment-mode phrase (予二甲双胍、阿卡波糖治疗)
    facts: dict[tuple[int, int], tuple[bool, bool]] = {}
    treatment: dict[int, bool] = {}
    for (a, b), group in _by_clause(hits, clauses).items():
        clause = doc.rec[a:b]
        facts[a, b] = ("过敏" in clause, bool(_USE_HISTORY.search(clause)))
        ends = [h.end for h in group]
        treatment.update(zip(ends, treatment_mode_after(doc.rec, ends, b), strict=True))
    neg_use = GrowingSearch(doc.rec, NEG_USE, NEG_USE_LONGEST)  # rec[a:h.start], a clause's mentions in order
    neg_word = GrowingSearch(doc.rec, _NEG_WORD, 2)
    out = []
    for i, h in enumerate(hits):
        a, b = clauses[i]
        allergy, use_history = facts[a, b]
        negated = bool(neg_use.search(a, h.start) or NEG_USE_AFTER.match(doc.rec, h.end, b)
                       or (neg_word.search(a, h.start) and use_history))
        # (ONCE_USED ends the text before the name; it is at most 4 characters long)
        skip = (negated or allergy or h.generic in stopped
                or bool(ONCE_USED.search(doc.rec, max(a, h.start - 4), h.start)) or treatment[h.end]
                or (h.generic == "胰岛素" and specific_insulin))
        out.append(RecDrug(h, negated, skip, (h.end, own_ends[i]), (a, usage_ends[i])))
    return out


_NEG_WORD = re.compile(r"否认|无|未曾|从未")
_USE_HISTORY = re.compile(r"使用史|用药史|治疗史")


def _by_clause(hits: list[DrugHit], clauses: list[tuple[int, int]]) -> dict[tuple[int, int], list[DrugHit]]:
    """Mentions grouped by their clause, each group in order."""
    out: dict[tuple[int, int], list[DrugHit]] = {}
    for h, clause in zip(hits, clauses, strict=True):
        out.setdefault(clause, []).append(h)
    return out
