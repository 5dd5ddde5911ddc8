"""Where the judges disagree, and which cases a human should review first: the review queue.

Everything here works on a stored run (:class:`~consensus_eval.execution.stored_run.StoredRun`) and its
consensus; no judge is ever called, and nothing is printed or written (the console, the reports and
the adjudication sheet render these objects: :class:`ReviewQueue` and the :class:`CaseAudit` of each
case, with its drill-down :meth:`JudgeView.drill_down`). They are plain read models, slotted dataclasses
(a large run holds hundreds of thousands): frozen, except the three the audit completes after building them
(:class:`AuditDeduction`'s match, :class:`DrillItem`'s occurrences, :class:`CaseAudit`'s rank and reasons)
and the one :class:`ReviewQueue`.

**Disagreement score** of a case (panels of two judges or more; higher: look first)::

    disagreement = 100 x spread_share + 10 x star_gap_mean + 10 x singleton_share

- ``spread_share``: for each dimension, max - min of the judges' scores (each judge's score is the
  mean of its runs) as a share of the dimension's range (its max; a likert scale's top minus bottom
  level); averaged over the dimensions at least two
  judges scored. 0.25 means the judges are a quarter of the scale apart on an average dimension.
- ``star_gap_mean``: for each dimension, max - min of the judges' stars; averaged the same way.
- ``singleton_share``: of the distinct deductions (judge, dimension, deduction type) that another
  judge could have matched, the share no other judge made anything like (*singletons*, see
  *matching* below).

Every part is a mean or a share, so the score does not grow with the number of runs or of dimensions:
identical runs give a judge the same mean, hence the same score, and a rubric with more dimensions disagreeing
as much scores the same. 100 x a share reads as "percent of the scale apart"; one star apart on every dimension
weighs as much as judges 10% of the scale apart on every dimension; deductions seen by one judge only add at
most 10 (why these weights: docs/design/review_queue.md). A judge's claimed score differing from the score
re-derived from its own deductions is a fact about that judge (see ``mismatch_runs`` and the judge-quality
section), never part of a case's score or a reason to review it.

**Risk score** of a case (what a panel of one judge is ranked by; computed for every case)::

    risk = 100 x lost_share + 10 x penalty_share + 10 x ungrounded_share

- ``lost_share``: for each dimension, the share of its range the case lost (max - score) / (max - low),
  ``low`` 0 or a likert scale's bottom level (the
  panel score, or the mean of the judges' scores below the quorum); averaged over the dimensions.
  A low score is where a mistaken judge costs most.
- ``penalty_share``: over the judges and the dimensions whose rubric has fixed penalties, the share
  of runs in which a fixed penalty was applied: a fixed penalty is one call that costs many points.
- ``ungrounded_share``: the share of the deductions whose evidence was looked for in the case and
  not found (an invented or garbled quote). 0 when grounding was not computed.

A panel of one judge (nothing to disagree with) is ranked by risk, a larger panel by disagreement; the
queue's title follows the panel size ("Most disputed cases" with two judges or more, "Highest-risk cases"
with one: :class:`ReviewQueue`).

**Needs review** (:attr:`CaseAudit.needs_review`, with its :class:`ReviewReason` list): a case
needs review when any of these holds:

- ``failed`` (no judge answered), ``inconclusive`` (too few judges answered), ``incomplete``
  (planned calls not stored yet: provisional);
- ``spread``: the judges' totals are further apart than the consensus flag's limit (``consensus.flag_spread``
  points, or ``flag_spread_share`` of the total's range: :func:`~consensus_eval.domain.flags.spread_limit`);
- ``star_gap``: on some dimension the judges' stars differ by ``consensus.flag_star_gap`` or more;
- ``level_gap``: on a likert dimension the judges' ratings (each judge's mean over its runs) differ by
  ``consensus.flag_level_gap`` or more levels (the consensus flag's rule);
- ``split``: on a criteria dimension the judges disagree on a criterion (each judge's own verdict;
  :attr:`CriterionRow.split`, listed first in the drill-down), on at least ``consensus.flag_split_share`` of
  its criteria (the default: any); the consensus flag's rule, so the queue and the drill-down agree;
- judged by a single judge (a panel of one, or the only judge of a panel that answered), its risk
  signals: ``low_score`` (a dimension at :data:`LOW_STARS` stars or fewer) and ``fixed_penalty``
  (a fixed penalty nobody else could confirm);
- ``ungrounded``: a deduction quotes evidence not found in the case, when the config's
  ``ungrounded`` policy is ``flag`` (the default).

**Ranking** (:func:`rank`): cases with no panel verdict first, ``failed`` then ``inconclusive``
(a human has to decide them anyway); then ``incomplete`` ones; then the other cases that need
review, then the rest; within each, by the queue's score (disagreement, or risk for a panel of one),
highest first, then by the other score; ties keep the order of the cases in the run.

**Matching** a deduction of judge J against the other judges that answered the same case and
dimension (any of their successful runs):

- ``type``: another judge made a deduction of the same dimension and deduction type (for a fixed
  penalty: the same penalty);
- ``category``: no other judge used that type, but another deducted in the same category (fixed
  penalties form one pseudo-category per dimension);
- ``none``: no other judge deducted anything in that category: a *singleton*, only J saw it;
- ``no_peer``: no other judge has a successful run on that dimension, so there is nothing to
  compare with (never a singleton).

**Drill-down** (:meth:`JudgeView.drill_down`): a judge's deductions on a dimension grouped by the
runs they were made in. Runs are numbered from 1 for readers: stored run 0 is "run 1 of 3". The same
deduction (same kind, type, points and evidence) made in several runs is shown once, in the group
of those runs ("all 3 runs", "runs 1, 3 of 3"), with its count ("x3 runs"). A deduction listed twice
in one run is shown twice (both are charged, up to the category cap); a fixed penalty listed more
than once in one run is shown once and marked "applied once", as the score charges it
(:func:`consensus_eval.domain.scoring.derive`: once per dimension and run).

**Anchors** (:func:`case_anchors`): each case gets an id safe in HTML ids and URL fragments,
``case-`` + the ASCII letters, digits, ``_`` and ``-`` of its id, + 8 hex digits of the id's SHA-256
when anything else was dropped; unique within a run (a clash gets ``-2``, ``-3``...).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from math import fsum
from typing import Literal

from consensus_eval.analysis.consensus import CaseConsensus, JudgeScore
from consensus_eval.domain.config import ConsensusConfig, EvalConfig
from consensus_eval.domain.construct import slots_maker
from consensus_eval.domain.flags import Flag
from consensus_eval.domain.grounding import Grounding
from consensus_eval.domain.kinds.base import VIEW_DEDUCTIONS, flag_rank, fmt_short, kind_class, registered_kinds
from consensus_eval.domain.kinds.criteria import majority, split_criteria
from consensus_eval.domain.kinds.deductions import as_deductions
from consensus_eval.domain.rubric import Criterion, Dimension, Rubric
from consensus_eval.domain.scoring import DimensionScore
from consensus_eval.domain.stored import StoredJudgment
from consensus_eval.execution.store import StoredCall
from consensus_eval.execution.stored_run import StoredRun

#: weights of the disagreement score's parts (module docstring)
SPREAD_WEIGHT = 100.0
STAR_GAP_WEIGHT = 10.0
SINGLETON_WEIGHT = 10.0
#: weights of the risk score's parts (module docstring)
LOST_WEIGHT = 100.0
PENALTY_WEIGHT = 10.0
UNGROUNDED_WEIGHT = 10.0
#: a dimension at this many stars or fewer is a single judge's ``low_score`` risk signal
LOW_STARS = 2
#: cases the console shows by default (``audit --top``, the end of ``score``)
DEFAULT_TOP = 10

DISAGREEMENT_FORMULA = (
    f"disagreement = {SPREAD_WEIGHT:g} × mean per-dimension spread of the judges' scores (share of the "
    f"dimension's max) + {STAR_GAP_WEIGHT:g} × mean star gap per dimension + {SINGLETON_WEIGHT:g} × share "
    "of deductions only one judge made")
RISK_FORMULA = (
    f"risk = {LOST_WEIGHT:g} × mean share of each dimension's max lost + {PENALTY_WEIGHT:g} × share of runs "
    f"with a fixed penalty + {UNGROUNDED_WEIGHT:g} × share of deductions whose evidence was not found in the case")
#: the same for a rubric without deduction dimensions (likert, criteria): no singleton deductions, penalties or
#: deductions' evidence to count, spreads and losses over each dimension's range
DISAGREEMENT_FORMULA_KINDS = (
    f"disagreement = {SPREAD_WEIGHT:g} × mean per-dimension spread of the judges' scores (share of the "
    "dimension's range: a scale's lowest to highest level, 0-1 for criteria)")
#: ... with dimensions that have stars
DISAGREEMENT_FORMULA_KINDS_STARS = f"{DISAGREEMENT_FORMULA_KINDS} + {STAR_GAP_WEIGHT:g} × mean star gap per dimension"
RISK_FORMULA_KINDS = f"risk = {LOST_WEIGHT:g} × mean share of each dimension's range lost"
ORDER_NOTE = ("failed and inconclusive cases first, then incomplete ones, then the cases that need review; "
              "highest score first")

#: category id and display name given to fixed penalties (outside the rubric's categories)
PENALTY_CATEGORY = "fixed_penalty"
PENALTY_CATEGORY_NAME = "fixed penalty"

Match = Literal["type", "category", "none", "no_peer"]
QueueMode = Literal["disagreement", "risk"]
#: a reason's code: one of :func:`reason_codes`
ReasonCode = str
#: the reason codes of the audit's own, in the order reasons are listed: the status ones and the rubric's flags,
#: then (:func:`reason_codes`) the codes of the kinds' flags (``level_gap``, ``split``...), then the risk ones
_STATUS_REASONS: tuple[str, ...] = ("failed", "inconclusive", "incomplete", "spread", "star_gap")
_RISK_REASONS: tuple[str, ...] = ("low_score", "fixed_penalty", "ungrounded")


def reason_codes() -> tuple[str, ...]:
    """Every reason code, in the order reasons are listed: a case's status, the rubric's own flags, the kinds'
    flags (in the order the kinds registered), a single judge's risk signals."""
    kinds = tuple(dict.fromkeys(code for k in registered_kinds() for code in k.flag_texts))
    return (*_STATUS_REASONS, *kinds, *_RISK_REASONS)


