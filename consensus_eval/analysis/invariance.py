"""How much each judge's score moves when a clean record is edited without changing its meaning
(``calibrate --suite invariance``; docs/calibration.md, 'Invariance'; the cases:
:mod:`consensus_eval.domain.calibration.invariance_edits`).

Planted errors measure a judge's *sensitivity* (does it see what is wrong); this measures its *stability*
(does it leave alone what is not). Per judge and per edit:

- **noise**: the judge's run-to-run spread on the clean records, judged several times each (``important_runs``):
  the pooled within-record standard deviation of the score, ``sqrt(mean over records of var(runs, ddof=1))``,
  per dimension and for the total (the sum of the dimensions). A deterministic judge's noise is 0 (it is
  judged once: repeating it cannot change anything).
- **change** of an edited copy: its score (run 0) minus the mean of the record's runs.
- **moved beyond the noise**: ``|change| > z * noise * sqrt(1 + 1/r)`` (``r`` runs of the record; ``z`` =
  1.96): a copy that is just another draw of the same judgment moves that far about 5% of the time; with a
  noise of 0, any change moves. The share moved is counted in records (each edit makes at most one copy of a
  record; pooled over the edits, an interval clustered by record).
- **mean change** with its 95% interval and two-sided p (:func:`~consensus_eval.analysis.systems.paired_test`:
  the exact sign-flip test up to 12 copies, the paired t test above), and the mean absolute change.
- **flagged**: an edit whose scores shift on average (the mean-change test) or move beyond the noise more often
  than the noise alone explains (a one-sided binomial test of the share moved against 5%, or, with a noise of
  0, against 0: any move), each p Holm-adjusted over the judge's edits and both tests, below 0.05.

Everything is on the total score and, in ``by_dimension``, per dimension (a dimension that grades length,
such as a likert ``succinct``, is expected to move on the length edits: read it there). A copy or record
whose call failed is left out (``unjudged``).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Collection, Sequence

import numpy as np
from pydantic import BaseModel

from consensus_eval.analysis.intervals import Z95, Share, scipy_stats, share
from consensus_eval.analysis.results import Results
from consensus_eval.analysis.systems import holm, paired_test
from consensus_eval.domain.calibration.invariance_edits import EDITS, InvarianceCase, InvarianceSuite

#: the level of the tests behind ``flagged`` (after Holm's adjustment), and the share of copies a judge's noise
#: alone moves beyond the threshold
ALPHA = 0.05
#: the largest moved copies kept per judge and edit (the report lists them)
EXAMPLES = 5
#: a change this small is no change (sums of float scores)
_EPS = 1e-9


class DimensionShift(BaseModel):
    """One judge, one edit, one dimension: copies judged, how many moved beyond the dimension's noise, and the
    mean change."""

    n: int
    moved: int
    mean_change: float | None


class MovedCopy(BaseModel):
    """An edited copy whose total moved beyond the noise: its id, its record's, and the change."""

    case: str
    base: str
    change: float


class EditShift(BaseModel):
    """One judge on one edit (module docstring): ``n`` copies judged, ``moved`` the share beyond the noise,
    ``mean_change`` with its 95% interval ``low``-``high`` and p values, ``p_holm`` the smaller of the two
    Holm-adjusted, ``flagged`` when it is below :data:`ALPHA`; ``examples``: the largest moves."""

    n: int
    moved: Share
    mean_change: float | None = None
    low: float | None = None
    high: float | None = None
    mean_abs_change: float | None = None
    p_shift: float | None = None
    p_moved: float | None = None
    p_holm: float | None = None
    flagged: bool = False
    by_dimension: dict[str, DimensionShift] = {}
    examples: list[MovedCopy] = []


class JudgeInvariance(BaseModel):
    """One judge: its noise (total and per dimension; None when no record has two runs), the runs per record,
    the copies pooled over the edits (``moved``, ``mean_abs_change``), each edit, and the flagged edits."""

    name: str
    deterministic: bool
    runs: int
    noise: float | None
    noise_by_dimension: dict[str, float | None]
    unjudged: int
    moved: Share
    mean_abs_change: float | None
    edits: dict[str, EditShift]
    flagged: list[str]


