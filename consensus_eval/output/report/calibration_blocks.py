"""The calibration section: a :class:`~consensus_eval.analysis.calibration.CalibrationReport` as a trust
:class:`~consensus_eval.output.report.trust.Block`, in the report's language, shown by report.md,
report.html and the console (``calibrate``) alike.

What it shows: per judge and the panel, the three recalls side by side (found, type matched, points
weighted) with their intervals and the units behind them, the unjudged count, false alarms on clean
records, precision and cost per error found; the recall by category and by type (cells shaded by recall
in report.html); the score error; the types with too few distinct edits; and the recommendation.
"""

from __future__ import annotations

from consensus_eval.analysis.agreement import HumanAgreement
from consensus_eval.analysis.calibration import (
    MARGIN,
    PANEL,
    WEAK,
    CalibrationReport,
    JudgeCalibration,
    Recall,
    Weighted,
    mode_verdict,
    weak_types,
)
from consensus_eval.analysis.intervals import Share
from consensus_eval.analysis.invariance import EditShift
from consensus_eval.analysis.judge_validity import DeductionValidity
from consensus_eval.domain.kinds.deductions import deductions_in
from consensus_eval.domain.rubric import Rubric
from consensus_eval.output.report import fmt
from consensus_eval.output.report.blocks import Block, TableBlock
from consensus_eval.output.report.i18n import Messages


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _cell(value: float | None, low: float | None, high: float | None, counts: str) -> str:
    if value is None:
        return ""
    ci = f" [{low:.0%}-{high:.0%}]" if low is not None and high is not None else ""
    return f"{value:.0%}{ci} {counts}"


def share_cell(p: Share | None) -> str:
    """``87% [83-91] 310/356``: the share, its 95% interval, successes / units counted ('' when none)."""
    return "" if p is None else _cell(p.value, p.low, p.high, f"{p.k}/{p.n}")


def weighted_cell(w: Weighted | None) -> str:
    """The same for points-weighted recall: points found / points planted."""
    return "" if w is None else _cell(w.value, w.low, w.high, f"{fmt.num(w.found_points)}/{fmt.num(w.points)}")


class _Names:
    """Category and type names from the rubric (the id when the rubric does not have it)."""

    def __init__(self, rubric: Rubric | None, t: Messages) -> None:
        self.categories: dict[str, str] = {}
        self.types: dict[str, str] = {}
        for dim in deductions_in(rubric.dimensions) if rubric is not None else []:
            for cat in dim.categories:
                self.categories[cat.id] = cat.name
                for typ in cat.types:
                    self.types[typ.id] = typ.name
            for pen in dim.penalties_by_id.values():
                self.categories[pen.id] = self.types[pen.id] = f"{t('fixed_penalty')}: {pen.name}"

    def category(self, key: str) -> str:
        return self.categories.get(key, key)

    def type(self, key: str) -> str:
        name = self.types.get(key)
        return f"{name} ({key})" if name and name != key else key


def _shade(r: Recall | None) -> float | None:
    return None if r is None else r.found.value


def _name(judge: str, t: Messages) -> str:
    return t("panel") if judge == PANEL else judge


def calibration_block(rep: CalibrationReport, t: Messages, rubric: Rubric | None = None,
                      real: DeductionValidity | None = None, human: HumanAgreement | None = None) -> Block:
    """The calibration section (module docstring) in the language of ``t``; ``rubric`` names the
    categories and types (ids without it). Beside a run with clinicians' labels, the planted-error figures
    are set against detection on the run's own records: ``real`` (the validity section's deduction
    verdicts on the random spot check: recall and precision on real records) and ``human`` (every review:
    deductions marked wrong, deductions the reviewers added that each judge missed)."""
    cols = [j for j in rep.judges if j != PANEL] + [PANEL]
    names = _Names(rubric, t)
    block = _intro(rep, t)
    block.tables.append(_judges_table(rep, cols, t))
    block.tables += _recall_tables(rep, cols, names, t)
    if real is not None or human is not None:
        block.tables.append(_real_table(rep, t, real, human))
        block.notes.append(t("cal_real_note"))
    block.tables.append(_score_error_table(rep, cols, rubric, t))
    block.notes.append(t("cal_table_note"))
    block.notes += _stability_notes(rep, cols, t)
    if rep.small_types and rep.needed_per_type:
        block.warnings.append(t("cal_small", need=rep.needed_per_type,
                                types=", ".join(f"{names.type(k)} {n}" for k, n in rep.small_types.items())))
    block.notes += recommendation(rep, t, names)
    if rep.unplantable:
        block.notes.append(t("cal_unplantable", types=", ".join(names.type(k) for k in rep.unplantable)))
    return block


def _score_error_table(rep: CalibrationReport, cols: list[str], rubric: Rubric | None, t: Messages) -> TableBlock:
    """Per judge and the panel, each dimension's score error on the suite: MAE / bias."""
    dims = list(rep.judges[cols[0]].score_error)
    dim_names = {d.id: d.name for d in rubric.dimensions} if rubric is not None else {}
    return TableBlock(
        "calibration-score-error", [t("col_judge"), *(dim_names.get(d, d) for d in dims)],
        [[_name(c, t), *(f"{e.mae:.2f} / {e.bias:+.2f}" if e.mae is not None and e.bias is not None else "-"
                         for e in rep.judges[c].score_error.values())] for c in cols],
        [False] + [True] * len(dims))


def _stability_notes(rep: CalibrationReport, cols: list[str], t: Messages) -> list[str]:
    """For each judge run more than once: its recall per run and how often its runs agree."""
    out = []
    for c in cols:
        jc = rep.judges[c]
        if len(jc.runs_recall) > 1 and jc.consistent is not None and jc.consistent.value is not None:
            out.append(t("cal_stability", judge=_name(c, t), runs=", ".join(pct(r) for r in jc.runs_recall),
                         k=jc.consistent.k, n=jc.consistent.n, share=pct(jc.consistent.value)))
    return out


def _intro(rep: CalibrationReport, t: Messages) -> Block:
    """The section with what the suite planted, in what units, into which records, and what it measures."""
    block = Block("calibration", t("h_calibration"))
    block.paragraphs.append(t("cal_intro", cases=rep.suite_cases, planted=rep.planted, errors=rep.errors,
                              clean=rep.clean, quorum=rep.quorum))
    if rep.edits is not None:
        block.paragraphs.append(t("cal_units", errors=rep.errors, edits=rep.edits, bases=rep.bases,
                                  clean=rep.clean, clean_records=rep.clean_records))
    if rep.source == "bases":
        used = sum(1 for types in rep.planted_into.values() if types)
        block.paragraphs.append(t("cal_bases", used=used, total=len(rep.planted_into)))
        for rid, why in rep.not_planted.items():
            block.notes.append(t("cal_not_planted", record=rid, why=why))
    block.warnings.append(t("cal_what_" + rep.source))
    return block


def _judges_table(rep: CalibrationReport, cols: list[str], t: Messages) -> TableBlock:
    """Per judge and the panel: the three recalls, the unjudged errors, false alarms, precision and cost."""
    rows = []
    for c in cols:
        jc = rep.judges[c]
        rows.append([_name(c, t), share_cell(jc.overall.found), share_cell(jc.overall.type_match),
                     weighted_cell(jc.overall.weighted), str(jc.unjudged),
                     "-" if jc.false_alarms_per_case is None else f"{jc.false_alarms_per_case:.2f}",
                     share_cell(jc.clean_flagged) or "-", share_cell(jc.precision) or "-",
                     "-" if jc.cost_per_found is None else f"${jc.cost_per_found:.4f}"])
    return TableBlock(
        "calibration-judges",
        [t("col_judge"), t("cal_col_found"), t("cal_col_type_match"), t("cal_col_weighted"), t("cal_col_unjudged"),
         t("cal_col_false_alarms"), t("cal_col_clean_flagged"), t("cal_col_precision"), t("cal_col_cost")],
        rows, [False] + [True] * 8)


def _recall_tables(rep: CalibrationReport, cols: list[str], names: _Names, t: Messages) -> list[TableBlock]:
    """The recall of each judge and the panel by category and by type, cells shaded by recall."""
    out = []
    for key, table_id, head, label in (("by_category", "calibration-categories", t("col_category"), names.category),
                                       ("by_type", "calibration-types", t("col_type"), names.type)):
        keys = sorted({k for c in cols for k in getattr(rep.judges[c], key)})
        tb = TableBlock(table_id, [head, *(_name(c, t) for c in cols)], [], [False] + [True] * len(cols))
        for k in keys:
            cells = [getattr(rep.judges[c], key).get(k) for c in cols]
            tb.rows.append([label(k), *(share_cell(r.found) if r is not None else "" for r in cells)])
            tb.shades.append([None, *(_shade(r) for r in cells)])
        out.append(tb)
    return out


