"""The rubrics of each kind as content (docs/rubrics.md): the shipped pdqi9 (likert) and criteria (per-case
criteria) rubrics with their English examples, and the test-only rubrics of tests/data/kinds/ written from the
README and docs/rubrics.md alone (a radiology deductions rubric, a 5-attribute likert instrument, a criteria set
given in the rubric). Every rubric loads, every template renders for every case and dimension and shows the
case, the criteria and the anchors; the documented commands run; no CJK character in an English rubric's files."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from consensus_eval.cli import app
from consensus_eval.domain.cases import Case, load_cases
from consensus_eval.domain.config import LLMJudgeConfig, load_config
from consensus_eval.domain.judgment import CriterionVerdict, Deduction, Judgment, PenaltyHit
from consensus_eval.domain.kinds import Criteria, Deductions, Likert, of_kind
from consensus_eval.domain.prompts import render, render_case
from consensus_eval.domain.rubric import Dimension, Rubric, load_rubric
from consensus_eval.domain.scoring import criteria_of, derive
from consensus_eval.domain.sections import Sections, fold_width
from tests.conftest import FAKE_KEY, ROOT
from tests.fake_server import FakeConfig, FakeServer

KINDS = ROOT / "tests" / "data" / "kinds"


@dataclass(frozen=True)
class Set:
    """A rubric with its prompts folder, its cases and a config that uses it."""

    rubric: str
    prompts_dir: Path | None
    cases: Path
    config: Path
    kinds: frozenset[str]

    def load(self) -> tuple[Rubric, list[Case]]:
        return load_rubric(ROOT / self.rubric), load_cases(self.cases).cases


SETS = {
    "pdqi9": Set("configs/rubrics/pdqi9.yaml", None, ROOT / "examples/pdqi9/cases.jsonl",
                 ROOT / "configs/pdqi9.example.yaml", frozenset({"likert"})),
    "criteria": Set("configs/rubrics/criteria.yaml", None, ROOT / "examples/criteria/cases.jsonl",
                    ROOT / "configs/criteria.example.yaml", frozenset({"criteria"})),
    **{name: Set(f"tests/data/kinds/{name}.yaml", KINDS / "prompts", KINDS / f"{name}_cases.jsonl",
                 KINDS / f"{name}.config.yaml", frozenset({kind}))
       for name, kind in (("radiology", "deductions"), ("discharge5", "likert"), ("checklist", "criteria"))},
}

#: Chinese, Japanese and Korean characters, and the full-width forms and punctuation that come with them
CJK = re.compile(r"[\u2e80-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
                 r"\ufe30-\ufe4f\uff00-\uffef]")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _case_texts(case: Case) -> list[str]:
    """What of a case its prompt must show: the record and every turn's text (or the conversation text)."""
    turns = [case.conversation] if isinstance(case.conversation, str) else [t.text for t in case.conversation]
    return [case.record, *turns]


# --------------------------------------------------------------------------- loading


@pytest.mark.parametrize("name", SETS)
def test_every_rubric_and_its_config_load(name: str) -> None:
    s = SETS[name]
    rubric, cases = s.load()
    assert rubric.kinds == s.kinds
    assert rubric.language == "en"
    assert len(cases) == (8 if s.prompts_dir is None else 3)
    config = load_config(s.config)
    assert config.rubric in (s.rubric, rubric.id)
    assert all(isinstance(j, LLMJudgeConfig) for j in config.judges)   # no rules judge for these rubrics
    assert all(isinstance(j, LLMJudgeConfig) and j.api_key_env for j in config.judges)   # keys from the environment


def test_the_test_rubrics_are_of_the_shapes_the_issue_names() -> None:
    radiology = load_rubric(KINDS / "radiology.yaml")
    assert len(radiology.dimensions) == 2
    for d in radiology.dimensions:
        assert d.stars is not None and sum(c.cap for c in of_kind(d, Deductions).categories) == d.max
    likert = load_rubric(KINDS / "discharge5.yaml")
    assert len(likert.dimensions) == 5 and all(of_kind(d, Likert).level_range == (1, 5) for d in likert.dimensions)
    assert likert.max_total == 2 * 5 + 4 * 5                     # `correct` weighs 2
    checklist = load_rubric(KINDS / "checklist.yaml")
    (dim,) = checklist.dimensions
    assert of_kind(dim, Criteria).criteria and any(c.points < 0 for c in of_kind(dim, Criteria).criteria)


