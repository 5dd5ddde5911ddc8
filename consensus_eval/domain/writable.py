"""Writing output files without destroying what was computed, nor what was given.

- :func:`check_output_path`: a path the user names for an output (``audit --export``, ``--per-tree``) is
  refused, before any work, when it exists and is not a regular file (a device such as ``/dev/null``, a named
  pipe, a socket, a folder: ``-`` is how to ask for standard output), when it is one of the command's inputs
  (the same file by any spelling or link), or when it is a file of a run the output does not own: its store
  (or any SQLite database), the store's journal or lock, one of the run's own outputs, or a file the run was
  scored from (its recorded inputs, given by the caller).
- :func:`atomic_writer`: every output is written to a temporary file of a name unique to the process
  (``NAME.<pid>-<random>.tmp``, so two processes never share one) and renamed over ``NAME`` at the end, so a
  reader never sees half a file and a failure leaves the previous file as it was. The rename replaces only a
  regular file (or nothing): never a device, a pipe or a folder. A file that cannot be written is an
  :class:`InputError` naming it.
- :func:`check_outputs`: the outputs a run will write are checked writable before any call is made
  (``score`` exits 2 only when nothing was called), and none of them is one of its inputs.
- :func:`dumps_json`: JSON with ``null`` where a number is NaN or infinite (``json.dumps`` writes ``NaN``).

In the domain layer, light on purpose (no analysis imported): the ``metrics`` commands use it.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import secrets
import stat
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from consensus_eval._errors import InputError

__all__ = ["LOCK_NAME", "REVIEW_LOCK_NAME", "RUN_OUTPUTS", "STDIO", "STORE_NAME", "atomic_writer", "check_output_path",
           "check_outputs", "dumps_json", "file_kind", "finite", "same_file", "write_error"]

STORE_NAME = "results.sqlite"  # = execution.store.STORE_NAME (not imported: the metrics commands start light)
#: the lock a command that writes a run holds while it runs (execution.lock), beside the store
LOCK_NAME = STORE_NAME + ".lock"
#: the lock the review server holds while it serves (one server per run), beside the store (execution.lock)
REVIEW_LOCK_NAME = STORE_NAME + ".review-lock"
#: what SQLite keeps beside a store while it is open (the store's own journal), and the run's lock
STORE_COMPANIONS = (*(STORE_NAME + s for s in ("-wal", "-shm", "-journal")), LOCK_NAME, REVIEW_LOCK_NAME)
#: the files a run folder's outputs are rebuilt into from its store (``score``, ``report``, ``calibrate``)
RUN_OUTPUTS = ("judgments.jsonl", "consensus.csv", "consensus.jsonl", "reliability.json", "report.md",
               "report.html", "leaderboard.json", "calibration.json", "suite.jsonl")
#: the path that names standard output (an output option) or standard input (an input file)
STDIO = "-"
_SQLITE_MAGIC = b"SQLite format 3\x00"


def finite(data: Any) -> Any:
    """``data`` with every float that is not finite (NaN, Infinity) replaced by None, what JSON can hold: JSON has
    no NaN, and ``json.dumps`` would write one anyway (a reader then fails on the file)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def dumps_json(data: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite` ``data``: strict JSON (``null`` where a number is not finite; the reason
    is the caller's to give beside it, as ``Alpha.reason`` does). Written at once when every float is finite (the
    usual case; ``allow_nan=False`` refuses the others), else through :func:`finite`: the same bytes either way."""
    try:
        return json.dumps(data, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(finite(data), allow_nan=False, **kwargs)


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` (followed through links) is an SQLite database file."""
    try:
        with open(path, "rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def file_kind(mode: int) -> str | None:
    """What a file of ``mode`` (``os.stat``) is, in words, when it is not a regular file; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _stat(p: Path) -> os.stat_result | None:
    """``os.stat(p)`` (links followed), None when nothing is there; a path that cannot even be looked at (a name
    too long, a loop of links, a folder not searchable) is an :class:`InputError` naming it."""
    try:
        return p.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise InputError(f"{p}: cannot use this path: {e.strerror or e}") from None


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` are one file (by any spelling, symbolic or hard link); False if either is missing."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_output_path(path: str | Path, what: str, *, inputs: Iterable[tuple[str, str | Path]] = (),
                      suggest: str = "") -> Path:
    """Refuse (:class:`InputError`, naming ``path``; nothing is written) an output path that would destroy
    something: a path that exists and is not a regular file (a device such as ``/dev/null``, a named pipe, a
    socket, a folder); one of ``inputs`` (``(what it is, path)`` pairs: the command's own input files, and
    the files the run was scored from), the same file by any spelling or link; an SQLite database (a run's
    store, by any spelling, symbolic or hard link); a file of a store's journal or lock; or one of the outputs
    of the run in its folder (rebuilt from the store: the ``what`` would replace it). ``what`` names the
    output in the message ("the adjudication sheet"), ``suggest`` a file name for it (offered when ``path`` is a
    folder). ``-`` (standard output) is accepted as it is. Returns ``path``."""
    if str(path) == STDIO:
        return Path(STDIO)
    p = Path(path)
    st = _stat(p)
    if st is not None and (kind := file_kind(st.st_mode)) is not None:
        hint = (f"give a file name, e.g. {p / (suggest or 'out')}" if kind == "a folder"
                else f"write {what} to a file, or to standard output with -")
        raise InputError(f"{p}: is {kind}, not a regular file; {what} is never written over it: {hint} "
                         "(nothing was written)")
    if st is not None:
        for role, source in inputs:
            if same_file(p, source):
                raise InputError(f"{p}: is {role} ({source}); writing {what} there would replace it: give another "
                                 "file name (nothing was written)")
    if is_sqlite(p):
        kind = "the store of the run in " + str(p.resolve().parent) if p.resolve().name == STORE_NAME else \
            "an SQLite database (a run's store?)"
        raise InputError(f"{p}: is {kind}; writing {what} there would destroy it: give another file name "
                         "(nothing was written)")
    real = p.resolve()
    store = real.parent / STORE_NAME
    if store.is_file():
        if real.name in STORE_COMPANIONS or real.name == STORE_NAME:
            raise InputError(f"{p}: belongs to the store of the run in {real.parent} (SQLite's journal of "
                             f"{STORE_NAME}, or its lock); writing {what} there would damage it: give another "
                             "file name")
        if real.name in RUN_OUTPUTS:
            raise InputError(f"{p}: is one of the outputs of the run in {real.parent} (rebuilt from its store); "
                             f"writing {what} there would replace it: give another file name")
    return p


def check_outputs(folder: str | Path, names: Iterable[str] = RUN_OUTPUTS, *,
                  inputs: Iterable[tuple[str, str | Path]] = ()) -> None:
    """Before a run calls anything: its folder can be created and written, none of the outputs ``names``
    (files in ``folder``) exists as anything but a regular file (a folder, a device, a pipe), and none is one
    of ``inputs`` (``(what it is, path)`` pairs: the cases, the config...). Raises :class:`InputError` naming
    the first that is not."""
    out = Path(folder)
    st = _stat(out)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise InputError(f"{out}: the output folder is {file_kind(st.st_mode) or 'a file'}; --out names the folder "
                         "of a run (its store and outputs)")
    given = list(inputs)
    for name in (*names, STORE_NAME):
        target = out / name
        tst = _stat(target)
        if tst is None:
            continue
        kind = file_kind(tst.st_mode)
        if kind == "a folder":
            raise InputError(f"{target}: is a folder; the run writes its {name} there: move the folder away "
                             "(nothing was called)")
        if kind is not None:
            raise InputError(f"{target}: is {kind}, not a regular file; the run writes its {name} there and never "
                             "over such a file: move it away (nothing was called)")
        for role, source in given:
            if same_file(target, source):
                raise InputError(f"{target}: is {role} ({source}); the run writes its {name} there and would "
                                 "replace it: give --out another folder, or move the file (nothing was called)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(f"cannot write into {out}: part of the path is a file, not a folder") from None
    except OSError as e:
        raise write_error(out / STORE_NAME, e) from None
    probe = out / f".write-check-{os.getpid()}-{secrets.token_hex(4)}.tmp"
    try:
        probe.write_bytes(b"")
    except OSError as e:
        raise write_error(probe, e, folder_only=True) from None
    finally:
        with suppress(OSError):
            probe.unlink()


def _temporary(path: Path) -> tuple[Path, int]:
    """A new file beside ``path`` for :func:`atomic_writer`, of a name no other process or writer uses
    (``NAME.<pid>-<random>.tmp``, created exclusively; its mode that of a new file, the umask applied)."""
    while True:
        tmp = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue


def _replaceable(path: Path) -> None:
    """Refuse to replace ``path`` when it is there and not a regular file (a device, a pipe, a socket, a folder)."""
    st = _stat(path)
    if st is None:
        return
    kind = file_kind(st.st_mode)
    if kind == "a folder":
        raise InputError(f"{path}: is a folder; cannot write a file there (give a file name)")
    if kind is not None:
        raise InputError(f"{path}: is {kind}, not a regular file; it is never written over (give a file name, "
                         "or - for standard output)")


@contextmanager
def atomic_writer(path: Path, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """Write ``path`` through a temporary file of a name unique to this process and writer, renamed over it at
    the end: a reader never sees half a file, a failure leaves the previous file as it was, and two processes
    writing the same output never share a temporary file. ``-`` writes standard output (in ``encoding``).

    A file that cannot be written is an :class:`InputError` naming it: a read-only folder, a path that is a
    folder, a device, a named pipe or a socket (only a regular file is ever replaced), a folder that does not
    exist, and an SQLite database (a store is never overwritten).
    """
    if str(path) == STDIO:
        out = io.TextIOWrapper(sys.stdout.buffer, encoding=encoding, newline="", write_through=True)
        try:
            yield out
            out.flush()
        finally:
            out.detach()   # standard output stays open for what the command prints after
        return
    _replaceable(path)
    if is_sqlite(path):
        raise InputError(f"{path}: is an SQLite database (a run's store?); it is not overwritten (give another "
                         "file name)")
    try:
        tmp, fd = _temporary(path)
    except OSError as e:
        raise write_error(path, e) from None
    try:
        with open(fd, "w", encoding=encoding, newline="") as f:
            yield f
        _replaceable(path)  # it may have become one while this was written
        try:
            tmp.replace(path)
        except OSError as e:
            raise write_error(path, e) from None
    finally:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)


def write_error(path: Path, e: OSError, *, folder_only: bool = False) -> InputError:
    """The message of an :class:`OSError` writing ``path`` (``folder_only``: ``path`` is a probe of its folder)."""
    shown = path.parent if folder_only else path
    if isinstance(e, PermissionError) or e.errno == errno.EROFS:
        return InputError(f"cannot write {shown}: the folder {path.parent} is read-only (or not writable by you)")
    if isinstance(e, FileNotFoundError):
        if path.parent.is_dir():
            return InputError(f"cannot write {shown}: the folder {path.parent} takes no new file "
                              f"({e.strerror or e})")
        return InputError(f"cannot write {shown}: the folder {path.parent} does not exist")
    if isinstance(e, NotADirectoryError):
        return InputError(f"cannot write {shown}: part of the path is a file, not a folder")
    if isinstance(e, IsADirectoryError):
        return InputError(f"cannot write {shown}: it is a folder")
    return InputError(f"cannot write {shown}: {e.strerror or e}")
