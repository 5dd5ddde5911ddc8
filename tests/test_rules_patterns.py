"""The rules judge's patterns written for the regex engine's speed match what their plain forms match.

``letter_bounded`` and the clause and sentence ends are written with every branch starting with a literal
character (so the engine scans only where one stands); these tests hold them to the plain patterns they
replace, on texts built to hit the edges (words glued to letters, dots between letters and digits, runs of
blanks) and on windows of them (``pattern.finditer(text, pos, endpos)``, as the rules scan clauses).
"""

from __future__ import annotations

import random
import re

from consensus_eval.judges.rules.medical_record.medication import TIMING, TIMING_PHRASES
from consensus_eval.judges.rules.medical_record.quantities import _KW_KIND, _MEASURE_KW
from consensus_eval.judges.rules.medical_record.text import CLAUSE_END, SENTENCE_END, letter_bounded

PLAIN_CLAUSE_END = re.compile(r"[,;。!?\n]|(?<![A-Za-z])\.(?!\d)|\.(?![\dA-Za-z ])|[ \t]{2,}")
PLAIN_SENTENCE_END = re.compile(r"[;。!?\n]|(?<![A-Za-z])\.(?!\d)|\.(?![\dA-Za-z ])")


def _spans(rx: re.Pattern[str], text: str, lo: int, hi: int) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group()) for m in rx.finditer(text, lo, hi)]


def _same(a: re.Pattern[str], b: re.Pattern[str], pieces: list[str], seed: int, n: int = 1500) -> int:
    """Texts of 1-10 random ``pieces``: ``a`` and ``b`` find the same matches in each and in 3 random windows.
    Returns how many texts had a match (so a test can check the texts were not all blank to the patterns)."""
    rng = random.Random(seed)
    hit = 0
    for _ in range(n):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 11)))
        whole = _spans(a, text, 0, len(text))
        assert whole == _spans(b, text, 0, len(text)), text
        hit += bool(whole)
        for _ in range(3):
            lo = rng.randrange(len(text) + 1)
            hi = rng.randrange(lo, len(text) + 1)
            assert _spans(a, text, lo, hi) == _spans(b, text, lo, hi), (text, lo, hi)
    return hit


def test_letter_bounded_matches_a_word_between_non_letters_only() -> None:
    rx = re.compile(letter_bounded("DM"))
    assert [m.start() for m in rx.finditer("DM 2DM。xDM DMx (DM)")] == [0, 4, 16]
    assert rx.search("ADM", 1) is None  # the letter before the window's start still counts
    assert rx.fullmatch("DM") is not None


def test_letter_bounded_alternations_match_the_lookbehind_form() -> None:
    words = ["DM", "T2DM", "HbA1c", "A1c", "q.n.", "qn", "空腹", "早上", "血糖"]
    plain = re.compile("|".join(rf"(?<![A-Za-z]){re.escape(w)}(?![A-Za-z])" for w in words))
    fast = re.compile("|".join(letter_bounded(w) for w in words))
    assert _same(plain, fast, [*words, "a", "Z", "1", ".", " ", "。", "x"], seed=1) > 500


def test_the_measurement_keywords_and_timing_phrases_match_their_plain_forms() -> None:
    keywords = sorted(_KW_KIND, key=len, reverse=True)
    plain_kw = re.compile("|".join(rf"(?<![A-Za-z]){re.escape(k)}(?![A-Za-z])" if k.isascii() else re.escape(k)
                                   for k in keywords))
    phrases = sorted(TIMING_PHRASES, key=len, reverse=True)
    plain_timing = re.compile(rf"(?<![A-Za-z])(?:{'|'.join(map(re.escape, phrases))})(?![A-Za-z])")
    extra = ["a", "Z", "1", "7.8", " ", "。", "x"]
    assert _same(plain_kw, _MEASURE_KW, keywords + extra, seed=2) > 500
    assert _same(plain_timing, TIMING, phrases + extra, seed=3) > 500


def test_clause_and_sentence_ends_match_their_plain_forms() -> None:
    pieces = ["a", "Z", "1", " ", "  ", "\t", " \t", "。", ".", ",", ";", "!", "?", "\n", "x.", "b.i.d.", "0.5",
              "p.o. ", "中", "3.", ".5"]
    assert _same(PLAIN_CLAUSE_END, CLAUSE_END, pieces, seed=4) > 500
    assert _same(PLAIN_SENTENCE_END, SENTENCE_END, pieces, seed=5) > 500
