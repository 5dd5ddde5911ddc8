"""Human labels: what reviewers said about a run, read back from the adjudication sheet, gathered
per case, and what they say about the judges.

The loop (README, "Human review"): ``audit --export SHEET.csv`` writes the sheet (one ``score`` row
per case and dimension, one ``deduction`` row per judge's deduction); a reviewer fills ``human_score``,
``human_verdict`` (agree / disagree / unsure), ``human_comment`` and ``reviewer``;
``consensus-eval human import SHEET --run DIR`` reads it back (:func:`read_labels`) into the store's
``human_labels`` table (:class:`~consensus_eval.execution.store.HumanLabelRecord`); every command then
reads the labels from the store (:class:`HumanReview`) and :func:`human_agreement` computes the
``human`` section of reliability.json.

The sheet is read back whatever a spreadsheet did to it: a BOM, GBK/GB18030 (Excel on Chinese
Windows), ``;`` or tab as the delimiter (Excel in European locales), CRLF, a decimal comma, case ids
that Excel turned from ``001`` into ``1``, the ``'`` the export put before a cell that looked like a
formula, trailing empty rows and columns, verdicts typed in Chinese (同意 / 不同意 / 不确定) or in
capitals. Every problem is an :class:`InputError` naming the file, the line and the column; a case
or deduction id that is not in the run is an error naming it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal, cast

import numpy as np
from pydantic import BaseModel, PrivateAttr

from consensus_eval._errors import InputError
from consensus_eval.analysis.agreement import (
    SMALL_SAMPLE_CASES,
    AddedDeduction,
    HumanAgreement,
    HumanLabel,
    JudgePrecision,
    agreement,
    judge_value,
    load_human,
    matrix,
    panel_value,
    points_taken,
)
from consensus_eval.analysis.alpha import DEFAULT_SEED, Alpha, alpha_with_ci
from consensus_eval.analysis.audit import PENALTY_CATEGORY, penalty_copies
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.intervals import proportion
from consensus_eval.domain.kinds.deductions import as_deductions, deductions_in
from consensus_eval.domain.reviewers import clean_name
from consensus_eval.domain.rubric import Criterion, Dimension, Rubric
from consensus_eval.domain.sets import jaccard
from consensus_eval.domain.textio import csv_records, decimal_point, read_bytes, read_text, unguard
from consensus_eval.domain.words import normal, spelled, words
from consensus_eval.execution.store import CRITERION_VALUES, VERDICTS, HumanLabelRecord, LabelOrigin, Verdict
from consensus_eval.execution.stored_run import StoredRun

#: the reviewer a label gets when neither the file nor ``--reviewer`` names one
DEFAULT_REVIEWER = "human"

# --------------------------------------------------------------------------- the sheet's columns

#: ``row`` says what a sheet row asks: ``score`` (the reviewer's score of a case's dimension),
#: ``deduction`` (the reviewer's verdict on one judge's deduction), or ``added`` (a deduction the judges
#: missed, added by the reviewer: ``dimension``, ``type_id`` or ``type``, ``points``, ``human_comment``)
ROW_SCORE = "score"
ROW_DEDUCTION = "deduction"
ROW_ADDED = "added"
#: the columns the reviewer fills (left empty by the export unless labels are written in)
HUMAN_SCORE, HUMAN_VERDICT, HUMAN_COMMENT, REVIEWER = "human_score", "human_verdict", "human_comment", "reviewer"
#: on a ``score`` row, where ``human_score`` came from: ``own`` (the reviewer's score; also when empty) or
#: ``accepted`` (the panel's score, accepted as it is). Writing ``accept`` (接受 / 采纳) in ``human_score``
#: accepts the row's ``panel_score`` the same way.
SCORE_ORIGIN = "score_origin"
#: what a reviewer may type in ``score_origin`` (and ``human_score``, for ``accepted``)
ORIGIN_WORDS: dict[str, LabelOrigin] = cast(dict[str, LabelOrigin], words("score_origin"))
#: on a ``score`` row of a spot-check case, the reviewer's score changed after the judges were shown: the revision
#: kept beside their blind score (``human_score``, what validity uses). Filled in, it is the score the row gives.
REVISED_SCORE = "revised_score"
#: the case's record and conversation, on the first row of a spot-check case: what a reviewer working from the sheet
#: alone scores
RECORD, CONVERSATION = "record", "conversation"
#: the stable id of a deduction (:attr:`consensus_eval.analysis.audit.AuditDeduction.id`)
DEDUCTION_ID = "deduction_id"
#: a column of the sheet showing one judge's score of the dimension on ``score`` rows
JUDGE_SCORE_PREFIX = "score: "
#: the sheet's columns before the judges' score columns
SHEET_HEAD = ["row", "rank", "case_id", "dimension", "dimension_name", "max", "panel_score"]
#: the sheet's columns after the judges' score columns
SHEET_TAIL = ["judge", "run", "kind", "category", "type", "points", "evidence", "reason",
              HUMAN_SCORE, SCORE_ORIGIN, REVISED_SCORE, HUMAN_VERDICT, HUMAN_COMMENT, REVIEWER,
              "match", "matched_by", "claim_mismatch", "status", "disagreement", "category_id", "type_id",
              DEDUCTION_ID, "sample", RECORD, CONVERSATION]
#: a column of the sheet giving the reviewer's verdict on one criterion of a criteria dimension, on that dimension's
#: ``score`` row: ``criterion: <id>`` (one column per criterion id of the run), ``met`` / ``not met`` (or the
#: words of domain/locale), empty when not reviewed
CRITERION_PREFIX = "criterion: "
#: what a reviewer may type in a criterion column
CRITERION_WORDS: dict[str, str] = words("criterion")
#: the ``sample`` column: the case is in the random spot check (``spot_check``) or not (``queue``)
SAMPLE_SPOT, SAMPLE_QUEUE = "spot_check", "queue"

#: what a reviewer may type for each verdict (compared case-insensitively, spaces ignored), in every
#: language of domain/locale (:func:`~consensus_eval.domain.words.words`)
VERDICT_WORDS: dict[str, Verdict] = cast(dict[str, Verdict], words("verdict"))


def parse_verdict(text: str) -> Verdict | None:
    """The verdict a reviewer typed (``Agree``, ``同意``, ``not sure``...), None if it is none of them."""
    return VERDICT_WORDS.get(normal(text))


# --------------------------------------------------------------------------- labels gathered per case


class CaseReview(BaseModel):
    """Everything the reviewers said about one case: the lookup a drill-down shows beside the panel.

    - ``scores``: reviewer -> key (dimension id or ``total``) -> their own score, as given (a reviewer's
      total is their ``total`` label if any, else the rubric's total of their dimension scores when complete:
      the sum of weight x score); a
      score the reviewer accepted from the panel is here only when the review was built with
      ``include_accepted``;
    - ``accepted``: reviewer -> dimension id -> the panel's score they accepted without entering their own;
    - ``revisions``: reviewer -> dimension id -> their score changed after the judges were shown to them (a spot-check
      case): kept beside their blind score in ``scores``, which is what every figure uses;
    - ``reference``: dimension id (and ``total`` when every dimension has one) -> the adjudicator's score where
      reviewers disagreed (labels of origin ``reference``); ``reference_verdicts``: deduction id -> the
      adjudicator's verdict where one reviewer agreed with the deduction and another did not; ``adjudicators``
      who gave either;
    - ``human``: key -> the human score used in the agreement figures: the adjudicator's reference score
      where there is one, else the mean over the reviewers' own scores;
    - ``panel``: key -> the panel's consensus score of the case (None: no panel verdict);
    - ``verdicts``: deduction id -> reviewer -> agree / disagree / unsure (the reviewers' own, not the
      adjudicator's reference);
    - ``comments``: the reviewers' comments (labels of kind ``comment``, and ``verdict`` labels that
      carry a comment), in the order written; ``added``: the deductions they added (kind ``added_deduction``);
    - ``criteria``: reviewer -> criteria dimension id -> criterion id -> met (their own verdicts, labels of kind
      ``criterion``; the panel's verdicts a reviewer accepted only with ``include_accepted``, and kept in
      ``accepted_criteria`` either way); ``reference_criteria``: dimension id -> criterion id -> the
      adjudicator's verdict. A reviewer who gave a verdict on every criterion of a criteria dimension and no
      score of it has the score those verdicts give (HealthBench's formula,
      :func:`consensus_eval.domain.scoring.derive`) in ``scores``: one judgement per criterion, never two
      labels for it.
    """

    case_id: str
    scores: dict[str, dict[str, float]] = {}
    accepted: dict[str, dict[str, float]] = {}
    revisions: dict[str, dict[str, float]] = {}
    reference: dict[str, float] = {}
    reference_verdicts: dict[str, Verdict] = {}
    adjudicators: list[str] = []
    human: dict[str, float] = {}
    panel: dict[str, float | None] = {}
    verdicts: dict[str, dict[str, Verdict]] = {}
    comments: list[HumanLabelRecord] = []
    added: list[HumanLabelRecord] = []
    criteria: dict[str, dict[str, dict[str, bool]]] = {}
    accepted_criteria: dict[str, dict[str, dict[str, bool]]] = {}
    reference_criteria: dict[str, dict[str, bool]] = {}

    def whose(self, key: str) -> tuple[Literal["reference", "own", "mean"], list[str]]:
        """Whose score :attr:`human` shows for ``key``: the adjudicators' reference (``reference``), one reviewer's
        own (``own``), or the mean of several reviewers' own (``mean``), with their names."""
        if key in self.reference:
            return "reference", list(self.adjudicators)
        names = [n for n, given in self.scores.items() if key in given]
        return ("own" if len(names) == 1 else "mean"), names


