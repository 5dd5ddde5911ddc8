"""report.html: one self-contained file (inline CSS, SVG, data, and one script allowed by its hash).

Rendered with Jinja2 with autoescape on for every template: all text from cases and judges is
escaped, and the template never marks data ``|safe`` (the only ``|safe`` values are the package's
own script and JSON passed through :func:`~consensus_eval.output.report.drill.embed_json`). The case
table's rows are the one part written in Python (:func:`case_rows`, one string per row): every value in them is
escaped with markupsafe, as autoescape would. The Content-Security-Policy allows that one script by its
SHA-256 hash, computed here at render time, and forbids every other script and any fetch, so the file works
(and stays inert) offline.

At scale the page stays small: the case table is one row per case, and a case's drill-down (its
deductions, record and conversation) is embedded as compressed JSON and built when opened
(:mod:`consensus_eval.output.report.drill`). Without JavaScript the review queue, the case table and
every summary section still show; only the drill-downs need the script.

Beyond :data:`PAGE` cases the table is paged (:func:`write_html`): report.html keeps every summary section and
the first :data:`PAGE` rows with their drill-downs, and says so; the other rows go to page files beside it
(``report-cases/0002.html`` ...), each as self-contained as report.html (the same styles, script and policy), with
its rows' drill-downs and links to the report and to the previous and next page. A link to
``report.html#case-<id>`` of a case on another page is sent on to its page file by the script.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cache
from itertools import chain
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, Template
from markupsafe import Markup, escape

from consensus_eval._errors import InputError, UsageError
from consensus_eval._parallel import beside
from consensus_eval.analysis.audit import CaseAudit
from consensus_eval.domain.writable import atomic_writer, check_output_path, write_error
from consensus_eval.output.report import fmt
from consensus_eval.output.report.blocks import (
    PARA_CLASS,
    Bar,
    Block,
    Cases,
    Cell,
    Figure,
    Group,
    Heading,
    Para,
    Part,
    TableBlock,
    shown,
)
from consensus_eval.output.report.charts import interval_bar
from consensus_eval.output.report.data import ReportData, needs_review
from consensus_eval.output.report.drill import (
    CHUNK,
    category_options,
    chunk_index,
    embed_json,
    pack_json,
    packed,
    row_facts_of,
    type_names,
)
from consensus_eval.output.report.section_list import Section, header_block, report_blocks

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: catalogue keys the page's script uses (passed to it in the embedded meta JSON)
JS_LABELS = ("showing", "loading", "no_stream", "total", "judge_totals", "human", "flags", "dim_sub", "quiet", "failed",
             "no_deduction", "x_runs", "run_of", "runs_of", "applied_once", "singleton", "same_category", "shared",
             "not_found", "fuzzy", "to_quote", "to_deduction", "failed_runs", "comment", "claimed_vs_derived",
             "mismatch", "record", "conversation", "status_ok", "status_failed", "status_inconclusive",
             "status_incomplete", "verdict_agree", "verdict_disagree", "verdict_unsure", "human_vs_panel",
             "human_comments", "human_added", "fixed_penalty", "verdict_reference",
             "search_placeholder_reasons", "human_dim", "human_whose_reference", "human_whose_own", "human_whose_mean",
             "human_revised", "human_comment_line", "human_comment_case", "name_sep")
#: the catalogue keys the script uses for likert and criteria dimensions (passed only when the rubric has one)
JS_KIND_LABELS = ("dim_sub_likert", "dim_sub_criteria", "quiet_kinds", "level", "met", "not_met", "split",
                  "col_criterion", "col_points")


#: the most cases report.html's table shows, with their drill-downs; a run of more has page files of as many
#: cases each (:func:`write_html`). Measured on a run of 20,000 cases x 4 judges in Chromium at load 6 on a 2-core
#: machine: the page of 2,000 cases opens in 1.7 s and its last case in 0.6 s, of 5,000 in 2.9 s and 1.8 s, the
#: whole run in one file in 12.6 s and 9.2 s (bench/README.md)
PAGE = 2000
#: the page files' names in their folder (:func:`page_name`): a rebuild removes only files of such a name
_PAGE_FILE = re.compile(r"[0-9]{4,}\.html")
#: the mark of a page file written here, in its first screen (:func:`_page_header`): a stale page is removed only
#: when it bears it
_PAGE_MARK = '<p class="meta" id="report-page" data-page="'


@dataclass(frozen=True)
class Pages:
    """How report.html's case table is paged.

    Args:
        main: report.html's file name (``report.html``, ``report.en.html``).
        size: cases a page (:data:`PAGE`).
        n: cases in the run.
    """

    main: str
    size: int
    n: int

    @property
    def count(self) -> int:
        """How many pages: report.html's first one and the page files."""
        return max(1, -(-self.n // self.size))

    @property
    def folder(self) -> str:
        """The page files' folder, beside report.html: ``report-cases`` (``report.en-cases`` ...)."""
        return f"{self.main.removesuffix('.html')}-cases"

    def span(self, k: int) -> tuple[int, int]:
        """The cases of page ``k`` (from 1): (first, last), counted from 1, in the table's order."""
        return (k - 1) * self.size + 1, min(k * self.size, self.n)

    def href(self, k: int, *, here: int) -> str:
        """A link from page ``here`` to page ``k`` (page 1: report.html's case table)."""
        if k == 1:
            return f"../{self.main}#cases" if here > 1 else "#cases"
        return page_name(k) if here > 1 else f"{self.folder}/{page_name(k)}"


def page_name(k: int) -> str:
    """Page ``k``'s file name in its folder: ``0002.html`` ..."""
    return f"{k:04d}.html"


def render_html(data: ReportData) -> str:
    """The whole report as one HTML document (every case in its table: unpaged)."""
    return "".join(html_pieces(data, page=max(1, len(data.ranking))))


def write_html(data: ReportData, path: Path, *, page: int = PAGE) -> list[Path]:
    """Write report.html at ``path`` and, beyond ``page`` cases, its page files (:class:`Pages`); return the
    page files' paths.

    Every page file's path is checked before anything is written: one that is a folder, a device or a pipe is
    refused (:class:`~consensus_eval._errors.InputError`), as is a page folder that is a file. The page files
    are written one at a time (memory bounded by a page, not the run), every other one in a second process
    (:mod:`consensus_eval._parallel`), then report.html; last, the page files an
    earlier build wrote that this one does not (a rebuild of fewer cases) are removed: only regular files of a
    page's name that bear a page's mark (:data:`_PAGE_MARK`), never a folder or a file of another name.

    Args:
        data: the report's content.
        path: report.html's path.
        page: the most cases a page shows (:data:`PAGE`; a small one in tests).
    """
    if page < 1:
        raise UsageError(f"page: {page}; a page of report.html shows at least one case")
    pages = Pages(path.name, page, len(data.ranking))
    folder = path.parent / pages.folder
    targets = [folder / page_name(k) for k in range(2, pages.count + 1)]
    if targets:
        not_folder = _not_a_folder(folder, "nothing was written")
        if os.path.lexists(folder) and not folder.is_dir():
            raise not_folder
        for target in targets:
            check_output_path(target, "a page of report.html's cases")
        try:
            folder.mkdir(exist_ok=True)
        except FileExistsError:
            raise not_folder from None
        except OSError as e:
            raise write_error(folder, e) from None
    numbered = list(enumerate(targets, start=2))
    if len(numbered) > 1:
        # every other page in a second process, the half with page 2 (this one writes report.html after its half)
        with beside(lambda: _write_pages(data, pages, numbered[::2]), cases=pages.n):
            _write_pages(data, pages, numbered[1::2])
    else:
        _write_pages(data, pages, numbered)
    with atomic_writer(path) as f:   # piece by piece: a large report is never one string
        f.writelines(html_pieces(data, page=page, main=path.name))
    _remove_stale(folder, {t.name for t in targets})
    return targets


def _not_a_folder(folder: Path, what_happened: str) -> InputError:
    return InputError(f"{folder}: is not a folder; report.html's pages of cases go there: move it away "
                      f"({what_happened})")


def check_page_folder(out: str | Path, cases: int, *, main: str = "report.html", page: int | None = None) -> None:
    """Before a run of ``cases`` cases calls anything: if its report will have page files (more than ``page``
    cases, :data:`PAGE` by default), their folder beside ``main`` in ``out`` is a folder or is not there yet.
    What is at each page file's path is checked by :func:`existing_pages`; this checks the folder itself, which
    :func:`write_html` would refuse only once every case was scored.

    Args:
        out: the run's folder.
        cases: the most cases the run's report can rank (the cases the run was given).
        main: report.html's file name.
        page: the most cases a page shows (:data:`PAGE`; a small one in tests).

    Raises:
        InputError: the page folder's path holds a file, a device or a pipe (nothing was called).
    """
    pages = Pages(main, PAGE if page is None else page, cases)
    folder = Path(out) / pages.folder
    if pages.count > 1 and os.path.lexists(folder) and not folder.is_dir():
        raise _not_a_folder(folder, "nothing was called")


def _write_pages(data: ReportData, pages: Pages, numbered: list[tuple[int, Path]]) -> None:
    """Page files ``(k, path)``, one at a time."""
    for k, target in numbered:
        with atomic_writer(target) as f:
            f.writelines(page_pieces(data, pages, k))


def existing_pages(out: str | Path) -> list[str]:
    """What is already at a page file's path in the run folder ``out`` (``report-cases/0002.html`` ..., every
    report's page folder), relative to ``out``: the paths a run checks with its other outputs before it calls
    anything (:func:`~consensus_eval.domain.writable.check_outputs`: not a folder or a device, not an input)."""
    found = []
    for folder in sorted(Path(out).glob("report*-cases")):
        try:
            entries = sorted(e.name for e in os.scandir(folder))
        except OSError:   # not a folder (refused when pages are written), or unreadable
            continue
        found += [f"{folder.name}/{name}" for name in entries if _PAGE_FILE.fullmatch(name)]
    return found


def _remove_stale(folder: Path, keep: set[str]) -> None:
    """Remove the page files in ``folder`` an earlier build wrote that are not in ``keep``."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    for e in entries:
        if e.name in keep or not _PAGE_FILE.fullmatch(e.name) or not e.is_file(follow_symlinks=False):
            continue
        try:
            with open(e.path, "rb") as f:
                head = f.read(32768)
            if head.startswith(b"<!DOCTYPE html>") and _PAGE_MARK.encode("ascii") in head:
                os.unlink(e.path)
        except OSError:   # unreadable, or gone: not this build's to remove
            continue


def html_pieces(data: ReportData, *, page: int = PAGE, main: str = "report.html") -> Iterator[str]:
    """The report's HTML document in pieces, as the template renders them (joined, :func:`render_html`;
    written one by one to a file, :func:`write_html`: a large report is never one string in memory).

    Args:
        data: the report's content.
        page: the most cases the case table shows; beyond it, the first ``page`` and a line linking to the page
            files (:func:`write_html` writes them).
        main: report.html's file name (the page files' folder is named after it: :class:`Pages`).
    """
    pages = Pages(main, page, len(data.ranking))
    paged = pages.count > 1
    rows = data.ranking[:page] if paged else data.ranking
    script = script_text(kinds=not data.deductions_only, pages=paged)
    # the chunks come last in the page, after the index: each is made as the template reaches it and written
    # at once (a large run's compressed payloads are never all held)
    chunks: Iterator[str] = packed((replace(data, ranking=rows) if paged else data).drill_payloads())
    meta = _meta(data, rows)
    if paged:
        # the other pages' anchors, one list a page, in one more chunk: inflated only when a link names a case
        # that is not here
        meta["pages"] = {"chunk": -(-len(rows) // CHUNK),
                         "files": [pages.href(k, here=1) for k in range(2, pages.count + 1)]}
        later = [[data.anchors[a.case_id] for a in data.ranking[slice(*_bounds(pages, k))]]
                 for k in range(2, pages.count + 1)]
        chunks = chain(chunks, [pack_json(later)])
    listed = report_blocks(data, "html")
    blocks = [b for _, got in listed for b in got]
    return environment().get_template("report.html.j2").generate(
        d=data, script=script, script_hash=script_hash(script), meta_json=embed_json(meta), chunks=chunks,
        header=Markup("".join(header_pieces(header_block(data), blocks))),
        sections=section_pieces(listed, pages if paged else None))


def _meta(data: ReportData, rows: Sequence[CaseAudit]) -> dict[str, Any]:
    """The data the page's script reads (``report-meta``) for a table of ``rows``: the judges, case id -> its
    chunk, the catalogue's texts it shows, the deduction types' names."""
    labels = JS_LABELS if data.deductions_only else (*JS_LABELS, *JS_KIND_LABELS)
    return {"judges": data.judges, "index": chunk_index(a.case_id for a in rows),
            "labels": {k: data.t(k) for k in labels}, "types": [name for _, name in type_names(data.rubric)]}


def _bounds(pages: Pages, k: int) -> tuple[int, int]:
    """Page ``k``'s cases as a slice of the ranking: (start, stop)."""
    first, last = pages.span(k)
    return first - 1, last


