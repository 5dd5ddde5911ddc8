"""Rebuilding a large run (docs/scale.md, 'One machine'): each shortcut gives exactly what the slow way gave, and
the work of a rebuild grows linearly with the number of cases (counted, never timed)."""

from __future__ import annotations

import dataclasses
import gc
import json
import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import TypeAdapter

from consensus_eval import _gc, api
from consensus_eval.analysis import alpha as alpha_mod, reliability as reliability_mod
from consensus_eval.analysis.agreement import matrix, points_taken
from consensus_eval.analysis.alpha import JointBootstrap, Level, alpha_with_ci, bootstrap_ci, krippendorff_alpha
from consensus_eval.analysis.audit import CaseAudit, RunGroup, audit, deductions_of, review_queue
from consensus_eval.analysis.consensus import of_run
from consensus_eval.analysis.derived import read_run
from consensus_eval.analysis.reliability import mean_or_none
from consensus_eval.domain import textio
from consensus_eval.domain.grounding import CaseGrounder, Grounding
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.kinds import Deductions, of_kind
from consensus_eval.domain.rubric import load_rubric
from consensus_eval.domain.scoring import DimensionScore, derive
from consensus_eval.execution import store as store_mod
from consensus_eval.execution.store import Store
from consensus_eval.execution.stored_run import StoredRun
from tests.big_run import big_cases, build_big_run
from tests.kinds_human_run import build_kinds_run


def _slow_ordinal_ci(data: np.ndarray, n_boot: int, seed: int) -> tuple[float, float] | None:
    """The interval as it was computed before: krippendorff_alpha on every resampled table."""
    arr = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    if arr.shape[1] < 2:
        return None
    picks = np.random.default_rng(seed).integers(0, arr.shape[1], (n_boot, arr.shape[1]))
    values = [a for p in picks if (a := krippendorff_alpha(arr[:, p], "ordinal").value) is not None]
    if len(values) < n_boot / 2:
        return None
    lo, hi = np.quantile(values, [(1 - 0.95) / 2, 1 - (1 - 0.95) / 2])
    return float(lo), float(hi)


