"""Everything the reports show: a run's :class:`~consensus_eval.analysis.results.Results`, plus the
deterministic metrics a user saved in the output folder (``metrics/*.json``, shown as they are).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from consensus_eval.analysis.agreement import HumanAgreement
from consensus_eval.analysis.alpha import Alpha, krippendorff_alpha
from consensus_eval.analysis.audit import LOW_STARS, CaseAudit, ReviewQueue, case_anchors, review_queue
from consensus_eval.analysis.calibration import CalibrationReport
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.human import CaseReview, HumanReview
from consensus_eval.analysis.judge_quality import JudgeQuality
from consensus_eval.analysis.reliability import ReliabilityReport
from consensus_eval.analysis.results import Results
from consensus_eval.analysis.usage import JudgeUsage
from consensus_eval.domain.cases import Case
from consensus_eval.domain.kinds.base import VIEW_DEDUCTIONS
from consensus_eval.domain.kinds.deductions import deductions_in
from consensus_eval.domain.rubric import Dimension, Rubric
from consensus_eval.output.calibration_files import CALIBRATION_JSON, load_calibration
from consensus_eval.output.files import fmt_num
from consensus_eval.output.report.charts import BoxPlot, Histogram, box_plot, histograms
from consensus_eval.output.report.drill import drill_payload
from consensus_eval.output.report.i18n import Messages, default_lang, messages, simulated_notice

#: cases shown with full details in report.md (the HTML has every case, drilled down on demand)
MARKDOWN_TOP = 10
#: rows of the review queue at the top of both reports (the case table has all of them)
QUEUE_TOP = 20
#: report.md lists every case in its summary up to this many; beyond, the queue and the totals only
MARKDOWN_ALL_CASES = 200


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
    reliability: ReliabilityReport
    reliability_source: str              # "reliability.json" or "computed"
    costs: dict[str, JudgeUsage]
    ranking: list[CaseAudit]
    t: Messages = field(default_factory=lambda: messages("en"))

    @cached_property
    def totals(self) -> dict[str, list[float]]:
        """Judge -> its complete totals, in case order."""
        return {j: [c.judge_totals[j] for c in self.consensus if j in c.judge_totals] for j in self.judges}

    @cached_property
    def histograms(self) -> list[Histogram]:
        """One histogram of totals per judge, on shared bins."""
        return histograms(self.totals, x_title=self.t("axis_total"), y_title=self.t("axis_cases"))

    @cached_property
    def box_plot(self) -> BoxPlot:
        """The judges' totals as box plots on one axis."""
        return box_plot(self.totals, x_title=self.t("axis_total"))

    @cached_property
    def agreement(self) -> dict[tuple[str, str], PairAgreement]:
        """Every ordered pair of distinct judges: :func:`pairwise_agreement`."""
        return pairwise_agreement(self.consensus, self.judges)

    @cached_property
    def metrics(self) -> list[MetricsFile]:
        """The run folder's ``metrics/*.json``: :func:`load_metrics`."""
        return load_metrics(self.folder)

    @property
    def lang(self) -> str:
        return self.t.lang

    @cached_property
    def queue(self) -> list[CaseAudit]:
        """The cases that need a human's review, in ranking order (the review queue)."""
        return [a for a in self.ranking if needs_review(a)]

    def reasons(self, a: CaseAudit) -> list[str]:
        """Why ``a`` needs review, in the report's language (:func:`review_reasons`)."""
        cfg = self.results.config.consensus
        return review_reasons(a, self.t, cfg.flag_star_gap)

    @cached_property
    def review_queue(self) -> ReviewQueue:
        """The queue's heading facts (mode, counts per status and reason): :func:`review_queue`."""
        return review_queue(self.ranking, len(self.judges))

    @property
    def single_judge(self) -> bool:
        return len(self.judges) < 2

    @property
    def review(self) -> HumanReview | None:
        """The human labels gathered per case (None without labels)."""
        return self.results.review

    @property
    def judge_quality(self) -> dict[str, JudgeQuality]:
        """Per judge: the share of its deductions not grounded and its claimed-vs-derived mismatch rate."""
        return self.results.judge_quality

    def drill_payloads(self) -> Iterator[dict[str, Any]]:
        """Every case's drill-down as plain data (rendered by the page's script on open), ranking order;
        made one at a time as they are read (a large run's payloads are never all held at once)."""
        review = self.review
        deducting = deductions_in(self.rubric.dimensions)
        types = {t.id: t.name for d in deducting for c in d.categories for t in c.types}
        types.update({p.id: f"{self.t('fixed_penalty')}: {p.name}" for d in deducting for p in d.fixed_penalties})
        for a in self.ranking:
            case = self.cases.get(a.case_id)
            conv = self.rubric.conversation_text(case) if case else ""
            yield drill_payload(a, case.record if case else "", conv, self.judges, self.anchors[a.case_id],
                                review=review.case(a.case_id) if review else None, type_names=types,
                                flags=self.flag_texts(a.case_id))

    @property
    def source_text(self) -> str:
        """Where the reliability figures come from, in the report's language."""
        return self.t("source_computed") if self.reliability_source == "computed" else self.t("source_file")

    def flag_texts(self, case_id: str) -> list[str]:
        """Why the case's panel verdict is disputed, in the report's language
        (:class:`~consensus_eval.analysis.consensus.Flag`); made once per case (the case table and the drill-down
        both show them): the list returned is shared, not to be changed."""
        texts = self._flag_texts.get(case_id)
        if texts is None:
            texts = self._flag_texts[case_id] = self._make_flag_texts(case_id)
        return texts

    @cached_property
    def _flag_texts(self) -> dict[str, list[str]]:
        return {}

    def _make_flag_texts(self, case_id: str) -> list[str]:
        c = self.consensus_by_id.get(case_id)
        names = self.dimension_names
        out = []
        for f in (c.flag_codes if c else []):
            if f.code == "spread":
                out.append(self.t("flag_spread", value=fmt_num(f.value), limit=fmt_num(f.limit)))
            elif f.code in ("level_gap", "split"):
                dim = names.get(f.dimension or "", f.dimension)
                out.append(self.t("flag_" + f.code, dim=dim, value=fmt_num(f.value)))
            else:
                dim = names.get(f.dimension or "", f.dimension)
                out.append(self.t("flag_star_gap", dim=dim, value=fmt_num(f.value)))
        return out

    def human_of(self, case_id: str) -> CaseReview | None:
        """The reviewers' labels of one case (None: nobody labelled it)."""
        return self.review.case(case_id) if self.review else None

    @cached_property
    def dimension_names(self) -> dict[str, str]:
        """Dimension id -> its name in the rubric."""
        return {d.id: d.name for d in self.rubric.dimensions}

    @cached_property
    def consensus_by_id(self) -> dict[str, CaseConsensus]:
        return {c.case_id: c for c in self.results.consensus}

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
    def in_batches(self) -> int:
        """Of :attr:`missing_calls`, those in a provider batch still running (collected by rerunning ``score``)."""
        return self.results.run.in_batches

    @property
    def planned_calls(self) -> int:
        return self.results.run.planned

    @property
    def incomplete_cases(self) -> int:
        return sum(c.status == "incomplete" for c in self.results.consensus)

    @property
    def how_to_read(self) -> list[str]:
        """The first screen's plain sentences: what the total is, what the star total is (when the rubric has one)
        and what the review queue's index is (risk for one judge, disagreement for a panel): an order, not a score."""
        r, t = self.rubric, self.t
        out = [t("read_total", max=fmt_num(r.max_total))]
        if self.has_star_total:
            out.append(t("read_star_total", max=fmt_num(5 * sum(d.star_weight for d in r.dimensions))))
        out.append(t("read_" + self.review_queue.mode))
        return out

    @property
    def simulated_banner(self) -> str:
        """The first screen's notice that some judges are simulated (a demo device), and what to change for real
        judges; "" when none is."""
        return simulated_notice(self.t, self.results.config.simulated_judges, len(self.judges))

    @property
    def not_asked(self) -> dict[str, int]:
        """Per judge of a cascade (``stage: 2``) left out of some cases: how many cases it was not asked
        (stage 1 settled them); the judge saw only the others. Empty when every judge saw every case."""
        out: dict[str, int] = {}
        for c in self.results.consensus:
            for j in c.not_asked:
                out[j] = out.get(j, 0) + 1
        return out

    @cached_property
    def calibration(self) -> CalibrationReport | None:
        """The folder's calibration.json, when it has one."""
        path = self.folder / CALIBRATION_JSON
        return load_calibration(path) if path.is_file() else None

    @property
    def deductions_only(self) -> bool:
        """Whether every dimension is a deductions one (the report then reads as it always has)."""
        return all(d.view == VIEW_DEDUCTIONS for d in self.rubric.dimensions)

    @property
    def star_dims(self) -> list[Dimension]:
        """The dimensions with stars (every one of a deductions rubric); only these show stars."""
        return [d for d in self.rubric.dimensions if d.stars is not None]

    @property
    def has_star_total(self) -> bool:
        """Whether the seed's star formula means anything here: some dimension has stars and a star weight."""
        return any(d.stars is not None and d.star_weight for d in self.rubric.dimensions)

    @property
    def human(self) -> HumanAgreement | None:
        """Agreement with the human (present when human labels were given)."""
        return self.reliability.human


