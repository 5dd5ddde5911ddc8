"""Text helpers shared by the checks: normalisation, clause and sentence bounds, numbers, negation.

Normalisation (:func:`norm`) maps full-width ASCII to half-width one character for one, so offsets
found in the normalised text quote the original. Clauses end at ``，,；;。!?``, a line end, a full stop
that is not a decimal point nor the dot of an abbreviation (after a letter, before a letter or a blank:
``b.i.d. p.o.``) or a run of spaces (not at ``、``); sentences do not end at commas.
:func:`bounds` defines the clause (or sentence) around a position; :class:`Boundaries` answers the same
from the delimiters found once per text, so that finding the clause of every mention stays linear.

Negation (:func:`is_negated`): a negation word (否认, 无, 没有, 未患, 未发现, 排除 ...) earlier in the
clause negates every term after it (enumerations with ``、``), unless a turn such as ``但``/``有``/
``合并`` comes between; a trailing ``否认/阴性/(-)/不详`` (record) or ``没有/不是`` (conversation)
negates too.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable

from consensus_eval._errors import UsageError

_FULLWIDTH = str.maketrans({**{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)},
                            "\u3000": " ", "µ": "μ", "−": "-"})


def norm(text: str) -> str:
    """Full-width ASCII to half-width, one character for one (offsets stay valid for the original)."""
    return text.translate(_FULLWIDTH)


# a full stop ends a clause unless it is a decimal point (0.5) or the dot of an abbreviation: after a letter,
# before a letter or a blank (b.i.d. p.o.); two blanks or more end a clause too. Written as
# r"[,;。!?\n]|(?<![A-Za-z])\.(?!\d)|\.(?![\dA-Za-z ])|[ \t]{2,}" matches, but with every branch starting with a
# literal character, so the regex engine scans only where one stands (letter_bounded); 3 times faster
CLAUSE_END = re.compile(r",|;|。|!|\?|\n|\.(?<![A-Za-z]\.)(?!\d)|\.(?![\dA-Za-z ])| [ \t]+|\t[ \t]+")
SENTENCE_END = re.compile(r";|。|!|\?|\n|\.(?<![A-Za-z]\.)(?!\d)|\.(?![\dA-Za-z ])")


def bounds(text: str, pos: int, end_re: re.Pattern[str], lo: int = 0, hi: int | None = None) -> tuple[int, int]:
    """The piece of ``text[lo:hi]`` around ``pos`` delimited by ``end_re``.

    The definition, scanning ``text[lo:pos]`` on each call: the checks use :class:`Boundaries`, which
    gives the same answer in O(log n) from the delimiters found once per text (the tests compare them).
    """
    hi = len(text) if hi is None else hi
    start = lo
    for m in end_re.finditer(text, lo, pos):
        start = m.end()
    stop = end_re.search(text, pos, hi)
    return start, (stop.start() if stop else hi)


class Boundaries:
    """The clause (:data:`CLAUSE_END`) or sentence (:data:`SENTENCE_END`) delimiters of one text, found once.

    :meth:`bounds` answers what :func:`bounds` does, in O(log n) by bisection. Scanning a window
    ``text[lo:hi]`` finds the delimiters of the whole text, except at the window's edges: a ``.``
    just before the edge ends a piece even when a digit, a letter or a blank follows beyond it (the
    lookaheads see the end of the window), and a run of blanks across an edge is cut there (a delimiter only
    if two blanks or more stay inside).
    """

    __slots__ = ("_ends", "_starts", "text")

    def __init__(self, text: str, end_re: re.Pattern[str]) -> None:
        if end_re is not CLAUSE_END and end_re is not SENTENCE_END:
            raise UsageError("Boundaries knows CLAUSE_END and SENTENCE_END only")
        self.text = text
        self._starts: list[int] = []
        self._ends: list[int] = []
        for m in end_re.finditer(text):
            self._starts.append(m.start())
            self._ends.append(m.end())

    def start(self, pos: int, lo: int = 0) -> int:
        """End of the last delimiter in ``text[lo:pos]`` (``lo`` if none): where ``pos``'s piece starts."""
        pos = min(pos, len(self.text))
        if pos <= lo:
            return lo
        if self.text[pos - 1] == ".":
            return pos
        starts, ends = self._starts, self._ends
        j = bisect_left(starts, pos) - 1  # the last delimiter starting before pos
        if j < 0:
            return lo
        if ends[j] > pos:  # a run of blanks across pos, cut at pos
            if pos - max(starts[j], lo) >= 2:
                return pos
            j -= 1
            if j < 0:
                return lo
        s, e = starts[j], ends[j]
        if s >= lo:
            return e
        return e if e - lo >= 2 else lo  # a run of blanks across lo, cut at lo

    def stop(self, pos: int, hi: int | None = None) -> int:
        """Start of the first delimiter in ``text[pos:hi]`` (``hi`` if none): where ``pos``'s piece ends."""
        hi = len(self.text) if hi is None else hi
        end = min(hi, len(self.text))
        if pos >= end:
            return hi
        starts, ends = self._starts, self._ends
        k = bisect_left(starts, pos)  # the first delimiter starting at or after pos
        if k > 0 and ends[k - 1] > pos and min(ends[k - 1], end) - pos >= 2:
            return pos  # a run of blanks across pos, cut at pos
        if k < len(starts) and starts[k] < end:
            s, e = starts[k], ends[k]
            return s if e - s == 1 or min(e, end) - s >= 2 else hi  # a run of blanks cut at hi to one: none
        return end - 1 if self.text[end - 1] == "." else hi

    def bounds(self, pos: int, lo: int = 0, hi: int | None = None) -> tuple[int, int]:
        """``bounds(text, pos, end_re, lo, hi)``: the piece of ``text[lo:hi]`` around ``pos``."""
        return self.start(pos, lo), self.stop(pos, hi)


class GrowingSearch:
    """``bool(rx.search(text, lo, hi))`` asked for windows that share ``lo`` and grow at the end (the
    drug mentions of one clause, in order), in time linear in the clause overall rather than in each
    window. Only for a pattern without lookarounds or anchors whose matches are at most ``longest``
    characters long: a match inside a window either lies inside the previous one (then it was found)
    or ends past its end, so it starts at most ``longest - 1`` characters before it.
    """

    __slots__ = ("_found", "_hi", "_lo", "longest", "rx", "text")

    def __init__(self, text: str, rx: re.Pattern[str], longest: int) -> None:
        self.text, self.rx, self.longest = text, rx, longest
        self._lo, self._hi, self._found = -1, -1, False

    def search(self, lo: int, hi: int) -> bool:
        if lo == self._lo and hi >= self._hi:
            found = self._found or bool(self.rx.search(self.text, max(lo, self._hi - self.longest + 1), hi))
        else:
            found = bool(self.rx.search(self.text, lo, hi))
        self._lo, self._hi, self._found = lo, hi, found
        return found


def pieces(text: str, lo: int, hi: int, end_re: re.Pattern[str] = CLAUSE_END) -> list[tuple[int, int]]:
    """The non-blank pieces of ``text[lo:hi]`` split by ``end_re``, as stripped (start, end) spans."""
    out, start = [], lo
    for m in [*end_re.finditer(text, lo, hi), None]:
        end = m.start() if m else hi
        a, b = start, end
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            out.append((a, b))
        if m:
            start = m.end()
    return out


_CN_DIGIT = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_UNIT = {"十": 10, "百": 100}


def _cn_int(s: str) -> int | None:
    """Chinese numeral to int (三, 十二, 二十四, 一百五 = 150, 一百零五); None for ranges (五六) or junk."""
    total, digit, prev_unit, zero = 0, None, None, False
    for ch in s:
        if ch in _CN_DIGIT:
            d = _CN_DIGIT[ch]
            if d == 0:
                zero = True
                continue
            if digit is not None:
                return None
            digit = d
        elif ch in _CN_UNIT:
            u = _CN_UNIT[ch]
            if prev_unit is not None and u >= prev_unit:
                return None
            total += (1 if digit is None else digit) * u
            digit, prev_unit = None, u
        else:
            return None
    if digit is not None:
        if prev_unit and prev_unit >= 100 and not zero:
            digit *= prev_unit // 10
        total += digit
    elif not total and not zero:
        return None
    return total