@pytest.mark.parametrize("trial", range(12))
def test_the_ordinal_bootstrap_equals_alpha_of_every_resampled_table_to_the_bit(trial: int) -> None:
    rng = np.random.default_rng(trial)
    raters, units = int(rng.integers(2, 6)), int(rng.integers(3, 160))
    data = rng.integers(1, int(rng.integers(2, 7)), (raters, units)).astype(float)
    data[rng.random((raters, units)) < rng.random() * 0.5] = np.nan
    if trial == 0:
        data[:, :] = 3.0                 # no variation anywhere: every resample undefined
    if trial == 1:
        data[:, : units // 2] = 2.0      # many resamples of one value only
    assert bootstrap_ci(data, "ordinal", 120, seed=trial) == _slow_ordinal_ci(data, 120, trial)


def test_many_distinct_values_fall_back_to_resampling_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    data = rng.normal(size=(3, 60)).round(3)
    monkeypatch.setattr(alpha_mod, "MAX_PAIR_CELLS", 10)
    assert alpha_mod._unit_pairs(data) is None
    assert bootstrap_ci(data, "ordinal", 60, seed=1) == _slow_ordinal_ci(data, 60, 1)


def test_a_stars_figure_of_many_units_keeps_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # the pairs are counted per pattern of value counts (at most 126 for 4 ratings of 5 values), not per unit: per
    # unit, a stars figure of more than ~160,000 cases went the slow way (MAX_PAIR_CELLS lowered here to the same
    # effect at 400 units)
    rng = np.random.default_rng(7)
    data = rng.integers(1, 6, (4, 400)).astype(float)
    data[rng.random((4, 400)) < 0.1] = np.nan
    monkeypatch.setattr(alpha_mod, "MAX_PAIR_CELLS", 400 * 5 * 5 - 1)
    tables = alpha_mod._unit_pairs(data)
    assert tables is not None and len(tables.pattern_pairs) < 126
    assert bootstrap_ci(data, "ordinal", 80, seed=3) == _slow_ordinal_ci(data, 80, 3)
    monkeypatch.setattr(alpha_mod, "MAX_COUNT_CELLS", 400 * 5 - 1)   # the counts' own bound: the slow way
    assert alpha_mod._unit_pairs(data) is None
    assert bootstrap_ci(data, "ordinal", 80, seed=3) == _slow_ordinal_ci(data, 80, 3)


def test_category_means_equal_numpy_to_the_bit() -> None:
    r = random.Random(0)
    for _ in range(20_000):
        v = [r.choice([r.random() * 10, float(r.randrange(20)), r.randrange(40) / 4, 0.1 * r.randrange(100)])
             for _ in range(r.randrange(1, 12))]
        assert mean_or_none(v) == float(np.mean(v))
    assert mean_or_none([]) is None and mean_or_none(None) is None


def test_derived_scores_have_the_types_and_values_validation_gives() -> None:
    rubric = load_rubric("medical_record")
    r = random.Random(1)
    for dim in rubric.dimensions:
        for _ in range(200):
            cats = of_kind(dim, Deductions).categories
            deds = [Deduction(category=(c := r.choice(cats)).id, type=(t := r.choice(c.types)).id,
                              points=t.low, evidence="x") for _ in range(r.randrange(0, 5))]
            pens = [PenaltyHit(id=p.id) for p in of_kind(dim, Deductions).fixed_penalties if r.random() < 0.3]
            j = Judgment(dimension=dim.id, deductions=deds, fixed_penalties=pens,
                         claimed_score=r.choice([None, 30.0, 35]), claimed_stars=r.choice([None, 4]))
            s = derive(dim, j)
            # a plain read model: what validating its values against its declared types gives is itself
            validated = TypeAdapter(DimensionScore).validate_python(dataclasses.asdict(s))
            assert s == validated and type(s.score) is float and type(s.max) is float
            assert all(type(c.deducted) is float and type(c.taken) is float for c in s.categories)


def test_groundings_have_the_types_and_values_validation_gives() -> None:
    case = big_cases(3)[2]
    conv = case.conversation_as_text(load_rubric("medical_record").roles)
    g = CaseGrounder(case.record, conv)
    quotes = [case.record[5:12], case.record[20:24].upper(), "“" + case.record[30:36] + "”……“" + conv[3:9] + "”",
              case.record[40:52].replace(case.record[45], "某"), "编造的引文", "", "  "]
    for q in quotes:
        found = g.ground(q)
        # a plain read model: what validating its values against its declared types gives is itself
        validated = TypeAdapter(Grounding).validate_python(found.to_dict())
        assert found == validated and type(found.spans) is tuple
        assert found.score is None or type(found.score) is float
        assert all(type(s.start) is int and type(s.end) is int for s in found.spans)


def test_the_gc_pause_nests_restores_the_collector_and_freezes_only_when_asked() -> None:
    assert gc.isenabled()
    _gc.freeze_when_done(False)         # the Python API: never freezes a caller's objects
    before = gc.get_freeze_count()
    with _gc.gc_paused():
        with _gc.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()           # only the outermost block ends the pause
        made = [[i] for i in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() == before
    _gc.freeze_when_done(True)          # the command line: its process ends soon after
    try:
        with _gc.gc_paused():
            made = [[i] for i in range(1000)]
        assert gc.get_freeze_count() >= before + len(made)
    finally:
        _gc.freeze_when_done(False)
        gc.unfreeze()
    gc.disable()
    try:
        with _gc.gc_paused():
            pass
        assert not gc.isenabled()           # a collector the caller turned off stays off
    finally:
        gc.enable()



def test_a_rebuild_is_one_paused_block_the_collector_never_wakes_between_its_stages(tmp_path: Path) -> None:
    """api.rebuild reads, analyses and writes inside one paused block: the collector's automatic passes (which
    traverse everything the stages before made) do not run between its stages, only once it has ended. Counted
    with gc.callbacks, the public hook of every pass."""
    build_big_run(tmp_path, 40, 3)
    passes: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        api.rebuild(tmp_path, n_boot=20)
    finally:
        gc.callbacks.remove(count)
    # once the block ends, the next allocation may start one pass (the young generation holds all that the
    # rebuild made); stage by stage, each of the ~10 stages' ends started one or more
    assert len(passes) <= 2, passes


class _Counter:
    def __init__(self) -> None:
        self.n = 0


def _work_of_a_rebuild(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n_cases: int) -> dict[str, int]:
    """How many judgments were parsed, quotes searched, models validated in a rebuild of ``n_cases``."""
    src = build_big_run(tmp_path / f"src{n_cases}", n_cases, 2)
    folder = tmp_path / f"run{n_cases}"
    shutil.copytree(src, folder)
    counts = {"parsed": 0, "validated_judgments": 0, "searched": 0, "resamples": 0}
    parse, validate, search = vars(store_mod)["stored_judgment"], Judgment.model_validate_json, CaseGrounder._ground
    alpha = alpha_mod.krippendorff_alpha

    def counting(key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*a: Any, **k: Any) -> Any:
            counts[key] += 1
            return fn(*a, **k)
        return wrapped

    monkeypatch.setattr(store_mod, "stored_judgment", counting("parsed", parse))
    monkeypatch.setattr(Judgment, "model_validate_json", counting("validated_judgments", validate))
    monkeypatch.setattr(CaseGrounder, "_ground", counting("searched", search))
    monkeypatch.setattr(alpha_mod, "krippendorff_alpha", counting("resamples", alpha))
    api.rebuild(folder, n_boot=40)
    monkeypatch.undo()
    with Store.open_existing(folder, read_only=True) as store:
        calls = store.calls()
    counts["quotes"] = sum(len(c.judgment.deductions) + len(c.judgment.fixed_penalties)
                           for c in calls if c.judgment is not None)
    counts["calls"] = len(calls)
    return counts


def test_a_rebuilds_work_is_linear_in_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = _work_of_a_rebuild(tmp_path, monkeypatch, 24)
    large = _work_of_a_rebuild(tmp_path, monkeypatch, 72)
    # each stored judgment parsed once (into its plain read model, never validated again), each distinct quote
    # of a case searched once at most
    for c in (small, large):
        assert c["parsed"] == c["calls"] and c["validated_judgments"] == 0
        assert 0 < c["searched"] <= c["quotes"]
        # (scores and groundings are plain read models: nothing validated one by one)
    assert large["parsed"] == 3 * small["parsed"]
    assert 2.5 * small["searched"] <= large["searched"] <= 3.5 * small["searched"]
    assert large["resamples"] == small["resamples"]   # alpha computed a number of figures times, not of cases
    report = json.loads((tmp_path / "run72" / "reliability.json").read_text(encoding="utf-8"))
    assert report["n_cases"] == 72 and all(a["ci"] is not None for a in report["stars"].values())


def test_figures_sharing_their_resamples_get_the_intervals_they_got_alone() -> None:
    rng = np.random.default_rng(9)
    tables = [rng.integers(0, 6, (3, 80)).astype(float) for _ in range(3)]
    tables.append(rng.normal(size=(3, 80)))
    alone = [bootstrap_ci(t, level, 50, seed=4) for t in tables for level in ("interval", "ordinal")]
    with alpha_mod.shared_draws():
        shared = [bootstrap_ci(t, level, 50, seed=4) for t in tables for level in ("interval", "ordinal")]
        assert alpha_mod._draws                       # drawn once, kept for the next figure
    assert shared == alone and alpha_mod._draws is None


def test_figures_with_the_same_numbers_of_ratings_share_that_product() -> None:
    rng = np.random.default_rng(12)
    tables = [rng.normal(size=(3, 90)) for _ in range(3)]
    for t in tables:
        t[1, ::7] = np.nan          # the same units rated twice, not three times, in every table
    alone = [bootstrap_ci(t, "interval", 40, seed=2) for t in tables]
    with alpha_mod.shared_draws():
        shared = [bootstrap_ci(t, "interval", 40, seed=2) for t in tables]
        products = alpha_mod._products
        assert products is not None and len(products) == 1 + 3 * 3    # the counts' product once, not three times
    assert shared == alone and None not in alone and alpha_mod._products is None


@pytest.mark.parametrize("trial", range(6))
def test_distinct_rows_are_numpy_uniques_rows(trial: int) -> None:
    rng = np.random.default_rng(trial)
    rows = rng.integers(0, 3, (int(rng.integers(1, 400)), int(rng.integers(1, 6)))).astype(float)
    distinct, inverse = alpha_mod._distinct_rows(rows)
    expected = np.unique(rows, axis=0)
    assert len(distinct) == len(expected) and {r.tobytes() for r in distinct} == {r.tobytes() for r in expected}
    assert np.array_equal(distinct[inverse], rows)


def test_chunked_figures_in_one_pass_get_the_intervals_they_got_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # 50 resamples x 80 units: too large to hold as floats here (32,000 bytes): the chunked bootstrap
    monkeypatch.setattr(alpha_mod, "MAX_WEIGHTS_BYTES", 50 * 80)
    rng = np.random.default_rng(11)
    tables = [rng.integers(0, 6, (3, 80)).astype(float), rng.normal(size=(3, 80)), rng.normal(size=(4, 80)),
              rng.normal(size=(3, 90)), rng.integers(1, 6, (3, 80)).astype(float), np.ones((3, 80))]
    levels: list[Level] = ["interval", "interval", "interval", "interval", "ordinal", "interval"]
    tables[1][0, ::5] = np.nan     # other numbers of ratings: other statistics, the same resamples
    alone = [alpha_with_ci(t, level, 50, seed=4) for t, level in zip(tables, levels, strict=True)]
    drawn: list[int] = []
    picks = alpha_mod._picks

    def counted(seed: int, n_boot: int, n_units: int) -> Iterator[np.ndarray]:
        drawn.append(n_units)
        return picks(seed, n_boot, n_units)

    monkeypatch.setattr(alpha_mod, "_picks", counted)
    with alpha_mod.shared_draws():
        joint = JointBootstrap(50, seed=4)
        together = [joint.alpha(t, level) for t, level in zip(tables, levels, strict=True)]
        assert drawn == [] and all(a.ci is None for a in together)      # every bootstrap waits
        joint.finish()
    # one pass per number of units (80: three interval figures and the ordinal one; 90: one), each figure's
    # interval as it got alone
    assert drawn == [80, 90] and alpha_mod._draws is None
    assert [a.model_dump() for a in together] == [a.model_dump() for a in alone]
    assert all(a.ci is not None for a in alone[:5]) and alone[5].value is None


@pytest.mark.parametrize(("n_boot", "n_units"), [(1000, 20_000), (65, 7), (3, 1), (130, 70_000), (200, 301)])
def test_resamples_drawn_in_chunks_are_the_one_draw_of_the_whole_matrix(n_boot: int, n_units: int) -> None:
    # np.random.Generator.integers draws in sequence: chunk after chunk from one generator is the same numbers
    whole = np.random.default_rng(7).integers(0, n_units, (n_boot, n_units))
    chunks = list(alpha_mod._picks(7, n_boot, n_units))
    assert len(chunks) == -(-n_boot // alpha_mod.BOOT_CHUNK) and np.array_equal(np.concatenate(chunks), whole)


def test_weights_count_each_resamples_draws() -> None:
    counts = np.zeros((203, 333))
    for b, row in enumerate(np.random.default_rng(3).integers(0, 333, (203, 333))):
        np.add.at(counts[b], row, 1)
    assert np.array_equal(alpha_mod._weights(3, 203, 333), counts)


def test_category_matrices_are_the_means_of_points_taken(tmp_path: Path) -> None:
    with Store.open_existing(build_big_run(tmp_path / "big", 30, 3), read_only=True) as store:
        run = read_run(store)
    # a second run of every third call, scored as another call was, and calls of a judge and a case not in the
    # panel's consensus: cells of two values, and records to leave out
    others = list(run.scores.values())
    extra = [dataclasses.replace(r, request_hash=f"{r.request_hash}#2", run=1) for r in run.records[::3]]
    strays = [dataclasses.replace(run.records[0], request_hash="stray-judge", judge="nobody"),
              dataclasses.replace(run.records[1], request_hash="stray-case", case_id="nowhere")]
    scores = {**run.scores, **{r.request_hash: others[(i * 7) % len(others)] for i, r in enumerate(extra + strays)}}
    run = dataclasses.replace(run, records=run.records + extra + strays, scores=scores)
    cons = of_run(dataclasses.replace(run, records=run.records[:-2]))
    slow = points_taken(run)
    fast = reliability_mod._points_taken(run, cons)
    cats = [cat.id for d in run.rubric.dimensions for cat in of_kind(d, Deductions).categories] + ["no-such-category"]
    for cat in cats:
        want = matrix([[mean_or_none(slow.get((c.case_id, j, cat))) for c in cons] for j in run.judges])
        assert np.array_equal(fast(cat), want, equal_nan=True)
    assert sum(len(v) == 2 for v in slow.values()) > 50 and any((~np.isnan(fast(c))).any() for c in cats)


def _nesting(v: object) -> int:
    """How many dicts and lists deep ``v`` goes, the plain recursive way."""
    if isinstance(v, dict):
        return 1 + max((_nesting(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((_nesting(x) for x in v), default=0)
    return 0


def test_json_depth_is_the_nesting_of_dicts_and_lists() -> None:
    r = random.Random(3)

    def value(k: int) -> object:
        if k == 0 or r.random() < 0.2:
            return r.choice([1, "x", None, [], {}, 2.5])
        if r.random() < 0.5:
            return [value(k - 1) for _ in range(r.randrange(4))]
        return {str(i): value(k - 1) for i in range(r.randrange(4))}

    deep: object = 1
    for i in range(textio.MAX_DEPTH + 5):
        deep = [deep] if i % 2 else {"k": deep, "s": "x"}
    for v in [value(r.randrange(12)) for _ in range(300)] + [0, [], {}, [[[]]], deep]:
        want = _nesting(v)
        got = textio._depth(v)
        assert got == want if want <= textio.MAX_DEPTH else got == textio.MAX_DEPTH + 1


def _audited(folder: Path) -> tuple[StoredRun, list[CaseAudit]]:
    with Store.open_existing(folder, read_only=True) as store:
        run = read_run(store)
    return run, audit(run, of_run(run))


@pytest.mark.parametrize("kind", ["deductions", "likert", "criteria"])
def test_audit_rows_are_plain_read_models_with_the_types_validation_gives(tmp_path: Path, kind: str) -> None:
    folder = (build_big_run(tmp_path / "run", 12, 2) if kind == "deductions"
              else build_kinds_run(tmp_path / "run", kind, 12, 2))
    run, audits = _audited(folder)
    rows: list[object] = [x for a in audits for dim in a.dimensions for v in dim.judges
            for x in (a, dim, v, *v.deductions, *v.ratings, *v.verdicts, *a.reasons, *dim.criteria)]
    groups = [g for a in audits for d in a.dimensions for v in d.judges for g in v.drill_down()]
    if kind == "deductions":
        made = [d for r in run.records for d in deductions_of(run.rubric, r, run.grounding)]
        assert any(d.kind == "penalty" for d in made) and any(d.kind == "deduction" for d in made)
        assert any(it.occurrences for g in groups for it in g.items)
        rows += [*made, *groups, *(it for g in groups for it in g.items)]
    else:
        assert any(v.ratings or v.verdicts for a in audits for dim in a.dimensions for v in dim.judges)
    assert any(a.reasons for a in audits)
    # slotted: no per-object __dict__
    assert rows and all(dataclasses.is_dataclass(x) and not hasattr(x, "__dict__") for x in rows)
    # what validating their values against the declared types gives is themselves, down to int against float
    # (repr tells 2 from 2.0), as the pydantic models they were gave
    for a in audits:
        twin = TypeAdapter(CaseAudit).validate_python(dataclasses.asdict(a))
        assert twin == a and repr(twin) == repr(a)
    for g in groups:
        twin_g = TypeAdapter(RunGroup).validate_python(dataclasses.asdict(g))
        assert twin_g == g and repr(twin_g) == repr(g)
    queue = review_queue(audits, len(run.judges))
    assert queue.cases == audits and queue.n_cases == len(audits)


def test_dumps_json_writes_null_for_what_is_not_finite_and_the_same_bytes_either_way() -> None:
    from consensus_eval.domain.writable import dumps_json, finite

    fine = {"a": [1.5, (2, 3.25)], "b": {"c": None, "d": "文"}}
    assert dumps_json(fine, ensure_ascii=False) == json.dumps(finite(fine), allow_nan=False, ensure_ascii=False)
    bad = {"a": [1.5, float("nan")], "b": {"c": float("inf"), "d": (float("-inf"), 2.0)}}
    assert json.loads(dumps_json(bad)) == {"a": [1.5, None], "b": {"c": None, "d": [None, 2.0]}}