def page_pieces(data: ReportData, pages: Pages, k: int) -> Iterator[str]:
    """Page file ``k`` (from 2) of a paged report.html (:func:`write_html`), in pieces: the report's styles,
    script and policy, a line placing it (cases first-last of n, page k of K) with links to the report and to the
    previous and next page, and the case table of its rows with their drill-downs."""
    rows = data.ranking[slice(*_bounds(pages, k))]
    shown = replace(data, ranking=rows)
    script = script_text(kinds=not data.deductions_only, pages=True)
    meta = _meta(data, rows)
    first, last = pages.span(k)
    title = data.t("page_heading", first=first, last=last, n=pages.n, k=k, pages=pages.count)
    table = chain([f'<section id="cases">\n<h2>{_h(title)}</h2>\n'], _case_index(data, rows), ["</section>\n"])
    return environment().get_template("report.html.j2").generate(
        d=data, script=script, script_hash=script_hash(script), meta_json=embed_json(meta),
        chunks=packed(shown.drill_payloads()), header=Markup(_page_header(data, pages, k)),
        sections=(Markup(x) for x in table))


def _page_header(data: ReportData, pages: Pages, k: int) -> str:
    """A page file's first line: where it is in the table, and links to the report, the previous and next page."""
    t = data.t
    first, last = pages.span(k)
    links = [f'<a href="../{escape(pages.main)}">{_h(t("page_report"))}</a>',
             f'<a href="{escape(pages.href(k - 1, here=k))}" rel="prev">{_h(t("page_prev"))}</a>']
    if k < pages.count:
        links.append(f'<a href="{escape(pages.href(k + 1, here=k))}" rel="next">{_h(t("page_next"))}</a>')
    place = t("page_heading", first=first, last=last, n=pages.n, k=k, pages=pages.count)
    return f'{_PAGE_MARK}{k:d}">{_h(place)}</p>\n<nav>\n' + "\n".join(links) + "\n</nav>\n"


