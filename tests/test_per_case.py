"""One call per case (``call: per_case``, docs/judges.md): one request per (case, judge, run), each
dimension's record derived from its part of the reply as three separate replies would be, the request's
tokens and cost split exactly, failures and invalid replies, request hashes, resumption, the dry run, and
the calibration's comparison of the two modes (Newcombe's paired interval)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
import respx

from consensus_eval import InputError, api
from consensus_eval.analysis.calibration import calibrate as calibrate_suite, recommend
from consensus_eval.analysis.intervals import paired_difference
from consensus_eval.analysis.results import Results
from consensus_eval.domain.calibration.generator import builtin_suite
from consensus_eval.domain.calibration.suite import SuiteCase
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig, LLMJudgeConfig, load_config
from consensus_eval.domain.grounding import ground
from consensus_eval.domain.judgment import CallOutcome, Judgment
from consensus_eval.domain.prompts import render, render_case
from consensus_eval.domain.replies import case_response_model
from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.estimate import PER_CASE, estimate
from consensus_eval.execution.plan import plan
from consensus_eval.judges.llm import LLMJudge, request_tokens
from consensus_eval.judges.per_case import CaseCalls, CaseOutcome, split
from tests.conftest import EXAMPLES, FAKE_KEY
from tests.fake_server import FakeConfig, FakeServer
from tests.fakellm import DIMENSIONS, case_of, chat_response, make_reply

URL = "http://judge-a.test/v1/chat/completions"


class _Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int


USAGE: _Usage = {"prompt_tokens": 5003, "completion_tokens": 1201, "cached_tokens": 1000, "reasoning_tokens": 7}
PRICE_IN, PRICE_OUT = 1.1e-6, 3.3e-6


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("JUDGE_A_KEY", FAKE_KEY)
    return FAKE_KEY


def _cases(n: int, important: bool = False) -> list[Case]:
    lines = [x for x in EXAMPLES.read_text(encoding="utf-8").splitlines() if x.strip()][:n]
    return [Case.model_validate({**json.loads(x), "important": important}) for x in lines]


def _judge(name: str = "j", call: str = "per_case", mode: str = "tools", **kw: object) -> dict[str, Any]:
    return {"name": name, "model": "openai/fake-a", "api_base": "http://judge-a.test/v1", "api_key_env": "JUDGE_A_KEY",
            "mode": mode, "call": call, "input_cost_per_token": PRICE_IN, "output_cost_per_token": PRICE_OUT,
            "concurrency": 2, "max_reasks": 1, **kw}


def _config(*judges: dict[str, Any], runs: int = 1, important_runs: int = 2) -> EvalConfig:
    return EvalConfig.model_validate({"runs": runs, "important_runs": important_runs, "judges": list(judges)})


def _parts(case: str) -> dict[str, dict[str, Any]]:
    """The reply of each dimension for a case (reproducible)."""
    return {d: make_reply(d, random.Random(f"{case}|{d}"), n=2) for d in DIMENSIONS}


def _answer(bodies: list[dict[str, Any]], *, missing: dict[str, int] | None = None,
            ) -> Callable[[httpx.Request], httpx.Response]:
    """A side effect answering a whole-case request with every dimension's part (or, the first
    ``missing[case]`` times, without standardization), and a dimension request with that part."""
    missing = dict(missing or {})

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        case = case_of(body)
        blob = json.dumps(body, ensure_ascii=False)
        parts = _parts(case)
        if "CaseJudgment" in blob:
            reply: dict[str, Any] = dict(parts)
            if missing.get(case, 0) > 0:
                missing[case] -= 1
                del reply["standardization"]
        else:
            reply = next(parts[d] for d in DIMENSIONS if f"{d.title()}Judgment" in blob)
        return httpx.Response(200, json=chat_response(body, reply, **USAGE))

    return answer


def _records(out: Path, judge: str | None = None) -> list[dict[str, Any]]:
    con = sqlite3.connect(out / "results.sqlite")
    con.row_factory = sqlite3.Row
    rows = [dict(r) for r in con.execute("SELECT * FROM calls ORDER BY case_id, run, dimension")]
    con.close()
    return [r for r in rows if judge is None or r["judge"] == judge]


def _run(config: EvalConfig, cases: list[Case], out: Path) -> Results:
    return api.run(api.prepare(cases, config), out, n_boot=10)


# --------------------------------------------------------------------------- one request, three records


@pytest.mark.parametrize("mode", ["tools", "json", "md_json"])
def test_one_request_per_case_and_run(tmp_path: Path, key: str, mode: str) -> None:
    cases = [*_cases(3), _cases(4)[3].model_copy(update={"important": True})]
    bodies: list[dict[str, Any]] = []
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=_answer(bodies))
        results = _run(_config(_judge(mode=mode)), cases, tmp_path)
    # 3 cases x 1 run + 1 important case x 2 runs: 5 requests for 15 dimension calls
    assert len(bodies) == 5
    assert Counter(case_of(b) for b in bodies) == {c.id: (2 if c.important else 1) for c in cases}
    assert all(b.get("seed") in (0, 1) for b in bodies)  # the run is sent, as for a dimension call
    rows = _records(tmp_path)
    assert len(rows) == 15 and all(r["status"] == "ok" for r in rows)
    assert results.progress is not None
    assert results.progress.done == 15 and results.progress.failed == 0


def test_records_equal_three_separate_replies(tmp_path: Path, key: str) -> None:
    """The per-case judge's judgments (and the scores re-derived from them) equal those of a
    per-dimension judge given the same three replies one by one."""
    cases = _cases(4)
    bodies: list[dict[str, Any]] = []
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=_answer(bodies))
        results = _run(_config(_judge("whole"), _judge("each", call="per_dimension")), cases, tmp_path)
    assert len(bodies) == 4 + 12
    whole, each = _records(tmp_path, "whole"), _records(tmp_path, "each")
    assert [(r["case_id"], r["dimension"]) for r in whole] == [(r["case_id"], r["dimension"]) for r in each]
    for a, b in zip(whole, each, strict=True):
        assert Judgment.model_validate_json(a["judgment"]) == Judgment.model_validate_json(b["judgment"])
    assert len(results.consensus) == 4
    for case in results.consensus:
        assert case.judge_totals["whole"] == case.judge_totals["each"]
        for dim in DIMENSIONS:
            sa, sb = case.judges["whole"][dim], case.judges["each"][dim]
            assert (sa.runs, sa.stars, sa.claim_mismatches) == (sb.runs, sb.stars, sb.claim_mismatches)


def test_tokens_and_cost_split_exactly(tmp_path: Path, key: str) -> None:
    cases = _cases(2)
    bodies: list[dict[str, Any]] = []
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=_answer(bodies))
        _run(_config(_judge()), cases, tmp_path)
    assert len(bodies) == 2
    request_cost = ((USAGE["prompt_tokens"] - USAGE["cached_tokens"]) * PRICE_IN
                    + USAGE["cached_tokens"] * PRICE_IN  # openai: no cache discount known, full price
                    + USAGE["completion_tokens"] * PRICE_OUT)
    for case in cases:
        rows = {r["dimension"]: r for r in _records(tmp_path) if r["case_id"] == case.id}
        for field in ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens"):
            total = USAGE[field]
            q, r = divmod(total, 3)
            assert [rows[d][field] for d in DIMENSIONS] == [q + r, q, q]  # remainder on the first
            assert sum(rows[d][field] for d in DIMENSIONS) == total
        assert [rows[d]["attempts"] for d in DIMENSIONS] == [1, 0, 0]
        assert sum(rows[d]["cost"] for d in DIMENSIONS) == pytest.approx(request_cost, rel=1e-12)
        assert rows["completeness"]["cost"] == rows["standardization"]["cost"] == pytest.approx(request_cost / 3)
    usage = api.load_run(tmp_path).usage["j"]
    assert usage.prompt_tokens == 2 * USAGE["prompt_tokens"] and usage.attempts == 2


def test_split_unit() -> None:
    outcome = CaseOutcome(status="ok", prompt_tokens=10, completion_tokens=None, cached_tokens=0, cost=1.0,
                          attempts=2, judgments={d: Judgment(dimension=d) for d in DIMENSIONS})
    among = list(DIMENSIONS)
    parts = [split(outcome, d, among) for d in among]
    assert [p.prompt_tokens for p in parts] == [4, 3, 3]
    assert [p.completion_tokens for p in parts] == [None, None, None]
    assert [p.attempts for p in parts] == [2, 0, 0]
    assert sum(p.cost or 0 for p in parts) == pytest.approx(1.0, rel=1e-15)
    assert [p.judgment.dimension for p in parts if p.judgment] == among
    # a request shared by two dimensions only (the third was stored before)
    two = [split(outcome, d, ["completeness", "standardization"]) for d in ("completeness", "standardization")]
    assert [p.prompt_tokens for p in two] == [5, 5] and [p.attempts for p in two] == [1, 1]
    assert split(outcome.model_copy(update={"cost": None}), "accuracy", among).cost is None
    # an ok outcome without that dimension's judgment fails as an invalid reply
    bare = split(CallOutcome(status="ok", prompt_tokens=3), "accuracy", among)
    assert bare.status == "failed" and bare.error_kind == "invalid_reply"


def test_a_failed_request_fails_every_dimension(tmp_path: Path, key: str) -> None:
    bodies: list[dict[str, Any]] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(400, json={"error": {"message": "bad request: context too long"}})

    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=refuse)
        results = _run(_config(_judge()), _cases(2), tmp_path)
    assert len(bodies) == 2  # one per case, not retried (a 400)
    rows = _records(tmp_path)
    assert len(rows) == 6 and all(r["status"] == "failed" and r["error_kind"] == "bad_request" for r in rows)
    for case_id in {r["case_id"] for r in rows}:
        assert len({r["error"] for r in rows if r["case_id"] == case_id}) == 1  # the same reason for all three
    assert results.progress is not None
    assert results.progress.failed == 6
    assert FAKE_KEY not in json.dumps(rows)


def test_a_reply_missing_a_dimension_is_re_asked(tmp_path: Path, key: str) -> None:
    cases = _cases(2)
    bodies: list[dict[str, Any]] = []
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=_answer(bodies, missing={cases[0].id: 1}))
        _run(_config(_judge()), cases, tmp_path)
    asked = Counter(case_of(b) for b in bodies)
    assert asked == {cases[0].id: 2, cases[1].id: 1}  # the incomplete reply was re-asked once
    reask = [b for b in bodies if case_of(b) == cases[0].id][1]
    assert "standardization" in json.dumps(reask["messages"][-1], ensure_ascii=False)  # the error names it
    rows = [r for r in _records(tmp_path) if r["case_id"] == cases[0].id]
    assert all(r["status"] == "ok" for r in rows)
    assert sum(r["attempts"] for r in rows) == 2
    assert sum(r["prompt_tokens"] for r in rows) == 2 * USAGE["prompt_tokens"]  # both attempts counted once


def test_a_reply_always_missing_a_dimension_fails_all_three(tmp_path: Path, key: str) -> None:
    cases = _cases(1)
    bodies: list[dict[str, Any]] = []
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=_answer(bodies, missing={cases[0].id: 99}))
        _run(_config(_judge()), cases, tmp_path)
    assert len(bodies) == 2  # first ask + max_reasks 1
    rows = _records(tmp_path)
    assert [r["error_kind"] for r in rows] == ["invalid_reply"] * 3
    assert all("standardization" in r["error"] for r in rows)


# --------------------------------------------------------------------------- identity and hashes


def test_hashes_differ_between_modes_and_per_dimension_identity_is_unchanged(rubric: Rubric) -> None:
    cases = _cases(3)
    per_dim = LLMJudgeConfig.model_validate(_judge(call="per_dimension"))
    per_case = LLMJudgeConfig.model_validate(_judge())
    # per_dimension (the default) hashes exactly the fields it always did: stored results stay valid
    old_fields = ("name", "kind", "model", "api_base", "mode", "temperature", "max_tokens", "extra_body")
    blob = json.dumps({k: getattr(per_dim, k) for k in old_fields}, sort_keys=True, ensure_ascii=False)
    assert per_dim.identity == hashlib.sha256(blob.encode()).hexdigest()[:16]
    assert per_case.identity != per_dim.identity
    hashes = {}
    for cfg in (per_dim, per_case):
        config = EvalConfig(judges=[cfg])
        calls = plan(cases, rubric, config, [LLMJudge(cfg, rubric)])
        assert len(calls) == 9
        hashes[cfg.call] = {c.planned.request_hash for c in calls}
        assert len(hashes[cfg.call]) == 9  # still one hash per dimension call
    assert not hashes["per_dimension"] & hashes["per_case"]
    # the per-case calls carry the whole-case prompt, rendered once per case
    calls = plan(cases, rubric, EvalConfig(judges=[per_case]), [LLMJudge(per_case, rubric)])
    assert calls[0].messages == render_case(rubric, cases[0])
    assert calls[0].messages is calls[1].messages is calls[2].messages


def test_the_per_case_prompt_asks_each_dimension_with_the_same_words(rubric: Rubric) -> None:
    case = _cases(1)[0]
    system, user = (m["content"] for m in render_case(rubric, case))
    for dim in rubric.dimensions:
        own = render(rubric, dim, case)[0]["content"]
        section = own[own.index(f"【评测维度：{dim.name}"):]
        assert section in system  # the dimension's rubric, criteria, formula and stars, word for word
        assert f'"{dim.id}": {{"deductions"' in system
    assert "<<<BEGIN MEDICAL RECORD" not in system and case.record in user  # the case once, last
    assert user.count(case.record) == 1
    # the combined response model: one required field per dimension, each the dimension's own model
    model = case_response_model(rubric)
    assert list(model.model_fields) == [d.id for d in rubric.dimensions]
    assert all(f.is_required() for f in model.model_fields.values())


def test_config_refuses_combinations(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("ungrounded: reask\njudges:\n  - name: j\n    model: openai/x\n    call: per_case\n",
                    encoding="utf-8")
    with pytest.raises(InputError, match=r"(?s)c\.yaml.*ungrounded: reask is not supported with call: per_case"):
        load_config(path)
    path.write_text("judges:\n  - name: j\n    model: openai/x\n    call: per_cases\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"judges\[0 j\]\.call"):
        load_config(path)


@pytest.mark.skipif("batch" not in LLMJudgeConfig.model_fields, reason="batch: true not here")
def test_config_refuses_per_case_with_batch(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("judges:\n  - name: j\n    model: openai/x\n    call: per_case\n    batch: true\n",
                    encoding="utf-8")
    with pytest.raises(InputError, match=r"(?s)judges\[0 j\].*per_case"):
        load_config(path)


# --------------------------------------------------------------------------- resumption


def test_resume_asks_only_the_missing_dimensions(tmp_path: Path, key: str) -> None:
    """A run interrupted after some dimensions of a case were stored: the rerun makes one request for
    that case, the stored record is kept, and the request's tokens go to the dimensions it answers."""
    cases = _cases(2)
    bodies: list[dict[str, Any]] = []
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=_answer(bodies))
        _run(_config(_judge()), cases, tmp_path)
    before = {(r["case_id"], r["dimension"]): r for r in _records(tmp_path)}
    con = sqlite3.connect(tmp_path / "results.sqlite")
    con.execute("DELETE FROM calls WHERE case_id = ? AND dimension != 'accuracy'", (cases[1].id,))
    con.commit()
    con.close()
    bodies.clear()
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=_answer(bodies))
        prep = api.prepare(cases, _config(_judge()))
        results = api.run(prep, tmp_path, n_boot=10)
    assert [case_of(b) for b in bodies] == [cases[1].id]
    assert results.progress is not None
    assert results.progress.skipped == 4 and results.progress.done == 2
    after = {(r["case_id"], r["dimension"]): r for r in _records(tmp_path)}
    assert after[(cases[1].id, "accuracy")] == before[(cases[1].id, "accuracy")]
    redone = [after[(cases[1].id, d)] for d in ("completeness", "standardization")]
    assert [r["prompt_tokens"] for r in redone] == [2502, 2501]  # 5003 over two dimensions
    assert [r["judgment"] for r in redone] == [before[(cases[1].id, d)]["judgment"]
                                              for d in ("completeness", "standardization")]
    judge = prep.judges[0]
    assert isinstance(judge, LLMJudge) and judge.per_case is not None and judge.per_case.pending() == 0


def test_stopped_waiters_cancel_the_request_and_a_rerun_asks_again(rubric: Rubric) -> None:
    started: list[int] = []
    asked = asyncio.Event()
    release = asyncio.Event()

    async def ask(case: Case, messages: list[dict[str, str]], run: int) -> CallOutcome:
        started.append(run)
        asked.set()
        await release.wait()
        return CaseOutcome(status="ok", prompt_tokens=9, judgments={d: Judgment(dimension=d) for d in DIMENSIONS})

    async def main() -> None:
        calls = CaseCalls(rubric, ask)
        case = _cases(1)[0]
        waiters = [asyncio.create_task(calls.take(case, d, [], 0)) for d in rubric.dimensions]
        # The first waiter starts the request as a task, scheduled after the other two waiters (asyncio
        # runs ready callbacks in order): once it has started, all three have called take.
        await asyncio.wait_for(asked.wait(), timeout=60)  # a liveness bound: a few ticks of the loop in fact
        assert started == [0] and calls.pending() == 1  # one request for the three dimensions
        for w in waiters:
            w.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        assert calls.pending() == 0  # nobody waits: the request was cancelled and forgotten
        release.set()
        outs = await asyncio.gather(*(calls.take(case, d, [], 0) for d in rubric.dimensions))
        assert started == [0, 0] and [o.prompt_tokens for o in outs] == [3, 3, 3] and calls.pending() == 0

    asyncio.run(main())


