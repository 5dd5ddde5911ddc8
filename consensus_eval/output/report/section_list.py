"""The report as one ordered list of sections (:data:`SECTIONS`), each a block or blocks
(:mod:`~consensus_eval.output.report.blocks`) built once from a :class:`~consensus_eval.output.report.data.ReportData`
by one function: report.md, report.html (its navigation included) and the console render the same list, each
format the blocks and parts whose targets name it.

The builders of the run's own sections are here (the first screen, the review queue, the cases, the panel's
figures, the human reviewers, the metrics, the cost, the cases in full); the trust sections' are in
:mod:`~consensus_eval.output.report.trust` and :mod:`~consensus_eval.output.report.calibration_blocks`, each rubric
kind's in :mod:`~consensus_eval.output.report.kinds`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from consensus_eval.analysis.alpha import Alpha
from consensus_eval.analysis.judge_validity import ValidityReport
from consensus_eval.output.report import fmt
from consensus_eval.output.report.blocks import (
    FILES,
    HTML,
    MD,
    RELIABILITY,
    Bar,
    Block,
    Cases,
    Cell,
    Figure,
    Group,
    Heading,
    Layout,
    Link,
    Msg,
    Para,
    Part,
    TableBlock,
    Target,
)
from consensus_eval.output.report.calibration_blocks import calibration_block, invariance_block
from consensus_eval.output.report.charts import summary_stats
from consensus_eval.output.report.data import MARKDOWN_ALL_CASES, MARKDOWN_TOP, QUEUE_TOP, ReportData, needs_review
from consensus_eval.output.report.i18n import Messages
from consensus_eval.output.report.kinds import kinds_blocks
from consensus_eval.output.report.qc import errors_block
from consensus_eval.output.report.trust import (
    added_block,
    decision_block,
    leaderboard_block,
    review_progress,
    validity_block,
)

#: the columns of an alpha in a table: report.md's one (alpha and interval), report.html's three (alpha,
#: interval, bar)
_ALPHA_COLUMNS: list[frozenset[Target]] = [MD, HTML, HTML, HTML]


def _alpha_head(t: Messages) -> list[str]:
    """The headers of :data:`_ALPHA_COLUMNS` and the verdict's."""
    return [t.msg("md_alpha_ci"), "α", t.msg("col_ci"), t.msg("col_ci_bar"), t.msg("col_verdict")]


def _alpha_cells(a: Alpha | None, t: Messages, *, runs: bool = False, category: bool = False) -> list[str]:
    """An alpha as the cells of :data:`_ALPHA_COLUMNS`, then its verdict (coloured by its level in the page)."""
    v = fmt.verdict(a, t, runs=runs, category=category)
    bar = Bar(a.value, a.ci, t("ci_bar_label")) if a is not None and a.value is not None else None
    value = fmt.alpha_value(a) if a is not None and a.value is not None else fmt.DASH
    return [Msg(fmt.alpha_cell(a, t, runs=runs)), Msg(value), Msg(fmt.alpha_ci(a)), Cell(css="barcell", bar=bar),
            Cell(v.text, css=f"v {v.level}")]


def reliability_block(d: ReportData) -> Block:
    """Krippendorff's alpha across the judges per dimension and total (with the stars' ordinal alpha), per deduction
    category, and each judge's run-to-run stability."""
    t, rel = d.t, d.reliability
    keys = [x.id for x in d.rubric.dimensions] + ["total"]
    rows = []
    for k in keys:
        a = rel.across_judges.get(k)
        rows.append([fmt.key_label(d.rubric, k, t), *_alpha_cells(a, t), str(a.n_units) if a is not None else "",
                     Msg(fmt.alpha_cell(rel.stars[k], t)) if k in rel.stars else ""])
    resamples = rel.bootstrap.resamples if rel.bootstrap else "?"
    parts: list[Part] = [
        Para(t.msg("reliability_intro", resamples=resamples, source=Msg(d.source_text))),
        TableBlock("alpha-table", ["", *_alpha_head(t), t.msg("col_cases"), t.msg("col_stars_alpha")], rows,
                   [False, True, True, True, False, False, True, True],
                   columns=[*_EVERY, *_ALPHA_COLUMNS, *_EVERY * 3], layout=Layout(breaks=(6,))),
        Para(t.msg("guide"), targets=MD),
        Para(Msg("{guide} {bar}", {"guide": t.msg("guide"), "bar": t.msg("guide_bar")}), targets=HTML),
    ]
    if rel.categories:
        crows = [[Cell(a.name, spans=(("muted", f"({k})"),)), *_alpha_cells(a, t, category=True), str(a.n_units)]
                 for k, a in rel.categories.items()]
        parts.append(Group([TableBlock("category-alpha", [t.msg("col_category"), *_alpha_head(t), t.msg("col_cases")],
                                       crows, [False, True, True, True, False, False, True],
                                       columns=[*_EVERY, *_ALPHA_COLUMNS, *_EVERY * 2], row_heads=False)],
                           summary=t.msg("per_category")))
    if rel.within_judge:
        wrows = [[j, x.name, *_alpha_cells(per.get(x.id), t, runs=True)]
                 for j, per in rel.within_judge.items() for x in d.rubric.dimensions]
        parts += [Heading(t.msg("h_within")),
                  TableBlock("within-table", [t.msg("col_judge"), t.msg("col_dimension"), *_alpha_head(t)], wrows,
                             [False, False, False, True, True, False, False],
                             columns=[*_EVERY * 2, *_ALPHA_COLUMNS, *_EVERY], layout=Layout(row_lines=False))]
    return Block("reliability", t.msg("h_reliability"), parts=[*_only(FILES, parts), *_reliability_console(d)],
                 console_title=False, css_class="")


