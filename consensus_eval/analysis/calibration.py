"""How well each judge, and the panel, finds errors planted in a calibration suite (issue 15).

A planted error (:class:`~consensus_eval.domain.calibration.suite.PlantedError`) counts as **found** by
a judge's run when one of its deductions (a fixed penalty, for a planted penalty) is in the planted
error's category and its evidence, located in the case by grounding, overlaps one of the planted
spans; **type match** also asks for the planted type (the stricter figure). Evidence that cannot be
located in the case (a quote absent from it, or no quote) never earns credit.

Figures (every share a :class:`~consensus_eval.analysis.intervals.Proportion` with its Wilson 95%
interval; all from each judge's first run, run 0, unless said otherwise):

- recall per type, per category and overall: planted errors found / planted errors the judge judged
  (errors in a dimension whose call failed are left out and counted as ``unjudged``);
- false alarms: on clean controls, deductions per case and the share of controls with any deduction;
  on planted cases, precision = deductions that touch a planted error (evidence overlapping any planted
  span, or a fixed penalty that was planted) / all deductions;
- score error per dimension: the judge's re-derived score minus the expected score (the clean base
  scores full marks; the expected score is re-derived from the planted deductions with
  :func:`~consensus_eval.domain.scoring.derive`, so category caps apply): MAE and bias (mean signed);
- stability (runs > 1): recall of each run, and the share of planted errors found in every run or in none;
- one call per case against one call per dimension (:class:`ModeComparison`): for a judge in the config
  twice, the same ``model`` with ``call: per_case`` and ``call: per_dimension``, the two runs 0 compared
  on the same planted errors (those both judged): found by both, by one only, and the recall difference
  (per case minus per dimension) with Newcombe's paired 95% interval
  (:func:`~consensus_eval.analysis.intervals.paired_difference`);
- the panel: an error is found by the panel when at least ``consensus.min_judges`` judges find it (with
  fewer judges answering, the panel has no verdict on it: unjudged, as an inconclusive case); its score
  error uses the consensus scores. ``panel_gain`` = panel recall minus the best single judge's.

Evidence must quote where the error is: the record's wrong text for a substitution (a judge quoting only
the conversation's correct value gets no credit), the conversation's statement of a dropped fact for an
omission.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from pydantic import BaseModel

from consensus_eval.analysis.intervals import Proportion, paired_difference, proportion
from consensus_eval.analysis.results import Results
from consensus_eval.domain.calibration.suite import PlantedError, SuiteCase
from consensus_eval.domain.grounding import Grounding
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.scoring import derive

#: ``ground(evidence, record, conversation) -> Grounding``: where a quote is in the case
Grounder = Callable[[str, str, str], Grounding]
PANEL = "panel"


class Recall(BaseModel):
    """Planted errors found (category and overlapping evidence) and, stricter, found with the planted type."""

    found: Proportion
    type_match: Proportion


class ScoreError(BaseModel):
    """A dimension's score error over ``n`` cases: ``mae`` = mean |judge - expected|, ``bias`` = mean
    (judge - expected), in points (negative: the judge takes off more than planted)."""

    n: int
    mae: float | None
    bias: float | None


class JudgeCalibration(BaseModel):
    """One judge's (or the panel's) calibration figures (module docstring)."""

    name: str
    overall: Recall
    by_type: dict[str, Recall]
    by_category: dict[str, Recall]
    unjudged: int
    clean_cases: int
    false_alarms_per_case: float | None
    clean_flagged: Proportion
    precision: Proportion
    score_error: dict[str, ScoreError]
    runs_recall: list[float | None] = []
    consistent: Proportion | None = None


class ModeComparison(BaseModel):
    """The same model asked one call per case (``per_case``, a judge name) and one call per dimension
    (``per_dimension``), on the ``n`` planted errors both judged (run 0): ``both`` found by the two,
    ``only_per_case`` / ``only_per_dimension`` by one alone. ``difference`` = per-case recall minus
    per-dimension recall on those errors (negative: per case finds less), ``[low, high]`` its 95%
    interval for paired data (None when n = 0). An interval that reaches below 0 means the suite cannot
    rule out that per case finds less."""

    per_case: str
    per_dimension: str
    n: int
    both: int
    only_per_case: int
    only_per_dimension: int
    difference: float | None
    low: float | None
    high: float | None


class CalibrationReport(BaseModel):
    """The calibration of a panel on a suite: per judge and for the panel (``judges[PANEL]``), what
    ``panel_gain`` the consensus adds over the best single judge (recall, category level), and a plain
    ``recommendation``. ``planted`` / ``clean``: cases in the suite; ``errors``: planted errors."""

    suite_cases: int
    planted: int
    clean: int
    errors: int
    quorum: int
    judges: dict[str, JudgeCalibration]
    best_judge: str | None
    panel_gain: float | None
    unplantable: dict[str, str] = {}
    recommendation: list[str] = []
    #: per-case against per-dimension judges of the same model (empty when the config has no such pair)
    comparisons: list[ModeComparison] = []
    #: judges that could not be named best, and why (too many unjudged errors, false alarms, low precision)
    not_best: dict[str, str] = {}


def _overlaps(g: Grounding, e: PlantedError) -> bool:
    return g.grounded and any(s.source == p.source and s.start < p.end and p.start < s.end
                              for s in g.spans for p in e.spans)


class _Case:
    """A suite case with the judges' items located once (grounding is the costly part)."""

    def __init__(self, sc: SuiteCase, rubric: Rubric, ground: Grounder) -> None:
        self.sc = sc
        self.record = sc.case.record
        self.conversation = sc.case.conversation_as_text(rubric.roles)
        self._ground = ground
        self._cache: dict[str, Grounding] = {}

    def where(self, evidence: str) -> Grounding:
        if evidence not in self._cache:
            self._cache[evidence] = (self._ground(evidence, self.record, self.conversation) if evidence.strip()
                                     else Grounding(kind="empty"))
        return self._cache[evidence]

    def hit(self, item: Deduction | PenaltyHit, e: PlantedError) -> tuple[bool, bool]:
        """(found, type matched) of one deduction or penalty for one planted error."""
        if isinstance(item, PenaltyHit):
            ok = e.penalty and item.id == e.type and _overlaps(self.where(item.evidence), e)
            return ok, ok
        if e.penalty or item.category != e.category or not _overlaps(self.where(item.evidence), e):
            return False, False
        return True, item.type == e.type

    def touches(self, item: Deduction | PenaltyHit) -> bool:
        """True when the item is about some planted error (its evidence overlaps a planted span)."""
        return any(_overlaps(self.where(item.evidence), e) for e in self.sc.expected)


