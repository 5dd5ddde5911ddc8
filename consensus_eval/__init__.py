"""consensus-eval: score cases with a panel of judges and report how far to trust the result.

The public API (see docs/api.md)::

    from consensus_eval import evaluate, load_run
    results = evaluate("examples/cases.jsonl", "configs/default.yaml", out="out/example")

Importing the package is cheap and changes no global state: the names below are loaded on first
use (the metrics never load the judge layer).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from consensus_eval._errors import (
        ConsensusEvalError,
        InputError,
        JudgeError,
        ReviewError,
        RunBusy,
        StateError,
        UnknownName,
        UsageError,
        WorkerLost,
    )
    from consensus_eval.analysis.agreement import HumanLabel, load_human
    from consensus_eval.analysis.alpha import Alpha, krippendorff_alpha
    from consensus_eval.analysis.calibration import CalibrationReport
    from consensus_eval.analysis.results import Results
    from consensus_eval.api import (
        Prepared,
        PreparedCalibration,
        calibrate,
        calibrate_async,
        check_judges_async,
        dry_run,
        evaluate,
        evaluate_async,
        import_human,
        load_run,
        merge,
        prepare,
        prepare_calibration,
        rebuild,
        run,
        run_async,
        run_lock,
    )
    from consensus_eval.domain.aggregate import register_aggregator
    from consensus_eval.domain.cases import Case, load_cases
    from consensus_eval.domain.config import EvalConfig, JudgeConfig, LLMJudgeConfig, RulesJudgeConfig, load_config
    from consensus_eval.domain.judgment import CallOutcome, Deduction, Judgment, PenaltyHit
    from consensus_eval.domain.kinds import Dimension, register_kind
    from consensus_eval.domain.rubric import Rubric, load_rubric
    from consensus_eval.judges import Judge, register_judge
    from consensus_eval.judges.quiet import quiet_libraries

#: public name -> the module that defines it
_EXPORTS = {
    **dict.fromkeys(["Prepared", "check_judges_async", "dry_run", "evaluate", "evaluate_async", "import_human",
                     "load_run",
                     "prepare", "rebuild", "run", "run_async", "PreparedCalibration", "calibrate", "calibrate_async",
                     "prepare_calibration", "run_lock", "merge"], "consensus_eval.api"),
    "CalibrationReport": "consensus_eval.analysis.calibration",
    "Results": "consensus_eval.analysis.results",
    "Alpha": "consensus_eval.analysis.alpha",
    "krippendorff_alpha": "consensus_eval.analysis.alpha",
    "HumanLabel": "consensus_eval.analysis.agreement",
    "load_human": "consensus_eval.analysis.agreement",
    "register_aggregator": "consensus_eval.domain.aggregate",
    **dict.fromkeys(["Case", "load_cases"], "consensus_eval.domain.cases"),
    **dict.fromkeys(["EvalConfig", "JudgeConfig", "LLMJudgeConfig", "RulesJudgeConfig", "load_config"],
                    "consensus_eval.domain.config"),
    **dict.fromkeys(["CallOutcome", "Deduction", "Judgment", "PenaltyHit"], "consensus_eval.domain.judgment"),
    **dict.fromkeys(["Rubric", "load_rubric"], "consensus_eval.domain.rubric"),
    **dict.fromkeys(["Dimension", "register_kind"], "consensus_eval.domain.kinds"),
    **dict.fromkeys(["Judge", "register_judge"], "consensus_eval.judges"),
    "quiet_libraries": "consensus_eval.judges.quiet",
    **dict.fromkeys(["ConsensusEvalError", "InputError", "JudgeError", "ReviewError", "RunBusy", "StateError",
                     "UnknownName", "UsageError", "WorkerLost"], "consensus_eval._errors"),
}

# Spelled out (not built from _EXPORTS) so that linters and type checkers see the re-exports;
# tests/test_architecture.py checks that it names exactly the keys of _EXPORTS.
__all__ = [
    "Alpha",
    "CalibrationReport",
    "CallOutcome",
    "Case",
    "ConsensusEvalError",
    "Deduction",
    "Dimension",
    "EvalConfig",
    "HumanLabel",
    "InputError",
    "Judge",
    "JudgeConfig",
    "JudgeError",
    "Judgment",
    "LLMJudgeConfig",
    "PenaltyHit",
    "Prepared",
    "PreparedCalibration",
    "Results",
    "ReviewError",
    "Rubric",
    "RulesJudgeConfig",
    "RunBusy",
    "StateError",
    "UnknownName",
    "UsageError",
    "WorkerLost",
    "__version__",
    "calibrate",
    "calibrate_async",
    "check_judges_async",
    "dry_run",
    "evaluate",
    "evaluate_async",
    "import_human",
    "krippendorff_alpha",
    "load_cases",
    "load_config",
    "load_human",
    "load_rubric",
    "load_run",
    "merge",
    "prepare",
    "prepare_calibration",
    "quiet_libraries",
    "rebuild",
    "register_aggregator",
    "register_judge",
    "register_kind",
    "run",
    "run_async",
    "run_lock",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'consensus_eval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
