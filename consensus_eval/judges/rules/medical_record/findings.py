"""What a check yields (:class:`Finding`) and how a case's findings become one
:class:`~consensus_eval.domain.judgment.Judgment` per dimension of the rubric.

Each finding's type is a deduction type (placed in its dimension and category by the rules' ``emits``
table, with the type's points: the low end of a range) or a fixed penalty. Deduplication: one
deduction per (type, evidence span); absence findings (no span) per (type, reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.kinds.deductions import as_deductions
from consensus_eval.domain.rubric import Rubric


@dataclass(frozen=True)
class Finding:
    """One thing a check found: a deduction type or fixed penalty id, the quoted evidence, the reason."""

    type: str
    evidence: str
    reason: str
    where: tuple[str | int, ...] = ()  # (source, start, end[, discriminator]) of the evidence, for de-duplication


def judgments(findings: Iterable[Finding], rubric: Rubric, emits: Mapping[str, Mapping[str, tuple[str, ...]]],
              penalties: Mapping[str, tuple[str, ...]]) -> dict[str, Judgment]:
    """One :class:`Judgment` per dimension of ``rubric`` from ``findings``, in order, de-duplicated.

    ``emits`` (dimension -> category -> deduction types) places each deduction type; ``penalties``
    (dimension -> fixed penalty ids) each penalty. Points come from the rubric (a type's low end).
    """
    home = {t: (dim, cat) for dim, cats in emits.items() for cat, types in cats.items() for t in types}
    penalty_home = {p: dim for dim, ps in penalties.items() for p in ps}
    deductions: dict[str, list[Deduction]] = {d.id: [] for d in rubric.dimensions}
    penalty_hits: dict[str, list[PenaltyHit]] = {d.id: [] for d in rubric.dimensions}
    seen: set[tuple[object, ...]] = set()
    for f in findings:
        key = (f.type, f.where) if f.where else (f.type, f.evidence, f.reason)
        if key in seen:
            continue
        seen.add(key)
        if f.type in penalty_home:
            penalty_hits[penalty_home[f.type]].append(PenaltyHit(id=f.type, evidence=f.evidence, reason=f.reason))
            continue
        dim_id, cat_id = home[f.type]
        _, typ = as_deductions(rubric.dimension(dim_id)).find_type(f.type)
        deductions[dim_id].append(Deduction(category=cat_id, type=f.type, points=typ.low,
                                            evidence=f.evidence, reason=f.reason))
    return {
        d.id: Judgment(dimension=d.id, deductions=deductions[d.id], fixed_penalties=penalty_hits[d.id],
                       claimed_score=None, claimed_stars=None,
                       comment=f"规则判定：{len(deductions[d.id]) + len(penalty_hits[d.id])} 处问题")
        for d in rubric.dimensions
    }
