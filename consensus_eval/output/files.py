"""The output files of a run, written from its results: judgments.jsonl, consensus.csv/jsonl,
reliability.json and the adjudication sheet. Every file is written atomically (:func:`atomic_writer`);
a file that cannot be written (a read-only folder, a path that is a folder) is an :class:`InputError`
saying so.

Category and type values are written as the rubric's display names (the seed's Chinese names),
with the stable ids beside them (``category_id``, ``type_id``).

CSV formula injection: the CSV files are meant to be opened in Excel or another spreadsheet, and a
cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is run there as a
formula (``=HYPERLINK(...)``, ``=cmd|...``). Case ids come from the user's file and evidence, reasons
and comments from a judge (an LLM quoting the record), so every text cell of every CSV written here
goes through :func:`csv_cell`: such a cell is prefixed with ``'`` (OWASP's recommendation; Excel
shows the text as written and hides the quote). A cell that is a plain number (``-3.5``, ``+2``,
``1e-3``) is left as it is, so numbers stay numbers.

judgments.jsonl re-derives: each line lists the deductions and the fixed penalties that were
charged, and ``score = max - sum over categories of min(points in the category, cap) - sum of the
fixed penalties``, floored at 0. A fixed penalty is charged once however many times a judge listed
it, so it is listed once (``times_listed`` says how often the judge gave it); the judge's reply as
given is kept in the store (``results.sqlite``: ``raw`` and ``judgment``). Under ``ungrounded: drop`` the
deductions whose evidence was not found are listed with ``"dropped": true`` and left out of ``score``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, Literal

from consensus_eval._errors import InputError
from consensus_eval._gc import gc_paused_call
from consensus_eval.analysis.audit import CaseAudit, DimensionAudit, JudgeView
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.human import (
    CONVERSATION,
    DEDUCTION_ID,
    HUMAN_COMMENT,
    HUMAN_SCORE,
    HUMAN_VERDICT,
    JUDGE_SCORE_PREFIX,
    RECORD,
    REVIEWER,
    REVISED_SCORE,
    ROW_ADDED,
    ROW_DEDUCTION,
    ROW_SCORE,
    SAMPLE_QUEUE,
    SAMPLE_SPOT,
    SCORE_ORIGIN,
    SHEET_HEAD,
    SHEET_TAIL,
    CaseReview,
    HumanReview,
    criterion_cells,
    criterion_columns,
)
from consensus_eval.analysis.results import Results
from consensus_eval.domain.cases import Case
from consensus_eval.domain.grounding import Grounding
from consensus_eval.domain.kinds.deductions import Category, DeductionType, as_deductions, deductions_in
from consensus_eval.domain.rubric import Criterion, Dimension, Rubric
from consensus_eval.domain.scoring import DimensionScore
from consensus_eval.domain.textio import formula_guard
from consensus_eval.domain.writable import (
    atomic_writer as atomic_writer,  # re-exported: the outputs write with it
    check_output_path,
    dumps_json,
    write_error,
)
from consensus_eval.execution.store import StoredCall


def judgment_row(rubric: Rubric, rec: StoredCall, score: DimensionScore | None,
                 grounding: Mapping[str, Grounding] | None = None, *, drop: bool = False) -> dict[str, Any]:
    """One line of judgments.jsonl: a call's outcome with its re-derived score.

    Each deduction and fixed penalty carries its ``grounding`` (where its evidence is in the case:
    ``kind``, ``score``, ``spans`` with ``source``, ``start``, ``end``, ``section``; None when not
    computed). With ``drop`` (``ungrounded: drop``), those not grounded say ``"dropped": true`` and
    ``score`` is derived without them."""
    return _JudgmentRows(rubric, grounding, drop).row(rec, score)


class _JudgmentRows:
    """:func:`judgment_row` for the calls of one run: what every line looks up (a dimension, a deduction
    type's category) found once per rubric instead of once per line (judgments.jsonl has a line per call)."""

    def __init__(self, rubric: Rubric, grounding: Mapping[str, Grounding] | None, drop: bool) -> None:
        self.rubric = rubric
        self.found = grounding or {}
        self.drop = drop
        self.dims: dict[str, Dimension] = {}
        self.types: dict[tuple[str, str], tuple[Category, DeductionType]] = {}

    def where(self, did: str) -> dict[str, Any]:
        """The grounding fields of quote ``did``: ``grounding`` (None when not computed), and ``dropped``
        when ``drop`` leaves it out of the score."""
        g = self.found.get(did)
        if g is None:
            return {"grounding": None}
        # more_spans only when a quote occurs over MAX_SPANS times (judgments.jsonl as before otherwise)
        out: dict[str, Any] = {"grounding": g.to_dict(more_spans=bool(g.more_spans))}
        if self.drop and not g.grounded:
            out["dropped"] = True
        return out

    def row(self, rec: StoredCall, score: DimensionScore | None) -> dict[str, Any]:
        """The line of call ``rec`` (:func:`judgment_row`)."""
        dim = self.dims.get(rec.dimension)
        if dim is None:
            dim = self.dims[rec.dimension] = self.rubric.dimension(rec.dimension)
        j = rec.judgment
        deductions = []
        penalties = []
        if j is not None and (j.deductions or j.fixed_penalties):
            items = as_deductions(dim)
            found, drop, types, h = self.found, self.drop, self.types, rec.request_hash
            for i, d in enumerate(j.deductions):
                cat_typ = types.get((dim.id, d.type))
                if cat_typ is None:
                    cat_typ = types[(dim.id, d.type)] = items.find_type(d.type)
                cat, typ = cat_typ
                g = found.get(f"{h}#d{i}")
                # more_spans only when a quote occurs over MAX_SPANS times (judgments.jsonl as before otherwise)
                item = {"category": cat.name, "type": typ.name, "points": d.points, "evidence": d.evidence,
                        "reason": d.reason, "category_id": cat.id, "type_id": typ.id,
                        "grounding": g.to_dict(more_spans=bool(g.more_spans)) if g is not None else None}
                if drop and g is not None and not g.grounded:
                    item["dropped"] = True
                deductions.append(item)
            # what was charged: each fixed penalty once (the first time the judge gave it), as derive() does
            listed: dict[str, int] = {}
            for p in j.fixed_penalties:
                listed[p.id] = listed.get(p.id, 0) + 1
            for i, p in enumerate(j.fixed_penalties):
                if listed.get(p.id, 0) == 0:
                    continue
                pen = items.penalties_by_id[p.id]
                penalties.append({"name": pen.name, "points": pen.points, "evidence": p.evidence,
                                  "reason": p.reason, "id": pen.id, "times_listed": listed.pop(p.id),
                                  **self.where(f"{h}#p{i}")})
        return {
            "case_id": rec.case_id, "dimension": rec.dimension, "judge": rec.judge, "run": rec.run,
            "status": rec.status,
            "score": score.score if score else None,
            "stars": score.stars if score else None,
            "deductions": deductions,
            "fixed_penalties": penalties,
            **dim.export_fields(j, score, rec.request_hash, self.where),
            "claimed_score": j.claimed_score if j else None,
            "claimed_stars": j.claimed_stars if j else None,
            "claim_mismatch": score.claim_mismatch if score else None,
            "comment": j.comment if j else None,
            "error": rec.error,
            "error_kind": rec.error_kind,
            "model": rec.model,
            "attempts": rec.attempts,
            "prompt_tokens": rec.prompt_tokens, "completion_tokens": rec.completion_tokens,
            "cost": rec.cost, "latency_s": round(rec.latency_s, 4) if rec.latency_s is not None else None,
            "request_hash": rec.request_hash,
        }


@gc_paused_call
def write_tables(results: Results, out: Path) -> None:
    """judgments.jsonl and consensus.csv/jsonl: what is written row by row from the derived scores and the
    consensus, nothing from the bootstraps (a rebuild writes them in a process of their own while it analyses:
    :mod:`consensus_eval._parallel`)."""
    write_judgments(out / "judgments.jsonl", results.rubric, results.records, results.scores,
                    results.run.grounding, drop=results.config.ungrounded == "drop")
    write_consensus(out, results.rubric, results.consensus)


@gc_paused_call
def write_analysis(results: Results, out: Path) -> None:
    """reliability.json, and leaderboard.json when the cases name two systems or more (a stale one is removed
    otherwise)."""
    write_json(out / "reliability.json", results.reliability.to_json())
    board = results.leaderboard
    if board is not None:
        write_json(out / "leaderboard.json", board.model_dump(mode="json"))
    else:
        (out / "leaderboard.json").unlink(missing_ok=True)


def write_judgments(path: Path, rubric: Rubric, records: Sequence[StoredCall],
                    derived: dict[str, DimensionScore], grounding: Mapping[str, Grounding] | None = None, *,
                    drop: bool = False) -> None:
    encode = _encode_line
    row_of = _JudgmentRows(rubric, grounding, drop).row
    with atomic_writer(path) as f:
        lines: list[str] = []
        for rec in records:
            row = row_of(rec, derived.get(rec.request_hash))
            try:
                lines.append(encode(row))
            except ValueError:      # a float that is not finite: written as null, as dumps_json does
                lines.append(dumps_json(row, ensure_ascii=False))
            if len(lines) == _LINES_AT_ONCE:
                f.write("\n".join(lines) + "\n")
                lines.clear()
        if lines:
            f.write("\n".join(lines) + "\n")


#: what ``dumps_json(row, ensure_ascii=False)`` writes when every float is finite (json.dumps builds this
#: encoder on every call), made once for every line of judgments.jsonl
_JSONL = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def _c_line_encoder() -> Callable[[Any], str]:
    """``_JSONL.encode`` without what it redoes on every call (a closure and a C encoder built per line, 17%
    of judgments.jsonl's encoding): json's C encoder made once, with the same separators, string escaping and
    float checks, and no check for circular references (a line is a tree of fresh dicts and lists, never
    circular; the check's marks would also outlive a line that raised). ``_JSONL.encode`` where the C
    accelerator is missing."""
    if c_make_encoder is None:
        return _JSONL.encode
    enc = c_make_encoder(None, _JSONL.default, encode_basestring, None, _JSONL.key_separator,
                         _JSONL.item_separator, _JSONL.sort_keys, _JSONL.skipkeys, _JSONL.allow_nan)
    return lambda row: "".join(enc(row, 0))


#: one line of judgments.jsonl as text, for a row whose floats are all finite (ValueError otherwise)
_encode_line = _c_line_encoder()
#: judgments.jsonl's lines written to the file together
_LINES_AT_ONCE = 1000


#: what a column of consensus.csv holds (:func:`consensus_columns`): ``number`` a score, total or spread (float,
#: None when missing), ``stars`` (int or None), ``verdict`` a criterion's majority (text, None when none), ``count``
#: (int), ``text``, ``flag`` (bool), ``list`` (the flags: texts)
ColumnKind = Literal["number", "stars", "verdict", "count", "text", "flag", "list"]


@dataclass(frozen=True)
class Column:
    """A column of consensus.csv (and consensus.parquet): its name, what it holds, and a case's value."""

    name: str
    kind: ColumnKind
    value: Callable[[CaseConsensus], Any]


def _score_of(dimension: str) -> Callable[[CaseConsensus], Any]:
    return lambda c: c.scores[dimension]


def _stars_of(dimension: str) -> Callable[[CaseConsensus], Any]:
    return lambda c: c.stars[dimension]


def _verdict_of(dimension: str, criterion: str) -> Callable[[CaseConsensus], Any]:
    return lambda c: c.criteria.get(dimension, {}).get(criterion)


def consensus_columns(rubric: Rubric) -> list[Column]:
    """consensus.csv's columns for ``rubric`` (:func:`write_consensus`), each with how a case's value is read."""
    starred = [d.id for d in rubric.dimensions if d.stars is not None]
    return [
        Column("case_id", "text", lambda c: c.case_id),
        *(Column(d.id, "number", _score_of(d.id)) for d in rubric.dimensions),
        Column("total", "number", lambda c: c.total),
        *([Column("star_total", "number", lambda c: c.star_total)] if starred else []),
        *(Column(f"{d}_stars", "stars", _stars_of(d)) for d in starred),
        *(Column(f"{d.id}.{k}", "verdict", _verdict_of(d.id, k))
          for d in rubric.dimensions for k in d.verdict_items()),
        Column("n_judges", "count", lambda c: c.n_judges),
        Column("status", "text", lambda c: c.status),
        Column("spread", "number", lambda c: c.spread),
        Column("flagged", "flag", lambda c: c.flagged),
        Column("flags", "list", lambda c: c.flags),
    ]


#: how consensus.csv writes a value of each kind of column
_CSV_CELL: dict[str, Callable[[Any], Any]] = {
    "number": lambda v: fmt_num(v), "stars": lambda v: "" if v is None else v, "verdict": lambda v: v or "",
    "count": lambda v: v, "text": lambda v: v, "flag": lambda v: int(v), "list": lambda v: "; ".join(v),
}


def write_consensus(folder: Path, rubric: Rubric, cases: Sequence[CaseConsensus]) -> None:
    """consensus.csv (one row per case) and consensus.jsonl (everything, per judge and run).

    Each dimension's column is its panel score (a likert dimension's: the judges' mean rating; a criteria
    dimension's: met points over positive points). Stars columns only for the dimensions with stars
    (``star_total`` only when one has). A criteria dimension with criteria of its own in the rubric gets
    one column per criterion, ``<dimension>.<criterion id>``: the panel's majority verdict (``met``, ``not
    met``, ``split``). Criteria that come from each case are in consensus.jsonl only (``criteria``): they
    differ from case to case, so no fixed set of columns holds them."""
    columns = consensus_columns(rubric)
    with atomic_writer(folder / "consensus.csv") as f:
        w = csv.writer(f)
        w.writerow([csv_cell(col.name) for col in columns])
        for c in cases:
            w.writerow([csv_cell(_CSV_CELL[col.kind](col.value(c))) for col in columns])
    with atomic_writer(folder / "consensus.jsonl") as f:
        for c in cases:
            f.write(c.model_dump_json() + "\n")


def write_json(path: Path, data: Any) -> None:
    with atomic_writer(path) as f:
        f.write(dumps_json(data, ensure_ascii=False, indent=2))
        f.write("\n")


def fmt_num(x: float | None) -> str:
    if x is None:
        return ""
    return f"{x:.4f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


#: ``value`` made safe for a spreadsheet (a ``'`` before a formula-like text; the import takes it off)
csv_cell = formula_guard


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    with atomic_writer(path) as f:
        f.write(text)


# --------------------------------------------------------------------------- adjudication sheet


def export_columns(judges: Sequence[str], criteria: Sequence[str] = ()) -> list[str]:
    """The sheet's columns: :data:`~consensus_eval.analysis.human.SHEET_HEAD`, one ``score: <judge>``
    column per judge (its score of the dimension, on ``score`` rows), then
    :data:`~consensus_eval.analysis.human.SHEET_TAIL` (the deduction's details, the reviewer's cells
    ``human_score`` / ``human_verdict`` / ``human_comment`` / ``reviewer``, and the ids), then ``criteria``: the
    criterion columns of a rubric with a criteria dimension (:func:`~consensus_eval.analysis.human.criterion_columns`;
    none otherwise)."""
    return [*SHEET_HEAD, *(JUDGE_SCORE_PREFIX + j for j in judges), *SHEET_TAIL, *criteria]


#: the columns of a sheet of a panel of three judges named a, b, c (the columns depend on the panel)
EXPORT_COLUMNS = export_columns(["a", "b", "c"])


def export_rows(audits: Iterable[CaseAudit], review: HumanReview | None = None,
                reviewer: str | None = None, rubric: Rubric | None = None,
                spot_check: Collection[str] = (), cases: Mapping[str, Case] | None = None) -> list[dict[str, object]]:
    """The rows of the adjudication sheet, per case (in ranking order) and dimension:

    - one ``score`` row: the panel's score (``panel_score``), each judge's (``score: <judge>``;
      ``failed`` when none of its runs answered) and the dimension's ``max``, beside the empty
      ``human_score`` the reviewer fills;
    - one ``deduction`` row per deduction or fixed penalty of each judge, each run (a fixed penalty the
      judge listed several times in one run is one row: it is charged once, and judged once) (``judge``, ``run``,
      ``kind``, ``category``, ``type``, ``points``, ``evidence``, ``reason``, how the other judges
      matched it, its ``deduction_id``), beside the empty ``human_verdict`` (agree / disagree /
      unsure) and ``human_comment``.

    ``reviewer``: the ``reviewer`` column says that name on every row (a sheet exported for dr_zhang comes
    back as dr_zhang's, whoever fills it in); with ``review``, that reviewer's stored labels are written into
    the human cells
    (a sheet "filled in", e.g. downloaded from the review app), with one ``added`` row per deduction the
    reviewer added (``type`` / ``type_id``, ``points``, ``evidence``, ``human_comment``; ``rubric`` gives the
    type's name), and ``score_origin`` saying whether a score is the reviewer's own or the panel's they
    accepted; the sheet reads back the same. A reviewer may add such rows in the spreadsheet too.

    ``spot_check``: the case ids of the random spot check (column ``sample``: ``spot_check`` or ``queue``).
    Such a case is blind until ``reviewer`` has given their own score of every dimension: its score rows show
    no panel or judge score and its deductions are not listed, so the reviewer is not anchored by the judges.
    Its first row carries the case's ``record`` and ``conversation`` (``cases``: case id -> the case; the
    conversation as the judges read it), so that the sheet alone is enough to score it; once the reviewer's own
    scores are in, a score they changed since is its ``revised_score`` beside their blind ``human_score``.
    """
    rows: list[dict[str, object]] = []
    spot = set(spot_check)
    for a in audits:
        case = review.case(a.case_id) if review is not None and reviewer is not None else None
        mine = _Mine.of(case, reviewer)
        texts = _texts(a.case_id, cases, rubric) if a.case_id in spot else None
        blind = a.case_id in spot and not all(d.dimension in mine.scores for d in a.dimensions)
        for dim in a.dimensions:
            base: dict[str, object] = {"rank": a.rank, "case_id": a.case_id, "status": a.status,
                                       "disagreement": _num(a.disagreement), "dimension": dim.dimension,
                                       "dimension_name": dim.name,
                                       "sample": SAMPLE_SPOT if a.case_id in spot else SAMPLE_QUEUE}
            if blind:
                base.update(status="", disagreement="")
            score_row = _score_row(base, dim, blind, mine, review, reviewer, rubric, a.case_id)
            if texts is not None:
                score_row[RECORD], score_row[CONVERSATION] = texts
                texts = None
            rows.append(score_row)
            for jv in ([] if blind else dim.judges):
                rows.extend(_deduction_rows(base, a, dim.dimension, jv, mine, reviewer))
            if case is not None:
                dim_types = next((d.type_names for d in deductions_in([rubric.dimension(dim.dimension)])), {}) \
                    if rubric else {}
                rows.extend({**base, "row": ROW_ADDED, "type": _type_name(dim_types, lb.value),
                             "type_id": lb.value, "points": _num(lb.points), "evidence": lb.evidence or "",
                             HUMAN_COMMENT: lb.comment or "", REVIEWER: reviewer, DEDUCTION_ID: lb.deduction_id}
                            for lb in case.added if lb.reviewer == reviewer and lb.dimension == dim.dimension)
    return rows


@dataclass(frozen=True)
class _Mine:
    """What one reviewer stored on one case, as the sheet writes it (all empty: no review, or no reviewer)."""

    case: CaseReview | None = None
    scores: Mapping[str, float] = field(default_factory=dict)
    revised: Mapping[str, float] = field(default_factory=dict)
    accepted: Mapping[str, float] = field(default_factory=dict)
    notes: Mapping[tuple[str | None, str | None], str | None] = field(default_factory=dict)

    @classmethod
    def of(cls, case: CaseReview | None, reviewer: str | None) -> _Mine:
        if not case or not reviewer:
            return cls(case=case)
        return cls(case=case, scores=case.scores.get(reviewer, {}), revised=case.revisions.get(reviewer, {}),
                   accepted=case.accepted.get(reviewer, {}),
                   notes={(lb.dimension, lb.deduction_id): lb.comment for lb in case.comments
                          if lb.reviewer == reviewer})


def _score_row(base: dict[str, object], dim: DimensionAudit, blind: bool, mine: _Mine, review: HumanReview | None,
               reviewer: str | None, rubric: Rubric | None, case_id: str) -> dict[str, object]:
    """A dimension's ``score`` row (:func:`export_rows`): the panel's and each judge's score (none when blind),
    and the reviewer's cells."""
    row = {**base, "row": ROW_SCORE, "max": _num(dim.max), "panel_score": "" if blind else _num(dim.panel_score)}
    for jv in dim.judges:
        row[JUDGE_SCORE_PREFIX + jv.judge] = "" if blind else _num(jv.score) if jv.runs_ok else "failed"
    d = dim.dimension
    if mine.case is not None and reviewer is not None:
        if d in mine.accepted and d not in mine.scores:
            row[HUMAN_SCORE], row[SCORE_ORIGIN] = _num(mine.accepted[d]), "accepted"
        else:
            row[HUMAN_SCORE] = _num(mine.scores.get(d))
            row[SCORE_ORIGIN] = "own" if row[HUMAN_SCORE] else ""
            if d in mine.revised:
                row[REVISED_SCORE] = _num(mine.revised[d])
        row[HUMAN_COMMENT] = mine.notes.get((d, None)) or ""
        row[REVIEWER] = reviewer
        if rubric is not None and rubric.dimension(d).by_criteria:
            row.update(criterion_cells(review, reviewer, case_id, d))
    if reviewer is not None:
        row.setdefault(REVIEWER, reviewer)
    return row


def _deduction_rows(base: dict[str, object], a: CaseAudit, dimension: str, jv: JudgeView, mine: _Mine,
                    reviewer: str | None) -> Iterator[dict[str, object]]:
    """One judge's ``deduction`` rows of a dimension (:func:`export_rows`), with the reviewer's cells."""
    mismatch = _mismatch_text(a, dimension, jv.judge)
    for d in jv.deductions:
        if d.copy_of is not None:
            continue  # a fixed penalty listed again in the same run: one row, one verdict
        row: dict[str, object] = {
            **base, "row": ROW_DEDUCTION, "judge": d.judge, "run": d.run + 1, "kind": d.kind,
            "category": d.category, "type": d.type, "points": _num(d.points),
            "evidence": d.evidence, "reason": d.reason, "match": d.match,
            "matched_by": ", ".join(d.matched_by), "claim_mismatch": mismatch,
            "category_id": d.category_id, "type_id": d.type_id, DEDUCTION_ID: d.id}
        if mine.case is not None and reviewer is not None:
            row[HUMAN_VERDICT] = mine.case.verdicts.get(d.id, {}).get(reviewer) or ""
            row[HUMAN_COMMENT] = mine.notes.get((d.dimension, d.id)) or ""
        if reviewer is not None:
            row[REVIEWER] = reviewer
        yield row


def _texts(case_id: str, cases: Mapping[str, Case] | None, rubric: Rubric | None) -> tuple[str, str] | None:
    """A case's record and conversation (as the judges read it, with the rubric) for the sheet."""
    case = (cases or {}).get(case_id)
    if case is None or rubric is None:
        return None
    return case.record, rubric.conversation_text(case)


def _type_name(names: dict[str, str], type_id: object) -> str:
    return names.get(str(type_id), str(type_id))


def _mismatch_text(a: CaseAudit, dimension: str, judge: str) -> str:
    parts = []
    for m in a.mismatch_runs:
        if m.dimension == dimension and m.judge == judge:
            claimed = f"{_num(m.claimed_score) or '-'}/{m.claimed_stars if m.claimed_stars is not None else '-'}★"
            parts.append(f"run {m.run + 1}: claimed {claimed}, derived {_num(m.derived_score)}/{m.derived_stars}★")
    return "; ".join(parts)


def write_adjudication_csv(path: str | Path, audits: Iterable[CaseAudit], *, judges: Sequence[str] | None = None,
                           review: HumanReview | None = None, reviewer: str | None = None,
                           rubric: Rubric | None = None, spot_check: Collection[str] = (),
                           case_criteria: Mapping[str, Sequence[Criterion]] | None = None,
                           cases: Mapping[str, Case] | None = None) -> Path:
    """Write the adjudication sheet (:func:`export_rows`) as CSV in UTF-8 with a BOM (so Excel reads the
    Chinese); its folder is created if needed. ``judges``: the panel, in order (default: the judges of
    the audits). ``review`` + ``reviewer``: write that reviewer's labels into the human cells. ``rubric`` with a
    criteria dimension: one ``criterion: <id>`` column per criterion (the rubric's, else ``case_criteria``: case
    id -> the case's own), filled on that dimension's score rows with the reviewer's own verdicts.
    ``consensus-eval human import`` reads it back. Text cells are neutralised against formula injection
    (:func:`csv_cell`; the import strips the quote again from case ids). Raises :class:`InputError`
    when ``path`` is a folder or cannot be written."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p}: is a folder; give the adjudication sheet a file name, e.g. {p / 'adjudication.csv'}")
    check_output_path(p, "the adjudication sheet")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(f"cannot write {p}: {p.parent} is a file, not a folder") from None
    except OSError as e:
        raise write_error(p, e) from None
    audits = list(audits)
    if judges is None:
        judges = list(dict.fromkeys(jv.judge for a in audits for dim in a.dimensions for jv in dim.judges))
    with atomic_writer(p, encoding="utf-8-sig") as f:
        # a header cell never starts like a formula: the judges' columns start with "score: "
        criteria = criterion_columns(rubric, case_criteria) if rubric is not None else []
        w = csv.DictWriter(f, fieldnames=export_columns(judges, criteria), restval="")
        w.writeheader()
        w.writerows({k: csv_cell(v) for k, v in row.items()}
                    for row in export_rows(audits, review, reviewer, rubric, spot_check, cases))
    return p


_num = fmt_num
