"""A team's review (docs/review.md) replayed in headless Chromium (Debian's /usr/bin/chromium driven by Playwright): two
reviewers labelling the same blind spot-check case at once, double clicks, a blind score revised after the reveal,
one reviewer's two tabs, the panel's score "accepted" through the JSON API on a blind case, the adjudicator, a
reviewer removed while their page is open, and a server restart. After each step the stored events (the label
history) and the validity inputs (each reviewer's scores as validity reads them, the reviewers validity counts)
are asserted:

- blind scores are unchanged by edits made after the reveal (they are revisions);
- the adjudicator never appears as a rater (their entries are references);
- no action stores twice (a double click, a repeated request);
- a stale tab gets a conflict, showing both values, and the reviewer chooses;
- a removed reviewer's next save is refused, and nothing of theirs is stored after.

The server runs in this process (uvicorn in a thread, over the run's store: it holds the run for review); the
reviewer is removed while it serves by the real `consensus-eval reviewers remove` in another process, a team change
that runs beside the server (docs/limits.md, "One writer per run")."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from consensus_eval import api
from consensus_eval.analysis.human import HumanReview
from consensus_eval.execution.store import STORE_NAME, LabelEvent, Store
from consensus_eval.review.app import create_app
from consensus_eval.review.model import ReviewRun, catalogue
from tests.conftest import ROOT
from tests.helpers import cli_run
from tests.test_review import score_run
from tests.test_review_browser import CHROMIUM, free_port

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian chromium is not installed (/usr/bin/chromium): apt-get install -y chromium")

T = catalogue("zh")
DIMS = ("accuracy", "completeness", "standardization")


class InProcessServer:
    """The review app over ``run_dir`` served by uvicorn in a thread of this process, on ``port``; :meth:`restart`
    stops it (its sessions, in memory, are gone) and serves again on the same port."""

    def __init__(self, run_dir: Path, port: int) -> None:
        self.run_dir = run_dir
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import uvicorn

        run = ReviewRun.open(self.run_dir)
        app, _ = create_app(run, lang="zh")
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False,
                                lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        for _ in range(600):                         # a work counter, not a deadline: up to 600 polls
            if self._server.started:
                return
            time.sleep(0.05)
        raise AssertionError("the review server did not start")

    def stop(self) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join()

    def restart(self) -> None:
        self.stop()
        self.start()


@contextmanager
def serving(run_dir: Path) -> Iterator[InProcessServer]:
    server = InProcessServer(run_dir, free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def events(run_dir: Path) -> list[LabelEvent]:
    with Store(run_dir / STORE_NAME, read_only=True) as store:
        return store.label_events()


def review(run_dir: Path) -> HumanReview:
    """The labels as every figure reads them (validity included)."""
    res = api.load_run(run_dir, n_boot=0, reuse_saved=False)
    assert res.review is not None
    return res.review


def validity_inputs(run_dir: Path, case_id: str) -> tuple[dict[str, dict[str, float]], list[str], dict[str, float]]:
    """For one spot-check case: each reviewer's scores as validity reads them, the reviewers validity counts as
    raters, and the adjudicator's reference."""
    r = review(run_dir)
    cr = r.case(case_id)
    assert cr is not None
    return cr.scores, r.reviewers, cr.reference


def api_post(page: Page, action: dict[str, Any]) -> dict[str, Any]:
    """A label POSTed from the page's own session, as a script calling the JSON API would: status and reply."""
    out: dict[str, Any] = page.evaluate("""async (action) => {
        const csrf = document.querySelector('meta[name="csrf-token"]').content;
        const r = await fetch("/api/label", {method: "POST", credentials: "same-origin",
            headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf}, body: JSON.stringify(action)});
        return {status: r.status, body: await r.json()};
    }""", action)
    return out


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return score_run(tmp_path_factory.mktemp("walk"))