def test_pdqi9_is_the_nine_attributes_of_the_instrument() -> None:
    rubric = load_rubric("pdqi9")
    assert [d.name for d in rubric.dimensions] == [
        "Up-to-date", "Accurate", "Thorough", "Useful", "Organized", "Comprehensible", "Succinct", "Synthesized",
        "Internally consistent"]
    for d in rubric.dimensions:
        assert of_kind(d, Likert).level_range == (1, 5) and d.stars is None and d.weight == 1
        assert len(set(d.anchors.values())) == 5                  # an anchor of its own for every level
    assert rubric.max_total == 45
    assert rubric.roles == {"doctor": "Clinician", "patient": "Patient", "family": "Family member"}
    anchors = [a for d in rubric.dimensions for a in d.anchors.values()]
    assert len(set(anchors)) == len(anchors)                     # written per attribute, not copied across


# --------------------------------------------------------------------------- rendering


@pytest.mark.parametrize("name", SETS)
def test_every_template_renders_for_every_case_and_dimension(name: str) -> None:
    s = SETS[name]
    rubric, cases = s.load()
    for case in cases:
        for dim in rubric.dimensions:
            system, user = (m["content"] for m in render(rubric, dim, case, s.prompts_dir))
            assert dim.name in system
            for text in _case_texts(case):
                assert text in user, (case.id, dim.id, text[:60])
            if dim.kind == "criteria":
                for c in criteria_of(dim, case.criteria):
                    assert _one_line(c.text) in system + user, (case.id, c.id)
                    assert c.id in system + user
        system, user = (m["content"] for m in render_case(rubric, case, s.prompts_dir))
        assert all(d.id in system for d in rubric.dimensions)
        for text in _case_texts(case):
            assert text in user
        for dim in rubric.dimensions:
            if dim.kind == "criteria":
                assert all(_one_line(c.text) in system + user for c in criteria_of(dim, case.criteria))


@pytest.mark.parametrize("name", SETS)
def test_the_system_message_is_the_same_for_every_case(name: str) -> None:
    """What every call of a dimension shares comes first (providers' prompt caches): the case, and a case's own
    criteria, only after the break."""
    s = SETS[name]
    rubric, cases = s.load()
    for dim in rubric.dimensions:
        systems = {render(rubric, dim, c, s.prompts_dir)[0]["content"] for c in cases}
        assert len(systems) == 1, dim.id


def test_the_pdqi9_prompts_carry_every_attributes_anchors() -> None:
    rubric, cases = SETS["pdqi9"].load()
    whole = render_case(rubric, cases[0])[0]["content"]
    for dim in rubric.dimensions:
        system = render(rubric, dim, cases[0])[0]["content"]
        for level, anchor in dim.anchors.items():
            assert f"{level}: {anchor}" in system, (dim.id, level)
            assert f"{level}: {anchor}" in whole, (dim.id, level)
        others = [a for d in rubric.dimensions if d.id != dim.id for a in d.anchors.values()]
        assert not any(a in system for a in others)              # one attribute a call
        assert '"rating"' in system and '"evidence"' in system


def test_the_criteria_prompt_says_what_met_means_for_a_fault() -> None:
    rubric, cases = SETS["criteria"].load()
    dim = rubric.dimensions[0]
    system, user = (m["content"] for m in render(rubric, dim, cases[0]))
    assert "negative points" in system and "fault" in system and '"verdicts"' in system
    for c in cases[0].criteria or []:
        assert f"points: {c.points:+g} | {c.text}" in user         # signed points beside each criterion


def test_the_pdqi9_notes_headings_are_found_from_the_rubric() -> None:
    """The headings are data of the rubric (sections and aliases): every note written with headings has the
    required sections except the one whose planted flaw is no assessment; the one-block note has none."""
    rubric, cases = SETS["pdqi9"].load()
    sections = Sections.of(rubric)
    missing = {}
    for case in cases:
        found = {s.name for s in sections.find(fold_width(case.record)) if s.canonical}
        missing[case.id] = sorted(set(rubric.required_sections) - found)
    assert missing.pop("pdqi9-04") == sorted(rubric.required_sections)
    assert missing.pop("pdqi9-07") == ["Assessment"]
    assert all(m == [] for m in missing.values()), missing


# --------------------------------------------------------------------------- the cases


def test_the_criteria_cases_points_are_valid_and_their_scores_spread() -> None:
    rubric, cases = SETS["criteria"].load()
    (dim,) = rubric.dimensions
    assert of_kind(dim, Criteria).criteria == []                 # every case brings its own
    scores = []
    for case in cases:
        crit = case.criteria or []
        assert 4 <= len(crit) <= 8, case.id
        points = [c.points for c in crit]
        assert all(p == int(p) and p != 0 and -10 <= p <= 10 for p in points), case.id
        assert any(p < 0 for p in points) and any(p > 0 for p in points), case.id
        expected = case.meta["expected"]
        assert set(expected) == {c.id for c in crit}, case.id
        positive = sum(p for p in points if p > 0)
        scores.append(min(1.0, max(0.0, sum(c.points for c in crit if expected[c.id]) / positive)))
    assert min(scores) < 0.3 and max(scores) == 1.0 and len({round(x, 2) for x in scores}) >= 6


