"""Labels follow the cases: the clinicians' labels of one run copied into another run of the same cases
(``consensus-eval human copy FROM TO``; docs/qc-loop.md).

A second run of the same cases (a prompt changed, a judge model switched) starts without labels; what the clinicians
said of the cases still holds, and a comparison of the two versions' agreement with them needs them in both. The
copy reads the source's label history and appends it to the target's, event by event, each new event naming where
it came from (``copied_from``: the source run's folder, ``copied_seq``: the event there; an event that was itself a
copy keeps the first run it came from), never changing the source:

- **by case id and content**: a case's labels are copied when the target has a case of that id with the same
  conversation, record and criteria; a case whose content changed is refused, naming it, and nothing is copied
  (the labels describe the other text); a labelled case the target does not have is reported and skipped;
- **every event as it was**: when, by whom, in which phase (a blind score stays blind, its revision a revision),
  from which source; the reveals too, so the target folds the same labels;
- **verdicts on deductions** name a judge's deduction of the source (``{request_hash}#d{i}``, ``#p{i}``): they are
  carried to a deduction of the same type (fixed penalty) on the same case and dimension in the target (the same
  judge and run first, then the same judge, then any judge), and reported as not comparable where the target's
  judges gave none of that type;
- **the spot check**: the source's sample and its tuning / held-out split are copied to a target without one (a
  target whose spot check differs is refused: one run has one sample), with the comparisons already made on its
  held-out part (``heldout_looks``), so the count of looks follows the labels.

Copying again copies only what the target lacks (the events already copied are known by their origin).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from consensus_eval._errors import InputError
from consensus_eval.domain.cases import Case
from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.labels import LabelEvent
from consensus_eval.execution.store import SpotCheckRecord, Store, StoredCall
from consensus_eval.execution.stored_run import read_stored

#: the label kinds whose ``deduction_id`` names a judge's deduction (``{request_hash}#d{i}`` / ``#p{i}``)
_ON_DEDUCTIONS = frozenset({"verdict", "comment"})
_DEDUCTION_ID = re.compile(r"^(?P<hash>.+)#(?P<tag>[dp])(?P<i>\d+)$")
#: how many case ids an error or a report names before it counts the rest
SHOWN = 10


@dataclass(frozen=True)
class NotComparable:
    """Verdicts (and comments) of the source on a deduction type the target's judges did not give on that case and
    dimension: ``item`` is the type id (or fixed penalty id; ``?`` when the source's deduction is not in its store),
    ``events`` how many events were left out."""

    case_id: str
    dimension: str
    item: str
    events: int


@dataclass
class CopyReport:
    """What :func:`copy_labels` did: ``copied`` events appended to the target (``already``: copied before, skipped),
    over ``cases`` cases; ``not_in_target``: labelled cases the target does not have; ``not_comparable``: verdicts not
    carried; ``spot_check``: ``copied`` (the target had none), ``same`` (it had the same) or ``none`` (the source has
    none); ``looks``: comparisons on the held-out part copied."""

    source: str
    copied: int = 0
    already: int = 0
    cases: int = 0
    not_in_target: list[str] = field(default_factory=list)
    not_comparable: list[NotComparable] = field(default_factory=list)
    spot_check: Literal["copied", "same", "none"] = "none"
    looks: int = 0


def content(case: Case) -> str:
    """What a case's labels are about, as one string: its conversation, record and criteria (not its id, system,
    source, importance or meta)."""
    return json.dumps(case.model_dump(mode="json", include={"conversation", "record", "criteria"}),
                      ensure_ascii=False, sort_keys=True)


def names(ids: Sequence[str]) -> str:
    """Case ids for a message: the first :data:`SHOWN`, then how many more."""
    more = f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
    return ", ".join(ids[:SHOWN]) + more


class _Deductions:
    """A run's deductions by id and by (case, dimension, type): what a verdict's deduction id names, and where the
    same type is in another run."""

    def __init__(self, records: Iterable[StoredCall]) -> None:
        self.item: dict[tuple[str, str], tuple[StoredCall, str]] = {}          # (case, deduction id) -> (call, type)
        self.where: dict[tuple[str, str, str], list[tuple[StoredCall, str]]] = {}  # (case, dim, type) -> [(call, id)]
        for r in records:
            if r.status != "ok" or r.judgment is None:
                continue
            for tag, items in (("d", [d.type for d in r.judgment.deductions]),
                               ("p", [p.id for p in r.judgment.fixed_penalties])):
                for i, type_id in enumerate(items):
                    did = f"{r.request_hash}#{tag}{i}"
                    self.item[(r.case_id, did)] = (r, type_id)
                    self.where.setdefault((r.case_id, r.dimension, type_id), []).append((r, did))

    def carried(self, source: tuple[StoredCall, str] | None, case_id: str, dimension: str,
                target: _Deductions) -> str | None:
        """The target's deduction id the verdict on ``source`` (the source's call and type) goes to, or None."""
        if source is None:
            return None
        call, type_id = source
        found = target.where.get((case_id, dimension, type_id), [])
        ranked = sorted(found, key=lambda cd: (cd[0].judge != call.judge, cd[0].run != call.run))
        return ranked[0][1] if ranked else None


def copy_labels(source: Store, target: Store, source_name: str) -> CopyReport:
    """Copy ``source``'s labels (and spot check, and looks on its held-out part) into ``target`` (module docstring).
    ``source_name``: the source run's folder as the copied events name it. Raises :class:`InputError`, storing
    nothing, when the runs are not runs of the same cases and rubric, or their spot checks differ."""
    src, dst = read_stored(source, replies=False), read_stored(target, replies=False)
    _check_rubrics(src.rubric, dst.rubric, source_name, target)
    report = CopyReport(source=source_name)
    events = source.label_events()
    mine = {c.id: c for c in dst.cases}
    theirs = {c.id: c for c in src.cases}
    labelled = list(dict.fromkeys(ev.case_id for ev in events))
    report.not_in_target = [c for c in labelled if c not in mine]
    _check_same_content(labelled, mine, theirs, source_name, target)
    sample, have = source.spot_checks(), target.spot_checks()
    _check_spot_checks(sample, have, mine, source_name, target)
    done = {(ev.copied_from, ev.copied_seq) for ev in target.label_events() if ev.copied_from is not None}
    out, lost, report.already = _carried_events(events, mine, done, source_name, _Deductions(src.records),
                                                _Deductions(dst.records))
    report.not_comparable = [NotComparable(c, d, t, n) for (c, d, t), n in lost.items()]
    report.copied = len(out)
    report.cases = len({ev.case_id for ev in out})
    if sample:
        report.spot_check = "same" if have else "copied"
    if out:
        target.import_label_events(out)
    if sample and not have:
        target.replace_spot_checks(sample)
    looks = source.heldout_looks()
    report.looks = target.add_heldout_looks(looks) if looks else 0
    return report


def _check_rubrics(a: Rubric, b: Rubric, source_name: str, target: Store) -> None:
    """Raise :class:`InputError` unless the two runs' rubrics have the same dimensions."""
    dims_a, dims_b = [d.id for d in a.dimensions], [d.id for d in b.dimensions]
    if dims_a != dims_b:
        raise InputError(f"{source_name} and {target.path.parent} use different rubrics ({a.id}: "
                         f"{', '.join(dims_a)}; {b.id}: {', '.join(dims_b)}): labels of one do not describe "
                         "the other's scores; copy labels between runs of the same rubric")


