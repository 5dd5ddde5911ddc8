"""Extension points: installed packages add judge kinds, rubric rules and aggregators.

A package declares an entry point in one of the groups below; its value is a module (importing it
registers what it adds) or a callable (called once, with no argument, to register)::

    [project.entry-points."consensus_eval.judges"]
    echo = "my_package.echo_judge"

Entry points of a group are loaded once, the first time something asks for a name that is not
registered yet; a plugin that fails to load is reported by name (``PluginError``), never skipped
silently.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from consensus_eval._errors import InputError

_LOADED: set[str] = set()


class PluginError(InputError):
    """An installed plugin could not be loaded; the message names it and its entry point."""


def load_plugins(group: str) -> None:
    """Load every entry point of ``group`` (once per process)."""
    if group in _LOADED:
        return
    _LOADED.add(group)
    for ep in entry_points(group=group):
        try:
            target = ep.load()
            if callable(target) and not isinstance(target, type):
                target()
        except Exception as e:  # re-raised: a broken plugin is named, not hidden
            raise PluginError(f"plugin {ep.name!r} ({ep.value}, entry point group {group}) failed to load: "
                              f"{type(e).__name__}: {e}") from e
