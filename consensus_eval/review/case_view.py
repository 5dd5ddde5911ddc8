"""One case as a reviewer sees it: the texts with evidence marks, each dimension with the judges' columns and the
reviewer's labels, blind on a spot-check case until their own scores are in."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from consensus_eval.analysis.audit import CaseAudit, DimensionAudit, JudgeView, RatingItem
from consensus_eval.domain.kinds.base import VIEW_CRITERIA
from consensus_eval.domain.kinds.deductions import deductions_in
from consensus_eval.domain.rubric import Criterion, Dimension
from consensus_eval.domain.sections import Sections
from consensus_eval.execution.labels import fold, slot_of, versions
from consensus_eval.execution.store import (
    HumanLabelRecord,
    Slot,
)
from consensus_eval.review.state import ReviewState
from consensus_eval.review.texts import Block, line_blocks, mark_text, record_blocks


@dataclass
class ItemView:
    """One line of a judge's drill-down on the page (a deduction, once for every run that made it),
    with this reviewer's verdict and comment. ``n`` numbers it on the page (its evidence marks carry
    it); ``ids`` are the deduction ids of its occurrences (what the verdict is stored against)."""

    n: int
    ids: list[str]
    judge: str
    kind: str
    category: str
    type: str
    points: float
    evidence: str
    reason: str
    runs_label: str
    applied_once: bool
    grounding: str | None
    grounding_score: float | None
    grounded: bool
    sections: list[str]
    matched_by: list[str]
    verdict: str | None = None
    comment: str = ""
    #: the version of the reviewer's verdict and comment on it (what a save names: a stale tab is refused)
    version: int = 0


@dataclass
class JudgeColumn:
    """One judge on one dimension: its score (mean of its runs), stars, failures and items."""

    judge: str
    score: float | None
    stars: int | None
    runs_failed: int
    errors: list[str]
    items: list[ItemView]
    #: a likert dimension: the level of each of the judge's successful runs, with its anchor and evidence
    ratings: list[RatingItem] = field(default_factory=list)
    #: the page number of each of ``ratings`` (its evidence marks carry it)
    rating_ns: list[int] = field(default_factory=list)


@dataclass
class AddedView:
    """A deduction this reviewer added (one the judges missed)."""

    id: str
    type_id: str
    type_name: str
    points: float | None
    comment: str
    evidence: str = ""


@dataclass
class TypeChoice:
    """A deduction type (or fixed penalty) a reviewer can add on a dimension: ``low``-``high`` points."""

    id: str
    label: str
    low: float
    high: float
    #: a fixed penalty (the page puts its word for "fixed penalty" before the label)
    penalty: bool = False


@dataclass
class CriterionView:
    """One criterion of a ``criteria`` dimension on the page: the judges' verdicts (judge -> each run's met /
    not met, with evidence), whether they split, and this reviewer's own verdict (``mine``: ``met`` /
    ``not_met`` / None), its origin (``own`` / ``accepted``), evidence and comment."""

    id: str
    text: str
    points: float
    judges: list[tuple[str, list[bool], list[str]]]
    split: bool
    mine: str | None = None
    origin: str | None = None
    evidence: str = ""
    comment: str = ""
    #: its number on the page (the judges' evidence marks for it carry it)
    n: int = 0
    #: the version of the reviewer's verdict on it
    version: int = 0
    #: a verdict given blind and changed once the judges were shown: the later one (the blind one is ``mine``)
    revision: str | None = None


@dataclass
class DimView:
    """One dimension of the case on the page (``kind``: ``likert`` shows ``levels``, level and anchor text,
    as a scale; ``criteria`` shows ``criteria``, a met / not met toggle each)."""

    id: str
    name: str
    max: float
    panel_score: float | None
    my_score: float | None
    comment: str
    star_gap: int
    spread: float | None
    judges: list[JudgeColumn]
    types: list[TypeChoice]
    added: list[AddedView]
    #: where ``my_score`` came from: ``own`` or ``accepted`` (the panel's, confirmed); None without a score
    my_origin: str | None = None
    kind: str = "deductions"
    levels: list[tuple[int, str]] = field(default_factory=list)
    criteria: list[CriterionView] = field(default_factory=list)
    #: the versions of the reviewer's score and of their comment on the dimension
    version: int = 0
    comment_version: int = 0
    #: a score given blind (a spot-check case) and changed once the judges were shown: the later score (None: not
    #: revised). ``my_score`` stays the blind one: validity uses it
    revision: float | None = None

    @property
    def my_level(self) -> int | None:
        """A likert dimension's level the reviewer picked themselves (None: none, or the panel's accepted)."""
        mine = self.my_current
        if mine is None or self.my_origin == "accepted" or not float(mine).is_integer():
            return None
        return int(mine)

    @property
    def my_current(self) -> float | None:
        """The reviewer's score as it stands: the revision when there is one, else the score."""
        return self.revision if self.revision is not None else self.my_score

    @property
    def shown_score(self) -> float | None:
        """What the score field shows: the reviewer's score (revised, if it was), else the panel's."""
        return self.my_current if self.my_current is not None else self.panel_score


@dataclass
class CaseView:
    """One case as a reviewer sees it: the texts with evidence marks, the dimensions, their labels."""

    audit: CaseAudit
    record: list[Block]
    conversation: list[Block]
    dims: list[DimView]
    comment: str
    state: str  # done | started | todo
    #: a case of the random spot check (:mod:`consensus_eval.analysis.spotcheck`)
    spot: bool = False
    #: a spot-check case this reviewer has not scored on every dimension yet: the page shows no panel or
    #: judge score, no deduction and no evidence mark, so the reviewer's own score is not anchored by them
    blind: bool = False
    #: the version of the reviewer's comment on the case
    comment_version: int = 0
    #: the reviewer is the team's adjudicator: the page is for reading; their decisions are references, given on
    #: the adjudication page (``reference``: dimension id -> the reference score given, if any)
    adjudicator: bool = False
    reference: dict[str, float] = field(default_factory=dict)


class CaseViews(ReviewState):
    """One case as a reviewer sees it (:meth:`case_view`)."""

    def case_view(self, reviewer: str, rank: int, *, session: str | None = None) -> CaseView:
        """The case at ``rank`` of the queue, with ``reviewer``'s labels filled in (an adjudicator's references are
        not theirs: the page shows them apart). A spot-check case shown with its judges for the first time to this
        reviewer is recorded as revealed (``session``: the review session's tag): their blind scores are frozen."""
        a = self.case_at(rank)
        case = self.cases[a.case_id]
        rubric = self.results.rubric
        events = self.store.label_events(reviewer=reviewer, case_id=a.case_id)
        folded = fold(events)
        mine = _Mine(reviewer, a.case_id, [lb for lb in folded if lb.origin != "reference"], versions(events))
        adjudicator = self.role(reviewer) == "adjudicator"
        blind = self.blind(reviewer, a.case_id)
        if not blind and not adjudicator and a.case_id in self.spot:
            with self.lock:
                ledger = self._ledger(reviewer)
                if a.case_id not in ledger.revealed:
                    self._reveal(ledger, reviewer, [a.case_id], session)
        marks = _Marks()
        dims = [self._dim_view(a, dim, rubric.dimension(dim.dimension), mine, marks) for dim in a.dimensions]
        conv = rubric.conversation_text(case)   # what the judges read, and the evidence spans index into
        if blind:   # no evidence mark either: the marks show where the judges deducted
            marks = _Marks()
        sep = rubric.separator.strip() or rubric.separator
        return CaseView(
            audit=a, record=mark_text(case.record, record_blocks(case.record, Sections.of(rubric)), marks.record),
            conversation=mark_text(conv, line_blocks(conv, sep), marks.conversation), dims=dims,
            comment=mine.note(None), state=self.states(mine.labels).get(a.case_id, "todo"),
            spot=a.case_id in self.spot, blind=blind, comment_version=mine.version("comment", None),
            adjudicator=adjudicator,
            reference={lb.dimension: float(lb.value) for lb in folded if lb.origin == "reference"
                       and lb.kind == "score" and lb.dimension and isinstance(lb.value, (int, float))})

    def _dim_view(self, a: CaseAudit, dim: DimensionAudit, rd: Dimension, mine: _Mine, marks: _Marks) -> DimView:
        """One dimension of :meth:`case_view`: the judges' columns, the types a reviewer may add, their labels."""
        types = [TypeChoice(t.id, f"{c.name} / {t.name} (−{t.points_text()})", t.low, t.high)
                 for dd in deductions_in([rd]) for c in dd.categories for t in c.types]
        types += [TypeChoice(p.id, f"{p.name} (−{p.points:g})", p.points, p.points, penalty=True)
                  for dd in deductions_in([rd]) for p in dd.fixed_penalties]
        names = {t.id: t.label for t in types}
        columns = [self._judge_column(jv, mine, marks) for jv in dim.judges]
        crits = [self._criterion_view(dim, c, mine, marks) for c in self.criteria_of(a.case_id, rd)] \
            if dim.view == VIEW_CRITERIA else []
        score = mine.get("score", dim.dimension)
        my = score.value if score else None
        return DimView(
            id=dim.dimension, name=dim.name, max=dim.max, panel_score=dim.panel_score,
            my_score=float(my) if isinstance(my, (int, float)) else None, comment=mine.note(dim.dimension),
            star_gap=dim.star_gap, spread=dim.spread, judges=columns, types=types,
            added=[AddedView(id=lb.deduction_id or "", type_id=str(lb.value),
                             type_name=names.get(str(lb.value), str(lb.value)), points=lb.points,
                             comment=lb.comment or "", evidence=lb.evidence or "")
                   for lb in mine.labels if lb.kind == "added_deduction" and lb.dimension == dim.dimension],
            my_origin=score.origin if score else None, kind=rd.view, levels=sorted(rd.anchors.items()),
            criteria=crits, version=mine.version("score", dim.dimension),
            comment_version=mine.version("comment", dim.dimension),
            revision=float(score.revision) if score and isinstance(score.revision, (int, float)) else None)

    def _judge_column(self, jv: JudgeView, mine: _Mine, marks: _Marks) -> JudgeColumn:
        """One judge's column of a dimension: its drill-down's lines with the reviewer's verdicts, its ratings."""
        items = []
        for group in jv.drill_down():
            for it in group.items:
                d = it.deduction
                g = d.grounding
                n = marks.next(g.spans if g else [])
                v = next((mine.verdicts[i] for i in it.ids if i in mine.verdicts), None)
                note = (v.comment or "") if v else next((mine.notes[i] for i in it.ids if i in mine.notes), "")
                items.append(ItemView(
                    n=n, ids=it.label_ids, judge=d.judge, kind=d.kind, category=d.category, type=d.type,
                    points=d.points, evidence=d.evidence, reason=d.reason,
                    runs_label=" ".join(x for x in (group.label, it.runs_label) if x),
                    applied_once=it.applied_once, grounding=g.kind if g else None,
                    grounding_score=g.score if g else None, grounded=g.grounded if g else True,
                    sections=list(dict.fromkeys(s.section for s in (g.spans if g else []) if s.section)),
                    matched_by=list(d.matched_by), verdict=str(v.value) if v else None, comment=note,
                    version=mine.version("verdict", d.dimension, it.label_ids[0])))
        rating_ns = [marks.next([sp for g in r.grounding for sp in (g.spans if g else [])]) for r in jv.ratings]
        return JudgeColumn(judge=jv.judge, score=jv.score, stars=jv.stars, runs_failed=jv.runs_failed,
                           errors=list(jv.errors), items=items, ratings=list(jv.ratings),
                           rating_ns=rating_ns)

    def _criterion_view(self, dim: DimensionAudit, c: Criterion, mine: _Mine, marks: _Marks) -> CriterionView:
        """One criterion of a criteria dimension: the judges' verdicts and evidence, the reviewer's own."""
        row = next((r for r in dim.criteria if r.id == c.id), None)
        lb = mine.criteria.get((dim.dimension, c.id))
        n = marks.next([sp for jv in dim.judges for x in jv.verdicts if x.id == c.id and x.grounding
                        for sp in x.grounding.spans])
        return CriterionView(
            id=c.id, text=c.text, points=float(c.points),
            judges=[(jv.judge, [x.met for x in jv.verdicts if x.id == c.id],
                     [x.evidence for x in jv.verdicts if x.id == c.id and x.evidence]) for jv in dim.judges],
            split=bool(row and row.split), mine=str(lb.value) if lb and lb.value else None,
            origin=lb.origin if lb else None, evidence=(lb.evidence or "") if lb else "",
            comment=(lb.comment or "") if lb else "", n=n,
            version=mine.version("criterion", dim.dimension, c.id),
            revision=str(lb.revision) if lb and lb.revision is not None else None)


