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

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from consensus_eval._errors import InputError, UsageError

T = TypeVar("T")

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


class Registry(Generic[T]):
    """Named things of one kind (judge kinds, aggregators, rubric rules) that plugins can add to.

    ``get(name)`` loads the entry points of ``group`` on the first miss, then raises ``unknown``'s
    error (by default a ValueError naming the known names) if the name is still unknown.
    """

    def __init__(self, what: str, group: str, unknown: Callable[[str, list[str]], Exception] | None = None) -> None:
        self.what, self.group = what, group
        self._unknown = unknown
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> None:
        """Add ``item`` under ``name``, replacing any registered before."""
        self._items[name] = item

    def names(self) -> list[str]:
        """The names registered so far (plugins not loaded), sorted."""
        return sorted(self._items)

    def get(self, name: str) -> T:
        if name not in self._items:
            load_plugins(self.group)
        try:
            return self._items[name]
        except KeyError:
            if self._unknown is not None:
                raise self._unknown(name, self.names()) from None
            raise UsageError(f"unknown {self.what} {name!r}; known: {', '.join(self.names())} "
                             f"(an installed plugin can add more: entry-point group {self.group})") from None
