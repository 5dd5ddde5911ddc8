"""Where a judge's quoted evidence is in the case: grounding every deduction in the text it quotes.

A :class:`Grounding` says how a quote was found (``exact``, ``normalised``: after folding whitespace,
full-width/half-width forms and punctuation; ``fuzzy``: the best approximate alignment, with its
score; ``not_found``; ``empty``: the judge quoted nothing) and every place it was found
(:class:`Span`: characters ``[start, end)`` of the record or of the conversation as the prompt shows it,
and the record section the span falls in).

**The texts searched** are those the judge was shown: the record as given, and the conversation as
the prompt renders it (``Case.conversation_as_text(rubric.roles)``: one ``医生：...`` line per turn), so
that a quote of what the record omits (``患者：我父亲有糖尿病``) is found in the conversation.

**The search**, for each text, stops at the first level that finds the quote:

1. ``exact``: every occurrence of the evidence as written (stripped of surrounding blanks);
2. ``normalised``: every occurrence after both texts are folded by :func:`normalise`: NFKC
   (full-width ``ＡＢ１：`` to half-width, ``…`` to ``...``), lower case, whitespace dropped, quote marks
   and brackets of every kind dropped, ``，,、；;`` folded to ``,``, ``。.．`` to ``.``, ``：`` to ``:``, dashes and
   tildes to ``-``. Positions map back to the original text character for character (a span is
   ``text[start:end]`` of the original, from the first to the last original character of the match);
3. ``fuzzy``: rapidfuzz's ``fuzz.partial_ratio_alignment`` of the normalised quote against the
   normalised text (the best window of the quote's length, scored by normalised Indel similarity,
   0-100), kept when its score is at least :data:`FUZZY_THRESHOLD` **and** every number in the quote
   (``7.8``, ``152/90`` as ``152`` and ``90``) occurs in the matched window (a quote that changes a
   value is a wrong quote, not a near one). A text shorter than the quote is compared whole
   (``fuzz.ratio``). Quotes shorter than :data:`MIN_FUZZY_CHARS` normalised characters are never
   fuzzy: one to three characters are found exactly (or normalised) or not at all.

The level is the best over the record and the conversation; spans are those of that level in both
(fuzzy: the best window in each text that passes). Where a quote occurs more than once, every
occurrence is a span.

**Quotes in parts.** When the whole quote is not found exactly or normalised, a quote that names
several snippets is grounded part by part: parts are the quoted segments (``“...”``, ``「...」``,
``"..."``) when it has any (``病历写“血糖高”`` -> ``血糖高``), else the pieces between elisions
(``…``, ``...``, ``……``, ``⋯``) and separators (``；``, ``;``, `` / ``, ``/``). Parts shorter than two
normalised characters are ignored. The result's kind is the worst kind of its parts (exact <
normalised < fuzzy < not_found), its score the lowest part's, its spans those of all parts. If that
finds nothing, the whole quote is tried fuzzily.

**Threshold.** :data:`FUZZY_THRESHOLD` = 85, chosen on real quotes: docs/design/grounding.md.

**Bounded per quote** (docs/limits.md, 'Quotes': a 10 MB quote in a judge's reply stalled a rebuild at 1.5 GB). A quote
longer than :data:`MAX_QUOTE_CHARS` is ``not_found`` unsearched (no case quoted is that long); one whose
normalised form is longer than both texts' is found in neither, exactly or normalised; a fuzzy search is made
only for a quote of at most :data:`MAX_FUZZY_CHARS` normalised characters, and only in a text it could reach
the threshold in (a quote more than 1.36 times a text's length cannot); a quote names at most
:data:`MAX_PARTS` parts (one in more is searched whole). So a quote costs at most a few linear scans of the
case and a bounded number of bounded alignments, however long it is.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from jinja2 import FileSystemLoader, StrictUndefined
from jinja2.sandbox import SandboxedEnvironment
from rapidfuzz import fuzz

from consensus_eval.domain.construct import slots_maker
from consensus_eval.domain.prompts import prompts_root
from consensus_eval.domain.sections import SectionIndex, Sections

GroundingKind = Literal["exact", "normalised", "fuzzy", "not_found", "empty"]
Source = Literal["record", "conversation"]

#: lowest fuzzy similarity (0-100, rapidfuzz's partial ratio on normalised text) called grounded
FUZZY_THRESHOLD = 85.0
#: quotes shorter than this (normalised characters) are found exactly or normalised, never fuzzily
MIN_FUZZY_CHARS = 4
#: parts of a quote in parts shorter than this (normalised characters) are ignored
MIN_PART_CHARS = 2
#: the longest quote searched (characters); a longer one is not found, unsearched
MAX_QUOTE_CHARS = 100_000
#: the longest quote (normalised characters) searched fuzzily; a longer one is found exactly or normalised only
MAX_FUZZY_CHARS = 5_000
#: the most parts a quote in parts is searched as; a quote in more is searched whole
MAX_PARTS = 50
#: a quote more than this many times a text's length cannot reach :data:`FUZZY_THRESHOLD` against it
#: (Indel similarity is at most 2 x shorter / (shorter + longer): 200 / 85 - 1 = 1.35...)
_FUZZY_REACH = 200 / FUZZY_THRESHOLD - 1 + 1e-9


@dataclass(slots=True, frozen=True)
class Span:
    """One place a quote was found: ``text[start:end]`` of ``source``.

    ``section`` is the record section (主诉, 现病史, ...) the span starts in, None outside any
    section or in the conversation.
    """

    source: Source
    start: int
    end: int
    section: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "start": self.start, "end": self.end, "section": self.section}


@dataclass(slots=True, frozen=True)
class Grounding:
    """How one deduction's evidence was found in the case (module docstring): a plain read model, made by the
    search from its own checked values (a rebuild grounds every quote of a run).

    ``score`` is the fuzzy alignment's similarity in [0, 100] (100 for exact and normalised matches,
    None for not_found and empty); ``spans`` lists the occurrences, the first :data:`MAX_SPANS` of them
    (empty when not found), ``more_spans`` counts the rest.
    """

    kind: GroundingKind
    score: float | None = None
    spans: tuple[Span, ...] = ()
    #: occurrences found beyond the first :data:`MAX_SPANS` (a quote repeated all over a case), counted not kept
    more_spans: int = 0

    @property
    def grounded(self) -> bool:
        """True when the quote was found (exactly, normalised or fuzzily above the threshold)."""
        return self.kind in ("exact", "normalised", "fuzzy")

    def to_dict(self, *, more_spans: bool = True) -> dict[str, Any]:
        """Its fields as JSON values (``more_spans`` left out when asked to)."""
        out: dict[str, Any] = {"kind": self.kind, "score": self.score, "spans": [s.to_dict() for s in self.spans]}
        if more_spans:
            out["more_spans"] = self.more_spans
        return out


#: the most occurrences of one quote a grounding keeps as spans; the rest are counted (``more_spans``), so
#: a sentence repeated n times, quoted by n deductions, costs n x MAX_SPANS, not n x n
MAX_SPANS = 10


#: spans and groundings made from their fields' values, slot by slot (a rebuild makes one of each for most quotes)
_span, _grounding = slots_maker(Span), slots_maker(Grounding)


def _made(kind: GroundingKind, score: float | None = None, spans: list[Span] | None = None,
          more: int = 0) -> Grounding:
    """A :class:`Grounding` from the search's own values (a float score, a tuple of spans)."""
    return _grounding(kind, None if score is None else float(score), () if spans is None else tuple(spans), more)