def test_the_checklist_cases_are_judged_by_the_rubrics_own_criteria() -> None:
    rubric, cases = SETS["checklist"].load()
    (dim,) = rubric.dimensions
    for case in cases:
        assert case.criteria is None
        own = [c.id for c in of_kind(dim, Criteria).criteria]
        assert [c.id for c in criteria_of(dim, case.criteria)] == own
        assert set(case.meta["expected"]) == {c.id for c in of_kind(dim, Criteria).criteria}


def test_the_pdqi9_cases_plant_flaws_by_attribute() -> None:
    rubric, cases = SETS["pdqi9"].load()
    ids = {d.id for d in rubric.dimensions}
    flawed = [c.id for c in cases if c.meta["flaws"]]
    assert 0 < len(flawed) < len(cases)                          # good notes and flawed ones
    for case in cases:
        for flaw in case.meta["flaws"]:
            assert flaw.split(":", 1)[0] in ids, (case.id, flaw)


# --------------------------------------------------------------------------- language


def _english_files() -> list[Path]:
    names = ["configs/rubrics/pdqi9.yaml", "configs/rubrics/criteria.yaml", "configs/pdqi9.example.yaml",
             "configs/criteria.example.yaml"]
    folders = ["prompts/pdqi9", "prompts/criteria", "examples/pdqi9", "examples/criteria", "tests/data/kinds"]
    files = [ROOT / n for n in names] + [p for f in folders for p in sorted((ROOT / f).rglob("*")) if p.is_file()]
    assert len(files) > 30
    return files


def test_no_cjk_character_in_an_english_rubrics_files() -> None:
    found = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p in _english_files()
             if (m := CJK.search(p.read_text(encoding="utf-8")))]
    assert found == []


def test_the_cjk_check_finds_what_it_looks_for() -> None:
    assert all(CJK.search(s) for s in ("主诉", "：", "【", "。", "ｍｇ", "한"))
    assert not CJK.search("Chief Complaint: 5 mg, 38.5 °C, café, – — ‘’ “” …")


def test_an_english_rubrics_rendered_prompts_hold_no_cjk_character() -> None:
    rubric, cases = SETS["pdqi9"].load()
    text = "\n".join(m["content"] for m in render(rubric, rubric.dimensions[0], cases[0]))
    assert not CJK.search(text) and "Clinician: " in text   # the rubric's language sets the speaker separator


# --------------------------------------------------------------------------- the documented commands


def _documented_commands() -> list[str]:
    """Every `consensus-eval score` line of the README, docs/rubrics.md and the examples' READMEs that scores
    these rubrics' examples."""
    found = []
    for doc in ("README.md", "docs/rubrics.md", "examples/pdqi9/README.md", "examples/criteria/README.md"):
        for line in (ROOT / doc).read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("consensus-eval score examples/") and ("pdqi9" in line or "criteria" in line):
                found.append(line)
    return sorted(set(found))


def test_the_documented_commands_are_found() -> None:
    commands = _documented_commands()
    assert any("pdqi9" in c for c in commands) and any("criteria" in c for c in commands)


