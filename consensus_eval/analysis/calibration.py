"""How well each judge, and the panel, finds errors planted in a calibration suite (docs/calibration.md).

**Found.** A planted error (:class:`~consensus_eval.domain.calibration.suite.PlantedError`) is found by a
judge's run when one of its deductions (a fixed penalty, for a planted penalty) is in the planted error's
category and its evidence, located in the case by grounding, overlaps a span of the error and is not much
longer than it. Evidence may be either side of the error: the record's wrong text, the conversation's
statement of the fact (``also``: its correct value), or, for an omission, the conversation's statement of
the dropped fact or the record section that lacks it. *Bounded*: a located quote longer than three times
the span plus the sentence around it, or than its line plus a few characters (:func:`credit_limit`), earns
nothing, so quoting a whole record or section for a changed number does not find it. Evidence that
cannot be located (a quote absent from the case, or no quote) never earns credit. **Type match** also
asks for the planted type (the stricter figure); **points-weighted** recall weighs each error by its
rubric points (a missed 10-point penalty counts five 2-point slips).

**Units.** The same edit is planted more than once (alone and beside another error, in several heading
styles), and the suite's records are variations of a few base records. Counts (``k`` / ``n``) are plants;
every interval counts **distinct edits** and **base records** as its units: a Wilson interval on the
effective sample size (:func:`~consensus_eval.analysis.intervals.effective_n`: the plants divided by the
design effect of clustering in base records, from the cluster-robust variance, and never more than the
distinct edits). :class:`Share` says how many edits and base records stand behind a figure. Clean
controls (each base record in several heading styles) count as their distinct records.

Figures (all from each judge's first run, run 0, unless said otherwise):

- recall per type, per category and overall: found / planted errors the judge judged (errors in a
  dimension whose call failed are left out and counted as ``unjudged``, in total and per type);
- false alarms: on clean controls, deductions per case and the share of clean records with any deduction;
  on planted cases, precision = deductions that find some planted error (its category, bounded evidence
  on it) / all deductions;
- score error per dimension: the judge's re-derived score minus the expected score (the clean base
  scores full marks; the expected score is re-derived from the planted deductions with
  :func:`~consensus_eval.domain.scoring.derive`, so category caps apply): MAE and bias (mean signed);
- cost: the USD of the judge's run-0 calls on the suite and per planted error found (None when the
  provider reported no cost);
- stability (runs > 1): recall of each run, and the share of planted errors found in every run or in none;
- one call per case against one call per dimension (:class:`ModeComparison`): for a judge in the config
  twice, the same ``model`` with ``call: per_case`` and ``call: per_dimension``, the two runs 0 compared
  on the same planted errors (those both judged): found by both, by one only, and the recall difference
  (per case minus per dimension) with Newcombe's paired 95% interval
  (:func:`~consensus_eval.analysis.intervals.paired_difference`);
- the panel: an error is found by the panel when at least ``consensus.min_judges`` judges find it (with
  fewer judges answering, the panel has no verdict on it: unjudged, as an inconclusive case); its score
  error uses the consensus scores. Its deductions are the judges' deductions grouped across judges (same
  category, overlapping located evidence, at most one per judge) and raised by at least the quorum: its
  false alarms and precision count those. ``panel_gain`` = panel recall minus the best single judge's.
- ``needed_per_type``: distinct edits a type needs before 70% recall can be told from 90%
  (:func:`~consensus_eval.analysis.intervals.needed_to_separate`); ``small_types`` lists the types below it.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from consensus_eval.analysis.intervals import (
    Proportion,
    Share,
    needed_to_separate,
    paired_difference,
    proportion,
    share,
    wilson_p,
)
from consensus_eval.analysis.invariance import InvarianceReport
from consensus_eval.analysis.results import Results
from consensus_eval.domain.calibration.suite import PlantedError, PlantedSpan, SuiteCase
from consensus_eval.domain.config import LLMJudgeConfig
from consensus_eval.domain.grounding import Grounding
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.scoring import AnyJudgment, derive
from consensus_eval.domain.stored import StoredDeduction, StoredPenalty

#: what a calibration's errors are (:attr:`CalibrationReport.source`)
CalibrationSource = Literal["builtin", "builtin-heldout", "bases", "handwritten", "file"]
#: ``ground(evidence, record, conversation) -> Grounding``: where a quote is in the case
Grounder = Callable[[str, str, str], Grounding]
#: a deduction or fixed penalty, as a judge gives it or as the store hands it back
_Item = Deduction | PenaltyHit | StoredDeduction | StoredPenalty
PANEL = "panel"
#: a quote may be this many times the planted span's length, plus the sentence around it
SPAN_FACTOR = 3
#: ... and no longer than the line(s) the span is on plus this many characters
LINE_SLACK = 20


class Weighted(BaseModel):
    """Points-weighted recall: the rubric points of the planted errors found / of those judged, with the
    95% interval of the found share's effective size (approximate: points differ between errors)."""

    found_points: float
    points: float
    value: float | None
    low: float | None
    high: float | None


