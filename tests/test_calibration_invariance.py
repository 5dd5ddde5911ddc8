"""The invariance probe (``calibrate --suite invariance``; docs/calibration.md): the edits keep each record's meaning
(checked on the bundled records, and through the rules judge, whose findings they must not change, or the probe
says so), the figures (noise, moved, mean change, flags) against an independent count and the field's oracles,
and the probe end to end: it flags the length-biased fake judge and not its unbiased twin, reports the rules
judge's own stability as it is, on any rubric kind."""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from consensus_eval import api
from consensus_eval.analysis.invariance import ALPHA, invariance
from consensus_eval.analysis.systems import holm
from consensus_eval.cli import app
from consensus_eval.domain.calibration.invariance_edits import (
    EDITS,
    LENGTH_EDITS,
    builtin_records,
    invariance_suite,
    merged_cases,
    words,
)
from consensus_eval.domain.cases import Case
from consensus_eval.domain.rubric import load_rubric
from consensus_eval.domain.sections import Sections, fold_width
from consensus_eval.output.calibration_files import load_calibration
from tests.fake_server import FakeConfig, FakeServer

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"\d+(?:\.\d+)?")
#: a number not inside a word written in Latin letters (HbA1c, T2DM)
OWN_NUMBER = re.compile(r"(?<![A-Za-z])\d+(?:\.\d+)?")


@pytest.fixture(scope="module")
def probe() -> Any:
    rubric = load_rubric("medical_record")
    return rubric, invariance_suite(builtin_records(rubric), rubric)


def test_every_edit_keeps_the_numbers_conversation_and_sections_of_each_record(probe: Any) -> None:
    rubric, suite = probe
    sections = Sections.of(rubric)
    records = {c.base: c.case for c in suite.cases if c.edit is None}
    assert len(records) == 40
    made = Counter(c.edit for c in suite.cases if c.edit is not None)
    # every edit but section order applies to every bundled record (only 4 have two sections the rubric does not
    # order); the reason for the others is given
    assert made == {**{e: 40 for e in EDITS if e != "section_order"}, "section_order": 4}
    assert set(suite.not_applied) == {"section_order"} and len(suite.not_applied["section_order"]) == 36
    zh = words("zh")
    assert zh is not None
    for filler in zh.filler:  # the padding states nothing a record could get wrong: no number, drug or symptom
        assert not NUMBER.search(filler) and not re.search("药|片|糖|血|痛|麻|渴|尿|最近|很久", filler), filler
    for c in suite.cases:
        if c.edit is None:
            assert c.case.important
            continue
        original = records[c.base]
        assert not c.case.important and c.case.id.startswith(c.base + "~")
        assert c.case.record != original.record and c.case.conversation == original.conversation
        if c.edit == "section_order":  # the same numbers, in other places
            assert Counter(NUMBER.findall(c.case.record)) == Counter(NUMBER.findall(original.record)), c.case.id
        elif c.edit != "abbreviation":
            assert NUMBER.findall(c.case.record) == NUMBER.findall(original.record), (c.case.id, c.edit)
        else:  # the numbers of the record (outside abbreviations), and those of the words spelled out
            numbers = Counter(OWN_NUMBER.findall(original.record))
            for short, full in zh.spell_out.items():
                n = len(re.findall(rf"(?<![A-Za-z0-9]){re.escape(short)}(?![A-Za-z0-9])", original.record))
                numbers.update(NUMBER.findall(full) * n)
            assert Counter(OWN_NUMBER.findall(c.case.record)) == numbers, c.case.id
        got = [s.name for s in sections.find(fold_width(c.case.record)) if s.canonical]
        # the rubric's own sections, in the rubric's order
        assert got == [s.name for s in sections.find(fold_width(original.record)) if s.canonical], c.case.id
        if c.edit in LENGTH_EDITS:
            assert c.length_ratio >= 1 + LENGTH_EDITS[c.edit]
            assert c.case.record.count("。") > original.record.count("。")
        if c.edit == "section_order":  # the same sections, other order
            assert sorted(c.case.record.splitlines()) == sorted(original.record.splitlines())
        if c.edit == "system_name":
            assert c.case.record.endswith("（本病历由ChatGPT生成。）")
    # an abbreviation is spelled out where the record has one, never half-converted compound units
    by_id = {c.case.id: c.case.record for c in suite.cases}
    assert "糖化血红蛋白" in by_id["base-01~3"] and "HbA1c" not in by_id["base-01~3"]
    assert "毫摩尔/升" in by_id["base-01~4"] and "kg/m²" not in "".join(
        r for cid, r in by_id.items() if cid.endswith("~4")).replace("kg/m²", "")


