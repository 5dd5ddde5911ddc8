"""A case's texts as the review page shows them: the record in its sections, the conversation by speaker, and
the evidence marks over both (:func:`mark_text`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from consensus_eval.domain.sections import Sections, find_sections, fold_width


@dataclass(frozen=True)
class Part:
    """A run of text and the evidence marks covering it (``marks``: item numbers on the page)."""

    text: str
    marks: tuple[int, ...] = ()


@dataclass(frozen=True)
class Block:
    """A labelled piece of a text (a record section, a conversation turn) split into :class:`Part`."""

    label: str | None
    parts: list[Part]


def record_blocks(record: str, headings: Sections) -> list[tuple[str | None, int, int]]:
    """The record cut at its section headings (domain/sections.py, the rubric's ``headings``):
    ``(section, start, end)``; the text before the first heading has no label."""
    sections = find_sections(fold_width(record), headings)
    out: list[tuple[str | None, int, int]] = []
    if not sections:
        return [(None, 0, len(record))]
    if sections[0].start > 0:
        out.append((None, 0, sections[0].start))
    out.extend((s.name, s.start, s.body_end) for s in sections)
    return out


def line_blocks(text: str, label_sep: str = "：") -> list[tuple[str | None, int, int]]:
    """The conversation (as the prompt renders it: one ``医生：...`` line per turn) cut into its lines,
    each labelled by its speaker."""
    out: list[tuple[str | None, int, int]] = []
    pos = 0
    for line in text.split("\n"):
        head = line.split(label_sep, 1)[0] if label_sep in line[:12] else None
        out.append((head, pos, pos + len(line)))
        pos += len(line) + 1
    return out


def mark_text(text: str, blocks: Sequence[tuple[str | None, int, int]],
              marks: Iterable[tuple[int, int, int]]) -> list[Block]:
    """``text`` cut into ``blocks``, each split where an evidence mark ``(start, end, item)`` starts or
    ends; every part carries the items whose marks cover it (marks may overlap)."""
    marks = [(max(0, a), min(len(text), b), n) for a, b, n in marks if b > a]
    cuts = sorted({0, len(text), *(a for a, _, _ in marks), *(b for _, b, _ in marks),
                   *(s for _, s, _ in blocks), *(e for _, _, e in blocks)})
    out = []
    for label, start, end in blocks:
        parts = []
        inner = [c for c in cuts if start <= c <= end]
        for a, b in pairwise(inner):
            if b > a:
                covering = tuple(sorted({n for s, e, n in marks if s <= a and b <= e}))
                parts.append(Part(text[a:b], covering))
        out.append(Block(label, parts))
    return out
