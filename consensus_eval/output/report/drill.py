"""A case's drill-down as plain data, and how report.html embeds it.

report.html does not carry every case's drill-down as HTML (15-22 MB at 2,000 cases): it embeds each
case's deductions, record and conversation as JSON, and the page's script builds the drill-down (with text
nodes only, never markup) when the case is opened.

- :func:`drill_payload`: one case as a dict of short keys (documented there);
- :func:`packed`: the payloads in chunks of :data:`CHUNK` cases, each chunk's JSON gzip-compressed and
  base64-encoded (records compress 3-4x; the browser inflates a chunk with DecompressionStream when a
  case of it is opened), so the page stays small and loads fast;
- :func:`embed_json`: JSON made safe inside ``<script type="application/json">``: ``<``, ``>``, ``&``
  and the JavaScript line separators are written as ``\\u`` escapes, so a ``</script>`` or ``<!--`` in
  any case text cannot end or change the script element.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from consensus_eval.analysis.audit import (
    PENALTY_CATEGORY,
    PENALTY_CATEGORY_NAME,
    AuditDeduction,
    CaseAudit,
    DrillItem,
    JudgeView,
)
from consensus_eval.analysis.human import CaseReview
from consensus_eval.domain.kinds.base import VIEW_DEDUCTIONS, VIEW_LEVELS
from consensus_eval.domain.kinds.deductions import deductions_in
from consensus_eval.domain.rubric import Rubric

#: cases per compressed chunk: large enough to compress well, small enough to open a case quickly
CHUNK = 25
#: chunks built and waiting to be compressed, at most (:func:`packed`)
PENDING = 4
_SAFE = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def embed_json(value: Any) -> str:
    """``value`` as JSON text safe to place inside a ``<script type="application/json">`` element."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_SAFE)


def pack(payloads: Iterable[dict[str, Any]]) -> tuple[dict[str, int], list[str]]:
    """(case id -> chunk index, the chunks): :func:`chunk_index` and :func:`packed` at once, every chunk held
    (report.html writes each chunk as it is made instead)."""
    index: dict[str, int] = {}

    def counted() -> Iterator[dict[str, Any]]:
        for n, p in enumerate(payloads):
            index[p["id"]] = n // CHUNK
            yield p

    chunks = list(packed(counted()))
    return index, chunks


def chunk_index(case_ids: Iterable[str]) -> dict[str, int]:
    """Case id -> the index of the chunk its payload is in, for payloads in the order of ``case_ids``
    (:func:`packed`): the n-th case (from 0) is in chunk n // :data:`CHUNK`; a repeated id keeps its first
    place in the map and its last chunk."""
    return {cid: n // CHUNK for n, cid in enumerate(case_ids)}


def packed(payloads: Iterable[dict[str, Any]]) -> Iterator[str]:
    """Every :data:`CHUNK` payloads as gzip+base64 JSON, yielded in order as they are made.

    ``payloads`` is read as it comes (a generator: a chunk's payloads are held until it is made, and at most
    :data:`PENDING` chunks wait, never every case's). Deterministic (gzip without a timestamp): the same run
    gives the same report.
    """
    pending: deque[Future[str]] = deque()
    # zlib releases the GIL: a chunk is compressed in a second thread while the next one is built (the
    # same calls in the same order, so the same bytes); at most PENDING chunks wait, so memory stays bounded
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="report-pack") as pool:
        part: list[dict[str, Any]] = []
        for p in payloads:
            part.append(p)
            if len(part) == CHUNK:
                pending.append(pool.submit(_compress, _chunk_json(part)))
                part = []
                while len(pending) > PENDING:
                    yield pending.popleft().result()
        if part:
            pending.append(pool.submit(_compress, _chunk_json(part)))
        while pending:
            yield pending.popleft().result()


def _chunk_json(part: list[dict[str, Any]]) -> bytes:
    """One chunk's payloads as compact JSON, UTF-8 (the payloads are trees built here: no cycle to look for)."""
    return json.dumps(part, ensure_ascii=False, separators=(",", ":"), check_circular=False).encode("utf-8")


