"""Progress: each reviewer's over their cases, and the team's per reviewer and per case (the QA lead's page)."""

from __future__ import annotations

from dataclasses import dataclass

from consensus_eval.analysis.audit import CaseAudit
from consensus_eval.analysis.human import build_review
from consensus_eval.execution.store import (
    HumanLabelRecord,
)
from consensus_eval.review.adjudication import (
    AdjudicationViews,
    criterion_conflicts,
    in_conflict,
    score_gap,
    scores_apart,
    verdict_lines,
)
from consensus_eval.review.ledger import Progress


@dataclass
class MemberProgress:
    """One reviewer of the team on the QA lead's page: role, cases assigned, done and started."""

    name: str
    role: str
    assigned: int
    done: int
    started: int


@dataclass
class CaseProgress:
    """One assigned or reviewed case on the QA lead's page: who reviews it and how far (``states``:
    reviewer -> done | started | todo), the widest gap between two reviewers' own scores of a dimension
    (``gap``, None below two complete reviews), the judges' deductions one reviewer agreed with and another
    did not (``conflicts``, lines of the drill-down), whether it needs adjudication (two reviewers' scores
    apart by their dimension's kind's rule, :meth:`~consensus_eval.domain.kinds.base.Dimension.reviewers_apart`, or a
    verdict conflict) and who adjudicated it (empty: not yet)."""

    audit: CaseAudit
    states: dict[str, str]
    gap: float | None
    needs_adjudication: bool
    adjudicated_by: list[str]
    conflicts: int = 0


class ProgressViews(AdjudicationViews):
    """Each reviewer's progress, and the QA lead's view of the team."""

    def progress(self, reviewer: str) -> Progress:
        """Done / started of the reviewer's assigned cases, or, with none assigned, of the cases that need review
        (from their :class:`Ledger`: no pass over the run's cases)."""
        ledger = self.ledger(reviewer)
        return Progress(done=ledger.done, started=ledger.started, total=len(ledger.pool))

    def team_progress(self) -> tuple[list[MemberProgress], list[CaseProgress]]:
        """The QA lead's view: per reviewer of the team (or, without a team, per reviewer who labelled) their
        progress; per case assigned or scored by someone, who reviewed it, their gap, and adjudication."""
        labels = self.all_labels()
        assignments = self.assignments()
        by_reviewer: dict[str, list[HumanLabelRecord]] = {}
        for lb in labels:
            by_reviewer.setdefault(lb.reviewer, []).append(lb)
        team = {m.name: m.role for m in self.team()}
        names = list(dict.fromkeys([*team, *(lb.reviewer for lb in labels if lb.origin != "reference")]))
        states = {n: self.states([lb for lb in by_reviewer.get(n, []) if lb.origin != "reference"]) for n in names}
        members = []
        for n in names:
            mine = {c for c, who in assignments.items() if n in who}
            st = states[n]
            pool = mine or set(st)
            members.append(MemberProgress(name=n, role=team.get(n, "reviewer"), assigned=len(mine),
                                          done=sum(st.get(c) == "done" for c in pool),
                                          started=sum(st.get(c) == "started" for c in pool)))
        review = build_review(labels, self.results.rubric, case_criteria=self.results.case_criteria) if labels else None
        dims = self._scored_dims
        scored_dims = self._scored
        cases = []
        for a in self.queue.cases:
            who = assignments.get(a.case_id, [])
            scored = [n for n in names if states[n].get(a.case_id)]
            if not who and not scored:
                continue
            cr = review.case(a.case_id) if review else None
            gap = score_gap(cr, dims)
            conflicts = (len(verdict_lines(a, cr)) if in_conflict(cr) else 0) + len(criterion_conflicts(a, cr))
            cases.append(CaseProgress(
                audit=a, states={n: states[n].get(a.case_id, "todo") for n in dict.fromkeys([*who, *scored])}, gap=gap,
                needs_adjudication=scores_apart(cr, scored_dims, self._consensus) or conflicts > 0,
                adjudicated_by=list(cr.adjudicators) if cr else [], conflicts=conflicts))
        return members, cases