def _pages_line(data: ReportData, pages: Pages) -> str:
    """report.html's line above a paged case table: the cases shown here, and a link to every other page."""
    t = data.t
    links = " ".join(f'<a href="{escape(pages.href(k, here=1))}">{k:d}</a>' for k in range(2, pages.count + 1))
    text = (t("pages_note", last=pages.size, n=pages.n, pages=f"2–{pages.count}") if pages.count > 2
            else t("pages_note_one", last=pages.size, n=pages.n))
    return f'<p class="warn" id="case-pages">{_h(text)} {links}</p>\n'


def header_pieces(header: Block, blocks: Sequence[Block]) -> Iterator[str]:
    """The first screen's parts, the navigation after the first (the meta line): a link to each block report.html
    shows that has one (:attr:`~consensus_eval.output.report.blocks.Block.nav`), in the list's order."""
    pieces = parts_html(header.content())
    yield next(pieces, "")
    yield "<nav>\n"
    for b in blocks:
        if b.nav is not None:
            yield f'<a href="#{escape(b.id)}">{_h(b.nav or b.title)}</a>' + ("\n" if b.nav_break else "")
    yield "</nav>\n"
    yield from pieces


def section_pieces(listed: Sequence[tuple[Section, Sequence[Block]]], pages: Pages | None = None) -> Iterator[Markup]:
    """Every section of the list report.html shows, in pieces of HTML (a section's gap after it, shown or not);
    ``pages``: the case table is paged (its first page only, and a line linking to the others)."""
    for section, blocks in listed:
        for b in blocks:
            for piece in block_pieces(b, pages):
                yield Markup(piece)
        if section.html_gap:
            yield Markup("\n")


