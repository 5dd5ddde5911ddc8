"""The ``simulated`` judge (docs/judges.md), a demo device for trying the tool offline. Seeded personas read the
case itself and return the typed judgment an LLM would, for every rubric kind; the offline example configs score
the bundled examples of all three kinds with a panel, and every output labels the judges simulated."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from consensus_eval import api
from consensus_eval._errors import InputError
from consensus_eval.domain.cases import Case, load_cases
from consensus_eval.domain.config import EvalConfig, SimulatedJudgeConfig, load_config
from consensus_eval.domain.grounding import ground
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.kinds import Deductions
from consensus_eval.domain.rubric import Rubric, load_rubric
from consensus_eval.domain.scoring import criteria_of, derive
from consensus_eval.judges import build_judge
from consensus_eval.judges.simulated import PERSONAS, SimulatedJudge, read_case
from consensus_eval.output.console import print_summary
from tests.conftest import ROOT

KINDS = ROOT / "tests" / "data" / "kinds"
#: (rubric, cases) of every rubric the repository has: the three bundled ones and the three written by a newcomer
SETS = {
    "medical_record": ("medical_record", ROOT / "examples" / "cases.jsonl"),
    "pdqi9": ("pdqi9", ROOT / "examples" / "pdqi9" / "cases.jsonl"),
    "criteria": ("criteria", ROOT / "examples" / "criteria" / "cases.jsonl"),
    **{n: (str(KINDS / f"{n}.yaml"), KINDS / f"{n}_cases.jsonl") for n in ("radiology", "discharge5", "checklist")},
}
OFFLINE = {"medical_record": ("examples/cases.jsonl", "configs/offline.yaml"),
           "pdqi9": ("examples/pdqi9/cases.jsonl", "configs/pdqi9.offline.yaml"),
           "criteria": ("examples/criteria/cases.jsonl", "configs/criteria.offline.yaml")}


def _judge(rubric: Rubric, persona: str = "strict", seed: int = 0) -> SimulatedJudge:
    judge = build_judge(SimulatedJudgeConfig.model_validate({"name": persona, "persona": persona, "seed": seed}),
                        rubric)
    assert isinstance(judge, SimulatedJudge)
    return judge


def _all(judge: SimulatedJudge, rubric: Rubric, cases: list[Case], run: int = 0) -> list[Judgment]:
    return [judge.judgment(c, d, run) for c in cases for d in rubric.dimensions]


def _score(rubric: Rubric, case: Case, j: Judgment) -> float:
    dim = rubric.dimension(j.dimension)
    return derive(dim, j, criteria_of(dim, case.criteria) if dim.kind == "criteria" else None).score


# --------------------------------------------------------------------------- the config


def test_the_kind_is_configured_with_a_persona_and_a_seed() -> None:
    cfg = EvalConfig.model_validate({"rubric": "pdqi9", "judges": [
        {"name": "a", "kind": "simulated", "persona": "lenient", "seed": 3}, {"name": "b", "kind": "simulated"}]})
    a, b = cfg.judges
    assert isinstance(a, SimulatedJudgeConfig) and (a.persona, a.seed) == ("lenient", 3)
    assert isinstance(b, SimulatedJudgeConfig) and (b.persona, b.seed) == ("strict", 0)
    assert cfg.simulated_judges == ["a", "b"]
    # persona and seed change the answers: they are in the identity (and so in every request hash)
    ids = {SimulatedJudgeConfig.model_validate({"name": "x", "persona": p, "seed": s}).identity
           for p in PERSONAS for s in (0, 1)}
    assert len(ids) == 2 * len(PERSONAS)
    with pytest.raises(ValueError, match="persona"):
        EvalConfig.model_validate({"judges": [{"name": "a", "kind": "simulated", "persona": "grumpy"}]})
    with pytest.raises(ValueError, match="model"):
        EvalConfig.model_validate({"judges": [{"name": "a", "kind": "simulated", "model": "openai/x"}]})


# --------------------------------------------------------------------------- what a persona answers


@pytest.mark.parametrize("name", list(SETS))
def test_every_persona_answers_every_kind_with_a_valid_judgment_quoting_the_case(name: str) -> None:
    ref, cases_path = SETS[name]
    rubric, cases = load_rubric(ref), load_cases(cases_path).cases
    for persona in PERSONAS:
        judge = _judge(rubric, persona)
        for case in cases:
            for dim in rubric.dimensions:
                j = judge.judgment(case, dim)
                score = _score(rubric, case, j)          # the scoring takes it like any judge's
                assert dim.low <= score <= dim.max
                assert "simulated" in j.comment
                conversation = rubric.conversation_text(case)
                quotes = [d.evidence for d in j.deductions] + list(j.evidence) + [v.evidence for v in j.verdicts]
                for q in filter(None, quotes):                 # every quote is the case's own text
                    assert ground(q, case.record, conversation).grounded, (persona, case.id, q)


def test_the_same_seed_gives_the_same_answers_and_runs_differ_a_little() -> None:
    rubric = load_rubric("pdqi9")
    cases = load_cases(SETS["pdqi9"][1]).cases
    first = [j.model_dump() for j in _all(_judge(rubric, "strict", 7), rubric, cases)]
    again = [j.model_dump() for j in _all(_judge(rubric, "strict", 7), rubric, cases)]
    other_seed = [j.model_dump() for j in _all(_judge(rubric, "strict", 8), rubric, cases)]
    other_run = [j.model_dump() for j in _all(_judge(rubric, "strict", 7), rubric, cases, run=1)]
    assert first == again
    assert first != other_seed and first != other_run
    # a little: most ratings stay where they were
    same = sum(a["rating"] == b["rating"] for a, b in zip(first, other_run, strict=True))
    assert same >= 0.6 * len(first)


def test_outcomes_are_free_offline_and_named() -> None:
    rubric = load_rubric("medical_record")
    case = load_cases(SETS["medical_record"][1]).cases[1]
    judge = _judge(rubric, "lenient")
    outcome = asyncio.run(judge.judge(case, rubric.dimensions[0], [], 0))
    assert (outcome.status, outcome.model, outcome.cost, outcome.prompt_tokens) == ("ok", "simulated/lenient", 0.0, 0)
    assert not judge.reads_prompt and judge.count_tokens([{"role": "user", "content": "x"}]) == 0
    ok, line = asyncio.run(judge.check())
    assert ok and "simulated" in line


def test_personas_differ_as_documented_on_the_medical_records() -> None:
    rubric = load_rubric("medical_record")
    cases = load_cases(SETS["medical_record"][1]).cases
    made = {p: _all(_judge(rubric, p, seed=1), rubric, cases) for p in PERSONAS}
    lost = {p: sum(d.points for j in js for d in j.deductions) for p, js in made.items()}
    count = {p: sum(len(j.deductions) for j in js) for p, js in made.items()}
    assert lost["strict"] > lost["lenient"]                  # strict takes more off than lenient
    assert count["over_calls"] > count["strict"]             # over-calls: false alarms on top
    # misses_category never deducts in its one blind category of each dimension, which the others do use
    judge = _judge(rubric, "misses_category", seed=1)
    for dim in rubric.dimensions_of(Deductions):
        blind = judge._blind_category(dim)
        assert blind in dim.categories_by_id
        assert not any(d.category == blind for j in made["misses_category"] if j.dimension == dim.id
                       for d in j.deductions)
    # the rules judge's fixed penalty (diabetes written into past history, case-04 and case-11) is seen by strict
    strict = {(c.id, j.dimension): j for c, j in zip([c for c in cases for _ in rubric.dimensions],
                                                     made["strict"], strict=True)}
    assert strict[("case-04", "accuracy")].fixed_penalties and strict[("case-11", "accuracy")].fixed_penalties
    assert not strict[("case-01", "accuracy")].fixed_penalties


def test_a_deductions_rubric_without_rules_is_read_from_the_case_text() -> None:
    # radiology (no rules registered): a measurement the dictation never gives is a "wrong" finding, deducted as
    # the rubric's type of errors, quoting the record's sentence; the same record with the dictated value is not
    rubric = load_rubric(KINDS / "radiology.yaml")
    dictation = ("CT abdomen. Findings: the appendix is dilated to 12 millimeters. No abscess. "
                 "Impression: acute appendicitis.")
    good = Case(id="g", conversation=dictation,
                record="Findings: Dilated appendix measuring 12 mm. No abscess.\nImpression: Acute appendicitis.")
    bad = good.model_copy(update={"id": "b", "record": good.record.replace("12 mm", "19 mm")})
    judge = _judge(rubric, "strict")
    findings = rubric.dimension("findings")
    assert [f.signal for f in read_case(bad, rubric).findings].count("wrong") == 1
    assert not [f for f in read_case(good, rubric).findings if f.signal == "wrong"]
    got = judge.judgment(bad, findings)
    assert [d.evidence for d in got.deductions if d.category == "errors"] == ["Findings: Dilated appendix measuring "
                                                                              "19 mm"]
    # and the dictated 12 mm is now missing from the record: an omission, quoting the dictation
    assert [d.evidence for d in got.deductions if d.category == "omissions"] == [
        "Findings: the appendix is dilated to 12 millimeters"]
    assert not judge.judgment(good, findings).deductions
    assert _score(rubric, bad, got) < _score(rubric, good, judge.judgment(good, findings))


def test_a_likert_rating_follows_what_the_note_gets_wrong() -> None:
    rubric = load_rubric("pdqi9")
    case = next(c for c in load_cases(SETS["pdqi9"][1]).cases if c.id == "pdqi9-01")    # a good note
    wrong = case.model_copy(update={"record": re.sub(r"\d+", lambda m: str(int(m.group()) + 7), case.record)})
    accurate = rubric.dimension("accurate")
    for persona in ("strict", "lenient"):
        judge = _judge(rubric, persona)
        ratings = [(judge.judgment(case, accurate, r).rating, judge.judgment(wrong, accurate, r).rating)
                   for r in range(5)]
        assert all(w is not None and g is not None and w < g for g, w in ratings), (persona, ratings)


def test_a_criterion_is_met_when_the_record_says_it_and_a_fault_when_it_is_written_there() -> None:
    rubric = load_rubric("criteria")
    case = Case.model_validate({
        "id": "c", "conversation": "Doctor: Your right ankle is sprained. Take ibuprofen 600 mg.\nPatient: OK.",
        "record": "Assessment: Sprain of the left ankle.\nPlan: Ibuprofen 600 mg.",
        "criteria": [{"id": "dose", "text": "States ibuprofen 600 mg.", "points": 3},
                     {"id": "xray", "text": "Orders an ankle radiograph.", "points": 3},
                     {"id": "wrong_side", "text": "Documents the sprain on the left ankle.", "points": -5}]})
    dim = rubric.dimension("case_criteria")
    verdicts = {v.id: v for v in _judge(rubric, "strict").judgment(case, dim).verdicts}
    assert verdicts["dose"].met and verdicts["dose"].evidence == "Plan: Ibuprofen 600 mg"
    assert not verdicts["xray"].met and verdicts["xray"].evidence == ""
    assert verdicts["wrong_side"].met and "left ankle" in verdicts["wrong_side"].evidence
    # the persona that misses a category never sees a fault
    assert not {v.id: v for v in _judge(rubric, "misses_category").judgment(case, dim).verdicts}["wrong_side"].met


# --------------------------------------------------------------------------- the offline panels, end to end


@pytest.fixture(scope="module")
def offline_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("offline")
    out = {}
    for name, (cases, config) in OFFLINE.items():
        out[name] = base / name
        api.run(api.prepare(ROOT / cases, ROOT / config), out[name], n_boot=200)
    return out


@pytest.mark.parametrize("name", list(OFFLINE))
def test_the_bundled_examples_score_offline_with_a_panel_labelled_simulated(offline_runs: dict[str, Path],
                                                                           name: str) -> None:
    run = offline_runs[name]
    cfg = load_config(ROOT / OFFLINE[name][1])
    assert len(cfg.simulated_judges) >= 3
    reliability = json.loads((run / "reliability.json").read_text(encoding="utf-8"))
    assert reliability["simulated"] == cfg.simulated_judges
    total = reliability["across_judges"]["total"]
    assert total["value"] is not None and total["ci"] is not None          # alpha, with its interval
    results = api.load_run(run, n_boot=0)
    assert any(c.flagged for c in results.consensus)                       # flagged cases
    assert any(a.needs_review for a in results.audit)                      # a review queue
    md = (run / "report.md").read_text(encoding="utf-8")
    html = (run / "report.html").read_text(encoding="utf-8")
    first_screen = md.split("\n## ", 1)[0].replace("\\_", "_")   # Markdown escapes the _ of names
    assert "simulated" in first_screen and all(j in first_screen for j in cfg.simulated_judges)
    assert 'id="simulated"' in html and html.index('id="simulated"') < html.index('id="review"')
    console = Console(record=True, width=100)
    print_summary(console, results, run)
    assert "simulated" in console.export_text()


def test_a_panel_without_simulated_judges_says_nothing_of_them(tmp_path: Path) -> None:
    api.run(api.prepare(ROOT / "examples" / "cases.jsonl", ROOT / "configs" / "default.yaml"), tmp_path, n_boot=0)
    assert "simulated" not in json.loads((tmp_path / "reliability.json").read_text(encoding="utf-8"))
    assert 'id="simulated"' not in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_an_unknown_persona_is_a_clear_config_error(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("rubric: pdqi9\njudges:\n  - {name: a, kind: simulated, persona: grumpy}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"judges\[0 a\]\.persona") as ei:
        load_config(p)
    assert "strict" in str(ei.value) and "over_calls" in str(ei.value)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_review_app_says_which_judges_are_simulated_on_every_page(offline_runs: dict[str, Path],
                                                                      lang: str) -> None:
    from consensus_eval.review import ReviewRun
    from tests.helpers import review_client

    review = ReviewRun.open(offline_runs["pdqi9"])
    client, _ = review_client(review, "ana", lang=lang)
    for page in ("/", "/?scope=all", "/case/1", "/reviewer"):
        html = client.get(page).text
        notice = html.split('id="simulated">', 1)[1].split("</p>", 1)[0]
        assert "simulated" in notice and "strict, lenient, misses, over_calls" in notice, page
        assert ("模拟评审" in notice) == (lang == "zh")
