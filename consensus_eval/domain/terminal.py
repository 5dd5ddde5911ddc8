"""What the command line writes to the terminal: no raw control character, no encoding error, and a clear
message when standard output cannot be written.

- :class:`SafeConsole`: a rich console that shows every control character of the text it prints (except newline
  and tab) as an escape (``\\x1b``), whatever the text's source: a judge's quote, a reviewer's name from a sheet,
  a label from a user's file, a file name. Its own colours still work (styles are rendered after the escaping).
- :func:`harden_streams`: stdout and stderr replace what their encoding cannot write (``PYTHONIOENCODING=gbk``,
  a cp1252 console) instead of raising.
- :func:`guarded`: runs a command and flushes stdout at its end; a stdout that cannot be written (``>/dev/full``,
  a closed pipe) ends it with exit 1 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Iterable
from contextlib import suppress
from functools import wraps
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.segment import Segment

from consensus_eval.domain.textio import escape_controls

__all__ = ["EXIT_OUTPUT", "SafeConsole", "escape_controls", "guarded", "harden_streams"]

#: the exit code when standard output cannot be written
EXIT_OUTPUT = 1

F = TypeVar("F", bound=Callable[..., Any])


class SafeConsole(Console):
    """A :class:`rich.console.Console` that escapes control characters in the text it prints (see the module)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            seg if seg.control else Segment(escape_controls(seg.text), seg.style, seg.control) for seg in buffer)


def harden_streams() -> None:
    """stdout and stderr write ``?`` for what their encoding cannot encode, instead of raising."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            with suppress(ValueError, OSError):  # a stream that cannot be reconfigured is left as it is
                reconfigure(errors="replace")


def _stdout_failed(e: OSError) -> typer.Exit:
    """Report a stdout that cannot be written (nothing for a closed pipe: the reader left) and send what is left
    of it to /dev/null, so the interpreter's last flush does not fail again."""
    if e.errno != errno.EPIPE:
        try:
            sys.stderr.write(f"error: cannot write to standard output: {e.strerror or e}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
    try:
        fd = sys.stdout.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass
    return typer.Exit(EXIT_OUTPUT)


def _flush() -> None:
    try:
        sys.stdout.flush()
    except OSError as e:
        raise _stdout_failed(e) from None
    except ValueError:  # a stdout already closed
        pass


def _stdout_broken() -> bool:
    """Whether stdout cannot be written: a flush after a failed write may succeed (the buffer was dropped), so
    a line break is written and flushed (harmless on a stdout that works: this runs only after an OSError)."""
    try:
        sys.stdout.write("\n")
        sys.stdout.flush()
    except OSError:
        return True
    except ValueError:
        return False
    return False


def guarded(fn: F) -> F:
    """Run a command with :func:`harden_streams`, and stdout flushed at its end: an :class:`OSError` writing it
    becomes exit 1 with one line on stderr (:data:`EXIT_OUTPUT`)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        harden_streams()
        try:
            result = fn(*args, **kwargs)
        except typer.Exit:
            _flush()
            raise
        except OSError as e:
            if isinstance(e, BrokenPipeError) or _stdout_broken():
                raise _stdout_failed(e) from None
            raise
        _flush()
        return result

    return wrapper  # type: ignore[return-value]
