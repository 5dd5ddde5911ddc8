"""Errors shown to users: each names the file, the line (where there is one) and the field."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError


class InputError(ValueError):
    """Bad user input (cases, config, rubric, ratings). The message is meant to be shown as is."""


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
