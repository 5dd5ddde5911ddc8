"""Krippendorff's alpha (exact, memory-safe) and its bootstrap CI, for any raters x units table.

Alpha compares the disagreement observed within units (cases) to the disagreement expected by
chance among all pairable values: ``alpha = 1 - D_o / D_e``. 1 is perfect agreement, 0 is what
raters answering at random (with the same value distribution) would reach, below 0 is systematic
disagreement. Missing ratings are missing (NaN), never zeros; units with fewer than two ratings do
not count. Measurement levels (the distance between two values ``c`` and ``k``):

- ``nominal``: 0 if equal, else 1 (labels; e.g. "did the judge deduct in this category?");
- ``ordinal``: squared difference of the cumulative counts between the two ranks (stars);
- ``interval``: ``(c - k)^2`` (scores);
- ``ratio``: ``((c - k) / (c + k))^2``.

Edge cases: with no unit rated twice, or no variation at all in the pairable values (every rating
identical), alpha is undefined and :class:`Alpha` carries ``value=None`` and the reason.

Why not the ``krippendorff`` package everywhere: it builds a units x V x V array (V = distinct
values), 2.4 GB for 5 x 10,000 integer scores and hundreds of GB for float scores (STACK_NOTES).
Here observed disagreement is summed over the pairs inside each unit, and expected disagreement
from the value counts: closed forms for nominal and interval, a V x V pass for ordinal and ratio
(V is small for their data: stars, counts). The package is the reference in the tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Literal, NamedTuple, TypeVar

import numpy as np
from pydantic import BaseModel
from threadpoolctl import ThreadpoolController

from consensus_eval._errors import InputError, UsageError
from consensus_eval.domain.textio import csv_records, decimal_point, read_text

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval", "ratio")
#: the bootstrap's seed unless told otherwise: the same data always gives the same interval
DEFAULT_SEED = 20261122


class Alpha(BaseModel):
    """Krippendorff's alpha with what it rests on.

    ``value`` is None when alpha is undefined (``reason`` says why). ``ci`` is the bootstrap
    95% interval over units (cases), when computed. ``n_units`` counts units with at least two
    ratings, ``n_values`` the ratings in them (the pairable values); ``n_values`` and ``n_raters``
    are None only in a report that does not give them (a reliability.json written by hand).
    """

    level: Level
    value: float | None
    ci: tuple[float, float] | None = None
    n_units: int
    n_values: int | None = None
    n_raters: int | None = None
    reason: str | None = None


def _pairable(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The units (columns) with at least two ratings, and all their ratings as one flat array."""
    keep = (~np.isnan(data)).sum(axis=0) >= 2
    units = data[:, keep]
    return units, units[~np.isnan(units)]


def _observed(units: np.ndarray, delta: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> float:
    """Sum over units of (sum over ordered pairs of ratings in the unit of delta) / (m_u - 1).

    Vectorised over units: one pass per pair of raters (raters are few, units many).
    """
    present = ~np.isnan(units)
    m = present.sum(axis=0)
    total = np.zeros(units.shape[1])
    for i in range(units.shape[0]):
        for j in range(units.shape[0]):
            if i != j:
                both = present[i] & present[j]
                if both.any():
                    total[both] += delta(units[i, both], units[j, both])
    return float((total / (m - 1)).sum())


def _interval_stats(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per unit (columns with >= 2 ratings): observed disagreement x (m-1)^-1, m, Σx and Σx².

    Within a unit, the sum over ordered pairs of (x_i - x_j)^2 is 2(m Σx² - (Σx)²); these sums
    are all interval alpha needs, and they add up across units (so bootstrap resamples are
    weighted sums of them).
    """
    m = (~np.isnan(arr)).sum(axis=0)
    keep = m >= 2
    x = np.where(np.isnan(arr[:, keep]), 0.0, arr[:, keep])
    m = m[keep].astype(float)
    s1 = x.sum(axis=0)
    s2 = (x * x).sum(axis=0)
    do = 2 * (m * s2 - s1 * s1) / (m - 1)
    return do, m, s1, s2


#: a float (one sample) or an array (one value per resample)
_FloatOrArray = TypeVar("_FloatOrArray", float, np.ndarray)


def _interval_from(do: _FloatOrArray, m: _FloatOrArray, s1: _FloatOrArray,
                   s2: _FloatOrArray) -> tuple[_FloatOrArray, _FloatOrArray]:
    """(D_o, D_e) x n(n-1) from summed unit statistics (arrays: one value per resample)."""
    n = m
    return do * (n - 1), 2 * (n * s2 - s1 * s1)


def _by_value(units: np.ndarray, allv: np.ndarray,
              delta: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[float, float]:
    """(D_o, D_e) x n(n-1) for any metric ``delta(values_a, values_b)`` (pairwise over value counts)."""
    n = allv.size
    do = _observed(units, delta)
    values, counts = np.unique(allv, return_counts=True)
    de = 0.0
    step = max(1, 4_000_000 // max(values.size, 1))  # bounded memory: rows of the V x V matrix at a time
    for i in range(0, values.size, step):
        block = delta(values[i:i + step, None], values[None, :])
        de += (counts[i:i + step, None] * counts[None, :] * block).sum()
    return do * (n - 1), de


def _ordinal_delta(allv: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    values, counts = np.unique(allv, return_counts=True)
    cum = np.cumsum(counts) - counts / 2.0  # position of each value's mid-rank

    def delta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ra = cum[np.searchsorted(values, a)]
        rb = cum[np.searchsorted(values, b)]
        return (ra - rb) ** 2

    return delta


def _ratio_delta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # ((a - b) / (a + b))^2 with both halved: the same value (halving is exact), and no overflow near the largest float
    a, b = a / 2, b / 2
    s = a + b
    with np.errstate(invalid="ignore", divide="ignore"):
        d = ((a - b) / s) ** 2
    return np.where(s == 0, 0.0, d)


def _nominal(units: np.ndarray, allv: np.ndarray) -> tuple[float, float]:
    n = allv.size
    do = _observed(units, lambda a, b: (a != b).astype(float))
    _, counts = np.unique(allv, return_counts=True)
    de = n * n - float(np.dot(counts, counts))
    return do * (n - 1), de


def krippendorff_alpha(data: np.ndarray | Sequence[Sequence[float | None]], level: Level = "interval") -> Alpha:
    """Krippendorff's alpha of a raters x units matrix (NaN or None = missing).

    Rows are raters (judges, runs, the human), columns are units (cases). Exact: it reproduces
    Krippendorff's published example (nominal 0.743, ordinal 0.815, interval 0.849, ratio 0.797).
    """
    if level not in LEVELS:
        raise UsageError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    arr = np.array([[np.nan if v is None else v for v in row] for row in data], dtype=float) \
        if not isinstance(data, np.ndarray) else data.astype(float)
    if arr.ndim != 2:
        raise UsageError("reliability data must be a raters x units matrix")
    if np.isinf(arr).any():
        raise InputError("reliability data holds an infinite value; ratings must be finite numbers")
    units, allv = _pairable(arr)
    base = {"level": level, "n_units": units.shape[1], "n_values": int(allv.size), "n_raters": arr.shape[0]}
    if not units.shape[1]:
        return Alpha(value=None, reason="no unit has two or more ratings", **base)
    if np.unique(allv).size == 1:
        return Alpha(value=None, reason="no variation: every pairable rating is the same value", **base)
    if level == "nominal":
        do, de = _nominal(units, allv)
    elif level == "interval":
        with np.errstate(over="ignore", invalid="ignore"):  # ratings of 1e300: checked just below, not warned
            do, de = _interval_from(*(v.sum() for v in _interval_stats(arr)))
    elif level == "ordinal":
        do, de = _by_value(units, allv, _ordinal_delta(allv))
    else:
        if (allv < 0).any():
            raise InputError(f"the ratio level needs values >= 0, and {float(allv[allv < 0][0]):g} is negative "
                             "(use the interval level for values that can be negative)")
        do, de = _by_value(units, allv, _ratio_delta)
    if not (math.isfinite(do) and math.isfinite(de)):
        return Alpha(value=None, reason=f"not computable: the ratings reach {float(np.abs(allv).max()):.3g} and "
                                        "their squared differences overflow a float; rescale them", **base)
    if de <= 0:
        return Alpha(value=None, reason="no expected disagreement", **base)
    return Alpha(value=float(1.0 - do / de), **base)


def bootstrap_ci(data: np.ndarray, level: Level = "interval", n_boot: int = 1000, seed: int = DEFAULT_SEED,
                 confidence: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of alpha, resampling units (columns) with replacement.

    Seeded: the same data gives the same interval. Resamples where alpha is undefined are
    dropped; None if fewer than half of them are defined.
    """
    arr = _rated(data)
    if arr is None:
        return None
    n_units = arr.shape[1]
    if level == "interval":  # weighted sums of per-unit statistics: all resamples at once
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"), _one_blas_thread():
            stats = _interval_stats(arr)
            if _held_whole(n_boot, n_units):
                weights = _weights(seed, n_boot, n_units)
                do, de = _interval_from(*(_product((seed, n_boot, n_units), weights, v) for v in stats))
                boot = np.where(de > 0, 1.0 - do / de, np.nan)
            else:  # too large to hold (100,000 resamples of 25,000 units: 18.6 GiB): the same
                # resamples, :data:`BOOT_CHUNK` at a time (memory bounded; sums may differ in the last bits)
                boot = _joint_pass(seed, n_boot, n_units, [stats], [])[0][0]
        values = list(boot[~np.isnan(boot)])
    elif level == "ordinal" and (tables := _unit_pairs(arr)) is not None:
        # the weights of these resamples, when an interval figure over the same units drew them already
        drawn = _draws.get((seed, n_boot, n_units)) if _draws is not None else None
        values = _ordinal_boot(_picks(seed, n_boot, n_units), tables, drawn=drawn)
    else:
        values = [a for block in _picks(seed, n_boot, n_units) for p in block
                  if (a := krippendorff_alpha(arr[:, p], level).value) is not None]
    return _percentile(values, n_boot, confidence)


def _held_whole(n_boot: int, n_units: int) -> bool:
    """Whether the weights of ``n_boot`` resamples of ``n_units`` units are held whole as floats (within
    :data:`MAX_WEIGHTS_BYTES`); else the bootstrap takes them :data:`BOOT_CHUNK` resamples at a time."""
    return n_boot * n_units * 8 <= MAX_WEIGHTS_BYTES


def _rated(data: np.ndarray) -> np.ndarray | None:
    """``data``'s units (columns) rated twice or more, as floats; None when fewer than two are."""
    arr = np.asarray(data, dtype=float)
    rated = np.flatnonzero((~np.isnan(arr)).sum(axis=0) >= 2)
    return None if rated.size < 2 else arr[:, rated]


def _percentile(values: Sequence[float] | np.ndarray, n_boot: int, confidence: float) -> tuple[float, float] | None:
    """The percentile interval of the defined resamples' ``values``; None when fewer than half of the ``n_boot``
    resamples are defined."""
    if len(values) < n_boot / 2:
        return None
    lo, hi = np.quantile(values, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return float(lo), float(hi)


def _joint_pass(seed: int, n_boot: int, n_units: int, intervals: Sequence[tuple[np.ndarray, ...]],
                ordinals: Sequence[_UnitPairs]) -> tuple[list[np.ndarray], list[list[float]]]:
    """One pass over the resamples of ``n_units`` units (:func:`_picks`, :data:`BOOT_CHUNK` at a time), each chunk
    drawn and counted once for every figure: interval alpha of every resample (NaN: undefined) for each of
    ``intervals`` (their :func:`_interval_stats`; each distinct statistic multiplied by the chunk's weights once),
    and the defined ordinal alphas for each of ``ordinals`` (their :func:`_unit_pairs`). Each figure's values are
    the ones a pass of its own gives (the same chunks, the same products on one BLAS thread)."""
    distinct: dict[bytes, int] = {}
    vectors: list[np.ndarray] = []
    refs: list[list[int]] = []
    for stats in intervals:
        row = []
        for v in stats:
            k = distinct.setdefault(v.tobytes(), len(vectors))
            if k == len(vectors):
                vectors.append(v)
            row.append(k)
        refs.append(row)
    distinct.clear()
    parts: list[list[np.ndarray]] = [[] for _ in intervals]
    ordinal_values: list[list[float]] = [[] for _ in ordinals]
    for block in _picks(seed, n_boot, n_units):
        times = _counts(block, n_units)
        if vectors:
            w = times.astype(float)
            products = [w @ v for v in vectors]
            for row, out in zip(refs, parts, strict=True):
                do, de = _interval_from(*(products[k] for k in row))
                out.append(np.where(de > 0, 1.0 - do / de, np.nan))
        for tables, values in zip(ordinals, ordinal_values, strict=True):
            _ordinal_chunk(block, times, tables, values)
    return [np.concatenate(p) if p else np.empty(0) for p in parts], ordinal_values


class JointBootstrap:
    """:func:`alpha_with_ci` for many figures, the same values to the bit, with the bootstraps too large to hold
    their resamples' weights whole (resamples x units above :data:`MAX_WEIGHTS_BYTES`: about 67,000 cases at 1,000
    resamples; interval figures, and ordinal ones with :func:`_unit_pairs`) made in one pass per number of units:
    each chunk of resamples drawn and counted once for all of them instead of once per figure (at 1,000,000
    cases, about 13-16 s of drawing and counting a figure).

    :meth:`alpha` gives each figure's :class:`Alpha` at once; the interval of a figure in a joint pass is set on
    it by :meth:`finish`, which must run before the figures are read.

    Args:
        n_boot: Bootstrap resamples per figure (0: no interval).
        seed: The resamples' seed, as :func:`alpha_with_ci`'s.
    """

    def __init__(self, n_boot: int = 1000, seed: int = DEFAULT_SEED) -> None:
        self.n_boot, self.seed = n_boot, seed
        self._intervals: dict[int, list[tuple[Alpha, tuple[np.ndarray, ...]]]] = {}
        self._ordinals: dict[int, list[tuple[Alpha, _UnitPairs]]] = {}

    def alpha(self, data: np.ndarray, level: Level = "interval") -> Alpha:
        """Alpha of ``data`` (raters x units) at ``level``, with its interval now, or at :meth:`finish` when its
        bootstrap joins a pass.

        Args:
            data: The ratings, raters x units (NaN: not rated).
            level: The level of measurement.
        """
        a = krippendorff_alpha(data, level)
        if a.value is None or self.n_boot <= 0:
            return a
        arr = _rated(data) if level in ("interval", "ordinal") else None
        if arr is not None and not _held_whole(self.n_boot, arr.shape[1]):
            if level == "interval":
                with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                    self._intervals.setdefault(arr.shape[1], []).append((a, _interval_stats(arr)))
                return a
            if (tables := _unit_pairs(arr)) is not None:
                self._ordinals.setdefault(arr.shape[1], []).append((a, tables))
                return a
        a.ci = bootstrap_ci(data, level, self.n_boot, self.seed)
        return a

    def finish(self) -> None:
        """Set the interval of every figure waiting for a joint pass (one pass per number of units)."""
        for n_units in sorted({*self._intervals, *self._ordinals}):
            intervals, ordinals = self._intervals.get(n_units, []), self._ordinals.get(n_units, [])
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"), _one_blas_thread():
                boots, values = _joint_pass(self.seed, self.n_boot, n_units, [stats for _, stats in intervals],
                                            [tables for _, tables in ordinals])
            for (a, _), boot in zip(intervals, boots, strict=True):
                a.ci = _percentile(boot[~np.isnan(boot)], self.n_boot, 0.95)
            for (a, _), got in zip(ordinals, values, strict=True):
                a.ci = _percentile(got, self.n_boot, 0.95)
        self._intervals.clear()
        self._ordinals.clear()


def _one_blas_thread() -> AbstractContextManager[object]:
    """BLAS on one thread for the block: the bootstrap's matrix-vector products then sum each resample's row in one
    order whatever the machine's core count (OpenBLAS splits a product's rows between its threads above about
    460,800 cells, and the split changed the last bits of the intervals from one machine to another), and no
    second thread spins beside the rebuild's own (0.9 s of CPU less at 20,000 x 4)."""
    global _blas
    if _blas is None:
        _blas = ThreadpoolController()
    limited: AbstractContextManager[object] = _blas.limit(limits=1, user_api="blas")
    return limited


#: the BLAS libraries numpy loaded (:func:`_one_blas_thread`), found on first use
_blas: ThreadpoolController | None = None
#: the weights of the resamples drawn last inside :func:`shared_draws`, by (seed, resamples, units); None outside
_draws: dict[tuple[int, int, int], np.ndarray] | None = None
#: inside :func:`shared_draws`, the products of the weights drawn last (:data:`_draws`) with the unit statistics
#: already multiplied, by (seed, resamples, units) and the statistic's bytes (:func:`_product`); None outside
_products: dict[tuple[tuple[int, int, int], bytes], np.ndarray] | None = None


@contextmanager
def shared_draws() -> Iterator[None]:
    """Inside the block, :func:`bootstrap_ci` computes the weights of the resamples of a (seed, resamples,
    units) once (:func:`_weights`) and reuses them for the next figure at the interval level with the same
    three: the resamples are the same ones it would draw again (one seeded generator per call), at a fraction
    of the cost when a report has twenty figures over the same cases (bootstraps too large for that share one
    pass over their resamples instead: :class:`JointBootstrap`). Only the last weights are kept, and nothing
    after the block."""
    global _draws, _products
    outer = _draws is None
    if outer:
        _draws, _products = {}, {}
    try:
        yield
    finally:
        if outer:
            _draws = _products = None


def _product(key: tuple[int, int, int], weights: np.ndarray, stat: np.ndarray) -> np.ndarray:
    """``weights @ stat`` (the resamples' sums of a unit statistic), the weights being those of ``key`` (seed,
    resamples, units). Inside :func:`shared_draws` a product is taken once per statistic of the same bytes and
    reused: the figures of a report over the same cases mostly share their units' numbers of ratings (every judge
    rates every case), and the same weights times the same vector is the same BLAS product, so the same bits
    (a quarter of the interval bootstrap's products at 20,000 cases x 4 judges)."""
    if _products is None:
        return np.asarray(weights @ stat)
    at = (key, stat.tobytes())
    out = _products.get(at)
    if out is None:
        if _products and next(iter(_products))[0] != key:   # other weights: what was kept is about them
            _products.clear()
        out = _products[at] = np.asarray(weights @ stat)
    return out


def _picks(seed: int, n_boot: int, n_units: int) -> Iterator[np.ndarray]:
    """The resamples, :data:`BOOT_CHUNK` at a time: the rows of
    ``np.random.default_rng(seed).integers(0, n_units, (n_boot, n_units))`` (each row the units one resample
    draws, with replacement), drawn chunk after chunk from that one generator, which draws in sequence: the
    same numbers. No resamples x units matrix of indices is held (160 MB of int64 at 20,000 units x 1,000
    resamples); a figure that needs them draws them again (about 0.2 s at that size)."""
    rng = np.random.default_rng(seed)
    for start in range(0, n_boot, BOOT_CHUNK):
        yield rng.integers(0, n_units, (min(BOOT_CHUNK, n_boot - start), n_units))


def _counts(block: np.ndarray, n_units: int) -> np.ndarray:
    """How many times each resample (row of ``block``, unit indices) drew each unit: rows x units, int64.

    Counted row by row: one resample's counts (8 bytes a unit) stay in the CPU's caches while its draws land, where
    one count over the whole block scatters them over rows x units (0.30 s against 1.0 s for 32 resamples of
    1,000,000 units; 11.6 against 19.8 ms at 100,000)."""
    out = np.empty((block.shape[0], n_units), dtype=np.int64)
    for i, row in enumerate(block):
        out[i] = np.bincount(row, minlength=n_units)
    return out


def _weights(seed: int, n_boot: int, n_units: int) -> np.ndarray:
    """Resamples x units: how many times each resample (:func:`_picks`) drew each unit, as floats, counted
    :data:`BOOT_CHUNK` resamples at a time; shared inside :func:`shared_draws`.

    Floats, held whole (160 MB at 20,000 units x 1,000 resamples): the interval level's ``weights @ v`` is one
    BLAS matrix-vector product, whose sums depend on how BLAS splits the rows between its threads; the same
    product taken chunk by chunk gave other last bits for some shapes on the 2-core test machine (OpenBLAS
    threads a product above about 460,800 cells), and the intervals must stay the same bits."""
    key = (seed, n_boot, n_units)
    if _draws is not None and key in _draws:
        return _draws[key]
    out = np.empty((n_boot, n_units))
    start = 0
    for block in _picks(seed, n_boot, n_units):
        out[start:start + block.shape[0]] = _counts(block, n_units)
        start += block.shape[0]
    if _draws is not None:
        _draws.clear()
        _draws[key] = out
    return out


#: the largest resamples x units weight matrix :func:`bootstrap_ci` holds whole (bytes; 160 MB at 20,000 units x
#: 1,000 resamples); a larger bootstrap is computed :data:`BOOT_CHUNK` resamples at a time
MAX_WEIGHTS_BYTES = 512 * 1024**2
#: the most patterns x V x V cells :func:`_unit_pairs` builds (V distinct values, a pattern a distinct row of value
#: counts; 8 bytes each)
MAX_PAIR_CELLS = 4_000_000
#: the most units x V cells of value counts :func:`_unit_pairs` builds (8 bytes each: 256 MB; 1,000,000 units of
#: up to 32 distinct values)
MAX_COUNT_CELLS = 32_000_000
#: resamples computed at once in :func:`_ordinal_boot` (bounds its resamples x units blocks)
BOOT_CHUNK = 32


class _UnitPairs(NamedTuple):
    """The ordinal bootstrap's tables (:func:`_unit_pairs`)."""

    #: the distinct values (V), ascending
    values: np.ndarray
    #: each unit's count of each value (units x V, integers)
    counts: np.ndarray
    #: each unit's number of ratings (integers)
    m: np.ndarray
    #: each pattern's ordered pairs of ratings ``(c, k)`` counted (patterns x V*V, floats)
    pattern_pairs: np.ndarray
    #: each pattern's number of ratings (floats)
    pattern_m: np.ndarray
    #: each unit's pattern (an index into the two above; one byte when there are at most 256 patterns)
    pattern_of: np.ndarray


def _unit_pairs(arr: np.ndarray) -> _UnitPairs | None:
    """For units rated twice or more (``arr``'s columns): the distinct values, each unit's count of each value
    and number of ratings, and per pattern (a distinct row of value counts: a few dozen for stars, whatever the
    number of units) its ordered pairs of ratings counted. None when the counts would exceed
    :data:`MAX_COUNT_CELLS` cells or the patterns' pairs :data:`MAX_PAIR_CELLS` (many distinct values: the
    caller resamples the slow way).

    The pairs are counted per pattern, not per unit: per unit they were units x V*V cells, which sent a stars
    figure of more than about 160,000 cases (5 values) the slow way, one alpha per resampled table (about two
    minutes a figure at 170,000 cases, 1,000 resamples)."""
    present = ~np.isnan(arr)
    values = np.unique(arr[present])
    n_values, n_units = values.size, arr.shape[1]
    if n_units * n_values > MAX_COUNT_CELLS:
        return None
    counts = np.zeros((n_units, n_values), dtype=np.int64)
    for row, ok in zip(arr, present, strict=True):
        np.add.at(counts, (np.flatnonzero(ok), np.searchsorted(values, row[ok])), 1)
    patterns, pattern_of = _distinct_rows(counts)
    if len(patterns) * n_values * n_values > MAX_PAIR_CELLS:
        return None
    pairs = patterns[:, :, None] * patterns[:, None, :]
    idx = np.arange(n_values)
    pairs[:, idx, idx] -= patterns
    return _UnitPairs(values, counts, counts.sum(axis=1), pairs.reshape(len(patterns), n_values * n_values)
                      .astype(float), patterns.sum(axis=1).astype(float),
                      pattern_of.astype(np.uint8 if len(patterns) <= 256 else np.intp))


def _ordinal_boot(picks: Iterable[np.ndarray], tables: _UnitPairs, *, drawn: np.ndarray | None = None) -> list[float]:
    """Ordinal alpha of each resample (rows of the chunks ``picks``: :func:`_picks`), the undefined ones left
    out: what :func:`krippendorff_alpha` gives for the resampled table, to the last bit, without building it.

    A resample's value counts are its units' summed; they set the ordinal distances (mid-rank
    positions ``cumsum(n) - n/2`` of the values present, as :func:`_ordinal_delta`); each unit's
    observed disagreement is its pair counts times those distances (exact: small integers times
    multiples of 1/4), divided by ``m - 1`` and summed over the resample's units in the order drawn,
    and the expected disagreement is summed over the present values, as :func:`_by_value` does.

    ``drawn``: these resamples' :func:`_weights`, when at hand: each chunk's counts are then their rows as
    integers (the same numbers, a quarter of the cost of counting the chunk again).
    """
    n_units = tables.counts.shape[0]
    out: list[float] = []
    start = 0
    for chunk in picks:
        # resamples x units, how many times each unit was drawn
        times = _counts(chunk, n_units) if drawn is None else drawn[start:start + len(chunk)].astype(np.int64)
        start += len(chunk)
        _ordinal_chunk(chunk, times, tables, out)
    return out


def _ordinal_chunk(chunk: np.ndarray, times: np.ndarray, tables: _UnitPairs, out: list[float]) -> None:
    """:func:`_ordinal_boot`'s step: the defined ordinal alphas of the resamples of ``chunk`` (rows of unit
    indices; ``times``: how many times each drew each unit) appended to ``out``."""
    counts, m, pattern_pairs, pattern_m, pattern_of = (tables.counts, tables.m, tables.pattern_pairs,
                                                       tables.pattern_m, tables.pattern_of)
    n_values = tables.values.size
    n_by_value = times @ counts                   # integers: exact
    deltas = np.zeros((len(chunk), n_values * n_values))
    expected: list[float | None] = []
    for b, n_c in enumerate(n_by_value):
        keep = n_c > 0
        if keep.sum() < 2:       # no variation: alpha undefined
            expected.append(None)
            continue
        c = n_c[keep]
        cum_full = np.zeros(n_values)
        cum_full[keep] = np.cumsum(c) - c / 2.0
        block = (cum_full[keep][:, None] - cum_full[keep][None, :]) ** 2
        expected.append(float((c[:, None] * c[None, :] * block).sum()))
        deltas[b] = ((cum_full[:, None] - cum_full[None, :]) ** 2).ravel()
    # units with the same value counts have the same disagreement in every resample: computed once per such
    # pattern (a few dozen for stars), then looked up per unit drawn; resamples x patterns, exact (any order of the
    # sums), each divided by its m - 1 before it is drawn
    per_pattern = (deltas @ pattern_pairs.T) / (pattern_m - 1)
    # each drawn unit's value, summed resample by resample in the order drawn (as ``.sum(axis=1)`` sums a
    # row): one resample's lookups stay in the caches (1.8 -> 0.14 s a chunk at 1,000,000 units)
    observed = np.array([values[row].sum() for values, row in zip(per_pattern, pattern_of[chunk], strict=True)])
    n = times @ m                                 # the ratings drawn: integers, exact
    for b, de in enumerate(expected):
        if de is not None and de > 0:
            out.append(float(1.0 - observed[b] * (n[b] - 1) / de))


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a 2-D array (in the order of their bytes) and, for each row, the index of its own
    among them: ``np.unique(rows, axis=0, return_inverse=True)`` up to the order of the distinct rows, by sorting
    each row's bytes as one value instead of field by field (16x faster for 20,000 rows of 26). Rows are equal
    when their bytes are (the callers' rows are integers, or floats that are whole numbers: no -0.0, no NaN)."""
    rows = np.ascontiguousarray(rows)
    keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return rows[first], inverse.reshape(-1)


def alpha_with_ci(data: np.ndarray, level: Level = "interval", n_boot: int = 1000, seed: int = DEFAULT_SEED) -> Alpha:
    """:func:`krippendorff_alpha` plus its bootstrap CI over units (when alpha is defined)."""
    a = krippendorff_alpha(data, level)
    if a.value is not None and n_boot > 0:
        a.ci = bootstrap_ci(data, level, n_boot, seed)
    return a


def load_ratings(path: str | Path, encoding: str | None = None, *,
                 level: Level | None = None) -> tuple[np.ndarray, list[str], list[str]]:
    """A long ratings table (columns ``unit``, ``rater``, ``value``), read by the one table reader
    (:func:`~consensus_eval.domain.textio.csv_records`: ``,`` ``;`` or tab as the header uses, UTF-8 (BOM or
    not) else GB18030/GBK, or ``encoding``), as :func:`ratings_matrix` makes it."""
    p = Path(path)
    return ratings_matrix(csv_records(p, read_text(p, encoding, what="ratings")), p, level=level)


def ratings_matrix(rows: Sequence[tuple[int, Sequence[str]]], source: str | Path = "ratings", *,
                   level: Level | None = None) -> tuple[np.ndarray, list[str], list[str]]:
    """The rows of a long ratings table (``(line, cells)``, the header first) as a raters x units matrix, with
    the rater and unit names; an empty value, ``NA`` or ``.`` = missing. Errors name ``source``, the line and
    the field: a value that is not a finite number (``inf``, ``nan`` are refused: leave the cell empty for a
    missing rating), a rating given twice, and, with ``level="ratio"``, a negative value."""
    p = source
    header = [h.strip() for h in rows[0][1]] if rows else []
    missing = {"unit", "rater", "value"} - set(header)
    if missing:
        names = ", ".join(sorted(missing))
        raise InputError(f"{p}:1: no column named {names}; expected unit,rater,value "
                         f"(missing column(s) {names}; the header has: {', '.join(map(repr, header)) or 'nothing'})")
    at = {name: header.index(name) for name in ("unit", "rater", "value")}
    cells: dict[tuple[str, str], float] = {}
    units: dict[str, None] = {}
    raters: dict[str, None] = {}
    for line, row in rows[1:]:
        unit, rater, raw = ((row[at[k]] if at[k] < len(row) else "").strip() for k in ("unit", "rater", "value"))
        if not unit or not rater:
            raise InputError(f"{p}:{line}: {'unit' if not unit else 'rater'}: missing")
        units.setdefault(unit)
        raters.setdefault(rater)
        if raw in MISSING_MARKS:
            continue
        try:
            value = float(decimal_point(raw))
        except ValueError:
            raise InputError(
                f"{p}:{line}: value: not a number: {raw!r} (leave it empty for a missing rating)") from None
        if not math.isfinite(value):
            raise InputError(f"{p}:{line}: value: {raw!r} is not a finite number "
                             "(leave it empty for a missing rating)")
        if level == "ratio" and value < 0:
            raise InputError(f"{p}:{line}: value: {raw} is negative; the ratio level needs values >= 0 "
                             "(use --level interval for values that can be negative)")
        if (unit, rater) in cells:
            raise InputError(f"{p}:{line}: rater {rater!r} rated unit {unit!r} twice")
        cells[(unit, rater)] = value
    if not units:
        raise InputError(f"{p}: no ratings (the file has a header and no data line)")
    ul, rl = list(units), list(raters)
    arr = np.full((len(rl), len(ul)), np.nan)
    ui = {u: i for i, u in enumerate(ul)}
    for ri, rater in enumerate(rl):
        for u in ul:
            if (u, rater) in cells:
                arr[ri, ui[u]] = cells[(u, rater)]
    return arr, rl, ul


#: values of a ratings table that mean "no rating" (besides an empty cell)
MISSING_MARKS = frozenset({"", "NA", "N/A", "."})
