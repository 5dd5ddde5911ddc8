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

from collections.abc import Collection, Mapping, Sequence

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from consensus_eval.analysis.audit import (
    DEFAULT_TOP,
    CaseAudit,
    DimensionAudit,
    DrillItem,
    JudgeView,
    Mismatch,
    ReviewQueue,
    review_queue,
    run_label,
)
from consensus_eval.analysis.intervals import Proportion
from consensus_eval.analysis.judge_quality import JudgeQuality
from consensus_eval.domain.kinds.base import VIEW_CRITERIA, VIEW_DEDUCTIONS, VIEW_LEVELS
from consensus_eval.output.files import fmt_num
from consensus_eval.output.report.i18n import Messages, messages

#: the language of the console when a caller names none
EN = "en"


def _t(t: Messages | None) -> Messages:
    return t if t is not None else messages(EN)


def as_queue(cases: ReviewQueue | Sequence[CaseAudit]) -> ReviewQueue:
    """``cases`` as a queue: ranked audits (as ``Results.audit`` gives them) get the queue of their panel,
    whose size is read from the audits (each dimension lists every judge of the panel)."""
    if isinstance(cases, ReviewQueue):
        return cases
    panel = len(cases[0].dimensions[0].judges) if cases and cases[0].dimensions else 0
    return review_queue(cases, panel)


def print_audit(console: Console, cases: ReviewQueue | Sequence[CaseAudit], top: int = DEFAULT_TOP,
                quality: Mapping[str, JudgeQuality] | None = None, t: Messages | None = None) -> None:
    """The `audit` command: headline, the first ``top`` cases of the queue (0: all), the totals, the
    judges' quality (``quality``: ``Results.judge_quality``, when given), then the drill-down of each
    case shown; in the language of ``t`` (English by default)."""
    t = _t(t)
    queue = as_queue(cases)
    shown = queue.top(top)
    print_queue(console, queue, top, t)
    if quality:
        console.print(judge_quality_table(quality, t, {dim.view for a in queue.cases[:1] for dim in a.dimensions}))
    for a in shown:
        console.print()
        console.rule(Text(f"#{a.rank} {a.case_id}  {t('status_' + a.status)}  {_score_name(queue, t)} "
                          f"{_one(a.score(queue.mode))}"))
        if a.reasons:
            why = "; ".join(r.text for r in a.reasons) if t.lang == EN else \
                "; ".join(dict.fromkeys(t("reason_" + r.code) for r in a.reasons))
            console.print(Text(t("con_needs_review") + why, style="bold"))
        if a.status == "failed":
            _print_failures(console, a, t)
            continue
        shown_dims = [dim for dim in a.dimensions if not dim.quiet]
        for dim in shown_dims:
            console.print(dimension_table(dim, t))
        if not shown_dims:
            deductions_only = all(dim.view == VIEW_DEDUCTIONS for dim in a.dimensions)
            console.print(Text(t("con_no_deduction_any" if deductions_only else "con_quiet_any"), style="dim"))
        _print_singletons(console, a, t)
        _print_mismatches(console, a.mismatch_runs, t)


def _score_name(queue: ReviewQueue, t: Messages) -> str:
    return queue.score_name if t.lang == EN else t("col_" + queue.mode)


def headline(queue: ReviewQueue, t: Messages | None = None) -> str:
    """``"N cases need review"`` in the language of ``t``."""
    t = _t(t)
    n = queue.n_needs_review
    return t("con_headline_none") if n == 0 else t("con_headline_one") if n == 1 else t("n_need_review", n=n)


def print_queue(console: Console, cases: ReviewQueue | Sequence[CaseAudit], top: int = DEFAULT_TOP,
                t: Messages | None = None) -> None:
    """"N cases need review", the queue's first ``top`` rows (0: all) and the totals: what `score` and
    `audit` print instead of one row per case; in the language of ``t`` (English by default)."""
    t = _t(t)
    queue = as_queue(cases)
    console.print(Text(t("con_headline_of", headline=headline(queue, t), n=queue.n_cases), style="bold"))
    shown = queue.top(top)
    if shown:
        console.print(queue_table(queue, shown, t))
    console.print(Text(totals_line(queue, t), style="dim"))
    if shown:
        legend = [t("con_legend_not_found_quotes" if c == "not_found" and queue.shape != "deductions"
                    else "con_legend_" + c) for c in _parts(queue)]
        console.print(Text(t("con_legend_sep").join(legend), style="dim"))
    formula = queue.formula if t.lang == EN else t(queue.formula_key)
    console.print(Text(formula + t("con_legend_sep") + t("con_order_note"), style="dim"))


