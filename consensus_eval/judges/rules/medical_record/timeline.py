"""Times of the record against the conversation (``accuracy.timeline``; check 6 of the package docstring,
durations and order of events).

Durations (年/月/周/天, ``N年前``, ``半年``, ``一年半``, ``去年`` ...; read by ``quantities.py``, gestational ages
such as ``孕28周`` excepted) stand for their window (:attr:`~.quantities.Duration.window`: ``七八年`` 7 to 8
years, ``3年多`` 3 to 4, ``十多年`` 10 to 20). Those of the record whose window meets no window of the same
base (months or days) in the conversation, nor within a tenth one of the other base in days (``半月`` and
``十四五天``, ``1个月`` and ``4周``), -> ``time_error``; skipped when the conversation dates things by calendar year or
month (2019年, 3月份), since then the
record's relative times are computed.

Events: a duration or a calendar date (2019年3月) belongs to the events named around it (:class:`Events`):
a drug (any insulin as one), diabetes, a complication, a comorbidity or a symptom of the rules' lexicon
(``口干``, ``喝水多`` as 多饮 ...), in its clause and the next clauses of its sentence up to the next time;
when these name none, in the clause before; in the conversation, when its own turn names none, in the
doctor's question it answers (``胰岛素打了多久？`` ``2年了``). Not a relative's: no time in a clause about a
relative nor in 家族史, and no event named there (我妈冠心病, 母亲患冠心病) is the patient's. A habit named in the
time's own clause (吸烟20年, 抽了二十年) owns it alone. ``N年后`` and ``每N个月`` are not points in time, nor a
rate's period (一天一包, 每天半包: quantities.py).

- A record duration whose events the conversation times (relative durations of the same base) but
  never with the record's value, nor with a calendar date, -> ``time_error`` even when the value is said
  elsewhere in the conversation (``近1年口干`` where the patient says ``最近半年口干`` and ``去年体检``).
  A duration stands for its window here too (``3年多``: 3 to 4 years ago; ``七八年``: 7 to 8).
- Two events each timed once on both sides (relative times or dates, each side on one axis) whose order
  the record reverses -> one ``time_order_confused`` (the conversation: diabetes 5年前, insulin 2年前; the
  record: 2年前诊断, 5年前开始胰岛素); its two durations are not also time errors.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from consensus_eval.domain.sets import merged_spans
from consensus_eval.judges.rules.medical_record.conversation import KIN, about_relative
from consensus_eval.judges.rules.medical_record.document import Doc
from consensus_eval.judges.rules.medical_record.findings import Finding
from consensus_eval.judges.rules.medical_record.lexicon import (
    COLLOQUIAL_TERMS,
    DIAGNOSES,
    PAST_DISEASES,
    VAGUE_TIME_WORDS,
)
from consensus_eval.judges.rules.medical_record.medication import DrugHit
from consensus_eval.judges.rules.medical_record.quantities import CALENDAR, Duration, Windows
from consensus_eval.judges.rules.medical_record.text import alternation

# ============================================================================ events

def _symptom(std: str) -> bool:
    """Whether a standard term of the colloquial table names a symptom or habit with a time of its own: not
    taking a drug (服药, 注射) nor a high value (血糖升高 is diabetes in a chief complaint and poor control
    in a conversation: the same words, two events)."""
    return std not in {"服药", "注射", "排尿/尿频", "排尿"} and not re.search("血糖|血压|血脂", std)


_SYMPTOMS: dict[str, str] = {
    **{w: std for w, std in COLLOQUIAL_TERMS.items() if _symptom(std)},
    **{std: std for std in COLLOQUIAL_TERMS.values() if _symptom(std)},
}
#: words that place what follows them at another time than a duration before them (a vague time, a
#: time point, a next step): events after them in the sentence are not that duration's
_OTHER_TIME = re.compile(alternation(VAGUE_TIME_WORDS) + r"|后来|此后|之后|随后|然后|目前|现在|今日|今天|本次|此次|"
                         r"这次|近[\d一二两三四五六七八九十半几数]")
_SYMPTOM_RE = re.compile(alternation(_SYMPTOMS))
_DIABETES_RE = re.compile(r"(?P<gdm>妊娠期糖尿病|妊娠糖尿病)|糖尿病(?!肾|足|视网膜|周围|酮|前期|家族)|"
                          r"(?<![A-Za-z])T[12]DM(?![A-Za-z])")
_DISEASES: tuple[tuple[str, re.Pattern[str]], ...] = (
    *((label, re.compile(conv_pattern)) for label, conv_pattern, _ in DIAGNOSES),
    *((label, re.compile(pattern)) for _, label, pattern in PAST_DISEASES),
)


def _drug_key(hit: DrugHit) -> str:
    return "胰岛素" if hit.insulin else hit.generic


#: a habit named by its verb right before a duration (抽了二十年, 吸了10多年): smoking, though 烟 is not said
_SMOKED = re.compile(r"(?:抽|吸)(?!血|搐|筋|氧|痰|收|入|引|脂)(?:了|过|有)?\s*(?:\d+|[一二两三四五六七八九十几半]+)"
                     r"\s*(?:多|余|来)?\s*(?:个)?(?:年|月)")
#: the habits, whose durations are theirs alone (see :func:`_with_events`)
_HABITS = frozenset({"吸烟", "饮酒"})


class Events:
    """The events named in one text (position, key), found once; :meth:`keys` gives those in a range,
    :meth:`other_time` where the next word placing things at another time is. ``skip``: the ranges whose events
    are not the patient's (a relative's clauses, 家族史), left out."""

    def __init__(self, text: str, drugs: list[DrugHit], skip: list[tuple[int, int]] | None = None) -> None:
        self.other_times = [m.start() for m in _OTHER_TIME.finditer(text)]
        found: list[tuple[int, str]] = [(h.start, _drug_key(h)) for h in drugs]
        for m in _DIABETES_RE.finditer(text):
            found.append((m.start(), "妊娠期糖尿病" if m.group("gdm") else "糖尿病"))
        for label, rx in _DISEASES:
            found += [(m.start(), label) for m in rx.finditer(text)]
        found += [(m.start(), _SYMPTOMS[m.group()]) for m in _SYMPTOM_RE.finditer(text)]
        found += [(m.start(), "吸烟") for m in _SMOKED.finditer(text)]
        if skip:
            skip_starts = [a for a, _ in skip]  # sorted, disjoint
            found = [(p, k) for p, k in found
                     if not ((i := bisect_right(skip_starts, p) - 1) >= 0 and p < skip[i][1])]
        found.sort()
        self.starts = [p for p, _ in found]
        self.names = [k for _, k in found]
        self._cache: dict[tuple[int, int], frozenset[str]] = {}

    def other_time(self, lo: int, hi: int) -> int | None:
        """The first position in ``[lo, hi)`` of a word placing things at another time, if any."""
        i = bisect_left(self.other_times, lo)
        return self.other_times[i] if i < len(self.other_times) and self.other_times[i] < hi else None

    def keys(self, lo: int, hi: int) -> frozenset[str]:
        got = self._cache.get((lo, hi))
        if got is None:
            got = self._cache[lo, hi] = frozenset(self.names[bisect_left(self.starts, lo):bisect_left(self.starts, hi)])
        return got


# ============================================================================ times of events

_DATE = re.compile(r"(?<!\d)(?P<y>(?:19|20)\d\d)\s*年(?:\s*(?P<m>1[0-2]|0?[1-9])\s*月)?")
_NOT_A_POINT_AFTER = re.compile(r"\s*(?:后|以后|之后)")


@dataclass(frozen=True)
class Time:
    """A time of events: a relative duration (months ago, or days for the day base) or a calendar date."""

    start: int
    end: int
    text: str
    axis: str                 # "ago" (relative) or "date"
    base: str                 # durations: "m" or "d"; dates: "date"
    value: float              # durations: as read (months or days); dates: months since year 0
    low: float                # the window the time stands for, on its axis, as points (later is larger)
    high: float
    events: frozenset[str] = frozenset()


def _times(text: str, found: list[Duration]) -> list[Time]:
    """The durations with a value or a range (``found``: the durations of ``text``) and the calendar dates of
    ``text``, in order."""
    out = []
    for d in found:
        if d.window is None or _NOT_A_POINT_AFTER.match(text, d.end) or text[max(0, d.start - 1):d.start] == "每":
            continue
        per_month = 30 if d.base == "d" else 1
        low, high = d.window[0] / per_month, d.window[1] / per_month
        # ago: a larger value is earlier; "3年多" is 3 to 4 years ago, "七八年" 7 to 8
        value = d.value if d.value is not None else d.window[0]
        out.append(Time(d.start, d.end, d.text, "ago", d.base, value, -high, -low))
    for m in _DATE.finditer(text):
        y = int(m.group("y")) * 12
        if m.group("m"):
            mo = y + int(m.group("m")) - 1
            out.append(Time(m.start(), m.end(), m.group(), "date", "date", mo, mo, mo))
        else:
            out.append(Time(m.start(), m.end(), m.group(), "date", "date", y, y, y + 11))
    return sorted(out, key=lambda t: t.start)


def _with_events(doc: Doc, source: str, times: list[Time], events: Events) -> list[Time]:
    """Each time with the events named around it (see the module docstring). A time whose own clause names a
    habit (吸烟20年, 抽了二十年, 喝酒十年) is that habit's only: not a disease's named in the next clauses."""
    text = doc.rec if source == "record" else doc.cv
    clauses = doc.rec_clauses if source == "record" else doc.cv_clauses
    sentences = doc.rec_sentences if source == "record" else doc.cv_sentences
    out = []
    for i, t in enumerate(times):
        lo, hi = 0, len(text)
        ti = None
        if source == "conversation":
            ti = doc.turn_at(t.start)
            if ti is not None:
                lo, hi = doc.turns[ti].start, doc.turns[ti].end
        a, b = clauses.bounds(t.start, lo, hi)
        sa, sb = sentences.bounds(t.start, lo, hi)
        end = sb
        if i + 1 < len(times) and times[i + 1].start < sb:
            nxt = clauses.start(times[i + 1].start, lo)
            end = b if nxt <= a else nxt
        other = events.other_time(b, end)  # later clauses: up to one at another time
        if other is not None:
            end = max(b, clauses.start(other, b))
        own = events.keys(a, b) & _HABITS
        keys = own or events.keys(a, end)
        if not keys and a > sa:  # the clause before, unless it has a time of its own
            pa = clauses.start(a - 1, sa)
            if not (i > 0 and times[i - 1].start >= pa) and events.other_time(pa, a) is None:
                keys = events.keys(pa, a)
        if not keys and ti is not None and doc.turns[ti].role != "doctor" and doc.question_before(ti):
            q = doc.turns[ti - 1]
            keys = events.keys(q.start, q.end)
        out.append(Time(t.start, t.end, t.text, t.axis, t.base, t.value, t.low, t.high, keys))
    return out


# ============================================================================ the check


def check_durations(doc: Doc) -> Iterator[Finding]:
    fam = doc.body("家族史")
    flagged: set[int] = set()
    for f in _durations_said_nowhere(doc):
        flagged.add(int(f.where[1]))
        yield f
    rec_events = Events(doc.rec, [d.hit for d in doc.rec_drug_mentions if not d.negated], _not_patients(doc, "record"))
    conv_events = Events(doc.cv, [c.hit for c in doc.conv_drugs], _not_patients(doc, "conversation"))
    rec_times = [t for t in _times(doc.rec, doc.rec_durations) if not (fam and fam[0] <= t.start < fam[1])]
    rec = _with_events(doc, "record", rec_times, rec_events)
    conv_times = [t for t in _times(doc.cv, doc.cv_durations) if not _relatives(doc, t)]
    conv = _with_events(doc, "conversation", conv_times, conv_events)
    ordered = list(_order_reversed(doc, rec, conv))
    done = {s for f in ordered for s in f.where[3:]}
    yield from ordered
    yield from _event_time_errors(doc, [t for t in rec if t.start not in done and t.start not in flagged], conv)


_DAYS = {"m": 30, "d": 1}


def _durations_said_nowhere(doc: Doc) -> Iterator[Finding]:
    """Record durations that match no duration of their base in the conversation (no calendar dates in it):
    a duration stands for its window (a value, a range, an approximate value up to the next unit), and two
    match when their windows meet; those of the other base are compared in days, within a tenth (半月 and
    十四五天, 1个月 and 4周)."""
    if CALENDAR.search(doc.cv):
        return
    conv: dict[str, list[Duration]] = {}  # base -> the conversation's durations with a value or a range
    for d in doc.cv_durations:
        if d.window is not None:
            conv.setdefault(d.base, []).append(d)
    windows = {base: Windows([c.window for c in same if c.window is not None]) for base, same in conv.items()}
    # in days, for a duration of the other base (半月 and 十四五天, 1个月 and 4周): a tenth either way
    days = {base: Windows([(c.window[0] * _DAYS[base], c.window[1] * _DAYS[base]) for c in same
                            if c.window is not None]) for base, same in conv.items()}
    said = {base: "、".join(dict.fromkeys(c.text for c in same)) for base, same in conv.items()}
    fam = doc.body("家族史")
    for r in doc.rec_durations:
        if r.window is None or (fam and fam[0] <= r.start < fam[1]):
            continue
        if r.base not in conv or windows[r.base].meets(*r.window):
            continue
        low, high = r.window[0] * _DAYS[r.base], r.window[1] * _DAYS[r.base]
        if any(days[b].meets(low * 0.9, high * 1.1) for b in conv if b != r.base):
            continue
        a, b = doc.rec_clause(r.start)
        yield Finding("time_error", doc.rq(a, b),
                      f"病历时间“{doc.rq(r.start, r.end)}”与对话不符（对话中的时间：{said[r.base]}）",
                      ("record", r.start, r.end))


def _not_patients(doc: Doc, source: str) -> list[tuple[int, int]]:
    """The ranges whose events are a relative's, in order: the record's 家族史 and its clauses naming a relative
    (母亲患冠心病); the conversation's clauses about a relative (我妈冠心病, 父亲有高血压)."""
    out: list[tuple[int, int]] = []
    if source == "record":
        fam = doc.body("家族史")
        for m in KIN.finditer(doc.rec):
            if fam and fam[0] <= m.start() < fam[1]:
                continue
            a, b = doc.rec_clauses.bounds(m.start())
            if not out or out[-1][1] <= a:
                out.append((a, b))
        if fam:
            out.append(fam)
        return merged_spans(out)
    for turn in doc.turns:
        for m in KIN.finditer(doc.cv, turn.start, turn.end):
            a, b = doc.cv_clauses.bounds(m.start(), turn.start, turn.end)
            if (not out or out[-1][1] <= a) and about_relative(doc.cv[a:b], turn.role) is True:
                out.append((a, b))
    return out


