"""One writer per run: the lock a command holds on a run folder for as long as it writes there.

Every command that writes a run's store (``score``, ``calibrate``, ``human import``, ``audit --spot-check``,
``reviewers add/assign/remove``, and ``review`` for as long as it serves) holds an exclusive lock on the run
folder: ``flock`` on ``results.sqlite.lock`` beside the store, which names its holder (process id, command,
since when, host). A second writer is refused at once with a :class:`RunBusy` naming the holder (``--wait-lock``:
it waits for the lock instead). The system drops the lock when its process ends, a ``kill -9`` included; the file
is removed when the lock is released, so a run at rest has none (a killed holder's is taken over).

Within one process the lock is re-entrant: the command's outer hold and the store opened under it (a
:class:`~consensus_eval.execution.store.Store` opened read-write takes it too, so a Python API user writing a
run holds it while the store is open) share one hold. Threads of the process share it too: the review app's
requests write under the hold the server took.

Commands that only read (``report``, ``reliability``, ``audit`` without ``--spot-check``, ``compare``) take no
lock: SQLite gives them a consistent snapshot, and the outputs they rewrite are written atomically (a name
unique to the process, then a rename), so they run beside a writer, the review app included.

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

from consensus_eval._errors import InputError, RunBusy
from consensus_eval.domain.writable import LOCK_NAME, file_kind, write_error

__all__ = ["LOCK_NAME", "Hold", "RunBusy", "acquire", "holder", "release", "run_lock"]

#: what a hold taken by the Python API (no command given) says it is
API = "the Python API"


@dataclass
class Hold:
    """This process's hold on one run folder: re-entrant (``count``), with what was checked under it."""

    folder: Path
    fd: int
    path: Path
    count: int = 1
    #: the store was checked whole (``PRAGMA quick_check``) under this hold: once is enough
    store_checked: bool = False


_held: dict[str, Hold] = {}
_guard = threading.Lock()


def _key(folder: Path) -> str:
    return os.path.realpath(folder)


def holder(folder: str | Path) -> dict[str, object] | None:
    """What the lock file of ``folder`` says of its holder (pid, command, since, host), None if nothing."""
    try:
        text = (Path(folder) / LOCK_NAME).read_text(encoding="utf-8")
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


def _busy(folder: Path, info: dict[str, object] | None) -> RunBusy:
    return RunBusy(f"{folder}: the run is being written by {_who(info)}; one command writes a run at a time: "
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


#: what :func:`_take` returns when another thread of this process took the lock meanwhile (its hold is shared)
_OURS = -2


def _take(folder: Path, command: str, wait: bool, on_wait: Callable[[str], None] | None) -> int:
    """The file descriptor of the lock file of ``folder``, locked and naming this process (:data:`_OURS` when
    another thread of this process holds it)."""
    import fcntl

    path = folder / LOCK_NAME
    waited = False
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise write_error(path, e) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                with _guard:
                    if _key(folder) in _held:
                        os.close(fd)
                        return _OURS
                info = holder(folder)
                if not wait:
                    raise _busy(folder, info) from None
                if on_wait is not None and not waited:
                    on_wait(f"waiting for {_who(info)} to finish writing {folder} (--wait-lock)")
                waited = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            # the holder removes the file as it lets go: a lock on a file no longer there is no lock
            try:
                same = os.path.samestat(os.stat(path), os.fstat(fd))
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            data = json.dumps({"pid": os.getpid(), "command": command, "since": time.time(),
                               "host": socket.gethostname()}).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            return fd
        except BaseException:
            with suppress(OSError):
                os.close(fd)
            raise


def acquire(folder: str | Path, command: str = API, *, wait: bool = False,
            on_wait: Callable[[str], None] | None = None, create: bool = True) -> Hold | None:
    """Take (or, held already by this process, enter again) the lock of the run folder ``folder``, made if
    missing (``create``; without it, None for a folder that is not there); release it with :func:`release`.
    Raises :class:`RunBusy` naming the holder when another process has it, unless ``wait`` (``on_wait`` is
    told once, with the holder's name, before waiting)."""
    path = Path(folder)
    key = _key(path)
    while True:
        with _guard:
            hold = _held.get(key)
            if hold is not None:
                hold.count += 1
                return hold
        if not _prepare(path, create):
            return None
        try:
            import fcntl  # noqa: F401 - POSIX only
        except ImportError:  # pragma: no cover - Windows: no lock (module docstring)
            fd = -1
        else:
            fd = _take(path, command, wait, on_wait)
        with _guard:
            hold = _held.get(key)
            if hold is not None:  # another thread of this process took it meanwhile: share its hold
                hold.count += 1
                if fd >= 0:
                    os.close(fd)
                return hold
            if fd != _OURS:
                hold = _held[key] = Hold(path, fd, path / LOCK_NAME)
                return hold
        # another thread of this process had it, and let it go before this one could share it: try again


def release(hold: Hold) -> None:
    """Leave ``hold``; the last to leave removes the lock file and lets the lock go."""
    with _guard:
        hold.count -= 1
        if hold.count > 0:
            return
        _held.pop(_key(hold.folder), None)
    if hold.fd < 0:
        return
    with suppress(OSError):
        hold.path.unlink()   # while still locked: a process waiting on this file sees it gone, and tries again
    with suppress(OSError):
        os.close(hold.fd)


@contextmanager
def run_lock(folder: str | Path, command: str = API, *, wait: bool = False,
             on_wait: Callable[[str], None] | None = None, create: bool = True) -> Iterator[Hold | None]:
    """Hold the lock of the run folder ``folder`` for the body (:func:`acquire`, then :func:`release`).

    Args:
        folder: The run folder.
        command: What the holder is, as a refused writer is told (``consensus-eval score``).
        wait: Wait for another holder to let go instead of raising :class:`RunBusy`.
        on_wait: Told once, with the holder's name, before waiting.
        create: Make the folder if it is not there (a new run); without, a folder that is not there is not
            locked (the body says what is missing).
    """
    hold = acquire(folder, command, wait=wait, on_wait=on_wait, create=create)
    try:
        yield hold
    finally:
        if hold is not None:
            release(hold)
