"""report.html in a real browser: Debian's headless Chromium driven by Playwright (no browser download).

Search, sort and filters of the case table; a drill-down opened from its anchor, its quote link to
the <mark> in the record and back; the "not found in the record" badge; the phone width (390 px: the
page never scrolls sideways, tables scroll inside, judge columns stack); injected markup in a record,
a case id and a judge's evidence stays text (no dialog, no console error); the page without
JavaScript still shows the queue and the table; screenshots checked for content by counting the
distinct colours of their pixels (a small PNG decoder below, zlib only).
"""

from __future__ import annotations

import dataclasses
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from typer.testing import CliRunner

from consensus_eval.api import load_run
from consensus_eval.domain.judgment import Deduction, Judgment
from consensus_eval.output.report import write_reports
from tests.helpers import present
from tests.test_audit import PANEL, build_panel_store, panel_cases

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(),
                                reason="Debian chromium is not installed (/usr/bin/chromium): apt-get install chromium")

INVENTED = "患者自述曾服用阿司匹林十年"          # quoted by a judge, in neither the record nor the conversation
PWN_RECORD = "主诉：口干3年。</script><script>alert('record')</script><!-- <img src=x onerror=alert('img')>"
PWN_EVIDENCE = "<script>alert('evidence')</script>"
PWN_ID = "c</script><script>alert('id')</script>"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def panel_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 3-judge panel of test_audit, plus an invented quote (ungrounded) and one human review."""
    out = tmp_path_factory.mktemp("browser") / "panel"
    panel = dict(PANEL)
    panel[("c1", "judge-b", "completeness")] = Judgment(dimension="completeness", deductions=[
        Deduction(category="past_history", type="ph_other_missing", points=1, evidence=INVENTED)])
    build_panel_store(out, panel)
    labels = out.parent / "human.csv"
    labels.write_text("case_id,accuracy,completeness,standardization\nc1,30,35,25\nc2,33,35,25\nc3,40,35,23\n",
                      encoding="utf-8")
    from consensus_eval.cli import app

    res = CliRunner().invoke(app, ["report", str(out), "--human", str(labels), "--lang", "en"])
    assert res.exit_code == 0, res.output
    return out / "report.en.html"      # English, beside the rubric's Chinese report.html


@pytest.fixture(scope="module")
def pwn_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Markup in a record, in a case id and in a judge's evidence and reason."""
    out = tmp_path_factory.mktemp("browser") / "pwn"
    cases = panel_cases()
    cases[0] = cases[0].model_copy(update={"record": PWN_RECORD})
    cases[1] = cases[1].model_copy(update={"id": PWN_ID})
    panel = {("c1", "judge-a", "accuracy"): Judgment(dimension="accuracy", deductions=[
        Deduction(category="numbers", type="value_error", points=2, evidence=PWN_EVIDENCE, reason=PWN_RECORD)]),
        (PWN_ID, "judge-b", "accuracy"): Judgment(dimension="accuracy", deductions=[
            Deduction(category="numbers", type="value_error", points=2, evidence="</script>", reason="<!--")])}
    build_panel_store(out, panel, cases)
    _, html = write_reports(load_run(out, n_boot=0), out, "en")
    return html


class Page:
    """A fresh page on a report, with every dialog, console error and page error it raised."""

    def __init__(self, browser: Browser, html: Path, width: int = 1280, js: bool = True, fragment: str = "") -> None:
        self.context = browser.new_context(viewport={"width": width, "height": 900}, java_script_enabled=js)
        self.page = self.context.new_page()
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        def on_dialog(d: Any) -> None:
            self.dialogs.append(d.message)
            d.dismiss()

        self.page.on("dialog", on_dialog)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(html.as_uri() + fragment)

    def visible_ids(self) -> list[str]:
        ids: list[str] = self.page.eval_on_selector_all("#case-table tbody tr[data-id]:not([hidden])",
                                                        "rows => rows.map(r => r.dataset.id)")
        return ids

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def page(browser: Browser, panel_html: Path) -> Iterator[Page]:
    p = Page(browser, panel_html)
    yield p
    assert not p.errors and not p.dialogs, (p.errors, p.dialogs)
    p.close()


# --------------------------------------------------------------------------- search, sort, filters


