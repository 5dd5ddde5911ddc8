"""Work done beside the main process, in a forked child, while the main process goes on: the rebuild's stages that
need nothing from each other (judgments.jsonl while the bootstraps run, the bootstraps while the audit is ranked,
half of report.html's page files) use both cores of a machine (why and figures: bench/README.md, "Two processes,
session 6").

:func:`beside` forks a child that runs a function and sends its result back (pickled, through a pipe); the block
goes on meanwhile, and gets the result (or the child's error, raised again) when it asks for it. The child shares
the parent's memory copy-on-write, so what it reads costs nothing to hand over; only its result is copied.

It runs the function in the process itself, at once, for a run of fewer than :data:`MIN_CASES` cases, and when
forking cannot serve:

- there is no ``os.fork`` (Windows), or the process may run on one core only;
- another thread is running (a child forked beside a thread may inherit a lock the thread holds; the review
  server's threads, a live run's resolver threads);
- the memory the process may still take (the system's available memory, or its container's limit) does not hold
  twice what it holds now: a child that reads the whole run copies about the whole run, so two processes can take
  twice the memory of one (measured: 20,000 x 4, 1.0 GB in one process, 2.1 GB in all);
- ``CONSENSUS_EVAL_PROCESSES=1`` is set (what a user with a memory limit sets: the child's copied pages count
  twice).

The child never touches the run's store (a SQLite connection is not shared across a fork), prints nothing and
ends with ``os._exit`` (no ``atexit`` hook of the parent's, no buffered output written twice, the run's lock left
to the parent). A child that ends without a result (killed, out of memory) is a :class:`WorkerLost` in the
parent. When the block is interrupted (Ctrl-C, a signal turned into an exit), the child is stopped with SIGTERM,
which it turns into ``KeyboardInterrupt`` so that its half-written files are removed as they are in the parent, and
it is waited for: no child outlives its block. On Linux, a child whose parent was killed (SIGKILL) gets SIGTERM from
the system and stops the same way. When the block fails with an error of its own, the child finishes its work first
(what it writes is kept, as it would be in one process) and the block's error is raised.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Generic, TypeVar

from consensus_eval._errors import WorkerLost

R = TypeVar("R")

#: the environment variable that, set to 1, keeps every stage in the one process (module docstring)
PROCESSES_ENV = "CONSENSUS_EVAL_PROCESSES"
#: the fewest cases of a run whose stages :func:`beside` forks for: a fork costs the parent a fault for each page it
#: writes after (about a second of CPU in all for a test process of 1.6 GB that forks three times a rebuild), and a
#: rebuild of fewer cases takes a few seconds in one process (bench/README.md, "Two processes, session 6")
MIN_CASES = 2000


def can_fork() -> bool:
    """Whether :func:`beside` forks a child now (module docstring), rather than running its function in place."""
    if not hasattr(os, "fork") or os.environ.get(PROCESSES_ENV, "").strip() == "1":
        return False
    return usable_cpus() >= 2 and threading.active_count() == 1 and _room_for_a_copy()


def usable_cpus() -> int:
    """The cores this process may run on (its CPU affinity where the system says it, else the CPU count): what
    :func:`can_fork` and the rules judge's worker pool count on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _room_for_a_copy() -> bool:
    """Whether the memory this process may still take holds twice what it holds now: a child that reads all of it
    copies about all of it (copy-on-write: each page whose objects it reads is copied when their reference counts
    change), and the rest is a margin. The smaller of the system's available memory and what its control group
    (a container's limit) leaves; False where neither can be read (not Linux)."""
    held = _kib("/proc/self/status", "VmRSS:")
    free = _kib("/proc/meminfo", "MemAvailable:")
    if held is None or free is None:
        return False
    room = free * 1024
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                          "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit, encoding="ascii") as f:
                cap = f.read().strip()
            with open(usage, encoding="ascii") as f:
                used = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if cap.isdigit() and int(cap) < 1 << 60:   # "max", or v1's "no limit" (a page-rounded 2^63)
            room = min(room, int(cap) - used)
        break
    return room >= 2 * held * 1024


