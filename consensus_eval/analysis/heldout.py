"""Did a change bring the judges closer to the clinicians? ``compare RUN_A RUN_B --against-clinicians``.

Two runs of the same cases (a prompt changed, a judge model switched), with the same clinicians' labels (``human
copy A B``) and the same spot check. Measured on the spot check's **held-out** part only
(:mod:`~consensus_eval.analysis.spotcheck`: the tuning part is what a prompt author looked at and may have fitted),
for each judge both runs have and for the panel:

- per dimension and total, the change ``B - A`` of ICC(A,1), MAE and bias against the clinicians' score (the
  reference of :func:`~consensus_eval.analysis.human.human_value`: the adjudicator's, else the reviewers' mean),
  each with a paired bootstrap 95% interval over the cases (:mod:`~consensus_eval.analysis.paired_boot`; none below
  :data:`~consensus_eval.analysis.paired_boot.MIN_CASES` cases, and the reason);
- the cases used: those of the held-out part a clinician scored, each rater's complete ones (scored by it in both
  runs).

**Looks.** Every comparison of two different versions on a held-out part is a look at it (:class:`Look`); the
more versions are tried against it, the more the best of them is chosen for its luck on these cases, and the less
its held-out figures say about new ones. A look is recorded in both runs' stores (``heldout_looks``; a copy of the
labels carries them on), identified by the held-out part and the two versions (what their judges were asked on it:
the request hashes), so the same comparison made again is one look, and a version compared with itself none. The
comparison says how many looks the part has had, and warns past :data:`LOOKS_WARN` (docs/qc-loop.md says why 3).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from consensus_eval._errors import InputError
from consensus_eval.analysis import compare
from consensus_eval.analysis.agreement import judge_value, panel_value
from consensus_eval.analysis.compare import CategoryChange, bound_words, category_changes, condition_parts, holds
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.human import HumanReview, human_value
from consensus_eval.analysis.judge_validity import PANEL, DeductionItems, deduction_items
from consensus_eval.analysis.paired_boot import (
    N_BOOT,
    SCORE_FIGURES,
    Change,
    multiplicities,
    score_changes,
    verdict_changes,
)
from consensus_eval.analysis.results import Results
from consensus_eval.execution.store import HeldoutLook, SpotCheckRecord

#: looks at one held-out part past which a comparison warns (docs/qc-loop.md, "Looks")
LOOKS_WARN = 3
#: the key of the deduction items' figures (kappa, f1) in ``--fail-if``
ITEMS = "items"
#: the seed of the paired bootstrap (the same runs give the same intervals)
SEED = 36


class FigureChange(Change):
    """One figure of agreement with the clinicians in A and in B, ``diff`` = B - A, and its paired bootstrap
    interval (:class:`~consensus_eval.analysis.paired_boot.Change`), over ``n`` cases."""

    n: int


class RaterChange(BaseModel):
    """One rater (a judge both runs have, or the panel): per key (dimension id or ``total``) per figure (``icc``,
    ``mae``, ``bias``) its :class:`FigureChange`."""

    rater: str
    scores: dict[str, dict[str, FigureChange]]
    #: a judge's yes / no on the deduction items of the labelled held-out cases against the clinicians'
    #: (:func:`~consensus_eval.analysis.judge_validity.deduction_items`, the clinicians' verdicts as given in A):
    #: ``kappa`` and ``f1`` (macro), with paired bootstrap intervals over the cases; empty for the panel and
    #: without items
    verdicts: dict[str, FigureChange] = {}


class Look(BaseModel):
    """What identifies this comparison's look at the held-out part (:class:`HeldoutLook` without when and where)."""

    heldout: str
    version_a: str
    version_b: str

    @property
    def look_id(self) -> str:
        """The look's id: of the held-out part and the two versions, in either order."""
        return _digest([self.heldout, *sorted([self.version_a, self.version_b])])