def test_search(page: Page) -> None:
    assert page.visible_ids() == ["c4", "c2", "c1", "c3"]           # the review order (c1: a quote not found)
    page.page.fill("#f-text", "c3")
    assert page.visible_ids() == ["c3"]
    assert page.page.inner_text("#f-count") == "1 of 4 cases shown"
    page.page.fill("#f-text", "stars differ")                         # flags are searched too
    assert page.visible_ids() == ["c2"]
    page.page.fill("#f-text", "口语化")                               # a deduction type (c3's colloquial)
    assert page.visible_ids() == ["c3"]
    page.page.fill("#f-text", "药名错误")                             # another type (c2's drug_name_error)
    assert page.visible_ids() == ["c2"]
    page.page.click("#f-reset")
    assert len(page.visible_ids()) == 4


def test_search_finds_a_word_only_in_a_judges_reason(page: Page) -> None:
    """A word that is only in a judge's reason (c2: judge-a's "药名写错"), not in any row: found through the
    drill-down payloads the page embeds, inflated at the first search."""
    p = page.page
    assert "药名写错" not in p.inner_text("#case-table")               # not in any row's text
    assert "reasons" in (p.get_attribute("#f-text", "placeholder") or "")
    p.fill("#f-text", "药名写错")
    p.wait_for_function("() => document.getElementById('f-count').textContent.startsWith('1 of')")
    assert page.visible_ids() == ["c2"]
    p.fill("#f-text", "写错了三次")                                      # in no reason: nothing
    p.wait_for_function("() => document.getElementById('f-count').textContent.startsWith('0 of')")
    p.fill("#f-text", "药名写")                                         # part of the reason, typed again
    p.wait_for_function("() => document.getElementById('f-count').textContent.startsWith('1 of')")
    assert page.visible_ids() == ["c2"]


def test_sort(page: Page) -> None:
    total = page.page.locator("#case-table thead button", has_text=re.compile(r"^total$"))
    total.click()                                                    # numbers: highest first
    assert page.visible_ids() == ["c3", "c2", "c1", "c4"]             # totals 99, 95, 87.7, then none
    assert page.page.evaluate("[...document.querySelectorAll('#case-table th[aria-sort]')]"
                              ".map(th => [th.textContent.trim(), th.getAttribute('aria-sort')])") == \
        [["total /100", "descending"]]
    total.click()
    assert page.visible_ids() == ["c1", "c2", "c3", "c4"]
    page.page.locator("#case-table thead button", has_text=re.compile(r"^case$")).click()
    assert page.visible_ids() == ["c1", "c2", "c3", "c4"]
    # the whole header cell sorts, not only its word: a click on the "/100" beside "total"
    page.page.locator("#case-table thead th", has_text=re.compile(r"^total")).locator("span.muted").click()
    assert page.visible_ids() == ["c3", "c2", "c1", "c4"]


def test_filters(page: Page) -> None:
    p = page.page
    p.select_option("#f-status", "failed")
    assert page.visible_ids() == ["c4"]
    p.select_option("#f-status", "")
    p.select_option("#f-flag", "review")
    assert page.visible_ids() == ["c4", "c2", "c1"]
    p.select_option("#f-flag", "none")
    assert page.visible_ids() == ["c3"]
    p.select_option("#f-flag", "")
    p.select_option("#f-stars", "3")                                  # c1's accuracy is 28: 3 stars
    assert page.visible_ids() == ["c1"]
    p.select_option("#f-stars", "")
    p.select_option("#f-judge", label="judge-a stands out")           # singletons (c2), failed (c4), mismatch (c3)
    assert page.visible_ids() == ["c4", "c2", "c3"]
    p.select_option("#f-judge", "")
    p.select_option("#f-cat", label="准确性 · 药物信息准确性")
    assert page.visible_ids() == ["c2"]


# --------------------------------------------------------------------------- drill-downs and highlights


