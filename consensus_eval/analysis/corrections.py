"""The clinicians' corrections of the judges in a run, as plain data
(:class:`~consensus_eval.domain.fewshot.Correction`): what few-shot examples are made of (:func:`few_shot`;
docs/rubrics.md, 'Few-shot examples from clinicians' corrections').

From the run's labels:

- a judge's deduction the reviewers disagreed with is a **false alarm**: the adjudicator's reference verdict when
  there is one, else ``disagree`` when every reviewer who gave a verdict on it disagreed; it keeps the deduction's
  type, quote, reason and points, the judge, and the reviewers' comments on it;
- a deduction a reviewer added (label ``added_deduction``: the judges missed it) is a **miss**: its type, the
  reviewer's evidence, points and comment.

Only the spot check's tuning part may feed a prompt: :func:`few_shot` gives
:func:`~consensus_eval.domain.fewshot.few_shot_examples` the tuning part's case ids, never the held-out part's.
"""

from __future__ import annotations

from collections import defaultdict

from consensus_eval._errors import InputError
from consensus_eval.analysis.audit import deductions_of
from consensus_eval.analysis.results import Results
from consensus_eval.analysis.spotcheck import tuning_ids
from consensus_eval.domain.fewshot import Correction, FewShot, few_shot_examples


def corrections(results: Results) -> list[Correction]:
    """Every correction the run's labels make (module docstring), in a fixed order (case, dimension, kind, type)."""
    deductions = {d.id: d for r in results.records if r.status == "ok" for d in deductions_of(results.rubric, r)}
    verdicts: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)   # (case, deduction) -> reviewer -> verdict
    reference: dict[tuple[str, str], str] = {}
    comments: dict[tuple[str, str], list[str]] = defaultdict(list)
    out: list[Correction] = []
    for lb in results.labels:
        if lb.kind == "verdict" and lb.deduction_id and isinstance(lb.value, str):
            key = (lb.case_id, lb.deduction_id)
            if lb.origin == "reference":
                reference[key] = lb.value
            else:
                verdicts[key][lb.reviewer] = lb.value
            if lb.comment:
                comments[key].append(lb.comment)
        elif lb.kind == "added_deduction" and lb.dimension and lb.value is not None:
            out.append(Correction(case_id=lb.case_id, dimension=lb.dimension, kind="missed", type=str(lb.value),
                                  evidence=lb.evidence or "", points=float(lb.points or 0.0), comment=lb.comment))
    for key in sorted({*verdicts, *reference}):
        given = reference.get(key)
        decided = given if given is not None else (
            "disagree" if verdicts[key] and set(verdicts[key].values()) == {"disagree"} else None)
        d = deductions.get(key[1])
        if decided != "disagree" or d is None:
            continue
        out.append(Correction(case_id=key[0], dimension=d.dimension, kind="false_alarm", type=d.type_id,
                              evidence=d.evidence, points=d.points, judge=d.judge, reason=d.reason,
                              comment="; ".join(comments[key]) or None))
    return sorted(out, key=lambda c: (c.case_id, c.dimension, c.kind, c.type, c.evidence, c.judge or ""))


def few_shot(spec: FewShot, results: Results, source: str) -> FewShot:
    """``spec`` with its examples made from ``results`` (the run ``source``, ``few_shot.from``): the corrections of
    its spot check's tuning part only. Raises :class:`InputError` when the run has no split spot check, names a
    dimension its rubric does not have, or has no correction on the tuning part."""
    dims = {d.id for d in results.rubric.dimensions}
    unknown = sorted(set(spec.dimensions or ()) - dims)
    if unknown:
        raise InputError(f"few_shot.dimensions: {', '.join(unknown)} not a dimension of the rubric "
                         f"{results.rubric.id!r} ({', '.join(sorted(dims))})")
    if not results.spot_checks:
        raise InputError(f"few_shot.from: {source} has no spot check: draw one (consensus-eval audit {source} "
                         "--spot-check N), have clinicians label its tuning part, then come back")
    if any(r.part is None for r in results.spot_checks):
        seed = results.spot_checks[0].seed
        raise InputError(f"few_shot.from: the spot check of {source} was drawn before spot checks were split into a "
                         f"tuning and a held-out part: ask for the same draw again to split it (consensus-eval audit "
                         f"{source} --spot-check {len(results.spot_checks)} --seed {seed})")
    tuning = tuning_ids(results.spot_checks)
    examples = few_shot_examples(tuning, corrections(results), {c.id: c.record for c in results.cases},
                                 per_dimension=spec.per_dimension, dimensions=spec.dimensions)
    if not examples:
        raise InputError(f"few_shot.from: no clinician's correction on the tuning part of {source}'s spot check "
                         f"({len(tuning)} cases): nothing to show the judges; review those cases first (a verdict "
                         "`disagree` on a deduction, or a deduction added)")
    return spec.model_copy(update={"examples": examples})