def _reliability_console(d: ReportData) -> list[Part]:
    """The ``reliability`` command's view of the section: alpha across the judges per key (its level when the keys'
    differ), the stars' ordinal alpha, and each judge's run-to-run stability, one line per judge."""
    t, rel = d.t, d.reliability
    levels = {a.level for a in rel.across_judges.values()}
    one = levels.pop() if len(levels) == 1 else None        # one level: said in the heading; else in each row
    rows = [[k, fmt.alpha_words(a, t) if one else f"{fmt.alpha_words(a, t)} ({t('con_level_' + a.level)})",
             fmt.alpha_words(s, t) if (s := rel.stars.get(k)) else ""] for k, a in rel.across_judges.items()]
    across = t("con_across_level", level=t("con_level_" + one)) if one else t("con_across")
    parts: list[Part] = [TableBlock("", ["", across, t("con_stars_ordinal")], rows,
                                    caption=t("con_alpha_title", judges=len(rel.judges), n=rel.n_cases),
                                    targets=RELIABILITY)]
    parts += [Para(t("con_within_judge", judge=j, parts=t("con_list_sep").join(
        f"{k} {fmt.alpha_words(a, t)}" for k, a in per.items())), targets=RELIABILITY, fold=True)
        for j, per in rel.within_judge.items()]
    return parts


def _only(targets: frozenset[Target], parts: list[Part]) -> list[Part]:
    """``parts`` shown in ``targets`` at most (a part for fewer stays so)."""
    return [replace(p, targets=p.targets & targets) for p in parts]


_EVERY: list[frozenset[Target]] = [frozenset({"md", "html", "summary", "reliability"})]


def quality_block(d: ReportData) -> Block | None:
    """Per judge, over the whole run: its quotes by how they were found in the case, the share not grounded (with
    its Wilson interval) and the share of claimed scores that differ from the derived ones (None: no judge)."""
    t = d.t
    if not d.judge_quality:
        return None
    kinds = ("exact", "normalised", "fuzzy", "not_found", "empty")
    rows = []
    for j, q in d.judge_quality.items():
        p = q.ungrounded
        bar = Bar(p.value, (p.low, p.high) if p.low is not None and p.high is not None else None, t("ci_bar_label"),
                  alpha=False) if p.value is not None else None
        rows.append([j, fmt.integer(q.deductions), *(fmt.integer(q.by_kind.get(k, 0)) for k in kinds),
                     Msg(fmt.share(p)), Cell(css="barcell", bar=bar),
                     Msg(fmt.share(q.claim_mismatch)) if q.claim_mismatch.n
                     else Cell(spans=(("muted", t.msg("no_claims")),))])
    header: list[str] = [t.msg("col_judge"), t.msg("col_deductions" if d.deductions_only else "col_quotes"),
              *(t.msg("col_" + k) for k in kinds), t.msg("col_ungrounded"), t.msg("col_ci_bar"),
              t.msg("col_mismatch")]
    return Block("quality", t.msg("h_quality"), parts=[
        Para(t.msg("quality_intro" if d.deductions_only else "quality_intro_kinds")),
        TableBlock("quality-table", header, rows, [False, *[True] * 7, False, True],
                   columns=[*_EVERY * 8, HTML, *_EVERY], layout=Layout(breaks=(9,)))], css_class="")


