"""Wilson intervals against published values (Newcombe 1998, Table I, method 3)."""

import pytest

from consensus_eval.analysis.intervals import proportion, wilson


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    # Newcombe (1998) Stat Med 17:857-872, Table I, "score method without continuity correction"
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_matches_newcombe(k: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson(k, n)
    assert lo == pytest.approx(low, abs=5e-5)
    assert hi == pytest.approx(high, abs=5e-5)


def test_all_and_none() -> None:
    lo, hi = wilson(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-4)
    assert wilson(0, 10)[0] == 0.0


def test_proportion_empty_and_bad() -> None:
    p = proportion(0, 0)
    assert p.value is None and p.low is None
    assert proportion(3, 4).value == 0.75
    with pytest.raises(ValueError):
        wilson(5, 4)
