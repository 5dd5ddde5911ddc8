"""The quality-control loop's sections (issue 36): a change's agreement with the clinicians on the held-out part
(``compare --against-clinicians``), built as :class:`~consensus_eval.output.report.blocks.Block` s in the
report's language."""

from __future__ import annotations

from consensus_eval.analysis.heldout import LOOKS_WARN, ClinicianComparison, FigureChange
from consensus_eval.analysis.paired_boot import MIN_CASES, N_BOOT
from consensus_eval.domain.rubric import Rubric
from consensus_eval.output.report import fmt
from consensus_eval.output.report.blocks import Block, TableBlock
from consensus_eval.output.report.i18n import Messages


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
    return Block("clinician-compare", t("h_clinician_compare", a=c.a, b=c.b), paras, [table],
                 [t("cc_note", boot=f"{N_BOOT:,}", min=min(MIN_CASES.values()))], warnings)
