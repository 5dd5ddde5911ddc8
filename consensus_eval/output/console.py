"""The short summary printed at the end of `score`: per case and per judge."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from consensus_eval.api import STORE_NAME, judge_totals, load_results
from consensus_eval.output.files import fmt_num
from consensus_eval.run.execute import Progress
from consensus_eval.run.store import Store


def print_summary(console: Console, out: Path, progress: Progress) -> None:
    with Store(out / STORE_NAME) as store:
        res = load_results(store)
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
    for name, v in judge_totals(res.records).items():
        jt.add_row(name, str(int(v["ok"])), str(int(v["failed"])), str(int(v["attempts"])),
                   str(int(v["prompt_tokens"])), str(int(v["completion_tokens"])), f"{v['cost']:.4f}")
    console.print(jt)
    console.print(f"{progress.done} call(s) made, {progress.skipped} resumed from the store, "
                  f"{progress.failed} failed. Outputs in {out}/: judgments.jsonl, consensus.csv, "
                  f"consensus.jsonl, reliability.json, report.md, report.html, {STORE_NAME}", highlight=False)


def _alpha_text(a: dict) -> str:
    if a["value"] is None:
        return f"undefined ({a['reason']})"
    ci = f" [{a['ci'][0]:.2f}, {a['ci'][1]:.2f}]" if a.get("ci") else ""
    return f"{a['value']:.3f}{ci}"


def print_reliability(console: Console, report: dict) -> None:
    """Alpha per dimension (across judges, stars, within judges) and agreement with the human."""
    t = Table(title=f"Krippendorff's alpha, {len(report['judges'])} judges x {report['n_cases']} cases (95% CI)")
    for col in ("", "across judges (interval)", "stars (ordinal)"):
        t.add_column(col)
    for k, a in report["across_judges"].items():
        s = report["stars"].get(k)
        t.add_row(k, _alpha_text(a), _alpha_text(s) if s else "")
    console.print(t)
    for j, dims in report.get("within_judge", {}).items():
        console.print(f"run-to-run stability of {j}: " + ", ".join(f"{d} {_alpha_text(a)}" for d, a in dims.items()),
                      highlight=False)
    h = report.get("human")
    if h:
        ht = Table(title=f"against the human ({h['n_cases']} cases): MAE / bias / Spearman on the total")
        for col in ("rater", "MAE", "bias", "Pearson", "Spearman", "category Jaccard"):
            ht.add_column(col)
        rows = [*h["judges"].items(), ("panel", h["panel"])]
        for name, v in rows:
            tot = v["total"]
            jac = h.get("category_jaccard", {}).get(name)
            ht.add_row(name, *(("-" if tot[k] is None else f"{tot[k]:.2f}") for k in ("mae", "bias", "pearson", "spearman")),
                       "-" if jac is None else f"{jac:.2f}")
        console.print(ht)
        console.print("alpha with the human: " + ", ".join(f"{k} {_alpha_text(a)}" for k, a in h["alpha_with_human"].items()),
                      highlight=False)
