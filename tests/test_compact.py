"""A rebuild's memory savings (issue 16, section 5; consensus_eval/execution/compact.py and the streaming
report): each one gives the same values, the same bytes in every output, and what it shares is shared."""

from __future__ import annotations

import base64
import gzip
import inspect
import json
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from consensus_eval import api
from consensus_eval.analysis import alpha as alpha_mod, audit as audit_mod, consensus as consensus_mod
from consensus_eval.analysis.audit import AuditDeduction, CaseAudit, DimensionAudit, JudgeView, deductions_of
from consensus_eval.analysis.consensus import CaseConsensus, JudgeScore
from consensus_eval.domain.cases import Case, Turn
from consensus_eval.domain.construct import all_fields, construct, shared_copy
from consensus_eval.domain.grounding import Grounding, Span
from consensus_eval.domain.judgment import Deduction, Judgment, PenaltyHit
from consensus_eval.domain.scoring import CategoryScore, DimensionScore, derive
from consensus_eval.execution import compact, results as results_mod, store as store_mod
from consensus_eval.execution.results import Deriver, read_run
from consensus_eval.execution.store import CallRecord, Store
from consensus_eval.output.report import drill as drill_mod
from consensus_eval.output.report.data import build_report_data
from consensus_eval.output.report.html import html_pieces, render_html
from tests.big_run import build_big_run

OUTPUTS = ["judgments.jsonl", "consensus.csv", "consensus.jsonl", "reliability.json", "report.md", "report.html"]


def _score(**kw: object) -> CategoryScore:
    return CategoryScore(**{"id": "c", "name": "n", "cap": 5.0, "deducted": 1.0, "taken": 1.0, "n": 1, **kw})


def test_only_a_set_naming_every_field_is_shared_and_assigning_changes_no_other_object():
    a, b = shared_copy(_score()), shared_copy(_score(n=2))
    assert a.model_fields_set is b.model_fields_set is all_fields(CategoryScore)
    before = a.model_dump(exclude_unset=True)
    b.taken = 2.0                                   # pydantic adds the name to the (shared) set: nothing new
    assert all_fields(CategoryScore) == set(CategoryScore.model_fields)
    assert a.model_fields_set == set(CategoryScore.model_fields) and a.model_dump(exclude_unset=True) == before
    partial = JudgeScore(judge="j", dimension="d", runs=[], failed_runs=0, mean=None, spread=None, stars=None,
                         claim_mismatches=0)         # ``asked`` left to its default: not every field set
    own = partial.model_fields_set
    kept = shared_copy(partial).model_fields_set
    assert kept == own and kept is not all_fields(JudgeScore) and "asked" not in partial.model_fields_set
    partial.asked = False
    assert "asked" not in all_fields(JudgeScore) - {"asked"} and all_fields(JudgeScore) == set(JudgeScore.model_fields)


def test_construct_equals_model_construct_and_the_validated_twin():
    values = {"judge": "a", "run": 0, "dimension": "accuracy", "kind": "deduction", "category_id": "c",
              "category": "C", "type_id": "t", "type": "T", "points": 2.0, "evidence": "e", "reason": "r",
              "match": "no_peer", "matched_by": [], "id": "h#d0", "grounding": None,
              "copy_of": None}
    made = construct(AuditDeduction, **values)
    assert made == AuditDeduction.model_construct(**values) == AuditDeduction.model_validate(values)
    assert made.model_dump_json() == AuditDeduction.model_validate(values).model_dump_json()
    assert made.model_fields_set == set(values) and list(made.__dict__) == list(AuditDeduction.model_fields)
    with pytest.raises(TypeError, match="missing \\['run'\\]"):
        construct(AuditDeduction, **{k: v for k, v in values.items() if k != "run"})
    with pytest.raises(TypeError, match="unknown \\['colour'\\]"):
        construct(AuditDeduction, **values, colour="red")


def test_calls_read_back_compact_equal_to_their_validated_twins_and_without_replies_on_request(tmp_path):
    folder = build_big_run(tmp_path / "run", 6, 2)
    with Store.open_existing(folder, read_only=True) as store:
        full, lean = store.calls(), store.calls(replies=False)
    assert full and all(r.raw for r in full) and all(r.raw is None for r in lean)
    for r, s in zip(full, lean, strict=True):
        twin = CallRecord.model_validate(r.model_dump())
        assert r == twin and r.model_dump_json() == twin.model_dump_json()
        assert s == r.model_copy(update={"raw": None})
        assert r.model_fields_set is all_fields(CallRecord)
        assert r.judgment is not None and r.judgment.model_fields_set is all_fields(Judgment)
        assert all(d.model_fields_set is all_fields(Deduction) for d in r.judgment.deductions)
        assert all(p.model_fields_set is all_fields(PenaltyHit) for p in r.judgment.fixed_penalties)
    by_case: dict[str, set[int]] = {}
    for r in full:
        by_case.setdefault(r.case_id, set()).add(id(r.case_id))
    assert all(len(ids) == 1 for ids in by_case.values())     # one string object per case id


