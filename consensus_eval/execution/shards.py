"""Shards: one run's cases split between processes or machines, and the shards' stores merged into one run.

``score --shard K/N`` scores the cases of shard K of N (numbered from 0, as a Slurm job array's
``SLURM_ARRAY_TASK_ID`` and a Kubernetes Indexed Job's ``JOB_COMPLETION_INDEX`` are) into a store of its own.
A case's shard is a function of its id alone (:func:`shard_of`: the first 8 bytes of the SHA-256 of its
UTF-8 id, big-endian, modulo N), so it does not move when the cases file is reordered or grows, and a shard
resumed after such a change keeps what it stored; the shards are balanced to a few per cent for thousands of
cases, and a shard may have none on a small set (its store records that, and merges like the others).

The shard's store records, beside the run (meta ``shard``, :class:`ShardRecord`): its K and N, the identity
of the whole case set it was cut from (:func:`case_set_id`: a SHA-256 of every valid case in file order),
how many cases that set has, where each of the shard's cases is in it, and where each round of a plan that
grows starts in its plan (adaptive runs, a cascade).

:func:`merge_stores` writes one store from the N shards' stores, as one process scoring every case would
have left it: the run's context (rubric, config, the whole case set in file order, the invalid lines), the
plan in one process's order (round by round, each in file order), every planned call once (by request hash,
byte for byte), and the history of the reviewers' labels (every event, as it was written, in time order). It
refuses, saying which store and why: a store that is not a shard's;
shards of other case sets, configs, rubrics or counts; a shard given twice or missing; a shard with planned
calls not stored yet or provider batches still running (resume it first); a spot check, a review team or
assignments (drawn or made for one shard's cases, they mean nothing for the whole run: draw or make them on
the merged run). The rebuild of the outputs is the caller's (:func:`consensus_eval.api.merge`).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from consensus_eval._errors import InputError
from consensus_eval.domain.cases import Case
from consensus_eval.execution.store import STORE_NAME, LabelEvent, PlannedCall, Store

#: the store's meta key of a shard's record
SHARD_META = "shard"
#: ``K/N``
_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (``0 <= index < count``)."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``K/N`` (``--shard 0/4`` ... ``--shard 3/4``), refused with a message saying what is expected."""
        m = _SHARD.fullmatch(text)
        if m is None:
            raise InputError(f"--shard {text!r}: expected K/N, shard K of N numbered from 0 (--shard 0/4 ... 3/4), "
                             "as $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT or $JOB_COMPLETION_INDEX/N give them")
        index, count = int(m.group(1)), int(m.group(2))
        if count < 1 or index >= count:
            raise InputError(f"--shard {text}: shards are numbered 0 to N-1 (N at least 1): {index} is not a shard "
                             f"of {count}")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


class ShardRecord(BaseModel):
    """What a shard's store records about it (module docstring)."""

    index: int
    count: int
    #: :func:`case_set_id` of the whole case set
    case_set: str
    #: how many cases the whole set has
    n_cases: int
    #: where each of the shard's cases (in the order of the store's ``cases``) is in the whole set
    positions: list[int]
    #: where each round of the plan starts (plan positions; ``[0]``: a fixed plan)
    round_starts: list[int] = [0]

    @property
    def shard(self) -> Shard:
        return Shard(self.index, self.count)


def shard_of(case_id: str, count: int) -> int:
    """The shard (of ``count``) that scores the case ``case_id`` (module docstring)."""
    return int.from_bytes(hashlib.sha256(case_id.encode("utf-8")).digest()[:8], "big") % count


