"""Calibration files: ``calibration.json`` (every figure) and the suite that was run (``suite.jsonl``).

The calibration section of report.md, report.html and the console is a trust block
(:mod:`consensus_eval.output.report.calibration`): a report of a folder with a calibration.json shows it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from consensus_eval._errors import InputError, format_validation_error
from consensus_eval.analysis.calibration import CalibrationReport
from consensus_eval.domain.calibration.suite import SuiteCase, dumps_suite
from consensus_eval.domain.textio import read_bytes
from consensus_eval.output.files import atomic_writer, write_json

CALIBRATION_JSON = "calibration.json"
SUITE_JSONL = "suite.jsonl"


def write_calibration(out: Path, report: CalibrationReport, suite: list[SuiteCase]) -> Path:
    """Write ``out/calibration.json`` (the report) and ``out/suite.jsonl`` (the suite that was run)."""
    write_json(out / CALIBRATION_JSON, report.model_dump(mode="json"))
    with atomic_writer(out / SUITE_JSONL) as f:
        f.write(dumps_suite(suite))
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
