"""The report's sections of the rubric's kinds, as language-neutral blocks (:class:`~.trust.Block`) rendered the same
by report.md and report.html: each kind present in the rubric builds its own
(:meth:`~consensus_eval.domain.kinds.base.Dimension.report_block`, over the rubric's dimensions of that kind) through
:class:`Kit`, the report's words, number formats and blocks. A ``likert`` rubric gets its ratings distribution per
attribute and judge, a ``criteria`` rubric its met rates per criterion and the criteria its judges split on; a rubric
of deductions only has neither (its report is what it was). Kinds come in the order they registered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from consensus_eval.analysis.results import Results
from consensus_eval.domain.kinds.base import Table, registered_kinds
from consensus_eval.output.report import fmt
from consensus_eval.output.report.blocks import Block, TableBlock
from consensus_eval.output.report.i18n import Messages


class Kit:
    """The report's side of a kind's block (:class:`~consensus_eval.domain.kinds.base.ReportKit`): ``t`` in the
    report's language, :mod:`~consensus_eval.output.report.fmt`'s numbers, and :class:`Block`."""

    def __init__(self, t: Messages) -> None:
        self._t = t

    def t(self, key: str, /, **values: Any) -> str:
        return self._t(key, **values)

    def num(self, x: float | None) -> str:
        return fmt.num(x)

    def fixed(self, x: float | None) -> str:
        return fmt.fixed(x)

    def percent(self, x: float | None) -> str:
        return fmt.percent(x)

    def block(self, id: str, title: str, *, paragraphs: Sequence[str] = (), tables: Sequence[Table] = (),
              notes: Sequence[str] = ()) -> Block:
        return Block(id, title, paragraphs=list(paragraphs), tables=[TableBlock(*tb) for tb in tables],
                     notes=list(notes))


def kinds_blocks(results: Results, t: Messages) -> list[Block]:
    """The sections of the rubric's kinds (empty for a rubric of deductions only)."""
    kit = Kit(t)
    out: list[Block] = []
    for kind in registered_kinds():
        name: Any = kind.model_fields["kind"].default
        dims = [d for d in results.rubric.dimensions if d.kind == name]
        if dims and (block := kind.report_block(dims, results, kit)) is not None:
            out.append(block)
    return out