def case_set_id(cases: Sequence[Case]) -> str:
    """The identity of a case set: SHA-256 over each case as JSON (keys sorted), in order."""
    h = hashlib.sha256()
    for case in cases:
        h.update(json.dumps(case.model_dump(mode="json"), ensure_ascii=False, sort_keys=True,
                            separators=(",", ":")).encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()


def select(cases: Sequence[Case], shard: Shard) -> tuple[list[Case], ShardRecord]:
    """The cases of ``shard`` (in file order) and the record its store keeps (round starts: a fixed plan's)."""
    positions = [i for i, c in enumerate(cases) if shard_of(c.id, shard.count) == shard.index]
    return [cases[i] for i in positions], ShardRecord(index=shard.index, count=shard.count,
                                                       case_set=case_set_id(cases), n_cases=len(cases),
                                                       positions=positions)


@dataclass(frozen=True)
class MergeReport:
    """What :func:`merge_stores` wrote: the shards, cases, planned calls and human labels."""

    shards: int
    cases: int
    calls: int
    labels: int


def merge_stores(runs: Sequence[Path], out: Path) -> MergeReport:
    """Write ``out/results.sqlite`` from the stores of every shard of a run (module docstring); nothing is
    written when a check fails. ``out`` must not hold a store yet."""
    if not runs:
        raise InputError("merge: give the output folders of every shard (consensus-eval merge RUN_0 ... --out DIR)")
    if (out / STORE_NAME).exists():
        raise InputError(f"{out / STORE_NAME}: a store is there already; merge writes a new run: give --out a "
                         "folder without one")
    stores: list[Store] = []
    try:
        for run in runs:
            stores.append(Store.open_existing(run, read_only=True))
        shards = [_shard_of_store(run, store) for run, store in zip(runs, stores, strict=True)]
        _check_alike(runs, stores, shards)
        cases: list[Any] = [None] * shards[0].n_cases
        planned: list[tuple[tuple[int, int, int], PlannedCall]] = []
        events: list[tuple[tuple[float, int, int], LabelEvent]] = []
        for run, store, shard in zip(runs, stores, shards, strict=True):
            _check_done(run, store, shard)
            stored_cases = store.cases()
            position = _positions(run, shard, stored_cases)
            for i, case in zip(shard.positions, stored_cases, strict=True):
                cases[i] = case
            for i, call in enumerate(store.plan()):
                round_ = bisect.bisect_right(shard.round_starts, i) - 1
                planned.append(((round_, position[call.case_id], i), call))
            events += [((ev.at, shard.index, ev.seq), ev) for ev in store.label_events()]
        if any(c is None for c in cases):
            raise InputError(f"the shards' stores hold {sum(c is not None for c in cases)} of the "
                             f"{len(cases)} cases of the run: a store is damaged")
        planned.sort(key=lambda kc: kc[0])
        # written beside, then renamed: a merge that fails half-way leaves no store behind
        part = out / f".{STORE_NAME}.merging-{os.getpid()}"
        try:
            with Store(part) as merged:
                first = stores[0]
                merged.set_meta("rubric", first.get_meta("rubric"))
                merged.set_meta("config", first.get_meta("config"))
                merged.set_cases(cases)
                merged.set_meta("invalid_lines", first.get_meta("invalid_lines", []))
                merged.set_meta("inputs", first.get_meta("inputs", []))
                merged.set_plan(call for _, call in planned)
                for store in stores:
                    merged.import_calls(store.path)
                # every shard's label history as it happened (their cases are apart: no event meets another's)
                merged.import_label_events([ev for _, ev in sorted(events, key=lambda ke: ke[0])])
                n_labels = len(merged.human_labels())
            os.replace(part, out / STORE_NAME)
        finally:
            part.unlink(missing_ok=True)
    finally:
        for store in stores:
            store.close()
    return MergeReport(shards=len(runs), cases=len(cases), calls=len(planned), labels=n_labels)


def _shard_of_store(run: Path, store: Store) -> ShardRecord:
    raw = store.get_meta(SHARD_META)
    if raw is None:
        raise InputError(f"{run}: not a shard's run (scored without --shard); merge combines the output folders "
                         "of `consensus-eval score CASES --shard K/N --out DIR`, one per shard")
    try:
        return ShardRecord.model_validate(raw)
    except ValidationError as e:
        raise InputError(f"{run}: damaged store: its shard record does not read back ({e.errors()[0]['msg']})") \
            from None


def _check_alike(runs: Sequence[Path], stores: Sequence[Store], shards: Sequence[ShardRecord]) -> None:
    """Every store a shard of the same run (case set, count, config, rubric), each shard once, none missing."""
    base, first = runs[0], shards[0]
    for run, store, shard in zip(runs[1:], stores[1:], shards[1:], strict=True):
        if (shard.case_set, shard.n_cases) != (first.case_set, first.n_cases):
            raise InputError(f"{run}: its shard was cut from another case set than {base}'s ({shard.n_cases} cases "
                             f"against {first.n_cases}, or the same number with other content or order): score "
                             "every shard from the same cases file")
        if shard.count != first.count:
            raise InputError(f"{run} is shard {shard.shard} and {base} shard {first.shard}: the shards of one run are "
                             "cut in the same number N (score each with --shard K/N, the same N)")
        for key, what in (("config", "config"), ("rubric", "rubric"), ("invalid_lines", "invalid lines")):
            where = _first_difference(stores[0].get_meta(key), store.get_meta(key))
            if where is not None:
                raise InputError(f"{run}: its {what} differs from {base}'s (at {where}): every shard of a run is "
                                 "scored with the same config, rubric and cases file")
    seen: dict[int, Path] = {}
    for run, shard in zip(runs, shards, strict=True):
        if shard.index in seen:
            raise InputError(f"{run} and {seen[shard.index]} are both shard {shard.shard}: give each shard once")
        seen[shard.index] = run
    missing = [str(Shard(k, first.count)) for k in range(first.count) if k not in seen]
    if missing:
        raise InputError(f"shard(s) {', '.join(missing)} missing: a merge needs every shard of the run "
                         f"(0 to {first.count - 1}); give their output folders too")


def _check_done(run: Path, store: Store, shard: ShardRecord) -> None:
    """A shard whose run is finished (every planned call stored, no batch running) and that holds nothing drawn
    or made for its cases alone."""
    pending = store.batches(active_only=True)
    if pending:
        raise InputError(f"{run}: {len(pending)} provider batch(es) still running: collect them first (rerun its "
                         f"`score ... --shard {shard.shard}` command, with --wait to wait for them), then merge")
    unstored = len(store.unstored_plan())
    if unstored:
        raise InputError(f"{run}: {unstored} planned call(s) not stored (the shard's run was interrupted): resume it "
                         f"(rerun its `score ... --shard {shard.shard} --out {run}` command), then merge")
    if store.spot_checks():
        raise InputError(f"{run}: holds a spot check drawn from this shard's cases alone, which is not a random "
                         "sample of the whole run: merge the shards without it (score them into new folders), then "
                         "draw it on the merged run (consensus-eval audit MERGED --spot-check N)")
    if store.reviewers() or store.assignments():
        raise InputError(f"{run}: holds a review team or assignments made for this shard alone: merge the shards "
                         "without them, then add the team to the merged run (consensus-eval reviewers add NAME "
                         "--run MERGED)")


def _positions(run: Path, shard: ShardRecord, stored_cases: list[Any]) -> dict[str, int]:
    """Case id -> its position in the whole set, checked against the shard's record."""
    if len(stored_cases) != len(shard.positions) or any(not 0 <= p < shard.n_cases for p in shard.positions):
        raise InputError(f"{run}: damaged store: its shard record does not match its {len(stored_cases)} case(s)")
    out: dict[str, int] = {}
    for p, case in zip(shard.positions, stored_cases, strict=True):
        case_id = case.get("id") if isinstance(case, dict) else None
        if not isinstance(case_id, str) or shard_of(case_id, shard.count) != shard.index:
            raise InputError(f"{run}: damaged store: case {case_id!r} is not one of shard {shard.shard}'s")
        out[case_id] = p
    return out


def _first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two JSON values first differ (a dotted path; None: equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            found = _first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None if len(a) == len(b) else f"{path} ({len(a)} against {len(b)} items)"
    return None if a == b and type(a) is type(b) else (path or "the top")
