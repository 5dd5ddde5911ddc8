"""What the review app shows and writes: a run's review queue, one case as a reviewer sees it, and
the reviewer's actions turned into stored human labels.

Nothing here knows about HTTP. :class:`ReviewRun` holds the run (read once, read-only, through
:func:`consensus_eval.api.load_run`) and one read-write :class:`~consensus_eval.execution.store.Store`
connection for the labels; every action (:meth:`ReviewRun.apply`) writes at once, in one short
transaction per label (``Store.upsert_human_label``: WAL journal, busy timeout), under the reviewer's
name and the time. Labels are keyed by reviewer (one label set per reviewer), so two reviewers never
overwrite each other, and a scoring run writing the same store only makes a write wait.

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

import hashlib
import json
import math
import secrets
import tempfile
import threading
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib.resources import files
from itertools import pairwise
from pathlib import Path
from typing import Any

from consensus_eval._errors import InputError
from consensus_eval.analysis.audit import CaseAudit, DimensionAudit, JudgeView, RatingItem, ReviewQueue, review_queue
from consensus_eval.analysis.human import (
    CaseReview,
    build_review,
)
from consensus_eval.analysis.results import Results
from consensus_eval.api import load_run
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import ConsensusConfig
from consensus_eval.domain.flags import reviewers_apart
from consensus_eval.domain.reviewers import MAX_NAME, clean_name
from consensus_eval.domain.rubric import Criterion, Dimension
from consensus_eval.domain.sections import Sections, find_sections, fold_width
from consensus_eval.execution.labels import MAX_ACTION_ID, fold, slot_of, versions
from consensus_eval.execution.store import (
    VERDICTS,
    Change,
    HumanLabelRecord,
    LabelConflict,
    LabelOrigin,
    LabelRefused,
    ReviewerRecord,
    Slot,
    Store,
    Verdict,
    Written,
)
from consensus_eval.output.files import write_adjudication_csv
from consensus_eval.output.report.i18n import Messages

#: the ``source`` of every label the app writes
SOURCE = "review"
#: the longest comment accepted (characters)
MAX_COMMENT = 10_000


@cache
def catalogue(lang: str) -> Messages:
    """The review pages' words in ``lang`` (``i18n/<lang>.json``, shipped with the package; keys starting with
    ``_`` are notes). ``lang`` is one of the files' names (the app checks it: :func:`~.app.messages`)."""
    texts = json.loads((files("consensus_eval.review") / "i18n" / f"{lang}.json").read_text(encoding="utf-8"))
    return Messages(lang, {k: v for k, v in texts.items() if not k.startswith("_")})


class ActionError(ValueError):
    """An action the app cannot apply (unknown case, dimension or deduction, a score out of range...), said as a
    message of the review pages' catalogues: ``key`` (an ``err_`` key of ``i18n/<lang>.json``) and the
    ``params`` its placeholders take (ids and values as text). :meth:`text` says it in a page's language;
    ``str()`` is the English text (what the JSON API, the command line and the logs show)."""

    def __init__(self, key: str, /, **params: Any) -> None:
        self.key = key
        self.params = params
        super().__init__(self.text(catalogue("en")))

    def text(self, t: Messages) -> str:
        """The refusal in ``t``'s language."""
        return t(self.key, **self.params)


def clean_reviewer(name: str) -> str:
    """A reviewer's name as stored (:func:`consensus_eval.domain.reviewers.clean_name`); an
    :class:`ActionError` says what is wrong with it (``clean_name``'s rules, in its order)."""
    try:
        return clean_name(name)
    except ValueError:
        if any(unicodedata.category(c).startswith("C") for c in name.strip()):
            raise ActionError("err_name_control") from None
        if not name.split():
            raise ActionError("err_name_empty") from None
        raise ActionError("err_name_long", max=MAX_NAME) from None


# --------------------------------------------------------------------------- texts with evidence marks


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


# --------------------------------------------------------------------------- one case as the page shows it


@dataclass
class ItemView:
    """One line of a judge's drill-down on the page (a deduction, once for every run that made it),
    with this reviewer's verdict and comment. ``n`` numbers it on the page (its evidence marks carry
    it); ``ids`` are the deduction ids of its occurrences (what the verdict is stored against)."""

    n: int
    ids: list[str]
    judge: str
    kind: str
    category: str
    type: str
    points: float
    evidence: str
    reason: str
    runs_label: str
    applied_once: bool
    grounding: str | None
    grounding_score: float | None
    grounded: bool
    sections: list[str]
    matched_by: list[str]
    verdict: str | None = None
    comment: str = ""
    #: the version of the reviewer's verdict and comment on it (what a save names: a stale tab is refused)
    version: int = 0


@dataclass
class JudgeColumn:
    """One judge on one dimension: its score (mean of its runs), stars, failures and items."""

    judge: str
    score: float | None
    stars: int | None
    runs_failed: int
    errors: list[str]
    items: list[ItemView]
    #: a likert dimension: the level of each of the judge's successful runs, with its anchor and evidence
    ratings: list[RatingItem] = field(default_factory=list)
    #: the page number of each of ``ratings`` (its evidence marks carry it)
    rating_ns: list[int] = field(default_factory=list)


@dataclass
class AddedView:
    """A deduction this reviewer added (one the judges missed)."""

    id: str
    type_id: str
    type_name: str
    points: float | None
    comment: str
    evidence: str = ""


@dataclass
class TypeChoice:
    """A deduction type (or fixed penalty) a reviewer can add on a dimension: ``low``-``high`` points."""

    id: str
    label: str
    low: float
    high: float
    #: a fixed penalty (the page puts its word for "fixed penalty" before the label)
    penalty: bool = False


@dataclass
class CriterionView:
    """One criterion of a ``criteria`` dimension on the page: the judges' verdicts (judge -> each run's met /
    not met, with evidence), whether they split, and this reviewer's own verdict (``mine``: ``met`` /
    ``not_met`` / None), its origin (``own`` / ``accepted``), evidence and comment."""

    id: str
    text: str
    points: float
    judges: list[tuple[str, list[bool], list[str]]]
    split: bool
    mine: str | None = None
    origin: str | None = None
    evidence: str = ""
    comment: str = ""
    #: its number on the page (the judges' evidence marks for it carry it)
    n: int = 0
    #: the version of the reviewer's verdict on it
    version: int = 0
    #: a verdict given blind and changed once the judges were shown: the later one (the blind one is ``mine``)
    revision: str | None = None


@dataclass
class DimView:
    """One dimension of the case on the page (``kind``: ``likert`` shows ``levels``, level and anchor text,
    as a scale; ``criteria`` shows ``criteria``, a met / not met toggle each)."""

    id: str
    name: str
    max: float
    panel_score: float | None
    my_score: float | None
    comment: str
    star_gap: int
    spread: float | None
    judges: list[JudgeColumn]
    types: list[TypeChoice]
    added: list[AddedView]
    #: where ``my_score`` came from: ``own`` or ``accepted`` (the panel's, confirmed); None without a score
    my_origin: str | None = None
    kind: str = "deductions"
    levels: list[tuple[int, str]] = field(default_factory=list)
    criteria: list[CriterionView] = field(default_factory=list)
    #: the versions of the reviewer's score and of their comment on the dimension
    version: int = 0
    comment_version: int = 0
    #: a score given blind (a spot-check case) and changed once the judges were shown: the later score (None: not
    #: revised). ``my_score`` stays the blind one: validity uses it
    revision: float | None = None

    @property
    def my_level(self) -> int | None:
        """A likert dimension's level the reviewer picked themselves (None: none, or the panel's accepted)."""
        mine = self.my_current
        if mine is None or self.my_origin == "accepted" or not float(mine).is_integer():
            return None
        return int(mine)

    @property
    def my_current(self) -> float | None:
        """The reviewer's score as it stands: the revision when there is one, else the score."""
        return self.revision if self.revision is not None else self.my_score

    @property
    def shown_score(self) -> float | None:
        """What the score field shows: the reviewer's score (revised, if it was), else the panel's."""
        return self.my_current if self.my_current is not None else self.panel_score


@dataclass
class CaseView:
    """One case as a reviewer sees it: the texts with evidence marks, the dimensions, their labels."""

    audit: CaseAudit
    record: list[Block]
    conversation: list[Block]
    dims: list[DimView]
    comment: str
    state: str  # done | started | todo
    #: a case of the random spot check (:mod:`consensus_eval.analysis.spotcheck`)
    spot: bool = False
    #: a spot-check case this reviewer has not scored on every dimension yet: the page shows no panel or
    #: judge score, no deduction and no evidence mark, so the reviewer's own score is not anchored by them
    blind: bool = False
    #: the version of the reviewer's comment on the case
    comment_version: int = 0
    #: the reviewer is the team's adjudicator: the page is for reading; their decisions are references, given on
    #: the adjudication page (``reference``: dimension id -> the reference score given, if any)
    adjudicator: bool = False
    reference: dict[str, float] = field(default_factory=dict)