class HumanReview(BaseModel):
    """A run's human labels (from its store) gathered per case. ``labels``: every label as stored;
    ``reviewers``: who labelled, in the order they first appear; ``cases``: case id -> its
    :class:`CaseReview` (only cases with a label). ``n_accepted``: score labels that accept the panel's
    score rather than give the reviewer's own; ``accepted_included``: whether they count as human scores
    here (by default they do not: a reviewer pressing "confirm" on the panel's score says nothing
    independent of the panel, and counting it would pull every judge-versus-human figure towards agreement)."""

    labels: list[HumanLabelRecord]
    reviewers: list[str]
    cases: dict[str, CaseReview]
    n_accepted: int = 0
    accepted_included: bool = False
    n_reference: int = 0
    _case_of: dict[str, str] | None = PrivateAttr(default=None)

    def case(self, case_id: str) -> CaseReview | None:
        """The reviewers' labels of one case (None: nobody labelled it)."""
        return self.cases.get(case_id)

    def verdicts(self, deduction_id: str) -> dict[str, Verdict]:
        """reviewer -> verdict on one deduction (empty: no verdict)."""
        if self._case_of is None:
            self._case_of = {lb.deduction_id: lb.case_id for lb in self.labels if lb.deduction_id}
        case_id = self._case_of.get(deduction_id)
        review = self.cases.get(case_id) if case_id is not None else None
        return dict(review.verdicts.get(deduction_id, {})) if review else {}


def build_review(labels: Sequence[HumanLabelRecord], rubric: Rubric,
                 consensus: Sequence[CaseConsensus] = (), *, include_accepted: bool = False,
                 case_criteria: Mapping[str, Sequence[Criterion]] | None = None) -> HumanReview:
    """Gather stored labels per case (:class:`CaseReview`); ``consensus`` fills each case's ``panel``.
    ``include_accepted``: count the panel's scores a reviewer accepted as their scores (off by default).
    ``case_criteria``: case id -> its own criteria, for a criteria dimension without criteria of its own;
    without it such a dimension's criteria are the ones labelled, with the points stored on each label."""
    dims = [d.id for d in rubric.dimensions]
    panel = {c.case_id: c for c in consensus}
    reviewers: list[str] = []
    cases: dict[str, CaseReview] = {}
    n_accepted = 0
    for lb in labels:
        if lb.reviewer not in reviewers and lb.origin != "reference":   # adjudicators: ``adjudicators``
            reviewers.append(lb.reviewer)
        cr = cases.setdefault(lb.case_id, CaseReview(case_id=lb.case_id))
        accepted, counts = _add_label(cr, lb, include_accepted)
        n_accepted += accepted
        if counts and lb.comment and lb.kind in ("comment", "verdict", "criterion"):
            cr.comments.append(lb)
    criteria_dims = [d for d in rubric.dimensions if d.by_criteria]
    if criteria_dims:
        _criteria_scores(cases, criteria_dims, labels, case_criteria or {})
    for cr in cases.values():
        _settle(cr, rubric, dims, panel.get(cr.case_id))
    return HumanReview(labels=list(labels), reviewers=reviewers, cases=cases, n_accepted=n_accepted,
                       accepted_included=include_accepted,
                       n_reference=sum(1 for lb in labels if lb.kind == "score" and lb.origin == "reference"))


def _adjudicated_by(cr: CaseReview, reviewer: str) -> None:
    if reviewer not in cr.adjudicators:
        cr.adjudicators.append(reviewer)