def distributions_block(d: ReportData) -> Block:
    """Each judge's totals: report.md's table of their quartiles; report.html's box plot, the same table (judges
    with a complete total) and one histogram per judge on shared bins."""
    t, bp = d.t, d.box_plot
    md_rows = []
    for j, values in d.totals.items():
        if values:
            s = summary_stats(values)
            md_rows.append([j, str(len(values)), *(fmt.num(s[k]) for k in ("min", "q1", "median", "q3", "max")),
                            fmt.mean1(s["mean"])])
        else:
            md_rows.append([j, "0", *([fmt.DASH] * 6)])
    header = [t.msg("col_judge"), "n", t.msg("col_min"), "Q1", t.msg("col_median"), "Q3", t.msg("col_max"),
              t.msg("col_mean")]
    parts: list[Part] = [Para(t.msg("md_distributions_intro"), targets=MD),
                         Para(t.msg("distributions_intro"), targets=HTML),
                         TableBlock("", header, md_rows, [False] + [True] * 7, targets=MD)]
    if bp.boxes:
        rows = [[b.judge, *(fmt.num(b.stats[k]) for k in ("n", "min", "q1", "median", "q3", "max")),
                 fmt.mean1(b.stats["mean"])] for b in bp.boxes]
        parts += [Figure("box_plot", bp, t),
                  TableBlock("distribution-table", header, rows, [False] + [True] * 7, targets=HTML,
                             layout=Layout(row_lines=False, body_line=False))]
    if bp.judges_without_data:
        parts.append(Para(t.msg("no_complete_total", judges=", ".join(bp.judges_without_data)), targets=HTML,
                          end=False))
    parts += [Heading(t.msg("h_histograms"), targets=HTML),
              Group([Figure("histograms", d.histograms, t)], cls="charts", targets=HTML)]
    return Block("distributions", t.msg("h_distributions"), parts=parts, css_class="")


def agreement_block(d: ReportData) -> Block:
    """Every pair of judges: the mean absolute difference of their totals and the interval alpha of them (report.html
    shades each cell by the difference)."""
    t, judges = d.t, d.judges
    if len(judges) < 2:
        return Block("agreement", t.msg("h_agreement"), [t.msg("one_judge")], nav_break=True, css_class="")
    md_rows, rows = [], []
    mads = [p.mad for p in d.agreement.values() if p.mad is not None]
    worst = max(mads) if mads else 0
    for a in judges:
        md_cells: list[str] = []
        cells: list[str] = []
        for b in judges:
            p = d.agreement.get((a, b))
            md_cells.append(fmt.DASH if p is None else f"{fmt.mean1(p.mad)} / {fmt.fixed(p.alpha.value, 3)} (n={p.n})")
            cells.append(Cell(fmt.DASH, css="muted") if a == b else Cell(
                style=f"background: {heat(d.agreement[(a, b)].mad, worst)}",
                spans=(("mad", t("mad_cell", mad=fmt.mean1(d.agreement[(a, b)].mad))),
                       ("sub", f"α {fmt.fixed(d.agreement[(a, b)].alpha.value, 3)} · n={d.agreement[(a, b)].n}"))))
        md_rows.append([a, *md_cells])
        rows.append([a, *cells])
    return Block("agreement", t.msg("h_agreement"), nav_break=True, parts=[
        Para(t.msg("md_agreement_intro"), targets=MD), Para(t.msg("agreement_intro"), targets=HTML),
        TableBlock("", ["", *judges], md_rows, targets=MD),
        TableBlock("agreement-matrix", ["", *judges], rows, cls="matrix", targets=HTML,
                   layout=Layout(breaks=tuple(range(1, len(judges) + 2))))], css_class="")


def heat(value: float | None, worst: float) -> str:
    """A CSS background colour for a disagreement figure: white at 0, deeper red towards ``worst``."""
    if value is None or worst <= 0:
        return "transparent"
    share = max(0.0, min(1.0, value / worst))
    return f"hsl(4, 75%, {round(97 - 30 * share)}%)"


