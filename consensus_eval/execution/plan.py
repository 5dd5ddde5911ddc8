"""The plan: every call an evaluation needs (case x dimension x judge x run), each with its request hash.

A case gets ``runs`` runs per judge, or ``important_runs`` if it is important; a deterministic
judge gets one. Prompts are rendered only for judges that read them. A judge that asks every dimension
of a case in one request (``call: per_case``, :func:`whole_case`) still has one call per dimension here,
each carrying the whole-case prompt (rendered once per case); the judge coalesces them. Cases with the same
content plan the same requests, each under its own case; a request is made once (:func:`distinct`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from consensus_eval._errors import InputError
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.prompts import render, render_case
from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.store import PlannedCall
from consensus_eval.judges.base import Judge, WholeCase


@dataclass(frozen=True)
class Call:
    """A planned call with what it needs to run: the case, the dimension and the rendered prompt
    (empty for a judge that does not read prompts)."""

    planned: PlannedCall
    case: Case
    messages: list[dict[str, str]]


def request_hash(judge: Judge, rubric: Rubric, reads: object, run: int, dimension: str) -> str:
    """The identity of a call: the judge (its config identity and version), the rubric, the dimension,
    the run, and what the judge reads (``reads``): the exact prompt for a judge that reads prompts,
    the case's content for one that reads the case (:attr:`Judge.reads_prompt`).

    Change any of them and the hash changes, so a stored result is never reused for another request;
    change anything else (a template the judge never reads, concurrency, a timeout) and it does not.
    """
    blob = json.dumps(
        [judge.config.identity, judge.version, rubric.fingerprint, dimension, run, reads],
        ensure_ascii=False, separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def whole_case(judge: Judge) -> bool:
    """Whether ``judge`` asks every dimension of a case in one request (an LLM judge with ``call: per_case``):
    its calls carry the whole-case prompt, so their request hashes differ from the per-dimension ones."""
    return isinstance(judge, WholeCase) and judge.whole_case


def first_runs(config: EvalConfig, case: Case, judge: Judge, *, upper: bool = False) -> int:
    """How many runs ``judge`` makes of each dimension of ``case`` before any adaptive decision: one for a
    deterministic judge (repeating it cannot change anything), the fixed number of a fixed policy,
    ``adaptive.min_runs`` of an adaptive one (``adaptive.max_runs`` with ``upper``)."""
    if judge.deterministic:
        return 1
    n = config.runs_for(case.important)
    if n == "adaptive":
        return config.adaptive.max_runs if upper else config.adaptive.min_runs
    return n


def plan(cases: Sequence[Case], rubric: Rubric, config: EvalConfig, judges: Sequence[Judge], *,
         upper: bool = False) -> list[Call]:
    """Every call the evaluation needs, in a stable order (case, dimension, judge, run).

    A case gets ``config.runs`` runs per judge, or ``config.important_runs`` if it is important;
    a deterministic judge (rules) gets one run, since repeating it cannot change anything. With adaptive
    runs or a cascade this is the first round (:func:`first_runs`; stage-2 judges are left out), or with
    ``upper`` the most the evaluation can grow to (``max_runs``, stage-2 judges on every case).
    """
    _check_size(cases, rubric, config, judges, upper=upper)
    calls: list[Call] = []
    prompted = any(j.reads_prompt and not whole_case(j) for j in judges)
    whole = any(j.reads_prompt and whole_case(j) for j in judges)
    for case in cases:
        content = case.content
        case_messages = render_case(rubric, case, config.prompts_dir) if whole else []
        for dim in rubric.dimensions:
            dim_messages = render(rubric, dim, case, config.prompts_dir) if prompted else []
            for judge in judges:
                if judge.config.stage == 2 and not upper:
                    continue
                messages = case_messages if whole_case(judge) else dim_messages
                reads = messages if judge.reads_prompt else content
                for run in range(first_runs(config, case, judge, upper=upper)):
                    calls.append(_call(judge, rubric, case, dim.id, reads, messages, run))
    return calls


#: the most calls one evaluation may plan (cases x dimensions x judges x runs): what no run here can make in
#: days, and what a typo in ``runs`` or a cases file joined with itself would ask for
MAX_PLAN_CALLS = 10_000_000


def _check_size(cases: Sequence[Case], rubric: Rubric, config: EvalConfig, judges: Sequence[Judge], *,
                upper: bool) -> None:
    """Refuse a plan of more than :data:`MAX_PLAN_CALLS` calls before it is built (counted, not listed)."""
    judges = [j for j in judges if upper or j.config.stage != 2]
    per_dimension = {important: sum(first_runs(config, c, j, upper=upper) for j in judges)
                     for important in (False, True)
                     for c in [next((c for c in cases if c.important == important), None)] if c is not None}
    total = len(rubric.dimensions) * sum(per_dimension[c.important] for c in cases)
    if total > MAX_PLAN_CALLS:
        raise InputError(f"the evaluation would make {total:,} calls ({len(cases):,} case(s) x "
                         f"{len(rubric.dimensions)} dimension(s) x {len(judges)} judge(s) x their runs), more than "
                         f"{MAX_PLAN_CALLS:,}: lower runs / important_runs, or score the cases in parts")


def distinct(calls: Sequence[Call]) -> list[Call]:
    """The requests of ``calls``, in order: the first call of each request hash. Cases with the same content
    (and judge, rubric, dimension and run) make the same request: it is sent once, and the store reads its
    one judgment back for each of them (:meth:`~consensus_eval.execution.store.Store.calls`)."""
    seen: set[str] = set()
    out = []
    for c in calls:
        if c.planned.request_hash not in seen:
            seen.add(c.planned.request_hash)
            out.append(c)
    return out


def call_for(case: Case, dimension: str, judge: Judge, run: int, rubric: Rubric, config: EvalConfig) -> Call:
    """The call of run ``run`` of ``judge`` on ``dimension`` of ``case``, as :func:`plan` makes it (same hash)."""
    if not judge.reads_prompt:
        messages = []
    elif whole_case(judge):
        messages = render_case(rubric, case, config.prompts_dir)
    else:
        messages = render(rubric, rubric.dimension(dimension), case, config.prompts_dir)
    return _call(judge, rubric, case, dimension, messages if judge.reads_prompt else case.content, messages, run)


def _call(judge: Judge, rubric: Rubric, case: Case, dimension: str, reads: object,
          messages: list[dict[str, str]], run: int) -> Call:
    h = request_hash(judge, rubric, reads, run, dimension)
    return Call(PlannedCall(h, case.id, dimension, judge.config.name, run), case,
                messages if judge.reads_prompt else [])