class EditInfo(BaseModel):
    """One edit: how many records it made a copy of, the copies' mean length over their records', and why it
    made none of the others (record id -> why)."""

    copies: int
    length_ratio: float | None
    not_applied: dict[str, str] = {}


class InvarianceReport(BaseModel):
    """The invariance probe (module docstring): ``records`` clean records, ``copies`` edited copies, each
    edit, each judge; ``z`` and ``alpha`` are the threshold and test level used."""

    records: int
    copies: int
    edits: dict[str, EditInfo]
    judges: dict[str, JudgeInvariance]
    z: float = Z95
    alpha: float = ALPHA


def _pooled_sd(groups: Sequence[Sequence[float]]) -> float | None:
    """The pooled within-group standard deviation of the groups with two values or more (None: none has)."""
    variances = [statistics.variance(g) for g in groups if len(g) >= 2]
    return math.sqrt(statistics.fmean(variances)) if variances else None


def _moved(change: float, noise: float | None, runs: int, z: float) -> bool | None:
    """Whether ``change`` is beyond the noise (module docstring); None when the noise is unknown."""
    if noise is None:
        return None
    return abs(change) > z * noise * math.sqrt(1 + 1 / max(runs, 1)) + _EPS


def _p_moved(k: int, n: int, noise: float | None) -> float | None:
    """p of ``k`` of ``n`` copies moving if only the noise moved them (one-sided binomial against
    :data:`ALPHA`); with a noise of 0, 0 when any moved, else 1."""
    if noise is None or n == 0:
        return None
    if noise <= _EPS:
        return 0.0 if k else 1.0
    return float(scipy_stats().binomtest(k, n, ALPHA, alternative="greater").pvalue)


def invariance(suite: InvarianceSuite, results: Results, deterministic: Collection[str] = (),
               z: float = Z95) -> InvarianceReport:
    """The probe's figures (module docstring) for the judges of ``results`` (the run of ``suite``'s cases;
    ``deterministic``: the names of the judges whose noise is 0 by construction)."""
    dims = [d.id for d in results.rubric.dimensions]
    of = {c.case.id: c for c in suite.cases}
    # (judge, case, run) -> dimension -> score
    scores: dict[tuple[str, str, int], dict[str, float]] = defaultdict(dict)
    for r in results.records:
        if r.case_id in of and r.status == "ok" and r.judgment is not None:
            scores[(r.judge, r.case_id, r.run)][r.dimension] = results.scores[r.request_hash].score
    originals = [c for c in suite.cases if c.edit is None]
    copies = [c for c in suite.cases if c.edit is not None]
    info = {}
    for e in EDITS:
        mine = [c for c in copies if c.edit == e]
        info[e] = EditInfo(copies=len(mine),
                           length_ratio=statistics.fmean(c.length_ratio for c in mine) if mine else None,
                           not_applied=suite.not_applied.get(e, {}))
    judges = {j: _judge(j, j in deterministic, originals, copies, scores, dims, z) for j in results.judges}
    return InvarianceReport(records=len(originals), copies=len(copies), edits=info, judges=judges, z=z)


def _total(got: dict[str, float], dims: Sequence[str]) -> float | None:
    return sum(got[d] for d in dims) if all(d in got for d in dims) else None


