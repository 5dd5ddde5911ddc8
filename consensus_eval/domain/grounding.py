"""Where a judge's quoted evidence is in the case: grounding every deduction in the text it quotes.

(Interface committed first so that the audit, the calibration and the report can code against it;
the search itself is being written: see issue 13, section 1.)

A :class:`Grounding` says how a quote was found (``exact``, ``normalised``: after folding whitespace,
full-width/half-width forms and punctuation; ``fuzzy``: the best approximate alignment, with its
score; ``not_found``; ``empty``: the judge quoted nothing) and every place it was found
(:class:`Span`: characters ``[start, end)`` of the record or of the conversation as the prompt shows it,
and the record section the span falls in).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

GroundingKind = Literal["exact", "normalised", "fuzzy", "not_found", "empty"]
Source = Literal["record", "conversation"]


class Span(BaseModel):
    """One place a quote was found: ``text[start:end]`` of ``source``.

    ``section`` is the record section (主诉, 现病史, ...) the span starts in, None outside any
    section or in the conversation.
    """

    source: Source
    start: int
    end: int
    section: str | None = None


class Grounding(BaseModel):
    """How one deduction's evidence was found in the case (module docstring).

    ``score`` is the fuzzy alignment's similarity in [0, 100] (100 for exact and normalised matches,
    None for not_found and empty); ``spans`` lists every occurrence (empty when not found).
    """

    kind: GroundingKind
    score: float | None = None
    spans: list[Span] = []

    @property
    def grounded(self) -> bool:
        """True when the quote was found (exactly, normalised or fuzzily above the threshold)."""
        return self.kind in ("exact", "normalised", "fuzzy")
