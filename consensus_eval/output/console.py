"""What the commands print: the summary at the end of `score`, the reliability tables, the dry-run
estimate. Every function renders objects it is given; none reads a file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from consensus_eval.analysis.audit import DEFAULT_TOP, review_queue
from consensus_eval.analysis.results import Results
from consensus_eval.analysis.usage import JudgeUsage
from consensus_eval.domain.kinds.base import VIEW_CRITERIA, VIEW_DEDUCTIONS
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.writable import dumps_json
from consensus_eval.execution.estimate import ASSUMED_OUTPUT_TOKENS, JudgeEstimate, ShownRequest
from consensus_eval.execution.execute import Progress
from consensus_eval.execution.store import STORE_NAME
from consensus_eval.output.audit_console import print_queue
from consensus_eval.output.files import fmt_num
from consensus_eval.output.report.data import build_report_data
from consensus_eval.output.report.i18n import Messages, messages, simulated_notice
from consensus_eval.output.trust_console import print_view


def _en(t: Messages | None) -> Messages:
    """``t``, or English when a caller names no language (the command line names the run's: the rubric's or
    ``--lang``)."""
    return t if t is not None else messages("en")


def print_summary(console: Console, res: Results, out: Path, top: int = DEFAULT_TOP, t: Messages | None = None) -> None:
    """"N cases need review", the top ``top`` cases of the review queue (0: all) and the totals (cases per
    status, the mean panel score per dimension), then per judge: calls, tokens, cost, and every file written.
    Never one row per case: ``consensus-eval audit DIR``
    prints the drill-down, consensus.csv has every case. In the language of ``t`` (English by default)."""
    t = _en(t)
    progress = res.progress or Progress(total=len(res.records))
    console.print(t("con_summary_head", rubric=res.rubric.name, n=len(res.consensus), k=len(res.judges)),
                  highlight=False)
    notice = simulated_notice(t, res.config.simulated_judges, len(res.judges))
    if notice:
        console.print(Text(notice, style="yellow"))
    print_weights_notice(console, res.rubric, t)
    print_queue(console, review_queue(res.audit, len(res.judges)), top, t)
    means = []
    for d in res.rubric.dimensions:
        vals = [s for c in res.consensus if c.status == "ok" and (s := c.scores[d.id]) is not None]
        # a likert scale's range (1-5), a criteria dimension's share (0-1), a deductions dimension's /max
        scale = f" ({fmt_num(d.low)}-{fmt_num(d.max)})" if d.view != VIEW_DEDUCTIONS else f"/{fmt_num(d.max)}"
        mean = (f"{sum(vals) / len(vals):.2f}" if d.view == VIEW_CRITERIA else f"{sum(vals) / len(vals):.1f}") if vals \
            else "-"
        weight = f" x{fmt_num(d.weight)}" if d.weight != 1 else ""
        means.append(f"{d.name} {mean}{scale}{weight}" if vals or d.view != VIEW_DEDUCTIONS else f"{d.name} -")
    totals = [c.total for c in res.consensus if c.status == "ok" and c.total is not None]
    if totals:
        weighted = any(d.weight != 1 for d in res.rubric.dimensions)
        means.append(t("con_total_weighted" if weighted else "con_total_mean", mean=f"{sum(totals) / len(totals):.1f}",
                       max=fmt_num(res.rubric.max_total)))
    console.print(t("con_means", n=len(totals), means=t("con_list_sep").join(means)), highlight=False)
    print_view(console, build_report_data(res, out, t.lang), "summary")
    jt = Table(title=t("con_judges_title"))
    for i, key in enumerate(("col_judge", "con_col_ok", "col_failed", "col_attempts", "con_col_prompt_tok",
                             "con_col_completion_tok", "con_col_cost")):
        jt.add_column(t(key), justify="left" if i == 0 else "right", overflow="fold")
    for name, v in res.usage.items():
        jt.add_row(name, str(v.ok), str(v.failed), str(v.attempts), str(v.prompt_tokens),
                   str(v.completion_tokens), f"{v.cost:.4f}")
    console.print(jt)
    print_cache_summary(console, res.usage, t)
    print_pacing(console, progress, t)
    if progress.rounds > 1:
        console.print(t("con_rounds", rounds=progress.rounds, total=progress.total), highlight=False)
    not_asked: dict[str, int] = {}
    for c in res.consensus:
        for j in c.not_asked:
            not_asked[j] = not_asked.get(j, 0) + 1
    for j, n in not_asked.items():
        console.print(t("con_cascade", judge=j, asked=len(res.consensus) - n, n=len(res.consensus), not_asked=n),
                      highlight=False)
    files = ["judgments.jsonl", "consensus.csv", "consensus.jsonl", "reliability.json",
             *(["leaderboard.json"] if res.leaderboard is not None else []), "report.md", "report.html", STORE_NAME]
    console.print(t("con_calls_outputs", done=progress.done, skipped=progress.skipped, failed=progress.failed,
                    out=out, files=", ".join(files)), highlight=False, soft_wrap=True)   # a path is never folded


def print_weights_notice(console: Console, rubric: Rubric, t: Messages | None = None) -> None:
    """A notice when the rubric weighs its dimensions and the weights do not sum to 1: the total is then the
    weighted sum, not a weighted mean (its maximum says what it is out of)."""
    weights = [d.weight for d in rubric.dimensions]
    if any(w != 1 for w in weights) and abs(sum(weights) - 1) > 1e-9:
        console.print(Text(_en(t)("con_weights_notice", rubric=rubric.id, sum=fmt_num(round(sum(weights), 6)),
                                  max=fmt_num(rubric.max_total)), style="yellow"))


def print_pacing(console: Console, progress: Progress, t: Messages | None = None) -> None:
    """One line per LLM judge that sent requests in this run: which limit bound it (rpm, tpm,
    concurrency, provider 429s or latency) and the achieved requests/min against its limit."""
    for name, p in progress.pacing.items():
        console.print(_en(t)("con_pace", judge=name, text=p.explain()), highlight=False)


def print_cache_summary(console: Console, usage: Mapping[str, JudgeUsage], t: Messages | None = None) -> None:
    """Per judge that sent prompts: the prompt tokens its provider served from the prompt cache, their
    share (hit rate) and the USD they saved against the full input price ('unknown' without prices)."""
    t = _en(t)
    shown = {name: u for name, u in usage.items() if u.prompt_tokens}
    if not shown:
        return
    tb = Table(title=t("con_cache_title"))
    for i, key in enumerate(("col_judge", "con_col_cached_tok", "con_col_hit_rate", "con_col_saved")):
        tb.add_column(t(key), justify="left" if i == 0 else "right", overflow="fold")
    for name, u in shown.items():
        tb.add_row(name, str(u.cached_tokens), "-" if u.cache_hit_rate is None else f"{u.cache_hit_rate:.1%}",
                   t("con_unknown") if u.saved is None else f"{u.saved:.4f}")
    console.print(tb)


#: reasons listed per judge in the failure summary (the rest are counted)
MAX_REASONS = 3


def print_run_end(console: Console, res: Results, allow_failures: float = 0.0, t: Messages | None = None) -> int:
    """The last lines of `score`: what failed, per judge and why (grouped), the cases without a verdict,
    whether the run was interrupted; returns the exit code (0, 3 completed with failures, 130).

    Exit 0 only when every planned call is stored ``ok``, or the failed share is at most
    ``allow_failures`` (a fraction of the planned calls) and nothing is missing; a case without a verdict
    (no judge answered, or below the quorum) exits 3 whatever ``allow_failures`` allows.
    """
    t = _en(t)
    planned = res.run.planned
    failed = [r for r in res.records if r.status == "failed"]
    missing = res.run.missing_calls
    interrupted = res.progress is not None and res.progress.interrupted
    by_status: dict[str, int] = {}
    for c in res.consensus:
        by_status[c.status] = by_status.get(c.status, 0) + 1
    if failed:
        console.print(t("con_failed_calls", n=len(failed), planned=planned, pct=f"{len(failed) / max(planned, 1):.1%}"),
                      highlight=False)
        for judge in res.judges:
            mine = [r for r in failed if r.judge == judge]
            if not mine:
                continue
            reasons: dict[str, int] = {}
            for r in mine:
                why = (r.error or "no reason recorded").splitlines()[0][:200]
                key = f"{r.error_kind}: {why}" if r.error_kind and not why.startswith(r.error_kind) else why
                reasons[key] = reasons.get(key, 0) + 1
            top = sorted(reasons.items(), key=lambda kv: -kv[1])
            console.print(t("con_judge_failed", judge=judge, n=len(mine)), highlight=False)
            for why, n in top[:MAX_REASONS]:
                console.print(f"    {n} x {why}", highlight=False, soft_wrap=True)
            if len(top) > MAX_REASONS:
                console.print(t("con_other_reasons", n=len(top) - MAX_REASONS), highlight=False)
    no_verdict = {k: v for k, v in by_status.items() if k in ("inconclusive", "failed")}
    if no_verdict:
        console.print(t("con_no_verdict", parts=t("con_list_sep").join(
            t("con_no_verdict_" + k, n=n) for k, n in no_verdict.items())), highlight=False)
    if interrupted or missing:
        stored = planned - missing
        console.print(t("con_interrupted", stored=stored, planned=planned, n=by_status.get("incomplete", 0)),
                      highlight=False)
        return 130
    if failed and len(failed) / max(planned, 1) > allow_failures:
        console.print(t("con_exit_failures", allow=f"{allow_failures:g}", k=int(allow_failures * planned),
                        planned=planned), highlight=False)
        return 3
    if no_verdict:
        console.print(t("con_exit_no_verdict", n=sum(no_verdict.values())), highlight=False)
        return 3
    if failed:
        console.print(t("con_within", n=len(failed), allow=f"{allow_failures:g}"), highlight=False)
    return 0


def print_estimate(console: Console, estimates: list[JudgeEstimate], t: Messages | None = None) -> None:
    """The dry run's table: calls, prompt tokens, estimated and maximum cost per judge, then the
    shared-prefix shares (:func:`print_prefix_shares`), in the language of ``t`` (English by default)."""
    t = _en(t)
    unknown = t("con_unknown")
    tb = Table(title=t("con_dry_title"))
    for i, key in enumerate(("col_judge", "con_col_model", "con_col_calls", "col_prompt_tokens", "con_col_output_est",
                             "con_col_cost_est", "con_col_cost_cache", "con_col_cost_max")):
        tb.add_column(t(key), justify="left" if i < 2 else "right", overflow="fold")
    for e in estimates:
        tb.add_row(e.judge, e.model, str(e.calls), str(e.prompt_tokens), str(e.output_tokens),
                   unknown if e.cost is None else f"{e.cost:.4f}",
                   unknown if e.cached_cost is None else f"{e.cached_cost:.4f}",
                   unknown if e.max_cost is None else f"{e.max_cost:.4f}")
    console.print(tb)
    console.print(t("con_dry_note", n=ASSUMED_OUTPUT_TOKENS), highlight=False)
    for e in estimates:
        if e.batch_factor is not None:
            console.print(t("con_dry_batch", judge=e.judge, factor=f"{e.batch_factor:g}"), highlight=False)
    ranged = [e for e in estimates if e.upper is not None]
    if ranged:
        console.print(t("con_dry_ranged"), highlight=False)
        for e in ranged:
            u = e.upper
            assert u is not None
            console.print(t("con_dry_range", judge=e.judge, low=e.calls, high=u.calls,
                            cost=unknown if e.cost is None or u.cost is None else f"{e.cost:.4f}-{u.cost:.4f}"),
                          highlight=False)
    print_prefix_shares(console, estimates, t)


def print_prefix_shares(console: Console, estimates: list[JudgeEstimate], t: Messages | None = None) -> None:
    """Per judge, the share of a call's prompt tokens in a prefix shared with other calls: what a
    provider's prompt cache can serve (per dimension across cases; across the dimensions of a case)."""
    t = _en(t)
    shown = [e for e in estimates if e.prefix_share]
    if not shown:
        return
    dims = sorted({d for e in shown for d in e.prefix_share}, key=lambda d: next(
        i for e in shown for i, x in enumerate(e.prefix_share) if x == d))
    tb = Table(title=t("con_prefix_title"))
    tb.add_column(t("col_judge"), overflow="fold")
    for d in dims:
        tb.add_column(t("con_prefix_across_cases", dimension=d), justify="right", overflow="fold")
    tb.add_column(t("con_prefix_across_dims"), justify="right", overflow="fold")
    tb.add_column(t("con_prefix_across_all"), justify="right", overflow="fold")
    for e in shown:
        tb.add_row(e.judge, *(_share(e.prefix_share.get(d)) for d in dims), _share(e.case_prefix_share),
                   _share(e.all_prefix_share))
    console.print(tb)
    console.print(t("con_prefix_note"), highlight=False)


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def print_prompts(console: Console, shown: list[ShownRequest], t: Messages | None = None) -> None:
    """``score --dry-run --show-prompt``: each judge's request for the case, as sent: every message's role and
    its text exactly (not wrapped, not marked up), then what instructor adds in the judge's mode (``tools``,
    ``tool_choice``, ``response_format``) as JSON."""
    t = _en(t)
    for s in shown:
        console.rule(Text(t("con_prompt_head", judge=s.judge, dimension=s.dimension)))
        if s.request is None:
            console.print(Text(t("con_prompt_none"), style="dim"))
            continue
        for m in s.request.get("messages", []):
            content = m.get("content")
            console.print(Text(f"[{m.get('role')}]", style="bold"))
            console.out(content if isinstance(content, str) else dumps_json(content, ensure_ascii=False, indent=2),
                        highlight=False)
        for key, value in s.request.items():
            if key != "messages":
                console.print(Text(f"[{key}]", style="bold"))
                console.out(dumps_json(value, ensure_ascii=False, indent=2), highlight=False)