class ClinicianComparison(BaseModel):
    """``b`` against ``a`` on the held-out part (module docstring): ``heldout`` how many cases the part has,
    ``labelled`` how many of them a clinician scored; ``raters`` per judge and the panel; ``looks`` the looks
    the part has had (this one included, when the versions differ), ``warn`` past :data:`LOOKS_WARN`;
    ``look``: this comparison's look (None when B asked its judges exactly what A did on the part: no look);
    ``recorded`` False when it could not be written to a store (``notes`` says why); ``only_a`` / ``only_b``:
    judges of one run only (not compared)."""

    a: str
    b: str
    heldout: int
    labelled: int
    raters: dict[str, RaterChange]
    looks: int = 0
    warn: bool = False
    look: Look | None = None
    recorded: bool = True
    only_a: list[str] = []
    only_b: list[str] = []
    notes: list[str] = []
    #: per deduction category, what B gained or lost against A on the labelled held-out cases (the panel's judges)
    categories: list[CategoryChange] = []


def _digest(parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]


def heldout_id(sample: Sequence[SpotCheckRecord]) -> str:
    """The held-out part of a spot check as one id: the draw's seed and the part's cases."""
    cases = sorted(r.case_id for r in sample if r.part == "heldout")
    return _digest([sample[0].seed if sample else None, cases])


def version_id(results: Results, case_ids: set[str]) -> str:
    """A run's version on some cases: what its judges were asked there (the request hashes of its calls: the
    judge, model, prompt, rubric and case read), as one id."""
    return _digest(sorted({r.request_hash for r in results.records if r.case_id in case_ids}))


def _held_out(a: Results, b: Results, name_a: str, name_b: str) -> list[str]:
    """The held-out cases of A's spot check, after checking that B has the same spot check."""
    if not a.spot_checks:
        raise InputError(f"{name_a} has no spot check: draw one (consensus-eval audit {name_a} --spot-check N "
                         "--seed S), have clinicians score it, then copy the labels to the other run (consensus-eval "
                         f"human copy {name_a} {name_b})")
    if any(r.part is None for r in a.spot_checks):
        raise InputError(f"{name_a}'s spot check was drawn before spot checks had a held-out part: ask for the same "
                         f"draw again to split it (consensus-eval audit {name_a} --spot-check {len(a.spot_checks)} "
                         f"--seed {a.spot_checks[0].seed})")
    mine = [(r.case_id, r.part) for r in a.spot_checks]
    if [(r.case_id, r.part) for r in b.spot_checks] != mine:
        raise InputError(f"{name_b} does not have {name_a}'s spot check: copy the labels and the spot check with "
                         f"consensus-eval human copy {name_a} {name_b}")
    ids_b = {c.id for c in b.cases}
    missing = [cid for cid, _ in mine if cid not in ids_b]
    if missing:
        raise InputError(f"{name_b} lacks {len(missing)} case(s) of the spot check ({', '.join(missing[:10])}): "
                         "compare two runs of the same cases")
    return [cid for cid, part in mine if part == "heldout"]


def _same_labels(ra: HumanReview, rb: HumanReview | None, cases: Sequence[str], keys: Sequence[str],
                 name_a: str, name_b: str) -> None:
    """Refuse runs whose clinicians' scores of the held-out cases differ."""
    differ = [cid for cid in cases
              if any(human_value(ra, cid, k) != (human_value(rb, cid, k) if rb is not None else None) for k in keys)]
    if differ:
        raise InputError(f"the clinicians' scores of {len(differ)} held-out case(s) differ between {name_a} and "
                         f"{name_b} ({', '.join(differ[:10])}): compare with the same labels (consensus-eval human "
                         f"copy {name_a} {name_b})")


