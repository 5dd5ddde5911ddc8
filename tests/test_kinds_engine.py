"""Rubric kinds through the engine (docs/rubrics.md): reply models, request hashes, derivation with the case's
criteria, consensus and flags, reliability at each kind's level, outputs, and `score` end to end with the
fake-server panel on a likert rubric and a criteria rubric (fixtures in tests/data/kinds_engine/)."""

from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from consensus_eval.analysis.alpha import Level, krippendorff_alpha
from consensus_eval.analysis.consensus import build
from consensus_eval.analysis.derived import derive_all
from consensus_eval.analysis.reliability import level_of
from consensus_eval.analysis.results import Results
from consensus_eval.domain import replies as judgment_mod
from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import ConsensusConfig
from consensus_eval.domain.judgment import CriterionVerdict, Judgment
from consensus_eval.domain.kinds.criteria import majority
from consensus_eval.domain.prompts import render
from consensus_eval.domain.replies import case_response_model, response_model
from consensus_eval.domain.rubric import Criterion, Rubric, load_rubric
from consensus_eval.execution.store import CallRecord, StoredCall
from consensus_eval.execution.stored_run import StoredRun
from tests.conftest import FAKE_KEY
from tests.fake_server import FakeConfig, FakeServer
from tests.helpers import all_present, all_present_values, as_stored

DATA = Path(__file__).parent / "data" / "kinds_engine"
LIKERT = DATA / "likert3.yaml"
CHECKS = DATA / "checks.yaml"
PROMPTS = DATA / "prompts"


def _cases() -> list[Case]:
    return [Case.model_validate(json.loads(x)) for x in (DATA / "cases.jsonl").read_text(encoding="utf-8").splitlines()]


# --------------------------------------------------------------------------- reply models


def test_likert_reply_is_a_closed_set_of_levels_and_the_rating_is_the_score() -> None:
    rubric = load_rubric(LIKERT)
    model = response_model(rubric, "accurate")
    reply = model.model_validate({"rating": 4, "evidence": ["penicillin (rash)"], "comment": "ok"})
    j = reply.to_judgment(rubric.dimension("accurate"))
    assert (j.rating, j.evidence, j.deductions) == (4, ["penicillin (rash)"], [])
    for bad in (0, 6, "high"):
        with pytest.raises(ValidationError):
            model.model_validate({"rating": bad, "evidence": [], "comment": ""})
    schema = model.model_json_schema()
    assert schema["properties"]["rating"]["enum"] == [1, 2, 3, 4, 5]


def test_criteria_reply_is_per_case_and_each_criterion_is_judged_exactly_once() -> None:
    rubric = load_rubric(CHECKS)
    c1, c2, _ = _cases()
    m1 = response_model(rubric, "items", c1.criteria)
    m2 = response_model(rubric, "items", c2.criteria)
    assert m1 is not m2 and m1 is response_model(rubric, "items", c1.criteria)
    assert m1.model_json_schema()["$defs"]["ItemsVerdict"]["properties"]["id"]["enum"] == ["rash", "dose"]
    ok = {"verdicts": [{"id": "rash", "met": True, "evidence": "penicillin (rash)", "reason": ""},
                       {"id": "dose", "met": False, "evidence": "", "reason": ""}], "comment": ""}
    j = m1.model_validate(ok).to_judgment(rubric.dimension("items"))
    assert [(v.id, v.met) for v in j.verdicts] == [("rash", True), ("dose", False)]
    with pytest.raises(ValidationError, match="criteria not judged: dose"):
        m1.model_validate({**ok, "verdicts": ok["verdicts"][:1]})
    with pytest.raises(ValidationError, match="judged more than once: rash"):
        m1.model_validate({**ok, "verdicts": [ok["verdicts"][0], *ok["verdicts"]]})
    with pytest.raises(ValidationError):  # an id of another case
        m1.model_validate({**ok, "verdicts": [*ok["verdicts"], {"id": "murmur", "met": True, "evidence": "",
                                                                 "reason": ""}]})
    # the rubric's own criteria: one model whatever the case
    assert response_model(rubric, "safety", c1.criteria) is response_model(rubric, "safety", c2.criteria)
    with pytest.raises(ValueError, match="no criteria of its own and the case gives none"):
        response_model(rubric, "items", None)


def test_whole_case_model_asks_every_dimension_with_the_case_criteria() -> None:
    rubric = load_rubric(CHECKS)
    c1 = _cases()[0]
    model = case_response_model(rubric, c1.criteria)
    verdicts = [{"id": i, "met": True, "evidence": "", "reason": ""} for i in ("allergies", "meds", "invented")]
    reply = model.model_validate({"safety": {"verdicts": verdicts, "comment": ""},
                                  "items": {"verdicts": [{"id": "rash", "met": True, "evidence": "", "reason": ""},
                                                         {"id": "dose", "met": True, "evidence": "", "reason": ""}],
                                            "comment": ""}})
    assert [v.id for v in reply.to_judgment(rubric.dimension("items")).verdicts] == ["rash", "dose"]
    with pytest.raises(ValidationError):
        model.model_validate({"safety": {"verdicts": verdicts, "comment": ""}})


def test_the_model_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    rubric = load_rubric(CHECKS)
    monkeypatch.setattr(judgment_mod, "MAX_CACHED_MODELS", 5)
    monkeypatch.setattr(judgment_mod, "_MODELS", type(judgment_mod._MODELS)())
    for i in range(20):
        crit = [{"id": f"k{i}", "text": "t", "points": 1}]
        response_model(rubric, "items", Case.model_validate({"id": "x", "conversation": "hi", "record": "r",
                                                             "criteria": crit}).criteria)
    assert len(judgment_mod._MODELS) == 5


# --------------------------------------------------------------------------- request hashes


def test_the_request_hash_covers_the_case_criteria() -> None:
    from consensus_eval.domain.config import EvalConfig
    from consensus_eval.execution.plan import plan
    from consensus_eval.judges.registry import build_judge

    rubric = load_rubric(CHECKS)
    config = EvalConfig.model_validate({"rubric": str(CHECKS), "prompts_dir": str(PROMPTS), "judges": [
        {"name": "j", "model": "openai/fake", "api_key_env": "NO_SUCH_KEY_NEEDED"}]})
    judges = [build_judge(j, rubric) for j in config.judges]
    c1 = _cases()[0]
    edited = c1.model_copy(update={"criteria": [_criteria(c1)[0].model_copy(update={"text": "Mentions a rash"}),
                                                _criteria(c1)[1]]})
    a = {(x.planned.dimension): x.planned.request_hash for x in plan([c1], rubric, config, judges)}
    b = {(x.planned.dimension): x.planned.request_hash for x in plan([edited], rubric, config, judges)}
    assert a["items"] != b["items"]          # the prompt lists the case's criteria
    assert a["safety"] == b["safety"]        # the rubric's own criteria: the case's do not enter
    assert "Mentions a rash" in render(rubric, rubric.dimension("items"), edited, PROMPTS)[1]["content"]
    # the rubric's own criteria are in its fingerprint: an edit there changes every hash
    data = rubric.model_dump()
    data["dimensions"][0]["criteria"][0]["points"] = 6
    other = type(rubric).model_validate(data)
    assert other.fingerprint != rubric.fingerprint
    c = {(x.planned.dimension): x.planned.request_hash for x in plan([c1], other, config, judges)}
    assert c["safety"] != a["safety"] and c["items"] != a["items"]


# --------------------------------------------------------------------------- consensus and flags


def _rec(case: str, judge: str, dim: str, j: Judgment, run: int = 0) -> StoredCall:
    record = CallRecord(request_hash=f"{case}|{judge}|{dim}|{run}", case_id=case, dimension=dim, judge=judge, run=run,
                        status="ok", judgment=j)
    return as_stored([record])[0]


def _criteria(case: Case) -> list[Criterion]:
    assert case.criteria is not None
    return case.criteria


def _verdicts(**met: bool) -> list[CriterionVerdict]:
    return [CriterionVerdict(id=k, met=v) for k, v in met.items()]


def test_criteria_consensus_is_the_majority_and_a_tie_is_split_and_flagged() -> None:
    rubric = load_rubric(CHECKS)
    cases = _cases()[:1]
    safety = [dict(allergies=True, meds=True, invented=False), dict(allergies=True, meds=False, invented=False),
              dict(allergies=False, meds=True, invented=False), dict(allergies=True, meds=False, invented=True)]
    items = [dict(rash=True, dose=True), dict(rash=True, dose=True), dict(rash=False, dose=True),
             dict(rash=True, dose=False)]
    judges = ["a", "b", "c", "d"]
    recs = [_rec("c1", j, "safety", Judgment(dimension="safety", verdicts=_verdicts(**s)))
            for j, s in zip(judges, safety, strict=True)]
    recs += [_rec("c1", j, "items", Judgment(dimension="items", verdicts=_verdicts(**s)))
             for j, s in zip(judges, items, strict=True)]
    cons = build(rubric, recs, judges, ["c1"], ConsensusConfig(), cases=cases)[0]
    assert cons.criteria == {"safety": {"allergies": "met", "meds": "split", "invented": "not met"},
                             "items": {"rash": "met", "dose": "met"}}
    # the flag counts the criteria the judges disagree on (each judge's verdict), a tie or a 3-1: all five here
    assert [(f.dimension, f.value, f.limit) for f in cons.flag_codes if f.code == "split"] == [
        ("safety", 3, 1), ("items", 2, 1)]
    assert {"safety: judges split on 3 criteria", "items: judges split on 2 criteria"} <= set(cons.flags)
    strict = build(rubric, recs, judges, ["c1"], ConsensusConfig(flag_split_share=1.0), cases=cases)[0]
    assert [f.dimension for f in strict.flag_codes if f.code == "split"] == ["safety", "items"]   # all of them
    # judge a: safety (5 + 3) / 8 = 1, items (4 + 2) / 6 = 1; the total weighs items x2
    assert cons.judge_totals["a"] == pytest.approx(1 + 2 * 1)
    scores_b = (5 / 8, 1.0)
    assert cons.judge_totals["b"] == pytest.approx(scores_b[0] + 2 * scores_b[1])
    assert cons.total == pytest.approx(rubric.total(all_present_values(cons.scores)))
    assert cons.stars == {"safety": None, "items": None} and cons.star_total is None
    assert (majority([]), majority([True]), majority([True, False]), majority([False, False, True])) == (
        None, "met", "split", "not met")


def test_likert_flags_a_gap_of_levels_from_the_config_and_stars_only_where_there_are_stars() -> None:
    rubric = load_rubric(LIKERT)
    ratings = {"a": {"accurate": 5, "thorough": 4, "succinct": 5}, "b": {"accurate": 3, "thorough": 3, "succinct": 2}}
    recs = [_rec("c1", j, d, Judgment(dimension=d, rating=r)) for j, by in ratings.items() for d, r in by.items()]
    cons = build(rubric, recs, ["a", "b"], ["c1"], ConsensusConfig(flag_spread=100))[0]
    assert {(f.code, f.dimension, f.value) for f in cons.flag_codes} == {
        ("level_gap", "accurate", 2), ("level_gap", "succinct", 3), ("star_gap", "succinct", 3)}
    assert cons.stars == {"accurate": None, "thorough": None, "succinct": 3}  # mean 3.5: only succinct has stars
    assert cons.judge_totals == {"a": 2 * 5 + 4 + 5, "b": 2 * 3 + 3 + 2}
    wide = build(rubric, recs, ["a", "b"], ["c1"], ConsensusConfig(flag_spread=100, flag_level_gap=3))[0]
    assert {(f.code, f.dimension) for f in wide.flag_codes} == {("level_gap", "succinct"), ("star_gap", "succinct")}


def test_the_config_keeps_its_old_dump_with_the_new_level_gap_at_its_default() -> None:
    assert "flag_level_gap" not in ConsensusConfig().model_dump()
    assert ConsensusConfig(flag_level_gap=1).model_dump()["flag_level_gap"] == 1


def test_derivation_scores_per_case_criteria_from_the_case() -> None:
    rubric = load_rubric(CHECKS)
    cases = _cases()
    recs = [_rec("c2", "a", "items", Judgment(dimension="items", verdicts=_verdicts(duration=True, exertion=False,
                                                                                    murmur=True)))]
    score = derive_all(rubric, recs, cases)["c2|a|items|0"]
    assert score.score == pytest.approx((5 - 5) / 8) and [c.id for c in score.criteria] == [
        "duration", "exertion", "murmur"]
    recs = [_rec("c3", "a", "items", Judgment(dimension="items", verdicts=_verdicts(glucose=True, metformin=True,
                                                                                    stop=False)))]
    assert derive_all(rubric, recs, cases)["c3|a|items|0"].score == 1.0


# --------------------------------------------------------------------------- reliability levels


def test_levels_per_kind() -> None:
    likert, checks = load_rubric(LIKERT), load_rubric(CHECKS)
    assert {level_of(d) for d in likert.dimensions} == {"ordinal"}
    assert {level_of(d) for d in checks.dimensions} == {"nominal"}
    assert level_of(load_rubric("medical_record").dimensions[0]) == "interval"


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("level, values", [("nominal", (0, 1)), ("ordinal", (1, 2, 3, 4, 5))])
def test_nominal_and_ordinal_alpha_match_the_krippendorff_package(level: Level, values: tuple[int, ...],
                                                                   seed: int) -> None:
    rng = random.Random(seed)
    truth = [rng.choice(values) for _ in range(40)]
    data = [[(t if rng.random() < 0.7 else rng.choice(values)) if rng.random() > 0.1 else math.nan for t in truth]
            for _ in range(3)]
    ours = krippendorff_alpha(data, level).value
    theirs = krippendorff.alpha(reliability_data=np.array(data, dtype=float), level_of_measurement=level)
    assert ours == pytest.approx(theirs, abs=1e-9)


# --------------------------------------------------------------------------- end to end


def _panel_config(path: Path, rubric: Path, url: str, call: str = "per_dimension") -> Path:
    judges = "".join(
        f"  - name: {name}\n    model: openai/{name}\n    api_base: {url}/v1\n    api_key_env: JUDGE_A_KEY\n"
        f"    call: {call}\n    max_reasks: 1\n    concurrency: 4\n"
        for name in ("fake-a", "fake-strict", "fake-lenient"))
    path.write_text(f"rubric: {rubric}\nprompts_dir: {PROMPTS}\nruns: 1\nconsensus:\n  min_judges: 2\n"
                    f"judges:\n{judges}", encoding="utf-8")
    return path


