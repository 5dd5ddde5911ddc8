"""The Python API and the one-read rebuild: a run is read from its store once, every score derived once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import EXAMPLES


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count store openings, reads of the calls table, and score derivations."""
    import consensus_eval.domain.scoring as scoring_mod
    from consensus_eval.domain.scoring import DimensionScore
    from consensus_eval.execution.store import Store, StoredCall

    counts: Counter[str] = Counter()
    real_init, real_calls, real_derive = Store.__init__, Store.calls, scoring_mod.derive

    def init(self: Store, *a: Any, **k: Any) -> None:
        counts["store opened"] += 1
        real_init(self, *a, **k)

    def calls(self: Store, *a: Any, **k: Any) -> list[StoredCall]:
        counts["calls read"] += 1
        return real_calls(self, *a, **k)

    def derive(*a: Any, **k: Any) -> DimensionScore:
        counts["derived"] += 1
        return real_derive(*a, **k)

    monkeypatch.setattr(Store, "__init__", init)
    monkeypatch.setattr(Store, "calls", calls)
    monkeypatch.setattr(scoring_mod, "derive", derive)
    return counts


def test_score_reads_the_store_once_and_derives_each_judgment_once(tmp_path: Path, counted: Counter[str]) -> None:
    from consensus_eval.cli import app

    res = CliRunner().invoke(app, ["score", str(EXAMPLES), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    # 16 cases x 3 dimensions x the rules judge: 48 judgments, one read of the store, each distinct
    # scoring input derived once (judgments that score alike share their score: domain/scoring.py's Deriver)
    seen = dict(counted)   # before the helper below opens the store again
    assert seen == {"store opened": 1, "calls read": 1, "derived": _distinct_inputs(tmp_path / "out")}
    assert 0 < seen["derived"] <= 48
    for name in ("judgments.jsonl", "consensus.csv", "consensus.jsonl", "reliability.json", "report.md", "report.html"):
        assert (tmp_path / "out" / name).is_file()


def test_report_and_audit_read_the_store_once(tmp_path: Path, counted: Counter[str]) -> None:
    from consensus_eval import evaluate
    from consensus_eval.cli import app

    evaluate(EXAMPLES, out=tmp_path / "out", n_boot=0)
    for command in (["report", str(tmp_path / "out")], ["audit", str(tmp_path / "out")]):
        counted.clear()
        res = CliRunner().invoke(app, command)
        assert res.exit_code == 0, res.output
        seen = dict(counted)
        assert seen == {"store opened": 1, "calls read": 1, "derived": _distinct_inputs(tmp_path / "out")}, command


def _distinct_inputs(folder: Path) -> int:
    """How many distinct scoring inputs (dimension, deductions, fixed penalties, claims) the run's calls have."""
    from consensus_eval.execution.store import Store

    with Store.open_existing(folder, read_only=True) as store:
        calls = [(c.dimension, c.judgment) for c in store.calls() if c.judgment is not None]
    assert len(calls) == 48
    return len({(dim, tuple((d.category, d.type, d.points) for d in j.deductions),
                 tuple(p.id for p in j.fixed_penalties), j.claimed_score, j.claimed_stars)
                for dim, j in calls})


def test_load_run_returns_typed_results(tmp_path: Path) -> None:
    from consensus_eval import Results, evaluate, load_run
    from consensus_eval.analysis.reliability import ReliabilityReport

    first = evaluate(EXAMPLES, out=tmp_path / "out", n_boot=0)
    again = load_run(tmp_path / "out")
    assert isinstance(again, Results) and isinstance(again.reliability, ReliabilityReport)
    assert again.reliability_source == "reliability.json"          # the file the run wrote describes it
    assert [c.model_dump() for c in again.consensus] == [c.model_dump() for c in first.consensus]
    assert again.reliability.model_dump() == first.reliability.model_dump()
    assert [c.id for c in again.cases] == [c.id for c in first.cases] and len(again.records) == 48
    assert again.usage["rules"].ok == 48 and again.usage["rules"].cost == 0.0


def test_cases_and_config_as_objects(tmp_path: Path) -> None:
    from consensus_eval import Case, EvalConfig, RulesJudgeConfig, evaluate
    from consensus_eval.domain.cases import load_cases

    cases = load_cases(EXAMPLES).cases[:2]
    as_dicts = [c.model_dump() for c in cases]
    cfg = EvalConfig(judges=[RulesJudgeConfig(name="rules")])
    a = evaluate(cases, cfg, out=tmp_path / "a", n_boot=0)
    b = evaluate(as_dicts, {"judges": [{"name": "rules"}]}, out=tmp_path / "b", n_boot=0)
    assert [c.total for c in a.consensus] == [c.total for c in b.consensus] and len(a.consensus) == 2
    assert all(isinstance(c, Case) for c in a.cases)


def test_bad_objects_are_input_errors(tmp_path: Path) -> None:
    from consensus_eval import InputError, evaluate

    with pytest.raises(InputError, match=r"case 0: .*record"):
        evaluate([{"id": "x", "conversation": "医生：你好"}], out=tmp_path / "o")
    with pytest.raises(InputError, match="invalid config:\n  judges"):
        evaluate(EXAMPLES, {"judges": []}, out=tmp_path / "o")


def test_a_version_1_store_is_read_as_is_and_upgraded_by_the_next_score(tmp_path: Path) -> None:
    import sqlite3

    from consensus_eval import evaluate, load_run
    from consensus_eval.execution.store import SCHEMA_VERSION

    first = evaluate(EXAMPLES, out=tmp_path / "out", n_boot=0)
    db = sqlite3.connect(tmp_path / "out" / "results.sqlite")
    db.execute("ALTER TABLE calls DROP COLUMN error_kind")
    db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    db.execute("PRAGMA user_version = 0")        # as a store before schema 8: its version in meta only
    db.commit()
    db.close()

    def schema() -> tuple[str, list[str]]:
        con = sqlite3.connect(tmp_path / "out" / "results.sqlite")
        try:
            version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
            return version, [r[1] for r in con.execute("PRAGMA table_info(calls)")]
        finally:
            con.close()

    again = load_run(tmp_path / "out")                     # read-only: an upgraded copy, the file left as it is
    assert [c.total for c in again.consensus] == [c.total for c in first.consensus]
    assert schema()[0] == "1" and "error_kind" not in schema()[1]
    resumed = evaluate(EXAMPLES, out=tmp_path / "out", n_boot=0)   # a writer upgrades it in place
    assert resumed.progress is not None and resumed.progress.skipped == 48 and resumed.progress.done == 0
    assert schema() == (str(SCHEMA_VERSION), schema()[1]) and "error_kind" in schema()[1]