# --------------------------------------------------------------------------- the fake server and the dry run


def test_fake_server_answers_a_whole_case_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_A_KEY", FAKE_KEY)
    cases = _cases(4)
    with FakeServer(FakeConfig(seed=3)) as srv:
        judge = {**_judge(), "api_base": srv.url + "/v1"}
        results = _run(_config(judge), cases, tmp_path)
        log = list(srv.log)
    assert len(log) == 4 and Counter(e["case"] for e in log) == {c.id: 1 for c in cases}
    rows = _records(tmp_path)
    assert len(rows) == 12 and all(r["status"] == "ok" for r in rows)
    assert sum(r["prompt_tokens"] for r in rows) == sum(e["prompt_tokens"] for e in log)
    assert results.progress is not None
    assert results.progress.failed == 0


def test_dry_run_counts_the_per_case_request_once_per_case(rubric: Rubric, key: str) -> None:
    cases = [*_cases(3), _cases(4)[3].model_copy(update={"important": True})]
    config = _config(_judge("whole"), _judge("each", call="per_dimension"), important_runs=2)
    prep = api.prepare(cases, config)
    est = {e.judge: e for e in api.dry_run(prep)}
    whole, each = est["whole"], est["each"]
    assert each.calls == 15 and whole.calls == 5  # requests: one per case and run
    judge = next(j for j in prep.judges if j.config.name == "whole")
    assert isinstance(judge, LLMJudge)
    expected = sum(judge.count_request(judge.request(render_case(rubric, c), "accuracy")) * (2 if c.important else 1)
                   for c in cases)
    assert whole.prompt_tokens == expected
    request = judge.request(render_case(rubric, cases[0]), "accuracy")
    assert "CaseJudgment" in json.dumps(request, ensure_ascii=False)  # the combined schema is what is counted
    assert whole.output_tokens == each.output_tokens  # a reply per dimension answered, either way
    assert whole.max_output_tokens == 5 * judge.config.max_tokens
    assert set(whole.prefix_share) == {PER_CASE} and whole.case_prefix_share is None
    assert whole.prompt_tokens < each.prompt_tokens
    # estimate() on the plan directly gives the same
    again = estimate(plan(cases, rubric, config, prep.judges), prep.judges)
    assert [e.prompt_tokens for e in again] == [e.prompt_tokens for e in api.dry_run(prep)]


# --------------------------------------------------------------------------- the calibration compares the modes


def test_paired_difference_against_a_published_value() -> None:
    # contingencytables (Fagerland, Lydersen & Laake), Newcombe_square_and_add_CI_paired_2x2 on the table
    # [[59, 6], [16, 80]]: estimate -0.0621, 95% CI -0.1186 to -0.0046 (its tests/testthat/test-ch8.R)
    d, low, high = paired_difference(59, 6, 16, 80)
    assert (round(d, 4), round(low, 4), round(high, 4)) == (-0.0621, -0.1186, -0.0046)
    # the same items found by both: a difference of 0 with an interval that shrinks with n
    d, low, high = paired_difference(50, 0, 0, 50)
    assert d == 0 and -0.05 < low < 0 < high < 0.05
    assert paired_difference(0, 3, 0, 0)[0] == 1.0 and paired_difference(0, 3, 0, 0)[2] == 1.0
    with pytest.raises(ValueError):
        paired_difference(0, 0, 0, 0)


def _suite(n: int) -> list[SuiteCase]:
    """``n`` single-error cases of distinct types and two clean controls, from the built-in suite."""
    picked: list[SuiteCase] = []
    seen: set[str] = set()
    suite = builtin_suite()
    for sc in suite:
        if len(sc.expected) == 1 and not sc.expected[0].penalty and sc.expected[0].type not in seen:
            seen.add(sc.expected[0].type)
            picked.append(sc)
        if len(picked) == n:
            break
    return picked + [sc for sc in suite if sc.clean][:2]


def test_calibration_compares_per_case_with_per_dimension(tmp_path: Path, key: str, rubric: Rubric) -> None:
    """The same model in both modes: the per-case judge is scripted to miss the planted errors of three
    cases; the report counts the pairs and gives the paired difference and a verdict."""
    suite = _suite(10)
    missed = {sc.case.id for sc in suite[:3]}

    def part(sc: SuiteCase, dim: str, drop: bool) -> dict[str, Any]:
        items = [] if drop else [
            {"category": e.category, "type": e.type, "points": e.points, "evidence": e.spans[0].text, "reason": "x"}
            for e in sc.expected if e.dimension == dim]
        return {"deductions": items, "fixed_penalties": [], "score": 0, "stars": 1, "comment": ""}

    by_id = {sc.case.id: sc for sc in suite}

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sc = by_id[case_of(body)]
        blob = json.dumps(body, ensure_ascii=False)
        if "CaseJudgment" in blob:
            reply = {d: part(sc, d, sc.case.id in missed) for d in DIMENSIONS}
        else:
            reply = part(sc, next(d for d in DIMENSIONS if f"{d.title()}Judgment" in blob), False)
        return httpx.Response(200, json=chat_response(body, reply))

    config = _config(_judge("m-case"), _judge("m-dim", call="per_dimension"))
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=answer)
        results = api.run(api.prepare([sc.case for sc in suite], config), tmp_path, n_boot=0)
    report = calibrate_suite(suite, results, ground)
    assert report.judges["m-dim"].overall.found.k == 10 and report.judges["m-case"].overall.found.k == 7
    (m,) = report.comparisons
    assert (m.per_case, m.per_dimension, m.n, m.both, m.only_per_case, m.only_per_dimension) == (
        "m-case", "m-dim", 10, 7, 0, 3)
    assert (m.difference, m.low, m.high) == pytest.approx(paired_difference(7, 0, 3, 0))
    assert m.difference == pytest.approx(-0.3) and m.low is not None and m.high is not None and m.low < 0 < m.high
    line = next(x for x in report.recommendation if x.startswith("m-case (one call per case)"))
    assert "-30.0% (95% CI -60.3% to +3.8%) on 10 planted errors" in line
    assert line.endswith("the suite cannot rule out that it finds more than 5% less: keep m-dim")
    # the two other verdicts, from other counts
    for counts, verdict in (((60, 0, 40, 0), "it finds less: keep m-dim"),
                            ((990, 1, 2, 7), "it finds as much within 5%")):
        d, low, high = paired_difference(*counts)
        other = report.model_copy(update={"comparisons": [m.model_copy(update={
            "difference": d, "low": low, "high": high})]})
        assert any(verdict in x for x in recommend(other))


def test_concurrency_one_still_one_request_per_case_and_run(tmp_path: Path, key: str) -> None:
    """The queue holds a case's dimension calls next to each other (plan order: case, dimension, judge,
    run) and the runner starts three workers per request slot: at concurrency 1 the dimensions of a case
    still share one request per run, and nothing waits forever."""
    cases = [*_cases(2), _cases(3)[2].model_copy(update={"important": True})]
    bodies: list[dict[str, Any]] = []
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=_answer(bodies))
        prep = api.prepare(cases, _config(_judge(concurrency=1), important_runs=3))
        results = api.run(prep, tmp_path, n_boot=0)
    assert Counter((case_of(b), b.get("seed")) for b in bodies) == {
        (cases[0].id, 0): 1, (cases[1].id, 0): 1, (cases[2].id, 0): 1, (cases[2].id, 1): 1, (cases[2].id, 2): 1}
    assert results.progress is not None
    assert results.progress.done == 15 and results.progress.failed == 0
    order = [(c.planned.case_id, c.planned.dimension, c.planned.run) for c in prep.calls]
    assert order[:3] == [(cases[0].id, d, 0) for d in DIMENSIONS]


@pytest.mark.parametrize("mode", ["tools", "json", "md_json"])
def test_the_per_case_request_counted_is_the_request_sent(tmp_path: Path, key: str, mode: str) -> None:
    """The dry run's whole-case request equals the body the run sends (messages, tools, response_format)
    and the dry run's total is the token count of the captured bodies (up to 8 cases, all counted
    exactly: the estimate samples 8)."""
    cases = _cases(5)
    prep = api.prepare(cases, _config(_judge(mode=mode)))
    (est,) = api.dry_run(prep)
    bodies: list[dict[str, Any]] = []
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=_answer(bodies))
        api.run(prep, tmp_path, n_boot=0)
    assert len(bodies) == est.calls == 5
    judge = prep.judges[0]
    assert isinstance(judge, LLMJudge)
    for case, sent in zip(cases, sorted(bodies, key=lambda b: [c.id for c in cases].index(case_of(b))), strict=True):
        req = judge.request(render_case(prep.rubric, case), "accuracy")
        for part in ("messages", "tools", "response_format"):
            assert req.get(part) == sent.get(part)
    assert est.prompt_tokens == sum(request_tokens("openai/fake-a", b) for b in bodies)


def test_adaptive_runs_with_one_request_per_case(tmp_path: Path, key: str) -> None:
    """runs: adaptive grows a per-case judge's plan in rounds: each round's extra run of a case is one
    request, and the plan's hashes stay those of a fixed plan of as many runs."""
    cases = _cases(2)
    bodies: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        run = int(body.get("seed") or 0)  # the runs disagree (more deductions each run): the plan grows
        reply = {d: make_reply(d, random.Random(f"{case_of(body)}|{d}"), n=run) for d in DIMENSIONS}
        return httpx.Response(200, json=chat_response(body, reply, **USAGE))

    config = EvalConfig.model_validate({"runs": "adaptive", "important_runs": "adaptive",
                                        "adaptive": {"min_runs": 2, "max_runs": 3, "run_spread": 0.5},
                                        "judges": [_judge()]})
    with respx.mock(using="httpx") as mock:
        mock.post(URL).mock(side_effect=answer)
        results = api.run(api.prepare(cases, config), tmp_path, n_boot=0)
    assert Counter((case_of(b), b.get("seed")) for b in bodies) == {(c.id, r): 1 for c in cases for r in range(3)}
    rows = _records(tmp_path)
    assert len(rows) == 18 and all(r["status"] == "ok" for r in rows)
    assert results.progress is not None
    assert results.progress.rounds == 2
    fixed = {c.planned.request_hash for c in plan(cases, results.rubric, config.model_copy(
        update={"runs": 3, "important_runs": 3}), api.prepare(cases, config).judges)}
    assert {r["request_hash"] for r in rows} == fixed