def _items(judgments: Iterable[Judgment]) -> list[Deduction | PenaltyHit]:
    out: list[Deduction | PenaltyHit] = []
    for j in judgments:
        out.extend(j.deductions)
        out.extend(j.fixed_penalties)
    return out


def expected_scores(sc: SuiteCase, rubric: Rubric) -> dict[str, float]:
    """The score each dimension should get: full marks minus the planted deductions, re-derived (caps apply)."""
    out = {}
    for dim in rubric.dimensions:
        mine = [e for e in sc.expected if e.dimension == dim.id]
        j = Judgment(dimension=dim.id,
                     deductions=[Deduction(category=e.category, type=e.type, points=e.points)
                                 for e in mine if not e.penalty],
                     fixed_penalties=[PenaltyHit(id=e.type) for e in mine if e.penalty])
        out[dim.id] = derive(dim, j).score
    return out


def _recall(rows: Sequence[tuple[str, str, bool, bool]]) -> tuple[Recall, dict[str, Recall], dict[str, Recall]]:
    """rows: (type, category, found, type matched)."""
    def rec(sel: Sequence[tuple[str, str, bool, bool]]) -> Recall:
        return Recall(found=proportion(sum(r[2] for r in sel), len(sel)),
                      type_match=proportion(sum(r[3] for r in sel), len(sel)))
    by_t: dict[str, list[tuple[str, str, bool, bool]]] = defaultdict(list)
    by_c: dict[str, list[tuple[str, str, bool, bool]]] = defaultdict(list)
    for r in rows:
        by_t[r[0]].append(r)
        by_c[r[1]].append(r)
    return rec(rows), {k: rec(v) for k, v in sorted(by_t.items())}, {k: rec(v) for k, v in sorted(by_c.items())}


def _score_error(pairs: dict[str, list[tuple[float, float]]]) -> dict[str, ScoreError]:
    out = {}
    for dim, ps in pairs.items():
        diffs = [got - want for got, want in ps]
        out[dim] = ScoreError(n=len(diffs), mae=statistics.fmean(abs(d) for d in diffs) if diffs else None,
                              bias=statistics.fmean(diffs) if diffs else None)
    return out


def calibrate(suite: Sequence[SuiteCase], results: Results, ground: Grounder,
              unplantable: dict[str, str] | None = None) -> CalibrationReport:
    """The calibration figures (module docstring) of the judges of ``results`` on ``suite``.

    ``results`` is the run of the suite's cases (same ids); ``ground`` locates a quote in a case
    (:func:`consensus_eval.domain.grounding.ground`).
    """
    rubric = results.rubric
    by_id = {sc.case.id: _Case(sc, rubric, ground) for sc in suite}
    # (case, judge, run) -> dimension -> judgment; (case, judge, run, dim) -> re-derived score
    got: dict[tuple[str, str, int], dict[str, Judgment]] = defaultdict(dict)
    scores: dict[tuple[str, str, int, str], float] = {}
    runs_of: dict[str, set[int]] = defaultdict(set)
    for r in results.records:
        if r.case_id not in by_id:
            continue
        runs_of[r.judge].add(r.run)
        if r.status == "ok" and r.judgment is not None:
            got[(r.case_id, r.judge, r.run)][r.dimension] = r.judgment
            scores[(r.case_id, r.judge, r.run, r.dimension)] = results.scores[r.request_hash].score
    quorum = results.config.consensus.min_judges
    judges = list(results.judges)
    # found[(judge, run)][(case, i)] = (found, type matched); None when the dimension was not judged
    found: dict[tuple[str, int], dict[tuple[str, int], tuple[bool, bool] | None]] = {}
    report_judges: dict[str, JudgeCalibration] = {}
    for judge in judges:
        for run in sorted(runs_of[judge]) or [0]:
            f: dict[tuple[str, int], tuple[bool, bool] | None] = {}
            for cid, c in by_id.items():
                js = got.get((cid, judge, run), {})
                for i, e in enumerate(c.sc.expected):
                    j = js.get(e.dimension)
                    if j is None:
                        f[(cid, i)] = None
                        continue
                    hits = [c.hit(item, e) for item in _items([j])]
                    f[(cid, i)] = (any(h[0] for h in hits), any(h[1] for h in hits))
            found[(judge, run)] = f
        report_judges[judge] = _judge_figures(judge, by_id, got, scores, found, sorted(runs_of[judge]) or [0], rubric)
    # the panel: found when at least `quorum` judges (first run) find it
    panel_found: dict[tuple[str, int], tuple[bool, bool] | None] = {}
    for cid, c in by_id.items():
        for i in range(len(c.sc.expected)):
            votes = [found[(j, 0)].get((cid, i)) for j in judges if (j, 0) in found]
            judged = [v for v in votes if v is not None]
            if len(judged) < quorum:
                panel_found[(cid, i)] = None  # too few judges answered: the panel has no verdict (inconclusive)
                continue
            panel_found[(cid, i)] = (sum(v[0] for v in judged) >= quorum, sum(v[1] for v in judged) >= quorum)
    report_judges[PANEL] = _panel_figures(by_id, results, panel_found, rubric)
    best, excluded = choose_best({j: report_judges[j] for j in judges})
    pv = report_judges[PANEL].overall.found.value
    bv = report_judges[best].overall.found.value if best is not None else None
    gain = pv - (bv or 0.0) if best is not None and pv is not None else None
    rep = CalibrationReport(
        suite_cases=len(suite), planted=sum(not sc.clean for sc in suite), clean=sum(sc.clean for sc in suite),
        errors=sum(len(sc.expected) for sc in suite), quorum=quorum, judges=report_judges, best_judge=best,
        panel_gain=gain, unplantable=dict(unplantable or {}), not_best=excluded,
        comparisons=_mode_comparisons(results, found))
    rep.recommendation = recommend(rep)
    return rep


def _mode_comparisons(results: Results, found: dict[tuple[str, int], dict[tuple[str, int], tuple[bool, bool] | None]]
                      ) -> list[ModeComparison]:
    """Each ``call: per_case`` judge against the first ``call: per_dimension`` judge of the same model."""
    configs = [j for j in results.config.judges if j.name in results.judges]
    out = []
    for whole in configs:
        if getattr(whole, "call", None) != "per_case":
            continue
        twin = next((j for j in configs if getattr(j, "call", None) == "per_dimension"
                     and getattr(j, "model", None) == getattr(whole, "model", None)), None)
        if twin is None or (whole.name, 0) not in found or (twin.name, 0) not in found:
            continue
        a, b = found[(whole.name, 0)], found[(twin.name, 0)]
        pairs = [(va[0], vb[0]) for key, va in a.items() if va is not None and (vb := b.get(key)) is not None]
        both = sum(x and y for x, y in pairs)
        only_a = sum(x and not y for x, y in pairs)
        only_b = sum(y and not x for x, y in pairs)
        d = low = high = None
        if pairs:
            d, low, high = paired_difference(both, only_a, only_b, len(pairs) - both - only_a - only_b)
        out.append(ModeComparison(per_case=whole.name, per_dimension=twin.name, n=len(pairs), both=both,
                                  only_per_case=only_a, only_per_dimension=only_b, difference=d, low=low, high=high))
    return out


