"""The one harness of the bad-input corpora: an entry, its folder, how it is run and how its result is judged.

Two corpora use it: ``tests/test_bad_input_corpus.py`` (everyday mistakes: a table of entries,
some of them API calls or run on a read-only folder) and ``tests/hostile_corpus.py`` (what an attacker or
a careless user feeds every subcommand: families of generated entries, some of them run in a
process of their own with a limit of CPU time and of address space).

An :class:`Entry` is a command line (placeholders ``{d}``: the entry's own folder, ``{run}``: a fresh copy
of a small scored run in ``{d}/run``, ``{bad}``: ``tests/data/bad``) or an API call, the files it writes,
the exit it must end in (2: a clear refusal; 0, 1, 3: a handled case) and what its output must say
(``expect``) or must not (``absent``); ``check`` looks further. :func:`run_entry` writes the files, copies
the run, prepares and runs it; :func:`classify` puts the result in one class:

- ``refused``: exit 2 (or the refusal exit the entry expects) with the message it expects;
- ``handled``: the exit the entry expects (0, 1, 3) and its checks pass;
- ``traceback``: an exception other than the CLI's own exit, or "Traceback" in the output;
- ``wrong``: another exit code, a message missing, a check failing (an exit 0 on a wrong result);
- ``hang``: over the entry's limit of CPU time (in-process: interrupted by SIGPROF, ``ITIMER_PROF``; in a
  subprocess: killed by ``RLIMIT_CPU``), or not ended after :func:`liveness_s` of wall-clock time.

The limit is CPU time, not a wall-clock deadline: a loaded machine (load 4-20) slows an entry down without
making it use more CPU, so it cannot turn a pass into a hang. The wall-clock bound is only a liveness check,
ten times the CPU limit (at least two minutes), for an entry blocked without using CPU (a read nobody answers,
a server that starts instead of refusing).

An entry with ``proc`` runs in a process of its own: forked from a warm process that imported the package once
(``tests/cli_zygote.py``: no seconds of imports per entry), or, when the entry is about the interpreter itself (its
console's encoding, a full disk or a closed pipe at exit), a new ``python -m consensus_eval.cli``.

Read-only folders: permissions do not stop root (CI runs as root), so a ``read_only`` entry runs with the
effective uid of ``nobody`` on a folder owned by root (:func:`folder_for` makes one others can reach), or,
for a normal user, on a folder made ``a-w``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "cases.jsonl"
TCM = ROOT / "examples" / "tcm"
PROMPTS = ROOT / "prompts"
BAD = Path(__file__).parent / "data" / "bad"
#: the uid a read-only entry runs as when the tests run as root
NOBODY = 65534

#: seconds of CPU an in-process entry may use before it is a hang (a subprocess entry: its own ``timeout``)
IN_PROCESS_TIMEOUT = 20.0
#: the wall-clock liveness bound is this many times an entry's CPU limit (:func:`liveness_s`)...
LIVENESS_FACTOR = 10
#: ...and at least this many seconds
LIVENESS_MIN_S = 120.0
#: address space of a subprocess entry: an entry that needs more is a memory blow-up, not a pass
SUBPROCESS_MEMORY = 3 * 1024**3

CLASSES = ("refused", "handled", "traceback", "wrong", "hang")


# --------------------------------------------------------------------------- templates

CASE: dict[str, Any] = {"id": "c1", "conversation": "医生：哪里不舒服？\n患者：口渴三个月。",
                        "record": "主诉：口渴3个月。"}
#: a field value for :func:`case` that removes the field
DROP: Any = object()


def case(**fields: Any) -> dict[str, Any]:
    """The template case with ``fields`` replaced (``DROP`` removes one)."""
    out = {**CASE, **fields}
    return {k: v for k, v in out.items() if v is not DROP}


def jl(*rows: Any) -> str:
    """JSON Lines: dicts are dumped, strings are written as they are."""
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows)


RULES = "judges:\n  - name: rules\n    kind: rules\n"
#: the minimal valid rubric, to vary
RUBRIC_MINI = """\
id: mini
name: mini
dimensions:
  - id: quality
    name: quality
    max: 10
    star_weight: 1
    stars: {5: 9, 4: 7, 3: 5, 2: 3}
    categories:
      - id: facts
        name: facts
        cap: 10
        types:
          - {id: fact_wrong, name: wrong fact, points: 2}
