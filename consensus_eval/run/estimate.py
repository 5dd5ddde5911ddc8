"""`score --dry-run`: render every prompt, count its tokens and estimate each judge's cost.

Nothing is sent. Output tokens are unknown before a call, so two figures are given: an estimate
with ``assumed_output_tokens`` per call, and an upper bound with each judge's ``max_tokens``.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from consensus_eval.domain.config import JudgeConfig

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


def prices(cfg: JudgeConfig) -> tuple[float, float] | None:
    """(input, output) USD per token: the config's, else litellm's price map, else None."""
    if cfg.config_prices is not None:
        return cfg.config_prices
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    try:
        info = litellm.get_model_info(cfg.model)
    except Exception:  # noqa: BLE001 - unknown model
        return None
    if info.get("input_cost_per_token") is None or info.get("output_cost_per_token") is None:
        return None
    return float(info["input_cost_per_token"]), float(info["output_cost_per_token"])


def estimate(prep, assumed_output_tokens: int = ASSUMED_OUTPUT_TOKENS) -> list[JudgeEstimate]:  # noqa: ANN001
    """Estimate every judge's tokens and cost over the prepared plan (``evaluate.Prepared``)."""
    calls_by_judge: dict[str, list] = defaultdict(list)
    for c in prep.calls:
        calls_by_judge[c.planned.judge].append(c)
    out = []
    for cfg in prep.config.judges:
        calls = calls_by_judge.get(cfg.name, [])
        if cfg.kind == "rules":
            out.append(JudgeEstimate(cfg.name, "rules", len(calls), 0, 0, 0, 0.0, 0.0))
            continue
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        counted: dict[int, int] = {}
        prompt_tokens = 0
        for c in calls:
            key = id(c.messages)
            if key not in counted:
                counted[key] = litellm.token_counter(model=cfg.model, messages=c.messages)
            prompt_tokens += counted[key]
        out_tokens = assumed_output_tokens * len(calls)
        max_out = cfg.max_tokens * len(calls)
        p = prices(cfg)
        out.append(JudgeEstimate(
            cfg.name, cfg.model or "", len(calls), prompt_tokens, out_tokens, max_out,
            cost=(prompt_tokens * p[0] + out_tokens * p[1]) if p else None,
            max_cost=(prompt_tokens * p[0] + max_out * p[1]) if p else None,
        ))
    return out


def print_estimate(console: Console, estimates: list[JudgeEstimate]) -> None:
    t = Table(title="dry run: nothing was sent")
    for col in ("judge", "model", "calls", "prompt tokens", "output tokens (est.)", "cost $ (est.)", "cost $ (max)"):
        t.add_column(col, justify="left" if col in ("judge", "model") else "right")
    for e in estimates:
        t.add_row(e.judge, e.model, str(e.calls), str(e.prompt_tokens), str(e.output_tokens),
                  "unknown" if e.cost is None else f"{e.cost:.4f}",
                  "unknown" if e.max_cost is None else f"{e.max_cost:.4f}")
    console.print(t)
    console.print(f"Estimated with {ASSUMED_OUTPUT_TOKENS} output tokens per call; the max uses each "
                  "judge's max_tokens. 'unknown': the model has no price; set input_cost_per_token and "
                  "output_cost_per_token in its config.", highlight=False)
