"""domain.sets.merged_spans: the one union of spans (the key scrubber's masks, the rules judge's relatives' ranges)."""

from __future__ import annotations

from consensus_eval.domain.sets import merged_spans


def test_overlapping_and_touching_spans_become_one() -> None:
    assert merged_spans([(5, 9), (0, 2), (2, 3), (8, 12)]) == [(0, 3), (5, 12)]


def test_disjoint_spans_stay_apart_sorted() -> None:
    assert merged_spans([(7, 8), (1, 3), (4, 6)]) == [(1, 3), (4, 6), (7, 8)]


def test_a_span_inside_another_keeps_the_outer_end() -> None:
    assert merged_spans([(0, 10), (2, 4), (10, 11)]) == [(0, 11)]


def test_no_spans() -> None:
    assert merged_spans([]) == []
    assert merged_spans(iter([(3, 3)])) == [(3, 3)]