def _case_index(data: ReportData, rows: Sequence[CaseAudit] | None = None, pages: Pages | None = None) -> Iterator[str]:
    """report.html's table of every case (``rows``: of these only, a page's): its controls and head, each row, its
    foot and legend; ``pages``: report.html's table is paged, a line above it says so and links to the pages."""
    if pages is not None:
        yield _pages_line(data, pages)
    types = type_names(data.rubric)
    options = category_options(data.rubric)
    facts = row_facts_of(data.judges, [c for c, _ in options], [t for t, _ in types])
    module = environment().get_template("cases.html.j2").module
    yield str(module.index_head(data, data.t, data.rubric.dimensions, data.rubric,  # type: ignore[attr-defined]
                                [(c, data.t("fixed_penalty") if c == "fixed_penalty" else label)
                                 for c, label in options]))
    yield from case_rows(data, facts, rows)
    yield str(module.index_tail(data.t))  # type: ignore[attr-defined]


def case_rows(data: ReportData, facts: Callable[[CaseAudit], dict[str, str]],
              rows: Sequence[CaseAudit] | None = None) -> Iterator[Markup]:
    """The case table's rows (``<tr>...</tr>`` and a newline each), ranking order, made one at a time: every value
    escaped as the template's autoescape would. ``facts``: the rows' filter indexes (:func:`row_facts_of`);
    ``rows``: these cases only (a page's; by default every case).
    Built here rather than in the template: a row is one string, not some seventy template pieces."""
    t = data.t
    dims = [(dim.id, dim.stars is None) for dim in data.rubric.dimensions]
    star_total = data.has_star_total
    mode = data.review_queue.mode
    status_text: dict[str, str] = {}
    # escaped as autoescape would: figures (digits, ".", "-", "–"), the filters' indexes (digits and spaces), star
    # classes and anchors (ASCII letters, digits, "_", "-") have nothing to escape and are written as they are
    for a in data.ranking if rows is None else rows:
        c = data.consensus_by_id[a.case_id]
        f = facts(a)
        stars = [k for k in c.stars.values() if k is not None]
        rv = needs_review(a)
        anchor = escape(data.anchors[a.case_id])
        status = escape(c.status)
        if c.status not in status_text:
            status_text[c.status] = escape(t("status_" + c.status))
        row = [f'<tr id="{anchor}" data-id="{escape(a.case_id)}" data-s="{status}" '
               f'data-k="{min(stars) if stars else 6:d}"']
        if f["judges"]:
            row.append(f' data-j="{escape(f["judges"])}"')
        if f["cats"]:
            row.append(f' data-c="{escape(f["cats"])}"')
        if f["types"]:
            row.append(f' data-t="{escape(f["types"])}"')
        if rv or c.flags:
            row.append(f' class="{"review" if rv else ""}{" flag" if c.flags else ""}"')
        row.append(f'><td class="n">{a.rank:d}</td><td><a class="case" href="#{anchor}">{escape(a.case_id)}</a>'
                   f'</td><td><span class="status {status}">{status_text[c.status]}</span></td>')
        for dim_id, plain in dims:
            if plain:
                row.append(f'<td class="n">{fmt.avg(c.scores[dim_id])}</td>')
            else:
                k = c.stars[dim_id]
                row.append(f'<td class="n {star_class(k)}">{fmt.avg(c.scores[dim_id])} '
                           f'<i>{k if k else "–"}★</i></td>')
        row.append(f'<td class="n"><b>{fmt.avg(c.total)}</b></td>')
        if star_total:
            row.append(f'<td class="n">{fmt.num(c.star_total)}</td>')
        row.append(f'<td class="n">{fmt.num(c.spread)}</td>'
                   f'<td class="n">{fmt.mean1(a.score(mode))}</td>'
                   f'<td class="flags">{escape("; ".join(data.flag_texts(c.case_id)))}</td></tr>\n')
        yield Markup("".join(row))


