"""Record sections (check 1 of the package docstring, the part that finds them).

Headings ``主诉/现病史/既往史/家族史/个人史`` are found at line starts (``主诉:``, ``主诉：``,
``【主诉】``, ``**主诉**：``, ``1. 主诉：``, leading spaces) or after a full stop with a colon. Other
headings (体格检查, 诊断, 处理意见 ...) end a section; sub-headings of past history (手术史, 过敏史 ...)
do not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from consensus_eval.judges.rules.medical_record.lexicon import OTHER_HEADINGS, SECTION_ALIASES
from consensus_eval.judges.rules.medical_record.text import alternation


@dataclass(frozen=True)
class Section:
    name: str
    canonical: bool
    start: int       # heading start
    body_start: int  # after the heading (and colon)
    body_end: int


_HEADING_NAMES = alternation([*SECTION_ALIASES, *OTHER_HEADINGS])
_LINE_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:(?:\d{1,2}|[一二三四五六七八九十]{1,3})[.、)][ \t]*|\(\d{1,2}\)[ \t]*)?"
    rf"(?:\*\*|【|\[)?[ \t]*(?P<name>{_HEADING_NAMES})[ \t]*(?:\*\*|】|\])?"
    r"(?:[ \t]*:[ \t]*(?:\*\*)?|(?<=】)|(?<=\])|(?=[ \t]|$))",
    re.M)
_INLINE_HEADING = re.compile(rf"(?<=[。;!?])[ \t]*【?(?P<name>{_HEADING_NAMES})】?[ \t]*:")


def find_sections(text: str) -> list[Section]:
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
