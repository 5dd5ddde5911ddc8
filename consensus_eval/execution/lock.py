"""One writer per run: the lock a command holds on a run folder for as long as it writes there.

A hold has a mode (:data:`Mode`), so that one command writes a run's data at a time and the team can still be
changed while reviewers label:

- ``exclusive``: the commands that write data (``score``, ``merge``, ``calibrate``, ``human import``, ``human
  copy``, ``audit --spot-check``, and a Python API user's read-write :class:`~consensus_eval.execution.store.Store`
  opened outside any hold). Nothing else writes the run meanwhile.
- ``review``: the review server, for as long as it serves (it writes labels). One server per run; beside it only
  team changes.
- ``team``: ``reviewers add`` (``--new-key`` included), ``reviewers assign`` and ``reviewers remove``: short
  transactions on the team's tables, beside the review server and each other (SQLite's write transactions,
  ``BEGIN IMMEDIATE``, order them), never beside an exclusive writer. The review app reads the team at every
  request, and a label write checks the writer's membership and key in its own transaction: a reviewer removed
  (or given a new key) while the server runs has their next save refused, nothing stored.

The modes are ``flock`` locks the system enforces, not a convention: ``results.sqlite.lock`` beside the store is
locked exclusively by an exclusive writer and shared by the review server and team changes, and
``results.sqlite.review-lock`` exclusively by the review server. An exclusive holder and the review server name
themselves in their file (process id, command, since when, host). A writer that cannot have its mode is refused at
once with a :class:`RunBusy` naming the holder (``--wait-lock``: it waits for the lock instead); a command refused
by a team change is told so (it takes a moment). The system drops a lock when its process ends, a ``kill -9``
included; a file is removed by the last holder to let go, so a run at rest has none (a killed holder's is taken
over).

Within one process the lock is re-entrant: the command's outer hold and the store opened under it (a
:class:`~consensus_eval.execution.store.Store` opened read-write takes it too, so a Python API user writing a
run holds it while the store is open) share one hold, whatever its mode; a stronger mode than the one held
(``exclusive`` under ``review``, ``review`` under ``team``) is refused. Threads of the process share it too: the
review app's requests write under the hold the server took.

Commands that only read (``report``, ``reliability``, ``audit`` without ``--spot-check``, ``compare``,
``reviewers list``) take no lock: SQLite gives them a consistent snapshot, and the outputs they rewrite are written
atomically (a name unique to the process, then a rename), so they run beside a writer, the review app included.

Where ``fcntl`` does not exist (Windows) the lock is a no-op: one writer per run is then the user's rule.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from consensus_eval._errors import InputError, RunBusy
from consensus_eval.domain.writable import LOCK_NAME, REVIEW_LOCK_NAME, file_kind, write_error

__all__ = ["EXCLUSIVE", "LOCK_NAME", "REVIEW", "REVIEW_LOCK_NAME", "TEAM", "Hold", "Mode", "RunBusy", "acquire",
           "holder", "release", "run_lock"]

#: what a hold taken by the Python API (no command given) says it is
API = "the Python API"
#: a hold's mode (module docstring): who may write the run beside it
Mode = Literal["exclusive", "review", "team"]
EXCLUSIVE: Mode = "exclusive"
REVIEW: Mode = "review"
TEAM: Mode = "team"
#: a mode held covers the modes of lower rank in the same process
_RANK: dict[str, int] = {TEAM: 0, REVIEW: 1, EXCLUSIVE: 2}
#: who a command refused by a team change is told holds the run (team changes do not name themselves)
TEAM_CHANGE = "a team change (`consensus-eval reviewers add / assign / remove`: a moment)"


@dataclass
class Hold:
    """This process's hold on one run folder: re-entrant (``count``), its ``mode``, with what was checked under
    it."""

    folder: Path
    fd: int
    path: Path
    count: int = 1
    #: the store was checked whole (``PRAGMA quick_check``) under this hold: once is enough
    store_checked: bool = False
    mode: Mode = EXCLUSIVE
    #: the review server's own lock (``review`` mode; -1: none)
    review_fd: int = -1


_held: dict[str, Hold] = {}
_guard = threading.Lock()
#: per run folder, taken while a thread of this process takes or lets go of its lock files: without it a thread
#: could find the file locked by another thread of this process that has not yet recorded its hold (or has just
#: dropped it), and refuse the run as busy "elsewhere"
_gates: dict[str, threading.Lock] = {}


def _gate(key: str) -> threading.Lock:
    with _guard:
        return _gates.setdefault(key, threading.Lock())


def _key(folder: Path) -> str:
    return os.path.realpath(folder)


def holder(folder: str | Path, name: str = LOCK_NAME) -> dict[str, object] | None:
    """What the lock file ``name`` of ``folder`` says of its holder (pid, command, since, host, mode), None if
    nothing (the review server names itself in :data:`REVIEW_LOCK_NAME`)."""
    try:
        text = (Path(folder) / name).read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _who(info: dict[str, object] | None) -> str:
    if not info:
        return "another process (it has not said which yet)"
    since = info.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else "?"
    host = info.get("host")
    where = f" on {host}" if host and host != socket.gethostname() else ""
    return f"`{info.get('command', '?')}` (pid {info.get('pid', '?')}{where}, since {when})"


def _busy(folder: Path, who: str) -> RunBusy:
    return RunBusy(f"{folder}: the run is being written by {who}; one command writes a run at a time: "
                   "wait for it to finish (or stop it), or add --wait-lock to wait for it (nothing was written)")


def _prepare(folder: Path, create: bool) -> bool:
    """Whether the run folder is there to be locked: made if missing with ``create`` (a folder that cannot be is an
    :class:`InputError` saying why); without, a folder that is not there is not locked (the command then says
    what is missing: no store there)."""
    try:
        st = folder.stat()
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as e:
        raise InputError(f"{folder}: cannot use this path: {e.strerror or e}") from None
    if st is not None:
        kind = file_kind(st.st_mode)
        if kind == "a folder":
            return True
        if not create:
            return False
        raise InputError(f"{folder}: the output folder is {kind or 'a file'}; --out names the folder of a run "
                         "(its store and outputs)")
    if not create:
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise InputError(f"cannot write into {folder}: part of the path is a file, not a folder") from None
    except OSError as e:
        raise write_error(folder / LOCK_NAME, e) from None
    return True


def _held_elsewhere(folder: Path, name: str) -> bool:
    """Whether another process holds the lock file ``name`` of ``folder`` (tried shared, let go at once)."""
    import fcntl

    try:
        fd = os.open(folder / name, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _blocker(folder: Path, name: str, fd: int, shared: bool) -> str:
    """Who holds the lock file ``name`` (open as ``fd``) that this process could not take (``shared``: as a
    shared hold, so an exclusive writer has it)."""
    import fcntl

    if name == LOCK_NAME and not shared:
        try:   # held only shared (the review server, team changes), or exclusively (a writer naming itself)?
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            if _held_elsewhere(folder, REVIEW_LOCK_NAME):
                return _who(holder(folder, REVIEW_LOCK_NAME))
            return TEAM_CHANGE
    return _who(holder(folder, name))


def _take(folder: Path, name: str, command: str, mode: Mode, shared: bool, wait: bool,
          on_wait: Callable[[str], None] | None) -> int:
    """The file descriptor of the lock file ``name`` of ``folder``, locked (``shared`` or exclusively) and, when
    exclusively, naming this process. Called holding the folder's gate (:func:`_gate`) with no hold of this process
    on it: a lock file found taken is another process's."""
    import fcntl

    path = folder / name
    op = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    waited = False
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise write_error(path, e) from None
        try:
            try:
                fcntl.flock(fd, op | fcntl.LOCK_NB)
            except BlockingIOError:
                who = _blocker(folder, name, fd, shared)
                if not wait:
                    raise _busy(folder, who) from None
                if on_wait is not None and not waited:
                    on_wait(f"waiting for {who} to finish writing {folder} (--wait-lock)")
                waited = True
                fcntl.flock(fd, op)
            # the last holder removes the file as it lets go: a lock on a file no longer there is no lock
            try:
                same = os.path.samestat(os.stat(path), os.fstat(fd))
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            if not shared:
                data = json.dumps({"pid": os.getpid(), "command": command, "since": time.time(),
                                   "host": socket.gethostname(), "mode": mode}).encode()
                os.ftruncate(fd, 0)
                os.pwrite(fd, data, 0)
            return fd
        except BaseException:
            with suppress(OSError):
                os.close(fd)
            raise