def _judge(judge: str, deterministic: bool, originals: Sequence[InvarianceCase], copies: Sequence[InvarianceCase],
           scores: dict[tuple[str, str, int], dict[str, float]], dims: Sequence[str], z: float) -> JudgeInvariance:
    runs_of: dict[str, dict[int, dict[str, float]]] = defaultdict(dict)
    for (j, cid, run), got in scores.items():
        if j == judge:
            runs_of[cid][run] = got
    # per record: the runs' totals and per dimension values
    base_total: dict[str, list[float]] = {}
    base_dim: dict[str, dict[str, list[float]]] = {}
    for o in originals:
        runs = runs_of.get(o.case.id, {})
        base_total[o.base] = [t for got in runs.values() if (t := _total(got, dims)) is not None]
        base_dim[o.base] = {d: [got[d] for got in runs.values() if d in got] for d in dims}
    noise = 0.0 if deterministic else _pooled_sd(list(base_total.values()))
    noise_dim = {d: 0.0 if deterministic else _pooled_sd([v[d] for v in base_dim.values()]) for d in dims}
    n_runs = min((len(v) for v in base_total.values() if v), default=0)
    # edit -> (copy, record, change, moved); (edit, dimension) -> (change, moved)
    rows: dict[str, list[tuple[str, str, float, bool | None]]] = defaultdict(list)
    dim_rows: dict[tuple[str, str], list[tuple[float, bool | None]]] = defaultdict(list)
    unjudged = 0
    for c in copies:
        assert c.edit is not None
        got = runs_of.get(c.case.id, {}).get(0, {})
        before = base_total.get(c.base) or []
        total = _total(got, dims)
        if total is None or not before:
            unjudged += 1
        else:
            change = total - statistics.fmean(before)
            rows[c.edit].append((c.case.id, c.base, change, _moved(change, noise, len(before), z)))
        for d in dims:
            values = base_dim.get(c.base, {}).get(d) or []
            if d in got and values:
                change = got[d] - statistics.fmean(values)
                dim_rows[(c.edit, d)].append((change, _moved(change, noise_dim[d], len(values), z)))
    edits: dict[str, EditShift] = {}
    for e in EDITS:
        found = rows.get(e, [])
        changes = np.array([ch for _, _, ch, _ in found], dtype=float)
        moved = [(b, 1.0 if m else 0.0) for _, b, _, m in found if m is not None]
        k = sum(int(v) for _, v in moved)
        fig = EditShift(n=len(found), moved=share(moved))
        if found:
            fig.mean_change = float(changes.mean())
            fig.mean_abs_change = float(np.abs(changes).mean())
        if len(found) >= 2:
            fig.p_shift, fig.low, fig.high, _ = paired_test(changes)
        fig.p_moved = _p_moved(k, len(moved), noise)
        fig.by_dimension = {d: DimensionShift(n=len(dr), moved=sum(1 for _, m in dr if m),
                                              mean_change=statistics.fmean(ch for ch, _ in dr) if dr else None)
                            for d in dims if (dr := dim_rows.get((e, d)))}
        fig.examples = [MovedCopy(case=cid, base=b, change=round(ch, 6))
                        for cid, b, ch, m in sorted(found, key=lambda x: -abs(x[2])) if m][:EXAMPLES]
        edits[e] = fig
    tested = [(e, name) for e in edits for name in ("p_shift", "p_moved") if getattr(edits[e], name) is not None]
    adjusted = holm([getattr(edits[e], name) for e, name in tested])
    for (e, _), p in zip(tested, adjusted, strict=True):
        fig = edits[e]
        fig.p_holm = p if fig.p_holm is None else min(fig.p_holm, p)
    for fig in edits.values():
        fig.flagged = fig.p_holm is not None and fig.p_holm < ALPHA
    pooled = [(b, 1.0 if m else 0.0) for e in EDITS for _, b, _, m in rows.get(e, []) if m is not None]
    all_changes = [abs(ch) for e in EDITS for _, _, ch, _ in rows.get(e, [])]
    return JudgeInvariance(name=judge, deterministic=deterministic, runs=n_runs, noise=noise,
                           noise_by_dimension=noise_dim, unjudged=unjudged,
                           moved=share(pooled, units=len(pooled)),
                           mean_abs_change=statistics.fmean(all_changes) if all_changes else None,
                           edits=edits, flagged=[e for e in EDITS if edits[e].flagged])
