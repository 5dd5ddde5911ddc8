"""The reports of a run: ``report.md`` and a self-contained ``report.html`` (inline CSS, SVG and data,
one script allowed by its hash, no network), rendered from its
:class:`~consensus_eval.analysis.results.Results`, in Chinese or English
(:mod:`consensus_eval.output.report.i18n`).
"""

from __future__ import annotations

from pathlib import Path

from consensus_eval._gc import gc_paused_call
from consensus_eval.analysis.results import Results
from consensus_eval.domain.textio import escape_controls
from consensus_eval.output.files import write_text
from consensus_eval.output.report.data import build_report_data
from consensus_eval.output.report.html import PAGE, write_html
from consensus_eval.output.report.i18n import LANGS, default_lang
from consensus_eval.output.report.markdown import render_markdown

__all__ = ["report_paths", "write_reports"]


def report_paths(out_dir: str | Path, lang: str, default: str) -> tuple[Path, Path]:
    """Where ``report --lang`` writes the reports in ``lang``: ``report.md`` and ``report.html`` in the rubric's
    own language (``default``), ``report.<lang>.md`` and ``report.<lang>.html`` beside them in another one."""
    out = Path(out_dir)
    stem = "report" if lang == default else f"report.{lang}"
    return out / f"{stem}.md", out / f"{stem}.html"


@gc_paused_call
def write_reports(results: Results, out_dir: str | Path, lang: str | None = None, *,
                  stem: str = "report", page: int = PAGE) -> tuple[Path, Path]:
    """Write ``out_dir/<stem>.md`` and ``out_dir/<stem>.html`` (``report.md``, ``report.html``); return their paths.

    ``lang``: ``zh`` or ``en`` for the reports' headings and labels; by default the rubric's language.
    ``report --lang`` in another language than the rubric's writes beside them (``stem`` ``report.en``:
    :func:`report_paths`); writing ``report.*`` also rewrites such reports in the other languages when the folder
    has them, so a rebuild leaves none stale. When the folder has a ``calibration.json``, every report shows its
    section (:mod:`~consensus_eval.output.report.calibration_blocks`). Beyond ``page`` cases, report.html shows the
    first ``page`` rows of its case table and the others go to page files beside it
    (:func:`~consensus_eval.output.report.html.write_html`).
    """
    out = Path(out_dir)
    written = lang or default_lang(results.rubric)
    todo = [(written, stem)]
    if stem == "report":
        todo += [(x, f"report.{x}") for x in LANGS if x != written and (out / f"report.{x}.html").is_file()]
    for x, name in todo:
        data = build_report_data(results, out, x)
        md_path, html_path = out / f"{name}.md", out / f"{name}.html"
        # a quote, a name or a label holding a control character (ESC...) is written escaped: report.md is read in
        # terminals
        write_text(md_path, escape_controls(render_markdown(data)))
        write_html(data, html_path, page=page)
    return out / f"{stem}.md", out / f"{stem}.html"
