"""Adaptive runs and cascades: a plan that grows in rounds, each decision a function of stored results.

Round 1 is :func:`consensus_eval.execution.plan.plan`: ``adaptive.min_runs`` runs of each adaptive case
(the fixed number of a fixed one) from every stage-1 judge. After each round, every case all of whose
planned calls are stored (ok or failed) is decided by :func:`decide`, the calls it adds are made, and so
on until a round adds nothing.

The stopping rule (``runs: adaptive`` / ``important_runs: adaptive``; :class:`AdaptiveConfig`), per
judge, dimension and case, with ``n`` runs planned and their successful runs' re-derived scores:

- ``n >= adaptive.max_runs``: stop; no successful run: stop (a failure is not a disagreement; a resumed
  ``score`` retries failed calls as always);
- otherwise one more run (run ``n``) if the judge's own runs disagree: their scores are more than
  ``adaptive.run_spread`` points apart (max - min), or their stars ``adaptive.run_star_gap`` or more
  apart (needs two successful runs); on a ``likert`` dimension, their ratings ``consensus.flag_level_gap``
  or more levels apart (points of a deductions scale mean nothing on a 1-5 one); on a ``criteria``
  dimension, any two runs scoring differently (a verdict changed: a 0-1 score has no points to spread);
- or if the panel (every judge asked the case) disagrees: judges' totals (means over runs) further apart
  than the flag's limit (``consensus.flag_spread``, or ``flag_spread_share`` of the total's range:
  :func:`~consensus_eval.domain.flags.spread_limit`; every dimension gets a run), or this dimension's stars
  ``consensus.flag_star_gap`` or more apart: the very rules that flag a case for audit
  (:mod:`consensus_eval.analysis.consensus`);
- else stop.

The cascade (judges with ``stage: 2``): once a case's stage-1 judges are settled (the rule above adds
nothing more for them), the stage-2 judges are asked the case (every dimension, their first runs) if the
stage-1 panel flags it (the same two panel rules) or cannot reach a verdict (a dimension with fewer than
``consensus.min_judges`` stage-1 judges with a score). From then on they are panel judges of the case like
the others. A case never sent to a stage-2 judge has that judge ``not asked`` (not failed) in its consensus.

Decisions read only the results of the calls planned so far, so a killed run resumed into the same folder
replays the same rounds: the stored calls are not made again and the same calls are added. A decision
uses the scores as judged (``ungrounded: drop`` applies to the consensus, not to these decisions).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.flags import disagreement
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.scoring import Deriver
from consensus_eval.execution.execute import Progress, ProgressHook, execute
from consensus_eval.execution.plan import Call, call_for, first_runs
from consensus_eval.execution.store import Store, StoredCall
from consensus_eval.judges.base import Judge


@dataclass(frozen=True)
class JudgeRuns:
    """One judge on one dimension of one case so far: ``planned`` runs, the re-derived scores of the
    successful ones (in run order)."""

    planned: int
    scores: tuple[float, ...]


#: one case's state: judge -> dimension -> its runs (only judges asked the case)
CaseRuns = Mapping[str, Mapping[str, JudgeRuns]]


@dataclass(frozen=True)
class Addition:
    """A call :func:`decide` adds: run ``run`` of ``judge`` on ``dimension``, and why (``own``: the judge's
    runs disagree; ``panel``: the panel does; ``cascade``: stage 1 flagged or could not settle the case)."""

    judge: str
    dimension: str
    run: int
    why: str


def decide(runs: CaseRuns, rubric: Rubric, config: EvalConfig, *, adaptive: bool,
           stage: Mapping[str, int], deterministic: frozenset[str] = frozenset(),
           first: Mapping[str, int] | None = None) -> list[Addition]:
    """The calls one case needs next (none: the case is settled), by the module's stopping rule.

    ``adaptive``: the case's runs are adaptive (else only the cascade can add calls); ``stage``: every
    judge's stage; ``deterministic``: judges never run twice; ``first``: the first-round runs of a
    stage-2 judge (default ``adaptive.min_runs`` or the fixed number, as given by the caller)."""
    dims = [d.id for d in rubric.dimensions]
    a, cons = config.adaptive, config.consensus
    out: list[Addition] = []
    if adaptive:
        flagged = _panel_flags(runs, rubric, config)
        for j, by_dim in runs.items():
            if j in deterministic:
                continue
            for d in dims:
                jr = by_dim.get(d)
                if jr is None or jr.planned >= a.max_runs or not jr.scores:
                    continue
                if _own_disagreement(jr.scores, rubric, d, config):
                    out.append(Addition(j, d, jr.planned, "own"))
                elif d in flagged:
                    out.append(Addition(j, d, jr.planned, "panel"))
    stage2 = [j for j, s in stage.items() if s == 2]
    if out or not stage2 or any(j in runs for j in stage2):
        return out
    stage1 = {j: r for j, r in runs.items() if stage.get(j, 1) == 1}
    unsettled = any(sum(bool(stage1[j].get(d, JudgeRuns(0, ())).scores) for j in stage1) < cons.min_judges
                    for d in dims)
    if unsettled or _panel_flags(stage1, rubric, config):
        n_first = first or {}
        out += [Addition(j, d, r, "cascade") for j in stage2 for d in dims for r in range(n_first.get(j, 1))]
    return out


def _own_disagreement(scores: Sequence[float], rubric: Rubric, dim: str, config: EvalConfig) -> bool:
    """Whether a judge's own runs (two at least) disagree, by the dimension's kind's rule
    (:meth:`~consensus_eval.domain.kinds.base.Dimension.runs_disagree`)."""
    return len(scores) >= 2 and rubric.dimension(dim).runs_disagree(scores, config)


@dataclass(frozen=True)
class _Means:
    """A judge's mean score of a dimension as the kinds' flags read it (no criterion verdicts: runs carry scores)."""

    mean: float | None
    criteria: Mapping[str, bool] = field(default_factory=dict)


def _mean(scores: Sequence[float]) -> float | None:
    return sum(scores) / len(scores) if scores else None


def _panel_flags(runs: CaseRuns, rubric: Rubric, config: EvalConfig) -> set[str]:
    """The dimensions on which the panel ``runs`` disagrees, by the consensus' flag rule
    (:func:`~consensus_eval.domain.flags.disagreement`): all of them when the totals are too far apart, else
    those whose stars are, or whose kind's own flags the judges' mean scores raise (likert ratings levels apart).
    A criteria dimension's split verdicts are not seen here (the runs carry scores only): the consensus flags
    them."""
    dims = [d.id for d in rubric.dimensions]
    means = {j: {d: _mean(by_dim[d].scores) if d in by_dim else None for d in dims} for j, by_dim in runs.items()}
    totals = [rubric.total({d: v for d, v in m.items() if v is not None}) for m in means.values()
              if all(v is not None for v in m.values())]
    stars = {d: [st for m in means.values() if (v := m[d]) is not None
                 and (st := rubric.dimension(d).stars_for(v)) is not None] for d in dims}
    views = {d: [_Means(v) for m in means.values() if (v := m[d]) is not None] for d in dims}
    flags = disagreement(rubric, totals, stars, config.consensus, judges=views)
    if any(f.code == "spread" for f in flags):
        return set(dims)
    return {f.dimension for f in flags if f.dimension is not None}


def grow(planned: Sequence[Call], records: Sequence[StoredCall], rubric: Rubric, config: EvalConfig,
         judges: Sequence[Judge]) -> list[Call]:
    """The calls to add to ``planned`` given the stored ``records``: :func:`decide` on every case all of
    whose planned calls are stored (a case with a call not stored yet waits), in plan order."""
    stored = {r.request_hash for r in records}
    derive = Deriver(rubric, {c.case.id: c.case for c in planned}.values())
    scores = {r.request_hash: derive(r.dimension, r.judgment, r.case_id)
              for r in records if r.status == "ok" and r.judgment is not None}
    by_name = {j.config.name: j for j in judges}
    stage = {j.config.name: j.config.stage for j in judges}
    deterministic = frozenset(j.config.name for j in judges if j.deterministic)
    by_case: dict[str, list[Call]] = {}
    cases: dict[str, Case] = {}
    for c in planned:
        by_case.setdefault(c.planned.case_id, []).append(c)
        cases.setdefault(c.planned.case_id, c.case)
    out: list[Call] = []
    for cid, calls in by_case.items():
        if any(c.planned.request_hash not in stored for c in calls):
            continue
        case = cases[cid]
        planned_runs: dict[str, dict[str, list[tuple[int, float | None]]]] = {}
        for c in calls:
            p = c.planned
            s = scores.get(p.request_hash)
            planned_runs.setdefault(p.judge, {}).setdefault(p.dimension, []).append(
                (p.run, s.score if s is not None else None))
        state = {j: {d: JudgeRuns(len(rs), tuple(s for _, s in sorted(rs, key=lambda x: x[0]) if s is not None))
                     for d, rs in by_dim.items()}
                 for j, by_dim in planned_runs.items()}
        first = {j.config.name: first_runs(config, case, j) for j in judges if j.config.stage == 2}
        for add in decide(state, rubric, config, adaptive=config.runs_for(case.important) == "adaptive",
                          stage=stage, deterministic=deterministic, first=first):
            out.append(call_for(case, add.dimension, by_name[add.judge], add.run, rubric, config))
    return out


Grow = Callable[[list[Call], list[StoredCall]], list[Call]]


async def execute_rounds(calls: Sequence[Call], judges: Sequence[Judge], rubric: Rubric, store: Store,
                         grow_plan: Grow, on_progress: ProgressHook | None = None,
                         stop: asyncio.Event | None = None) -> Progress:
    """Run a plan that grows: make ``calls`` (round 1), then the calls ``grow_plan(planned, stored)`` adds,
    round after round, until a round adds nothing. The store's plan is the plan so far before each round
    (so an interrupted run's outputs show its cases ``incomplete``); each round is made by
    :func:`~consensus_eval.execution.execute.execute` (the judges' pools and pacing as in a fixed run).

    Setting ``stop`` ends the run like :func:`execute`; the calls already decided for the cases whose
    round was complete are added to the stored plan, so those cases read ``incomplete`` too."""
    planned = list(calls)
    batch = list(calls)
    progress: Progress | None = None
    while True:
        store.set_plan(c.planned for c in planned)
        progress = await execute(batch, judges, rubric, store, on_progress, stop, progress=progress)
        stopped = progress.interrupted or (stop is not None and stop.is_set())
        new = grow_plan(planned, store.calls())
        if stopped:
            progress.interrupted = True
            if new:
                progress.round_starts.append(len(planned))
                store.set_plan(c.planned for c in [*planned, *new])
            return progress
        if not new:
            return progress
        progress.round_starts.append(len(planned))
        planned += new
        batch = new
        progress.rounds += 1
