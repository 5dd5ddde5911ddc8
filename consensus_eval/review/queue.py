"""The review queue as a reviewer sees it: the cases that pass the filters (:class:`Filters`), in the audit's
order, with their progress on each."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from consensus_eval.analysis.audit import CaseAudit
from consensus_eval.review.state import ReviewState


@dataclass
class QueueRow:
    """One case in the queue with this reviewer's progress on it (``state`` done | started | todo)."""

    audit: CaseAudit
    state: str
    #: the dimensions and judges the row stands out on (computed only when the queue is filtered by them)
    dimensions: list[str]
    judges: list[str]
    spot: bool = False
    blind: bool = False


@dataclass
class Filters:
    """The queue's filters (all optional): ``scope`` ``review`` (cases that need review, the default),
    ``mine`` (the cases assigned to this reviewer: the default for a reviewer with assignments), ``spot``
    (the random spot check) or ``all``; ``reason`` a reason code; ``dimension`` (a dimension
    with a deduction or a gap between judges); ``judge`` (a judge that deducted something or failed on the
    case); ``state`` done | started | todo (this reviewer's)."""

    scope: str = "review"
    reason: str = ""
    dimension: str = ""
    judge: str = ""
    state: str = ""
    #: a case id, or part of one (case-insensitive)
    q: str = ""

    @classmethod
    def from_query(cls, q: Mapping[str, str], default_scope: str = "review") -> Filters:
        scope = q.get("scope", default_scope)
        return cls(scope=scope if scope in ("all", "spot", "mine") else "review", reason=q.get("reason", ""),
                   dimension=q.get("dimension", ""), judge=q.get("judge", ""), state=q.get("state", ""),
                   q=q.get("q", "").strip()[:200])

    def query(self) -> dict[str, str]:
        """The non-default filters, as query parameters."""
        out = {"scope": self.scope} if self.scope != "review" else {}
        out.update({k: v for k, v in (("reason", self.reason), ("dimension", self.dimension),
                                      ("judge", self.judge), ("state", self.state), ("q", self.q)) if v})
        return out


class QueueViews(ReviewState):
    """The queue as a reviewer sees it: the cases that pass the filters, in the audit's order."""

    def rows(self, reviewer: str, filters: Filters) -> list[QueueRow]:
        """The queue's cases that pass ``filters``, in the audit's order."""
        labels = self.labels(reviewer)
        states = self.states(labels)
        spot = self.spot
        mine = self.assigned(reviewer) if filters.scope == "mine" else set()
        own_scored = self._own_scored(labels, self.criteria_needed) if spot else {}
        n_dims = len(self.dimensions)
        needle = filters.q.lower()
        out = []
        for a in self.queue.cases:     # the cheap tests first: a queue of 20,000 cases is read on every page
            case_id = a.case_id
            if not _in_scope(a, filters.scope, spot, mine) or (needle and needle not in case_id.lower()):
                continue
            state = states.get(case_id, "todo")
            if (filters.state and state != filters.state) or (
                    filters.reason and filters.reason not in {r.code for r in a.reasons}):
                continue
            dims = _standing_out_dims(a) if filters.dimension else []
            judges = _standing_out_judges(a) if filters.judge else []
            if (filters.dimension and filters.dimension not in dims) or (filters.judge and filters.judge not in judges):
                continue
            in_spot = case_id in spot
            out.append(QueueRow(audit=a, state=state, dimensions=dims, judges=judges, spot=in_spot,
                                blind=in_spot and own_scored.get(case_id, 0) < n_dims))
        return out

    def neighbours(self, reviewer: str, rank: int, filters: Filters) -> tuple[int | None, int | None]:
        """The ranks of the previous and next case of the filtered queue around ``rank``."""
        ranks = [r.audit.rank for r in self.rows(reviewer, filters)]
        before = [r for r in ranks if r < rank]
        after = [r for r in ranks if r > rank]
        return (before[-1] if before else None, after[0] if after else None)


def _in_scope(a: CaseAudit, scope: str, spot: Collection[str], mine: Collection[str]) -> bool:
    """Whether the case is in the queue's ``scope``: ``review`` (it needs review), ``spot``, ``mine``, ``all``."""
    if scope == "review":
        return a.needs_review
    if scope == "spot":
        return a.case_id in spot
    if scope == "mine":
        return a.case_id in mine
    return True


def _standing_out_dims(a: CaseAudit) -> list[str]:
    """The dimensions a case stands out on: a judge deducted something, or the judges are apart."""
    return [d.dimension for d in a.dimensions
            if any(jv.deductions for jv in d.judges) or d.star_gap or (d.spread or 0) > 0]


def _standing_out_judges(a: CaseAudit) -> list[str]:
    """The judges that deducted something on the case or failed on it."""
    return list(dict.fromkeys(jv.judge for d in a.dimensions for jv in d.judges if jv.deductions or jv.errors))
