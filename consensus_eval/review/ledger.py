"""One reviewer's labels as a save needs them (:class:`Ledger`), and their progress (:class:`Progress`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from consensus_eval.execution.store import (
    HumanLabelRecord,
)

#: what identifies one of a reviewer's labels of a case (the store's key without reviewer and case):
#: (kind, dimension or "", deduction id or "")
LabelKey = tuple[str, str, str]


def covered(keys: Mapping[LabelKey, str], needs: Mapping[str, frozenset[str]]) -> set[str]:
    """The dimensions these label keys (of one reviewer on one case) cover: those with a score, and the criteria
    dimensions (``needs``: dimension -> its criteria's ids) with a verdict on every criterion."""
    out = {dim for kind, dim, _ in keys if kind == "score"}
    if needs:
        judged: dict[str, set[str]] = {}
        for kind, dim, cid in keys:
            if kind == "criterion":
                judged.setdefault(dim, set()).add(cid)
        out |= {dim for dim, ids in needs.items() if ids and ids <= judged.get(dim, set())}
    return out


@dataclass
class Ledger:
    """One reviewer's labels as a save needs them, kept up to date on every save so that a save's answer
    (the case's state, the reviewer's progress) costs the same at 20 cases as at 20,000.

    ``labels``: case id -> key of each of their labels there -> its origin; ``pool``: the cases their
    progress counts (their assigned cases, else the cases that need review); ``done`` / ``started``: how
    many of the pool are done / started (:meth:`ReviewRun.states`'s rule)."""

    dims: frozenset[str]
    labels: dict[str, dict[LabelKey, str]]
    pool: frozenset[str]
    assigned: frozenset[str]
    done: int = 0
    started: int = 0
    #: case id -> criteria dimension id -> its criteria's ids (empty: the rubric has no criteria dimension)
    needs: Mapping[str, Mapping[str, frozenset[str]]] = field(default_factory=dict)
    #: the spot-check cases whose judges were shown to the reviewer (their blind scores are frozen)
    revealed: set[str] = field(default_factory=set)

    def state(self, case_id: str) -> str:
        """done | started | todo: done when every dimension of the rubric is covered (a score of any origin; a
        criteria dimension: a verdict on each of its criteria)."""
        keys = self.labels.get(case_id)
        if not keys:
            return "todo"
        return "done" if covered(keys, self.needs.get(case_id, {})) >= self.dims else "started"

    def own_scored(self, case_id: str) -> int:
        """How many dimensions of ``case_id`` the reviewer covered with their own judgement."""
        keys = self.labels.get(case_id, {})
        return len(self.dims & covered({k: o for k, o in keys.items() if o == "own"}, self.needs.get(case_id, {})))

    def count(self, case_id: str, sign: int) -> None:
        if case_id in self.pool:
            st = self.state(case_id)
            self.done += sign * (st == "done")
            self.started += sign * (st == "started")


@dataclass
class Progress:
    """This reviewer's progress over the cases that need review (``done`` of ``total``)."""

    done: int
    started: int
    total: int

    @property
    def text(self) -> str:
        return f"{self.done} of {self.total} done"


def label_key(label: HumanLabelRecord) -> LabelKey:
    """The label's key in its reviewer's :class:`Ledger` (the store's key without reviewer and case)."""
    return (label.kind, label.dimension or "", label.deduction_id or "")
