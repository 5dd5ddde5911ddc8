"""The trust sections on the console: the same blocks report.md and report.html show
(:mod:`consensus_eval.output.report.trust`), as rich tables, in the report's language."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from consensus_eval.output.report.trust import Block


def print_block(console: Console, b: Block | None) -> None:
    """One section: its title, paragraphs, warnings, tables and notes (nothing for None)."""
    if b is None:
        return
    console.print(Text(b.title, style="bold"))
    for p in b.paragraphs:
        console.print(p, highlight=False, soft_wrap=True)
    for w in b.warnings:
        console.print(Text(w, style="yellow"), soft_wrap=True)
    for tb in b.tables:
        if not tb.rows:
            continue
        t = Table()
        for i, h in enumerate(tb.header):
            t.add_column(h, justify="right" if tb.right and tb.right[i] else "left")
        for row in tb.rows:
            t.add_row(*row)
        console.print(t)
    for n in b.notes:
        console.print(Text(n, style="dim"), soft_wrap=True)


def print_blocks(console: Console, blocks: Iterable[Block | None]) -> None:
    for b in blocks:
        print_block(console, b)