class Recall(BaseModel):
    """Planted errors found (category and bounded evidence on the error), found with the planted type too,
    and found weighted by points."""

    found: Share
    type_match: Share
    weighted: Weighted | None = None


class ScoreError(BaseModel):
    """A dimension's score error over ``n`` cases: ``mae`` = mean |judge - expected|, ``bias`` = mean
    (judge - expected), in points (negative: the judge takes off more than planted)."""

    n: int
    mae: float | None
    bias: float | None


class JudgeCalibration(BaseModel):
    """One judge's (or the panel's) calibration figures (module docstring). ``clean_flagged`` counts clean
    controls, its interval distinct clean records; ``cost`` / ``cost_per_found``: USD of run 0 on the suite
    and per planted error found."""

    name: str
    overall: Recall
    by_type: dict[str, Recall]
    by_category: dict[str, Recall]
    unjudged: int
    unjudged_by_type: dict[str, int] = {}
    clean_cases: int
    false_alarms_per_case: float | None
    clean_flagged: Share
    precision: Share
    score_error: dict[str, ScoreError]
    cost: float | None = None
    cost_per_found: float | None = None
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
    ``recommendation``. ``planted`` / ``clean``: cases in the suite; ``errors``: planted errors, ``edits``
    the distinct ones among them, ``bases`` the base records they were planted in, ``clean_records`` the
    distinct records of the clean controls."""

    suite_cases: int
    planted: int
    clean: int
    errors: int
    edits: int | None = None
    bases: int | None = None
    clean_records: int | None = None
    quorum: int
    judges: dict[str, JudgeCalibration]
    best_judge: str | None
    panel_gain: float | None
    unplantable: dict[str, str] = {}
    recommendation: list[str] = []
    #: per-case against per-dimension judges of the same model (empty when the config has no such pair)
    comparisons: list[ModeComparison] = []
    #: judges that could not be named best, and why (too many unjudged errors, false alarms, low precision):
    #: in plain English, and as fields (``not_best_why``) the reports render in their language
    not_best: dict[str, str] = {}
    not_best_why: dict[str, NotBest] = {}
    #: distinct edits a type needs before 70% recall can be told from 90%, and the types with fewer (type -> edits)
    needed_per_type: int | None = None
    small_types: dict[str, int] = {}
    #: what the errors are: ``builtin`` (the built-in suite: operators' errors), ``builtin-heldout`` (the
    #: built-in suite's held-out operator family: other wording and places), ``bases`` (the operators'
    #: errors planted into the user's own records: ``calibrate --bases``), ``handwritten`` (the held-out
    #: set written by hand), ``file`` (a suite file); for ``bases``, per record the types planted
    #: (type -> places) and why nothing could be planted into the others
    source: CalibrationSource = "builtin"
    planted_into: dict[str, dict[str, int]] = {}
    not_planted: dict[str, str] = {}
    #: ``--suite invariance``: how each judge's score moves on meaning-preserving edits of clean records (left out
    #: of calibration.json when there is none)
    invariance: Annotated[InvarianceReport | None, Field(exclude_if=lambda v: v is None)] = None


_SENTENCE_END = re.compile(r"[。！？；;!?\n]")
#: heading decorations dropped when telling edits apart (the same edit in another heading style is one edit)
_DECOR = re.compile(r"[【】*：:\s]|^\d+\.", re.M)


def _sentence(text: str, start: int, end: int) -> int:
    """The length of the sentence(s) of ``text`` around ``[start, end)`` (delimiters ``。！？；\\n``)."""
    a = max((m.end() for m in _SENTENCE_END.finditer(text, 0, start)), default=0)
    m = _SENTENCE_END.search(text, end)
    return (m.end() if m else len(text)) - a


def credit_limit(text: str, span: PlantedSpan) -> int:
    """The longest located quote that earns credit for ``span`` of ``text``: :data:`SPAN_FACTOR` times
    the span plus the sentence around it, and never more than the line(s) the span is on (a record
    section, a conversation turn) plus :data:`LINE_SLACK` characters (a heading, a quotation mark), so
    that a span which is itself a whole section (the section an omission left a fact out of) is not found
    by quoting the whole record."""
    a = text.rfind("\n", 0, span.start) + 1
    z = text.find("\n", span.end)
    lines = (len(text) if z < 0 else z) - a
    return min(SPAN_FACTOR * (span.end - span.start) + _sentence(text, span.start, span.end), lines + LINE_SLACK)


@dataclass(frozen=True)
class _Row:
    """A planted error a judge judged: its base record (cluster), distinct edit, type, category, points,
    and whether it was found and found with its type."""

    cluster: str
    edit: tuple[object, ...]
    type: str
    category: str
    points: float
    found: bool
    type_match: bool


class _Case:
    """A suite case with the judges' items located once (grounding is the costly part)."""

    def __init__(self, sc: SuiteCase, rubric: Rubric, ground: Grounder) -> None:
        self.sc = sc
        self.record = sc.case.record
        self.conversation = rubric.conversation_text(sc.case)
        self.cluster = sc.base or sc.case.id
        self._ground = ground
        self._cache: dict[str, Grounding] = {}
        self.targets = [[(p, credit_limit(self.text(p.source), p)) for p in (*e.spans, *e.also)]
                        for e in sc.expected]
        self.edits = [self._edit(e) for e in sc.expected]

    def text(self, source: str) -> str:
        return self.record if source == "record" else self.conversation

    def _edit(self, e: PlantedError) -> tuple[object, ...]:
        """What makes a planted error one distinct edit: its base, type and where it is (its span texts,
        heading decorations dropped, with which occurrence of that text it is)."""
        places = sorted((s.source, _DECOR.sub("", s.text), self.text(s.source).count(s.text, 0, s.start))
                        for s in e.spans)
        return (self.cluster, e.type, *places)

    def where(self, evidence: str) -> Grounding:
        if evidence not in self._cache:
            self._cache[evidence] = (self._ground(evidence, self.record, self.conversation) if evidence.strip()
                                     else Grounding(kind="empty"))
        return self._cache[evidence]

    def on(self, g: Grounding, i: int) -> bool:
        """True when located evidence ``g`` is on planted error ``i``: a located span overlaps one of its
        spans (either side) and is at most that span's credit limit long."""
        return g.grounded and any(s.source == p.source and s.start < p.end and p.start < s.end
                                  and s.end - s.start <= limit for s in g.spans for p, limit in self.targets[i])

    def hit(self, item: _Item, i: int) -> tuple[bool, bool]:
        """(found, type matched) of one deduction or penalty for planted error ``i``."""
        e = self.sc.expected[i]
        if isinstance(item, (PenaltyHit, StoredPenalty)):
            ok = e.penalty and item.id == e.type and self.on(self.where(item.evidence), i)
            return ok, ok
        if e.penalty or item.category != e.category or not self.on(self.where(item.evidence), i):
            return False, False
        return True, item.type == e.type

    def finds_some(self, item: _Item) -> bool:
        """True when the item finds some planted error of the case (precision counts these)."""
        return any(self.hit(item, i)[0] for i in range(len(self.sc.expected)))


