"""Adjudication: where reviewers disagree (their scores apart, a judge's deduction or a criterion judged
both ways), what the adjudicator sees, and the references they give (origin ``reference``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from consensus_eval.analysis.audit import CaseAudit
from consensus_eval.analysis.human import CaseReview, build_review
from consensus_eval.domain.config import ConsensusConfig
from consensus_eval.domain.kinds.base import VIEW_CRITERIA, VIEW_LEVELS
from consensus_eval.domain.rubric import Dimension
from consensus_eval.execution.store import (
    VERDICTS,
    HumanLabelRecord,
    Verdict,
)
from consensus_eval.review.actions import Actions, Plan, score_value
from consensus_eval.review.refusals import ActionError


@dataclass
class AdjudicationDim:
    """One dimension on the adjudicator's page: each reviewer's own score, the panel's, the reference so far
    (``kind`` ``likert``: a level among ``levels``, each with its anchor text, as on the review page)."""

    id: str
    name: str
    max: float
    panel: float | None
    scores: dict[str, float]
    reference: float | None
    kind: str = "deductions"
    levels: list[tuple[int, str]] = field(default_factory=list)

    @property
    def reference_level(self) -> int | None:
        """A likert dimension's reference level so far (None: none given)."""
        if self.reference is None or not float(self.reference).is_integer():
            return None
        return int(self.reference)

    def picked(self, level: int) -> list[str]:
        """The reviewers whose own score of a likert dimension is ``level``."""
        return [n for n, sc in self.scores.items() if sc == level]


@dataclass
class VerdictConflict:
    """A judge's deduction (one line of its drill-down: ``ids``, one per run that made it) that one reviewer
    agreed with and another did not, as the adjudicator sees it: each reviewer's ``verdicts`` (and
    ``comments``), the reference verdict given so far (None: not yet)."""

    ids: list[str]
    judge: str
    dimension: str
    kind: str
    category: str
    type: str
    points: float
    evidence: str
    reason: str
    verdicts: dict[str, str]
    comments: dict[str, str]
    reference: str | None

    @property
    def key(self) -> str:
        """The form field's name of its reference verdict."""
        return "verdict_" + self.ids[0]


def verdict_lines(a: CaseAudit, review: CaseReview | None, conflicts_only: bool = True) -> list[VerdictConflict]:
    """The lines of the judges' drill-downs of ``a`` the reviewers' verdicts disagree on (an ``agree`` and a
    ``disagree`` from two reviewers; ``conflicts_only`` False: every line with a verdict), in page order."""
    if review is None or not review.verdicts:
        return []
    comments = {(lb.deduction_id, lb.reviewer): lb.comment or "" for lb in review.comments if lb.deduction_id}
    out = []
    for dim in a.dimensions:
        for jv in dim.judges:
            for group in jv.drill_down():
                for it in group.items:
                    ids = it.label_ids
                    verdicts: dict[str, str] = {}
                    notes: dict[str, str] = {}
                    for i in ids:
                        verdicts.update(review.verdicts.get(i, {}))
                        notes.update({r: c for r in review.verdicts.get(i, {}) if (c := comments.get((i, r)))})
                    if not verdicts or (conflicts_only and not {"agree", "disagree"} <= set(verdicts.values())):
                        continue
                    d = it.deduction
                    ref = next((review.reference_verdicts[i] for i in ids if i in review.reference_verdicts), None)
                    out.append(VerdictConflict(ids=ids, judge=d.judge, dimension=dim.name, kind=d.kind,
                                               category=d.category, type=d.type, points=d.points, evidence=d.evidence,
                                               reason=d.reason, verdicts=verdicts, comments=notes, reference=ref))
    return out


@dataclass
class CriterionConflict:
    """A criterion one reviewer found met and another not (their own verdicts), as the adjudicator sees it:
    each reviewer's ``verdicts`` (True: met) with the ``evidence`` and ``comments`` they gave with them (reviewer
    -> text; absent: none), the reference verdict given so far (None: not yet)."""

    dimension: str
    dimension_name: str
    id: str
    text: str
    points: float
    verdicts: dict[str, bool]
    reference: bool | None
    evidence: dict[str, str] = field(default_factory=dict)
    comments: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The form field's name of its reference verdict."""
        return f"criterion_{self.dimension}:{self.id}"


def criterion_conflicts(a: CaseAudit, review: CaseReview | None,
                        labels: Sequence[HumanLabelRecord] = ()) -> list[CriterionConflict]:
    """The criteria of ``a`` two reviewers' own verdicts disagree on, in page order; ``labels`` (the case's):
    where each reviewer's evidence and comment on them are read (none given: none shown)."""
    if review is None or not review.criteria:
        return []
    notes = {(lb.dimension, lb.deduction_id, lb.reviewer): lb for lb in labels
             if lb.case_id == a.case_id and lb.kind == "criterion" and lb.origin == "own"}
    out = []
    for dim in a.dimensions:
        for row in dim.criteria:
            said = {rv: given[dim.dimension][row.id] for rv, given in review.criteria.items()
                    if row.id in given.get(dim.dimension, {})}
            if len(set(said.values())) > 1:
                given_by = {rv: lb for rv in said if (lb := notes.get((dim.dimension, row.id, rv)))}
                out.append(CriterionConflict(
                    dimension=dim.dimension, dimension_name=dim.name, id=row.id, text=row.text, points=row.points,
                    verdicts=said, reference=review.reference_criteria.get(dim.dimension, {}).get(row.id),
                    evidence={rv: lb.evidence for rv, lb in given_by.items() if lb.evidence},
                    comments={rv: lb.comment for rv, lb in given_by.items() if lb.comment}))
    return out