def test_the_deriver_gives_what_derive_gives_to_the_bit_and_shares_equal_scores(tmp_path):
    folder = build_big_run(tmp_path / "run", 30, 3)
    with Store.open_existing(folder, read_only=True) as store:
        run = read_run(store)
    rubric = run.rubric
    ok = [r for r in run.records if r.judgment is not None]
    for r in ok:
        alone = derive(rubric.dimension(r.dimension), r.judgment)
        assert run.scores[r.request_hash] == alone
        assert run.scores[r.request_hash].model_dump_json() == alone.model_dump_json()
    inputs = {(r.dimension, tuple((d.category, d.type, d.points) for d in r.judgment.deductions),
               tuple(p.id for p in r.judgment.fixed_penalties), r.judgment.claimed_score, r.judgment.claimed_stars)
              for r in ok if r.judgment is not None}
    assert len({id(s) for s in run.scores.values()}) == len(inputs) < len(ok)   # one object per distinct input
    cats = [c for s in run.scores.values() for c in s.categories]
    assert len({id(c) for c in cats}) < len(cats) / 10
    # judgments with claims, penalties listed twice, the same deductions in another order
    deriver = Deriver(rubric)
    r = random.Random(2)
    for _ in range(3000):
        dim = r.choice(rubric.dimensions)
        deds = [Deduction(category=(c := r.choice(dim.categories)).id, type=(t := r.choice(c.types)).id,
                          points=t.low) for _ in range(r.randrange(0, 4))]
        pens = [PenaltyHit(id=p.id) for p in dim.fixed_penalties for _ in range(r.randrange(0, 3))]
        j = Judgment(dimension=dim.id, deductions=deds, fixed_penalties=pens,
                     claimed_score=r.choice([None, 30.0, 35, 40]), claimed_stars=r.choice([None, 3, 4, 5]))
        got, alone = deriver(dim.id, j), derive(dim, j)
        assert got == alone and got.model_dump_json() == alone.model_dump_json()
    # values == cannot tell apart are not shared: a claimed 0.0 and -0.0 dump differently
    zero, minus = (deriver("accuracy", Judgment(dimension="accuracy", claimed_score=x)) for x in (0.0, -0.0))
    assert zero is not minus and zero.model_dump_json() != minus.model_dump_json()
    with pytest.raises(ValueError, match="no deduction type"):
        deriver("accuracy", Judgment.model_construct(dimension="accuracy", fixed_penalties=[], claimed_score=None,
                                                     claimed_stars=None, comment="",
                                                     deductions=[Deduction(category="x", type="nope", points=1)]))


def _every_model(results: api.Results) -> dict[type, list[object]]:
    out: dict[type, list[object]] = {}

    def add(*objs: object) -> None:
        for o in objs:
            out.setdefault(type(o), []).append(o)

    for case in results.cases:
        add(case, *(case.conversation if isinstance(case.conversation, list) else []))
    for r in results.records:
        add(r)
        if r.judgment is not None:
            add(r.judgment, *r.judgment.deductions, *r.judgment.fixed_penalties)
    for s in results.scores.values():
        add(s, *s.categories)
    for g in results.run.grounding.values():
        add(g, *g.spans)
    for c in results.consensus:
        add(c, *(js for by_dim in c.judges.values() for js in by_dim.values()))
    for a in results.audit:
        add(a)
        for dim in a.dimensions:
            add(dim)
            for v in dim.judges:
                add(v, *v.deductions)
    return out


def test_every_object_a_rebuild_holds_by_the_hundred_shares_its_classs_fields_set(tmp_path):
    folder = build_big_run(tmp_path / "run", 24, 3)
    results = api.rebuild(folder, n_boot=20)
    held = _every_model(results)
    for cls in (Case, Turn, CallRecord, Judgment, Deduction, PenaltyHit, DimensionScore, CategoryScore, Grounding,
                Span, CaseConsensus, JudgeScore, CaseAudit, DimensionAudit, JudgeView, AuditDeduction):
        assert held.get(cls), cls
        assert {id(o.model_fields_set) for o in held[cls]} == {id(all_fields(cls))}, cls  # type: ignore[attr-defined]
    assert all(r.raw is None for r in results.records)          # a rebuild does not read the replies back


