"""`score --dry-run`: count every planned call's prompt tokens and estimate each judge's cost.

Nothing is sent. Output tokens are unknown before a call, so two figures are given: an estimate
with ``assumed_output_tokens`` per call, and an upper bound with each judge's ``max_tokens``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from consensus_eval.execution.plan import Call
from consensus_eval.judges.base import Judge

ASSUMED_OUTPUT_TOKENS = 800


@dataclass
class JudgeEstimate:
    """Projected calls, tokens and cost of one judge (cost None when the model has no known price)."""

    judge: str
    model: str
    calls: int
    prompt_tokens: int
    output_tokens: int
    max_output_tokens: int
    cost: float | None
    max_cost: float | None


def estimate(calls: Sequence[Call], judges: Sequence[Judge],
             assumed_output_tokens: int = ASSUMED_OUTPUT_TOKENS) -> list[JudgeEstimate]:
    """Every judge's tokens and cost over the planned calls (a judge that sends nothing costs 0)."""
    by_judge: dict[str, list[Call]] = defaultdict(list)
    for c in calls:
        by_judge[c.planned.judge].append(c)
    out = []
    for judge in judges:
        cfg = judge.config
        mine = by_judge.get(cfg.name, [])
        if not judge.reads_prompt:
            out.append(JudgeEstimate(cfg.name, cfg.kind, len(mine), 0, 0, 0, 0.0, 0.0))
            continue
        counted: dict[int, int] = {}  # calls of one case and dimension share their messages
        prompt_tokens = 0
        for c in mine:
            key = id(c.messages)
            if key not in counted:
                counted[key] = judge.count_tokens(c.messages)
            prompt_tokens += counted[key]
        max_tokens = getattr(cfg, "max_tokens", assumed_output_tokens)
        out_tokens = assumed_output_tokens * len(mine)
        max_out = max_tokens * len(mine)
        p = judge.prices()
        out.append(JudgeEstimate(
            cfg.name, str(getattr(cfg, "model", cfg.kind)), len(mine), prompt_tokens, out_tokens, max_out,
            cost=(prompt_tokens * p[0] + out_tokens * p[1]) if p else None,
            max_cost=(prompt_tokens * p[0] + max_out * p[1]) if p else None,
        ))
    return out