_RANK: dict[str, int] = {"exact": 0, "normalised": 1, "fuzzy": 2, "not_found": 3, "empty": 4}

# -------------------------------------------------------------------------------- normalisation

_DROP = set(" \t\r\n\u3000\u00a0\u200b\ufeff"
            "\"'`\u201c\u201d\u2018\u2019\u300c\u300d\u300e\u300f\u00ab\u00bb\u2039\u203a"
            "()[]{}<>\u3010\u3011\u300a\u300b\u3008\u3009\u3014\u3015\uff08\uff09*_#")
_FOLD = {**dict.fromkeys(",\uff0c\u3001;\uff1b", ","), **dict.fromkeys(".\u3002\uff0e\uff61", "."),
         **dict.fromkeys(":\uff1a", ":"),
         **dict.fromkeys("-\u2010\u2011\u2012\u2013\u2014\u2015\u2212~\uff5e\u301c", "-")}


def _fold(c: str) -> str:
    """What one original character becomes in the normalised text ("" when dropped)."""
    if c in _DROP or c.isspace():
        return ""
    f = _FOLD.get(c)
    if f is not None:
        return f
    out = []
    for x in unicodedata.normalize("NFKC", c).lower():
        if x in _DROP or x.isspace():
            continue
        out.append(_FOLD.get(x, x))
    return "".join(out)


