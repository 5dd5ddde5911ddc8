"""A newcomer's rubrics: one of each kind written from the README and docs alone (tests/data/kinds: an
English radiology deductions rubric, a 5-attribute likert instrument, a criteria checklist) goes the whole way a
user takes it: `score` with a panel of three judges (the fake server on 127.0.0.1), `audit`, a reviewer in the
review app in Debian's Chromium, `reliability` and `report`, every page in English."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from consensus_eval.analysis.reliability import level_of
from consensus_eval.cli import app
from consensus_eval.domain.kinds import Criteria, of_kind
from consensus_eval.domain.rubric import load_rubric
from consensus_eval.execution.store import Store
from tests.conftest import FAKE_KEY
from tests.fake_server import FakeConfig, FakeServer
from tests.test_review_browser import CHROMIUM, fill_scores, reviewing

ROOT = Path(__file__).resolve().parents[1]
KINDS = ROOT / "tests" / "data" / "kinds"
CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def _panel(path: Path, name: str, url: str) -> Path:
    """The rubric's own test config with three judges on the fake server instead of its one real model."""
    cfg = yaml.safe_load((KINDS / f"{name}.config.yaml").read_text(encoding="utf-8"))
    (judge,) = cfg["judges"]
    cfg["judges"] = [{**judge, "name": j, "model": f"openai/{j}", "api_base": f"{url}/v1", "api_key_env": "JUDGE_A_KEY"}
                     for j in ("a", "b", "c")]
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return path


def _review_one_case(run: Path, kind: str, dims: list[str]) -> None:
    """A reviewer opens the first case of the queue and judges it with the kind's controls, then confirms."""
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    with reviewing(run, "ana") as (page, url, base):
        page.goto(url)
        page.goto(base + "/?scope=all")        # every case, whether or not the judges disagree on it
        expect(page.locator("#queue")).to_be_visible()
        assert not CJK.search(page.content())
        # the ranking formula names the parts the rubric's kinds have: deductions only for deductions
        assert ("deductions only one judge made" in page.content()) == (kind == "deductions")
        page.goto(base + "/case/1")
        if kind == "deductions":
            fill_scores(page, {d: "10" for d in dims})
        elif kind == "likert":
            page.locator(f"#dim-{dims[0]} input.level[value='3']").click()
            expect(page.locator(f"#dim-{dims[0]} .score-note")).to_have_text("yours, saved")
        else:
            page.locator("tr.criterion").first.locator("button.v-met").click()
            expect(page.locator("#save-status")).to_have_text(re.compile("^saved"))
        if kind == "criteria":      # confirming reloads a criteria case's page with the accepted verdicts
            with page.expect_navigation(wait_until="load"):
                page.locator("#confirm-scores").click()
        else:
            page.locator("#confirm-scores").click()
        expect(page.locator("#case-state")).to_have_text("done")
        page.reload()
        expect(page.locator("#case-state")).to_have_text("done")
        assert not CJK.search(page.content())


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed (/usr/bin/chromium)")
@pytest.mark.slow
@pytest.mark.parametrize("name, kind", [("radiology", "deductions"), ("discharge5", "likert"),
                                        ("checklist", "criteria")])
def test_a_rubric_written_from_the_docs_scores_audits_is_reviewed_and_reports(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch,
                                                                              name: str, kind: str) -> None:
    monkeypatch.setenv("JUDGE_A_KEY", FAKE_KEY)
    monkeypatch.chdir(ROOT)
    rubric = load_rubric(KINDS / f"{name}.yaml")
    assert {d.kind for d in rubric.dimensions} == {kind}
    dims = [d.id for d in rubric.dimensions]
    run = tmp_path / "run"
    with FakeServer(FakeConfig(seed=5)) as srv:
        res = CliRunner().invoke(app, ["score", str(KINDS / f"{name}_cases.jsonl"),
                                       "-c", str(_panel(tmp_path / "panel.yaml", name, srv.url)), "--out", str(run)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in (run / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["judge"] for r in rows} == {"a", "b", "c"} and all(r["status"] == "ok" for r in rows)

    res = CliRunner().invoke(app, ["audit", str(run), "--top", "0"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert not CJK.search(res.output)

    _review_one_case(run, kind, dims)
    with Store.open_existing(run, read_only=True) as store:
        labels = store.human_labels(reviewer="ana")
    assert labels and len({lb.case_id for lb in labels}) == 1
    own = [lb for lb in labels if lb.origin == "own"]
    if kind == "deductions":
        assert {(lb.dimension, lb.value) for lb in own} == {(d, 10.0) for d in dims}
    elif kind == "likert":
        assert [(lb.dimension, lb.value) for lb in own] == [(dims[0], 3.0)]
        assert {lb.dimension for lb in labels if lb.origin == "accepted"} == set(dims[1:])
    else:
        assert [(lb.kind, lb.value) for lb in own] == [("criterion", "met")]
        n_criteria = len(of_kind(rubric.dimensions[0], Criteria).criteria)
        assert len([lb for lb in labels if lb.origin == "accepted"]) == n_criteria - 1

    res = CliRunner().invoke(app, ["reliability", str(run)])
    assert res.exit_code == 0, res.output
    rel = json.loads((run / "reliability.json").read_text(encoding="utf-8"))
    assert {d: rel["across_judges"][d]["level"] for d in dims} == {d.id: level_of(d) for d in rubric.dimensions}

    res = CliRunner().invoke(app, ["report", str(run)])
    assert res.exit_code == 0, res.output
    for page in ("report.md", "report.html"):
        text = (run / page).read_text(encoding="utf-8")
        assert not CJK.search(text), (page, CJK.search(text))
        assert rubric.name in text