def test_section_order_moves_only_the_sections_the_rubric_leaves_free() -> None:
    rubric = load_rubric("medical_record")
    record = ("主诉：口干1月。\n现病史：无。\n既往史：无。\n家族史：无。\n个人史：无。\n"
              "体格检查：正常。\n辅助检查：无。\n处理：随访。")
    suite = invariance_suite([Case(id="r", conversation="医生：好。", record=record)], rubric)
    copy = next(c for c in suite.cases if c.edit == "section_order")
    assert copy.case.record.splitlines()[5:] == ["处理：随访。", "辅助检查：无。", "体格检查：正常。"]
    assert copy.case.record.splitlines()[:5] == record.splitlines()[:5]


def test_the_rules_judge_moves_on_one_copy_only_and_the_probe_says_so(probe: Any, tmp_path: Path) -> None:
    """Every edited copy of the 40 bundled records through the rules judge: its findings are the record's, except
    one: ``12国际单位`` (the units edit of base-22) is not read as a dose (the rules know ``IU``, not its Chinese
    name). That is the rules judge's own sensitivity, and the probe reports it: flagged on units, that copy named,
    noise 0, every other edit stable."""
    _, suite = probe
    prep = api.prepare(merged_cases(suite, []), "configs/default.yaml")
    results = api.run(prep, tmp_path / "o")
    found: dict[tuple[str, str], list[str]] = {}
    for r in results.records:
        j: Any = r.judgment
        found[(r.case_id, r.dimension)] = sorted([d.type for d in j.deductions] + [p.id for p in j.fixed_penalties])
    changed = {(c.case.id, d, tuple(found[(c.case.id, d)]))
               for c in suite.cases if c.edit is not None for d in ("accuracy", "completeness", "standardization")
               if found[(c.case.id, d)] != found[(c.base, d)]}
    assert changed == {("base-22~4", "standardization", ("dose_unclear",))}
    assert "12国际单位" in next(c.case.record for c in suite.cases if c.case.id == "base-22~4")
    inv = invariance(suite, results, {"rules"})
    assert inv.records == 40 and inv.copies == 244
    rules = inv.judges["rules"]
    assert rules.deterministic and rules.noise == 0.0 and rules.runs == 1
    assert rules.flagged == ["units"]
    units = rules.edits["units"]
    assert (units.moved.k, units.moved.n) == (1, 40) and units.p_moved == 0.0
    assert [(x.case, x.change) for x in units.examples] == [("base-22~4", -1.0)]
    assert all(rules.edits[e].moved.k == 0 and rules.edits[e].mean_change == 0 for e in EDITS if e != "units")
    assert rules.edits["units"].by_dimension["standardization"].moved == 1
    assert rules.edits["units"].by_dimension["accuracy"].moved == 0


def test_holm_against_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    ps = [0.01, 0.04, 0.03, 0.005, 0.5, 0.2, 0.049]
    assert holm(ps) == pytest.approx(list(multipletests(ps, method="holm")[1]))


def _panel(url: str) -> str:
    judge = ("    model: openai/{m}\n    api_base: " + url + "/v1\n    mode: json\n    call: per_case\n"
             "    max_retries: 0\n    max_reasks: 1\n")
    return ("rubric: medical_record\nruns: 1\nimportant_runs: 3\njudges:\n  - name: rules\n    kind: rules\n"
            "  - name: steady\n" + judge.format(m="steady") + "  - name: wordy\n" + judge.format(m="wordy"))