def _add_label(cr: CaseReview, lb: HumanLabelRecord, include_accepted: bool) -> tuple[int, bool]:
    """One stored label into its case's review (:func:`build_review`): whether it is a score or verdict a
    reviewer accepted from the panel (1, else 0), and whether its comment is kept (not an adjudicator's criterion
    verdict's, nor a criterion verdict accepted and left out)."""
    if lb.kind == "score" and isinstance(lb.value, (int, float)) and lb.dimension:
        return _add_score(cr, lb, lb.dimension, float(lb.value), include_accepted), True
    if lb.kind == "verdict" and lb.deduction_id and lb.value in VERDICTS:
        if lb.origin == "reference":
            cr.reference_verdicts[lb.deduction_id] = lb.value
            _adjudicated_by(cr, lb.reviewer)
        else:
            cr.verdicts.setdefault(lb.deduction_id, {})[lb.reviewer] = lb.value
    elif lb.kind == "added_deduction":
        cr.added.append(lb)
    elif lb.kind == "criterion" and lb.dimension and lb.deduction_id and lb.value in CRITERION_VALUES:
        return _add_criterion(cr, lb, lb.dimension, lb.deduction_id, include_accepted)
    return 0, True


def _add_score(cr: CaseReview, lb: HumanLabelRecord, dim: str, value: float, include_accepted: bool) -> int:
    """A score label: the adjudicator's reference, a score accepted from the panel, or a reviewer's own (with its
    revision); 1 for an accepted one."""
    if lb.origin == "reference":
        cr.reference[dim] = value
        _adjudicated_by(cr, lb.reviewer)
        return 0
    accepted = int(lb.origin == "accepted")
    if accepted:
        cr.accepted.setdefault(lb.reviewer, {})[dim] = value
        if not include_accepted:
            return 1
    cr.scores.setdefault(lb.reviewer, {})[dim] = value
    if isinstance(lb.revision, (int, float)) and lb.revision != lb.value:
        cr.revisions.setdefault(lb.reviewer, {})[dim] = float(lb.revision)
    return accepted


def _add_criterion(cr: CaseReview, lb: HumanLabelRecord, dim: str, cid: str,
                   include_accepted: bool) -> tuple[int, bool]:
    """A verdict on a criterion: the adjudicator's, one accepted from the panel, or a reviewer's own; as
    :func:`_add_label` returns."""
    met = lb.value == "met"
    if lb.origin == "reference":
        cr.reference_criteria.setdefault(dim, {})[cid] = met
        _adjudicated_by(cr, lb.reviewer)
        return 0, False
    accepted = int(lb.origin == "accepted")
    if accepted:
        cr.accepted_criteria.setdefault(lb.reviewer, {}).setdefault(dim, {})[cid] = met
        if not include_accepted:
            return 1, False
    cr.criteria.setdefault(lb.reviewer, {}).setdefault(dim, {})[cid] = met
    return accepted, True


def _settle(cr: CaseReview, rubric: Rubric, dims: Sequence[str], c: CaseConsensus | None) -> None:
    """A case's clinicians' scores (:attr:`CaseReview.human`: the reviewers' mean, the adjudicator's reference
    where given), each reviewer's total, and the panel's scores beside them; in place."""
    for given in cr.scores.values():
        if "total" not in given and all(d in given for d in dims):
            given["total"] = rubric.total(given)   # sum of weight x score (a plain sum at weight 1)
    keys = {k for given in cr.scores.values() for k in given}
    cr.human = {k: float(np.mean([g[k] for g in cr.scores.values() if k in g]))
                for k in [*dims, "total"] if k in keys}
    if cr.reference:   # the adjudicator's decision is the reference where given
        if "total" not in cr.reference and all(d in cr.reference for d in dims):
            cr.reference["total"] = rubric.total(cr.reference)
        cr.human.update(cr.reference)
        if "total" not in cr.reference and all(d in cr.human for d in dims):
            cr.human["total"] = rubric.total(cr.human)
    if c is not None:
        cr.panel = {**{d: c.scores.get(d) for d in dims}, "total": c.total}


def _criteria_scores(cases: Mapping[str, CaseReview], dims: Sequence[Dimension],
                     labels: Sequence[HumanLabelRecord], case_criteria: Mapping[str, Sequence[Criterion]]) -> None:
    """Each reviewer's (and the adjudicator's) score of a criteria dimension, from their verdicts on every one
    of its criteria, where they gave no score of it (:class:`CaseReview`); in place."""
    points = {(lb.case_id, lb.dimension, lb.deduction_id): lb.points for lb in labels
              if lb.kind == "criterion" and lb.points is not None}
    for cr in cases.values():
        for dim in dims:
            crits = dim.judged_criteria(case_criteria.get(cr.case_id))
            for reviewer, given in cr.criteria.items():
                if dim.id in given and dim.id not in cr.scores.get(reviewer, {}):
                    score = criteria_score(crits, given[dim.id], points, cr.case_id, dim.id)
                    if score is not None:
                        cr.scores.setdefault(reviewer, {})[dim.id] = score
            ref = cr.reference_criteria.get(dim.id)
            if ref and dim.id not in cr.reference:
                # the adjudicator settles the criteria the reviewers disagree on; the others are what they agree on
                agreed: dict[str, bool | None] = {}
                for given in cr.criteria.values():
                    for cid, met in given.get(dim.id, {}).items():
                        agreed[cid] = met if agreed.get(cid, met) == met else None
                merged = {**{k: v for k, v in agreed.items() if v is not None}, **ref}
                score = criteria_score(crits, merged, points, cr.case_id, dim.id)
                if score is not None:
                    cr.reference[dim.id] = score


def criteria_score(criteria: Sequence[Criterion], met: Mapping[str, bool],
                   points: Mapping[tuple[str, str | None, str | None], float | None] | None = None,
                   case_id: str = "", dim_id: str = "") -> float | None:
    """HealthBench's score of verdicts ``met`` (criterion id -> met) on ``criteria``: met points over positive
    points, clipped to [0, 1]; None unless every criterion has a verdict. Without ``criteria`` (a case's own,
    not known here) the criteria are the ones judged, with the points in ``points`` (stored on the labels)."""
    if criteria:
        if any(c.id not in met for c in criteria):
            return None
        pts = {c.id: c.points for c in criteria}
    else:
        found = {cid: (points or {}).get((case_id, dim_id, cid)) for cid in met}
        if not found or any(p is None for p in found.values()):
            return None
        pts = {cid: float(p) for cid, p in found.items() if p is not None}
    positive = sum(p for p in pts.values() if p > 0)
    if positive <= 0:
        return None
    achieved = sum(p for cid, p in pts.items() if met[cid])
    return round(min(1.0, max(0.0, achieved / positive)), 12)


def labels_from_wide(human: dict[str, HumanLabel], rubric: Rubric, reviewer: str,
                     source: str) -> list[HumanLabelRecord]:
    """The labels of the wide ``--human`` file (``case_id`` + one column per dimension, optional
    ``total`` and ``categories``) as stored labels of one reviewer. A total that is only the sum of
    the dimension scores (what :func:`load_human` fills in) is not stored: it is derived again."""
    out = []
    for h in human.values():
        dims = {k: v for k, v in h.scores.items() if k != "total"}
        for k, v in dims.items():
            out.append(HumanLabelRecord(case_id=h.case_id, dimension=k, reviewer=reviewer, kind="score",
                                        value=v, source=source))
        total = h.scores.get("total")
        complete = len(dims) == len(rubric.dimensions)
        if total is not None and not (complete and math.isclose(total, rubric.total(dims))):
            out.append(HumanLabelRecord(case_id=h.case_id, dimension="total", reviewer=reviewer, kind="score",
                                        value=total, source=source))
        if h.categories is not None:
            out.append(HumanLabelRecord(case_id=h.case_id, reviewer=reviewer, kind="categories",
                                        value=";".join(sorted(h.categories)), source=source))
    return out