def block_html(b: Block | None) -> Markup:
    """A section (:class:`~consensus_eval.output.report.blocks.Block`) as report.html's ``<section>`` (empty for
    None)."""
    return Markup("".join(block_pieces(b))) if b is not None else Markup("")


def block_pieces(b: Block, pages: Pages | None = None) -> Iterator[str]:
    """A block as report.html's ``<section>``, in pieces (``pages``: its case table is paged)."""
    cls = f' class="{escape(b.css_class)}"' if b.css_class else ""
    head = f' class="{escape(b.heading_class)}"' if b.heading_class else ""
    yield f'<section id="{escape(b.id)}"{cls}>\n<h2{head}>{_h(b.title)}</h2>\n'
    yield from parts_html(b.content(), pages)
    yield "</section>\n"


def parts_html(parts: Sequence[Part], pages: Pages | None = None) -> Iterator[str]:
    """Each part report.html shows, as HTML (``pages``: the case table is paged, its first page shown)."""
    for p in shown(list(parts), "html"):
        if isinstance(p, Para):
            ident = f' id="{escape(p.id)}"' if p.id else ""
            link = "" if p.link is None else (f' <a href="{escape(p.link.href)}"'
                                              + (f' id="{escape(p.link.id)}"' if p.link.id else "")
                                              + f">{_h(p.link.text)}</a>")
            yield f'<p class="{p.cls or PARA_CLASS[p.kind]}"{ident}>{_h(p.text)}{link}</p>' + ("\n" if p.end else "")
        elif isinstance(p, Heading):
            yield f"<h{p.level}>{_h(p.text)}</h{p.level}>\n"
        elif isinstance(p, TableBlock):
            if p.rows:
                yield _table(p)
        elif isinstance(p, Group):
            if p.summary:
                yield f"<details><summary>{_h(p.summary)}</summary>\n"
                yield from parts_html(p.parts, pages)
                yield "</details>\n"
            else:
                yield f'<div class="{escape(p.cls)}">\n' if p.cls else "<div>\n"
                yield from parts_html(p.parts, pages)
                yield "</div>\n"
        elif isinstance(p, Cases):
            if p.kind == "index":
                data: ReportData = p.data  # type: ignore[assignment]
                yield from _case_index(data, data.ranking[:pages.size] if pages else None, pages)
        elif isinstance(p, Figure):
            yield str(getattr(figures().module, p.kind)(p.data, p.t))


