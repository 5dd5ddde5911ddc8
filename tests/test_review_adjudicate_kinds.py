"""The adjudication page speaks each rubric kind as the review page does: a likert dimension's reference is a
level picked on its scale (the anchors shown, the reviewers' own levels beside them), stored as that level with
origin ``reference``; a half level or a level off the scale is refused by the server (4xx), not only by the form.
A deductions dimension keeps its number field (tests/test_review.py); a criteria dimension is settled criterion
by criterion (tests/test_kinds_human.py). The model and app through Starlette's test client, then the page in
Debian's Chromium (/usr/bin/chromium); its screenshot goes to ``$REVIEW_SCREENSHOTS`` when set."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from markupsafe import escape

from consensus_eval.analysis.human import build_review
from consensus_eval.execution.store import ReviewerRole
from consensus_eval.review.model import ActionError, ReviewRun
from tests.helpers import review_client, stored_labels
from tests.kinds_human_run import build_kinds_run, kinds_rubric

CHROMIUM = Path("/usr/bin/chromium")
#: two reviewers' own levels on case 1: accurate 2 levels apart (adjudication needed), the others equal
OWN = {"li": {"accurate": 2, "thorough": 3, "organized": 4}, "wang": {"accurate": 4, "thorough": 3, "organized": 4}}


@pytest.fixture(scope="module")
def likert_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kinds_run(tmp_path_factory.mktemp("likert_adj"), "likert", n_cases=4)


@pytest.fixture
def run_dir(likert_run: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the likert run with li's and wang's own levels of case 1 (:data:`OWN`)."""
    to = tmp_path / "run"
    to.mkdir()
    (to / "results.sqlite").write_bytes((likert_run / "results.sqlite").read_bytes())
    with closing(ReviewRun.open(to)) as r:
        for name, levels in OWN.items():
            r.apply(name, {"op": "scores", "case": 1, "scores": levels, "accepted": []})
    yield to


def test_a_likert_reference_is_a_level_on_the_scale_and_a_half_level_is_refused(run_dir: Path) -> None:
    rubric = kinds_rubric("likert")
    with closing(ReviewRun.open(run_dir)) as r:
        case_id = r.case_at(1).case_id
        assert r.scores_needed(1)
        view = {d.id: d for d in r.adjudication_view(1)}
        assert set(view) == {"accurate", "thorough", "organized"}
        for d in rubric.dimensions:
            assert view[d.id].kind == "likert" and view[d.id].levels == sorted(d.anchors.items())
        assert view["accurate"].scores == {"li": 2, "wang": 4} and view["accurate"].picked(2) == ["li"]
        assert view["thorough"].picked(3) == ["li", "wang"] and view["accurate"].reference_level is None
        # the model: a half level, a level off the scale, refused; nothing stored
        good = {"accurate": 3, "thorough": 3, "organized": 4}
        for bad in (2.5, 0, 6, "3.5"):
            with pytest.raises(ActionError, match=r"reference level of accurate is one of its levels 1-5"):
                r.adjudicate("chen", 1, {**good, "accurate": bad})
        with pytest.raises(ActionError, match="give a reference level of organized"):
            r.adjudicate("chen", 1, {"accurate": 3, "thorough": 3})
        assert stored_labels(run_dir, "chen") == []

        c, csrf = review_client(r, "chen")
        with c:
            page = c.get("/adjudicate/1").text
            for d in rubric.dimensions:       # a scale per dimension, as on the review page: levels and anchors
                for lv, anchor in d.anchors.items():
                    assert f'name="score_{d.id}" value="{lv}" required>' in page
                    assert str(escape(anchor)) in page
            assert 'type="number"' not in page and 'step="0.5"' not in page
            assert page.count("Reference level") == 3 and "picked by li, wang" in page and "picked by li<" in page
            assert "<th>reference level</th>" in page and "<th>reference score</th>" not in page
            assert "no reference level" not in page                  # the reference is needed: no way out
            # a half level posted by hand (the form cannot send one): 400, the reason on the page, nothing stored
            form = {"csrf": csrf, **{f"score_{k}": str(v) for k, v in good.items()}}
            for bad in ("2.5", "7"):
                refused = c.post("/adjudicate/1", data={**form, "score_accurate": bad}, follow_redirects=False)
                assert refused.status_code == 400
                assert f"a reference level of accurate is one of its levels 1-5 (a whole level), got {bad}" \
                    in refused.text
            assert stored_labels(run_dir, "chen") == []
            done = c.post("/adjudicate/1", data=form, follow_redirects=False)
            assert done.status_code == 303 and done.headers["location"] == "/team"
            again = c.get("/adjudicate/1").text                      # the reference level shown picked
            assert 'name="score_accurate" value="3" required checked>' in again
            assert 'name="score_accurate" value="2" required>' in again
            (row,) = [p for p in r.team_progress()[1] if p.audit.case_id == case_id]
            assert row.adjudicated_by == ["chen"]
        stored = {lb.dimension: (lb.kind, lb.value, lb.origin) for lb in stored_labels(run_dir, "chen")}
        assert stored == {k: ("score", float(v), "reference") for k, v in good.items()}
    labels = stored_labels(run_dir, "li") + stored_labels(run_dir, "wang") + stored_labels(run_dir, "chen")
    cr = build_review(labels, rubric).cases[case_id]
    assert {k: cr.reference[k] for k in good} == good and cr.human["accurate"] == 3   # the reference, not the mean


