"""Human labels as an append-only history: every label action is an event; the labels are derived from them.

Table ``label_events`` (schema 8): one row per action on one label (who, when, what, on which label, during which
phase, from which session and source, under which client action id). Rows are never updated or deleted (two
triggers refuse it); a label cleared is a ``clear`` event, a label changed is one more ``set`` event. The labels
every figure reads (:func:`fold`, what :meth:`~consensus_eval.execution.store.Store.human_labels` returns) are the
latest event of each label, with two rules:

- **Blind scores frozen at reveal.** On a case of the random spot check, the scores (and criterion verdicts) a
  reviewer saves before the judges are shown to them are their *blind* labels (phase ``blind``). A ``reveal``
  event marks the moment the judges were shown (the review app when the reviewer's own scores are complete, a
  sheet exported for them with the judges in it). A later change is phase ``revealed`` and is kept as the label's
  :attr:`~HumanLabelRecord.revision`: the label's ``value`` stays the blind one, which is what validity uses.
- **Roles the store enforces** (:func:`check_roles`): with a team, an adjudicator's labels are references
  (origin ``reference``, phase ``adjudication``), never a reviewer's own; only an adjudicator gives a reference;
  and on a spot-check case nobody accepts the panel's score (it is blind).

Every write may carry a client-generated action id (table ``label_actions``): an id already stored makes the
write a no-op, so a double click or a retried request never stores twice. Every label has a
:attr:`~HumanLabelRecord.version` (how many events its slot has had); a write that names the version it saw is
refused as a :class:`LabelConflict` when the slot has moved on (a stale tab), with the stored label in it.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

from pydantic import BaseModel, ValidationError, model_validator

from consensus_eval._errors import InputError

#: what a human label is (:class:`HumanLabelRecord`)
LabelKind = Literal["score", "verdict", "comment", "added_deduction", "categories", "criterion"]
LABEL_KINDS: tuple[LabelKind, ...] = ("score", "verdict", "comment", "added_deduction", "categories", "criterion")
#: a reviewer's own verdict on one criterion of a ``criteria`` dimension (label kind ``criterion``)
CriterionVerdictValue = Literal["met", "not_met"]
CRITERION_VALUES: tuple[CriterionVerdictValue, ...] = ("met", "not_met")
#: where a score label's value came from: ``own`` (the reviewer entered it), ``accepted`` (the reviewer
#: accepted the panel's score as shown, without entering one; kept apart from their own scores, left out of
#: judge-versus-human figures by default) or ``reference`` (an adjudicator's decision where two reviewers
#: disagreed: the reference score of the case, or the reference verdict on a deduction one reviewer agreed with
#: and another did not, kept apart from the reviewers' own). A case without a label is "not reviewed": there
#: is no state for it.
LabelOrigin = Literal["own", "accepted", "reference"]
LABEL_ORIGINS: tuple[LabelOrigin, ...] = ("own", "accepted", "reference")
#: a reviewer's verdict on one deduction of a judge
Verdict = Literal["agree", "disagree", "unsure"]
VERDICTS: tuple[Verdict, ...] = ("agree", "disagree", "unsure")
#: when a label was given: ``blind`` (a spot-check case before the judges were shown to the reviewer),
#: ``revealed`` (with the judges' work in view: any case outside the spot check, or a spot-check case after its
#: reveal) or ``adjudication`` (an adjudicator's reference)
LabelPhase = Literal["blind", "revealed", "adjudication"]
LABEL_PHASES: tuple[LabelPhase, ...] = ("blind", "revealed", "adjudication")
#: the kinds whose blind value is frozen at reveal (what makes a reviewer's blind score)
FROZEN_KINDS: frozenset[str] = frozenset({"score", "criterion"})
#: what an event does: ``set`` a label, ``clear`` it, or ``reveal`` the judges of a case to a reviewer
EventOp = Literal["set", "clear", "reveal"]
#: the longest client action id kept (characters)
MAX_ACTION_ID = 100


class HumanLabelRecord(BaseModel):
    """One human label as derived from its events (:func:`fold`). What ``value`` holds depends on ``kind``:

    - ``score``: the reviewer's score (a float) of ``dimension`` (a dimension id, or ``total``) of the
      case; ``deduction_id`` is None;
    - ``verdict``: ``agree`` / ``disagree`` / ``unsure`` on the judge's deduction ``deduction_id``
      (an :class:`~consensus_eval.analysis.audit.AuditDeduction` id, ``{request_hash}#d{i}`` or
      ``#p{i}``) of ``dimension``; ``comment``: why, optional;
    - ``comment``: a free comment (``value`` None, the text in ``comment``) on a deduction
      (``deduction_id`` set), a dimension (``dimension`` set) or the whole case (both None);
    - ``added_deduction``: a deduction the judges missed: ``value`` is the rubric's type id (or fixed
      penalty id) in ``dimension``, ``points`` the points it takes off, ``evidence`` what in the record
      shows it, ``comment`` the reviewer's reason; ``deduction_id`` is the reviewer's own id
      for it (several per dimension are allowed);
    - ``categories``: the deduction categories the reviewer would deduct in (``;``-separated
      category ids; the wide ``--human`` file's ``categories`` column), ``dimension`` None.
    - ``criterion``: the reviewer's own verdict on one criterion of a ``criteria`` dimension: ``value``
      ``met`` / ``not_met`` (:data:`CRITERION_VALUES`), ``deduction_id`` the criterion's id, ``dimension`` the
      dimension, ``points`` the criterion's points, ``evidence`` what in the record shows it, ``comment`` why.

    ``labelled_at``: when the value that counts was written (Unix time, seconds); ``source``: where from (the
    imported file's path, or what wrote it, e.g. ``review``). A reviewer has at most one label per
    (``kind``, ``case_id``, ``dimension``, ``deduction_id``). ``origin``: ``own`` when the reviewer entered the
    score, ``accepted`` when they accepted the panel's score as shown (:data:`LabelOrigin`); ``reference``
    (scores and verdicts): an adjudicator's decision where reviewers disagreed.

    From the history (schema 8): ``phase`` of the value that counts (:data:`LabelPhase`); ``version``: how many
    events the label's slot has had (what a write names to be refused on a stale tab); ``revision``: a blind
    label's later value, given after the judges were shown (``revised_at`` when), kept beside the blind value,
    never instead of it; ``session``: the review session that wrote it (a tag, never the session's secret).
    """

    case_id: str
    dimension: str | None = None
    deduction_id: str | None = None
    reviewer: str
    kind: LabelKind
    value: float | str | None = None
    points: float | None = None
    comment: str | None = None
    labelled_at: float = 0.0
    source: str = ""
    origin: LabelOrigin = "own"
    evidence: str | None = None
    phase: LabelPhase | None = None
    version: int = 0
    revision: float | str | None = None
    revised_at: float | None = None
    session: str | None = None

    @model_validator(mode="after")
    def _fits_its_kind(self) -> HumanLabelRecord:
        """A score is a number (a numeric string is converted), a verdict one of :data:`VERDICTS`. A label
        without a value is allowed: it serves as the key of a label to delete."""
        if self.kind == "score" and isinstance(self.value, str):
            try:
                self.value = float(self.value)
            except ValueError:
                raise ValueError(f"a score label's value must be a number, got {self.value!r}") from None
        if self.origin == "accepted" and self.kind not in ("score", "criterion"):
            raise ValueError(f"only a score or a criterion's verdict can be accepted from the panel, not a {self.kind}")
        if self.origin == "reference" and self.kind not in ("score", "verdict", "criterion"):
            raise ValueError(f"only a score or a verdict can be an adjudicator's reference, not a {self.kind}")
        if self.kind == "verdict" and self.value is not None and self.value not in VERDICTS:
            raise ValueError(f"a verdict label's value is one of {', '.join(VERDICTS)}, got {self.value!r}")
        if self.kind == "criterion" and self.value is not None and self.value not in CRITERION_VALUES:
            raise ValueError(f"a criterion label's value is one of {', '.join(CRITERION_VALUES)}, got {self.value!r}")
        return self

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """What identifies the label among one store's labels (one per key)."""
        return (self.reviewer, self.kind, self.case_id, self.dimension or "", self.deduction_id or "")

    @property
    def slot(self) -> Slot:
        """The slot the label's :attr:`version` counts (:func:`slot_of`)."""
        return slot_of(self.reviewer, self.case_id, self.kind, self.dimension, self.deduction_id)

    @property
    def shown(self) -> float | str | None:
        """What the reviewer sees as their label now: the revision when there is one, else the value."""
        return self.revision if self.revision is not None else self.value



#: (reviewer, case, slot kind, dimension, deduction id): a verdict and a comment on the same deduction share a slot
#: (one field on the page), every other label is its own slot
Slot = tuple[str, str, str, str, str]


def slot_of(reviewer: str, case_id: str, kind: str, dimension: str | None, deduction_id: str | None) -> Slot:
    """The slot of a label: its key, a comment on a deduction counted with the verdict on it (they are one field
    of the page, written together)."""
    if kind == "comment" and deduction_id:
        kind = "verdict"
    return (reviewer, case_id, kind, dimension or "", deduction_id or "")


@dataclass(frozen=True, slots=True)
class LabelEvent:
    """One row of ``label_events`` (fields in the table's column order): one action on one label (``op`` ``set`` /
    ``clear``), or the reveal of a spot-check case's judges to a reviewer (``op`` ``reveal``, ``kind`` None). ``seq``:
    its place in the history; ``at``: when (Unix time); ``action_id``: the client's id of the action it belongs to
    (None: none given); ``session``: the review session's tag; ``source``: what wrote it (``review``, a sheet's path,
    ``api``...); ``copied_from`` / ``copied_seq`` (schema 10): for an event copied from another run's store
    (``human copy``, :mod:`consensus_eval.execution.label_copy`), that run's folder and the event's ``seq`` there. A
    plain read model, built with keywords: the table's CHECKs hold what it may say, and the labels made of it are
    validated (:class:`HumanLabelRecord`, :func:`fold`)."""

    seq: int = 0
    action_id: str | None = None
    reviewer: str = ""
    case_id: str = ""
    dimension: str | None = None
    deduction_id: str | None = None
    kind: LabelKind | None = None
    op: EventOp = "set"
    value: float | str | None = None
    points: float | None = None
    comment: str | None = None
    evidence: str | None = None
    origin: LabelOrigin = "own"
    phase: LabelPhase = "revealed"
    session: str | None = None
    source: str = ""
    at: float = 0.0
    copied_from: str | None = None
    copied_seq: int | None = None


EVENT_COLUMNS = [f.name for f in fields(LabelEvent) if f.name != "seq"]

LABELS_SCHEMA = """
CREATE TABLE IF NOT EXISTS label_events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    action_id    TEXT,
    reviewer     TEXT NOT NULL,
    case_id      TEXT NOT NULL,
    dimension    TEXT,
    deduction_id TEXT,
    kind         TEXT CHECK (kind IN ('score', 'verdict', 'comment', 'added_deduction', 'categories', 'criterion')),
    op           TEXT NOT NULL CHECK (op IN ('set', 'clear', 'reveal')),
    value,
    points       REAL,
    comment      TEXT,
    evidence     TEXT,
    origin       TEXT NOT NULL DEFAULT 'own' CHECK (origin IN ('own', 'accepted', 'reference')),
    phase        TEXT NOT NULL CHECK (phase IN ('blind', 'revealed', 'adjudication')),
    session      TEXT,
    source       TEXT NOT NULL,
    at           REAL NOT NULL,
    copied_from  TEXT,
    copied_seq   INTEGER,
    CHECK ((op = 'reveal') = (kind IS NULL))
);
CREATE INDEX IF NOT EXISTS label_events_case ON label_events (case_id, reviewer);
CREATE INDEX IF NOT EXISTS label_events_reviewer ON label_events (reviewer);
CREATE TABLE IF NOT EXISTS label_actions (
    reviewer  TEXT NOT NULL,
    action_id TEXT NOT NULL,
    at        REAL NOT NULL,
    PRIMARY KEY (reviewer, action_id)
);
CREATE TRIGGER IF NOT EXISTS label_events_append_only_update BEFORE UPDATE ON label_events
BEGIN SELECT RAISE(ABORT, 'label_events is append-only: a change is a new event'); END;
CREATE TRIGGER IF NOT EXISTS label_events_append_only_delete BEFORE DELETE ON label_events
BEGIN SELECT RAISE(ABORT, 'label_events is append-only: a label cleared is a clear event'); END;
"""


# --------------------------------------------------------------------------- refusals


class LabelRefused(InputError):
    """A label write the store refuses (a role, a blind case), said in English (``str()``), with ``code`` (what the
    review app turns into its catalogue's ``err_<code>``) and the ``params`` of the message."""

    def __init__(self, code: str, message: str, **params: Any) -> None:
        self.code = code
        self.params = params
        super().__init__(message)


class LabelConflict(LabelRefused):
    """A write that names a version its label's slot has moved past (another tab or another channel wrote since):
    nothing is stored. ``stored``: the labels of the slot now (empty: cleared), ``version``: the slot's version."""

    def __init__(self, slot: Slot, stored: Sequence[HumanLabelRecord], version: int, sent: int) -> None:
        self.slot = slot
        self.stored = list(stored)
        self.version = version
        self.sent = sent
        what = "/".join(x for x in slot[2:] if x)
        super().__init__("conflict", f"case {slot[1]}: {what} changed since it was shown (version {version}, the "
                         f"write saw version {sent}); nothing was stored: reload, or send again with version {version}",
                         case=slot[1], label=what)


@dataclass(frozen=True)
class Change:
    """One label to write: ``label`` set (``clear`` False) or cleared (its key only is used)."""

    label: HumanLabelRecord
    clear: bool = False


@dataclass(frozen=True)
class Written:
    """What a write did: ``applied`` False when its action id was stored already (nothing written again);
    ``versions``: the version of each slot it wrote, after it."""

    applied: bool
    versions: dict[Slot, int]


# --------------------------------------------------------------------------- reading: the labels from their events


Key = tuple[str, LabelKind, str, str, str]


@dataclass
class LabelState:
    """One label's events as :func:`fold` and :func:`append` need them: its latest blind one (a frozen kind), its
    latest, the place of the latest in the history."""

    blind: LabelEvent | None = None
    latest: LabelEvent | None = None
    seq: int = 0
    slot: Slot = ("", "", "", "", "")

    @property
    def base(self) -> LabelEvent | None:
        """The event whose value counts (the blind one, for a blind label), None when the label is cleared."""
        assert self.latest is not None
        base = self.blind if self.blind is not None and self.blind.op == "set" else self.latest
        return base if base.op == "set" else None

    @property
    def now(self) -> LabelEvent | None:
        """The event the reviewer sees now: the latest set (a revision, if any), else the one that counts."""
        assert self.latest is not None
        return self.latest if self.latest.op == "set" else self.base


def label_states(events: Iterable[LabelEvent]) -> tuple[dict[Key, LabelState], dict[Slot, int]]:
    """Per label key its :class:`LabelState`, and per slot its version, from events in ``seq`` order."""
    states: dict[Key, LabelState] = {}
    counts: dict[Slot, int] = {}
    for ev in events:
        if ev.op == "reveal" or ev.kind is None:
            continue
        key = (ev.reviewer, ev.kind, ev.case_id, ev.dimension or "", ev.deduction_id or "")
        st = states.get(key)
        if st is None:
            st = states[key] = LabelState(slot=slot_of(ev.reviewer, ev.case_id, ev.kind, ev.dimension,
                                                       ev.deduction_id))
        counts[st.slot] = counts.get(st.slot, 0) + 1
        if ev.kind in FROZEN_KINDS and ev.phase == "blind":
            st.blind = ev
        st.latest = ev
        st.seq = ev.seq
    return states, counts


def fold(events: Iterable[LabelEvent]) -> list[HumanLabelRecord]:
    """The labels the events (in ``seq`` order) leave: per key, the latest ``set`` (a ``clear`` removes it); for a
    blind label (:data:`FROZEN_KINDS`, phase ``blind``) the latest blind event, with any later event as its
    revision. Ordered by the last event of each label (the order they were last written)."""
    by_key, counts = label_states(events)
    out: list[tuple[int, HumanLabelRecord]] = []
    for key, st in by_key.items():
        base, latest = st.base, st.latest
        if base is None or latest is None:
            continue
        revised = latest if latest is not base else None
        out.append((st.seq, _label(
            case_id=base.case_id, dimension=base.dimension, deduction_id=base.deduction_id, reviewer=base.reviewer,
            kind=key[1], value=base.value, points=base.points, comment=base.comment, labelled_at=base.at,
            source=base.source, origin=base.origin, evidence=base.evidence, phase=base.phase,
            version=counts[st.slot],
            revision=revised.value if revised is not None and revised.op == "set" else None,
            revised_at=revised.at if revised is not None else None, session=base.session)))
    out.sort(key=lambda x: x[0])
    return [lb for _, lb in out]


def _key(label: HumanLabelRecord) -> Key:
    return (label.reviewer, label.kind, label.case_id, label.dimension or "", label.deduction_id or "")


def _says(ev: LabelEvent | None, label: HumanLabelRecord) -> bool:
    """Whether the event ``ev`` (what a label shows now) says what ``label`` says."""
    return ev is not None and (ev.value, ev.points, ev.comment, ev.evidence, ev.origin) == (
        label.value, label.points, label.comment, label.evidence, label.origin)


def _label(**data: Any) -> HumanLabelRecord:
    try:
        return HumanLabelRecord(**data)
    except ValidationError as e:
        raise InputError(f"damaged store: a label does not read back ({e.errors()[0]['msg']}: {data!r})") from None


def versions(events: Iterable[LabelEvent]) -> dict[Slot, int]:
    """slot -> how many events it has had (a slot cleared keeps its version: a tab that saw it before the clear
    is stale)."""
    out: dict[Slot, int] = {}
    for ev in events:
        if ev.op != "reveal" and ev.kind is not None:
            sl = slot_of(ev.reviewer, ev.case_id, ev.kind, ev.dimension, ev.deduction_id)
            out[sl] = out.get(sl, 0) + 1
    return out


def read_events(db: sqlite3.Connection, *, reviewer: str | None = None,
                case_id: str | None = None) -> list[LabelEvent]:
    """The stored events (of one ``reviewer``, of one case), in the order they were written."""
    where, args = [], []
    if reviewer is not None:
        where.append("reviewer = ?")
        args.append(reviewer)
    if case_id is not None:
        where.append("case_id = ?")
        args.append(case_id)
    sql = (f"SELECT seq, {', '.join(EVENT_COLUMNS)} FROM label_events"
           + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY seq")
    return [LabelEvent(*row) for row in db.execute(sql, args)]   # the columns in the fields' order


# --------------------------------------------------------------------------- writing


def append(db: sqlite3.Connection, changes: Sequence[Change], *, source: str, action_id: str | None = None,
           session: str | None = None, expect: Mapping[Slot, int] | None = None, actor: str | None = None,
           now: float | None = None, force_source: bool = False, member_key: str | None = None) -> Written:
    """Append the events of ``changes`` (inside the caller's transaction): each label checked against the roles
    (:func:`check_roles`), its phase set (:func:`phase_of`), ``expect`` (slot -> the version the writer saw)
    checked first (:class:`LabelConflict`), ``action_id`` recorded under ``actor`` (default: the changes' reviewer;
    an id of theirs stored already: nothing is written, ``applied`` False). A change that says what its label
    already says is no event (a repeated click). Each event's source is its label's, else ``source``
    (``force_source``: ``source`` always). ``member_key``: the hash of the personal key the writer's session was
    opened with: each actor must still be on the team with that key, in this transaction (:func:`check_member`)."""
    now = time.time() if now is None else now
    actors = {actor} if actor is not None else {c.label.reviewer for c in changes}
    if member_key is not None:
        for r in sorted(actors):
            check_member(db, r, member_key)
    if action_id is not None:
        if not action_id or len(action_id) > MAX_ACTION_ID:
            raise LabelRefused("action_id", f"an action id is 1 to {MAX_ACTION_ID} characters, got {len(action_id)}",
                               max=MAX_ACTION_ID)
        if any(db.execute("SELECT 1 FROM label_actions WHERE reviewer = ? AND action_id = ?",
                          (r, action_id)).fetchone() for r in actors):
            return Written(False, {})
    pairs = {(c.label.reviewer, c.label.case_id) for c in changes}
    current: dict[Key, LabelState] = {}
    counts: dict[Slot, int] = {}
    for reviewer, case_id in pairs:
        by_key, versions_ = label_states(read_events(db, reviewer=reviewer, case_id=case_id))
        current.update(by_key)
        counts.update(versions_)
    for sl, seen in (expect or {}).items():
        if counts.get(sl, 0) != seen:
            stored = [lb for lb in fold(read_events(db, reviewer=sl[0], case_id=sl[1])) if lb.slot == sl]
            raise LabelConflict(sl, stored, counts.get(sl, 0), seen)
    roles = team_roles(db)
    spot = _spot(db, {c for _, c in pairs})
    revealed = {p for p in pairs if _revealed(db, *p)}
    rows = []
    for c in changes:
        lb = c.label
        check_roles(lb, roles, lb.case_id in spot, clear=c.clear)
        st = current.get(_key(lb))
        shown = st.now if st is not None else None
        if c.clear and shown is None:
            continue
        if not c.clear and _says(shown, lb):
            continue
        phase = phase_of(lb, lb.case_id in spot, (lb.reviewer, lb.case_id) in revealed)
        rows.append(LabelEvent(action_id=action_id, reviewer=lb.reviewer, case_id=lb.case_id,
                               dimension=lb.dimension, deduction_id=lb.deduction_id, kind=lb.kind,
                               op="clear" if c.clear else "set", value=None if c.clear else lb.value,
                               points=None if c.clear else lb.points, comment=None if c.clear else lb.comment,
                               evidence=None if c.clear else lb.evidence, origin=lb.origin, phase=phase,
                               session=session, source=source if force_source else lb.source or source,
                               at=lb.labelled_at or now))
        counts[lb.slot] = counts.get(lb.slot, 0) + 1
        st = current.setdefault(_key(lb), LabelState())  # a later change of the same key in this write compares with it
        if phase == "blind" and lb.kind in FROZEN_KINDS:
            st.blind = rows[-1]
        st.latest = rows[-1]
    insert_events(db, rows)
    if action_id is not None:
        db.executemany("INSERT OR IGNORE INTO label_actions (reviewer, action_id, at) VALUES (?, ?, ?)",
                       [(r, action_id, now) for r in actors])
    touched = {slot_of(ev.reviewer, ev.case_id, str(ev.kind), ev.dimension, ev.deduction_id) for ev in rows}
    return Written(True, {sl: counts.get(sl, 0) for sl in touched | set(expect or {})})


def insert_events(db: sqlite3.Connection, events: Iterable[LabelEvent]) -> None:
    """Insert events as they are (their phase included): what :func:`append` and the migration from schema 6 use."""
    db.executemany(f"INSERT INTO label_events ({', '.join(EVENT_COLUMNS)}) VALUES "
                   f"({', '.join('?' for _ in EVENT_COLUMNS)})",
                   ([getattr(ev, c) for c in EVENT_COLUMNS] for ev in events))


def reveal(db: sqlite3.Connection, reviewer: str, case_ids: Iterable[str], *, source: str,
           session: str | None = None, now: float | None = None) -> list[str]:
    """Record that the judges of these spot-check cases were shown to ``reviewer`` (once per case: a case revealed
    before is skipped; a case outside the spot check has nothing to reveal). Returns the cases revealed now."""
    now = time.time() if now is None else now
    wanted = list(dict.fromkeys(case_ids))
    spot = _spot(db, set(wanted))
    new = [c for c in wanted if c in spot and not _revealed(db, reviewer, c)]
    insert_events(db, [LabelEvent(reviewer=reviewer, case_id=c, op="reveal", phase="revealed", session=session,
                                  source=source, at=now) for c in new])
    return new


def revealed_cases(db: sqlite3.Connection, reviewer: str) -> set[str]:
    """The spot-check cases whose judges were shown to ``reviewer``."""
    return {r[0] for r in db.execute("SELECT case_id FROM label_events WHERE op = 'reveal' AND reviewer = ?",
                                     (reviewer,))}


def phase_of(label: HumanLabelRecord, in_spot: bool, revealed: bool) -> LabelPhase:
    """The phase a label is given in: an adjudicator's reference in ``adjudication``; on a spot-check case not
    revealed to its reviewer yet, ``blind``; else ``revealed``."""
    if label.origin == "reference":
        return "adjudication"
    return "blind" if in_spot and not revealed else "revealed"


def check_roles(label: HumanLabelRecord, roles: Mapping[str, str], in_spot: bool, *, clear: bool = False) -> None:
    """Refuse what no channel may store (:class:`LabelRefused`): with a team (``roles``: name -> role), an
    adjudicator's label that is not a reference (a comment aside), or a reference by anyone else; on a spot-check
    case (``in_spot``), a score accepted from the panel."""
    role = roles.get(label.reviewer)
    if roles and role == "adjudicator" and label.origin != "reference" and label.kind != "comment":
        raise LabelRefused("adjudicator_own", f"{label.reviewer} is the adjudicator of this run: their entries are "
                           f"references (origin reference), never a reviewer's own {label.kind} (case {label.case_id})",
                           name=label.reviewer, case=label.case_id)
    if roles and label.origin == "reference" and role != "adjudicator":
        raise LabelRefused("reference_not_adjudicator", f"{label.reviewer} is not an adjudicator of this run: only an "
                           f"adjudicator gives a reference (case {label.case_id})", name=label.reviewer,
                           case=label.case_id)
    if in_spot and label.origin == "accepted" and not clear:
        raise LabelRefused("accepted_blind", f"case {label.case_id} is in the random spot check: it is scored blind, "
                           "and the panel's score cannot be accepted there; give your own score",
                           case=label.case_id)


def check_member(db: sqlite3.Connection, reviewer: str, member_key: str) -> None:
    """Refuse (:class:`LabelRefused` ``access_ended``) a write of ``reviewer``'s session opened with the key whose
    hash is ``member_key`` when they are no longer on the team with that key (removed, or given a new key while
    their page was open): sessions end when access ends, whichever process changed the team."""
    row = db.execute("SELECT 1 FROM reviewers WHERE name = ? AND key_hash = ?", (reviewer, member_key)).fetchone()
    if row is None:
        raise LabelRefused("access_ended", f"{reviewer} is no longer on the team of this run with the link this "
                           "session was opened with (removed, or given a new link): nothing was stored", name=reviewer)


def team_roles(db: sqlite3.Connection) -> dict[str, str]:
    """name -> role of the run's team (empty: no team)."""
    return {r[0]: r[1] for r in db.execute("SELECT name, role FROM reviewers")}


def _spot(db: sqlite3.Connection, case_ids: set[str]) -> set[str]:
    if not case_ids:
        return set()
    return {c for c in case_ids if db.execute("SELECT 1 FROM spot_checks WHERE case_id = ?", (c,)).fetchone()}


def _revealed(db: sqlite3.Connection, reviewer: str, case_id: str) -> bool:
    return db.execute("SELECT 1 FROM label_events WHERE op = 'reveal' AND reviewer = ? AND case_id = ?",
                      (reviewer, case_id)).fetchone() is not None
