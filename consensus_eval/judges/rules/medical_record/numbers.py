"""Measurements of the record against the conversation (check 6 of the package docstring).

Measurements (``accuracy.numbers``; read by ``quantities.py``): a record value is fine when it is one
of the conversation's values of its kind (:class:`_ConvValues`: a keyword's value, the numbers after
it (or after a threshold: ``10以上，睡前7到8``) before the next keyword in the same turn, the numbers of
the answer to a doctor's question naming the kind without a value, a number written with a unit of that
kind (``瘦了4斤``: a weight change of 2 kg), a number inside the range an approximate value opens from its
number (``6点多`` holds 6.5, ``七八`` 7.5, ``5到6`` 5.5; not ``7左右``, whose number is said, nor for a record
range such as ``4.8～12``, whose ends must be said), the window of an approximate value when the number is
said; plain 血糖 and a glucose of known time count for each other). When the conversation gives no value of the kind,
or the kind is plain 血糖 (a
low or a bedtime reading is often a bare number), a number said anywhere in it is fine too;
when it gives one, a number said only elsewhere (the post-meal value written as fasting) is a
``value_error``, the reason naming where the number comes from. A value the record places now (今日,
本次, 目前, 最近, 近3个月 ...) that the conversation says only before (去年, 上次, N年前, 诊断时 ...), while
it gives another value of the kind now, is a ``value_error`` (and the reverse); so is a value the record
dates (2024年3月) that the conversation says only at other times while it gives another value of that
date (a date alone may be today's: it is not "before"). The time point of a value is the nearest such
word before it in its sentence; after a next step (后来, 此后) it has none, and values at no time point
are not judged by it. Otherwise ``value_error`` (paired with the conversation's value of that kind when there is one,
else "对话中未提及"). A conversation value of a kind the record does not give at all (height excepted),
and whose number is nowhere in the record, -> ``value_missing`` (once per kind and value).

Units: a value in a wrong unit for its kind or of the size its kind takes in another unit
(:func:`~.quantities.unit_wrong`: creatinine 98 mmol/L, HbA1c 8.1 mmol/mol, eGFR in μmol/L ...), or
written with another unit of its kind than the conversation writes the same number with (150斤 as
150kg) -> ``unit_error``; when the number is the conversation's, not also a ``value_error``.

Durations and the order of events: ``timeline.py``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterator

from consensus_eval.judges.rules.medical_record.conversation import Turn, about_relative
from consensus_eval.judges.rules.medical_record.document import Doc
from consensus_eval.judges.rules.medical_record.findings import Finding
from consensus_eval.judges.rules.medical_record.lexicon import GLUCOSE_KINDS, OPTIONAL_KINDS
from consensus_eval.judges.rules.medical_record.quantities import (
    PAST,
    PRESENT,
    UNIT_KINDS,
    Anchors,
    Measure,
    Value,
    Windows,
    later_values,
    unit_values,
)
from consensus_eval.judges.rules.medical_record.text import Numbers, all_numbers, to_number


def check_numbers(doc: Doc) -> Iterator[Finding]:
    rec = [m for m in doc.rec_measures if not doc.in_family_section(m.start)]
    conv = doc.cv_measures
    conv_numbers = Numbers(all_numbers(doc.cv) + [m.value for m in conv if isinstance(m.value, float)])
    rec_numbers = Numbers(all_numbers(doc.rec))
    rec_values, conv_values = _Values(rec), _Values(conv)
    # conv measures (by index) that a record value of the same kind matches, then those paired with an error
    used = {i for i, c in enumerate(conv) if rec_values.has_same(c)}
    pool = _Candidates(conv, used)
    said_by = _ConvValues(doc, conv)
    rec_anchors = Anchors(doc.rec)
    for r in rec:
        yield from _record_value(doc, r, conv_numbers, conv_values, said_by, pool, rec_anchors)
    yield from _missing_values(doc, rec, conv, used, rec_numbers)


def _record_value(doc: Doc, r: Measure, conv_numbers: Numbers, conv_values: _Values, said_by: _ConvValues,
                  pool: _Candidates, rec_anchors: Anchors) -> Iterator[Finding]:
    """The unit and value errors of the record's value ``r`` against the conversation."""

    def said(v: float) -> bool:
        return conv_numbers.has_close(v, 0.051)

    span = ("record", r.start, r.end)
    unit_said = said_by.unit_said(r)
    if unit_said is not None:
        yield Finding("unit_error", doc.rq(r.start, r.end),
                      f"对话中{r.label}为{r.num}{unit_said}，病历记为{r.num}{r.unit}", span)
    elif r.unit_bad:
        yield Finding("unit_error", doc.rq(r.start, r.end), f"{r.label}{r.num}的单位错误", span)
    if r.threshold:
        return
    if (r.unit_bad or unit_said is not None) and said(to_number(r.num) or -1.0):
        return  # the conversation's number with a wrong unit: one error, not also a value error
    values = r.value if isinstance(r.value, tuple) else (r.value,)
    # said somewhere: for a kind the conversation gives values of, said as one of them
    if conv_values.has_same(r) or said_by.holds(r) or (all(said(v) for v in values) and (
            not said_by.pinned(r.kind) or said_by.accepts(r))):
        yield from _other_time(doc, r, said_by, rec_anchors, span)
        return
    best = pool.take(r)
    if best is not None:
        reason = f"对话中{best.label}为{best.num}，病历记为{r.num}"
        elsewhere = said_by.measure_with(r.value)
        if elsewhere is not None and elsewhere.kind != r.kind:
            reason += f"（{r.num}为对话中{elsewhere.label}的值）"
    else:
        reason = f"对话中未提及{r.label}{r.num}"
    yield Finding("value_error", doc.rq(r.start, r.end), reason, span)