# --------------------------------------------------------------------------- reading a file back


class LabelFile(BaseModel):
    """What one file of human labels gave: ``format`` ``sheet`` (the adjudication sheet) or ``wide``
    (``case_id`` + one column per dimension); ``labels``: reviewer -> their labels in it (every
    reviewer's labels from this ``source`` are replaced by these on import)."""

    path: str
    source: str
    format: Literal["sheet", "wide"]
    labels: dict[str, list[HumanLabelRecord]]
    #: reviewer -> the cases whose rows they filled in showed the judges' work (a panel or judge score, a judge's
    #: deduction): on a spot-check case, their blind scores are frozen before this file's labels are stored
    revealed: dict[str, list[str]] = {}

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.labels.values())


def read_labels(path: str | Path, run: StoredRun, *, reviewer: str | None = None,
                encoding: str | None = None) -> LabelFile:
    """Read a file of human labels against ``run``: the adjudication sheet (``audit --export``),
    or the wide format of :func:`~consensus_eval.analysis.agreement.load_human`.

    ``reviewer``: the name for rows whose ``reviewer`` cell is empty (default: the one name the sheet
    uses, else ``human``). Raises :class:`InputError` naming the file, line and column of a problem,
    and any case or deduction id the run does not have.
    """
    p = Path(path)
    raw = read_bytes(p, "human labels")  # read once: `human import <(cat sheet.csv)` is a pipe
    if raw[:4] in (b"PK\x03\x04", b"\xd0\xcf\x11\xe0"):
        raise InputError(f"{p}: an Excel workbook, not a CSV file: in Excel, save it as "
                         '"CSV UTF-8 (comma delimited)" (or plain CSV) and import that')
    text = read_text(p, encoding, what="human labels", raw=raw)
    source = str(p.resolve())
    rows = csv_records(p, text) if p.suffix.lower() != ".jsonl" else []
    header = [h.strip().lstrip("\ufeff") for h in rows[0][1]] if rows else []
    if not (set(header) & {HUMAN_SCORE, HUMAN_VERDICT, DEDUCTION_ID}) and \
            not any(h.startswith(CRITERION_PREFIX) for h in header):
        wide = load_human(p, run.rubric, encoding, text=text, raw=raw)
        in_run = {c.id for c in run.cases}
        unknown = [cid for cid in wide if cid not in in_run]
        if len(unknown) == len(wide):
            first = next(iter(wide.values()))
            raise InputError(f"none of the {len(wide)} case ids in {p} is a case of this run (first: "
                             f"{first.case_id!r}, line {first.line}; the run's first case: "
                             f"{run.cases[0].id if run.cases else '(none)'!r})")
        if unknown:
            h = wide[unknown[0]]
            raise InputError(f"{p}:{h.line}: case_id: {h.case_id!r} is not a case of this run"
                             + (f" ({len(unknown) - 1} more unknown)" if len(unknown) > 1 else ""))
        try:
            name = clean_name(reviewer or DEFAULT_REVIEWER)
        except ValueError as e:
            raise InputError(f"reviewer {reviewer!r}: {e}") from None
        return LabelFile(path=str(p), source=source, format="wide",
                         labels={name: labels_from_wide(wide, run.rubric, name, source)})
    revealed: dict[str, list[str]] = {}
    labels = _sheet_labels(p, (rows[0][0], header), rows[1:], run, reviewer, source, revealed)
    return LabelFile(path=str(p), source=source, format="sheet", labels=labels, revealed=revealed)


def _letter(i: int) -> str:
    """Column letters as a spreadsheet shows them: 0 -> A, 25 -> Z, 26 -> AA."""
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s




def _sheet_labels(p: Path, head: tuple[int, list[str]], rows: list[tuple[int, list[str]]], run: StoredRun,
                  reviewer: str | None, source: str,
                  revealed: dict[str, list[str]] | None = None) -> dict[str, list[HumanLabelRecord]]:
    header_line, header = head
    col = {h: i for i, h in enumerate(header) if h}
    if "case_id" not in col:
        raise InputError(f"{p}:{header_line}: no column named case_id "
                         f"(the header has: {', '.join(map(repr, header[:12]))})")
    rubric = run.rubric
    dims = {d.id: d for d in rubric.dimensions}
    case_ids = [c.id for c in run.cases]
    known = set(case_ids)
    deductions = deduction_dimensions(run)
    criteria_of_case = {c.id: c.criteria for c in run.cases if c.criteria is not None}
    cases_of: dict[str, set[str]] = {}      # a request -> its cases (several when cases share their content)
    for r in run.records:
        cases_of.setdefault(r.request_hash, set()).add(r.case_id)
    copies = penalty_copy_map(run)

    def where(line: int, name: str) -> str:
        return f"{p}:{line}: column {name} ({_letter(col[name])})" if name in col else f"{p}:{line}"

    def cell(cells: list[str], name: str) -> str:
        """A cell's text, without the ``'`` the export put before a formula-like text."""
        i = col.get(name)
        return unguard(cells[i].strip()) if i is not None and i < len(cells) else ""

    crit_columns = [h for h in header if h.startswith(CRITERION_PREFIX)]
    names = {cell(c, REVIEWER) for _, c in rows} - {""}
    fallback = reviewer or _sheet_reviewer(names)
    seen: dict[tuple[str, ...], tuple[int, HumanLabelRecord]] = {}
    added_ids: set[tuple[str, str]] = set()
    out: dict[str, list[HumanLabelRecord]] = {}
    for line, cells in rows:
        _no_headless_value(p, header, line, cells)
        score, verdict, comment = cell(cells, HUMAN_SCORE), cell(cells, HUMAN_VERDICT), cell(cells, HUMAN_COMMENT)
        score = cell(cells, REVISED_SCORE) or score      # a revision given after the reveal: the row's score now
        crit_cells = {name[len(CRITERION_PREFIX):]: text for name in crit_columns if (text := cell(cells, name))}
        row_kind = _row_kind(cell(cells, "row"), cell(cells, DEDUCTION_ID), where(line, "row"))
        filled_added = row_kind == ROW_ADDED and bool(cell(cells, "type_id") or cell(cells, "type"))
        if not (score or verdict or comment or filled_added or crit_cells):
            continue  # nothing filled in on this row
        case_id = _case_id(cell(cells, "case_id"), known, case_ids, where(line, "case_id"))
        name = _reviewer_of(cell(cells, REVIEWER) or fallback, names, where(line, REVIEWER))
        ded_id = cell(cells, DEDUCTION_ID)
        row_kind = row_kind or (ROW_DEDUCTION if ded_id else ROW_SCORE)
        if revealed is not None and (row_kind == ROW_DEDUCTION or cell(cells, "panel_score") or any(
                cells[i].strip() for h, i in col.items() if h.startswith(JUDGE_SCORE_PREFIX) and i < len(cells))):
            _reveal(revealed, name, case_id)
        labels: list[HumanLabelRecord]
        if row_kind == ROW_DEDUCTION:
            labels = _deduction_labels(where, line, case_id, name, ded_id, (score, verdict, comment), deductions,
                                       cases_of, copies, source)
        elif row_kind == ROW_SCORE:
            labels = _score_labels(where, line, case_id, name, cell(cells, "dimension"), dims,
                                   (score, verdict, comment), crit_cells, criteria_of_case.get(case_id), source,
                                   cell(cells, SCORE_ORIGIN), cell(cells, "panel_score"))
        elif row_kind == ROW_ADDED:
            labels = [_added(cells, cell, where, line, dims, case_id, name, source, added_ids)]
        else:
            raise InputError(f"{where(line, 'row')}: {row_kind!r}; a row is {ROW_SCORE!r}, {ROW_DEDUCTION!r} "
                             f"or {ROW_ADDED!r}")
        _keep_new(labels, seen, out, p, line)
    return out


