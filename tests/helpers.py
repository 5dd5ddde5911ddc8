"""Builders several test modules share: cases and a two-judge panel for the fake server, the CLI as a command (and
run in a process of its own), a store written by hand, and a small OpenAI-compatible endpoint answering per mode.

Test modules import these from here, not from one another (a test module's own helpers stay in it)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

from aiohttp import web

from consensus_eval.domain.cases import Case
from consensus_eval.domain.config import EvalConfig
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.stored import from_judgment
from consensus_eval.execution.store import CallRecord, HumanLabelRecord, PlannedCall, Store, StoredCall

if TYPE_CHECKING:
    from starlette.testclient import TestClient

    from consensus_eval.review.model import ReviewRun

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cases.jsonl"

#: the price per token the panel of :func:`write_panel` declares (input, output)
PRICE_IN, PRICE_OUT = 1e-6, 2e-6
#: the model name the fake server sees for each judge of :func:`write_panel`
MODEL_OF = {"judge-a": "fake-a", "judge-b": "fake-strict"}


#: an offline run of each rubric kind: (cases, config) from the repository's root: deductions (the rules judge and three
#: simulated judges; the important cases get 3 runs), likert (PDQI-9), criteria
OFFLINE_RUNS = {
    "deductions": ("examples/cases.jsonl", "configs/offline.yaml"),
    "likert": ("examples/pdqi9/cases.jsonl", "configs/pdqi9.offline.yaml"),
    "criteria": ("examples/criteria/cases.jsonl", "configs/criteria.offline.yaml"),
}


def write_cases(path: Path, n: int = 20) -> Path:
    """``n`` cases cycled from the examples, each with its own id (``ft-000``...); none important (one run each)."""
    examples = [json.loads(x) for x in EXAMPLES.read_text(encoding="utf-8").splitlines() if x.strip()]
    lines = []
    for i in range(n):
        d = dict(examples[i % len(examples)])
        d["id"], d["important"] = f"ft-{i:03d}", False
        lines.append(json.dumps(d, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_panel(path: Path, url: str, *, timeout_s: float = 3.0, concurrency: int = 8,
                retries: tuple[int, int] = (4, 2)) -> Path:
    """Two LLM judges on the fake server at ``url``: one in TOOLS mode, one stricter in JSON mode."""
    path.write_text(f"""\
rubric: medical_record
runs: 1
important_runs: 1
judges:
  - name: judge-a
    model: openai/fake-a
    api_base: {url}/v1
    mode: tools
    concurrency: {concurrency}
    timeout_s: {timeout_s}
    max_retries: {retries[0]}
    max_reasks: 2
    input_cost_per_token: {PRICE_IN}
    output_cost_per_token: {PRICE_OUT}
  - name: judge-b
    model: hosted_vllm/fake-strict
    api_base: {url}/v1
    mode: json
    concurrency: {concurrency}
    timeout_s: {timeout_s}
    max_retries: {retries[1]}
    max_reasks: 2
    input_cost_per_token: {PRICE_IN}
    output_cost_per_token: {PRICE_OUT}
