"""The judge kinds: a kind name, its config class and the factory that builds its judges.

Built in: ``llm`` (litellm + instructor; litellm is imported only when such a judge is built) and
``rules`` (the deterministic judge of a rubric that has rules registered). A third-party package
adds a kind with one module and one call::

    class EchoConfig(JudgeConfig):
        kind: Literal["echo"] = "echo"

    register_judge(EchoConfig, EchoJudge)   # EchoJudge(config, rubric) follows judges.base.Judge

and makes it found by declaring that module in the ``consensus_eval.judges`` entry-point group.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from consensus_eval.domain.config import (
    JUDGE_ENTRY_POINTS,
    JudgeConfig,
    LLMJudgeConfig,
    RulesJudgeConfig,
    register_judge_config,
)
from consensus_eval.domain.plugins import load_plugins
from consensus_eval.domain.rubric import Rubric
from consensus_eval.judges.base import Judge

C = TypeVar("C", bound=JudgeConfig)
JudgeFactory = Callable[[C, Rubric], Judge]

_FACTORIES: dict[str, Callable[[JudgeConfig, Rubric], Judge]] = {}


def register_judge(config: type[C], factory: Callable[[C, Rubric], Judge]) -> None:
    """Add a judge kind: ``config`` (a :class:`JudgeConfig` subclass whose ``kind`` defaults to the
    kind's name) and ``factory(config, rubric)`` building a :class:`Judge` from one config entry."""
    register_judge_config(config)
    _FACTORIES[config.model_fields["kind"].default] = factory  # type: ignore[assignment]


def build_judge(config: JudgeConfig, rubric: Rubric) -> Judge:
    """The judge a config entry describes."""
    if config.kind not in _FACTORIES:
        load_plugins(JUDGE_ENTRY_POINTS)
    try:
        factory = _FACTORIES[config.kind]
    except KeyError:
        raise ValueError(f"judge {config.name!r}: no judge kind {config.kind!r} is registered") from None
    return factory(config, rubric)


def _build_llm(config: LLMJudgeConfig, rubric: Rubric) -> Judge:
    from consensus_eval.judges.llm import LLMJudge

    return LLMJudge(config, rubric)


def _build_rules(config: RulesJudgeConfig, rubric: Rubric) -> Judge:
    from consensus_eval.judges.rules import RulesJudge

    return RulesJudge(config, rubric)


register_judge(LLMJudgeConfig, _build_llm)
register_judge(RulesJudgeConfig, _build_rules)
