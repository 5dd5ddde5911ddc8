"""One error base: every error consensus-eval raises on purpose is a ConsensusEvalError, so a library user catches
them all with one clause; the plain errors they replace (ValueError, KeyError, RuntimeError) still catch them."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from pathlib import Path

import pytest

import consensus_eval
from consensus_eval import ConsensusEvalError, InputError, JudgeError, ReviewError, StateError, UnknownName, UsageError

PACKAGE = Path(consensus_eval.__file__).parent
#: builtin exceptions the package may not raise as they are (outside pydantic validators, which need ValueError)
PLAIN = {"Exception", "ValueError", "KeyError", "LookupError", "RuntimeError", "TypeError", "AssertionError"}
#: exceptions defined in the package that are not errors shown to a user: raised and caught inside one module
PRIVATE = {"consensus_eval.domain.textio._DuplicateKey"}


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages([str(PACKAGE)], "consensus_eval."):
        if ".review" in info.name:   # an extra (starlette): imported below when installed
            try:
                importlib.import_module(info.name)
            except ModuleNotFoundError:
                continue
        names.append(info.name)
    return names


def test_every_error_class_of_the_package_is_a_consensus_eval_error() -> None:
    found = []
    for name in _modules():
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name and issubclass(cls, BaseException):
                found.append(cls)
    assert len(found) >= 15
    strays = [f"{c.__module__}.{c.__qualname__}" for c in found
              if not issubclass(c, ConsensusEvalError) and f"{c.__module__}.{c.__qualname__}" not in PRIVATE]
    assert not strays


def _plain_raises(tree: ast.AST) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []

    def walk(node: ast.AST, in_validator: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_validator
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside = in_validator or any("validator" in ast.unparse(d) for d in child.decorator_list)
            call = child.exc if isinstance(child, ast.Raise) else None
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in PLAIN
                    and not inside):
                out.append((call.lineno, call.func.id))
            walk(child, inside)

    walk(tree, False)
    return out


def test_no_plain_builtin_error_is_raised_outside_pydantic_validators() -> None:
    """A ValueError raised as is would escape `except ConsensusEvalError`; UsageError (a ValueError too) does not."""
    found = {str(f.relative_to(PACKAGE)): hits for f in sorted(PACKAGE.rglob("*.py"))
             if (hits := _plain_raises(ast.parse(f.read_text(encoding="utf-8"))))}
    assert not found


def test_the_error_kinds_are_still_the_plain_errors_they_replace() -> None:
    assert issubclass(InputError, ValueError) and issubclass(UsageError, ValueError)
    assert issubclass(UnknownName, KeyError) and issubclass(StateError, RuntimeError)
    from consensus_eval.judges.retry import HTTPFailure
    from consensus_eval.judges.rules.pool import WorkerGone

    assert issubclass(HTTPFailure, JudgeError) and issubclass(WorkerGone, RuntimeError)
    review = pytest.importorskip("consensus_eval.review.model")
    assert issubclass(review.ActionError, ReviewError) and issubclass(review.ActionError, ValueError)


def test_a_library_user_catches_any_of_them_with_one_clause(tmp_path: Path) -> None:
    from consensus_eval import api, load_rubric
    from consensus_eval.analysis.intervals import wilson
    from consensus_eval.metrics.tcm import calculate_pulse_classification_accuracy

    calls: list[Callable[[], object]] = [
        lambda: api.load_run(tmp_path / "nothing here"),                         # no store: an input error
        lambda: load_rubric("no-such-rubric"),
        lambda: load_rubric("medical_record").dimension("style"),                # a name not there
        lambda: wilson(3, 2),                                                    # arguments it does not take
        lambda: calculate_pulse_classification_accuracy(["a"], ["a", "b"]),
        lambda: api.load_run(tmp_path, n_boot=-1),
    ]
    for call in calls:
        with pytest.raises(ConsensusEvalError):
            call()