class _FoldTable(dict[int, str]):
    """``str.translate`` table of :func:`_fold`, filled as characters are met (a text is folded at C speed)."""

    def __missing__(self, key: int) -> str:
        value = self[key] = _fold(chr(key))
        return value


_TABLE = _FoldTable()


class Normalised:
    """A text folded by :func:`normalise`, with the map back: normalised character ``i`` came from
    original characters ``[origin[i], origin_end[i])`` (the map is built on first use: an exact match
    never needs it). ``folded``: ``normalise(original)`` when already made (:func:`normalise_all`)."""

    __slots__ = ("_origin", "original", "text")

    def __init__(self, original: str, folded: str | None = None) -> None:
        self.original = original
        self.text = original.translate(_TABLE) if folded is None else folded
        self._origin: Any = None   # an array of original positions, by normalised position

    def _map(self) -> Any:
        if self._origin is None:
            sizes = _fold_sizes(self.original)   # what each original character became (its length)
            if sizes is not None:
                self._origin = np.repeat(np.arange(len(sizes)), sizes)
            else:
                table = _TABLE
                lengths = [len(table[ord(c)]) for c in self.original]
                self._origin = array("l", [i for i, k in enumerate(lengths) if k for _ in range(k)])
        return self._origin

    def span(self, a: int, b: int) -> tuple[int, int]:
        """The original ``[start, end)`` of normalised ``[a, b)`` (``b > a``): from the original
        character that gave normalised ``a`` to the one that gave normalised ``b - 1``, inclusive."""
        origin = self._map()
        return int(origin[a]), int(origin[b - 1]) + 1


#: per code point of the basic plane, the length of what :func:`_fold` makes of it (-1 while not yet looked up), and
#: where its characters start in ``_FOLD_CODES[0]`` (the characters of every fold looked up, end to end)
_FOLD_SIZE = np.full(0x10000, -1, dtype=np.int8)
_FOLD_START = np.zeros(0x10000, dtype=np.int64)
_FOLD_CODES: list[Any] = [np.zeros(0, dtype=np.uint32)]
_FOLD_LOCK = threading.Lock()


def _codes(text: str) -> Any:
    """``text``'s code points as an array, None when one is outside the basic plane or a lone surrogate."""
    try:
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    except UnicodeEncodeError:
        return None
    return codes if not len(codes) or codes.max() < 0x10000 else None


def _fold_sizes(text: str) -> Any:
    """What :func:`_fold` makes of each character of ``text``: its length, as an array (None: see :func:`_codes`)."""
    codes = _codes(text)
    return None if codes is None else _sizes_of(codes)


def _sizes_of(codes: Any) -> Any:
    sizes = _FOLD_SIZE[codes]
    if (sizes < 0).any():
        with _FOLD_LOCK:   # each character looked up once: its characters appended, then its size (what is tested)
            new = [int(c) for c in np.unique(codes[_FOLD_SIZE[codes] < 0])]
            folds = [_TABLE[c] for c in new]
            flat = _FOLD_CODES[0]
            _FOLD_START[new] = len(flat) + np.cumsum([0, *map(len, folds)])[:-1]
            _FOLD_CODES[0] = np.concatenate([flat, np.array([ord(x) for f in folds for x in f], dtype=np.uint32)])
            _FOLD_SIZE[new] = [len(f) for f in folds]
        sizes = _FOLD_SIZE[codes]
    return sizes