def _sheet_reviewer(names: set[str]) -> str | None:
    """The reviewer of the rows that name none: the one the sheet names, else the default one when it names none;
    None when it names several."""
    return next(iter(names)) if len(names) == 1 else None if names else DEFAULT_REVIEWER


def _row_kind(given: str, deduction_id: str, where: str) -> str:
    """A row's kind, from its ``row`` cell (an added deduction's row known by its id too); "" when neither says."""
    row_kind = given.lower()
    if row_kind not in ("", ROW_SCORE, ROW_DEDUCTION, ROW_ADDED):   # a damaged sheet, even on an empty row
        raise InputError(f"{where}: {row_kind!r}; a row is {ROW_SCORE!r}, {ROW_DEDUCTION!r} or {ROW_ADDED!r}")
    if not row_kind and deduction_id.startswith("added:"):
        row_kind = ROW_ADDED
    return row_kind


def _no_headless_value(p: Path, header: Sequence[str], line: int, cells: Sequence[str]) -> None:
    """An InputError for a value in a column with no header (past the header's end, or under an empty name)."""
    extra = [i for i in range(len(header), len(cells)) if cells[i].strip()]
    blank_headed = [i for i in range(min(len(header), len(cells))) if not header[i] and cells[i].strip()]
    if extra or blank_headed:
        i = (extra or blank_headed)[0]
        raise InputError(f"{p}:{line}: column {_letter(i)}: a value in a column with no header: {cells[i]!r}")


def _reviewer_of(name: str | None, names: set[str], where: str) -> str:
    """A row's reviewer (its cell, else the sheet's one reviewer or --reviewer), as every channel cleans it."""
    if name is None:
        raise InputError(f"{where}: empty, and the sheet names several reviewers "
                         f"({', '.join(sorted(names))}): fill it in, or give --reviewer")
    try:
        return clean_name(name)  # the rule of every channel: no control character, at most 80 characters
    except ValueError as e:
        raise InputError(f"{where}: {name!r}: {e}") from None


def _reveal(revealed: dict[str, list[str]], name: str, case_id: str) -> None:
    shown = revealed.setdefault(name, [])
    if case_id not in shown:
        shown.append(case_id)


def _keep_new(labels: Sequence[HumanLabelRecord], seen: dict[tuple[str, ...], tuple[int, HumanLabelRecord]],
              out: dict[str, list[HumanLabelRecord]], p: Path, line: int) -> None:
    """Each of a row's labels into ``out`` (by reviewer) unless an earlier row gave the same one; an InputError for
    one an earlier row gave with another value."""
    for lb in labels:
        key = lb.key
        if key in seen and seen[key][1].model_dump() != lb.model_dump():
            raise InputError(f"{p}:{line}: the same {lb.kind} of {lb.case_id!r} "
                             f"{lb.deduction_id or lb.dimension} by {lb.reviewer!r} is already on line "
                             f"{seen[key][0]}, with another value")
        if key not in seen:
            seen[key] = (line, lb)
            out.setdefault(lb.reviewer, []).append(lb)


def _deduction_labels(where: Callable[[int, str], str], line: int, case_id: str, name: str, ded_id: str,
                      filled: tuple[str, str, str], deductions: Mapping[str, str],
                      cases_of: Mapping[str, set[str]], copies: Mapping[str, str],
                      source: str) -> list[HumanLabelRecord]:
    """A deduction row's label (:func:`_sheet_labels`): the reviewer's verdict with its comment, or a comment
    alone; ``filled``: the row's score, verdict and comment cells."""
    score, verdict, comment = filled
    labels: list[HumanLabelRecord] = []
    if not ded_id:
        raise InputError(f"{where(line, DEDUCTION_ID)}: empty on a deduction row; the verdict must "
                         "say which deduction it is about (keep the exported deduction_id)")
    ded_dim = deductions.get(ded_id)
    if ded_dim is None:
        raise InputError(f"{where(line, DEDUCTION_ID)}: {ded_id!r} is not a deduction of this run "
                         "(the sheet was exported from another run, or the run was scored again "
                         "with another judge, prompt or rubric)")
    owners = cases_of.get(ded_id.split("#", 1)[0], set())
    if case_id not in owners:
        raise InputError(f"{where(line, 'case_id')}: {case_id!r}, but the deduction {ded_id!r} is of case "
                         f"{' / '.join(map(repr, sorted(owners)))}")
    if score:
        raise InputError(f"{where(line, HUMAN_SCORE)}: {score!r} on a deduction row: a deduction takes a "
                         f"verdict ({'/'.join(VERDICTS)}) in {HUMAN_VERDICT}; scores go on the score rows")
    # a fixed penalty listed several times in one run is one judgement: its label is on the first listing
    ded_id = copies.get(ded_id, ded_id)
    if verdict:
        v = parse_verdict(verdict)
        if v is None:
            raise InputError(f"{where(line, HUMAN_VERDICT)}: {verdict!r} is not a verdict; write "
                             + ", ".join("/".join(spelled("verdict", v)) for v in VERDICTS))
        labels.append(HumanLabelRecord(case_id=case_id, dimension=ded_dim, deduction_id=ded_id,
                                       reviewer=name, kind="verdict", value=v, comment=comment or None,
                                       source=source))
    else:
        labels.append(HumanLabelRecord(case_id=case_id, dimension=ded_dim, deduction_id=ded_id,
                                       reviewer=name, kind="comment", comment=comment, source=source))
    return labels


