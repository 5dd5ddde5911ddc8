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
    the run, and what the judge reads (``reads``): the exact prompt for a judge that reads prompts (few-shot
    examples included: changing them re-asks the judge), the case's content for one that reads the case
    (:attr:`Judge.reads_prompt`).

    Change any of them and the hash changes, so a stored result is never reused for another request;
    change anything else (a template the judge never reads, concurrency, a timeout) and it does not.
    """
    return _hash(_head(judge, rubric, dimension, run), _dumps(reads))


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _head(judge: Judge, rubric: Rubric, dimension: str, run: int) -> str:
    """What a request hash covers before what the judge reads, as the JSON list it starts (no closing ``]``)."""
    return _dumps([judge.config.identity, judge.version, rubric.fingerprint, dimension, run])[:-1]


def _hash(head: str, reads: str) -> str:
    """The SHA-256 of the JSON list ``[identity, version, fingerprint, dimension, run, reads]`` (``head`` from
    :func:`_head`, ``reads`` dumped once per case for its every call: the same text as dumping the list)."""
    return hashlib.sha256(f"{head},{reads}]".encode()).hexdigest()


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
    # each judge's kind once (a protocol check per call cost more than the rest of the plan), the hashes' heads
    # once per (judge, dimension, run), what a judge reads dumped once per case
    asked = [(j, whole_case(j)) for j in judges if upper or j.config.stage != 2]
    prompted = any(j.reads_prompt and not whole for j, whole in asked)
    wholes = any(j.reads_prompt and whole for j, whole in asked)
    heads: dict[tuple[int, str, int], str] = {}
    shots = {d.id: config.examples(d.id) for d in rubric.dimensions}
    for case in cases:
        content = _dumps(case.content) if any(not j.reads_prompt for j, _ in asked) else ""
        case_messages = render_case(rubric, case, config.prompts_dir, shots) if wholes else []
        case_prompt = _dumps(case_messages) if wholes else ""
        for dim in rubric.dimensions:
            dim_messages = render(rubric, dim, case, config.prompts_dir, shots[dim.id]) if prompted else []
            dim_prompt = _dumps(dim_messages) if prompted else ""
            for k, (judge, whole) in enumerate(asked):
                messages = case_messages if whole else dim_messages
                reads = (case_prompt if whole else dim_prompt) if judge.reads_prompt else content
                for run in range(first_runs(config, case, judge, upper=upper)):
                    head = heads.get((k, dim.id, run))
                    if head is None:
                        head = heads[(k, dim.id, run)] = _head(judge, rubric, dim.id, run)
                    calls.append(Call(PlannedCall(_hash(head, reads), case.id, dim.id, judge.config.name, run), case,
                                      messages if judge.reads_prompt else []))
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
        shots = {d.id: config.examples(d.id) for d in rubric.dimensions}
        messages = render_case(rubric, case, config.prompts_dir, shots)
    else:
        messages = render(rubric, rubric.dimension(dimension), case, config.prompts_dir, config.examples(dimension))
    return _call(judge, rubric, case, dimension, messages if judge.reads_prompt else case.content, messages, run)


def _call(judge: Judge, rubric: Rubric, case: Case, dimension: str, reads: object,
          messages: list[dict[str, str]], run: int) -> Call:
    h = request_hash(judge, rubric, reads, run, dimension)
    return Call(PlannedCall(h, case.id, dimension, judge.config.name, run), case,
                messages if judge.reads_prompt else [])