def _let_go(fd: int, path: Path, shared: bool) -> None:
    """Let the lock file ``path`` (open as ``fd``) go; the last holder removes it, while it holds it exclusively
    (a shared holder that cannot have it so leaves it to the others)."""
    if fd < 0:
        return
    if shared:
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return
    with suppress(OSError):
        path.unlink()   # while still locked: a process waiting on this file sees it gone, and tries again
    with suppress(OSError):
        os.close(fd)


def _take_mode(folder: Path, command: str, mode: Mode, wait: bool,
               on_wait: Callable[[str], None] | None) -> tuple[int, int]:
    """The run lock's and (``review``) the review lock's file descriptors, locked for ``mode``."""
    if mode != REVIEW:
        return _take(folder, LOCK_NAME, command, mode, mode == TEAM, wait, on_wait), -1
    review_fd = _take(folder, REVIEW_LOCK_NAME, command, mode, False, wait, on_wait)
    try:
        fd = _take(folder, LOCK_NAME, command, mode, True, wait, on_wait)
    except BaseException:
        _let_go(review_fd, folder / REVIEW_LOCK_NAME, False)
        raise
    return fd, review_fd


def _enter(hold: Hold, folder: Path, mode: Mode | None) -> Hold:
    """Share this process's ``hold`` (under ``_guard``); a stronger ``mode`` than it has is refused."""
    if mode is not None and _RANK[mode] > _RANK[hold.mode]:
        raise RunBusy(f"{folder}: this process holds the run for {hold.mode} only (it serves the review app or "
                      f"changes the team); it cannot write it as {mode} meanwhile: do that after it lets go")
    hold.count += 1
    return hold