def _score_labels(where: Callable[[int, str], str], line: int, case_id: str, name: str, dim_id: str,
                  dims: Mapping[str, Dimension], filled: tuple[str, str, str], crit_cells: Mapping[str, str],
                  case_criteria: Sequence[Criterion] | None, source: str, origin_cell: str,
                  panel_cell: str) -> list[HumanLabelRecord]:
    """A score row's labels (:func:`_sheet_labels`): the reviewer's score (own, or the panel's accepted), a
    comment, and a verdict per criterion of a criteria dimension; ``filled``: the row's score, verdict and
    comment cells."""
    score, verdict, comment = filled
    labels: list[HumanLabelRecord] = []
    if dim_id not in dims:
        raise InputError(f"{where(line, 'dimension')}: {dim_id!r} is not a dimension of the rubric "
                         f"({', '.join(dims)})")
    if verdict:
        raise InputError(f"{where(line, HUMAN_VERDICT)}: {verdict!r} on a score row: a dimension takes a "
                         f"score in {HUMAN_SCORE}; verdicts go on the deduction rows")
    if score:
        origin = _origin(origin_cell, where(line, SCORE_ORIGIN))
        if _origin_word(score) == "accepted":
            origin, score = "accepted", panel_cell
            if not score:
                raise InputError(f"{where(line, HUMAN_SCORE)}: accepts the panel's score, but the row's "
                                 "panel_score is empty (no judge answered): write your own score")
        value = _number(score, where(line, HUMAN_SCORE))
        top, low = dims[dim_id].max, dims[dim_id].low
        if not low <= value <= top:
            raise InputError(f"{where(line, HUMAN_SCORE)}: {score} is outside {low:g}..{top:g} ({dim_id})")
        anchors = dims[dim_id].anchors
        if anchors and origin == "own" and value not in anchors:
            raise InputError(f"{where(line, HUMAN_SCORE)}: {score} is not a level of {dim_id}: write one of "
                             f"{', '.join(str(k) for k in sorted(anchors))}")
        labels.append(HumanLabelRecord(case_id=case_id, dimension=dim_id, reviewer=name, kind="score",
                                       value=value, source=source, origin=origin))
    if comment:
        labels.append(HumanLabelRecord(case_id=case_id, dimension=dim_id, reviewer=name, kind="comment",
                                       comment=comment, source=source))
    if crit_cells:
        def crit_where(cid: str, line: int = line) -> str:
            return where(line, CRITERION_PREFIX + cid)
        labels += _criterion_labels(crit_cells, dims[dim_id], case_criteria, case_id, name,
                                    source, crit_where)
    return labels


def _criterion_labels(given: Mapping[str, str], dim: Dimension, case_criteria: Sequence[Criterion] | None,
                      case_id: str, reviewer: str, source: str, where: Callable[[str], str]) -> list[HumanLabelRecord]:
    """The ``criterion: <id>`` cells of a criteria dimension's score row: one ``criterion`` label each."""
    crits = {c.id: c for c in dim.judged_criteria(case_criteria)}
    out = []
    for cid, text in given.items():
        if not dim.by_criteria:
            raise InputError(f"{where(cid)}: {text!r}, but {dim.id} is a {dim.kind} dimension, not a criteria one")
        if cid not in crits:
            raise InputError(f"{where(cid)}: {text!r}, but {cid!r} is not a criterion of {dim.id} for case "
                             f"{case_id!r} (its criteria: {', '.join(crits)})")
        value = CRITERION_WORDS.get(normal(text))
        if value is None:
            raise InputError(f"{where(cid)}: {text!r} is not a verdict on a criterion; write "
                             f"{'/'.join(spelled('criterion', 'met'))} or {'/'.join(spelled('criterion', 'not_met'))}, "
                             "or leave it empty")
        out.append(HumanLabelRecord(case_id=case_id, dimension=dim.id, deduction_id=cid, reviewer=reviewer,
                                    kind="criterion", value=value, points=crits[cid].points, source=source))
    return out


def criterion_columns(rubric: Rubric, criteria_of_case: Mapping[str, Sequence[Criterion]] | None = None) -> list[str]:
    """The sheet's criterion columns (:data:`CRITERION_PREFIX` + id): every criterion id of the rubric's criteria
    dimensions and of the cases' own criteria, in order of first appearance (empty without a criteria dimension)."""
    dims = [d for d in rubric.dimensions if d.by_criteria]
    ids = [cid for d in dims for cid in d.verdict_items()]
    if any(d.uses_case_criteria for d in dims):
        ids += [c.id for crits in (criteria_of_case or {}).values() for c in crits]
    return [CRITERION_PREFIX + cid for cid in dict.fromkeys(ids)]


def criterion_cells(review: HumanReview | None, reviewer: str | None, case_id: str, dimension: str) -> dict[str, str]:
    """The criterion cells of one criteria dimension's score row, filled with ``reviewer``'s own verdicts
    (``met`` / ``not met``); a verdict accepted from the panel is left empty, so the sheet never turns it into the
    reviewer's own (it stays in the store under its own source). Empty without labels."""
    case = review.case(case_id) if review is not None and reviewer is not None else None
    if case is None or reviewer is None:
        return {}
    given = case.criteria.get(reviewer, {}).get(dimension, {})
    return {CRITERION_PREFIX + cid: spelled("criterion", "met" if met else "not_met")[0] for cid, met in given.items()}


def _added(cells: list[str], cell: Callable[[list[str], str], str], where: Callable[[int, str], str], line: int,
           dims: dict[str, Dimension], case_id: str, reviewer: str, source: str,
           taken: set[tuple[str, str]]) -> HumanLabelRecord:
    """An ``added`` row: a deduction of the rubric's types (or a fixed penalty) the judges missed."""
    dim_id = cell(cells, "dimension")
    if dim_id not in dims:
        raise InputError(f"{where(line, 'dimension')}: {dim_id!r} is not a dimension of the rubric ({', '.join(dims)})")
    try:
        dim = as_deductions(dims[dim_id])
    except ValueError as e:
        raise InputError(f"{where(line, 'dimension')}: {e}; an added row names a deduction the judges missed") from None
    bounds = {t.id: (t.low, t.high) for c in dim.categories for t in c.types}
    bounds.update({pen.id: (pen.points, pen.points) for pen in dim.fixed_penalties})
    names = {t.name: t.id for c in dim.categories for t in c.types} | {pen.name: pen.id for pen in dim.fixed_penalties}
    given = cell(cells, "type_id") or cell(cells, "type")
    type_id = given if given in bounds else names.get(given)
    if type_id is None:
        column = "type_id" if cell(cells, "type_id") else "type"
        raise InputError(f"{where(line, column)}: {given!r} is not a deduction type or fixed penalty of {dim_id} "
                         "(give its id or its name as the rubric writes it)")
    lo, hi = bounds[type_id]
    raw = cell(cells, "points")
    points = lo if not raw else _number(raw, where(line, "points"))
    if not lo - 1e-9 <= points <= hi + 1e-9:
        raise InputError(f"{where(line, 'points')}: {raw} is outside {lo:g}..{hi:g} for {type_id}")
    did = cell(cells, DEDUCTION_ID) or f"added:{dim_id}:{type_id}"
    n = 2
    base = did
    while (case_id, did) in taken:
        did, n = f"{base}-{n}", n + 1
    taken.add((case_id, did))
    return HumanLabelRecord(case_id=case_id, dimension=dim_id, deduction_id=did, reviewer=reviewer,
                            kind="added_deduction", value=type_id, points=points,
                            evidence=cell(cells, "evidence") or None, comment=cell(cells, HUMAN_COMMENT) or None,
                            source=source)


