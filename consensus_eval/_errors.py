"""The errors consensus-eval raises, under one base: ``except ConsensusEvalError`` catches any of them.

- :class:`InputError`: bad input (cases, config, rubric, ratings, sheets, a store); the message names the
  file, the line (where there is one) and the field, and is meant to be shown as is. :class:`RunBusy`: another
  command is writing the run.
- :class:`JudgeError`: a judge could not give a judgment (an HTTP failure, a worker that ended); the run
  records the call as failed, never scores it.
- :class:`ReviewError`: an action of the review app refused (``review.model.ActionError``).
- :class:`UsageError`, :class:`UnknownName`, :class:`StateError`: a library function called with what it does
  not take, a name looked up that is not there (a dimension, a judge), a call at the wrong time (writing a
  store opened read-only). They are also a ``ValueError``, a ``KeyError`` and a ``RuntimeError``, as the plain
  errors raised before were.

- :class:`WorkerLost`: a worker process of a rebuild ended without its result (killed, out of memory).

Inside pydantic validators the plain ``ValueError`` stays (pydantic turns it into a ``ValidationError``, which
the loaders turn into an :class:`InputError` naming the field).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError


class ConsensusEvalError(Exception):
    """Any error consensus-eval raises on purpose (the module docstring lists them)."""


class InputError(ConsensusEvalError, ValueError):
    """Bad user input (cases, config, rubric, ratings). The message is meant to be shown as is."""


class JudgeError(ConsensusEvalError):
    """A judge could not give a judgment; the call is recorded as failed, never scored."""


class ReviewError(ConsensusEvalError):
    """An action of the review app that is refused (an unknown case, a score out of range, a stale tab)."""


class UsageError(ConsensusEvalError, ValueError):
    """A function of the library given an argument it does not take (a level, a size, a shape)."""


class UnknownName(ConsensusEvalError, KeyError):
    """A name looked up that is not there (a dimension of the rubric, a judge of the config)."""


class StateError(ConsensusEvalError, RuntimeError):
    """A call at a time it cannot be made (a store opened read-only written to, a running event loop)."""


class WorkerLost(ConsensusEvalError, RuntimeError):
    """A worker process of a rebuild ended without its result (killed, out of memory; :mod:`consensus_eval._parallel`):
    nothing it was writing replaced a file, and the message says how to rebuild in one process."""


class RunBusy(InputError):
    """Another process is writing the run (one writer per run: :mod:`consensus_eval.execution.lock`); the message
    names it (pid, command, since when). Nothing was written."""


def field_path(loc: tuple[Any, ...], data: Any = None) -> str:
    """``('dimensions', 0, 'categories', 2, 'cap')`` -> ``dimensions[0 accuracy].categories[2 drugs].cap``.

    Where ``data`` is given, list indexes are followed by the item's ``id`` so users find it.
    """
    out: list[str] = []
    node = data
    for part in loc:
        if isinstance(part, int):
            label = str(part)
            if isinstance(node, list) and 0 <= part < len(node):
                node = node[part]
                if isinstance(node, dict) and "id" in node:
                    label = f"{part} {node['id']}"
            else:
                node = None
            out.append(f"[{label}]")
        else:
            node = node.get(part) if isinstance(node, dict) else None
            out.append(("." if out else "") + str(part))
    return "".join(out) or "(top level)"


def format_validation_error(e: ValidationError, data: Any = None) -> str:
    """One line per problem: ``  field.path: message``."""
    lines = []
    for err in e.errors():
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"  {field_path(tuple(err['loc']), data)}: {msg}")
    return "\n".join(lines)