def test_highlight_link_to_the_quote_and_back(page: Page) -> None:
    p = page.page
    p.click("#case-table a.case >> text=c2")
    drill = p.locator("tr.drill")
    drill.locator("pre.record mark").first.wait_for()
    assert p.evaluate("location.hash") == "#case-c2"
    link = drill.locator("blockquote a.ev", has_text="500mg").first
    link.click()
    target = p.evaluate("() => { const t = document.querySelector(':target'); "
                        "return [t.className, t.closest('mark').textContent, t.closest('pre').className]; }")
    assert target == ["qa", "500mg", "record"]
    p.locator("mark:has(:target) > a").click()                       # the <mark> links back to its deduction
    back = p.evaluate("() => { const t = document.querySelector(':target'); return [t.tagName, t.id]; }")
    href = link.get_attribute("href")
    assert href is not None
    assert back[0] == "LI" and back[1] == href.replace("#q-", "d-")
    assert drill.is_visible()


def test_not_found_badge_and_human_beside_the_panel(browser: Browser, panel_html: Path) -> None:
    pg = Page(browser, panel_html, fragment="#case-c1")
    drill = pg.page.locator("tr.drill")
    drill.locator(".jgrid").first.wait_for()
    item = drill.locator("li", has_text=INVENTED)
    assert item.locator(".badge.ungrounded").inner_text() == "not found in the record"
    assert item.locator("a.ev").count() == 0                         # nothing to link to
    assert "human 90 (human's own score) vs panel 87.7" in drill.locator("p").first.inner_text()   # whose it is
    assert not pg.errors and not pg.dialogs
    pg.close()


