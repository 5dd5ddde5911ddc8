"""What the commands print: the summary at the end of `score`, the reliability tables, the dry-run
estimate. Every function renders objects it is given; none reads a file."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from consensus_eval.analysis.alpha import Alpha
from consensus_eval.analysis.reliability import ReliabilityReport
from consensus_eval.analysis.results import Results
from consensus_eval.execution.estimate import ASSUMED_OUTPUT_TOKENS, JudgeEstimate
from consensus_eval.execution.execute import Progress
from consensus_eval.execution.store import STORE_NAME
from consensus_eval.output.files import fmt_num


def print_summary(console: Console, res: Results, out: Path) -> None:
    """Per case (panel scores, stars, judges, status) and per judge (calls, tokens, cost)."""
    progress = res.progress or Progress(total=len(res.records))
    dims = res.rubric.dimensions
    t = Table(title=f"{res.rubric.name}: {len(res.consensus)} cases, {len(res.judges)} judge(s)")
    t.add_column("case")
    for d in dims:
        t.add_column(f"{d.name}\n/{fmt_num(d.max)}", justify="right")
    t.add_column(f"total\n/{fmt_num(res.rubric.max_total)}", justify="right")
    t.add_column("stars", justify="right")
    t.add_column("judges", justify="right")
    t.add_column("status")
    for c in res.consensus:
        stars = "/".join(str(c.stars[d.id] or "-") for d in dims)
        status = c.status + (" ⚑" if c.flagged else "")
        t.add_row(c.case_id, *(fmt_num(c.scores[d.id]) for d in dims), fmt_num(c.total), stars,
                  str(c.n_judges), status)
    console.print(t)
    jt = Table(title="judges")
    for col in ("judge", "ok", "failed", "attempts", "prompt tok", "completion tok", "cost $"):
        jt.add_column(col, justify="left" if col == "judge" else "right")
    for name, v in res.usage.items():
        jt.add_row(name, str(v.ok), str(v.failed), str(v.attempts), str(v.prompt_tokens),
                   str(v.completion_tokens), f"{v.cost:.4f}")
    console.print(jt)
    console.print(f"{progress.done} call(s) made, {progress.skipped} resumed from the store, "
                  f"{progress.failed} failed. Outputs in {out}/: judgments.jsonl, consensus.csv, "
                  f"consensus.jsonl, reliability.json, report.md, report.html, {STORE_NAME}", highlight=False)


def _alpha_text(a: Alpha) -> str:
    if a.value is None:
        return f"undefined ({a.reason})"
    ci = f" [{a.ci[0]:.2f}, {a.ci[1]:.2f}]" if a.ci else ""
    return f"{a.value:.3f}{ci}"


def print_reliability(console: Console, report: ReliabilityReport) -> None:
    """Alpha per dimension (across judges, stars, within judges) and agreement with the human."""
    t = Table(title=f"Krippendorff's alpha, {len(report.judges)} judges x {report.n_cases} cases (95% CI)")
    for col in ("", "across judges (interval)", "stars (ordinal)"):
        t.add_column(col)
    for k, a in report.across_judges.items():
        s = report.stars.get(k)
        t.add_row(k, _alpha_text(a), _alpha_text(s) if s else "")
    console.print(t)
    for j, dims in report.within_judge.items():
        console.print(f"run-to-run stability of {j}: " + ", ".join(f"{d} {_alpha_text(a)}" for d, a in dims.items()),
                      highlight=False)
    h = report.human
    if h:
        ht = Table(title=f"against the human ({h.n_cases} cases): MAE / bias / Spearman on the total")
        for col in ("rater", "MAE", "bias", "Pearson", "Spearman", "category Jaccard"):
            ht.add_column(col)
        for name, v in [*h.judges.items(), ("panel", h.panel)]:
            tot = v["total"]
            jac = (h.category_jaccard or {}).get(name)
            values = (tot.mae, tot.bias, tot.pearson, tot.spearman)
            ht.add_row(name, *("-" if x is None else f"{x:.2f}" for x in values), "-" if jac is None else f"{jac:.2f}")
        console.print(ht)
        console.print("alpha with the human: "
                      + ", ".join(f"{k} {_alpha_text(a)}" for k, a in h.alpha_with_human.items()),
                      highlight=False)


def print_estimate(console: Console, estimates: list[JudgeEstimate]) -> None:
    """The dry run's table: calls, prompt tokens, estimated and maximum cost per judge."""
    t = Table(title="dry run: nothing was sent")
    for col in ("judge", "model", "calls", "prompt tokens", "output tokens (est.)", "cost $ (est.)", "cost $ (max)"):
        t.add_column(col, justify="left" if col in ("judge", "model") else "right")
    for e in estimates:
        t.add_row(e.judge, e.model, str(e.calls), str(e.prompt_tokens), str(e.output_tokens),
                  "unknown" if e.cost is None else f"{e.cost:.4f}",
                  "unknown" if e.max_cost is None else f"{e.max_cost:.4f}")
    console.print(t)
    console.print(f"Estimated with {ASSUMED_OUTPUT_TOKENS} output tokens per call; the max uses each "
                  "judge's max_tokens. 'unknown': the model has no price; set input_cost_per_token and "
                  "output_cost_per_token in its config.", highlight=False)