#: every reason code of the built-in kinds, in order (:func:`reason_codes` adds the codes of kinds plugged in)
REASON_CODES: tuple[ReasonCode, ...] = reason_codes()
_STATUS_ORDER = {"failed": 0, "inconclusive": 1, "incomplete": 2, "ok": 3}


@dataclass(slots=True, kw_only=True)
class AuditDeduction:
    """One deduction (or fixed penalty) one judge made in one run, with how others matched it.

    ``run`` is the stored run number, from 0 (shown to readers as "run 1 of N": :func:`run_label`).
    ``category``/``type`` are the rubric's display names, ``category_id``/``type_id`` its ids;
    ``points`` are the points of this one occurrence (before the category cap). ``matched_by``
    lists the other judges that made a deduction of the same type (``match == "type"``) or, failing
    that, in the same category (``match == "category"``); it is empty otherwise.
    ``id`` (:attr:`id`) is made from ``call`` and ``index`` when read.
    """

    judge: str
    run: int
    dimension: str
    kind: Literal["deduction", "penalty"]
    category_id: str
    category: str
    type_id: str
    type: str
    points: float
    evidence: str
    reason: str
    match: Match = "no_peer"
    matched_by: tuple[str, ...] = ()
    #: the call it was made in (its ``request_hash``; "" for a deduction of no stored call) ...
    call: str = ""
    #: ... and its place in the call's judgment: the i-th deduction, or the i-th fixed penalty
    index: int = 0
    #: where its evidence is in the case (None when not computed)
    grounding: Grounding | None = None
    #: a fixed penalty listed again in the same call (charged once): the id of its first listing, the one
    #: a reviewer's verdict is stored on (one judgement, one label); None for every other deduction
    copy_of: str | None = None

    @property
    def id(self) -> str:
        """Stable id of this deduction across rebuilds: ``{request_hash}#d{i}`` (i-th deduction of the
        call's judgment) or ``{request_hash}#p{i}`` (i-th fixed penalty); what human verdicts refer to ("" without
        a call)."""
        if not self.call:
            return ""
        return f"{self.call}#{'p' if self.kind == 'penalty' else 'd'}{self.index}"

    @property
    def singleton(self) -> bool:
        """True when no other judge deducted in this category (and at least one could have)."""
        return self.match == "none"

    @property
    def ungrounded(self) -> bool:
        """True when its evidence was looked for in the case and not found (False when not computed)."""
        return self.grounding is not None and not self.grounding.grounded


@dataclass(slots=True, frozen=True, kw_only=True)
class Mismatch:
    """A run whose claimed score or stars differ from the score re-derived from its deductions.

    A fact about the judge (its arithmetic or its reading of the rubric), listed in the case's
    drill-down; it does not count in any case score and does not make a case need review.
    """

    judge: str
    run: int
    dimension: str
    dimension_name: str
    claimed_score: float | None
    claimed_stars: int | None
    derived_score: float
    derived_stars: int | None


@dataclass(slots=True, kw_only=True)
class DrillItem:
    """One line of a judge's drill-down: a deduction, shown once for every run that made it.

    ``deduction`` is its first occurrence (lowest run), ``occurrences`` every occurrence collapsed
    into this line (their ``id`` are what human verdicts refer to), ``runs`` the stored run numbers
    (from 0) it appears in, ``n_runs`` the judge's runs on this dimension (ok and failed).
    ``times_listed`` is the most times it was listed within one run; ``applied_once`` is True for a
    fixed penalty listed more than once in a run (the score charges it once per run).
    """

    deduction: AuditDeduction
    occurrences: list[AuditDeduction]
    runs: list[int]
    n_runs: int
    times_listed: int = 1
    applied_once: bool = False

    @property
    def runs_label(self) -> str:
        """``"x3 runs"`` when made in several runs, else ``""``."""
        return f"x{len(self.runs)} runs" if len(self.runs) > 1 else ""

    @property
    def ids(self) -> list[str]:
        """The ids of every occurrence collapsed into this line."""
        return [o.id for o in self.occurrences]

    @property
    def label_ids(self) -> list[str]:
        """The ids a verdict on this line is stored on: one per run that made it (a fixed penalty listed
        several times in one run is one judgement: its copies get no label of their own)."""
        return [o.id for o in self.occurrences if o.copy_of is None]


