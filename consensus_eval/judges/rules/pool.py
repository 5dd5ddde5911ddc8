"""The rules judge's worker processes: the cases of a large run checked on every core the process may use.

The rules are pure Python and hold the interpreter lock, so cases checked in threads use one core, shared
with the runner that stores their outcomes. On a large run (:data:`POOL_FROM` cases or more to check, and
more than one core usable) the judge checks them in worker processes instead (:class:`CasePool`), one per
usable core: the cases go in chunks of :data:`CHUNK`, in the order the runner asks for them, at most
:data:`AHEAD` chunks per worker ahead of the case asked for (so what waits in memory is bounded, whatever
the run's size). A case the pool was not told about is checked in a thread, as on a small run.

A worker is ``python -m consensus_eval.judges.rules.worker`` (:mod:`.worker`), started with this process's
interpreter and environment (the folder this ``consensus_eval`` came from first on ``PYTHONPATH``), talking
over its standard input and output: length-prefixed pickles, the rubric first, then (chunk number, cases)
one way and (chunk number, judgments) back. The judgments are the same objects a thread makes (the same
function, sent back pickled). The workers run in a session of their own, so Ctrl-C at a terminal reaches
only the runner, which stops the run and closes the pool; a worker ends when its input closes, so
``kill -9`` of ``score`` leaves none behind. A worker that dies fails the calls of the cases it had
(recorded ``failed``: a resumed run makes them again) and every case still to come (the run goes on, and
ends).
"""

from __future__ import annotations

import asyncio
import os
import pickle
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from consensus_eval._errors import JudgeError
from consensus_eval.domain.cases import Case
from consensus_eval.domain.judgment import Judgment
from consensus_eval.domain.rubric import Rubric

#: the fewest cases to check for which workers are started (below it, their start costs more than they save)
POOL_FROM = 1000
#: cases per message sent to a worker
CHUNK = 16
#: chunks sent ahead of the case asked for, per worker
AHEAD = 4
#: a message's length prefix (unsigned, big-endian, 8 bytes)
HEADER = struct.Struct(">Q")


class WorkerGone(JudgeError, RuntimeError):
    """A worker process ended before it sent back the judgments of the cases it had."""


class CasePool:
    """``processes`` worker processes checking ``cases`` (in the order they will be asked for) with the rules
    of ``rubric`` (module docstring): :meth:`check` a case, :meth:`close` at the end. The workers start with
    the first :meth:`check`."""

    def __init__(self, rubric: Rubric, cases: Sequence[Case], processes: int) -> None:
        self._rubric = rubric.model_dump(mode="json")
        self._cases = list(cases)
        self._processes = processes
        #: case id -> (chunk, index in the chunk)
        self._where = {c.id: divmod(i, CHUNK) for i, c in enumerate(self._cases)}
        self._chunks = -(-len(self._cases) // CHUNK)
        self._ahead = AHEAD * processes
        #: the chunks queued or sent and not fully taken: their judgments to come, and their cases still to take
        self._sent: dict[int, tuple[asyncio.Future[list[Any]], list[int]]] = {}
        self._next = 0
        self._queue: asyncio.Queue[int] = asyncio.Queue()
        self._feeders: list[asyncio.Task[None]] = []
        self._procs: list[asyncio.subprocess.Process] = []
        self._broken: BaseException | None = None

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers started so far."""
        return [p.pid for p in self._procs]

    def knows(self, case_id: str) -> bool:
        """Whether the pool checks this case (it was among the cases it was given)."""
        return case_id in self._where

    async def check(self, case: Case) -> dict[str, Judgment]:
        """The judgments of ``case`` by dimension id, checked by a worker (raises what the rules raised)."""
        if not self._feeders:
            self._feeders = [asyncio.create_task(self._feed()) for _ in range(self._processes)]
        chunk, index = self._where[case.id]
        loop = asyncio.get_running_loop()
        while self._next < min(chunk + 1 + self._ahead, self._chunks):
            future: asyncio.Future[list[Any]] = loop.create_future()
            part = self._cases[self._next * CHUNK:(self._next + 1) * CHUNK]
            self._sent[self._next] = (future, [len(part)])
            if self._broken is not None:
                future.set_exception(self._broken)
            else:
                self._queue.put_nowait(self._next)
            self._next += 1
        future, left = self._sent[chunk]
        try:
            results = await asyncio.shield(future)
        finally:
            left[0] -= 1
            if not left[0]:
                del self._sent[chunk]
        out = results[index]
        if isinstance(out, BaseException):
            raise out
        return out  # type: ignore[no-any-return]

    async def _feed(self) -> None:
        """One worker: start it, send it the chunks of the queue one by one, set each chunk's judgments."""
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "consensus_eval.judges.rules.worker", stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, start_new_session=True, env=_worker_env())
            self._procs.append(proc)
            assert proc.stdin is not None and proc.stdout is not None
            _send(proc.stdin, self._rubric)
            while True:
                chunk = await self._queue.get()
                _send(proc.stdin, (chunk, self._cases[chunk * CHUNK:(chunk + 1) * CHUNK]))
                await proc.stdin.drain()
                size, = HEADER.unpack(await proc.stdout.readexactly(HEADER.size))
                got, results = pickle.loads(await proc.stdout.readexactly(size))
                if got != chunk:
                    raise WorkerGone(f"rules worker sent chunk {got} for chunk {chunk}")
                self._settle(chunk, results)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - the worker died (or could not start): fail what it had, and the rest
            code = self._procs[-1].returncode if self._procs else None
            self._break(WorkerGone(f"a rules worker process ended (exit code {code}): {type(e).__name__}: {e}"))

    def _settle(self, chunk: int, results: list[Any]) -> None:
        entry = self._sent.get(chunk)
        if entry is not None and not entry[0].done():
            entry[0].set_result(results)

    def _break(self, error: BaseException) -> None:
        """A worker is gone: every chunk not settled yet fails with ``error``, and so will those to come."""
        self._broken = error
        for future, _ in self._sent.values():
            if not future.done():
                future.set_exception(error)
        while not self._queue.empty():
            self._queue.get_nowait()

    async def close(self) -> None:
        """End the workers: their input closed, each ends once its chunk in progress is done."""
        for task in self._feeders:
            task.cancel()
        await asyncio.gather(*self._feeders, return_exceptions=True)
        for proc in self._procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self._procs:
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        for future, _ in self._sent.values():
            if not future.done():
                future.cancel()
            elif not future.cancelled():
                future.exception()  # retrieved: an unread failure is not reported at exit


def _worker_env() -> dict[str, str]:
    """This process's environment, with the folder this consensus_eval was imported from first on the path:
    a worker runs the same code as the judge, however that was found (an install, PYTHONPATH, sys.path)."""
    home = str(Path(__file__).resolve().parents[3])  # the folder holding consensus_eval/
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": home + (os.pathsep + path if path else "")}


def _send(stream: asyncio.StreamWriter, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(data)) + data)