def _compress(raw: bytes) -> str:
    """One chunk's JSON gzip-compressed (no timestamp: deterministic) and base64-encoded."""
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def unpack(chunk: str) -> list[dict[str, Any]]:
    """The payloads of one chunk (what the page's script does, for tests)."""
    data: list[dict[str, Any]] = json.loads(gzip.decompress(base64.b64decode(chunk)).decode("utf-8"))
    return data


def pack_json(value: Any) -> str:
    """``value`` as one chunk of its own: its compact JSON gzip-compressed and base64-encoded, as :func:`packed`
    makes a chunk of payloads (a paged report.html's list of the other pages' anchors)."""
    return _compress(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def drill_payload(a: CaseAudit, record: str, conversation: str, judges: Sequence[str], anchor_id: str,
                  review: CaseReview | None = None, type_names: Mapping[str, str] | None = None,
                  flags: Sequence[str] | None = None) -> dict[str, Any]:
    """One case's drill-down as data.

    Keys: ``id``, ``a`` (anchor), ``rk`` (rank), ``st`` (status), ``tot`` (panel total), ``jt``
    (judge index -> total), ``fl`` (flags), ``rec`` (record), ``conv`` (the conversation as the judges
    read it: grounding spans index into it), ``err`` (judge -> errors, failed cases), ``mm``
    (claimed-vs-derived mismatches: judge index, run (from 1), dimension, claimed score, claimed stars, derived
    score, derived stars), ``h`` (the reviewers' labels, when any: ``m`` key -> the human score, mean
    over reviewers; ``w`` key -> whose it is: [``reference`` / ``own`` / ``mean``, names]
    (:meth:`~consensus_eval.analysis.human.CaseReview.whose`); ``s`` reviewer -> key -> score (their blind one on a
    spot-check case); ``rv`` reviewer -> key -> its revision, given once the judges were shown; ``cm`` [reviewer,
    dimension, comment]; ``ad`` the deductions they added: [reviewer, dimension, type name (``type_names``, else
    its id), points, evidence, comment]) and
    ``dims``, one per dimension (a likert or criteria dimension adds ``kd``, its kind; likert: ``lv`` [lowest,
    highest level] and per judge ``rt`` [run, level, anchor, evidence quotes] and ``n`` (its runs); criteria:
    ``cr`` [criterion id, text, points, judges differ (1/0), judge index -> verdict per run] and ``hc``
    (reviewer -> criterion id -> met, their own verdicts)): ``id``, ``n`` (name), ``max``, ``p`` (panel score),
    ``g`` (star gap),
    ``q`` (nobody deducted), ``v``: per judge ``j`` (index in the judge list), ``s`` (score), ``k``
    (stars), ``ok``/``nf`` (runs ok/failed), ``e`` (errors), ``c`` (comments), ``gr``: its
    drill-down (:meth:`~consensus_eval.analysis.audit.JudgeView.drill_down`), groups of ``r`` (the
    runs, from 0), ``n`` (the judge's runs) and ``d`` (lines): ``id``, ``c`` (category), ``t`` (type),
    ``p`` (points), ``pen`` (a fixed penalty), ``x`` (most times listed in one run, when above 1),
    ``once`` (a fixed penalty listed more than once in a run: charged once), ``ev`` (evidence),
    ``why`` (reason), ``m`` (match: type/category/none/no_peer), ``mb`` (matched by), ``g``
    (grounding kind, absent when not computed), ``gs`` (its score), ``sp`` (spans: source 0 record /
    1 conversation, start, end, section), ``hv`` (reviewer -> verdict on it), ``rv`` (the adjudicator's
    reference verdict on it, where reviewers disagreed; ``h``'s ``adj`` names the case's adjudicators).
    """
    jidx = {j: i for i, j in enumerate(judges)}
    dims = []
    for dim in a.dimensions:
        views = []
        for v in dim.judges:
            groups = _groups(v, review)
            # the page reads an absent key as empty: only ``j`` and ``s`` are always written
            view: dict[str, Any] = {"j": jidx.get(v.judge, -1), "s": v.score}
            if v.stars:
                view["k"] = v.stars
            if v.runs_ok:
                view["ok"] = v.runs_ok
            if v.runs_failed:
                view["nf"] = v.runs_failed
            if v.errors:
                view["e"] = v.errors
            if v.comments:
                view["c"] = v.comments
            if groups:
                view["gr"] = groups
            if v.ratings:
                view["rt"] = [[r.run, r.rating, r.anchor, r.evidence] for r in v.ratings]
                view["n"] = v.n_runs
            views.append(view)
        entry: dict[str, Any] = {"id": dim.dimension, "n": dim.name, "max": dim.max, "p": dim.panel_score,
                                 "g": dim.star_gap, "q": dim.quiet, "v": views}
        if dim.view != VIEW_DEDUCTIONS:   # a deductions dimension's payload is what it always was
            entry["kd"] = dim.view
            if dim.view == VIEW_LEVELS:
                entry["lv"] = [min(dim.levels), max(dim.levels)] if dim.levels else []
            else:
                entry["cr"] = [[row.id, row.text, row.points, int(row.split),
                                {str(jidx.get(j, j)): votes for j, votes in row.judges.items()}]
                               for row in dim.criteria]
                if review is not None:
                    entry["hc"] = {rv: given[dim.dimension] for rv, given in review.criteria.items()
                                   if dim.dimension in given}
        dims.append(entry)
    out: dict[str, Any] = {
        "id": a.case_id, "a": anchor_id, "rk": a.rank, "st": a.status, "tot": a.total,
        "jt": {str(jidx.get(j, j)): t for j, t in a.judge_totals.items()},
        "fl": list(a.flags if flags is None else flags),
        "rec": record, "conv": conversation, "dims": dims,
        "mm": [[jidx.get(m.judge, -1), m.run + 1, m.dimension_name, m.claimed_score, m.claimed_stars, m.derived_score,
                m.derived_stars] for m in a.mismatch_runs],
    }
    if a.status == "failed":
        out["err"] = a.errors_by_judge()
    if review is not None:
        out["h"] = {"m": review.human, "s": review.scores,
                    "cm": [[lb.reviewer, lb.dimension, lb.comment] for lb in review.comments if lb.comment],
                    "ad": [[lb.reviewer, lb.dimension, (type_names or {}).get(str(lb.value), str(lb.value)), lb.points,
                            lb.evidence or "", lb.comment or ""] for lb in review.added],
                    "w": {k: list(review.whose(k)) for k in review.human}}
        if review.adjudicators:
            out["h"]["adj"] = review.adjudicators
        if review.revisions:
            out["h"]["rv"] = review.revisions
    return out


def _groups(v: JudgeView, review: CaseReview | None) -> list[dict[str, Any]]:
    """A judge view's drill-down groups (:meth:`~consensus_eval.analysis.audit.JudgeView.drill_down`) as
    :func:`drill_payload` writes them; the lines of a view whose deductions were all made in one run and list no
    fixed penalty twice (most views) are made straight from its deductions, one line each."""
    deductions = v.deductions
    if not deductions:
        return []
    run = deductions[0].run
    penalties: set[str] = set()
    for d in deductions:
        if d.run != run:
            break
        if d.kind == "penalty":
            if d.type_id in penalties:
                break
            penalties.add(d.type_id)
    else:   # what drill_down's one group of one-line items would give
        return [{"r": [run], "n": max(v.n_runs, v.runs_ok + v.runs_failed),
                 "d": [_line(d, 1, False, (d,), review) for d in deductions]}]
    return [{"r": g.runs, "n": g.n_runs, "d": [_item(it, review) for it in g.items]} for g in v.drill_down()]


def _item(it: DrillItem, review: CaseReview | None) -> dict[str, Any]:
    """One drill-down line's keys (:func:`drill_payload`); an empty value is left out, except the points."""
    return _line(it.deduction, it.times_listed, it.applied_once, it.occurrences, review)


def _line(d: AuditDeduction, times_listed: int, applied_once: bool, occurrences: Sequence[AuditDeduction],
          review: CaseReview | None) -> dict[str, Any]:
    """:func:`_item` of the line of ``d`` (its first occurrence), listed at most ``times_listed`` times in a run,
    charged once though listed more (``applied_once``), made of ``occurrences``."""
    did = d.id
    item: dict[str, Any] = {"id": did} if did else {}
    if d.category:
        item["c"] = d.category
    if d.type:
        item["t"] = d.type
    item["p"] = d.points
    if d.evidence:
        item["ev"] = d.evidence
    if d.reason:
        item["why"] = d.reason
    if d.match:
        item["m"] = d.match
    if d.matched_by:
        item["mb"] = d.matched_by
    if d.kind == "penalty":
        item["pen"] = True
    if times_listed > 1:
        item["x"] = times_listed
    if applied_once:
        item["once"] = True
    g = d.grounding
    if g is not None:
        item["g"] = g.kind
        if g.score is not None:
            item["gs"] = round(g.score, 1)
        item["sp"] = [[0 if s.source == "record" else 1, s.start, s.end, s.section] for s in g.spans]
    if review is not None:
        ids = [o.id for o in occurrences]
        verdicts: dict[str, str] = {}
        for oid in ids:
            verdicts.update(review.verdicts.get(oid, {}))
        if verdicts:
            item["hv"] = verdicts
        ref = next((review.reference_verdicts[oid] for oid in ids if oid in review.reference_verdicts), None)
        if ref is not None:
            item["rv"] = ref
    return item


def category_options(rubric: Rubric) -> list[tuple[str, str]]:
    """The case table's category filter: (category id, label) for every category of the rubric, then
    the fixed penalties; a row lists the indexes of this list (:func:`row_facts`)."""
    out = [(c.id, f"{d.name} · {c.name}") for d in deductions_in(rubric.dimensions) for c in d.categories]
    return [*out, (PENALTY_CATEGORY, PENALTY_CATEGORY_NAME)]


def type_names(rubric: Rubric) -> list[tuple[str, str]]:
    """The search's deduction types: (type id, its name) for every type and fixed penalty of the rubric; a
    row lists the indexes of the types its judges deducted (:func:`row_facts`, ``types``), and the page's
    script matches the search text against these names (indexes, not names, per row: the report stays small)."""
    deducting = deductions_in(rubric.dimensions)
    out = [(t.id, t.name) for d in deducting for c in d.categories for t in c.types]
    return [*out, *((p.id, p.name) for d in deducting for p in d.fixed_penalties)]


def row_facts(a: CaseAudit, judges: Sequence[str], categories: Sequence[str],
              types: Sequence[str] = ()) -> dict[str, str]:
    """What the case table filters a case by, as ``data-*`` attribute values (space-separated indexes).

    ``judges``: indexes of the judges that stand out on the case (a deduction no other judge made,
    a quote not found in the case, a failed call, a claimed score that differs from its deductions);
    ``cats``: indexes in ``categories`` of the categories anyone deducted in; ``types``: indexes in
    ``types`` (type ids, :func:`type_names`) of the deduction types anyone deducted, what the table's search
    looks in beside the row's text. For every row of a table: :func:`row_facts_of`.
    """
    return row_facts_of(judges, categories, types)(a)


def row_facts_of(judges: Sequence[str], categories: Sequence[str],
                 types: Sequence[str] = ()) -> Callable[[CaseAudit], dict[str, str]]:
    """:func:`row_facts` with these judges, categories and types, their indexes looked up once for every row."""
    jidx = {j: i for i, j in enumerate(judges)}
    cidx = {c: i for i, c in enumerate(categories)}
    tidx = {t: i for i, t in enumerate(types)}

    def facts(a: CaseAudit) -> dict[str, str]:
        standing: set[int] = {jidx[m.judge] for m in a.mismatch_runs if m.judge in jidx}
        type_ids: set[str] = set()
        category_ids: set[str] = set()
        for dim in a.dimensions:
            for v in dim.judges:
                if v.runs_failed and v.judge in jidx:
                    standing.add(jidx[v.judge])
                deductions = v.deductions
                if not deductions:
                    continue
                type_ids.update([d.type_id for d in deductions])
                category_ids.update([d.category_id for d in deductions])
                for d in deductions:
                    # d.singleton (no other judge in its category), or a quote not found in the case
                    if d.match == "none" or ((g := d.grounding) is not None and g.kind == "not_found"):
                        i = jidx.get(d.judge)
                        if i is not None:
                            standing.add(i)
        found = {tidx[t] for t in type_ids if t in tidx}
        cats = {cidx[c] for c in category_ids if c in cidx}
        return {"judges": " ".join(map(str, sorted(standing))), "cats": " ".join(map(str, sorted(cats))),
                "types": " ".join(map(str, sorted(found)))}

    return facts
