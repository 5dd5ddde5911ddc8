"""Adaptive runs and cascades (docs/judges.md): the stopping rule on hand-built runs, the plan that
grows in rounds, resume after an interrupt, the dry run's range, and a cascade's "not asked" judges."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from consensus_eval import InputError, api
from consensus_eval.analysis.results import Results
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.adaptive import JudgeRuns, decide
from consensus_eval.execution.execute import Progress
from consensus_eval.execution.store import STORE_NAME, Store
from tests.fake_server import FakeConfig, FakeServer
from tests.helpers import as_stored, write_cases

DIMS = ("accuracy", "completeness", "standardization")
PANEL = {"judges": [{"name": "a", "model": "openai/x"}, {"name": "b", "model": "openai/y"}],
         "important_runs": "adaptive", "adaptive": {"max_runs": 3, "run_spread": 3, "run_star_gap": None},
         "consensus": {"flag_spread": 10, "flag_star_gap": 2}}


def cfg(**over: object) -> EvalConfig:
    return EvalConfig.model_validate({**PANEL, **over})


def runs(**by_judge: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]) -> dict[str, dict[str, JudgeRuns]]:
    """judge -> its runs' scores per dimension (accuracy, completeness, standardization); planned = len."""
    return {j: {d: JudgeRuns(len(s), s) for d, s in zip(DIMS, per_dim, strict=True)}
            for j, per_dim in by_judge.items()}


STAGES = {"a": 1, "b": 1}


def test_one_run_each_and_the_panel_agrees_stops(rubric: Rubric) -> None:
    state = runs(a=((36,), (30,), (22,)), b=((34,), (29,), (22,)))  # totals 88 vs 85: 3 apart, stars close
    assert decide(state, rubric, cfg(), adaptive=True, stage=STAGES) == []


def test_panel_spread_above_flag_spread_asks_every_judge_every_dimension(rubric: Rubric) -> None:
    state = runs(a=((38,), (33,), (22,)), b=((30,), (30,), (21,)))  # totals 93 vs 81: 12 > 10
    adds = decide(state, rubric, cfg(), adaptive=True, stage=STAGES)
    assert {(x.judge, x.dimension, x.run, x.why) for x in adds} == {(j, d, 1, "panel") for j in "ab" for d in DIMS}


def test_a_star_gap_of_the_panel_asks_only_that_dimension(rubric: Rubric) -> None:
    # totals 74 vs 83 (9 apart); standardization 10 (2 stars) vs 20 (4 stars): a gap of 2
    state = runs(a=((34,), (30,), (10,)), b=((33,), (30,), (20,)))
    adds = decide(state, rubric, cfg(), adaptive=True, stage=STAGES)
    assert {(x.judge, x.dimension) for x in adds} == {("a", "standardization"), ("b", "standardization")}


def test_own_runs_disagreeing_get_another_run_until_max_runs(rubric: Rubric) -> None:
    # panel agrees; judge a's accuracy runs 36 and 31 are 5 > run_spread 3 apart: run 2
    state = runs(a=((36, 31), (30, 30), (22, 22)), b=((34, 34), (29, 29), (22, 22)))
    adds = decide(state, rubric, cfg(), adaptive=True, stage=STAGES)
    assert [(x.judge, x.dimension, x.run, x.why) for x in adds] == [("a", "accuracy", 2, "own")]
    # at max_runs (3) nothing more, however much they disagree
    state = runs(a=((36, 31, 20), (30, 30, 30), (22, 22, 22)), b=((34, 34), (29, 29), (22, 22)))
    assert decide(state, rubric, cfg(), adaptive=True, stage=STAGES) == []
    # within run_spread: stop
    state = runs(a=((36, 34), (30, 30), (22, 22)), b=((34, 34), (29, 29), (22, 22)))
    assert decide(state, rubric, cfg(), adaptive=True, stage=STAGES) == []


def test_star_disagreement_of_own_runs_counts_when_configured(rubric: Rubric) -> None:
    # 31.5 (3 stars) and 32.5 (4 stars) are 1 point apart, within run_spread, but a star apart
    state = runs(a=((31.5, 32.5), (30, 30), (22, 22)), b=((32, 32), (29, 29), (22, 22)))
    assert decide(state, rubric, cfg(), adaptive=True, stage=STAGES) == []
    star = cfg(adaptive={"max_runs": 3, "run_spread": 3, "run_star_gap": 1})
    assert [(x.judge, x.dimension) for x in decide(state, rubric, star, adaptive=True, stage=STAGES)] == [
        ("a", "accuracy")]


