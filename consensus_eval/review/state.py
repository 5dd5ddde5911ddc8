"""The state of a run opened for review (:class:`ReviewState`), what the queue, the progress, the case view,
the adjudication and the actions are built on."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Self

from consensus_eval.analysis.audit import CaseAudit, ReviewQueue, review_queue
from consensus_eval.analysis.results import Results
from consensus_eval.api import load_run
from consensus_eval.domain.cases import Case
from consensus_eval.domain.kinds.base import VIEW_CRITERIA
from consensus_eval.domain.rubric import Criterion, Dimension
from consensus_eval.execution.labels import fold
from consensus_eval.execution.lock import REVIEW, Hold, acquire, release
from consensus_eval.execution.store import (
    HumanLabelRecord,
    ReviewerRecord,
    Store,
)
from consensus_eval.review.ledger import LabelKey, Ledger, covered, label_key
from consensus_eval.review.refusals import ActionError

#: the ``source`` of every label the app writes
SOURCE = "review"


@dataclass
class ReviewState:
    """A run opened for review: the results (read once), the queue, the store the labels go to, and each
    reviewer's :class:`~.ledger.Ledger`. The views and the actions are built on it (the modules beside this one)."""

    folder: Path
    results: Results
    queue: ReviewQueue
    store: Store
    cases: dict[str, Case]
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: reviewer -> their :class:`Ledger`, read from the store at first use and after another connection wrote
    #: to it (``data_version``: a sheet imported, cases assigned while the server runs)
    _ledgers: dict[str, Ledger] = field(default_factory=dict)
    _version: int | None = None
    #: the run's lock, held for review while the run is open (execution.lock): team changes run beside it
    hold: Hold | None = None

    @cached_property
    def spot(self) -> frozenset[str]:
        """The case ids of the random spot check (empty: none drawn; read with the run, once)."""
        return frozenset(r.case_id for r in self.results.spot_checks)

    @cached_property
    def _needs_review(self) -> frozenset[str]:
        return frozenset(a.case_id for a in self.queue.cases if a.needs_review)

    @cached_property
    def criteria_needed(self) -> dict[str, dict[str, frozenset[str]]]:
        """case id -> criteria dimension id -> the ids of the criteria a reviewer judges there (empty without a
        criteria dimension)."""
        dims = [d for d in self.results.rubric.dimensions if d.view == VIEW_CRITERIA]
        if not dims:
            return {}
        return {cid: {d.id: frozenset(c.id for c in d.judged_criteria(case.criteria)) for d in dims}
                for cid, case in self.cases.items()}

    def criteria_of(self, case_id: str, dim: Dimension) -> list[Criterion]:
        """The criteria of a criteria dimension for one case: the rubric's, else the case's own."""
        case = self.cases.get(case_id)
        return dim.judged_criteria(case.criteria if case else None)

    def blind(self, reviewer: str, case_id: str) -> bool:
        """Whether ``case_id`` is blind to ``reviewer``: a spot-check case whose judges were not shown to them yet
        and that they have not scored on every dimension with their own score (an adjudicator: a spot-check case
        they have given no reference on yet)."""
        if case_id not in self.spot:
            return False
        if self.role(reviewer) == "adjudicator":
            return not any(lb.case_id == case_id for lb in self.labels(reviewer) if lb.origin == "reference")
        with self.lock:
            return self._blind(self._ledger(reviewer), case_id)

    def role(self, reviewer: str) -> str | None:
        """``reviewer``'s role in the team (None: not in it, or no team)."""
        return next((m.role for m in self.team() if m.name == reviewer), None)

    def ledger(self, reviewer: str) -> Ledger:
        """``reviewer``'s :class:`Ledger` (read again from the store when another connection wrote to it)."""
        with self.lock:
            return self._ledger(reviewer)

    def _ledger(self, reviewer: str) -> Ledger:
        """:meth:`ledger`, with :attr:`lock` held."""
        version = self.store.data_version()
        if version != self._version:
            self._ledgers.clear()
            self._version = version
        found = self._ledgers.get(reviewer)
        if found is not None:
            return found
        assigned = frozenset(c for c, name in self.store.assignments() if name == reviewer)
        dims = frozenset(d.id for d in self.dimensions)
        ledger = Ledger(dims, {}, assigned or self._needs_review, assigned, needs=self.criteria_needed,
                        revealed=self.store.revealed_cases(reviewer))
        for lb in self.store.human_labels(reviewer=reviewer):
            ledger.labels.setdefault(lb.case_id, {})[label_key(lb)] = lb.origin
        for case_id in ledger.labels:
            ledger.count(case_id, +1)
        self._ledgers[reviewer] = ledger
        return ledger

    @classmethod
    def open(cls, folder: str | Path) -> Self:
        """Read the run in ``folder`` (its store must exist) and open its store for the labels."""
        out = Path(folder)
        hold = acquire(out, mode=REVIEW, create=False)   # data writers wait; team changes run beside the app
        try:
            results = load_run(out)
            queue = review_queue(results.audit, len(results.judges))
            store = Store.open_existing(out)
        except BaseException:
            if hold is not None:
                release(hold)
            raise
        return cls(out, results, queue, store, {c.id: c for c in results.cases}, hold=hold)

    def close(self) -> None:
        with self.lock:
            self.store.close()
            if self.hold is not None:
                hold, self.hold = self.hold, None
                release(hold)

    def team(self) -> list[ReviewerRecord]:
        """The run's reviewers (empty: one-token mode), read at each call: a reviewer added while the server
        runs can open their link at once."""
        with self.lock:
            return self.store.reviewers()

    def reviewer_by_key(self, key: str) -> ReviewerRecord | None:
        """The team's reviewer whose personal key this is (None: not a key of this run)."""
        with self.lock:
            return self.store.reviewer_by_key(key)

    def labels(self, reviewer: str) -> list[HumanLabelRecord]:
        with self.lock:
            return self.store.human_labels(reviewer=reviewer)

    def all_labels(self) -> list[HumanLabelRecord]:
        with self.lock:
            return self.store.human_labels()

    @property
    def dimensions(self) -> list[Dimension]:
        return list(self.results.rubric.dimensions)

    def states(self, labels: Sequence[HumanLabelRecord]) -> dict[str, str]:
        """case id -> done | started for the cases these labels touch (of one reviewer)."""
        dims = {d.id for d in self.dimensions}
        needs = self.criteria_needed
        if needs:
            keys: dict[str, dict[LabelKey, str]] = {}
            for lb in labels:
                keys.setdefault(lb.case_id, {})[label_key(lb)] = lb.origin
            return {c: "done" if covered(k, needs.get(c, {})) >= dims else "started" for c, k in keys.items()}
        scored: dict[str, set[str]] = {}
        touched: set[str] = set()
        for lb in labels:
            touched.add(lb.case_id)
            if lb.kind == "score" and lb.dimension in dims:
                scored.setdefault(lb.case_id, set()).add(lb.dimension)
        return {c: "done" if scored.get(c, set()) >= dims else "started" for c in touched}

    def assignments(self) -> dict[str, list[str]]:
        """case id -> the reviewers assigned to it (empty: nothing assigned; ``reviewers assign``)."""
        out: dict[str, list[str]] = {}
        with self.lock:
            pairs = self.store.assignments()
        for case_id, name in pairs:
            out.setdefault(case_id, []).append(name)
        return out

    def assigned(self, reviewer: str) -> frozenset[str]:
        """The case ids assigned to ``reviewer`` (empty: none)."""
        return self.ledger(reviewer).assigned

    def case_at(self, rank: int) -> CaseAudit:
        if not 1 <= rank <= len(self.queue.cases):
            raise ActionError("err_no_case", rank=rank, n=len(self.queue.cases))
        return self.queue.cases[rank - 1]

    @staticmethod
    def _own_scored(labels: Sequence[HumanLabelRecord],
                    needs: Mapping[str, Mapping[str, frozenset[str]]] | None = None) -> dict[str, int]:
        """case id -> how many dimensions these labels (one reviewer's) cover with their own judgement (a score;
        a criteria dimension, ``needs``: a verdict on each of its criteria)."""
        if needs:
            keys: dict[str, dict[LabelKey, str]] = {}
            for lb in labels:
                if lb.origin == "own":
                    keys.setdefault(lb.case_id, {})[label_key(lb)] = lb.origin
            return {c: len(covered(k, needs.get(c, {}))) for c, k in keys.items()}
        dims: dict[str, set[str]] = {}
        for lb in labels:
            if lb.kind == "score" and lb.origin == "own" and lb.dimension:
                dims.setdefault(lb.case_id, set()).add(lb.dimension)
        return {c: len(d) for c, d in dims.items()}

    def _refresh(self, ledger: Ledger, reviewer: str, case_id: str) -> None:
        """Read one case's labels of ``reviewer`` again into their ledger (its progress counts with it)."""
        labels = fold(self.store.label_events(reviewer=reviewer, case_id=case_id))
        ledger.count(case_id, -1)
        if labels:
            ledger.labels[case_id] = {label_key(lb): lb.origin for lb in labels}
        else:
            ledger.labels.pop(case_id, None)
        ledger.count(case_id, +1)

    def _completes_blind(self, ledger: Ledger, case_id: str) -> bool:
        """Whether ``case_id`` is a spot-check case not revealed to the ledger's reviewer, their own scores all in."""
        return case_id in self.spot and case_id not in ledger.revealed \
            and ledger.own_scored(case_id) >= len(self.dimensions)

    def _blind(self, ledger: Ledger, case_id: str) -> bool:
        """Whether ``case_id`` is blind to the ledger's reviewer: a spot-check case whose judges were not shown to
        them yet and whose own scores are not all in."""
        return case_id in self.spot and case_id not in ledger.revealed \
            and ledger.own_scored(case_id) < len(self.dimensions)

    def _reveal(self, ledger: Ledger, reviewer: str, case_ids: Sequence[str], session: str | None) -> None:
        """Record that the judges of ``case_ids`` are shown to ``reviewer`` now (with :attr:`lock` held)."""
        self.store.reveal(reviewer, case_ids, source=SOURCE, session=session)
        ledger.revealed.update(c for c in case_ids if c in self.spot)

    @property
    def done_wording(self) -> str:
        """Which words say when a case is done (the suffix of the ``done_rule`` / ``progress_title`` texts):
        ``""`` a score for every dimension, ``"_criteria"`` a verdict on every criterion (own or accepted),
        ``"_mixed"`` both, for a rubric with criteria dimensions beside others."""
        kinds = {d.view for d in self.results.rubric.dimensions}      # how each kind is shown
        if VIEW_CRITERIA not in kinds:
            return ""
        return "_criteria" if kinds == {VIEW_CRITERIA} else "_mixed"