@dataclass
class _Mine:
    """One reviewer's labels of one case, looked up as :meth:`ReviewRun.case_view` needs them, with the version of
    every slot they wrote (``versions``)."""

    reviewer: str
    case_id: str
    labels: list[HumanLabelRecord]
    versions: dict[Slot, int]

    def __post_init__(self) -> None:
        self.verdicts = {lb.deduction_id: lb for lb in self.labels if lb.kind == "verdict" and lb.deduction_id}
        self.notes = {lb.deduction_id: lb.comment or "" for lb in self.labels
                      if lb.kind == "comment" and lb.deduction_id}
        self.criteria = {(lb.dimension, lb.deduction_id): lb for lb in self.labels if lb.kind == "criterion"}
        self._by: dict[tuple[str, str | None], HumanLabelRecord] = {
            (lb.kind, lb.dimension): lb for lb in self.labels if not lb.deduction_id}

    def get(self, kind: str, dimension: str | None) -> HumanLabelRecord | None:
        """The label of ``kind`` on ``dimension`` (None: the case) without a deduction id."""
        return self._by.get((kind, dimension))

    def note(self, dimension: str | None) -> str:
        """The comment on ``dimension`` (None: on the case)."""
        lb = self.get("comment", dimension)
        return (lb.comment or "") if lb else ""

    def version(self, kind: str, dimension: str | None, deduction_id: str | None = None) -> int:
        """The version of the slot of ``kind`` on ``dimension`` / ``deduction_id`` (0: never written)."""
        return self.versions.get(slot_of(self.reviewer, self.case_id, kind, dimension, deduction_id), 0)


class _Marks:
    """The evidence marks of a case page: each item numbered in page order, with its spans in the record or the
    conversation."""

    def __init__(self) -> None:
        self.n = 0
        self.record: list[tuple[int, int, int]] = []
        self.conversation: list[tuple[int, int, int]] = []

    def next(self, spans: Iterable[Any]) -> int:
        """The next item's number, its ``spans`` (``source``, ``start``, ``end``) marked with it."""
        self.n += 1
        for sp in spans:
            (self.record if sp.source == "record" else self.conversation).append((sp.start, sp.end, self.n))
        return self.n
