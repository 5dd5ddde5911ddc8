"""What the commands print: the summary at the end of `score`, the reliability tables, the dry-run
estimate. Every function renders objects it is given; none reads a file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from consensus_eval.analysis.agreement import HumanAgreement
from consensus_eval.analysis.alpha import Alpha
from consensus_eval.analysis.audit import DEFAULT_TOP, review_queue
from consensus_eval.analysis.reliability import ReliabilityReport
from consensus_eval.analysis.results import Results
from consensus_eval.analysis.usage import JudgeUsage
from consensus_eval.execution.estimate import ASSUMED_OUTPUT_TOKENS, JudgeEstimate
from consensus_eval.execution.execute import Progress
from consensus_eval.execution.store import STORE_NAME
from consensus_eval.output.audit_console import print_queue
from consensus_eval.output.files import fmt_num
from consensus_eval.output.report.i18n import default_lang, messages, simulated_notice
from consensus_eval.output.report.trust import leaderboard_block
from consensus_eval.output.trust_console import print_block


def print_summary(console: Console, res: Results, out: Path, top: int = DEFAULT_TOP) -> None:
    """"N cases need review", the top ``top`` cases of the review queue (0: all) and the totals (cases per
    status, the mean panel score per dimension), then per judge: calls, tokens, cost. Never one row per
    case: ``consensus-eval audit DIR`` prints the drill-down, consensus.csv has every case."""
    progress = res.progress or Progress(total=len(res.records))
    console.print(f"{res.rubric.name}: {len(res.consensus)} cases, {len(res.judges)} judge(s)", highlight=False)
    notice = simulated_notice(messages(default_lang(res.rubric)), res.config.simulated_judges, len(res.judges))
    if notice:
        console.print(Text(notice, style="yellow"))
    print_queue(console, review_queue(res.audit, len(res.judges)), top)
    means = []
    for d in res.rubric.dimensions:
        vals = [s for c in res.consensus if c.status == "ok" and (s := c.scores[d.id]) is not None]
        # a likert scale's range (1-5), a criteria dimension's share (0-1), a deductions dimension's /max
        scale = f" ({fmt_num(d.low)}-{fmt_num(d.max)})" if d.kind != "deductions" else f"/{fmt_num(d.max)}"
        mean = (f"{sum(vals) / len(vals):.2f}" if d.kind == "criteria" else f"{sum(vals) / len(vals):.1f}") if vals \
            else "-"
        weight = f" x{fmt_num(d.weight)}" if d.weight != 1 else ""
        means.append(f"{d.name} {mean}{scale}{weight}" if vals or d.kind != "deductions" else f"{d.name} -")
    totals = [c.total for c in res.consensus if c.status == "ok" and c.total is not None]
    if totals:
        weighted = " (weighted)" if any(d.weight != 1 for d in res.rubric.dimensions) else ""
        means.append(f"total{weighted} {sum(totals) / len(totals):.1f}/{fmt_num(res.rubric.max_total)}")
    console.print(f"mean panel score over the {len(totals)} ok case(s): " + ", ".join(means), highlight=False)
    if res.leaderboard is not None:
        print_block(console, leaderboard_block(res.leaderboard, res.rubric, messages(default_lang(res.rubric))))
    jt = Table(title="judges")
    for col in ("judge", "ok", "failed", "attempts", "prompt tok", "completion tok", "cost $"):
        jt.add_column(col, justify="left" if col == "judge" else "right")
    for name, v in res.usage.items():
        jt.add_row(name, str(v.ok), str(v.failed), str(v.attempts), str(v.prompt_tokens),
                   str(v.completion_tokens), f"{v.cost:.4f}")
    console.print(jt)
    print_cache_summary(console, res.usage)
    print_pacing(console, progress)
    if progress.rounds > 1:
        console.print(f"adaptive runs / cascade: the plan grew in {progress.rounds} rounds to {progress.total} "
                      "call(s)", highlight=False)
    not_asked: dict[str, int] = {}
    for c in res.consensus:
        for j in c.not_asked:
            not_asked[j] = not_asked.get(j, 0) + 1
    for j, n in not_asked.items():
        console.print(f"cascade: {j} (stage 2) was asked {len(res.consensus) - n} of {len(res.consensus)} cases, "
                      f"those stage 1 flagged or could not settle; not asked the other {n}", highlight=False)
    console.print(f"{progress.done} call(s) made, {progress.skipped} resumed from the store, "
                  f"{progress.failed} failed. Outputs in {out}/: judgments.jsonl, consensus.csv, "
                  f"consensus.jsonl, reliability.json, report.md, report.html, {STORE_NAME}", highlight=False)


def print_pacing(console: Console, progress: Progress) -> None:
    """One line per LLM judge that sent requests in this run: which limit bound it (rpm, tpm,
    concurrency, provider 429s or latency) and the achieved requests/min against its limit."""
    for name, p in progress.pacing.items():
        console.print(f"pace of {name}: {p.explain()}", highlight=False)


def print_cache_summary(console: Console, usage: Mapping[str, JudgeUsage]) -> None:
    """Per judge that sent prompts: the prompt tokens its provider served from the prompt cache, their
    share (hit rate) and the USD they saved against the full input price ('unknown' without prices)."""
    shown = {name: u for name, u in usage.items() if u.prompt_tokens}
    if not shown:
        return
    t = Table(title="prompt cache (provider-side): prompt tokens served from the cache")
    for col in ("judge", "cached tok", "hit rate", "saved $"):
        t.add_column(col, justify="left" if col == "judge" else "right")
    for name, u in shown.items():
        t.add_row(name, str(u.cached_tokens), "-" if u.cache_hit_rate is None else f"{u.cache_hit_rate:.1%}",
                  "unknown" if u.saved is None else f"{u.saved:.4f}")
    console.print(t)


#: reasons listed per judge in the failure summary (the rest are counted)
MAX_REASONS = 3


def print_run_end(console: Console, res: Results, allow_failures: float = 0.0) -> int:
    """The last lines of `score`: what failed, per judge and why (grouped), the cases without a verdict,
    whether the run was interrupted; returns the exit code (0, 3 completed with failures, 130).

    Exit 0 only when every planned call is stored ``ok``, or the failed share is at most
    ``allow_failures`` (a fraction of the planned calls) and nothing is missing; a case without a verdict
    (no judge answered, or below the quorum) exits 3 whatever ``allow_failures`` allows.
    """
    planned = res.run.planned
    failed = [r for r in res.records if r.status == "failed"]
    missing = res.run.missing_calls
    interrupted = res.progress is not None and res.progress.interrupted
    by_status: dict[str, int] = {}
    for c in res.consensus:
        by_status[c.status] = by_status.get(c.status, 0) + 1
    if failed:
        console.print(f"{len(failed)} of {planned} planned call(s) failed ({len(failed) / max(planned, 1):.1%}):",
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
            console.print(f"  {judge}: {len(mine)} failed", highlight=False)
            for why, n in top[:MAX_REASONS]:
                console.print(f"    {n} x {why}", highlight=False, soft_wrap=True)
            if len(top) > MAX_REASONS:
                console.print(f"    ... and {len(top) - MAX_REASONS} other reason(s)", highlight=False)
    no_verdict = {k: v for k, v in by_status.items() if k in ("inconclusive", "failed")}
    if no_verdict:
        console.print("cases without a panel verdict: "
                      + ", ".join(f"{n} {k} ({'below the quorum' if k == 'inconclusive' else 'no judge answered'})"
                                  for k, n in no_verdict.items()), highlight=False)
    if interrupted or missing:
        stored = planned - missing
        console.print(f"interrupted: {stored} of {planned} judgments stored; rerun the same command to resume "
                      f"({by_status.get('incomplete', 0)} case(s) incomplete).", highlight=False)
        return 130
    if failed and len(failed) / max(planned, 1) > allow_failures:
        console.print(f"completed with failures: exit 3 (--allow-failures {allow_failures:g} allows "
                      f"{int(allow_failures * planned)} of {planned}).", highlight=False)
        return 3
    if no_verdict:
        console.print(f"completed with {sum(no_verdict.values())} case(s) without a verdict: exit 3 (whatever "
                      "--allow-failures allows: every case must have its result).", highlight=False)
        return 3
    if failed:
        console.print(f"completed: {len(failed)} failure(s), within --allow-failures {allow_failures:g}.",
                      highlight=False)
    return 0


def _alpha_text(a: Alpha) -> str:
    if a.value is None:
        return f"undefined ({a.reason})"
    ci = f" [{a.ci[0]:.2f}, {a.ci[1]:.2f}]" if a.ci else ""
    return f"{a.value:.3f}{ci}"


def print_reliability(console: Console, report: ReliabilityReport) -> None:
    """Alpha per dimension (across judges, stars, within judges) and agreement with the human."""
    t = Table(title=f"Krippendorff's alpha, {len(report.judges)} judges x {report.n_cases} cases (95% CI)")
    levels = {a.level for a in report.across_judges.values()}
    # one level (every dimension a deductions one): said in the heading; else each row says its own
    across = f"across judges ({levels.pop()})" if len(levels) == 1 else "across judges"
    for col in ("", across, "stars (ordinal)"):
        t.add_column(col)
    for k, a in report.across_judges.items():
        s = report.stars.get(k)
        t.add_row(k, _alpha_text(a) if across != "across judges" else f"{_alpha_text(a)} ({a.level})",
                  _alpha_text(s) if s else "")
    console.print(t)
    for j, dims in report.within_judge.items():
        console.print(f"run-to-run stability of {j}: " + ", ".join(f"{d} {_alpha_text(a)}" for d, a in dims.items()),
                      highlight=False)
    if report.human:
        print_human(console, report.human)


def _ci(ci: tuple[float, float] | None) -> str:
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""


def print_human(console: Console, h: HumanAgreement) -> None:
    """Agreement with the human reviewers: each judge's and the panel's MAE and bias on the total
    (95% bootstrap CIs), alpha with and without the human, deduction precision per judge (Wilson CI),
    alpha between reviewers, and the small-sample warning."""
    who = ", ".join(h.reviewers) or "human"
    if h.n_cases:
        ht = Table(title=f"against the human ({who}; {h.n_cases} cases), on the total: MAE = typical distance "
                         "in points, bias = judge - human (95% CI)")
        for col in ("rater", "MAE", "bias", "Pearson", "Spearman", "category Jaccard"):
            ht.add_column(col)
        for name, v in [*h.judges.items(), ("panel", h.panel)]:
            tot = v.get("total")
            if tot is None:
                continue
            jac = (h.category_jaccard or {}).get(name)
            ht.add_row(name, "-" if tot.mae is None else f"{tot.mae:.2f}{_ci(tot.mae_ci)}",
                       "-" if tot.bias is None else f"{tot.bias:+.2f}{_ci(tot.bias_ci)}",
                       *("-" if x is None else f"{x:.2f}" for x in (tot.pearson, tot.spearman)),
                       "-" if jac is None else f"{jac:.2f}")
        console.print(ht)
        for label, alphas in (("alpha, judges only", h.alpha_without_human),
                              ("alpha, judges + human", h.alpha_with_human)):
            console.print(f"{label}: " + ", ".join(f"{k} {_alpha_text(a)}" for k, a in alphas.items()),
                          highlight=False)
    if h.precision:
        pt = Table(title=f"deduction precision: share of each judge's deductions the reviewers agreed with "
                         f"({h.n_verdicts} verdicts; unsure left out; 95% Wilson CI)")
        for col in ("judge", "agree", "disagree", "unsure", "precision"):
            pt.add_column(col, justify="left" if col == "judge" else "right")
        for j, p in h.precision.items():
            pr = p.precision
            shown = "-" if pr.value is None else f"{pr.value:.0%} [{pr.low:.0%}, {pr.high:.0%}] (n={pr.n})"
            pt.add_row(j, str(p.agree), str(p.disagree), str(p.unsure), shown)
        console.print(pt)
    if h.inter_reviewer:
        console.print("alpha between reviewers: "
                      + ", ".join(f"{k} {_alpha_text(a)}" for k, a in h.inter_reviewer.items())
                      + (f"; verdicts (nominal) {_alpha_text(h.inter_reviewer_verdicts)}"
                         if h.inter_reviewer_verdicts else ""), highlight=False)
    if h.warning:
        console.print(f"[yellow]warning:[/] {h.warning}", highlight=False)


def print_estimate(console: Console, estimates: list[JudgeEstimate]) -> None:
    """The dry run's table: calls, prompt tokens, estimated and maximum cost per judge, then the
    shared-prefix shares (:func:`print_prefix_shares`)."""
    t = Table(title="dry run: nothing was sent")
    for col in ("judge", "model", "calls", "prompt tokens", "output tokens (est.)", "cost $ (est.)",
                "cost $ (est., cache)", "cost $ (max)"):
        t.add_column(col, justify="left" if col in ("judge", "model") else "right")
    for e in estimates:
        t.add_row(e.judge, e.model, str(e.calls), str(e.prompt_tokens), str(e.output_tokens),
                  "unknown" if e.cost is None else f"{e.cost:.4f}",
                  "unknown" if e.cached_cost is None else f"{e.cached_cost:.4f}",
                  "unknown" if e.max_cost is None else f"{e.max_cost:.4f}")
    console.print(t)
    console.print(f"Prompt tokens are counted as sent (messages and the response schema of the judge's mode). "
                  f"Estimated with {ASSUMED_OUTPUT_TOKENS} output tokens per call (per dimension answered, for "
                  "a judge with call: per_case, whose calls are its requests, one per case and run); the max uses "
                  "each judge's max_tokens per request; 'cache': at best, every call after a dimension's first "
                  "served its shared prefix from the provider's prompt cache at the cache rate. 'unknown': the "
                  "model has no price; "
                  "set input_cost_per_token and output_cost_per_token in its config.", highlight=False)
    for e in estimates:
        if e.batch_factor is not None:
            console.print(f"{e.judge}: batch: true, its costs above are at {e.batch_factor:g} x the live price "
                          "(batch_cost_factor); its calls are answered within the provider's batch window "
                          "(up to 24 h), not live.", highlight=False)
    ranged = [e for e in estimates if e.upper is not None]
    if ranged:
        console.print("Adaptive runs / cascade: the plan grows with the results, so the figures above are the "
                      "least this run makes (first round: adaptive.min_runs runs, stage-2 judges not asked); the most:",
                      highlight=False)
        for e in ranged:
            u = e.upper
            assert u is not None
            console.print(f"  {e.judge}: {e.calls}-{u.calls} calls, cost $ "
                          + ("unknown" if e.cost is None or u.cost is None else f"{e.cost:.4f}-{u.cost:.4f}")
                          + " (est.)", highlight=False)
    print_prefix_shares(console, estimates)


def print_prefix_shares(console: Console, estimates: list[JudgeEstimate]) -> None:
    """Per judge, the share of a call's prompt tokens in a prefix shared with other calls: what a
    provider's prompt cache can serve (per dimension across cases; across the dimensions of a case)."""
    shown = [e for e in estimates if e.prefix_share]
    if not shown:
        return
    dims = sorted({d for e in shown for d in e.prefix_share}, key=lambda d: next(
        i for e in shown for i, x in enumerate(e.prefix_share) if x == d))
    t = Table(title="shared prompt prefix: share of each call's prompt tokens a prompt cache can serve")
    t.add_column("judge")
    for d in dims:
        t.add_column(f"{d}\nacross cases", justify="right")
    t.add_column("across the dimensions\nof a case", justify="right")
    t.add_column("across\nevery call", justify="right")
    for e in shown:
        t.add_row(e.judge, *(_share(e.prefix_share.get(d)) for d in dims), _share(e.case_prefix_share),
                  _share(e.all_prefix_share))
    console.print(t)
    console.print("A provider caches the longest prefix it has seen (tools and schema first, then the messages): "
                  "'across cases' is what every call after a dimension's first can be served from the cache; the "
                  "response schema differs per dimension and comes before the case in every instructor mode, so "
                  "the dimensions of a case share only what precedes it. '-': fewer than two calls to compare.",
                  highlight=False)


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"