def compare_with_clinicians(a: Results, b: Results, name_a: str = "A", name_b: str = "B", *,
                            looks: Sequence[HeldoutLook] = (), n_boot: int = N_BOOT) -> ClinicianComparison:
    """``b`` against ``a`` on the held-out part of their spot check (module docstring). ``looks``: the looks the
    runs' stores hold (this one is counted too, when the versions differ). Raises :class:`InputError` when the runs
    are not two runs of the same cases with the same spot check and labels, or no held-out case is labelled."""
    if [d.id for d in a.rubric.dimensions] != [d.id for d in b.rubric.dimensions]:
        raise InputError(f"{name_a} and {name_b} use different rubrics: their agreement with clinicians cannot be "
                         "compared")
    held = _held_out(a, b, name_a, name_b)
    keys = [*(d.id for d in a.rubric.dimensions), "total"]
    ra = a.review
    if ra is None:
        raise InputError(f"{name_a} has no clinician's label: score its spot check first (consensus-eval audit "
                         f"{name_a} --spot-check N --export SPOT.csv, then human import)")
    labelled = [cid for cid in held if any(human_value(ra, cid, k) is not None for k in keys)]
    if not labelled:
        raise InputError(f"no case of {name_a}'s held-out part ({len(held)} cases) has a clinician's score: "
                         "score them (the spot check's sheet or the review app) before comparing on them")
    _same_labels(ra, b.review, labelled, keys, name_a, name_b)
    cons_a = {c.case_id: c for c in a.consensus}
    cons_b = {c.case_id: c for c in b.consensus}
    judges = [j for j in a.judges if j in b.judges]
    items_a = deduction_items(a.run, ra, labelled)
    items_b = deduction_items(b.run, ra, labelled)
    raters: dict[str, RaterChange] = {}
    for rater in [*judges, PANEL]:
        scores: dict[str, dict[str, FigureChange]] = {}
        for k in keys:
            rows = [(va, vb, h) for cid in labelled
                    if (va := _value(cons_a.get(cid), rater, k)) is not None
                    and (vb := _value(cons_b.get(cid), rater, k)) is not None
                    and (h := human_value(ra, cid, k)) is not None]
            x = np.array(rows, dtype=float).reshape(-1, 3)
            counts = multiplicities(len(rows), n_boot, SEED) if rows and n_boot else np.empty((0, 0))
            got = score_changes(x[:, 0], x[:, 1], x[:, 2], counts) if len(rows) >= 2 else {
                f: Change(a=None, b=None, diff=None, why="few_cases") for f in SCORE_FIGURES}
            scores[k] = {f: FigureChange(n=len(rows), **c.model_dump()) for f, c in got.items()}
        raters[rater] = RaterChange(rater=rater, scores=scores,
                                    verdicts=_verdicts(items_a, items_b, rater, labelled, n_boot)
                                    if rater != PANEL else {})
    held_set = set(held)
    look = Look(heldout=heldout_id(a.spot_checks), version_a=version_id(a, held_set),
                version_b=version_id(b, held_set))
    same = look.version_a == look.version_b
    seen = {lk.look_id for lk in looks if lk.heldout == look.heldout}
    if not same:
        seen.add(look.look_id)
    return ClinicianComparison(a=name_a, b=name_b, heldout=len(held), labelled=len(labelled), raters=raters,
                               looks=len(seen), warn=len(seen) > LOOKS_WARN, look=None if same else look,
                               only_a=[j for j in a.judges if j not in b.judges],
                               only_b=[j for j in b.judges if j not in a.judges],
                               categories=category_changes(a, b, [(cid, cid) for cid in labelled]))


def _verdicts(items_a: DeductionItems, items_b: DeductionItems, judge: str, cases: Sequence[str],
              n_boot: int) -> dict[str, FigureChange]:
    """Kappa and macro-F1 of ``judge``'s yes / no in A and in B on A's deduction items the clinicians decided,
    and their paired changes over the resamples of ``cases`` (:func:`verdict_changes`)."""
    index = {cid: i for i, cid in enumerate(cases)}
    rows = [(ya, yb, ref, index[item[0]]) for item in items_a.items
            if (ref := items_a.reference(item)) is not None and (ya := items_a.judge_says(judge, item)) is not None
            and (yb := items_b.judge_says(judge, item)) is not None]
    if not rows:
        return {}
    x = np.array(rows, dtype=float)
    counts = multiplicities(len(cases), n_boot, SEED) if n_boot else np.empty((0, 0))
    got = verdict_changes(x[:, 0] > 0, x[:, 1] > 0, x[:, 2] > 0, x[:, 3].astype(int), counts)
    return {f: FigureChange(n=len(rows), **c.model_dump()) for f, c in got.items()}


def look_record(c: ClinicianComparison, run_a: str, run_b: str) -> HeldoutLook | None:
    """The look of comparison ``c`` as a store keeps it (None: the versions are the same, no look)."""
    if c.look is None:
        return None
    return HeldoutLook(look_id=c.look.look_id, heldout=c.look.heldout, version_a=c.look.version_a,
                       version_b=c.look.version_b, run_a=run_a, run_b=run_b, at=time.time())


def _value(c: CaseConsensus | None, rater: str, key: str) -> float | None:
    if c is None:
        return None
    v = panel_value(c, key) if rater == PANEL else judge_value(c, rater, key)
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