"""
D_LEAF = {"role": "D", "triples": [["patient", "take", "drug"]], "logical_rel": "null"}
C_NODE = {"role": "C", "triples": [["patient", "has", "fever"]], "logical_rel": "null"}
TREE = [C_NODE, D_LEAF, {"role": "D", "triples": [["patient", "take", "rest"]], "logical_rel": "null"}]


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True)
class Outcome:
    """What running an entry gave."""

    code: int | None
    stdout: str
    stderr: str
    exc: BaseException | None = None
    hung: bool = False
    seconds: float = 0.0
    #: why it hung: ``cpu`` (over its CPU limit) or ``liveness`` (not ended after :func:`liveness_s`)
    hung_by: str = ""

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


Check = Callable[[Path, Outcome], None]


@dataclass(frozen=True)
class Entry:
    """One entry of a corpus (see the module docstring)."""

    name: str
    args: tuple[str, ...] = ()
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    exit: int = 2
    expect: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    #: prepare the folder (after the files are written and the run copied): corrupt a store...
    setup: Callable[[Path], object] | None = None
    check: Check | None = None
    #: an API call instead of a command line: exit 0 if it returns, 2 if it raises InputError
    call: Callable[[Path], object] | None = None
    #: run on a read-only ``{d}`` (module docstring)
    read_only: bool = False
    #: a known gap: the entry is expected to fail (strict), for this reason
    xfail: str | None = None
    #: run as a separate process (cost bounded by ``timeout`` and :data:`SUBPROCESS_MEMORY`)
    proc: bool = False
    env: dict[str, str] = field(default_factory=dict)
    #: subprocess only: where stdout goes (``pipe``, ``full``: /dev/full, ``closed``: a pipe closed at once)
    stdout: str = "pipe"
    #: seconds of CPU the entry may use (not wall-clock seconds: see the module docstring)
    timeout: float = IN_PROCESS_TIMEOUT
    #: the hostile corpus only: the numbered item (a group of families, counted apart) the entry belongs to
    item: int = 3


def liveness_s(cpu_s: float) -> float:
    """Wall-clock seconds after which an entry limited to ``cpu_s`` seconds of CPU is hung whatever its CPU.

    Args:
        cpu_s: the entry's CPU limit (its ``timeout``).
    """
    return max(LIVENESS_MIN_S, LIVENESS_FACTOR * cpu_s)


def fill(text: str, d: Path) -> str:
    """``text`` with its placeholders (module docstring) replaced for the folder ``d``."""
    return text.replace("{run}", str(d / "run")).replace("{d}", str(d)).replace("{bad}", str(BAD))


def store_path(d: Path) -> Path:
    """The store of the entry's copy of the scored run."""
    return d / "run" / "results.sqlite"


def sql(d: Path, *statements: str, params: tuple[Any, ...] = ()) -> None:
    """Run ``statements`` on the entry's store (a set-up that damages or edits it)."""
    con = sqlite3.connect(store_path(d))
    try:
        for s in statements:
            con.execute(s, params)
        con.commit()
    finally:
        con.close()


def scored_run_in(folder: Path) -> Path:
    """A small finished run (4 example cases, the rules judge) in ``folder/run``, scored the way the CLI
    starts (libraries quieted), with what the commands import lazily imported already (a read-only entry
    runs as another user, who may not read a new module's cache)."""
    from consensus_eval import api as ce
    from consensus_eval.judges.quiet import quiet_libraries

    quiet_libraries()
    cases = folder / "cases.jsonl"
    cases.write_text("".join(EXAMPLES.read_text(encoding="utf-8").splitlines(keepends=True)[:4]), encoding="utf-8")
    ce.evaluate(cases, "configs/default.yaml", out=folder / "run", n_boot=20)
    import consensus_eval.output.audit_console
    import consensus_eval.output.console
    import consensus_eval.output.report  # noqa: F401
    return folder / "run"


@contextlib.contextmanager
def folder_for(entry: Entry, tmp_path: Path) -> Iterator[Path]:
    """The entry's folder: ``tmp_path``, or for a read-only entry run as root a folder other users can reach."""
    if not entry.read_only or os.geteuid() != 0:
        yield tmp_path
        return
    base = Path(tempfile.mkdtemp(prefix="ce-corpus-"))
    try:
        base.chmod(0o755)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """Run the body unable to write in ``folder``: as ``nobody`` for root, else with the folder a-w."""
    if os.geteuid() != 0:
        dirs = [folder, *(p for p in folder.rglob("*") if p.is_dir())]
        for p in dirs:
            p.chmod(0o555)
        try:
            yield
        finally:
            for p in dirs:
                p.chmod(0o755)
        return
    try:
        os.seteuid(NOBODY)
    except PermissionError:
        pytest.skip("cannot drop privileges to test a read-only folder")
    try:
        try:
            os.listdir(folder)
        except PermissionError:
            pytest.skip(f"{folder} is not reachable by uid {NOBODY}")
        yield
    finally:
        os.seteuid(0)