def test_runs_once_per_line_with_run_labels(browser: Browser, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    build_panel_store(out)
    # the same store read with 3 runs: copy every judgment of judge-a on c2 into runs 1 and 2
    from consensus_eval.execution.store import Store

    with Store(out / "results.sqlite") as store:
        rows = [r for r in store.calls(planned_only=False) if r.case_id == "c2" and r.judge == "judge-a"]
        planned = store.plan()
        extra = []
        for r in rows:
            for run in (1, 2):
                h = r.request_hash.rsplit("|", 1)[0] + f"|{run}"
                extra.append((h, dataclasses.replace(r, request_hash=h, run=run)))
        from consensus_eval.execution.store import PlannedCall

        store.set_plan([*planned, *(PlannedCall(h, r.case_id, r.dimension, r.judge, r.run) for h, r in extra)])
        for _, r in extra:
            store.record(r.to_record())
    _, html = write_reports(load_run(out, n_boot=0), out, "en")
    pg = Page(browser, html, fragment="#case-c2")
    drill = pg.page.locator("tr.drill")
    drill.locator(".jgrid").first.wait_for()
    col = drill.locator(".jcol").first
    assert "×3 runs (every run)" in col.inner_text()
    assert col.locator("li", has_text="1型糖尿病").count() == 1          # once, not three times
    assert not pg.errors
    pg.close()


# --------------------------------------------------------------------------- phone width


def test_phone_width(browser: Browser, panel_html: Path) -> None:
    pg = Page(browser, panel_html, width=390, fragment="#case-c2")
    p = pg.page
    p.locator("tr.drill .jgrid").first.wait_for()
    widths = p.evaluate("() => [document.documentElement.scrollWidth, document.body.scrollWidth, innerWidth]")
    assert widths[0] <= widths[2] and widths[1] <= widths[2], widths   # the page itself never scrolls sideways
    wrap = p.evaluate("() => { const s = document.getElementById('case-table').parentElement; "
                      "return [s.className, s.scrollWidth, s.clientWidth, getComputedStyle(s).overflowX]; }")
    assert wrap[0] == "scroll" and wrap[1] > wrap[2] and wrap[3] == "auto"   # the table scrolls inside
    lefts = p.eval_on_selector_all("tr.drill .jgrid",
                                   "gs => [...gs[0].children].map(c => c.getBoundingClientRect().left)")
    assert len(lefts) == 3 and len(set(lefts)) == 1                    # judge columns stacked
    box = p.evaluate("() => { const r = document.querySelector('tr.drill .dd').getBoundingClientRect(); "
                     "return [r.left, r.right, innerWidth]; }")
    assert box[0] >= 0 and box[1] <= box[2], box                       # the drill-down fits the screen
    svg = p.evaluate("() => { const s = document.querySelector('#distributions figure svg'); "
                     "return [s.getBoundingClientRect().width, innerWidth]; }")
    assert svg[0] <= svg[1]                                            # the box plot scales down
    assert not pg.errors
    pg.close()


# --------------------------------------------------------------------------- safety, no JavaScript


def test_injected_markup_stays_inert(browser: Browser, pwn_html: Path) -> None:
    from consensus_eval.analysis.audit import case_anchor

    for case_id in ("c1", PWN_ID):
        pg = Page(browser, pwn_html, fragment="#" + case_anchor(case_id))
        p = pg.page
        p.locator("tr.drill .jgrid").first.wait_for()
        assert "病历摘要评测" in p.title()
        text = p.inner_text("tr.drill")
        if case_id == "c1":
            assert "</script><script>alert('record')</script>" in text and PWN_EVIDENCE in text
        else:
            assert "</script>" in text
        assert p.evaluate("document.querySelectorAll('tr.drill script, tr.drill img').length") == 0
        assert p.evaluate("document.scripts.length") == 2 + p.evaluate(
            "document.querySelectorAll('script[type=\"application/octet-stream\"]').length")
        assert not pg.dialogs and not pg.errors, (pg.dialogs, pg.errors)
        pg.close()


def test_without_javascript_the_queue_and_table_show(browser: Browser, panel_html: Path) -> None:
    pg = Page(browser, panel_html, js=False)
    p = pg.page
    assert p.locator("#queue-table").is_visible() and p.locator("h2.review").inner_text() == "3 cases need review"
    assert p.locator("#case-table tbody tr").count() == 4 and p.locator("#case-table").is_visible()
    assert not p.locator("#controls").is_visible()                    # no dead controls
    assert p.locator("#alpha-table").is_visible()
    pg.close()


# --------------------------------------------------------------------------- screenshots


def png_colours(data: bytes, step: int = 3) -> int:
    """Distinct colours of an 8-bit RGB or RGBA, non-interlaced PNG (every ``step``-th pixel of every
    ``step``-th row): enough to tell a page with content from a blank one."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    channels = 3
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, _, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    prev = bytearray(stride)
    seen: set[bytes] = set()
    for y, start in enumerate(range(0, len(raw), stride + 1)):
        filt, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if filt == 1:
                line[i] = (line[i] + a) & 255
            elif filt == 2:
                line[i] = (line[i] + b) & 255
            elif filt == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif filt == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % step == 0:
            seen.update(bytes(line[x:x + 3]) for x in range(0, stride, channels * step))
        prev = line
    return len(seen)


def test_png_colours_counts_what_it_sees() -> None:
    def png(rows: list[list[tuple[int, int, int]]]) -> bytes:
        raw = b"".join(b"\x00" + bytes(v for px in row for v in px) for row in rows)
        ihdr = struct.pack(">IIBBBBB", len(rows[0]), len(rows), 8, 2, 0, 0, 0)

        def chunk(kind: bytes, body: bytes) -> bytes:
            return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")

    assert png_colours(png([[(255, 255, 255)] * 4] * 4), step=1) == 1
    assert png_colours(png([[(i, 0, 0) for i in range(4)]] * 2), step=1) == 4


def test_screenshots_have_content(browser: Browser, panel_html: Path, tmp_path: Path) -> None:
    pg = Page(browser, panel_html, fragment="#case-c2")
    p = pg.page
    p.locator("tr.drill pre.record mark").first.wait_for()
    shots = {"queue": p.locator("#review"), "drill-down": p.locator("tr.drill"), "human": p.locator("#human")}
    for name, element in shots.items():
        path = tmp_path / f"{name}.png"
        element.screenshot(path=str(path))
        colours = png_colours(path.read_bytes())
        assert colours > 20, f"{name} screenshot looks blank ({colours} colours)"
    assert p.locator("tr.drill mark").count() >= 2 and p.locator("#human-judges").is_visible()
    assert not pg.errors
    pg.close()


# --------------------------------------------------------------------------- leaderboard and validity


@pytest.fixture(scope="module")
def trust_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two systems x 30 conversations, 3 judges, a random spot check of 24 scored by a clinician (10 of them
    by a second one): the leaderboard, the validity section and the decision study all have content."""
    from consensus_eval.api import spot_check
    from consensus_eval.execution.store import HumanLabelRecord, Store
    from tests.test_trust import _synthetic_panel

    out = tmp_path_factory.mktemp("browser") / "trust"
    panel, cases = _synthetic_panel()
    build_panel_store(out, panel, cases)
    sample = [r.case_id for r in spot_check(out, 24, seed=1, stratify="system").sample]
    totals = {c.case_id: c.total for c in load_run(out, n_boot=0).consensus}
    with Store.open_existing(out) as store:
        for i, cid in enumerate(sample):
            for reviewer in ("li", "wang") if i < 10 else ("li",):
                acc = max(0.0, min(40.0, present(totals[cid]) - 62 + ((1 + i % 2) if reviewer == "wang" else 0)
                                   + (i % 3)))
                for d, v in (("accuracy", acc), ("completeness", 35.0), ("standardization", 25.0)):
                    store.upsert_human_label(HumanLabelRecord(case_id=cid, dimension=d, reviewer=reviewer,
                                                              kind="score", value=v, source="test"))
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_leaderboard_and_validity_sections(browser: Browser, trust_run: Path, lang: str) -> None:
    _, html = write_reports(load_run(trust_run, n_boot=200), trust_run, lang)
    for width in (1280, 390):
        pg = Page(browser, html, width=width, fragment="#systems")
        p = pg.page
        board = p.locator("#leaderboard tbody tr")
        assert board.count() == 2
        assert board.nth(0).locator("td").nth(0).inner_text() == "scribe-a"      # ranked by mean total
        verdict = p.locator("#leaderboard-differences tbody tr").first.inner_text()
        assert ("scribe-a better" if lang == "en" else "scribe-a 更好") in verdict
        p.locator("nav a[href='#validity']").click()
        rows = p.locator("#validity-scores tbody tr")
        assert rows.count() == 5                                   # 3 judges, the panel, the clinicians' ceiling
        ceiling = rows.nth(4).inner_text()
        assert ("clinician vs clinician" if lang == "en" else "临床医生之间") in ceiling
        assert re.search(r"\d\.\d\d \[", ceiling)                  # an ICC with its interval
        assert p.locator("#validity-ppi tbody tr").count() == 2    # one prediction-powered row per system
        words = p.locator("#validity").inner_text()
        assert ("random" in words) if lang == "en" else ("随机" in words)
        assert p.locator("#decision-designs tbody tr").count() == 5
        widths = p.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
        assert widths[0] <= widths[1], widths                      # no sideways scroll, even at 390 px
        assert not pg.errors and not pg.dialogs, (pg.errors, pg.dialogs)
        pg.close()


def test_added_deductions_and_accepted_scores_are_visible_in_the_report(browser: Browser, tmp_path: Path) -> None:
    """A reviewer's added deduction shows in the case's drill-down and in the report's section on what the
    reviewers added (with the judges that missed it); accepted scores are counted there, not as scores."""
    from consensus_eval.api import import_human

    out = build_panel_store(tmp_path / "run", dict(PANEL))
    sheet = tmp_path / "a.csv"
    sheet.write_text("row,case_id,dimension,type_id,points,evidence,human_score,score_origin,human_verdict,"
                     "human_comment,reviewer\n"
                     "added,c2,accuracy,drug_name_error,3,二甲双胍片,,,,漏扣药名错误,li\n"
                     "score,c3,accuracy,,,,38,accepted,,,li\n", encoding="utf-8")
    import_human(out, sheet, n_boot=0, rebuild_outputs=False)
    _, html = write_reports(load_run(out, n_boot=0), out, "en")
    pg = Page(browser, html, fragment="#case-c2")
    p = pg.page
    drill = p.locator("tr.drill")
    drill.locator(".jgrid").first.wait_for()
    added = drill.locator("ul.added li")
    assert added.count() == 1
    assert added.first.inner_text() == "li (准确性): 药名错误 −3 «二甲双胍片» 漏扣药名错误"   # the dimension's name
    row = p.locator("#added-deductions tbody tr").first.inner_text()
    assert "药名错误" in row and "二甲双胍片" in row and "judge-c" in row     # judge-c took no drug_name_error
    assert "1 score(s) were the panel's, accepted by a reviewer" in p.locator("#added").inner_text()
    assert not pg.errors and not pg.dialogs, (pg.errors, pg.dialogs)
    pg.close()
