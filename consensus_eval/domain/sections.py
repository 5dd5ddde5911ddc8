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
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: the rubric's record sections, in the order a record should give them
SECTION_ORDER = ("主诉", "现病史", "既往史", "家族史", "个人史")
#: heading as written -> the section it is
SECTION_ALIASES = {"主诉": "主诉", "现病史": "现病史", "既往史": "既往史", "既往病史": "既往史",
                   "家族史": "家族史", "个人史": "个人史", "个人生活史": "个人史"}
#: headings that end a section without being one of the rubric's sections
OTHER_HEADINGS = ("体格检查", "查体", "专科检查", "辅助检查", "实验室检查", "检查结果", "化验结果",
                  "初步诊断", "临床诊断", "诊断意见", "诊断", "处理意见", "处理", "治疗方案", "治疗计划",
                  "诊疗计划", "诊疗意见", "治疗建议", "建议", "医嘱", "婚育史", "月经史", "婚姻史",
                  "生育史", "一般情况", "基本信息", "患者信息", "备注")


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


_HEADING_NAMES = _alternation([*SECTION_ALIASES, *OTHER_HEADINGS])
_LINE_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:(?:\d{1,2}|[一二三四五六七八九十]{1,3})[.、)][ \t]*|\(\d{1,2}\)[ \t]*)?"
    rf"(?:\*\*|【|\[)?[ \t]*(?P<name>{_HEADING_NAMES})[ \t]*(?:\*\*|】|\])?"
    r"(?:[ \t]*:[ \t]*(?:\*\*)?|(?<=】)|(?<=\])|(?=[ \t]|$))",
    re.M)
_INLINE_HEADING = re.compile(rf"(?<=[。;!?])[ \t]*【?(?P<name>{_HEADING_NAMES})】?[ \t]*:")


def find_sections(text: str) -> list[Section]:
    """Every heading of ``text`` (width-folded, module docstring) with its body, in text order."""
    hits = sorted([*_LINE_HEADING.finditer(text), *_INLINE_HEADING.finditer(text)], key=lambda m: m.start())
    kept: list[re.Match[str]] = []
    for m in hits:
        if not kept or m.start() >= kept[-1].end():
            kept.append(m)
    out = []
    for i, m in enumerate(kept):
        end = kept[i + 1].start() if i + 1 < len(kept) else len(text)
        name = m.group("name")
        canon = SECTION_ALIASES.get(name)
        out.append(Section(canon or name, canon is not None, m.start(), m.end(), end))
    return out


def fold_width(text: str) -> str:
    """Full-width forms to half-width (and the ideographic space to a space), one character for one:
    each character becomes its NFKC form when that is a single character, else stays as it is."""
    return text if text.isascii() else text.translate(_WIDTH)


class _WidthTable(dict[int, str]):
    """``str.translate`` table of the one-for-one NFKC fold, filled as characters are met."""

    def __missing__(self, key: int) -> str:
        c = chr(key)
        f = unicodedata.normalize("NFKC", c)
        value = self[key] = f if len(f) == 1 else c
        return value


_WIDTH = _WidthTable()


class SectionIndex:
    """The sections of one record, for looking up the section a position falls in (by bisection)."""

    def __init__(self, record: str) -> None:
        self.sections: Sequence[Section] = find_sections(fold_width(record))
        self._starts = [s.start for s in self.sections]

    def at(self, pos: int) -> str | None:
        """The section (canonical name, or the other heading as written) whose heading or body holds
        ``pos``; None before the first heading."""
        i = bisect_right(self._starts, pos) - 1
        return self.sections[i].name if i >= 0 else None
