"""The reliability report computed a part of the run at a time (:class:`ReliabilityColumns`, what a run of any size
is analysed with) is the report of the whole run, to the last bit: for each rubric kind, with the runs of
``important_runs`` (within-judge figures, decision studies of uneven runs), in parts of one and of three cases."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from consensus_eval import StateError, _parallel, api
from consensus_eval._parallel import can_fork
from consensus_eval.analysis.alpha import DEFAULT_SEED
from consensus_eval.analysis.consensus import of_run as consensus_of_run
from consensus_eval.analysis.decision import DecisionColumns, decision_studies
from consensus_eval.analysis.derived import read_run, read_run_by_cases
from consensus_eval.analysis.judge_quality import QualityCounts, judge_quality
from consensus_eval.analysis.reliability import ReliabilityColumns, reliability_report
from consensus_eval.analysis.usage import UsageSums
from consensus_eval.cli import app
from consensus_eval.execution.store import Store, StoredCall
from consensus_eval.execution.stored_run import StoredRun
from tests.big_run import build_big_run

ROOT = Path(__file__).resolve().parents[1]

@pytest.fixture
def run(kind_run: Path) -> Path:
    """A run of each rubric kind, offline (conftest's ``kind_run``)."""
    return kind_run


def _by_parts(folder: Path, per_part: int, n_boot: int) -> tuple[dict[str, object], int]:
    """The report of ``folder``'s run read ``per_part`` cases at a time, as reliability.json holds it, and the parts."""
    with Store.open_existing(folder, read_only=True) as store:
        columns: ReliabilityColumns | None = None
        parts = 0
        for part in read_run_by_cases(store, per_part, replies=False):
            columns = columns or ReliabilityColumns(part)
            columns.add(part, consensus_of_run(part))
            parts += 1
    assert columns is not None
    return columns.report(n_boot, 7).to_json(), parts


def _whole(folder: Path, n_boot: int, seed: int = 7) -> dict[str, object]:
    with Store.open_existing(folder, read_only=True) as store:
        whole = read_run(store, replies=False)
    return reliability_report(whole, consensus_of_run(whole), n_boot, seed).to_json()


@pytest.mark.parametrize("per_part", [1, 3])
def test_the_report_of_a_run_in_parts_is_the_report_of_the_whole_run(run: Path, per_part: int) -> None:
    whole = _whole(run, 200)
    parts, n = _by_parts(run, per_part, 200)
    assert json.dumps(parts, sort_keys=True) == json.dumps(whole, sort_keys=True)
    assert n == -(-whole["n_cases"] // per_part) > 1     # type: ignore[operator]
    # what the comparison covers: intervals, within-judge figures and decision studies of runs of every length
    assert all(a["ci"] is not None for a in whole["across_judges"].values())  # type: ignore[attr-defined]
    assert whole["decision"] and whole["judge_quality"]
    if run.parent.name.startswith("deductions"):   # its important cases have 3 runs
        assert whole["within_judge"] and whole["stars"] and whole["categories"]


def test_a_large_run_in_parts_past_the_joint_bootstrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of 7 cases of a 60-case run, with every figure's bootstrap taking the joint pass over its resamples
    (the path of runs above ~67,000 cases, forced here): the same report."""
    from consensus_eval.analysis import alpha

    monkeypatch.setattr(alpha, "MAX_WEIGHTS_BYTES", 8)   # no resamples' weights held whole: the joint pass
    folder = build_big_run(tmp_path / "run", 60, 3)
    assert json.dumps(_by_parts(folder, 7, 50)[0], sort_keys=True) == json.dumps(_whole(folder, 50), sort_keys=True)


def test_judge_quality_and_decision_studies_added_a_part_at_a_time(run: Path) -> None:
    with Store.open_existing(run, read_only=True) as store:
        whole = read_run(store, replies=False)
        parts = list(read_run_by_cases(store, 2, replies=False))
    counts, decision = QualityCounts(whole.judges), DecisionColumns(whole.judges,
                                                                    [d.id for d in whole.rubric.dimensions])
    for part in reversed(parts):   # counts: in any order
        counts.add(part)
    for part in parts:
        decision.add(part, consensus_of_run(part))
    assert counts.quality() == judge_quality(whole)
    assert decision.studies() == decision_studies(whole, consensus_of_run(whole))


def _counted_parts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The cases of each part the API reads (api.read_run_by_cases counted), 2 cases a part."""
    seen: list[int] = []
    real = read_run_by_cases

    def counted(*args: object, **kw: object) -> Iterator[StoredRun]:
        for part in real(*args, **kw):  # type: ignore[arg-type]
            seen.append(len(part.cases))
            yield part

    monkeypatch.setattr(api, "read_run_by_cases", counted)
    monkeypatch.setattr(api, "PARQUET_CASES", 2)
    return seen


def test_reliability_json_of_a_run_without_labels_is_read_in_parts(run: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    folder = Path(shutil.copytree(run, tmp_path / "run"))
    parts = _counted_parts(monkeypatch)
    got = CliRunner().invoke(app, ["reliability", str(folder), "--json", "--bootstrap", "100"])
    assert got.exit_code == 0, got.output
    whole = api.load_run(folder, n_boot=100, reuse_saved=False, replies=False).reliability.to_json()
    assert json.loads(got.stdout) == json.loads(json.dumps(whole))
    assert json.loads((folder / "reliability.json").read_bytes()) == json.loads(got.stdout)
    assert len(parts) > 1 and max(parts) == 2 and sum(parts) == whole["n_cases"]


def test_reliability_of_a_run_with_a_spot_check_reads_it_whole(run: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    folder = Path(shutil.copytree(run, tmp_path / "run"))
    api.spot_check(folder, 3, seed=1)
    parts = _counted_parts(monkeypatch)
    report = api.reliability(folder, n_boot=0)
    assert parts == []   # the validity section reads the sampled cases' calls: the run read whole
    assert report.validity is not None
    assert report.to_json() == api.load_run(folder, n_boot=0, reuse_saved=False).reliability.to_json()


def test_reliability_in_two_processes_is_the_report_of_one(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases in two spans, the second read by a forked process whose columns come back: the same report."""
    if not can_fork():
        pytest.skip("this machine cannot fork a second process (one core, no fork)")
    monkeypatch.setattr(api, "MIN_CASES", 1)
    monkeypatch.setattr(_parallel, "MIN_CASES", 1)
    monkeypatch.setattr(api, "usable_cpus", lambda: 2)
    monkeypatch.setattr(api, "PARQUET_CASES", 2)
    real_fork, forked = os.fork, []

    def counting_fork() -> int:
        pid = real_fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", counting_fork)
    two = api.reliability(run, n_boot=100).to_json()
    monkeypatch.setattr(os, "fork", real_fork)
    assert len(forked) == 1
    assert json.dumps(two, sort_keys=True) == json.dumps(_whole(run, 100, seed=DEFAULT_SEED), sort_keys=True)


def _call(judge: str, cost: float) -> StoredCall:
    return StoredCall(request_hash=f"{judge}{cost}", case_id="c", dimension="d", judge=judge, run=0, status="ok",
                      cost=cost)


def test_usage_summed_apart_continues_to_the_same_float() -> None:
    costs = [1e16, 1.0, 1.0, -1e16, 0.1, 0.2, 0.3, 1e-9]
    calls = [_call("a" if k % 3 else "b", c) for k, c in enumerate(costs)]
    one = UsageSums()
    one.add(calls)
    first, later = UsageSums(), UsageSums(keep_costs=True)
    first.add(calls[:3])
    later.add(calls[3:])
    naive = {j: first.sums[j][7] + later.sums[j][7] for j in first.sums}
    first.merge(later)
    assert first.sums == one.sums
    assert naive != {j: t[7] for j, t in one.sums.items()}   # adding the halves' sums would not give the same float
    with pytest.raises(StateError):
        first.merge(UsageSums())
