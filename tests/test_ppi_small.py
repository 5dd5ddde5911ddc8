"""PPI at the sizes users have (docs/validity.md): the small-sample interval keeps its coverage at every
number of clinician labels it is shown for, and so does the clinicians-only interval beside it; at large n
it is ppi-python's. Simulations are vectorised and seeded (no clock): each size is 2,000 independent
studies (a standard error of 0.005 on a coverage of 0.95).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from consensus_eval import load_run
from consensus_eval.analysis.ppi import MIN_LABELS, human_mean, ppi_mean, ppi_mean_batch
from consensus_eval.analysis.spotcheck import Stratify, draw, inclusion, strata
from consensus_eval.api import spot_check
from consensus_eval.execution.store import Store
from consensus_eval.output.report.i18n import messages
from consensus_eval.output.report.trust import validity_block
from tests.test_audit import build_panel_store
from tests.test_trust import _label, _synthetic_panel

SIZES = (3, 4, 5, 7, 10, 20, 40, 80, 200)
REPS = 2000
TRUTH = 75.0


def _studies(n: int, seed: int, judge: str, big_n: int = 300) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """REPS studies of ``n`` clinician scores (mean TRUTH, sd 12) with the judge's scores, and the judge's
    scores of ``big_n`` other cases. ``compressed``: the judge's scale is half the clinicians' and 5 points
    high, with noise sd 5; ``useless``: the judge's score does not follow the clinician's at all."""
    rng = np.random.default_rng(seed)
    y = rng.normal(TRUTH, 12, (REPS, n + big_n))
    if judge == "compressed":
        yhat = TRUTH + 5 + 0.5 * (y - TRUTH) + rng.normal(0, 5, y.shape)
    else:
        yhat = TRUTH + 5 + rng.normal(0, 6, y.shape)
    return y[:, :n], yhat[:, :n], yhat[:, n:]


def _covers(low: np.ndarray, high: np.ndarray) -> float:
    return float(((low <= TRUTH) & (high >= TRUTH)).mean())


@pytest.mark.parametrize("judge", ["compressed", "useless"])
def test_ppi_and_clinicians_only_cover_at_every_size_they_are_shown(judge: str) -> None:
    coverage: dict[int, tuple[float, float, float]] = {}
    for i, n in enumerate(SIZES):
        y, yhat, yhat_u = _studies(n, 1000 + 10 * i + (judge == "useless"), judge)
        _, low, high, lam = ppi_mean_batch(y, yhat, yhat_u)
        _, zlow, zhigh, _ = ppi_mean_batch(y, yhat, yhat_u, interval="z")
        human_half = stats.t.ppf(0.975, n - 1) * y.std(axis=1, ddof=1) / np.sqrt(n)
        m = y.mean(axis=1)
        coverage[n] = (_covers(low, high), _covers(m - human_half, m + human_half), _covers(zlow, zhigh))
        one = ppi_mean(y[0], yhat[0], yhat_u[0])            # what the report shows for one such study
        assert one.few == (n < MIN_LABELS) and (one.low is None) == (n < MIN_LABELS)
        assert one.lam == pytest.approx(float(lam[0]))
        if not one.few:
            assert (one.low, one.high) == pytest.approx((float(low[0]), float(high[0])))
            h = human_mean(y[0])
            assert (h.low, h.high) == pytest.approx((m[0] - human_half[0], m[0] + human_half[0]))
        else:
            assert human_mean(y[0]).low is None             # like with like: neither interval below the minimum
    shown = [n for n in SIZES if n >= MIN_LABELS]
    assert all(coverage[n][0] >= 0.93 for n in shown), sorted(coverage.items())
    assert all(coverage[n][1] >= 0.93 for n in shown), sorted(coverage.items())
    assert all(coverage[n][0] >= 0.93 for n in SIZES), coverage      # even where it is not shown
    if judge == "compressed":
        # ppi-python's normal interval, for contrast: what the report showed before (0.66-0.70 at 3 labels)
        assert coverage[3][2] < 0.8 and coverage[5][2] < 0.88, coverage


def test_at_large_n_the_interval_is_ppi_pythons() -> None:
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(7)
    y = rng.normal(TRUTH, 12, 22000)
    yhat = TRUTH + 5 + 0.5 * (y - TRUTH) + rng.normal(0, 5, y.size)
    yl, yhl, yhu = y[:2000], yhat[:2000], yhat[2000:]
    ours = ppi_mean(yl, yhl, yhu)
    low, high = ppi_py.ppi_mean_ci(yl, yhl, yhu, alpha=0.05)
    point = ppi_py.ppi_mean_pointestimate(yl, yhl, yhu)
    assert ours.estimate == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
    assert ours.width is not None and ours.width == pytest.approx(float(high[0] - low[0]), rel=2e-3)
    assert ours.df is not None and ours.df > 1000


def test_lam_zero_gives_the_clinicians_only_interval_and_the_estimate_says_so() -> None:
    rng = np.random.default_rng(3)
    y = rng.normal(TRUTH, 12, 8)
    yhat = TRUTH - rng.normal(0, 1, 8) * (y - TRUTH)     # runs against the clinicians: tuned lam clipped to 0
    yhat_u = rng.normal(TRUTH, 3, 80)
    e, h = ppi_mean(y, yhat, yhat_u), human_mean(y)
    assert e.lam == 0.0 and e.df == 7
    assert (e.estimate, e.low, e.high) == pytest.approx((h.estimate, h.low, h.high))


# --------------------------------------------------------------------------- the design decides, not the draw


@pytest.fixture
def two_systems(tmp_path: Path) -> Path:
    panel, cases = _synthetic_panel()
    return build_panel_store(tmp_path / "run", panel, cases)


def test_inclusion_gives_every_case_its_probability_under_the_stored_design(two_systems: Path) -> None:
    res = load_run(two_systems, n_boot=0)
    designs: tuple[tuple[Stratify | None, int], ...] = (("band", 7), ("system", 9), (None, 10))
    for stratify, n in designs:
        sample = draw(res.cases, res.consensus, n, seed=2, stratify=stratify)
        p = inclusion(res.cases, res.consensus, sample)
        assert p is not None and set(p) == {c.id for c in res.cases}
        assert sum(p.values()) == pytest.approx(n)                   # the expected sample size is the sample size
        assert all(p[s.case_id] == s.probability for s in sample)
        groups = strata(res.cases, res.consensus, stratify)
        assert all(len({p[c] for c in ids}) == 1 for ids in groups.values())
    # a design that no longer matches the run (a case gone since the draw): unknown, not guessed
    assert inclusion(res.cases[1:], res.consensus, sample) is None


def test_ppi_is_refused_when_the_design_is_unequal_even_if_the_drawn_cases_look_equal(two_systems: Path) -> None:
    res = load_run(two_systems, n_boot=0)
    a_ids = [c.id for c in res.cases if c.system == "scribe-a"]
    for seed in range(200):      # a band draw whose scribe-a cases all carry one probability, the design not
        sample = draw(res.cases, res.consensus, 10, seed=seed, stratify="band")
        drawn = {s.probability for s in sample if s.case_id in a_ids}
        design = inclusion(res.cases, res.consensus, sample)
        assert design is not None
        if len(drawn) == 1 and len({design[c] for c in a_ids}) > 1:
            break
    else:
        pytest.fail("no such draw in 200 seeds")
    spot_check(two_systems, 10, seed=seed, stratify="band")
    with Store.open_existing(two_systems) as store:
        for s in sample:
            _label(store, s.case_id, "li", {"accuracy": 30, "completeness": 35, "standardization": 25})
    v = load_run(two_systems, n_boot=0).reliability.validity
    assert v is not None and "ppi_unequal_probabilities" in v.notes
    assert not any(p.group == "scribe-a" for p in v.ppi)


def test_the_report_shows_lambda_and_says_when_there_is_no_interval(two_systems: Path) -> None:
    spot_check(two_systems, 8, seed=3, stratify="system")           # 4 a system: below the minimum
    res = load_run(two_systems, n_boot=0)
    with Store.open_existing(two_systems) as store:
        for s in res.spot_checks:
            _label(store, s.case_id, "li", {"accuracy": 30, "completeness": 35, "standardization": 25})
    res = load_run(two_systems, n_boot=0)
    v = res.reliability.validity
    assert v is not None and v.ppi
    total = [p for p in v.ppi if p.key == "total"]
    assert all(p.ppi.few and p.ppi.low is None and p.human.low is None and p.ppi.estimate is not None
               for p in total)
    for lang, words in (("en", ("λ", "Fewer than 5 clinician scores", "no interval: 4 < 5")),
                        ("zh", ("λ", "少于 5 个", "无区间：4 < 5"))):
        block = validity_block(v, res.rubric, res.judges, messages(lang))
        text = " ".join([*block.warnings, *block.notes, *(c for tb in block.tables for r in tb.rows for c in r),
                         *(h for tb in block.tables for h in tb.header)])
        assert all(w in text for w in words), (lang, text)
        # every clinician gave 90 whatever the panel said: the panel buys nothing, and the report says so
        assert all(p.ppi.lam == 0 for p in total) and "λ = 0" in text
