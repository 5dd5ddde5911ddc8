"""Writing output files without destroying what was computed.

- :func:`atomic_writer`: every output is written to ``NAME.tmp`` and renamed over ``NAME`` at the end, so a
  reader never sees half a file and a failure leaves the previous file as it was; a file that cannot be
  written is an :class:`InputError` naming it.
- :func:`check_output_path`: a path the user names for an output (``audit --export``, ``--per-tree``) is
  refused, before anything is written, when it is a run's store (or any SQLite database, through a link
  too), a file of the store's journal, or one of a run's own outputs.
- :func:`check_outputs`: the outputs a run will write are checked writable before any call is made
  (``score`` exits 2 only when nothing was called).
- :func:`dumps_json`: JSON with ``null`` where a number is NaN or infinite (``json.dumps`` writes ``NaN``).

In the domain layer, light on purpose (no analysis imported): the ``metrics`` commands use it.
"""

from __future__ import annotations

import errno
import json
import math
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from consensus_eval._errors import InputError

__all__ = ["RUN_OUTPUTS", "STORE_NAME", "atomic_writer", "check_output_path", "check_outputs", "dumps_json", "finite",
           "write_error"]

STORE_NAME = "results.sqlite"  # = execution.store.STORE_NAME (not imported: the metrics commands start light)
#: what SQLite keeps beside a store while it is open (the store's own journal)
STORE_COMPANIONS = tuple(STORE_NAME + s for s in ("-wal", "-shm", "-journal"))
#: the files a run folder's outputs are rebuilt into from its store (``score``, ``report``, ``calibrate``)
RUN_OUTPUTS = ("judgments.jsonl", "consensus.csv", "consensus.jsonl", "reliability.json", "report.md",
               "report.html", "leaderboard.json", "calibration.json", "suite.jsonl")
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


def check_output_path(path: str | Path, what: str) -> Path:
    """Refuse (:class:`InputError`, naming ``path``) an output path that would destroy what a run computed: an
    SQLite database (a run's store, by any spelling, symbolic or hard link), a file of a store's journal, or one
    of the outputs of the run in its folder (rebuilt from the store: the ``what`` would replace it). ``what``
    names the output in the message ("the adjudication sheet"). Returns ``path``."""
    p = Path(path)
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
                             f"{STORE_NAME}); writing {what} there would damage it: give another file name")
        if real.name in RUN_OUTPUTS:
            raise InputError(f"{p}: is one of the outputs of the run in {real.parent} (rebuilt from its store); "
                             f"writing {what} there would replace it: give another file name")
    return p


def check_outputs(folder: str | Path, names: Iterable[str] = RUN_OUTPUTS) -> None:
    """Before a run calls anything: its folder can be created and written, and none of the outputs ``names``
    (files in ``folder``) is a folder. Raises :class:`InputError` naming the first that is not."""
    out = Path(folder)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: the output folder is a file; --out names the folder of a run (its store and outputs)")
    for name in names:
        target = out / name
        if target.is_dir():
            raise InputError(f"{target}: is a folder; the run writes its {name} there: move the folder away "
                             "(nothing was called)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(f"cannot write into {out}: part of the path is a file, not a folder") from None
    except OSError as e:
        raise write_error(out / STORE_NAME, e) from None
    probe = out / f".write-check-{os.getpid()}.tmp"
    try:
        probe.write_bytes(b"")
    except OSError as e:
        raise write_error(probe, e, folder_only=True) from None
    finally:
        with suppress(OSError):
            probe.unlink()


@contextmanager
def atomic_writer(path: Path, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """Write ``path`` through ``path.tmp`` renamed over it at the end: a reader never sees half a file,
    and a failure leaves the previous file as it was.

    A file that cannot be written is an :class:`InputError` naming it: a read-only folder, a path that
    is a folder, a folder that does not exist, and an SQLite database (a store is never overwritten).
    """
    if path.is_dir():
        raise InputError(f"{path}: is a folder; cannot write a file there (give a file name)")
    if is_sqlite(path):
        raise InputError(f"{path}: is an SQLite database (a run's store?); it is not overwritten (give another "
                         "file name)")
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        try:
            f = open(tmp, "w", encoding=encoding, newline="")  # noqa: SIM115 - closed below, errors named
        except OSError as e:
            raise write_error(path, e) from None
        with f:
            yield f
        try:
            tmp.replace(path)
        except OSError as e:
            raise write_error(path, e) from None
    finally:
        with suppress(OSError):  # a read-only folder: there is no tmp file either
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
