"""Python's cyclic garbage collector kept off the objects of a large run while it is read, analysed
and rendered (why: docs/design/gc.md).

:func:`gc_paused` turns the collector off for the duration of a block and turns it back on (if it
was on) when the outermost block ends. Only when the process owner asked for it with
:func:`freeze_when_done` (the command line does: its process ends soon after the rebuild) does the
end of the outermost block first move every object alive into the collector's permanent generation
(``gc.freeze()``), so that no later pass traverses them again. What is left in reference cycles then
stays until ``gc.unfreeze()``, so the Python API never freezes. Reference counting frees every object
not in a cycle either way.

Reentrant: nested blocks (``read_run`` inside ``rebuild``) act only when the outermost one ends.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_depth = 0
_was_enabled = False
_freeze = False
_lock = threading.Lock()


def freeze_when_done(on: bool = True) -> None:
    """Freeze what is alive when the outermost :func:`gc_paused` block ends (module docstring); for a
    process that ends soon after (the command line), never for a library caller."""
    global _freeze
    _freeze = on


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside the block, restored after (module docstring)."""
    global _depth, _was_enabled
    with _lock:   # blocks may run in several threads (the review server's requests)
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if _freeze:
                    gc.freeze()   # what the blocks made is never traversed again (module docstring)
                if _was_enabled:
                    gc.enable()


def gc_paused_call(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run inside :func:`gc_paused` (a decorator)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper
