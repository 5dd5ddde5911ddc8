"""The first hour: installed from the wheel, in an empty folder, the bundled examples of all three kinds score
offline with a simulated panel; their reports show alpha with intervals, flagged cases and a review queue, and say
"simulated" on the first screen (Debian's Chromium reads the pages).

The wheel is built from this checkout (hatchling, offline: no build isolation) and installed with its files only
(``pip install --no-deps --target``) ahead of the checkout on the path, so the commands run on what the wheel
carries: its own configs, rubrics, prompts and examples, found from a folder that holds nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_review_browser import CHROMIUM, chromium

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed (/usr/bin/chromium)")

#: the README's and docs/judges.md's offline commands, one per kind of rubric
KINDS = {
    "medical_record": ["score", "examples/cases.jsonl", "--config", "configs/offline.yaml", "--out", "out/example"],
    "pdqi9": ["score", "examples/pdqi9/cases.jsonl", "--config", "configs/pdqi9.offline.yaml", "--out", "out/pdqi9"],
    "criteria": ["score", "examples/criteria/cases.jsonl", "--config", "configs/criteria.offline.yaml",
                 "--out", "out/criteria"],
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """(an empty folder, the environment that runs the wheel's consensus-eval in it)."""
    base = tmp_path_factory.mktemp("wheel")
    wheels, site, empty = base / "dist", base / "site", base / "empty"
    empty.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = wheels.glob("consensus_eval-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=600)
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "100", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env = {k: v for k, v in env.items() if not k.endswith("_API_KEY")}        # no key at all
    where = subprocess.run([sys.executable, "-c", "import consensus_eval; print(consensus_eval.__file__)"],
                           cwd=empty, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(str(site)), where                  # the wheel's package, not this checkout's
    yield empty, env


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from consensus_eval.cli import main; main()", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def runs(installed: tuple[Path, dict[str, str]]) -> dict[str, Path]:
    empty, env = installed
    out = {}
    for kind, args in KINDS.items():
        res = _cli(args, empty, env)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "simulated" in res.stdout or "模拟评审" in res.stdout, kind
        out[kind] = empty / args[-1]
    return out


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_examples_score_offline_from_the_wheel_and_the_report_says_simulated(runs: dict[str, Path],
                                                                               kind: str) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    report = runs[kind] / "report.html"
    assert report.is_file()
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(report.as_uri())
        # the first screen: what the totals and the queue's index are, and that the panel is simulated
        banner = page.locator("#simulated")
        expect(banner).to_be_visible()
        box = banner.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 800, box
        assert re.search(r"simulated|模拟评审", banner.inner_text())
        expect(page.locator("#how-to-read")).to_be_visible()
        # a review queue, with the cases that need a human first
        rows = page.locator("#queue-table tbody tr")
        assert rows.count() > 0
        # flagged cases: the case table's filter finds some
        page.select_option("#f-flag", "flagged")
        shown = page.locator("#case-table tbody tr:visible")
        assert shown.count() > 0
        # alpha with its interval, for the total
        total = page.locator("#alpha-table tbody tr").filter(has_text=re.compile(r"^\s*(total|总分)"))
        assert total.count() >= 1
        assert re.search(r"-?\d\.\d+.*\[\s*-?\d\.\d+", total.first.inner_text().replace("\n", " "))