def normalise_all(texts: Sequence[str]) -> list[str]:
    """``[normalise(t) for t in texts]``, the same strings, folded together on arrays of code points: a rebuild folds
    every case's record and conversation (the 40,000 texts, 18 million characters, of 20,000 cases: 0.86 s of CPU
    one ``str.translate`` each, 0.30 s so). Texts with a character outside the basic plane are translated."""
    joined = "".join(texts)
    codes = _codes(joined)
    if codes is None or not len(codes):
        return [t.translate(_TABLE) for t in texts]
    sizes = _sizes_of(codes)
    flat = _FOLD_CODES[0]
    if sizes.max() <= 1:
        out = flat[_FOLD_START[codes[sizes.astype(bool)]]]
    else:
        lengths = sizes.astype(np.int64)
        ends = np.cumsum(lengths)
        within = np.arange(int(ends[-1])) - np.repeat(ends - lengths, lengths)
        out = flat[np.repeat(_FOLD_START[codes], lengths) + within]
    folded = out.tobytes().decode("utf-32-le")
    # where each text's fold starts and ends in ``folded``
    bounds = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])[np.cumsum([0, *map(len, texts)])].tolist()
    return [folded[bounds[i]:bounds[i + 1]] for i in range(len(texts))]


def normalise(text: str) -> str:
    """The normalised form of ``text`` (module docstring, step 2)."""
    return text.translate(_TABLE)


# -------------------------------------------------------------------------------- parts of a quote

_QUOTED = re.compile(r"\u201c([^\u201d]+)\u201d|\u300c([^\u300d]+)\u300d|\u300e([^\u300f]+)\u300f"
                     r"|\"([^\"]+)\"|\u2018([^\u2019]+)\u2019")
#: elisions and separators between snippets; a "/" inside a value or unit (152/90, mmol/L) is not one
_SPLIT = re.compile(r"\u2026+|\.{3,}|\u22ef+|\uff1b|;|/(?![A-Za-z0-9.])")


def quote_parts(evidence: str) -> list[str]:
    """The snippets a quote names (module docstring, "quotes in parts"); ``[evidence]`` if one."""
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(evidence)]
    pieces = quoted if quoted else _SPLIT.split(evidence)
    parts = [p.strip() for p in pieces if len(normalise(p)) >= MIN_PART_CHARS]
    return parts or [evidence]


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _numbers_kept(quote: str, window: str) -> bool:
    """Every number of ``quote`` (normalised) occurs in ``window`` (normalised, whole numbers)."""
    wanted = _NUMBER.findall(quote)
    if not wanted:
        return True
    have = set(_NUMBER.findall(window))
    return all(n in have for n in wanted)


# -------------------------------------------------------------------------------- the search


class _Text:
    """One searched text (record or conversation), folded on first use (a case whose quotes are all found as
    written is never folded)."""

    __slots__ = ("_norm", "original", "sections", "source")

    def __init__(self, source: Source, original: str, sections: SectionIndex | None, folded: str | None) -> None:
        self.source: Source = source
        self.original = original
        self._norm = None if folded is None else Normalised(original, folded)
        self.sections = sections

    @property
    def norm(self) -> Normalised:
        if self._norm is None:
            self._norm = Normalised(self.original)
        return self._norm

    def span(self, start: int, end: int) -> Span:
        return _span(self.source, start, end, self.sections.at(start) if self.sections is not None else None)

    def spans(self, found: list[int], size: int) -> list[Span]:
        """The spans ``[i, i + size)`` of the occurrences ``found`` (the first :data:`MAX_SPANS`)."""
        source, sections = self.source, self.sections
        if sections is None:
            return [_span(source, i, i + size, None) for i in found[:MAX_SPANS]]
        at = sections.at
        return [_span(source, i, i + size, at(i)) for i in found[:MAX_SPANS]]


