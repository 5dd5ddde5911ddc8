"""The results of a run: the stored run plus everything computed from it, as one typed object.

:func:`analyze` is what every writer and renderer receives: consensus is computed at once; the
audit ranking and the reliability report are computed on first use (the ``audit`` command needs no
bootstrap), once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from consensus_eval._gc import gc_paused, gc_paused_call
from consensus_eval._parallel import beside
from consensus_eval.analysis import consensus
from consensus_eval.analysis.agreement import HumanLabel
from consensus_eval.analysis.alpha import DEFAULT_SEED
from consensus_eval.analysis.audit import CaseAudit, audit
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.error_analysis import error_analysis
from consensus_eval.analysis.human import DEFAULT_REVIEWER, HumanReview, build_review, human_agreement, labels_from_wide
from consensus_eval.analysis.judge_quality import JudgeQuality, judge_quality
from consensus_eval.analysis.judge_validity import validity_report
from consensus_eval.analysis.reliability import ReliabilityReport, reliability_report
from consensus_eval.analysis.systems import Leaderboard, leaderboard
from consensus_eval.analysis.usage import JudgeUsage, run_usage
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.rubric import Criterion, Rubric
from consensus_eval.domain.scoring import DimensionScore
from consensus_eval.execution.execute import Progress
from consensus_eval.execution.store import HumanLabelRecord, SpotCheckRecord, StoredCall
from consensus_eval.execution.stored_run import StoredRun


@dataclass
class Results:
    """A run and what it says: cases, judgments (``records`` and their re-derived ``scores``), the
    panel's ``consensus`` per case, the ``reliability`` report and the ``audit`` ranking.

    ``reliability_source`` says where the reliability report came from: ``computed`` here, or a
    ``reliability.json`` that describes this run (it may carry a human section).

    ``labels``: the human labels of the run (from its store); ``review`` gathers them per case, and the
    report's ``human`` section is computed from them (:mod:`consensus_eval.analysis.human`).
    ``spot_checks``: the random spot-check sample (from the store), on which the ``validity`` section is
    measured (:mod:`consensus_eval.analysis.judge_validity`). ``leaderboard``: the systems side by side
    when the cases name two or more (:mod:`consensus_eval.analysis.systems`).
    """

    run: StoredRun
    consensus: list[CaseConsensus]
    labels: list[HumanLabelRecord] = field(default_factory=list)
    spot_checks: list[SpotCheckRecord] = field(default_factory=list)
    n_boot: int = 1000
    seed: int = DEFAULT_SEED
    reliability_source: str = "computed"
    #: this invocation's calls (made, resumed from the store, failed), when it made any
    progress: Progress | None = None
    _reliability: ReliabilityReport | None = field(default=None, repr=False)
    _human_done: bool = field(default=False, repr=False)

    @property
    def rubric(self) -> Rubric:
        return self.run.rubric

    @property
    def config(self) -> EvalConfig:
        return self.run.config

    @property
    def cases(self) -> list[Case]:
        return self.run.cases

    @cached_property
    def case_criteria(self) -> dict[str, list[Criterion]]:
        """case id -> the case's own criteria (for a criteria dimension without criteria of its own); the cases
        that bring none are left out."""
        return {c.id: list(c.criteria) for c in self.run.cases if c.criteria is not None}

    @property
    def records(self) -> list[StoredCall]:
        """Every stored call of the plan (ok and failed), in plan order."""
        return self.run.records

    @property
    def scores(self) -> dict[str, DimensionScore]:
        """The re-derived score of every ok call, by request hash."""
        return self.run.scores

    @property
    def judges(self) -> list[str]:
        return self.run.judges

    @cached_property
    def usage(self) -> dict[str, JudgeUsage]:
        """Per judge: calls, attempts, tokens, cost and cache savings (:func:`~.usage.run_usage`)."""
        return run_usage(self.run)

    @property
    def reliability(self) -> ReliabilityReport:
        """Alpha across judges, stars, categories and runs (and against the human, with labels)."""
        with gc_paused():
            if self._reliability is None:
                self._reliability = reliability_report(self.run, self.consensus, self.n_boot, self.seed,
                                                       quality=self.judge_quality)  # computed once for both
                self._human_done = False
            if not self._human_done:
                # the human section always says what the store's labels say (a saved one may be stale)
                self._reliability.human = (human_agreement(self.run, self.consensus, self.review, self.n_boot,
                                                           self.seed) if self.review is not None else None)
                self._reliability.validity = (validity_report(self.run, self.consensus, self.review, self.spot_checks)
                                              if self.spot_checks else None)
                self._reliability.errors = (error_analysis(self.run, self.consensus, self.review, self.spot_checks)
                                            if self.review is not None else None)
            self._human_done = True
            return self._reliability

    @cached_property
    @gc_paused_call
    def review(self) -> HumanReview | None:
        """The human labels gathered per case (None without labels): what a drill-down shows beside
        the panel (``review.case(case_id)``: each reviewer's scores, verdicts, comments)."""
        return build_review(self.labels, self.rubric, self.consensus,
                            case_criteria=self.case_criteria) if self.labels else None

    @cached_property
    @gc_paused_call
    def leaderboard(self) -> Leaderboard | None:
        """The systems that wrote the records, ranked, with their differences (None: fewer than 2 systems)."""
        return leaderboard(self.cases, self.consensus, [d.id for d in self.rubric.dimensions], self.judges)

    @cached_property
    @gc_paused_call
    def judge_quality(self) -> dict[str, JudgeQuality]:
        """Per judge: share of deductions not grounded in the case, by grounding kind, and the
        claimed-vs-derived mismatch rate, with Wilson CIs (:mod:`consensus_eval.analysis.judge_quality`)."""
        return judge_quality(self.run)

    @cached_property
    @gc_paused_call
    def audit(self) -> list[CaseAudit]:
        """Every case, ranked by disagreement (:mod:`consensus_eval.analysis.audit`)."""
        return audit(self.run, self.consensus)

    @gc_paused_call
    def compute_all(self) -> None:
        """Compute :attr:`reliability` and :attr:`audit` now, the reliability report's bootstraps in a second process
        while this one ranks the audit (:mod:`consensus_eval._parallel`; one after the other where that cannot
        serve): what a rebuild does before it writes."""
        if self._reliability is not None and self._human_done:
            _ = self.audit
            return
        _ = self.judge_quality   # both need it: computed once, here
        with beside(lambda: self.reliability, cases=len(self.cases)) as report:
            _ = self.audit
        self._reliability, self._human_done = report.result(), True


@gc_paused_call
def analyze(run: StoredRun, *, labels: Sequence[HumanLabelRecord] = (), human: dict[str, HumanLabel] | None = None,
            n_boot: int = 1000, seed: int = DEFAULT_SEED, reliability: ReliabilityReport | None = None,
            reliability_source: str = "computed", spot_checks: Sequence[SpotCheckRecord] = ()) -> Results:
    """The results of a stored run. ``labels``: its human labels (from the store); ``human``: labels
    in the wide format, not stored, added as reviewer ``human``. ``reliability``: a report already at
    hand (from reliability.json) to use instead of computing one (its human section is recomputed
    from ``labels`` when there are any)."""
    all_labels = list(labels)
    if human:
        all_labels += labels_from_wide(human, run.rubric, DEFAULT_REVIEWER, "api")
    return Results(run=run, consensus=consensus.of_run(run), labels=all_labels, spot_checks=list(spot_checks),
                   n_boot=n_boot, seed=seed,
                   reliability_source=reliability_source if reliability is not None else "computed",
                   _reliability=reliability)
