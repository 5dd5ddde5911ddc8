"""`consensus-eval review` end to end in headless Chromium (Debian's /usr/bin/chromium driven by
Playwright; no browser is downloaded): the server started as a user starts it, over the 16 examples
(plus one case with markup injected) scored by the rules judge; two cases adjudicated, one with the
keyboard and one with the mouse; a reload; a second reviewer in a second browser context; the
injected ``<script>`` inert; POSTs without the token refused; the filled-in sheet downloaded; and
`report` afterwards showing the human agreement section, accepted scores left out of it, and the added
deduction in report.md and in the case's drill-down of report.html.

The team: two reviewers with their own links, blind on their assigned spot-check case, disagreeing on a
score and on a judge's deduction; the adjudicator settling both; the reference used in the validity
figures and shown in the report. A tab left open across a server restart, in Chinese and in English.

Figures (start-up, page loads, time to the first adjudicated case) are printed with ``-s`` and
written to ``$REVIEW_TIMINGS`` when set; screenshots go to ``$REVIEW_SCREENSHOTS`` when set. Nothing
here asserts on time (bench/README.md has the figures).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from consensus_eval.analysis.results import Results
from consensus_eval.api import load_run
from consensus_eval.execution.store import HumanLabelRecord, ReviewerRole, Store
from tests.conftest import ROOT
from tests.helpers import cli_run
from tests.test_review import score_run

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Dialog, Page

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian chromium is not installed (/usr/bin/chromium): apt-get install -y chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(run_dir: Path, port: int, *extra: str) -> tuple[subprocess.Popen[str], str, float]:
    """`consensus-eval review RUN --port P ...` as a subprocess; its URL and the seconds until printed."""
    env = {**os.environ, "COLUMNS": "300", "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "consensus_eval.cli", "review", str(run_dir), "--port", str(port),
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        m = re.search(r"open (http://\S+)", line)
        if m:
            return proc, m.group(1), time.perf_counter() - t0
    proc.wait(timeout=30)
    raise AssertionError("the review server did not start:\n" + "".join(seen))


def stop_server(proc: subprocess.Popen[str]) -> None:
    """Ctrl-C the review server, as a user stops it (killed if it has not stopped in 30 s)."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class Server:
    """A review server a test started (:func:`serving`): its process, the URL it printed, its base URL, and
    the seconds until it printed that URL."""

    run_dir: Path
    args: tuple[str, ...]
    port: int
    proc: subprocess.Popen[str]
    url: str
    start_s: float

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restart(self) -> None:
        """Ctrl-C the server and start it again on the same port (its sessions, in memory, are gone)."""
        stop_server(self.proc)
        self.proc, self.url, self.start_s = start_server(self.run_dir, self.port, *self.args)


@contextmanager
def serving(run_dir: Path, *args: str) -> Iterator[Server]:
    """`consensus-eval review RUN_DIR --port P *args` started as a user starts it; stopped (Ctrl-C) after."""
    port = free_port()
    proc, url, start_s = start_server(run_dir, port, *args)
    server = Server(run_dir, args, port, proc, url, start_s)
    try:
        yield server
    finally:
        stop_server(server.proc)


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's Chromium driven by Playwright, headless; closed after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def reviewing(run_dir: Path, reviewer: str, *args: str,
              viewport: tuple[int, int] = (1400, 1000)) -> Iterator[tuple[Page, str, str]]:
    """The review server started for ``reviewer`` on ``run_dir`` (as a user starts it; ``args`` more of its
    options, e.g. ``--lang en``) and a Chromium page of ``viewport`` on it: yields (page, the URL the server
    printed, the server's base URL); closes both after."""
    with serving(run_dir, "--reviewer", reviewer, *args) as server, chromium() as browser:
        page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
        yield page, server.url, server.base


