"""The error analysis as a sheet a prompt author reads offline (``reliability RUN --export-errors FILE.csv``).

One row per error case the analysis keeps (:mod:`consensus_eval.analysis.error_analysis`: each rater's items, ranked,
with their cases, largest first): the rater, the dimension and item, the item's counts of misses and false alarms
and the points they move, then the case, the kind of error, its points, the judge, the quote, the judge's reason and
the clinicians' comment. CSV in UTF-8 with a BOM (Excel shows the Chinese), text cells guarded against formulas.
"""

from __future__ import annotations

import csv
from pathlib import Path

from consensus_eval._errors import InputError
from consensus_eval.analysis.error_analysis import ErrorAnalysis
from consensus_eval.domain.textio import formula_guard
from consensus_eval.domain.writable import atomic_writer, check_output_path

#: the sheet's columns, in order
COLUMNS = ("rater", "dimension", "item", "item_name", "misses", "false_alarms", "points_moved", "case_id", "error",
           "points", "judge", "quote", "judge_reason", "clinician_comment", "part")


def write_error_sheet(errors: ErrorAnalysis, path: str | Path) -> Path:
    """Write the error analysis to ``path`` (module docstring); ``-`` writes standard output. Raises
    :class:`InputError` when ``path`` is a folder or cannot be written."""
    p = Path(path)
    if str(path) != "-":
        if p.is_dir():
            raise InputError(f"{p}: is a folder; give the error sheet a file name, e.g. {p / 'errors.csv'}")
        check_output_path(p, "the error sheet")
    with atomic_writer(p, encoding="utf-8-sig") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for rater, re_ in errors.raters.items():
            for it in re_.items:
                for c in it.cases:
                    w.writerow([formula_guard(str(x)) if isinstance(x, str) else x for x in (
                        rater, it.dimension, it.item, it.name, it.misses, it.false_alarms, f"{it.points:g}",
                        c.case_id, c.kind, f"{c.points:g}", c.judge or "", c.evidence, c.reason or "",
                        c.comment or "", errors.part)])
    return p