def _h(x: object) -> str:
    """A text of a block, escaped for HTML."""
    return str(escape(str(x)))


_N = ' class="n"'


def _table(tb: TableBlock) -> str:
    lay = tb.layout
    cols = tb.shown("html")
    attrs = (f' class="{escape(tb.cls)}"' if tb.cls else "") + (f' id="{escape(tb.id)}"' if tb.id else "")
    out = [f'<div class="scroll"><table{attrs}><tbody>\n' if lay.inline else f'<div class="scroll">\n<table{attrs}>\n']
    if tb.caption:
        out.append(f"<caption>{_h(tb.caption)}</caption>\n")
    if tb.header and not lay.inline:
        ths = "".join(f"<th{_N if tb.right and tb.right[i] else ''}>{_h(tb.header[i])}</th>" for i in cols)
        out.append(f"<thead><tr>{ths}</tr></thead>\n")
    if not lay.inline:
        out.append("<tbody>\n" if lay.body_line else "<tbody>")
    for r in range(len(tb.rows)):
        cells = []
        for j, i in enumerate(cols):
            if j in lay.breaks:
                cells.append("\n")
            cells.append(_cell(tb, r, i, head=tb.row_heads and j == 0))
        if len(cols) in lay.breaks:
            cells.append("\n")
        last = r == len(tb.rows) - 1
        out.append(f"<tr>{''.join(cells)}</tr>" + ("\n" if lay.row_lines and (lay.last_line or not last) else ""))
    out.append("</tbody></table></div>\n" if lay.inline else "</tbody>\n</table>\n</div>\n")
    return "".join(out)