# --------------------------------------------------------------------------- --fail-if

_CONDITION = re.compile(r"^\s*(?:(?P<rater>[\w.-]+):)?(?P<metric>icc|mae|bias|kappa|f1)\.(?P<key>[A-Za-z_][\w-]*)"
                        r"(?:\.(?P<bound>mean|low|high))?\s*(?P<op><=|>=|<|>)\s*"
                        r"(?P<value>[+-]?\d+(?:\.\d*)?|[+-]?\.\d+)\s*$")


class Condition(compare.Condition):
    """``[rater:]metric.key[.bound] op value``: fails when the change (``B - A``) of ``rater``'s (default: the
    panel's) ``metric`` on ``key`` (``bound``: ``mean`` the change itself, ``low`` / ``high`` its interval's
    bounds) satisfies ``op value``."""

    rater: str
    metric: Literal["icc", "mae", "bias", "kappa", "f1"]


def parse_conditions(texts: Sequence[str], keys: Sequence[str], raters: Sequence[str]) -> list[Condition]:
    """Conditions of ``--fail-if`` with ``--against-clinicians`` (several per text, separated by ``,`` or `` or ``);
    an :class:`InputError` names one that does not parse, an unknown key or rater, and an empty one."""
    out = []
    for text in texts:
        for part in condition_parts(text, "METRIC.KEY OP NUMBER, e.g. \"icc.total < -0.05\""):
            m = _CONDITION.match(part)
            if m is None:
                raise InputError(f"--fail-if {part.strip()!r}: with --against-clinicians write [RATER:]METRIC.KEY OP "
                                 "NUMBER, e.g. \"icc.total < -0.05\" or \"mae.accuracy.low > 0\" (METRIC: icc, mae, "
                                 "bias with KEY total or a dimension id, kappa, f1 with KEY items; optionally "
                                 ".low/.high/.mean; RATER: a judge, default the panel; OP: < <= > >=)")
            g = m.groupdict()
            if g["metric"] in ("kappa", "f1") and g["key"] != ITEMS:
                raise InputError(f"--fail-if {part.strip()!r}: {g['metric']} is of the deduction items: write "
                                 f"{g['metric']}.{ITEMS}, e.g. \"{g['metric']}.{ITEMS} < 0\"")
            if g["metric"] not in ("kappa", "f1") and g["key"] not in keys:
                raise InputError(f"--fail-if {part.strip()!r}: no key {g['key']!r}; the keys are {', '.join(keys)}")
            rater = g["rater"] or PANEL
            if rater not in raters:
                raise InputError(f"--fail-if {part.strip()!r}: no rater {rater!r}; the raters are {', '.join(raters)}")
            out.append(Condition.model_validate({"text": " ".join(part.split()), "rater": rater,
                                                 "metric": g["metric"], "key": g["key"], "bound": g["bound"] or "mean",
                                                 "op": g["op"], "value": float(g["value"])}))
    return out


def failed_conditions(conditions: Sequence[Condition], c: ClinicianComparison) -> list[str]:
    """The reasons of the conditions that hold (empty: the gate passes). A condition whose figure is missing (too
    few cases, no interval) holds: a gate never passes on nothing."""
    reasons = []
    for cond in conditions:
        if cond.rater not in c.raters:
            reasons.append(f"{cond.text}: {cond.rater} is not a judge of {c.b}: nothing to check")
            continue
        rc = c.raters[cond.rater]
        fig = rc.verdicts.get(cond.metric) if cond.key == ITEMS else rc.scores[cond.key][cond.metric]
        if fig is None:
            reasons.append(f"{cond.text}: no deduction item the clinicians decided on the held-out part for "
                           f"{cond.rater}: nothing to check")
            continue
        figure = {"mean": fig.diff, "low": fig.low, "high": fig.high}[cond.bound]
        if figure is None:
            reasons.append(f"{cond.text}: no {cond.bound} to check ({fig.n} held-out cases"
                           + (f"; {fig.why}" if fig.why else "") + ")")
            continue
        if holds(figure, cond.op, cond.value):
            reasons.append(f"{cond.text}: the {bound_words(cond.bound)} of {cond.rater}'s {cond.metric} on {cond.key} "
                           f"({c.b} - {c.a}, held out) is {figure:+.3f}")
    return reasons
