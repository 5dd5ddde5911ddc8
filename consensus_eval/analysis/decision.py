"""How many judges and runs are enough: the G-study of a run's stored scores and its D-study
(:mod:`consensus_eval.analysis.gstudy`), per dimension and on the total.

The scores are each judge's run scores of each case (:attr:`~consensus_eval.analysis.consensus.JudgeScore.runs`).
The G-study needs a balanced design, so it takes the number of runs most cases have for every judge
(``n_runs``), uses the first ``n_runs`` runs of each judge on the cases that have them all, and drops the
rest (``dropped``). With one run per judge, run-to-run noise cannot be separated from a judge's
case-specific view (p x j design): the D-study then covers 1 run only.

The cheapest design reaching the target reliability (phi, for absolute decisions: a score read against
a threshold or compared across runs) is priced at the run's measured cost per call (all judges' cost over
their calls), or by calls when the cost is unknown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.gstudy import (
    CheapestDesign,
    DesignReliability,
    VarianceComponents,
    cheapest_design,
    d_study,
    g_study,
    g_study_single_run,
)
from consensus_eval.analysis.usage import UsageSums
from consensus_eval.execution.stored_run import StoredRun

#: the reliability a design must reach by default
TARGET = 0.8


class DecisionStudy(BaseModel):
    """One key's G-study (``components``), its D-study (``designs``: 1-5 judges x 1-3 runs) and the
    ``cheapest`` design reaching ``target`` (None when none does). ``n_cases``: the cases used;
    ``dropped``: cases left out for lacking a run of some judge; ``cost_per_call``: USD (None unknown)."""

    key: str
    components: VarianceComponents
    designs: list[DesignReliability]
    cheapest: CheapestDesign | None
    target: float
    n_cases: int
    dropped: int
    cost_per_call: float | None = None


def decision_studies(run: StoredRun, cons: Sequence[CaseConsensus], target: float = TARGET) -> dict[str, DecisionStudy]:
    """Per key (dimension ids and ``total``), the decision study (empty with fewer than 2 judges or 2
    complete cases)."""
    columns = DecisionColumns(run.judges, [d.id for d in run.rubric.dimensions])
    columns.add(run, cons)
    return columns.studies(target)


class DecisionColumns:
    """What :func:`decision_studies` is computed on, added a part of a run at a time (its cases in the run's order,
    with their calls): per part and dimension the runs of each (case, judge), how many runs the cases have, and
    the calls' cost (summed in the run's order: :class:`~consensus_eval.analysis.usage.UsageSums`)."""

    def __init__(self, judges: Sequence[str], dims: Sequence[str], *, apart: bool = False) -> None:
        self.judges, self.dims = list(judges), list(dims)
        #: per number of runs, the complete cases whose fewest runs of a judge on a dimension it is
        self.counts: Counter[int] = Counter()
        #: per part, per dimension: (cases, judges, the part's most runs), NaN where a (case, judge) has fewer
        self.blocks: list[list[np.ndarray]] = []
        #: ``apart``: these are parts read apart (another process), to be merged into the earlier parts' (:meth:`merge`)
        self.usage = UsageSums(keep_costs=apart)

    def add(self, run: StoredRun, cons: Sequence[CaseConsensus]) -> None:
        """Add a part of the run: ``run`` (its cases and calls) and ``cons``, its cases' consensus in order.

        Args:
            run: The stored run, or a part of it.
            cons: The consensus of each of its cases, in the run's order.
        """
        if len(self.judges) < 2:
            return   # no decision study with one judge: nothing to count
        self.usage.add(run.records)
        judges, dims = self.judges, self.dims
        # one pass over the cases: how many runs each has for every judge (the fewest on a dimension), and the runs
        # of each dimension, (case, judge) after (case, judge): None where the case has no such judge
        counts = self.counts
        runs: list[list[list[float] | None]] = [[] for _ in dims]
        for c in cons:
            fewest: int | None = None
            complete = True
            for j in judges:
                js = c.judges.get(j)
                if js is None:
                    complete = False
                    for by_dim in runs:
                        by_dim.append(None)
                    continue
                least = 0
                for k, d in enumerate(dims):
                    r = js[d].runs
                    runs[k].append(r)
                    if k == 0 or len(r) < least:
                        least = len(r)
                if fewest is None or least < fewest:
                    fewest = least
            if complete and fewest is not None:
                counts[fewest] += 1
        most = max((len(r) for by_dim in runs for r in by_dim if r is not None), default=0)
        block = []
        for by_dim in runs:     # the cells of each number of runs set at once
            x = np.full((len(by_dim), most), np.nan)
            lengths: dict[int, list[int]] = {}
            for i, cell in enumerate(by_dim):
                if cell:
                    lengths.setdefault(len(cell), []).append(i)
            for n, at in lengths.items():
                x[at, :n] = np.array([v for i in at for v in by_dim[i] or ()], dtype=float).reshape(-1, n)
            block.append(x.reshape(len(cons), len(judges), most))
        self.blocks.append(block)

    def merge(self, later: DecisionColumns) -> None:
        """Add the parts ``later`` gathered (the cases after these, read apart with ``apart``).

        Args:
            later: Columns of the same judges and dimensions.
        """
        self.counts.update(later.counts)
        self.blocks.extend(later.blocks)
        self.usage.merge(later.usage)

    def studies(self, target: float = TARGET) -> dict[str, DecisionStudy]:
        """Per key (dimension ids and ``total``), the decision study of what was added (:func:`decision_studies`).

        Args:
            target: The reliability the cheapest design must reach.
        """
        judges, dims = self.judges, self.dims
        counts = Counter(self.counts)
        counts.pop(0, None)
        if len(judges) < 2 or not counts:
            return {}
        n_runs = max(counts, key=lambda r: (counts[r], -r))
        usage = self.usage.usage()
        calls = sum(u.ok + u.failed for u in usage.values())
        cost = sum(u.cost for u in usage.values())
        cost_per_call = cost / calls if calls and cost > 0 else None
        # scores[dimension] is (cases, judges, n_runs): the first n_runs runs of the cells that have them, NaN in
        # every run of a cell with fewer
        scores = {}
        for k, d in enumerate(dims):
            parts = [b[k][:, :, :n_runs] for b in self.blocks]
            x = np.concatenate([p if p.shape[2] == n_runs else
                                np.concatenate([p, np.full((*p.shape[:2], n_runs - p.shape[2]), np.nan)], axis=2)
                                for p in parts], axis=0)
            x[np.isnan(x).any(axis=2)] = np.nan
            scores[d] = x
        n_cases = len(next(iter(scores.values())))
        scores["total"] = sum((scores[d] for d in dims), np.zeros((n_cases, len(judges), n_runs)))
        out: dict[str, DecisionStudy] = {}
        for key in [*dims, "total"]:
            x = scores[key]
            complete = ~np.isnan(x).any(axis=(1, 2))
            x = x[complete]
            if len(x) < 2:
                continue
            vc = g_study(x) if n_runs >= 2 else g_study_single_run(x[:, :, 0])
            designs = d_study(vc)
            out[key] = DecisionStudy(key=key, components=vc, designs=designs,
                                     cheapest=cheapest_design(designs, target, cost_per_call, "phi"), target=target,
                                     n_cases=len(x), dropped=int((~complete).sum()), cost_per_call=cost_per_call)
        return out
