"""The reports of a run: ``report.md`` and a self-contained ``report.html`` (inline CSS and SVG, no
script, no network), rendered from its :class:`~consensus_eval.analysis.results.Results`.
"""

from __future__ import annotations

from pathlib import Path

from consensus_eval.analysis.results import Results
from consensus_eval.output.files import write_text
from consensus_eval.output.report.data import build_report_data
from consensus_eval.output.report.html import render_html
from consensus_eval.output.report.markdown import render_markdown

__all__ = ["write_reports"]


def write_reports(results: Results, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``out_dir/report.md`` and ``out_dir/report.html``; return their paths."""
    out = Path(out_dir)
    data = build_report_data(results, out)
    md_path, html_path = out / "report.md", out / "report.html"
    write_text(md_path, render_markdown(data))
    write_text(html_path, render_html(data))
    return md_path, html_path
