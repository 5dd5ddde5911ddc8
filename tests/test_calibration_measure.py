"""Calibration measured (docs/calibration.md): the rules judge on the built-in suite, offline; LLM judges against
the local fake server (an oracle, a random judge, a judge quoting text the case does not have); the
`calibrate` command (dry run, outputs)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from consensus_eval import api
from consensus_eval.analysis.calibration import PANEL, CalibrationReport, calibrate
from consensus_eval.analysis.intervals import wilson
from consensus_eval.analysis.results import Results
from consensus_eval.cli import app
from consensus_eval.domain.calibration.generator import builtin_suite
from consensus_eval.domain.calibration.suite import PlantedError, PlantedSpan, SuiteCase
from consensus_eval.domain.grounding import ground
from consensus_eval.domain.kinds import Deductions, of_kind
from consensus_eval.domain.rubric import Rubric, load_rubric
from consensus_eval.output.report import write_reports
from consensus_eval.output.report.calibration_blocks import calibration_block
from consensus_eval.output.report.i18n import messages
from consensus_eval.output.trust_console import print_block
from tests.conftest import write_config
from tests.fake_server import FakeConfig, FakeServer
from tests.helpers import present

RULES = "  - name: rules\n    kind: rules\n"


@pytest.fixture(scope="module")
def rules_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Results, CalibrationReport]:
    out = tmp_path_factory.mktemp("cal")
    cfg = write_config(out / "rules.yaml", RULES, consensus="{min_judges: 1}")
    prep = api.prepare_calibration(cfg)
    results, report = api._sync(api.calibrate_async(prep, out / "run", n_boot=0))
    return out / "run", results, report


def test_rules_judge_on_the_builtin_suite(rules_run: tuple[Path, Results, CalibrationReport]) -> None:
    out, _, rep = rules_run
    assert rep.planted >= 300 and rep.clean == 160  # 40 base records in 4 heading styles
    rules = rep.judges["rules"]
    # no false alarm on a clean control (the rules judge of commit 9917ef2 reads the 7 deductions it put
    # on 3 of the 40 bases before, base-15, 31 and 37, as the records say)
    assert rules.clean_cases == 160 and rules.false_alarms_per_case == 0
    # the types it covers: sane recall
    cats = {k: v.found.value for k, v in rules.by_category.items()}
    for cat in ("terminology", "time_expression", "chief_complaint", "drug_writing", "diabetes_in_past_history"):
        found = cats[cat]
        assert found is not None and found >= 0.9, (cat, found)
    # family history: fh_other_missing reads hypertension, coronary disease and stroke, not a relative's gout
    # or hypothyroidism (32 of 36 found; base-31's 甲减 was "found" by a false fh_diabetes_missing before 9917ef2)
    assert cats["family_history"] is not None and cats["family_history"] >= 0.85, cats["family_history"]
    # numbers: value_wrong_time plants a value the conversation does give, for another time point (7 of 13 found by
    # the rules judge of commit 8785da3, 5 of 13 before its time-point rules)
    assert cats["numbers"] is not None and cats["numbers"] >= 0.75, cats["numbers"]
    # diagnosis: negated_history_affirmed writes a comorbidity the patient denies as present (13 of 13 found by the
    # rules of rules2 part 2, which read the conversation's denials: 没有高血压, 心脏没事, a bare 都没有; 0 before)
    assert cats["diagnosis"] is not None and cats["diagnosis"] >= 0.9, cats["diagnosis"]
    assert present(cats["drugs"]) >= 0.7
    # course: a finding or habit denied written as present, a symptom nobody mentioned, the wrong side or limbs
    # (44 of 57; the fact_error operator, 加用 -> 停用 and 控制不佳 -> 控制良好, is not read: 0 of 13)
    assert cats["course"] is not None and 0.7 <= cats["course"] < 1, cats["course"]
    assert 0.6 < present(rules.overall.found.value) < 1
    assert present(rules.precision.value) > 0.85
    assert all(e.mae is not None and e.mae < 1.5 for e in rules.score_error.values())
    # one judge: the panel is that judge
    assert rep.judges[PANEL].overall.found.k == rules.overall.found.k
    saved = json.loads((out / "calibration.json").read_text(encoding="utf-8"))
    assert saved["judges"]["rules"]["by_type"]["dose_error"]["found"]["n"] >= 8
    assert "time_unclear" in saved["unplantable"]
    assert (out / "suite.jsonl").read_text(encoding="utf-8").count("\n") == rep.suite_cases
    assert any(line.startswith("rules misses") for line in rep.recommendation)
    # the reports carry the calibration section (in the rubric's language: Chinese), once, however often rebuilt
    md = (out / "report.md").read_text(encoding="utf-8")
    html = (out / "report.html").read_text(encoding="utf-8")
    assert md.count("## 校准：植入错误的检出") == 1 and "| 剂量错误 (dose\\_error) |" in md
    assert "这是对合成植入错误的检出率" in md and "不同改动" in md
    assert html.count('<section id="calibration" class="trust">') == 1
    assert html.index('id="calibration"') < html.rindex("</body>") and 'href="#calibration"' in html
    assert 'style="background:rgb(' in html  # recall cells shaded
    write_reports(results_of(out), out)
    assert (out / "report.md").read_text(encoding="utf-8").count("## 校准") == 1


def results_of(out: Path) -> Results:
    return api.load_run(out, replies=False)


def test_resume_makes_no_new_call(rules_run: tuple[Path, Results, CalibrationReport]) -> None:
    out, _, _ = rules_run
    prep = api.prepare_calibration(out.parent / "rules.yaml")
    again, _ = api._sync(api.calibrate_async(prep, out, n_boot=0))
    assert again.progress is not None and again.progress.done == 0


# --------------------------------------------------------------------------- fake LLM judges


ABSENT = "患者否认任何不适，血糖控制理想，无需调整治疗"


def _small_suite() -> list[SuiteCase]:
    """A dozen single-error cases (record and conversation spans, a fixed penalty) and 3 clean controls."""
    suite = builtin_suite()
    picked: list[SuiteCase] = []
    seen: set[str] = set()
    for sc in suite:
        if len(sc.expected) == 1 and sc.expected[0].type not in seen and len(seen) < 14:
            seen.add(sc.expected[0].type)
            picked.append(sc)
    return picked + [c for c in suite if c.clean][:3]


def _whole(sc: SuiteCase) -> PlantedSpan:
    from consensus_eval.domain.calibration.suite import PlantedSpan

    return PlantedSpan(source="record", start=0, end=len(sc.case.record), text=sc.case.record)


def _deduction(e: PlantedError, category: str, evidence: str) -> dict[str, Any]:
    return {"category": category, "type": e.type, "points": e.points, "evidence": evidence, "reason": "fake"}


def _reply(items: list[dict[str, Any]], penalties: list[dict[str, Any]]) -> dict[str, Any]:
    return {"deductions": items, "fixed_penalties": penalties, "score": 0, "stars": 1, "comment": "fake"}


def _scripts(suite: list[SuiteCase], rubric: Rubric) -> tuple[dict[str, dict[str, dict[str, Any]]], int]:
    """Replies of the oracle (finds every planted error), the random judge (the planted text, in a
    category drawn at random among the dimension's) and the liar (right category, absent quote);
    and how many of the random judge's draws hit the right category."""
    rng = random.Random(5)
    scripts: dict[str, dict[str, dict[str, Any]]] = {}
    lucky = 0
    for sc in suite:
        for model in ("oracle", "random", "liar", "whole", "side"):
            per_dim = {}
            for dim in rubric.dimensions:
                items, pens = [], []
                if model == "whole":  # deducts in every category, quoting the whole record, on every case
                    items = [_deduction(PlantedError(dimension=dim.id, category=cat.id, type=cat.types[0].id,
                                                     points=cat.types[0].low, spans=[_whole(sc)]),
                                        cat.id, sc.case.record) for cat in of_kind(dim, Deductions).categories]
                    per_dim[dim.id] = _reply(items, [])
                    continue
                for e in (x for x in sc.expected if x.dimension == dim.id):
                    if model == "side":  # the other side of the error: the conversation's correct value
                        quote = (e.also or e.spans)[0].text
                        if e.penalty:
                            pens.append({"id": e.type, "evidence": quote, "reason": "fake"})
                        else:
                            items.append(_deduction(e, e.category, quote))
                        continue
                    quote = e.spans[0].text
                    if e.penalty:
                        pens.append({"id": e.type, "evidence": ABSENT if model == "liar" else quote, "reason": "fake"})
                        continue
                    if model == "random":
                        cat = rng.choice(of_kind(dim, Deductions).categories)
                        typ = cat.types[0]
                        lucky += cat.id == e.category
                        items.append({"category": cat.id, "type": typ.id, "points": typ.low, "evidence": quote,
                                      "reason": "fake"})
                    else:
                        items.append(_deduction(e, e.category, ABSENT if model == "liar" else quote))
                per_dim[dim.id] = _reply(items, pens)
            scripts[f"{model}|{sc.case.id}"] = per_dim
    return scripts, lucky


def test_fake_llm_judges(tmp_path: Path, rubric: Rubric, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = _small_suite()
    scripts, lucky = _scripts(suite, rubric)
    monkeypatch.setenv("FAKE_KEY", "sk-fake-0000")
    with FakeServer(FakeConfig(seed=1, replies=scripts, fault_free_after=1)) as srv:
        judges = "".join(
            f"  - name: {m}\n    model: openai/{m}\n    api_base: {srv.url}/v1\n    api_key_env: FAKE_KEY\n"
            f"    mode: tools\n    concurrency: 4\n    input_cost_per_token: 0.000001\n"
            f"    output_cost_per_token: 0.000002\n" for m in ("oracle", "random", "liar", "whole", "side"))
        cfg = write_config(tmp_path / "fake.yaml", judges, consensus="{min_judges: 2}", runs=2)
        prep = api.prepare([sc.case for sc in suite], cfg)
        results = api.run(prep, tmp_path / "run", n_boot=0)
    rep = calibrate(suite, results, ground)
    n = sum(len(sc.expected) for sc in suite)
    oracle, rnd, liar = rep.judges["oracle"], rep.judges["random"], rep.judges["liar"]
    # the oracle: recall 1 with the Wilson interval of n / n
    assert (oracle.overall.found.k, oracle.overall.found.n) == (n, n)
    assert (oracle.overall.found.low, oracle.overall.found.high) == pytest.approx(wilson(n, n))
    assert oracle.overall.type_match.k == n
    assert oracle.false_alarms_per_case == 0 and oracle.precision.value == 1
    assert all(e.mae == 0 for e in oracle.score_error.values())
    # two runs, the same replies: stable
    assert oracle.runs_recall == [1.0, 1.0] and oracle.consistent is not None and oracle.consistent.value == 1
    console = Console(record=True, width=200)
    print_block(console, calibration_block(rep, messages("en"), rubric))
    text = " ".join(console.export_text().split())
    assert f"Stability of oracle: recall per run 100%, 100%; the same verdict in every run on {n}/{n}" in text
    assert "whole is not named best" in text and "type matched" in text and "weighted by points" in text
    # the random judge: found exactly when its category draw hit (chance: 1/5 per error here)
    n_random = sum(1 for sc in suite for e in sc.expected if not e.penalty)
    n_pen = n - n_random
    assert rnd.overall.found.k == lucky + n_pen
    chance = (n_random / 5 + n_pen) / n
    assert rnd.overall.found.low is not None and rnd.overall.found.high is not None
    assert rnd.overall.found.low <= chance <= rnd.overall.found.high
    # the liar: right category and type, a quote the case does not have: no credit
    assert liar.overall.found.k == 0 and liar.overall.found.high == pytest.approx(wilson(0, n)[1])
    # a judge deducting in every category and quoting the whole record: no recall, every deduction a false alarm
    whole = rep.judges["whole"]
    n_cats = sum(len(of_kind(d, Deductions).categories) for d in rubric.dimensions)
    # (a quote may be no longer than the line the error is on plus 20 characters: base-03's 现病史, 190 of its
    # 270 characters, is the section an omission left a fact out of, and the whole record still earns nothing)
    assert whole.overall.found.k == 0 and whole.overall.found.n == n
    assert whole.false_alarms_per_case == n_cats and whole.precision.k == 0
    assert "whole" in rep.not_best
    # quoting the conversation's statement of the fact (either side of the error) finds it
    side = rep.judges["side"]
    assert sum(bool(e.also) for sc in suite for e in sc.expected) >= 5
    assert side.overall.found.k == n and side.precision.value == 1
    # the panel (2 of 5): oracle and side find everything; on clean records only the whole-record judge deducts
    # (no quorum: no panel false alarm); on planted ones it agrees with the random judge's wrong categories
    panel = rep.judges[PANEL]
    assert panel.overall.found.k == n and panel.false_alarms_per_case == 0 and panel.clean_cases == 3
    assert panel.precision.value is not None
    assert panel.precision.k >= n - n_pen and 0.5 < panel.precision.value < 1
    assert rep.best_judge == "oracle"
    # cost: every call priced; per error found
    assert oracle.cost is not None and oracle.cost > 0 and oracle.cost_per_found == pytest.approx(oracle.cost / n)


def test_api_calibrate_and_sections(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "rules.yaml", RULES)
    rep = api.calibrate(cfg, out=tmp_path / "o", sample=25, seed=1)
    assert rep.suite_cases == 25 and rep.judges["rules"].runs_recall == []  # one run: no stability figures
    for lang, title in (("en", "Calibration: planted errors found"), ("zh", "校准：植入错误的检出")):
        b = calibration_block(rep, messages(lang), load_rubric("medical_record"))
        assert b.title == title and [tb.header[1:] for tb in b.tables[1:3]] == [["rules", messages(lang)("panel")]] * 2
        assert b.tables[0].rows[0][0] == "rules" and b.tables[0].rows[0][1].endswith(
            f"{rep.judges['rules'].overall.found.k}/{rep.judges['rules'].overall.found.n}")


def test_calibrate_command_dry_run_and_run(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "rules.yaml", RULES)
    r = CliRunner().invoke(app, ["calibrate", "--config", str(cfg), "--out", str(tmp_path / "o"), "--dry-run",
                                 "--sample", "30", "--seed", "3", "--lang", "en"])
    assert r.exit_code == 0, r.output
    assert "dry run" in r.output and not (tmp_path / "o" / "calibration.json").exists()
    r = CliRunner().invoke(app, ["calibrate", "--config", str(cfg), "--out", str(tmp_path / "o"),
                                 "--sample", "30", "--seed", "3"])
    assert r.exit_code == 0, r.output
    assert "校准：植入错误的检出" in r.output and "这是对合成植入错误的检出率" in " ".join(r.output.split())
    r = CliRunner().invoke(app, ["calibrate", "--config", str(cfg), "--out", str(tmp_path / "o"),
                                 "--sample", "30", "--seed", "3", "--lang", "en"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "This is recall on synthetic planted errors" in text
    assert "an upper bound for errors that look like theirs" in text
    assert "## Calibration: planted errors found" in (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    assert json.loads((tmp_path / "o" / "calibration.json").read_text(encoding="utf-8"))["suite_cases"] == 30


def test_score_with_a_calibration_file(rules_run: tuple[Path, Results, CalibrationReport], tmp_path: Path) -> None:
    out, _, _ = rules_run
    cfg = write_config(tmp_path / "rules.yaml", RULES)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(sc.case.model_dump(mode="json"), ensure_ascii=False) + "\n"
                             for sc in list(builtin_suite())[:3]), encoding="utf-8")
    r = CliRunner().invoke(app, ["score", str(cases), "--config", str(cfg), "--out", str(tmp_path / "s"),
                                 "--calibration", str(out / "calibration.json")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "s" / "calibration.json").is_file()
    assert "## 校准：植入错误的检出" in (tmp_path / "s" / "report.md").read_text(encoding="utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text('{"judges": 1}', encoding="utf-8")
    r = CliRunner().invoke(app, ["score", str(cases), "--config", str(cfg), "--out", str(tmp_path / "t"),
                                 "--calibration", str(bad)])
    assert r.exit_code == 2 and f"{bad}: not a calibration.json" in r.output
    assert not (tmp_path / "t").exists()


def test_calibrate_command_bad_suite(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "rules.yaml", RULES)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "conversation": "医生：你好", "record": "主诉：口干1年。"}\n', encoding="utf-8")
    r = CliRunner().invoke(app, ["calibrate", "--config", str(cfg), "--out", str(tmp_path / "o"), "--suite", str(bad)])
    assert r.exit_code == 2 and f"{bad}:1: expected: missing" in r.output


def test_failed_calls_are_unjudged_not_missed(tmp_path: Path, rubric: Rubric, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = _small_suite()[:6]
    scripts, _ = _scripts(suite, rubric)
    bad = {"deductions": [{"category": "numbers", "type": "no_such_type", "points": 1, "evidence": "x",
                           "reason": "x"}], "fixed_penalties": [], "score": 1, "stars": 1, "comment": "x"}
    for sc in suite:
        scripts[f"broken|{sc.case.id}"] = {d.id: bad for d in rubric.dimensions}
    monkeypatch.setenv("FAKE_KEY", "sk-fake-0000")
    with FakeServer(FakeConfig(seed=1, replies=scripts, fault_free_after=1)) as srv:
        judges = "".join(
            f"  - name: {m}\n    model: openai/{m}\n    api_base: {srv.url}/v1\n    api_key_env: FAKE_KEY\n"
            f"    mode: tools\n    max_reasks: 0\n    input_cost_per_token: 0.000001\n"
            f"    output_cost_per_token: 0.000002\n" for m in ("oracle", "broken"))
        cfg = write_config(tmp_path / "fake.yaml", judges, consensus="{min_judges: 2}")
        results = api.run(api.prepare([sc.case for sc in suite], cfg), tmp_path / "run", n_boot=0)
    rep = calibrate(suite, results, ground)
    n = sum(len(sc.expected) for sc in suite)
    assert rep.judges["broken"].unjudged == n and rep.judges["broken"].overall.found.n == 0
    assert rep.judges["broken"].overall.found.value is None
    assert rep.judges["oracle"].overall.found.k == n
    # a quorum of 2 with one judge answering: the panel has no verdict, it did not miss
    assert rep.judges[PANEL].unjudged == n and rep.judges[PANEL].overall.found.n == 0
    assert rep.best_judge == "oracle"


def test_the_best_judge_is_not_chosen_on_recall_alone() -> None:
    """Recall alone would name a judge that fails where it would miss, or one that deducts everywhere."""
    from consensus_eval.analysis.calibration import JudgeCalibration, Recall, choose_best, recommend
    from consensus_eval.analysis.intervals import Share, share

    def proportion(k: int, n: int) -> Share:
        return share([("base", 1.0)] * k + [("base", 0.0)] * (n - k))

    def judge(name: str, found: int, n: int, unjudged: int, false_alarms: float,
              prec: tuple[int, int]) -> JudgeCalibration:
        return JudgeCalibration(name=name, overall=Recall(found=proportion(found, n), type_match=proportion(found, n)),
                                by_type={}, by_category={}, unjudged=unjudged, clean_cases=12,
                                false_alarms_per_case=false_alarms, clean_flagged=proportion(0, 12),
                                precision=proportion(*prec), score_error={})

    judges = {
        "flaky": judge("flaky", 90, 90, 10, 0.1, (90, 95)),         # 100% of what it judged; failed on 10 of 100
        "greedy": judge("greedy", 95, 100, 0, 3.0, (95, 140)),      # 3 false alarms per clean record
        "imprecise": judge("imprecise", 90, 100, 0, 0.5, (28, 100)),
        "honest": judge("honest", 70, 100, 2, 0.2, (70, 80)),       # 2% unjudged: within 5%
    }
    best, why = choose_best(judges)
    assert best == "honest"
    assert set(why) == {"flaky", "greedy", "imprecise"}
    from consensus_eval.analysis.calibration import not_best_text

    assert [why[j].reason for j in ("flaky", "greedy", "imprecise")] == ["unjudged", "false_alarms", "precision"]
    assert "failed on 10 of 100" in not_best_text(why["flaky"]) and "3.0 false alarms" in not_best_text(why["greedy"])
    assert "28%" in not_best_text(why["imprecise"])
    from consensus_eval.analysis.calibration import CalibrationReport

    rep = CalibrationReport(suite_cases=1, planted=1, clean=0, errors=100, quorum=2, judges=judges, best_judge=best,
                            panel_gain=None, not_best={j: not_best_text(nb) for j, nb in why.items()}, not_best_why=why)
    text = " ".join(recommend(rep))
    assert "recall on synthetic planted errors 70%" in text and "an upper bound" in text
    assert "flaky: 10 planted error(s) unjudged" in text and "flaky is not named best" in text
