"""Random spot checks (随机抽查): a random sample of cases for clinicians
to score, so that judge-versus-clinician figures are measured on cases chosen by chance, not on the
cases the judges disagreed on most (the review queue), which are the hardest and would bias every figure.

:func:`draw` draws ``n`` cases without replacement, at random with a seed (the same seed and cases give
the same sample), optionally stratified:

- ``stratify=None``: a simple random sample; every case's inclusion probability is n / N;
- ``"system"``: per system that wrote the records, or ``"band"``: per 10-point band of the panel's total
  (``<60``, ``60-69``, ..., ``90-100``; ``no score`` for a case without one). The sample is allocated
  to the strata in proportion to their size (largest remainders, at least one case per stratum when n
  allows); a case's inclusion probability is n_h / N_h in its stratum h.

Each case's inclusion probability is stored with it (:class:`~consensus_eval.execution.store.SpotCheckRecord`):
figures computed on the sample weight a case by 1 / probability when the probabilities differ, so they
estimate the whole run, not the sample. :func:`inclusion` gives every case of the run its probability under
the stored design (a case of a stratum nothing was drawn from: 0), which is what decides whether a group's
cases were equally likely to be drawn, not the probabilities of the cases that happened to be drawn.

**Tuning and held out** (docs/qc-loop.md). A drawn sample is split with the draw's seed (:func:`split`): half its cases
(:data:`TUNING_SHARE`, shared among the strata in proportion) form the *tuning* part, on which a prompt author
may look at the judges' mistakes and from which few-shot examples are drawn
(:mod:`consensus_eval.domain.fewshot`); the others are *held out*, what a changed prompt is measured on. The
split is stored with the sample (``SpotCheckRecord.part``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Literal, cast

import numpy as np

from consensus_eval._errors import UsageError
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.systems import UNNAMED
from consensus_eval.domain.cases import Case
from consensus_eval.execution.store import SpotCheckRecord

Stratify = Literal["system", "band"]
STRATIFY: tuple[Stratify, ...] = ("system", "band")
#: the share of a spot check in its tuning part (the rest is held out)
TUNING_SHARE = 0.5
#: the generator stream of the split (beside the draw's seed: the draw's cases stay what they were)
_SPLIT_STREAM = 36


def band(total: float | None) -> str:
    """The 10-point band of a panel total: ``<60``, ``60-69``, ``70-79``, ``80-89``, ``90-100``, or ``no score``."""
    if total is None:
        return "no score"
    if total < 60:
        return "<60"
    if total >= 90:
        return "90-100"
    low = int(total // 10) * 10
    return f"{low}-{low + 9}"


def strata(cases: Sequence[Case], cons: Sequence[CaseConsensus], stratify: Stratify | None) -> dict[str, list[str]]:
    """Stratum name -> its case ids, in the cases' order (one stratum ``all`` without stratification)."""
    if stratify is None:
        return {"all": [c.id for c in cases]}
    out: dict[str, list[str]] = {}
    if stratify == "system":
        for c in cases:
            out.setdefault(f"system={c.system or UNNAMED}", []).append(c.id)
        return out
    totals = {c.case_id: c.total for c in cons}
    for c in cases:
        out.setdefault(f"band={band(totals.get(c.id))}", []).append(c.id)
    return out


def allocate(sizes: Sequence[int], n: int) -> list[int]:
    """``n`` draws shared among strata of ``sizes`` in proportion (largest remainders), each at most its
    size and, when ``n`` >= the number of strata, at least 1."""
    total = sum(sizes)
    n = min(n, total)
    if total == 0 or n == 0:
        return [0] * len(sizes)
    exact = [n * s / total for s in sizes]
    got = [min(s, math.floor(e)) for s, e in zip(sizes, exact, strict=True)]
    if n >= len(sizes):
        got = [max(g, 1 if s else 0) for g, s in zip(got, sizes, strict=True)]
    order = sorted(range(len(sizes)), key=lambda i: (-(exact[i] - math.floor(exact[i])), i))
    while sum(got) < n:
        for i in order:
            if sum(got) < n and got[i] < sizes[i]:
                got[i] += 1
    while sum(got) > n:                       # the minimum of 1 per stratum overshot: take from the largest
        i = max(range(len(sizes)), key=lambda j: (got[j], -j))
        got[i] -= 1
    return got


