"""report.html paged beyond a size (issue 38): the first ``page`` cases in report.html, the others in page files
beside it (``report-cases/0002.html`` ...), each self-contained; stale pages of an earlier build removed, and only
those; a page path that is a folder refused before anything is written; in Chromium, a page's drill-down, its
previous/next links and the way back, and a link to ``report.html#case-<id>`` of a case on another page.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from consensus_eval._errors import InputError
from consensus_eval.api import load_run
from consensus_eval.domain.cases import Case, Turn
from consensus_eval.output.report import write_reports
from consensus_eval.output.report.data import build_report_data
from consensus_eval.output.report.html import render_html
from tests.conftest import ROOT
from tests.test_audit import RECORD, build_panel_store

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM = Path("/usr/bin/chromium")
N = 7
PAGE = 3


def _cases(n: int) -> list[Case]:
    return [Case(id=f"c{i}", conversation=[Turn(role="patient", text=f"患者{i}：口干")], record=RECORD.format(i=i))
            for i in range(1, n + 1)]


@pytest.fixture(scope="module")
def run7(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of 7 cases x 3 judges (report.html in the rubric's Chinese)."""
    out = tmp_path_factory.mktemp("pages") / "run7"
    build_panel_store(out, cases=_cases(N))
    return out


@pytest.fixture(scope="module")
def run4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same panel on 4 cases (a rebuild with fewer cases)."""
    out = tmp_path_factory.mktemp("pages") / "run4"
    build_panel_store(out, cases=_cases(4))
    return out


def _rows(html: Path) -> list[str]:
    return re.findall(r'<tr id="[^"]*" data-id="([^"]*)"', html.read_text(encoding="utf-8"))


def _csp_allows_its_script(text: str) -> bool:
    policy = re.search(r"script-src '(sha256-[^']+)'", text)
    scripts = re.findall(r"<script>(.*?)</script>", text, re.DOTALL)
    digest = "sha256-" + base64.b64encode(hashlib.sha256(scripts[0].encode("utf-8")).digest()).decode("ascii")
    return policy is not None and len(scripts) == 1 and policy.group(1) == digest


@pytest.mark.parametrize("what", ["the cases file", "a folder"])
def test_a_run_refuses_a_page_path_holding_an_input_or_a_folder_before_any_call(tmp_path: Path, what: str) -> None:
    # whether the run will have pages is known when they are written; what is in their place is known before a call
    from consensus_eval import api

    out = tmp_path / "run"
    page = out / "report-cases" / "0002.html"
    page.parent.mkdir(parents=True)
    cases = page if what == "the cases file" else tmp_path / "cases.jsonl"
    cases.write_text((ROOT / "examples" / "cases.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    if what == "a folder":
        page.mkdir()
    before = sorted(p.name for p in out.rglob("*"))
    with pytest.raises(InputError, match=r"report-cases/0002\.html: is (the cases file|a folder)"):
        api.run(api.prepare(cases, ROOT / "configs" / "default.yaml"), out, n_boot=0)
    assert sorted(p.name for p in out.rglob("*")) == before   # no store, nothing written
    assert what == "a folder" or page.read_bytes() == (ROOT / "examples" / "cases.jsonl").read_bytes()


def test_a_run_refuses_a_page_folder_that_is_a_file_before_any_call(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # before, such a run scored every case and was refused only when report.html's pages were written
    from consensus_eval import api
    from consensus_eval.output.report import html

    out = tmp_path / "run"
    out.mkdir()
    (out / "report-cases").write_text("mine", encoding="utf-8")
    prep = api.prepare(ROOT / "examples" / "cases.jsonl", ROOT / "configs" / "offline.yaml")
    monkeypatch.setattr(html, "PAGE", len(prep.cases) - 1)         # the run's report would have a second page
    with pytest.raises(InputError, match=r"report-cases: is not a folder.*move it away \(nothing was called\)"):
        api.run(prep, out, n_boot=0)
    assert sorted(p.name for p in out.iterdir()) == ["report-cases"]   # no store, nothing written
    assert (out / "report-cases").read_text(encoding="utf-8") == "mine"

    monkeypatch.setattr(html, "PAGE", len(prep.cases))             # one page: the file is not in the way
    html.check_page_folder(out, len(prep.cases))
    with pytest.raises(InputError, match="report-cases: is not a folder"):
        html.check_page_folder(out, len(prep.cases) + 1)


def test_a_run_of_two_pages_names_the_one_other_page(run4: Path, tmp_path: Path) -> None:
    write_reports(load_run(run4, replies=False), tmp_path, "en", page=PAGE)
    assert ("Cases 1–3 of 4 are shown here, with their drill-downs; the others are on page 2: "
            '<a href="report-cases/0002.html">2</a>') in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_a_run_of_more_than_a_page_is_split_into_page_files(run7: Path, tmp_path: Path) -> None:
    res = load_run(run7, replies=False)
    write_reports(res, tmp_path, "en", page=PAGE)
    main = tmp_path / "report.html"
    pages = sorted((tmp_path / "report-cases").iterdir())
    assert [p.name for p in pages] == ["0002.html", "0003.html"]
    ranking = [a.case_id for a in res.audit]
    # the table's order as in an unpaged report; every case on exactly one page
    assert _rows(main) == ranking[:3] and _rows(pages[0]) == ranking[3:6] and _rows(pages[1]) == ranking[6:]
    text = main.read_text(encoding="utf-8")
    assert ("Cases 1–3 of 7 are shown here, with their drill-downs; the others are on pages 2–3: "
            '<a href="report-cases/0002.html">2</a> <a href="report-cases/0003.html">3</a>') in text
    # every summary section stays in report.html; its drill-downs are those of its rows only (one chunk of 3, and
    # the chunk listing the other pages' anchors)
    for section in ("review", "cases", "reliability"):
        assert f'<section id="{section}"' in text
    assert len(re.findall(r'id="dd-\d+"', text)) == 2
    two = pages[0].read_text(encoding="utf-8")
    assert 'data-page="2">Cases 4–6 of 7 (page 2 of 3)</p>' in two
    assert '<a href="../report.html">Back to the report</a>' in two
    assert '<a href="../report.html#cases" rel="prev">' in two and '<a href="0003.html" rel="next">' in two
    three = pages[1].read_text(encoding="utf-8")
    assert '<a href="0002.html" rel="prev">' in three and 'rel="next"' not in three
    for page_text in (text, two, three):
        assert _csp_allows_its_script(page_text)
        assert "default-src 'none'" in page_text and not re.search(r'(?:src|href)="(?:https?:)?//', page_text)
    # consensus.csv's list is the whole run: report.md still counts every case
    assert "7" in (tmp_path / "report.md").read_text(encoding="utf-8")


def test_the_page_line_is_in_chinese_too(run7: Path, tmp_path: Path) -> None:
    write_reports(load_run(run7, replies=False), tmp_path, "zh", page=PAGE)
    main = (tmp_path / "report.html").read_text("utf-8")
    assert "此处显示第 1–3 个病例（共 7 个）及其详情；其余病例在第 2–3 页：" in main
    assert "第 4–6 个病例（共 7 个，第 2 / 3 页）" in (tmp_path / "report-cases" / "0002.html").read_text("utf-8")


def test_a_run_of_one_page_is_the_report_it_was(run7: Path, tmp_path: Path) -> None:
    """Up to a page, report.html is one file as before (render_html: every row) and its script has no page lines."""
    res = load_run(run7, replies=False)
    write_reports(res, tmp_path, "en", page=N)
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert not (tmp_path / "report-cases").exists()
    assert "toPage" not in text and "case-pages" not in text and len(_rows(tmp_path / "report.html")) == N
    data = build_report_data(res, tmp_path, "en")
    assert re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d", "", text) == re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d", "",
                                                                    render_html(data))


def test_a_rebuild_removes_its_stale_pages_and_nothing_else(run7: Path, run4: Path, tmp_path: Path) -> None:
    write_reports(load_run(run7, replies=False), tmp_path, "en", page=2)
    folder = tmp_path / "report-cases"
    assert sorted(p.name for p in folder.iterdir()) == ["0002.html", "0003.html", "0004.html"]
    (folder / "0009.html").write_text("<!DOCTYPE html>\n<p>my own notes</p>\n", encoding="utf-8")
    (folder / "0008.html").mkdir()
    (folder / "0008.html" / "keep.txt").write_text("x", encoding="utf-8")
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    # fewer cases: 4 cases, 2 pages
    write_reports(load_run(run4, replies=False), tmp_path, "en", page=2)
    assert sorted(p.name for p in folder.iterdir()) == ["0002.html", "0008.html", "0009.html", "notes.txt"]
    assert (folder / "0008.html" / "keep.txt").read_text(encoding="utf-8") == "x"
    assert "my own notes" in (folder / "0009.html").read_text(encoding="utf-8")
    # one page: report.html alone, and the pages it wrote gone
    write_reports(load_run(run4, replies=False), tmp_path, "en", page=10)
    assert sorted(p.name for p in folder.iterdir()) == ["0008.html", "0009.html", "notes.txt"]


def test_a_page_path_that_is_a_folder_is_refused_with_nothing_destroyed(run7: Path, tmp_path: Path) -> None:
    res = load_run(run7, replies=False)
    write_reports(res, tmp_path, "en", page=PAGE)
    before = {p: p.read_bytes() for p in [tmp_path / "report.html", *(tmp_path / "report-cases").iterdir()]}
    (tmp_path / "report-cases" / "0004.html").mkdir()   # a page this build (of 2 a page) would write
    with pytest.raises(InputError, match=r"0004\.html: is a folder.*nothing was written"):
        write_reports(res, tmp_path, "en", page=2)
    assert {p: p.read_bytes() for p in before} == before
    assert (tmp_path / "report-cases" / "0004.html").is_dir()


def test_a_page_folder_that_is_a_file_is_refused(run7: Path, tmp_path: Path) -> None:
    (tmp_path / "report-cases").write_text("mine", encoding="utf-8")
    with pytest.raises(InputError, match="report-cases: is not a folder"):
        write_reports(load_run(run7, replies=False), tmp_path, "en", page=PAGE)
    assert (tmp_path / "report-cases").read_text(encoding="utf-8") == "mine"
    assert not (tmp_path / "report.html").exists()


# --------------------------------------------------------------------------- in Chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed (/usr/bin/chromium): apt-get install chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def paged(run7: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    out = tmp_path_factory.mktemp("paged")
    res = load_run(run7, replies=False)
    write_reports(res, out, "en", page=PAGE)
    return out, [a.case_id for a in res.audit]


def test_in_chromium_a_page_opens_a_drill_down_and_links_to_its_neighbours(
        browser: Browser, paged: tuple[Path, list[str]]) -> None:
    out, ranking = paged
    context = browser.new_context()
    p = context.new_page()
    errors: list[str] = []
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    p.on("pageerror", lambda e: errors.append(str(e)))
    try:
        p.goto((out / "report-cases" / "0002.html").as_uri())
        assert p.eval_on_selector_all("#case-table tbody tr[data-id]", "rs => rs.map(r => r.dataset.id)") \
            == ranking[3:6]
        p.locator(f'tr[data-id="{ranking[4]}"] a.case').click()
        drill = p.locator("tr.drill")
        drill.locator(".dd pre").first.wait_for()     # built from the page's own chunk: the case's record
        assert p.eval_on_selector("tr.drill", "r => r.previousElementSibling.dataset.id") == ranking[4]
        assert "total" in drill.inner_text()
        p.click("a[rel=next]")
        p.wait_for_url(re.compile(r"0003\.html$"))
        assert p.eval_on_selector_all("#case-table tbody tr[data-id]", "rs => rs.map(r => r.dataset.id)") \
            == ranking[6:]
        p.click("a[rel=prev]")
        p.wait_for_url(re.compile(r"0002\.html$"))
        p.click("text=Back to the report")
        p.wait_for_url(re.compile(r"/report\.html$"))
        assert p.locator("#case-pages").is_visible()
        p.click("#case-pages a >> text=3")
        p.wait_for_url(re.compile(r"0003\.html$"))
        p.click("a[rel=prev]")
        p.click("a[rel=prev]")
        p.wait_for_url(re.compile(r"report\.html#cases$"))
        assert not errors, errors
    finally:
        context.close()


def test_in_chromium_a_link_to_a_case_of_another_page_reaches_it(
        browser: Browser, paged: tuple[Path, list[str]]) -> None:
    out, ranking = paged
    text = (out / "report-cases" / "0003.html").read_text(encoding="utf-8")
    anchor = re.search(rf'<tr id="([^"]*)" data-id="{ranking[6]}"', text).group(1)  # type: ignore[union-attr]
    context = browser.new_context()
    p = context.new_page()
    try:
        p.goto((out / "report.html").as_uri() + "#" + anchor)
        p.wait_for_url(re.compile(rf"report-cases/0003\.html#{anchor}$"))
        p.locator("tr.drill .dd pre").first.wait_for()
        assert p.eval_on_selector("tr.drill", "r => r.previousElementSibling.dataset.id") == ranking[6]
        # a link inside report.html to a case of page 2 (as the review queue's are) goes there too
        p.goto((out / "report.html").as_uri())
        first = re.search(rf'<tr id="([^"]*)" data-id="{ranking[3]}"',  # type: ignore[union-attr]
                          (out / "report-cases" / "0002.html").read_text(encoding="utf-8")).group(1)
        p.evaluate(f"location.hash = '#{first}'")
        p.wait_for_url(re.compile(rf"report-cases/0002\.html#{first}$"))
        p.locator("tr.drill .dd pre").first.wait_for()
    finally:
        context.close()
