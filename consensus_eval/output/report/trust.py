"""The report's trust sections as language-neutral blocks: the systems' leaderboard, the judges' validity
against clinicians on the random spot check (with prediction-powered estimates), how many judges and runs
are enough (the decision study), and what the reviewers added and accepted.

Each section is a :class:`~consensus_eval.output.report.blocks.Block` (a title, paragraphs in plain words, tables
of text cells) built once from the run's results in the report's language; report.md, report.html and the console
render the same blocks, so the three say the same thing in the same words.
"""

from __future__ import annotations

from collections.abc import Sequence

from consensus_eval.analysis.agreement import HumanAgreement
from consensus_eval.analysis.compare import CategoryChange, Comparison
from consensus_eval.analysis.decision import DecisionStudy
from consensus_eval.analysis.judge_validity import PANEL, ValidityReport
from consensus_eval.analysis.ppi import MIN_LABELS, MeanEstimate
from consensus_eval.analysis.results import Results
from consensus_eval.analysis.systems import MIN_PAIRS, Leaderboard
from consensus_eval.analysis.validity import ICC, VerdictValidity
from consensus_eval.domain.rubric import Rubric
from consensus_eval.output.report import fmt
from consensus_eval.output.report.blocks import Block, TableBlock
from consensus_eval.output.report.i18n import Messages


