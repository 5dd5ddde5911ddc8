"""Record sections: where 主诉, 现病史, 既往史, 家族史, 个人史 (and other headings) start and end.

Used by the rules judge (its section checks) and by grounding (the section a quoted span falls in).
Headings ``主诉/现病史/既往史/家族史/个人史`` (and their aliases, :data:`SECTION_ALIASES`) are found at line
starts (``主诉:``, ``【主诉】``, ``**主诉**:``, ``1. 主诉:``, leading spaces) or after a full stop with a
colon. Other headings (:data:`OTHER_HEADINGS`: 体格检查, 诊断, 处理意见 ...) end a section; sub-headings
of past history (手术史, 过敏史 ...) do not.

:func:`find_sections` reads text whose full-width ASCII is folded to half-width one character for one
(``：`` -> ``:``; the rules judge's ``norm``, or :func:`fold_width`), so its offsets hold in the original.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from consensus_eval.domain.rubric import Headings, Rubric
from consensus_eval.domain.textio import fold_width as fold_width


@dataclass(frozen=True)
class Section:
    """One heading and its body: ``name`` is the canonical section (主诉 ...) when ``canonical``, else
    the heading as written (体格检查 ...); ``start`` is where the heading starts, ``body_start`` where its
    text starts (after the heading and colon), ``body_end`` where the next heading (or the text) ends."""

    name: str
    canonical: bool
    start: int       # heading start
    body_start: int  # after the heading (and colon)
    body_end: int


def _alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


class Sections:
    """A rubric's section headings, compiled (:meth:`of`): ``order`` (its sections, in the order a record
    should give them), ``aliases`` (a heading as written -> the section it is, each section's own name
    included), ``other`` (headings that end a section without being one). A rubric without sections finds
    none."""

    def __init__(self, order: Sequence[str], headings: Headings) -> None:
        self.order = tuple(order)
        self.aliases = {**{n: n for n in order}, **headings.aliases}
        self.other = tuple(headings.other)
        names = _alternation([*self.aliases, *self.other])
        numerals = rf"|[{re.escape(headings.numerals)}]{{1,3}}" if headings.numerals else ""
        ends = re.escape(headings.sentence_ends)
        self._line = re.compile(
            rf"^[ \t]*(?:#{{1,6}}[ \t]*)?(?:(?:\d{{1,2}}{numerals})[.、)][ \t]*|\(\d{{1,2}}\)[ \t]*)?"
            rf"(?:\*\*|【|\[)?[ \t]*(?P<name>{names})[ \t]*(?:\*\*|】|\])?"
            r"(?:[ \t]*:[ \t]*(?:\*\*)?|(?<=】)|(?<=\])|(?=[ \t]|$))",
            re.M) if names else None
        # the heading is group "h", after a sentence end; the end is matched rather than looked behind for (the regex
        # then skips from one to the next: x5), the same headings unless ":" ends a sentence (a heading's own colon
        # may then be the end before the next one)
        after = rf"(?<=[{ends}])" if ":" in headings.sentence_ends else rf"[{ends}]"
        self._inline = re.compile(rf"{after}(?P<h>[ \t]*【?(?P<name>{names})】?[ \t]*:)") if names and ends else None

    @staticmethod
    def of(rubric: Rubric) -> Sections:
        """The compiled headings of ``rubric`` (made once per rubric content)."""
        key = (tuple(rubric.sections), rubric.headings.model_dump_json())
        found = _COMPILED.get(key)
        if found is None:
            found = _COMPILED[key] = Sections(rubric.sections, rubric.headings)
        return found

    def find(self, text: str) -> list[Section]:
        """Every heading of ``text`` (width-folded, module docstring) with its body, in text order."""
        if self._line is None:
            return []
        # (start, end, name) of each heading: at a line start, then after a sentence end, in text order (stable)
        hits = [(m.start(), m.end(), m.group("name")) for m in self._line.finditer(text)]
        if self._inline is not None:
            inline = [(m.start("h"), m.end(), m.group("name")) for m in self._inline.finditer(text)]
            if inline:
                hits = sorted([*hits, *inline], key=_start)
        kept: list[tuple[int, int, str]] = []
        for hit in hits:
            if not kept or hit[0] >= kept[-1][1]:
                kept.append(hit)
        out = []
        for i, (start, body_start, name) in enumerate(kept):
            end = kept[i + 1][0] if i + 1 < len(kept) else len(text)
            canon = self.aliases.get(name)
            out.append(Section(canon or name, canon is not None, start, body_start, end))
        return out


def _start(hit: tuple[int, int, str]) -> int:
    return hit[0]


_COMPILED: dict[tuple[tuple[str, ...], str], Sections] = {}


def find_sections(text: str, sections: Sections) -> list[Section]:
    """Every heading of ``text`` (width-folded) that ``sections`` knows, with its body, in text order."""
    return sections.find(text)




class SectionIndex:
    """The sections of one record, for looking up the section a position falls in (by bisection)."""

    def __init__(self, record: str, sections: Sections) -> None:
        self.sections: Sequence[Section] = sections.find(fold_width(record))
        self._starts = [s.start for s in self.sections]

    def at(self, pos: int) -> str | None:
        """The section (canonical name, or the other heading as written) whose heading or body holds
        ``pos``; None before the first heading."""
        i = bisect_right(self._starts, pos) - 1
        return self.sections[i].name if i >= 0 else None
