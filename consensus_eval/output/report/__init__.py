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
from consensus_eval.output.files import atomic_writer, write_text
from consensus_eval.output.report.data import build_report_data
from consensus_eval.output.report.html import html_pieces
from consensus_eval.output.report.markdown import render_markdown

__all__ = ["write_reports"]


@gc_paused_call
def write_reports(results: Results, out_dir: str | Path, lang: str | None = None) -> tuple[Path, Path]:
    """Write ``out_dir/report.md`` and ``out_dir/report.html``; return their paths.

    ``lang``: ``zh`` or ``en`` for the reports' headings and labels; by default the rubric's language.
    When the folder has a ``calibration.json``, both show its section
    (:mod:`~consensus_eval.output.report.calibration`).
    """
    out = Path(out_dir)
    data = build_report_data(results, out, lang)
    md_path, html_path = out / "report.md", out / "report.html"
    # a quote, a name or a label holding a control character (ESC...) is written escaped: report.md is read in terminals
    write_text(md_path, escape_controls(render_markdown(data)))
    with atomic_writer(html_path) as f:   # piece by piece: a large report is never one string
        f.writelines(html_pieces(data))
    return md_path, html_path