def _cell(tb: TableBlock, r: int, i: int, *, head: bool) -> str:
    c = tb.rows[r][i]
    cell = c if isinstance(c, Cell) else Cell(c)
    text = _h(cell.text)
    if cell.href:
        text = f'<a href="{escape(cell.href)}">{text}</a>'
    if cell.bar is not None:
        text = str(bar_svg(cell.bar))
    if cell.spans:
        text += (" " if text else "") + "".join(f'<span class="{escape(k)}">{_h(s)}</span>' for k, s in cell.spans)
    if head:
        return f"<th>{text}</th>"
    cls = cell.css or ("barcell" if cell.bar is not None else "n" if tb.right and tb.right[i] else "")
    style = cell.style or tb.shade(r, i)
    attrs = (f' class="{escape(cls)}"' if cls else "") + (f' style="{escape(style)}"' if style else "")
    return f"<td{attrs}>{text}</td>"


def bar_svg(b: Bar) -> Markup:
    """An interval bar (:class:`~consensus_eval.output.report.blocks.Bar`) as report.html draws it."""
    return figures().module.bar(b.value, b.ci, b.width, b.alpha, b.label)  # type: ignore[attr-defined,no-any-return]


@cache
def figures() -> Template:
    """The template of report.html's figures (``templates/figures.html.j2``: its macros draw them)."""
    return environment().get_template("figures.html.j2")


#: the lines of report.js that only likert and criteria dimensions need lie between these marker lines
_KINDS_BLOCK = re.compile(r"^[ \t]*/\* kinds \{ \*/\n.*?^[ \t]*/\* \} kinds \*/\n", re.MULTILINE | re.DOTALL)
#: the lines only a paged report needs (:func:`write_html`), between these marker lines
_PAGES_BLOCK = re.compile(r"^[ \t]*/\* pages \{ \*/\n.*?^[ \t]*/\* \} pages \*/\n", re.MULTILINE | re.DOTALL)


@cache
def script_text(kinds: bool = True, pages: bool = False) -> str:
    """The page's script (``templates/report.js``), as embedded; without ``kinds``, without the lines only a
    likert or criteria dimension needs (marked ``/* kinds { */`` ... ``/* } kinds */``): a rubric of deduction
    dimensions gets only the lines it uses; without ``pages``, without the lines only a paged report needs (marked
    ``/* pages { */`` ... ``/* } pages */``): a report of one page is what it was before pages."""
    text = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    text = text if kinds else _KINDS_BLOCK.sub("", text)
    return text if pages else _PAGES_BLOCK.sub("", text)


def script_hash(script: str) -> str:
    """The CSP source allowing exactly this inline script: ``sha256-<base64 of its SHA-256>``."""
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


@cache
def environment() -> Environment:
    """The Jinja environment of the HTML report (autoescape on for every template)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(num=fmt.num, fixed=fmt.fixed, money=fmt.money, percent=fmt.percent, integer=fmt.integer,
                       stars=fmt.stars,
                       alpha_value=fmt.alpha_value, alpha_ci=fmt.alpha_ci, mean1=fmt.mean1, avg=fmt.avg,
                       alpha_value_or_dash=_alpha_value_or_dash)
    env.globals.update(key_label=fmt.key_label, star_class=star_class, verdict=fmt.verdict,
                       alpha_cell=fmt.alpha_cell, interval_bar=interval_bar, is_review=needs_review, ci1=fmt.ci1,
                       share=fmt.share, block_html=block_html)
    return env


def _alpha_value_or_dash(a: Any) -> str:
    return fmt.alpha_value(a) if a is not None and a.value is not None else fmt.DASH


def star_class(stars: int | None) -> str:
    """A CSS class for a star level (``s1`` .. ``s5``; ``s0`` when there is none)."""
    return f"s{stars}" if stars else "s0"
