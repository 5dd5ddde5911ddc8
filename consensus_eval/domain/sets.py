"""Sets: similarity, with one answer for the edge case everyone handles differently, duplicates, and the union
of spans."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Set
from typing import TypeVar

H = TypeVar("H", bound=Hashable)


def jaccard(a: Set[Hashable], b: Set[Hashable]) -> float:
    """Jaccard similarity ``|a ∩ b| / |a ∪ b|``, in [0, 1].

    Two empty sets are identical, so their similarity is **1.0** (as scipy's Jaccard distance of two
    all-zero vectors is 0). A metric that wants to give no credit for predicting nothing (the TCM
    human-AI agreement, :mod:`consensus_eval.metrics.tcm`, scores a case 0 when either side is empty) says
    so where it is computed, on top of this.
    """
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def duplicates(items: Iterable[H]) -> list[H]:
    """The items that occur more than once, each once, in the order they are first met again.

    ``duplicates(["a", "b", "b", "a", "b"]) == ["b", "a"]``: ``b`` repeats (third item) before ``a`` does
    (fourth). An empty list means every item is unique. One pass; the items must be hashable.
    Callers that name the duplicates in a message sort them themselves where they want a stable order.
    """
    seen: set[H] = set()
    found: dict[H, None] = {}
    for item in items:
        if item in seen:
            found.setdefault(item)
        else:
            seen.add(item)
    return list(found)


def merged_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of ``(start, end)`` spans as sorted, disjoint spans: overlapping or touching spans (one ends where
    the next starts) become one. ``merged_spans([(5, 9), (0, 2), (2, 3), (8, 12)]) == [(0, 3), (5, 12)]``."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
