"""The judges of a panel, built from config. LLM judges import litellm only when built."""

from __future__ import annotations

from consensus_eval.domain.config import JudgeConfig
from consensus_eval.judges.base import CallOutcome, Judge
from consensus_eval.domain.rubric import Rubric

__all__ = ["CallOutcome", "Judge", "build_judge"]


def build_judge(config: JudgeConfig, rubric: Rubric) -> Judge:
    """The judge a config entry describes (``kind: rules`` or ``kind: llm``)."""
    if config.kind == "rules":
        from consensus_eval.judges.rules_judge import RulesJudge

        return RulesJudge(config, rubric)
    from consensus_eval.judges.llm import LLMJudge

    return LLMJudge(config, rubric)
