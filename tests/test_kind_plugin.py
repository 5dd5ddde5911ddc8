"""A rubric kind plugged in from outside the package runs end to end (docs/kinds.md): tests/plugins/passfail_kind.py
registers ``kind: passfail`` (pass or fail with a quote; score 1/0; nominal alpha; a flag when judges split; two
levels on the review page), and with no package file knowing it, `score` with the fake-server panel, `audit`,
reliability, the report in English and Chinese and the review app work on a rubric of that kind
(tests/data/passfail/)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from typer.testing import CliRunner

import tests.plugins.passfail_kind  # noqa: F401 - registers kind: passfail
from consensus_eval import UsageError
from consensus_eval.cli import app
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.kinds import kind_class
from consensus_eval.domain.kinds.base import RUBRIC_KIND_ENTRY_POINTS
from consensus_eval.domain.replies import response_model
from consensus_eval.domain.rubric import load_rubric
from consensus_eval.review.model import ActionError, ReviewRun
from tests.conftest import FAKE_KEY, ROOT
from tests.fake_server import FakeConfig, FakeServer
from tests.helpers import review_client, stored_labels
from tests.plugins.passfail_kind import PassFail
from tests.test_review_browser import CHROMIUM, reviewing

DATA = Path(__file__).parent / "data" / "passfail"
RUBRIC = DATA / "rubric.yaml"
JUDGES = ("fake-a", "fake-strict", "fake-lenient")
DIMS = ("allergies", "plan")


def test_the_kind_is_found_by_name_and_validates_its_own_fields() -> None:
    rubric = load_rubric(RUBRIC)
    assert kind_class("passfail") is PassFail
    assert [type(d) for d in rubric.dimensions] == [PassFail, PassFail]
    allergies = rubric.dimension("allergies")
    assert allergies.model_dump()["pass_when"].startswith("the record lists every allergy")
    model = response_model(rubric, "allergies")
    j = model.model_validate({"verdict": "fail", "quote": "penicillin (rash)", "comment": "c"}).to_judgment(allergies)
    assert (j.rating, j.evidence) == (0, ["penicillin (rash)"])
    assert allergies.derive(j).score == 0 and allergies.derive(j.model_copy(update={"rating": 1})).score == 1
    with pytest.raises(UsageError, match="'allergies' is pass \\(1\\) or fail \\(0\\), got 3"):
        allergies.derive(Judgment(dimension="allergies", rating=3))
    with pytest.raises(ValueError, match="pass_when\n  Field required"):
        PassFail.model_validate({"id": "x", "name": "X"})
    with pytest.raises(ValueError, match="its max is 1, got 2"):
        PassFail.model_validate({"id": "x", "name": "X", "pass_when": "p", "max": 2})


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`score` of the pass/fail rubric's 8 cases by three fake-server judges, one run each."""
    tmp = tmp_path_factory.mktemp("passfail")
    mp = pytest.MonkeyPatch()
    mp.setenv("JUDGE_A_KEY", FAKE_KEY)
    out = tmp / "out"
    try:
        with FakeServer(FakeConfig(seed=3)) as srv:
            judges = "".join(f"  - name: {n}\n    model: openai/{n}\n    api_base: {srv.url}/v1\n"
                             f"    api_key_env: JUDGE_A_KEY\n    max_reasks: 1\n    concurrency: 4\n" for n in JUDGES)
            cfg = tmp / "c.yaml"
            cfg.write_text(f"rubric: {RUBRIC}\nprompts_dir: {DATA / 'prompts'}\nruns: 1\nconsensus:\n  min_judges: 2\n"
                           f"judges:\n{judges}", encoding="utf-8")
            res = CliRunner().invoke(app, ["score", str(DATA / "cases.jsonl"), "-c", str(cfg), "--out", str(out)])
        assert res.exit_code == 0, res.output
        yield out
    finally:
        mp.undo()


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]


def _verdicts(out: Path) -> dict[tuple[str, str], dict[str, int]]:
    """(case, dimension) -> each judge's score."""
    got: dict[tuple[str, str], dict[str, int]] = {}
    for r in _rows(out):
        got.setdefault((r["case_id"], r["dimension"]), {})[r["judge"]] = int(r["score"])
    return got


def test_score_writes_each_verdict_its_score_its_grounded_quote_and_the_panels_flags(scored: Path) -> None:
    rows = _rows(scored)
    assert len(rows) == 8 * 3 * 2 and all(r["status"] == "ok" for r in rows)
    assert {r["verdict"] for r in rows} == {"pass", "fail"}
    assert all(r["score"] == (1 if r["verdict"] == "pass" else 0) for r in rows)
    assert all(e["grounding"] is not None for r in rows for e in r["evidence"]) and any(r["evidence"] for r in rows)
    with (scored / "consensus.csv").open(encoding="utf-8") as f:
        table = {row["case_id"]: row for row in csv.DictReader(f)}
    verdicts = _verdicts(scored)
    n_split = 0
    for case_id, row in table.items():
        for d in DIMS:
            mean = sum(verdicts[case_id, d].values()) / 3
            assert float(row[d]) == pytest.approx(mean, abs=1e-4)
        split = [d for d in DIMS if len(set(verdicts[case_id, d].values())) == 2]
        n_split += bool(split)
        # the kind's flag on every dimension the judges split on, and no other flag of its code
        assert [f for f in row["flags"].split("; ") if "pass/fail" in f] == [
            f"{d}: judges split pass/fail ({sum(verdicts[case_id, d].values())} pass)" for d in split]
        assert float(row["total"]) == pytest.approx(2 * float(row["allergies"]) + float(row["plan"]), abs=1e-3)
    assert 0 < n_split < len(table)           # the fixture has both: the test could fail either way