def _check_same_content(labelled: list[str], mine: dict[str, Case], theirs: dict[str, Case], source_name: str,
                        target: Store) -> None:
    """Raise :class:`InputError` when a labelled case has another content in the target than in the source."""
    changed = [c for c in labelled if c in mine and c in theirs and content(mine[c]) != content(theirs[c])]
    if changed:
        raise InputError(f"{target.path.parent}: {len(changed)} labelled case(s) of {source_name} have another "
                         f"content here (conversation, record or criteria): {names(changed)}; their labels describe "
                         "the other text, so nothing was copied. Score the same cases, or give a changed case a new id")


def _check_spot_checks(sample: list[SpotCheckRecord], have: list[SpotCheckRecord], mine: dict[str, Case],
                       source_name: str, target: Store) -> None:
    """Raise :class:`InputError` when the target has another spot check, or lacks a case of the source's."""
    if sample and have and [(r.case_id, r.part) for r in have] != [(r.case_id, r.part) for r in sample]:
        raise InputError(f"{target.path.parent}: it has a spot check of its own ({len(have)} cases, seed "
                         f"{have[0].seed}) that is not {source_name}'s ({len(sample)} cases, seed {sample[0].seed}); "
                         "one run has one sample, so nothing was copied. Copy into a run without a spot check")
    if sample and any(r.case_id not in mine for r in sample):
        missing = [r.case_id for r in sample if r.case_id not in mine]
        raise InputError(f"{target.path.parent}: {len(missing)} case(s) of {source_name}'s spot check are not in this "
                         f"run: {names(missing)}; nothing was copied. Score the same cases")


def _carried_events(events: Sequence[LabelEvent], mine: dict[str, Case], done: set[tuple[str, int | None]],
                    source_name: str, ours: _Deductions, there: _Deductions
                    ) -> tuple[list[LabelEvent], dict[tuple[str, str, str], int], int]:
    """The source's events as the target's (verdicts on deductions carried to the target's deductions), the
    verdicts that found no deduction to go to (per case, dimension and type), and how many were already copied."""
    out: list[LabelEvent] = []
    lost: dict[tuple[str, str, str], int] = {}
    already = 0
    for ev in events:
        if ev.case_id not in mine:
            continue
        origin = (ev.copied_from, ev.copied_seq) if ev.copied_from is not None else (source_name, ev.seq)
        if origin in done:
            already += 1
            continue
        deduction_id = ev.deduction_id
        if ev.kind in _ON_DEDUCTIONS and deduction_id and _DEDUCTION_ID.match(deduction_id):
            item = ours.item.get((ev.case_id, deduction_id))
            deduction_id = ours.carried(item, ev.case_id, ev.dimension or "", there)
            if deduction_id is None:
                key = (ev.case_id, ev.dimension or "", item[1] if item else "?")
                lost[key] = lost.get(key, 0) + 1
                continue
        out.append(replace(ev, seq=0, deduction_id=deduction_id, copied_from=origin[0], copied_seq=origin[1]))
    return out, lost, already


def folder_name(folder: str | Path) -> str:
    """How a copied event names the run it came from: the folder's absolute path."""
    return str(Path(folder).resolve())