def _relatives(doc: Doc, t: Time) -> bool:
    """Whether a conversation time is in a clause about a relative (我妈糖尿病20年)."""
    ti = doc.turn_at(t.start)
    if ti is None:
        return False
    turn = doc.turns[ti]
    a, b = doc.cv_clauses.bounds(t.start, turn.start, turn.end)
    return about_relative(doc.cv[a:b], turn.role) is True


class _EventTimes:
    """The conversation's times of each event, to ask in O(log n) whether a record duration matches one:
    per event, whether a calendar date times it, and per base its durations' windows."""

    def __init__(self, conv: list[Time]) -> None:
        self.dated: set[str] = set()
        windows: dict[tuple[str, str], list[tuple[float, float]]] = {}
        self.said: dict[tuple[str, str], list[str]] = {}  # the first texts, for the reason
        for c in conv:
            for k in c.events:
                if c.axis == "date":
                    self.dated.add(k)
                    continue
                windows.setdefault((k, c.base), []).append((c.low, c.high))
                texts = self.said.setdefault((k, c.base), [])
                if len(texts) < 3 and c.text not in texts:
                    texts.append(c.text)
        self.windows = {key: Windows(ws) for key, ws in windows.items()}

    def judge(self, t: Time) -> tuple[list[str], list[str]] | None:
        """For a record duration: (events the conversation times otherwise, how it times them), or None
        when it matches one of their times, an event is dated by the calendar, or none is timed."""
        if t.events & self.dated:
            return None  # an event dated by the calendar: the record's relative time is computed
        timed = [k for k in sorted(t.events) if (k, t.base) in self.windows]
        if not timed:
            return None
        for k in timed:
            if self.windows[k, t.base].meets(t.low, t.high):
                return None
        return timed, list(dict.fromkeys(x for k in timed for x in self.said[k, t.base]))


