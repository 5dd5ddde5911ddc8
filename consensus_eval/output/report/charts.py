"""Geometry of the report's inline SVG charts, computed from numbers only.

The HTML template draws these shapes; no text from cases or judges goes into a chart except the
judge names, which the template escapes like everything else. Coordinates are SVG user units
(pixels at 100% zoom), x growing to the right, y downwards.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

#: bin widths a histogram may use, smallest first (the first one giving at most MAX_BINS bins wins)
BIN_WIDTHS = (0.5, 1, 2, 5, 10, 20, 25, 50, 100, 200, 500, 1000)
MAX_BINS = 20
#: a box plot draws one dot per total up to this many totals per judge (beyond, the box says enough)
MAX_DOTS = 300


@dataclass(frozen=True)
class Tick:
    """An axis tick: where it is (``x``) and what it reads (``label``)."""

    x: float
    label: str


@dataclass(frozen=True)
class Bar:
    """One histogram bin: the rectangle, the bin's value range [lo, hi) and how many values fell in it."""

    x: float
    y: float
    width: float
    height: float
    lo: float
    hi: float
    count: int


@dataclass
class Histogram:
    """One judge's totals binned on the axis shared by every judge (so the charts compare)."""

    judge: str
    n: int
    width: float
    height: float
    bars: list[Bar]
    ticks: list[Tick]
    max_count: int
    baseline: float
    left: float
    right: float
    #: the axes' titles (with their units) and where the count axis starts and ends (y of 0 and max_count)
    x_title: str = ""
    y_title: str = ""
    top: float = 10.0


@dataclass(frozen=True)
class Box:
    """One judge's box: quartiles and whiskers (min and max, no outlier rule) as x positions.

    ``stats`` keeps the values themselves (n, min, q1, median, q3, max, mean), ``points`` the x of
    every total (drawn as dots), ``y`` the box's vertical centre.
    """

    judge: str
    y: float
    min_x: float
    q1_x: float
    median_x: float
    q3_x: float
    max_x: float
    points: list[float]
    stats: dict[str, float]


@dataclass
class BoxPlot:
    """Every judge's box on one shared axis, one row per judge."""

    width: float
    height: float
    label_width: float
    axis_y: float
    boxes: list[Box]
    ticks: list[Tick]
    judges_without_data: list[str] = field(default_factory=list)
    x_title: str = ""


@dataclass(frozen=True)
class IntervalBar:
    """An alpha and its 95% interval drawn on a 0-1 scale ``width`` wide: the interval as a bar from
    ``lo_x`` to ``hi_x`` (None without an interval), the value as a dot at ``x``, and the guide's
    thresholds (0.667 and 0.8) as marks at ``tentative_x`` and ``reliable_x``. Values below 0 are drawn
    at 0 (``clipped``)."""

    width: float
    x: float
    lo_x: float | None
    hi_x: float | None
    tentative_x: float
    reliable_x: float
    clipped: bool


def interval_bar(value: float, ci: tuple[float, float] | None, width: float = 120,
                 thresholds: bool = True) -> IntervalBar:
    """The geometry of :class:`IntervalBar` for one alpha, or any share in [0, 1] (2 px of margin on
    each side); ``thresholds``: whether the template draws the guide's marks (alpha only)."""
    pad = 2.0

    def to_x(v: float) -> float:
        return round(pad + max(0.0, min(1.0, v)) * (width - 2 * pad), 2)

    return IntervalBar(width=width, x=to_x(value), lo_x=to_x(ci[0]) if ci else None, hi_x=to_x(ci[1]) if ci else None,
                       tentative_x=to_x(0.667), reliable_x=to_x(0.8), clipped=value < 0 or bool(ci and ci[0] < 0))


@dataclass(frozen=True)
class Domain:
    """The shared x axis: values from ``lo`` to ``hi``, binned by ``bin_width``."""

    lo: float
    hi: float
    bin_width: float

    @property
    def n_bins(self) -> int:
        return max(1, round((self.hi - self.lo) / self.bin_width))


def domain(values: Sequence[float]) -> Domain:
    """A shared axis covering ``values`` with round bin edges and at most MAX_BINS bins."""
    if not values:
        return Domain(0.0, 1.0, 1.0)
    vmin, vmax = min(values), max(values)
    for w in BIN_WIDTHS:
        lo = math.floor(vmin / w) * w
        n = math.floor((vmax - lo) / w) + 1
        if n <= MAX_BINS:
            return Domain(float(lo), float(lo + n * w), float(w))
    w = float(BIN_WIDTHS[-1])
    lo = math.floor(vmin / w) * w
    return Domain(lo, lo + (math.floor((vmax - lo) / w) + 1) * w, w)


