"""The judge kinds: a kind name, its config class and the factory that builds its judges.

Built in: ``llm`` (litellm + instructor; litellm is imported only when such a judge is built),
``rules`` (the deterministic judge of a rubric that has rules registered) and ``simulated`` (seeded personas
reading the case: a demo device for trying the tool offline). A third-party package
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
    SimulatedJudgeConfig,
    register_judge_config,
)
from consensus_eval.domain.plugins import Registry
from consensus_eval.domain.rubric import Rubric
from consensus_eval.judges.base import Judge

C = TypeVar("C", bound=JudgeConfig)
JudgeFactory = Callable[[C, Rubric], Judge]

_FACTORIES: Registry[Callable[[JudgeConfig, Rubric], Judge]] = Registry("judge kind", JUDGE_ENTRY_POINTS)


def register_judge(config: type[C], factory: Callable[[C, Rubric], Judge]) -> None:
    """Add a judge kind: ``config`` (a :class:`JudgeConfig` subclass whose ``kind`` defaults to the
    kind's name) and ``factory(config, rubric)`` building a :class:`Judge` from one config entry."""
    # the factory is only ever called with configs of its own class (configs are validated by kind)
    _FACTORIES.register(register_judge_config(config), factory)  # type: ignore[arg-type]


def build_judge(config: JudgeConfig, rubric: Rubric) -> Judge:
    """The judge a config entry describes."""
    return _FACTORIES.get(config.kind)(config, rubric)


def _build_llm(config: LLMJudgeConfig, rubric: Rubric) -> Judge:
    from consensus_eval.judges.llm import LLMJudge

    return LLMJudge(config, rubric)


def _build_rules(config: RulesJudgeConfig, rubric: Rubric) -> Judge:
    from consensus_eval.judges.rules import RulesJudge

    return RulesJudge(config, rubric)


def _build_simulated(config: SimulatedJudgeConfig, rubric: Rubric) -> Judge:
    from consensus_eval.judges.simulated import SimulatedJudge

    return SimulatedJudge(config, rubric)


register_judge(LLMJudgeConfig, _build_llm)
register_judge(RulesJudgeConfig, _build_rules)
register_judge(SimulatedJudgeConfig, _build_simulated)
