"""Python's cyclic garbage collector kept off the objects of a large run while it is read, analysed
and rendered.

Rebuilding a run creates millions of small objects (records, judgments, scores, groundings, report
rows) that stay alive until the rebuild ends. CPython's collector runs a pass every 700 net
allocations and, every so often, traverses everything alive: on a run of 2,000 cases x 4 judges those
passes were half the time of a rebuild, and one full pass over what a 20,000-case rebuild holds takes
about 25 s, freeing nothing: a whole rebuild at 2,000 cases leaves about 600 objects in reference
cycles (measured: bench/README.md, "Post-processing at scale"); everything else is freed by
reference counting the moment it is dropped, collector or not.

:func:`gc_paused` turns the collector off for the duration of a block and, when the outermost block
ends, moves every object alive into the collector's permanent generation (``gc.freeze()``) before
turning it back on if it was on, so that no later pass traverses them again. The price: the few
hundred objects of a rebuild left in cycles are not reclaimed until ``gc.unfreeze()`` (reference
counting still frees every frozen object that is not in a cycle, the run's results included).

Reentrant: nested blocks (``read_run`` inside ``rebuild``) act only when the outermost one ends.
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
        if _depth == 0:
            gc.freeze()   # what the block made is never traversed again (module docstring)
            if _was_enabled:
                gc.enable()


def gc_paused_call(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run inside :func:`gc_paused` (a decorator)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper
