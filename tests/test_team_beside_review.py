"""docs/limits.md, 'One writer per run': the team is changed while the review server runs. `reviewers add /
assign / remove` (and `add --new-key`) are short transactions beside the server (the lock's ``team`` mode), never
beside a command that writes data (``exclusive``); the server (``review``) is one per run. A reviewer removed or
given a new link has their next save refused by the store itself, nothing stored."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from consensus_eval import api
from consensus_eval.execution.labels import Change, LabelRefused
from consensus_eval.execution.lock import LOCK_NAME, REVIEW_LOCK_NAME, TEAM_CHANGE, Mode, RunBusy, acquire, release
from consensus_eval.execution.store import STORE_NAME, HumanLabelRecord, Store, key_hash
from tests.bad_input_harness import EXAMPLES, scored_run_in
from tests.helpers import cli_run, lock_held_elsewhere

ROOT = Path(__file__).resolve().parents[1]
@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scored_run_in(tmp_path_factory.mktemp("team-beside-review"))


@pytest.fixture
def run(scored: Path, tmp_path: Path) -> Path:
    shutil.copytree(scored, tmp_path / "run")
    return tmp_path / "run"


def events(run: Path) -> int:
    """The label events of the run's store (reveals aside), read without writing."""
    con = sqlite3.connect(f"file:{run / STORE_NAME}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT COUNT(*) FROM label_events WHERE op != 'reveal'").fetchone()[0])
    finally:
        con.close()


