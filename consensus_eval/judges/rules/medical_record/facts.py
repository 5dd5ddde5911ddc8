"""What the conversation says about the patient, and what the record affirms.

The patient's own facts come from patient and family turns, clause by clause, skipping clauses about
a relative or a spouse (and the clauses after a relative in the same turn) and turns answering a
family question; ``我爸``/``我女儿`` in a family member's turn is the patient, ``她外婆`` is a relative.
A doctor's question about exactly one topic answered ``有/对/是/嗯`` counts as the patient affirming it.
Questions, unsure answers (不知道, 记不清) and negated clauses affirm nothing.
"""

from __future__ import annotations

import re

from consensus_eval.judges.rules.medical_record.conversation import (
    FAMILY_QUESTION,
    KIN,
    NOT_STATED,
    OTHER_PERSON,
    SELF_START,
    TENTATIVE,
    UNSURE,
    YES,
    about_relative,
)
from consensus_eval.judges.rules.medical_record.document import Doc
from consensus_eval.judges.rules.medical_record.lexicon import DIAGNOSES, PAST_DISEASES
from consensus_eval.judges.rules.medical_record.text import (
    NEG_CONV,
    NEG_RECORD,
    POST_NEG_CONV,
    POST_NEG_RECORD,
    is_negated,
)

#: a disease of the lexicon (past history, complications): a clause naming one speaks of that disease
_ANY_DISEASE = re.compile("|".join([*(pattern for _, _, pattern in PAST_DISEASES),
                                    *(conv_pattern for _, conv_pattern, _ in DIAGNOSES)]))


def self_affirmed(doc: Doc, pattern: str, topics: list[str]) -> tuple[int, int] | None:
    """Span of a patient-side clause affirming that the patient has ``pattern`` (or None)."""
    rx = re.compile(pattern)
    for i, turn in doc.patient_turns():
        q = doc.question_before(i)
        if q and FAMILY_QUESTION.search(q):
            continue
        clauses = doc.turn_pieces(i)
        seen_relative = found = False
        for a, b in clauses:
            cl = doc.cv[a:b]
            rel = about_relative(cl, turn.role)
            seen_relative = seen_relative or rel is True
            m = rx.search(cl)
            if not m:
                continue
            found = True
            if rel is True or OTHER_PERSON.search(cl) or doc.is_question(a, b) or UNSURE.search(cl):
                continue
            if seen_relative and not SELF_START.match(cl) and rel is not False:
                continue
            if not is_negated(cl, m.start(), m.end(), NEG_CONV, POST_NEG_CONV):
                return a, b
        if not found and clauses and q and rx.search(q) and sum(bool(re.search(t, q)) for t in topics) == 1:
            a, b = clauses[0]
            first = doc.cv[a:b]
            if YES.match(first) and not NEG_CONV.match(first) and not UNSURE.search(first):
                return a, b
    return None


def family_affirmed(doc: Doc, pattern: str, topics: list[str]) -> tuple[int, int] | None:
    """Span of a clause affirming that a relative of the patient has ``pattern`` (or None)."""
    rx = re.compile(pattern)
    for i, turn in doc.patient_turns():
        q = doc.question_before(i)
        fam_q = bool(q and (FAMILY_QUESTION.search(q) or KIN.search(q)))
        single = bool(q and rx.search(q) and sum(bool(re.search(t, q)) for t in topics) == 1)
        clauses = doc.turn_pieces(i)
        for k, (a, b) in enumerate(clauses):
            cl = doc.cv[a:b]
            rel = about_relative(cl, turn.role)
            if rel is False or (rel is None and (not fam_q or SELF_START.match(cl) or OTHER_PERSON.search(cl))):
                continue
            m = rx.search(cl)
            if m:
                if not is_negated(cl, m.start(), m.end(), NEG_CONV, POST_NEG_CONV) and not UNSURE.search(cl):
                    return a, b
                continue
            if NEG_CONV.search(cl) or UNSURE.search(cl):
                continue
            if any(re.search(t, cl) for t in topics) or _ANY_DISEASE.search(cl):
                continue  # "我爸有高血压", "我妈妈有甲减" answer with another disease
            if rel and re.search(r"有|是|得", cl):
                prev = doc.cv[clauses[k - 1][0]:clauses[k - 1][1]] if k else ""
                if (prev and rx.search(prev) and re.search(r"也|都", cl)) or single:
                    return a, b
            if k == 0 and fam_q and single and YES.match(cl):
                return a, b
    return None


def topic_mentioned(doc: Doc, pattern: str) -> tuple[int, int] | None:
    """Span of the patient's clause that speaks of ``pattern`` (either way), or answers a question on it."""
    rx = re.compile(pattern)
    for i, turn in doc.patient_turns():
        q = doc.question_before(i)
        clauses = doc.turn_pieces(i)
        for a, b in clauses:
            cl = doc.cv[a:b]
            if rx.search(cl) and about_relative(cl, turn.role) is not True and not OTHER_PERSON.search(cl) \
                    and not doc.is_question(a, b):
                return a, b
        if clauses and q and rx.search(q) and not FAMILY_QUESTION.search(q):
            return clauses[0]
    return None


def record_affirms(doc: Doc, pattern: str, lo: int = 0, hi: int | None = None, skip_family: bool = True) -> bool:
    hi = len(doc.rec) if hi is None else hi
    for m in re.finditer(pattern, doc.rec[:hi]):
        if m.start() < lo or (skip_family and doc.in_family_section(m.start())):
            continue
        a, b = doc.rec_clause(m.start(), lo, hi)
        clause = doc.rec[a:b]
        if skip_family and KIN.search(clause):
            continue
        if not is_negated(clause, m.start() - a, m.end() - a, NEG_RECORD, POST_NEG_RECORD):
            return True
    return False


def conversation_states(doc: Doc, pattern: str) -> tuple[int, int] | None:
    """A non-question, non-negated clause of any speaker stating ``pattern`` about the patient."""
    rx = re.compile(pattern)
    for i, turn in enumerate(doc.turns):
        for a, b in doc.turn_pieces(i):
            cl = doc.cv[a:b]
            m = rx.search(cl)
            if not m or doc.is_question(a, b) or about_relative(cl, turn.role) is True \
                    or TENTATIVE.search(cl) or UNSURE.search(cl) or NOT_STATED.search(cl):
                continue
            if not is_negated(cl, m.start(), m.end(), NEG_CONV, POST_NEG_CONV):
                return a, b
    return None