def _real_table(rep: CalibrationReport, t: Messages, real: DeductionValidity | None,
                human: HumanAgreement | None) -> TableBlock:
    """Per judge: recall and precision on planted errors beside recall and precision on the run's own
    records (random spot check), and what the reviewers marked wrong or added (every review)."""
    rows = []
    for j in (j for j in rep.judges if j != PANEL):
        jc = rep.judges[j]
        verdicts = human.precision.get(j) if human is not None else None
        rows.append([j, share_cell(jc.overall.found), share_cell(real.recall.get(j)) if real else "",
                     share_cell(jc.precision), share_cell(real.precision.get(j)) if real else "",
                     "" if verdicts is None else str(verdicts.disagree),
                     "" if human is None else str(human.missed.get(j, 0))])
    return TableBlock("calibration-real",
                      [t("col_judge"), t("cal_col_planted_recall"), t("cal_col_real_recall"),
                       t("cal_col_planted_precision"), t("cal_col_real_precision"), t("cal_col_marked_wrong"),
                       t("cal_col_added_missed")], [[c or "-" for c in r] for r in rows], [False] + [True] * 6)


def recommendation(rep: CalibrationReport, t: Messages, names: _Names | None = None) -> list[str]:
    """The recommendation of calibration.json in the language of ``t``, from its figures."""
    names = names or _Names(None, t)
    out = []
    for name, jc in rep.judges.items():
        misses = weak_types(jc)
        if misses:
            out.append(t("cal_misses", judge=_name(name, t), types=", ".join(names.type(x) for x in misses),
                         weak=pct(WEAK)))
        if name != PANEL and jc.false_alarms_per_case is not None and jc.false_alarms_per_case >= 1:
            out.append(t("cal_many_false_alarms", judge=name, n=f"{jc.false_alarms_per_case:.1f}"))
    for name, jc in rep.judges.items():
        if jc.unjudged and name != PANEL:
            out.append(t("cal_unjudged", judge=name, n=jc.unjudged,
                         types=", ".join(f"{names.type(k)} {n}" for k, n in jc.unjudged_by_type.items()) or "-"))
    if rep.best_judge is not None:
        best: JudgeCalibration = rep.judges[rep.best_judge]
        synthetic = rep.source in ("builtin", "builtin-heldout", "bases")
        out.append(t("cal_best_" + ("synthetic" if synthetic else "other"),
                     judge=rep.best_judge, recall=share_cell(best.overall.found)))
    elif [j for j in rep.judges if j != PANEL]:
        out.append(t("cal_no_best"))
    for name, nb in rep.not_best_why.items():
        if nb.reason == "none_judged":
            out.append(t("cal_not_best_none", judge=name))
        elif nb.reason == "unjudged":
            out.append(t("cal_not_best_unjudged", judge=name, n=nb.unjudged, planted=nb.planted, share=pct(nb.value),
                         limit=pct(nb.limit)))
        elif nb.reason == "false_alarms":
            out.append(t("cal_not_best_false_alarms", judge=name, n=f"{nb.value:.1f}", limit=fmt.num(nb.limit)))
        else:
            out.append(t("cal_not_best_precision", judge=name, share=pct(nb.value), limit=pct(nb.limit)))
    for name, jc in rep.judges.items():
        if jc.cost_per_found is not None and jc.cost:
            out.append(t("cal_cost", judge=_name(name, t), cost=f"${jc.cost:.2f}", per=f"${jc.cost_per_found:.4f}"))
    panel = rep.judges.get(PANEL)
    several = len(rep.judges) > 2
    if panel is not None and several and panel.false_alarms_per_case is not None:
        out.append(t("cal_panel_false_alarms", quorum=rep.quorum, n=f"{panel.false_alarms_per_case:.2f}",
                     precision=share_cell(panel.precision) or "-"))
    for m in rep.comparisons:
        v = mode_verdict(m)
        if v is None or m.difference is None or m.low is None or m.high is None:
            continue
        out.append(t("cal_mode_" + v, case=m.per_case, dim=m.per_dimension, diff=f"{m.difference:+.1%}",
                     low=f"{m.low:+.1%}", high=f"{m.high:+.1%}", n=m.n, margin=pct(MARGIN)))
    if rep.panel_gain is not None and several:
        key = "cal_panel_gain" if rep.panel_gain > 0 else "cal_panel_no_gain"
        out.append(t(key, quorum=rep.quorum, gain=f"{rep.panel_gain:+.0%}", judge=rep.best_judge))
    return out