def test_failed_judges_deterministic_judges_and_fixed_cases_get_no_more_runs(rubric: Rubric) -> None:
    # the panel disagrees on accuracy (5 vs 3 stars) and completeness (5 vs 3 stars)
    state = runs(a=((38,), (35,), (22,)), b=((30,), (24,), (21,)))
    state["b"]["accuracy"] = JudgeRuns(1, ())  # b's accuracy call failed: no total, no spread; no retry here
    adds = decide(state, rubric, cfg(), adaptive=True, stage=STAGES, deterministic=frozenset({"a"}))
    assert {(x.judge, x.dimension) for x in adds} == {("b", "completeness")}
    assert decide(state, rubric, cfg(), adaptive=False, stage=STAGES) == []


CASCADE = {**PANEL, "judges": [*PANEL["judges"], {"name": "big", "model": "openai/z", "stage": 2}]}


def test_cascade_asks_stage_2_only_when_stage_1_flags_or_cannot_settle(rubric: Rubric) -> None:
    c = EvalConfig.model_validate({**CASCADE, "important_runs": 1})
    stages = {"a": 1, "b": 1, "big": 2}
    agree = runs(a=((36,), (30,), (22,)), b=((34,), (29,), (22,)))
    assert decide(agree, rubric, c, adaptive=False, stage=stages, first={"big": 1}) == []
    disagree = runs(a=((38,), (33,), (22,)), b=((30,), (30,), (21,)))
    adds = decide(disagree, rubric, c, adaptive=False, stage=stages, first={"big": 1})
    assert {(x.judge, x.dimension, x.run, x.why) for x in adds} == {("big", d, 0, "cascade") for d in DIMS}
    # a quorum of 2 that stage 1 misses on one dimension (b failed it) escalates too
    q = EvalConfig.model_validate({**CASCADE, "important_runs": 1, "consensus": {"min_judges": 2}})
    agree["b"]["standardization"] = JudgeRuns(1, ())
    assert {x.judge for x in decide(agree, rubric, q, adaptive=False, stage=stages)} == {"big"}
    # once asked, stage 2 is not asked again
    asked = {**disagree, **runs(big=((34,), (30,), (22,)))}
    assert decide(asked, rubric, c, adaptive=False, stage=stages) == []


def test_adaptive_stage_1_settles_before_stage_2_is_asked(rubric: Rubric) -> None:
    c = EvalConfig.model_validate(CASCADE)
    stages = {"a": 1, "b": 1, "big": 2}
    disagree = runs(a=((38,), (33,), (22,)), b=((30,), (30,), (21,)))
    assert {x.why for x in decide(disagree, rubric, c, adaptive=True, stage=stages)} == {"panel"}
    at_max = runs(a=((38,) * 3, (33,) * 3, (22,) * 3), b=((30,) * 3, (30,) * 3, (21,) * 3))
    assert {x.why for x in decide(at_max, rubric, c, adaptive=True, stage=stages)} == {"cascade"}


@pytest.mark.parametrize("over, match", [
    ({"runs": "sometimes"}, "runs"),
    ({"runs": 0}, "greater than or equal to 1"),
    ({"adaptive": {"min_runs": 4, "max_runs": 3}}, "min_runs"),
    ({"judges": [{"name": "a", "model": "openai/x", "stage": 2}]}, "stage-1"),
    ({"judges": CASCADE["judges"], "consensus": {"min_judges": 3}}, "stage-1 judge"),
])
def test_config_errors(over: dict[str, Any], match: str) -> None:
    with pytest.raises(InputError, match=match):
        api.prepare([], {**PANEL, **over}, check_keys=False)


# --------------------------------------------------------------------------- end to end on the fake server