def _items(judgments: Iterable[AnyJudgment]) -> list[_Item]:
    out: list[_Item] = []
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


def _recall_of(rows: Sequence[_Row]) -> Recall:
    edits = len({r.edit for r in rows})
    found = share([(r.cluster, float(r.found)) for r in rows], edits)
    tm = share([(r.cluster, float(r.type_match)) for r in rows], edits)
    total = sum(r.points for r in rows)
    got = sum(r.points for r in rows if r.found)
    w = None
    if rows:
        v = got / total if total > 0 else None
        low, high = (wilson_p(v, found.effective_n) if v is not None and found.effective_n else (None, None))
        w = Weighted(found_points=got, points=total, value=v, low=low, high=high)
    return Recall(found=found, type_match=tm, weighted=w)


def _recall(rows: Sequence[_Row]) -> tuple[Recall, dict[str, Recall], dict[str, Recall]]:
    by_t: dict[str, list[_Row]] = defaultdict(list)
    by_c: dict[str, list[_Row]] = defaultdict(list)
    for r in rows:
        by_t[r.type].append(r)
        by_c[r.category].append(r)
    return (_recall_of(rows), {k: _recall_of(v) for k, v in sorted(by_t.items())},
            {k: _recall_of(v) for k, v in sorted(by_c.items())})