def _origin_word(text: str) -> LabelOrigin | None:
    return ORIGIN_WORDS.get(normal(text))


def _origin(text: str, where: str) -> LabelOrigin:
    """What a ``score_origin`` cell says (empty: the reviewer's own score)."""
    if not text:
        return "own"
    origin = _origin_word(text)
    if origin is None:
        raise InputError(f"{where}: {text!r} is not a score origin; write {'/'.join(spelled('score_origin', 'own'))} "
                         f"for your own score or {'/'.join(spelled('score_origin', 'accepted'))} for the panel's "
                         "score accepted as it is, or leave it empty")
    return origin


def penalty_copy_map(run: StoredRun) -> dict[str, str]:
    """Every repeat listing of a fixed penalty in the run's ok calls -> the id of its first listing in the
    same call (:func:`~consensus_eval.analysis.audit.penalty_copies`): one judgement, one label."""
    copies: dict[str, str] = {}
    for r in run.records:
        if r.status == "ok" and r.judgment is not None and len(r.judgment.fixed_penalties) > 1:
            copies.update(penalty_copies(r))
    return copies


def deduction_dimensions(run: StoredRun) -> dict[str, str]:
    """deduction id -> its dimension, for every deduction and fixed penalty of the run's ok calls.

    The ids are :attr:`consensus_eval.analysis.audit.AuditDeduction.id` (``{request_hash}#d{i}``,
    ``{request_hash}#p{i}``; :func:`~consensus_eval.analysis.audit.deductions_of`), built here without
    the audit's display models (a sheet of 2,000 cases x 4 judges reads back in a third of the time).
    """
    out: dict[str, str] = {}
    for r in run.records:
        if r.status == "ok" and r.judgment is not None:
            for i in range(len(r.judgment.deductions)):
                out[f"{r.request_hash}#d{i}"] = r.dimension
            for i in range(len(r.judgment.fixed_penalties)):
                out[f"{r.request_hash}#p{i}"] = r.dimension
    return out


def _case_id(raw: str, known: set[str], ordered: Sequence[str], where: str) -> str:
    """The run's case id a cell means: as written; without the ``'`` the export put before a
    formula-like id; or, for digits, the id Excel stripped of its leading zeros (``1`` for ``001``)."""
    if not raw:
        raise InputError(f"{where}: missing")
    for candidate in (raw, raw[1:] if raw.startswith("'") else None):
        if candidate is not None and candidate in known:
            return candidate
    digits = raw[:-2] if raw.endswith(".0") else raw
    if digits.isdigit():
        same = [c for c in ordered if c.isdigit() and int(c) == int(digits)]
        if len(same) == 1:
            return same[0]
        if len(same) > 1:
            raise InputError(f"{where}: {raw!r} could be any of the cases {', '.join(map(repr, same))} "
                             "(a spreadsheet dropped the leading zeros): write the id in full")
    raise InputError(f"{where}: {raw!r} is not a case of this run")


def _number(text: str, where: str) -> float:
    t = decimal_point(text)
    try:
        value = float(t)
    except ValueError:
        raise InputError(f"{where}: not a number: {text!r}") from None
    if not math.isfinite(value):
        raise InputError(f"{where}: not a finite number: {text!r}")
    return value


# --------------------------------------------------------------------------- what the labels say


def human_agreement(run: StoredRun, cons: Sequence[CaseConsensus], review: HumanReview,
                    n_boot: int = 1000, seed: int = DEFAULT_SEED) -> HumanAgreement:
    """Every figure comparing the run's judges and panel with its human labels
    (:class:`~consensus_eval.analysis.agreement.HumanAgreement` says what each one means)."""
    judges = run.judges
    keys = [*(d.id for d in run.rubric.dimensions), "total"]
    in_run = {c.case_id for c in cons}
    labelled = [c for c in cons if (r := review.case(c.case_id)) is not None and r.human]
    hv = {k: [human_value(review, c.case_id, k) for c in labelled] for k in keys}

    def a(rows: Sequence[Sequence[float | None]]) -> Alpha:
        return alpha_with_ci(matrix(rows), "interval", n_boot, seed)

    n = len(labelled)
    section = HumanAgreement(
        n_cases=n, unmatched_case_ids=sorted(set(review.cases) - in_run), reviewers=review.reviewers,
        alpha_with_human={k: a([*([judge_value(c, j, k) for c in labelled] for j in judges), hv[k]])
                          for k in keys} if n else {},
        alpha_without_human={k: a([[judge_value(c, j, k) for c in labelled] for j in judges])
                             for k in keys} if n else {},
        judges={j: {k: agreement([judge_value(c, j, k) for c in labelled], hv[k], n_boot, seed) for k in keys}
                for j in judges} if n else {},
        panel={k: agreement([panel_value(c, k) for c in labelled], hv[k], n_boot, seed)
               for k in keys} if n else {},
        small_sample=n < SMALL_SAMPLE_CASES, n_accepted=review.n_accepted,
        accepted_included=review.accepted_included,
        warning=(f"only {n} case(s) have a human score (fewer than {SMALL_SAMPLE_CASES}): the intervals are wide; "
                 "read these figures as indications, not as verdicts on the judges")
        if n < SMALL_SAMPLE_CASES else None,
    )
    _precision(run, review, section)
    _inter_reviewer(review, [c.case_id for c in cons], keys, section, n_boot, seed)
    _category_jaccard(run, review, cons, section)
    return section


def human_value(review: HumanReview, case_id: str, key: str) -> float | None:
    """The human score of a case on ``key`` used in the figures (:attr:`CaseReview.human`; None: none)."""
    r = review.case(case_id)
    return r.human.get(key) if r else None