@dataclass(slots=True, frozen=True, kw_only=True)
class RunGroup:
    """The drill-down lines made in exactly the runs ``runs`` (stored numbers, from 0).

    ``label`` says which runs in readers' numbering: ``"run 1 of 3"``, ``"runs 1, 3 of 3"``,
    ``"all 3 runs"``; ``""`` when the judge has a single run (nothing to tell apart).
    """

    runs: list[int]
    n_runs: int
    label: str
    items: list[DrillItem]


@dataclass(slots=True, frozen=True, kw_only=True)
class RatingItem:
    """One run of a judge on a ``likert`` dimension: the level it picked (``rating``), that level's anchor
    text, the quotes it rests on (``evidence``) and its comment. ``run`` is the stored run number (from 0);
    ``grounding``: where each quote is in the case (one per quote, None when not computed)."""

    run: int
    rating: int
    anchor: str
    evidence: list[str]
    comment: str
    grounding: list[Grounding | None] = field(default_factory=list)


@dataclass(slots=True, frozen=True, kw_only=True)
class VerdictItem:
    """One run's verdict of a judge on one criterion of a ``criteria`` dimension (``id``: the criterion's id)."""

    run: int
    id: str
    met: bool
    evidence: str
    reason: str
    #: where its evidence is in the case (None when not computed, or nothing was quoted)
    grounding: Grounding | None = None


@dataclass(slots=True, frozen=True, kw_only=True)
class CriterionRow:
    """One criterion of a ``criteria`` dimension across the judges: ``judges`` maps each judge that answered to
    its verdicts, run by run (``True``: met); ``split`` is True when the judges' verdicts differ (each judge's
    own verdict, its majority over its runs: :func:`consensus_eval.domain.flags.split_criteria`, the flag's
    rule); ``met_share`` is the share of all the runs' verdicts that say met (None when no judge answered);
    ``tie``: the panel's majority is split evenly (as many judges found it met as not: no panel verdict,
    :func:`consensus_eval.domain.flags.majority`)."""

    id: str
    text: str
    points: float
    judges: dict[str, list[bool]]
    split: bool
    met_share: float | None
    tie: bool = False

    def verdict(self, judge: str) -> bool | None:
        """The judge's verdict on this criterion: met by most of its runs (a tie is None), None without one."""
        votes = self.judges.get(judge)
        if not votes:
            return None
        met = sum(votes)
        return None if 2 * met == len(votes) else 2 * met > len(votes)


@dataclass(slots=True, frozen=True, kw_only=True)
class JudgeView:
    """One judge on one dimension of one case: its score and everything it deducted.

    ``score`` is the mean of the re-derived scores of its successful runs (None if none),
    ``stars`` the stars of that mean; ``errors`` are the error messages of its failed runs and
    ``comments`` the non-empty comments of its successful runs. ``runs`` are the stored run numbers
    (from 0) of its successful runs, ``n_runs`` its runs on this dimension, ok and failed.
    ``deductions`` lists every occurrence, run by run; :meth:`drill_down` is the collapsed view.
    By the dimension's kind, ``ratings`` (``likert``: the level of each successful run, with its anchor and
    evidence) or ``verdicts`` (``criteria``: each run's verdict on each criterion) replace the deductions.
    """

    judge: str
    score: float | None
    stars: int | None
    runs_ok: int
    runs_failed: int
    deductions: tuple[AuditDeduction, ...]
    errors: tuple[str, ...]
    comments: tuple[str, ...]
    runs: tuple[int, ...] = ()
    n_runs: int = 0
    ratings: tuple[RatingItem, ...] = ()
    verdicts: tuple[VerdictItem, ...] = ()

    def drill_down(self) -> list[RunGroup]:
        """The deductions grouped by the runs they were made in, repeats collapsed (module docstring):
        the group of every run first, then single runs in order, then the other combinations."""
        return drill_down(self.deductions, self.runs, max(self.n_runs, self.runs_ok + self.runs_failed))


#: a view made from its fields' values in order, slot by slot (:func:`~consensus_eval.domain.construct.slots_maker`:
#: x2.6 against the frozen ``__init__``; a rebuild makes one per judge, dimension and case)
_view = slots_maker(JudgeView)


@dataclass(slots=True, frozen=True, kw_only=True)
class DimensionAudit:
    """One dimension of one case, side by side: each judge's view (in panel order).

    ``spread`` is max - min of the judges' scores in points (None with fewer than two judges with a
    score), ``spread_share`` the same as a share of the range (``max``; a likert scale's top minus bottom
    level); ``star_gap`` is max - min of the
    judges' stars (0 with fewer than two judges with stars).

    By ``kind``: ``likert``: ``levels`` (level -> anchor text) and ``level_spread``, the judges' ratings
    (each judge's mean over its runs) apart, highest minus lowest (None with fewer than two judges rating);
    ``criteria``: ``criteria``, a row per criterion that applies to the case (criterion x judge), the split ones
    (judges disagree) first.
    """

    dimension: str
    name: str
    max: float
    panel_score: float | None
    star_gap: int
    judges: list[JudgeView]
    spread: float | None = None
    spread_share: float | None = None
    kind: str = "deductions"
    levels: dict[int, str] = field(default_factory=dict)
    level_spread: float | None = None
    criteria: list[CriterionRow] = field(default_factory=list)
    #: the lowest score the dimension can take (a likert scale's lowest level)
    low: float = 0.0
    #: how its judgments are shown (its kind's :attr:`~consensus_eval.domain.kinds.base.Dimension.view`)
    view: str = VIEW_DEDUCTIONS

    @property
    def quiet(self) -> bool:
        """True when every judge answered and none deducted anything (nothing to look at); a likert dimension
        where every judge picked the top level, a criteria dimension where no criterion is split and every
        positive criterion is met and no negative one is."""
        if self.levels:
            top = max(self.levels)
            return all(v.runs_ok and all(r.rating == top for r in v.ratings) for v in self.judges)
        if self.criteria:
            return all(v.runs_ok for v in self.judges) and all(
                not row.split and row.met_share == (1.0 if row.points > 0 else 0.0) for row in self.criteria)
        return all(v.runs_ok and not v.deductions for v in self.judges)

    @property
    def split_criteria(self) -> list[CriterionRow]:
        """The criteria the judges disagree on (``criteria`` dimensions)."""
        return [row for row in self.criteria if row.split]


@dataclass(slots=True, frozen=True, kw_only=True)
class ReviewReason:
    """Why a case needs review: ``code`` (stable, one of :data:`REASON_CODES`, for filters) and
    ``text`` (plain English words for the reader, naming the dimensions, penalties or counts concerned).

    The same facts, for a renderer writing its own words (another language): ``subjects`` the
    dimensions (``准确性 3★``: name and star gap, or the single judge's stars) or fixed penalties
    (``糖尿病写入既往史 (准确性)``) concerned; ``value`` the figure (totals spread in points, answering
    judges, deductions not found) and ``limit`` the threshold it is compared with (``flag_spread``,
    ``flag_star_gap``, ``min_judges``, :data:`LOW_STARS`); None where the reason has none.
    """

    code: ReasonCode
    text: str
    subjects: list[str] = field(default_factory=list)
    value: float | None = None
    limit: float | None = None