def inclusion(cases: Sequence[Case], cons: Sequence[CaseConsensus],
              sample: Sequence[SpotCheckRecord]) -> dict[str, float] | None:
    """Every case's inclusion probability under the stored draw: the strata are made again as the draw made
    them (the kind read from the stored strata's names, :func:`strata`), and each case gets the probability
    stored for its stratum, ``n_h / N_h`` (0 for a stratum nothing was drawn from). None when the design
    cannot be recovered: a stratum's size is no longer ``n_h / probability`` (cases added or removed since,
    or band totals moved by a rescoring), or the stored strata are of several kinds. Empty without a sample."""
    if not sample:
        return {}
    kinds = {s.stratum.partition("=")[0] if "=" in s.stratum else s.stratum for s in sample}
    if len(kinds) != 1 or (kind := kinds.pop()) not in ("all", *STRATIFY):
        return None
    groups = strata(cases, cons, None if kind == "all" else cast("Stratify", kind))
    drawn: dict[str, list[float]] = {}
    for s in sample:
        drawn.setdefault(s.stratum, []).append(s.probability)
    prob: dict[str, float] = {}
    for name, ps in drawn.items():
        size = len(groups.get(name, []))
        if size == 0 or max(ps) - min(ps) > 1e-12 or abs(len(ps) / ps[0] - size) > 1e-6 * size:
            return None
        prob[name] = ps[0]
    return {cid: prob.get(name, 0.0) for name, ids in groups.items() for cid in ids}


def split(sample: Sequence[SpotCheckRecord], seed: int, share: float = TUNING_SHARE) -> list[SpotCheckRecord]:
    """``sample`` with each case's part (module docstring): ``round(share x n)`` cases in the tuning part, shared
    among the strata in proportion (:func:`allocate`), drawn within each with a generator of their own seeded by
    ``seed`` (the draw's own cases do not depend on it); the others held out."""
    by: dict[str, list[int]] = {}
    for i, r in enumerate(sample):
        by.setdefault(r.stratum, []).append(i)
    names = list(by)
    takes = allocate([len(by[g]) for g in names], round(share * len(sample)))
    rng = np.random.default_rng([seed, _SPLIT_STREAM])
    tuning: set[int] = set()
    for name, take in zip(names, takes, strict=True):
        if take:
            tuning.update(by[name][int(i)] for i in rng.choice(len(by[name]), size=take, replace=False))
    return [r.model_copy(update={"part": "tuning" if i in tuning else "heldout"}) for i, r in enumerate(sample)]


def tuning_ids(sample: Sequence[SpotCheckRecord]) -> set[str]:
    """The cases of the tuning part of ``sample`` (what prompts may be tuned on, few-shot examples drawn from)."""
    return {r.case_id for r in sample if r.part == "tuning"}


def draw(cases: Sequence[Case], cons: Sequence[CaseConsensus], n: int, seed: int,
         stratify: Stratify | None = None) -> list[SpotCheckRecord]:
    """A random sample of ``n`` cases (all of them when ``n`` >= the number of cases), with each case's
    inclusion probability (module docstring), split into its tuning and held-out parts (:func:`split`). Raises
    ``ValueError`` for ``n`` < 1."""
    if n < 1:
        raise UsageError(f"a spot check needs at least 1 case, got {n}")
    groups = strata(cases, cons, stratify)
    names = list(groups)
    takes = allocate([len(groups[g]) for g in names], n)
    rng = np.random.default_rng(seed)
    now = time.time()
    picked: list[tuple[str, float, str]] = []
    for name, take in zip(names, takes, strict=True):
        ids = groups[name]
        if take == 0:
            continue
        chosen = rng.choice(len(ids), size=take, replace=False)
        picked.extend((ids[int(i)], take / len(ids), name) for i in chosen)
    return split([SpotCheckRecord(case_id=cid, position=i, probability=p, stratum=s, seed=seed, drawn_at=now)
                  for i, (cid, p, s) in enumerate(picked)], seed)