def metrics_block(d: ReportData) -> Block:
    """The deterministic metrics saved in the run folder (``metrics/*.json``): every numeric value, as it is."""
    t = d.t
    if not d.metrics:
        return Block("metrics", t.msg("h_metrics"), [t.msg("metrics_none", folder=d.folder.name)], nav_break=True,
                     css_class="")
    files: list[Part] = []
    for m in d.metrics:
        parts: list[Part] = [Heading(m.name)]
        if m.error:
            parts.append(Para(m.error, "err", end=False))
        if m.context:
            parts.append(Para(" · ".join(f"{k}: {v}" for k, v in m.context), end=False))
        if m.values:
            parts.append(TableBlock("", ["metric", "value"], [[k, fmt.num(v)] for k, v in m.values], [False, True],
                                    cls="metrics", row_heads=False, layout=Layout(inline=True)))
        files.append(Group(parts))
    return Block("metrics", t.msg("h_metrics"), parts=[Para(t.msg("metrics_intro"), targets=HTML),
                                                       Group(files, cls="charts")], nav_break=True, css_class="")


def cost_block(d: ReportData) -> Block:
    """Per judge: calls, attempts, tokens, cost, the prompt cache's hit rate and what it saved."""
    t = d.t
    counts = ("ok", "failed", "attempts", "prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens")
    rows = [[j, *(fmt.integer(getattr(u, k)) for k in counts), Msg(fmt.money(u.cost)),
             Msg(fmt.percent(u.cache_hit_rate)), Msg(fmt.money(u.saved))] for j, u in d.costs.items()]
    header: list[str] = [t.msg(k) for k in ("col_judge", "col_calls_ok", "col_failed", "col_attempts",
                                            "col_prompt_tokens", "col_cached", "col_completion", "col_reasoning",
                                            "col_cost", "col_cache_hits", "col_saved")]
    return Block("cost", t.msg("h_cost"), tables=[TableBlock("cost-table", header, rows, [False] + [True] * 10,
                                                             layout=Layout(breaks=(4, 7, 9)))],
                 parts=[Para(t("cost_note"), "note", cls="note", attached=True)], nav_break=True, css_class="")


