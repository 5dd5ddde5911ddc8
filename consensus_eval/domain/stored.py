"""Plain read models of a judgment read back from the store: slotted, frozen dataclasses.

A judge's reply is validated (:class:`~consensus_eval.domain.judgment.Judgment`, pydantic) when it comes back
from the judge; the store keeps it as that model's JSON. What the store hands back for analysis was validated
when written, so it is rebuilt here straight from the JSON (``json.loads``, then these classes): no validation,
no per-object fields set, a few hundred bytes per call (measured: bench/README.md, "Plain read models").
The attribute names are the pydantic model's (``rec.judgment.deductions[i].points``); lists are tuples;
:meth:`StoredJudgment.to_dict` gives what ``Judgment.model_dump()`` gives for the same values. The short
ids every call repeats (dimension, category, type, penalty and criterion ids) are interned.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from consensus_eval._errors import UsageError
from consensus_eval.domain.construct import slots_maker
from consensus_eval.domain.judgment import Judgment


@dataclass(slots=True, frozen=True)
class StoredDeduction:
    """A :class:`~consensus_eval.domain.judgment.Deduction` as stored."""

    category: str
    type: str
    points: float
    evidence: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "type": self.type, "points": self.points, "evidence": self.evidence,
                "reason": self.reason}


@dataclass(slots=True, frozen=True)
class StoredPenalty:
    """A :class:`~consensus_eval.domain.judgment.PenaltyHit` as stored."""

    id: str
    evidence: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "evidence": self.evidence, "reason": self.reason}


@dataclass(slots=True, frozen=True)
class StoredVerdict:
    """A :class:`~consensus_eval.domain.judgment.CriterionVerdict` as stored."""

    id: str
    met: bool
    evidence: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "met": self.met, "evidence": self.evidence, "reason": self.reason}


@dataclass(slots=True, frozen=True)
class StoredJudgment:
    """A :class:`~consensus_eval.domain.judgment.Judgment` as stored (the same fields; lists are tuples)."""

    dimension: str
    deductions: tuple[StoredDeduction, ...] = ()
    fixed_penalties: tuple[StoredPenalty, ...] = ()
    claimed_score: float | None = None
    claimed_stars: int | None = None
    comment: str = ""
    rating: int | None = None
    evidence: tuple[str, ...] = ()
    verdicts: tuple[StoredVerdict, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """What ``Judgment.model_dump()`` gives for these values (the other kinds' fields left out while empty)."""
        out: dict[str, Any] = {
            "dimension": self.dimension, "deductions": [d.to_dict() for d in self.deductions],
            "fixed_penalties": [p.to_dict() for p in self.fixed_penalties], "claimed_score": self.claimed_score,
            "claimed_stars": self.claimed_stars, "comment": self.comment}
        if self.rating is not None:
            out["rating"] = self.rating
        if self.evidence:
            out["evidence"] = list(self.evidence)
        if self.verdicts:
            out["verdicts"] = [v.to_dict() for v in self.verdicts]
        return out

    def to_judgment(self) -> Judgment:
        """The same values as a validated :class:`~consensus_eval.domain.judgment.Judgment`."""
        return Judgment.model_validate(self.to_dict())


#: the read models made from their fields' values, slot by slot (:func:`~consensus_eval.domain.construct.slots_maker`)
_judgment, _deduction = slots_maker(StoredJudgment), slots_maker(StoredDeduction)
_penalty, _verdict = slots_maker(StoredPenalty), slots_maker(StoredVerdict)
_JUDGMENT_KEYS = frozenset(("dimension", "deductions", "fixed_penalties", "claimed_score", "claimed_stars", "comment",
                            "rating", "evidence", "verdicts"))
_intern = sys.intern


def _opt_float(x: Any) -> float | None:
    return None if x is None else float(x)


def stored_judgment(d: dict[str, Any]) -> StoredJudgment:
    """A judgment from its stored JSON, parsed (``json.loads`` of ``Judgment.model_dump_json()``). Raises
    ``ValueError`` (or ``KeyError``/``TypeError``) for a dict that is not a stored judgment."""
    if not _JUDGMENT_KEYS.issuperset(d):
        raise UsageError(f"unknown judgment fields: {sorted(set(d) - _JUDGMENT_KEYS)}")
    rating = d.get("rating")
    return _judgment(
        _intern(d["dimension"]),
        tuple([_deduction(_intern(x["category"]), _intern(x["type"]), float(x["points"]), x.get("evidence", ""),
                          x.get("reason", "")) for x in d.get("deductions", ())]),
        tuple([_penalty(_intern(x["id"]), x.get("evidence", ""), x.get("reason", ""))
               for x in d.get("fixed_penalties", ())]),
        _opt_float(d.get("claimed_score")), d.get("claimed_stars"), d.get("comment", ""),
        None if rating is None else int(rating),
        tuple(d.get("evidence", ())),
        tuple([_verdict(_intern(x["id"]), bool(x["met"]), x.get("evidence", ""), x.get("reason", ""))
               for x in d.get("verdicts", ())]))


def from_judgment(j: Judgment) -> StoredJudgment:
    """A validated judgment as its read model (the same values)."""
    return stored_judgment(j.model_dump())
