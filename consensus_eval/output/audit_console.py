"""The `audit` command's terminal view: the disagreement ranking and, per top case, who deducted what.

All case and judge text goes through :class:`rich.text.Text`, never through console markup, so a
``[bold]`` or ``<script>`` inside a record or an evidence quote is printed as it is.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from consensus_eval.analysis.audit import (
    DISAGREEMENT_FORMULA,
    ORDER_NOTE,
    AuditDeduction,
    CaseAudit,
    DimensionAudit,
    JudgeView,
    Mismatch,
)
from consensus_eval.output.files import fmt_num

SCORE_HELP = f"{DISAGREEMENT_FORMULA}; {ORDER_NOTE}"


def print_audit(console: Console, audits: list[CaseAudit], top: int) -> None:
    """Print the ranking (the first ``top`` cases; 0 for all) and the details of each of them."""
    shown = audits[:top] if top > 0 else audits
    console.print(ranking_table(shown, len(audits)))
    console.print(Text(SCORE_HELP, style="dim"))
    for a in shown:
        console.print()
        console.rule(Text(f"#{a.rank} {a.case_id}  {a.status}  disagreement {fmt_num(a.disagreement)}"))
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


def ranking_table(audits: list[CaseAudit], n_total: int) -> Table:
    """One row per case: its rank, the disagreement score and the score's parts."""
    t = Table(title=f"Disagreement ranking ({len(audits)} of {n_total} cases)")
    for col in ("#", "case", "status", "disagreement", "spread", "star gaps", "singletons", "mismatches", "total"):
        t.add_column(col, justify="left" if col in ("case", "status") else "right")
    t.add_column("flags")
    for a in audits:
        t.add_row(str(a.rank), Text(a.case_id), a.status, fmt_num(a.disagreement), fmt_num(a.spread) or "-",
                  str(a.star_gaps), str(a.singletons), str(a.mismatches), fmt_num(a.total) or "-",
                  Text("; ".join(a.flags)))
    return t


def dimension_table(dim: DimensionAudit) -> Table:
    """The judges of one dimension side by side: one column per judge, its deductions in the cell."""
    panel = fmt_num(dim.panel_score) or "-"
    t = Table(title=Text(f"{dim.name} ({dim.dimension}, /{fmt_num(dim.max)}; panel {panel}, star gap {dim.star_gap})"),
              show_lines=True, expand=len(dim.judges) > 1)
    for v in dim.judges:
        head = f"{v.judge}\n{fmt_num(v.score) or '-'}" + (f" ({v.stars}★)" if v.stars else "")
        t.add_column(Text(head))
    t.add_row(*(_judge_cell(v) for v in dim.judges))
    return t


def _judge_cell(v: JudgeView) -> Group | Text:
    if not v.runs_ok:
        return Text("failed: " + "; ".join(v.errors), style="red")
    if not v.deductions:
        return Text("(no deduction)", style="dim")
    return Group(*(_deduction_text(d) for d in v.deductions))


def _deduction_text(d: AuditDeduction) -> Text:
    t = Text()
    t.append(f"{d.category} / {d.type} -{fmt_num(d.points)}", style="bold")
    if d.run:
        t.append(f" (run {d.run})")
    if d.singleton:
        t.append("  [singleton]", style="yellow")
    elif d.match == "category":
        t.append("  [same category only]", style="cyan")
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
    singles = a.singleton_deductions()
    if not singles:
        return
    console.print(Text("Only one judge deducted (singletons):", style="bold"))
    for d in singles:
        console.print(Text(f"  {d.judge}: {d.dimension} / {d.category} / {d.type} -{fmt_num(d.points)}"
                           + (f"  «{d.evidence}»" if d.evidence else "")))


def _print_mismatches(console: Console, mismatches: list[Mismatch]) -> None:
    if not mismatches:
        return
    console.print(Text("Claimed vs derived (the judge's own score disagrees with its deductions):", style="bold"))
    for m in mismatches:
        claimed = f"{fmt_num(m.claimed_score) or '-'}/{m.claimed_stars if m.claimed_stars is not None else '-'}★"
        console.print(Text(f"  {m.judge} run {m.run}, {m.dimension_name} ({m.dimension}): claimed {claimed}, "
                           f"derived {fmt_num(m.derived_score)}/{m.derived_stars}★"))
