"""What the review app shows and writes: a run's review queue, one case as a reviewer sees it, and
the reviewer's actions turned into stored human labels.

Nothing here knows about HTTP. :class:`ReviewRun` holds the run (read once, read-only, through
:func:`consensus_eval.api.load_run`) and one read-write :class:`~consensus_eval.execution.store.Store`
connection for the labels (:mod:`.state`); it brings together the queue (:mod:`.queue`), one case as a reviewer
sees it (:mod:`.case_view`), the progress (:mod:`.progress`), the adjudication (:mod:`.adjudication`) and the
reviewer's actions (:mod:`.actions`): every action writes at once, as one short transaction of label events
(``Store.write_labels``: WAL journal, busy timeout), under the reviewer's name, the time and the session. Labels are
keyed by reviewer (one label set per reviewer), so two reviewers never overwrite each other.

**Queue.** The cases in the audit's order (:func:`consensus_eval.analysis.audit.review_queue`); by
default those that need review. A case is *done* for a reviewer when they have a score for every
dimension of the rubric (what "12 of 40 done" counts); verdicts and comments alone make it *started*.

**Labels written** (:class:`~consensus_eval.execution.store.HumanLabelRecord`, ``source`` ``review``):

- a verdict on a judge's deduction: one ``verdict`` label (with its comment) per run that made the
  deduction (a deduction repeated in 3 runs is one line on the page, and 3 deduction ids, as on the
  sheet; a fixed penalty listed twice in one run is one judgement and one label); a comment without a
  verdict is a ``comment`` label on the deduction;
- a dimension's score (``score``): ``origin`` ``own`` when the reviewer entered it, ``accepted`` when they
  confirmed the panel's score shown in the field without changing it (the value is then the panel's,
  taken here, not from the page); a dimension's comment and the case's free comment (``comment``);
- a deduction the judges missed (``added_deduction``: the rubric's type id or fixed penalty id in
  ``value``, the points, the evidence or reason in ``comment``; its id ``added:<dimension>:<n>``).

**Rubric kinds.** A ``likert`` dimension is scored on its scale: the reviewer picks a level (each shown with
its anchor text), stored as the dimension's ``score`` (an own score must be one of the levels; an accepted
one is the panel's mean as shown). A ``criteria`` dimension is judged criterion by criterion: met / not met
with the reviewer's evidence, one ``criterion`` label per criterion (``deduction_id`` the criterion's id,
``points`` its points); confirming a case accepts the panel's verdict (the judges' majority) on each
criterion the reviewer left alone, stored with ``origin`` ``accepted``. Such a dimension is covered when
every one of its criteria has a verdict (own or accepted): the reviewer's score of it is the one their
verdicts give (:func:`consensus_eval.analysis.human.criteria_score`), never a label of its own. Own,
accepted and not reviewed stay three states, per criterion as per score. An adjudicator's reference
(:meth:`ReviewRun.adjudicate`, origin ``reference``) is given in the same terms: a likert dimension's is one of
its levels, a criteria dimension's a verdict on each criterion the reviewers disagree on.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from consensus_eval._errors import InputError
from consensus_eval.analysis.human import build_review
from consensus_eval.output.files import write_adjudication_csv
from consensus_eval.review.actions import ActionConflict, Actions, field_key
from consensus_eval.review.adjudication import (
    AdjudicationDim,
    AdjudicationViews,
    CriterionConflict,
    VerdictConflict,
    criterion_conflicts,
    score_gap,
    score_gaps,
    scores_apart,
    verdict_lines,
)
from consensus_eval.review.case_view import (
    AddedView,
    CaseView,
    CaseViews,
    CriterionView,
    DimView,
    ItemView,
    JudgeColumn,
    TypeChoice,
)
from consensus_eval.review.ledger import Ledger, Progress, covered
from consensus_eval.review.progress import CaseProgress, MemberProgress, ProgressViews
from consensus_eval.review.queue import Filters, QueueRow, QueueViews
from consensus_eval.review.refusals import ActionError, catalogue, clean_reviewer
from consensus_eval.review.state import SOURCE, ReviewState
from consensus_eval.review.texts import Block, Part, line_blocks, mark_text, record_blocks

__all__ = ["SOURCE", "ActionConflict", "ActionError", "Actions", "AddedView", "AdjudicationDim", "AdjudicationViews",
           "Block", "CaseProgress", "CaseView", "CaseViews", "CriterionConflict", "CriterionView", "DimView",
           "Filters", "ItemView", "JudgeColumn", "Ledger", "MemberProgress", "Part", "Progress", "ProgressViews",
           "QueueRow", "QueueViews", "ReviewRun", "ReviewState", "TypeChoice", "VerdictConflict", "catalogue",
           "clean_reviewer", "covered", "criterion_conflicts", "field_key", "line_blocks", "mark_text", "open_run",
           "record_blocks", "score_gap", "score_gaps", "scores_apart", "verdict_lines"]


class ReviewRun(CaseViews, QueueViews, ProgressViews):
    """A run opened for review (:class:`~.state.ReviewState`) with everything the app does with it: the queue
    (:mod:`.queue`), one case (:mod:`.case_view`), the progress (:mod:`.progress`), the adjudication
    (:mod:`.adjudication`), the reviewer's actions (:mod:`.actions`) and the filled-in sheet."""

    def sheet(self, reviewer: str, *, session: str | None = None) -> bytes:
        """The adjudication sheet ``audit --export`` writes (every case, in the queue's order), with
        ``reviewer``'s labels filled in; UTF-8 with a BOM. A spot-check case the sheet shows with its judges (the
        reviewer's own scores are in) is recorded as revealed to them: their blind scores are frozen."""
        with self.lock:
            ledger = self._ledger(reviewer)
            shown = [c for c in self.spot if c not in ledger.revealed
                     and ledger.own_scored(c) >= len(self.dimensions)]
            if shown:
                self._reveal(ledger, reviewer, sorted(shown), session)
        labels = self.all_labels()
        review = build_review(labels, self.results.rubric, self.results.consensus,
                              case_criteria=self.results.case_criteria) if labels else None
        with tempfile.TemporaryDirectory(prefix="consensus-eval-sheet-") as tmp:
            path = write_adjudication_csv(Path(tmp) / "sheet.csv", self.queue.cases, judges=self.results.judges,
                                          review=review, reviewer=reviewer, rubric=self.results.rubric,
                                          spot_check={r.case_id for r in self.results.spot_checks},
                                          case_criteria=self.results.case_criteria, cases=self.cases)
            return path.read_bytes()


def open_run(folder: str | Path) -> ReviewRun:
    """:meth:`ReviewRun.open`, with a missing store said as an input error."""
    try:
        return ReviewRun.open(folder)
    except FileNotFoundError as e:
        raise InputError(str(e)) from None
