"""The read model of a run: everything stored, read back in one pass, every score derived once.

:func:`read_run` is the only place results are loaded from a store; analysis, outputs, reports and
the Python API all work from the :class:`StoredRun` it returns.

Grounding (:mod:`consensus_eval.domain.grounding`) is computed here too, once per read: every
deduction's and fixed penalty's evidence located in its case (:func:`ground_all`, keyed by deduction id
``{request_hash}#d{i}`` / ``{request_hash}#p{i}``). With ``ungrounded: drop`` the scores are derived
without the deductions whose evidence was not found (the stored reply and judgment are untouched).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from pydantic import BaseModel, ValidationError

from consensus_eval._errors import InputError, format_validation_error
from consensus_eval._gc import gc_paused_call
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.construct import shared_copy
from consensus_eval.domain.grounding import CaseGrounder, Grounding
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.rubric import Criterion, Rubric
from consensus_eval.domain.scoring import CategoryScore, DimensionScore, derive
from consensus_eval.domain.sections import Sections
from consensus_eval.execution.pricing import saving_per_cached_token
from consensus_eval.execution.store import CallRecord, Store


def derive_all(rubric: Rubric, records: Iterable[CallRecord],
               cases: Iterable[Case] = ()) -> dict[str, DimensionScore]:
    """Re-derived score of every ``ok`` record, by request hash (failed calls have none). ``cases``: the
    run's cases, whose own ``criteria`` a ``criteria`` dimension without criteria of its own scores by.

    Calls whose judgments score alike share one score object (:class:`Deriver`): a score is a value,
    never changed once derived, and a large run has far fewer distinct scores than calls."""
    deriver = Deriver(rubric, cases)
    return {r.request_hash: deriver(r.dimension, r.judgment, r.case_id)
            for r in records if r.status == "ok" and r.judgment is not None}


class Deriver:
    """:func:`~consensus_eval.domain.scoring.derive` with a memory: judgments that give the same inputs
    to the derivation (dimension, each deduction's category, type and points in order, the fixed
    penalties' ids in order, the claimed score and stars) get the same :class:`DimensionScore` object,
    derived once; the category lines of the scores derived are shared the same way, and every object
    made has its class's shared fields set (:mod:`consensus_eval.domain.construct`). Values are those
    ``derive`` gives, to the bit (floats are compared by their exact value and sign).

    The other kinds' inputs are part of the key too: a likert ``rating``; a criteria dimension's verdicts
    and the criteria they are scored by (the rubric's own, else the case's, from ``cases`` by the
    ``case_id`` a call gives)."""

    def __init__(self, rubric: Rubric, cases: Iterable[Case] = ()) -> None:
        self.rubric = rubric
        self._scores: dict[tuple[object, ...], DimensionScore] = {}
        self._categories: dict[tuple[object, ...], CategoryScore] = {}
        per_case = any(d.kind == "criteria" and not d.criteria for d in rubric.dimensions)
        #: the cases' own criteria, by case id (only when a criteria dimension reads them)
        self._criteria: dict[str, list[Criterion]] = (
            {c.id: c.criteria for c in cases if c.criteria is not None} if per_case else {})

    def __call__(self, dimension: str, judgment: Judgment, case_id: str | None = None) -> DimensionScore:
        """``derive(rubric.dimension(dimension), judgment, case criteria)``, or the same score derived before."""
        key: tuple[object, ...] = (
            dimension, tuple((d.category, d.type, _exact(d.points)) for d in judgment.deductions),
            tuple(p.id for p in judgment.fixed_penalties), _exact(judgment.claimed_score), judgment.claimed_stars)
        criteria: list[Criterion] | None = None
        if judgment.rating is not None or judgment.verdicts:
            if judgment.verdicts and case_id is not None:
                criteria = self._criteria.get(case_id)
            key = (*key, judgment.rating, tuple((v.id, v.met) for v in judgment.verdicts),
                   tuple((c.id, _exact(c.points)) for c in criteria or ()))
        hit = self._scores.get(key)
        if hit is None:
            hit = self._scores[key] = derive(self.rubric.dimension(dimension), judgment, criteria)
            cats = hit.categories
            for i, c in enumerate(cats):
                ckey = (c.id, c.name, _exact(c.cap), _exact(c.deducted), _exact(c.taken), c.n)
                cats[i] = self._categories.setdefault(ckey, c)
        return hit


def _exact(x: float | None) -> object:
    """A float as a key that tells apart what ``==`` does not (0.0 and -0.0); None as is."""
    return None if x is None else float(x).hex()


def evidence_of(rec: CallRecord) -> Iterator[tuple[str, str]]:
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


def ground_all(rubric: Rubric, cases: Sequence[Case], records: Iterable[CallRecord]) -> dict[str, Grounding]:
    """The grounding of every deduction and fixed penalty of the ok records, by deduction id.

    One :class:`~consensus_eval.domain.grounding.CaseGrounder` per case (its texts folded once, each
    distinct quote searched once), dropped when the case is done: time and memory are linear in the
    number of cases. The conversation is searched as the prompt renders it (``rubric.roles``).
    """
    by_case: dict[str, list[CallRecord]] = {}
    for r in records:
        if r.status == "ok" and r.judgment is not None:
            by_case.setdefault(r.case_id, []).append(r)
    out: dict[str, Grounding] = {}
    sections = Sections.of(rubric)
    for case in cases:
        recs = by_case.get(case.id)
        if not recs:
            continue
        grounder = CaseGrounder(case.record, rubric.conversation_text(case), sections)
        for r in recs:
            for did, evidence in evidence_of(r):
                out[did] = grounder.ground(evidence)   # built with shared fields sets (domain/grounding.py)
    return out


#: a case's field left out of its dump while unset (a criteria rubric's per-case criteria)
_CASE_OPTIONAL = frozenset({"criteria"})


def _compact_case(case: Case) -> Case:
    """``case`` and its turns as objects sharing their classes' fields sets, the roles interned
    (:mod:`consensus_eval.domain.construct`; the same values)."""
    if isinstance(case.conversation, list):
        return shared_copy(case, defaults_given=_CASE_OPTIONAL,
                           conversation=[shared_copy(t, role=sys.intern(t.role)) for t in case.conversation])
    return shared_copy(case, defaults_given=_CASE_OPTIONAL)


def without_ungrounded(rec: CallRecord, grounding: dict[str, Grounding]) -> Judgment | None:
    """The call's judgment without the deductions and fixed penalties whose evidence is not grounded
    (not found, or no quote), or None when every one is grounded (``ungrounded: drop``). Its claimed
    score and stars are None: the judge's claim was about every deduction it gave
    (:meth:`StoredRun.score_as_judged` keeps that comparison)."""
    j = rec.judgment
    if j is None:
        return None
    h = rec.request_hash
    keep_d = [d for i, d in enumerate(j.deductions) if _grounded(grounding, f"{h}#d{i}")]
    keep_p = [p for i, p in enumerate(j.fixed_penalties) if _grounded(grounding, f"{h}#p{i}")]
    if len(keep_d) == len(j.deductions) and len(keep_p) == len(j.fixed_penalties):
        return None
    # the judge claimed a score for all its deductions, not for these: no claim to compare with
    return j.model_copy(update={"deductions": keep_d, "fixed_penalties": keep_p,
                                "claimed_score": None, "claimed_stars": None})


def drop_ungrounded(rubric: Rubric, records: Iterable[CallRecord], grounding: dict[str, Grounding],
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


class JudgeUsage(BaseModel):
    """One judge's calls over a run: ``ok`` / ``failed`` calls, HTTP ``attempts`` (re-asks and retries
    included), tokens, and ``cost`` in USD (calls whose cost is unknown count 0 here).

    ``cached_tokens`` are the prompt tokens the provider served from its prompt cache (billed at its
    cache rate, included in ``cost`` that way); ``cache_hit_rate`` is their share of ``prompt_tokens``
    (None without prompt tokens); ``saved`` the USD those hits saved against the full input price
    (:func:`consensus_eval.execution.pricing.saving_per_cached_token`; None when the judge's prices
    are unknown).
    """

    ok: int = 0
    failed: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float = 0.0
    cache_hit_rate: float | None = None
    saved: float | None = None


def usage_by_judge(records: Iterable[CallRecord],
                   saving_per_cached_token: Mapping[str, float | None] | None = None) -> dict[str, JudgeUsage]:
    """Per judge: calls ok / failed, attempts, tokens and cost, summed over every stored call; the
    cache hit rate, and the money saved from each judge's USD saved per cached token (by judge name)."""
    totals: dict[str, JudgeUsage] = {}
    for r in records:
        t = totals.setdefault(r.judge, JudgeUsage())
        if r.status == "ok":
            t.ok += 1
        else:
            t.failed += 1
        t.attempts += r.attempts
        t.prompt_tokens += r.prompt_tokens or 0
        t.cached_tokens += r.cached_tokens or 0
        t.completion_tokens += r.completion_tokens or 0
        t.reasoning_tokens += r.reasoning_tokens or 0
        t.cost += r.cost or 0.0
    for name, t in totals.items():
        t.cache_hit_rate = t.cached_tokens / t.prompt_tokens if t.prompt_tokens else None
        rate = (saving_per_cached_token or {}).get(name)
        t.saved = None if rate is None else t.cached_tokens * rate
    return totals


@dataclass(frozen=True)
class StoredRun:
    """A run as stored: its context (rubric, config, cases), every call of the current plan, and the
    score re-derived from each successful call's deductions (``scores``, by request hash).

    ``records`` carry ``raw`` (the judge's reply as given) unless read with ``replies=False`` (a rebuild:
    :func:`read_run`); ``scores`` may share one object between calls that score alike (:class:`Deriver`).
    ``planned`` is the number of calls the plan has; ``len(records)`` of them are stored (ok or failed);
    ``missing`` counts, per case, the planned calls with nothing stored yet (an interrupted run).

    ``grounding``: where each deduction's evidence is in its case, by deduction id (``{request_hash}#d{i}``
    / ``#p{i}``; :func:`ground_all`). ``judged_scores``: under ``ungrounded: drop``, the score derived
    from every deduction the judge gave, for the calls that lost some (``scores`` excludes them); empty
    otherwise. What the judge's own claim is compared with: :meth:`score_as_judged`.
    """

    rubric: Rubric
    config: EvalConfig
    cases: list[Case]
    invalid_lines: list[str]
    records: list[CallRecord]
    scores: dict[str, DimensionScore]
    planned: int
    missing: dict[str, int]
    grounding: dict[str, Grounding] = field(default_factory=dict)
    judged_scores: dict[str, DimensionScore] = field(default_factory=dict)
    #: planned calls not stored yet that are in a provider batch still running (``batch: true`` judges):
    #: rerunning ``score`` collects them; 0 when no batch is pending
    in_batches: int = 0

    def score_as_judged(self, request_hash: str) -> DimensionScore | None:
        """The score derived from every deduction the judge gave (before ``drop``), None for a failed call."""
        return self.judged_scores.get(request_hash) or self.scores.get(request_hash)

    @property
    def judges(self) -> list[str]:
        """Judge names, in panel order."""
        return [j.name for j in self.config.judges]

    @property
    def missing_calls(self) -> int:
        """Planned calls with nothing stored yet (0 for a finished run)."""
        return sum(self.missing.values())

    @cached_property
    def usage(self) -> dict[str, JudgeUsage]:
        """Per judge: calls, attempts, tokens, cost and cache savings (:func:`usage_by_judge`)."""
        return usage_by_judge(self.records, {j.name: saving_per_cached_token(j) for j in self.config.judges})


