"""report.html at scale: its size and the time headless Chromium takes to open it.

Builds (once) a run of N cases x J judges written straight into a store (tests/big_run.py: the
bundled examples made distinct, 0-4 deductions per call quoting the record), writes the reports
from the store, and opens report.html in Debian's /usr/bin/chromium through Playwright: the time
to the ``load`` event and then to the first paint of the page, median of ``--repeats`` fresh pages.

    .venv/bin/python bench/report_bench.py --cases 2000 --judges 4 --out /tmp/report-bench

``--page 2000 5000``: write report.html once per page size (paged beyond it, issue 38) and time each;
``--open FILE``: only open a report.html written elsewhere (by another commit) and time it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from consensus_eval.api import load_run
from consensus_eval.output.report import write_reports
from tests.big_run import build_big_run


def open_times(html: Path, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds from navigation to the load event and the next frame, one fresh page per repeat; and
    seconds from clicking the last case of the table (the one in the last compressed chunk) to its
    drill-down drawn."""
    from playwright.sync_api import sync_playwright

    loads, drills = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for _ in range(repeats):
            page = browser.new_page()
            t = time.perf_counter()
            page.goto(html.as_uri(), wait_until="load")
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => r(0)))")
            loads.append(time.perf_counter() - t)
            t = time.perf_counter()
            page.locator("#case-table tbody tr a.case").last.click()
            page.locator("tr.drill pre.record").wait_for()
            drills.append(time.perf_counter() - t)
            page.close()
        browser.close()
    return loads, drills


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--judges", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("/tmp/report-bench"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lang", default=None)
    ap.add_argument("--page", type=int, nargs="+", default=[None], help="cases a page of report.html (paged beyond)")
    ap.add_argument("--open", type=Path, default=None, help="only open this report.html and time it")
    args = ap.parse_args()
    if args.open is not None:
        _print_open(args.open, args.repeats, "opened")
        return
    folder = args.out / f"{args.cases}x{args.judges}"
    if not (folder / "results.sqlite").exists():
        build_big_run(folder, args.cases, args.judges)
    results = load_run(folder, n_boot=200)
    for n, page in enumerate(args.page):
        t = time.perf_counter()
        kwargs: dict[str, Any] = {"lang": args.lang} if args.lang else {}
        if page is not None:
            kwargs["page"] = page
        _, html = write_reports(results, folder, **kwargs)
        render = time.perf_counter() - t
        pages = sorted(html.parent.glob(f"{html.stem}-cases/*.html"))
        extra = f", {len(pages)} page files of {sum(p.stat().st_size for p in pages) / 1e6:.2f} MB" if pages else ""
        _print_open(html, args.repeats, f"{args.cases} cases x {args.judges} judges, page {page or 'default'}: "
                    f"written in {render:.1f} s{'' if n else ' (analysis included)'}{extra};")


def _print_open(html: Path, repeats: int, what: str) -> None:
    """Time opening ``html`` in Chromium and print it after ``what``, with its size and the load average."""
    times, drills = open_times(html, repeats)
    with open("/proc/loadavg", encoding="ascii") as f:
        load = f.read().split()[0]
    print(f"{what} report.html {html.stat().st_size / 1e6:.2f} MB opened in Chromium in "
          f"{statistics.median(times):.2f} s (median of {len(times)}: {', '.join(f'{x:.2f}' for x in times)}); "
          f"a case opened in {statistics.median(drills) * 1000:.0f} ms (median); load average {load}", flush=True)


if __name__ == "__main__":
    main()