def queue_table(queue: ReviewQueue, shown: list[CaseAudit], t: Messages | None = None) -> Table:
    """One row per case shown: rank, case, the queue's score (its name is in the title) and its
    parts (explained by the legend under it), the panel total (one decimal), and why (the reasons' short
    names, the status first when a case has no verdict; their full words are in `audit`'s drill-down and
    the reports)."""
    t = _t(t)
    more = t("con_top", k=len(shown), n=queue.n_cases) if len(shown) < queue.n_cases else t("con_all", n=queue.n_cases)
    title = queue.title if t.lang == EN else t("con_title_" + queue.mode)
    tb = Table(title=t("con_table_title", title=title, score=_score_name(queue, t), more=more))
    parts = _parts(queue)
    cols = ["#", t("col_case"), t("con_col_score"), *(t("con_col_" + p) for p in parts), t("col_total")]
    for i, col in enumerate(cols):
        tb.add_column(col, justify="left" if i == 1 else "right", no_wrap=i == 1, overflow="fold")
    tb.add_column(t("col_why"), overflow="fold")
    for a in shown:
        values = {"lost": _pct(a.lost_share), "penalty": _pct(a.penalty_share), "not_found": _pct(a.ungrounded_share),
                  "spread": _pct(a.spread_share), "star_gap": _one(a.star_gap_mean), "solo": _pct(a.singleton_share)}
        why = ", ".join(dict.fromkeys(_text(t, "con_why_", r.code) for r in a.reasons)) or "-"
        tb.add_row(str(a.rank), Text(a.case_id), _one(a.score(queue.mode)), *(values[p] for p in parts), _one(a.total),
                   Text(why))
    return tb


def _parts(queue: ReviewQueue) -> tuple[str, ...]:
    """The parts of the queue's score its table shows, by what the rubric's kinds have: star gaps only where some
    dimension has stars, fixed penalties and deductions only one judge made only for deduction dimensions."""
    if queue.mode == "risk":
        return ("lost", "penalty", "not_found") if queue.shape == "deductions" else ("lost", "not_found")
    return {"deductions": ("spread", "star_gap", "solo"), "kinds_stars": ("spread", "star_gap"),
            "kinds": ("spread",)}[queue.shape]


def _text(t: Messages, prefix: str, code: str) -> str:
    """``t(prefix + code)``, or the code itself for a code the catalogue does not know."""
    key = prefix + code
    return t(key) if key in t.texts else code


def totals_line(queue: ReviewQueue, t: Messages | None = None) -> str:
    """Cases per status and cases per review reason, in one line."""
    t = _t(t)
    status = ", ".join(f"{n} {_text(t, 'status_', s)}" for s, n in queue.by_status.items())
    reasons = ", ".join(f"{_text(t, 'con_reason_', c)} {n}" for c, n in queue.by_reason.items())
    line = t("con_totals", n=queue.n_cases, status=status)
    return line + (t("con_totals_reasons", reasons=reasons) if reasons else "")


def judge_quality_table(quality: Mapping[str, JudgeQuality], t: Messages | None = None,
                        views: Collection[str] = (VIEW_DEDUCTIONS,)) -> Table:
    """Facts about each judge, not about any case: its quotes whose evidence was not found in the
    case, and its runs whose claimed score differs from the score derived from its own judgment, each
    as a share with its 95% Wilson interval (:mod:`consensus_eval.analysis.judge_quality`). The quotes are
    named by how the rubric's dimensions show their judgments (their kinds' ``views``): deductions, verdicts
    (criteria only), else quotes."""
    t = _t(t)
    what = "deductions" if set(views) == {VIEW_DEDUCTIONS} else "verdicts" if set(views) == {VIEW_CRITERIA} \
        else "quotes"
    tb = Table(title=t("con_quality_title"))
    for i, col in enumerate((t("col_judge"), t("con_q_ok_runs"), t("col_" + what), t("con_q_not_found"),
                             t("col_mismatch"))):
        tb.add_column(col, justify="left" if i == 0 else "right", overflow="fold")
    for name, q in quality.items():
        tb.add_row(Text(name), str(q.ok_runs), str(q.deductions), _share(q.ungrounded, t("con_q_of_" + what), t),
                   _share(q.claim_mismatch, t("con_q_of_runs"), t))
    return tb