def summary_stats(values: Sequence[float]) -> dict[str, float]:
    """n, min, q1, median, q3, max and mean of ``values`` (quartiles by linear interpolation)."""
    a = np.asarray(values, dtype=float)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {"n": float(a.size), "min": float(a.min()), "q1": float(q1), "median": float(med),
            "q3": float(q3), "max": float(a.max()), "mean": float(a.mean())}


def _ticks(dom: Domain, to_x: Callable[[float], float], max_ticks: int = 6) -> list[Tick]:
    """Ticks from ``dom.lo`` to ``dom.hi`` every bin width (doubled until there are at most ``max_ticks``)."""
    step = dom.bin_width
    while (dom.hi - dom.lo) / step > max_ticks:
        step *= 2
    out = []
    v = dom.lo
    while v <= dom.hi + 1e-9:
        out.append(Tick(to_x(v), f"{v:g}"))
        v += step
    if abs(out[-1].x - to_x(dom.hi)) > 1e-6:   # always a tick at the end of the axis
        if to_x(dom.hi) - out[-1].x < 28:
            out.pop()
        out.append(Tick(to_x(dom.hi), f"{dom.hi:g}"))
    return out


def histograms(totals: Mapping[str, Sequence[float]], width: float = 300, height: float = 140,
               x_title: str = "", y_title: str = "") -> list[Histogram]:
    """One histogram per judge (in the mapping's order), all on the same axis and bins; the count
    axis has a tick at 0 and at the tallest bar (``max_count``)."""
    dom = domain([v for vs in totals.values() for v in vs])
    left, right, top, bottom = 40.0, 10.0, 10.0, 36.0
    plot_w, plot_h = width - left - right, height - top - bottom
    baseline = height - bottom

    def to_x(v: float) -> float:
        return round(left + (v - dom.lo) / (dom.hi - dom.lo) * plot_w, 2)

    out = []
    for judge, values in totals.items():
        counts = [0] * dom.n_bins
        for v in values:
            counts[min(dom.n_bins - 1, int((v - dom.lo) // dom.bin_width))] += 1
        max_count = max(counts) if values else 0
        bars = []
        for i, c in enumerate(counts):
            lo = dom.lo + i * dom.bin_width
            h = round(c / max_count * plot_h, 2) if max_count else 0.0
            x0, x1 = to_x(lo), to_x(lo + dom.bin_width)
            bars.append(Bar(x=x0 + 0.5, y=round(baseline - h, 2), width=max(0.5, round(x1 - x0 - 1, 2)), height=h,
                            lo=lo, hi=lo + dom.bin_width, count=c))
        out.append(Histogram(judge=judge, n=len(values), width=width, height=height, bars=bars,
                             ticks=_ticks(dom, to_x), max_count=max_count, baseline=baseline,
                             left=left, right=width - right, x_title=x_title, y_title=y_title, top=top))
    return out


def box_plot(totals: Mapping[str, Sequence[float]], width: float = 640, row_height: float = 34,
             x_title: str = "") -> BoxPlot:
    """Every judge's totals as a box (quartiles), whiskers (min-max) and dots, on a shared axis."""
    dom = domain([v for vs in totals.values() for v in vs])
    label_w, right, top = 110.0, 14.0, 8.0
    with_data = [(j, vs) for j, vs in totals.items() if vs]
    axis_y = top + row_height * len(with_data) + 4

    def to_x(v: float) -> float:
        return round(label_w + (v - dom.lo) / (dom.hi - dom.lo) * (width - label_w - right), 2)

    boxes = []
    for i, (judge, values) in enumerate(with_data):
        s = summary_stats(values)
        boxes.append(Box(judge=judge, y=round(top + row_height * (i + 0.5), 2), min_x=to_x(s["min"]),
                         q1_x=to_x(s["q1"]), median_x=to_x(s["median"]), q3_x=to_x(s["q3"]),
                         max_x=to_x(s["max"]), stats=s,
                         points=[to_x(v) for v in values] if len(values) <= MAX_DOTS else []))
    return BoxPlot(width=width, height=axis_y + 38, label_width=label_w, axis_y=axis_y, boxes=boxes,
                   ticks=_ticks(dom, to_x), judges_without_data=[j for j, vs in totals.items() if not vs],
                   x_title=x_title)