def test_reliability_is_nominal_and_krippendorffs_alpha_of_the_verdicts(scored: Path) -> None:
    rel = json.loads((scored / "reliability.json").read_text(encoding="utf-8"))
    verdicts = _verdicts(scored)
    cases = sorted({c for c, _ in verdicts})
    for d in DIMS:
        across = rel["across_judges"][d]
        assert across["level"] == "nominal" and across["n_units"] == len(cases)
        data = np.array([[float(verdicts[c, d][j]) for c in cases] for j in JUDGES])
        theirs = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        assert not math.isnan(theirs)
        assert across["value"] == pytest.approx(theirs, abs=1e-9)


def test_the_report_in_english_and_chinese_has_the_kinds_block_and_flags_in_its_words(scored: Path) -> None:
    for lang, title, flag, rate in (("en", "Pass/fail", "judges split pass/fail", "pass rate"),
                                    ("zh", "通过/不通过", "评审通过与否不一致", "通过率")):
        res = CliRunner().invoke(app, ["report", str(scored), "--lang", lang])
        assert res.exit_code == 0, res.output
        md = (scored / ("report.md" if lang == "en" else "report.zh.md")).read_text(encoding="utf-8")
        html = (scored / ("report.html" if lang == "en" else "report.zh.html")).read_text(encoding="utf-8")
        assert title in md and rate in md and flag in md, lang
        assert 'id="passfail-table"' in html and title in html
        verdicts = _verdicts(scored)
        # the block's figures: each judge's passes of a dimension, over the cases it answered
        for j in JUDGES:
            passes = sum(v[j] for (_, d), v in verdicts.items() if d == "allergies")
            assert f"| Allergies | {j} | {passes} | 8 | {100 * passes / 8:.1f}% |" in md


def test_audit_lists_the_split_cases_with_the_kinds_reason(scored: Path) -> None:
    split = sorted({c for (c, _), v in _verdicts(scored).items() if len(set(v.values())) == 2})
    for lang, reason in (("en", "pass/fail split"), ("zh", "通过分歧")):
        res = CliRunner().invoke(app, ["audit", str(scored), "--top", "0", "--lang", lang])
        assert res.exit_code == 0, res.output
        assert reason in res.output and all(c in res.output for c in split), res.output


def test_review_shows_two_levels_and_two_reviewers_apart_need_adjudication(scored: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.sqlite").write_bytes((scored / "results.sqlite").read_bytes())
    with closing(ReviewRun.open(run)) as r:
        client, _ = review_client(r, "li")
        page = client.get("/case/1").text
        for d in DIMS:
            assert page.count(f'name="level-{d}"') == 2                   # two buttons: fail (0) and pass (1)
        assert "pass: the record lists every allergy" in page
        with pytest.raises(ActionError):
            r.apply("li", {"op": "scores", "case": 1, "scores": {"allergies": 0.5}, "accepted": []})
        r.apply("li", {"op": "scores", "case": 1, "scores": {"allergies": 1, "plan": 1}, "accepted": []})
        r.apply("wang", {"op": "scores", "case": 1, "scores": {"allergies": 0, "plan": 1}, "accepted": []})
        assert r.scores_needed(1)


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed (/usr/bin/chromium)")
def test_a_reviewer_passes_and_fails_in_chromium_with_the_kind_installed_by_its_entry_point(
        scored: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The review server is a process of its own that imports no test module: the kind reaches it as an installed
    package's does, through the ``consensus_eval.rubric_kinds`` entry point (a dist-info on its PYTHONPATH)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    site = tmp_path / "site"
    info = site / "passfail_kind-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: passfail_kind\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{RUBRIC_KIND_ENTRY_POINTS}]\npassfail = tests.plugins.passfail_kind\n",
                                           encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", f"{site}:{ROOT}")
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.sqlite").write_bytes((scored / "results.sqlite").read_bytes())
    picks = {"allergies": 1, "plan": 0}
    with reviewing(run, "alice", "--lang", "en") as (page, url, base):
        page.goto(url)
        page.goto(base + "/case/1")
        for d in DIMS:   # two buttons: 0 fail, 1 pass (with what passing means)
            expect(page.locator(f"fieldset.scale[data-dim={d}] label.level")).to_have_count(2)
        expect(page.locator("fieldset.scale[data-dim=allergies] label.level").nth(1)).to_contain_text(
            "1 pass: the record lists every allergy")
        for d, lv in picks.items():
            page.locator(f"#dim-{d} input.level[value='{lv}']").click()
            expect(page.locator(f"#dim-{d} .score-note")).to_have_text("yours, saved")
        page.locator("#confirm-scores").click()
        expect(page.locator("#case-state")).to_have_text("done")
        page.reload()
        for d, lv in picks.items():
            expect(page.locator(f"#dim-{d} input.level[value='{lv}']")).to_be_checked()
    got = {lb.dimension: (lb.value, lb.origin) for lb in stored_labels(run, "alice") if lb.kind == "score"}
    assert got == {d: (float(lv), "own") for d, lv in picks.items()}


def test_docs_kinds_example_is_the_plugins_own_code() -> None:
    """docs/kinds.md's worked example quotes tests/plugins/passfail_kind.py: each line of its Python block is a line
    of the module (docstrings left out), so the doc cannot drift from the kind this module runs."""
    doc = (ROOT / "docs" / "kinds.md").read_text(encoding="utf-8")
    block = doc.split("## A worked example: pass/fail", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    module = {line.rstrip() for line in (ROOT / "tests" / "plugins" / "passfail_kind.py").read_text(
        encoding="utf-8").splitlines()}
    lines = [line for line in block.splitlines() if line.strip()]
    assert len(lines) > 30 and [line for line in lines if line.rstrip() not in module] == []