@dataclass
class QueueRow:
    """One case in the queue with this reviewer's progress on it (``state`` done | started | todo)."""

    audit: CaseAudit
    state: str
    #: the dimensions and judges the row stands out on (computed only when the queue is filtered by them)
    dimensions: list[str]
    judges: list[str]
    spot: bool = False
    blind: bool = False


@dataclass
class Filters:
    """The queue's filters (all optional): ``scope`` ``review`` (cases that need review, the default),
    ``mine`` (the cases assigned to this reviewer: the default for a reviewer with assignments), ``spot``
    (the random spot check) or ``all``; ``reason`` a reason code; ``dimension`` (a dimension
    with a deduction or a gap between judges); ``judge`` (a judge that deducted something or failed on the
    case); ``state`` done | started | todo (this reviewer's)."""

    scope: str = "review"
    reason: str = ""
    dimension: str = ""
    judge: str = ""
    state: str = ""
    #: a case id, or part of one (case-insensitive)
    q: str = ""

    @classmethod
    def from_query(cls, q: Mapping[str, str], default_scope: str = "review") -> Filters:
        scope = q.get("scope", default_scope)
        return cls(scope=scope if scope in ("all", "spot", "mine") else "review", reason=q.get("reason", ""),
                   dimension=q.get("dimension", ""), judge=q.get("judge", ""), state=q.get("state", ""),
                   q=q.get("q", "").strip()[:200])

    def query(self) -> dict[str, str]:
        """The non-default filters, as query parameters."""
        out = {"scope": self.scope} if self.scope != "review" else {}
        out.update({k: v for k, v in (("reason", self.reason), ("dimension", self.dimension),
                                      ("judge", self.judge), ("state", self.state), ("q", self.q)) if v})
        return out


@dataclass
class Progress:
    """This reviewer's progress over the cases that need review (``done`` of ``total``)."""

    done: int
    started: int
    total: int

    @property
    def text(self) -> str:
        return f"{self.done} of {self.total} done"


@dataclass
class MemberProgress:
    """One reviewer of the team on the QA lead's page: role, cases assigned, done and started."""

    name: str
    role: str
    assigned: int
    done: int
    started: int


@dataclass
class CaseProgress:
    """One assigned or reviewed case on the QA lead's page: who reviews it and how far (``states``:
    reviewer -> done | started | todo), the widest gap between two reviewers' own scores of a dimension
    (``gap``, None below two complete reviews), the judges' deductions one reviewer agreed with and another
    did not (``conflicts``, lines of the drill-down), whether it needs adjudication (two reviewers' scores
    apart by :func:`~consensus_eval.domain.flags.reviewers_apart`, or a verdict conflict) and who adjudicated
    it (empty: not yet)."""

    audit: CaseAudit
    states: dict[str, str]
    gap: float | None
    needs_adjudication: bool
    adjudicated_by: list[str]
    conflicts: int = 0


@dataclass
class AdjudicationDim:
    """One dimension on the adjudicator's page: each reviewer's own score, the panel's, the reference so far
    (``kind`` ``likert``: a level among ``levels``, each with its anchor text, as on the review page)."""

    id: str
    name: str
    max: float
    panel: float | None
    scores: dict[str, float]
    reference: float | None
    kind: str = "deductions"
    levels: list[tuple[int, str]] = field(default_factory=list)

    @property
    def reference_level(self) -> int | None:
        """A likert dimension's reference level so far (None: none given)."""
        if self.reference is None or not float(self.reference).is_integer():
            return None
        return int(self.reference)

    def picked(self, level: int) -> list[str]:
        """The reviewers whose own score of a likert dimension is ``level``."""
        return [n for n, sc in self.scores.items() if sc == level]


@dataclass
class VerdictConflict:
    """A judge's deduction (one line of its drill-down: ``ids``, one per run that made it) that one reviewer
    agreed with and another did not, as the adjudicator sees it: each reviewer's ``verdicts`` (and
    ``comments``), the reference verdict given so far (None: not yet)."""

    ids: list[str]
    judge: str
    dimension: str
    kind: str
    category: str
    type: str
    points: float
    evidence: str
    reason: str
    verdicts: dict[str, str]
    comments: dict[str, str]
    reference: str | None

    @property
    def key(self) -> str:
        """The form field's name of its reference verdict."""
        return "verdict_" + self.ids[0]


def verdict_lines(a: CaseAudit, review: CaseReview | None, conflicts_only: bool = True) -> list[VerdictConflict]:
    """The lines of the judges' drill-downs of ``a`` the reviewers' verdicts disagree on (an ``agree`` and a
    ``disagree`` from two reviewers; ``conflicts_only`` False: every line with a verdict), in page order."""
    if review is None or not review.verdicts:
        return []
    comments = {(lb.deduction_id, lb.reviewer): lb.comment or "" for lb in review.comments if lb.deduction_id}
    out = []
    for dim in a.dimensions:
        for jv in dim.judges:
            for group in jv.drill_down():
                for it in group.items:
                    ids = it.label_ids
                    verdicts: dict[str, str] = {}
                    notes: dict[str, str] = {}
                    for i in ids:
                        verdicts.update(review.verdicts.get(i, {}))
                        notes.update({r: c for r in review.verdicts.get(i, {}) if (c := comments.get((i, r)))})
                    if not verdicts or (conflicts_only and not {"agree", "disagree"} <= set(verdicts.values())):
                        continue
                    d = it.deduction
                    ref = next((review.reference_verdicts[i] for i in ids if i in review.reference_verdicts), None)
                    out.append(VerdictConflict(ids, d.judge, dim.name, d.kind, d.category, d.type, d.points,
                                               d.evidence, d.reason, verdicts, notes, ref))
    return out


@dataclass
class CriterionConflict:
    """A criterion one reviewer found met and another not (their own verdicts), as the adjudicator sees it:
    each reviewer's ``verdicts`` (True: met) with the ``evidence`` and ``comments`` they gave with them (reviewer
    -> text; absent: none), the reference verdict given so far (None: not yet)."""

    dimension: str
    dimension_name: str
    id: str
    text: str
    points: float
    verdicts: dict[str, bool]
    reference: bool | None
    evidence: dict[str, str] = field(default_factory=dict)
    comments: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The form field's name of its reference verdict."""
        return f"criterion_{self.dimension}:{self.id}"


def criterion_conflicts(a: CaseAudit, review: CaseReview | None,
                        labels: Sequence[HumanLabelRecord] = ()) -> list[CriterionConflict]:
    """The criteria of ``a`` two reviewers' own verdicts disagree on, in page order; ``labels`` (the case's):
    where each reviewer's evidence and comment on them are read (none given: none shown)."""
    if review is None or not review.criteria:
        return []
    notes = {(lb.dimension, lb.deduction_id, lb.reviewer): lb for lb in labels
             if lb.case_id == a.case_id and lb.kind == "criterion" and lb.origin == "own"}
    out = []
    for dim in a.dimensions:
        for row in dim.criteria:
            said = {rv: given[dim.dimension][row.id] for rv, given in review.criteria.items()
                    if row.id in given.get(dim.dimension, {})}
            if len(set(said.values())) > 1:
                given_by = {rv: lb for rv in said if (lb := notes.get((dim.dimension, row.id, rv)))}
                out.append(CriterionConflict(dim.dimension, dim.name, row.id, row.text, row.points, said,
                                             review.reference_criteria.get(dim.dimension, {}).get(row.id),
                                             {rv: lb.evidence for rv, lb in given_by.items() if lb.evidence},
                                             {rv: lb.comment for rv, lb in given_by.items() if lb.comment}))
    return out


def _in_conflict(review: CaseReview | None) -> bool:
    """Whether two reviewers' verdicts on one deduction id disagree (agree and disagree): a cheap test before
    :func:`verdict_lines`."""
    return review is not None and any({"agree", "disagree"} <= set(by.values()) for by in review.verdicts.values())


def score_gaps(review: CaseReview | None, dims: Sequence[str]) -> dict[str, float] | None:
    """Per dimension the widest gap between two reviewers' own scores, over the reviewers who scored every
    dimension (None: fewer than two of them). ``dims``: the dimensions scored as such (a criteria dimension's
    disagreements are its criteria: :func:`criterion_conflicts`)."""
    if review is None or not dims:
        return None
    complete = [sc for sc in review.scores.values() if all(d in sc for d in dims)]
    if len(complete) < 2:
        return None
    return {d: max(sc[d] for sc in complete) - min(sc[d] for sc in complete) for d in dims}


