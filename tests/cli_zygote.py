"""A warm process that forks one ``consensus-eval`` command line per request: a real process, without the seconds of
imports (litellm alone takes about 3 s of CPU) a new interpreter pays for each.

Tests that need a command in a process of its own (a signal or kill -9 to send it, a limit of CPU time or of
address space to end it, a run that resumes after) used to start a new interpreter each time: more seconds of
imports than most commands take. A child forked from this process, which imported the package, litellm and
instructor once, starts in milliseconds. The child is what ``python -m consensus_eval.cli ARGS`` would be: its own
process group, limits, working folder, environment, standard streams (the pipes or files the test gives it),
``sys.argv``, default signal handlers, and the CLI module run as ``__main__``; it ends the way the interpreter would
(atexit handlers, the streams flushed, a traceback printed and exit 1 on an uncaught exception). What it shares
with the other children is what the imports did, once, before any of them. Tests about the interpreter itself
(``PYTHONIOENCODING``, a full disk or a closed pipe at exit) and those of the installed ``consensus-eval`` script
still start a new one.

:meth:`Zygote.popen` gives a :class:`Forked`, a subset of :class:`subprocess.Popen` (``pid``, ``stdout``,
``stderr``, ``poll``, ``wait``, ``communicate``, ``send_signal``, ``kill``, ``terminate``, ``returncode``);
:meth:`Zygote.run` waits for it (what ``subprocess.run`` does). Commands may run at once (four shards in four
processes): each has a monitor, forked from the zygote, which forks the command and waits for it.

The protocol: on the control socket pair (Unix, SOCK_SEQPACKET), the client sends a request (one JSON object:
``args``, ``env``, ``cwd``, ``module``, ``cpu_s``, ``memory``) with four file descriptors (SCM_RIGHTS): one end of
a new socket pair for this command, and the command's stdin, stdout and stderr. On the command's socket the monitor
says ``{"pid": P}`` at once and ``{"status": S, "cpu_s": C}`` once the command has ended (``S``: the exit code, or
minus the signal that ended it; ``C``: its CPU seconds, from ``wait4``). A monitor whose client has gone kills its
command; the zygote ends when the client closes the control socket.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import math
import os
import resource
import runpy
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

ROOT = Path(__file__).resolve().parents[1]
#: the module a child runs by default, as ``python -m``
CLI = "consensus_eval.cli"
#: what the zygote imports once, before forking: what the costly commands import
PRELOAD = (CLI, "consensus_eval.api", "consensus_eval.judges.llm", "litellm", "instructor")
#: no limit (``cpu_s``, ``memory``)
UNLIMITED = -1
#: the environment when this module was first imported (before any test changed it): the zygote's own
BASE_ENV = dict(os.environ)
_MAX_MESSAGE = 1 << 20


# --------------------------------------------------------------------------- the zygote (its own process)


def _std_stream(fd: int, write: bool) -> io.TextIOWrapper:
    """A standard stream as the interpreter opens it when it is not a terminal (UTF-8 here)."""
    if not write:
        return io.TextIOWrapper(io.BufferedReader(io.FileIO(fd, "r", closefd=False)), encoding="utf-8")
    errors = "backslashreplace" if fd == 2 else "strict"
    return io.TextIOWrapper(io.BufferedWriter(io.FileIO(fd, "w", closefd=False)), encoding="utf-8", errors=errors,
                            line_buffering=fd == 2)


def _child(request: dict[str, Any], fds: list[int]) -> int:
    """Run the request in this (forked) process, on the standard streams ``fds``; its exit status (minus a signal's
    number: it ends by that signal, :func:`_end`)."""
    os.setsid()
    if int(request["memory"]) != UNLIMITED:
        memory = int(request["memory"])
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    if float(request["cpu_s"]) != UNLIMITED:
        cpu = max(1, math.ceil(float(request["cpu_s"])))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN if sig == signal.SIGPIPE else signal.SIG_DFL)  # as a new interpreter
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin, sys.stdout, sys.stderr = _std_stream(0, False), _std_stream(1, True), _std_stream(2, True)
    module = request["module"]
    sys.argv = ["consensus-eval" if module == CLI else module, *request["args"]]
    code = 0
    # run as ``python -m`` runs it: a module not imported yet (what it imports is, once, in the zygote)
    sys.modules.pop(module, None)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:  # the interpreter prints it, then ends by the signal: -2 (130 in a shell)
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught exception
        traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - the interpreter reports a failed flush at exit and exits 120
            with contextlib.suppress(BaseException):
                traceback.print_exc()
            code = 120
    return code


def _end(status: int) -> None:
    """End this process with ``status``: an exit code, or minus the signal it ends by (its default action)."""
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        status = 128 - status  # were the signal not to end it: what a shell would say
    os._exit(status)


def _send(sock: socket.socket, message: Mapping[str, Any], fds: Sequence[int] = ()) -> None:
    socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def _receive(sock: socket.socket, timeout: float | None) -> dict[str, Any] | None:
    """The next message on ``sock``; None if none came within ``timeout`` seconds (None: as long as it takes);
    EOFError if the other end has closed."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(_MAX_MESSAGE)
    except (TimeoutError, BlockingIOError):  # timeout 0 makes the socket non-blocking
        return None
    finally:
        sock.settimeout(None)
    if not data:
        raise EOFError
    message: dict[str, Any] = json.loads(data)
    return message


