"""What a run's stored calls say, derived once per read: every score re-derived from the judges' itemized
deductions (:func:`derive_all`), every quote grounded in its case (:func:`ground_all`), and under
``ungrounded: drop`` the scores derived without the deductions whose evidence was not found
(:func:`drop_ungrounded`; the stored reply and judgment are untouched).

:func:`read_run` is the only place results are loaded from a store for analysis: the run as stored
(:func:`~consensus_eval.execution.stored_run.read_stored`) plus these. Grounding
(:mod:`consensus_eval.domain.grounding`) is keyed by deduction id ``{request_hash}#d{i}`` / ``#p{i}`` (``#e{i}``,
``#v{i}`` for the other kinds).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace

from consensus_eval._gc import gc_paused_call
from consensus_eval.domain.cases import Case
from consensus_eval.domain.grounding import CaseGrounder, Grounding, normalise_all
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.scoring import AnyJudgment, Deriver, DimensionScore
from consensus_eval.domain.sections import Sections
from consensus_eval.execution.store import Store, StoredCall
from consensus_eval.execution.stored_run import Span, StoredRun, read_stored, read_stored_by_cases


@gc_paused_call
def read_run(store: Store, *, replies: bool = True) -> StoredRun:
    """Read a run back from its store (no judge is called; :func:`~consensus_eval.execution.stored_run.read_stored`)
    with every score derived once and every quote grounded once (:func:`derived`).

    ``replies=False``: the records without the judges' raw replies (what a rebuild reads)."""
    return derived(read_stored(store, replies=replies))


def read_run_by_cases(store: Store, per_batch: int = 2000, *, replies: bool = True,
                      span: Span | None = None) -> Iterator[StoredRun]:
    """:func:`read_run`, ``per_batch`` cases at a time
    (:func:`~consensus_eval.execution.stored_run.read_stored_by_cases`, whose
    :class:`~consensus_eval.execution.store.PlanOrderError` it passes on): each run it yields is derived and
    grounded as :func:`read_run` derives and grounds the whole run, since a call's score and groundings depend on
    its case alone. ``span``: only those cases (:func:`~consensus_eval.execution.stored_run.spans`)."""
    for part in read_stored_by_cases(store, per_batch, replies=replies, span=span):
        yield derived(part)


@gc_paused_call
def derived(run: StoredRun) -> StoredRun:
    """``run`` with its ``grounding``, ``scores`` and (``ungrounded: drop``) ``judged_scores`` computed."""
    grounding = ground_all(run.rubric, run.cases, run.records)
    scores = derive_all(run.rubric, run.records, run.cases)
    judged = (drop_ungrounded(run.rubric, run.records, grounding, scores, run.cases)
              if run.config.ungrounded == "drop" else {})
    return replace(run, scores=scores, grounding=grounding, judged_scores=judged)


def derive_all(rubric: Rubric, records: Iterable[StoredCall],
               cases: Iterable[Case] = ()) -> dict[str, DimensionScore]:
    """Re-derived score of every ``ok`` record, by request hash (failed calls have none). ``cases``: the
    run's cases, whose own ``criteria`` a ``criteria`` dimension without criteria of its own scores by.

    Calls whose judgments score alike share one score object (:class:`~consensus_eval.domain.scoring.Deriver`):
    a score is a value, never changed once derived, and a large run has far fewer distinct scores than calls."""
    deriver = Deriver(rubric, cases)
    return {r.request_hash: deriver(r.dimension, r.judgment, r.case_id)
            for r in records if r.status == "ok" and r.judgment is not None}


def evidence_of(rec: StoredCall) -> Iterator[tuple[str, str]]:
    """``(deduction id, evidence)`` of every deduction (``#d{i}``) and fixed penalty (``#p{i}``) of a call;
    of the other kinds, every quote of a likert rating (``#e{i}``) and every criterion verdict's (``#v{i}``; a
    verdict ``not met`` without a quote has none to look for)."""
    if rec.status != "ok" or rec.judgment is None:
        return
    for i, d in enumerate(rec.judgment.deductions):
        yield f"{rec.request_hash}#d{i}", d.evidence
    for i, p in enumerate(rec.judgment.fixed_penalties):
        yield f"{rec.request_hash}#p{i}", p.evidence
    for i, e in enumerate(rec.judgment.evidence):
        yield f"{rec.request_hash}#e{i}", e
    for i, v in enumerate(rec.judgment.verdicts):
        if v.evidence or v.met:  # a criterion not met may have nothing to quote
            yield f"{rec.request_hash}#v{i}", v.evidence