@gc_paused_call
def read_run(store: Store, *, replies: bool = True) -> StoredRun:
    """Read a run back from its store (no judge is called): one read of each table, one derivation.

    ``replies=False``: the records without the judges' raw replies (``raw`` None; what a rebuild reads:
    nothing after the judge layer uses them, and they are a large part of a run's memory).

    A run context this version no longer accepts (written by an older consensus-eval whose checks
    were looser) is an :class:`InputError` saying so, not a traceback.
    """
    try:
        rubric = Rubric.model_validate(store.get_meta("rubric"))
        config = EvalConfig.model_validate(store.get_meta("config"))
        cases = [_compact_case(Case.model_validate(c)) for c in store.get_meta("cases", [])]
    except ValidationError as e:
        raise InputError(f"{store.path}: the run recorded in this store is not valid for this version of "
                         f"consensus-eval (rerun `score` into a new folder):\n{format_validation_error(e)}") from None
    records = store.calls(replies=replies)
    stored = {r.request_hash for r in records}
    plan = store.plan()
    missing: dict[str, int] = {}
    batched = store.batched_hashes()
    in_batches = 0
    for p in plan:
        if p.request_hash not in stored:
            missing[p.case_id] = missing.get(p.case_id, 0) + 1
            in_batches += p.request_hash in batched
    grounding = ground_all(rubric, cases, records)
    scores = derive_all(rubric, records, cases)
    judged = drop_ungrounded(rubric, records, grounding, scores, cases) if config.ungrounded == "drop" else {}
    return StoredRun(rubric=rubric, config=config, cases=cases, invalid_lines=store.get_meta("invalid_lines", []),
                     records=records, scores=scores, planned=len(plan), missing=missing, grounding=grounding,
                     judged_scores=judged, in_batches=in_batches)