def _share(p: Proportion, of: str, t: Messages) -> str:
    """``"12% [8-17%] (6 of 50 deductions)"``; ``"- (no ...)"`` when there was nothing to count."""
    if p.value is None or p.low is None or p.high is None:
        return t("con_q_none", of=of)
    return t("con_q_share", value=f"{100 * p.value:.0f}", low=f"{100 * p.low:.0f}", high=f"{100 * p.high:.0f}",
             k=p.k, n=p.n, of=of)


def dimension_table(dim: DimensionAudit, t: Messages | None = None) -> Table:
    """The judges of one dimension side by side: one column per judge, its drill-down in the cell (a likert
    dimension: each judge's level with its anchor and evidence; a criteria dimension: criterion x judge)."""
    t = _t(t)
    if dim.view == VIEW_LEVELS:
        return _likert_table(dim, t)
    if dim.view == VIEW_CRITERIA:
        return criteria_table(dim, t)
    tb = Table(title=Text(t("con_dim_title", name=dim.name, dimension=dim.dimension, max=fmt_num(dim.max),
                            panel=_num1(dim.panel_score), gap=dim.star_gap)),
               show_lines=True, expand=len(dim.judges) > 1)
    for v in dim.judges:
        head = f"{v.judge}\n{_num1(v.score)}" + (f" ({v.stars}★)" if v.stars else "")
        tb.add_column(Text(head), overflow="fold")
    tb.add_row(*(_judge_cell(v, t) for v in dim.judges))
    return tb


def _stars(stars: int | None) -> str:
    return f" ({stars}★)" if stars else ""


def _likert_table(dim: DimensionAudit, t: Messages) -> Table:
    low, high = (min(dim.levels), max(dim.levels)) if dim.levels else (0, 0)
    tb = Table(title=Text(t("con_dim_title_likert", name=dim.name, dimension=dim.dimension, low=low, high=high,
                            panel=_num1(dim.panel_score),
                            spread=_num1(dim.level_spread))),
               show_lines=True, expand=len(dim.judges) > 1)
    for v in dim.judges:
        tb.add_column(Text(f"{v.judge}\n{_num1(v.score)}{_stars(v.stars)}"), overflow="fold")
    tb.add_row(*(_rating_cell(v, t) for v in dim.judges))
    return tb


def _rating_cell(v: JudgeView, t: Messages) -> Group | Text:
    if not v.runs_ok:
        return Text(t("con_failed") + "; ".join(v.errors), style="red")
    parts: list[Text] = []
    for r in v.ratings:
        line = Text()
        if v.n_runs > 1:
            line.append(f"{run_label(r.run, v.n_runs)}: ", style="underline")
        line.append(t("con_level", level=r.rating, anchor=r.anchor), style="bold")
        for quote in r.evidence:
            line.append(f"\n  «{quote}»")
        if r.comment:
            line.append(f"\n  {r.comment}", style="dim")
        parts.append(line)
    if v.runs_failed:
        parts.append(Text(t("con_runs_failed", n=v.runs_failed) + "; ".join(dict.fromkeys(v.errors)), style="red"))
    return Group(*parts)


def criteria_table(dim: DimensionAudit, t: Messages | None = None) -> Table:
    """A criteria dimension as a table criterion x judge: met / not met per judge (each run's verdict when
    its runs differ) with the evidence, the split criteria first."""
    t = _t(t)
    tb = Table(title=Text(t("con_dim_title_criteria", name=dim.name, dimension=dim.dimension,
                            panel=_num1(dim.panel_score), split=len(dim.split_criteria), n=len(dim.criteria))),
               show_lines=True, expand=True)
    tb.add_column(Text(t("con_col_criterion")), overflow="fold")
    tb.add_column(Text(t("con_col_points")), justify="right", overflow="fold")
    for v in dim.judges:
        tb.add_column(Text(f"{v.judge}\n{_num1(v.score)}{_stars(v.stars)}"), overflow="fold")
    for row in dim.criteria:
        head = Text(f"{row.id}: {row.text}")
        if row.split:
            head.append(f"  [{t('con_split')}]", style="yellow")
        cells: list[Text] = [head, Text(fmt_num(row.points))]
        for v in dim.judges:
            cells.append(_verdict_cell(v, row.id, t))
        tb.add_row(*cells)
    return tb