def _kill(pid: int) -> None:
    """SIGKILL a forked command and the processes it started: its group, and the command itself by its pid (forked
    a moment before, on a loaded machine, it may not have made its group yet: :func:`_child`'s ``setsid``)."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError):
            kill(pid, signal.SIGKILL)


def _monitor(request: dict[str, Any], fds: list[int]) -> None:
    """In a process forked from the zygote for one command: fork the command, say its pid on the command's socket
    (``fds[0]``), wait for it and say how it ended; kill it if the client goes first. Never returns."""
    status = 1
    try:
        sock = socket.socket(fileno=fds[0])
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                sock.close()
                code = _child(request, fds[1:])
            finally:
                _end(code)
        for f in fds[1:]:
            os.close(f)
        _send(sock, {"pid": pid})
        while True:
            ended, wait_status, usage = os.wait4(pid, os.WNOHANG)
            if ended:
                break
            if select.select([sock], [], [], 0.05)[0] and not sock.recv(_MAX_MESSAGE, socket.MSG_PEEK):
                _kill(pid)  # the client has gone (killed): so does its command
                os.wait4(pid, 0)
                return
        with contextlib.suppress(OSError):
            _send(sock, {"status": os.waitstatus_to_exitcode(wait_status),
                         "cpu_s": usage.ru_utime + usage.ru_stime})
        status = 0
    finally:
        os._exit(status)


def serve(fd: int) -> None:
    """The zygote's loop: import :data:`PRELOAD`, then for each request on the control socket ``fd`` fork a
    monitor (:func:`_monitor`), which forks the command; ends when the client closes the socket.

    Args:
        fd: the zygote's end of the control socket pair (inherited).
    """
    import importlib

    control = socket.socket(fileno=fd)
    for name in PRELOAD:
        importlib.import_module(name)
    _send(control, {"ready": True})
    # the monitors are reaped by waitpid (not SIGCHLD ignored, which would drop their CPU time, and so the
    # commands', from this process's children's, and from the tests' process's once this one is reaped)
    monitors: set[int] = set()
    while True:
        data, fds, _flags, _addr = socket.recv_fds(control, _MAX_MESSAGE, 4)
        monitors -= {pid for pid in monitors if os.waitpid(pid, os.WNOHANG)[0]}
        if not data:
            # those ending (their command has): a moment to be reaped; the others end with their clients, unwaited
            for _ in range(40):
                monitors -= {pid for pid in monitors if os.waitpid(pid, os.WNOHANG)[0]}
                if not monitors:
                    break
                time.sleep(0.05)
            return
        pid = os.fork()
        if pid == 0:
            control.close()
            _monitor(json.loads(data), fds)
        monitors.add(pid)
        for f in fds:
            os.close(f)


# --------------------------------------------------------------------------- the client (the tests' process)


class Forked:
    """A command forked by a :class:`Zygote`: the part of :class:`subprocess.Popen` the tests use."""

    def __init__(self, sock: socket.socket, pid: int, stdin: IO[Any] | None, stdout: IO[Any] | None,
                 stderr: IO[Any] | None) -> None:
        self._sock = sock  # the command's socket: its monitor says there how it ended
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        #: the child's CPU seconds, once it has ended
        self.cpu_s: float | None = None

    def _ended(self, timeout: float | None) -> bool:
        if self.returncode is None:
            try:
                answer = _receive(self._sock, timeout)
            except EOFError:
                raise RuntimeError(f"the monitor of forked command {self.pid} ended saying nothing") from None
            if answer is None:
                return False
            self.returncode, self.cpu_s = int(answer["status"]), float(answer["cpu_s"])
            self._sock.close()
        return True

    def poll(self) -> int | None:
        """The exit status if the child has ended, else None."""
        self._ended(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to end; :class:`subprocess.TimeoutExpired` after ``timeout`` seconds.

        Args:
            timeout: seconds (None: as long as it takes).
        """
        if not self._ended(timeout):
            raise subprocess.TimeoutExpired(["consensus-eval"], timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        """Write ``input`` to stdin and close it, read stdout and stderr (those that are pipes) to their end, then
        wait for the child.

        Args:
            input: what to write to stdin (str for text pipes, bytes otherwise), if it is a pipe.
            timeout: seconds for all of it (None: as long as it takes).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        chunks: dict[int, list[bytes]] = {}
        pending = b""
        if self.stdin is not None:
            self.stdin.flush()
            pending = input.encode() if isinstance(input, str) else (input or b"")
        with selectors.DefaultSelector() as sel:
            if self.stdin is not None and not self.stdin.closed:
                if pending:
                    sel.register(self.stdin.fileno(), selectors.EVENT_WRITE)
                else:
                    self.stdin.close()
            for stream in (self.stdout, self.stderr):
                if stream is not None and not stream.closed:
                    sel.register(stream.fileno(), selectors.EVENT_READ)
                    chunks[stream.fileno()] = []
            while sel.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(["consensus-eval"], timeout or 0)
                for key, _ in sel.select(left):
                    if key.events & selectors.EVENT_WRITE:
                        assert self.stdin is not None
                        try:
                            pending = pending[os.write(key.fd, pending[:65536]):]
                        except BrokenPipeError:
                            pending = b""
                        if not pending:
                            sel.unregister(key.fd)
                            self.stdin.close()
                        continue
                    chunk = os.read(key.fd, 65536)
                    if chunk:
                        chunks[key.fd].append(chunk)
                    else:
                        sel.unregister(key.fd)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        out: list[Any] = []
        for stream in (self.stdout, self.stderr):
            if stream is None or stream.closed:
                out.append(None)
                continue
            raw = b"".join(chunks[stream.fileno()])
            if isinstance(stream, io.TextIOBase):  # as Popen(text=True) decodes
                out.append(raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n"))
            else:
                out.append(raw)
            stream.close()
        return out[0], out[1]

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the child (nothing if it has ended).

        Args:
            sig: the signal.
        """
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL the child."""
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM the child."""
        self.send_signal(signal.SIGTERM)


@dataclass(frozen=True)
class Ended:
    """How a forked command ended (:meth:`Zygote.run`): its exit status (minus a signal's number), its CPU seconds,
    whether it was killed at the liveness bound, and what it wrote."""

    status: int
    cpu_s: float
    killed: bool
    stdout: bytes
    stderr: bytes


def _stream(target: int | IO[Any] | None, child_reads: bool, text: bool, own: list[int],
            theirs: list[int]) -> IO[Any] | None:
    """The child's end of one standard stream (appended to ``theirs``; ``own``: the descriptors to close here once
    sent), and ours if it is a pipe."""
    if target == subprocess.PIPE:
        r, w = os.pipe()
        mine, child = (w, r) if child_reads else (r, w)
        theirs.append(child)
        own.append(child)
        mode = ("w" if child_reads else "r") + ("" if text else "b")
        return open(mine, mode, encoding="utf-8" if text else None)  # noqa: SIM115 - closed by its reader
    if target is None or target == subprocess.DEVNULL:
        fd = os.open(os.devnull, os.O_RDWR)
        theirs.append(fd)
        own.append(fd)
        return None
    fd = os.dup(target if isinstance(target, int) else target.fileno())
    theirs.append(fd)
    own.append(fd)
    return None


class Zygote:
    """The client of the zygote process: started on first use, stopped at exit (one per tests' process)."""

    _shared: ClassVar[Zygote | None] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**BASE_ENV, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENBLAS_NUM_THREADS": "1",
               "OMP_NUM_THREADS": "1"}
        # its own stdout and stderr are not the tests' (a pipe a reader waits on the end of): a log, read if it dies
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        with theirs:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.cli_zygote", str(theirs.fileno())], cwd=ROOT,
                                         env=env, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                         stdout=self._log, stderr=self._log)
        atexit.register(self.close)
        try:
            ready = _receive(self._control, None)
        except EOFError:
            ready = None
        if ready != {"ready": True}:
            raise RuntimeError(f"the CLI zygote did not start (exit {self.proc.wait()}): {self._read_log()}")

    def _read_log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-3000:]

    @classmethod
    def _running(cls) -> Zygote:
        """The process's zygote, started if it is not running."""
        with cls._lock:
            if cls._shared is None or cls._shared.proc.poll() is not None:
                cls._shared = cls()
            return cls._shared

    @classmethod
    def popen(cls, args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | Path = ROOT,
              stdin: int | IO[Any] | None = None, stdout: int | IO[Any] | None = None,
              stderr: int | IO[Any] | None = None, text: bool = False, module: str = CLI,
              cpu_s: float = UNLIMITED, memory: int = UNLIMITED) -> Forked:
        """Fork ``consensus-eval ARGS`` (``python -m MODULE ARGS``) and return at once, as ``subprocess.Popen``.

        Args:
            args: the command line after ``consensus-eval``.
            env: the child's whole environment (None: this process's).
            cwd: the child's working folder.
            stdin: ``subprocess.PIPE``, ``subprocess.DEVNULL``, a file or a descriptor (None: /dev/null).
            stdout: the same (None: /dev/null).
            stderr: the same, or ``subprocess.STDOUT``.
            text: the pipes are text (UTF-8), not bytes.
            module: what the child runs as ``python -m`` would (the CLI).
            cpu_s: its limit of CPU seconds (SIGXCPU), or :data:`UNLIMITED`.
            memory: its limit of address space in bytes, or :data:`UNLIMITED`.
        """
        zygote = cls._running()
        mine, monitors = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        own: list[int] = [monitors.detach()]
        theirs: list[int] = [own[0]]
        try:
            in_ = _stream(stdin, True, text, own, theirs)
            out = _stream(stdout, False, text, own, theirs)
            if stderr == subprocess.STDOUT:
                theirs.append(os.dup(theirs[2]))
                own.append(theirs[-1])
                err = None
            else:
                err = _stream(stderr, False, text, own, theirs)
            request = {"args": list(args), "env": dict(os.environ if env is None else env), "cwd": str(cwd),
                       "module": module, "cpu_s": cpu_s, "memory": memory}
            with cls._lock:
                _send(zygote._control, request, theirs)
        finally:
            for fd in own:
                os.close(fd)
        try:
            started = _receive(mine, None)
        except EOFError:
            started = None
        if started is None:
            raise RuntimeError(f"the CLI zygote did not fork {list(args)}: {zygote._read_log()}")
        return Forked(mine, int(started["pid"]), in_, out, err)

    @classmethod
    def run(cls, args: Sequence[str], *, env: Mapping[str, str], cwd: str | Path, cpu_s: float = UNLIMITED,
            memory: int = UNLIMITED, liveness_s: float, module: str = CLI) -> Ended:
        """Fork ``consensus-eval ARGS``, read its output and wait for it; killed (its process group) if it has not
        ended after ``liveness_s`` seconds (a liveness bound, not a deadline).

        Args:
            args: the command line after ``consensus-eval``.
            env: the child's whole environment.
            cwd: the child's working folder.
            cpu_s: its limit of CPU seconds (SIGXCPU).
            memory: its limit of address space, bytes.
            liveness_s: wall-clock seconds.
            module: what the child runs as ``python -m`` would (the CLI).
        """
        forked = cls.popen(args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, module=module,
                           cpu_s=cpu_s, memory=memory)
        killed = False
        try:
            out, err = forked.communicate(timeout=liveness_s)
        except subprocess.TimeoutExpired:
            killed = True
            _kill(forked.pid)
            out, err = forked.communicate()
        assert forked.returncode is not None and forked.cpu_s is not None
        return Ended(forked.returncode, forked.cpu_s, killed, out or b"", err or b"")

    def close(self) -> None:
        """Stop the zygote (its control socket closed, then killed if it lingers)."""
        with contextlib.suppress(OSError):
            self._control.close()
        if self.proc.poll() is None:
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
