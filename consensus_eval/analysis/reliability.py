"""The reliability of a run: Krippendorff's alpha across its judges, of their stars, per deduction
category and within each judge across runs, each with a bootstrap CI; and agreement with humans.

The statistic itself is :mod:`consensus_eval.analysis.alpha`; agreement with human labels is
:mod:`consensus_eval.analysis.agreement`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from consensus_eval.analysis.agreement import HumanAgreement, judge_value, matrix
from consensus_eval.analysis.alpha import DEFAULT_SEED, Alpha, JointBootstrap, Level, shared_draws
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.decision import DecisionColumns, DecisionStudy
from consensus_eval.analysis.error_analysis import ErrorAnalysis
from consensus_eval.analysis.judge_quality import JudgeQuality, QualityCounts
from consensus_eval.analysis.judge_validity import ValidityReport
from consensus_eval.domain.kinds.deductions import deductions_in
from consensus_eval.domain.rubric import Criterion, Dimension
from consensus_eval.execution.stored_run import StoredRun


class Bootstrap(BaseModel):
    """How the intervals were computed: ``resamples`` of the cases (0: no interval), ``seed``, ``confidence``."""

    resamples: int
    seed: int
    confidence: float = 0.95


class CategoryAlpha(Alpha):
    """Alpha of the points the judges took off in one deduction category (``name``: its display name)."""

    name: str


class ReliabilityReport(BaseModel):
    """Every reliability figure of a run (the content of ``reliability.json``).

    - ``across_judges``: alpha of the judges per dimension id, at the dimension kind's level (:func:`level_of`:
      interval on a deductions dimension's scores, ordinal on a likert dimension's ratings, nominal on a
      criteria dimension's verdicts with one unit per case x criterion), and interval on ``total``;
    - ``stars``: ordinal alpha of the judges' stars per dimension with stars;
    - ``categories``: interval alpha of the points each judge took off in each category
      (``dimension.category``);
    - ``within_judge``: per judge with runs > 1, interval alpha across its runs per dimension
      (units: cases with two runs or more), i.e. run-to-run stability;
    - ``human``: agreement with human labels, when given (:mod:`consensus_eval.analysis.agreement`): on
      the cases reviewed, which the review queue chose by disagreement (not a random sample);
    - ``validity``: the judges and the panel against clinicians on the random spot check
      (:mod:`consensus_eval.analysis.judge_validity`; ``sample`` ``none`` without one);
    - ``decision``: per dimension and total, the G-study's variance components and how reliable 1-5
      judges x 1-3 runs would be (:mod:`consensus_eval.analysis.decision`; empty with one judge).

    Each alpha carries its bootstrap 95% interval over cases (seeded; ``bootstrap`` says how). A
    report read from a file may lack the optional sections (they are then empty).
    """

    judges: list[str]
    n_cases: int
    across_judges: dict[str, Alpha]
    bootstrap: Bootstrap | None = None
    stars: dict[str, Alpha] = {}
    categories: dict[str, CategoryAlpha] = {}
    within_judge: dict[str, dict[str, Alpha]] = {}
    human: HumanAgreement | None = None
    #: per judge: deductions by grounding kind, share ungrounded and claimed-vs-derived mismatch rate,
    #: with Wilson CIs (:mod:`consensus_eval.analysis.judge_quality`)
    judge_quality: dict[str, JudgeQuality] = {}
    validity: ValidityReport | None = None
    #: what the judges get wrong against the clinicians, item by item (:mod:`consensus_eval.analysis.error_analysis`;
    #: only with labels)
    errors: ErrorAnalysis | None = None
    decision: dict[str, DecisionStudy] = {}
    #: the judges that are simulated (``kind: simulated``, a demo device: their agreement is not a real one)
    simulated: list[str] = []

    def to_json(self) -> dict[str, Any]:
        """The report as written to reliability.json (``human`` and ``validity`` only when there are labels
        or a spot check, ``simulated`` only when some judge is)."""
        skip = {k for k in ("human", "validity", "errors", "simulated") if getattr(self, k) in (None, [])}
        return self.model_dump(mode="json", exclude=skip, exclude_none=False)

    def describes(self, judges: Sequence[str], n_cases: int) -> bool:
        """Whether this report is about these judges and this many cases (a stale file is not)."""
        return self.judges == list(judges) and self.n_cases == n_cases


def reliability_report(run: StoredRun, cons: Sequence[CaseConsensus], n_boot: int = 1000,
                       seed: int = DEFAULT_SEED, *,
                       quality: dict[str, JudgeQuality] | None = None) -> ReliabilityReport:
    """Alpha across judges, of stars, per category and within judges, each with its bootstrap CI
    (the figures over the same cases share their resamples: :func:`shared_draws`). ``quality``: the run's
    :func:`~consensus_eval.analysis.judge_quality.judge_quality`, when the caller has it already."""
    columns = ReliabilityColumns(run)
    columns.add(run, cons, quality=quality is None)
    return columns.report(n_boot, seed, quality=quality)


class ReliabilityColumns:
    """What a reliability report is computed on, added a part of a run at a time (some of its cases, in the run's
    order, with their calls and consensus: :func:`~consensus_eval.analysis.derived.read_run_by_cases`), so that a
    run of any size is analysed holding only its figures' columns, not its calls. Per figure, one judges x units
    block per part (a unit: a case, or a case x criterion), joined in the run's order: the same matrices, so the same
    figures to the last bit, as the whole run read at once. Judge quality and the decision studies are counted the
    same way (:class:`QualityCounts`, :class:`DecisionColumns`).

    Args:
        run: The run (or any part of it): its rubric, judges and config.
        apart: These columns gather parts that come after others, read apart (another process): they are merged
            into the earlier parts' columns (:meth:`merge`).
    """

    def __init__(self, run: StoredRun, *, apart: bool = False) -> None:
        self.rubric, self.judges = run.rubric, list(run.judges)
        self.simulated = run.config.simulated_judges
        dims = self.rubric.dimensions
        self.n_cases = 0
        self.across: dict[str, list[np.ndarray]] = {**{d.id: [] for d in dims}, "total": []}
        self.stars: dict[str, list[np.ndarray]] = {d.id: [] for d in dims if d.stars is not None}
        self.categories: dict[str, tuple[str, str, list[np.ndarray]]] = {
            f"{d.id}.{cat.id}": (cat.id, cat.name, []) for d in deductions_in(dims) for cat in d.categories}
        #: per judge and dimension, a (the part's most runs) x cases block per part
        self.within: dict[str, dict[str, list[np.ndarray]]] = {j: {d.id: [] for d in dims} for j in self.judges}
        self.most_runs = dict.fromkeys(self.judges, 0)
        self.quality = QualityCounts(self.judges)
        self.decision = DecisionColumns(self.judges, [d.id for d in dims], apart=apart)

    def add(self, run: StoredRun, cons: Sequence[CaseConsensus], *, quality: bool = True) -> None:
        """Add a part of the run: ``run`` (its cases and calls, derived and grounded) and ``cons``, its cases'
        consensus in order. Parts are added in the run's order.

        Args:
            run: The stored run, or a part of it.
            cons: The consensus of each of its cases, in the run's order.
            quality: Count judge quality too (not needed when the report is given it).
        """
        judges, dims = self.judges, self.rubric.dimensions
        most = _most_runs(cons, judges, [d.id for d in dims])
        for j in judges:
            self.most_runs[j] = max(self.most_runs[j], most[j])
            for d in dims:
                self.within[j][d.id].append(
                    matrix([[(c.judges[j][d.id].runs[i] if i < len(c.judges[j][d.id].runs) else None) for c in cons]
                            for i in range(most[j])]) if most[j] else np.empty((0, len(cons))))
        case_criteria = {c.id: c.criteria for c in run.cases}   # once for every dimension (:func:`_rows`)
        for d in dims:
            self.across[d.id].append(matrix(_rows(run, cons, d, case_criteria)))
        self.across["total"].append(matrix([[judge_value(c, j, "total") for c in cons] for j in judges]))
        for dim_id, blocks in self.stars.items():
            blocks.append(matrix([[c.judges[j][dim_id].stars for c in cons] for j in judges]))
        taken = _points_taken(run, cons)
        for category, _, blocks in self.categories.values():
            blocks.append(taken(category))
        if quality:
            self.quality.add(run)
        self.decision.add(run, cons)
        self.n_cases += len(cons)

    def merge(self, later: ReliabilityColumns) -> None:
        """Add the parts ``later`` gathered: the cases that come after these in the run, read apart (``apart``).

        Args:
            later: Columns of the same run's later cases.
        """
        self.n_cases += later.n_cases
        for mine, theirs in ((self.across, later.across), (self.stars, later.stars)):
            for key, blocks in mine.items():
                blocks.extend(theirs[key])
        for key, (_, _, blocks) in self.categories.items():
            blocks.extend(later.categories[key][2])
        for j in self.judges:
            self.most_runs[j] = max(self.most_runs[j], later.most_runs[j])
            for d, blocks in self.within[j].items():
                blocks.extend(later.within[j][d])
        self.quality.merge(later.quality)
        self.decision.merge(later.decision)

    def report(self, n_boot: int, seed: int = DEFAULT_SEED, *,
               quality: dict[str, JudgeQuality] | None = None) -> ReliabilityReport:
        """The report of every part added (the figures over the same cases share their resamples:
        :func:`shared_draws`).

        Args:
            n_boot: Bootstrap resamples of the cases for each interval (0: none).
            seed: The bootstrap's seed.
            quality: The run's judge quality, when the caller has it (else what :meth:`add` counted).
        """
        with shared_draws():
            return self._report(n_boot, seed, quality)

    def _report(self, n_boot: int, seed: int, quality: dict[str, JudgeQuality] | None) -> ReliabilityReport:
        rubric, judges = self.rubric, self.judges
        dims = [d.id for d in rubric.dimensions]
        joint = JointBootstrap(n_boot, seed)   # above ~67,000 cases, one pass over the resamples for every figure

        def a(blocks: list[np.ndarray], level: Level = "interval", rows: int = len(judges)) -> Alpha:
            return joint.alpha(_joined(blocks, rows), level)

        within: dict[str, dict[str, Alpha]] = {}
        for j in judges:
            n_runs = self.most_runs[j]
            if n_runs >= 2:   # each part's block has its own most runs: the rows below it are all missing
                within[j] = {d: a([_padded(b, n_runs) for b in self.within[j][d]], rows=n_runs) for d in dims}
        across = {**{d.id: a(self.across[d.id], level_of(d)) for d in rubric.dimensions},
                  "total": a(self.across["total"])}
        stars = {d: a(blocks, "ordinal") for d, blocks in self.stars.items()}
        categories = {k: (name, a(blocks)) for k, (_, name, blocks) in self.categories.items()}
        joint.finish()   # every interval set before a figure is read
        return ReliabilityReport(
            judges=judges, n_cases=self.n_cases, bootstrap=Bootstrap(resamples=n_boot, seed=seed),
            across_judges=across, stars=stars,
            categories={k: CategoryAlpha(name=name, **alpha.model_dump()) for k, (name, alpha) in categories.items()},
            within_judge=within,
            judge_quality=self.quality.quality() if quality is None else quality,
            decision=self.decision.studies(),
            simulated=self.simulated,
        )


def _joined(blocks: list[np.ndarray], rows: int) -> np.ndarray:
    """The parts' blocks of one figure side by side (its units in the run's order)."""
    if len(blocks) == 1:
        return blocks[0]
    return np.concatenate(blocks, axis=1) if blocks else np.empty((rows, 0))


def _padded(block: np.ndarray, rows: int) -> np.ndarray:
    """``block`` with missing rows (NaN) below it up to ``rows``."""
    if len(block) == rows:
        return block
    return np.concatenate([block, np.full((rows - len(block), block.shape[1]), np.nan)])


def _most_runs(cons: Sequence[CaseConsensus], judges: Sequence[str], dims: Sequence[str]) -> dict[str, int]:
    """Per judge, the most runs it has of any case and dimension (0 without cases), in one pass over the cases."""
    most = dict.fromkeys(judges, 0)
    for c in cons:
        table = c.judges
        for j in judges:
            row = table[j]
            n = max([len(row[d].runs) for d in dims], default=0)
            if n > most[j]:
                most[j] = n
    return most


def level_of(dimension: Dimension) -> Level:
    """The level of measurement of a dimension's agreement: its kind's
    (:attr:`~consensus_eval.domain.kinds.base.Dimension.alpha_level`; interval for a deductions dimension's
    scores, ordinal for a likert dimension's ratings, nominal for a criteria dimension's met / not met verdicts)."""
    return dimension.alpha_level


def _rows(run: StoredRun, cons: Sequence[CaseConsensus], dim: Dimension,
          case_criteria: Mapping[str, Sequence[Criterion] | None]) -> list[list[float | None]]:
    """One row per judge, the values alpha of ``dim`` is computed on, as its kind says
    (:meth:`~consensus_eval.domain.kinds.base.Dimension.agreement_values`: each case's mean score; for a criteria
    dimension one value per case x criterion, by ``case_criteria``: each case's own criteria, by case id)."""
    return dim.agreement_values(cons, run.judges, case_criteria)


def _points_taken(run: StoredRun, cons: Sequence[CaseConsensus]) -> Callable[[str], np.ndarray]:
    """A function of a category id giving the judges x cases matrix (``run.judges``, ``cons``'s order) of the
    mean points each judge's ok runs took off in that category of the case (:func:`mean_or_none`; NaN: none):
    what ``matrix`` of :func:`~consensus_eval.analysis.agreement.points_taken`'s means gives, from one list of
    cells per category id (one float per cell for a single run) instead of a dict of 1.2 million tuples at
    20,000 cases x 4 judges (+220 MB)."""
    judges = {j: i for i, j in enumerate(run.judges)}
    n_cases = len(cons)
    where: dict[str, list[int]] = {}
    for i, c in enumerate(cons):
        where.setdefault(c.case_id, []).append(i)
    cells: dict[str, list[float | list[float] | None]] = {}
    for r in run.records:
        score = run.scores.get(r.request_hash)
        at, j = where.get(r.case_id), judges.get(r.judge)
        if score is None or at is None or j is None:
            continue
        for cs in score.categories:
            row = cells.get(cs.id)
            if row is None:
                row = cells[cs.id] = [None] * (len(judges) * n_cases)
            for i in at:
                k = j * n_cases + i
                cell = row[k]
                if cell is None:
                    row[k] = cs.taken
                elif isinstance(cell, list):
                    cell.append(cs.taken)
                else:
                    row[k] = [cell, cs.taken]

    def taken(category: str) -> np.ndarray:
        row = cells.get(category)
        out = np.full((len(judges), n_cases), np.nan)
        if row is not None:     # a single run's points as mean_or_none([v]) gives them: (0.0 + v) / 1 is 0.0 + v
            out.reshape(-1)[:] = [np.nan if v is None else mean_or_none(v) if isinstance(v, list) else 0.0 + v
                                  for v in row]
        return out

    return taken


def mean_or_none(v: list[float] | None) -> float | None:
    """The mean of ``v`` (None if empty), equal to the bit to ``float(np.mean(v))``: numpy sums fewer
    than 8 values left to right (its pairwise summation starts at 8), as the loop here does, at a
    fraction of the cost of building an array for a list of one or two values."""
    if not v:
        return None
    if len(v) >= 8:
        return float(np.mean(v))
    total = 0.0
    for x in v:
        total += x
    return total / len(v)
