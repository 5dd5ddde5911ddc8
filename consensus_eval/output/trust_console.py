"""Sections on the console: the same blocks report.md and report.html show
(:mod:`consensus_eval.output.report.blocks`), as rich tables, in the report's language."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from consensus_eval.output.report.blocks import (
    CONSOLE,
    Block,
    Group,
    Heading,
    Para,
    Part,
    TableBlock,
    Target,
)
from consensus_eval.output.report.data import ReportData
from consensus_eval.output.report.section_list import report_blocks


def print_block(console: Console, b: Block | None, view: Target | None = None) -> None:
    """One section (:class:`~consensus_eval.output.report.blocks.Block`): its title (unless the console shows a
    table's caption instead), then each part the console's ``view`` shows (any console view when None): paragraphs,
    warnings (yellow), tables and notes (dim). Nothing for None."""
    if b is None:
        return
    if b.console_title:
        console.print(Text(str(b.title), style="bold"))
    print_parts(console, b.content(), view)


def print_view(console: Console, d: ReportData, view: Target) -> None:
    """Every section of the report's list (:data:`~consensus_eval.output.report.section_list.SECTIONS`) the console's
    ``view`` shows (``summary``: the end of ``score``; ``reliability``: the ``reliability`` command), in order."""
    for _, blocks in report_blocks(d, view):
        for b in blocks:
            print_block(console, b, view)


def print_parts(console: Console, parts: Sequence[Part], view: Target | None = None) -> None:
    """Parts of a block on the console (those its ``view`` shows; any console view's when None)."""
    for p in parts:
        if not (p.targets & CONSOLE if view is None else view in p.targets):
            continue
        if isinstance(p, Para):
            if p.kind == "text":
                console.print(str(p.text), highlight=False, soft_wrap=not p.fold)
            else:
                console.print(Text(str(p.text), style=_STYLES.get(p.kind, "")), soft_wrap=not p.fold)
        elif isinstance(p, Heading):
            console.print(Text(str(p.text), style="bold"))
        elif isinstance(p, TableBlock):
            print_table(console, p, view)
        elif isinstance(p, Group):
            if p.summary:
                console.print(Text(str(p.summary), style="bold"))
            print_parts(console, p.parts, view)


#: the console's style of a paragraph of each kind
_STYLES = {"note": "dim", "warn": "yellow", "banner": "yellow", "err": "red"}


def print_table(console: Console, tb: TableBlock, view: Target | None = None) -> None:
    """A table as a rich table (its caption as the title), or folded one row at a time when too wide
    (:func:`print_folded`); nothing without rows."""
    if not tb.rows:
        return
    cols = tb.shown(view) if view is not None else sorted(set(tb.shown("summary")) | set(tb.shown("reliability")))
    header = [str(tb.header[i]) if tb.header else "" for i in cols]
    rows = [[str(row[i]) for i in cols] for row in tb.rows]
    t = Table(title=str(tb.caption)) if tb.caption else Table()
    for h, i in zip(header, cols, strict=True):
        t.add_column(h, justify="right" if tb.right and tb.right[i] else "left", overflow="fold")
    for row in rows:
        t.add_row(*row)
    if fits(console, t):
        console.print(t)
    else:   # too wide for the console (80 columns on a pipe, or COLUMNS): one row at a time, never a cut cell
        print_folded(console, header, rows)


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
