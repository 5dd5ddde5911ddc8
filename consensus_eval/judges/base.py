"""What every judge is: something that turns one case and dimension into a :class:`CallOutcome`.

A judge kind is one module and one registration (:func:`consensus_eval.judges.register_judge`):
a config class (a :class:`~consensus_eval.domain.config.JudgeConfig` subclass with its own
``kind``) and a factory ``(config, rubric) -> Judge``. The runner only ever talks to this protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import JudgeConfig
from consensus_eval.domain.judgment import CallOutcome
from consensus_eval.domain.rubric import Dimension

if TYPE_CHECKING:
    from consensus_eval.judges.pacing import PacingReport

__all__ = ["CallOutcome", "Judge", "Paced", "Pooled", "WholeCase"]


class Judge(Protocol):
    """A judge of the panel.

    - ``version`` enters every request hash: bump it when what the judge does changes, and its
      stored results are no longer reused.
    - ``deterministic``: the same input always gives the same judgment, so it is judged once per
      (case, dimension) whatever ``runs`` says.
    - ``reads_prompt``: whether the judge reads the rendered prompt (LLM judges). A judge that reads
      the case itself (the rules judge) gets no prompt, and its request hash covers the case's
      content instead, so editing a template does not throw its stored results away.
    - ``max_case_chars``: see the attribute.

    Optional capabilities, each a small protocol the runner checks with ``isinstance`` (a plugin judge
    needs none of them): :class:`Paced`, :class:`WholeCase` and :class:`Pooled`.
    """

    @property
    def config(self) -> JudgeConfig:
        """The judge's entry of the config (a subclass of JudgeConfig for its kind)."""
        ...

    version: str
    deterministic: bool
    reads_prompt: bool
    #: the largest case (record + conversation, in characters) the judge takes; a larger one is not
    #: sent: its calls are recorded failed (``record_too_long``) and the run goes on. None: no limit.
    max_case_chars: int | None

    async def judge(self, case: Case, dimension: Dimension, messages: list[dict[str, str]],
                    run: int = 0) -> CallOutcome:
        """Judge one dimension of one case (``run``: which repetition). Never raises for a failure
        of the judge's own (a provider error, an invalid reply): that is a ``failed`` outcome."""
        ...

    async def check(self) -> tuple[bool, str]:
        """Whether the judge can work (for an LLM: one tiny call), and a line saying so. Never raises."""
        ...

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        """Prompt tokens of one call as this judge would send it (0 for a judge that sends nothing)."""
        ...

    def prices(self) -> tuple[float, float] | None:
        """(input, output) USD per token, or None when unknown."""
        ...


@runtime_checkable
class Paced(Protocol):
    """A judge that can say what limited its requests in a run (rate limits, concurrency, latency)."""

    def pacing_report(self) -> PacingReport | None:
        """The run's :class:`~consensus_eval.judges.pacing.PacingReport` (None: nothing to report)."""
        ...


@runtime_checkable
class WholeCase(Protocol):
    """A judge that may answer every dimension of a case with one request (``call: per_case``;
    :mod:`consensus_eval.judges.per_case`). ``whole_case``: whether it does (the plan then renders the
    whole-case prompt for each of its calls); ``calls_per_request``: how many calls one request answers
    (the runner starts that many workers per request slot)."""

    calls_per_request: int

    @property
    def whole_case(self) -> bool: ...

    def expect(self, calls: Sequence[tuple[str, int, str]]) -> None:
        """The (case id, run, dimension) calls still to make, so one request's tokens and cost go to those."""
        ...


@runtime_checkable
class Pooled(Protocol):
    """A judge that may do a large run's work in a pool of its own (the rules judge's worker processes):
    the runner calls :meth:`open` with the cases its calls will ask about before making them, and
    :meth:`close` after them (also when the run is stopped)."""

    def open(self, cases: Sequence[Case]) -> None:
        """The cases of the calls to come, in the order they will be asked (a case once per call)."""
        ...

    async def close(self) -> None:
        """The calls are over: end what :meth:`open` started."""
        ...