def _rows(by_id: dict[str, _Case], f: dict[tuple[str, int], tuple[bool, bool] | None]
          ) -> tuple[list[tuple[str, str, bool, bool]], int]:
    rows, unjudged = [], 0
    for cid, c in by_id.items():
        for i, e in enumerate(c.sc.expected):
            v = f.get((cid, i))
            if v is None:
                unjudged += 1
            else:
                rows.append((e.type, e.category, v[0], v[1]))
    return rows, unjudged


def _judge_figures(judge: str, by_id: dict[str, _Case], got: dict[tuple[str, str, int], dict[str, Judgment]],
                   scores: dict[tuple[str, str, int, str], float],
                   found: dict[tuple[str, int], dict[tuple[str, int], tuple[bool, bool] | None]],
                   runs: list[int], rubric: Rubric) -> JudgeCalibration:
    run0 = runs[0]
    rows, unjudged = _rows(by_id, found[(judge, run0)])
    overall, by_type, by_cat = _recall(rows)
    clean_counts: list[int] = []
    touched = total = 0
    pairs: dict[str, list[tuple[float, float]]] = {d.id: [] for d in rubric.dimensions}
    for cid, c in by_id.items():
        js = got.get((cid, judge, run0))
        if not js:
            continue
        items = _items(js.values())
        if c.sc.clean:
            if len(js) == len(rubric.dimensions):
                clean_counts.append(len(items))
        else:
            total += len(items)
            touched += sum(c.touches(it) for it in items)
        want = expected_scores(c.sc, rubric)
        for dim in js:
            pairs[dim].append((scores[(cid, judge, run0, dim)], want[dim]))
    runs_recall: list[float | None] = []
    consistent = None
    if len(runs) > 1:
        for run in runs:
            r, _ = _rows(by_id, found[(judge, run)])
            runs_recall.append(sum(x[2] for x in r) / len(r) if r else None)
        same = 0
        n = 0
        for key, v0 in found[(judge, run0)].items():
            vs = [found[(judge, run)].get(key) for run in runs]
            if v0 is None or any(v is None for v in vs):
                continue
            n += 1
            same += len({v[0] for v in vs if v is not None}) == 1
        consistent = proportion(same, n)
    return JudgeCalibration(
        name=judge, overall=overall, by_type=by_type, by_category=by_cat, unjudged=unjudged,
        clean_cases=len(clean_counts),
        false_alarms_per_case=statistics.fmean(clean_counts) if clean_counts else None,
        clean_flagged=proportion(sum(n > 0 for n in clean_counts), len(clean_counts)),
        precision=proportion(touched, total), score_error=_score_error(pairs),
        runs_recall=runs_recall, consistent=consistent)


def _panel_figures(by_id: dict[str, _Case], results: Results,
                   panel_found: dict[tuple[str, int], tuple[bool, bool] | None], rubric: Rubric) -> JudgeCalibration:
    rows, unjudged = _rows(by_id, panel_found)
    overall, by_type, by_cat = _recall(rows)
    pairs: dict[str, list[tuple[float, float]]] = {d.id: [] for d in rubric.dimensions}
    for cc in results.consensus:
        c = by_id.get(cc.case_id)
        if c is None:
            continue
        want = expected_scores(c.sc, rubric)
        for dim, s in cc.scores.items():
            if s is not None:
                pairs[dim].append((s, want[dim]))
    return JudgeCalibration(
        name=PANEL, overall=overall, by_type=by_type, by_category=by_cat, unjudged=unjudged, clean_cases=0,
        false_alarms_per_case=None, clean_flagged=proportion(0, 0), precision=proportion(0, 0),
        score_error=_score_error(pairs))


#: a judge whose calls failed on more than this share of the planted errors is never named the best
MAX_UNJUDGED = 0.05
#: ... nor one raising this many deductions per clean record, or with a precision below this
MAX_FALSE_ALARMS, MIN_PRECISION = 1.0, 0.5