def _score_error(pairs: dict[str, list[tuple[float, float]]]) -> dict[str, ScoreError]:
    out = {}
    for dim, ps in pairs.items():
        diffs = [got - want for got, want in ps]
        out[dim] = ScoreError(n=len(diffs), mae=statistics.fmean(abs(d) for d in diffs) if diffs else None,
                              bias=statistics.fmean(diffs) if diffs else None)
    return out


#: (case, planted error index) -> (found, type matched); None when its dimension was not judged
Found = dict[tuple[str, int], tuple[bool, bool] | None]


def calibrate(suite: Sequence[SuiteCase], results: Results, ground: Grounder,
              unplantable: dict[str, str] | None = None, source: CalibrationSource = "builtin") -> CalibrationReport:
    """The calibration figures (module docstring) of the judges of ``results`` on ``suite``; ``source`` says
    what the suite's errors are (the recommendation's words depend on it).

    ``results`` is the run of the suite's cases (same ids); ``ground`` locates a quote in a case
    (:func:`consensus_eval.domain.grounding.ground`).
    """
    rubric = results.rubric
    by_id = {sc.case.id: _Case(sc, rubric, ground) for sc in suite}
    got, scores, runs_of, costs = _collect(results, by_id)
    quorum = results.config.consensus.min_judges
    judges = list(results.judges)
    found: dict[tuple[str, int], Found] = {}
    report_judges: dict[str, JudgeCalibration] = {}
    for judge in judges:
        for run in sorted(runs_of[judge]) or [0]:
            found[(judge, run)] = _found(by_id, got, judge, run)
        report_judges[judge] = _judge_figures(judge, by_id, got, scores, found, sorted(runs_of[judge]) or [0], rubric,
                                              _cost(costs.get(judge, [])))
    panel_found = _panel_found(by_id, found, judges, quorum)
    costs_all = [x for j in judges for x in costs.get(j, [])]
    report_judges[PANEL] = _panel_figures(by_id, results, got, judges, panel_found, rubric, _cost(costs_all))
    best, excluded = choose_best({j: report_judges[j] for j in judges})
    pv = report_judges[PANEL].overall.found.value
    bv = report_judges[best].overall.found.value if best is not None else None
    gain = pv - (bv or 0.0) if best is not None and pv is not None else None
    planted = [c for c in by_id.values() if not c.sc.clean]
    edits_by_type = _edits_by_type(planted)
    needed = needed_to_separate()
    rep = CalibrationReport(
        suite_cases=len(suite), planted=len(planted), clean=len(by_id) - len(planted),
        errors=sum(len(sc.expected) for sc in suite), edits=sum(len(v) for v in edits_by_type.values()),
        bases=len({c.cluster for c in planted}),
        clean_records=len({c.cluster for c in by_id.values() if c.sc.clean}),
        quorum=quorum, judges=report_judges, best_judge=best,
        panel_gain=gain, unplantable=dict(unplantable or {}),
        not_best={j: not_best_text(nb) for j, nb in excluded.items()}, not_best_why=excluded,
        comparisons=_mode_comparisons(results, found), needed_per_type=needed,
        small_types={t: len(v) for t, v in sorted(edits_by_type.items()) if len(v) < needed}, source=source)
    rep.recommendation = recommend(rep)
    return rep


def _collect(results: Results, by_id: dict[str, _Case]
             ) -> tuple[dict[tuple[str, str, int], dict[str, AnyJudgment]], dict[tuple[str, str, int, str], float],
                        dict[str, set[int]], dict[str, list[float | None]]]:
    """The suite cases' records of ``results``: (case, judge, run) -> dimension -> judgment; (case, judge, run,
    dim) -> re-derived score; each judge's runs; each judge's costs (first run)."""
    got: dict[tuple[str, str, int], dict[str, AnyJudgment]] = defaultdict(dict)
    scores: dict[tuple[str, str, int, str], float] = {}
    runs_of: dict[str, set[int]] = defaultdict(set)
    costs: dict[str, list[float | None]] = defaultdict(list)
    for r in results.records:
        if r.case_id not in by_id:
            continue
        runs_of[r.judge].add(r.run)
        if r.run == 0:
            costs[r.judge].append(r.cost)
        if r.status == "ok" and r.judgment is not None:
            got[(r.case_id, r.judge, r.run)][r.dimension] = r.judgment
            scores[(r.case_id, r.judge, r.run, r.dimension)] = results.scores[r.request_hash].score
    return got, scores, runs_of, costs