def _precision(run: StoredRun, review: HumanReview, section: HumanAgreement) -> None:
    """Each reviewer's verdict on a deduction counts once; where an adjudicator settled a deduction the
    reviewers disagreed on, their reference verdict counts instead, once (as the reference score stands for
    the reviewers' scores)."""
    judge_of = {r.request_hash: r.judge for r in run.records}
    copies = penalty_copy_map(run)
    counts: dict[str, dict[str, int]] = {j: dict.fromkeys(VERDICTS, 0) for j in run.judges}
    counted: set[tuple[str, str]] = set()
    reference: dict[str, str] = {}   # deduction id -> the adjudicator's verdict (the latest written)
    for lb in review.labels:
        if lb.kind == "verdict" and lb.origin == "reference" and lb.deduction_id and lb.value in VERDICTS:
            reference[copies.get(lb.deduction_id, lb.deduction_id)] = lb.value
    given = [(lb.reviewer, lb.deduction_id, str(lb.value)) for lb in review.labels
             if lb.kind == "verdict" and lb.origin != "reference" and lb.deduction_id and lb.value in VERDICTS]
    section.n_added_deductions += sum(lb.kind == "added_deduction" for lb in review.labels)
    for reviewer, did, value in [*given, *(("", d, v) for d, v in reference.items())]:
        # a verdict stored on a copy of a fixed penalty (by an earlier version) is the same judgement
        ded = copies.get(did, did)
        judge = judge_of.get(ded.split("#", 1)[0])
        if judge is None or (reviewer, ded) in counted or (reviewer and ded in reference):
            continue  # a deduction of calls no longer in the plan, a judgement already counted, or adjudicated
        counted.add((reviewer, ded))
        counts.setdefault(judge, dict.fromkeys(VERDICTS, 0))[value] += 1
        section.n_verdicts += 1
    _added_deductions(run, review, section)
    if section.n_verdicts:
        section.precision = {
            j: JudgePrecision(judge=j, agree=c["agree"], disagree=c["disagree"], unsure=c["unsure"],
                              precision=proportion(c["agree"], c["agree"] + c["disagree"]))
            for j, c in counts.items()}


def _added_deductions(run: StoredRun, review: HumanReview, section: HumanAgreement) -> None:
    """The deductions the reviewers added, named from the rubric, each with the judges that missed it."""
    added = [lb for lb in review.labels if lb.kind == "added_deduction" and lb.dimension and lb.value]
    if not added:
        return
    wanted = {(lb.case_id, lb.dimension) for lb in added}
    answered: dict[tuple[str, str], set[str]] = {}
    made: dict[tuple[str, str, str], set[str]] = {}
    for r in run.records:
        if (r.case_id, r.dimension) not in wanted or r.status != "ok" or r.judgment is None:
            continue
        answered.setdefault((r.case_id, r.dimension), set()).add(r.judge)
        kinds = made.setdefault((r.case_id, r.dimension, r.judge), set())
        kinds.update(d.type for d in r.judgment.deductions)
        kinds.update(p.id for p in r.judgment.fixed_penalties)
    missed = dict.fromkeys(run.judges, 0)
    for lb in added:
        dim_id, type_id = str(lb.dimension), str(lb.value)
        dim = next(iter(deductions_in([run.rubric.dimension(dim_id)])), None)
        pen = dim.penalties_by_id.get(type_id) if dim is not None else None
        if pen is not None:
            category, name = PENALTY_CATEGORY, pen.name
        else:
            category, name = "", type_id   # a type of another version of the rubric, unless the rubric has it
            if dim is not None:
                try:
                    cat, typ = dim.find_type(type_id)
                    category, name = cat.name, typ.name
                except KeyError:
                    pass
        by = [j for j in run.judges if j in answered.get((lb.case_id, dim_id), set())
              and type_id not in made.get((lb.case_id, dim_id, j), set())]
        for j in by:
            missed[j] += 1
        section.added.append(AddedDeduction(
            case_id=lb.case_id, dimension=dim_id, type_id=type_id, type=name, category=category, points=lb.points,
            evidence=lb.evidence, comment=lb.comment, reviewer=lb.reviewer, missed_by=by))
    section.missed = missed


def _inter_reviewer(review: HumanReview, case_ids: Sequence[str], keys: Sequence[str], section: HumanAgreement,
                    n_boot: int, seed: int) -> None:
    reviewers = review.reviewers
    if len(reviewers) < 2:
        return
    scored = [cid for cid in case_ids if (r := review.case(cid)) is not None and len(r.scores) >= 2]
    for k in keys:
        rows = [[(rc.scores.get(rv, {}).get(k) if (rc := review.case(cid)) else None) for cid in scored]
                for rv in reviewers]
        if any(sum(row[i] is not None for row in rows) >= 2 for i in range(len(scored))):
            section.inter_reviewer[k] = alpha_with_ci(matrix(rows), "interval", n_boot, seed)
    shared = [(cid, did) for cid in case_ids if (rc := review.case(cid)) is not None
              for did, by in rc.verdicts.items() if sum(v != "unsure" for v in by.values()) >= 2]
    if shared:
        code = {"agree": 1.0, "disagree": 0.0}
        rows = []
        for rv in reviewers:
            row: list[float | None] = []
            for cid, did in shared:
                rc = review.case(cid)
                v = rc.verdicts[did].get(rv) if rc else None
                row.append(code.get(v) if v else None)
            rows.append(row)
        section.inter_reviewer_verdicts = alpha_with_ci(matrix(rows), "nominal", n_boot, seed)


def _category_jaccard(run: StoredRun, review: HumanReview, cons: Sequence[CaseConsensus],
                      section: HumanAgreement) -> None:
    cats: dict[str, set[str]] = {}
    for lb in review.labels:
        if lb.kind == "categories" and isinstance(lb.value, str):
            cats.setdefault(lb.case_id, set()).update(x for x in lb.value.split(";") if x)
    with_categories = [c for c in cons if c.case_id in cats]
    if not with_categories:
        return
    taken = points_taken(run)
    cat_ids = [cat.id for d in deductions_in(run.rubric.dimensions) for cat in d.categories]

    def judged(j: str, c: CaseConsensus) -> set[str]:
        return {k for k in cat_ids if any(t > 0 for t in taken.get((c.case_id, j, k), []))}

    def mean_jaccard(j: str, either_empty_scores_zero: bool) -> float:
        scores = []
        for c in with_categories:
            h, m = cats[c.case_id], judged(j, c)
            scores.append(0.0 if either_empty_scores_zero and (not h or not m) else jaccard(h, m))
        return float(np.mean(scores))

    section.category_jaccard = {j: mean_jaccard(j, False) for j in run.judges}
    section.category_jaccard_seed = {j: mean_jaccard(j, True) for j in run.judges}
    section.category_jaccard_cases = len(with_categories)


def label_counts(labels: Iterable[HumanLabelRecord]) -> dict[str, int]:
    """How many labels of each kind (for messages: ``12 score, 30 verdict``)."""
    out: dict[str, int] = {}
    for lb in labels:
        out[lb.kind] = out.get(lb.kind, 0) + 1
    return out