def in_conflict(review: CaseReview | None) -> bool:
    """Whether two reviewers' verdicts on one deduction id disagree (agree and disagree): a cheap test before
    :func:`verdict_lines`."""
    return review is not None and any({"agree", "disagree"} <= set(by.values()) for by in review.verdicts.values())


def score_gaps(review: CaseReview | None, dims: Sequence[str]) -> dict[str, float] | None:
    """Per dimension the widest gap between two reviewers' own scores, over the reviewers who scored every
    dimension (None: fewer than two of them). ``dims``: the dimensions scored as such (a criteria dimension's
    disagreements are its criteria: :func:`criterion_conflicts`)."""
    if review is None or not dims:
        return None
    complete = [sc for sc in review.scores.values() if all(d in sc for d in dims)]
    if len(complete) < 2:
        return None
    return {d: max(sc[d] for sc in complete) - min(sc[d] for sc in complete) for d in dims}


def score_gap(review: CaseReview | None, dims: Sequence[str]) -> float | None:
    """The widest of :func:`score_gaps` (None: fewer than two reviewers scored every dimension)."""
    gaps = score_gaps(review, dims)
    return max(gaps.values()) if gaps else None


def scores_apart(review: CaseReview | None, dims: Sequence[Dimension], config: ConsensusConfig) -> bool:
    """Whether two reviewers' own scores of some dimension of ``dims`` (those scored as such) send the case to
    adjudication, by the dimension's kind's rule (:meth:`~consensus_eval.domain.kinds.base.Dimension.reviewers_apart`:
    levels ``flag_level_gap`` apart on a likert dimension, more than 2 points on a deductions one, more than
    ``flag_spread_share`` of its range on another)."""
    gaps = score_gaps(review, [d.id for d in dims])
    return gaps is not None and any(d.reviewers_apart(gaps[d.id], config) for d in dims)


