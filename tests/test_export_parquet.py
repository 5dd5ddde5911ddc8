"""`export RUN --parquet DIR` (docs/scale.md): judgments and consensus as Parquet, read back with pyarrow and
checked value by value against the run's judgments.jsonl and consensus.csv, for each rubric kind."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from consensus_eval import InputError, _parallel, api
from consensus_eval._parallel import can_fork
from consensus_eval.analysis import derived
from consensus_eval.cli import app
from consensus_eval.execution.store import STORE_NAME, PlannedCall, PlanOrderError, Store
from consensus_eval.execution.stored_run import Span, read_stored, read_stored_by_cases, spans
from tests.big_run import build_big_run

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
from consensus_eval.output import parquet  # noqa: E402  (needs pyarrow only when called)
from consensus_eval.output.parquet import write_parquet  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NESTED = ("deductions", "fixed_penalties", "verdicts", "evidence")


@pytest.fixture
def run(kind_run: Path) -> Path:
    """A run of each rubric kind, offline (conftest's ``kind_run``)."""
    return kind_run


def _item(item: dict[str, Any]) -> dict[str, Any]:
    """A nested item of judgments.jsonl as judgments.parquet holds it: its grounding as kind and score."""
    g = item.get("grounding")
    return {**{k: v for k, v in item.items() if k not in ("grounding", "dropped")},
            "grounding": g["kind"] if g else None, "grounding_score": g["score"] if g else None,
            "dropped": item.get("dropped", False)}


def test_judgments_parquet_holds_every_field_of_judgments_jsonl(run: Path, tmp_path: Path) -> None:
    paths = api.export_parquet(run, tmp_path / "pq")
    assert [p.name for p in paths] == ["judgments.parquet", "consensus.parquet"]
    table = pq.read_table(tmp_path / "pq" / "judgments.parquet")
    lines = [json.loads(x) for x in (run / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = table.to_pylist()
    assert len(rows) == len(lines) > 0
    kinds_seen = set()
    for line, row in zip(lines, rows, strict=True):
        assert set(line) <= set(table.schema.names), set(line) - set(table.schema.names)   # nothing left out
        for key, value in line.items():
            if key in NESTED:
                assert row[key] == [_item(i) for i in value], (key, line["request_hash"])
                kinds_seen |= {key} if value else set()
            else:
                assert row[key] == value, (key, line["request_hash"])
        for key in set(NESTED) - set(line):   # another kind's lists: empty, never null
            assert row[key] == []
    # each kind's own items are there, with their grounding
    assert kinds_seen & {"deductions", "verdicts", "evidence"}
    assert any(i["grounding"] for r in rows for k in NESTED for i in r[k])
    # the types are the schema's whatever the values (a rating column with no rating is int32 all the same)
    assert table.schema.field("rating").type == pa.int32() and table.schema.field("stars").type == pa.int8()
    assert table.schema.field("deductions").type.value_type.field("points").type == pa.float64()


def _cell(kind: Any, text: str) -> Any:
    if pa.types.is_list(kind):
        return text.split("; ") if text else []
    if text == "":
        return None
    if pa.types.is_floating(kind):
        return float(text)
    if pa.types.is_boolean(kind):
        return bool(int(text))
    if pa.types.is_integer(kind):
        return int(text)
    return text


def test_consensus_parquet_is_consensus_csv_typed(run: Path, tmp_path: Path) -> None:
    api.export_parquet(run, tmp_path / "pq")
    table = pq.read_table(tmp_path / "pq" / "consensus.parquet")
    with (run / "consensus.csv").open(encoding="utf-8", newline="") as f:
        sheet = list(csv.reader(f))
    assert table.schema.names == sheet[0]
    types = {f.name: f.type for f in table.schema}
    expected = [{name: _cell(types[name], cell) for name, cell in zip(sheet[0], row, strict=True)} for row in sheet[1:]]
    got = table.to_pylist()
    # the CSV rounds to 4 decimals: numbers agree to that
    for want, have in zip(expected, got, strict=True):
        for name, value in want.items():
            if isinstance(value, float):
                assert have[name] == pytest.approx(value, abs=5e-5), name
            else:
                assert have[name] == value, name
    assert len(got) == len(expected) > 0
    assert types["flagged"] == pa.bool_() and types["n_judges"] == pa.int32()


def test_export_on_the_command_line(run: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["export", str(run), "--parquet", str(tmp_path / "wh")])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert f"wrote {tmp_path / 'wh' / 'judgments.parquet'}, {tmp_path / 'wh' / 'consensus.parquet'}" in said
    assert not list((tmp_path / "wh").glob(".*tmp"))
    # a path that is a file is refused, saying so; nothing is written
    (tmp_path / "file").write_text("x", encoding="utf-8")
    res = CliRunner().invoke(app, ["export", str(run), "--parquet", str(tmp_path / "file")])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "file: is a file, not a folder; --parquet names the folder" in said


def test_without_pyarrow_export_says_which_extra_to_install(run: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)   # import pyarrow raises ImportError
    with pytest.raises(InputError, match=r"pip install 'consensus-eval\[parquet\]'"):
        api.export_parquet(run, tmp_path / "pq")
    assert not (tmp_path / "pq").exists()


# ------------------------------------------------------------------ a few cases at a time (api.PARQUET_CASES)


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.parquet"))}


def _same_as_whole(run: Path, written: Path, whole: Path) -> None:
    """``written`` holds the two files, and only them, with the bytes written from the whole run read at once into
    ``whole`` (what export did before it read cases in parts): no temporary file left."""
    write_parquet(api.load_run(run, replies=False), whole)
    assert _digests(written) == _digests(whole)
    assert sorted(p.name for p in written.iterdir()) == ["consensus.parquet", "judgments.parquet"]


def _count_parts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of cases of each part export reads in this process, as it reads them."""
    parts: list[int] = []
    real = derived.read_run_by_cases

    def counted(store: Store, per_batch: int = 2000, **kw: Any) -> Any:
        for part in real(store, per_batch, **kw):
            parts.append(len(part.cases))
            yield part

    monkeypatch.setattr(api, "read_run_by_cases", counted)
    return parts


def _forked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Export's spans read in two processes whatever the run's size (skipped where this machine cannot fork)."""
    if not can_fork():
        pytest.skip("this machine cannot fork a second process (one core, no fork)")
    monkeypatch.setattr(api, "MIN_CASES", 1)
    monkeypatch.setattr(_parallel, "MIN_CASES", 1)
    monkeypatch.setattr(api, "usable_cpus", lambda: 2)


def test_export_a_few_cases_at_a_time_writes_the_same_bytes(run: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """3 cases a part (the deductions run's 16 cases: 6 parts, the last of 1): every call's row once, in plan order,
    and every case's consensus row once, the same files as the whole run gives."""
    parts = _count_parts(monkeypatch)
    monkeypatch.setattr(api, "PARQUET_CASES", 3)
    api.export_parquet(run, tmp_path / "parts")
    n = len(api.load_run(run).cases)
    assert n > 6 and parts == [3] * (n // 3) + ([n % 3] if n % 3 else [])
    _same_as_whole(run, tmp_path / "parts", tmp_path / "whole")


def test_parts_are_the_stored_run_cut_by_cases(tmp_path: Path) -> None:
    """read_stored_by_cases: each case once, in order, with its calls in plan order and its
    missing calls; together exactly read_stored's records. No part holds more than per_batch cases."""
    folder = tmp_path / "run"
    build_big_run(folder, n_cases=23, n_judges=2)
    with Store.open_existing(folder) as store:
        plan = store.plan()
        # two calls never stored (an interrupted run): their cases are counted missing in their part
        store.set_plan([*plan, PlannedCall("x|1", "big-00004", "accuracy", "judge-a", 1),
                        PlannedCall("x|2", "big-00020", "accuracy", "judge-a", 1)])
        whole = read_stored(store, replies=False)
        parts = list(read_stored_by_cases(store, 5, replies=False))
    assert [len(p.cases) for p in parts] == [5, 5, 5, 5, 3]
    assert [c.id for p in parts for c in p.cases] == [c.id for c in whole.cases]
    assert [r.request_hash for p in parts for r in p.records] == [r.request_hash for r in whole.records]
    for p in parts:
        assert {r.case_id for r in p.records} <= {c.id for c in p.cases}
        assert p.planned == whole.planned
    assert {k: v for p in parts for k, v in p.missing.items()} == whole.missing == {"big-00004": 1, "big-00020": 1}


@pytest.mark.parametrize("processes", [1, 2])
def test_a_plan_whose_case_comes_back_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    processes: int) -> None:
    """A case's calls split in the plan (one call of the first case moved to the end): the reader in parts
    stops with PlanOrderError, and export writes what the whole run gives, nothing half written. In two processes
    the second span meets the call: its error comes back from the forked process."""
    if processes == 2:
        _forked(monkeypatch)
    monkeypatch.setattr(api, "PARQUET_CASES", 2)
    folder = tmp_path / "run"
    build_big_run(folder, n_cases=9, n_judges=2)
    with Store.open_existing(folder) as store:
        plan = store.plan()
        store.set_plan([*plan[1:], plan[0]])
        with pytest.raises(PlanOrderError, match="big-00000"):
            list(read_stored_by_cases(store, 2))
        assert len(spans(store, processes, 2)) == processes
    api.export_parquet(folder, tmp_path / "parts")
    _same_as_whole(folder, tmp_path / "parts", tmp_path / "whole")


def test_a_plan_that_grows_is_refused_before_any_part(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    build_big_run(folder, n_cases=3, n_judges=2)
    with Store.open_existing(folder) as store:
        config = {**store.get_meta("config"), "runs": "adaptive"}
        store.set_meta("config", config)
        parts = read_stored_by_cases(store, 1)
        with pytest.raises(PlanOrderError, match="grows"):
            next(parts)


def test_plan_rows_out_of_plan_order_are_refused(tmp_path: Path) -> None:
    """Store.calls_in_plan_order walks the plan's rows as written; rows whose positions are not increasing (not
    written by set_plan) are a PlanOrderError, not calls given out of order."""
    folder = tmp_path / "run"
    build_big_run(folder, n_cases=2, n_judges=2)
    with sqlite3.connect(folder / STORE_NAME) as db:
        db.execute("UPDATE plan SET position = 100 - position WHERE position < 2")
    with Store.open_existing(folder) as store, pytest.raises(PlanOrderError, match="not in plan order"):
        list(store.calls_in_plan_order(chunk=1))


def test_export_in_two_processes_writes_the_same_bytes(run: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases cut in two spans (a whole number of 3-case parts each), the second read by a forked process whose
    judgments come back through a temporary Arrow file: the files are those of the whole run, no temporary file is
    left, and this process read only the first span's parts."""
    parts = _count_parts(monkeypatch)
    _forked(monkeypatch)
    monkeypatch.setattr(api, "PARQUET_CASES", 3)
    api.export_parquet(run, tmp_path / "two")
    n = len(api.load_run(run).cases)
    first = math.ceil(math.ceil(n / 2) / 3) * 3   # half the cases, rounded up to whole parts
    assert parts == [3] * (first // 3)
    _same_as_whole(run, tmp_path / "two", tmp_path / "whole")


def test_spans_cut_at_whole_parts_and_cover_the_plan(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    build_big_run(folder, n_cases=10, n_judges=2)
    with Store.open_existing(folder) as store:
        assert spans(store, 1, 2) == [Span()]
        cut = spans(store, 3, 2)   # 10 cases in 3: 4 a span (2 parts of 2), the last 2
        assert [s.cases for s in cut] == [(0, 4), (4, 8), (8, None)]
        # 6 calls a case (2 judges x 3 dimensions), the plan's rowids from 1
        assert [s.rows for s in cut] == [(0, 25), (25, 49), (49, None)]
        whole = [r.request_hash for r in store.calls(replies=False)]
        read = [r.request_hash for s in cut for p in read_stored_by_cases(store, 2, span=s) for r in p.records]
        assert read == whole
        assert spans(store, 20, 1)[-1].cases == (9, None)   # never more spans than cases


#: an export in two processes (3-case parts) each of which stops after its first part until it is interrupted:
#: ``started.<pid>`` says it got there
_INTERRUPTED = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from consensus_eval import _parallel, api
from consensus_eval.analysis import derived

folder = Path({folder!r})
real = derived.read_run_by_cases

def stalls(store, per_batch=2000, **kw):
    import os
    for k, part in enumerate(real(store, per_batch, **kw)):
        yield part
        if k == 0:
            (folder / f"started.{{os.getpid()}}").touch()
            for _ in range(6000):   # 60 s at most: interrupted long before
                time.sleep(0.01)

api.MIN_CASES = _parallel.MIN_CASES = 1
api.PARQUET_CASES = 3
api.usable_cpus = lambda: 2
api.read_run_by_cases = stalls
if {cli!r}:   # the command a user runs, as a scheduler or a container stops it
    from consensus_eval.cli import app
    app(["export", str(folder / "run"), "--parquet", str(folder / "parquet")], prog_name="consensus-eval")
else:
    api.export_parquet(folder / "run", folder / "parquet")
"""


@pytest.mark.parametrize(("sig", "cli"), [(signal.SIGINT, False), (signal.SIGKILL, False), (signal.SIGTERM, True),
                                          (signal.SIGINT, True)],
                         ids=["SIGINT", "SIGKILL", "cli-SIGTERM", "cli-SIGINT"])
def test_an_export_in_two_processes_stopped_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   sig: int, cli: bool) -> None:
    """SIGINT (Ctrl-C) while both processes are at work (each past its first part): the export ends by the signal,
    the forked process is stopped and gone, and the folder holds neither parquet file nor any temporary file (the
    child's Arrow file, the half-written parquet). SIGKILL: the forked process stops too (the system's
    parent-death signal) and removes its Arrow file; only the killed process's half-written parquet is left, under
    a hidden temporary name, as any file being written by a process killed so. The command (``cli``) stopped by
    SIGTERM, as a scheduler or a container stops it, or by Ctrl-C: exit 130, saying so, nothing left."""
    _forked(monkeypatch)   # skipped where this machine cannot fork
    build_big_run(tmp_path / "run", n_cases=12, n_judges=2)
    (tmp_path / "parquet").mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _INTERRUPTED.format(root=str(ROOT), folder=str(tmp_path), cli=cli)],
                            stderr=subprocess.PIPE, text=True)
    started: list[Path] = []
    for _ in range(6000):   # both processes past their first part (60 s at most)
        started = list(tmp_path.glob("started.*"))
        if len(started) == 2 or proc.poll() is not None:
            break
        time.sleep(0.01)
    assert len(started) == 2, proc.stderr.read() if proc.stderr else ""
    assert len(list((tmp_path / "parquet").iterdir())) == 2   # the child's Arrow file, the parquet being written
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    if cli:
        assert proc.returncode == 130, err
        assert "interrupted" in err and "Traceback" not in err, err
    else:
        assert proc.returncode == -sig, err
    child = next(pid for pid in (int(p.name.split(".")[1]) for p in started) if pid != proc.pid)
    for _ in range(6000):   # a child's exit follows its parent's (60 s at most)
        if _state(child) in ("gone", "Z"):
            break
        time.sleep(0.01)
    assert _state(child) in ("gone", "Z")
    left = [p.name for p in (tmp_path / "parquet").iterdir()]
    assert left == ([f".judgments.parquet.{proc.pid}.tmp"] if sig == signal.SIGKILL else [])


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_the_rows_of_a_whole_run_are_made_a_batch_at_a_time(run: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """write_parquet of a whole run (the fallback of a plan that grew) turns BATCH_ROWS calls at a time into Arrow,
    never every call's row at once (6.3 GB at 100,000 x 4); patched to 7 rows, the same rows in the file."""
    sizes: list[int] = []
    real = parquet._judgment_batch

    def counted(pa_: Any, schema: Any, rows: list[dict[str, Any]]) -> Any:
        sizes.append(len(rows))
        return real(pa_, schema, rows)

    monkeypatch.setattr(parquet, "BATCH_ROWS", 7)
    monkeypatch.setattr(parquet, "_judgment_batch", counted)
    results = api.load_run(run, replies=False)
    write_parquet(results, tmp_path / "pq")
    assert max(sizes) == 7 and sum(sizes) == len(results.records)
    table = pq.read_table(tmp_path / "pq" / "judgments.parquet")
    assert table.column("request_hash").to_pylist() == [r.request_hash for r in results.records]
    assert pq.ParquetFile(tmp_path / "pq" / "judgments.parquet").metadata.row_group(0).num_rows == 7


def test_a_plan_in_another_order_than_the_cases_is_one_span_and_read_whole(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases' calls in the plan last case first: the cuts' first calls are not in the cases' order, so spans
    gives the whole run as one span, whose reader refuses it (the first case's calls come back last); export falls
    back to the whole run and writes its bytes."""
    monkeypatch.setattr(api, "PARQUET_CASES", 2)
    folder = tmp_path / "run"
    build_big_run(folder, n_cases=9, n_judges=2)
    with Store.open_existing(folder) as store:
        plan = store.plan()
        by_case = [plan[k:k + 6] for k in range(0, len(plan), 6)]   # 2 judges x 3 dimensions a case
        store.set_plan([c for calls in reversed(by_case) for c in calls])
        assert spans(store, 3, 2) == [Span()]
        with pytest.raises(PlanOrderError):
            list(read_stored_by_cases(store, 2))
    api.export_parquet(folder, tmp_path / "parts")
    _same_as_whole(folder, tmp_path / "parts", tmp_path / "whole")