def _occurrences(hay: str, needle: str) -> list[int]:
    i = hay.find(needle)
    if i < 0:
        return []
    out = [i]
    i = hay.find(needle, i + 1)
    while i >= 0:
        out.append(i)
        i = hay.find(needle, i + 1)
    return out


class CaseGrounder:
    """Grounds quotes in one case: the record and the conversation folded once, their sections found
    once, and each distinct quote searched once (:meth:`ground` is memoised by quote).

    ``conversation`` is the conversation as the prompt renders it (module docstring). ``sections``: the
    rubric's headings (:meth:`Sections.of <consensus_eval.domain.sections.Sections.of>`), so that each span
    says the record section it is in; without it spans carry no section. ``folded``: the record and the
    conversation already folded (:func:`normalise_all` of both), else each is folded when first needed.
    """

    def __init__(self, record: str, conversation: str, sections: Sections | None = None,
                 folded: tuple[str, str] | None = None) -> None:
        index = SectionIndex(record, sections) if sections is not None else None
        record_folded, conversation_folded = (None, None) if folded is None else folded
        self._texts = (_Text("record", record, index, record_folded),
                       _Text("conversation", conversation, None, conversation_folded))
        self._memo: dict[str, Grounding] = {}

    def ground(self, evidence: str) -> Grounding:
        """Where ``evidence`` is in the case (module docstring)."""
        g = self._memo.get(evidence)
        if g is None:
            g = self._memo[evidence] = self._ground(evidence)
        return g

    def _ground(self, evidence: str) -> Grounding:
        quote = evidence.strip()
        if len(quote) > MAX_QUOTE_CHARS:
            return _made("not_found")   # no case quoted is that long (module docstring, "bounded per quote")
        nq = normalise(quote)
        if not nq:
            return _made("empty")
        whole = self._direct(quote, nq)
        if whole is not None:
            return whole
        parts = quote_parts(quote)
        if (len(parts) > 1 or parts[0] != quote) and len(parts) <= MAX_PARTS:
            found = [self._one(p) for p in parts]
            if all(g.grounded for g in found):
                worst = max(found, key=lambda g: _RANK[g.kind])
                spans = sorted({(s.source, s.start, s.end): s for g in found for s in g.spans}.values(),
                               key=lambda s: (s.source != "record", s.start))
                return _made(worst.kind, min(g.score or 0.0 for g in found), spans)
        return self._fuzzy(nq) or _made("not_found")

    def _one(self, quote: str) -> Grounding:
        nq = normalise(quote)
        return self._direct(quote, nq) or self._fuzzy(nq) or _made("not_found")

    def _direct(self, quote: str, nq: str) -> Grounding | None:
        """Exact occurrences, else normalised ones, in both texts (None if neither finds any). A quote found as
        written is found without folding the texts (its normalised form is in their folds too: characters are
        folded one by one, so it is never longer than both)."""
        record, conversation = self._texts
        in_record = _occurrences(record.original, quote)
        in_conversation = _occurrences(conversation.original, quote)
        if len(in_record) == 1 and not in_conversation:   # most quotes: once, in the record
            return _grounding("exact", 100.0, (record.span(in_record[0], in_record[0] + len(quote)),), 0)
        if in_record or in_conversation:
            spans = record.spans(in_record, len(quote))
            if len(spans) < MAX_SPANS:
                spans += conversation.spans(in_conversation[:MAX_SPANS - len(spans)], len(quote))
            return _made("exact", 100.0, spans, max(0, len(in_record) + len(in_conversation) - MAX_SPANS))
        if all(len(nq) > len(t.norm.text) for t in self._texts):
            return None   # longer than both texts even normalised: in neither, as written or normalised
        found = [(t, i) for t in self._texts for i in _occurrences(t.norm.text, nq)]
        if found:
            return _made("normalised", 100.0, [t.span(*t.norm.span(i, i + len(nq))) for t, i in found[:MAX_SPANS]],
                         max(0, len(found) - MAX_SPANS))
        return None

    def _fuzzy(self, nq: str) -> Grounding | None:
        """The best alignment in each text that passes (module docstring, step 3), None if none does."""
        if not MIN_FUZZY_CHARS <= len(nq) <= MAX_FUZZY_CHARS:
            return None
        best: list[tuple[float, Span]] = []
        for t in self._texts:
            if not t.norm.text or len(nq) > len(t.norm.text) * _FUZZY_REACH:
                continue
            if len(t.norm.text) < len(nq):
                # a text shorter than the quote: the whole text is the window (partial_ratio would
                # align the text inside the quote and call a longer quote a perfect match)
                score = fuzz.ratio(nq, t.norm.text)
                if score < FUZZY_THRESHOLD:
                    continue
                a, b = 0, len(t.norm.text)
            else:
                al = fuzz.partial_ratio_alignment(nq, t.norm.text, score_cutoff=FUZZY_THRESHOLD)
                if al is None or al.dest_end <= al.dest_start:
                    continue
                score, a, b = al.score, al.dest_start, al.dest_end
            # the window grown to whole numbers on both sides, for the number check
            lo, hi = a, b
            while lo > 0 and (t.norm.text[lo - 1].isdigit() or t.norm.text[lo - 1] == "."):
                lo -= 1
            while hi < len(t.norm.text) and (t.norm.text[hi].isdigit() or t.norm.text[hi] == "."):
                hi += 1
            if not _numbers_kept(nq, t.norm.text[lo:hi]):
                continue
            a, b = _tighten(nq, t.norm.text, a, b)
            best.append((float(score), t.span(*t.norm.span(a, b))))
        if not best:
            return None
        return _made("fuzzy", max(s for s, _ in best), [sp for _, sp in best])