def _change(f: EditShift) -> str:
    """``+4.20 [+2.90, +5.50]``: the mean change in points and its 95% interval ('-' when none)."""
    if f.mean_change is None:
        return "-"
    ci = f" [{f.low:+.2f}, {f.high:+.2f}]" if f.low is not None and f.high is not None else ""
    return f"{f.mean_change:+.2f}{ci}"


def invariance_block(rep: CalibrationReport, t: Messages) -> Block | None:
    """The invariance section (``calibrate --suite invariance``; :mod:`consensus_eval.analysis.invariance`) in the
    language of ``t``: per judge, its sensitivity (recall on the planted errors, when the run had them, and clean
    records flagged) beside its stability (noise, share of edited copies moved, mean change, flagged edits),
    then each edit per judge, and which copies moved. None when ``rep`` has no invariance figures."""
    inv = rep.invariance
    if inv is None:
        return None
    block = Block("invariance", t("h_invariance"))
    block.paragraphs.append(t("inv_intro", records=inv.records, copies=inv.copies, z=f"{inv.z:.2f}"))
    rows = []
    for name, ji in inv.judges.items():
        jc = rep.judges.get(name) if rep.planted else None
        noise = "-" if ji.noise is None else f"{ji.noise:.2f} ({ji.runs})"
        rows.append([name, share_cell(jc.overall.found) if jc is not None else "-",
                     share_cell(jc.clean_flagged) or "-" if jc is not None else "-", noise,
                     share_cell(ji.moved) or "-", "-" if ji.mean_abs_change is None else f"{ji.mean_abs_change:.2f}",
                     ", ".join(t("inv_edit_" + e) for e in ji.flagged) or t("inv_none")])
    block.tables.append(TableBlock(
        "invariance-judges",
        [t("col_judge"), t("inv_col_recall"), t("inv_col_clean_flagged"), t("inv_col_noise"), t("inv_col_moved"),
         t("inv_col_mean_abs"), t("inv_col_flagged")], rows, [False] + [True] * 6))
    judges = list(inv.judges)
    tb = TableBlock("invariance-edits", [t("inv_col_edit"), *judges], [], [False] + [True] * len(judges))
    for e, info in inv.edits.items():
        if not info.copies:
            continue
        ratio = f", ×{info.length_ratio:.2f}" if info.length_ratio is not None else ""
        cells = [inv.judges[j].edits.get(e) for j in judges]
        tb.rows.append([f"{t('inv_edit_' + e)} ({info.copies}{ratio})",
                        *("" if f is None or not f.n else
                          t("inv_cell", moved=share_cell(f.moved) or "-", change=_change(f)) + (" ⚑" if f.flagged
                                                                                                   else "")
                          for f in cells)])
        tb.shades.append([None, *(None if f is None or f.moved.value is None else 1 - f.moved.value for f in cells)])
    block.tables.append(tb)
    block.notes.append(t("inv_table_note"))
    for name, ji in inv.judges.items():
        if ji.noise is None:
            block.warnings.append(t("inv_noise_unknown", judge=name))
        if ji.flagged:
            block.warnings.append(t("inv_flagged", judge=name, edits="; ".join(
                t("inv_flagged_edit", edit=t("inv_edit_" + e), change=_change(ji.edits[e]),
                  moved=share_cell(ji.edits[e].moved) or "-") for e in ji.flagged)))
        elif ji.noise is not None:
            block.notes.append(t("inv_stable", judge=name, noise=f"{ji.noise:.2f}"))
        for e, f in ji.edits.items():
            if f.examples and (ji.deterministic or f.flagged):
                block.notes.append(t("inv_moved_copies", judge=name, edit=t("inv_edit_" + e), copies=", ".join(
                    f"{x.case} ({x.change:+.1f})" for x in f.examples)))
        if ji.unjudged:
            block.notes.append(t("inv_unjudged", judge=name, n=ji.unjudged))
    for e, info in inv.edits.items():
        reasons = sorted(set(info.not_applied.values()))
        if reasons:
            block.notes.append(t("inv_not_applied", edit=t("inv_edit_" + e), n=len(info.not_applied),
                                 why="; ".join(t("inv_why_" + r) for r in reasons)))
    return block