def collect_dialogs(into: list[str]) -> Callable[[Dialog], None]:
    """A page's ``dialog`` handler: the dialog's message appended to ``into`` (a ``beforeunload`` one as
    "beforeunload"), the dialog dismissed."""
    def on_dialog(dialog: Dialog) -> None:
        into.append("beforeunload" if dialog.type == "beforeunload" else dialog.message)
        dialog.dismiss()
    return on_dialog


def leave_while_saving(page: Page, url: str, dialogs: list[str]) -> None:
    """Leave the page for ``url`` at once. On a loaded machine a save the typing started (700 ms after the
    last key) may still be in flight: the page then asks before it goes (``beforeunload``), the reviewer
    stays (the handler dismisses it), and leaves again once the save has answered. Any other refusal to
    navigate fails the test."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        page.goto(url)
    except PlaywrightError as e:
        assert "ERR_ABORTED" in str(e) and dialogs and dialogs[-1] == "beforeunload", (str(e), dialogs)
        dialogs.pop()   # asked because a save was in flight: what the page is for, not a stray dialog
        page.wait_for_function("() => !document.querySelector('#save-status.saving')")
        page.goto(url)


def settled_goto(page: Page, url: str | None) -> None:
    """Go to ``url`` (None: reload) and wait until the page has re-sent what an earlier visit left unsaved in
    this browser. review.js keeps each write in localStorage until its reply comes; one sent as the page went
    away (keepalive) is never answered to that page, so the next visit sends it again, and may reload itself
    once one is applied. On a loaded machine that reload can abort the test's own navigation
    (net::ERR_ABORTED): the navigation is then made again, so the test still ends on ``url``."""
    from playwright.sync_api import Error as PlaywrightError

    for attempt in range(5):
        try:
            page.reload() if url is None else page.goto(url)
            break
        except PlaywrightError as e:
            if "ERR_ABORTED" not in str(e) or attempt == 4:
                raise
            page.wait_for_load_state("load")
    for _ in range(600):   # a count of looks, each after a 100 ms pause: a hang bound, not a deadline
        try:
            if page.evaluate("() => !Object.keys(localStorage).some((k) => k.startsWith('ce-unsaved:'))"):
                break
        except PlaywrightError:   # the page reloaded itself while it was looked at
            pass
        page.wait_for_timeout(100)
    page.wait_for_load_state("load")


def fill_scores(page: Page, scores: dict[str, str]) -> None:
    """Type a score in each dimension's field and leave it (Tab), as a reviewer does: each one saves."""
    for dim, value in scores.items():
        box = page.locator(f"input.score[data-dim={dim}]")
        box.fill(value)
        box.press("Tab")


def labels(run_dir: Path, reviewer: str | None = None) -> list[HumanLabelRecord]:
    with Store.open_existing(run_dir, read_only=True) as store:
        return store.human_labels(reviewer=reviewer)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return score_run(tmp_path / "scored")


