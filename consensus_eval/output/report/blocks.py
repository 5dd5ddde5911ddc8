"""The report's vocabulary: every section of report.md, report.html and the console is a :class:`Block`, built
once from the run's results and the catalogue, and each format renders the same blocks
(:mod:`~consensus_eval.output.report.markdown`, :mod:`~consensus_eval.output.report.html`,
:mod:`consensus_eval.output.trust_console`).

A block is a title and its content: paragraphs, warnings, tables and notes (the usual layout, as four lists), or
any sequence of parts (:attr:`Block.parts`): paragraphs (:class:`Para`), sub-headings (:class:`Heading`), tables
(:class:`TableBlock`), groups (:class:`Group`: a collapsible one, or side by side), figures (:class:`Figure`) and the
cases themselves (:class:`Cases`). Every part and every table column says which formats show it (``targets``):
report.md is a plain-text digest, report.html draws figures and bars and opens each case, the console shows a
few sections of the files.

Text is of two kinds. A plain ``str`` is data (a case id, a judge's name, a quote) or text built from data: each
format escapes it whole. A :class:`Msg` (a ``str`` too) is the package's own text (a catalogue message with its
values, or a figure the package formatted): report.md keeps its Markdown (a command in backticks) and escapes only
its values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

#: the formats a part can be shown in: report.md, report.html, what ``score`` prints at its end (``summary``) and
#: what ``reliability`` prints (``reliability``)
Target = Literal["md", "html", "summary", "reliability"]
#: the two files
FILES: frozenset[Target] = frozenset({"md", "html"})
MD: frozenset[Target] = frozenset({"md"})
HTML: frozenset[Target] = frozenset({"html"})
#: the console's views
CONSOLE: frozenset[Target] = frozenset({"summary", "reliability"})
RELIABILITY: frozenset[Target] = frozenset({"reliability"})
#: the files and every console view
EVERYWHERE: frozenset[Target] = frozenset({"md", "html", "summary", "reliability"})


class Msg(str):
    """The package's own text: a catalogue message (``template``, with ``{name}`` placeholders) filled with its
    ``values`` (numbers, data, or other messages), or a figure the package formatted (no values). As a ``str`` it is
    the plain text (what HTML escapes and the console prints); report.md keeps the template's own Markdown and
    escapes only the values."""

    template: str
    values: dict[str, object]

    def __new__(cls, template: str, values: Mapping[str, object] | None = None) -> Msg:
        text = template.format(**{k: str(v) for k, v in values.items()}) if values else template
        obj = super().__new__(cls, text)
        obj.template = template
        obj.values = dict(values or {})
        return obj


@dataclass(frozen=True)
class Bar:
    """An interval drawn in a table cell of report.html: ``value`` with its interval ``ci`` (None: none) on a
    ``width``-pixel axis from 0 to 1; ``alpha``: with the reliability guide's two thresholds; ``label``: what it
    shows, for a screen reader."""

    value: float
    ci: tuple[float, float] | None
    label: str
    width: float = 120
    alpha: bool = True


class Cell(str):
    """A table cell with more than text (a ``str`` too: its plain text, the text then the spans' after a space):
    ``text``; ``css`` (its HTML class, e.g. a verdict's colour); ``style`` (inline CSS, a heat colour); ``href`` (the
    text links there); ``spans`` ((HTML class, text) pairs after the text: a status badge, a muted aside); ``bar`` (an
    interval drawn in report.html, which shows no text then)."""

    text: str
    css: str
    style: str
    href: str
    spans: tuple[tuple[str, str], ...]
    bar: Bar | None

    def __new__(cls, text: str = "", *, css: str = "", style: str = "", href: str = "",
                spans: tuple[tuple[str, str], ...] = (), bar: Bar | None = None) -> Cell:
        obj = super().__new__(cls, " ".join(x for x in (text, *(s for _, s in spans)) if x))
        obj.text, obj.css, obj.style, obj.href, obj.spans, obj.bar = text, css, style, href, spans, bar
        return obj


@dataclass(frozen=True)
class Layout:
    """How report.html's source lays a table out (line breaks only: a browser shows the same): ``breaks``, the cells
    a row's source line breaks before (counted among the cells the page shows; their number: before the row's
    end); ``row_lines``: each row ends a line (``last_line``: the last one too);
    ``body_line``: ``<tbody>`` ends a line; ``inline``: the wrapper, the table and its body on one line."""

    breaks: tuple[int, ...] = ()
    row_lines: bool = True
    last_line: bool = True
    body_line: bool = True
    inline: bool = False


@dataclass
class TableBlock:
    """A table: ``id`` (the HTML id; "" for none), ``header``, ``rows`` (a cell is text, or a :class:`Cell`),
    ``right`` (right-aligned columns), ``shades`` (optional, per row and cell: a value in [0, 1] report.html shades
    the cell by, red to green; None for no shade), ``columns`` (per column, the formats that show it; empty: all),
    ``caption`` (report.html's caption, the console's title), ``cls`` (the table's HTML class), ``row_heads`` (each
    row's first cell is its heading), ``targets`` and ``layout`` (:class:`Layout`). A table without rows is not
    shown."""

    id: str
    header: list[str]
    rows: list[list[str]]
    right: list[bool] = field(default_factory=list)
    shades: list[list[float | None]] = field(default_factory=list)
    columns: list[frozenset[Target]] = field(default_factory=list)
    caption: str = ""
    cls: str = ""
    row_heads: bool = True
    targets: frozenset[Target] = EVERYWHERE
    layout: Layout = field(default_factory=Layout)

    def shade(self, row: int, col: int) -> str:
        """The CSS background of a cell ('' for none): red (0) through amber to green (1)."""
        if row >= len(self.shades) or col >= len(self.shades[row]):
            return ""
        v = self.shades[row][col]
        return "" if v is None else f"background:rgb({int(220 - 120 * v)},{int(90 + 110 * v)},110)"

    def shown(self, target: Target) -> list[int]:
        """The columns ``target`` shows (a table without a header: its rows' cells)."""
        n = len(self.header) or max((len(r) for r in self.rows), default=0)
        return [i for i in range(n) if not self.columns or target in self.columns[i]]


@dataclass(frozen=True)
class Link:
    """A link after a paragraph's text (report.html): ``href``, ``text`` and its ``id``."""

    href: str
    text: str
    id: str = ""


ParaKind = Literal["text", "note", "warn", "banner", "err"]
#: the HTML class of a paragraph of each kind
PARA_CLASS = {"text": "muted", "note": "muted", "warn": "warn", "banner": "banner", "err": "err"}


@dataclass(frozen=True)
class Para:
    """A paragraph: ``kind`` (``text`` an explanation, ``note`` a footnote (dim on the console), ``warn`` a warning,
    ``banner`` a notice that stands out, ``err`` an error), ``id`` (its HTML id), ``cls`` (its HTML class, when not
    its kind's), ``link`` (after its text, in report.html), ``targets``; ``end``: report.html's source breaks the
    line after it; ``attached``: report.md writes it on the line after the part before it, then a line break (as the
    cost note always was: a GFM viewer shows it as the table's last row); ``fold``: the console folds it at its width
    (else it is one line, which the terminal wraps)."""

    text: str
    kind: ParaKind = "text"
    id: str = ""
    cls: str = ""
    targets: frozenset[Target] = EVERYWHERE
    end: bool = True
    attached: bool = False
    link: Link | None = None
    fold: bool = False


@dataclass(frozen=True)
class Heading:
    """A sub-heading inside a section (level 3, or 4)."""

    text: str
    level: int = 3
    targets: frozenset[Target] = EVERYWHERE


FigureKind = Literal["box_plot", "histograms"]


@dataclass(frozen=True)
class Figure:
    """A chart report.html draws (report.md shows a table of the same figures instead): ``kind``, its geometry
    ``data`` (:mod:`~consensus_eval.output.report.charts`) and ``t``, the catalogue of its words."""

    kind: FigureKind
    data: object
    t: Callable[..., str]
    targets: frozenset[Target] = HTML


@dataclass(frozen=True)
class Cases:
    """The cases themselves: ``index``, report.html's table of every case (sorted, filtered, each opening its
    drill-down); ``details``, report.md's most disputed cases in full (``items``: their audits). ``data``: the
    report's :class:`~consensus_eval.output.report.data.ReportData`."""

    kind: Literal["index", "details"]
    data: object
    items: tuple[object, ...] = ()
    targets: frozenset[Target] = FILES


@dataclass
class Group:
    """Parts shown together: ``summary`` set, a collapsible group (report.md: a sub-heading); else a ``div`` in
    report.html, of class ``cls`` when set (``charts``: side by side)."""

    parts: list[Part]
    summary: str = ""
    cls: str = ""
    targets: frozenset[Target] = EVERYWHERE


Part = Para | Heading | TableBlock | Figure | Cases | Group


@dataclass
class Block:
    """One section: ``id`` (the HTML anchor), ``title``, and its content: ``paragraphs`` before the tables, ``tables``,
    ``notes`` after them, ``warnings`` (shown highlighted, before the tables), then any other ``parts``.

    ``console_title``: the console shows its title (else a table's caption says it); ``nav``: its link in
    report.html's navigation ("": its title; None: none); ``nav_break``: the navigation's source line ends after
    it; ``css_class`` and ``heading_class``: its HTML classes."""

    id: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[TableBlock] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)
    nav: str | None = ""
    nav_break: bool = False
    console_title: bool = True
    css_class: str = "trust"
    heading_class: str = ""

    def content(self) -> list[Part]:
        """Everything the block shows, in order: its paragraphs, warnings, tables, notes, then its parts."""
        return [*(Para(p) for p in self.paragraphs), *(Para(w, "warn") for w in self.warnings), *self.tables,
                *(Para(n, "note") for n in self.notes), *self.parts]


def shown(parts: list[Part], target: Target) -> list[Part]:
    """The parts ``target`` shows."""
    return [p for p in parts if target in p.targets]