def human_block(d: ReportData) -> Block | None:
    """Agreement with the human reviewers (None without labels): alpha with and without them, each judge's and the
    panel's distance from them on the total, the reviewers' verdicts on the deductions (precision), and the
    reviewers' agreement with one another."""
    t, h = d.t, d.human
    if not h:
        return None
    keys = [k for k in [x.id for x in d.rubric.dimensions] + ["total"] if k in h.alpha_with_human]
    intro = t.msg("human_intro", n=h.n_cases)
    parts: list[Part] = [
        Para(Msg("{intro} {who}", {"intro": intro, "who": t.msg("reviewers", names=", ".join(h.reviewers))})
             if h.reviewers else intro, targets=MD),
        Para(Msg("{intro} {ids}", {"intro": intro,
                                   "ids": t.msg("human_unmatched", ids=", ".join(h.unmatched_case_ids))})
             if h.unmatched_case_ids else intro, targets=HTML)]
    if h.reviewers:
        parts.append(Para(t.msg("reviewers", names=", ".join(h.reviewers)), targets=HTML, end=False))
    if h.n_cases < 30:
        parts.append(Para(t.msg("small_sample", n=h.n_cases), "warn", id="small-sample", end=False))
    head = ["", t.msg("alpha_judges_only"), t.msg("alpha_with_human")]
    parts.append(TableBlock("", [*head, t.msg("col_verdict")], [
        [fmt.key_label(d.rubric, k, t), Msg(fmt.alpha_cell(h.alpha_without_human.get(k), t)),
         Msg(fmt.alpha_cell(h.alpha_with_human.get(k), t)), fmt.verdict(h.alpha_with_human.get(k), t).text]
        for k in keys], targets=MD))
    rows = []
    for k in keys:
        with_human = h.alpha_with_human.get(k)
        rows.append([fmt.key_label(d.rubric, k, t), Msg(fmt.alpha_cell(h.alpha_without_human.get(k), t)),
                     Msg(fmt.alpha_cell(with_human, t)), *_alpha_cells(with_human, t)[3:]])
    parts.append(TableBlock("human-alpha", [*head, t.msg("col_ci_bar"), t.msg("col_verdict")], rows,
                            [False, True, True, False, False], targets=HTML))
    parts += [Para(t.msg("h_human_judges"), targets=MD), Heading(t.msg("h_human_judges"), targets=HTML)]
    jac = h.category_jaccard or {}
    raters = [*h.judges.items(), ("panel", h.panel)]
    header = [t.msg("col_rater"), "n", t.msg("col_mae_ci"), t.msg("col_bias_ci"), "Pearson", "Spearman",
              t.msg("col_jaccard")]
    # report.md looks the panel's Jaccard up by its name in the report's language, report.html by "panel"
    parts.append(TableBlock("", header, [
        [t("panel") if name == "panel" else name, str(per["total"].n),
         Msg(f"{fmt.mean1(per['total'].mae)} {fmt.ci1(per['total'].mae_ci)}".strip()),
         Msg(f"{fmt.mean1(per['total'].bias)} {fmt.ci1(per['total'].bias_ci)}".strip()),
         fmt.fixed(per["total"].pearson, 3), fmt.fixed(per["total"].spearman, 3),
         fmt.fixed(jac.get(t("panel") if name == "panel" else name))]
        for name, per in raters if "total" in per], [False] + [True] * 6, targets=MD))
    parts.append(TableBlock("human-judges", header, [
        [t("panel") if name == "panel" else name, str(per["total"].n),
         f"{fmt.mean1(per['total'].mae)} {fmt.ci1(per['total'].mae_ci)}",
         f"{fmt.mean1(per['total'].bias)} {fmt.ci1(per['total'].bias_ci)}",
         fmt.fixed(per["total"].pearson, 3), fmt.fixed(per["total"].spearman, 3), fmt.fixed(jac.get(name))]
        for name, per in raters if per.get("total")], [False] + [True] * 6, targets=HTML, layout=Layout(breaks=(4,))))
    parts.append(Para(t.msg("human_notes")))
    if h.precision:
        prows = []
        for j, pr in h.precision.items():
            p = pr.precision
            bar = Bar(p.value, (p.low, p.high) if p.low is not None and p.high is not None else None,
                      t("ci_bar_label"), alpha=False) if p.value is not None else None
            prows.append([j, str(pr.agree), str(pr.disagree), str(pr.unsure), Msg(fmt.share(p)),
                          Cell(css="barcell", bar=bar)])
        parts += [Heading(t.msg("h_precision")),
                  Para(t.msg("precision_intro", n=h.n_verdicts, added=h.n_added_deductions)),
                  TableBlock("human-precision", [t.msg("col_judge"), t.msg("col_agree"), t.msg("col_disagree"),
                                                 t.msg("col_unsure"), t.msg("col_precision"), t.msg("col_ci_bar")],
                             prows, [False, True, True, True, True, False], columns=[*_EVERY * 5, HTML])]
    inter = [(fmt.key_label(d.rubric, k, t), a) for k, a in h.inter_reviewer.items()]
    if h.inter_reviewer_verdicts is not None:
        inter.append((t("inter_reviewer_verdicts"), h.inter_reviewer_verdicts))
    if inter:
        parts += [Heading(t.msg("h_inter_reviewer")), Para(t.msg("inter_reviewer_intro")),
                  TableBlock("inter-reviewer", ["", *_alpha_head(t), t.msg("col_cases")],
                             [[name, *_alpha_cells(a, t), str(a.n_units)] for name, a in inter],
                             [False, True, True, True, False, False, True],
                             columns=[*_EVERY, *_ALPHA_COLUMNS, *_EVERY * 2],
                             layout=Layout(last_line=h.inter_reviewer_verdicts is None))]
    return Block("human", t.msg("h_human"), parts=[*_only(FILES, parts), *_human_console(d)], console_title=False,
                 css_class="")