def test_the_likert_adjudication_page_in_chinese(run_dir: Path) -> None:
    with closing(ReviewRun.open(run_dir)) as r:
        c, _ = review_client(r, "chen", "zh")
        with c:
            page = c.get("/adjudicate/1").text
    form = page.split('id="adjudicate-form"')[1]
    assert form.count("参考等级") == 4 and "li, wang 所选" in form and "等级 1 至 5" in form   # the header and 3 scales
    assert "选出参考等级" in page.split('id="adjudicate-form"')[0]                          # the intro says levels
    assert "Reference level" not in page and "picked by" not in page


def test_beside_a_criterion_conflict_a_likert_reference_is_optional_and_still_a_level(tmp_path: Path) -> None:
    """A likert attribute and a criteria dimension: the reviewers' levels 1 apart and a criterion they disagree on.
    The criterion takes a reference verdict, stored as the review page stores a verdict (kind ``criterion``, the
    criterion's id and points), origin ``reference``; the level is optional (a "no reference level" choice, picked
    by default), and a half level is refused all the same."""
    folder = build_kinds_run(tmp_path / "mixed", "mixed", n_cases=3)
    with closing(ReviewRun.open(folder)) as r:
        for name, level, meds in (("li", 3, True), ("wang", 4, False)):
            r.apply(name, {"op": "score", "case": 1, "dimension": "accurate", "value": level})
            for cid, met in (("allergy", True), ("meds", meds)):
                r.apply(name, {"op": "criterion", "case": 1, "dimension": "safety", "criterion": cid, "met": met})
        assert not r.scores_needed(1) and [c.key for c in r.criterion_conflicts(1)] == ["criterion_safety:meds"]
        c, csrf = review_client(r, "chen")
        with c:
            page = c.get("/adjudicate/1").text
            scales = page.split('id="criterion-conflicts"')[0]
            assert 'name="score_accurate" value="3">' in scales and " required" not in scales   # optional
            assert 'name="score_accurate" value="" checked>' in page and "no reference level" in page
            assert 'name="criterion_safety:meds" required' in page and "criterion_safety:allergy" not in page
            form = {"csrf": csrf, "criterion_safety:meds": "met"}
            half = c.post("/adjudicate/1", data={**form, "score_accurate": "3.5"}, follow_redirects=False)
            assert half.status_code == 400 and "reference level of accurate is one of its levels 1-5" in half.text
            assert stored_labels(folder, "chen") == []
            done = c.post("/adjudicate/1", data={**form, "score_accurate": ""}, follow_redirects=False)
            assert done.status_code == 303
    (ref,) = stored_labels(folder, "chen")       # the verdict only: no reference level was picked
    (own,) = [lb for lb in stored_labels(folder, "li") if lb.kind == "criterion" and lb.deduction_id == "meds"]
    assert (ref.kind, ref.dimension, ref.deduction_id, ref.points, ref.value, ref.origin) == (
        own.kind, own.dimension, own.deduction_id, own.points, "met", "reference")
    assert own.origin == "own" and ref.points == 5


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed (/usr/bin/chromium)")
def test_an_adjudicator_picks_a_likert_level_in_the_browser(run_dir: Path) -> None:
    """The adjudicator (their own link, team mode) opens the case from the team page, cannot save before a level
    is picked on each scale, picks them by their anchors' labels and saves; the stored labels are those levels
    with origin ``reference``. A half level posted by hand in the same session is refused (400)."""
    from playwright.sync_api import expect

    from consensus_eval import api
    from tests.test_review_browser import chromium, serving

    expect.set_options(timeout=30_000)
    roles: tuple[tuple[str, ReviewerRole], ...] = (("li", "reviewer"), ("wang", "reviewer"), ("chen", "adjudicator"))
    keys = {n: api.add_reviewer(run_dir, n, role=role)[1] for n, role in roles}
    rubric = kinds_rubric("likert")
    with serving(run_dir, "--lang", "en") as server, chromium() as browser:
        page = browser.new_context(viewport={"width": 1300, "height": 1000}).new_page()
        page.goto(f"{server.base}/?key={keys['chen']}")
        page.locator("#team-link").click()
        row = page.locator("#team-cases tbody tr.needs-adjudication")
        expect(row).to_have_count(1)
        row.locator("a.adjudicate").click()
        scales = page.locator("#adjudication fieldset.reference-scale")
        expect(scales).to_have_count(3)
        accurate = page.locator("fieldset.reference-scale[data-dim=accurate]")
        expect(accurate.locator("label.level")).to_have_count(5)
        expect(accurate.locator("label.level", has_text="picked by li")).to_contain_text(rubric.dimension(
            "accurate").anchors[2])
        csrf = page.locator("input[name=csrf]").get_attribute("value")
        assert csrf
        if os.environ.get("REVIEW_SCREENSHOTS"):
            page.screenshot(path=str(Path(os.environ["REVIEW_SCREENSHOTS"]) / "adjudicate_likert.png"), full_page=True)
        page.locator("#save-reference").click()                  # nothing picked: the browser keeps the form
        assert accurate.locator("input").first.evaluate("r => r.validity.valueMissing") is True
        assert stored_labels(run_dir, "chen") == []
        picks = {"accurate": 3, "thorough": 3, "organized": 5}
        for dim, lv in picks.items():                             # a click on the anchor's text picks the level
            page.locator(f"fieldset.reference-scale[data-dim={dim}] label.level", has_text=rubric.dimension(
                dim).anchors[lv]).locator(".anchor").click()
        page.locator("#save-reference").click()
        expect(page.locator("#team-cases")).to_contain_text("adjudicated by chen")
        stored = {lb.dimension: (lb.kind, lb.value, lb.origin) for lb in stored_labels(run_dir, "chen")}
        assert stored == {k: ("score", float(v), "reference") for k, v in picks.items()}
        # by hand, in the adjudicator's session: a half level is refused and the stored levels stay
        reply = page.request.post(f"{server.base}/adjudicate/1", form={
            "csrf": csrf, "score_accurate": "3.5", "score_thorough": "3", "score_organized": "5"}, max_redirects=0)
        assert reply.status == 400
        assert re.search(r"reference level of accurate is one of its levels 1-5 \(a whole level\), got 3\.5",
                         reply.text())
        assert {lb.dimension: lb.value for lb in stored_labels(run_dir, "chen")} \
            == {k: float(v) for k, v in picks.items()}