def _est(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" + (f" [{low:.1f}, {high:.1f}]" if low is not None and high is not None else "")


def _icc(i: ICC | None) -> str:
    if i is None or i.value is None:
        return "-"
    ci = f" [{i.low:.2f}, {i.high:.2f}]" if i.low is not None and i.high is not None else ""
    return f"{i.value:.2f}{ci}"


def _p(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _stratum(name: str, t: Messages) -> str:
    """A stratum of the spot check in the reader's words: ``all`` (none), ``system=X``, ``band=60-69``."""
    if name == "all":
        return t("stratum_none")
    kind, _, value = name.partition("=")
    return f"{t('stratum_' + kind)} {value}" if kind in ("system", "band") else name


def leaderboard_block(lb: Leaderboard, rubric: Rubric, t: Messages) -> Block:
    """The systems ranked by mean total, their pairwise differences and per-system alpha."""
    keys = lb.keys
    rows = [[str(i), s.system, str(s.n_cases),
             *(_est(s.means[k].value, s.means[k].low, s.means[k].high) for k in [keys[-1], *keys[:-1]])]
            for i, s in enumerate(lb.systems, 1)]
    head = [t("col_rank"), t("col_system"), t("col_cases"),
            *(fmt.key_label(rubric, k, t) for k in [keys[-1], *keys[:-1]])]
    main = TableBlock("leaderboard", head, rows, [True, False, True] + [True] * len(keys))
    verdict_text = {"a": "lb_verdict_a", "b": "lb_verdict_b", "none": "lb_verdict_none"}
    drows = []
    for d in lb.differences:
        if d.key != "total":
            continue
        verdict = (t("lb_verdict_few" if d.paired else "lb_verdict_few_cases", n=MIN_PAIRS) if d.few
                   else t(verdict_text[d.verdict], a=d.a, b=d.b))
        drows.append([f"{d.a} − {d.b}", _est(d.diff, d.low, d.high), _p(d.p_holm), verdict,
                      t("lb_paired", n=d.n) if d.paired else t("lb_unpaired", n=d.n),
                      f"{d.wins}/{d.ties}/{d.losses}" if d.paired else "-", _test(d.test, t)])
    diffs = TableBlock("leaderboard-differences",
                       [t("col_pair"), t("col_diff_ci"), t("col_p_holm"), t("col_conclusion"), t("col_design"),
                        t("col_wtl"), t("col_test")], drows, [False, True, True, False, False, True, False])
    tables, notes = [main, diffs], [t("lb_panel_note")]
    if any(a.value is not None for a in lb.alpha_by_system.values()):   # a panel of 2 judges or more
        tables.append(TableBlock("leaderboard-alpha", [t("col_system"), t("lb_alpha")],
                                 [[name, fmt.alpha_cell(a, t)] for name, a in lb.alpha_by_system.items()],
                                 [False, True]))
        notes.insert(0, t("lb_alpha_note"))
    warnings = [t("lb_few_sources", system=s.system, n=s.n_sources, min=lb.min_sources)
                for s in lb.systems if s.n_sources < lb.min_sources]
    return Block("systems", t("h_systems"),
                 [t("lb_intro", n=len(lb.systems), design=t("lb_design_" + lb.design)),
                  t("lb_diff_intro", margin=fmt.num(lb.tie_margin), min_pairs=MIN_PAIRS)], tables, notes, warnings)


def _test(test: str | None, t: Messages) -> str:
    """The test behind a p value in the reader's words (``-`` for none)."""
    return "-" if test is None else t("test_" + test)


def _verdict_table(table_id: str, who: str, raters: dict[str, VerdictValidity], ceiling: VerdictValidity | None,
                   t: Messages, *, kappa_first: bool) -> TableBlock:
    """One row per rater of verdicts against the clinicians (n, kappa, macro-F1, agreement), then the clinicians'
    own ceiling; ``kappa_first``: kappa before macro-F1 (deductions), else macro-F1 first (criteria, as
    HealthBench reports it)."""
    def row(name: str, x: VerdictValidity) -> list[str]:
        scores = [fmt.fixed(x.kappa), fmt.fixed(x.macro_f1)]
        return [name, str(x.n), *(scores if kappa_first else scores[::-1]), fmt.share(x.agreement)]

    rows = [row(name, x) for name, x in raters.items()]
    if ceiling is not None:
        rows.append(row(t("validity_ceiling"), ceiling))
    heads = ["kappa", "macro-F1"] if kappa_first else ["macro-F1", "kappa"]
    return TableBlock(table_id, [who, "n", *heads, t("col_agreement")], rows, [False, True, True, True, True])


def validity_block(v: ValidityReport, rubric: Rubric, judges: list[str], t: Messages) -> Block:
    """The judges and the panel against clinicians on the random spot check, in plain words."""
    block = Block("validity", t("h_validity"))
    if v.sample == "none":
        block.paragraphs.append(t("validity_none", drawn=v.n_drawn) if v.n_drawn else t("validity_no_sample"))
        return block
    block.paragraphs.append(t("validity_intro", drawn=v.n_drawn, n=v.n_labelled,
                              strata=", ".join(_stratum(s, t) for s in v.strata)))
    block.paragraphs.append(t("validity_weighted") if v.weighted else t("validity_unweighted"))
    if v.n_accepted_only:
        block.notes.append(t("validity_accepted_only", n=v.n_accepted_only))
    _validity_total(block, v, judges, t)
    dims = [d for d in rubric.dimensions if d.id in v.scores]
    if dims:
        rows = [[t("panel") if name == PANEL else name,
                 *(_icc(v.scores[d.id].raters[name].icc) for d in dims)]
                for name in [*judges, PANEL] if all(name in v.scores[d.id].raters for d in dims)]
        rows.append([t("validity_ceiling"), *(_icc(v.scores[d.id].ceiling) for d in dims)])
        block.tables.append(TableBlock("validity-dimensions", [t("col_rater"), *(d.name for d in dims)], rows,
                                       [False] + [True] * len(dims)))
    _validity_verdicts(block, v, t)
    _validity_ppi(block, v, t)
    if v.calibrated:
        rows = [[t("panel") if name == PANEL else name, str(m.n), fmt.mean1(m.mae_raw), fmt.mean1(m.mae_cv)]
                for name, m in v.calibrated.items()]
        block.tables.append(TableBlock("validity-calibrated", [t("col_rater"), "n", t("col_mae_raw"),
                                                               t("col_mae_cv")], rows, [False, True, True, True]))
        block.notes.append(t("validity_calibrated_note"))
    for note in v.notes:
        block.notes.append(t("validity_note_" + note))
    return block


def _validity_total(block: Block, v: ValidityReport, judges: list[str], t: Messages) -> None:
    """Each judge and the panel against the clinicians on the total (ICC, on the ceiling's basis too, bias, MAE,
    the labels it would need), the clinicians' own ceiling, and a warning per rater short of labels."""
    total = v.scores.get("total")
    if total is None:
        return
    rows = []
    for name in [*judges, PANEL]:
        sv = total.raters.get(name)
        if sv is None:
            continue
        who = t("panel") if name == PANEL else name
        need = t("min_n_unreachable") if sv.unreachable else "-" if sv.min_n is None else str(sv.min_n)
        rows.append([who, str(sv.n), _icc(sv.icc), _icc(total.same_basis.get(name)), fmt.mean1(sv.bias),
                     fmt.mean1(sv.mae), need])
        if sv.unreachable and sv.n:
            block.warnings.append(t("validity_unreachable", rater=who))
        elif sv.small_sample and sv.n:
            block.warnings.append(t("validity_small", rater=who, n=sv.n, need="-" if sv.min_n is None else sv.min_n))
    rows.append([t("validity_ceiling"), str(total.ceiling.n) if total.ceiling else "0", "-",
                 _icc(total.ceiling), "", "", ""])
    block.tables.append(TableBlock("validity-scores", [t("col_rater"), "n", t("col_icc"), t("col_icc_same_basis"),
                                                       t("col_bias"), t("col_mae"), t("col_min_n")],
                                   rows, [False, True, True, True, True, True, True]))
    block.notes.append(t("validity_icc_note"))
    if total.ceiling is None:
        block.notes.append(t("validity_no_ceiling"))


def _validity_verdicts(block: Block, v: ValidityReport, t: Messages) -> None:
    """The judges' deduction verdicts and the criteria verdicts against the clinicians' (kappa, macro-F1)."""
    if v.deductions is not None:
        dv = v.deductions
        block.tables.append(_verdict_table("validity-deductions", t("col_judge"), dv.judges, dv.ceiling, t,
                                           kappa_first=True))
        block.notes.append(t("validity_deductions_note", n=dv.n_items))
    if v.criteria is not None:
        cv = v.criteria
        raters = {t("panel") if name == PANEL else name: x for name, x in cv.raters.items()}
        block.tables.append(_verdict_table("validity-criteria", t("col_rater"), raters, cv.ceiling, t,
                                           kappa_first=False))
        block.notes.append(t("validity_criteria_note", n=cv.n_units))
        if cv.ceiling is None:
            block.notes.append(t("validity_criteria_no_ceiling"))


def _validity_ppi(block: Block, v: ValidityReport, t: Messages) -> None:
    """The clinicians' mean total per group, prediction-powered beside clinicians only and the panel only, and the
    differences between groups."""
    ppi = [p for p in v.ppi if p.key == "total"]
    if ppi:
        def cell(m: MeanEstimate) -> str:
            w = m.width
            if m.few and m.estimate is not None:
                return f"{m.estimate:.1f} ({t('ppi_no_interval', n=m.n, min=MIN_LABELS)})"
            return _est(m.estimate, m.low, m.high) + (f" ({t('width')} {w:.1f})" if w is not None else "")

        def group(name: str) -> str:
            return name if name != "all" else t("all_cases")

        rows = [[group(p.group), cell(p.ppi), fmt.fixed(p.ppi.lam), cell(p.human), cell(p.panel)] for p in ppi]
        block.tables.append(TableBlock("validity-ppi", [t("col_group"), t("col_ppi"), t("col_lambda"),
                                                        t("col_human_only"), t("col_panel_only")], rows,
                                       [False, True, True, True, True]))
        block.notes.append(t("validity_ppi_note"))
        sep = "、" if t.lang == "zh" else ", "
        if few := [group(p.group) for p in ppi if p.ppi.few]:
            block.warnings.append(t("validity_ppi_few", groups=sep.join(few), min=MIN_LABELS))
        if zero := [group(p.group) for p in ppi if p.ppi.lam == 0 and p.ppi.estimate is not None]:
            block.notes.append(t("validity_ppi_lambda_zero", groups=sep.join(zero)))
    diffs = [x for x in v.ppi_differences if x.key == "total"]
    if diffs:
        rows = [[f"{x.a} − {x.b}", _est(x.difference.estimate, x.difference.low, x.difference.high)] for x in diffs]
        block.tables.append(TableBlock("validity-ppi-differences", [t("col_pair"), t("col_ppi_diff")], rows,
                                       [False, True]))


def decision_block(studies: dict[str, DecisionStudy], t: Messages) -> Block | None:
    """How reliable the panel mean would be with 1-5 judges x 1-3 runs (on the total), and the cheapest
    design reaching the target."""
    s = studies.get("total")
    if s is None:
        return None
    vc = s.components
    comp = TableBlock("decision-components", [t("col_component"), t("col_variance"), t("col_share")], [],
                      [False, True, True])
    parts = [("g_case", vc.case), ("g_judge", vc.judge), ("g_case_judge", vc.case_judge), ("g_run", vc.run),
             ("g_residual", vc.residual)]
    if not vc.runs_separated:
        parts = [("g_case", vc.case), ("g_judge", vc.judge), ("g_residual_one_run", vc.residual)]
    whole = sum(x for _, x in parts) or 1.0
    comp.rows = [[t(name), f"{x:.2f}", f"{100 * x / whole:.0f}%"] for name, x in parts]
    runs = sorted({r.runs for r in s.designs})
    grid = TableBlock("decision-designs", [t("col_judges"), *(t("col_runs", n=r) for r in runs)], [],
                      [True] * (len(runs) + 1))
    for nj in sorted({r.judges for r in s.designs}):
        grid.rows.append([str(nj), *(fmt.fixed(next(x.phi for x in s.designs if x.judges == nj and x.runs == r))
                                     for r in runs)])
    paras = [t("decision_intro", n=s.n_cases, judges=vc.n_judges, runs=vc.n_runs)]
    if s.dropped:
        paras.append(t("decision_dropped", n=s.dropped))
    if s.cheapest is not None:
        c = s.cheapest
        cost = t("decision_cost", cost=f"{c.cost * 1000:.2f}") if c.cost is not None else ""
        paras.append(t("decision_cheapest", judges=c.design.judges, runs=c.design.runs, phi=fmt.fixed(c.design.phi),
                       target=fmt.fixed(s.target), cost=cost))
    else:
        paras.append(t("decision_none", target=fmt.fixed(s.target)))
    notes = [t("decision_note")] + ([t("decision_one_run")] if not vc.runs_separated else [])
    return Block("decision", t("h_decision"), paras, [comp, grid], notes)


def added_block(h: HumanAgreement, rubric: Rubric, t: Messages) -> Block | None:
    """The deductions the reviewers added (the judges' misses) and the scores they accepted from the panel."""
    if not h.added and not h.n_accepted:
        return None
    block = Block("added", t("h_added"), nav=None)
    if h.n_accepted:
        block.paragraphs.append(t("accepted_note", n=h.n_accepted) if not h.accepted_included
                                else t("accepted_included", n=h.n_accepted))
    if h.added:
        names = {d.id: d.name for d in rubric.dimensions}
        block.tables.append(TableBlock("added-deductions", [t("col_case"), t("col_dimension"), t("col_type"),
                                                            t("col_points"), t("col_evidence"), t("col_comment"),
                                                            t("col_reviewer"), t("col_missed_by")],
                                       [[x.case_id, names.get(x.dimension, x.dimension),
                                         x.type if x.category != "fixed_penalty" else f"{t('fixed_penalty')}: {x.type}",
                                         fmt.num(x.points), x.evidence or "", x.comment or "", x.reviewer,
                                         ", ".join(x.missed_by)] for x in h.added],
                                       [False, False, False, True, False, False, False, False]))
        if h.missed:
            block.notes.append(t("missed_line", items=", ".join(f"{j} {n}" for j, n in h.missed.items())))
    return block


def comparison_block(c: Comparison, rubric: Rubric, t: Messages) -> Block:
    """``B - A``: per key, the cases that moved most, the categories that changed."""
    keys = list(c.keys)
    rows = [[fmt.key_label(rubric, k, t), str(x.n), fmt.mean1(x.mean_a), fmt.mean1(x.mean_b),
             _est(x.diff, x.low, x.high), _p(x.p), _test(x.test, t)] for k in [keys[-1], *keys[:-1]]
            if (x := c.keys[k])]
    paras = [t("compare_intro", a=c.a, b=c.b, n=c.n_pairs,
               how=t("compare_by_case") if c.mode == "runs" else t("compare_by_source"))]
    if c.only_a or c.only_b:
        paras.append(t("compare_unpaired", a=c.a, b=c.b, only_a=c.only_a, only_b=c.only_b))
    tables = [TableBlock("compare-keys", ["", "n", c.a, c.b, t("col_change_ci"), "p", t("col_test")], rows,
                         [False, True, True, True, True, True, False])]
    if c.moved:
        tables.append(TableBlock("compare-moved", [t("col_case"), c.a, c.b, t("col_change")],
                                 [[m.case_a if m.case_a == m.case_b else f"{m.case_a} / {m.case_b}",
                                   fmt.mean1(m.total_a), fmt.mean1(m.total_b), f"{m.diff:+.1f}"] for m in c.moved],
                                 [False, True, True, True]))
    categories = categories_table(c.categories, c.a, c.b, rubric, t)
    if categories is not None:
        tables.append(categories)
    return Block("compare", t("h_compare", a=c.a, b=c.b), paras, tables, [t("compare_note")])


def categories_table(categories: Sequence[CategoryChange], a: str, b: str, rubric: Rubric,
                     t: Messages) -> TableBlock | None:
    """The deduction categories B gained or lost against A (points and deductions per case; None: no change)."""
    changed = [x for x in categories if x.points_diff or x.count_diff]
    dim_names = {d.id: d.name for d in rubric.dimensions}

    def cat_name(key: str, name: str) -> str:
        dim, _, cat = key.partition(".")
        return f"{dim_names.get(dim, dim)} / {t('fixed_penalty')}" if cat == "fixed_penalty" else name

    if not changed:
        return None
    return TableBlock("compare-categories",
                      [t("col_category"), t("col_points_a", a=a), t("col_points_b", b=b), t("col_change"),
                       t("col_count_change")],
                      [[cat_name(x.key, x.name), f"{x.points_a:.2f}", f"{x.points_b:.2f}", f"{x.points_diff:+.2f}",
                        f"{x.count_diff:+.2f}"] for x in changed],
                      [False, True, True, True, True])


def review_progress(results: Results, t: Messages) -> str | None:
    """One line for the report's first screen: how many cases reviewers scored (by whom), how many an
    adjudicator settled, how many scores were accepted from the panel (None: no label yet)."""
    review = results.review
    if review is None:
        return None
    dims = [d.id for d in results.rubric.dimensions]
    by: dict[str, int] = {}
    reviewed = adjudicated = 0
    adjudicators: list[str] = []
    for cr in review.cases.values():
        done = [n for n, sc in cr.scores.items() if all(d in sc for d in dims)]
        reviewed += bool(done)
        for n in done:
            by[n] = by.get(n, 0) + 1
        if cr.reference:
            adjudicated += 1
            adjudicators += [a for a in cr.adjudicators if a not in adjudicators]
    who = ("、" if t.lang == "zh" else ", ").join(f"{n} {k}" for n, k in by.items())
    return t("review_progress", reviewed=reviewed, n=len(results.consensus), who=who or "-", adjudicated=adjudicated,
             adjudicators=", ".join(adjudicators) or "-", accepted=review.n_accepted)