def _found(by_id: dict[str, _Case], got: dict[tuple[str, str, int], dict[str, AnyJudgment]], judge: str,
           run: int) -> Found:
    """Which planted errors ``judge``'s run ``run`` found (and with the type matched)."""
    f: Found = {}
    for cid, c in by_id.items():
        js = got.get((cid, judge, run), {})
        for i, e in enumerate(c.sc.expected):
            j = js.get(e.dimension)
            if j is None:
                f[(cid, i)] = None
                continue
            hits = [c.hit(item, i) for item in _items([j])]
            f[(cid, i)] = (any(h[0] for h in hits), any(h[1] for h in hits))
    return f


def _panel_found(by_id: dict[str, _Case], found: dict[tuple[str, int], Found], judges: list[str],
                 quorum: int) -> Found:
    """The panel: found when at least ``quorum`` judges (first run) find it."""
    panel_found: Found = {}
    for cid, c in by_id.items():
        for i in range(len(c.sc.expected)):
            votes = [found[(j, 0)].get((cid, i)) for j in judges if (j, 0) in found]
            judged = [v for v in votes if v is not None]
            if len(judged) < quorum:
                panel_found[(cid, i)] = None  # too few judges answered: the panel has no verdict (inconclusive)
                continue
            panel_found[(cid, i)] = (sum(v[0] for v in judged) >= quorum, sum(v[1] for v in judged) >= quorum)
    return panel_found


def _edits_by_type(planted: list[_Case]) -> dict[str, set[tuple[object, ...]]]:
    """The distinct edits of each error type planted in ``planted``."""
    edits_by_type: dict[str, set[tuple[object, ...]]] = defaultdict(set)
    for c in planted:
        for e, key in zip(c.sc.expected, c.edits, strict=True):
            edits_by_type[e.type].add(key)
    return edits_by_type


def _cost(costs: Sequence[float | None]) -> float | None:
    """The USD of these calls; None when none reported a cost (an LLM judge without prices)."""
    known = [c for c in costs if c is not None]
    return sum(known) if known else None


def _mode_comparisons(results: Results, found: dict[tuple[str, int], Found]) -> list[ModeComparison]:
    """Each ``call: per_case`` judge against the first ``call: per_dimension`` judge of the same model."""
    configs = [j for j in results.config.judges if j.name in results.judges and isinstance(j, LLMJudgeConfig)]
    out = []
    for whole in configs:
        if whole.call != "per_case":
            continue
        twin = next((j for j in configs if j.call == "per_dimension" and j.model == whole.model), None)
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


def _rows(by_id: dict[str, _Case], f: Found) -> tuple[list[_Row], dict[str, int]]:
    """The judged planted errors as rows, and the unjudged count per type."""
    rows: list[_Row] = []
    unjudged: dict[str, int] = defaultdict(int)
    for cid, c in by_id.items():
        for i, e in enumerate(c.sc.expected):
            v = f.get((cid, i))
            if v is None:
                unjudged[e.type] += 1
            else:
                rows.append(_Row(c.cluster, c.edits[i], e.type, e.category, e.points, v[0], v[1]))
    return rows, dict(sorted(unjudged.items()))


def _false_alarms(by_id: dict[str, _Case], items_of: Callable[[_Case], list[_Item] | None]
                  ) -> tuple[list[int], Share, Share]:
    """Deductions per clean control judged in every dimension, the share of those flagged (units: distinct
    clean records) and precision on planted cases (deductions finding some planted error; units: base
    records). ``items_of(case)``: the deductions of a case, None when it was not judged in full."""
    counts: list[tuple[str, int]] = []
    touched: list[tuple[str, float]] = []
    for c in by_id.values():
        items = items_of(c)
        if items is None:
            continue
        if c.sc.clean:
            counts.append((c.cluster, len(items)))
        else:
            touched += [(c.cluster, float(c.finds_some(it))) for it in items]
    flagged = share([(cl, float(n > 0)) for cl, n in counts], len({cl for cl, _ in counts}))
    return [n for _, n in counts], flagged, share(touched, len(touched))