@pytest.fixture
def browser() -> Iterator[Browser]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=30_000)          # a shared, loaded machine: generous waits, no timing asserted
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def test_the_team_walk(scored: Path, tmp_path: Path, browser: Browser) -> None:
    from playwright.sync_api import expect

    run = tmp_path / "run"
    run.mkdir()
    for f in scored.iterdir():
        if f.is_file():
            (run / f.name).write_bytes(f.read_bytes())
    sample = [r.case_id for r in api.spot_check(run, 4, seed=11).sample]
    keys = {name: api.add_reviewer(run, name, role=role)[1]     # type: ignore[arg-type]
            for name, role in (("王医生", "reviewer"), ("李医生", "reviewer"), ("陈主任", "adjudicator"),
                               ("赵医生", "reviewer"))}
    with _open(run) as r:
        spot = next(a for a in r.queue.cases if a.case_id in sample
                    and any(jv.deductions for d in a.dimensions for jv in d.judges))
        other_spot = next(a for a in r.queue.cases if a.case_id in sample and a.case_id != spot.case_id)
        queue_case = next(a for a in r.queue.cases if a.case_id not in sample)
    rank, case_id = spot.rank, spot.case_id

    with serving(run) as server:
        def open_as(name: str) -> Page:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.goto(f"{server.base}/?key={keys[name]}")
            return page

        # ---- 1. two reviewers on the same blind case at once
        wang, li = open_as("王医生"), open_as("李医生")
        for page, acc in ((wang, "30"), (li, "24")):
            page.goto(f"{server.base}/case/{rank}")
            expect(page.locator("#case")).to_have_attribute("data-blind", "yes")
            assert page.locator(".judges").count() == 0                         # no judge, no panel score
            page.locator("input.score[data-dim=accuracy]").fill(acc)
            page.locator("input.score[data-dim=completeness]").fill("30")
            page.locator("input.score[data-dim=standardization]").fill("20")
        wang.locator("#confirm-scores").click()
        li.locator("#confirm-scores").click()
        for page in (wang, li):
            expect(page.locator("#case")).to_have_attribute("data-blind", "no")   # reloaded: the judges shown
            expect(page.locator(".judges").first).to_be_visible()
        ev = events(run)
        for name in ("王医生", "李医生"):
            mine = [e for e in ev if e.reviewer == name and e.case_id == case_id]
            assert sorted((e.dimension, e.phase) for e in mine if e.op == "set") == [(d, "blind") for d in sorted(DIMS)]
            assert [e.op for e in mine].count("reveal") == 1
        scores, raters, _ = validity_inputs(run, case_id)
        assert scores["王医生"]["accuracy"] == 30 and scores["李医生"]["accuracy"] == 24

        # ---- 2. a double click on 同意 sets it once (no toggle), a double click on 添加 adds once
        ded = wang.locator("article.ded").first
        ids = json_ids(ded.get_attribute("data-ids"))
        ded.locator("button.verdict[data-verdict=agree]").dblclick()
        expect(ded.locator("button.verdict[data-verdict=agree]")).to_have_attribute("aria-pressed", "true")
        expect(wang.locator("#save-status")).to_contain_text("已保存")
        wait_events(run, lambda e: e.kind == "verdict" and e.reviewer == "王医生", len(ids))
        dim = wang.locator("#dim-completeness")
        dim.locator("summary").click()
        dim.locator(".add-type").select_option("fh_absent")
        dim.locator(".add-evidence").fill("家族史：未问")
        dim.locator(".add-comment").fill("遗漏家族史")
        dim.locator(".add-button").dblclick()
        expect(dim.locator(".added-list li")).to_have_count(1)
        added = wait_events(run, lambda e: e.kind == "added_deduction" and e.reviewer == "王医生", 1)
        assert (added[0].evidence, added[0].comment) == ("家族史：未问", "遗漏家族史")
        verdicts = [e for e in events(run) if e.kind == "verdict" and e.reviewer == "王医生"]
        assert len(verdicts) == len(ids) and {e.value for e in verdicts} == {"agree"}    # stored once, still set

        # ---- 3. a blind score changed after the reveal: a revision; validity keeps the blind one
        field = wang.locator("input.score[data-dim=accuracy]")
        field.fill("27")
        field.blur()
        expect(wang.locator("#dim-accuracy .score-note")).to_contain_text("27")
        revised = wait_events(run, lambda e: e.kind == "score" and e.reviewer == "王医生" and e.phase == "revealed", 1)
        assert revised[0].value == 27
        scores, _, _ = validity_inputs(run, case_id)
        assert scores["王医生"]["accuracy"] == 30                              # blind, unchanged

        # ---- 4. one reviewer's two tabs: the stale one gets a conflict, shows both, and the reviewer chooses.
        # The first tab's timers run on a paused clock, so the typing pause's send (700 ms) fires exactly when the
        # test says, however loaded the machine: the blur's send replaced it, so nothing more is sent.
        wang.clock.install(time=1_800_000_000)
        wang.reload()
        expect(wang.locator("#case-comment")).to_be_visible()
        wang.clock.pause_at(1_800_000_060)
        sent: list[str] = []
        wang.on("request", lambda r: sent.append(r.post_data or "") if r.url.endswith("/api/label") else None)
        second = wang.context.new_page()
        second.goto(f"{server.base}/case/{rank}")
        second.locator("#case-comment").fill("第二个标签页")
        second.locator("#case-comment").blur()
        wait_events(run, lambda e: e.kind == "comment" and e.dimension is None and e.reviewer == "王医生", 1)
        wang.locator("#case-comment").fill("第一个标签页")
        wang.locator("#case-comment").blur()
        box = wang.locator(".case-comment .conflict")
        expect(box).to_be_visible()
        expect(box).to_contain_text("第二个标签页")
        expect(box).to_contain_text("第一个标签页")
        assert len(sent) == 1                            # the blur's send, answered with the conflict
        wang.clock.run_for(1500)                         # past the typing pause: its send, if any, goes now
        box.locator("button.keep-mine").click()
        expect(box).to_be_hidden()
        wait_events(run, lambda e: e.kind == "comment" and e.dimension is None and e.reviewer == "王医生", 2)
        assert len(sent) == 2, sent                      # the blur's and "keep mine": the pause sent nothing
        assert len([e for e in events(run) if e.kind == "comment" and e.dimension is None
                    and e.reviewer == "王医生"]) == 2     # the other tab's, then "keep mine": nothing stored between
        assert case_comment(run, "王医生", case_id) == "第一个标签页"

        # ---- 5. the panel's score cannot be accepted on a blind case, through the JSON API either
        n = len(events(run))
        got = api_post(li, {"op": "scores", "case": other_spot.rank, "scores": {}, "accepted": list(DIMS)})
        assert got["status"] == 400 and "抽查" in got["body"]["error"]
        again = api_post(li, {"op": "comment", "case": rank, "comment": "同一动作", "action_id": "act-1"})
        assert again["status"] == 200 and again["body"]["applied"]
        again = api_post(li, {"op": "comment", "case": rank, "comment": "同一动作", "action_id": "act-1"})
        assert again["status"] == 200 and not again["body"]["applied"]      # a repeated request: stored once
        assert len(events(run)) == n + 1

        # ---- 6. the adjudicator: lands on the team page; the form shows the blind scores, never the panel's
        chen = open_as("陈主任")
        assert chen.url.endswith("/team")
        chen.goto(f"{server.base}/adjudicate/{rank}")
        expect(chen.locator("#adjudicate-blind")).to_be_visible()
        head = chen.locator("#adjudication thead").inner_text()
        assert T("panel") not in head and "王医生" in head and "李医生" in head
        row = chen.locator("#adjudication tbody tr").first.inner_text()
        assert "30" in row and "27" not in row                                   # wang's blind score, not the revision
        for d, v in (("accuracy", "26"), ("completeness", "30"), ("standardization", "20")):
            chen.locator(f"input[name=score_{d}]").fill(v)
        for sel in chen.locator("#verdict-conflicts select").all():
            sel.select_option("agree")
        chen.locator("#save-reference").click()
        expect(chen).to_have_url(f"{server.base}/team")
        refs = [e for e in events(run) if e.reviewer == "陈主任"]
        assert refs and {(e.origin, e.phase) for e in refs} == {("reference", "adjudication")}
        chen.goto(f"{server.base}/case/{rank}")
        expect(chen.locator("#adjudicator-note")).to_be_visible()
        assert chen.locator("fieldset.dims-fields").get_attribute("disabled") is not None
        got = api_post(chen, {"op": "score", "case": rank, "dimension": "accuracy", "value": 26})
        assert got["status"] == 400 and "陈主任" in got["body"]["error"]
        scores, raters, reference = validity_inputs(run, case_id)
        assert "陈主任" not in raters and "陈主任" not in scores and reference["accuracy"] == 26
        assert scores["王医生"]["accuracy"] == 30

        # ---- 7. a reviewer removed while their page is open: the next save is refused, nothing stored
        zhao = open_as("赵医生")
        zhao.goto(f"{server.base}/case/{queue_case.rank}")
        removed = cli_run(["reviewers", "remove", "赵医生", "--run", str(run)], cwd=ROOT)   # another process
        assert removed.returncode == 0, removed.stdout + removed.stderr
        field = zhao.locator("input.score[data-dim=accuracy]")
        field.fill("12")
        field.blur()
        expect(zhao.locator("#stale-banner")).to_contain_text(T("err_access_ended"))
        expect(zhao.locator("#dim-accuracy .score-note")).to_have_text(T("note_unsaved"))
        assert not [e for e in events(run) if e.reviewer == "赵医生"]
        zhao.reload()
        expect(zhao.locator("main")).to_contain_text(T("refused_ended"))

        # ---- 8. a restart: the field says "not saved", the refusal fits team mode, what was typed is saved later
        li.goto(f"{server.base}/case/{queue_case.rank}")
        server.restart()
        field = li.locator("input.score[data-dim=standardization]")
        field.fill("18")
        field.blur()
        expect(li.locator("#dim-standardization .score-note")).to_have_text(T("note_unsaved"))
        expect(li.locator("#stale-banner")).to_contain_text(T("js_session_lost_team")[:12])
        assert not [e for e in events(run) if e.reviewer == "李医生" and e.case_id == queue_case.case_id]
        li.reload()
        expect(li.locator("main")).to_contain_text(T("refused_team")[:20])
        li.goto(f"{server.base}/?key={keys['李医生']}")
        li.goto(f"{server.base}/case/{queue_case.rank}")
        kept = wait_events(run, lambda e: e.reviewer == "李医生" and e.case_id == queue_case.case_id, 1)
        assert (kept[0].dimension, kept[0].value) == ("standardization", 18)
        expect(li.locator("input.score[data-dim=standardization]")).to_have_value("18")

    # ---- after the walk: every event once, blind scores as given, the adjudicator a reference only
    final = events(run)
    last: dict[tuple[object, ...], tuple[object, ...]] = {}
    for e in final:                                  # no event repeats the one before it on the same label
        if e.op == "reveal":
            continue
        key = (e.reviewer, e.kind, e.case_id, e.dimension, e.deduction_id)
        said = (e.op, e.value, e.points, e.comment, e.evidence, e.origin)
        assert last.get(key) != said, e
        last[key] = said
    assert len([e for e in final if e.op == "reveal" and e.case_id == case_id]) == 2    # wang and li, once each
    scores, raters, reference = validity_inputs(run, case_id)
    assert scores["王医生"] == {"accuracy": 30.0, "completeness": 30.0, "standardization": 20.0, "total": 80.0}
    assert scores["李医生"]["accuracy"] == 24 and "陈主任" not in raters and reference["accuracy"] == 26
    res = api.load_run(run, n_boot=0, reuse_saved=False)
    validity = res.reliability.validity
    assert validity is not None and validity.n_labelled >= 1


@contextmanager
def _open(run: Path) -> Iterator[ReviewRun]:
    r = ReviewRun.open(run)
    try:
        yield r
    finally:
        r.close()


def json_ids(text: str | None) -> list[str]:
    import json

    assert text is not None
    ids: list[str] = json.loads(text)
    return ids


def case_comment(run: Path, reviewer: str, case_id: str) -> str | None:
    with Store(run / STORE_NAME, read_only=True) as store:
        return next((lb.comment for lb in store.human_labels(reviewer=reviewer)
                     if lb.case_id == case_id and lb.kind == "comment" and not lb.dimension), None)


def wait_events(run: Path, match: Any, n: int) -> list[LabelEvent]:
    """The stored events ``match`` picks, once there are ``n`` (polled: a save answers after it is stored, but the
    page's request may still be on its way); fails if there are more."""
    for _ in range(400):                             # a work counter, not a deadline
        got = [e for e in events(run) if match(e)]
        if len(got) >= n:
            assert len(got) == n, got
            return got
        time.sleep(0.05)
    raise AssertionError(f"{n} event(s) expected, {len([e for e in events(run) if match(e)])} stored")
