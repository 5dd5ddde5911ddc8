"""Python's cyclic garbage collector paused while a large run is read, analysed and rendered.

Rebuilding a run creates millions of small objects (records, judgments, scores, report rows) that
stay alive until the rebuild ends. CPython's collector runs a pass every 700 net allocations and,
every so often, traverses everything alive: on a run of 20,000 cases x 4 judges those passes cost
about half the time of a rebuild and free nothing (measured: bench/README.md, "Post-processing at
scale"). :func:`gc_paused` turns the collector off for the duration of a block (reference counting
still frees every object the moment it is dropped; only reference cycles wait), and turns it back on
afterwards if it was on (its next pass, one traversal of what the block created, frees the cycles
made meanwhile).

Reentrant: nested blocks (``read_run`` inside ``rebuild``) restore the collector only when the
outermost one ends. Thread-safety is not needed: the collector's state is process-wide, and a nested
block from another thread only extends the pause.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside the block, restored after (module docstring)."""
    global _depth, _was_enabled
    if _depth == 0:
        _was_enabled = gc.isenabled()
        gc.disable()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _was_enabled:
            gc.enable()   # the next allocation triggers the collection of what the block left


def gc_paused_call(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run inside :func:`gc_paused` (a decorator)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper
