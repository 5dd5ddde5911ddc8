"""Agreement with a reference rater (a human): errors, correlations, alpha with and without the human.

Human labels are a CSV or JSONL file: ``case_id``, one column per dimension id (``total`` optional),
optional ``categories`` (the deduction categories the human would deduct in, ``;``-separated).
A CSV may be UTF-8 (with or without Excel's BOM) or GBK/GB18030 (Excel on Chinese Windows), or any
encoding named with ``encoding`` (:func:`consensus_eval.domain.textio.read_text`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from consensus_eval._errors import InputError
from consensus_eval.analysis.alpha import DEFAULT_SEED, Alpha
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.intervals import Proportion, scipy_stats
from consensus_eval.domain.kinds.deductions import deductions_in
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.textio import csv_records, decimal_point, json_type, jsonl_values, read_text, unguard
from consensus_eval.execution.stored_run import StoredRun


def pearson(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Pearson's r; None with fewer than 3 pairs or a constant side."""
    a, b = np.asarray(x, float), np.asarray(y, float)
    if a.size < 3 or a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Spearman's rho (Pearson on average ranks, scipy's ``rankdata``: ties share their average rank, as
    ``scipy.stats.spearmanr`` ranks them); None with fewer than 3 pairs or a constant side."""
    a, b = np.asarray(x, float), np.asarray(y, float)
    if a.size < 3:
        return None
    stats = scipy_stats()
    return pearson(stats.rankdata(a), stats.rankdata(b))


class Agreement(BaseModel):
    """One rater against a reference (a judge, or the panel, against the human), in score points.

    ``n``: cases where both have a score. ``mae``: mean absolute error, the typical distance from
    the human's score. ``bias``: mean of (rater - reference): positive means the rater scores higher
    than the human, i.e. deducts less. ``mae_ci`` / ``bias_ci``: percentile bootstrap 95% intervals
    over the cases (None without a bootstrap or with fewer than 2 cases). ``pearson`` / ``spearman``:
    linear and rank correlation (None below 3 cases or when one side is constant).
    """

    n: int
    mae: float | None
    bias: float | None
    pearson: float | None
    spearman: float | None
    mae_ci: tuple[float, float] | None = None
    bias_ci: tuple[float, float] | None = None


def agreement(rater: Sequence[float | None], reference: Sequence[float | None], n_boot: int = 0,
              seed: int = DEFAULT_SEED) -> Agreement:
    """Compare paired scores, skipping pairs where either side is missing; with ``n_boot`` > 0,
    bootstrap 95% intervals of the MAE and the bias (cases resampled with replacement, seeded)."""
    pairs = [(a, b) for a, b in zip(rater, reference, strict=True)
             if a is not None and b is not None and not (math.isnan(a) or math.isnan(b))]
    if not pairs:
        return Agreement(n=0, mae=None, bias=None, pearson=None, spearman=None)
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    out = Agreement(n=len(pairs), mae=float(np.abs(a - b).mean()), bias=float((a - b).mean()),
                    pearson=pearson(a, b), spearman=spearman(a, b))
    if n_boot > 0 and len(pairs) >= 2:
        diff = a - b
        picks = np.random.default_rng(seed).integers(0, diff.size, (n_boot, diff.size))
        out.mae_ci = _percentile_ci(np.abs(diff)[picks].mean(axis=1))
        out.bias_ci = _percentile_ci(diff[picks].mean(axis=1))
    return out


def _percentile_ci(values: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    lo, hi = np.quantile(values, [(1 - confidence) / 2, 1 - (1 - confidence) / 2])
    return float(lo), float(hi)


# --------------------------------------------------------------------------- the reliability of a run


class HumanLabel(BaseModel):
    """A human's scores for one case (any subset of dimensions) and, optionally, the deduction
    categories they would deduct in (rubric category ids or display names). ``file`` and ``line``:
    where the label was read, when it was read from a file (for messages)."""

    case_id: str
    scores: dict[str, float]
    categories: set[str] | None = None
    file: str | None = None
    line: int | None = None


def load_human(path: str | Path, rubric: Rubric, encoding: str | None = None, *,
               text: str | None = None, raw: bytes | None = None) -> dict[str, HumanLabel]:
    """Human labels from CSV or JSONL: ``case_id``, one column per dimension id (``total``
    optional), optional ``categories`` (separated by ``;``). Errors name file, line and field.

    ``encoding``: the file's encoding; by default UTF-8 (BOM or not), else GB18030/GBK
    (:func:`consensus_eval.domain.textio.read_text`). A file with no ``case_id`` column, or with no
    column (key) named after a dimension, ``total`` or ``categories``, is refused: it would match nothing.
    """
    p = Path(path)
    dims = [d.id for d in rubric.dimensions]
    names = {c.name: c.id for d in deductions_in(rubric.dimensions) for c in d.categories}
    ids = {c.id for d in deductions_in(rubric.dimensions) for c in d.categories}
    wanted = [*dims, "total", "categories"]
    rows = (_jsonl_rows(p, wanted, encoding, text, raw) if p.suffix.lower() == ".jsonl"
            else _csv_rows(p, wanted, dims, encoding, text, raw))
    if not rows:
        raise InputError(f"{p}: no human labels (the file has no data line)")
    out: dict[str, HumanLabel] = {}
    for line, r in rows:
        raw_id = r.get("case_id")
        cid = "" if raw_id is None or isinstance(raw_id, (dict, list, bool)) else str(raw_id).strip()
        if not cid:
            raise InputError(f"{p}:{line}: case_id: missing" if raw_id in (None, "")
                             else f"{p}:{line}: case_id: not a case id: {raw_id!r}")
        scores = _label_scores(p, line, r, rubric, dims)
        categories = _label_categories(p, line, r.get("categories"), ids, names)
        if cid in out:
            raise InputError(f"{p}:{line}: case_id: duplicate {cid!r} (first on line {out[cid].line})")
        out[cid] = HumanLabel(case_id=cid, scores=scores, categories=categories, file=str(p), line=line)
    return out


def _jsonl_rows(p: Path, wanted: Sequence[str], encoding: str | None, text: str | None,
                raw: bytes | None) -> list[tuple[int, dict[str, Any]]]:
    """The JSON Lines file's labels (line, object): the one JSON Lines reader (textio), the same messages."""
    rows: list[tuple[int, dict[str, Any]]] = []
    errors: list[str] = []
    given = raw if raw is not None else text.encode("utf-8") if text is not None else None
    for _, i, data in jsonl_values(p, errors, what="human labels", encoding=encoding, raw=given):
        if errors:
            break
        if not isinstance(data, dict):
            raise InputError(f"{p}:{i}: a human label must be a JSON object with case_id and scores, "
                             f"got {json_type(data)}")
        rows.append((i, data))
    if errors:
        raise InputError(errors[0])
    if rows and not any(k in r for _, r in rows for k in wanted):
        raise InputError(f"{p}: no line has a key named {', '.join(wanted)}; the labels would match "
                         f"nothing (line {rows[0][0]} has: {', '.join(map(str, rows[0][1])) or 'no key'})")
    return rows


def _csv_rows(p: Path, wanted: Sequence[str], dims: Sequence[str], encoding: str | None, text: str | None,
              raw: bytes | None) -> list[tuple[int, dict[str, Any]]]:
    """The CSV file's labels (line, header -> cell), in the delimiter the sheet uses (, ; or tab), as the sheet
    import reads it."""
    text = read_text(p, encoding, what="human labels", raw=raw) if text is None else text
    records = csv_records(p, text)
    header = [h.strip() for h in records[0][1]] if records else []
    if not header:
        raise InputError(f"{p}: no header line; expected case_id,{','.join(dims)}[,total][,categories]")
    if "case_id" not in header:
        raise InputError(f"{p}:1: no column named case_id (the header has: {_shown(header)})")
    if not any(h in wanted for h in header):
        raise InputError(f"{p}:1: no column named {', '.join(wanted)}; the labels would match nothing "
                         f"(the header has: {_shown(header)})")
    rows: list[tuple[int, dict[str, Any]]] = []
    for i, cells in records[1:]:
        if len(cells) > len(header) and any(x.strip() for x in cells[len(header):]):
            raise InputError(f"{p}:{i}: more cells than the header has columns ({len(header)})")
        rows.append((i, {h: unguard(c.strip()) for h, c in zip(header, cells, strict=False)}))
    return rows


def _label_scores(p: Path, line: int, r: Mapping[str, Any], rubric: Rubric, dims: Sequence[str]) -> dict[str, float]:
    """A label's scores: each dimension's given (a finite number in its range) and the total (given, else the
    rubric's total when every dimension is given)."""
    scores = {}
    for d in [*dims, "total"]:
        v = r.get(d)
        if v in (None, "") or (isinstance(v, str) and not v.strip()):
            continue
        if isinstance(v, bool):
            raise InputError(f"{p}:{line}: {d}: not a number: {v!r}")
        try:
            scores[d] = float(decimal_point(v) if isinstance(v, str) else v)
        except (TypeError, ValueError):
            raise InputError(f"{p}:{line}: {d}: not a number: {v!r}") from None
        if not math.isfinite(scores[d]):
            raise InputError(f"{p}:{line}: {d}: not a finite number: {v!r}")
        if d != "total" and not rubric.dimension(d).low <= scores[d] <= rubric.dimension(d).max:
            raise InputError(f"{p}:{line}: {d}: {v} is outside {rubric.dimension(d).low:g}.."
                             f"{rubric.dimension(d).max:g}")
    if "total" not in scores and all(d in scores for d in dims):
        scores["total"] = rubric.total(scores)   # sum of weight x score (a plain sum at weight 1)
    return scores


def _label_categories(p: Path, line: int, cats: Any, ids: set[str], names: Mapping[str, str]) -> set[str] | None:
    """A label's categories (ids; a name stands for its id): a list, or a ``;``-separated string; None: none
    given."""
    if cats is None:
        return None
    if isinstance(cats, dict) or (isinstance(cats, list) and any(isinstance(x, (dict, list)) for x in cats)):
        raise InputError(f"{p}:{line}: categories: expected a list of category ids or names, "
                         f"or a ';'-separated string, got {cats!r}")
    items = cats if isinstance(cats, list) else [c for c in str(cats).split(";")]
    categories = set()
    for c in (str(x).strip() for x in items):
        if not c:
            continue
        if c not in ids and c not in names:
            raise InputError(f"{p}:{line}: categories: unknown category {c!r}")
        categories.add(names.get(c, c))
    return categories


def _shown(header: Sequence[str]) -> str:
    return ", ".join(repr(h) for h in header[:12]) + (", ..." if len(header) > 12 else "")


def matrix(rows: Sequence[Sequence[float | None]]) -> np.ndarray:
    """A raters x units float matrix, None as NaN."""
    return np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=float).reshape(len(rows), -1)


def panel_value(c: CaseConsensus, key: str) -> float | None:
    """The panel's consensus score of a case on ``key`` (a dimension id, or ``total``)."""
    return c.total if key == "total" else c.scores.get(key)


def judge_value(c: CaseConsensus, judge: str, key: str) -> float | None:
    """A judge's score of a case on ``key`` (a dimension id, or ``total`` for its complete total)."""
    return c.judge_totals.get(judge) if key == "total" else c.judges[judge][key].mean


def points_taken(run: StoredRun) -> dict[tuple[str, str, str], list[float]]:
    """(case, judge, category id) -> the points each of the judge's ok runs took off in it (capped)."""
    taken: dict[tuple[str, str, str], list[float]] = {}
    for r in run.records:
        score = run.scores.get(r.request_hash)
        if score is not None:
            for cs in score.categories:
                taken.setdefault((r.case_id, r.judge, cs.id), []).append(cs.taken)
    return taken


#: below this many labelled cases, the human section carries a small-sample warning
SMALL_SAMPLE_CASES = 30


class JudgePrecision(BaseModel):
    """How many of one judge's deductions the reviewers upheld: ``agree`` / ``disagree`` / ``unsure``
    count verdicts (with two reviewers, a deduction judged by both counts twice). ``precision`` is
    agree / (agree + disagree), unsure verdicts left out, with its 95% Wilson interval (``precision.n``
    is agree + disagree; its value is None when no verdict was agree or disagree). 0.9 means nine in
    ten of the judge's deductions that a reviewer decided on were upheld."""

    judge: str
    agree: int
    disagree: int
    unsure: int
    precision: Proportion


class AddedDeduction(BaseModel):
    """A deduction a reviewer added because the judges missed it (a label of kind ``added_deduction``):
    where (``case_id``, ``dimension``), what (``type_id`` with the rubric's ``type`` and ``category`` names;
    a fixed penalty has category ``fixed_penalty``), ``points`` taken off, the ``evidence`` in the record,
    the reviewer's ``comment`` and who added it. ``missed_by``: the judges that answered on that dimension
    of the case without deducting that type in any run (each counts it as a miss)."""

    case_id: str
    dimension: str
    type_id: str
    type: str
    category: str
    points: float | None
    evidence: str | None = None
    comment: str | None = None
    reviewer: str
    missed_by: list[str] = []


class HumanAgreement(BaseModel):
    """The judges (and the panel) against the human reviewers, on the cases they labelled (the
    ``human`` section of reliability.json).

    Keys of the per-score maps are dimension ids and ``total``. The human's score of a case is the
    mean over the reviewers who scored it (a reviewer's total: their ``total`` if given, else the sum
    of their dimension scores when they scored every dimension).

    - ``n_cases``: cases with at least one human score; ``reviewers``: who labelled (scores or verdicts);
    - ``alpha_without_human`` / ``alpha_with_human``: interval alpha of the judges on those cases,
      then with the human as one more rater: if adding the human lowers alpha, the human disagrees
      with the panel more than the judges disagree with each other;
    - ``judges`` / ``panel``: MAE and bias (rater - human, in points) with bootstrap CIs, and
      correlations, of each judge and of the panel's consensus score;
    - ``small_sample`` / ``warning``: fewer than 30 labelled cases (the intervals are wide: read the
      figures as indications);
    - ``precision``: per judge, the share of its deductions the reviewers agreed with
      (:class:`JudgePrecision`); ``n_verdicts``: verdicts given (one per deduction per run and
      reviewer: a fixed penalty listed several times in a run is one), ``n_added_deductions``: deductions
      the reviewers added (what the judges missed), listed in ``added`` (:class:`AddedDeduction`);
      ``missed``: per judge, how many of them it missed;
    - ``n_accepted``: score labels where a reviewer accepted the panel's score instead of giving their own;
      ``accepted_included``: whether they count as human scores above (not by default: they would pull
      every judge-versus-human figure towards agreement);
    - ``inter_reviewer``: interval alpha between the reviewers per dimension and total, on the cases
      two or more of them scored (empty with one reviewer); ``inter_reviewer_verdicts``: nominal alpha
      of their verdicts on the deductions two or more of them judged (None when there are none);
    - ``category_jaccard``: per judge, the mean over labelled cases of the Jaccard similarity of the
      categories it deducted in and the human's (two empty sets agree: 1); ``category_jaccard_seed``:
      the same by the stricter rule of the project's first specification, whose name it keeps (a case
      where either side is empty scores 0), for comparison.
    """

    n_cases: int
    unmatched_case_ids: list[str]
    alpha_with_human: dict[str, Alpha]
    alpha_without_human: dict[str, Alpha]
    judges: dict[str, dict[str, Agreement]]
    panel: dict[str, Agreement]
    category_jaccard: dict[str, float] | None = None
    category_jaccard_seed: dict[str, float] | None = None
    category_jaccard_cases: int | None = None
    reviewers: list[str] = []
    small_sample: bool = False
    warning: str | None = None
    precision: dict[str, JudgePrecision] = {}
    n_verdicts: int = 0
    n_added_deductions: int = 0
    added: list[AddedDeduction] = []
    missed: dict[str, int] = {}
    n_accepted: int = 0
    accepted_included: bool = False
    inter_reviewer: dict[str, Alpha] = {}
    inter_reviewer_verdicts: Alpha | None = None

