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
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from consensus_eval.domain.cases import Case
from consensus_eval.judges.rules.medical_record.conversation import (
    FAMILY_QUESTION,
    HYPOTHETICAL,
    QUESTION_WORDS,
    Turn,
    about_relative,
    parse_turns,
)
from consensus_eval.judges.rules.medical_record.medication import (
    CONNECTOR_ONLY,
    DRUG_RE,
    NEG_USE,
    NEG_USE_AFTER,
    ONCE_USED,
    STOPPED,
    TREATMENT_MODE,
    DrugHit,
    find_drugs,
)
from consensus_eval.judges.rules.medical_record.sections import Section, find_sections
from consensus_eval.judges.rules.medical_record.text import CLAUSE_END, NEG_CONV, SENTENCE_END, bounds, norm, pieces


class Doc:
    """A case read once: normalized texts, sections, turns, drug mentions."""

    def __init__(self, case: Case, roles: dict[str, str] | None = None) -> None:
        self.record = case.record
        self.rec = norm(case.record)
        self.conversation = case.conversation_as_text(roles)
        self.cv = norm(self.conversation)
        self.sections: dict[str, Section] = {}
        self.headings = find_sections(self.rec)
        for s in self.headings:
            if s.canonical and s.name not in self.sections:
                self.sections[s.name] = s
        self.turns = parse_turns(self.cv)

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
    def turn_text(self, t: Turn) -> str:
        return self.cv[t.start:t.end]

    def question_before(self, i: int) -> str:
        """The previous turn's text when it is the doctor's (or an unlabelled) question, else ''."""
        if i == 0:
            return ""
        prev = self.turns[i - 1]
        text = self.turn_text(prev)
        if prev.role in ("doctor", "unknown") and ("?" in text or QUESTION_WORDS.search(text)):
            return text
        return ""

    def patient_turns(self) -> Iterator[tuple[int, Turn]]:
        for i, t in enumerate(self.turns):
            if t.role != "doctor":
                yield i, t

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

    def drug_quote(self, d: RecDrug) -> tuple[str, tuple[int, int]]:
        """The record's text of a drug line: the name up to the end of its first clause."""
        end = min(d.own[1], bounds(self.rec, d.hit.end, CLAUSE_END)[1])
        while end > d.hit.end and self.rec[end - 1] in " 、和及与":
            end -= 1
        verb = re.search(r"(?:打|用|注射|口服|服用)$", self.rec[max(0, d.hit.start - 2):d.hit.start])
        start = d.hit.start - (len(verb.group()) if verb else 0)
        return self.rq(start, end), (start, end)


@dataclass(frozen=True)
class ConvDrug:
    hit: DrugHit
    in_use: bool  # the patient uses or used it (required in the record)
    window: tuple[int, int]


def _conversation_drugs(doc: Doc) -> list[ConvDrug]:
    hits = find_drugs(doc.cv)
    out = []
    for idx, h in enumerate(hits):
        ti = next((i for i, t in enumerate(doc.turns) if t.start <= h.start < t.end), None)
        if ti is None:
            continue
        turn = doc.turns[ti]
        a, b = bounds(doc.cv, h.start, CLAUSE_END, turn.start, turn.end)
        clause = doc.cv[a:b]
        rel = about_relative(clause, turn.role)
        negated = bool(NEG_USE.search(doc.cv, a, h.start) or NEG_USE_AFTER.match(doc.cv, h.end, b))
        if turn.role == "doctor":
            in_use = False
            q = doc.turn_text(turn)
            same_turn = [x for x in hits if turn.start <= x.start < turn.end]
            if ti + 1 < len(doc.turns) and doc.turns[ti + 1].role != "doctor" and len(same_turn) == 1 \
                    and ("?" in q or QUESTION_WORDS.search(q)):
                nxt = doc.turns[ti + 1]
                first = pieces(doc.cv, nxt.start, nxt.end)
                first_text = doc.cv[first[0][0]:first[0][1]] if first else ""
                in_use = bool(re.match(r"^(?:嗯|对|是|有|在用|在吃|在打|用着|吃着|打着|用的|吃的|打的|用过|吃过|打过)",
                                       first_text)) and not NEG_CONV.match(first_text)
        else:
            q = doc.question_before(ti)
            in_use = not negated and not HYPOTHETICAL.search(clause) and rel is not True and "过敏" not in clause \
                and not (q and FAMILY_QUESTION.search(q))
        # window: the rest of the turn up to the next drug, then up to two drug-free turns after it
        nxt_drug = hits[idx + 1].start if idx + 1 < len(hits) else len(doc.cv)
        end = min(turn.end, nxt_drug)
        if end == turn.end:
            for t in doc.turns[ti + 1:ti + 3]:
                if any(t.start <= x.start < t.end for x in hits):
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
    stopped = {h.generic for h in hits
               if STOPPED.search(doc.rec, *bounds(doc.rec, h.start, CLAUSE_END))}
    specific_insulin = any(h.insulin and h.generic != "胰岛素" for h in hits)
    own_ends: list[int] = []
    usage_ends: list[int] = []
    for i, h in enumerate(hits):
        s_end = bounds(doc.rec, h.start, SENTENCE_END)[1]
        nxt = hits[i + 1].start if i + 1 < len(hits) and hits[i + 1].start < s_end else s_end
        own_ends.append(nxt)
    for i in range(len(hits) - 1, -1, -1):  # a drug joined to the next by 、/和/及 shares its usage
        joined = i + 1 < len(hits) and own_ends[i] == hits[i + 1].start and \
            CONNECTOR_ONLY.match(doc.rec[hits[i].end:own_ends[i]])
        usage_ends.insert(0, usage_ends[0] if joined else own_ends[i])
    out = []
    for i, h in enumerate(hits):
        a, b = bounds(doc.rec, h.start, CLAUSE_END)
        clause = doc.rec[a:b]
        negated = bool(NEG_USE.search(doc.rec, a, h.start) or NEG_USE_AFTER.match(doc.rec, h.end, b)
                       or (re.search(r"否认|无|未曾|从未", doc.rec[a:h.start])
                           and re.search(r"使用史|用药史|治疗史", clause)))
        rest = re.sub(DRUG_RE.pattern + r"|[、及和与]|片|胶囊", "", doc.rec[h.end:b])
        skip = (negated or "过敏" in clause or h.generic in stopped
                or bool(ONCE_USED.search(doc.rec[a:h.start])) or bool(TREATMENT_MODE.match(rest))
                or (h.generic == "胰岛素" and specific_insulin))
        out.append(RecDrug(h, negated, skip, (h.end, own_ends[i]), (a, usage_ends[i])))
    return out
