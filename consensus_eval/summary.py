"""The short summary printed at the end of `score`: per case and per judge."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from consensus_eval.evaluate import STORE_NAME, judge_totals, load_results
from consensus_eval.outputs import _num
from consensus_eval.runner import Progress
from consensus_eval.store import Store


def print_summary(console: Console, out: Path, progress: Progress) -> None:
    with Store(out / STORE_NAME) as store:
        res = load_results(store)
    dims = res.rubric.dimensions
    t = Table(title=f"{res.rubric.name}: {len(res.consensus)} cases, {len(res.judges)} judge(s)")
    t.add_column("case")
    for d in dims:
        t.add_column(f"{d.name}\n/{_num(d.max)}", justify="right")
    t.add_column(f"total\n/{_num(res.rubric.max_total)}", justify="right")
    t.add_column("stars", justify="right")
    t.add_column("judges", justify="right")
    t.add_column("status")
    for c in res.consensus:
        stars = "/".join(str(c.stars[d.id] or "-") for d in dims)
        status = c.status + (" ⚑" if c.flagged else "")
        t.add_row(c.case_id, *(_num(c.scores[d.id]) for d in dims), _num(c.total), stars,
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
                  f"consensus.jsonl, {STORE_NAME}", highlight=False)
