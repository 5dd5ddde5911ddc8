"""Runs -> judge score -> panel score, with quorum, spread and disagreement flags.

For each case and dimension, a judge's score is the mean of its successful runs (each run's score
re-derived from its deductions); the panel score aggregates the judges (mean, median or trimmed
mean). Failed runs are left out, never counted as zeros. A case has a panel score only if every
dimension has at least ``min_judges`` judges with a score: otherwise it is ``inconclusive``
(some judges answered, too few) or ``failed`` (no judge answered at all). A case some of whose
planned calls are not stored yet (an interrupted run) is ``incomplete``, whatever it has so far: its
scores are provisional until the run is resumed.

With a cascade (``stage: 2`` judges, :mod:`consensus_eval.execution.adaptive`) a stage-2 judge is asked
only the cases stage 1 flags or cannot settle: on the other cases it is ``not asked`` (listed in
:attr:`CaseConsensus.not_asked`), which is neither a failure nor a missing call; the panel of such a
case is the judges that were asked.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from math import fsum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from consensus_eval.analysis.derived import derive_all
from consensus_eval.domain.aggregate import aggregate
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import ConsensusConfig
from consensus_eval.domain.construct import construct
from consensus_eval.domain.flags import Flag, disagreement
from consensus_eval.domain.kinds.criteria import Majority, majority
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.scoring import DimensionScore
from consensus_eval.execution.store import StoredCall
from consensus_eval.execution.stored_run import StoredRun

Status = Literal["ok", "inconclusive", "failed", "incomplete"]


@dataclass(slots=True, frozen=True)
class JudgeScore:
    """One judge on one dimension of one case: its runs' re-derived scores and their mean (a plain dataclass:
    a rebuild makes one per judge, dimension and case; written out inside :class:`CaseConsensus`).

    ``spread`` is the range (max - min) over runs: 0 for a single run or perfectly stable runs.
    """

    judge: str
    dimension: str
    runs: list[float]
    failed_runs: int
    mean: float | None
    spread: float | None
    stars: int | None
    claim_mismatches: int
    #: whether the judge was asked this dimension of this case at all (False: a stage-2 judge of a cascade
    #: on a case stage 1 settled; no run, and no failure either)
    asked: bool = True
    #: a ``criteria`` dimension: criterion id -> the judge's verdict, met in more than half of its runs or
    #: not (a criterion its runs are split on evenly is left out); left out of dumps while empty
    criteria: Annotated[dict[str, bool], Field(exclude_if=lambda v: not v)] = field(default_factory=dict)


class CaseConsensus(BaseModel):
    """The panel's verdict on one case, with what it rests on. ``flags``: why it is disputed, in English
    (the data files' words); ``flag_codes``: the same as data (:class:`Flag`), for readers in any language."""

    case_id: str
    status: Status
    scores: dict[str, float | None]          # dimension -> panel score
    stars: dict[str, int | None]             # dimension -> stars of the panel score
    total: float | None
    star_total: float | None
    n_judges: int                            # judges with a score on every dimension
    judges: dict[str, dict[str, JudgeScore]]  # judge -> dimension -> score
    judge_totals: dict[str, float]            # judges with a complete total
    spread: float | None                      # max - min of judge totals
    flags: list[str]                          # spread above flag_spread, star gaps >= flag_star_gap
    missing_calls: int = 0                    # planned calls not stored yet (status incomplete)
    not_asked: list[str] = []                 # judges the case was never sent to (cascade stage 2)
    flag_codes: list[Flag] = []               # ``flags`` as data
    #: ``criteria`` dimensions: dimension -> criterion id -> the panel's majority verdict (``met`` by more
    #: than half of the judges that gave one, ``not met``, or ``split``: a tie); left out of dumps while empty
    criteria: Annotated[dict[str, dict[str, Majority]], Field(exclude_if=lambda v: not v)] = {}

    @property
    def flagged(self) -> bool:
        return bool(self.flags)


def build(
    rubric: Rubric, records: Sequence[StoredCall], judges: Sequence[str], case_ids: Sequence[str],
    config: ConsensusConfig, scores: dict[str, DimensionScore] | None = None,
    missing: Mapping[str, int] | None = None, cases: Sequence[Case] = (),
) -> list[CaseConsensus]:
    """The consensus of every case, in ``case_ids`` order. ``scores`` are the records' re-derived
    scores by request hash (:attr:`StoredRun.scores`); derived here when not given (``cases``: their own
    criteria, for a criteria dimension without any). ``missing``: per case, planned calls not stored
    yet (such a case is ``incomplete``)."""
    derived = scores if scores is not None else derive_all(rubric, records, cases)
    by_key: dict[tuple[str, str, str], list[StoredCall]] = defaultdict(list)
    for r in records:
        by_key[(r.case_id, r.judge, r.dimension)].append(r)
    gaps = missing or {}
    panel = _Panel.of(rubric, judges, config)
    return [_case(panel, cid, by_key, derived, gaps.get(cid, 0)) for cid in case_ids]


def of_run(run: StoredRun) -> list[CaseConsensus]:
    """The consensus of every case of a stored run, from its already-derived scores."""
    return build(run.rubric, run.records, run.judges, [c.id for c in run.cases], run.config.consensus, run.scores,
                 run.missing, run.cases)


@dataclass(slots=True, frozen=True)
class _Panel:
    """What the consensus of every case of a build reads of the rubric, found once per build (a rebuild makes
    one consensus per case): the dimension ids in order, each one's stars function, the criteria dimensions."""

    rubric: Rubric
    judges: Sequence[str]
    config: ConsensusConfig
    dims: list[str]
    weights: list[float]
    stars_for: dict[str, Callable[[float], int | None]]
    has_stars: bool
    by_criteria: list[str]

    @classmethod
    def of(cls, rubric: Rubric, judges: Sequence[str], config: ConsensusConfig) -> _Panel:
        dimensions = rubric.dimensions
        # each dimension's stars of a score, remembered: asked once per judge, case and dimension, of a few
        # hundred distinct scores; no stars at all (a rubric whose dimensions have none): no star total either,
        # never a made-up 0
        return cls(rubric, judges, config, dims=[d.id for d in dimensions], weights=[d.weight for d in dimensions],
                   stars_for={d.id: cache(d.stars_for) for d in dimensions},
                   has_stars=any(d.stars is not None for d in dimensions),
                   by_criteria=[d.id for d in dimensions if d.by_criteria])

    def total(self, values: Sequence[float | None]) -> float | None:
        """The rubric's total of ``values`` (one per dimension, in rubric order), or None if any is None: the
        sum :meth:`Rubric.total` makes (weight x score in rubric order, from 0), without a dict per total."""
        if None in values:
            return None
        return sum([v * w for v, w in zip(values, self.weights, strict=True) if v is not None])


def _judge_score(judge: str, dim: str, recs: list[StoredCall] | None, derived: dict[str, DimensionScore],
                 stars_for: Callable[[float], int | None]) -> JudgeScore:
    if not recs:        # not asked (a cascade's stage-2 judge on a case stage 1 settled)
        return JudgeScore(judge, dim, [], 0, None, None, None, 0, False, _NO_VERDICTS)
    if len(recs) == 1:  # one run (most runs): the same values as below, without the lists and the loop
        if (one := derived.get(recs[0].request_hash)) is None:
            return JudgeScore(judge, dim, [], 1, None, None, None, 0, True, _NO_VERDICTS)
        s = one.score
        mean = fsum((s,)) / 1
        return JudgeScore(judge, dim, [s], 0, mean, s - s, stars_for(mean), 0 + one.claim_mismatch, True,
                          _judge_verdicts((one,)) if one.criteria else _NO_VERDICTS)
    ok = [d for r in recs if (d := derived.get(r.request_hash)) is not None]
    if not ok:
        return JudgeScore(judge, dim, [], len(recs), None, None, None, 0, True, _NO_VERDICTS)
    runs = [d.score for d in ok]
    mean = fsum(runs) / len(runs)       # statistics.fmean's sum and division, without its checks
    mismatches, verdicts = 0, False     # one pass over the runs (a rebuild makes one JudgeScore per call)
    for d in ok:
        mismatches += d.claim_mismatch
        verdicts = verdicts or bool(d.criteria)
    return JudgeScore(judge, dim, runs, len(recs) - len(ok), mean, max(runs) - min(runs), stars_for(mean),
                      mismatches, True, _judge_verdicts(ok) if verdicts else _NO_VERDICTS)


#: the one empty verdicts mapping every judge score of another kind shares (never changed once built)
_NO_VERDICTS: dict[str, bool] = {}


def _judge_verdicts(runs: Sequence[DimensionScore]) -> dict[str, bool]:
    """A judge's verdict per criterion over its runs: met when met in more than half of them, not met when
    in fewer than half; a criterion its runs split on evenly is left out (the judge gave no verdict)."""
    tally: dict[str, list[bool]] = defaultdict(list)
    for d in runs:
        for c in d.criteria:
            tally[c.id].append(c.met)
    return {cid: 2 * sum(v) > len(v) for cid, v in tally.items() if 2 * sum(v) != len(v)}


def _panel_verdicts(table: dict[str, dict[str, JudgeScore]], judges: Sequence[str],
                    dim: str) -> dict[str, Majority]:
    """The panel's majority verdict on each criterion of a criteria dimension (:func:`majority`), over
    the judges that gave one, criteria in the order judges list them."""
    by_id: dict[str, list[bool]] = {}
    for j in judges:
        for cid, met in table[j][dim].criteria.items():
            by_id.setdefault(cid, []).append(met)
    return {cid: m for cid, v in by_id.items() if (m := majority(v)) is not None}


def _case(panel: _Panel, case_id: str, by_key: dict[tuple[str, str, str], list[StoredCall]],
          derived: dict[str, DimensionScore], missing: int = 0) -> CaseConsensus:
    rubric, judges, dims, config, stars_for = panel.rubric, panel.judges, panel.dims, panel.config, panel.stars_for
    table = {j: {d: _judge_score(j, d, by_key.get((case_id, j, d)), derived, stars_for[d]) for d in dims}
             for j in judges}
    by_dim = {d: [table[j][d] for j in judges] for d in dims}
    scores: dict[str, float | None] = {}
    for d in dims:
        vals = [m for js in by_dim[d] if (m := js.mean) is not None]
        scores[d] = aggregate(vals, config.aggregate, config.trim) if len(vals) >= config.min_judges else None
    judge_totals = {j: t for j in judges if (t := panel.total([table[j][d].mean for d in dims])) is not None}
    any_answer = any(js.runs for d in dims for js in by_dim[d])
    complete = all(s is not None for s in scores.values())
    status: Status = ("incomplete" if missing else "ok" if complete else
                      "inconclusive" if any_answer else "failed")
    stars = {d: (stars_for[d](s) if s is not None else None) for d, s in scores.items()}
    total = panel.total(list(scores.values()))
    star_total = (rubric.star_total({d: s for d, s in stars.items() if s is not None})
                  if complete and panel.has_stars else None)
    spread = (max(judge_totals.values()) - min(judge_totals.values())) if len(judge_totals) >= 2 else None
    verdicts = {d: _panel_verdicts(table, judges, d) for d in panel.by_criteria}
    flags = disagreement(
        rubric, list(judge_totals.values()),
        {d: [s for js in by_dim[d] if (s := js.stars) is not None] for d in dims}, config, judges=by_dim)
    values: dict[str, object] = dict(
        case_id=case_id, status=status, scores=scores, stars=stars, total=total, star_total=star_total,
        n_judges=len(judge_totals), judges=table, judge_totals=judge_totals, spread=spread,
        flags=[f.text for f in flags], flag_codes=flags, missing_calls=missing,
        not_asked=[] if missing else [j for j in judges if not any(table[j][d].asked for d in dims)],
        criteria=verdicts if any(verdicts.values()) else {},
    )
    return construct(CaseConsensus, **values)
