"""Everything the reports show: a run's :class:`~consensus_eval.analysis.results.Results`, plus the
deterministic metrics a user saved in the output folder (``metrics/*.json``, shown as they are).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from consensus_eval.analysis.agreement import HumanAgreement
from consensus_eval.analysis.alpha import Alpha, krippendorff_alpha
from consensus_eval.analysis.audit import CaseAudit
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.reliability import ReliabilityReport
from consensus_eval.analysis.results import Results
from consensus_eval.domain.cases import Case
from consensus_eval.domain.rubric import Rubric
from consensus_eval.execution.results import JudgeUsage
from consensus_eval.output.report.charts import BoxPlot, Histogram, box_plot, histograms

#: cases shown with full details in report.md (the HTML has every case)
MARKDOWN_TOP = 10


@dataclass(frozen=True)
class PairAgreement:
    """Two judges compared on the totals of the cases both scored completely.

    ``mad`` is the mean absolute difference of their totals (points; None with no shared case);
    ``alpha`` the interval Krippendorff alpha of the two judges' totals (``alpha.value`` None when
    undefined, e.g. fewer than two shared cases or no variation).
    """

    a: str
    b: str
    n: int
    mad: float | None
    alpha: Alpha


@dataclass(frozen=True)
class MetricsFile:
    """One ``metrics/*.json`` file: its numeric values flattened with dotted keys.

    ``values`` are (key, number) pairs in file order; ``context`` the top-level short strings
    (task, file names); ``error`` says why a file could not be read (then both are empty).
    """

    name: str
    values: list[tuple[str, float]]
    context: list[tuple[str, str]]
    error: str | None = None


@dataclass
class ReportData:
    """The content of report.md and report.html."""

    folder: Path
    generated_at: str
    results: Results
    cases: dict[str, Case]
    anchors: dict[str, str]              # case id -> HTML anchor id of its drill-down
    totals: dict[str, list[float]]       # judge -> its complete totals, in case order
    histograms: list[Histogram]
    box_plot: BoxPlot
    agreement: dict[tuple[str, str], PairAgreement]
    reliability: ReliabilityReport
    reliability_source: str              # "reliability.json" or "computed"
    costs: dict[str, JudgeUsage]
    ranking: list[CaseAudit]
    metrics: list[MetricsFile]

    @property
    def rubric(self) -> Rubric:
        return self.results.rubric

    @property
    def judges(self) -> list[str]:
        return self.results.judges

    @property
    def consensus(self) -> list[CaseConsensus]:
        return self.results.consensus

    @property
    def missing_calls(self) -> int:
        """Planned calls not stored yet (an interrupted run); 0 when the run is complete."""
        return self.results.run.missing_calls

    @property
    def planned_calls(self) -> int:
        return self.results.run.planned

    @property
    def incomplete_cases(self) -> int:
        return sum(c.status == "incomplete" for c in self.results.consensus)

    @property
    def human(self) -> HumanAgreement | None:
        """Agreement with the human (present when human labels were given)."""
        return self.reliability.human


def build_report_data(results: Results, folder: Path) -> ReportData:
    """Every figure of the report, from a run's results (and ``folder/metrics/*.json``)."""
    totals = {j: [c.judge_totals[j] for c in results.consensus if j in c.judge_totals] for j in results.judges}
    return ReportData(
        folder=folder, generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        results=results, cases={c.id: c for c in results.cases},
        anchors={c.case_id: f"case-{i}" for i, c in enumerate(results.consensus, 1)},
        totals=totals, histograms=histograms(totals), box_plot=box_plot(totals),
        agreement=pairwise_agreement(results.consensus, results.judges),
        reliability=results.reliability, reliability_source=results.reliability_source,
        costs=results.usage, ranking=results.audit, metrics=load_metrics(folder),
    )


def pairwise_agreement(cons: list[CaseConsensus], judges: list[str]) -> dict[tuple[str, str], PairAgreement]:
    """Every ordered pair of distinct judges (both orders, same figures)."""
    out: dict[tuple[str, str], PairAgreement] = {}
    for i, a in enumerate(judges):
        for b in judges[i + 1:]:
            pa = pair_agreement(cons, a, b)
            out[(a, b)] = pa
            out[(b, a)] = PairAgreement(b, a, pa.n, pa.mad, pa.alpha)
    return out


def pair_agreement(cons: list[CaseConsensus], a: str, b: str) -> PairAgreement:
    """Mean absolute difference and interval alpha of two judges' totals."""
    ta = [c.judge_totals.get(a) for c in cons]
    tb = [c.judge_totals.get(b) for c in cons]
    diffs = [abs(x - y) for x, y in zip(ta, tb, strict=True) if x is not None and y is not None]
    mad = sum(diffs) / len(diffs) if diffs else None
    return PairAgreement(a, b, len(diffs), mad, krippendorff_alpha([ta, tb], "interval"))


def load_metrics(folder: Path) -> list[MetricsFile]:
    """Every ``folder/metrics/*.json``, sorted by name, flattened for display."""
    mdir = folder / "metrics"
    if not mdir.is_dir():
        return []
    return [_metrics_file(p) for p in sorted(mdir.glob("*.json"))]


def _metrics_file(path: Path) -> MetricsFile:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as e:
        return MetricsFile(path.name, [], [], f"cannot read: {e}")
    if not isinstance(data, dict):
        return MetricsFile(path.name, [], [], f"expected a JSON object, got {type(data).__name__}")
    context = [(k, v) for k, v in data.items() if isinstance(v, str) and len(v) <= 200]
    return MetricsFile(path.name, flatten_numbers(data), context)


def flatten_numbers(data: dict[str, Any], prefix: str = "") -> list[tuple[str, float]]:
    """The numeric leaves of nested dicts as (dotted.key, value); booleans, strings, lists and
    non-finite numbers are left out."""
    out: list[tuple[str, float]] = []
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.extend(flatten_numbers(v, key + "."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append((key, float(v)))
    return out