def _human_console(d: ReportData) -> list[Part]:
    """The ``reliability`` command's view of the section: each rater's MAE, bias and correlations on the total
    (95% intervals), alpha without and with the reviewers, the precision of each judge's deductions, the alpha
    between reviewers, and the small-sample warning."""
    t, h = d.t, d.human
    assert h is not None
    sep, parts = t("con_list_sep"), list[Part]()

    def ci(x: tuple[float, float] | None) -> str:
        return f" [{x[0]:.2f}, {x[1]:.2f}]" if x else ""

    def two(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    if h.n_cases:
        rows = []
        for name, v in [*h.judges.items(), (t("con_panel"), h.panel)]:
            if (tot := v.get("total")) is not None:
                rows.append([name, "-" if tot.mae is None else f"{tot.mae:.2f}{ci(tot.mae_ci)}",
                             "-" if tot.bias is None else f"{tot.bias:+.2f}{ci(tot.bias_ci)}", two(tot.pearson),
                             two(tot.spearman), two((h.category_jaccard or {}).get(name))])
        parts.append(TableBlock("", [t(k) for k in ("col_rater", "con_col_mae", "col_bias", "con_col_pearson",
                                                    "con_col_spearman", "col_jaccard")], rows,
                                caption=t("con_human_title", who=", ".join(h.reviewers) or t("con_human"),
                                          n=h.n_cases), targets=RELIABILITY))
        parts += [Para(t(key, parts=sep.join(f"{k} {fmt.alpha_words(a, t)}" for k, a in alphas.items())),
                       targets=RELIABILITY, fold=True)
                  for key, alphas in (("con_alpha_judges_only", h.alpha_without_human),
                                      ("con_alpha_with_human", h.alpha_with_human))]
    if h.precision:
        rows = [[j, str(p.agree), str(p.disagree), str(p.unsure), "-" if (pr := p.precision).value is None
                 else f"{pr.value:.0%} [{pr.low:.0%}, {pr.high:.0%}] (n={pr.n})"] for j, p in h.precision.items()]
        parts.append(TableBlock("", [t(k) for k in ("col_judge", "col_agree", "col_disagree", "col_unsure",
                                                    "col_precision")], rows, [False] + [True] * 4,
                                caption=t("con_precision_title", n=h.n_verdicts), targets=RELIABILITY))
    if h.inter_reviewer:
        verdicts = (t("con_inter_reviewer_verdicts", alpha=fmt.alpha_words(h.inter_reviewer_verdicts, t))
                    if h.inter_reviewer_verdicts else "")
        parts.append(Para(t("con_inter_reviewer", parts=sep.join(f"{k} {fmt.alpha_words(a, t)}"
                                                                 for k, a in h.inter_reviewer.items())) + verdicts,
                          targets=RELIABILITY, fold=True))
    if h.warning:
        parts.append(Para(f"{t('con_warning')} {h.warning}", "warn", targets=RELIABILITY, fold=True))
    return parts


def header_block(d: ReportData) -> Block:
    """The report's first screen: the rubric's name, what was scored and when, how to read the totals, and the
    notices (simulated judges, an incomplete run, a cascade's judges not asked). report.html puts its navigation
    after the meta line."""
    r, t = d.rubric, d.t
    n = len(d.consensus)
    meta = dict(n_cases=n, n_judges=len(d.judges), judges=", ".join(d.judges), rubric=r.id, version=r.version,
                generated=d.generated_at)
    parts: list[Part] = [
        Para(t.msg("md_meta_line" if d.deductions_only else "md_meta_line_kinds", **meta), targets=MD),
        Para(t.msg("meta_line", **meta, folder=d.folder.name), cls="meta", targets=HTML),
        Para(" ".join(d.how_to_read), id="how-to-read")]
    if d.simulated_banner:
        parts.append(Para(d.simulated_banner, "banner", id="simulated", end=False))
    if d.missing_calls:
        incomplete = t.msg("incomplete_banner", missing=d.missing_calls, planned=d.planned_calls,
                           cases=d.incomplete_cases)
        batches = t.msg("batches_banner", n=d.in_batches) if d.in_batches else None
        parts += [Para(Msg("**{a}** {b}", {"a": incomplete, "b": batches}) if batches else
                       Msg("**{a}**", {"a": incomplete}), targets=MD),
                  Para(Msg("{a} {b}", {"a": incomplete, "b": batches}) if batches else incomplete, "banner",
                       id="incomplete", targets=HTML, end=False)]
    for judge, k in d.not_asked.items():
        parts.append(Para(t.msg("cascade_banner", judge=judge, asked=n - k, n_cases=n, not_asked=k),
                          cls="banner cascade", end=False))
    return Block("header", r.name, parts=parts, css_class="")


def queue_block(d: ReportData) -> Block:
    """"N cases need review": what the queue's index is, how far the reviewers have come, the cases by reason, and
    the first :data:`~consensus_eval.output.report.data.QUEUE_TOP` cases of the queue."""
    t, queue, rq = d.t, d.queue, d.review_queue
    intro = t.msg("review_single_intro" if d.single_judge else "review_intro")
    parts: list[Part] = [Para(Msg("{intro} {formula}", {"intro": intro, "formula": t.msg(rq.formula_key)}))]
    progress = review_progress(d.results, t)
    if progress:     # report.html: above the queue's explanation; report.md: below it
        parts.insert(0, Para(progress, "banner", id="review-progress", targets=HTML, end=False))
        parts.append(Para(progress, "banner", targets=MD))
    if rq.by_reason:
        parts.append(Para(t.msg("by_reason", reasons=Msg(", ".join(f"{t('reason_' + c)} {n}"
                                                                    for c, n in rq.by_reason.items()))), end=False))
    if queue:
        mode = rq.mode
        rows = [[str(a.rank), Cell(a.case_id, href="#" + d.anchors[a.case_id]),
                 Cell(spans=((f"status {a.status}", t.msg("status_" + a.status)),)), fmt.mean1(a.score(mode)),
                 fmt.avg(a.total), Cell("; ".join(d.reasons(a)), css="flags")] for a in queue[:QUEUE_TOP]]
        header: list[str] = ["#", t.msg("col_case"), t.msg("col_status"),
                             t.msg("col_risk" if d.single_judge else "col_disagreement"), t.msg("col_total"),
                             t.msg("col_why")]
        parts += [Heading(t.msg("title_" + mode), targets=MD),
                  TableBlock("queue-table", header, rows, [True, False, False, True, True, False],
                             caption=t.msg("title_" + mode), row_heads=False, layout=Layout(breaks=(3,)))]
        if len(queue) > QUEUE_TOP:
            more = t.msg("queue_more", shown=QUEUE_TOP, n=len(queue))
            parts += [Para(Msg("{more} {how}", {"more": more, "how": t.msg("md_queue_more")}), targets=MD),
                      Para(more, link=Link("#cases", t.msg("queue_show_all"), "show-review"), targets=HTML,
                           end=False)]
    return Block("review", t.msg("n_need_review", n=len(queue)), parts=parts, nav=t.msg("nav_review"), css_class="",
                 heading_class="review")


def cases_block(d: ReportData) -> Block:
    """Every case: report.md's table of the panel's scores (the flagged ones only beyond
    :data:`~consensus_eval.output.report.data.MARKDOWN_ALL_CASES`); report.html's sortable, filterable table of every
    case, each opening its drill-down."""
    t, dims, r = d.t, d.rubric.dimensions, d.rubric
    formula, star_max = fmt.star_formula(r)
    star = t.msg("star_formula", formula=formula, max=fmt.num(star_max)) if d.has_star_total else None
    shown, cut = d.consensus, None
    if len(shown) > MARKDOWN_ALL_CASES:
        flagged = {a.case_id for a in d.queue}
        shown = [c for c in shown if c.case_id in flagged][:MARKDOWN_ALL_CASES]
        cut = t.msg("md_summary_cut", shown=len(shown), n=len(d.consensus))
    star_dims, star_total = d.star_dims, d.has_star_total
    header: list[str] = [
        t.msg("col_case"), *(f"{x.name} /{fmt.num(x.max)}" for x in dims),
        Msg("{total} /{max}", {"total": t.msg("col_total"), "max": fmt.num(r.max_total)}),
        *([t.msg("col_star_total")] if star_total else []),
        *([t.msg("col_stars") if len(star_dims) == len(dims) else
           Msg("{stars} ({dims})", {"stars": t.msg("col_stars"), "dims": ", ".join(x.name for x in star_dims)})]
          if star_dims else []),
        t.msg("col_judges"), t.msg("col_spread"), t.msg("col_status"), t.msg("col_flags")]
    rows = [[c.case_id, *(fmt.avg(c.scores[x.id]) for x in dims), fmt.avg(c.total),
             *([fmt.num(c.star_total)] if star_total else []),
             *(["/".join(str(c.stars.get(x.id) or "-") for x in star_dims)] if star_dims else []),
             str(c.n_judges), fmt.num(c.spread), t.msg("status_" + c.status), "; ".join(d.flag_texts(c.case_id))]
            for c in shown]
    counts = {s: sum(c.status == s for c in d.consensus) for s in ("ok", "inconclusive", "failed", "incomplete")}
    totals = [c.total for c in d.consensus if c.total is not None]
    mean = sum(totals) / len(totals) if totals else None
    statuses = Msg(", ".join(f"{t('status_' + s)} {n}" for s, n in counts.items() if n))
    parts: list[Part] = [Para(t.msg("md_totals", n=len(d.consensus), mean=fmt.mean1(mean), statuses=statuses),
                              targets=MD)]
    if star or cut:
        parts.append(Para(Msg("{star} {cut}", {"star": star, "cut": cut}) if star and cut else star or cut or "",
                          targets=MD))
    aggregate = d.results.config.consensus.aggregate
    intro = t.msg("cases_intro", aggregate=t.msg("agg_" + aggregate) if "agg_" + aggregate in t.texts else aggregate,
                  max=fmt.num(r.max_total))
    parts += [TableBlock("", header, rows, [False, *([True] * (len(dims) + 3 + star_total + bool(star_dims))), False,
                                            False], targets=MD),
              Para(Msg("{intro} {star}", {"intro": intro, "star": star}) if star else intro, targets=HTML),
              Cases("index", d)]
    return Block("cases", t.msg("h_cases"), parts=parts, nav=t.msg("nav_cases"), css_class="")


def details_block(d: ReportData) -> Block | None:
    """report.md's most disputed (or riskiest) cases in full (report.html opens any case from its table instead)."""
    t = d.t
    top = [a for a in d.ranking if needs_review(a)][:MARKDOWN_TOP] or d.ranking[:MARKDOWN_TOP]
    if not top:
        return None
    title = t.msg("md_top_risk" if d.review_queue.mode == "risk" else "md_top_disputed", n=len(top))
    return Block("details", title, parts=[Cases("details", d, tuple(top))])


def _systems(d: ReportData) -> Block | None:
    lb = d.results.leaderboard
    return leaderboard_block(lb, d.rubric, d.t) if lb is not None else None


def _added(d: ReportData) -> Block | None:
    return added_block(d.human, d.rubric, d.t) if d.human is not None else None


def _validity(d: ReportData) -> Block | None:
    """Shown once a spot check is drawn or labels exist (it then says what is missing)."""
    validity = d.reliability.validity
    if validity is None and d.human is not None:
        validity = ValidityReport(sample="none")
    return validity_block(validity, d.rubric, d.judges, d.t) if validity is not None else None


def _errors(d: ReportData) -> Block | None:
    errors = d.reliability.errors
    return errors_block(errors, d.rubric, d.t) if errors is not None else None


def _decision(d: ReportData) -> Block | None:
    return decision_block(d.reliability.decision, d.t) if d.reliability.decision else None


def _calibration(d: ReportData) -> Block | None:
    """Shown when the run folder has a calibration.json with planted errors
    (:mod:`~consensus_eval.output.report.calibration_blocks`)."""
    if d.calibration is None or not d.calibration.suite_cases:
        return None
    validity = d.reliability.validity
    return calibration_block(d.calibration, d.t, d.rubric, validity.deductions if validity is not None else None,
                             d.human)


def _invariance(d: ReportData) -> Block | None:
    """Shown when the folder's calibration.json has an invariance probe (``calibrate --suite invariance``)."""
    return invariance_block(d.calibration, d.t) if d.calibration is not None else None


def _kinds(d: ReportData) -> list[Block]:
    return kinds_blocks(d.results, d.t)


@dataclass(frozen=True)
class Section:
    """One entry of the report's list: ``build`` makes its block or blocks from the report's data (None, or none,
    when it has nothing to show); ``targets``: the formats that show it (report.md, report.html, the console's
    ``summary`` at the end of ``score`` and the ``reliability`` command); ``html_gap``: report.html's source leaves a
    blank line after it, shown or not."""

    build: Callable[[ReportData], Block | list[Block] | None]
    targets: frozenset[Target] = FILES
    html_gap: bool = True


_AND_SUMMARY: frozenset[Target] = FILES | {"summary"}
_AND_RELIABILITY: frozenset[Target] = FILES | {"reliability"}

#: the report's sections, in order: report.md, report.html (its navigation too) and the console's views render this
#: list, each the sections that name it
SECTIONS: tuple[Section, ...] = (
    Section(queue_block), Section(cases_block), Section(_kinds, html_gap=False), Section(_systems, _AND_SUMMARY),
    Section(quality_block), Section(distributions_block), Section(agreement_block),
    Section(reliability_block, _AND_RELIABILITY), Section(human_block, _AND_RELIABILITY),
    Section(_added, _AND_RELIABILITY), Section(_validity, _AND_RELIABILITY), Section(_errors, _AND_RELIABILITY),
    Section(_decision, _AND_RELIABILITY),
    Section(_calibration), Section(_invariance, html_gap=False), Section(metrics_block), Section(cost_block),
    Section(details_block, MD, html_gap=False),
)


def report_blocks(d: ReportData, target: Target) -> list[tuple[Section, list[Block]]]:
    """Each section of :data:`SECTIONS` that ``target`` shows, with its blocks for ``d`` (only those are built)."""
    out = []
    for s in SECTIONS:
        if target in s.targets:
            got = s.build(d)
            out.append((s, got if isinstance(got, list) else [] if got is None else [got]))
    return out
