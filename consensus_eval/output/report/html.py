"""report.html: one self-contained file (inline CSS and SVG, no script, no external resource).

Rendered with Jinja2 with autoescape on for every template: all text from cases and judges is
escaped, and the template never marks data ``|safe``. A Content-Security-Policy meta tag forbids
scripts and any fetch as a second line of defence, so the file works (and stays inert) offline.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from consensus_eval.output.report import fmt
from consensus_eval.output.report.data import ReportData

TEMPLATES = Path(__file__).resolve().parent / "templates"


def render_html(data: ReportData) -> str:
    """The whole report as one HTML document."""
    return environment().get_template("report.html.j2").render(d=data, dims=data.rubric.dimensions)


@cache
def environment() -> Environment:
    """The Jinja environment of the HTML report (autoescape on for every template)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(num=fmt.num, fixed=fmt.fixed, money=fmt.money, integer=fmt.integer, stars=fmt.stars,
                       alpha_value=fmt.alpha_value, alpha_ci=fmt.alpha_ci)
    env.globals.update(key_label=fmt.key_label, heat=heat, star_class=star_class)
    return env


def heat(value: float | None, worst: float) -> str:
    """A CSS background colour for a disagreement figure: white at 0, deeper red towards ``worst``."""
    if value is None or worst <= 0:
        return "transparent"
    share = max(0.0, min(1.0, value / worst))
    return f"hsl(4, 75%, {round(97 - 30 * share)}%)"


def star_class(stars: int | None) -> str:
    """A CSS class for a star level (``s1`` .. ``s5``; ``s0`` when there is none)."""
    return f"s{stars}" if stars else "s0"