def acquire(folder: str | Path, command: str = API, *, wait: bool = False,
            on_wait: Callable[[str], None] | None = None, create: bool = True, mode: Mode | None = None) -> Hold | None:
    """Take (or, held already by this process, enter again) the lock of the run folder ``folder``, made if
    missing (``create``; without it, None for a folder that is not there); release it with :func:`release`.
    Raises :class:`RunBusy` naming the holder when another process has it in a mode that excludes ``mode``
    (None: whatever this process holds, else :data:`EXCLUSIVE`), unless ``wait`` (``on_wait`` is told once, with
    the holder's name, before waiting)."""
    path = Path(folder)
    key = _key(path)
    with _guard:
        hold = _held.get(key)
        if hold is not None:
            return _enter(hold, path, mode)
    with _gate(key):
        return _acquire(path, key, command, wait, on_wait, create, mode)


def _acquire(path: Path, key: str, command: str, wait: bool, on_wait: Callable[[str], None] | None, create: bool,
             mode: Mode | None) -> Hold | None:
    """:func:`acquire`, holding the folder's gate: no other thread of this process takes or lets go of it
    meanwhile, so a hold not found here is not made by another thread while this one takes the files."""
    with _guard:
        hold = _held.get(key)
        if hold is not None:   # taken by another thread between acquire's first look and the gate
            return _enter(hold, path, mode)
    if not _prepare(path, create):
        return None
    want = mode or EXCLUSIVE
    try:
        import fcntl  # noqa: F401 - POSIX only
    except ImportError:  # pragma: no cover - Windows: no lock (module docstring)
        fd, review_fd = -1, -1
    else:
        fd, review_fd = _take_mode(path, command, want, wait, on_wait)
    with _guard:
        hold = _held[key] = Hold(path, fd, path / LOCK_NAME, mode=want, review_fd=review_fd)
    return hold


def release(hold: Hold) -> None:
    """Leave ``hold``; the last to leave lets the lock go (and removes its file when no other process has it)."""
    key = _key(hold.folder)
    with _gate(key):
        with _guard:
            hold.count -= 1
            if hold.count > 0:
                return
            _held.pop(key, None)
        _let_go(hold.fd, hold.path, hold.mode != EXCLUSIVE)
        _let_go(hold.review_fd, hold.folder / REVIEW_LOCK_NAME, False)


@contextmanager
def run_lock(folder: str | Path, command: str = API, *, wait: bool = False,
             on_wait: Callable[[str], None] | None = None, create: bool = True,
             mode: Mode = EXCLUSIVE) -> Iterator[Hold | None]:
    """Hold the lock of the run folder ``folder`` for the body (:func:`acquire`, then :func:`release`).

    Args:
        folder: The run folder.
        command: What the holder is, as a refused writer is told (``consensus-eval score``).
        wait: Wait for another holder to let go instead of raising :class:`RunBusy`.
        on_wait: Told once, with the holder's name, before waiting.
        create: Make the folder if it is not there (a new run); without, a folder that is not there is not
            locked (the body says what is missing).
        mode: ``exclusive`` (a command writing data), ``review`` (the review server) or ``team`` (a team
            change): who may write the run beside the body (module docstring).
    """
    hold = acquire(folder, command, wait=wait, on_wait=on_wait, create=create, mode=mode)
    try:
        yield hold
    finally:
        if hold is not None:
            release(hold)