def _kib(path: str, key: str) -> int | None:
    """The kB figure of ``key`` in a /proc file, None when it cannot be read."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class Pending(Generic[R]):
    """The result of a function :func:`beside` runs: ``result()`` waits for it."""

    def __init__(self, pid: int | None, fd: int | None, value: R | None = None) -> None:
        self._pid, self._fd, self._value = pid, fd, value

    def result(self) -> R:
        """The function's result, once the child has ended (at once when it ran in place); the child's error,
        raised again; :class:`WorkerLost` when the child ended without either."""
        if self._pid is not None:
            assert self._fd is not None
            chunks = []
            while chunk := os.read(self._fd, 1 << 20):
                chunks.append(chunk)
            payload = b"".join(chunks)
            os.close(self._fd)
            self._fd = None
            status = _reap(self._pid)
            self._pid = None
            if not payload:
                raise WorkerLost(f"a worker process of the rebuild ended without its result ({_how(status)}); "
                                 "nothing it was writing replaced a file. Run the command again, or with "
                                 f"{PROCESSES_ENV}=1 to rebuild in one process (it needs less memory)")
            ok, value = pickle.loads(payload)
            if not ok:
                raise value
            self._value = value
        return self._value  # type: ignore[return-value]   # set above, or given when it ran in place

    def stop(self) -> None:
        """Stop the child if it still runs (SIGTERM, which it turns into ``KeyboardInterrupt``) and wait for it."""
        if self._fd is not None:
            os.close(self._fd)   # a child writing its result gets a broken pipe rather than blocking
            self._fd = None
        if self._pid is not None:
            with suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGTERM)
            _reap(self._pid)
            self._pid = None


@contextmanager
def beside(work: Callable[[], R], *, cases: int) -> Iterator[Pending[R]]:
    """Run ``work`` in a forked child while the block runs, or in place first when forking cannot serve (module
    docstring) or does not pay (a run of fewer than :data:`MIN_CASES` cases).

    Leaving the block normally waits for the child and raises its error, if it had one and ``result()`` was not
    asked for; leaving it by an error waits for the child, then raises the block's error; leaving it by Ctrl-C (or
    another exit that is not an error) stops the child first.

    Args:
        work: what the child does; it reads what the parent has (copy-on-write) and returns a picklable result.
        cases: the cases of the run ``work`` is about: below :data:`MIN_CASES`, it runs in place.

    Yields:
        The :class:`Pending` result.
    """
    if cases < MIN_CASES or not can_fork():
        yield Pending(None, None, work())
        return
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:   # the child: never returns
        os.close(read_fd)
        _child(work, write_fd, parent)
    os.close(write_fd)
    pending: Pending[R] = Pending(pid, read_fd)
    try:
        yield pending
    except Exception:
        # an error of the block's own (a file it cannot write): what the child writes is kept, as it would be had
        # the child's part come first in one process; the block's error is the one raised
        with suppress(Exception):
            pending.result()
        raise
    except BaseException:   # Ctrl-C, SIGTERM turned into an exit: the child stops too
        pending.stop()
        raise
    pending.result()


def _child(work: Callable[[], R], fd: int, parent: int) -> None:
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.default_int_handler)   # stopped: its files cleaned as on Ctrl-C
        with suppress(ValueError):   # a signal of its own is not the parent's event loop's to see
            signal.set_wakeup_fd(-1)
        _end_with(parent)
        try:
            payload = pickle.dumps((True, work()), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as e:  # noqa: BLE001 - any error is the parent's to raise
            try:
                payload = pickle.dumps((False, e), protocol=pickle.HIGHEST_PROTOCOL)
                pickle.loads(payload)   # one the parent could not rebuild is sent as text
            except Exception:  # noqa: BLE001
                payload = pickle.dumps((False, WorkerLost(f"a worker process of the rebuild failed: "
                                                          f"{type(e).__name__}: {e}")))
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
    except BaseException:  # noqa: BLE001 - a broken pipe (the parent stopped it), a second signal
        code = 1
    finally:
        os._exit(code)


def _end_with(parent: int) -> None:
    """On Linux, have the system send this child SIGTERM when its parent ends (a parent killed with SIGKILL leaves no
    block to stop it): it then stops as it does when its parent stops it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):   # not Linux: the child finishes its work, then ends
        return
    if os.getppid() != parent:   # the parent ended before the request was made
        raise KeyboardInterrupt


#: prctl's option (linux/prctl.h): the signal a process gets when its parent ends
_PR_SET_PDEATHSIG = 1


def _reap(pid: int) -> int:
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue
        except ChildProcessError:
            return 0


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"killed by {name}" + (", perhaps out of memory" if sig == signal.SIGKILL else "")
    return f"exit status {os.WEXITSTATUS(status)}"