def _judge_figures(judge: str, by_id: dict[str, _Case], got: dict[tuple[str, str, int], dict[str, AnyJudgment]],
                   scores: dict[tuple[str, str, int, str], float], found: dict[tuple[str, int], Found],
                   runs: list[int], rubric: Rubric, cost: float | None) -> JudgeCalibration:
    run0 = runs[0]
    rows, unjudged = _rows(by_id, found[(judge, run0)])
    overall, by_type, by_cat = _recall(rows)
    n_dims = len(rubric.dimensions)

    def items_of(c: _Case) -> list[_Item] | None:
        js = got.get((c.sc.case.id, judge, run0))
        if not js or (c.sc.clean and len(js) < n_dims):
            return None
        return _items(js.values())

    counts, flagged, precision = _false_alarms(by_id, items_of)
    pairs: dict[str, list[tuple[float, float]]] = {d.id: [] for d in rubric.dimensions}
    for cid, c in by_id.items():
        js = got.get((cid, judge, run0))
        if not js:
            continue
        want = expected_scores(c.sc, rubric)
        for dim in js:
            pairs[dim].append((scores[(cid, judge, run0, dim)], want[dim]))
    runs_recall: list[float | None] = []
    consistent = None
    if len(runs) > 1:
        for run in runs:
            r, _ = _rows(by_id, found[(judge, run)])
            runs_recall.append(sum(x.found for x in r) / len(r) if r else None)
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
        name=judge, overall=overall, by_type=by_type, by_category=by_cat, unjudged=sum(unjudged.values()),
        unjudged_by_type=unjudged, clean_cases=len(counts),
        false_alarms_per_case=statistics.fmean(counts) if counts else None,
        clean_flagged=flagged, precision=precision, score_error=_score_error(pairs),
        cost=cost, cost_per_found=_per_found(cost, overall),
        runs_recall=runs_recall, consistent=consistent)


def _per_found(cost: float | None, overall: Recall) -> float | None:
    return cost / overall.found.k if cost is not None and overall.found.k else None


def _touching(a: Grounding, b: Grounding) -> bool:
    return a.grounded and b.grounded and any(x.source == y.source and x.start < y.end and y.start < x.end
                                             for x in a.spans for y in b.spans)


def panel_items(c: _Case, per_judge: dict[str, list[_Item]], quorum: int
                ) -> list[list[_Item]]:
    """The panel's deductions on a case: the judges' deductions grouped (same category, or fixed penalty
    id; located evidence overlapping, or both finding the same planted error, e.g. one quoting the record's
    wrong value and one the conversation's right one; at most one deduction of each judge in a group) and
    kept when at least ``quorum`` judges are in the group. A deduction whose evidence cannot be located
    stays alone."""
    groups: list[tuple[str, Grounding, set[int], dict[str, _Item]]] = []
    for judge, items in per_judge.items():
        for it in items:
            key = f"penalty:{it.id}" if isinstance(it, (PenaltyHit, StoredPenalty)) else it.category
            g = c.where(it.evidence)
            finds = {i for i in range(len(c.sc.expected)) if c.hit(it, i)[0]}
            home = next((m for k, g0, f0, m in groups
                         if k == key and judge not in m and (_touching(g0, g) or f0 & finds)), None)
            if home is None:
                groups.append((key, g, finds, {judge: it}))
            else:
                home[judge] = it
    return [list(m.values()) for _, _, _, m in groups if len(m) >= quorum]


def _panel_figures(by_id: dict[str, _Case], results: Results, got: dict[tuple[str, str, int], dict[str, AnyJudgment]],
                   judges: list[str], panel_found: Found, rubric: Rubric, cost: float | None) -> JudgeCalibration:
    rows, unjudged = _rows(by_id, panel_found)
    overall, by_type, by_cat = _recall(rows)
    quorum = results.config.consensus.min_judges
    n_dims = len(rubric.dimensions)

    def items_of(c: _Case) -> list[_Item] | None:
        per_judge = {j: _items(js.values()) for j in judges
                     if (js := got.get((c.sc.case.id, j, 0))) and len(js) == n_dims}
        if len(per_judge) < quorum:
            return None
        # one representative deduction per panel deduction: it finds a planted error when any member does
        return [next((it for it in grp if c.finds_some(it)), grp[0]) for grp in panel_items(c, per_judge, quorum)]

    counts, flagged, precision = _false_alarms(by_id, items_of)
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
        name=PANEL, overall=overall, by_type=by_type, by_category=by_cat, unjudged=sum(unjudged.values()),
        unjudged_by_type=unjudged, clean_cases=len(counts),
        false_alarms_per_case=statistics.fmean(counts) if counts else None, clean_flagged=flagged,
        precision=precision, score_error=_score_error(pairs), cost=cost, cost_per_found=_per_found(cost, overall))


