"""A warm process that forks one ``consensus-eval`` command line per request: a real process, without the seconds of
imports (litellm alone takes about 3 s of CPU) a new interpreter pays for each.

``tests/bad_input_harness.py`` runs the hostile corpus's costly entries (huge bootstrap counts, YAML bombs, plans of
billions of calls) each in its own process, so that a limit of CPU time and of address space can end it without
touching the tests' process. A new interpreter per entry costs more than most entries; a child forked from this
process, which imported the package, litellm and instructor once, starts in milliseconds. The child is what
``python -m consensus_eval.cli ARGS`` would be: its own process group, limits, working folder, environment,
standard output and error on the files it is given, ``sys.argv``, and the CLI module run as ``__main__``; it ends
the way the interpreter would (atexit handlers, the streams flushed, a traceback printed and exit 1 on an
uncaught exception). What it shares with the other children is what the imports did once, before any of them.
Entries about the interpreter itself (``PYTHONIOENCODING``, a full disk, a closed pipe at exit) still start one.

The protocol, one JSON object a line: the client writes a request (``args``, ``env``, ``cwd``, ``stdout``,
``stderr``: paths; ``cpu_s``, ``memory``: limits); the zygote answers ``{"pid": P}`` at once and
``{"status": S, "cpu_s": C}`` when the child has ended (``S``: the exit code, or minus the signal that ended it;
``C``: the child's CPU seconds, from ``wait4``).
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
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the module a child runs by default, as ``python -m``
CLI = "consensus_eval.cli"
#: what the zygote imports once, before forking: what the costly commands import
PRELOAD = ("consensus_eval.cli", "consensus_eval.api", "consensus_eval.judges.llm", "litellm", "instructor")


# --------------------------------------------------------------------------- the zygote (its own process)


def _std_stream(fd: int, encoding: str, errors: str) -> io.TextIOWrapper:
    """A standard stream as the interpreter opens it when it is not a terminal."""
    return io.TextIOWrapper(io.BufferedWriter(io.FileIO(fd, "w", closefd=False)), encoding=encoding, errors=errors)


def _child(request: dict[str, Any]) -> int:
    """Run the request's command line in this (forked) process; its exit status."""
    os.setsid()
    memory = int(request["memory"])
    cpu = max(1, math.ceil(float(request["cpu_s"])))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    sys.stdout = _std_stream(1, "utf-8", "strict")
    sys.stderr = _std_stream(2, "utf-8", "backslashreplace")
    module = request["module"]
    sys.argv = ["consensus-eval" if module == CLI else module, *request["args"]]
    code = 0
    # run as ``python -m`` runs it: a module not imported yet (what it imports is, once, in the zygote)
    sys.modules.pop(module, None)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
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
                os.write(2, b"Exception ignored on flushing sys.stdout\n")
            code = 120
    return code


def serve() -> None:
    """The zygote's loop: import :data:`PRELOAD`, then fork a child per request line on stdin."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    out = sys.stdout
    print(json.dumps({"ready": True}), file=out, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                status = _child(request)
            finally:
                os._exit(status)
        print(json.dumps({"pid": pid}), file=out, flush=True)
        _, wait_status, usage = os.wait4(pid, 0)
        status = os.waitstatus_to_exitcode(wait_status)
        print(json.dumps({"status": status, "cpu_s": usage.ru_utime + usage.ru_stime}), file=out, flush=True)


# --------------------------------------------------------------------------- the client (the tests' process)


@dataclass(frozen=True)
class Ended:
    """How a forked command ended: its exit status (minus a signal's number), its CPU seconds, whether the
    client killed it at the liveness bound, and what it wrote."""

    status: int
    cpu_s: float
    killed: bool
    stdout: bytes
    stderr: bytes


class Zygote:
    """The client of one zygote process, started on first use and stopped at exit (one per tests' process)."""

    _instance: Zygote | None = None
    _lock = threading.Lock()

    def __init__(self, env: dict[str, str]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="cli-zygote-"))
        self._log = open(self.folder / "zygote.log", "wb")  # noqa: SIM115 - closed by close()
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.cli_zygote"], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log)
        self._buf = b""
        self._n = 0
        atexit.register(self.close)
        ready = self._read(None)
        assert ready == {"ready": True}, ready

    @classmethod
    def shared(cls, env: dict[str, str]) -> Zygote:
        """The process's zygote, started with ``env`` (what its imports read) if it is not running yet.

        Args:
            env: the environment of the zygote, hence of what the preloaded modules read at import.
        """
        with cls._lock:
            if cls._instance is None or cls._instance.proc.poll() is not None:
                cls._instance = cls(env)
            return cls._instance

    def _read(self, timeout: float | None) -> dict[str, Any] | None:
        """The zygote's next answer; None if none came within ``timeout`` seconds (None: wait as long as it takes)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            if timeout is not None and not select.select([fd], [], [], timeout)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                log = (self.folder / "zygote.log").read_text(encoding="utf-8", errors="replace")
                raise RuntimeError(f"the CLI zygote ended (exit {self.proc.wait()}): {log[-2000:]}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(self, args: list[str], *, env: dict[str, str], cwd: Path, cpu_s: float, memory: int,
            liveness_s: float, module: str = CLI) -> Ended:
        """Fork ``consensus-eval ARGS`` and wait for it; killed (its process group) after ``liveness_s``.

        Args:
            args: the command line after ``consensus-eval`` (after ``python -m MODULE``).
            env: the child's whole environment.
            cwd: the child's working folder.
            cpu_s: its limit of CPU seconds (SIGXCPU).
            memory: its limit of address space, bytes.
            liveness_s: wall-clock seconds after which it is killed (a liveness bound, not a deadline).
            module: what the child runs as ``python -m`` would (the CLI).
        """
        with self._lock:
            self._n += 1
            stdout, stderr = self.folder / f"{self._n}.stdout", self.folder / f"{self._n}.stderr"
        request = {"args": args, "env": env, "cwd": str(cwd), "stdout": str(stdout), "stderr": str(stderr),
                   "cpu_s": cpu_s, "memory": memory, "module": module}
        with self._lock:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            started = self._read(None)
            assert started is not None
            pid = int(started["pid"])
            ended = self._read(liveness_s)
            killed = ended is None
            if ended is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                ended = self._read(None)
                assert ended is not None
        result = Ended(int(ended["status"]), float(ended["cpu_s"]), killed, stdout.read_bytes(), stderr.read_bytes())
        stdout.unlink()
        stderr.unlink()
        return result

    def close(self) -> None:
        """Stop the zygote (its stdin closed, then killed if it lingers)."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


if __name__ == "__main__":
    serve()
