"""The human side of rubric kinds (issue 24, parts 1 and 5): audit rows, review labels, sheet columns,
validity and report for a likert and a criteria rubric, on runs written straight into a store
(tests/kinds_human_run.py); medical_record's deductions are covered, unchanged, by their own tests."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from consensus_eval.analysis.audit import REASON_CODES
from consensus_eval.api import load_run
from consensus_eval.output.audit_console import print_audit
from consensus_eval.output.report.i18n import messages
from tests.kinds_human_run import build_kinds_run, kinds_rubric


@pytest.fixture(scope="module")
def likert_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kinds_run(tmp_path_factory.mktemp("likert"), "likert", n_cases=12, runs=2)


@pytest.fixture(scope="module")
def criteria_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kinds_run(tmp_path_factory.mktemp("criteria"), "criteria", n_cases=12)


# --------------------------------------------------------------------------- 1. audit rows


def test_likert_audit_rows_show_each_judges_level_anchor_and_evidence(likert_run: Path) -> None:
    res = load_run(likert_run, replies=False)
    rubric = kinds_rubric("likert")
    by_case = {a.case_id: a for a in res.audit}
    stored = {(r.case_id, r.dimension, r.judge, r.run): r.judgment for r in res.records}
    n_rows = 0
    for a in res.audit:
        for dim in a.dimensions:
            assert dim.kind == "likert" and dim.levels == rubric.dimension(dim.dimension).levels
            every = []
            for v in dim.judges:
                assert v.deductions == [] and v.verdicts == []
                assert [r.run for r in v.ratings] == [0, 1]
                for r in v.ratings:
                    j = stored[a.case_id, dim.dimension, v.judge, r.run]
                    assert j is not None and r.rating == j.rating and r.evidence == j.evidence
                    assert r.anchor == dim.levels[r.rating]
                    every.append(r.rating)
                    n_rows += 1
                # the judge's score is the mean of its runs' levels
                assert v.score == pytest.approx(sum(r.rating for r in v.ratings) / len(v.ratings))
            assert dim.level_spread == max(every) - min(every)
    assert n_rows == 12 * 3 * 3 * 2
    # a case whose levels are 2 or more apart on some attribute needs review for it, with the attribute named
    gaps = [a for a in res.audit if any((d.level_spread or 0) >= 2 for d in a.dimensions)]
    assert gaps, "the seeded run has levels 2 apart somewhere"
    for a in gaps:
        reason = next(r for r in a.reasons if r.code == "level_gap")
        assert {s.rsplit(" ", 1)[0] for s in reason.subjects} == {
            d.name for d in a.dimensions if (d.level_spread or 0) >= 2}
    assert by_case  # every case audited
    # spread as a share of the scale's range (top - bottom level = 4), not of its top level
    a = max(res.audit, key=lambda x: x.spread_share or 0)
    shares = [d.spread / 4 for d in a.dimensions if d.spread is not None]
    assert a.spread_share == pytest.approx(sum(shares) / len(shares))


def test_criteria_audit_rows_are_a_criterion_by_judge_table_split_first(criteria_run: Path) -> None:
    res = load_run(criteria_run, replies=False)
    stored = {(r.case_id, r.dimension, r.judge): r.judgment for r in res.records}
    n_split = 0
    for a in res.audit:
        (dim,) = a.dimensions
        assert dim.kind == "criteria"
        assert sorted(r.id for r in dim.criteria) == ["allergy", "followup", "invented", "meds"]
        splits = [r.split for r in dim.criteria]
        assert splits == sorted(splits, reverse=True), "split criteria come first"
        for row in dim.criteria:
            verdicts = {}
            for v in dim.judges:
                j = stored[a.case_id, dim.dimension, v.judge]
                assert j is not None
                (mine,) = [x for x in j.verdicts if x.id == row.id]
                verdicts[v.judge] = mine.met
                assert row.judges[v.judge] == [mine.met] and row.verdict(v.judge) is mine.met
                (item,) = [x for x in v.verdicts if x.id == row.id]
                assert item.evidence == mine.evidence and item.reason == mine.reason
            assert row.split == (len(set(verdicts.values())) > 1)
            assert row.met_share == pytest.approx(sum(verdicts.values()) / 3)
        n_split += len(dim.split_criteria)
        if dim.split_criteria:
            reason = next(r for r in a.reasons if r.code == "split")
            assert reason.subjects == [f"{dim.name}: {r.id}" for r in dim.split_criteria]
        else:
            assert "split" not in {r.code for r in a.reasons}
    assert n_split > 0


def test_console_drill_down_per_kind(likert_run: Path, criteria_run: Path) -> None:
    for folder, must in ((likert_run, ["level ", "levels 1-5", "«"]),
                         (criteria_run, ["criterion", "not met", "[split]", "allergy: States the patient"])):
        res = load_run(folder, replies=False)
        buf = io.StringIO()
        print_audit(Console(file=buf, width=200), res.audit, top=3, t=messages("en"))
        out = buf.getvalue()
        for word in must:
            assert word in out, (folder.name, word)
        assert "every judge gave full marks" not in out and "no deduction" not in out


def test_every_reason_code_has_words_in_every_catalogue() -> None:
    for lang in ("en", "zh"):
        t = messages(lang)
        for code in REASON_CODES:
            assert f"reason_{code}" in t.texts and f"con_reason_{code}" in t.texts, (lang, code)
