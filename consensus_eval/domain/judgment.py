"""Typed judge outputs: the contract between every judge and the scoring.

A :class:`Judgment` is what any judge (rules or LLM) returns for one (case, dimension): a list of
itemized deductions, the fixed penalties that apply, and the judge's own claimed score and stars
(kept, compared, never trusted); for a ``likert`` dimension the level picked and its quotes, for a
``criteria`` dimension a verdict per criterion. Its fields are what every rubric kind says in (a kind of
:mod:`consensus_eval.domain.kinds` uses those it needs: a pass/fail kind, a ``rating`` of 1 or 0 and its
``evidence``). The model an LLM fills is the dimension's kind's (:mod:`consensus_eval.domain.replies`): a reply
that breaks the rubric is a validation error (and is re-asked), never scored.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class Deduction(BaseModel):
    """One occurrence of a rubric deduction type.

    ``category`` and ``type`` are rubric ids; ``points`` is the rubric's value for the type (or the
    judge's choice within its range); ``evidence`` quotes the record or conversation.
    """

    model_config = ConfigDict(extra="forbid")

    category: str
    type: str
    points: float
    evidence: str = ""
    reason: str = ""


class PenaltyHit(BaseModel):
    """A fixed penalty of the rubric that applies (medical_record: diabetes written into past history)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    evidence: str = ""
    reason: str = ""


class CriterionVerdict(BaseModel):
    """A judge's verdict on one criterion of a ``criteria`` dimension: ``met`` or not, with the quote that
    shows it (``evidence``) and why (``reason``)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    met: bool
    evidence: str = ""
    reason: str = ""


class Judgment(BaseModel):
    """A judge's verdict on one dimension of one case, by the dimension's kind: ``deductions`` and
    ``fixed_penalties`` (kind ``deductions``), the level picked (``rating``, kind ``likert``, with its
    ``evidence``), or a verdict per criterion (``verdicts``, kind ``criteria``). The fields of the other
    kinds are left out of dumps while empty, so a deductions judgment dumps as it did before kinds."""

    model_config = ConfigDict(extra="forbid")

    dimension: str
    deductions: list[Deduction] = []
    fixed_penalties: list[PenaltyHit] = []
    claimed_score: float | None = None
    claimed_stars: int | None = None
    comment: str = ""
    #: ``likert``: the level the judge picked
    rating: Annotated[int | None, Field(exclude_if=lambda v: v is None)] = None
    #: ``likert``: quotes of the record or conversation the rating rests on
    evidence: Annotated[list[str], Field(exclude_if=lambda v: not v)] = []
    #: ``criteria``: one verdict per criterion
    verdicts: Annotated[list[CriterionVerdict], Field(exclude_if=lambda v: not v)] = []


def quotes_of(judgment: Judgment) -> list[str]:
    """Every quote a judgment gives as evidence, whatever its kind: each deduction's and fixed penalty's,
    a likert rating's quotes, each criterion verdict's (what grounding looks for in the case; a verdict
    ``not met`` may have nothing to quote, and an empty quote of one is not asked for again)."""
    return ([d.evidence for d in judgment.deductions] + [p.evidence for p in judgment.fixed_penalties]
            + list(judgment.evidence) + [v.evidence for v in judgment.verdicts if v.evidence or v.met])


#: Why a call failed, by cause. Only ``rate_limit``, ``server_error``, ``timeout`` and ``connection``
#: (a dropped connection) are worth another attempt; ``connection_refused`` (refused, DNS, TLS),
#: ``authentication``, ``not_found`` (model or endpoint) and ``local`` (an exception raised on this
#: machine) cannot succeed by retrying; ``bad_request`` is the request's fault; ``invalid_reply``:
#: the replies failed validation against the rubric after every re-ask; ``record_too_long``: the case
#: is over the judge's documented maximum and was not sent.
ErrorKind = Literal["rate_limit", "server_error", "timeout", "connection", "connection_refused", "authentication",
                    "not_found", "bad_request", "invalid_reply", "local", "record_too_long"]


class CallOutcome(BaseModel):
    """The outcome of one judge call (all its attempts): what every judge returns.

    ``status`` is ``ok`` with a validated ``judgment``, or ``failed`` with ``error`` saying why; a
    failed call is never scored. Token counts and cost cover every attempt (re-asks included);
    ``cost`` is None when unknown (never 0 for "unknown").
    """

    status: Literal["ok", "failed"]
    judgment: Judgment | None = None
    raw: str | None = None
    error: str | None = None
    #: what kind of failure (:data:`ErrorKind`), None for an ok call
    error_kind: ErrorKind | None = None
    model: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost: float | None = None
    attempts: int = 1