def build_report_data(results: Results, folder: Path, lang: str | None = None) -> ReportData:
    """Every figure of the report, from a run's results (and ``folder/metrics/*.json``).

    ``lang``: the language of the report's headings and labels (``zh`` or ``en``); by default the
    rubric's (:func:`~consensus_eval.output.report.i18n.default_lang`).
    """
    t = messages(lang or default_lang(results.rubric))
    return ReportData(
        folder=folder, generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        results=results, cases={c.id: c for c in results.cases}, anchors=_anchors(results),
        reliability=results.reliability, reliability_source=results.reliability_source,
        costs=results.usage, ranking=results.audit, t=t,
    )


def _anchors(results: Results) -> dict[str, str]:
    """case id -> the HTML id of its row and drill-down (the audit's anchors)."""
    given = {a.case_id: a.anchor for a in results.audit if a.anchor}
    missing = [c.case_id for c in results.consensus if c.case_id not in given]
    return {**given, **case_anchors(missing)} if missing else given


def review_reasons(a: CaseAudit, t: Messages, flag_star_gap: int = 0) -> list[str]:
    """Why a case is in the review queue, in the report's language: the audit's own words in
    English; in another language each reason (:class:`~consensus_eval.analysis.audit.ReviewReason`)
    rebuilt from the case's figures with the catalogue's words (``why_<code>``). ``flag_star_gap``: the
    config's limit the star reason quotes (the spread reason quotes its own, in the rubric's units)."""
    if t.lang == "en":
        return [r.text for r in a.reasons]
    out = []
    for r in a.reasons:
        if r.code == "inconclusive":
            out.append(t("why_inconclusive", n=a.n_judges_answered))
        elif r.code == "spread":
            out.append(t("why_spread", spread=fmt_num(r.value or 0), limit=fmt_num(r.limit or 0)))
        elif r.code == "star_gap":
            dims = [f"{d.name} {d.star_gap}★" for d in a.dimensions if d.star_gap >= flag_star_gap]
            out.append(t("why_star_gap", gap=flag_star_gap, dims="、".join(dims)))
        elif r.code == "level_gap":
            gap = fmt_num(r.limit) if r.limit is not None else ""        # the config's flag_level_gap
            out.append(t("why_level_gap", gap=gap, dims="、".join(r.subjects)))
        elif r.code == "split":
            out.append(t("why_split", n=len(r.subjects), criteria="、".join(r.subjects)))
        elif r.code == "low_score":
            low = [f"{d.name} {v.stars}★" for d in a.dimensions for v in d.judges
                   if v.stars is not None and v.stars <= LOW_STARS]
            out.append(t("why_low_score", dims="、".join(low)))
        elif r.code == "ungrounded":
            out.append(t("why_ungrounded", n=a.ungrounded))
        else:       # another reason, a plugged-in kind's too: its subjects, how many, its figure and threshold
            out.append(t("why_" + r.code, subjects="、".join(r.subjects), n=len(r.subjects),
                         value="" if r.value is None else fmt_num(r.value),
                         limit="" if r.limit is None else fmt_num(r.limit)))
    return out


def needs_review(a: CaseAudit) -> bool:
    """Whether a human should look at this case (the audit's decision: :attr:`CaseAudit.needs_review`)."""
    return a.needs_review


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
