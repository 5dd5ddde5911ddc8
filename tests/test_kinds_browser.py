"""The review app on a likert and a criteria rubric in headless Chromium (Debian's /usr/bin/chromium driven by
Playwright, as tests/test_review_browser.py): the server started as a user starts it; a reviewer rates a
likert case on its scale (each level with its anchor), confirms (the attributes left alone accepted from the
panel, kept apart), sets criteria met / not met with evidence on a criteria case (a button pressed again stays
set), withdraws one with ×, confirms; after a reload the page shows the same, and the store holds exactly those
labels."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from consensus_eval.execution.store import Store
from tests.helpers import stored_labels
from tests.kinds_human_run import build_kinds_run, kinds_rubric
from tests.test_review_browser import CHROMIUM, reviewing

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian chromium is not installed (/usr/bin/chromium): apt-get install -y chromium")


@pytest.mark.slow
def test_a_reviewer_rates_a_likert_case_on_the_scale_and_the_levels_read_back(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    folder = build_kinds_run(tmp_path / "likert", "likert", n_cases=6, noise=0.5)
    rubric = kinds_rubric("likert")
    with reviewing(folder, "alice") as (page, url, base):
        page.goto(url)
        expect(page.locator("#queue")).to_be_visible()
        page.goto(base + "/case/1")
        # the scale of every attribute, each level with its anchor text
        for d in rubric.dimensions:
            scale = page.locator(f"fieldset.scale[data-dim={d.id}]")
            expect(scale.locator("label.level")).to_have_count(len(d.anchors))
            for lv, anchor in d.anchors.items():
                expect(scale.locator("label.level").nth(lv - 1)).to_contain_text(f"{lv} {anchor}")
        picks = {"accurate": 2, "thorough": 5, "organized": 4}
        for dim, lv in picks.items():
            page.locator(f"#dim-{dim} input.level[value='{lv}']").click()
            expect(page.locator(f"#dim-{dim} .score-note")).to_have_text("yours, saved")
        page.locator("#confirm-scores").click()
        expect(page.locator("#case-state")).to_have_text("done")
        # case 2: one attribute rated, the others confirmed as the panel's (accepted, not the reviewer's own)
        page.goto(base + "/case/2")
        page.locator("#dim-thorough input.level[value='1']").click()
        expect(page.locator("#dim-thorough .score-note")).to_have_text("yours, saved")
        page.keyboard.press("s")
        expect(page.locator("#case-state")).to_have_text("done")
        expect(page.locator("#dim-accurate .score-note")).to_contain_text("accepted")
        # a reload shows the same levels picked
        page.goto(base + "/case/1")
        for dim, lv in picks.items():
            expect(page.locator(f"#dim-{dim} input.level[value='{lv}']")).to_be_checked()
            expect(page.locator(f"#dim-{dim} input.level:checked")).to_have_count(1)
        page.goto(base + "/case/2")
        expect(page.locator("#dim-thorough input.level[value='1']")).to_be_checked()
        expect(page.locator("#dim-accurate input.level:checked")).to_have_count(0)
    got = {(lb.case_id, lb.dimension): (lb.value, lb.origin) for lb in stored_labels(folder, "alice")}
    with Store.open_existing(folder, read_only=True) as store:
        cases = [c["id"] for c in store.cases()]
    from consensus_eval.api import load_run

    queue = load_run(folder, replies=False).audit
    first, second = queue[0].case_id, queue[1].case_id
    assert {k: v for k, v in got.items() if k[0] == first} == {(first, d): (float(v), "own") for d, v in picks.items()}
    panel = {d.dimension: d.panel_score for d in queue[1].dimensions}
    assert got[second, "thorough"] == (1.0, "own")
    for dim_id in ("accurate", "organized"):
        value, origin = got[second, dim_id]
        assert origin == "accepted" and value == pytest.approx(panel[dim_id])
    assert len(got) == 6 and set(cases) >= {first, second}


@pytest.mark.slow
def test_a_reviewer_toggles_criteria_with_evidence_and_the_verdicts_read_back(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    folder = build_kinds_run(tmp_path / "criteria", "criteria", n_cases=6, per_case=True, noise=0.5)
    with reviewing(folder, "bob") as (page, url, base):
        page.goto(url)
        page.goto(base + "/case/1")
        rows = page.locator("tr.criterion")
        expect(rows).to_have_count(4 + 3)      # the rubric's four, the case's own three
        safety = page.locator("tr.criterion[data-dim=safety]")
        row = safety.filter(has=page.locator("text=allergy"))
        row.locator("button.v-met").click()
        expect(row.locator("button.v-met")).to_have_attribute("aria-pressed", "true")
        row.locator(".crit-evidence").fill("Allergies: penicillin.")
        row.locator(".crit-evidence").press("Tab")
        expect(page.locator("#save-status")).to_have_text(re.compile("^saved"))
        meds = safety.filter(has=page.locator("text=meds"))
        meds.locator("button.v-not-met").click()
        expect(meds.locator("button.v-not-met")).to_have_attribute("aria-pressed", "true")
        # changed: met instead, then withdrawn altogether (pressed again: not reviewed)
        meds.locator("button.v-met").click()
        expect(meds.locator("button.v-not-met")).to_have_attribute("aria-pressed", "false")
        meds.locator("button.v-met").click()                 # pressed again: it stays set (no toggle)
        expect(meds.locator("button.v-met")).to_have_attribute("aria-pressed", "true")
        meds.locator("button.crit-clear").click()              # withdrawn with ×
        expect(meds.locator("button.crit[aria-pressed=true]")).to_have_count(0)
        expect(page.locator("#save-status")).to_have_text(re.compile("^saved"))
        problem = page.locator("tr.criterion[data-dim=case_points][data-criterion=problem]")
        problem.locator("button.v-not-met").click()
        expect(problem.locator("button.v-not-met")).to_have_attribute("aria-pressed", "true")
        expect(page.locator("#case-state")).to_have_text("started")
        # confirm: the criteria left alone take the panel's majority, kept apart as accepted
        with page.expect_navigation(wait_until="load"):     # confirming reloads the page with the accepted verdicts
            page.locator("#confirm-scores").click()
        expect(page.locator("#case-state")).to_have_text("done")
        expect(page.locator("tr.criterion[data-origin=accepted]")).to_have_count(7 - 2)
        page.reload()
        expect(row.locator("button.v-met")).to_have_attribute("aria-pressed", "true")
        expect(row.locator(".crit-evidence")).to_have_value("Allergies: penicillin.")
        expect(problem.locator("button.v-not-met")).to_have_attribute("aria-pressed", "true")
    labels = stored_labels(folder, "bob")
    own = {(lb.dimension, lb.deduction_id): (lb.value, lb.evidence) for lb in labels if lb.origin == "own"}
    assert own == {("safety", "allergy"): ("met", "Allergies: penicillin."),
                   ("case_points", "problem"): ("not_met", None)}
    accepted = {(lb.dimension, lb.deduction_id) for lb in labels if lb.origin == "accepted"}
    assert accepted == {("safety", "meds"), ("safety", "followup"), ("safety", "invented"), ("case_points", "days"),
                        ("case_points", "alarm")}
    assert all(lb.kind == "criterion" for lb in labels) and len({lb.case_id for lb in labels}) == 1