class AdjudicationViews(Actions):
    """What an adjudicator sees and decides: the reviewers' scores and verdicts side by side, the references."""

    @property
    def _scored(self) -> list[Dimension]:
        """The dimensions a reviewer scores as such (not criteria dimensions: those are judged criterion by
        criterion, and adjudicated so)."""
        return [d for d in self.dimensions if d.view != VIEW_CRITERIA]

    @property
    def _scored_dims(self) -> list[str]:
        return [d.id for d in self._scored]

    @property
    def _consensus(self) -> ConsensusConfig:
        return self.results.config.consensus

    @property
    def gap_wording(self) -> str:
        """Which words say when reviewers' scores are close enough for reference scores to be optional (the
        suffix of the ``adjudicate_scores_optional`` text): ``""`` points, ``"_levels"`` likert levels,
        ``"_mixed"`` both."""
        kinds = {d.view for d in self._scored}
        if VIEW_LEVELS not in kinds:
            return ""
        return "_levels" if kinds == {VIEW_LEVELS} else "_mixed"

    @property
    def level_gap(self) -> float:
        """The config's ``flag_level_gap``: likert levels this far apart are a dispute."""
        return self._consensus.flag_level_gap

    def adjudication_view(self, rank: int) -> list[AdjudicationDim]:
        """The case at ``rank`` as the adjudicator sees it: per dimension scored as such each reviewer's own
        score (a criteria dimension's disagreements are :meth:`criterion_conflicts`)."""
        a = self.case_at(rank)
        cr = self._case_review(a)
        given = cr.scores if cr else {}
        scored = {d.id: d for d in self._scored}
        return [AdjudicationDim(id=d.dimension, name=d.name, max=d.max, panel=d.panel_score,
                                scores={n: sc[d.dimension] for n, sc in given.items() if d.dimension in sc},
                                reference=cr.reference.get(d.dimension) if cr else None, kind=scored[d.dimension].view,
                                levels=sorted(scored[d.dimension].anchors.items()))
                for d in a.dimensions if d.dimension in scored]

    def adjudication_blind(self, rank: int) -> bool:
        """Whether the adjudication of the case at ``rank`` is blind: a spot-check case without a reference yet (its
        form shows the reviewers' blind scores, never the panel's or a judge's, until the reference is saved)."""
        a = self.case_at(rank)
        return a.case_id in self.spot and not any(lb.origin == "reference" for lb in self._case_labels(a))

    def criterion_conflicts(self, rank: int) -> list[CriterionConflict]:
        """The criteria of the case at ``rank`` one reviewer found met and another not, with each reviewer's
        evidence and comment."""
        a = self.case_at(rank)
        labels = self._case_labels(a)
        return criterion_conflicts(a, self._review_of(a, labels), labels)

    def _case_labels(self, a: CaseAudit) -> list[HumanLabelRecord]:
        return [lb for lb in self.all_labels() if lb.case_id == a.case_id]

    def _review_of(self, a: CaseAudit, labels: Sequence[HumanLabelRecord]) -> CaseReview | None:
        return build_review(labels, self.results.rubric, case_criteria=self.results.case_criteria).case(a.case_id) \
            if labels else None

    def _case_review(self, a: CaseAudit) -> CaseReview | None:
        return self._review_of(a, self._case_labels(a))

    def verdict_conflicts(self, rank: int) -> list[VerdictConflict]:
        """The judges' deductions of the case at ``rank`` one reviewer agreed with and another did not."""
        a = self.case_at(rank)
        return verdict_lines(a, self._case_review(a))

    def scores_needed(self, rank: int) -> bool:
        """Whether adjudicating the case at ``rank`` takes reference scores: its reviewers' scores are apart
        (:func:`scores_apart`), or nothing else is to be settled (no verdict conflict)."""
        a = self.case_at(rank)
        cr = self._case_review(a)
        if not self._scored:
            return False
        return scores_apart(cr, self._scored, self._consensus) or not (verdict_lines(a, cr)
                                                                       or criterion_conflicts(a, cr))

    def adjudicate(self, adjudicator: str, rank: int, scores: Mapping[str, Any],
                   verdicts: Mapping[str, Any] | None = None, criteria: Mapping[str, Any] | None = None, *,
                   action_id: str | None = None, session: str | None = None, member_key: str | None = None) -> None:
        """Store the adjudicator's decisions on the case at ``rank``, as labels of origin ``reference`` kept apart
        from the reviewers' own: a reference score of every dimension (needed when the reviewers' scores are
        apart, :func:`scores_apart`, or there is no verdict conflict; else optional, all or none; a likert
        dimension's is one of its levels, as a reviewer's own score, never between two),
        and a reference verdict on every deduction the reviewers' verdicts disagree on (``verdicts``: the
        conflict's :attr:`VerdictConflict.key` -> agree / disagree / unsure), stored on each of its ids; a
        reference verdict on every criterion two reviewers disagree on (``criteria``: the conflict's
        :attr:`CriterionConflict.key` -> met / not_met), a ``criterion`` label of origin ``reference`` (a criteria
        dimension takes no reference score: its score is the one the reference verdicts give). Nothing is stored
        unless all of it is given; it is stored as one write (``action_id``: a form sent twice stores once;
        ``member_key``: a personal link's key hash, refused when its adjudicator has left the team or has a new
        link)."""
        a = self.case_at(rank)
        cr = self._case_review(a)
        conflicts = verdict_lines(a, cr)
        crit_conflicts = criterion_conflicts(a, cr)
        scored = self._scored
        given = {k: v for k, v in scores.items() if v not in (None, "")}
        if scored and (given or scores_apart(cr, scored, self._consensus) or not (conflicts or crit_conflicts)):
            for d in scored:
                if d.id not in given:
                    raise ActionError("err_give_reference_level" if d.view == VIEW_LEVELS
                                      else "err_give_reference_score", dim=d.id)
        values = {d.id: score_value(given[d.id], d, "reference") for d in scored if d.id in given}
        settled: list[tuple[CriterionConflict, bool]] = []
        for cc in crit_conflicts:
            said = (criteria or {}).get(cc.key)
            if said not in ("met", "not_met"):
                raise ActionError("err_give_reference_criterion", id=cc.id, dim=cc.dimension)
            settled.append((cc, said == "met"))
        decided: list[tuple[VerdictConflict, Verdict]] = []
        for c in conflicts:
            v = (verdicts or {}).get(c.key)
            if v not in VERDICTS:
                raise ActionError("err_give_reference_verdict", judge=c.judge, type=c.type, dim=c.dimension)
            decided.append((c, v))
        plan = Plan(adjudicator, a.case_id, member_key=member_key)
        for dim_id, value in values.items():
            plan.put(HumanLabelRecord(case_id=a.case_id, dimension=dim_id, reviewer=adjudicator, kind="score",
                                      value=value, origin="reference"))
        for cc, met in settled:
            plan.put(HumanLabelRecord(case_id=a.case_id, dimension=cc.dimension, deduction_id=cc.id,
                                      reviewer=adjudicator, kind="criterion", value="met" if met else "not_met",
                                      points=cc.points, origin="reference"))
        dim_of = {x.id: x.dimension for dim in a.dimensions for jv in dim.judges for x in jv.deductions}
        for c, v in decided:
            for i in c.ids:
                plan.put(HumanLabelRecord(case_id=a.case_id, dimension=dim_of.get(i), deduction_id=i,
                                          reviewer=adjudicator, kind="verdict", value=v, origin="reference"))
        self._write(plan, action_id, session)
