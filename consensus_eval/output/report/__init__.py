"""Reports of a run, rebuilt from its store alone (no judge is called): ``report.md`` and a
self-contained ``report.html`` (inline CSS and SVG, no script, no network), plus the `audit`
command's terminal view (:mod:`consensus_eval.output.audit_console`).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["write_reports"]


def write_reports(out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``out_dir/report.md`` and ``out_dir/report.html``; return their paths.

    Reads ``out_dir/results.sqlite`` (and ``reliability.json`` and ``metrics/*.json`` when present);
    raises FileNotFoundError when the folder has no store.
    """
    from consensus_eval.output.report.data import build_report_data
    from consensus_eval.output.report.html import render_html
    from consensus_eval.output.report.markdown import render_markdown

    out = Path(out_dir)
    data = build_report_data(out)
    md_path, html_path = out / "report.md", out / "report.html"
    _write_atomic(md_path, render_markdown(data))
    _write_atomic(html_path, render_html(data))
    return md_path, html_path


def _write_atomic(path: Path, text: str) -> None:
    """Write ``path.tmp`` then rename it over ``path``: a reader never sees half a report."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