def score_gap(review: CaseReview | None, dims: Sequence[str]) -> float | None:
    """The widest of :func:`score_gaps` (None: fewer than two reviewers scored every dimension)."""
    gaps = score_gaps(review, dims)
    return max(gaps.values()) if gaps else None


def scores_apart(review: CaseReview | None, dims: Sequence[Dimension], config: ConsensusConfig) -> bool:
    """Whether two reviewers' own scores of some dimension of ``dims`` (those scored as such) send the case to
    adjudication (:func:`~consensus_eval.domain.flags.reviewers_apart`: levels ``flag_level_gap`` apart on a
    likert dimension, more than :data:`~consensus_eval.domain.flags.ADJUDICATE_GAP` points on another)."""
    gaps = score_gaps(review, [d.id for d in dims])
    return gaps is not None and any(reviewers_apart(d.kind, gaps[d.id], config) for d in dims)


#: what identifies one of a reviewer's labels of a case (the store's key without reviewer and case):
#: (kind, dimension or "", deduction id or "")
LabelKey = tuple[str, str, str]


def covered(keys: Mapping[LabelKey, str], needs: Mapping[str, frozenset[str]]) -> set[str]:
    """The dimensions these label keys (of one reviewer on one case) cover: those with a score, and the criteria
    dimensions (``needs``: dimension -> its criteria's ids) with a verdict on every criterion."""
    out = {dim for kind, dim, _ in keys if kind == "score"}
    if needs:
        judged: dict[str, set[str]] = {}
        for kind, dim, cid in keys:
            if kind == "criterion":
                judged.setdefault(dim, set()).add(cid)
        out |= {dim for dim, ids in needs.items() if ids and ids <= judged.get(dim, set())}
    return out


@dataclass
class Ledger:
    """One reviewer's labels as a save needs them, kept up to date on every save so that a save's answer
    (the case's state, the reviewer's progress) costs the same at 20 cases as at 20,000.

    ``labels``: case id -> key of each of their labels there -> its origin; ``pool``: the cases their
    progress counts (their assigned cases, else the cases that need review); ``done`` / ``started``: how
    many of the pool are done / started (:meth:`ReviewRun.states`'s rule)."""

    dims: frozenset[str]
    labels: dict[str, dict[LabelKey, str]]
    pool: frozenset[str]
    assigned: frozenset[str]
    done: int = 0
    started: int = 0
    #: case id -> criteria dimension id -> its criteria's ids (empty: the rubric has no criteria dimension)
    needs: Mapping[str, Mapping[str, frozenset[str]]] = field(default_factory=dict)
    #: the spot-check cases whose judges were shown to the reviewer (their blind scores are frozen)
    revealed: set[str] = field(default_factory=set)

    def state(self, case_id: str) -> str:
        """done | started | todo: done when every dimension of the rubric is covered (a score of any origin; a
        criteria dimension: a verdict on each of its criteria)."""
        keys = self.labels.get(case_id)
        if not keys:
            return "todo"
        return "done" if covered(keys, self.needs.get(case_id, {})) >= self.dims else "started"

    def own_scored(self, case_id: str) -> int:
        """How many dimensions of ``case_id`` the reviewer covered with their own judgement."""
        keys = self.labels.get(case_id, {})
        return len(self.dims & covered({k: o for k, o in keys.items() if o == "own"}, self.needs.get(case_id, {})))

    def count(self, case_id: str, sign: int) -> None:
        if case_id in self.pool:
            st = self.state(case_id)
            self.done += sign * (st == "done")
            self.started += sign * (st == "started")