""", encoding="utf-8")
    return path


#: a process that holds a run's lock as NAME in MODE (``run_lock``) until its standard input closes
_LOCK_HOLDER = ("import sys; from consensus_eval.execution.lock import run_lock\n"
                "with run_lock(sys.argv[1], sys.argv[2], mode=sys.argv[3]):\n"
                "    print('held', flush=True)\n"
                "    sys.stdin.read()\n")


@contextlib.contextmanager
def lock_held_elsewhere(run: Path, name: str, mode: str = "exclusive") -> Iterator[subprocess.Popen[str]]:
    """Another process holding ``run``'s lock for the block, as the command ``name`` in ``mode`` (exclusive, review,
    team): the process, which lets go when its standard input is closed (at the block's end at the latest).

    Args:
        run: the run folder.
        name: the command the lock's holder is named as in messages (e.g. ``test holder``).
        mode: the lock's mode (:data:`consensus_eval.execution.lock.Mode`).
    """
    proc = subprocess.Popen([sys.executable, "-c", _LOCK_HOLDER, str(run), name, mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        yield proc
    finally:
        if proc.poll() is None:
            proc.communicate("")


def cli_command() -> list[str]:
    """The command that runs the CLI in a process of its own: the installed script, else ``python -m``."""
    script = Path(sys.executable).with_name("consensus-eval")
    return [str(script)] if script.exists() else [sys.executable, "-m", "consensus_eval.cli"]


def cli_run(args: list[str], *, env: Mapping[str, str] | None = None, cwd: Path | str,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``consensus-eval ARGS`` in a process of its own forked from a warm one (tests/cli_zygote.py: none of the
    seconds of imports a new interpreter pays), its output read as text: what ``subprocess.run(..., text=True,
    capture_output=True)`` gives. For a process a test signals or kills while it runs: ``Zygote.popen``.

    Args:
        args: the command line after ``consensus-eval``.
        env: its whole environment (None: this process's).
        cwd: its working folder.
        timeout: a liveness bound in seconds (TimeoutExpired after it), not a deadline.
    """
    from tests.cli_zygote import Zygote

    proc = Zygote.popen(args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode is not None
    return subprocess.CompletedProcess(["consensus-eval", *args], proc.returncode, out, err)


def ok_count(db: Path) -> int:
    """How many calls the store ``db`` holds as ``ok``, read while another process may write it (0 before
    the store or its schema exists)."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return int(con.execute("SELECT count(*) FROM calls WHERE status = 'ok'").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:  # not created yet, or the schema is being written
        return 0


def write_store(folder: Path, rubric: Rubric, config: EvalConfig, cases: Iterable[Case],
                records: Iterable[CallRecord], planned: Iterable[PlannedCall] | None = None) -> Path:
    """``folder/results.sqlite`` as a finished run leaves it: the rubric, the config and the cases as meta,
    the plan (``planned``, else one planned call per record), then every record. Returns ``folder``."""
    if planned is None:
        records = list(records)
        planned = [PlannedCall(r.request_hash, r.case_id, r.dimension, r.judge, r.run) for r in records]
    folder.mkdir(parents=True, exist_ok=True)
    with Store(folder / "results.sqlite") as store:
        store.set_meta("rubric", rubric.model_dump(mode="json"))
        store.set_meta("config", config.to_json())
        store.set_cases(c.model_dump(mode="json") for c in cases)
        store.set_plan(planned)
        for r in records:
            store.record(r)
    return folder


class ModeServer:
    """A local OpenAI-compatible endpoint in a thread of its own: ``POST /<mode>/v1/chat/completions`` is
    answered by :meth:`answer` (a subclass says how, per mode). Use as a context manager; ``url(mode)`` is
    the ``api_base`` of a judge that talks to that mode."""

    #: seconds the server lives at most (a test that forgets to stop it does not leave it running)
    lifetime_s = 300.0

    def __init__(self) -> None:
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    def url(self, mode: str | int) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/v1"

    async def answer(self, mode: str, body: dict[str, Any]) -> web.StreamResponse:
        raise NotImplementedError

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        return await self.answer(request.match_info["mode"], await request.json())

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        app = web.Application()
        app.router.add_post("/{mode}/v1/chat/completions", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        assert isinstance(site._server, asyncio.Server)  # started: it listens
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), self.lifetime_s)
        await runner.cleanup()

    def __enter__(self) -> Self:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


_T = TypeVar("_T")


def present(value: _T | None) -> _T:
    """``value``, asserted not None: a count or score a test expects set."""
    assert value is not None
    return value


def all_present(values: Iterable[_T | None]) -> list[_T]:
    """``values`` as a list, each asserted not None: for sums over stored counts a test expects set."""
    out: list[_T] = []
    for value in values:
        assert value is not None
        out.append(value)
    return out


def as_stored(records: Iterable[CallRecord]) -> list[StoredCall]:
    """``records`` as :meth:`Store.calls` reads them back (a :class:`StoredCall` each, the same values): what the
    analysis takes, for a run built in memory."""
    return [StoredCall(**{f: getattr(r, f) for f in StoredCall.__dataclass_fields__ if f != "judgment"},
                       judgment=None if r.judgment is None else from_judgment(r.judgment)) for r in records]


_K = TypeVar("_K")


def all_present_values(mapping: Mapping[_K, _T | None]) -> dict[_K, _T]:
    """``mapping`` as a dict, each value asserted not None."""
    return dict(zip(mapping, all_present(mapping.values()), strict=True))


def stored_labels(folder: Path, reviewer: str | None = None) -> list[HumanLabelRecord]:
    """The human labels stored in ``folder``'s run (one reviewer's, or everyone's), read without writing."""
    with Store.open_existing(folder, read_only=True) as store:
        return store.human_labels(reviewer=reviewer)


def review_client(review: ReviewRun, reviewer: str, lang: str = "en") -> tuple[TestClient, str]:
    """A signed-in session of ``reviewer`` on the review app of ``review`` (solo: no team, so it may adjudicate),
    and its CSRF token."""
    from starlette.testclient import TestClient

    from consensus_eval.review.app import create_app

    app, sessions = create_app(review, reviewer=reviewer, lang=lang)
    c = TestClient(app, base_url="http://127.0.0.1:8765")
    assert c.get(f"/?token={sessions.token}", follow_redirects=False).status_code == 303
    return c, c.get("/").text.split('name="csrf-token" content="')[1].split('"')[0]


def spot_parts(run: Path) -> dict[str, str]:
    """The run's spot check: case id -> its part (``tuning`` / ``heldout``), read from the store's table."""
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(run / "results.sqlite")) as con:
        return dict(con.execute("SELECT case_id, part FROM spot_checks").fetchall())