def _outputs(folder: Path) -> dict[str, bytes]:
    return {n: re.sub(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC", b"<TS>", (folder / n).read_bytes()) for n in OUTPUTS}


@pytest.mark.parametrize("policy", ["flag", "drop"])
def test_a_rebuild_writes_the_same_bytes_as_without_any_saving(tmp_path, monkeypatch, policy):
    src = build_big_run(tmp_path / "src", 40, 3)
    if policy == "drop":
        with Store(src / "results.sqlite") as store:
            store.set_meta("config", {**store.get_meta("config"), "ungrounded": "drop"})
    lean, plain = tmp_path / "lean" / "run", tmp_path / "plain" / "run"
    shutil.copytree(src, lean)
    shutil.copytree(src, plain)
    api.rebuild(lean, n_boot=50)
    # every saving off: fields sets of their own, replies read, each score derived for its call, the
    # payloads built as a list
    same = lambda obj, *_, **__: obj  # noqa: E731
    for mod in (compact, results_mod, audit_mod, consensus_mod):
        if hasattr(mod, "shared_copy"):
            monkeypatch.setattr(mod, "shared_copy", same)
    monkeypatch.setattr(store_mod, "compact_record", same)
    monkeypatch.setattr(audit_mod, "construct", lambda cls, **kw: cls.model_construct(**kw))
    monkeypatch.setattr(Deriver, "__call__", lambda self, dim, j, case_id=None: derive(self.rubric.dimension(dim), j))
    monkeypatch.setattr(api, "read_run", lambda store, **_: read_run(store, replies=True))
    api.rebuild(plain, n_boot=50)
    assert _outputs(lean) == _outputs(plain)


def test_payloads_are_packed_as_they_come_one_chunk_at_a_time(tmp_path, monkeypatch):
    folder = build_big_run(tmp_path / "run", 60, 2)
    results = api.load_run(folder, n_boot=0)
    data = build_report_data(results, folder)
    payloads = list(data.drill_payloads())
    assert len(payloads) == 60 and inspect.isgenerator(data.drill_payloads())   # made as they are read
    made = [0]
    seen_at_compress: list[int] = []

    def counted():
        for p in payloads:
            made[0] += 1
            yield p

    real = json.dumps
    monkeypatch.setattr(drill_mod.json, "dumps", lambda *a, **k: (seen_at_compress.append(made[0]),
                                                                  real(*a, **k))[1])
    lazily = drill_mod.pack(counted())
    monkeypatch.undo()
    assert seen_at_compress == [25, 50, 60]                   # a chunk is closed as soon as it is full
    assert lazily == drill_mod.pack(payloads)
    one_by_one = [base64.b64encode(gzip.compress(real(payloads[k:k + 25], ensure_ascii=False, separators=(",", ":"))
                                                 .encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")
                  for k in range(0, 60, 25)]
    assert lazily[1] == one_by_one and lazily[0] == {p["id"]: k // 25 for k, p in enumerate(payloads)}


def test_the_page_written_piece_by_piece_is_the_page_rendered_whole(tmp_path):
    folder = build_big_run(tmp_path / "run", 30, 2)
    results = api.rebuild(folder, n_boot=20)
    data = build_report_data(results, folder)
    whole = render_html(data)
    assert "".join(html_pieces(data)) == whole
    written = (folder / "report.html").read_text(encoding="utf-8")
    strip = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC")
    assert strip.sub("", written) == strip.sub("", whole)


def test_resample_weights_counted_in_blocks_equal_the_whole_count():
    rng = np.random.default_rng(3)
    for n_boot, n_units in ((1, 5), (63, 40), (64, 7), (130, 300), (1000, 50)):
        picks = rng.integers(0, n_units, (n_boot, n_units))
        flat = (picks + (np.arange(n_boot) * n_units)[:, None]).ravel()
        whole = np.bincount(flat, minlength=n_boot * n_units).reshape(n_boot, n_units).astype(float)
        for p in (picks, picks.astype(np.int32)):
            got = alpha_mod._weights(p)
            assert got.dtype == np.float64 and np.array_equal(got, whole)


def test_deductions_of_a_call_are_built_with_the_shared_set(tmp_path):
    folder = build_big_run(tmp_path / "run", 8, 2)
    with Store.open_existing(folder, read_only=True) as store:
        run = read_run(store)
    made = [d for r in run.records for d in deductions_of(run.rubric, r, run.grounding)]
    assert made and all(d.model_fields_set is all_fields(AuditDeduction) for d in made)
    assert all(d.grounding is run.grounding[d.id] for d in made)


def test_load_run_without_replies_differs_only_by_them(tmp_path):
    folder = build_big_run(tmp_path / "run", 6, 2)
    full, lean = api.load_run(folder, n_boot=0), api.load_run(folder, n_boot=0, replies=False)
    assert all(r.raw for r in full.records) and all(r.raw is None for r in lean.records)
    assert [r.model_copy(update={"raw": None}) for r in full.records] == lean.records
    assert full.scores == lean.scores and full.consensus == lean.consensus and full.audit == lean.audit
