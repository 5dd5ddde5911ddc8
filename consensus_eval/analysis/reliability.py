"""Inter-rater reliability: Krippendorff's alpha (exact, memory-safe), bootstrap CIs, human agreement.

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

import csv
import io
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel

from consensus_eval._errors import InputError
from consensus_eval.domain.rubric import Rubric

if TYPE_CHECKING:
    from consensus_eval.api import Results

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval", "ratio")


class Alpha(BaseModel):
    """Krippendorff's alpha with what it rests on.

    ``value`` is None when alpha is undefined (``reason`` says why). ``ci`` is the bootstrap
    95% interval over units (cases), when computed. ``n_units`` counts units with at least two
    ratings, ``n_values`` the ratings in them (the pairable values).
    """

    level: Level
    value: float | None
    ci: tuple[float, float] | None = None
    n_units: int
    n_values: int
    n_raters: int
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


def _interval_from(do: np.ndarray, m: np.ndarray, s1: np.ndarray, s2: np.ndarray) -> tuple:
    """(D_o, D_e) x n(n-1) from summed unit statistics (arrays: one value per resample)."""
    n = m
    return do * (n - 1), 2 * (n * s2 - s1 * s1)


def _by_value(units: np.ndarray, allv: np.ndarray, delta: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[float, float]:
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
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    arr = np.array([[np.nan if v is None else v for v in row] for row in data], dtype=float) \
        if not isinstance(data, np.ndarray) else data.astype(float)
    if arr.ndim != 2:
        raise ValueError("reliability data must be a raters x units matrix")
    units, allv = _pairable(arr)
    base = {"level": level, "n_units": units.shape[1], "n_values": int(allv.size), "n_raters": arr.shape[0]}
    if not units.shape[1]:
        return Alpha(value=None, reason="no unit has two or more ratings", **base)
    if np.unique(allv).size == 1:
        return Alpha(value=None, reason="no variation: every pairable rating is the same value", **base)
    if level == "nominal":
        do, de = _nominal(units, allv)
    elif level == "interval":
        do, de = _interval_from(*(v.sum() for v in _interval_stats(arr)))
    elif level == "ordinal":
        do, de = _by_value(units, allv, _ordinal_delta(allv))
    else:
        if (allv < 0).any():
            raise ValueError("the ratio level needs non-negative values")
        do, de = _by_value(units, allv, _ratio_delta)
    if de <= 0:
        return Alpha(value=None, reason="no expected disagreement", **base)
    return Alpha(value=float(1.0 - do / de), **base)


def bootstrap_ci(data: np.ndarray, level: Level = "interval", n_boot: int = 1000, seed: int = 20261122,
                 confidence: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of alpha, resampling units (columns) with replacement.

    Seeded: the same data gives the same interval. Resamples where alpha is undefined are
    dropped; None if fewer than half of them are defined.
    """
    arr = np.asarray(data, dtype=float)
    rated = np.flatnonzero((~np.isnan(arr)).sum(axis=0) >= 2)
    if rated.size < 2:
        return None
    arr = arr[:, rated]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, arr.shape[1], (n_boot, arr.shape[1]))
    if level == "interval":  # weighted sums of per-unit statistics: all resamples at once
        weights = np.zeros((n_boot, arr.shape[1]))
        np.add.at(weights, (np.arange(n_boot)[:, None], picks), 1.0)
        do, de = _interval_from(*(weights @ v for v in _interval_stats(arr)))
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = np.where(de > 0, 1.0 - do / de, np.nan)
        values = list(boot[~np.isnan(boot)])
    else:
        values = [a for p in picks if (a := krippendorff_alpha(arr[:, p], level).value) is not None]
    if len(values) < n_boot / 2:
        return None
    lo, hi = np.quantile(values, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return float(lo), float(hi)


def alpha_with_ci(data: np.ndarray, level: Level = "interval", n_boot: int = 1000, seed: int = 20261122) -> Alpha:
    """:func:`krippendorff_alpha` plus its bootstrap CI over units (when alpha is defined)."""
    a = krippendorff_alpha(data, level)
    if a.value is not None and n_boot > 0:
        a.ci = bootstrap_ci(data, level, n_boot, seed)
    return a


# --------------------------------------------------------------------------- agreement with a reference


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r; None with fewer than 3 pairs or a constant side."""
    a, b = np.asarray(x, float), np.asarray(y, float)
    if a.size < 3 or a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks with ties sharing their average rank (1-based)."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(x.size)
    sorted_x = x[order]
    i = 0
    while i < x.size:
        j = i
        while j + 1 < x.size and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (Pearson on average ranks); None with fewer than 3 pairs or a constant side."""
    a, b = np.asarray(x, float), np.asarray(y, float)
    if a.size < 3:
        return None
    return pearson(_ranks(a), _ranks(b))


class Agreement(BaseModel):
    """One rater against a reference (a judge against the human): errors and correlations.

    ``bias`` is the mean of (rater - reference): positive means the rater scores higher.
    """

    n: int
    mae: float | None
    bias: float | None
    pearson: float | None
    spearman: float | None


def agreement(rater: Sequence[float | None], reference: Sequence[float | None]) -> Agreement:
    """Compare paired scores, skipping pairs where either side is missing."""
    pairs = [(a, b) for a, b in zip(rater, reference, strict=True)
             if a is not None and b is not None and not (math.isnan(a) or math.isnan(b))]
    if not pairs:
        return Agreement(n=0, mae=None, bias=None, pearson=None, spearman=None)
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    return Agreement(n=len(pairs), mae=float(np.abs(a - b).mean()), bias=float((a - b).mean()),
                     pearson=pearson(a, b), spearman=spearman(a, b))


# --------------------------------------------------------------------------- the reliability of a run


class HumanLabel(BaseModel):
    """A human's scores for one case (any subset of dimensions) and, optionally, the deduction
    categories they would deduct in (rubric category ids or display names)."""

    case_id: str
    scores: dict[str, float]
    categories: set[str] | None = None


def load_human(path: str | Path, rubric: Rubric) -> dict[str, HumanLabel]:
    """Human labels from CSV or JSONL: ``case_id``, one column per dimension id (``total``
    optional), optional ``categories`` (separated by ``;``). Errors name file, line and field."""
    p = Path(path)
    dims = [d.id for d in rubric.dimensions]
    names = {c.name: c.id for d in rubric.dimensions for c in d.categories}
    ids = {c.id for d in rubric.dimensions for c in d.categories}
    rows: list[tuple[int, dict[str, Any]]] = []
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{p}: cannot read human labels: {e}") from None
    if p.suffix == ".jsonl":
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append((i, json.loads(line)))
                except json.JSONDecodeError as e:
                    raise InputError(f"{p}:{i}: not valid JSON: {e.msg}") from None
    else:
        rows = [(i, r) for i, r in enumerate(csv.DictReader(io.StringIO(text)), 2)]
    out: dict[str, HumanLabel] = {}
    for line, r in rows:
        cid = str(r.get("case_id") or "").strip()
        if not cid:
            raise InputError(f"{p}:{line}: case_id: missing")
        scores = {}
        for d in [*dims, "total"]:
            v = r.get(d)
            if v in (None, ""):
                continue
            try:
                scores[d] = float(v)
            except (TypeError, ValueError):
                raise InputError(f"{p}:{line}: {d}: not a number: {v!r}") from None
            if d != "total" and not 0 <= scores[d] <= rubric.dimension(d).max:
                raise InputError(f"{p}:{line}: {d}: {v} is outside 0..{rubric.dimension(d).max:g}")
        if "total" not in scores and all(d in scores for d in dims):
            scores["total"] = sum(scores[d] for d in dims)
        cats = r.get("categories")
        categories = None
        if cats is not None:
            items = cats if isinstance(cats, list) else [c for c in str(cats).split(";")]
            categories = set()
            for c in (str(x).strip() for x in items):
                if not c:
                    continue
                if c not in ids and c not in names:
                    raise InputError(f"{p}:{line}: categories: unknown category {c!r}")
                categories.add(names.get(c, c))
        if cid in out:
            raise InputError(f"{p}:{line}: case_id: duplicate {cid!r}")
        out[cid] = HumanLabel(case_id=cid, scores=scores, categories=categories)
    return out


def _matrix(rows: Sequence[Sequence[float | None]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=float).reshape(len(rows), -1)


def run_reliability(results: Results, human: dict[str, HumanLabel] | None = None, n_boot: int = 1000,
                    seed: int = 20261122) -> dict[str, Any]:
    """Every reliability figure of a run (the content of ``reliability.json``).

    - ``across_judges``: interval alpha of the judges' scores per dimension and on the total;
    - ``stars``: ordinal alpha of the judges' stars per dimension;
    - ``categories``: interval alpha of the points each judge took off in each category;
    - ``within_judge``: per judge, interval alpha across its runs (units: cases with >= 2 runs);
    - ``human`` (with labels): alpha with and without the human, and each judge's (and the
      panel's) error, bias and correlations against the human, and Jaccard agreement of
      deduction categories (seed 001, 9.2).
    Each alpha comes with its bootstrap 95% CI over cases (seeded).
    """
    from consensus_eval.analysis.consensus import derive_all

    rubric, judges = results.rubric, results.judges
    dims = [d.id for d in rubric.dimensions]
    cons = results.consensus

    def judge_value(c: Any, j: str, key: str) -> float | None:
        return c.judge_totals.get(j) if key == "total" else c.judges[j][key].mean

    def a(rows: Sequence[Sequence[float | None]], level: Level = "interval") -> dict[str, Any]:
        return alpha_with_ci(_matrix(rows), level, n_boot, seed).model_dump()

    keys = [*dims, "total"]
    report: dict[str, Any] = {
        "judges": judges, "n_cases": len(cons), "bootstrap": {"resamples": n_boot, "seed": seed, "confidence": 0.95},
        "across_judges": {k: a([[judge_value(c, j, k) for c in cons] for j in judges]) for k in keys},
        "stars": {d: a([[c.judges[j][d].stars for c in cons] for j in judges], "ordinal") for d in dims},
    }
    # points taken per category, per judge (mean over its ok runs)
    derived = derive_all(rubric, results.records)
    taken: dict[tuple[str, str, str], list[float]] = {}
    for r in results.records:
        if r.request_hash in derived:
            for cs in derived[r.request_hash].categories:
                taken.setdefault((r.case_id, r.judge, cs.id), []).append(cs.taken)
    report["categories"] = {
        f"{d.id}.{cat.id}": {"name": cat.name, **a([[_mean_or_none(taken.get((c.case_id, j, cat.id))) for c in cons]
                                                    for j in judges])}
        for d in rubric.dimensions for cat in d.categories
    }
    within: dict[str, Any] = {}
    for j in judges:
        n_runs = max((len(c.judges[j][d].runs) for c in cons for d in dims), default=0)
        if n_runs >= 2:
            within[j] = {d: a([[(c.judges[j][d].runs[i] if i < len(c.judges[j][d].runs) else None) for c in cons]
                               for i in range(n_runs)]) for d in dims}
    report["within_judge"] = within
    if human is not None:
        report["human"] = _human_section(results, human, judges, keys, judge_value, a, taken)
    return report


def _jaccard(a: set[str], b: set[str]) -> float:
    """|a ∩ b| / |a ∪ b|, and 1 when both are empty (both say nothing is wrong)."""
    return len(a & b) / len(a | b) if a | b else 1.0


def _mean_or_none(v: list[float] | None) -> float | None:
    return float(np.mean(v)) if v else None


def _human_section(results: Results, human: dict[str, HumanLabel], judges: list[str], keys: list[str],
                   judge_value: Callable[..., float | None], a: Callable[..., dict[str, Any]],
                   taken: dict[tuple[str, str, str], list[float]]) -> dict[str, Any]:
    from consensus_eval.metrics.tcm import calculate_human_ai_agreement

    cons = [c for c in results.consensus if c.case_id in human]
    unknown = sorted(set(human) - {c.case_id for c in results.consensus})
    hv = {k: [human[c.case_id].scores.get(k) for c in cons] for k in keys}
    section: dict[str, Any] = {
        "n_cases": len(cons), "unmatched_case_ids": unknown,
        "alpha_with_human": {k: a([*([judge_value(c, j, k) for c in cons] for j in judges), hv[k]]) for k in keys},
        "alpha_without_human": {k: a([[judge_value(c, j, k) for c in cons] for j in judges]) for k in keys},
        "judges": {j: {k: agreement([judge_value(c, j, k) for c in cons], hv[k]).model_dump() for k in keys}
                   for j in judges},
        "panel": {k: agreement([(c.total if k == "total" else c.scores[k]) for c in cons], hv[k]).model_dump()
                  for k in keys},
    }
    labelled = [c for c in cons if human[c.case_id].categories is not None]
    if labelled:
        cat_ids = [cat.id for d in results.rubric.dimensions for cat in d.categories]
        def judged(j: str, c: Any) -> set[str]:
            return {k for k in cat_ids if any(t > 0 for t in taken.get((c.case_id, j, k), []))}

        # Both empty (nobody deducts) is full agreement here; seed 001 (9.2) scores it 0, reported beside.
        section["category_jaccard"] = {
            j: float(np.mean([_jaccard(human[c.case_id].categories or set(), judged(j, c)) for c in labelled]))
            for j in judges
        }
        section["category_jaccard_seed"] = {
            j: calculate_human_ai_agreement([sorted(human[c.case_id].categories or ()) for c in labelled],
                                            [sorted(judged(j, c)) for c in labelled])
            for j in judges
        }
        section["category_jaccard_cases"] = len(labelled)
    return section


def load_ratings(path: str | Path) -> tuple[np.ndarray, list[str], list[str]]:
    """A long ratings table (CSV with columns ``unit``, ``rater``, ``value``; empty value = missing)
    as a raters x units matrix, with the rater and unit names. Errors name file, line and field."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{p}: cannot read ratings: {e}") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = {"unit", "rater", "value"} - set(reader.fieldnames or [])
    if missing:
        raise InputError(f"{p}:1: missing column(s) {', '.join(sorted(missing))}; expected unit,rater,value")
    cells: dict[tuple[str, str], float] = {}
    units: dict[str, None] = {}
    raters: dict[str, None] = {}
    for line, r in enumerate(reader, 2):
        unit, rater, raw = (r["unit"] or "").strip(), (r["rater"] or "").strip(), (r["value"] or "").strip()
        if not unit or not rater:
            raise InputError(f"{p}:{line}: {'unit' if not unit else 'rater'}: missing")
        units.setdefault(unit)
        raters.setdefault(rater)
        if raw in ("", "NA", "nan", "."):
            continue
        try:
            value = float(raw)
        except ValueError:
            raise InputError(f"{p}:{line}: value: not a number: {raw!r} (leave it empty for a missing rating)") from None
        if (unit, rater) in cells:
            raise InputError(f"{p}:{line}: rater {rater!r} rated unit {unit!r} twice")
        cells[(unit, rater)] = value
    ul, rl = list(units), list(raters)
    arr = np.full((len(rl), len(ul)), np.nan)
    ui = {u: i for i, u in enumerate(ul)}
    for ri, rater in enumerate(rl):
        for u in ul:
            if (u, rater) in cells:
                arr[ri, ui[u]] = cells[(u, rater)]
    return arr, rl, ul