#: a judge whose calls failed on more than this share of the planted errors is never named the best
MAX_UNJUDGED = 0.05
#: ... nor one raising this many deductions per clean record, or with a precision below this
MAX_FALSE_ALARMS, MIN_PRECISION = 1.0, 0.5


class NotBest(BaseModel):
    """Why a judge is not named the best: ``reason`` ``none_judged`` (it judged no planted error),
    ``unjudged`` (its calls failed on ``unjudged`` of ``planted`` errors: ``value`` that share, over
    ``limit``), ``false_alarms`` (``value`` deductions per clean record, at least ``limit``) or ``precision``
    (``value`` under ``limit``)."""

    reason: Literal["none_judged", "unjudged", "false_alarms", "precision"]
    value: float = 0.0
    limit: float = 0.0
    unjudged: int = 0
    planted: int = 0


def not_best_text(nb: NotBest) -> str:
    """The reason in plain English (calibration.json's ``not_best``; the reports translate the fields)."""
    if nb.reason == "none_judged":
        return "judged no planted error"
    if nb.reason == "unjudged":
        return (f"its calls failed on {nb.unjudged} of {nb.planted} planted errors ({nb.value:.0%} > {nb.limit:.0%}): "
                "its recall counts only what it judged")
    if nb.reason == "false_alarms":
        return f"{nb.value:.1f} false alarms per clean record (>= {nb.limit:g})"
    return f"precision {nb.value:.0%} (< {nb.limit:.0%})"


def choose_best(judges: dict[str, JudgeCalibration]) -> tuple[str | None, dict[str, NotBest]]:
    """The best single judge: the highest recall (on synthetic planted errors) among the judges that pass
    three constraints, and why each other judge was left out. Recall alone would reward a judge that fails
    where it would miss (its unjudged errors do not count against it) and one that deducts everywhere."""
    excluded: dict[str, NotBest] = {}
    eligible = []
    for name, jc in judges.items():
        planted = jc.overall.found.n + jc.unjudged
        failed = jc.unjudged / planted if planted else 0.0
        if jc.overall.found.value is None:
            excluded[name] = NotBest(reason="none_judged", unjudged=jc.unjudged, planted=planted)
        elif failed > MAX_UNJUDGED:
            excluded[name] = NotBest(reason="unjudged", value=failed, limit=MAX_UNJUDGED, unjudged=jc.unjudged,
                                     planted=planted)
        elif jc.false_alarms_per_case is not None and jc.false_alarms_per_case >= MAX_FALSE_ALARMS:
            excluded[name] = NotBest(reason="false_alarms", value=jc.false_alarms_per_case, limit=MAX_FALSE_ALARMS)
        elif jc.precision.value is not None and jc.precision.value < MIN_PRECISION:
            excluded[name] = NotBest(reason="precision", value=jc.precision.value, limit=MIN_PRECISION)
        else:
            eligible.append(name)
    best = max(eligible, key=lambda j: judges[j].overall.found.value or 0.0) if eligible else None
    return best, excluded


#: recommendations name the types a judge finds in fewer than this share of at least MIN_N_WEAK plants
WEAK, MIN_N_WEAK = 0.5, 5
#: one call per case "finds as much" when its recall difference's interval lies entirely above -MARGIN
MARGIN = 0.05


def weak_types(jc: JudgeCalibration, weak: float = WEAK, min_n: int = MIN_N_WEAK) -> list[str]:
    """The types ``jc`` finds in fewer than ``weak`` of at least ``min_n`` planted errors."""
    return [t for t, r in jc.by_type.items()
            if r.found.n >= min_n and r.found.value is not None and r.found.value < weak]


def mode_verdict(m: ModeComparison, margin: float = MARGIN) -> Literal["less", "as_much", "unsure"] | None:
    """One call per case against one per dimension: ``less`` (its interval is below 0), ``as_much`` (the
    interval's low end is above ``-margin``), ``unsure`` otherwise; None without an interval."""
    if m.difference is None or m.low is None or m.high is None:
        return None
    return "less" if m.high < 0 else "as_much" if m.low >= -margin else "unsure"


