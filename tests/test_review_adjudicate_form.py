"""What an adjudicator sees and keeps on the adjudication form: the intro says what the rubric's kinds take (a
reference score, a reference level, a reference verdict on a criterion; each of them on a mixed rubric), in both
languages; a POST the server refuses (400) re-renders the form with what the adjudicator had entered (levels,
scores, verdicts), not the reference stored before; a criterion the reviewers disagree on shows each reviewer's
evidence and comment beside their verdict, as a deduction conflict shows its comments. The model and app through
Starlette's test client, then the refused form in Debian's Chromium (/usr/bin/chromium)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from markupsafe import escape

from consensus_eval import api
from consensus_eval.execution.store import ReviewerRole
from consensus_eval.review.app import adjudication_intro, messages
from consensus_eval.review.model import ReviewRun
from tests.helpers import review_client, stored_labels
from tests.kinds_human_run import build_kinds_run
from tests.test_review import score_run

CHROMIUM = Path("/usr/bin/chromium")
OWN = {"li": {"accurate": 2, "thorough": 3, "organized": 4}, "wang": {"accurate": 4, "thorough": 3, "organized": 4}}
SAME = {"accuracy": 30, "completeness": 30, "standardization": 20}


def _intro(page: str) -> str:
    m = re.search(r'<p class="muted" id="adjudicate-intro">(.*?) <a ', page, re.S)
    assert m is not None
    return m.group(1)


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return score_run(tmp_path_factory.mktemp("adjudicate_form"))


@pytest.fixture
def deductions_run(scored: Path, tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A copy of the scored run (medical_record, deductions): li and wang give the same scores of a case with a
    judge's deduction, li agrees with it and wang does not (a verdict conflict: reference scores optional).
    Yields the folder and the case's rank."""
    out = tmp_path / "run"
    out.mkdir()
    for f in scored.iterdir():
        if f.is_file():
            (out / f.name).write_bytes(f.read_bytes())
    with closing(ReviewRun.open(out)) as r:
        rank = next(a.rank for a in r.queue.cases if any(jv.deductions for d in a.dimensions for jv in d.judges))
        item = next(it for d in r.case_view("li", rank).dims for jc in d.judges for it in jc.items)
        for name, verdict in (("li", "agree"), ("wang", "disagree")):
            r.apply(name, {"op": "scores", "case": rank, "scores": SAME})
            r.apply(name, {"op": "verdict", "case": rank, "ids": item.ids, "verdict": verdict})
        assert not r.scores_needed(rank) and len(r.verdict_conflicts(rank)) == 1
    yield out, rank


@pytest.fixture(scope="module")
def likert_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kinds_run(tmp_path_factory.mktemp("likert_form"), "likert", n_cases=4)


@pytest.fixture
def likert_run(likert_base: Path, tmp_path: Path) -> Path:
    to = tmp_path / "likert"
    to.mkdir()
    (to / "results.sqlite").write_bytes((likert_base / "results.sqlite").read_bytes())
    with closing(ReviewRun.open(to)) as r:
        for name, levels in OWN.items():
            r.apply(name, {"op": "scores", "case": 1, "scores": levels, "accepted": []})
    return to


@pytest.fixture
def mixed_run(tmp_path: Path) -> Path:
    """The mixed rubric (a likert attribute, a criteria dimension): li and wang 1 level apart on ``accurate``;
    on the criterion ``meds`` li says met and wang not met, each with evidence and a comment."""
    folder = build_kinds_run(tmp_path / "mixed", "mixed", n_cases=3)
    with closing(ReviewRun.open(folder)) as r:
        for name, level, meds, evidence, comment in (
                ("li", 3, True, "Metformin 500 mg twice a day", "<b>every dose is there</b>"),
                ("wang", 4, False, "aspirin: no dose", "")):
            r.apply(name, {"op": "score", "case": 1, "dimension": "accurate", "value": level})
            r.apply(name, {"op": "criterion", "case": 1, "dimension": "safety", "criterion": "allergy", "met": True})
            r.apply(name, {"op": "criterion", "case": 1, "dimension": "safety", "criterion": "meds", "met": meds,
                           "evidence": evidence, "comment": comment})
    return folder


# --------------------------------------------------------------------------- the intro per kind


