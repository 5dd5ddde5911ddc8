"""The report's vocabulary (output/report/blocks.py) as each format renders it: report.md, report.html and the
console show the same block, each what its targets say, with data escaped and the package's own Markdown kept."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from consensus_eval import load_run
from consensus_eval.output.report.blocks import (
    HTML,
    MD,
    Bar,
    Block,
    Cell,
    Group,
    Heading,
    Layout,
    Msg,
    Para,
    TableBlock,
)
from consensus_eval.output.report.data import ReportData, build_report_data
from consensus_eval.output.report.html import block_html, render_html
from consensus_eval.output.report.markdown import block_markdown, md_of, render_markdown
from consensus_eval.output.report.section_list import report_blocks
from consensus_eval.output.trust_console import print_block, print_view


def _console(b: Block) -> str:
    out = io.StringIO()
    print_block(Console(file=out, width=120, color_system=None), b)
    return out.getvalue()


def test_a_message_keeps_its_markdown_and_escapes_its_values() -> None:
    m = Msg("Rerun `consensus-eval score` for {judge}: {n} left", {"judge": "a*b|c", "n": 3})
    assert m == "Rerun `consensus-eval score` for a*b|c: 3 left"          # as plain text
    assert md_of(m) == "Rerun `consensus-eval score` for a\\*b\\|c: 3 left"
    assert md_of("Rerun `x` *now*") == "Rerun \\`x\\` \\*now\\*"         # data: escaped whole
    nested = Msg("{inner} and {x}", {"inner": Msg("`kept`"), "x": "<b>"})
    assert md_of(nested) == "`kept` and &lt;b&gt;"
    assert Msg("{not a placeholder}") == "{not a placeholder}"          # no values: the text as written


def test_a_cell_is_its_text_everywhere_and_more_in_the_page() -> None:
    c = Cell("case-1", href="#case-case-1", spans=(("status ok", "ok"),))
    assert c == "case-1 ok" and c.text == "case-1"
    b = Block("x", "Title", tables=[TableBlock("t", ["case", "n"], [[c, "2"], ["c<2>", Cell(css="v good", text="5")]],
                                               [False, True], row_heads=False)])
    html = str(block_html(b))
    assert '<td><a href="#case-case-1">case-1</a> <span class="status ok">ok</span></td><td class="n">2</td>' in html
    assert '<td>c&lt;2&gt;</td><td class="v good">5</td>' in html
    assert "| case\\-1 ok | 2 |" not in block_markdown(b)          # a hyphen is no Markdown syntax
    assert "| case-1 ok | 2 |" in block_markdown(b) and "| c&lt;2&gt; | 5 |" in block_markdown(b)


def test_columns_and_parts_show_where_their_targets_say() -> None:
    bar = Bar(0.8, (0.7, 0.9), "interval")
    tb = TableBlock("alpha", ["", "α [CI]", "α", "bar"],
                    [["total", "0.800 [0.70, 0.90]", "0.800", Cell(css="barcell", bar=bar)]],
                    [False, True, True, False],
                    columns=[frozenset({"md", "html", "reliability"}), frozenset({"md", "reliability"}), HTML, HTML])
    b = Block("rel", "Reliability", parts=[Para("only in the file", targets=MD), tb, Heading("Sub", targets=HTML)])
    md = block_markdown(b)
    assert md == ("## Reliability\n\nonly in the file\n\n|  | α \\[CI\\] |\n|---|---:|\n"
                  "| total | 0.800 \\[0.70, 0.90\\] |")
    html = str(block_html(b))
    assert "only in the file" not in html and "<h3>Sub</h3>" in html
    assert '<thead><tr><th></th><th class="n">α</th><th>bar</th></tr></thead>' in html
    assert '<td class="barcell"><svg class="ci" width="120"' in html and 'aria-label="interval"' in html
    assert '<rect class="cibar" x="83.2" y="5"' in html       # 2 + 0.7 * 116
    console = _console(b)
    assert "total" in console and "0.800 [0.70, 0.90]" in console and "only in the file" not in console
    assert "Sub" not in console and "bar" not in console


def test_paragraph_kinds_and_groups() -> None:
    b = Block("s", "Section", paragraphs=["intro <i>"], warnings=["careful"], notes=["a note"],
              parts=[Group([Para("inside")], summary="More"), Para("cost", "note", cls="note", id="c")])
    assert block_markdown(b) == ("## Section\n\nintro &lt;i&gt;\n\n**careful**\n\na note\n\n### More\n\ninside\n\ncost")
    assert str(block_html(b)) == (
        '<section id="s" class="trust">\n<h2>Section</h2>\n<p class="muted">intro &lt;i&gt;</p>\n'
        '<p class="warn">careful</p>\n<p class="muted">a note</p>\n<details><summary>More</summary>\n'
        '<p class="muted">inside</p>\n</details>\n<p class="note" id="c">cost</p>\n</section>\n')
    assert _console(b).splitlines() == ["Section", "intro <i>", "careful", "a note", "More", "inside", "cost"]


def test_the_source_layout_of_a_table() -> None:
    rows = [["a", "1", "2"], ["b", "3", "4"], ["c", "5", "6"]]

    def page(layout: Layout) -> str:
        return str(block_html(Block("x", "X", tables=[TableBlock("t", ["", "p", "q"], rows, layout=layout)])))

    assert "<tr><th>a</th><td>1</td>\n<td>2</td>\n</tr>\n<tr><th>b</th>" in page(Layout(breaks=(2, 3)))
    assert "<tbody>\n<tr><th>a</th><td>1</td><td>2</td></tr><tr><th>b</th>" in page(Layout(row_lines=False))
    assert "<tbody><tr><th>a</th>" in page(Layout(row_lines=False, body_line=False))
    assert "<td>6</td></tr></tbody>\n</table>" in page(Layout(row_lines=False, body_line=False))
    html = str(block_html(Block("x", "X", tables=[TableBlock("", [], rows, cls="m", layout=Layout(inline=True))])))
    assert '<div class="scroll"><table class="m"><tbody>\n<tr><th>a</th>' in html and "</tbody></table></div>\n" in html
    assert "<thead>" not in html
    empty = Block("x", "X", tables=[TableBlock("t", ["a"], [])])
    assert "<table" not in str(block_html(empty)) and "|" not in block_markdown(empty)


@pytest.fixture(scope="module")
def two_systems(tmp_path_factory: pytest.TempPathFactory) -> ReportData:
    from tests.test_audit import build_panel_store
    from tests.test_trust import _synthetic_panel

    panel, cases = _synthetic_panel(n_sources=8)
    folder = build_panel_store(tmp_path_factory.mktemp("sys") / "run", panel, cases)
    return build_report_data(load_run(folder, n_boot=0), folder, "en")


def test_each_format_renders_the_sections_the_list_names_for_it(two_systems: ReportData) -> None:
    d = two_systems
    shown = {target: [b.id for _, got in report_blocks(d, target) for b in got]
             for target in ("md", "html", "summary", "reliability")}
    assert shown["summary"] == ["systems"]
    assert shown["reliability"] == ["reliability", "decision"]          # no labels: no human, added or validity
    assert shown["md"][-1] == "details" and "details" not in shown["html"]
    assert [s for s in shown["md"] if s != "details"] == shown["html"]
    assert shown["html"][:4] == ["review", "cases", "systems", "quality"]
    # report.html: its navigation is the list, in the page's order
    html = render_html(d)
    nav = re.findall(r'<a href="#([a-z-]+)">', html.split("<nav>")[1].split("</nav>")[0])
    sections = re.findall(r'<section id="([a-z-]+)"', html)
    assert nav == sections == shown["html"]
    md = render_markdown(d)
    assert [line[3:] for line in md.splitlines() if line.startswith("## ")][2] == "Systems leaderboard"


def test_the_console_views_print_their_sections_only(two_systems: ReportData) -> None:
    out = io.StringIO()
    print_view(Console(file=out, width=120, color_system=None), two_systems, "summary")
    summary = out.getvalue()
    assert summary.startswith("Systems leaderboard\n") and "Krippendorff" not in summary
    out = io.StringIO()
    print_view(Console(file=out, width=120, color_system=None), two_systems, "reliability")
    text = out.getvalue()
    # the reliability section's console form: its table's title, not the files' heading; then the decision study
    assert text.lstrip().startswith("Krippendorff's alpha, 3 judges x 16 cases (95% CI)")
    assert "Reliability (Krippendorff's alpha)" not in text and "How many judges and runs" in text
    assert "Systems leaderboard" not in text and "What it means" not in text