def write_config(path: Path, url: str, *, cascade: bool = False) -> Path:
    judge = """\
  - name: {name}
    model: openai/{model}
    api_base: {url}/v1
    concurrency: 4
    timeout_s: 5
    input_cost_per_token: 0.000001
    output_cost_per_token: 0.000002
"""
    judges = judge.format(name="judge-a", model="fake-a", url=url) + judge.format(
        name="judge-b", model="fake-strict", url=url)
    if cascade:
        judges += judge.format(name="judge-c", model="fake-lenient", url=url) + "    stage: 2\n"
    path.write_text(f"""\
rubric: medical_record
runs: adaptive
adaptive: {{max_runs: 3, run_spread: 4, run_star_gap: null}}
consensus: {{flag_spread: 6, flag_star_gap: 2}}
judges:
{judges}""", encoding="utf-8")
    return path


def _plan(out: Path) -> list[tuple[str, str, str, int, str]]:
    with Store.open_existing(out, read_only=True) as s:
        return sorted((p.case_id, p.dimension, p.judge, p.run, p.request_hash) for p in s.plan())


def test_dry_run_is_a_range_from_one_run_to_max_runs(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", n=4)
    prep = api.prepare(cases, write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", cascade=True))
    est = {e.judge: e for e in api.dry_run(prep)}
    for j in ("judge-a", "judge-b"):
        e = est[j]
        assert e.calls == 4 * 3 and e.upper is not None and e.upper.calls == 4 * 3 * 3
        assert e.upper.cost is not None and e.cost is not None and e.upper.cost > e.cost
    assert est["judge-c"].calls == 0 and est["judge-c"].upper is not None and est["judge-c"].upper.calls == 4 * 3 * 3


def test_adaptive_run_grows_in_rounds_and_resumes_to_the_same_plan(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", n=6)

    async def go(out: Path, stop_after: int | None, url: str) -> Results:
        stop = asyncio.Event()

        def hook(p: Progress) -> None:
            if stop_after is not None and p.done >= stop_after:
                stop.set()

        prep = api.prepare(cases, write_config(tmp_path / "c.yaml", url))
        return await api.run_async(prep, out, hook, n_boot=0, stop=stop)

    with FakeServer(FakeConfig(seed=7, latency_ms=5.0, max_lifetime_s=600)) as srv:
        whole = asyncio.run(go(tmp_path / "whole", None, srv.url))
        n_whole = len(srv.log)
        assert whole.progress is not None and not whole.progress.interrupted
        first_round = 6 * 3 * 2
        planned = _plan(tmp_path / "whole")
        # it grew (the judges disagree on some cases), but not to the fixed 3-run plan
        assert first_round < len(planned) < 3 * first_round and whole.progress.rounds >= 2
        assert whole.progress.done == len(planned)
        # every added run follows the rule: a run k > 0 exists only where run k - 1 does
        keys = {(c, d, j, r) for c, d, j, r, _ in planned}
        assert all((c, d, j, r - 1) in keys for c, d, j, r in keys if r > 0)

        # interrupted after the first round, then resumed: the same plan, no stored call made again
        cut = asyncio.run(go(tmp_path / "cut", first_round + 3, srv.url))
        assert cut.progress is not None and cut.progress.interrupted
        assert any(c.status == "incomplete" for c in cut.consensus)
        stored_before = Store(tmp_path / "cut" / STORE_NAME).done_hashes()
        resumed = asyncio.run(go(tmp_path / "cut", None, srv.url))
        assert resumed.progress is not None and not resumed.progress.interrupted
        assert _plan(tmp_path / "cut") == planned
        assert resumed.progress.skipped == len(stored_before)
        assert resumed.progress.done == len(planned) - len(stored_before)
        assert len(srv.log) >= n_whole  # the server answered both runs
    assert [c.status for c in resumed.consensus] == [c.status for c in whole.consensus]
    assert [c.total for c in resumed.consensus] == [c.total for c in whole.consensus]
    # a fixed plan's run k has the same request hash: an adaptive plan is a subset of the 3-run plan
    fixed = api.prepare(cases, EvalConfig.model_validate({**api.prepare(
        cases, write_config(tmp_path / "c.yaml", srv.url)).config.to_json(), "runs": 3}))
    assert {h for *_, h in planned} <= {c.planned.request_hash for c in fixed.calls}


def test_cascade_sends_stage_2_only_the_flagged_cases_and_says_so(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", n=8)
    with FakeServer(FakeConfig(seed=11, latency_ms=5.0, max_lifetime_s=600)) as srv:
        prep = api.prepare(cases, write_config(tmp_path / "c.yaml", srv.url, cascade=True))
        results = api.run(prep, tmp_path / "out", n_boot=0)
    planned = _plan(tmp_path / "out")
    asked_c = {c for c, _, j, _, _ in planned if j == "judge-c"}
    assert 0 < len(asked_c) < 8, "the seed should give some flagged and some settled cases"
    by_id = {c.case_id: c for c in results.consensus}
    for cid, c in by_id.items():
        assert c.status == "ok"
        if cid in asked_c:
            assert "judge-c" not in c.not_asked and c.judges["judge-c"]["accuracy"].runs
        else:
            assert c.not_asked == ["judge-c"]
            assert not c.judges["judge-c"]["accuracy"].asked and c.judges["judge-c"]["accuracy"].failed_runs == 0
            assert "judge-c" not in c.judge_totals
    # stage 2 was asked only cases stage 1 left flagged at max_runs or could not settle
    for cid in asked_c:
        stage1 = [(j, r) for c, _, j, r, _ in planned if c == cid and j != "judge-c"]
        assert max(r for _, r in stage1) == 2
    from io import StringIO

    from rich.console import Console

    from consensus_eval.output.console import print_summary

    buf = StringIO()
    print_summary(Console(file=buf, width=240), results, tmp_path / "out")
    assert f"judge-c (stage 2) was asked {len(asked_c)} of 8 cases" in buf.getvalue()
    api.rebuild(tmp_path / "out", n_boot=0, lang="en")
    n_not = sum(cid not in asked_c for cid in by_id)
    for name in ("report.md", "report.html"):
        report = (tmp_path / "out" / name).read_text(encoding="utf-8")
        assert f"judge-c (stage 2) was asked {len(asked_c)} of 8 cases" in report
        assert f"on the other {n_not} it is not asked" in report


def test_grow_decides_from_stored_records_and_waits_for_a_case_with_a_call_not_stored(rubric: Rubric) -> None:
    from consensus_eval.domain.cases import Case
    from consensus_eval.domain.judgment import Deduction, Judgment
    from consensus_eval.execution.adaptive import grow
    from consensus_eval.execution.plan import Call, plan
    from consensus_eval.execution.store import CallRecord
    from consensus_eval.judges import build_judge

    c = EvalConfig.model_validate({**PANEL, "runs": "adaptive"})
    judges = [build_judge(j, rubric) for j in c.judges]
    cases = [Case(id=f"k{i}", conversation="医生：哪里不舒服？患者：口渴。", record="主诉：口渴1月。")
             for i in range(2)]
    first = plan(cases, rubric, c, judges)
    assert {(p.planned.judge, p.planned.run) for p in first} == {("a", 0), ("b", 0)}

    def stored(call: Call, n_errors: int) -> CallRecord:
        """n value errors (2 points each, capped at 8) on accuracy, one missing family history (4) if n."""
        p = call.planned
        deds = {"accuracy": [Deduction(category="numbers", type="value_error", points=2.0)] * n_errors,
                "completeness": [Deduction(category="family_history", type="fh_absent", points=4.0)] * bool(n_errors),
                }.get(p.dimension, [])
        return CallRecord(request_hash=p.request_hash, case_id=p.case_id, dimension=p.dimension, judge=p.judge,
                          run=p.run, status="ok", judgment=Judgment(dimension=p.dimension, deductions=deds))

    # case k0: a finds nothing, b takes 8 (accuracy) + 4 (completeness): totals 12 apart > flag_spread 10
    # case k1: both agree, but b's standardization call is not stored yet: the case waits
    waiting = ("k1", "b", "standardization")
    records = as_stored([stored(x, 6 if x.planned.judge == "b" and x.planned.case_id == "k0" else 0) for x in first
                         if (x.planned.case_id, x.planned.judge, x.planned.dimension) != waiting])
    added = grow(first, records, rubric, c, judges)
    assert {(x.planned.case_id, x.planned.judge, x.planned.dimension, x.planned.run) for x in added} == {
        ("k0", j, d, 1) for j in "ab" for d in DIMS}
    fixed = plan(cases, rubric, c.model_copy(update={"runs": 3}), judges)
    assert {x.planned.request_hash for x in added} <= {x.planned.request_hash for x in fixed}