def recommend(rep: CalibrationReport) -> list[str]:
    """Plain sentences, in English (calibration.json; the reports say the same in their language): which
    judge misses what (:func:`weak_types`), which judge finds most, whether the panel beats it, who raises
    false alarms, and whether one call per case finds as much as one per dimension (:func:`mode_verdict`)."""
    out = []
    for name, jc in rep.judges.items():
        misses = weak_types(jc)
        if misses:
            out.append(f"{name} misses {', '.join(misses)} (found in fewer than {WEAK:.0%} of the planted cases)")
        if jc.false_alarms_per_case is not None and jc.false_alarms_per_case >= 1:
            out.append(f"{name} raises {jc.false_alarms_per_case:.1f} deductions per clean record on average: "
                       "read its deductions before trusting its scores")
    for name, jc in rep.judges.items():
        if jc.unjudged and name != PANEL:
            listed = ", ".join(f"{t} {n}" for t, n in jc.unjudged_by_type.items())
            per_type = f": {listed}" if listed else ""
            out.append(f"{name}: {jc.unjudged} planted error(s) unjudged (its calls failed there{per_type}); its "
                       "recall counts only the errors it judged")
    for name, jc in rep.judges.items():
        if jc.cost_per_found is not None and jc.cost:
            out.append(f"{name}: ${jc.cost:.2f} for the suite, ${jc.cost_per_found:.4f} per planted error found")
    if rep.best_judge is not None:
        best = rep.judges[rep.best_judge].overall.found
        what = {"builtin": "recall on synthetic planted errors", "builtin-heldout": "recall on synthetic planted "
                "errors of the held-out operator family", "bases": "recall on synthetic errors planted into "
                "your records", "handwritten": "recall on errors written by hand", "file": "recall on your suite"}
        out.append(f"best single judge: {rep.best_judge} ({what[rep.source]} {best.value:.0%}"
                   + (f", 95% CI {best.low:.0%}-{best.high:.0%})" if best.low is not None else ")")
                   + ("; an upper bound: errors written freely, not by the suite's operators, are harder to find"
                      if rep.source in ("builtin", "builtin-heldout", "bases") else ""))
    for name, why in rep.not_best.items():
        out.append(f"{name} is not named best: {why}")
    for m in rep.comparisons:
        v = mode_verdict(m)
        if v is None or m.low is None or m.high is None or m.difference is None:
            continue
        verdict = {"less": f"it finds less: keep {m.per_dimension}",
                   "as_much": f"it finds as much within {MARGIN:.0%} (the interval's low end is above -{MARGIN:.0%})",
                   "unsure": f"the suite cannot rule out that it finds more than {MARGIN:.0%} less: keep "
                             f"{m.per_dimension}"}[v]
        out.append(f"{m.per_case} (one call per case) against {m.per_dimension} (one call per dimension): recall "
                   f"{m.difference:+.1%} (95% CI {m.low:+.1%} to {m.high:+.1%}) on {m.n} planted errors both judged "
                   f"(found by both {m.both}, only per case {m.only_per_case}, only per dimension "
                   f"{m.only_per_dimension}): {verdict}")
    panel = rep.judges.get(PANEL)
    if panel is not None and len(rep.judges) > 2 and panel.false_alarms_per_case is not None:
        prec = panel.precision
        out.append(f"the panel (quorum {rep.quorum}) raises {panel.false_alarms_per_case:.2f} deductions per clean "
                   f"record" + (f"; precision on planted records {prec.value:.0%} ({prec.k}/{prec.n})"
                                if prec.value is not None else ""))
    if rep.small_types and rep.needed_per_type:
        listed = ", ".join(f"{t} ({n})" for t, n in rep.small_types.items())
        out.append(f"too few distinct edits to tell 70% recall from 90% for {listed}: a type needs at least "
                   f"{rep.needed_per_type} distinct edits (in different records) for that")
    if rep.panel_gain is not None and len(rep.judges) > 2:
        if rep.panel_gain > 0:
            out.append(f"the panel (quorum {rep.quorum}) finds {rep.panel_gain:.0%} more planted errors than "
                       f"{rep.best_judge} alone")
        else:
            out.append(f"the panel (quorum {rep.quorum}) finds no more than {rep.best_judge} alone "
                       f"({rep.panel_gain:+.0%}): consider a lower quorum or better judges")
    return out