def test_the_intro_says_what_each_kind_takes_in_both_languages() -> None:
    en, zh = messages("en"), messages("zh")
    said = {frozenset(k): adjudication_intro(en, k) for k in (
        {"deductions"}, {"likert"}, {"criteria"}, {"likert", "criteria"}, {"deductions", "likert"},
        {"deductions", "likert", "criteria"})}
    assert len(set(said.values())) == len(said)                       # every combination its own words
    assert "reference score of every dimension" in said[frozenset({"deductions"})]
    assert "reference level of every dimension" in said[frozenset({"likert"})]
    assert "score" not in said[frozenset({"likert"})].split(".")[0]
    criteria = said[frozenset({"criteria"})]
    assert "reference verdict on every criterion" in criteria and "reference score of every" not in criteria
    both = said[frozenset({"likert", "criteria"})]
    assert en("adjudicate_part_likert") in both and en("adjudicate_part_criteria") in both
    assert en("adjudicate_part_deductions") not in both
    three = said[frozenset({"deductions", "likert", "criteria"})]
    parts = [three.index(en(f"adjudicate_part_{k}")) for k in ("deductions", "likert", "criteria")]
    assert parts == sorted(parts)
    assert "参考等级" in adjudication_intro(zh, {"likert"}) and "参考评分" not in adjudication_intro(zh, {"likert"})
    assert "条目" in adjudication_intro(zh, {"criteria"}) and "参考评分，" not in adjudication_intro(zh, {"criteria"})
    zh_mixed = adjudication_intro(zh, {"likert", "criteria"})
    assert zh("adjudicate_part_likert") in zh_mixed and zh("adjudicate_part_criteria") in zh_mixed


def test_the_adjudication_page_carries_the_intro_of_its_rubrics_kinds(likert_run: Path, mixed_run: Path,
                                                                       deductions_run: tuple[Path, int]) -> None:
    folder, rank = deductions_run
    for path, at, kinds in ((likert_run, 1, {"likert"}), (mixed_run, 1, {"likert", "criteria"}),
                            (folder, rank, {"deductions"})):
        for lang in ("en", "zh"):
            with closing(ReviewRun.open(path)) as r:
                c, _ = review_client(r, "chen", lang)
                with c:
                    page = c.get(f"/adjudicate/{at}").text
            assert _intro(page) == str(escape(adjudication_intro(messages(lang), kinds)))


# --------------------------------------------------------------------------- a refused form keeps the entries


def test_a_refused_likert_form_shows_the_levels_just_picked_not_the_stored_ones(likert_run: Path) -> None:
    with closing(ReviewRun.open(likert_run)) as r:
        r.adjudicate("chen", 1, {"accurate": 3, "thorough": 3, "organized": 4})
        c, csrf = review_client(r, "chen")
        with c:
            shown = c.get("/adjudicate/1").text                         # the stored reference, before
            assert 'name="score_accurate" value="3" required checked>' in shown
            refused = c.post("/adjudicate/1", data={"csrf": csrf, "score_accurate": "5", "score_thorough": "2",
                                                    "score_organized": "2.5"}, follow_redirects=False)
            assert refused.status_code == 400 and "reference level of organized" in refused.text
            page = refused.text
            assert 'name="score_accurate" value="5" required checked>' in page
            assert 'name="score_thorough" value="2" required checked>' in page
            assert 'name="score_accurate" value="3" required>' in page               # the stored 3: not picked
            assert 'name="score_thorough" value="3" required>' in page
            organized = page.split('data-dim="organized"')[1].split("</fieldset>")[0]
            assert " checked" not in organized                          # 2.5 is no level: none picked
            again = c.get("/adjudicate/1").text                          # a fresh GET: the stored reference
            assert 'name="score_accurate" value="3" required checked>' in again
    assert {lb.dimension: lb.value for lb in stored_labels(likert_run, "chen")} == {"accurate": 3, "thorough": 3,
                                                                              "organized": 4}


def test_a_refused_form_keeps_scores_and_verdicts(deductions_run: tuple[Path, int]) -> None:
    """Reference scores are optional beside a verdict conflict, but all or none: one score and the verdict
    given, the server refuses; the form shows the score and the verdict as entered."""
    folder, rank = deductions_run
    with closing(ReviewRun.open(folder)) as r:
        (conflict,) = r.verdict_conflicts(rank)
        c, csrf = review_client(r, "chen")
        with c:
            refused = c.post(f"/adjudicate/{rank}", data={"csrf": csrf, "score_accuracy": "27.5",
                                                          conflict.key: "disagree"}, follow_redirects=False)
            assert refused.status_code == 400 and "give a reference score of completeness" in refused.text
            page = refused.text
            assert re.search(r'name="score_accuracy" [^>]*value="27.5"', page)
            assert re.search(r'name="score_completeness" [^>]*value=""', page)
            select = page.split(f'name="{conflict.key}"')[1].split("</select>")[0]
            assert '<option value="disagree" selected>' in select and select.count(" selected") == 1
            fresh = c.get(f"/adjudicate/{rank}").text                   # nothing was stored: nothing shown
            assert re.search(r'name="score_accuracy" [^>]*value=""', fresh)
            assert '<option value="" selected>' in fresh.split(f'name="{conflict.key}"')[1]
    assert stored_labels(folder, "chen") == []