@pytest.mark.parametrize("command", _documented_commands())
def test_each_documented_command_runs_as_a_dry_run(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """As written (from the repository root), with `--out` replaced by `--dry-run`: nothing is sent."""
    args = shlex.split(command)[1:]
    if "--out" in args:
        i = args.index("--out")
        del args[i:i + 2]
    if "--dry-run" not in args:
        args.append("--dry-run")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    # --show-prompt prints the requests instead of the estimate (docs/rubrics.md)
    assert ("the request as sent" if "--show-prompt" in args else "dry run: nothing was sent") in res.output


@pytest.mark.parametrize("name", ["radiology", "discharge5", "checklist"])
def test_a_test_rubrics_config_runs_as_a_dry_run(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config written from docs/rubrics.md (rubric and prompts_dir as paths) scores the rubric's cases."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    s = SETS[name]
    res = CliRunner().invoke(app, ["score", str(s.cases.relative_to(ROOT)), "--config",
                                   str(s.config.relative_to(ROOT)), "--dry-run"])
    assert res.exit_code == 0, res.output
    rubric, cases = s.load()
    assert re.search(rf"│ gpt\s+│[^│]*│\s+{len(cases) * len(rubric.dimensions)} │", res.output), res.output


# --------------------------------------------------------------------------- docs/rubrics.md's examples


def _doc_block(heading: str) -> str:
    """The first ```yaml block under ``heading`` in docs/rubrics.md."""
    doc = (ROOT / "docs" / "rubrics.md").read_text(encoding="utf-8")
    section = doc.split(f"\n{heading}\n", 1)[1]
    return section.split("```yaml\n", 1)[1].split("```", 1)[0]


def test_the_docs_yaml_of_each_kind_loads_as_written() -> None:
    for kind in ("deductions", "likert", "criteria"):
        (data,) = yaml.safe_load(_doc_block(f"## `kind: {kind}`"))
        dim = Dimension.model_validate(data)
        assert dim.kind == kind
    assert Dimension.model_validate(yaml.safe_load(_doc_block("## `kind: likert`"))[0]).max == 5


def test_the_docs_worked_examples_are_what_the_scoring_derives() -> None:
    (data,) = yaml.safe_load(_doc_block("## `kind: deductions`"))
    dim = Dimension.model_validate(data)
    items = [Deduction(category="errors", type="wrong_side", points=4)] * 3 + [
        Deduction(category="errors", type="wrong_value", points=2),
        Deduction(category="omissions", type="missed_finding", points=3)]
    score = derive(dim, Judgment(dimension=dim.id, deductions=items))
    assert (score.score, score.stars) == (13, 2)
    penalty = Judgment(dimension=dim.id, deductions=items, fixed_penalties=[PenaltyHit(id="wrong_patient")])
    assert derive(dim, penalty).score == 0
    rubric, cases = SETS["criteria"].load()
    case = next(c for c in cases if c.id == "crit-03")
    verdicts = [CriterionVerdict(id=c.id, met=case.meta["expected"][c.id]) for c in case.criteria or []]
    got = derive(rubric.dimensions[0], Judgment(dimension=rubric.dimensions[0].id, verdicts=verdicts), case.criteria)
    assert got.score == pytest.approx(9 / 25)
    doc = (ROOT / "docs" / "rubrics.md").read_text(encoding="utf-8")
    assert "30 - 14 - 3 = 13" in doc and "9 / 25 = 0.36" in doc


# --------------------------------------------------------------------------- the main job on the examples


@pytest.mark.parametrize("name", ["pdqi9", "criteria"])
def test_score_runs_on_the_shipped_examples_with_the_fake_server_panel(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`score` on examples/<name> with a panel of three fake-server judges: every call ok, a panel verdict for
    every case, alpha at the kind's level, and reports without a CJK character (the rubric is English)."""
    monkeypatch.setenv("JUDGE_KEY", FAKE_KEY)
    s = SETS[name]
    rubric, cases = s.load()
    out = tmp_path / "out"
    with FakeServer(FakeConfig(seed=11)) as srv:
        judges = "".join(f"  - name: {j}\n    model: openai/{j}\n    api_base: {srv.url}/v1\n"
                         f"    api_key_env: JUDGE_KEY\n    max_reasks: 1\n    concurrency: 4\n"
                         for j in ("fake-a", "fake-strict", "fake-lenient"))
        cfg = tmp_path / "c.yaml"
        cfg.write_text(f"rubric: {name}\nruns: 1\nconsensus:\n  min_judges: 2\njudges:\n{judges}", encoding="utf-8")
        res = CliRunner().invoke(app, ["score", str(s.cases), "-c", str(cfg), "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in (out / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(cases) * len(rubric.dimensions) * 3 and all(r["status"] == "ok" for r in rows)
    consensus = [json.loads(x) for x in (out / "consensus.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(c["case_id"] for c in consensus) == sorted(c.id for c in cases)
    assert all(c["status"] == "ok" for c in consensus)
    levels = {k: a["level"] for k, a in json.loads((out / "reliability.json").read_text(encoding="utf-8"))
              ["across_judges"].items()}
    level = "ordinal" if name == "pdqi9" else "nominal"
    assert levels == {**{d.id: level for d in rubric.dimensions}, "total": "interval"}
    for report in ("report.md", "report.html"):
        text = (out / report).read_text(encoding="utf-8")
        assert not CJK.search(text), (report, CJK.findall(text)[:10])


def test_the_docs_minimal_likert_template_renders(tmp_path: Path) -> None:
    """docs/rubrics.md's minimal template, saved as it is, with the docs' likert dimension and a shipped case."""
    doc = (ROOT / "docs" / "rubrics.md").read_text(encoding="utf-8")
    template = doc.split("```jinja\n", 1)[1].split("```", 1)[0]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "organized.j2").write_text(template, encoding="utf-8")
    (dim_data,) = yaml.safe_load(_doc_block("## `kind: likert`"))
    rubric = Rubric.model_validate({"id": "notes", "name": "Notes", "language": "en", "dimensions": [dim_data],
                                    "roles": {"doctor": "Clinician", "patient": "Patient"}})
    case = SETS["pdqi9"].load()[1][0]
    system, user = (m["content"] for m in render(rubric, rubric.dimensions[0], case, tmp_path))
    assert all(f"{level}: {anchor}" in system for level, anchor in rubric.dimensions[0].anchors.items())
    assert '"rating"' in system and case.record in user
