"""Number and label formatting shared by the Markdown and HTML reports (plain text out; escaping is
the renderer's job)."""

from __future__ import annotations

from dataclasses import dataclass

from consensus_eval.analysis.alpha import Alpha
from consensus_eval.analysis.intervals import Proportion
from consensus_eval.domain.rubric import Rubric
from consensus_eval.output.files import fmt_num
from consensus_eval.output.report.i18n import Messages

DASH = "–"


def num(x: float | None) -> str:
    """A score or count: up to 4 decimals, no trailing zeros; a dash for None."""
    return fmt_num(x) if x is not None else DASH


def fixed(x: float | None, digits: int = 2) -> str:
    """A statistic with a fixed number of decimals; a dash for None."""
    return f"{x:.{digits}f}" if x is not None else DASH


def money(x: float | None) -> str:
    """A cost in dollars, 4 decimals (judges often cost fractions of a cent)."""
    return f"${x:.4f}" if x is not None else DASH


def percent(x: float | None) -> str:
    """A share in [0, 1] as a percentage to one decimal (``0.724`` -> ``72.4%``); a dash for None."""
    return f"{100 * x:.1f}%" if x is not None else DASH


def integer(x: float | None) -> str:
    """A token or call count with thousands separators."""
    return f"{int(x):,}" if x is not None else DASH


def stars(n: int | None) -> str:
    """``★★★☆☆`` for 3 of 5 stars; a dash for None."""
    return "★" * n + "☆" * (5 - n) if n is not None else DASH


def alpha_value(a: Alpha | None) -> str:
    """Alpha to 3 decimals, or ``undefined``."""
    if a is None or a.value is None:
        return "undefined"
    return f"{a.value:.3f}"


def alpha_ci(a: Alpha | None) -> str:
    """The bootstrap 95% interval as ``[0.61, 0.92]``, or empty when there is none."""
    if a is None or not a.ci:
        return ""
    lo, hi = a.ci
    return f"[{lo:.2f}, {hi:.2f}]"


def alpha_text(a: Alpha | None) -> str:
    """``0.812 [0.61, 0.92]``, or ``undefined (reason)``."""
    if a is None or a.value is None:
        reason = a.reason if a is not None else None
        return f"undefined ({reason})" if reason else "undefined"
    ci = alpha_ci(a)
    return f"{alpha_value(a)} {ci}".strip()


def alpha_words(a: Alpha, t: Messages) -> str:
    """An alpha for a line of the console: ``0.812 [0.61, 0.92]``; undefined, its reason (English) or its verdict
    (another language)."""
    if a.value is None:
        return f"undefined ({a.reason})" if t.lang == "en" else verdict(a, t).text
    ci = f" [{a.ci[0]:.2f}, {a.ci[1]:.2f}]" if a.ci else ""
    return f"{a.value:.3f}{ci}"


def key_label(rubric: Rubric, key: str, t: Messages | None = None) -> str:
    """A reliability key (a dimension id or ``total``) as ``准确性 (accuracy)``."""
    if key == "total":
        return t("total") if t is not None else "total"
    dim = rubric.dimensions_by_id.get(key)
    return f"{dim.name} ({key})" if dim else key


def avg(x: float | None) -> str:
    """A score that is an average (the panel's, a judge's over runs): one decimal at most (``87.7``,
    ``95``); a dash for None."""
    if x is None:
        return DASH
    r = round(x, 1)
    return str(int(r)) if r == int(r) else f"{r:.1f}"


def mean1(x: float | None) -> str:
    """An average (points, errors) to one decimal; a dash for None."""
    return f"{x:.1f}" if x is not None else DASH


#: Krippendorff's guide (Content Analysis, 2004, p. 241): rely on variables with alpha >= 0.800,
#: consider 0.667 <= alpha < 0.800 only for tentative conclusions, discard those below 0.667
RELIABLE, TENTATIVE = 0.8, 0.667


@dataclass(frozen=True)
class Verdict:
    """What an alpha means in plain words: ``level`` (a CSS class: ``reliable``, ``tentative``,
    ``unreliable``, ``stable`` for identical ratings, ``na`` when it cannot be computed) and ``text``."""

    level: str
    text: str


def verdict(a: Alpha | None, t: Messages, *, runs: bool = False, category: bool = False) -> Verdict:
    """The plain-words verdict on an alpha against Krippendorff's guide (:data:`RELIABLE`,
    :data:`TENTATIVE`), decided by its interval's lower bound (the point estimate when there is no
    interval): 0.93 [-0.10, 0.98] is not shown to be reliable; ``runs``: the alpha compares a judge's
    repeated runs (identical runs are then *perfectly stable*); ``category``: the alpha of the points
    taken off in one deduction category (identical ratings there mostly mean nobody deducted)."""
    if a is None:
        return Verdict("na", t("v_missing"))
    if a.value is None:
        reason = a.reason or ""
        if reason.startswith("no variation"):
            return Verdict("stable", t("v_stable_runs") if runs else t("v_identical_category") if category
                           else t("v_identical"))
        if reason.startswith("no unit"):
            return Verdict("na", t("v_no_unit_runs") if runs else t("v_no_unit"))
        return Verdict("na", t("v_undefined", reason=reason) if reason else t("v_missing"))
    v = a.value
    lo = a.ci[0] if a.ci else None
    sure = v if lo is None else min(v, lo)      # what the interval is sure of
    if sure >= RELIABLE:
        return Verdict("reliable", t("v_reliable"))
    if sure >= TENTATIVE:
        return Verdict("tentative", t("v_tentative_but", lo=f"{sure:.2f}") if v >= RELIABLE else t("v_tentative"))
    if v >= TENTATIVE:
        return Verdict("unreliable", t("v_not_shown", lo=f"{sure:.2f}"))
    return Verdict("unreliable", t("v_unreliable"))


def alpha_cell(a: Alpha | None, t: Messages, *, runs: bool = False) -> str:
    """Alpha for a table cell: ``0.812 [0.61, 0.92]``, or in a few words why there is no number
    (``perfectly stable``, ``identical ratings``, ``cannot be computed``; the verdict column says more)."""
    if a is None or a.value is None:
        v = verdict(a, t, runs=runs)
        return t("v_stable_short") if v.level == "stable" and runs else \
            t("v_identical_short") if v.level == "stable" else t("v_na_short")
    return f"{a.value:.3f} {alpha_ci(a)}".strip()


def star_formula(rubric: Rubric) -> tuple[str, float]:
    """The star total's formula in words (``准确性 ★ × 8 + 完整性 ★ × 8 + ...``) and its maximum (5 stars
    on every dimension)."""
    parts = [f"{d.name} ★ × {fmt_num(d.star_weight)}" for d in rubric.dimensions if d.star_weight]
    return " + ".join(parts), 5 * sum(d.star_weight for d in rubric.dimensions)


def ci1(ci: tuple[float, float] | None) -> str:
    """A 95% interval of points (MAE, bias) to one decimal: ``[1.2, 3.4]``; empty when there is none."""
    return f"[{ci[0]:.1f}, {ci[1]:.1f}]" if ci else ""


def share(p: Proportion) -> str:
    """A proportion as ``12.5% (3/24) [4.3%, 31.0%]``: the share, its counts and its Wilson 95% interval;
    a dash when nothing was counted."""
    if p.value is None:
        return DASH
    ci = f" [{p.low:.1%}, {p.high:.1%}]" if p.low is not None and p.high is not None else ""
    return f"{p.value:.1%} ({p.k}/{p.n}){ci}"
