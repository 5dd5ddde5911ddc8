"""How the judges' scores of one case and dimension combine into the panel's: named aggregators.

An aggregator is ``(values, trim) -> float``: ``values`` are the judges' scores (each already the
mean of that judge's runs; never empty), ``trim`` the config's ``consensus.trim`` (used by trimmed
means, ignored by the others). Built in: ``mean``, ``median``, ``trimmed_mean``. A plugin adds one
with :func:`register_aggregator` (entry-point group ``consensus_eval.aggregators``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from consensus_eval._errors import UsageError
from consensus_eval.domain.plugins import Registry

Aggregator = Callable[[Sequence[float], float], float]

#: entry-point group through which installed packages add aggregators
AGGREGATOR_ENTRY_POINTS = "consensus_eval.aggregators"


def mean(values: Sequence[float], trim: float = 0.0) -> float:
    """The arithmetic mean."""
    return float(statistics.fmean(values))


def median(values: Sequence[float], trim: float = 0.0) -> float:
    """The median (the mean of the two middle values for an even count)."""
    return float(statistics.median(values))


def trimmed_mean(values: Sequence[float], trim: float = 0.2) -> float:
    """The mean after dropping ``floor(trim x n)`` values from each end; with too few values to
    drop any (fewer than 3 judges at trim 0.2), the mean."""
    k = int(trim * len(values))
    kept = sorted(values)[k: len(values) - k] if len(values) - 2 * k > 0 else list(values)
    return float(statistics.fmean(kept))


_AGGREGATORS: Registry[Aggregator] = Registry("aggregator", AGGREGATOR_ENTRY_POINTS)
for _name, _fn in (("mean", mean), ("median", median), ("trimmed_mean", trimmed_mean)):
    _AGGREGATORS.register(_name, _fn)


def register_aggregator(name: str, fn: Aggregator) -> None:
    """Make ``consensus.aggregate: <name>`` valid in configs."""
    _AGGREGATORS.register(name, fn)


def aggregator(name: str) -> Aggregator:
    """The aggregator called ``name`` (plugins are loaded on the first unknown name)."""
    return _AGGREGATORS.get(name)


def aggregate(values: Sequence[float], how: str = "mean", trim: float = 0.2) -> float:
    """Combine judges' scores with the aggregator called ``how``."""
    if not values:
        raise UsageError("nothing to aggregate")
    return aggregator(how)(values, trim)