def _verdict_cell(v: JudgeView, criterion: str, t: Messages) -> Text:
    if not v.runs_ok:
        return Text(t("con_failed").rstrip(": "), style="red")
    mine = [x for x in v.verdicts if x.id == criterion]
    out = Text()
    for x in mine:
        if len(mine) > 1:
            out.append(f"{x.run + 1}: ")
        out.append(t("con_met") if x.met else t("con_not_met"), style="green" if x.met else "red")
        if x.evidence:
            out.append(f" «{x.evidence}»")
        if x.reason:
            out.append(f"\n  {x.reason}", style="dim")
        out.append("\n")
    out.rstrip()
    return out


def _judge_cell(v: JudgeView, t: Messages) -> Group | Text:
    if not v.runs_ok:
        return Text(t("con_failed") + "; ".join(v.errors), style="red")
    if not v.deductions:
        return Text(t("con_no_deduction"), style="dim")
    parts: list[Text] = []
    for g in v.drill_down():
        if g.label:
            parts.append(Text(g.label, style="underline"))
        parts.extend(_item_text(item, t) for item in g.items)
    if v.runs_failed:
        parts.append(Text(t("con_runs_failed", n=v.runs_failed) + "; ".join(dict.fromkeys(v.errors)), style="red"))
    return Group(*parts)


def _item_text(item: DrillItem, tr: Messages) -> Text:
    d = item.deduction
    t = Text()
    t.append(f"{d.category} / {d.type} -{fmt_num(d.points)}", style="bold")
    if item.runs_label:
        t.append(f" {item.runs_label}")
    if item.applied_once:
        t.append(tr("con_listed_once", n=item.times_listed), style="magenta")
    elif item.times_listed > 1:
        t.append(tr("con_listed", n=item.times_listed))
    if d.singleton:
        t.append(tr("con_only_this"), style="yellow")
    elif d.match == "category":
        t.append(tr("con_same_category"), style="cyan")
    if any(o.ungrounded for o in item.occurrences):
        t.append(tr("con_not_found"), style="red")
    if d.evidence:
        t.append(f"\n  «{d.evidence}»")
    if d.reason:
        t.append(f"\n  {d.reason}", style="dim")
    return t


def _print_failures(console: Console, a: CaseAudit, t: Messages) -> None:
    """A case no judge answered: one line per judge with its distinct errors."""
    for judge, errors in a.errors_by_judge().items():
        console.print(Text(f"  {judge}: {t('con_failed')}" + "; ".join(errors), style="red"))


def _print_singletons(console: Console, a: CaseAudit, t: Messages) -> None:
    singles = list({(d.judge, d.dimension, d.type_id, d.evidence): d for d in a.singleton_deductions()}.values())
    if not singles:
        return
    console.print(Text(t("con_singletons"), style="bold"))
    for d in singles:
        console.print(Text(f"  {d.judge}: {d.dimension} / {d.category} / {d.type} -{fmt_num(d.points)}"
                           + (f"  «{d.evidence}»" if d.evidence else "")))


def _print_mismatches(console: Console, mismatches: list[Mismatch], t: Messages) -> None:
    if not mismatches:
        return
    console.print(Text(t("con_claimed_heading"), style="dim"))
    for m in mismatches:
        claimed = f"{fmt_num(m.claimed_score) or '-'}/{m.claimed_stars if m.claimed_stars is not None else '-'}★"
        console.print(Text(t("con_claimed_line", judge=m.judge, run=m.run + 1, dimension_name=m.dimension_name,
                             dimension=m.dimension, claimed=claimed, derived=fmt_num(m.derived_score),
                             stars=m.derived_stars), style="dim"))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}"


def _num1(x: float | None) -> str:
    """A score to one decimal, without a trailing ``.0`` (``36.4``, ``40``); ``-`` when missing."""
    return "-" if x is None else f"{x:.1f}".removesuffix(".0")


def _one(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"
