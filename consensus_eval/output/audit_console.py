"""The review queue in the terminal: "N cases need review", the top of the queue, the totals, and (for
`audit`) the drill-down of each case shown.

The queue is :class:`~consensus_eval.analysis.audit.ReviewQueue` (its title follows the panel size:
"Most disputed cases", or "Highest-risk cases" for a panel of one judge). Only the top of the queue is
printed (``top`` cases, 10 by default; 0 for every case), so 2,000 cases print a screenful, not
2,000 rows.

All case and judge text goes through :class:`rich.text.Text`, never through console markup, so a
``[bold]`` or ``<script>`` inside a record or an evidence quote is printed as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from consensus_eval.analysis.audit import (
    DEFAULT_TOP,
    ORDER_NOTE,
    CaseAudit,
    DimensionAudit,
    DrillItem,
    JudgeView,
    Mismatch,
    ReviewQueue,
    review_queue,
)
from consensus_eval.analysis.intervals import Proportion
from consensus_eval.analysis.judge_quality import JudgeQuality
from consensus_eval.output.files import fmt_num

#: readers' names of the reason codes, for the totals line
REASON_NAMES = {
    "failed": "failed", "inconclusive": "inconclusive", "incomplete": "incomplete",
    "spread": "totals spread", "star_gap": "star gap", "low_score": "low score (one judge)",
    "fixed_penalty": "fixed penalty (one judge)", "ungrounded": "evidence not found",
}


def as_queue(cases: ReviewQueue | Sequence[CaseAudit]) -> ReviewQueue:
    """``cases`` as a queue: ranked audits (as ``Results.audit`` gives them) get the queue of their panel,
    whose size is read from the audits (each dimension lists every judge of the panel)."""
    if isinstance(cases, ReviewQueue):
        return cases
    panel = len(cases[0].dimensions[0].judges) if cases and cases[0].dimensions else 0
    return review_queue(cases, panel)


def print_audit(console: Console, cases: ReviewQueue | Sequence[CaseAudit], top: int = DEFAULT_TOP,
                quality: Mapping[str, JudgeQuality] | None = None) -> None:
    """The `audit` command: headline, the first ``top`` cases of the queue (0: all), the totals, the
    judges' quality (``quality``: ``Results.judge_quality``, when given), then the drill-down of each
    case shown."""
    queue = as_queue(cases)
    shown = queue.top(top)
    print_queue(console, queue, top)
    if quality:
        console.print(judge_quality_table(quality))
    for a in shown:
        console.print()
        console.rule(Text(f"#{a.rank} {a.case_id}  {a.status}  {queue.score_name} {_one(a.score(queue.mode))}"))
        if a.reasons:
            console.print(Text("needs review: " + "; ".join(r.text for r in a.reasons), style="bold"))
        if a.status == "failed":
            _print_failures(console, a)
            continue
        shown_dims = [dim for dim in a.dimensions if not dim.quiet]
        for dim in shown_dims:
            console.print(dimension_table(dim))
        if not shown_dims:
            console.print(Text("  no judge deducted anything; every judge gave full marks", style="dim"))
        _print_singletons(console, a)
        _print_mismatches(console, a.mismatch_runs)


def print_queue(console: Console, cases: ReviewQueue | Sequence[CaseAudit], top: int = DEFAULT_TOP) -> None:
    """"N cases need review", the queue's first ``top`` rows (0: all) and the totals: what `score` and
    `audit` print instead of one row per case."""
    queue = as_queue(cases)
    console.print(Text(f"{queue.headline} (of {queue.n_cases})", style="bold"))
    shown = queue.top(top)
    if shown:
        console.print(queue_table(queue, shown))
    console.print(Text(totals_line(queue), style="dim"))
    if shown:
        console.print(Text(LEGEND[queue.mode], style="dim"))
    console.print(Text(f"{queue.formula}; {ORDER_NOTE}", style="dim"))


#: the reasons' names in the queue table's narrow "why" column
REASON_SHORT = {
    "failed": "failed", "inconclusive": "inconclusive", "incomplete": "incomplete", "spread": "spread",
    "star_gap": "stars", "low_score": "low score", "fixed_penalty": "penalty", "ungrounded": "not found",
}
#: what the queue table's columns mean, printed under it
LEGEND = {
    "disagreement": ("spread %: the judges' scores apart, as a share of each dimension's max (mean over the "
                     "dimensions); star gap: stars apart per dimension (mean); solo %: share of deductions only "
                     "one judge made"),
    "risk": ("lost %: share of each dimension's max lost (mean); penalty %: runs with a fixed penalty; "
             "not found %: deductions whose evidence was not found in the case"),
}


def queue_table(queue: ReviewQueue, shown: list[CaseAudit]) -> Table:
    """One row per case shown: rank, case, the queue's score (its name is in the title) and its
    parts (:data:`LEGEND`), the panel total (one decimal), and why (the reasons' short names,
    :data:`REASON_SHORT`, the status first when a case has no verdict; their full words are in `audit`'s
    drill-down and the reports)."""
    more = f"top {len(shown)} of {queue.n_cases}" if len(shown) < queue.n_cases else f"all {queue.n_cases}"
    t = Table(title=f"{queue.title}, by {queue.score_name} ({more} cases)")
    risk = queue.mode == "risk"
    parts = ("lost %", "penalty %", "not found %") if risk else ("spread %", "star gap", "solo %")
    for col in ("#", "case", "score", *parts, "total"):
        t.add_column(col, justify="left" if col == "case" else "right", no_wrap=col == "case", overflow="fold")
    t.add_column("why")
    for a in shown:
        values = ((_pct(a.lost_share), _pct(a.penalty_share), _pct(a.ungrounded_share)) if risk
                  else (_pct(a.spread_share), _one(a.star_gap_mean), _pct(a.singleton_share)))
        why = ", ".join(dict.fromkeys(REASON_SHORT.get(r.code, r.code) for r in a.reasons)) or "-"
        t.add_row(str(a.rank), Text(a.case_id), _one(a.score(queue.mode)), *values, _one(a.total), Text(why))
    return t


def totals_line(queue: ReviewQueue) -> str:
    """Cases per status and cases per review reason, in one line."""
    status = ", ".join(f"{n} {s}" for s, n in queue.by_status.items())
    reasons = ", ".join(f"{REASON_NAMES.get(c, c)} {n}" for c, n in queue.by_reason.items())
    return f"{queue.n_cases} cases: {status}" + (f"; needing review by reason: {reasons}" if reasons else "")


def judge_quality_table(quality: Mapping[str, JudgeQuality]) -> Table:
    """Facts about each judge, not about any case: its deductions whose evidence was not found in the
    case, and its runs whose claimed score differs from the score derived from its own deductions, each
    as a share with its 95% Wilson interval (:mod:`consensus_eval.analysis.judge_quality`)."""
    t = Table(title="Judge quality (95% Wilson intervals)")
    for col in ("judge", "ok runs", "deductions", "evidence not found", "claimed ≠ derived"):
        t.add_column(col, justify="left" if col == "judge" else "right")
    for name, q in quality.items():
        t.add_row(Text(name), str(q.ok_runs), str(q.deductions), _share(q.ungrounded, "deductions"),
                  _share(q.claim_mismatch, "runs that claimed a score"))
    return t


def _share(p: Proportion, of: str) -> str:
    """``"12% [8-17%] (6 of 50 deductions)"``; ``"- (no ...)"`` when there was nothing to count."""
    if p.value is None or p.low is None or p.high is None:
        return f"- (no {of})"
    return f"{100 * p.value:.0f}% [{100 * p.low:.0f}-{100 * p.high:.0f}%] ({p.k} of {p.n} {of})"


def dimension_table(dim: DimensionAudit) -> Table:
    """The judges of one dimension side by side: one column per judge, its drill-down in the cell."""
    panel = _num1(dim.panel_score)
    t = Table(title=Text(f"{dim.name} ({dim.dimension}, /{fmt_num(dim.max)}; panel {panel}, star gap {dim.star_gap})"),
              show_lines=True, expand=len(dim.judges) > 1)
    for v in dim.judges:
        head = f"{v.judge}\n{_num1(v.score)}" + (f" ({v.stars}★)" if v.stars else "")
        t.add_column(Text(head))
    t.add_row(*(_judge_cell(v) for v in dim.judges))
    return t


def _judge_cell(v: JudgeView) -> Group | Text:
    if not v.runs_ok:
        return Text("failed: " + "; ".join(v.errors), style="red")
    if not v.deductions:
        return Text("(no deduction)", style="dim")
    parts: list[Text] = []
    for g in v.drill_down():
        if g.label:
            parts.append(Text(g.label, style="underline"))
        parts.extend(_item_text(item) for item in g.items)
    if v.runs_failed:
        parts.append(Text(f"{v.runs_failed} run(s) failed: " + "; ".join(dict.fromkeys(v.errors)), style="red"))
    return Group(*parts)


def _item_text(item: DrillItem) -> Text:
    d = item.deduction
    t = Text()
    t.append(f"{d.category} / {d.type} -{fmt_num(d.points)}", style="bold")
    if item.runs_label:
        t.append(f" {item.runs_label}")
    if item.applied_once:
        t.append(f" (listed {item.times_listed}x, applied once)", style="magenta")
    elif item.times_listed > 1:
        t.append(f" (listed {item.times_listed}x in a run)")
    if d.singleton:
        t.append("  [only this judge]", style="yellow")
    elif d.match == "category":
        t.append("  [same category only]", style="cyan")
    if any(o.ungrounded for o in item.occurrences):
        t.append("  [not found in the case]", style="red")
    if d.evidence:
        t.append(f"\n  «{d.evidence}»")
    if d.reason:
        t.append(f"\n  {d.reason}", style="dim")
    return t


def _print_failures(console: Console, a: CaseAudit) -> None:
    """A case no judge answered: one line per judge with its distinct errors."""
    for judge, errors in a.errors_by_judge().items():
        console.print(Text(f"  {judge}: failed: " + "; ".join(errors), style="red"))


def _print_singletons(console: Console, a: CaseAudit) -> None:
    singles = list({(d.judge, d.dimension, d.type_id, d.evidence): d for d in a.singleton_deductions()}.values())
    if not singles:
        return
    console.print(Text("Only one judge deducted (singletons):", style="bold"))
    for d in singles:
        console.print(Text(f"  {d.judge}: {d.dimension} / {d.category} / {d.type} -{fmt_num(d.points)}"
                           + (f"  «{d.evidence}»" if d.evidence else "")))


def _print_mismatches(console: Console, mismatches: list[Mismatch]) -> None:
    if not mismatches:
        return
    console.print(Text("Claimed vs derived (a fact about the judge, not counted in the case's score):",
                       style="dim"))
    for m in mismatches:
        claimed = f"{fmt_num(m.claimed_score) or '-'}/{m.claimed_stars if m.claimed_stars is not None else '-'}★"
        console.print(Text(f"  {m.judge} run {m.run + 1}, {m.dimension_name} ({m.dimension}): claimed {claimed}, "
                           f"derived {fmt_num(m.derived_score)}/{m.derived_stars}★", style="dim"))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}"


def _num1(x: float | None) -> str:
    """A score to one decimal, without a trailing ``.0`` (``36.4``, ``40``); ``-`` when missing."""
    return "-" if x is None else f"{x:.1f}".removesuffix(".0")


def _one(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"