# --------------------------------------------------------------------------- running an entry


class Hang(BaseException):
    """Raised in an in-process entry over its limits (not an Exception: nothing catches it); ``args[0]`` says
    which: ``cpu`` or ``liveness``."""


@contextlib.contextmanager
def _alarm(cpu_s: float) -> Iterator[None]:
    """Raise :class:`Hang` in the body once this process has used ``cpu_s`` more seconds of CPU (SIGPROF), or
    once :func:`liveness_s` of wall-clock time have passed (SIGALRM)."""
    def ring(signum: int, frame: object) -> None:
        raise Hang("cpu" if signum == signal.SIGPROF else "liveness")

    previous = {sig: signal.signal(sig, ring) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    signal.setitimer(signal.ITIMER_REAL, liveness_s(cpu_s))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _api_call(entry: Entry, d: Path) -> Outcome:
    from consensus_eval import InputError

    assert entry.call is not None
    start = time.monotonic()
    try:
        with _alarm(entry.timeout):
            entry.call(d)
    except Hang as e:
        return Outcome(None, "", "", hung=True, seconds=time.monotonic() - start, hung_by=str(e.args[0]))
    except InputError as e:
        return Outcome(2, str(e), "", seconds=time.monotonic() - start)
    except Exception as e:  # noqa: BLE001 - any other exception is what the corpora are against
        return Outcome(1, f"{type(e).__name__}: {e}", "", e, seconds=time.monotonic() - start)
    return Outcome(0, "", "", seconds=time.monotonic() - start)


def _in_process(entry: Entry, d: Path) -> Outcome:
    from typer.testing import CliRunner

    from consensus_eval.cli import app

    start = time.monotonic()
    try:
        with _alarm(entry.timeout):
            res = CliRunner().invoke(app, [fill(a, d) for a in entry.args], env=entry.env or None)
    except Hang as e:
        return Outcome(None, "", "", hung=True, seconds=time.monotonic() - start, hung_by=str(e.args[0]))
    exc = None if res.exception is None or isinstance(res.exception, SystemExit) else res.exception
    stdout = res.stdout
    try:
        stderr = res.stderr
    except ValueError:
        stderr = ""
    if not stderr and res.output != stdout:
        stderr = res.output.replace(stdout, "", 1)
    return Outcome(res.exit_code, stdout, stderr, exc, seconds=time.monotonic() - start)


def _limits(cpu_s: float) -> Callable[[], None]:
    """The child's limits: :data:`SUBPROCESS_MEMORY` of address space, ``cpu_s`` seconds of CPU (SIGXCPU at the
    soft limit, SIGKILL a second later)."""
    cpu = max(1, math.ceil(cpu_s))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (SUBPROCESS_MEMORY, SUBPROCESS_MEMORY))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))

    return limit


def _process_env(entry: Entry) -> dict[str, str]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "100", **entry.env}
    env.pop("FORCE_COLOR", None)
    return env


def _needs_interpreter(entry: Entry) -> bool:
    """Whether the entry is about the interpreter itself (its console's encoding, stdout at exit): a new one."""
    return entry.stdout != "pipe" or "PYTHONIOENCODING" in entry.env


def _forked(entry: Entry, d: Path) -> Outcome:
    """The entry in a process forked from the warm :class:`tests.cli_zygote.Zygote` (no imports to pay)."""
    from tests.cli_zygote import Zygote

    env = _process_env(entry)
    start = time.monotonic()
    ended = Zygote.run([fill(a, d) for a in entry.args], env=env, cwd=ROOT, cpu_s=entry.timeout,
                       memory=SUBPROCESS_MEMORY, liveness_s=liveness_s(entry.timeout))
    return _ended(ended.status, ended.stdout, ended.stderr, time.monotonic() - start, killed=ended.killed)