@dataclass(slots=True, kw_only=True)
class CaseAudit:
    """The audit of one case: its place in the queue, why it needs review, the scores and details.

    ``rank`` starts at 1 (:func:`rank`). ``anchor`` is the case's HTML id / URL fragment
    (:func:`case_anchors`). ``needs_review`` is True when ``reasons`` is not empty.

    Disagreement (module docstring): ``disagreement`` from ``spread_share`` (mean per-dimension
    spread as a share of the max, 0-1), ``star_gap_mean`` (stars, 0-4 on a 5-star scale) and
    ``singleton_share`` (0-1); each None when nothing could be compared, and ``disagreement`` 0
    then. Risk: ``risk`` from ``lost_share``, ``penalty_share`` and ``ungrounded_share`` (each 0-1,
    None when there is nothing to measure). ``n_judges_answered``: judges with at least one
    successful run on the case.

    Facts kept for display, counted in no score: ``spread`` (max - min of the judges' totals, points;
    None with fewer than two complete judges), ``star_gaps`` (star gaps summed over dimensions),
    ``singletons`` (distinct singleton deductions), ``mismatches`` (runs whose claimed score differs
    from the derived one, listed in ``mismatch_runs``), ``ungrounded`` (distinct deductions whose
    evidence was not found). ``flags`` are the consensus flags (spread, star gaps).
    """

    rank: int = 0
    case_id: str
    anchor: str = ""
    status: str
    needs_review: bool = False
    reasons: list[ReviewReason] = field(default_factory=list)
    disagreement: float
    spread_share: float | None = None
    star_gap_mean: float | None = None
    singleton_share: float | None = None
    risk: float = 0.0
    lost_share: float | None = None
    penalty_share: float | None = None
    ungrounded_share: float | None = None
    n_judges_answered: int = 0
    spread: float | None
    star_gaps: int
    singletons: int
    mismatches: int
    ungrounded: int = 0
    total: float | None
    judge_totals: dict[str, float]
    flags: list[str]
    dimensions: list[DimensionAudit]
    mismatch_runs: list[Mismatch]

    def score(self, mode: QueueMode) -> float:
        """The score the queue ranks by: ``disagreement``, or ``risk`` for a panel of one."""
        return self.risk if mode == "risk" else self.disagreement

    def errors_by_judge(self) -> dict[str, list[str]]:
        """Each judge's distinct error messages over the dimensions (judges without errors left out)."""
        out: dict[str, list[str]] = {}
        for dim in self.dimensions:
            for v in dim.judges:
                for e in v.errors:
                    if e not in out.setdefault(v.judge, []):
                        out[v.judge].append(e)
        return {j: es for j, es in out.items() if es}

    def singleton_deductions(self) -> list[AuditDeduction]:
        """Every deduction (per run) that only its judge made."""
        return [d for dim in self.dimensions for jv in dim.judges for d in jv.deductions if d.singleton]


@dataclass(slots=True, kw_only=True)
class ReviewQueue:
    """The cases of a run in review order, with what heads the queue ("N cases need review").

    ``mode`` follows the panel size (``panel_size``: judges in the config): ``disagreement`` with two
    judges or more, ``risk`` with one; ``title`` ("Most disputed cases" / "Highest-risk cases"),
    ``score_name`` and ``formula`` say the same in words. ``cases`` are every case, ranked (the
    first ``n_needs_review`` need review); ``by_status`` counts cases per status, ``by_reason``
    cases per reason code (a case counts once per code; codes with no case left out).
    """

    mode: QueueMode
    title: str
    score_name: str
    formula: str
    panel_size: int
    n_cases: int
    n_needs_review: int
    by_status: dict[str, int]
    by_reason: dict[str, int]
    cases: list[CaseAudit]

    @property
    def shape(self) -> str:
        """Which parts the queue's score has: ``deductions`` (a rubric with deduction dimensions), ``kinds``
        (likert / criteria only) or ``kinds_stars`` (and some dimension has stars)."""
        return _formula_shape(self.cases)

    @property
    def formula_key(self) -> str:
        """The catalogue key of :attr:`formula` in words (``formula_disagreement``; ``..._kinds`` for a rubric
        without deduction dimensions, whose score has no deduction parts)."""
        shape = _formula_shape(self.cases)
        return f"formula_{self.mode}" + ("_kinds" if shape == "kinds_stars" and self.mode == "risk" else
                                         "" if shape == "deductions" else f"_{shape}")

    @property
    def headline(self) -> str:
        """``"N cases need review"`` (``"1 case needs review"``, ``"no case needs review"``)."""
        n = self.n_needs_review
        return ("no case needs review" if n == 0 else "1 case needs review" if n == 1
                else f"{n} cases need review")

    def top(self, n: int) -> list[CaseAudit]:
        """The first ``n`` cases of the queue (every case for ``n <= 0``)."""
        return self.cases[:n] if n > 0 else list(self.cases)


# --------------------------------------------------------------------------- building the audit


def audit(run: StoredRun, cons: Sequence[CaseConsensus]) -> list[CaseAudit]:
    """Every case of a run, audited and ranked (module docstring: scores, review, ranking, matching)."""
    derived = run.scores
    by_case: dict[str, list[StoredCall]] = {}
    for r in run.records:
        by_case.setdefault(r.case_id, []).append(r)
    policy = ungrounded_policy(run.config)
    anchors = case_anchors([c.case_id for c in cons])
    own_criteria = ({c.id: c.criteria for c in run.cases if c.criteria is not None}
                    if any(d.uses_case_criteria for d in run.rubric.dimensions) else {})
    dims = [_dim_facts(d, penalties=d.view == VIEW_DEDUCTIONS and bool(as_deductions(d).fixed_penalties))
            for d in run.rubric.dimensions] if cons else []
    found = run.grounding or {}
    config = run.config.consensus
    audits = []
    for c in cons:
        cid = c.case_id
        a = _audit_case(run.rubric, dims, run.judges, c, by_case.get(cid, []), derived, config, policy, found,
                        own_criteria.get(cid))
        a.anchor = anchors[cid]
        audits.append(a)
    return rank(audits, queue_mode(len(run.judges)))


@dataclass(slots=True, frozen=True)
class _Dim:
    """A rubric dimension's facts the audit reads for every case, looked up once per run (:func:`audit`)."""

    dim: Dimension
    anchors: Mapping[int, str]
    low: float
    #: a ``deductions`` dimension whose rubric has fixed penalties (its judges' penalty share counts)
    penalties: bool
    #: deduction type id -> (category id, category name, type id, type name), filled as the types are met
    types: dict[str, tuple[str, str, str, str]]


def _dim_facts(dim: Dimension, penalties: bool = False) -> _Dim:
    return _Dim(dim=dim, anchors=dim.anchors, low=dim.low, penalties=penalties, types={})


def queue_mode(panel_size: int) -> QueueMode:
    """``risk`` for a panel of one judge, ``disagreement`` otherwise."""
    return "risk" if panel_size == 1 else "disagreement"


def _formula_shape(audits: Sequence[CaseAudit]) -> str:
    """Which parts the queue's score has: ``deductions`` (a rubric with deduction dimensions), else ``kinds``
    (likert / criteria: spreads only) or ``kinds_stars`` (and star gaps: some dimension has stars)."""
    dims = audits[0].dimensions if audits else []
    if not dims or any(dim.view == VIEW_DEDUCTIONS for dim in dims):
        return "deductions"
    return "kinds_stars" if any(v.stars is not None for dim in dims for v in dim.judges) else "kinds"


def review_queue(audits: Sequence[CaseAudit], panel_size: int) -> ReviewQueue:
    """The queue of ranked ``audits`` (as :func:`audit` returns them) for a panel of ``panel_size``
    judges: title, counts per status and reason, the cases in order."""
    mode = queue_mode(panel_size)
    by_status: dict[str, int] = {}
    by_reason: dict[str, int] = {}
    for a in audits:
        by_status[a.status] = by_status.get(a.status, 0) + 1
        for code in dict.fromkeys(r.code for r in a.reasons):
            by_reason[code] = by_reason.get(code, 0) + 1
    shape = _formula_shape(audits)
    formulas = {"deductions": (RISK_FORMULA, DISAGREEMENT_FORMULA),
                "kinds": (RISK_FORMULA_KINDS, DISAGREEMENT_FORMULA_KINDS),
                "kinds_stars": (RISK_FORMULA_KINDS, DISAGREEMENT_FORMULA_KINDS_STARS)}[shape]
    return ReviewQueue(
        mode=mode, title="Highest-risk cases" if mode == "risk" else "Most disputed cases",
        score_name=mode, formula=formulas[0] if mode == "risk" else formulas[1],
        panel_size=panel_size, n_cases=len(audits), n_needs_review=sum(a.needs_review for a in audits),
        by_status=by_status, by_reason={c: by_reason[c] for c in reason_codes() if c in by_reason},
        cases=list(audits),
    )


def export_selection(audits: Sequence[CaseAudit], top: int, keep: Collection[str] = ()) -> list[CaseAudit]:
    """The cases an adjudication sheet holds, in the queue's order: every case in ``keep`` (a reviewer's: those they
    labelled or were assigned), wherever it is in the queue, and the first ``top`` of the others (0: all).
    ``--top`` limits only the cases not in ``keep``: a sheet exported for a reviewer holds all their labels."""
    wanted = set(keep)
    others = [a.case_id for a in audits if a.case_id not in wanted]
    wanted.update(others[:top] if top > 0 else others)
    return [a for a in audits if a.case_id in wanted]


def rank(audits: Iterable[CaseAudit], mode: QueueMode = "disagreement") -> list[CaseAudit]:
    """Sort: failed, inconclusive, incomplete, then the cases that need review, then the rest; within
    each by the ``mode`` score, then the other one (highest first; scores equal to 9 decimals are ties,
    so float noise never reorders equal cases); ties keep the given order; set ``rank`` from 1."""
    other: QueueMode = "disagreement" if mode == "risk" else "risk"
    ordered = sorted(audits, key=lambda a: (_STATUS_ORDER.get(a.status, 4), not a.needs_review,
                                            -round(a.score(mode), 9), -round(a.score(other), 9)))
    for i, a in enumerate(ordered, 1):
        a.rank = i
    return ordered


def disagreement_score(spread_share: float | None, star_gap_mean: float | None,
                       singleton_share: float | None) -> float:
    """``100 x spread_share + 10 x star_gap_mean + 10 x singleton_share`` (a missing part counts 0)."""
    return (SPREAD_WEIGHT * (spread_share or 0.0) + STAR_GAP_WEIGHT * (star_gap_mean or 0.0)
            + SINGLETON_WEIGHT * (singleton_share or 0.0))


def risk_score(lost_share: float | None, penalty_share: float | None, ungrounded_share: float | None) -> float:
    """``100 x lost_share + 10 x penalty_share + 10 x ungrounded_share`` (a missing part counts 0)."""
    return (LOST_WEIGHT * (lost_share or 0.0) + PENALTY_WEIGHT * (penalty_share or 0.0)
            + UNGROUNDED_WEIGHT * (ungrounded_share or 0.0))


def ungrounded_policy(config: EvalConfig) -> str:
    """The config's ``ungrounded`` policy (keep | flag | drop | reask; default flag): only ``flag`` makes a
    case with evidence not found in it need review."""
    return str(config.ungrounded)


def run_label(run: int, n_runs: int) -> str:
    """Stored run ``run`` (from 0) in readers' numbering: ``"run 1 of 3"``."""
    return f"run {run + 1} of {n_runs}"