def _tighten(quote: str, text: str, a: int, b: int, reach: int = 2) -> tuple[int, int]:
    """The window's ends moved by up to ``reach`` characters to fit the quote best (``fuzz.ratio``;
    ties keep the shorter window): partial_ratio's window has the quote's length, so a quote with a
    character added or dropped gets a window one character off at one end."""
    best = (fuzz.ratio(quote, text[a:b]), -(b - a), a, b)
    for x in range(max(0, a - reach), min(b, a + reach + 1)):
        for y in range(max(x + 1, b - reach), min(len(text), b + reach) + 1):
            cand = (fuzz.ratio(quote, text[x:y]), -(y - x), x, y)
            if cand > best:
                best = cand
    return best[2], best[3]


def ground(evidence: str, record: str, conversation: str, sections: Sections | None = None) -> Grounding:
    """Where ``evidence`` is in a case's ``record`` or ``conversation`` (as the prompt renders it:
    ``Case.conversation_as_text(rubric.roles)``; ``sections``: the rubric's headings, for the section of each
    span). For many quotes of one case use :class:`CaseGrounder`."""
    return CaseGrounder(record, conversation, sections).ground(evidence)


#: the re-ask prompt of ``ungrounded: reask`` (a bundled template: prompts/reask_ungrounded.j2)
REASK_TEMPLATE = "reask_ungrounded.j2"


def reask_prompt(quotes: list[str]) -> str:
    """The message that asks a judge, in the same conversation, to quote the case exactly for the
    evidence in ``quotes`` (not found in the case), or to drop those deductions."""
    env = SandboxedEnvironment(loader=FileSystemLoader(str(prompts_root())), undefined=StrictUndefined,
                               trim_blocks=True, lstrip_blocks=True, autoescape=False)
    shown = [" ".join(q.split()) for q in quotes]   # an empty quote: the template says none was given
    return env.get_template(REASK_TEMPLATE).render(quotes=shown).strip()


def ungrounded_quotes(record: str, conversation: str, evidence: list[str]) -> list[str]:
    """The distinct quotes of ``evidence`` that are not grounded in the case (in order; an empty quote
    counts: the judge quoted nothing)."""
    grounder = CaseGrounder(record, conversation)
    return list(dict.fromkeys(q for q in evidence if not grounder.ground(q).grounded))