def evidence_ids(rec: StoredCall) -> list[str]:
    """The deduction ids of :func:`evidence_of`, in its order, as one list made without a generator and without the
    evidence: what a count by id needs (:func:`~consensus_eval.analysis.judge_quality.judge_quality`, once per call
    of a run)."""
    j = rec.judgment
    if rec.status != "ok" or j is None:
        return []
    h = rec.request_hash
    ids = [f"{h}#d{i}" for i in range(len(j.deductions))]
    if j.fixed_penalties:
        ids += [f"{h}#p{i}" for i in range(len(j.fixed_penalties))]
    if j.evidence:
        ids += [f"{h}#e{i}" for i in range(len(j.evidence))]
    if j.verdicts:
        ids += [f"{h}#v{i}" for i, v in enumerate(j.verdicts) if v.evidence or v.met]
    return ids


def ground_all(rubric: Rubric, cases: Sequence[Case], records: Iterable[StoredCall]) -> dict[str, Grounding]:
    """The grounding of every deduction and fixed penalty of the ok records, by deduction id.

    One :class:`~consensus_eval.domain.grounding.CaseGrounder` per case (its texts folded once, each
    distinct quote searched once), dropped when the case is done: time and memory are linear in the
    number of cases. The texts of :data:`_FOLDED_TOGETHER` cases at a time are folded in one pass
    (:func:`~consensus_eval.domain.grounding.normalise_all`). The conversation is searched as the prompt
    renders it (``rubric.roles``).
    """
    by_case: dict[str, list[StoredCall]] = {}
    for r in records:
        if r.status == "ok" and r.judgment is not None:
            by_case.setdefault(r.case_id, []).append(r)
    out: dict[str, Grounding] = {}
    sections = Sections.of(rubric)
    with_calls = [case for case in cases if by_case.get(case.id)]
    for start in range(0, len(with_calls), _FOLDED_TOGETHER):
        batch = with_calls[start:start + _FOLDED_TOGETHER]
        texts = [text for case in batch for text in (case.record, rubric.conversation_text(case))]
        folded = normalise_all(texts)
        for k, case in enumerate(batch):
            ground = CaseGrounder(texts[2 * k], texts[2 * k + 1], sections, (folded[2 * k], folded[2 * k + 1])).ground
            for r in by_case[case.id]:
                j = r.judgment
                assert j is not None   # by_case holds the ok calls with a judgment
                if j.evidence or j.verdicts:   # the other kinds' quotes: in evidence_of's order
                    for did, evidence in evidence_of(r):
                        out[did] = ground(evidence)
                    continue
                h = r.request_hash   # deductions then fixed penalties, as evidence_of gives them
                for i, d in enumerate(j.deductions):
                    out[f"{h}#d{i}"] = ground(d.evidence)
                for i, p in enumerate(j.fixed_penalties):
                    out[f"{h}#p{i}"] = ground(p.evidence)
    return out


#: cases whose texts :func:`ground_all` folds in one pass (:func:`~consensus_eval.domain.grounding.normalise_all`)
_FOLDED_TOGETHER = 256


def without_ungrounded(rec: StoredCall, grounding: dict[str, Grounding]) -> AnyJudgment | None:
    """The call's judgment without the deductions and fixed penalties whose evidence is not grounded
    (not found, or no quote), or None when every one is grounded (``ungrounded: drop``). Its claimed
    score and stars are None: the judge's claim was about every deduction it gave
    (:meth:`~consensus_eval.execution.stored_run.StoredRun.score_as_judged` keeps that comparison)."""
    j = rec.judgment
    if j is None:
        return None
    h = rec.request_hash
    keep_d = [d for i, d in enumerate(j.deductions) if _grounded(grounding, f"{h}#d{i}")]
    keep_p = [p for i, p in enumerate(j.fixed_penalties) if _grounded(grounding, f"{h}#p{i}")]
    if len(keep_d) == len(j.deductions) and len(keep_p) == len(j.fixed_penalties):
        return None
    # the judge claimed a score for all its deductions, not for these: no claim to compare with
    if isinstance(j, Judgment):   # a record built in memory (a test, the API) rather than read back
        return j.model_copy(update={"deductions": keep_d, "fixed_penalties": keep_p,
                                    "claimed_score": None, "claimed_stars": None})
    return replace(j, deductions=tuple(keep_d), fixed_penalties=tuple(keep_p), claimed_score=None, claimed_stars=None)


def drop_ungrounded(rubric: Rubric, records: Iterable[StoredCall], grounding: dict[str, Grounding],
                    scores: dict[str, DimensionScore], cases: Iterable[Case] = ()) -> dict[str, DimensionScore]:
    """``ungrounded: drop``: re-derive, in ``scores``, the score of every call that has deductions not
    grounded, without them (:func:`without_ungrounded`); returns the scores they replaced (derived
    from every deduction the judge gave), by request hash."""
    judged: dict[str, DimensionScore] = {}
    deriver = Deriver(rubric, cases)
    for r in records:
        kept = without_ungrounded(r, grounding) if r.request_hash in scores else None
        if kept is not None:
            judged[r.request_hash] = scores[r.request_hash]
            scores[r.request_hash] = deriver(r.dimension, kept, r.case_id)
    return judged


def _grounded(grounding: dict[str, Grounding], did: str) -> bool:
    g = grounding.get(did)
    return g is None or g.grounded