def case_anchors(case_ids: Iterable[str]) -> dict[str, str]:
    """A unique anchor per case id (module docstring), in the order given: a clash gets ``-2``, ``-3``."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for cid in case_ids:
        if cid in out:
            continue
        base = anchor = case_anchor(cid)
        k = 2
        while anchor in taken:
            anchor, k = f"{base}-{k}", k + 1
        taken.add(anchor)
        out[cid] = anchor
    return out


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def case_anchor(case_id: str) -> str:
    """``case-`` + the id's ASCII letters, digits, ``_`` and ``-`` (others as ``-``, at most 48), + 8
    hex digits of its SHA-256 when anything was dropped or changed; safe in HTML ids and URLs.
    Unique per id only up to clashes :func:`case_anchors` resolves."""
    slug = _UNSAFE.sub("-", case_id).strip("-")[:48].strip("-")
    if slug != case_id:
        digest = hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:8]
        slug = f"{slug}-{digest}" if slug else digest
    return f"case-{slug}"


def drill_down(deductions: Sequence[AuditDeduction], runs_ok: Sequence[int], n_runs: int) -> list[RunGroup]:
    """A judge's deductions on one dimension as the drill-down shows them (module docstring)."""
    if not deductions:
        return []
    first = deductions[0].run
    if all(d.run == first for d in deductions):
        return [_one_run_group(deductions, first, n_runs)]
    items: dict[tuple[object, ...], DrillItem] = {}
    by_run: dict[int, list[AuditDeduction]] = {}
    for d in deductions:
        by_run.setdefault(d.run, []).append(d)
    for r in sorted(by_run):   # runs in order: a line's last run is this one once it has been seen in it
        penalty_key: dict[str, tuple[object, ...]] = {}
        penalty_listed: dict[tuple[object, ...], int] = {}   # a line's listings in this run: only a penalty's repeat
        seen: dict[tuple[object, ...], int] = {}
        for d in by_run[r]:
            penalty = d.kind == "penalty"
            if penalty and d.type_id in penalty_key:
                key = penalty_key[d.type_id]       # listed again in this run: charged once
            else:
                base: tuple[object, ...] = (d.kind, d.type_id, d.points, d.evidence.strip())
                k = seen.get(base, 0)
                seen[base] = k + 1
                key = (base, k)                    # the k-th listing within a run is its own line
                if penalty:
                    penalty_key[d.type_id] = key
            item = items.get(key)
            if item is None:
                items[key] = DrillItem(deduction=d, occurrences=[d], runs=[r], n_runs=n_runs,
                                       times_listed=1, applied_once=False)
            else:
                item.occurrences.append(d)
                if item.runs[-1] != r:
                    item.runs.append(r)
            if penalty:
                penalty_listed[key] = penalty_listed.get(key, 0) + 1
        for key, n in penalty_listed.items():
            if n > 1:
                item = items[key]
                item.times_listed = max(item.times_listed, n)
                item.applied_once = True
    if len(by_run) == 1:                           # one run: one group, every line in it
        only = (next(iter(by_run)),)
        return [RunGroup(runs=list(only), n_runs=n_runs, label=_group_label(only, n_runs), items=list(items.values()))]
    groups: dict[tuple[int, ...], list[DrillItem]] = {}
    for item in items.values():
        groups.setdefault(tuple(item.runs), []).append(item)
    every = tuple(sorted(runs_ok))

    def order(runs: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
        return (0 if runs == every else 1 if len(runs) == 1 else 2, len(runs), runs)

    return [RunGroup(runs=list(runs), n_runs=n_runs, label=_group_label(runs, n_runs), items=its)
            for runs, its in sorted(groups.items(), key=lambda kv: order(kv[0]))]


def _one_run_group(deductions: Sequence[AuditDeduction], run: int, n_runs: int) -> RunGroup:
    """:func:`drill_down` of deductions all made in run ``run``: one group; within one run every listing is its own
    line (the k-th listing of the same deduction included), except a fixed penalty listed again (charged once)."""
    items: list[DrillItem] = []
    penalties: dict[str, DrillItem] = {}   # type id -> its line
    for d in deductions:
        if d.kind == "penalty":
            item = penalties.get(d.type_id)
            if item is not None:
                item.occurrences.append(d)
                item.times_listed += 1
                item.applied_once = True
                continue
            item = penalties[d.type_id] = DrillItem(deduction=d, occurrences=[d], runs=[run], n_runs=n_runs,
                                                    times_listed=1, applied_once=False)
        else:
            item = DrillItem(deduction=d, occurrences=[d], runs=[run], n_runs=n_runs, times_listed=1,
                             applied_once=False)
        items.append(item)
    return RunGroup(runs=[run], n_runs=n_runs, label=_group_label((run,), n_runs), items=items)


def _group_label(runs: tuple[int, ...], n_runs: int) -> str:
    if n_runs <= 1:
        return ""
    if len(runs) == n_runs:
        return f"all {n_runs} runs"
    if len(runs) == 1:
        return run_label(runs[0], n_runs)
    return f"runs {', '.join(str(r + 1) for r in runs)} of {n_runs}"


def _mean(values: Sequence[float]) -> float | None:
    return fsum(values) / len(values) if values else None   # statistics.fmean's sum and division


def _audit_case(rubric: Rubric, facts: Sequence[_Dim], judges: Sequence[str], cons: CaseConsensus,
                records: list[StoredCall], derived: Mapping[str, DimensionScore], config: ConsensusConfig,
                policy: str, found: Mapping[str, Grounding], case_criteria: Sequence[Criterion] | None) -> CaseAudit:
    calls: dict[tuple[str, str], list[StoredCall]] = {}   # (dimension, judge) -> its calls, in stored order
    mismatches: list[Mismatch] = []
    for r in records:
        key = (r.dimension, r.judge)
        same = calls.get(key)
        if same is None:
            calls[key] = [r]
        else:
            same.append(r)
        s = derived.get(r.request_hash)
        if s is not None and s.claim_mismatch:
            mismatches.append(Mismatch(judge=r.judge, run=r.run, dimension=r.dimension,
                                       dimension_name=rubric.dimension(r.dimension).name,
                                       claimed_score=s.claimed_score, claimed_stars=s.claimed_stars,
                                       derived_score=s.score, derived_stars=s.stars))
    dims = [_audit_dimension(f, judges, cons, calls, derived, found, case_criteria) for f in facts]
    views = [v for dim in dims for v in dim.judges]
    singles: set[tuple[str, str, str]] = set()
    comparable: set[tuple[str, str, str]] = set()
    n_checked = 0   # deductions whose evidence was looked for in the case ...
    ungrounded: set[tuple[str, str, str, str, str]] = set()   # ... and those not found, each listing once
    n_ungrounded = 0
    for v in views:
        for ded in v.deductions:
            if ded.match != "no_peer":
                made = (ded.judge, ded.dimension, ded.type_id)
                comparable.add(made)
                if ded.match == "none":   # ded.singleton
                    singles.add(made)
            g = ded.grounding
            if g is not None:
                n_checked += 1
                if not g.grounded:      # ded.ungrounded
                    n_ungrounded += 1
                    ungrounded.add((ded.judge, ded.dimension, ded.kind, ded.type_id, ded.evidence))
    compared = [dim for dim in dims if dim.spread is not None]
    spread_share = _mean([dim.spread_share for dim in compared if dim.spread_share is not None])
    star_gap_mean = _mean([float(dim.star_gap) for dim in compared])
    singleton_share = len(singles) / len(comparable) if comparable else None
    lost_share = _mean([x for dim in dims if (x := _lost(dim)) is not None])
    penalty_runs = [len({x.run for x in v.deductions if x.kind == "penalty"}) / v.runs_ok
                    for f, dim in zip(facts, dims, strict=True) if f.penalties for v in dim.judges if v.runs_ok]
    ungrounded_share = n_ungrounded / n_checked if n_checked else None
    answering = {v.judge for v in views if v.runs_ok}
    answered = [j for j in judges if j in answering]
    a = CaseAudit(
        case_id=cons.case_id, status=cons.status,
        disagreement=disagreement_score(spread_share, star_gap_mean, singleton_share),
        spread_share=spread_share, star_gap_mean=star_gap_mean, singleton_share=singleton_share,
        lost_share=lost_share, penalty_share=_mean(penalty_runs), ungrounded_share=ungrounded_share,
        n_judges_answered=len(answered),
        spread=_opt_float(cons.spread), star_gaps=sum(d.star_gap for d in dims), singletons=len(singles),
        mismatches=len(mismatches), ungrounded=len(ungrounded),
        total=_opt_float(cons.total), judge_totals={j: float(t) for j, t in cons.judge_totals.items()},
        flags=cons.flags,
        dimensions=dims, mismatch_runs=mismatches,
    )
    a.risk = risk_score(a.lost_share, a.penalty_share, a.ungrounded_share)
    a.reasons = review_reasons(a, config, policy, cons.flag_codes)
    a.needs_review = bool(a.reasons)
    return a


def _lost(dim: DimensionAudit) -> float | None:
    """The share of the dimension's range the case lost (of its max; of top minus bottom level on a likert
    scale): panel score, else the judges' mean score."""
    score = dim.panel_score
    if score is None:
        score = _mean([v.score for v in dim.judges if v.score is not None])
    low = dim.low   # a likert scale's lowest level, else 0
    if score is None or dim.max <= low:
        return None
    return (dim.max - score) / (dim.max - low)


def review_reasons(a: CaseAudit, cfg: ConsensusConfig, policy: str = "flag",
                   flags: Sequence[Flag] = ()) -> list[ReviewReason]:
    """Why case ``a`` needs review (module docstring, *Needs review*); empty when it does not. ``flags``: the
    case's consensus flags (:attr:`~consensus_eval.analysis.consensus.CaseConsensus.flag_codes`), which decide
    ``spread`` and ``split`` (:mod:`consensus_eval.domain.flags`)."""
    out: list[ReviewReason] = []
    if a.status == "failed":
        out.append(_reason(code="failed", text="no judge answered"))
    elif a.status == "inconclusive":
        out.append(_reason(code="inconclusive", value=a.n_judges_answered, limit=cfg.min_judges, text=(
            f"too few judges answered for a panel verdict ({a.n_judges_answered} answered, quorum "
            f"{cfg.min_judges})")))
    elif a.status == "incomplete":
        out.append(_reason(code="incomplete", text="calls still missing: the scores are provisional"))
    by_code = {(f.code, f.dimension): f for f in flags}
    if (spread := by_code.get(("spread", None))) is not None:
        out.append(_reason(code="spread", value=spread.value, limit=spread.limit, text=(
            f"the judges' totals are {_num(spread.value)} points apart (more than {_num(spread.limit)})")))
    gaps = [f"{dim.name} {dim.star_gap}★" for dim in a.dimensions if dim.star_gap >= cfg.flag_star_gap]
    if gaps:
        out.append(_reason(code="star_gap", subjects=gaps, limit=cfg.flag_star_gap, text=(
            f"judges' stars differ by {cfg.flag_star_gap} or more: {', '.join(gaps)}")))
    out += _kind_reasons(a, flags)
    if a.n_judges_answered == 1:
        low = [f"{dim.name} {v.stars}★" for dim in a.dimensions for v in dim.judges
               if v.stars is not None and v.stars <= LOW_STARS]
        if low:
            out.append(_reason(code="low_score", subjects=low, limit=LOW_STARS, text=(
                f"one judge only, and a low score: {', '.join(low)} ({LOW_STARS}★ or fewer)")))
        pens = dict.fromkeys(f"{d.type} ({dim.name})" for dim in a.dimensions for v in dim.judges
                             for d in v.deductions if d.kind == "penalty")
        if pens:
            out.append(_reason(code="fixed_penalty", subjects=list(pens), text=(
                f"one judge only applied a fixed penalty: {', '.join(pens)}")))
    if policy == "flag" and a.ungrounded:
        n = a.ungrounded
        out.append(_reason(code="ungrounded", value=n, text=(
            f"{n} deduction{'s' if n != 1 else ''} quote{'' if n != 1 else 's'} evidence not found in the case")))
    return out


def _kind_reasons(a: CaseAudit, flags: Sequence[Flag]) -> list[ReviewReason]:
    """The reasons the kinds' own flags of the case give, one per code, codes in the order the kinds registered
    (:meth:`~consensus_eval.domain.kinds.base.Dimension.review_reason`)."""
    dims = {d.dimension: d for d in a.dimensions}
    by_code: dict[str, list[tuple[str, Flag, list[str]]]] = {}
    for f in flags:
        dim = dims.get(f.dimension or "")
        if f.code not in ("spread", "star_gap") and dim is not None:
            by_code.setdefault(f.code, []).append((dim.name, f, [row.id for row in dim.criteria if row.split]))
    out = []
    for code in sorted(by_code, key=flag_rank):
        flagged = by_code[code]
        reason = kind_class(dims[flagged[0][1].dimension or ""].kind).review_reason(flagged)
        if reason is not None:
            out.append(_reason(code=code, text=reason.text, subjects=reason.subjects, value=reason.value,
                               limit=reason.limit))
    return out


def _reason(*, code: ReasonCode, text: str, subjects: list[str] | None = None, value: float | None = None,
            limit: float | None = None) -> ReviewReason:
    """A :class:`ReviewReason` with its figures as floats (a count or a threshold given as an int)."""
    return ReviewReason(code=code, text=text, subjects=subjects if subjects is not None else [],
                        value=_opt_float(value), limit=_opt_float(limit))


def _opt_float(x: float | None) -> float | None:
    return None if x is None else float(x)


_num = fmt_short


def _audit_dimension(f: _Dim, judges: Sequence[str], cons: CaseConsensus,
                     calls: Mapping[tuple[str, str], list[StoredCall]], derived: Mapping[str, DimensionScore],
                     found: Mapping[str, Grounding], case_criteria: Sequence[Criterion] | None) -> DimensionAudit:
    dim = f.dim
    dim_id = dim.id
    by_judge = cons.judges
    views = [_judge_view(f, j, by_judge.get(j), calls.get((dim_id, j)), derived, found) for j in judges]
    _match_deductions(views)
    stars = [v.stars for v in views if v.stars is not None]
    scores = [v.score for v in views if v.score is not None]
    spread = (max(scores) - min(scores)) if len(scores) >= 2 else None
    ratings = [v.score for v in views if v.ratings and v.score is not None]
    anchors = f.anchors
    return DimensionAudit(
        dimension=dim_id, name=dim.name, max=dim.max, panel_score=cons.scores.get(dim_id),
        star_gap=(max(stars) - min(stars)) if len(stars) >= 2 else 0, judges=views,
        spread=spread,
        spread_share=(spread / (dim.max - f.low)) if spread is not None and dim.max > f.low else None,
        kind=dim.kind, levels=dict(anchors),
        level_spread=(max(ratings) - min(ratings)) if anchors and len(ratings) >= 2 else None,
        criteria=_criterion_rows(dim, views, case_criteria) if dim.by_criteria else [],
        low=f.low, view=dim.view,
    )


def _criterion_rows(dim: Dimension, views: Sequence[JudgeView],
                    case_criteria: Sequence[Criterion] | None) -> list[CriterionRow]:
    """The criterion x judge table of a criteria dimension: the case's criteria in their order, split ones
    first; a verdict on an id the criteria do not list is left out (a judgment is validated against them)."""
    crits = dim.judged_criteria(case_criteria)
    rows = []
    for c in crits:
        by_judge = {v.judge: [x.met for x in v.verdicts if x.id == c.id] for v in views if v.runs_ok}
        by_judge = {j: m for j, m in by_judge.items() if m}
        every = [m for ms in by_judge.values() for m in ms]
        per_judge = [2 * sum(ms) > len(ms) for ms in by_judge.values() if 2 * sum(ms) != len(ms)]
        rows.append(CriterionRow(id=c.id, text=c.text, points=float(c.points), judges=by_judge,
                                 split=bool(split_criteria({c.id: per_judge})),
                                 met_share=sum(every) / len(every) if every else None,
                                 tie=majority(per_judge) == "split"))
    return sorted(rows, key=lambda r: not r.split)


def _judge_view(f: _Dim, judge: str, scores: Mapping[str, JudgeScore] | None, recs: list[StoredCall] | None,
                derived: Mapping[str, DimensionScore], found: Mapping[str, Grounding]) -> JudgeView:
    """``judge`` on dimension ``f`` of one case: ``scores`` its consensus scores on the case (by dimension),
    ``recs`` its calls on the dimension, in stored order (None: none)."""
    score = scores.get(f.dim.id) if scores else None
    if not recs:
        # judge, score, stars, runs_ok, runs_failed, deductions, errors, comments, runs, n_runs, ratings, verdicts
        return _view(judge, score.mean if score else None, score.stars if score else None, 0, 0, (), (), (), (), 0,
                     (), ())
    if len(recs) == 1 and recs[0].request_hash in derived and not f.anchors:
        return _one_call_view(f, judge, score, recs[0], found)
    ok: list[StoredCall] = []
    errors: list[str] = []
    n_runs = len(recs)
    for r in recs:
        if r.request_hash in derived:
            ok.append(r)
        else:
            errors.append(r.error or "failed")
        if r.run >= n_runs:
            n_runs = r.run + 1
    if len(ok) > 1:
        ok.sort(key=_run_of)   # stable: calls of the same run keep their stored order
    deductions: list[AuditDeduction] = []
    comments: list[str] = []
    verdicts: list[VerdictItem] = []
    for r in ok:
        j = r.judgment
        if j is None:
            continue
        if j.deductions or j.fixed_penalties:
            deductions += _deductions(f, r, found)
        if j.comment:
            comments.append(j.comment)
        if j.verdicts:
            verdicts += _verdicts(r, j, found)
    # tuples (an empty one is shared), the run numbers shared between views: a large run holds ~10 views per case
    return _view(
        judge,
        score.mean if score else None,
        score.stars if score else None,
        len(ok), len(errors),
        tuple(deductions), tuple(errors), tuple(comments),
        _shared_runs(tuple(r.run for r in ok)), n_runs,
        _ratings(f.anchors, ok, found) if f.anchors else (), tuple(verdicts),
    )


def _one_call_view(f: _Dim, judge: str, score: JudgeScore | None, r: StoredCall,
                   found: Mapping[str, Grounding]) -> JudgeView:
    """:func:`_judge_view` of a judge with one successful call on the dimension (not a likert one): most views."""
    j = r.judgment
    deductions: tuple[AuditDeduction, ...] = ()
    comments: tuple[str, ...] = ()
    verdicts: tuple[VerdictItem, ...] = ()
    if j is not None:
        if j.deductions or j.fixed_penalties:
            deductions = tuple(_deductions(f, r, found))
        if j.comment:
            comments = (j.comment,)
        if j.verdicts:
            verdicts = tuple(_verdicts(r, j, found))
    run = r.run
    return _view(judge, score.mean if score else None, score.stars if score else None, 1, 0, deductions, (), comments,
                 _shared_runs((run,)), run + 1 if run >= 1 else 1, (), verdicts)


def _verdicts(r: StoredCall, j: StoredJudgment, found: Mapping[str, Grounding]) -> list[VerdictItem]:
    """The verdicts of call ``r`` (its judgment ``j``) on a criteria dimension's criteria, with where each one's
    evidence is (``{request_hash}#v{i}``)."""
    return [VerdictItem(run=r.run, id=v.id, met=v.met, evidence=v.evidence, reason=v.reason,
                        grounding=found.get(f"{r.request_hash}#v{i}")) for i, v in enumerate(j.verdicts)]


def _run_of(r: StoredCall) -> int:
    return r.run


def _ratings(anchors: Mapping[int, str], ok: Sequence[StoredCall],
             grounding: Mapping[str, Grounding]) -> tuple[RatingItem, ...]:
    """Each successful run's level on a likert dimension (``anchors``: its levels' texts), with the level's anchor
    and where each quote is (``grounding`` by quote id, ``{request_hash}#e{i}``)."""
    return tuple(RatingItem(run=r.run, rating=r.judgment.rating, anchor=anchors.get(r.judgment.rating, ""),
                       evidence=list(r.judgment.evidence), comment=r.judgment.comment,
                       grounding=[grounding.get(f"{r.request_hash}#e{i}") for i in range(len(r.judgment.evidence))])
            for r in ok if r.judgment is not None and r.judgment.rating is not None)


def deductions_of(rubric: Rubric, rec: StoredCall,
                  grounding: Mapping[str, Grounding] | None = None) -> list[AuditDeduction]:
    """The deductions and fixed penalties of one successful call, with the rubric's display names and,
    from ``grounding`` (:attr:`StoredRun.grounding`, by deduction id), where each one's evidence is."""
    if rec.judgment is None:
        return []
    return _deductions(_dim_facts(rubric.dimension(rec.dimension)), rec, grounding or {})


def _deductions(f: _Dim, rec: StoredCall, found: Mapping[str, Grounding]) -> list[AuditDeduction]:
    """:func:`deductions_of` with the facts of the call's dimension given (its types looked up once)."""
    judgment = rec.judgment
    if judgment is None or not (judgment.deductions or judgment.fixed_penalties):
        return []
    # from a judgment validated when stored, the rubric and groundings, with the types validation would give
    call, judge, run, dimension = rec.request_hash, rec.judge, rec.run, rec.dimension
    types = f.types
    items = []
    for i, d in enumerate(judgment.deductions):
        t = types.get(d.type)
        if t is None:
            cat, typ = as_deductions(f.dim).find_type(d.type)
            t = types[d.type] = (cat.id, cat.name, typ.id, typ.name)
        items.append(AuditDeduction(
            call=call, index=i, judge=judge, run=run, dimension=dimension, kind="deduction",
            category_id=t[0], category=t[1], type_id=t[2], type=t[3],
            points=float(d.points), evidence=d.evidence, reason=d.reason, match="no_peer", matched_by=(),
            grounding=found.get(f"{call}#d{i}") if found else None, copy_of=None))
    if not judgment.fixed_penalties:
        return items
    kinds = as_deductions(f.dim)
    copies = penalty_copies(rec)
    for i, p in enumerate(judgment.fixed_penalties):
        pen = kinds.penalties_by_id[p.id]
        pid = f"{call}#p{i}"
        items.append(AuditDeduction(
            call=call, index=i, judge=judge, run=run, dimension=dimension, kind="penalty",
            category_id=PENALTY_CATEGORY, category=PENALTY_CATEGORY_NAME, type_id=pen.id, type=pen.name,
            points=float(pen.points), evidence=p.evidence, reason=p.reason, match="no_peer", matched_by=(),
            grounding=found.get(pid), copy_of=copies.get(pid)))
    return items


def penalty_copies(rec: StoredCall) -> dict[str, str]:
    """A call's fixed penalties listed more than once (the score charges each once): the id of every
    repeat listing -> the id of the first listing of the same penalty (empty: no repeats)."""
    if rec.judgment is None:
        return {}
    first: dict[str, str] = {}
    out: dict[str, str] = {}
    for i, p in enumerate(rec.judgment.fixed_penalties):
        pid = f"{rec.request_hash}#p{i}"
        if p.id in first:
            out[pid] = first[p.id]
        else:
            first[p.id] = pid
    return out


def _match_deductions(views: list[JudgeView]) -> None:
    """Set ``match`` and ``matched_by`` of every deduction against the other judges' (in place; the deductions of
    fresh views, made ``no_peer``: a judge without peers keeps that)."""
    answered = [v for v in views if v.runs_ok]
    if len(answered) < 2:   # nobody to compare with
        return
    # each deduction type's and category's judges, in panel order (a judge once: its deductions are together)
    type_judges: dict[str, list[str]] = {}
    cat_judges: dict[str, list[str]] = {}
    for v in answered:
        me = v.judge
        for d in v.deductions:
            js = type_judges.get(d.type_id)
            if js is None:
                type_judges[d.type_id] = [me]
            elif js[-1] != me:
                js.append(me)
            js = cat_judges.get(d.category_id)
            if js is None:
                cat_judges[d.category_id] = [me]
            elif js[-1] != me:
                js.append(me)
    names = [v.judge for v in answered]
    for v in answered:
        if not v.deductions:
            continue
        me = v.judge
        if names.count(me) == len(names):   # no other judge answered
            continue
        found: dict[tuple[str, str], tuple[Match, tuple[str, ...]]] = {}   # (type, category) -> its match
        for d in v.deductions:
            key = (d.type_id, d.category_id)
            res = found.get(key)
            if res is None:   # the other judges with its type, else those with its category, else none
                same = [p for p in type_judges[key[0]] if p != me]
                if same:
                    res = found[key] = ("type", _shared_names(tuple(same)))
                else:
                    same = [p for p in cat_judges[key[1]] if p != me]
                    res = found[key] = ("category", _shared_names(tuple(same))) if same else _UNMATCHED
            d.match, d.matched_by = res


_UNMATCHED: tuple[Match, tuple[str, ...]] = ("none", ())


@lru_cache(maxsize=1024)
def _shared_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names``, or the equal tuple returned before: one object for every deduction matched by the same judges."""
    return names


@lru_cache(maxsize=1024)
def _shared_runs(runs: tuple[int, ...]) -> tuple[int, ...]:
    """``runs``, or the equal tuple returned before: one object for every view with the same run numbers."""
    return runs