@pytest.mark.slow
def test_the_probe_flags_the_length_biased_judge_and_not_its_unbiased_twin(tmp_path: Path) -> None:
    """Two fake LLM judges alike in all but a bias towards longer records, beside the rules judge, on 24 of the
    bundled records (and 24 planted cases): the biased one is flagged on the length edits (its totals rise),
    the other on nothing; the figures match a count made here from the stored scores."""
    cfg = FakeConfig(seed=5, bias={"steady": 1.5, "wordy": 1.5}, length_bias={"wordy": 3.0},
                     defects_from="conversation", fault_free_after=1)
    with FakeServer(cfg) as srv:
        (tmp_path / "panel.yaml").write_text(_panel(srv.url), encoding="utf-8")
        r = CliRunner().invoke(app, ["calibrate", "--config", str(tmp_path / "panel.yaml"), "--suite", "invariance",
                                     "--sample", "24", "--out", str(tmp_path / "o"), "--lang", "en"])
    assert r.exit_code == 0, r.output
    rep = load_calibration(tmp_path / "o" / "calibration.json")
    inv = rep.invariance
    assert inv is not None and inv.records == 24
    wordy, steady = inv.judges["wordy"], inv.judges["steady"]
    assert {"length_30", "length_100"} <= set(wordy.flagged)
    assert steady.flagged == []
    assert wordy.edits["length_100"].mean_change is not None and wordy.edits["length_100"].mean_change > 2
    low = wordy.edits["length_100"].low
    assert low is not None and low > 0
    assert steady.noise is not None and steady.noise > 0 and steady.runs == 3
    assert inv.judges["rules"].noise == 0.0
    # the error side in the same report: the planted cases drawn beside the records, as `--suite builtin` measures
    assert rep.suite_cases == 24 and rep.judges["rules"].overall.found.n == rep.errors
    lines = [json.loads(x) for x in (tmp_path / "o" / "invariance.jsonl").read_text(encoding="utf-8").splitlines()]
    assert Counter(x["edit"] for x in lines)[None] == 24 and len(lines) == 24 + inv.copies
    # the console says it, in the side-by-side table and the warning
    assert "Invariance: scores on meaning-preserving edits" in r.output
    assert "wordy is not stable under" in r.output and "steady is not stable" not in r.output
    # an independent count from the stored scores: wordy's mean change and moved copies on +100%
    res = api.load_run(tmp_path / "o", replies=False)
    totals: dict[tuple[str, int], float] = defaultdict(float)
    for rec in res.records:
        if rec.judge == "wordy" and rec.status == "ok":
            totals[(rec.case_id, rec.run)] += res.scores[rec.request_hash].score
    noise = statistics.fmean(statistics.variance([totals[(x["id"], k)] for k in range(3)])
                             for x in lines if x["edit"] is None) ** 0.5
    assert wordy.noise == pytest.approx(noise)
    changes = [totals[(x["id"], 0)] - statistics.fmean(totals[(x["base"], k)] for k in range(3))
               for x in lines if x["edit"] == "length_100"]
    assert wordy.edits["length_100"].mean_change == pytest.approx(statistics.fmean(changes))
    moved = sum(1 for ch in changes if abs(ch) > 1.959963984540054 * noise * (4 / 3) ** 0.5)
    assert wordy.edits["length_100"].moved.k == moved
    assert wordy.edits["length_100"].p_holm is not None and wordy.edits["length_100"].p_holm < ALPHA


def test_any_rubric_kind_with_its_own_clean_records(tmp_path: Path) -> None:
    """A likert rubric (pdqi9, English): no planting operators, so the probe alone, on the records given."""
    cfg = FakeConfig(seed=3, length_bias={"wordy": 3.0}, defects_from="conversation", fault_free_after=1)
    with FakeServer(cfg) as srv:
        (tmp_path / "c.yaml").write_text(
            "rubric: pdqi9\nruns: 1\nimportant_runs: 2\njudges:\n  - name: wordy\n    model: openai/wordy\n"
            f"    api_base: {srv.url}/v1\n    mode: json\n    call: per_case\n    max_retries: 0\n", encoding="utf-8")
        r = CliRunner().invoke(app, ["calibrate", "--config", str(tmp_path / "c.yaml"), "--suite", "invariance",
                                     "--bases", str(ROOT / "examples" / "pdqi9" / "cases.jsonl"),
                                     "--out", str(tmp_path / "o")])
        assert r.exit_code == 0, r.output
        no_bases = CliRunner().invoke(app, ["calibrate", "--config", str(tmp_path / "c.yaml"), "--suite",
                                            "invariance", "--out", str(tmp_path / "o2")])
    assert no_bases.exit_code == 2 and "--bases CLEAN.jsonl" in no_bases.output
    rep = load_calibration(tmp_path / "o" / "calibration.json")
    assert rep.suite_cases == 0 and rep.invariance is not None
    wordy = rep.invariance.judges["wordy"]
    assert wordy.runs == 3  # important_runs raised to the probe's 3
    assert wordy.edits["length_100"].n == rep.invariance.records
    assert wordy.edits["length_100"].mean_change is not None and wordy.edits["length_100"].mean_change > 0
    assert "Invariance" in r.output and "Calibration: planted errors found" not in r.output
    # report.md and report.html show the section, and no empty planted-error section
    for name in ("report.md", "report.html"):
        text = (tmp_path / "o" / name).read_text(encoding="utf-8")
        assert "Invariance: scores on meaning-preserving edits" in text and "Calibration: planted" not in text
        assert "irrelevant sentences (+100%)" in text
