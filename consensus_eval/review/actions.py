"""The reviewer's actions (:meth:`Actions.apply`): each one write of label events, refused as the page's
refusals (:class:`~.refusals.ActionError`), a stale tab's as a conflict (:class:`ActionConflict`)."""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from consensus_eval.analysis.audit import CaseAudit
from consensus_eval.domain.kinds.base import VIEW_CRITERIA
from consensus_eval.domain.kinds.deductions import deductions_in
from consensus_eval.domain.rubric import Dimension
from consensus_eval.execution.labels import MAX_ACTION_ID
from consensus_eval.execution.store import (
    VERDICTS,
    Change,
    HumanLabelRecord,
    LabelConflict,
    LabelOrigin,
    LabelRefused,
    Slot,
    Written,
)
from consensus_eval.review.ledger import Progress
from consensus_eval.review.refusals import AccessEnded, ActionError
from consensus_eval.review.state import SOURCE, ReviewState

#: the longest comment accepted (characters)
MAX_COMMENT = 10_000


class Actions(ReviewState):
    """The reviewer's actions of the page, each stored as one write of label events."""

    def apply(self, reviewer: str, action: Mapping[str, Any], *, session: str | None = None,
              member_key: str | None = None) -> dict[str, Any]:
        """Apply one action of the page (``op``: verdict | score | scores | criterion | comment | add | remove) for
        ``reviewer`` and store it at once, as one write of label events (:meth:`Store.write_labels`); returns what
        the page needs back: the case's ``state``, the reviewer's ``progress`` (text, and ``done`` of ``total``), an
        added deduction's ``id``, the ``versions`` of the fields written (:func:`field_key` -> version), and whether
        it was ``applied`` (False: its ``action_id`` was stored already, nothing was written again).

        ``action_id`` (optional): the client's id of the action, so that a repeated request is a no-op. ``version``
        (optional; ``versions``: dimension -> version on ``scores``): the version of the field the page showed; a
        field written since (another tab) refuses the action as an :class:`ActionConflict`. ``session``: the
        review session's tag, kept with every event; ``member_key``: the hash of a personal link's key (the store
        refuses the write, :class:`AccessEnded`, when its reviewer has left the team or has a new link). Raises
        :class:`ActionError` for an action that does not fit the run, or that the store refuses (an adjudicator's own
        score, the panel's score accepted on a blind case)."""
        op = action.get("op")
        rank = action.get("case")
        if not isinstance(rank, int) or isinstance(rank, bool):
            raise ActionError("err_case_int")
        a = self.case_at(rank)
        action_id = _action_id(action)
        plan = Plan(reviewer, a.case_id, member_key=member_key)
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

    def _scores(self, plan: Plan, a: CaseAudit, action: Mapping[str, Any]) -> None:
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
        kinds = {d.id: d.view for d in self.dimensions}
        judged = self._criteria_judged(reviewer, a) if VIEW_CRITERIA in kinds.values() else {}
        for dim_id in [d.id for d in self.dimensions]:
            if kinds[dim_id] == VIEW_CRITERIA:
                if dim_id not in accepted and judged.get(dim_id):
                    raise ActionError("err_criteria_left", dim=dim_id, left=", ".join(sorted(judged[dim_id])))
                continue
            if dim_id not in scores and dim_id not in accepted:
                raise ActionError("err_no_score", dim=dim_id)
            if dim_id in accepted and panel.get(dim_id) is None:
                raise ActionError("err_no_panel", dim=dim_id)
        for dim_id, value in scores.items():
            self._dimension(a, str(dim_id))
            score_value(value, self.results.rubric.dimension(str(dim_id)))
        for dim_id in accepted:
            if kinds.get(dim_id) == VIEW_CRITERIA:
                self._panel_verdicts(a, dim_id, judged.get(dim_id, set()))   # raises on a tie, before writing
        for dim_id, value in scores.items():
            self._score(plan, a, str(dim_id), value, version=_version(versions, str(dim_id)))
        for dim_id in accepted:
            if kinds.get(dim_id) == VIEW_CRITERIA:
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
                for d in self.dimensions if d.view == VIEW_CRITERIA}

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

    def _criterion(self, plan: Plan, a: CaseAudit, action: Mapping[str, Any]) -> None:
        """The reviewer's own verdict on one criterion: ``met`` true / false (null: withdrawn), with evidence
        and a comment; stored with the criterion's points."""
        dim_id = _text(action, "dimension")
        rd = self._dimension(a, dim_id)
        if rd.view != VIEW_CRITERIA:
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

    def _verdict(self, plan: Plan, a: CaseAudit, action: Mapping[str, Any]) -> None:
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

    def _score(self, plan: Plan, a: CaseAudit, dim_id: str, value: Any, origin: LabelOrigin = "own",
               version: int | None = None) -> None:
        rd = self._dimension(a, dim_id)
        label = HumanLabelRecord(case_id=a.case_id, dimension=dim_id, reviewer=plan.reviewer, kind="score")
        if value is None or value == "":
            plan.clear(label, version)
            return
        plan.put(label.model_copy(update={"value": score_value(value, rd, origin), "origin": origin}), version)

    def _add(self, plan: Plan, a: CaseAudit, action: Mapping[str, Any], action_id: str | None) -> str:
        """A deduction the judges missed, with its ``evidence`` (what in the record shows it) and ``comment`` (why)
        apart; its id comes from the action's id when there is one, so that a repeated request names the same."""
        dim_id = _text(action, "dimension")
        rd = self._dimension(a, dim_id)
        type_id = _text(action, "type")
        bounds = {t.id: (t.low, t.high) for dd in deductions_in([rd]) for c in dd.categories for t in c.types}
        bounds.update({p.id: (p.points, p.points) for dd in deductions_in([rd]) for p in dd.fixed_penalties})
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

    def _write(self, plan: Plan, action_id: str | None, session: str | None) -> Written:
        """Store ``plan`` as one write (:meth:`Store.write_labels`), then bring the reviewer's ledger up to date on
        the case, and reveal a spot-check case whose blind scores the write completed (its judges are shown next)."""
        with self.lock:
            ledger = self._ledger(plan.reviewer)   # read before the write (or after another connection's): then kept
            try:
                written = self.store.write_labels(plan.changes, source=SOURCE, action_id=action_id, session=session,
                                                  expect=plan.expect, actor=plan.reviewer, member_key=plan.member_key)
            except LabelConflict as e:
                raise ActionConflict(e) from None
            except LabelRefused as e:
                raise _refusal(e) from None
            self._refresh(ledger, plan.reviewer, plan.case_id)
            if self._completes_blind(ledger, plan.case_id):
                self._reveal(ledger, plan.reviewer, [plan.case_id], session)
        return written


