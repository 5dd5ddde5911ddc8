"""What a rubric kind reads and gives for the error analysis against clinicians
(:mod:`consensus_eval.analysis.error_analysis`; :meth:`~consensus_eval.domain.kinds.base.Dimension.item_errors`).

A kind finds, on one dimension of one case, each rater's errors item by item (its items: a deduction type or
fixed penalty, a criterion, a likert rating): a **miss** (a fault the clinicians saw and the rater did not report)
or a **false alarm** (a fault the rater reported and the clinicians rejected), as :class:`ItemError` s. It reads
the case (:class:`ErrorInput`): each judge's successful calls, the panel's consensus, the clinicians' review.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol

from pydantic import BaseModel

from consensus_eval.domain.criterion import Criterion
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.stored import StoredJudgment

ErrorKind = Literal["miss", "false_alarm"]


class LabelView(Protocol):
    """One clinician's label as the error analysis reads it (the store's ``HumanLabelRecord``)."""

    @property
    def dimension(self) -> str | None: ...

    @property
    def deduction_id(self) -> str | None: ...

    @property
    def value(self) -> float | str | None: ...

    @property
    def points(self) -> float | None: ...

    @property
    def evidence(self) -> str | None: ...

    @property
    def comment(self) -> str | None: ...


class ReviewView(Protocol):
    """What the clinicians said about one case (the analysis' ``CaseReview``): their score per dimension
    (``human``), verdicts on deductions (by deduction id, per reviewer) and the adjudicator's, the deductions they
    added, their comments, their verdicts per criterion (per reviewer) and the adjudicator's."""

    @property
    def human(self) -> Mapping[str, float]: ...

    @property
    def verdicts(self) -> Mapping[str, Mapping[str, str]]: ...

    @property
    def reference_verdicts(self) -> Mapping[str, str]: ...

    @property
    def added(self) -> Sequence[LabelView]: ...

    @property
    def comments(self) -> Sequence[LabelView]: ...

    @property
    def criteria(self) -> Mapping[str, Mapping[str, Mapping[str, bool]]]: ...

    @property
    def reference_criteria(self) -> Mapping[str, Mapping[str, bool]]: ...


class ErrorCallView(Protocol):
    """One successful call as the error analysis reads it (``StoredCall``): its id and judgment."""

    @property
    def request_hash(self) -> str: ...

    @property
    def judgment(self) -> Judgment | StoredJudgment | None: ...


class MeanView(Protocol):
    """A judge's score of one dimension of one case (the consensus' ``JudgeScore``): the mean of its runs."""

    @property
    def mean(self) -> float | None: ...


class ErrorPanelView(Protocol):
    """The panel's verdict on one case (``CaseConsensus``): its score per dimension, each judge's, and its
    majority per criterion."""

    @property
    def scores(self) -> Mapping[str, float | None]: ...

    @property
    def judges(self) -> Mapping[str, Mapping[str, MeanView]]: ...

    @property
    def criteria(self) -> Mapping[str, Mapping[str, str]]: ...


@dataclass(frozen=True)
class ErrorInput:
    """One case on one dimension, for a kind's :meth:`~consensus_eval.domain.kinds.base.Dimension.item_errors`:
    ``calls`` each judge's successful calls (every judge of the run, in panel order), ``panel`` the consensus (None:
    none), ``review`` the clinicians', ``panel_name`` the rater name of the panel."""

    case_id: str
    case_criteria: Sequence[Criterion] | None
    calls: Mapping[str, Sequence[ErrorCallView]]
    panel: ErrorPanelView | None
    review: ReviewView
    panel_name: str


class ErrorCase(BaseModel):
    """One error on one case: ``points`` how far it moves the score, ``judge`` whose (None: the panel's judges all
    missed it), ``evidence`` the quote (the clinician's for a deduction they added, else the judge's), ``reason`` the
    judge's, ``comment`` the clinicians'."""

    case_id: str
    kind: ErrorKind
    points: float
    judge: str | None = None
    evidence: str = ""
    reason: str | None = None
    comment: str | None = None


class ItemError(NamedTuple):
    """One rater's ``error`` on one item (its id and ``name``) of one case."""

    rater: str
    item: str
    name: str
    error: ErrorCase


def decided(verdicts: Mapping[str, str], reference: str | None) -> str | None:
    """The clinicians' verdict on an item: the adjudicator's, else the reviewers' when they all gave the same."""
    if reference is not None:
        return reference
    values = set(verdicts.values())
    return values.pop() if len(values) == 1 else None


def comments_on(review: ReviewView, dimension: str, deduction_id: str | None = None) -> str | None:
    """The clinicians' comments on a dimension (on one deduction, with ``deduction_id``), joined; None: none."""
    said = [lb.comment for lb in review.comments if lb.comment and lb.dimension in (None, dimension)
            and (deduction_id is None or lb.deduction_id in (None, deduction_id))]
    return "; ".join(dict.fromkeys(said)) or None
