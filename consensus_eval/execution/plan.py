"""The plan: every call an evaluation needs (case x dimension x judge x run), each with its request hash.

A case gets ``runs`` runs per judge, or ``important_runs`` if it is important; a deterministic
judge gets one. Prompts are rendered only for judges that read them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.prompts import render
from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.store import PlannedCall
from consensus_eval.judges.base import Judge


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


def plan(cases: Sequence[Case], rubric: Rubric, config: EvalConfig, judges: Sequence[Judge]) -> list[Call]:
    """Every call the evaluation needs, in a stable order (case, dimension, judge, run).

    A case gets ``config.runs`` runs per judge, or ``config.important_runs`` if it is important;
    a deterministic judge (rules) gets one run, since repeating it cannot change anything.
    """
    calls: list[Call] = []
    prompted = any(j.reads_prompt for j in judges)
    for case in cases:
        n_runs = config.runs_for(case.important)
        content = case.content
        for dim in rubric.dimensions:
            messages = render(rubric, dim, case, config.prompts_dir) if prompted else []
            for judge in judges:
                reads = messages if judge.reads_prompt else content
                for run in range(1 if judge.deterministic else n_runs):
                    h = request_hash(judge, rubric, reads, run, dim.id)
                    calls.append(Call(PlannedCall(h, case.id, dim.id, judge.config.name, run), case,
                                      messages if judge.reads_prompt else []))
    return calls