def test_a_refused_form_keeps_a_criterion_verdict(mixed_run: Path) -> None:
    with closing(ReviewRun.open(mixed_run)) as r:
        c, csrf = review_client(r, "chen")
        with c:
            refused = c.post("/adjudicate/1", data={"csrf": csrf, "criterion_safety:meds": "not_met",
                                                    "score_accurate": "3.5"}, follow_redirects=False)
            assert refused.status_code == 400
            select = refused.text.split('name="criterion_safety:meds"')[1].split("</select>")[0]
            assert '<option value="not_met" selected>' in select and select.count(" selected") == 1
            assert 'name="score_accurate" value="" checked>' not in refused.text   # 3.5: no level, not "none"
    assert stored_labels(mixed_run, "chen") == []


# --------------------------------------------------------------------------- criterion conflicts: evidence


def test_a_criterion_conflict_shows_each_reviewers_evidence_and_comment(mixed_run: Path) -> None:
    with closing(ReviewRun.open(mixed_run)) as r:
        (cc,) = r.criterion_conflicts(1)
        assert cc.verdicts == {"li": True, "wang": False}
        assert cc.evidence == {"li": "Metformin 500 mg twice a day", "wang": "aspirin: no dose"}
        assert cc.comments == {"li": "<b>every dose is there</b>"}          # wang gave none: none shown
        pages = {}
        for lang in ("en", "zh"):
            with closing(ReviewRun.open(mixed_run)) as again:
                c, _ = review_client(again, "chen", lang)
                with c:
                    pages[lang] = c.get("/adjudicate/1").text
    for lang, page in pages.items():
        t = messages(lang)
        article = page.split('data-criterion="safety:meds"')[1].split("</article>")[0]
        li, wang = re.findall(r"<li>(.*?)</li>", article, re.S)
        assert str(escape(t("reviewer_evidence", text="Metformin 500 mg twice a day"))) in li
        assert "&lt;b&gt;every dose is there&lt;/b&gt;" in li and "<b>" not in li
        assert str(escape(t("reviewer_evidence", text="aspirin: no dose"))) in wang
        assert wang.count(" · ") == 1                                   # the evidence, no empty comment
    assert "证据：Metformin 500 mg twice a day" in pages["zh"]


# --------------------------------------------------------------------------- in the browser


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed (/usr/bin/chromium)")
def test_in_the_browser_a_refused_form_keeps_what_was_entered(deductions_run: tuple[Path, int]) -> None:
    """The adjudicator (team mode, the page in Chinese as the rubric) gives one reference score of three and the
    reference verdict, and saves: the server refuses (all scores or none), the page says so in Chinese, and the
    form still holds the score typed and the verdict picked; the two other scores typed, it saves."""
    from playwright.sync_api import expect

    from tests.test_review_browser import chromium, serving

    expect.set_options(timeout=30_000)
    folder, rank = deductions_run
    roles: tuple[tuple[str, ReviewerRole], ...] = (("li", "reviewer"), ("wang", "reviewer"), ("chen", "adjudicator"))
    keys = {n: api.add_reviewer(folder, n, role=role)[1] for n, role in roles}
    with serving(folder) as server, chromium() as browser:
        page = browser.new_context(viewport={"width": 1300, "height": 1000}).new_page()
        page.goto(f"{server.base}/adjudicate/{rank}?key={keys['chen']}")
        expect(page.locator("#verdict-conflicts article")).to_have_count(1)
        page.locator("input[name=score_accuracy]").fill("27.5")
        page.locator("#verdict-conflicts select").select_option("disagree")
        page.locator("#save-reference").click()
        expect(page.locator("p.error")).to_have_text(messages("zh")("err_give_reference_score", dim="completeness"))
        assert page.locator("input[name=score_accuracy]").input_value() == "27.5"
        assert page.locator("input[name=score_completeness]").input_value() == ""
        assert page.locator("#verdict-conflicts select").input_value() == "disagree"
        assert stored_labels(folder, "chen") == []
        page.locator("input[name=score_completeness]").fill("30")
        page.locator("input[name=score_standardization]").fill("20")
        page.locator("#save-reference").click()
        expect(page.locator("#team-cases")).to_contain_text("chen")
    stored = {(lb.kind, lb.dimension, lb.value) for lb in stored_labels(folder, "chen")}
    assert {("score", "accuracy", 27.5), ("score", "completeness", 30.0), ("score", "standardization", 20.0)} <= stored
    assert {lb.value for lb in stored_labels(folder, "chen") if lb.kind == "verdict"} == {"disagree"}
