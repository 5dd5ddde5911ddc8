"""Number and label formatting shared by the Markdown and HTML reports (plain text out; escaping is
the renderer's job)."""

from __future__ import annotations

from consensus_eval.analysis.alpha import Alpha
from consensus_eval.domain.rubric import Rubric
from consensus_eval.output.files import fmt_num

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


def key_label(rubric: Rubric, key: str) -> str:
    """A reliability key (a dimension id or ``total``) as ``准确性 (accuracy)``."""
    if key == "total":
        return "total"
    dim = rubric.dimensions_by_id.get(key)
    return f"{dim.name} ({key})" if dim else key
