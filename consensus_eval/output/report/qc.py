"""The quality-control loop's sections (docs/qc-loop.md): what the judges get wrong against the clinicians (the error
analysis) and a change's agreement with the clinicians on the held-out part (``compare --against-clinicians``),
built as :class:`~consensus_eval.output.report.blocks.Block` s in the report's language."""

from __future__ import annotations

from consensus_eval.analysis.error_analysis import ErrorAnalysis
from consensus_eval.analysis.heldout import LOOKS_WARN, ClinicianComparison, FigureChange
from consensus_eval.analysis.paired_boot import MIN_CASES, N_BOOT
from consensus_eval.domain.rubric import Rubric
from consensus_eval.output.report import fmt
from consensus_eval.output.report.blocks import Block, TableBlock
from consensus_eval.output.report.i18n import Messages
from consensus_eval.output.report.trust import categories_table


def _change(f: FigureChange, digits: int, t: Messages) -> str:
    """``+0.12 [0.03, 0.20]``; the change alone with why there is no interval; ``-`` without a change."""
    if f.diff is None:
        return "-"
    text = f"{f.diff:+.{digits}f}"
    if f.low is not None and f.high is not None:
        return f"{text} [{f.low:+.{digits}f}, {f.high:+.{digits}f}]"
    return f"{text} ({t('cc_no_ci_' + (f.why or 'undefined'))})"


def _pair(f: FigureChange, digits: int) -> str:
    if f.a is None or f.b is None:
        return "-"
    return f"{f.a:.{digits}f} → {f.b:.{digits}f}"


def clinician_comparison_block(c: ClinicianComparison, rubric: Rubric, t: Messages) -> Block:
    """``B - A`` in agreement with the clinicians on the held-out part: per rater and key, ICC in A and B and the
    changes of ICC, MAE and bias with their intervals; how many looks the part has had."""
    keys = [*(d.id for d in rubric.dimensions), "total"]
    rows = []
    for rater, rc in c.raters.items():
        for k in [keys[-1], *keys[:-1]]:
            figs = rc.scores[k]
            rows.append([f"{rater} / {fmt.key_label(rubric, k, t)}", str(figs["icc"].n), _pair(figs["icc"], 2),
                         _change(figs["icc"], 2, t), _change(figs["mae"], 1, t), _change(figs["bias"], 1, t)])
    paras = [t("cc_intro", a=c.a, b=c.b, heldout=c.heldout, labelled=c.labelled)]
    warnings = []
    if c.look is None:
        paras.append(t("cc_same_version", a=c.a, b=c.b, looks=c.looks))
    else:
        paras.append(t("cc_looks", looks=c.looks))
    if c.warn:
        warnings.append(t("cc_looks_warn", looks=c.looks, limit=LOOKS_WARN))
    if c.only_a or c.only_b:
        paras.append(t("cc_only", names=", ".join([*c.only_a, *c.only_b])))
    warnings += c.notes
    table = TableBlock("clinician-compare", [t("cc_col_rater"), "n", "ICC", t("cc_col_icc"), t("cc_col_mae"),
                                             t("cc_col_bias")], rows, [False, True, True, True, True, True])
    verdict_rows = [[rater, str(rc.verdicts["kappa"].n), _pair(rc.verdicts["kappa"], 2),
                     _change(rc.verdicts["kappa"], 2, t), _pair(rc.verdicts["f1"], 2), _change(rc.verdicts["f1"], 2, t)]
                    for rater, rc in c.raters.items() if rc.verdicts]
    verdicts = TableBlock("clinician-compare-verdicts", [t("cc_col_rater_items"), "n", "kappa", t("cc_col_kappa"),
                                                         "macro-F1", t("cc_col_f1")],
                          verdict_rows, [False, True, True, True, True, True]) if verdict_rows else None
    categories = categories_table(c.categories, c.a, c.b, rubric, t)
    return Block("clinician-compare", t("h_clinician_compare", a=c.a, b=c.b), paras,
                 [table, *(x for x in (verdicts, categories) if x is not None)],
                 [t("cc_note", boot=f"{N_BOOT:,}", min=min(MIN_CASES.values()))], warnings)


#: items per rater in the error analysis's table, and cases per item in its table of cases (reliability.json
#: keeps :data:`~consensus_eval.analysis.error_analysis.TOP_CASES` per item and every item)
SHOWN_ITEMS = 8
SHOWN_CASES = 2


def _avg(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}"


def errors_block(e: ErrorAnalysis, rubric: Rubric, t: Messages) -> Block:
    """What the judges get wrong against the clinicians (:mod:`~consensus_eval.analysis.error_analysis`): per
    rater its items with misses and false alarms, ranked; the cases behind the first ones, with the quotes and
    the clinicians' comments; bias and MAE by the clinicians' score band."""
    block = Block("errors", t("h_errors"), [t("errors_intro_" + e.part, n=e.cases)])
    item_rows, case_rows = [], []
    for rater, re_ in e.raters.items():
        for it in re_.items[:SHOWN_ITEMS]:
            item_rows.append([rater, fmt.key_label(rubric, it.dimension, t), f"{it.name} ({it.item})"
                              if it.name != it.item else it.item, str(it.misses), str(it.false_alarms),
                              f"{it.points:g}"])
        for it in re_.items[:SHOWN_ITEMS]:
            for c in it.cases[:SHOWN_CASES]:
                case_rows.append([rater, it.item, t("errors_kind_" + c.kind), c.case_id, f"{c.points:g}",
                                  c.evidence or "-", c.reason or "-", c.comment or "-"])
    if not item_rows:
        block.paragraphs.append(t("errors_none"))
    else:
        block.tables.append(TableBlock("errors-items", [t("errors_col_rater"), t("errors_col_dimension"),
                                                        t("errors_col_item"), t("errors_col_misses"),
                                                        t("errors_col_false_alarms"), t("errors_col_points")],
                                       item_rows, [False, False, False, True, True, True]))
        block.tables.append(TableBlock("errors-cases", [t("errors_col_rater"), t("errors_col_item"),
                                                        t("errors_col_kind"), t("errors_col_case"),
                                                        t("errors_col_points"), t("errors_col_quote"),
                                                        t("errors_col_reason"), t("errors_col_comment")],
                                       case_rows, [False, False, False, False, True, False, False, False]))
    band_rows = []
    for rater, re_ in e.raters.items():
        for key, bands in re_.bands.items():
            if any(b.n for b in bands):
                band_rows.append([rater, fmt.key_label(rubric, key, t),
                                  *(f"{_avg(b.bias)} / {'-' if b.mae is None else f'{b.mae:.1f}'} ({b.n})"
                                    for b in bands)])
    if band_rows:
        block.tables.append(TableBlock("errors-bands", [t("errors_col_rater"), t("errors_col_dimension"),
                                                        t("errors_band_low"), t("errors_band_mid"),
                                                        t("errors_band_high")],
                                       band_rows, [False, False, True, True, True]))
    block.notes.append(t("errors_note", items=SHOWN_ITEMS, cases=SHOWN_CASES))
    return block