def _other_time(doc: Doc, r: Measure, said_by: _ConvValues, rec_anchors: Anchors,
                span: tuple[str, int, int]) -> Iterator[Finding]:
    """A value error when the record's value ``r`` is the conversation's, but of another time point than the
    record says."""
    when = rec_anchors.at(r.end, doc.rec_sentences.start(r.start))
    now = said_by.other_time(r, when)
    if now is None:
        return
    if when is not None and when.startswith("date:"):
        y, _, mo = when[5:].partition("-")
        date = f"{y}年" + (f"{mo}月" if mo != "0" else "")
        reason = f"对话中{date}{now.label}为{now.num}，病历记为{r.num}（{r.num}为对话中其他时间的值）"
    else:
        where, other = ("本次", "此前") if when == PRESENT else ("此前", "本次")
        reason = f"对话中{where}{now.label}为{now.num}，病历记为{r.num}（{r.num}为对话中{other}的值）"
    yield Finding("value_error", doc.rq(r.start, r.end), reason, span)


def _missing_values(doc: Doc, rec: list[Measure], conv: list[Measure], used: set[int],
                    rec_numbers: Numbers) -> Iterator[Finding]:
    """The conversation's values of a kind the record gives no value of, and whose number it does not hold."""
    rec_kinds = {r.kind for r in rec}
    reported: set[tuple[str, float | tuple[float, float]]] = set()
    for i, c in enumerate(conv):
        if c.approx or c.threshold or i in used or c.kind in OPTIONAL_KINDS or c.kind in rec_kinds:
            continue
        if c.kind in GLUCOSE_KINDS and ("glucose" in rec_kinds or (c.kind == "glucose" and rec_kinds & GLUCOSE_KINDS)):
            continue
        values = c.value if isinstance(c.value, tuple) else (c.value,)
        if all(rec_numbers.has_close(v, 0.051) for v in values) or (c.kind, c.value) in reported:
            continue
        reported.add((c.kind, c.value))
        yield Finding("value_missing", doc.cq(c.start, c.end), f"对话中{c.label}为{c.num}，病历未记录",
                      ("conversation", c.start, c.end))


def _compatible(kind: str) -> tuple[str, ...]:
    """The conversation's kinds whose values a record value of ``kind`` may repeat: its own; for a glucose
    reading of a known time (空腹/餐后/随机), plain 血糖 too; for plain 血糖, every glucose kind."""
    if kind == "glucose":
        return tuple(sorted(GLUCOSE_KINDS))
    if kind in GLUCOSE_KINDS:
        return kind, "glucose"
    return (kind,)


def _key(value: float | tuple[float, float]) -> float | tuple[float, float]:
    return (round(value[0], 2), round(value[1], 2)) if isinstance(value, tuple) else round(value, 2)


def _about(v: float) -> tuple[float, float]:
    d = 0.5 if v < 20 else 0.03 * v
    return v - d, v + d


class _ConvValues:
    """What the conversation says about each kind of measurement, to judge a record value against it.

    - a kind is *pinned* when the conversation gives a value of it (a keyword's value, not a target or
      threshold, not a relative's): a record value of that kind must then be one of the conversation's
      values of it, not just a number said somewhere else (the post-meal value written as fasting);
    - the values of a kind are its keywords' values and the numbers written after one of them before the
      next keyword in the same turn (``糖化上次7.8，这次8.1``); an approximate one (``9左右``, ``7点多``,
      ``5到6``) stands for its window (:func:`~.quantities.approx_window`), and an approximate record
      value matches a value in its own window;
    - each value has a time point: the nearest ``今天/本次/目前 ...`` (now) or ``去年/上次/N年前/诊断时 ...``
      (before) earlier in its sentence, if any.
    """

    def __init__(self, doc: Doc, conv: list[Measure]) -> None:
        sentences = doc.cv_sentences
        anchors = Anchors(doc.cv)
        keywords = doc.cv_keywords
        kw_starts = [start for start, _ in keywords]
        self.kinds_pinned: set[str] = set()
        exact: dict[str, list[float]] = {}
        windows: dict[str, list[tuple[float, float]]] = {}
        #: windows that open a range from the number said (7点多, 10多, 5到6, 七八), not those around it (7左右)
        self.open_windows: dict[str, list[tuple[float, float]]] = {}
        self.when: dict[tuple[str, float | tuple[float, float]], set[str | None]] = {}
        self.first_at: dict[tuple[str, str], list[Measure]] = {}  # (kind, time point) -> 2 values at most
        self.by_value: dict[float | tuple[float, float], Measure] = {}
        relative: dict[tuple[int, int], bool] = {}
        for m in conv:
            ti = doc.turn_at(m.start)
            turn = doc.turns[ti] if ti is not None else None
            turn_start = turn.start if turn else 0
            if m.threshold:  # 空腹经常在10以上，睡前7到8: not a value, but what follows may be
                self._later(doc, m, turn, kw_starts, exact, windows)
                continue
            when = anchors.at(m.end, max(sentences.start(m.start), turn_start))
            clause = doc.cv_clauses.bounds(m.start)
            if clause not in relative:
                relative[clause] = about_relative(doc.cv[clause[0]:clause[1]], turn.role if turn else "unknown") is True
            if not relative[clause]:
                self.kinds_pinned.add(m.kind)
            if isinstance(m.value, tuple):
                for part, v in zip(("bp.s", "bp.d"), m.value, strict=True):
                    exact.setdefault(part, []).append(v)
                    if m.approx:
                        windows.setdefault(part, []).append(_about(v))
            else:
                exact.setdefault(m.kind, []).append(m.value)
                if m.window is not None:
                    windows.setdefault(m.kind, []).append(m.window)
                    if m.window[0] == m.value:
                        self.open_windows.setdefault(m.kind, []).append(m.window)
            self.when.setdefault((m.kind, _key(m.value)), set()).add(when)
            self.by_value.setdefault(_key(m.value), m)
            self._at(m, when)
            sentence_end = sentences.stop(m.end)
            for later in self._later(doc, m, turn, kw_starts, exact, windows):
                later_when = anchors.at(later.start, max(sentences.start(later.start), turn_start))
                self.when.setdefault((m.kind, _key(later.value)), set()).add(later_when)
                if later.start < sentence_end:  # 糖化上次7.8，这次8.1: 8.1 is this visit's
                    self._at(Measure(m.kind, later.value, later.start, later.end, later.num, False, False), later_when)
        # a doctor's question naming a kind without a value: the numbers of the answer are of that kind
        # (医生：空腹血糖现在多少？ 患者：6.5左右。)
        asked = {m.start for m in conv}
        for ti, turn in enumerate(doc.turns[:-1]):
            answer = doc.turns[ti + 1]
            if turn.role == "doctor" and answer.role != "doctor" and doc.question_before(ti + 1):
                first, last = bisect_left(kw_starts, turn.start), bisect_left(kw_starts, turn.end)
                kinds = {kind for start, kind in keywords[first:last] if start not in asked}
                if not kinds:
                    continue
                k = bisect_right(kw_starts, answer.start - 1)
                hi = min(kw_starts[k] if k < len(kw_starts) else answer.end, answer.end)
                for later in later_values(doc.cv, answer.start, hi):
                    for kind in kinds:
                        exact.setdefault(kind, []).append(later.value)
                        if later.window is not None:
                            windows.setdefault(kind, []).append(later.window)
                            if later.window[0] == later.value:
                                self.open_windows.setdefault(kind, []).append(later.window)
        # the units the conversation writes each (kind, number as written) with
        self.units: dict[tuple[str, float], set[str]] = {}
        for m in conv:
            raw = to_number(m.num)
            if m.unit and raw is not None and not m.unit_bad:
                self.units.setdefault((m.kind, round(raw, 2)), set()).add(m.unit)
        for u in unit_values(doc.cv):  # 62公斤 without 体重 is a weight still
            exact.setdefault(u.kind, []).append(u.value)
            self.units.setdefault((u.kind, round(u.raw, 2)), set()).add(u.unit)
        self.exact = {k: Numbers(vs) for k, vs in exact.items()}
        self.windows = {k: Windows(ws) for k, ws in windows.items()}
        self.open = {k: Windows(ws) for k, ws in self.open_windows.items()}

    def _later(self, doc: Doc, m: Measure, turn: Turn | None, kw_starts: list[int], exact: dict[str, list[float]],
               windows: dict[str, list[tuple[float, float]]]) -> list[Value]:
        """The numbers after ``m``'s value, up to the next keyword, in the same turn: kept as values of
        ``m``'s kind (blood pressure excepted), and returned."""
        if m.kind == "bp":
            return []
        k = bisect_right(kw_starts, m.end - 1)
        hi = min(kw_starts[k] if k < len(kw_starts) else len(doc.cv), turn.end if turn else len(doc.cv))
        got = later_values(doc.cv, m.end, hi)
        for later in got:
            exact.setdefault(m.kind, []).append(later.value)
            if later.window is not None:
                windows.setdefault(m.kind, []).append(later.window)
                if later.window[0] == later.value:
                    self.open_windows.setdefault(m.kind, []).append(later.window)
        return got

    def _at(self, m: Measure, when: str | None) -> None:
        """Keep ``m`` as a value of its kind at time point ``when`` (two different values at most)."""
        if when is not None:
            firsts = self.first_at.setdefault((m.kind, when), [])
            if len(firsts) < 2 and all(_key(f.value) != _key(m.value) for f in firsts):
                firsts.append(m)

    def unit_said(self, r: Measure) -> str | None:
        """The unit the conversation writes ``r``'s number with for ``r``'s kind, when the record writes it
        with another unit of that kind (``150斤`` written ``150kg``); else None."""
        raw = to_number(r.num)
        if not r.unit or raw is None or r.kind not in UNIT_KINDS.get(r.unit, ()):
            return None
        said = self.units.get((r.kind, round(raw, 2)))
        return None if not said or r.unit in said else "/".join(sorted(said))

    def pinned(self, kind: str) -> bool:
        # plain 血糖 is not pinned: a reading at a time the keyword does not say (a low at night, before
        # bed) is usually given as a bare number
        return kind in self.kinds_pinned and kind != "glucose"

    def _has(self, kind: str, v: float, window: tuple[float, float] | None) -> bool:
        """Whether the conversation gives ``v`` for ``kind``: an equal value, an approximate one whose
        window holds it, or (``v`` approximate) a value in ``v``'s window."""
        tol = _tolerance(kind)
        got, wins = self.exact.get(kind), self.windows.get(kind)
        if got is not None and got.has_close(v, tol):
            return True
        if wins is not None and wins.holds(v, tol):
            return True
        if window is not None and got is not None:
            lo, hi = window
            return got.has_close((lo + hi) / 2, (hi - lo) / 2 + tol)
        return False

    def accepts(self, r: Measure) -> bool:
        """Whether ``r`` repeats a value the conversation gives for its kind or a compatible one (beyond an
        equal keyword value of the same kind, which the caller tries first)."""
        if isinstance(r.value, tuple):
            about = r.approx
            return all(self._has(part, v, _about(v) if about else None)
                       for part, v in zip(("bp.s", "bp.d"), r.value, strict=True))
        return any(self._has(kind, r.value, r.window) for kind in _compatible(r.kind))

    def holds(self, r: Measure) -> bool:
        """Whether the conversation gives ``r``'s value for its kind (or a compatible one) without its number
        being said as written: inside the range an approximate value opens from its number (``6点多`` holds
        6.5, ``10多`` 14, ``七八`` 7.5, ``5到6`` 5.5; not ``7左右``, whose number is said), or converted from
        another unit (``瘦了4斤`` is a weight change of 2 kg). Not for a record range (``4.8～12``): its ends
        are values, each to be said."""
        if r.ranged or isinstance(r.value, tuple):
            return False
        tol = _tolerance(r.kind)
        for kind in _compatible(r.kind):
            got, wins = self.exact.get(kind), self.open.get(kind)
            if (got is not None and got.has_close(r.value, tol)) or (wins is not None and wins.holds(r.value, tol)):
                return True
        return False

    def other_time(self, r: Measure, when: str | None) -> Measure | None:
        """The conversation's value of ``r``'s kind at the record's time point ``when``, when the record's
        value is said only at the other one (this visit's HbA1c written with last year's value)."""
        if when is None:
            return None
        said_when = self.when.get((r.kind, _key(r.value)))
        if not said_when:
            return None
        if when.startswith("date:"):  # the conversation's value of that date is another
            if when in said_when:
                return None
        elif said_when != {PAST if when == PRESENT else PRESENT}:
            return None
        return next((m for m in self.first_at.get((r.kind, when), ()) if _key(m.value) != _key(r.value)), None)

    def measure_with(self, value: float | tuple[float, float]) -> Measure | None:
        """The first conversation measurement of this value, of any kind."""
        return self.by_value.get(_key(value))


def _distance(a: Measure, b: Measure) -> float:
    va = a.value if isinstance(a.value, tuple) else (a.value,)
    vb = b.value if isinstance(b.value, tuple) else (b.value,)
    return sum(abs(x - y) for x, y in zip(va, vb, strict=True)) if len(va) == len(vb) else float("inf")


def _tolerance(kind: str) -> float:
    return 0.051 if kind in ("weight", "height", "weight_change") else 1e-6


class _Values:
    """Measures by kind, to ask whether any has the same value as a given measure of its kind: equal
    pairs (blood pressure; a pair never equals a number), numbers within the kind's tolerance."""

    def __init__(self, ms: list[Measure]) -> None:
        floats: dict[str, list[float]] = {}
        self.pairs: dict[str, set[tuple[float, float]]] = {}
        for m in ms:
            if isinstance(m.value, tuple):
                self.pairs.setdefault(m.kind, set()).add(m.value)
            else:
                floats.setdefault(m.kind, []).append(m.value)
        self.floats = {kind: Numbers(vs) for kind, vs in floats.items()}

    def has_same(self, m: Measure) -> bool:
        if isinstance(m.value, tuple):
            return m.value in self.pairs.get(m.kind, ())
        got = self.floats.get(m.kind)
        return got is not None and got.has_close(m.value, _tolerance(m.kind))


class _Candidates:
    """The conversation's measures a record value error can be paired with, taken one by one.

    ``take(r)`` is what ``min(cands, key=lambda c: _distance(c, r))`` picks from the candidates (the
    unused, non-threshold conversation measures of r's kind; when there are none, those of the other
    glucose kinds if r is a glucose reading (any glucose kind for plain 血糖, plain 血糖 for the others)),
    and marks it used; without scanning them all. ``min`` keeps the first of equal keys, and a NaN key
    (an infinite value against an infinite one) never replaces nor is replaced, so: the candidate of
    least finite distance, the earliest on a tie; if no distance is finite (r infinite, or no
    candidate of r's shape), the earliest candidate. Numbers are found by bisection in each kind's
    values sorted (value, index), unused ones by skip pointers; pairs (blood pressure) by their
    distinct values.
    """

    def __init__(self, conv: list[Measure], used: set[int]) -> None:
        self.conv = conv
        self.used = used
        self.order: dict[str, list[int]] = {}  # kind -> candidate indices in order
        self.first: dict[str, int] = {}        # kind -> position in order before which all are used
        self.left: dict[str, int] = {}         # kind -> candidates not used yet
        self.values: dict[str, list[float]] = {}
        self.indices: dict[str, list[int]] = {}
        self.slot: dict[int, int] = {}         # index -> position in its kind's sorted values
        self.right_free: dict[str, list[int]] = {}  # skip pointers: next free position at or after
        self.left_free: dict[str, list[int]] = {}   # skip pointers (shifted by one): last free at or before
        self.pairs: dict[str, dict[tuple[float, float], deque[int]]] = {}
        floats: dict[str, list[tuple[float, int]]] = {}
        for i, c in enumerate(conv):
            if c.threshold:
                continue
            self.order.setdefault(c.kind, []).append(i)
            if i in used:
                continue
            self.left[c.kind] = self.left.get(c.kind, 0) + 1
            if isinstance(c.value, tuple):
                self.pairs.setdefault(c.kind, {}).setdefault(c.value, deque()).append(i)
            else:
                floats.setdefault(c.kind, []).append((c.value, i))
        for kind, vs in floats.items():
            vs.sort()
            self.values[kind] = [v for v, _ in vs]
            self.indices[kind] = [i for _, i in vs]
            for pos, (_, i) in enumerate(vs):
                self.slot[i] = pos
            self.right_free[kind] = list(range(len(vs) + 1))
            self.left_free[kind] = list(range(len(vs) + 1))
        for kind in self.order:
            self.first[kind] = 0

    def take(self, r: Measure) -> Measure | None:
        if self.left.get(r.kind):
            kinds = [r.kind]
        elif r.kind == "glucose":
            kinds = [k for k in sorted(GLUCOSE_KINDS) if self.left.get(k)]
        elif r.kind in GLUCOSE_KINDS:
            kinds = ["glucose"] if self.left.get("glucose") else []
        else:
            kinds = []
        if not kinds:
            return None
        best: tuple[float, int] | None = None
        for kind in kinds:
            got = self._nearest_pair(kind, r) if isinstance(r.value, tuple) else self._nearest_number(kind, r.value)
            if got is not None and (best is None or got < best):
                best = got
        i = best[1] if best is not None else min(self._first_free(k) for k in kinds)
        self._use(i)
        return self.conv[i]

    # -- the earliest unused candidate of a kind
    def _first_free(self, kind: str) -> int:
        order, k = self.order[kind], self.first[kind]
        while order[k] in self.used:
            k += 1
        self.first[kind] = k
        return order[k]

    def _use(self, i: int) -> None:
        self.used.add(i)
        c = self.conv[i]
        self.left[c.kind] -= 1
        pos = self.slot.get(i)
        if pos is not None:
            self.right_free[c.kind][pos] = pos + 1
            self.left_free[c.kind][pos + 1] = pos

    # -- numbers
    @staticmethod
    def _find(parent: list[int], i: int) -> int:
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:
            parent[i], i = root, parent[i]
        return root

    def _free_at_or_after(self, kind: str, pos: int) -> int:
        """The first unused position >= pos of the kind's sorted values (their count if none)."""
        return self._find(self.right_free[kind], pos)

    def _free_at_or_before(self, kind: str, pos: int) -> int:
        """The last unused position <= pos (-1 if none)."""
        return self._find(self.left_free[kind], pos + 1) - 1

    def _nearest_number(self, kind: str, x: float) -> tuple[float, int] | None:
        """(distance, index) of the unused number of the kind nearest to x, the earliest on a tie; None
        if there are no numbers or no finite distance."""
        values = self.values.get(kind)
        if not values or x != x or x == float("inf"):
            return None
        indices, n = self.indices[kind], len(values)
        found: list[tuple[float, int]] = []
        p = bisect_left(values, x)
        # above x: distances grow with the value; the first unused of a value is its earliest
        pos = self._free_at_or_after(kind, p)
        if pos < n:
            key = abs(values[pos] - x)
            while pos < n and abs(values[pos] - x) == key:
                found.append((key, indices[pos]))
                pos = self._free_at_or_after(kind, bisect_right(values, values[pos]))
        # below x: distances grow as the value falls; the earliest of a value is its first unused
        pos = self._free_at_or_before(kind, p - 1)
        if pos >= 0:
            key = abs(values[pos] - x)
            while pos >= 0 and abs(values[pos] - x) == key:
                lo = bisect_left(values, values[pos])
                found.append((key, indices[self._free_at_or_after(kind, lo)]))
                pos = self._free_at_or_before(kind, lo - 1)
        finite = [f for f in found if f[0] != float("inf")]
        return min(finite) if finite else None

    # -- pairs (blood pressure)
    def _nearest_pair(self, kind: str, r: Measure) -> tuple[float, int] | None:
        groups = self.pairs.get(kind)
        if not groups:
            return None
        best: tuple[float, int] | None = None
        exhausted = []
        for value, idxs in groups.items():
            while idxs and idxs[0] in self.used:
                idxs.popleft()
            if not idxs:
                exhausted.append(value)
                continue
            got = (_distance(self.conv[idxs[0]], r), idxs[0])
            if best is None or got < best:
                best = got
        for value in exhausted:
            del groups[value]
        return best