def _ended(status: int, out: bytes | None, err: bytes | None, seconds: float, *, killed: bool) -> Outcome:
    """The outcome of an entry's process that ended with ``status`` (minus a signal's number)."""
    def dec(b: bytes | None) -> str:
        return b.decode("utf-8", "replace") if b else ""

    if killed:
        return Outcome(None, dec(out), dec(err), hung=True, seconds=seconds, hung_by="liveness")
    stderr = dec(err)
    if status == -signal.SIGXCPU:  # over its CPU limit
        return Outcome(None, dec(out), stderr, hung=True, seconds=seconds, hung_by="cpu")
    exc: BaseException | None = None
    if status < 0:
        exc = RuntimeError(f"killed by signal {-status}")
    elif "MemoryError" in stderr:
        exc = MemoryError(stderr[-300:])
    return Outcome(status, dec(out), stderr, exc, seconds=seconds)


def _subprocess(entry: Entry, d: Path) -> Outcome:
    """The entry in a new interpreter (``python -m consensus_eval.cli``)."""
    env = _process_env(entry)
    cmd = [sys.executable, "-m", "consensus_eval.cli", *(fill(a, d) for a in entry.args)]
    start = time.monotonic()
    stdout_target: Any = subprocess.PIPE
    full = None
    if entry.stdout == "full":
        full = open("/dev/full", "w")  # noqa: SIM115 - closed below
        stdout_target = full
    try:
        if entry.stdout == "closed":
            r, w = os.pipe()
            os.close(r)
            stdout_target = w
        proc = subprocess.Popen(cmd, stdout=stdout_target, stderr=subprocess.PIPE, env=env, cwd=ROOT,
                                preexec_fn=_limits(entry.timeout), start_new_session=True)
        if entry.stdout == "closed":
            os.close(w)
        try:
            out, err = proc.communicate(timeout=liveness_s(entry.timeout))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return _ended(proc.returncode, out, err, time.monotonic() - start, killed=True)
    finally:
        if full is not None:
            full.close()
    return _ended(proc.returncode, out, err, time.monotonic() - start, killed=False)


def _run(entry: Entry, d: Path) -> Outcome:
    if entry.call is not None:
        return _api_call(entry, d)
    if not entry.proc:
        return _in_process(entry, d)
    return _subprocess(entry, d) if _needs_interpreter(entry) else _forked(entry, d)


def run_entry(entry: Entry, d: Path, scored_run: Path) -> Outcome:
    """Write the entry's files into ``d``, copy the scored run to ``{d}/run``, prepare, run (read-only if asked)."""
    for name, content in entry.files.items():
        if isinstance(content, bytes):
            (d / name).write_bytes(content)
        else:
            (d / name).write_text(fill(content, d), encoding="utf-8", newline="")
    shutil.copytree(scored_run, d / "run")
    if entry.setup is not None:
        entry.setup(d)
    if entry.read_only:
        with _read_only(d):
            return _run(entry, d)
    return _run(entry, d)


def classify(entry: Entry, d: Path, out: Outcome) -> tuple[str, str]:
    """(class, why) of an outcome (see the module docstring)."""
    if out.hung:
        if out.hung_by == "liveness":
            return "hang", f"not ended after {liveness_s(entry.timeout):g} s of wall-clock time (liveness bound)"
        return "hang", f"over {entry.timeout:g} s of CPU"
    if out.exc is not None:
        return "traceback", f"{type(out.exc).__name__}: {str(out.exc)[:300]}"
    if "Traceback (most recent call last)" in out.output:
        return "traceback", out.output[out.output.index("Traceback"):][-600:]
    if out.code != entry.exit:
        return "wrong", f"exit {out.code}, expected {entry.exit}: {out.output[-600:]}"
    for part in entry.expect:
        if fill(part, d) not in out.output:
            return "wrong", f"{fill(part, d)!r} not in the output: {out.output[-600:]}"
    for part in entry.absent:
        if fill(part, d) in out.output:
            return "wrong", f"{fill(part, d)!r} in the output"
    if entry.check is not None:
        try:
            entry.check(d, out)
        except Exception as e:  # noqa: BLE001 - a check that fails is a wrong result, whatever it raised
            return "wrong", f"check: {type(e).__name__}: {e}"
    return ("refused" if entry.exit == 2 else "handled"), ""


def assert_passes(entry: Entry, tmp_path: Path, scored_run: Path) -> None:
    """Run ``entry`` in (a folder for) ``tmp_path``: it must be refused or handled (a pytest test's body)."""
    with folder_for(entry, tmp_path) as d:
        cls, why = classify(entry, d, run_entry(entry, d, scored_run))
    assert cls in ("refused", "handled"), f"{cls}: {why}"
