"""The trust sections on the console: the same blocks report.md and report.html show
(:mod:`consensus_eval.output.report.trust`), as rich tables, in the report's language."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.measure import Measurement
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
            t.add_column(h, justify="right" if tb.right and tb.right[i] else "left", overflow="fold")
        for row in tb.rows:
            t.add_row(*row)
        if fits(console, t):
            console.print(t)
        else:   # too wide for the console (80 columns on a pipe, or COLUMNS): one row at a time, never a cut cell
            print_folded(console, tb.header, tb.rows)
    for n in b.notes:
        console.print(Text(n, style="dim"), soft_wrap=True)


def fits(console: Console, table: Table) -> bool:
    """Whether ``table`` fits the console's width without cutting a cell (its narrowest layout: each column as
    wide as its longest word; rich measures within a width, so within a very wide one here)."""
    return Measurement.get(console, console.options.update_width(1_000_000), table).minimum <= console.width


def print_folded(console: Console, header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """A table too wide for the console, folded: each row's first cell as a heading, then one line per other
    column, ``header: value`` (a value's line breaks joined with spaces)."""
    for row in rows:
        console.print(Text(" ".join(row[0].split()), style="bold"))
        for h, cell in zip(header[1:], row[1:], strict=False):
            console.print(Text(f"  {' '.join(h.split())}: {' '.join(cell.split())}"))


def print_blocks(console: Console, blocks: Iterable[Block | None]) -> None:
    for b in blocks:
        print_block(console, b)