def test_review_in_the_browser(run_dir: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)          # a shared, loaded machine: generous waits, no timing asserted
    shots = Path(os.environ.get("REVIEW_SCREENSHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    dialogs: list[str] = []
    with serving(run_dir, "--reviewer", "alice", "--lang", "en") as server:
        url, base, timings["server_start_s"] = server.url, server.base, server.start_s
        with chromium() as browser:
            ctx = browser.new_context(viewport={"width": 1500, "height": 950}, accept_downloads=True)
            ctx.set_default_timeout(60_000)
            page = ctx.new_page()
            page.on("dialog", collect_dialogs(dialogs))

            # ---- the queue
            t = time.perf_counter()
            page.goto(url)
            expect(page.locator("#queue")).to_be_visible()
            timings["queue_load_s"] = time.perf_counter() - t
            assert page.url == base + "/"                           # the token is dropped from the address
            rows = page.locator("#queue tbody tr.row")
            n_review = rows.count()
            assert n_review >= 3
            ids = [rows.nth(i).locator("td").nth(1).inner_text() for i in range(n_review)]
            assert "case-xss" in ids and "case-04" in ids
            expect(page.locator("#progress")).to_have_text(f"0 of {n_review} done")
            assert "j / ↓" in page.locator("#shortcuts").inner_text()
            page.screenshot(path=str(shots / "queue.png"), full_page=True)

            # ---- case 1 with the keyboard: select, open, next deduction, agree, confirm scores, next case
            page.keyboard.press("j")
            expect(rows.nth(0)).to_have_class(re.compile("selected"))
            t = time.perf_counter()
            page.keyboard.press("Enter")
            page.wait_for_url(base + "/case/1")
            expect(page.locator("article.ded").first).to_be_visible()
            timings["case_load_s"] = time.perf_counter() - t
            first_case = page.locator(".case-id").inner_text()
            page.keyboard.press("n")
            first = page.locator("article.ded").first
            expect(first).to_have_class(re.compile("selected"))
            n = first.get_attribute("data-n")
            active = page.locator("mark.ev.active")
            expect(active.first).to_be_visible()
            ev = active.first.get_attribute("data-ev")
            assert ev is not None and n in ev.split()
            page.keyboard.press("a")
            expect(first.locator("button[data-verdict=agree]")).to_have_attribute("aria-pressed", "true")
            expect(page.locator("#save-status")).to_have_text(re.compile("^saved"))
            page.keyboard.press("s")
            expect(page.locator("#progress")).to_have_text(f"1 of {n_review} done")
            expect(page.locator("#case-state")).to_have_text("done")
            timings["first_case_adjudicated_s"] = time.perf_counter() - t
            timings["review_start_to_first_adjudicated_s"] = (timings["server_start_s"] + timings["queue_load_s"]
                                                              + timings["first_case_adjudicated_s"])
            page.screenshot(path=str(shots / "case-keyboard.png"))
            page.keyboard.press("j")
            page.wait_for_url(base + "/case/2")

            # ---- case 2 with the mouse
            second_case = page.locator(".case-id").inner_text()
            ded = page.locator("article.ded").first
            ded.hover()
            expect(page.locator("mark.ev.active").first).to_be_visible()
            ded.locator("button[data-verdict=disagree]").click()
            expect(ded.locator("button[data-verdict=disagree]")).to_have_attribute("aria-pressed", "true")
            ded.locator(".ded-comment").fill("证据不足 <b>not bold</b>")
            ded.locator(".ded-comment").press("Tab")
            score = page.locator("input.score[data-dim=accuracy]")
            score.fill("25")
            score.press("Tab")
            expect(page.locator("#dim-accuracy .score-note")).to_have_text("yours, saved")
            dim = page.locator("#dim-completeness")
            dim.locator("summary").click()
            dim.locator(".add-type").select_option("fh_absent")
            dim.locator(".add-comment").fill("家族史缺失")
            dim.locator(".add-button").click()
            expect(dim.locator(".added-list li")).to_have_count(1)
            page.locator("#case-comment").fill("人工复核：扣分偏重")
            page.locator("#case-comment").blur()
            page.locator("#confirm-scores").click()
            expect(page.locator("#progress")).to_have_text(f"2 of {n_review} done")
            page.screenshot(path=str(shots / "case-mouse.png"))

            # ---- a comment typed and the page left at once (no pause, no blur): sent as the page goes
            page.locator("input.dim-comment[data-dim=standardization]").type("离开前输入")
            leave_while_saving(page, base + "/", dialogs)
            for _ in range(100):
                if any(lb.kind == "comment" and lb.dimension == "standardization" and lb.comment == "离开前输入"
                       for lb in labels(run_dir)):
                    break
                page.wait_for_timeout(100)
            assert [lb.comment for lb in labels(run_dir, "alice") if lb.dimension == "standardization"
                    and lb.kind == "comment"] == ["离开前输入"]

            # ---- reload: everything is still there, and in the store
            settled_goto(page, base + "/case/2")
            settled_goto(page, None)
            ded = page.locator("article.ded").first
            expect(ded.locator("button[data-verdict=disagree]")).to_have_attribute("aria-pressed", "true")
            expect(ded.locator(".ded-comment")).to_have_value("证据不足 <b>not bold</b>")
            expect(page.locator("input.score[data-dim=accuracy]")).to_have_value("25")
            expect(page.locator("#dim-completeness .added-list li")).to_have_count(1)
            expect(page.locator("#case-comment")).to_have_value("人工复核：扣分偏重")
            expect(page.locator("#case-state")).to_have_text("done")
            expect(page.locator("#dim-accuracy .score-note")).to_have_text("yours, saved")
            expect(page.locator("#dim-completeness .score-note")).to_have_text(
                "the panel's, accepted by you (not counted as your own score)")
            settled_goto(page, base + "/case/1")
            expect(page.locator("article.ded").first.locator("button[data-verdict=agree]")).to_have_attribute(
                "aria-pressed", "true")
            alice = labels(run_dir, "alice")
            by = {(lb.case_id, lb.kind, lb.dimension, lb.deduction_id): lb for lb in alice}
            assert {lb.case_id for lb in alice} == {first_case, second_case}
            assert sum(lb.kind == "score" and lb.case_id == first_case for lb in alice) == 3
            assert by[(second_case, "score", "accuracy", None)].value == 25
            # "confirm" on untouched fields accepts the panel's score: stored as accepted, never as her own
            assert {lb.origin for lb in alice if lb.kind == "score" and lb.case_id == first_case} == {"accepted"}
            assert by[(second_case, "score", "accuracy", None)].origin == "own"
            assert by[(second_case, "score", "completeness", None)].origin == "accepted"
            assert by[(second_case, "comment", None, None)].comment == "人工复核：扣分偏重"
            assert {lb.value for lb in alice if lb.kind == "verdict" and lb.case_id == first_case} == {"agree"}
            assert any(lb.value == "disagree" and lb.comment == "证据不足 <b>not bold</b>" for lb in alice)
            assert [(lb.value, lb.points) for lb in alice if lb.kind == "added_deduction"] == [("fh_absent", 4)]
            assert all(lb.source == "review" and lb.labelled_at > 0 for lb in alice)

            # ---- a second reviewer in a second browser context labels the same case
            ctx_b = browser.new_context(viewport={"width": 1500, "height": 950})
            ctx_b.set_default_timeout(60_000)
            page_b = ctx_b.new_page()
            page_b.on("dialog", collect_dialogs(dialogs))
            page_b.goto(url)
            page_b.get_by_role("link", name="change").click()
            page_b.locator("#reviewer-input").fill("bob")
            page_b.locator("#reviewer-form button").click()
            expect(page_b.locator("#reviewer-name")).to_have_text("bob")
            expect(page_b.locator("#progress")).to_have_text(f"0 of {n_review} done")
            page_b.goto(base + "/case/1")
            ded_b = page_b.locator("article.ded").first
            expect(ded_b.locator("button[data-verdict=agree]")).to_have_attribute("aria-pressed", "false")
            ded_b.locator("button[data-verdict=unsure]").click()
            expect(page_b.locator("#save-status")).to_have_text(re.compile("^saved"))
            page_b.locator("#confirm-scores").click()
            expect(page_b.locator("#progress")).to_have_text(f"1 of {n_review} done")
            bob = labels(run_dir, "bob")
            assert {lb.value for lb in bob if lb.kind == "verdict"} == {"unsure"}
            assert {lb.value for lb in labels(run_dir, "alice") if lb.kind == "verdict" and lb.case_id == first_case} \
                == {"agree"}                                     # alice's label set untouched
            page.reload()                                        # alice still sees her own verdict
            expect(page.locator("article.ded").first.locator("button[data-verdict=agree]")).to_have_attribute(
                "aria-pressed", "true")

            # ---- the injected markup is text, and the page works
            page.goto(base + "/?scope=all")
            page.get_by_role("link", name="case-xss").click()
            expect(page.locator("#record")).to_contain_text("<script>alert('xss')</script>")
            expect(page.locator("#conversation")).to_contain_text("<img src=x onerror=alert(1)>")
            assert page.locator("#record script, #record img, #conversation img").count() == 0
            page.locator("article.ded").last.locator("button[data-verdict=unsure]").click()
            expect(page.locator("#save-status")).to_have_text(re.compile("^saved"))
            page.screenshot(path=str(shots / "case-xss.png"))
            assert dialogs == []

            # ---- POSTs without the token, with a wrong one, or from another origin: 403, nothing stored
            before = len(labels(run_dir))
            act = {"op": "score", "case": 1, "dimension": "accuracy", "value": 1}
            csrf = page.locator('meta[name="csrf-token"]').get_attribute("content")
            assert csrf is not None
            plain = {"Content-Type": "application/json"}
            for headers in (plain, {**plain, "X-CSRF-Token": "f" * 64},
                            {**plain, "X-CSRF-Token": csrf, "Origin": "http://evil.example"}):
                assert page.request.post(base + "/api/label", data=json.dumps(act), headers=headers).status == 403
            other = ctx.new_page()                               # a page of another origin posting blind
            other.goto(f"http://localhost:{server.port}/nothing-here")
            other.evaluate("""url => fetch(url, {method: 'POST', mode: 'no-cors', credentials: 'include',
                               headers: {'Content-Type': 'text/plain'}, body: '{"op":"score","case":1,'
                               + '"dimension":"accuracy","value":1}'}).catch(() => null)""", base + "/api/label")
            assert len(labels(run_dir)) == before
            fresh = browser.new_context()                        # no token link: no access
            assert fresh.request.get(base + "/").status == 403
            assert fresh.request.get(base + "/case/1").status == 403

            # ---- the filled-in sheet
            page.goto(base + "/")
            with page.expect_download() as dl:
                page.get_by_role("link", name=re.compile("Download the filled-in sheet")).click()
            sheet = Path(dl.value.path()).read_bytes().decode("utf-8-sig")
            rows_csv = list(csv.DictReader(io.StringIO(sheet)))
            assert {r["reviewer"] for r in rows_csv} == {"alice"}          # the sheet is alice's, every row
            assert {r["human_verdict"] for r in rows_csv if r["row"] == "deduction"} == {
                "agree", "disagree", "unsure", ""}
            assert any(r["human_score"] == "25" and r["case_id"] == second_case for r in rows_csv)
    assert server.proc.returncode in (0, -signal.SIGINT, 130), server.proc.returncode

    # ---- `report` afterwards: the human section, from the labels in the store
    res = cli_run(["report", str(run_dir)], cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    md = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "Agreement with the human" in md or "与人工评分的一致性" in md
    # case 1 was confirmed untouched (accepted: not a human score); case 2 has alice's own accuracy score
    assert re.search(r"\b1 case\(s\) with human labels|1 个病例有人工标注", md)
    # accepted: alice 3 on case 1 and 2 on case 2, bob 3 on case 1
    assert "8 个评分为复核者直接采纳评审组的评分" in md or "8 score(s) were the panel's, accepted" in md
    # the deduction alice added is in report.md (type, comment, reviewer) and in the case's drill-down
    added_rows = [line for line in md.splitlines() if "家族史完全缺失" in line]
    assert any(second_case in line and "家族史缺失" in line and "alice" in line for line in added_rows), added_rows
    anchor = next(a.anchor for a in load_run(run_dir, n_boot=0).audit if a.case_id == second_case)
    with chromium() as browser:
        report = browser.new_page()
        report.goto((run_dir / "report.html").as_uri() + "#" + anchor)
        added = report.locator("tr.drill ul.added li")
        expect(added).to_have_count(1)
        expect(added).to_contain_text("alice")
        expect(added).to_contain_text("家族史完全缺失")
        expect(added).to_contain_text("家族史缺失")

    summary = {k: round(v, 3) for k, v in timings.items()}
    print("review timings:", json.dumps(summary))
    if os.environ.get("REVIEW_TIMINGS"):
        Path(os.environ["REVIEW_TIMINGS"]).write_text(json.dumps(summary, indent=2), encoding="utf-8")


def test_a_spot_check_case_is_blind_until_the_reviewers_own_scores(run_dir: Path) -> None:
    """A random spot check drawn on the CLI; in the browser the spot-check filter lists its cases, a case
    shows no judge score or deduction until the reviewer's own scores are confirmed, then shows them; the
    scores are stored as the reviewer's own, and the report's validity section counts the case."""
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    res = cli_run(["audit", str(run_dir), "--spot-check", "4", "--seed", "3"], cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    with Store.open_existing(run_dir, read_only=True) as store:
        spot = [r.case_id for r in store.spot_checks()]
    with reviewing(run_dir, "alice", "--lang", "zh", viewport=(1400, 950)) as (page, url, base):
        page.goto(url)
        page.goto(base + "/?scope=spot")
        rows = page.locator("#queue tbody tr.row")
        expect(rows).to_have_count(4)
        assert sorted(rows.nth(i).locator("td").nth(1).locator("a").inner_text() for i in range(4)) == sorted(spot)
        expect(rows.first.locator(".blind-row")).to_contain_text("评分前不显示评审结果")
        rows.first.locator("td").nth(1).locator("a").click()
        expect(page.locator("#spot-note")).to_contain_text("请先给出您自己的各维度评分")
        assert page.locator(".judges, article.ded, mark.ev").count() == 0
        assert page.locator("input.score").evaluate_all("xs => xs.map(x => x.value)") == ["", "", ""]
        fill_scores(page, {"accuracy": "31", "completeness": "30.5", "standardization": "22"})
        page.locator("#confirm-scores").click()
        expect(page.locator("#spot-note")).to_contain_text("现在显示评审的评分与扣分")     # reloaded, open
        expect(page.locator(".judges").first).to_be_visible()
    mine = [lb for lb in labels(run_dir, "alice") if lb.kind == "score"]
    assert len(mine) == 3 and {lb.origin for lb in mine} == {"own"} and mine[0].case_id in spot
    res = cli_run(["report", str(run_dir), "--lang", "en"], cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    md = (run_dir / "report.en.md").read_text(encoding="utf-8")     # English, beside the rubric's Chinese one
    assert "4 cases drawn at random" in md and "1 of them have a clinician's own score" in md


def test_a_team_double_reviews_blind_and_an_adjudicator_settles_the_disagreement(run_dir: Path) -> None:
    """Two reviewers, each with their own link in their own browser, score the same assigned spot-check case
    blind, then give opposite verdicts on a judge's deduction; they disagree on a score and on the verdict;
    the adjudicator sees both on the team page, gives the reference score and the reference verdict, which
    the validity figures then use, and the report's drill-down shows. The shared token link opens nothing
    in team mode."""
    from playwright.sync_api import expect

    from consensus_eval import api

    expect.set_options(timeout=30_000)
    api.spot_check(run_dir, 1, seed=5)
    roles: tuple[tuple[str, ReviewerRole], ...] = (("li", "reviewer"), ("wang", "reviewer"), ("chen", "adjudicator"))
    keys = {n: api.add_reviewer(run_dir, n, role=r)[1] for n, r in roles}
    plan = api.assign(run_dir, 2)
    (case_id, who), = plan.items()
    assert sorted(who) == ["li", "wang"]
    verdict = {"li": "agree", "wang": "disagree"}
    with serving(run_dir, "--lang", "en") as server, chromium() as browser:
        url, base = server.url, server.base
        assert browser.new_context().request.get(url).status == 403       # the token link is off
        for name, acc in (("li", "30"), ("wang", "36")):
            page = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
            page.goto(f"{base}/?key={keys[name]}")
            expect(page.locator("#reviewer-name")).to_have_text(name)
            assert page.locator("a[href='/reviewer']").count() == 0       # the name is the link's
            rows = page.locator("#queue tbody tr.row")
            expect(rows).to_have_count(1)                                 # their assigned case only
            rows.first.locator("td").nth(1).locator("a").click()
            expect(page.locator("#spot-note")).to_contain_text("give your own score")
            assert page.locator(".judges, article.ded").count() == 0      # blind
            fill_scores(page, {"accuracy": acc, "completeness": "31", "standardization": "21"})
            page.locator("#confirm-scores").click()
            expect(page.locator(".judges").first).to_be_visible()        # open once scored
            ded = page.locator("article.ded").first                       # opposite verdicts on one deduction
            ded.locator(f"button[data-verdict={verdict[name]}]").click()
            expect(ded.locator(f"button[data-verdict={verdict[name]}]")).to_have_attribute("aria-pressed", "true")
            expect(page.locator("#save-status")).to_have_text(re.compile("^saved"))
            page.context.close()
        lead = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
        lead.goto(f"{base}/?key={keys['chen']}")
        lead.locator("#team-link").click()
        row = lead.locator("#team-cases tbody tr.needs-adjudication")
        expect(row).to_have_count(1)
        expect(row.locator("td").nth(3)).to_have_text("6.0")
        expect(row.locator("td.conflicts")).to_have_text("1")                # one verdict conflict
        row.locator("a.adjudicate").click()
        expect(lead.locator("#adjudication tbody tr").first).to_contain_text("30")
        conflict = lead.locator("#verdict-conflicts article.conflict")
        expect(conflict).to_have_count(1)                                    # the two verdicts side by side
        expect(conflict).to_contain_text("li: Agree")
        expect(conflict).to_contain_text("wang: Disagree")
        lead.locator("input[name=score_accuracy]").fill("33")
        lead.locator("input[name=score_completeness]").fill("31")
        lead.locator("input[name=score_standardization]").fill("21")
        # no reference verdict chosen yet: the form cannot be sent
        assert conflict.locator("select").evaluate("s => s.validity.valueMissing") is True
        conflict.locator("select").select_option("disagree")
        lead.locator("#save-reference").click()
        expect(lead.locator("#team-cases")).to_contain_text("adjudicated by chen")
        conflict_ids = conflict_ids_of(run_dir, case_id)
    res = api.load_run(run_dir, n_boot=0)
    assert res.review is not None
    cr = res.review.case(case_id)
    assert cr is not None
    assert cr.human["total"] == 85.0                                             # the reference, not the mean
    assert cr.reference_verdicts == dict.fromkeys(conflict_ids, "disagree")
    v = res.reliability.validity
    assert v is not None and v.n_labelled == 1
    assert v.scores["total"].raters["panel"].n == 1
    panel_total = next(c.total for c in res.consensus if c.case_id == case_id)
    assert panel_total is not None
    assert v.scores["total"].raters["panel"].bias == pytest.approx(panel_total - 85)    # the mean would be 84
    # the deduction the reviewers tied on is decided by the reference verdict: counted, as not deserved
    assert v.deductions is not None
    judge = conflict_ids_judge(res, conflict_ids)
    assert v.deductions.precision[judge].n >= 1 and v.deductions.precision[judge].k < v.deductions.precision[judge].n
    # the report's drill-down shows the reference verdict beside the reviewers'
    api.rebuild(run_dir, n_boot=0, lang="en")
    anchor = next(a.anchor for a in res.audit if a.case_id == case_id)
    with chromium() as browser:
        page = browser.new_page()
        page.goto((run_dir / "report.html").as_uri() + "#" + anchor)
        drill = page.locator("tr.drill")
        expect(drill.locator(".badge.rv")).to_have_count(1)
        expect(drill.locator(".badge.rv")).to_have_text("reference (chen): disagrees")
        expect(drill.locator(".badge.hv", has_text="li: agrees")).to_have_count(1)


def conflict_ids_of(run_dir: Path, case_id: str) -> list[str]:
    """The deduction ids the reviewers' verdicts on ``case_id`` disagree on (li agree, wang disagree)."""
    verdicts: dict[str, dict[str, str]] = {}
    for lb in labels(run_dir):
        if lb.kind == "verdict" and lb.case_id == case_id and lb.origin == "own" and lb.deduction_id:
            verdicts.setdefault(lb.deduction_id, {})[lb.reviewer] = str(lb.value)
    return sorted(i for i, by in verdicts.items() if by == {"li": "agree", "wang": "disagree"})


def conflict_ids_judge(res: Results, ids: list[str]) -> str:
    """The judge that made the deductions ``ids``."""
    judges = {jv.judge for a in res.audit for d in a.dimensions for jv in d.judges for x in jv.deductions
              if x.id in ids}
    assert len(judges) == 1, judges
    return str(judges.pop())


#: what a tab left open across a restart says, per page language: (the banner, the save status)
STALE = {"zh": ("服务器已重启或链接已失效", "会话已失效"),
         "en": ("the server was restarted or the link is no longer valid", "the session has ended")}


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_tab_left_open_across_a_restart_says_so_and_keeps_the_input(run_dir: Path, lang: str) -> None:
    """The server restarts (its sessions are in memory): the old tab's next save is refused, and the page
    says so in a banner, in the page's language (Chinese or English), keeping what was typed; nothing is
    stored from it."""
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    with serving(run_dir, "--reviewer", "li", "--lang", lang) as server, chromium() as browser:
        page = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
        page.goto(server.url)
        page.goto(f"{server.base}/case/1")
        expect(page.locator("input.score").first).to_be_visible()
        server.restart()
        box = page.locator("input.score[data-dim=accuracy]")
        box.fill("27.5")
        box.press("Tab")
        banner, status = STALE[lang]
        expect(page.locator("#stale-banner")).to_contain_text(banner)
        expect(page.locator("#save-status")).to_contain_text(status)
        expect(box).to_have_value("27.5")                         # what was typed stays
    assert [lb for lb in labels(run_dir) if lb.kind == "score"] == []


def test_the_queue_and_a_case_fit_a_phone(run_dir: Path) -> None:
    """At 390 px the queue, a case and the team page never scroll sideways (a wide table scrolls inside)."""
    with reviewing(run_dir, "li", "--lang", "zh", viewport=(390, 844)) as (page, url, base):
        page.goto(url)
        for path in ("/?scope=all", "/case/1", "/team"):
            page.goto(f"{base}{path}")
            widths = page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
            assert widths[0] <= widths[1], (path, widths)
        # the queue's numbers stay on one line each (they wrapped one digit per line)
        page.goto(f"{base}/?scope=all")
        lines = page.evaluate("""() => Array.from(document.querySelectorAll('#queue td.num')).map((td) => {
            const r = document.createRange(); r.selectNodeContents(td);
            return new Set(Array.from(r.getClientRects()).map((x) => Math.round(x.top))).size; })""")
        assert lines and max(lines) == 1, lines
        # the case title and the previous / next links do not overlap
        page.goto(f"{base}/case/2")
        boxes = page.evaluate("""() => ['.pager', '.case-head h1'].map((q) => {
            const r = document.querySelector(q).getBoundingClientRect();
            return [r.top, r.bottom, r.left, r.right]; })""")
        (pt, pb, pl, pr), (ht, hb, hl, hr) = boxes
        assert pb <= ht or hb <= pt or pr <= hl or hr <= pl, boxes
