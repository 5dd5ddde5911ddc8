"""How far each judge, and the panel, can be trusted against clinicians: the ``validity`` section.

Measured on the random spot check (:mod:`consensus_eval.analysis.spotcheck`) only: the review queue's
cases were chosen because the judges disagreed on them, and figures computed there describe the hardest
cases, not the run. A case counts when a reviewer gave their own score (a score accepted from the panel
is not a clinician's judgement: :data:`~consensus_eval.execution.store.LabelOrigin`).

For each judge and the panel, per dimension and total (:class:`KeyValidity`):

- ICC(A,1) against the clinicians' score, with its 95% interval, mean bias and MAE
  (:func:`~consensus_eval.analysis.validity.score_validity`); with unequal inclusion probabilities (a
  stratified sample) bias and MAE are inverse-probability weighted, estimating the whole run;
- the ceiling: the clinicians' own ICC(A,1) on the spot-check cases two of them scored (the second
  clinician against the first), beside each rater's ICC against the first clinician on the same cases
  (``same_basis``, :func:`~consensus_eval.analysis.validity.against_one_clinician`): a judge exactly as
  good as one clinician is above the ceiling half the time there. The first figure (against the clinicians'
  mean or adjudicated score on every spot-check case, a less noisy reference than one clinician) is not
  comparable with the ceiling: it would put such a judge above it most of the time;
- the number of cases an ICC of that size, with its rater-bias term, needs for a 95% interval of +-0.1
  (:func:`~consensus_eval.analysis.validity.cases_needed`; Bonett 2002 without a bias), and a
  small-sample warning below it (or when no number of cases gets there).

Deduction verdicts (:class:`DeductionValidity`), as HealthBench's meta-evaluation does per criterion:
every deduction type any judge took or a reviewer added on a spot-check case's dimension is an item;
the clinicians say whether it is deserved (a reviewer's "agree" on any judge's deduction of that type, or
their own added deduction: yes; "disagree" on every one: no; "unsure" or nothing: not counted; the majority
of the reviewers, or where an adjudicator settled a deduction they disagreed on, the adjudicator's reference
verdict), and a judge says yes when it took that type in at least half of its runs. Per judge: Cohen's kappa and
macro-F1 of its yes/no against the clinicians', with the clinicians' kappa between themselves as the
ceiling. With unequal inclusion probabilities (a stratified spot check) each item is weighted by 1 / its
case's probability (scikit-learn's ``sample_weight``), as bias and MAE are, so kappa and macro-F1 estimate
the whole run; the agreement share and its interval stay counts of the sample, and the ICC stays
unweighted (it describes the labelled sample).

Criterion verdicts (:class:`CriteriaValidity`, a rubric with ``criteria`` dimensions), as HealthBench's
meta-evaluation grades its graders: the units are the distinct (case, dimension, criterion) of the spot-check
cases a clinician gave their own verdict on; the clinicians' verdict is the adjudicator's reference where
there is one, else the majority of the reviewers' own verdicts (a tie is not counted; a verdict accepted from
the panel never counts). A judge's verdict is its majority over its runs (a tie is not counted), the panel's
the consensus majority (``split`` is not counted). Per judge and the panel: macro-F1 over met / not met
(scikit-learn ``f1_score(average="macro")``, clinicians as truth) and Cohen's kappa; the ceiling: the first
two reviewers' verdicts on the units two gave, before adjudication. Likert dimensions need nothing of their
own: a reviewer's level is their score of the dimension, and its ICC is the per-dimension figure above.

Prediction-powered estimates (:class:`PpiEstimate`, Angelopoulos et al. 2023, PPI++): per system (or for
the whole run) the mean clinician total estimated from the panel's totals on every case, corrected by the
spot-checked cases; shown beside the panel-only mean and the clinician-only mean, both small-sample t
intervals (:mod:`consensus_eval.analysis.ppi`; none below :data:`~consensus_eval.analysis.ppi.MIN_LABELS`
clinician scores in the group). The PPI interval stays valid however biased the panel is; its width
against the clinician-only one is what the judges buy (nothing when the weight ``lam`` is 0). It needs a
simple random sample within the group: every case of the group equally likely to be drawn, decided from
the stored design (:func:`~consensus_eval.analysis.spotcheck.inclusion`), not from the cases drawn; a group
whose cases were not is refused (note ``ppi_unequal_probabilities``), as is every group when the design no
longer matches the run (``ppi_design_changed``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, Field

from consensus_eval.analysis.agreement import judge_value, panel_value
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.human import HumanReview, human_value
from consensus_eval.analysis.intervals import Share, share
from consensus_eval.analysis.ppi import (
    DifferenceEstimate,
    MeanEstimate,
    human_mean,
    panel_mean,
    ppi_difference,
    ppi_mean,
)
from consensus_eval.analysis.spotcheck import inclusion
from consensus_eval.analysis.systems import UNNAMED
from consensus_eval.analysis.validity import (
    ICC,
    IsotonicMap,
    ScoreValidity,
    VerdictValidity,
    against_one_clinician,
    icc_a1,
    isotonic_map,
    score_validity,
    verdict_validity,
)
from consensus_eval.domain.cases import Case
from consensus_eval.execution.store import SpotCheckRecord
from consensus_eval.execution.stored_run import StoredRun

#: the rater name of the panel's consensus score in the per-judge maps
PANEL = "panel"


class KeyValidity(BaseModel):
    """One key (a dimension id or ``total``): per rater (each judge, and ``panel``) its
    :class:`~consensus_eval.analysis.validity.ScoreValidity` against the clinicians on the spot-check
    cases (the adjudicator's reference score where reviewers were adjudicated, else the mean of their own
    scores); ``ceiling``: the clinicians' ICC(A,1) between the first two reviewers who scored each case,
    before any adjudication, on the cases two scored (None when fewer than 2 such cases; with several
    reviewer pairs the columns are "first" and "second" reviewer, not fixed people)."""

    raters: dict[str, ScoreValidity]
    ceiling: ICC | None = None
    #: per rater, ICC(A,1) against the first reviewer on the cases two reviewers scored (a case the rater did
    #: not score left out): the ceiling's own basis (module docstring); empty without a ceiling
    same_basis: dict[str, ICC] = {}


class DeductionValidity(BaseModel):
    """Deduction verdicts against the clinicians on ``n_items`` candidate items (module docstring):
    per judge its :class:`~consensus_eval.analysis.validity.VerdictValidity` (labels ``yes`` / ``no``);
    ``ceiling``: the agreement of the first two reviewers who decided each item, on the items two decided
    (None without such items).

    Detection on real records, per judge (what calibration's planted-error figures are read beside):
    ``precision``: of the items it took, the share the clinicians say are deserved; ``recall``: of the
    items the clinicians say are deserved (upheld deductions and the ones they added), the share it took.
    Intervals count cases (several items of one case are not independent)."""

    n_items: int
    judges: dict[str, VerdictValidity]
    ceiling: VerdictValidity | None = None
    precision: dict[str, Share] = {}
    recall: dict[str, Share] = {}


class CriteriaValidity(BaseModel):
    """Criterion verdicts against the clinicians (module docstring): ``n_units`` distinct (case, dimension,
    criterion) with a clinicians' verdict; per rater (each judge and ``panel``) its
    :class:`~consensus_eval.analysis.validity.VerdictValidity` over labels ``met`` / ``not_met`` (``macro_f1``:
    HealthBench's meta-evaluation figure; ``kappa``: Cohen's); ``ceiling``: the first two reviewers' verdicts
    against each other on the units two gave (None without such units); ``per_dimension``: the same per
    criteria dimension, when the rubric has several."""

    n_units: int
    raters: dict[str, VerdictValidity]
    ceiling: VerdictValidity | None = None
    per_dimension: dict[str, dict[str, VerdictValidity]] = {}


class PpiEstimate(BaseModel):
    """The mean clinician score of ``group`` (a system, or ``all``) on ``key``, three ways: ``ppi`` (the
    panel on every case, corrected by the spot check), ``human`` (the spot check alone) and ``panel``
    (the panel alone: the mean PANEL score, whose narrow interval ignores the panel's bias)."""

    group: str
    key: str
    ppi: MeanEstimate
    human: MeanEstimate
    panel: MeanEstimate


class PpiDifference(BaseModel):
    """PPI++ difference of the mean clinician score of system ``a`` minus system ``b`` on ``key``."""

    a: str
    b: str
    key: str
    difference: DifferenceEstimate


class ValidityReport(BaseModel):
    """The ``validity`` section of reliability.json (module docstring).

    ``sample``: ``spot_check`` (figures on the random spot check) or ``none`` (no spot check drawn, or
    none of its cases scored by a clinician yet: no validity figure; the ``human`` section's figures are
    then on the reviewed cases only). ``n_drawn``: cases in the spot check; ``n_labelled``: those with a
    clinician's own score; ``n_accepted_only``: those whose only scores were accepted from the panel (not
    counted); ``weighted``: bias and MAE are inverse-probability weighted (unequal probabilities);
    ``strata``: the strata of the draw; ``notes``: codes of what could not be computed and why
    (``ppi_unequal_probabilities``, ``ppi_design_changed``, ``no_second_reviewer``).
    """

    sample: Literal["spot_check", "none"]
    n_drawn: int = 0
    n_labelled: int = 0
    n_accepted_only: int = 0
    weighted: bool = False
    strata: list[str] = []
    scores: dict[str, KeyValidity] = {}
    deductions: DeductionValidity | None = None
    ppi: list[PpiEstimate] = []
    ppi_differences: list[PpiDifference] = []
    notes: list[str] = []
    #: criterion verdicts against the clinicians (a rubric with criteria dimensions; left out of the dump
    #: otherwise): :class:`CriteriaValidity`
    criteria: Annotated[CriteriaValidity | None, Field(exclude_if=lambda v: v is None)] = None
    #: with ``isotonic`` (off by default): per rater, an isotonic map of its total to the clinicians' scale,
    #: fitted on the spot check with its cross-validated error (:class:`~consensus_eval.analysis.validity.IsotonicMap`),
    #: reported beside the raw scores, never in their place
    calibrated: dict[str, IsotonicMap] = {}


def validity_report(run: StoredRun, cons: Sequence[CaseConsensus], review: HumanReview | None,
                    sample: Sequence[SpotCheckRecord], *, isotonic: bool = False) -> ValidityReport:
    """The validity section of a run from its spot check and labels (module docstring). ``isotonic``: also
    fit each rater's calibrated reading of the total (``calibrated``)."""
    if not sample:
        return ValidityReport(sample="none")
    prob = {s.case_id: s.probability for s in sample}
    # unequal inclusion probabilities: verdict figures weight each item by 1 / its case's probability
    weight_of = ({cid: 1.0 / p for cid, p in prob.items()}
                 if max(prob.values()) - min(prob.values()) > 1e-12 else None)
    criteria = (_criteria(run, cons, review, [s.case_id for s in sample], weight_of)
                if review is not None and any(d.by_criteria for d in run.rubric.dimensions) else None)
    by_id = {c.case_id: c for c in cons}
    strata = list(dict.fromkeys(s.stratum for s in sample))
    labelled = [cid for cid in prob if review is not None and (r := review.case(cid)) is not None and r.human
                and cid in by_id]
    accepted_only = sum(1 for cid in prob if review is not None and (r := review.case(cid)) is not None
                        and not r.human and r.accepted)
    out = ValidityReport(sample="spot_check" if labelled or criteria else "none", n_drawn=len(sample),
                         n_labelled=len(labelled), n_accepted_only=accepted_only, strata=strata, criteria=criteria)
    if not labelled or review is None:
        return out
    probs = np.array([prob[cid] for cid in labelled])
    unequal = bool(np.ptp(probs) > 1e-12)
    weights = (1.0 / probs) if unequal else None
    out.weighted = unequal
    keys = [*(d.id for d in run.rubric.dimensions), "total"]
    for k in keys:
        out.scores[k] = _key_validity(run.judges, by_id, review, labelled, k, weights)
    if len(review.reviewers) < 2:
        out.notes.append("no_second_reviewer")
    out.deductions = _deductions(run, review, labelled, weight_of)
    if isotonic:
        human = [human_value(review, cid, "total") for cid in labelled]
        out.calibrated = {j: isotonic_map([judge_value(by_id[cid], j, "total") for cid in labelled], human)
                          for j in run.judges}
        out.calibrated[PANEL] = isotonic_map([by_id[cid].total for cid in labelled], human)
    _ppi(run.cases, cons, review, sample, out, keys)
    return out


def _key_validity(judges: Sequence[str], by_id: Mapping[str, CaseConsensus], review: HumanReview,
                  labelled: Sequence[str], k: str, weights: np.ndarray | None) -> KeyValidity:
    """How each judge's and the panel's scores of ``k`` (a dimension, or ``total``) on the ``labelled`` cases
    agree with the clinicians', and the ceiling two clinicians set (where two scored it)."""
    human = [human_value(review, cid, k) for cid in labelled]
    raters = {j: score_validity([judge_value(by_id[cid], j, k) for cid in labelled], human, weights)
              for j in judges}
    raters[PANEL] = score_validity([panel_value(by_id[cid], k) for cid in labelled], human, weights)
    ceiling, same_basis = None, {}
    two = [(cid, p) for cid in labelled if (p := _pair(review, cid, k)) is not None]
    if len(two) >= 2:
        ceiling = icc_a1(np.array([p for _, p in two], dtype=float))
        first, second = [p[0] for _, p in two], [p[1] for _, p in two]
        scores = {j: [judge_value(by_id[cid], j, k) for cid, _ in two] for j in judges}
        scores[PANEL] = [panel_value(by_id[cid], k) for cid, _ in two]
        same_basis = {name: against_one_clinician(mine, first, second)[0] for name, mine in scores.items()}
    return KeyValidity(raters=raters, ceiling=ceiling, same_basis=same_basis)


def _pair(review: HumanReview, case_id: str, key: str) -> tuple[float, float] | None:
    """The own scores of the first two reviewers who scored ``key`` of the case (before any adjudication)."""
    r = review.case(case_id)
    given = [s[key] for s in r.scores.values() if key in s] if r else []
    return (given[0], given[1]) if len(given) >= 2 else None


#: a deduction item: (case id, dimension id, deduction type or fixed penalty id)
Item = tuple[str, str, str]


@dataclass(frozen=True)
class DeductionItems:
    """The deduction items of some cases (module docstring, "Deduction verdicts"): ``items`` in order; ``says``
    each reviewer's yes / no per item, ``settled`` the adjudicator's; ``runs_of`` the runs each judge made of a
    case's dimension, ``took`` the runs in which it took an item. :meth:`reference` and :meth:`judge_says` read
    them."""

    items: list[Item]
    says: dict[Item, dict[str, bool]]
    settled: dict[Item, bool]
    runs_of: dict[tuple[str, str, str], set[int]]
    took: dict[Item, dict[str, set[int]]]

    def reference(self, item: Item) -> bool | None:
        """The clinicians' verdict on ``item``: the adjudicator's, else the reviewers' majority (None: a tie)."""
        return self.settled[item] if item in self.settled else _majority(list(self.says.get(item, {}).values()))

    def judge_says(self, judge: str, item: Item) -> bool | None:
        """Whether ``judge`` took ``item`` in at least half of its runs of the case's dimension (None: no run)."""
        asked = self.runs_of.get((item[0], item[1], judge))
        if not asked:
            return None
        return len(self.took.get(item, {}).get(judge, set())) * 2 >= len(asked)


def deduction_items(run: StoredRun, review: HumanReview, case_ids: Sequence[str]) -> DeductionItems:
    """The deduction items of ``case_ids`` and what the judges and the clinicians say of each (module docstring,
    "Deduction verdicts")."""
    wanted = set(case_ids)
    # (case, dimension, type) -> judge -> [took it in run r?]; and (case, deduction id) -> its item (cases with
    # the same content share their calls, so a deduction id names an item only with its case)
    runs_of: dict[tuple[str, str, str], set[int]] = {}
    took: dict[Item, dict[str, set[int]]] = {}
    item_of: dict[tuple[str, str], Item] = {}
    for r in run.records:
        if r.case_id not in wanted or r.status != "ok" or r.judgment is None:
            continue
        runs_of.setdefault((r.case_id, r.dimension, r.judge), set()).add(r.run)
        for i, d in enumerate(r.judgment.deductions):
            key = (r.case_id, r.dimension, d.type)
            took.setdefault(key, {}).setdefault(r.judge, set()).add(r.run)
            item_of[(r.case_id, f"{r.request_hash}#d{i}")] = key
        for i, p in enumerate(r.judgment.fixed_penalties):
            key = (r.case_id, r.dimension, p.id)
            took.setdefault(key, {}).setdefault(r.judge, set()).add(r.run)
            item_of[(r.case_id, f"{r.request_hash}#p{i}")] = key
    # what each reviewer says of each item: True (deserved), False (not), from verdicts and added deductions;
    # an adjudicator's reference verdicts (where reviewers disagreed) apart: they decide the item
    says: dict[Item, dict[str, bool]] = {}
    settled: dict[Item, bool] = {}
    for lb in review.labels:
        if lb.case_id not in wanted:
            continue
        if lb.kind == "added_deduction" and lb.dimension and lb.value:
            says.setdefault((lb.case_id, lb.dimension, str(lb.value)), {})[lb.reviewer] = True
        elif (lb.kind == "verdict" and (item := item_of.get((lb.case_id, lb.deduction_id or ""))) is not None
              and lb.value in ("agree", "disagree")):
            if lb.origin == "reference":
                settled[item] = settled.get(item, False) or lb.value == "agree"
                continue
            mine = says.setdefault(item, {})
            mine[lb.reviewer] = mine.get(lb.reviewer, False) or lb.value == "agree"
    return DeductionItems(sorted(says.keys() | settled.keys()), says, settled, runs_of, took)


def _deductions(run: StoredRun, review: HumanReview, case_ids: Sequence[str],
                weight_of: Mapping[str, float] | None = None) -> DeductionValidity | None:
    found = deduction_items(run, review, case_ids)
    items, says = found.items, found.says
    if not items:
        return None
    judges: dict[str, VerdictValidity] = {}
    precision: dict[str, Share] = {}
    recall: dict[str, Share] = {}
    for j in run.judges:
        mine_labels, reference, weights = [], [], []
        took_it: list[tuple[str, float]] = []     # (case, deserved?) for the items the judge took
        deserved: list[tuple[str, float]] = []    # (case, took it?) for the items the clinicians say are deserved
        for item in items:
            yes_or_no, ref = found.judge_says(j, item), found.reference(item)
            if yes_or_no is None or ref is None:
                continue
            yes = yes_or_no
            mine_labels.append("yes" if yes else "no")
            reference.append("yes" if ref else "no")
            weights.append(weight_of[item[0]] if weight_of is not None else 1.0)
            if yes:
                took_it.append((item[0], float(ref)))
            if ref:
                deserved.append((item[0], float(yes)))
        judges[j] = verdict_validity(mine_labels, reference, weights if weight_of is not None else None)
        precision[j] = share(took_it)
        recall[j] = share(deserved)
    ceiling = None
    pairs = [(i[0], v[0], v[1]) for i in items if len(v := list(says.get(i, {}).values())) >= 2]
    if pairs:
        ceiling = verdict_validity(["yes" if a else "no" for _, a, _ in pairs],
                                   ["yes" if b else "no" for _, _, b in pairs],
                                   [weight_of[c] for c, _, _ in pairs] if weight_of is not None else None)
    return DeductionValidity(n_items=len(items), judges=judges, ceiling=ceiling, precision=precision, recall=recall)


def _criteria(run: StoredRun, cons: Sequence[CaseConsensus], review: HumanReview,
              case_ids: Sequence[str], weight_of: Mapping[str, float] | None = None) -> CriteriaValidity | None:
    """Criterion verdicts of the judges and the panel against the clinicians' on the spot check (module
    docstring); None when no clinician gave a verdict there."""
    wanted = set(case_ids)
    dims = [d.id for d in run.rubric.dimensions if d.by_criteria]
    Unit = tuple[str, str, str]
    reference: dict[Unit, bool] = {}
    pairs: list[tuple[str, bool, bool]] = []
    for cid in case_ids:
        cr = review.case(cid)
        if cr is None:
            continue
        for dim in dims:
            own = [given[dim] for given in cr.criteria.values() if dim in given]
            ids = dict.fromkeys([*(k for g in own for k in g), *cr.reference_criteria.get(dim, {})])
            for k in ids:
                votes = [g[k] for g in own if k in g]
                ref = cr.reference_criteria.get(dim, {}).get(k)
                decided = ref if ref is not None else _majority(votes)
                if decided is not None:
                    reference[(cid, dim, k)] = decided
                if len(votes) >= 2:
                    pairs.append((cid, votes[0], votes[1]))
    if not reference:
        return None
    votes_of: dict[tuple[str, str, str, str], list[bool]] = {}
    for r in run.records:
        if r.case_id in wanted and r.status == "ok" and r.judgment is not None and r.dimension in dims:
            for v in r.judgment.verdicts:
                votes_of.setdefault((r.judge, r.case_id, r.dimension, v.id), []).append(v.met)
    panel = {c.case_id: c.criteria for c in cons if c.case_id in wanted}
    units = sorted(reference)

    def weights(cases: Sequence[str]) -> list[float] | None:
        return [weight_of[c] for c in cases] if weight_of is not None else None

    def rater(verdict_of: Callable[[Unit], bool | None], only: str | None = None) -> VerdictValidity:
        mine, ref, of = [], [], []
        for u in units:
            if only is not None and u[1] != only:
                continue
            v = verdict_of(u)
            if v is not None:
                mine.append("met" if v else "not_met")
                ref.append("met" if reference[u] else "not_met")
                of.append(u[0])
        return verdict_validity(mine, ref, weights(of))

    def judge(j: str) -> Callable[[Unit], bool | None]:
        return lambda u: _majority(votes_of.get((j, *u), []))

    def panel_of(u: Unit) -> bool | None:
        said = panel.get(u[0], {}).get(u[1], {}).get(u[2])
        return None if said in (None, "split") else said == "met"

    raters = {j: rater(judge(j)) for j in run.judges}
    raters[PANEL] = rater(panel_of)
    per_dim = {}
    if len(dims) > 1:
        per_dim = {d: {**{j: rater(judge(j), d) for j in run.judges}, PANEL: rater(panel_of, d)} for d in dims}
    ceiling = verdict_validity(["met" if a else "not_met" for _, a, _ in pairs],
                               ["met" if b else "not_met" for _, _, b in pairs],
                               weights([c for c, _, _ in pairs])) if pairs else None
    return CriteriaValidity(n_units=len(units), raters=raters, ceiling=ceiling, per_dimension=per_dim)


def _equal(probabilities: Sequence[float]) -> bool:
    """Whether every case had the same, positive, chance of being drawn (a simple random sample within the
    group, which PPI needs)."""
    return bool(probabilities) and min(probabilities) > 0 and max(probabilities) - min(probabilities) <= 1e-12


def _majority(votes: Sequence[bool]) -> bool | None:
    yes = sum(votes)
    no = len(votes) - yes
    return None if yes == no else yes > no


def _ppi(cases: Sequence[Case], cons: Sequence[CaseConsensus], review: HumanReview, sample: Sequence[SpotCheckRecord],
         out: ValidityReport, keys: Sequence[str]) -> None:
    by_id = {c.case_id: c for c in cons}
    prob = {s.case_id: s.probability for s in sample}
    design = inclusion(cases, cons, sample)     # every case's probability under the stored draw
    groups: dict[str, list[str]] = {}
    named = any(c.system for c in cases)
    for c in cases:
        groups.setdefault((c.system or UNNAMED) if named else "all", []).append(c.id)
    systems: dict[str, dict[str, tuple[list[float], list[float], list[float]]]] = {}
    for group, ids in groups.items():
        in_sample = [cid for cid in ids if cid in prob]
        note = ("ppi_design_changed" if design is None
                else "ppi_unequal_probabilities" if in_sample and not _equal([design.get(cid, 0.0) for cid in ids])
                else None)
        if note is not None:
            if in_sample and note not in out.notes:
                out.notes.append(note)
            continue
        for k in keys:
            every = [v for cid in ids if (v := panel_value(by_id[cid], k)) is not None] if ids else []
            pairs = [(h, p) for cid in in_sample if (h := human_value(review, cid, k)) is not None
                     and (p := panel_value(by_id[cid], k)) is not None]
            y = [h for h, _ in pairs]
            yhat = [p for _, p in pairs]
            if not y:
                continue
            out.ppi.append(PpiEstimate(group=group, key=k,
                                       ppi=ppi_mean(y, yhat, every, unlabelled_includes_labelled=True),
                                       human=human_mean(y), panel=panel_mean(every)))
            systems.setdefault(group, {})[k] = (y, yhat, every)
    names = [g for g in groups if g in systems] if named else []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for k in keys:
                if k in systems[a] and k in systems[b]:
                    out.ppi_differences.append(PpiDifference(
                        a=a, b=b, key=k, difference=ppi_difference(systems[a][k], systems[b][k],
                                                                   unlabelled_includes_labelled=True)))
