"""Few-shot examples from clinicians' corrections (opt-in: ``few_shot`` in the config; docs/rubrics.md).

A :class:`Correction` is one mistake of a judge on one case that a clinician corrected: a deduction the clinician
added where the judge made none (``missed``), or a judge's deduction the clinician disagreed with
(``false_alarm``). :func:`few_shot_examples` makes the corrections of a spot check's **tuning part** into examples
a dimension's prompt shows through its ``examples`` template variable (:func:`consensus_eval.domain.prompts.render`):
an excerpt of the record around the evidence, the judge's mistake (the type, its quote and reason), the clinician's
correction (their comment).

**Never from the held-out part.** The function takes the tuning part's case ids and drops every correction of any
other case before anything else reads it; an example carries its case id, and the text a prompt shows is taken
only from kept corrections and their records. The held-out part is what a prompt change is measured on: an example
drawn from it would let the prompt see the answers of its own test.

Choice: per dimension, the corrections that move the score most first (their points), one per deduction type before
any type twice, at most ``per_dimension``; the same mistake of several judges is one example. The order is fixed
(points, then case id, type, evidence), so the same corrections give the same examples, byte for byte, and the same
request hashes: examples enter the prompt, so changing them re-asks every LLM judge.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from consensus_eval.domain.textio import fold_width

#: a correction's kind: a deduction the judge should have made, or one it should not have
CorrectionKind = Literal["missed", "false_alarm"]
#: the most characters of record an example shows around its evidence (each side)
EXCERPT_CONTEXT = 60
#: the most examples one dimension's prompt may show
MAX_PER_DIMENSION = 20


@dataclass(frozen=True)
class Correction:
    """One judge's mistake on one case, as a clinician corrected it (module docstring): ``type`` is the rubric's
    deduction type (or fixed penalty) id in ``dimension``, ``evidence`` the quote (the clinician's for a miss, the
    judge's for a false alarm), ``points`` what the mistake moves the score by, ``judge`` who made it (None: the
    panel's judges all missed it), ``reason`` the judge's reason, ``comment`` the clinician's."""

    case_id: str
    dimension: str
    kind: CorrectionKind
    type: str
    evidence: str = ""
    points: float = 0.0
    judge: str | None = None
    reason: str | None = None
    comment: str | None = None


class FewShotExample(BaseModel):
    """One example shown in a dimension's prompt (module docstring): from ``case_id`` of the tuning part, the record
    ``excerpt`` around the ``evidence`` ("" when the evidence is not in the record), the mistake (``kind``, ``type``,
    the judge's ``reason``) and the clinician's ``comment``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    case_id: str
    dimension: str
    kind: CorrectionKind
    type: str
    excerpt: str = ""
    evidence: str = ""
    points: float = 0.0
    reason: str | None = None
    comment: str | None = None


class FewShot(BaseModel):
    """The config's ``few_shot`` block: ``from`` the run folder whose spot check's tuning part the corrections come
    from, ``per_dimension`` examples at most, only for ``dimensions`` (all when not given). ``examples`` (dimension ->
    examples) is what the run was prepared with: filled from ``from`` when the config is prepared, and stored with
    the run's config, so the run says which examples its prompts showed."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_run: str = Field(alias="from", min_length=1)
    per_dimension: int = Field(default=3, ge=1, le=MAX_PER_DIMENSION)
    dimensions: list[str] | None = None
    examples: dict[str, list[FewShotExample]] = {}


def excerpt(record: str, evidence: str, context: int = EXCERPT_CONTEXT) -> str:
    """The stretch of ``record`` around ``evidence`` (its first place, found as written or with full-width forms
    folded), ``context`` characters each side, cut at line ends; "" when the evidence is not in the record."""
    if not evidence.strip():
        return ""
    at = record.find(evidence)
    if at < 0:
        at = fold_width(record).find(fold_width(evidence))
    if at < 0:
        return ""
    start = max(0, at - context, record.rfind("\n", 0, at) + 1)
    line_end = record.find("\n", at + len(evidence))
    end = min(len(record), at + len(evidence) + context, line_end if line_end >= 0 else len(record))
    return ("…" if start > 0 and record[start - 1] != "\n" else "") + record[start:end] + (
        "…" if end < len(record) and record[end] != "\n" else "")


def few_shot_examples(tuning: Collection[str], corrections: Iterable[Correction], records: Mapping[str, str], *,
                      per_dimension: int = 3, dimensions: Collection[str] | None = None
                      ) -> dict[str, list[FewShotExample]]:
    """The examples per dimension (module docstring) from the ``corrections`` of the cases in ``tuning`` (the tuning
    part's case ids; every other case's correction is dropped first), ``records`` giving each case's record text.
    Dimensions without a kept correction are left out."""
    tuning = frozenset(tuning)
    kept = [c for c in corrections if c.case_id in tuning]   # the held-out part goes first, before anything reads it
    seen: set[tuple[str, str, str, str, str]] = set()
    per_dim: dict[str, list[Correction]] = {}
    for c in sorted(kept, key=lambda c: (-c.points, c.case_id, c.dimension, c.kind, c.type, c.evidence)):
        key = (c.case_id, c.dimension, c.kind, c.type, c.evidence)
        if key in seen or (dimensions is not None and c.dimension not in dimensions):
            continue
        seen.add(key)
        per_dim.setdefault(c.dimension, []).append(c)
    out: dict[str, list[FewShotExample]] = {}
    for dim, found in sorted(per_dim.items()):
        chosen: list[Correction] = []
        types_shown: set[str] = set()
        for first_of_type in (True, False):  # one per type before any type twice
            for c in found:
                if len(chosen) < per_dimension and c not in chosen and (c.type not in types_shown or not first_of_type):
                    chosen.append(c)
                    types_shown.add(c.type)
        out[dim] = [FewShotExample(case_id=c.case_id, dimension=dim, kind=c.kind, type=c.type,
                                   excerpt=excerpt(records.get(c.case_id, ""), c.evidence), evidence=c.evidence,
                                   points=c.points, reason=c.reason, comment=c.comment) for c in chosen]
    return out