@dataclass
class ReviewRun:
    """A run opened for review: the results (read once), the queue, and the store the labels go to."""

    folder: Path
    results: Results
    queue: ReviewQueue
    store: Store
    cases: dict[str, Case]
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: reviewer -> their :class:`Ledger`, read from the store at first use and after another connection wrote
    #: to it (``data_version``: a sheet imported, cases assigned while the server runs)
    _ledgers: dict[str, Ledger] = field(default_factory=dict)
    _version: int | None = None

    @cached_property
    def spot(self) -> frozenset[str]:
        """The case ids of the random spot check (empty: none drawn; read with the run, once)."""
        return frozenset(r.case_id for r in self.results.spot_checks)

    @cached_property
    def _needs_review(self) -> frozenset[str]:
        return frozenset(a.case_id for a in self.queue.cases if a.needs_review)

    @cached_property
    def criteria_needed(self) -> dict[str, dict[str, frozenset[str]]]:
        """case id -> criteria dimension id -> the ids of the criteria a reviewer judges there (empty without a
        criteria dimension)."""
        dims = [d for d in self.results.rubric.dimensions if d.kind == "criteria"]
        if not dims:
            return {}
        return {cid: {d.id: frozenset(c.id for c in (d.criteria or case.criteria or [])) for d in dims}
                for cid, case in self.cases.items()}

    def criteria_of(self, case_id: str, dim: Dimension) -> list[Criterion]:
        """The criteria of a criteria dimension for one case: the rubric's, else the case's own."""
        case = self.cases.get(case_id)
        return list(dim.criteria or (case.criteria if case else None) or [])

    def blind(self, reviewer: str, case_id: str) -> bool:
        """Whether ``case_id`` is blind to ``reviewer``: a spot-check case whose judges were not shown to them yet
        and that they have not scored on every dimension with their own score (an adjudicator: a spot-check case
        they have given no reference on yet)."""
        if case_id not in self.spot:
            return False
        if self.role(reviewer) == "adjudicator":
            return not any(lb.case_id == case_id for lb in self.labels(reviewer) if lb.origin == "reference")
        with self.lock:
            return self._blind(self._ledger(reviewer), case_id)

    def role(self, reviewer: str) -> str | None:
        """``reviewer``'s role in the team (None: not in it, or no team)."""
        return next((m.role for m in self.team() if m.name == reviewer), None)

    def ledger(self, reviewer: str) -> Ledger:
        """``reviewer``'s :class:`Ledger` (read again from the store when another connection wrote to it)."""
        with self.lock:
            return self._ledger(reviewer)

    def _ledger(self, reviewer: str) -> Ledger:
        """:meth:`ledger`, with :attr:`lock` held."""
        version = self.store.data_version()
        if version != self._version:
            self._ledgers.clear()
            self._version = version
        found = self._ledgers.get(reviewer)
        if found is not None:
            return found
        assigned = frozenset(c for c, name in self.store.assignments() if name == reviewer)
        dims = frozenset(d.id for d in self.dimensions)
        ledger = Ledger(dims, {}, assigned or self._needs_review, assigned, needs=self.criteria_needed,
                        revealed=self.store.revealed_cases(reviewer))
        for lb in self.store.human_labels(reviewer=reviewer):
            ledger.labels.setdefault(lb.case_id, {})[_key(lb)] = lb.origin
        for case_id in ledger.labels:
            ledger.count(case_id, +1)
        self._ledgers[reviewer] = ledger
        return ledger

    @classmethod
    def open(cls, folder: str | Path) -> ReviewRun:
        """Read the run in ``folder`` (its store must exist) and open its store for the labels."""
        out = Path(folder)
        results = load_run(out)
        queue = review_queue(results.audit, len(results.judges))
        store = Store.open_existing(out)
        return cls(out, results, queue, store, {c.id: c for c in results.cases})

    def close(self) -> None:
        with self.lock:
            self.store.close()

    # ------------------------------------------------------------------ reading

    def team(self) -> list[ReviewerRecord]:
        """The run's reviewers (empty: one-token mode), read at each call: a reviewer added while the server
        runs can open their link at once."""
        with self.lock:
            return self.store.reviewers()

    def reviewer_by_key(self, key: str) -> ReviewerRecord | None:
        """The team's reviewer whose personal key this is (None: not a key of this run)."""
        with self.lock:
            return self.store.reviewer_by_key(key)

    def labels(self, reviewer: str) -> list[HumanLabelRecord]:
        with self.lock:
            return self.store.human_labels(reviewer=reviewer)

    def all_labels(self) -> list[HumanLabelRecord]:
        with self.lock:
            return self.store.human_labels()

    @property
    def dimensions(self) -> list[Dimension]:
        return list(self.results.rubric.dimensions)

    @property
    def done_wording(self) -> str:
        """Which words say when a case is done (the suffix of the ``done_rule`` / ``progress_title`` texts):
        ``""`` a score for every dimension, ``"_criteria"`` a verdict on every criterion (own or accepted),
        ``"_mixed"`` both, for a rubric with criteria dimensions beside others."""
        kinds = self.results.rubric.kinds
        if "criteria" not in kinds:
            return ""
        return "_criteria" if kinds == {"criteria"} else "_mixed"

    def states(self, labels: Sequence[HumanLabelRecord]) -> dict[str, str]:
        """case id -> done | started for the cases these labels touch (of one reviewer)."""
        dims = {d.id for d in self.dimensions}
        needs = self.criteria_needed
        if needs:
            keys: dict[str, dict[LabelKey, str]] = {}
            for lb in labels:
                keys.setdefault(lb.case_id, {})[_key(lb)] = lb.origin
            return {c: "done" if covered(k, needs.get(c, {})) >= dims else "started" for c, k in keys.items()}
        scored: dict[str, set[str]] = {}
        touched: set[str] = set()
        for lb in labels:
            touched.add(lb.case_id)
            if lb.kind == "score" and lb.dimension in dims:
                scored.setdefault(lb.case_id, set()).add(lb.dimension)
        return {c: "done" if scored.get(c, set()) >= dims else "started" for c in touched}

    def assignments(self) -> dict[str, list[str]]:
        """case id -> the reviewers assigned to it (empty: nothing assigned; ``reviewers assign``)."""
        out: dict[str, list[str]] = {}
        with self.lock:
            pairs = self.store.assignments()
        for case_id, name in pairs:
            out.setdefault(case_id, []).append(name)
        return out

    def team_progress(self) -> tuple[list[MemberProgress], list[CaseProgress]]:
        """The QA lead's view: per reviewer of the team (or, without a team, per reviewer who labelled) their
        progress; per case assigned or scored by someone, who reviewed it, their gap, and adjudication."""
        labels = self.all_labels()
        assignments = self.assignments()
        by_reviewer: dict[str, list[HumanLabelRecord]] = {}
        for lb in labels:
            by_reviewer.setdefault(lb.reviewer, []).append(lb)
        team = {m.name: m.role for m in self.team()}
        names = list(dict.fromkeys([*team, *(lb.reviewer for lb in labels if lb.origin != "reference")]))
        states = {n: self.states([lb for lb in by_reviewer.get(n, []) if lb.origin != "reference"]) for n in names}
        members = []
        for n in names:
            mine = {c for c, who in assignments.items() if n in who}
            st = states[n]
            pool = mine or set(st)
            members.append(MemberProgress(n, team.get(n, "reviewer"), len(mine), sum(st.get(c) == "done" for c in pool),
                                          sum(st.get(c) == "started" for c in pool)))
        review = build_review(labels, self.results.rubric, case_criteria=self.results.case_criteria) if labels else None
        dims = self._scored_dims
        scored_dims = self._scored
        cases = []
        for a in self.queue.cases:
            who = assignments.get(a.case_id, [])
            scored = [n for n in names if states[n].get(a.case_id)]
            if not who and not scored:
                continue
            cr = review.case(a.case_id) if review else None
            gap = score_gap(cr, dims)
            conflicts = (len(verdict_lines(a, cr)) if _in_conflict(cr) else 0) + len(criterion_conflicts(a, cr))
            cases.append(CaseProgress(a, {n: states[n].get(a.case_id, "todo") for n in dict.fromkeys([*who, *scored])},
                                      gap, scores_apart(cr, scored_dims, self._consensus) or conflicts > 0,
                                      list(cr.adjudicators) if cr else [], conflicts))
        return members, cases

    @property
    def _scored(self) -> list[Dimension]:
        """The dimensions a reviewer scores as such (not criteria dimensions: those are judged criterion by
        criterion, and adjudicated so)."""
        return [d for d in self.dimensions if d.kind != "criteria"]

    @property
    def _scored_dims(self) -> list[str]:
        return [d.id for d in self._scored]

    @property
    def _consensus(self) -> ConsensusConfig:
        return self.results.config.consensus

    @property
    def gap_wording(self) -> str:
        """Which words say when reviewers' scores are close enough for reference scores to be optional (the
        suffix of the ``adjudicate_scores_optional`` text): ``""`` points, ``"_levels"`` likert levels,
        ``"_mixed"`` both."""
        kinds = {d.kind for d in self._scored}
        if "likert" not in kinds:
            return ""
        return "_levels" if kinds == {"likert"} else "_mixed"

    @property
    def level_gap(self) -> float:
        """The config's ``flag_level_gap``: likert levels this far apart are a dispute."""
        return self._consensus.flag_level_gap

    def adjudication_view(self, rank: int) -> list[AdjudicationDim]:
        """The case at ``rank`` as the adjudicator sees it: per dimension scored as such each reviewer's own
        score (a criteria dimension's disagreements are :meth:`criterion_conflicts`)."""
        a = self.case_at(rank)
        cr = self._case_review(a)
        given = cr.scores if cr else {}
        scored = {d.id: d for d in self._scored}
        return [AdjudicationDim(d.dimension, d.name, d.max, d.panel_score,
                                {n: sc[d.dimension] for n, sc in given.items() if d.dimension in sc},
                                cr.reference.get(d.dimension) if cr else None, scored[d.dimension].kind,
                                sorted(scored[d.dimension].levels.items()))
                for d in a.dimensions if d.dimension in scored]

    def adjudication_blind(self, rank: int) -> bool:
        """Whether the adjudication of the case at ``rank`` is blind: a spot-check case without a reference yet (its
        form shows the reviewers' blind scores, never the panel's or a judge's, until the reference is saved)."""
        a = self.case_at(rank)
        return a.case_id in self.spot and not any(lb.origin == "reference" for lb in self._case_labels(a))

    def criterion_conflicts(self, rank: int) -> list[CriterionConflict]:
        """The criteria of the case at ``rank`` one reviewer found met and another not, with each reviewer's
        evidence and comment."""
        a = self.case_at(rank)
        labels = self._case_labels(a)
        return criterion_conflicts(a, self._review_of(a, labels), labels)

    def _case_labels(self, a: CaseAudit) -> list[HumanLabelRecord]:
        return [lb for lb in self.all_labels() if lb.case_id == a.case_id]

    def _review_of(self, a: CaseAudit, labels: Sequence[HumanLabelRecord]) -> CaseReview | None:
        return build_review(labels, self.results.rubric, case_criteria=self.results.case_criteria).case(a.case_id) \
            if labels else None

    def _case_review(self, a: CaseAudit) -> CaseReview | None:
        return self._review_of(a, self._case_labels(a))

    def verdict_conflicts(self, rank: int) -> list[VerdictConflict]:
        """The judges' deductions of the case at ``rank`` one reviewer agreed with and another did not."""
        a = self.case_at(rank)
        return verdict_lines(a, self._case_review(a))

    def scores_needed(self, rank: int) -> bool:
        """Whether adjudicating the case at ``rank`` takes reference scores: its reviewers' scores are apart
        (:func:`scores_apart`), or nothing else is to be settled (no verdict conflict)."""
        a = self.case_at(rank)
        cr = self._case_review(a)
        if not self._scored:
            return False
        return scores_apart(cr, self._scored, self._consensus) or not (verdict_lines(a, cr)
                                                                       or criterion_conflicts(a, cr))

    def adjudicate(self, adjudicator: str, rank: int, scores: Mapping[str, Any],
                   verdicts: Mapping[str, Any] | None = None, criteria: Mapping[str, Any] | None = None, *,
                   action_id: str | None = None, session: str | None = None) -> None:
        """Store the adjudicator's decisions on the case at ``rank``, as labels of origin ``reference`` kept apart
        from the reviewers' own: a reference score of every dimension (needed when the reviewers' scores are
        apart, :func:`scores_apart`, or there is no verdict conflict; else optional, all or none; a likert
        dimension's is one of its levels, as a reviewer's own score, never between two),
        and a reference verdict on every deduction the reviewers' verdicts disagree on (``verdicts``: the
        conflict's :attr:`VerdictConflict.key` -> agree / disagree / unsure), stored on each of its ids; a
        reference verdict on every criterion two reviewers disagree on (``criteria``: the conflict's
        :attr:`CriterionConflict.key` -> met / not_met), a ``criterion`` label of origin ``reference`` (a criteria
        dimension takes no reference score: its score is the one the reference verdicts give). Nothing is stored
        unless all of it is given; it is stored as one write (``action_id``: a form sent twice stores once)."""
        a = self.case_at(rank)
        cr = self._case_review(a)
        conflicts = verdict_lines(a, cr)
        crit_conflicts = criterion_conflicts(a, cr)
        scored = self._scored
        given = {k: v for k, v in scores.items() if v not in (None, "")}
        if scored and (given or scores_apart(cr, scored, self._consensus) or not (conflicts or crit_conflicts)):
            for d in scored:
                if d.id not in given:
                    raise ActionError("err_give_reference_level" if d.kind == "likert" else "err_give_reference_score",
                                      dim=d.id)
        values = {d.id: _score_value(given[d.id], d, "reference") for d in scored if d.id in given}
        settled: list[tuple[CriterionConflict, bool]] = []
        for cc in crit_conflicts:
            said = (criteria or {}).get(cc.key)
            if said not in ("met", "not_met"):
                raise ActionError("err_give_reference_criterion", id=cc.id, dim=cc.dimension)
            settled.append((cc, said == "met"))
        decided: list[tuple[VerdictConflict, Verdict]] = []
        for c in conflicts:
            v = (verdicts or {}).get(c.key)
            if v not in VERDICTS:
                raise ActionError("err_give_reference_verdict", judge=c.judge, type=c.type, dim=c.dimension)
            decided.append((c, v))
        plan = _Plan(adjudicator, a.case_id)
        for dim_id, value in values.items():
            plan.put(HumanLabelRecord(case_id=a.case_id, dimension=dim_id, reviewer=adjudicator, kind="score",
                                      value=value, origin="reference"))
        for cc, met in settled:
            plan.put(HumanLabelRecord(case_id=a.case_id, dimension=cc.dimension, deduction_id=cc.id,
                                      reviewer=adjudicator, kind="criterion", value="met" if met else "not_met",
                                      points=cc.points, origin="reference"))
        dim_of = {x.id: x.dimension for dim in a.dimensions for jv in dim.judges for x in jv.deductions}
        for c, v in decided:
            for i in c.ids:
                plan.put(HumanLabelRecord(case_id=a.case_id, dimension=dim_of.get(i), deduction_id=i,
                                          reviewer=adjudicator, kind="verdict", value=v, origin="reference"))
        self._write(plan, action_id, session)

    def assigned(self, reviewer: str) -> frozenset[str]:
        """The case ids assigned to ``reviewer`` (empty: none)."""
        return self.ledger(reviewer).assigned

    def progress(self, reviewer: str) -> Progress:
        """Done / started of the reviewer's assigned cases, or, with none assigned, of the cases that need review
        (from their :class:`Ledger`: no pass over the run's cases)."""
        ledger = self.ledger(reviewer)
        return Progress(done=ledger.done, started=ledger.started, total=len(ledger.pool))

    def case_at(self, rank: int) -> CaseAudit:
        if not 1 <= rank <= len(self.queue.cases):
            raise ActionError("err_no_case", rank=rank, n=len(self.queue.cases))
        return self.queue.cases[rank - 1]

    def rows(self, reviewer: str, filters: Filters) -> list[QueueRow]:
        """The queue's cases that pass ``filters``, in the audit's order."""
        labels = self.labels(reviewer)
        states = self.states(labels)
        spot = self.spot
        mine = self.assigned(reviewer) if filters.scope == "mine" else set()
        own_scored = self._own_scored(labels, self.criteria_needed) if spot else {}
        n_dims = len(self.dimensions)
        needle = filters.q.lower()
        out = []
        for a in self.queue.cases:     # the cheap tests first: a queue of 20,000 cases is read on every page
            case_id = a.case_id
            if filters.scope == "review" and not a.needs_review:
                continue
            if filters.scope == "spot" and case_id not in spot:
                continue
            if filters.scope == "mine" and case_id not in mine:
                continue
            if needle and needle not in case_id.lower():
                continue
            state = states.get(case_id, "todo")
            if filters.state and state != filters.state:
                continue
            if filters.reason and filters.reason not in {r.code for r in a.reasons}:
                continue
            dims = [d.dimension for d in a.dimensions
                    if any(jv.deductions for jv in d.judges) or d.star_gap or (d.spread or 0) > 0] \
                if filters.dimension else []
            judges = list(dict.fromkeys(jv.judge for d in a.dimensions for jv in d.judges
                                        if jv.deductions or jv.errors)) if filters.judge else []
            if filters.dimension and filters.dimension not in dims:
                continue
            if filters.judge and filters.judge not in judges:
                continue
            in_spot = case_id in spot
            out.append(QueueRow(a, state, dims, judges, in_spot, in_spot and own_scored.get(case_id, 0) < n_dims))
        return out

    @staticmethod
    def _own_scored(labels: Sequence[HumanLabelRecord],
                    needs: Mapping[str, Mapping[str, frozenset[str]]] | None = None) -> dict[str, int]:
        """case id -> how many dimensions these labels (one reviewer's) cover with their own judgement (a score;
        a criteria dimension, ``needs``: a verdict on each of its criteria)."""
        if needs:
            keys: dict[str, dict[LabelKey, str]] = {}
            for lb in labels:
                if lb.origin == "own":
                    keys.setdefault(lb.case_id, {})[_key(lb)] = lb.origin
            return {c: len(covered(k, needs.get(c, {}))) for c, k in keys.items()}
        dims: dict[str, set[str]] = {}
        for lb in labels:
            if lb.kind == "score" and lb.origin == "own" and lb.dimension:
                dims.setdefault(lb.case_id, set()).add(lb.dimension)
        return {c: len(d) for c, d in dims.items()}

    def neighbours(self, reviewer: str, rank: int, filters: Filters) -> tuple[int | None, int | None]:
        """The ranks of the previous and next case of the filtered queue around ``rank``."""
        ranks = [r.audit.rank for r in self.rows(reviewer, filters)]
        before = [r for r in ranks if r < rank]
        after = [r for r in ranks if r > rank]
        return (before[-1] if before else None, after[0] if after else None)

    def case_view(self, reviewer: str, rank: int, *, session: str | None = None) -> CaseView:
        """The case at ``rank`` of the queue, with ``reviewer``'s labels filled in (an adjudicator's references are
        not theirs: the page shows them apart). A spot-check case shown with its judges for the first time to this
        reviewer is recorded as revealed (``session``: the review session's tag): their blind scores are frozen."""
        a = self.case_at(rank)
        case = self.cases[a.case_id]
        rubric = self.results.rubric
        events = self.store.label_events(reviewer=reviewer, case_id=a.case_id)
        folded = fold(events)
        mine = _Mine(reviewer, a.case_id, [lb for lb in folded if lb.origin != "reference"], versions(events))
        adjudicator = self.role(reviewer) == "adjudicator"
        blind = self.blind(reviewer, a.case_id)
        if not blind and not adjudicator and a.case_id in self.spot:
            with self.lock:
                ledger = self._ledger(reviewer)
                if a.case_id not in ledger.revealed:
                    self._reveal(ledger, reviewer, [a.case_id], session)
        marks = _Marks()
        dims = [self._dim_view(a, dim, rubric.dimension(dim.dimension), mine, marks) for dim in a.dimensions]
        conv = rubric.conversation_text(case)   # what the judges read, and the evidence spans index into
        if blind:   # no evidence mark either: the marks show where the judges deducted
            marks = _Marks()
        sep = rubric.separator.strip() or rubric.separator
        return CaseView(
            audit=a, record=mark_text(case.record, record_blocks(case.record, Sections.of(rubric)), marks.record),
            conversation=mark_text(conv, line_blocks(conv, sep), marks.conversation), dims=dims,
            comment=mine.note(None), state=self.states(mine.labels).get(a.case_id, "todo"),
            spot=a.case_id in self.spot, blind=blind, comment_version=mine.version("comment", None),
            adjudicator=adjudicator,
            reference={lb.dimension: float(lb.value) for lb in folded if lb.origin == "reference"
                       and lb.kind == "score" and lb.dimension and isinstance(lb.value, (int, float))})

    def _dim_view(self, a: CaseAudit, dim: DimensionAudit, rd: Dimension, mine: _Mine, marks: _Marks) -> DimView:
        """One dimension of :meth:`case_view`: the judges' columns, the types a reviewer may add, their labels."""
        types = [TypeChoice(t.id, f"{c.name} / {t.name} (−{t.points_text()})", t.low, t.high)
                 for c in rd.categories for t in c.types]
        types += [TypeChoice(p.id, f"{p.name} (−{p.points:g})", p.points, p.points, penalty=True)
                  for p in rd.fixed_penalties]
        names = {t.id: t.label for t in types}
        columns = [self._judge_column(jv, mine, marks) for jv in dim.judges]
        crits = [self._criterion_view(dim, c, mine, marks) for c in self.criteria_of(a.case_id, rd)] \
            if dim.kind == "criteria" else []
        score = mine.get("score", dim.dimension)
        my = score.value if score else None
        return DimView(
            id=dim.dimension, name=dim.name, max=dim.max, panel_score=dim.panel_score,
            my_score=float(my) if isinstance(my, (int, float)) else None, comment=mine.note(dim.dimension),
            star_gap=dim.star_gap, spread=dim.spread, judges=columns, types=types,
            added=[AddedView(id=lb.deduction_id or "", type_id=str(lb.value),
                             type_name=names.get(str(lb.value), str(lb.value)), points=lb.points,
                             comment=lb.comment or "", evidence=lb.evidence or "")
                   for lb in mine.labels if lb.kind == "added_deduction" and lb.dimension == dim.dimension],
            my_origin=score.origin if score else None, kind=rd.kind, levels=sorted(rd.levels.items()),
            criteria=crits, version=mine.version("score", dim.dimension),
            comment_version=mine.version("comment", dim.dimension),
            revision=float(score.revision) if score and isinstance(score.revision, (int, float)) else None)

    def _judge_column(self, jv: JudgeView, mine: _Mine, marks: _Marks) -> JudgeColumn:
        """One judge's column of a dimension: its drill-down's lines with the reviewer's verdicts, its ratings."""
        items = []
        for group in jv.drill_down():
            for it in group.items:
                d = it.deduction
                g = d.grounding
                n = marks.next(g.spans if g else [])
                v = next((mine.verdicts[i] for i in it.ids if i in mine.verdicts), None)
                note = (v.comment or "") if v else next((mine.notes[i] for i in it.ids if i in mine.notes), "")
                items.append(ItemView(
                    n=n, ids=it.label_ids, judge=d.judge, kind=d.kind, category=d.category, type=d.type,
                    points=d.points, evidence=d.evidence, reason=d.reason,
                    runs_label=" ".join(x for x in (group.label, it.runs_label) if x),
                    applied_once=it.applied_once, grounding=g.kind if g else None,
                    grounding_score=g.score if g else None, grounded=g.grounded if g else True,
                    sections=list(dict.fromkeys(s.section for s in (g.spans if g else []) if s.section)),
                    matched_by=list(d.matched_by), verdict=str(v.value) if v else None, comment=note,
                    version=mine.version("verdict", d.dimension, it.label_ids[0])))
        rating_ns = [marks.next([sp for g in r.grounding for sp in (g.spans if g else [])]) for r in jv.ratings]
        return JudgeColumn(jv.judge, jv.score, jv.stars, jv.runs_failed, list(jv.errors), items, list(jv.ratings),
                           rating_ns)

    def _criterion_view(self, dim: DimensionAudit, c: Criterion, mine: _Mine, marks: _Marks) -> CriterionView:
        """One criterion of a criteria dimension: the judges' verdicts and evidence, the reviewer's own."""
        row = next((r for r in dim.criteria if r.id == c.id), None)
        lb = mine.criteria.get((dim.dimension, c.id))
        n = marks.next([sp for jv in dim.judges for x in jv.verdicts if x.id == c.id and x.grounding
                        for sp in x.grounding.spans])
        return CriterionView(
            id=c.id, text=c.text, points=float(c.points),
            judges=[(jv.judge, [x.met for x in jv.verdicts if x.id == c.id],
                     [x.evidence for x in jv.verdicts if x.id == c.id and x.evidence]) for jv in dim.judges],
            split=bool(row and row.split), mine=str(lb.value) if lb and lb.value else None,
            origin=lb.origin if lb else None, evidence=(lb.evidence or "") if lb else "",
            comment=(lb.comment or "") if lb else "", n=n,
            version=mine.version("criterion", dim.dimension, c.id),
            revision=str(lb.revision) if lb and lb.revision is not None else None)

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

    # ------------------------------------------------------------------ writing

    def apply(self, reviewer: str, action: Mapping[str, Any], *, session: str | None = None) -> dict[str, Any]:
        """Apply one action of the page (``op``: verdict | score | scores | criterion | comment | add | remove) for
        ``reviewer`` and store it at once, as one write of label events (:meth:`Store.write_labels`); returns what
        the page needs back: the case's ``state``, the reviewer's ``progress`` (text, and ``done`` of ``total``), an
        added deduction's ``id``, the ``versions`` of the fields written (:func:`field_key` -> version), and whether
        it was ``applied`` (False: its ``action_id`` was stored already, nothing was written again).

        ``action_id`` (optional): the client's id of the action, so that a repeated request is a no-op. ``version``
        (optional; ``versions``: dimension -> version on ``scores``): the version of the field the page showed; a
        field written since (another tab) refuses the action as an :class:`ActionConflict`. ``session``: the
        review session's tag, kept with every event. Raises :class:`ActionError` for an action that does not fit
        the run, or that the store refuses (an adjudicator's own score, the panel's score accepted on a blind case)."""
        op = action.get("op")
        rank = action.get("case")
        if not isinstance(rank, int) or isinstance(rank, bool):
            raise ActionError("err_case_int")
        a = self.case_at(rank)
        action_id = _action_id(action)
        plan = _Plan(reviewer, a.case_id)
        reply: dict[str, Any] = {}
        if op == "verdict":
            self._verdict(plan, a, action)
        elif op == "score":
            self._score(plan, a, _text(action, "dimension"), action.get("value"), version=_version(action))
        elif op == "criterion":
            self._criterion(plan, a, action)
        elif op == "scores":
            self._scores(plan, a, action)
        elif op == "comment":
            dim = action.get("dimension") or None
            if dim is not None:
                self._dimension(a, str(dim))
            plan.put_or_clear(HumanLabelRecord(case_id=a.case_id, dimension=dim, reviewer=reviewer, kind="comment",
                                               comment=_comment(action.get("comment"))), _version(action))
        elif op == "add":
            reply["id"] = self._add(plan, a, action, action_id)
        elif op == "remove":
            did = _text(action, "id")
            if not did.startswith("added:"):
                raise ActionError("err_not_added", id=repr(did))
            plan.clear(HumanLabelRecord(case_id=a.case_id, dimension=did.split(":")[1], deduction_id=did,
                                        reviewer=reviewer, kind="added_deduction"))
        else:
            raise ActionError("err_unknown_op", op=repr(op))
        written = self._write(plan, action_id, session)
        reply.update(applied=written.applied, versions={field_key(sl): v for sl, v in written.versions.items()})
        with self.lock:     # the reviewer's ledger, kept up to date by every write: no pass over the run's cases
            ledger = self._ledger(reviewer)
            progress = Progress(done=ledger.done, started=ledger.started, total=len(ledger.pool))
            reply.update(state=ledger.state(a.case_id), progress=progress.text, done=progress.done,
                         total=progress.total, blind=self._blind(ledger, a.case_id))
        return reply

    def _scores(self, plan: _Plan, a: CaseAudit, action: Mapping[str, Any]) -> None:
        """"Confirm scores": the reviewer's own scores in ``scores``, and in ``accepted`` the dimensions whose field
        still showed the panel's score untouched (stored as accepted, with the panel's value; never on a case of
        the spot check, which is blind); a criteria dimension in ``accepted``: the panel's verdict on each criterion
        the reviewer left alone."""
        reviewer = plan.reviewer
        scores = action.get("scores")
        accepted = action.get("accepted", [])
        versions = action.get("versions") or {}
        if not isinstance(scores, dict):
            raise ActionError("err_scores_map")
        if not isinstance(accepted, list) or not all(isinstance(d, str) for d in accepted):
            raise ActionError("err_accepted_list")
        if not isinstance(versions, dict):
            raise ActionError("err_version")
        panel = {d.dimension: d.panel_score for d in a.dimensions}
        if accepted and a.case_id in self.spot:
            raise ActionError("err_accepted_blind", case=a.case_id)
        kinds = {d.id: d.kind for d in self.dimensions}
        judged = self._criteria_judged(reviewer, a) if "criteria" in kinds.values() else {}
        for dim_id in [d.id for d in self.dimensions]:
            if kinds[dim_id] == "criteria":
                if dim_id not in accepted and judged.get(dim_id):
                    raise ActionError("err_criteria_left", dim=dim_id, left=", ".join(sorted(judged[dim_id])))
                continue
            if dim_id not in scores and dim_id not in accepted:
                raise ActionError("err_no_score", dim=dim_id)
            if dim_id in accepted and panel.get(dim_id) is None:
                raise ActionError("err_no_panel", dim=dim_id)
        for dim_id, value in scores.items():
            self._dimension(a, str(dim_id))
            _score_value(value, self.results.rubric.dimension(str(dim_id)))
        for dim_id in accepted:
            if kinds.get(dim_id) == "criteria":
                self._panel_verdicts(a, dim_id, judged.get(dim_id, set()))   # raises on a tie, before writing
        for dim_id, value in scores.items():
            self._score(plan, a, str(dim_id), value, version=_version(versions, str(dim_id)))
        for dim_id in accepted:
            if kinds.get(dim_id) == "criteria":
                for cid, (met, points) in self._panel_verdicts(a, dim_id, judged.get(dim_id, set())).items():
                    plan.put(HumanLabelRecord(case_id=a.case_id, dimension=dim_id, deduction_id=cid,
                                              reviewer=reviewer, kind="criterion", points=points,
                                              value="met" if met else "not_met", origin="accepted"))
            elif dim_id not in scores:
                self._score(plan, a, dim_id, panel[dim_id], origin="accepted", version=_version(versions, dim_id))

    def _dimension(self, a: CaseAudit, dim_id: str) -> Dimension:
        if dim_id not in {d.dimension for d in a.dimensions}:
            raise ActionError("err_not_dimension", dim=repr(dim_id))
        return self.results.rubric.dimension(dim_id)

    def _criteria_judged(self, reviewer: str, a: CaseAudit) -> dict[str, set[str]]:
        """criteria dimension id -> the ids of its criteria the reviewer has given no verdict on yet."""
        have = {(lb.dimension, lb.deduction_id) for lb in self.labels(reviewer)
                if lb.case_id == a.case_id and lb.kind == "criterion"}
        return {d.id: {c.id for c in self.criteria_of(a.case_id, d) if (d.id, c.id) not in have}
                for d in self.dimensions if d.kind == "criteria"}

    def _panel_verdicts(self, a: CaseAudit, dim_id: str, ids: set[str]) -> dict[str, tuple[bool, float]]:
        """The panel's verdict (the judges' majority over their runs) and the points of each criterion in
        ``ids``; an ActionError for one the judges split evenly on or none answered (nothing to accept)."""
        dim = next(d for d in a.dimensions if d.dimension == dim_id)
        out = {}
        for row in dim.criteria:
            if row.id not in ids:
                continue
            if row.met_share is None or row.met_share == 0.5:
                raise ActionError("err_no_majority", id=row.id, dim=dim_id)
            out[row.id] = (row.met_share > 0.5, row.points)
        return out

    def _criterion(self, plan: _Plan, a: CaseAudit, action: Mapping[str, Any]) -> None:
        """The reviewer's own verdict on one criterion: ``met`` true / false (null: withdrawn), with evidence
        and a comment; stored with the criterion's points."""
        dim_id = _text(action, "dimension")
        rd = self._dimension(a, dim_id)
        if rd.kind != "criteria":
            raise ActionError("err_not_criteria_dim", dim=repr(dim_id))
        cid = _text(action, "criterion")
        crit = {c.id: c for c in self.criteria_of(a.case_id, rd)}.get(cid)
        if crit is None:
            raise ActionError("err_not_criterion", id=repr(cid), dim=dim_id)
        met = action.get("met")
        if met is not None and not isinstance(met, bool):
            raise ActionError("err_met")
        evidence = _comment(action.get("evidence"))
        label = HumanLabelRecord(case_id=a.case_id, dimension=dim_id, deduction_id=cid, reviewer=plan.reviewer,
                                 kind="criterion")
        if met is None:
            plan.clear(label, _version(action))
            return
        plan.put(label.model_copy(update={"value": "met" if met else "not_met", "points": float(crit.points),
                                          "evidence": evidence, "comment": _comment(action.get("comment"))}),
                 _version(action))

    def _verdict(self, plan: _Plan, a: CaseAudit, action: Mapping[str, Any]) -> None:
        """A verdict set on one line of a judge's drill-down (each of its ids; a verdict pressed again sets it
        again: nothing changes), or cleared (``verdict`` null), with the comment beside it."""
        ids = action.get("ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise ActionError("err_ids")
        known = {d.id: d for dim in a.dimensions for jv in dim.judges for d in jv.deductions}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise ActionError("err_not_deduction", id=repr(unknown[0]), case=repr(a.case_id))
        ids = list(dict.fromkeys(known[i].copy_of or i for i in ids))   # a penalty's copies: one judgement
        verdict = action.get("verdict") or None
        if verdict is not None and verdict not in VERDICTS:
            raise ActionError("err_not_verdict", value=repr(verdict), choices=", ".join(VERDICTS))
        comment = _comment(action.get("comment"))
        version = _version(action)
        for k, i in enumerate(ids):
            base = HumanLabelRecord(case_id=a.case_id, dimension=known[i].dimension, deduction_id=i,
                                    reviewer=plan.reviewer, kind="verdict", value=verdict, comment=comment)
            seen = version if k == 0 else None
            if verdict is not None:
                plan.put(base, seen)
                plan.clear(base.model_copy(update={"kind": "comment"}))
            else:
                plan.clear(base, seen)
                plan.put_or_clear(base.model_copy(update={"kind": "comment", "value": None}))

    def _score(self, plan: _Plan, a: CaseAudit, dim_id: str, value: Any, origin: LabelOrigin = "own",
               version: int | None = None) -> None:
        rd = self._dimension(a, dim_id)
        label = HumanLabelRecord(case_id=a.case_id, dimension=dim_id, reviewer=plan.reviewer, kind="score")
        if value is None or value == "":
            plan.clear(label, version)
            return
        plan.put(label.model_copy(update={"value": _score_value(value, rd, origin), "origin": origin}), version)

    def _add(self, plan: _Plan, a: CaseAudit, action: Mapping[str, Any], action_id: str | None) -> str:
        """A deduction the judges missed, with its ``evidence`` (what in the record shows it) and ``comment`` (why)
        apart; its id comes from the action's id when there is one, so that a repeated request names the same."""
        dim_id = _text(action, "dimension")
        rd = self._dimension(a, dim_id)
        type_id = _text(action, "type")
        bounds = {t.id: (t.low, t.high) for c in rd.categories for t in c.types}
        bounds.update({p.id: (p.points, p.points) for p in rd.fixed_penalties})
        if type_id not in bounds:
            raise ActionError("err_not_type", type=repr(type_id), dim=dim_id)
        lo, hi = bounds[type_id]
        raw = action.get("points")
        points = lo if raw in (None, "") else _number(raw)
        if not lo - 1e-9 <= points <= hi + 1e-9:
            raise ActionError("err_points_range", points=f"{points:g}", low=f"{lo:g}", high=f"{hi:g}", type=type_id)
        token = hashlib.sha256(f"{plan.reviewer}\0{action_id}".encode()).hexdigest()[:8] if action_id \
            else secrets.token_hex(4)
        did = f"added:{dim_id}:{token}"
        plan.put(HumanLabelRecord(case_id=a.case_id, dimension=dim_id, deduction_id=did, reviewer=plan.reviewer,
                                  kind="added_deduction", value=type_id, points=points,
                                  evidence=_comment(action.get("evidence")), comment=_comment(action.get("comment"))))
        return did

    def _write(self, plan: _Plan, action_id: str | None, session: str | None) -> Written:
        """Store ``plan`` as one write (:meth:`Store.write_labels`), then bring the reviewer's ledger up to date on
        the case, and reveal a spot-check case whose blind scores the write completed (its judges are shown next)."""
        with self.lock:
            ledger = self._ledger(plan.reviewer)   # read before the write (or after another connection's): then kept
            try:
                written = self.store.write_labels(plan.changes, source=SOURCE, action_id=action_id, session=session,
                                                  expect=plan.expect, actor=plan.reviewer)
            except LabelConflict as e:
                raise ActionConflict(e) from None
            except LabelRefused as e:
                raise _refusal(e) from None
            self._refresh(ledger, plan.reviewer, plan.case_id)
            if self._completes_blind(ledger, plan.case_id):
                self._reveal(ledger, plan.reviewer, [plan.case_id], session)
        return written

    def _refresh(self, ledger: Ledger, reviewer: str, case_id: str) -> None:
        """Read one case's labels of ``reviewer`` again into their ledger (its progress counts with it)."""
        labels = fold(self.store.label_events(reviewer=reviewer, case_id=case_id))
        ledger.count(case_id, -1)
        if labels:
            ledger.labels[case_id] = {_key(lb): lb.origin for lb in labels}
        else:
            ledger.labels.pop(case_id, None)
        ledger.count(case_id, +1)

    def _completes_blind(self, ledger: Ledger, case_id: str) -> bool:
        """Whether ``case_id`` is a spot-check case not revealed to the ledger's reviewer, their own scores all in."""
        return case_id in self.spot and case_id not in ledger.revealed \
            and ledger.own_scored(case_id) >= len(self.dimensions)

    def _blind(self, ledger: Ledger, case_id: str) -> bool:
        """Whether ``case_id`` is blind to the ledger's reviewer: a spot-check case whose judges were not shown to
        them yet and whose own scores are not all in."""
        return case_id in self.spot and case_id not in ledger.revealed \
            and ledger.own_scored(case_id) < len(self.dimensions)

    def _reveal(self, ledger: Ledger, reviewer: str, case_ids: Sequence[str], session: str | None) -> None:
        """Record that the judges of ``case_ids`` are shown to ``reviewer`` now (with :attr:`lock` held)."""
        self.store.reveal(reviewer, case_ids, source=SOURCE, session=session)
        ledger.revealed.update(c for c in case_ids if c in self.spot)


@dataclass
class _Plan:
    """The label changes of one action, and the versions the page saw (slot -> version), before they are written."""

    reviewer: str
    case_id: str
    changes: list[Change] = field(default_factory=list)
    expect: dict[Slot, int] = field(default_factory=dict)

    def put(self, label: HumanLabelRecord, version: int | None = None) -> None:
        self.changes.append(Change(label))
        self._saw(label, version)

    def clear(self, label: HumanLabelRecord, version: int | None = None) -> None:
        self.changes.append(Change(label, clear=True))
        self._saw(label, version)

    def put_or_clear(self, label: HumanLabelRecord, version: int | None = None) -> None:
        """A comment label: set when it has text, cleared when emptied."""
        if label.comment:
            self.put(label, version)
        else:
            self.clear(label, version)

    def _saw(self, label: HumanLabelRecord, version: int | None) -> None:
        if version is not None:
            self.expect[label.slot] = version


@dataclass
class _Mine:
    """One reviewer's labels of one case, looked up as :meth:`ReviewRun.case_view` needs them, with the version of
    every slot they wrote (``versions``)."""

    reviewer: str
    case_id: str
    labels: list[HumanLabelRecord]
    versions: dict[Slot, int]

    def __post_init__(self) -> None:
        self.verdicts = {lb.deduction_id: lb for lb in self.labels if lb.kind == "verdict" and lb.deduction_id}
        self.notes = {lb.deduction_id: lb.comment or "" for lb in self.labels
                      if lb.kind == "comment" and lb.deduction_id}
        self.criteria = {(lb.dimension, lb.deduction_id): lb for lb in self.labels if lb.kind == "criterion"}
        self._by: dict[tuple[str, str | None], HumanLabelRecord] = {
            (lb.kind, lb.dimension): lb for lb in self.labels if not lb.deduction_id}

    def get(self, kind: str, dimension: str | None) -> HumanLabelRecord | None:
        """The label of ``kind`` on ``dimension`` (None: the case) without a deduction id."""
        return self._by.get((kind, dimension))

    def note(self, dimension: str | None) -> str:
        """The comment on ``dimension`` (None: on the case)."""
        lb = self.get("comment", dimension)
        return (lb.comment or "") if lb else ""

    def version(self, kind: str, dimension: str | None, deduction_id: str | None = None) -> int:
        """The version of the slot of ``kind`` on ``dimension`` / ``deduction_id`` (0: never written)."""
        return self.versions.get(slot_of(self.reviewer, self.case_id, kind, dimension, deduction_id), 0)


class _Marks:
    """The evidence marks of a case page: each item numbered in page order, with its spans in the record or the
    conversation."""

    def __init__(self) -> None:
        self.n = 0
        self.record: list[tuple[int, int, int]] = []
        self.conversation: list[tuple[int, int, int]] = []

    def next(self, spans: Iterable[Any]) -> int:
        """The next item's number, its ``spans`` (``source``, ``start``, ``end``) marked with it."""
        self.n += 1
        for sp in spans:
            (self.record if sp.source == "record" else self.conversation).append((sp.start, sp.end, self.n))
        return self.n


class ActionConflict(ActionError):
    """A write refused because its field changed since the page showed it (another tab, another channel): ``field``
    (:func:`field_key`), the ``stored`` labels of the field now and its ``version``, for the page to show beside what
    the reviewer sent and let them choose."""

    def __init__(self, conflict: LabelConflict) -> None:
        super().__init__("err_conflict")   # the catalogue's err_conflict: what the page shows above both values
        self.field = field_key(conflict.slot)
        self.version = conflict.version
        self.stored = conflict.stored

    def stored_value(self) -> dict[str, Any]:
        """The field's stored label as the page shows it: ``value`` (a revision shown, if any), ``comment``,
        ``evidence``, ``origin`` (None each: cleared)."""
        lb = next((x for x in self.stored if x.kind != "comment"), self.stored[0] if self.stored else None)
        if lb is None:
            return {"value": None, "comment": None, "evidence": None, "origin": None}
        comment = next((x.comment for x in self.stored if x.comment), None)
        return {"value": lb.shown if lb.kind != "comment" else None, "comment": comment, "evidence": lb.evidence,
                "origin": lb.origin}


def field_key(sl: Slot) -> str:
    """The page's name of a slot (``score:<dim>``, ``verdict:<deduction id>``, ``comment:<dim>`` (``comment:`` the
    case's), ``criterion:<dim>:<criterion id>``, ``added_deduction:<dim>:<id>``): what a reply's ``versions`` and a
    conflict's ``field`` say, and the page's ``data-field``."""
    _, _, kind, dim, did = sl
    if kind in ("score", "comment") and not did:
        return f"{kind}:{dim}"
    if kind == "verdict":
        return f"verdict:{did}"
    return f"{kind}:{dim}:{did}"


def _refusal(e: LabelRefused) -> ActionError:
    """What the store refused (:class:`LabelRefused`), as a refusal of the review pages' catalogues."""
    name, case = str(e.params.get("name", "")), str(e.params.get("case", ""))
    if e.code == "adjudicator_own":
        return ActionError("err_adjudicator_own", name=name, case=case)
    if e.code == "reference_not_adjudicator":
        return ActionError("err_reference_not_adjudicator", name=name, case=case)
    if e.code == "accepted_blind":
        return ActionError("err_accepted_blind", case=case)
    return ActionError("err_action_id", max=MAX_ACTION_ID)


def _action_id(action: Mapping[str, Any]) -> str | None:
    v = action.get("action_id")
    if v is None:
        return None
    if not isinstance(v, str) or not 1 <= len(v) <= MAX_ACTION_ID:
        raise ActionError("err_action_id", max=MAX_ACTION_ID)
    return v


def _version(action: Mapping[str, Any], key: str = "version") -> int | None:
    v = action.get(key)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ActionError("err_version")
    return v


def _key(label: HumanLabelRecord) -> LabelKey:
    """The label's key in its reviewer's :class:`Ledger` (the store's key without reviewer and case)."""
    return (label.kind, label.dimension or "", label.deduction_id or "")


def _text(action: Mapping[str, Any], key: str) -> str:
    v = action.get(key)
    if not isinstance(v, str) or not v:
        raise ActionError("err_text", field=key)
    return v


def _comment(v: Any) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise ActionError("err_comment_text")
    if len(v) > MAX_COMMENT:
        raise ActionError("err_comment_long", max=MAX_COMMENT)
    return v.strip() or None


def _number(v: Any, dim: str | None = None) -> float:
    """``v`` as a number: a score of dimension ``dim``, or (None) a deduction's points."""
    try:
        x = float(v)
        if isinstance(v, bool) or not math.isfinite(x):
            raise ValueError
    except (TypeError, ValueError):
        if dim is None:
            raise ActionError("err_points_number", value=repr(v)) from None
        raise ActionError("err_score_number", dim=dim, value=repr(v)) from None
    return x


def _score_value(value: Any, rd: Dimension, origin: LabelOrigin = "own") -> float:
    """A score given for ``rd``: within its range; a likert dimension's own or reference (adjudicated) score is
    one of its levels (only the panel's mean, accepted, may fall between two)."""
    x = _number(value, rd.id)
    if rd.kind == "likert":
        lo, hi = rd.level_range
        if origin != "accepted" and x not in rd.levels:
            raise ActionError("err_reference_level" if origin == "reference" else "err_level", dim=rd.id, low=lo,
                              high=hi, value=f"{x:g}")
        if not lo <= x <= hi:
            raise ActionError("err_level_range", dim=rd.id, low=lo, high=hi, value=f"{x:g}")
        return x
    if not 0 <= x <= rd.max:
        raise ActionError("err_score_range", dim=rd.id, max=f"{rd.max:g}", value=f"{x:g}")
    return x


def open_run(folder: str | Path) -> ReviewRun:
    """:meth:`ReviewRun.open`, with a missing store said as an input error."""
    try:
        return ReviewRun.open(folder)
    except FileNotFoundError as e:
        raise InputError(str(e)) from None
