"""Calibration files: ``calibration.json`` (every figure), the suite that was run (``suite.jsonl``) and the
invariance probe's cases (``invariance.jsonl``).

The calibration section of report.md, report.html and the console is a trust block
(:mod:`consensus_eval.output.report.calibration_blocks`): a report of a folder with a calibration.json shows it.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from consensus_eval._errors import InputError, format_validation_error
from consensus_eval.analysis.calibration import CalibrationReport
from consensus_eval.domain.calibration.invariance_edits import InvarianceSuite
from consensus_eval.domain.calibration.suite import SuiteCase, dumps_suite
from consensus_eval.domain.textio import read_bytes
from consensus_eval.output.files import atomic_writer, write_json

CALIBRATION_JSON = "calibration.json"
SUITE_JSONL = "suite.jsonl"
INVARIANCE_JSONL = "invariance.jsonl"


def write_calibration(out: Path, report: CalibrationReport, suite: list[SuiteCase],
                      probe: InvarianceSuite | None = None) -> Path:
    """Write ``out/calibration.json`` (the report), ``out/suite.jsonl`` (the planted suite that was run) and,
    for the invariance probe, ``out/invariance.jsonl`` (its clean records and their edited copies)."""
    write_json(out / CALIBRATION_JSON, report.model_dump(mode="json"))
    with atomic_writer(out / SUITE_JSONL) as f:
        f.write(dumps_suite(suite))
    if probe is not None:
        with atomic_writer(out / INVARIANCE_JSONL) as f:
            f.write("".join(json.dumps(c.to_line(), ensure_ascii=False) + "\n" for c in probe.cases))
    return out / CALIBRATION_JSON


def load_calibration(path: Path) -> CalibrationReport:
    """A calibration.json read back (:class:`InputError` naming the file when it is not one)."""
    try:
        return CalibrationReport.model_validate_json(read_bytes(path, "calibration"))
    except OSError as e:
        raise InputError(f"{path}: cannot read the calibration file: {e.strerror or e}") from None
    except ValidationError as e:
        raise InputError(f"{path}: not a calibration.json written by `consensus-eval calibrate`:\n"
                         f"{format_validation_error(e)}") from None