def choose_best(judges: dict[str, JudgeCalibration]) -> tuple[str | None, dict[str, str]]:
    """The best single judge: the highest recall (on synthetic planted errors) among the judges that pass
    three constraints, and why each other judge was left out. Recall alone would reward a judge that fails
    where it would miss (its unjudged errors do not count against it) and one that deducts everywhere."""
    excluded: dict[str, str] = {}
    eligible = []
    for name, jc in judges.items():
        judged = jc.overall.found.n
        share = jc.unjudged / (judged + jc.unjudged) if judged + jc.unjudged else 0.0
        if jc.overall.found.value is None:
            excluded[name] = "judged no planted error"
        elif share > MAX_UNJUDGED:
            excluded[name] = (f"its calls failed on {jc.unjudged} of {judged + jc.unjudged} planted errors "
                              f"({share:.0%} > {MAX_UNJUDGED:.0%}): its recall counts only what it judged")
        elif jc.false_alarms_per_case is not None and jc.false_alarms_per_case >= MAX_FALSE_ALARMS:
            excluded[name] = f"{jc.false_alarms_per_case:.1f} false alarms per clean record (>= {MAX_FALSE_ALARMS:g})"
        elif jc.precision.value is not None and jc.precision.value < MIN_PRECISION:
            excluded[name] = f"precision {jc.precision.value:.0%} (< {MIN_PRECISION:.0%})"
        else:
            eligible.append(name)
    best = max(eligible, key=lambda j: judges[j].overall.found.value or 0.0) if eligible else None
    return best, excluded


def recommend(rep: CalibrationReport, *, weak: float = 0.5, min_n: int = 5, margin: float = 0.05) -> list[str]:
    """Plain sentences: which judge misses what (types with recall below ``weak`` on at least
    ``min_n`` errors), which judge finds most, whether the panel beats it, who raises false alarms, and
    whether one call per case finds as much as one per dimension (its recall difference's interval
    entirely above ``-margin``: 5 points by default)."""
    out = []
    for name, jc in rep.judges.items():
        misses = [t for t, r in jc.by_type.items()
                  if r.found.n >= min_n and r.found.value is not None and r.found.value < weak]
        if misses:
            out.append(f"{name} misses {', '.join(misses)} (found in fewer than {weak:.0%} of the planted cases)")
        if jc.false_alarms_per_case is not None and jc.false_alarms_per_case >= 1:
            out.append(f"{name} raises {jc.false_alarms_per_case:.1f} deductions per clean record on average: "
                       "read its deductions before trusting its scores")
    for name, jc in rep.judges.items():
        if jc.unjudged and name != PANEL:
            out.append(f"{name}: {jc.unjudged} planted error(s) unjudged (its calls failed there); its recall counts "
                       "only the errors it judged")
    if rep.best_judge is not None:
        best = rep.judges[rep.best_judge].overall.found
        out.append(f"best single judge: {rep.best_judge} (recall on synthetic planted errors {best.value:.0%}"
                   + (f", 95% CI {best.low:.0%}-{best.high:.0%})" if best.low is not None else ")")
                   + "; an upper bound: errors written freely, not by the suite's operators, are harder to find")
    for name, why in rep.not_best.items():
        out.append(f"{name} is not named best: {why}")
    for m in rep.comparisons:
        if m.difference is None or m.low is None or m.high is None:
            continue
        verdict = (f"it finds less: keep {m.per_dimension}" if m.high < 0 else
                   f"it finds as much within {margin:.0%} (the interval's low end is above -{margin:.0%})"
                   if m.low >= -margin else
                   f"the suite cannot rule out that it finds more than {margin:.0%} less: keep {m.per_dimension}")
        out.append(f"{m.per_case} (one call per case) against {m.per_dimension} (one call per dimension): recall "
                   f"{m.difference:+.1%} (95% CI {m.low:+.1%} to {m.high:+.1%}) on {m.n} planted errors both judged "
                   f"(found by both {m.both}, only per case {m.only_per_case}, only per dimension "
                   f"{m.only_per_dimension}): {verdict}")
    if rep.panel_gain is not None and len(rep.judges) > 2:
        if rep.panel_gain > 0:
            out.append(f"the panel (quorum {rep.quorum}) finds {rep.panel_gain:.0%} more planted errors than "
                       f"{rep.best_judge} alone")
        else:
            out.append(f"the panel (quorum {rep.quorum}) finds no more than {rep.best_judge} alone "
                       f"({rep.panel_gain:+.0%}): consider a lower quorum or better judges")
    return out