@dataclass
class Plan:
    """The label changes of one action, and the versions the page saw (slot -> version), before they are written."""

    reviewer: str
    case_id: str
    changes: list[Change] = field(default_factory=list)
    expect: dict[Slot, int] = field(default_factory=dict)
    #: the hash of the personal key the writer's session was opened with (None: not a personal link's)
    member_key: str | None = None

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
    if e.code == "access_ended":
        return AccessEnded(name)
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


def score_value(value: Any, rd: Dimension, origin: LabelOrigin = "own") -> float:
    """A score given for ``rd``: within its range; a likert dimension's own or reference (adjudicated) score is
    one of its levels (only the panel's mean, accepted, may fall between two)."""
    x = _number(value, rd.id)
    if rd.anchors:
        lo, hi = min(rd.anchors), max(rd.anchors)
        if origin != "accepted" and x not in rd.anchors:
            raise ActionError("err_reference_level" if origin == "reference" else "err_level", dim=rd.id, low=lo,
                              high=hi, value=f"{x:g}")
        if not lo <= x <= hi:
            raise ActionError("err_level_range", dim=rd.id, low=lo, high=hi, value=f"{x:g}")
        return x
    if not 0 <= x <= rd.max:
        raise ActionError("err_score_range", dim=rd.id, max=f"{rd.max:g}", value=f"{x:g}")
    return x