def _score(tmp_path: Path, rubric: Path, call: str = "per_dimension") -> Path:
    from consensus_eval.cli import app

    out = tmp_path / "out"
    with FakeServer(FakeConfig(seed=5)) as srv:
        cfg = _panel_config(tmp_path / "c.yaml", rubric, srv.url, call)
        res = CliRunner().invoke(app, ["score", str(DATA / "cases.jsonl"), "-c", str(cfg), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.parametrize("call", ["per_dimension", "per_case"])
def test_score_runs_a_likert_rubric_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    monkeypatch.setenv("JUDGE_A_KEY", FAKE_KEY)
    out = _score(tmp_path, LIKERT, call)
    rows = [json.loads(x) for x in (out / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 3 * 3 * 3 and all(r["status"] == "ok" for r in rows)
    assert all(r["rating"] in (1, 2, 3, 4, 5) and r["score"] == r["rating"] for r in rows)
    assert all(r["stars"] is None for r in rows if r["dimension"] != "succinct")
    assert any(e["grounding"] is not None for r in rows for e in r["evidence"])
    with (out / "consensus.csv").open(encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == ["case_id", "accurate", "thorough", "succinct", "total", "star_total", "succinct_stars",
                              "n_judges", "status", "spread", "flagged", "flags"]
    for row in table:
        mean = {d: sum(r["rating"] for r in rows if r["case_id"] == row["case_id"] and r["dimension"] == d) / 3
                for d in ("accurate", "thorough", "succinct")}
        assert float(row["accurate"]) == pytest.approx(mean["accurate"], abs=1e-4)
        assert float(row["total"]) == pytest.approx(2 * mean["accurate"] + mean["thorough"] + mean["succinct"],
                                                    abs=1e-3)
    rel = json.loads((out / "reliability.json").read_text(encoding="utf-8"))
    assert {k: a["level"] for k, a in rel["across_judges"].items()} == {
        "accurate": "ordinal", "thorough": "ordinal", "succinct": "ordinal", "total": "interval"}
    assert list(rel["stars"]) == ["succinct"]
    assert (out / "report.html").is_file() and (out / "report.md").is_file()


@pytest.mark.parametrize("call", ["per_dimension", "per_case"])
def test_score_runs_a_criteria_rubric_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str) -> None:
    monkeypatch.setenv("JUDGE_A_KEY", FAKE_KEY)
    out = _score(tmp_path, CHECKS, call)
    rows = [json.loads(x) for x in (out / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    cases = {c.id: c for c in _cases()}
    assert len(rows) == 3 * 2 * 3 and all(r["status"] == "ok" for r in rows)
    for r in rows:
        ids = [v["id"] for v in r["verdicts"]]
        want = ["allergies", "meds", "invented"] if r["dimension"] == "safety" else [
            c.id for c in _criteria(cases[r["case_id"]])]
        assert ids == want
        points = {v["id"]: v["points"] for v in r["verdicts"]}
        positive = sum(p for p in points.values() if p > 0)
        met = sum(v["points"] for v in r["verdicts"] if v["met"])
        assert r["score"] == pytest.approx(min(1, max(0, met / positive)))
    with (out / "consensus.csv").open(encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == ["case_id", "safety", "items", "total", "safety.allergies", "safety.meds",
                              "safety.invented", "n_judges", "status", "spread", "flagged", "flags"]
    cons = [json.loads(x) for x in (out / "consensus.jsonl").read_text(encoding="utf-8").splitlines()]
    for row, c in zip(table, cons, strict=True):
        for k in ("allergies", "meds", "invented"):
            votes = [v["met"] for r in rows if r["case_id"] == row["case_id"] and r["dimension"] == "safety"
                     for v in r["verdicts"] if v["id"] == k]
            assert row[f"safety.{k}"] == majority(votes)
        assert list(c["criteria"]["items"]) == [k.id for k in _criteria(cases[c["case_id"]])]
        assert (row["flagged"] == "1") == bool(c["flags"])
    rel = json.loads((out / "reliability.json").read_text(encoding="utf-8"))
    across = rel["across_judges"]
    assert (across["safety"]["level"], across["items"]["level"], across["total"]["level"]) == (
        "nominal", "nominal", "interval")
    assert across["safety"]["n_units"] == 3 * 3 and across["items"]["n_units"] == 2 + 3 + 3
    # the figure is the package's on the same units (case x criterion, judges' verdicts)
    data = [[float(v["met"]) for r in sorted((r for r in rows if r["judge"] == j and r["dimension"] == "items"),
                                             key=lambda r: r["case_id"]) for v in r["verdicts"]]
            for j in ("fake-a", "fake-strict", "fake-lenient")]
    theirs = krippendorff.alpha(reliability_data=np.array(data), level_of_measurement="nominal") \
        if len({x for row in data for x in row}) > 1 else None
    if theirs is not None and not math.isnan(theirs):
        assert across["items"]["value"] == pytest.approx(theirs, abs=1e-9)
    assert (out / "report.html").is_file() and (out / "report.md").is_file()


def test_a_rules_judge_on_a_rubric_without_rules_and_calibrate_without_operators_say_so(tmp_path: Path) -> None:
    from consensus_eval.cli import app

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"rubric: {LIKERT}\nprompts_dir: {PROMPTS}\njudges:\n  - name: house-rules\n    kind: rules\n",
                   encoding="utf-8")
    res = CliRunner().invoke(app, ["score", str(DATA / "cases.jsonl"), "-c", str(cfg), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert "judge 'house-rules' (kind: rules) cannot score rubric 'likert3'" in text and "LLM judges" in text
    res = CliRunner().invoke(app, ["calibrate", "-c", str(cfg), "--out", str(tmp_path / "cal"), "--dry-run"])
    assert res.exit_code == 2 and "rubric 'likert3' has no planting operators" in " ".join(res.output.split())
    assert "Traceback" not in res.output


# --------------------------------------------------------------------------- the shipped English examples


def _example_config(path: Path, example: Path, url: str) -> Path:
    """The shipped example config with its judges pointed at the fake server (each keeps its mode)."""
    import yaml

    cfg = yaml.safe_load(example.read_text(encoding="utf-8"))
    for j in cfg["judges"]:
        j.update(model=f"openai/{j['name']}", api_base=f"{url}/v1", api_key_env="JUDGE_A_KEY")
        j.pop("input_cost_per_token", None)
        j.pop("output_cost_per_token", None)
        j.pop("rpm", None)
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["pdqi9", "criteria"])
def test_score_runs_the_shipped_examples_with_the_fake_server_panel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    name: str) -> None:
    from consensus_eval.cli import app

    root = Path(__file__).resolve().parents[1]
    example, cases = root / "configs" / f"{name}.example.yaml", root / "examples" / name / "cases.jsonl"
    if not example.is_file() or not cases.is_file():
        pytest.skip(f"{name} examples not shipped")
    monkeypatch.setenv("JUDGE_A_KEY", FAKE_KEY)
    monkeypatch.chdir(root)
    out = tmp_path / "out"
    with FakeServer(FakeConfig(seed=7)) as srv:
        cfg = _example_config(tmp_path / "c.yaml", example, srv.url)
        res = CliRunner().invoke(app, ["score", str(cases), "-c", str(cfg), "--out", str(out)])
    assert res.exit_code == 0, res.output
    rubric = load_rubric(name)
    n_cases = len(cases.read_text(encoding="utf-8").splitlines())
    rows = [json.loads(x) for x in (out / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    n_judges = len({r["judge"] for r in rows})
    assert len(rows) == n_cases * len(rubric.dimensions) * n_judges >= 8 * 3
    assert all(r["status"] == "ok" for r in rows)
    key = "rating" if rubric.kinds == {"likert"} else "verdicts"
    assert all(r[key] for r in rows)
    rel = json.loads((out / "reliability.json").read_text(encoding="utf-8"))
    levels = {a["level"] for k, a in rel["across_judges"].items() if k != "total"}
    assert levels == ({"ordinal"} if key == "rating" else {"nominal"})
    for f in ("consensus.csv", "consensus.jsonl", "report.md", "report.html"):
        assert (out / f).stat().st_size > 0


def test_every_quote_is_grounded_except_an_empty_one_of_a_criterion_not_met() -> None:
    from consensus_eval.analysis.derived import evidence_ids, evidence_of
    from consensus_eval.domain.judgment import quotes_of

    j = Judgment(dimension="items", verdicts=[CriterionVerdict(id="a", met=True, evidence="rash"),
                                              CriterionVerdict(id="b", met=False),
                                              CriterionVerdict(id="c", met=True)])
    assert quotes_of(j) == ["rash", ""]
    assert [d for d, _ in evidence_of(_rec("c1", "x", "items", j))] == ["c1|x|items|0#v0", "c1|x|items|0#v2"]
    lik = Judgment(dimension="accurate", rating=3, evidence=["q1", "q2"])
    assert quotes_of(lik) == ["q1", "q2"]
    assert [d for d, _ in evidence_of(_rec("c1", "x", "accurate", lik))] == ["c1|x|accurate|0#e0", "c1|x|accurate|0#e1"]
    # the ids alone, as judge_quality counts them: the same, in the same order
    for made in (j, lik):
        rec = _rec("c1", "x", made.dimension, made)
        assert evidence_ids(rec) == [d for d, _ in evidence_of(rec)]


@pytest.mark.parametrize("name", ["radiology", "discharge5", "checklist"])
def test_score_runs_the_test_only_rubric_of_each_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      name: str) -> None:
    # the rubrics a newcomer wrote from the README and docs alone (tests/data/kinds), with their own configs
    from consensus_eval.cli import app

    root = Path(__file__).resolve().parents[1]
    folder = root / "tests" / "data" / "kinds"
    if not (folder / f"{name}.config.yaml").is_file():
        pytest.skip(f"tests/data/kinds/{name} not there")
    monkeypatch.setenv("JUDGE_A_KEY", FAKE_KEY)
    monkeypatch.chdir(root)
    out = tmp_path / "out"
    with FakeServer(FakeConfig(seed=11)) as srv:
        cfg = _example_config(tmp_path / "c.yaml", folder / f"{name}.config.yaml", srv.url)
        res = CliRunner().invoke(app, ["score", str(folder / f"{name}_cases.jsonl"), "-c", str(cfg),
                                       "--out", str(out)])
    assert res.exit_code == 0, res.output
    rubric = load_rubric(folder / f"{name}.yaml")
    rows = [json.loads(x) for x in (out / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows and all(r["status"] == "ok" for r in rows)
    assert {r["dimension"] for r in rows} == {d.id for d in rubric.dimensions}
    rel = json.loads((out / "reliability.json").read_text(encoding="utf-8"))
    for d in rubric.dimensions:
        assert rel["across_judges"][d.id]["level"] == level_of(d)
    with (out / "consensus.csv").open(encoding="utf-8") as f:
        head = next(csv.reader(f))
    assert [h for h in head if h.endswith("_stars")] == [f"{d.id}_stars" for d in rubric.dimensions if d.stars]
    assert (out / "report.html").stat().st_size > 0


def test_calibrate_refuses_a_rubric_of_another_kind_even_with_a_suite_of_its_own(tmp_path: Path) -> None:
    from consensus_eval.cli import app

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"rubric: {CHECKS}\nprompts_dir: {PROMPTS}\njudges:\n  - name: j\n    model: openai/x\n"
                   f"    api_key_env: NO_KEY_HERE\n", encoding="utf-8")
    suite = tmp_path / "suite.jsonl"
    suite.write_text((DATA / "cases.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    res = CliRunner().invoke(app, ["calibrate", "-c", str(cfg), "--suite", str(suite), "--out", str(tmp_path / "o"),
                                   "--dry-run"])
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "rubric 'checks' has no planting operators" in text
    assert "safety (criteria), items (criteria)" in text and "Traceback" not in res.output


def test_adaptive_runs_read_each_kind_on_its_own_scale() -> None:
    from consensus_eval.domain.config import EvalConfig
    from consensus_eval.execution.adaptive import JudgeRuns, decide

    panel = {"judges": [{"name": "a", "model": "openai/x"}, {"name": "b", "model": "openai/y"}],
             "important_runs": "adaptive", "adaptive": {"max_runs": 3, "run_spread": 3, "run_star_gap": None},
             "consensus": {"flag_spread": 100}}
    config = EvalConfig.model_validate(panel)
    stages = {"a": 1, "b": 1}

    def state(**dims: tuple[tuple[float, ...], tuple[float, ...]]) -> dict[str, dict[str, JudgeRuns]]:
        return {j: {d: JudgeRuns(len(v[i]), v[i]) for d, v in dims.items()} for i, j in enumerate(("a", "b"))}

    likert = load_rubric(LIKERT)
    calm = {"accurate": ((4, 5), (4, 4)), "thorough": ((3, 3), (3, 3)), "succinct": ((5, 5), (5, 5))}
    assert decide(state(**calm), likert, config, adaptive=True, stage=stages) == []
    # a's own runs of accurate 2 levels apart: another run (run_spread 3 points would not see it)
    adds = decide(state(**{**calm, "accurate": ((2, 4), (3, 3))}), likert, config, adaptive=True, stage=stages)
    assert [(x.judge, x.dimension, x.why) for x in adds] == [("a", "accurate", "own")]
    # the panel's mean ratings 2 levels apart: a run of that attribute from each judge
    adds = decide(state(**{**calm, "thorough": ((1, 1), (3, 3))}), likert, config, adaptive=True, stage=stages)
    assert sorted((x.judge, x.dimension, x.why) for x in adds) == [("a", "thorough", "panel"),
                                                                   ("b", "thorough", "panel")]
    checks = load_rubric(CHECKS)
    # b's runs scoring 0.5 and 0.75 on a criteria dimension: a verdict changed, another run
    adds = decide(state(safety=((1.0, 1.0), (0.5, 0.75)), items=((1.0, 1.0), (1.0, 1.0))), checks, config,
                  adaptive=True, stage=stages)
    assert [(x.judge, x.dimension, x.why) for x in adds] == [("b", "safety", "own")]


def test_a_batch_judge_scores_per_case_criteria_as_the_live_one_does(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # a provider batch line carries the case's own response model (its criterion ids): the batch replies
    # validate, and give the live path's judgments under the same request hashes
    import asyncio

    from consensus_eval import api
    from consensus_eval.execution.store import Store

    monkeypatch.setenv("JUDGE_A_KEY", FAKE_KEY)

    def config(url: str, batch: bool) -> dict[str, Any]:
        return {"rubric": str(CHECKS), "prompts_dir": str(PROMPTS), "runs": 1, "judges": [
            {"name": "gpt", "model": "openai/gpt-4.1", "api_base": f"{url}/v1", "api_key_env": "JUDGE_A_KEY",
             "mode": "tools", "batch": batch, "batch_poll_s": 0.05}]}

    def run(url: str, out: Path, batch: bool) -> Results:
        return asyncio.run(api.run_async(api.prepare(DATA / "cases.jsonl", config(url, batch)), out, n_boot=0))

    def calls(out: Path) -> dict[str, StoredCall]:
        with Store.open_existing(out, read_only=True) as store:
            return {c.request_hash: c for c in store.calls()}

    with FakeServer(FakeConfig(seed=3)) as srv:
        run(srv.url, tmp_path / "live", False)
        run(srv.url, tmp_path / "b", True)          # submitted
        second = run(srv.url, tmp_path / "b", True)  # collected
    live, got = calls(tmp_path / "live"), calls(tmp_path / "b")
    assert set(got) == set(live) and len(got) == 3 * 2
    assert all(c.status == "ok" and c.judgment == live[h].judgment for h, c in got.items())
    assert {c.status for c in second.consensus} == {"ok"}
    items = all_present(c.judgment for c in got.values() if c.dimension == "items")
    assert sorted(len(j.verdicts) for j in items) == [2, 3, 3]


# --------------------------------------------------------------------------- reliability through the pipeline


def _stored_run(rubric: Rubric, cases: list[Case], judgments: dict[tuple[str, str, str], Judgment],
                judges: list[str]) -> StoredRun:
    from consensus_eval.domain.config import EvalConfig
    from consensus_eval.execution.stored_run import StoredRun

    config = EvalConfig.model_validate({"rubric": rubric.id, "judges": [
        {"name": j, "model": f"openai/{j}"} for j in judges]})
    records = [_rec(c, j, d, judgment) for (c, j, d), judgment in judgments.items()]
    return StoredRun(rubric=rubric, config=config, cases=cases, invalid_lines=[], records=records,
                     scores=derive_all(rubric, records, cases), planned=len(records), missing={})


def test_ordinal_alpha_of_a_likert_dimension_is_krippendorffs_published_example() -> None:
    # Krippendorff (2011): 4 coders x 12 units, values 1-5 with gaps; ordinal alpha 0.815. Coders are judges,
    # units are cases, each value the level a judge picked on a 1-5 likert attribute.
    from consensus_eval.analysis.consensus import of_run
    from consensus_eval.analysis.reliability import reliability_report
    from tests.test_reliability import EXAMPLE, PUBLISHED

    rubric = load_rubric(LIKERT)
    judges = ["c1", "c2", "c3", "c4"]
    cases = [Case(id=f"u{i:02d}", conversation="x", record="y") for i in range(EXAMPLE.shape[1])]
    judgments = {}
    for jj, j in enumerate(judges):
        for i, case in enumerate(cases):
            if not math.isnan(EXAMPLE[jj, i]):
                judgments[(case.id, j, "accurate")] = Judgment(dimension="accurate", rating=int(EXAMPLE[jj, i]))
    run = _stored_run(rubric, cases, judgments, judges)
    rel = reliability_report(run, of_run(run), n_boot=0)
    a = rel.across_judges["accurate"]
    assert a.value is not None
    assert a.level == "ordinal" and round(a.value, 3) == PUBLISHED["ordinal"]
    assert (a.n_units, a.n_values, a.n_raters) == (11, 40, 4)


def test_nominal_alpha_of_criteria_verdicts_is_the_packages_with_one_unit_per_case_and_criterion() -> None:
    from consensus_eval.analysis.consensus import of_run
    from consensus_eval.analysis.reliability import reliability_report

    rubric = load_rubric(CHECKS)
    cases = _cases()
    judges = ["a", "b", "c"]
    rng = random.Random(4)
    judgments: dict[tuple[str, str, str], Judgment] = {}
    expected: list[list[float]] = [[] for _ in judges]   # rows: judges; columns: (case, criterion) in order
    for case in cases:
        truth = {k.id: rng.random() < 0.5 for k in _criteria(case)}
        for jj, j in enumerate(judges):
            met = {k: (v if rng.random() < 0.8 else not v) for k, v in truth.items()}
            skip = jj == 2 and case.id == "c3"       # judge c failed on c3: its units have a missing value
            if not skip:
                judgments[(case.id, j, "items")] = Judgment(dimension="items", verdicts=_verdicts(**met))
            expected[jj] += [math.nan if skip else float(met[k.id]) for k in _criteria(case)]
    run = _stored_run(rubric, cases, judgments, judges)
    rel = reliability_report(run, of_run(run), n_boot=0)
    a = rel.across_judges["items"]
    theirs = krippendorff.alpha(reliability_data=np.array(expected), level_of_measurement="nominal")
    assert a.level == "nominal" and a.n_units == 2 + 3 + 3
    assert a.value == pytest.approx(theirs, abs=1e-12)