@contextmanager
def serving(run: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`consensus-eval review RUN --port P` in a process of its own: the process and the base URL it printed; stopped
    with Ctrl-C after the body."""
    env = {**os.environ, "COLUMNS": "300", "PYTHONUNBUFFERED": "1"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "consensus_eval.cli", "review", str(run), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        m = re.search(r"open (http://127\.0\.0\.1:\d+)/", line)
        if m:
            break
    else:
        proc.wait()
        raise AssertionError("the review server did not start:\n" + "".join(seen))
    try:
        yield proc, m.group(1)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate()


def personal(base: str, key: str) -> tuple[httpx.Client, str]:
    """A browser session opened with a personal link: the client (its cookie) and the page's CSRF token."""
    c = httpx.Client(base_url=base)
    assert c.get(f"/?key={key}").status_code == 303   # a session, and the key dropped from the address
    page = c.get("/")
    assert page.status_code == 200
    return c, page.text.split('name="csrf-token" content="')[1].split('"')[0]


def save(c: httpx.Client, csrf: str, value: int, dimension: str = "accuracy") -> httpx.Response:
    return c.post("/api/label", json={"op": "score", "case": 1, "dimension": dimension, "value": value},
                  headers={"X-CSRF-Token": csrf})


def test_the_team_changes_beside_a_running_review_server_and_ended_access_stores_nothing(run: Path) -> None:
    keys = {n: api.add_reviewer(run, n)[1] for n in ("dr_alice", "dr_bob")}
    env = {**os.environ, "COLUMNS": "300"}
    cases = run.parent / "cases.jsonl"
    cases.write_text(EXAMPLES.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    with serving(run) as (proc, base):
        alice, csrf_a = personal(base, keys["dr_alice"])
        bob, csrf_b = personal(base, keys["dr_bob"])
        assert save(alice, csrf_a, 30).status_code == 200 and save(bob, csrf_b, 28).status_code == 200
        assert events(run) == 2

        # the real CLI, in processes of their own, while the server holds the run: each a short transaction
        done = cli_run(["reviewers", "remove", "dr_alice", "--run", str(run)], cwd=ROOT, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "dr_alice is off the team" in done.stdout
        added = cli_run(["reviewers", "add", "dr_bob", "--run", str(run), "--new-key"], cwd=ROOT, env=env)
        assert added.returncode == 0, added.stdout + added.stderr
        new_bob = added.stdout.split("?key=")[1].split()[0]
        carol = cli_run(["reviewers", "add", "dr_carol", "--run", str(run)], cwd=ROOT, env=env)
        assert carol.returncode == 0, carol.stdout + carol.stderr
        assigned = cli_run(["reviewers", "assign", "--run", str(run), "--per-case", "1"], cwd=ROOT, env=env)
        assert assigned.returncode == 0, assigned.stdout + assigned.stderr

        # the removed reviewer's open tab: a clear 403 on its next save, nothing stored; so for the old link of bob
        r = save(alice, csrf_a, 12)
        assert r.status_code == 403 and r.json()["ended"], r.text
        assert "访问已结束" in r.json()["error"] and "未保存任何内容" in r.json()["error"]   # the run is in Chinese
        r = save(bob, csrf_b, 12)
        assert r.status_code == 403 and r.json()["ended"], r.text
        assert events(run) == 2
        assert httpx.get(f"{base}/?key={keys['dr_alice']}").status_code == 403    # the link opens nothing either
        bob2, csrf_b2 = personal(base, new_bob)                                     # bob's new link labels
        assert save(bob2, csrf_b2, 27).status_code == 200 and events(run) == 3

        # what writes data is still refused while the server runs (exit 6, naming the server), nothing written
        with Store.open_existing(run, read_only=True) as store:
            calls = len(store.calls())
        for args in (["score", str(cases), "--out", str(run)],
                     ["human", "import", str(cases), "--run", str(run)],
                     ["review", str(run), "--port", base.rsplit(":", 1)[1]]):
            refused = cli_run(args, cwd=ROOT, env=env)
            assert refused.returncode == 6, refused.stdout + refused.stderr
            assert f"being written by `consensus-eval review` (pid {proc.pid}" in refused.stderr, refused.stderr
        with Store.open_existing(run, read_only=True) as store:
            assert len(store.calls()) == calls and {r.name for r in store.reviewers()} == {"dr_bob", "dr_carol"}
        assert events(run) == 3
    # stopped with Ctrl-C: 130 when the signal ends the command, 0 when uvicorn's own handler caught it first and
    # shut the server down cleanly (seen once in a full run at load ~10; test_review_browser accepts both too)
    assert proc.returncode in (0, 130), proc.returncode
    assert not (run / LOCK_NAME).exists() and not (run / REVIEW_LOCK_NAME).exists()   # a run at rest has no lock


def test_the_store_refuses_a_save_of_a_session_whose_access_ended(run: Path) -> None:
    """The check is in the write's own transaction (not only the page's): a session opened with a key that is no
    longer the reviewer's, or a reviewer no longer on the team, stores nothing."""
    _, key = api.add_reviewer(run, "dr_alice")
    label = HumanLabelRecord(case_id="case-01", dimension="accuracy", reviewer="dr_alice", kind="score", value=30)
    with Store.open_existing(run) as store:
        store.write_labels([Change(label)], source="review", member_key=key_hash(key))
        _, new = api.add_reviewer(run, "dr_alice", new_key=True)
        with pytest.raises(LabelRefused) as e:
            store.write_labels([Change(label.model_copy(update={"value": 20}))], source="review",
                               member_key=key_hash(key))
        assert e.value.code == "access_ended" and "nothing was stored" in str(e.value)
        store.write_labels([Change(label.model_copy(update={"value": 20}))], source="review",
                           member_key=key_hash(new))
        api.remove_reviewer(run, "dr_alice")
        with pytest.raises(LabelRefused):
            store.write_labels([Change(label.model_copy(update={"value": 10}))], source="review",
                               member_key=key_hash(new))
        assert [lb.value for lb in store.human_labels(reviewer="dr_alice")] == [20]
    assert events(run) == 2


@pytest.mark.parametrize(("held", "wanted", "ok"), [
    ("exclusive", "exclusive", False), ("exclusive", "review", False), ("exclusive", "team", False),
    ("review", "exclusive", False), ("review", "review", False), ("review", "team", True),
    ("team", "exclusive", False), ("team", "review", True), ("team", "team", True),
])
def test_which_modes_hold_a_run_together(run: Path, held: Mode, wanted: Mode, ok: bool) -> None:
    """The modes are locks the system enforces between processes: data is written by one command alone; the
    review server (one per run) and team changes share the run."""
    with lock_held_elsewhere(run, f"test {held}", held) as proc:
        if ok:
            hold = acquire(run, "test", mode=wanted)
            assert hold is not None and hold.mode == wanted
            release(hold)
        else:
            with pytest.raises(RunBusy) as e:
                acquire(run, "test", mode=wanted)
            who = TEAM_CHANGE if held == "team" else f"`test {held}` (pid {proc.pid}"
            assert f"being written by {who}" in str(e.value)
    assert proc.returncode == 0
    assert not (run / LOCK_NAME).exists() and not (run / REVIEW_LOCK_NAME).exists()


def test_a_process_serving_the_review_cannot_write_data_under_its_hold(run: Path) -> None:
    hold = acquire(run, "test", mode="review")
    assert hold is not None
    try:
        assert acquire(run, mode="team") is hold and acquire(run) is hold   # a store opened under it shares it
        release(hold)
        release(hold)
        with pytest.raises(RunBusy, match="holds the run for review only"):
            acquire(run, mode="exclusive")
    finally:
        release(hold)