def _event_time_errors(doc: Doc, rec: list[Time], conv: list[Time]) -> Iterator[Finding]:
    """A record duration whose events the conversation times, never with the record's value."""
    times = _EventTimes(conv)
    for t in rec:
        if t.axis != "ago" or not t.events:
            continue
        got = times.judge(t)
        if got is None:
            continue
        named, said = got
        a, b = doc.rec_clause(t.start)
        yield Finding("time_error", doc.rq(a, b), f"对话中{'、'.join(named)}的时间为{'、'.join(said)}，"
                                                  f"病历记为“{t.text}”", ("record", t.start, t.end))


def _single_times(times: list[Time]) -> dict[str, dict[str, Time]]:
    """event -> axis -> its one time on that axis (events timed twice differently on an axis left out)."""
    seen: dict[str, dict[str, list[Time]]] = {}
    for t in times:
        for k in t.events:
            seen.setdefault(k, {}).setdefault(t.axis, []).append(t)
    out: dict[str, dict[str, Time]] = {}
    for k, axes in seen.items():
        for axis, ts in axes.items():
            if len({(x.low, x.high) for x in ts}) == 1:
                out.setdefault(k, {})[axis] = ts[0]
    return out


def _before(a: Time, b: Time) -> bool | None:
    """True if ``a`` is strictly earlier than ``b`` (same axis), False if strictly later, None if unclear."""
    if a.high < b.low - 1e-6:
        return True
    if b.high < a.low - 1e-6:
        return False
    return None


def _order_reversed(doc: Doc, rec: list[Time], conv: list[Time]) -> Iterator[Finding]:
    """Two events each timed once on both sides, in the opposite order in the record."""
    rec_at, conv_at = _single_times(rec), _single_times(conv)
    common = sorted(set(rec_at) & set(conv_at))
    used: set[int] = set()
    for i, e1 in enumerate(common):
        for e2 in common[i + 1:]:
            r_order = _pair_order(rec_at[e1], rec_at[e2])
            c_order = _pair_order(conv_at[e1], conv_at[e2])
            if r_order is None or c_order is None or r_order[0] == c_order[0]:
                continue
            (_, r1, r2), (_, c1, c2) = r_order, c_order
            if r1.start in used or r2.start in used:
                continue
            used |= {r1.start, r2.start}
            first = min(r1, r2, key=lambda t: t.start)
            a, b = doc.rec_clause(first.start)
            said_first, said_then = (e1, e2) if c_order[0] else (e2, e1)
            c_first, c_then = (c1, c2) if c_order[0] else (c2, c1)
            yield Finding("time_order_confused", doc.rq(a, b),
                          f"对话中{said_first}（{c_first.text}）在{said_then}（{c_then.text}）之前，病历记为"
                          f"{e1}“{r1.text}”、{e2}“{r2.text}”，先后颠倒", ("record", first.start, first.end,
                                                                      r1.start, r2.start))


def _pair_order(a: dict[str, Time], b: dict[str, Time]) -> tuple[bool, Time, Time] | None:
    """(whether a's event is earlier, a's time, b's time) on the first axis both are timed on, if clear."""
    for axis in ("ago", "date"):
        if axis in a and axis in b and a[axis].start != b[axis].start:
            order = _before(a[axis], b[axis])
            if order is not None:
                return order, a[axis], b[axis]
    return None