def to_number(s: str) -> float | None:
    """``9.6``, ``九点六``, ``十二``, ``半`` -> float; None if it cannot be read as one number."""
    if re.fullmatch(r"\d+(?:\.\d+)?", s):
        return float(s)
    if s == "半":
        return 0.5
    if "点" in s:
        whole, _, frac = s.partition("点")
        w = float(whole) if whole.isdigit() else _cn_int(whole)
        digits = "".join(str(_CN_DIGIT[c]) if c in _CN_DIGIT else c for c in frac)
        if w is None or not digits.isdigit():
            return None
        return float(f"{int(w)}.{digits}")
    v = _cn_int(s)
    return None if v is None else float(v)


ARABIC = re.compile(r"\d+(?:\.\d+)?")
CN_NUMERAL = re.compile(r"[零〇一二两三四五六七八九十百]+(?:点[零〇一二三四五六七八九]+)?")


def all_numbers(text: str) -> list[float]:
    """Every number written in ``text``: Arabic, and Chinese ones with 十/百/点 (not a lone 一)."""
    out = [float(m.group()) for m in ARABIC.finditer(text)]
    for m in CN_NUMERAL.finditer(text):
        s = m.group()
        if re.search("[十百点]", s):
            v = to_number(s)
            if v is not None:
                out.append(v)
    return out


def close(a: float, b: float, tol: float = 1e-6) -> bool:
    return abs(a - b) <= tol


class Numbers:
    """Numbers to ask whether any is :func:`close` to a value, in O(log n): sorted once, then bisected.

    ``Numbers(ns).has_close(v, tol)`` is ``any(close(v, n, tol) for n in ns)``: the distance computed in
    floating point, ``abs(v - n)``, grows (weakly) with n above v and falls below it, so the nearest
    number on each side is the only one to try. NaN is close to nothing and is left out.
    """

    __slots__ = ("_xs",)

    def __init__(self, values: Iterable[float]) -> None:
        self._xs = sorted(v for v in values if v == v)

    def has_close(self, v: float, tol: float = 1e-6) -> bool:
        xs = self._xs
        i = bisect_left(xs, v)
        return (i < len(xs) and close(v, xs[i], tol)) or (i > 0 and close(v, xs[i - 1], tol))


def alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


def letter_bounded(word: str) -> str:
    """``word`` as a pattern that matches it where no ASCII letter is just before or just after it: what
    ``(?<![A-Za-z])word(?![A-Za-z])`` matches, written to start with the word's first character (the
    lookbehind after it looks back over it). An alternation whose every branch starts with a literal character
    is scanned by the regex engine only where one of these characters stands; a branch starting with a
    lookbehind makes it try every branch at every position (10 times slower on the measurement keywords).

    Args:
        word: the literal text, one character or more.
    """
    first = re.escape(word[0])
    return rf"{first}(?<![A-Za-z]{first}){re.escape(word[1:])}(?![A-Za-z])"


# negation words before a term, and negations after it, in the conversation and in the record
NEG_CONV = re.compile(r"否认|没有|没|无|未曾|从未|从来没|未|不是|不")
POST_NEG_CONV = re.compile(r"^(?:倒是|倒|也|都|还|是|的话)?(?:没有|没|不是)(?:$|的|啊|呢|吧|过)")
NEG_RECORD = re.compile(r"否认|没有|无|未曾|从未|未患|未诊断|未诊|未发现|未见|未有|未出现|未诉|排除|不伴|不详")
POST_NEG_RECORD = re.compile(r"^[^,;。\s\d]*?(?:否认|阴性|\(-\)|不详|:\s*(?:无|否认)|均无)")
_AFFIRM_BETWEEN = re.compile(r"但|却|而|然而|可是|不过|合并|伴有|患有")


def is_negated(clause: str, a: int, b: int, neg: re.Pattern[str], post: re.Pattern[str]) -> bool:
    """Whether the term at ``clause[a:b]`` is negated within its clause (see the module docstring)."""
    last = None
    for last in neg.finditer(clause, 0, a):  # noqa: B007 - keep the last match
        pass
    if last is not None:
        between = clause[last.end():a]
        if between.startswith("有"):
            between = between[1:]
        if not _AFFIRM_BETWEEN.search(between):
            return True
    return bool(post.match(clause[b:]))
