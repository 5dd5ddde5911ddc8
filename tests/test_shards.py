"""Shards and merge (docs/scale.md): `score --shard K/N` in processes of their own, `merge`, and the merged run
against one process scoring every case; what merge refuses, and why."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from consensus_eval import InputError, api
from consensus_eval.cli import app
from consensus_eval.execution.shards import Shard, case_set_id, select, shard_of
from consensus_eval.execution.store import STORE_NAME, HumanLabelRecord, Store
from tests.big_run import big_cases
from tests.cli_zygote import Zygote
from tests.fake_server import FakeConfig, FakeServer
from tests.helpers import lock_held_elsewhere, write_cases

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "default.yaml"
OUTPUTS = ("consensus.csv", "consensus.jsonl", "judgments.jsonl", "reliability.json", "report.md", "report.html")


def _masked(path: Path) -> str:
    """An output with what a live run measures (latency_s) and the minute the reports were written masked."""
    text = path.read_text(encoding="utf-8")
    text = re.sub(r'"latency_s": [0-9.e+-]+', '"latency_s": null', text)
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "<written>", text)


def _store_rows(db: Path) -> dict[str, Any]:
    """The store's meta, plan and calls, without the calls' live timings (latency_s, finished_at)."""
    con = sqlite3.connect(db)
    try:
        cols = [c[1] for c in con.execute("PRAGMA table_info(calls)") if c[1] not in ("latency_s", "finished_at")]
        return {
            "meta": dict(con.execute("SELECT key, value FROM meta ORDER BY key").fetchall()),
            "plan": con.execute("SELECT * FROM plan ORDER BY position").fetchall(),
            "calls": con.execute(f"SELECT {', '.join(cols)} FROM calls ORDER BY request_hash").fetchall(),
        }
    finally:
        con.close()


def _same_as_one_process(merged: Path, one: Path) -> None:
    for name in OUTPUTS:
        assert _masked(merged / name) == _masked(one / name), name
    a, b = _store_rows(merged / STORE_NAME), _store_rows(one / STORE_NAME)
    assert a["plan"] == b["plan"] and a["calls"] == b["calls"]
    assert a["meta"] == b["meta"]
    # nothing else beside them: the merge's store written under a temporary name left nothing (no record of it)
    assert sorted(p.name for p in merged.iterdir()) == sorted(p.name for p in one.iterdir())


# --------------------------------------------------------------------------- shards


def test_a_case_shard_is_its_id_hash_whatever_the_order_of_the_file() -> None:
    cases = big_cases(2000, seed=1)
    for n in (1, 3, 4, 7):
        parts = [select(cases, Shard(k, n))[0] for k in range(n)]
        ids = [c.id for part in parts for c in part]
        assert sorted(ids) == sorted(c.id for c in cases)   # every case in exactly one shard
        for k, part in enumerate(parts):
            # in file order, and the published rule: SHA-256 of the UTF-8 id, first 8 bytes big-endian, mod N
            assert [c.id for c in part] == [c.id for c in cases if int(__import__("hashlib").sha256(
                c.id.encode()).hexdigest()[:16], 16) % n == k]
        # balanced: 2,000 cases give each shard within 15% of its share
        assert all(abs(len(p) - 2000 / n) <= 0.15 * 2000 / n for p in parts), [len(p) for p in parts]
    reordered = cases[::-1]
    assert {shard_of(c.id, 4) for c in cases[:50]} == {shard_of(c.id, 4) for c in reordered[-50:]}
    assert select(reordered, Shard(1, 4))[0] == select(cases, Shard(1, 4))[0][::-1]
    # the case set's identity is of the content and the order
    assert case_set_id(cases) == case_set_id(list(cases)) != case_set_id(reordered)


@pytest.mark.parametrize(("text", "match"), [
    ("4/4", "numbered 0 to N-1"), ("1/0", "numbered 0 to N-1"), ("-1/4", "expected K/N"), ("a/b", "expected K/N"),
    ("2", "expected K/N"),
])
def test_a_shard_that_is_not_k_of_n_is_refused(text: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        api.prepare(ROOT / "examples" / "cases.jsonl", CONFIG, shard=text)


# --------------------------------------------------------------------------- four shards, four processes


@pytest.mark.slow
def test_four_shards_in_four_processes_merge_into_what_one_process_writes(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    with cases.open("w", encoding="utf-8") as f:
        for c in big_cases(48, seed=2):
            f.write(json.dumps(c.model_dump(mode="json", exclude_none=True), ensure_ascii=False) + "\n")
        f.write('{"id": "bad line"}\n')   # an invalid line, skipped by every shard and by the one process
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    # four processes at once, each forked from a warm one (tests/cli_zygote.py: no seconds of imports)
    procs = [Zygote.popen(["score", str(cases), "--config", str(CONFIG), "--skip-invalid",
                           "--shard", f"{k}/4", "--out", str(tmp_path / f"shard-{k}")],
                          env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(4)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, stderr) in zip(procs, outs, strict=True):
        assert p.returncode == 0, stderr[-2000:]
    sizes = [int(re.search(r"shard \d/4: (\d+) of the 48 cases", o).group(1)) for o, _ in outs]  # type: ignore[union-attr]
    assert sum(sizes) == 48 and all(sizes)

    one = api.run(api.prepare(cases, CONFIG, skip_invalid=True), tmp_path / "one" / "run")
    res = CliRunner().invoke(app, ["merge", *(str(tmp_path / f"shard-{k}") for k in (2, 0, 3, 1)),
                                   "--out", str(tmp_path / "merged" / "run")])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "merged 4 shard(s)" in said and "48 cases, 144 calls, 0 human label(s)" in said
    _same_as_one_process(tmp_path / "merged" / "run", tmp_path / "one" / "run")
    assert len(one.consensus) == 48

    # the merged run is a run like another: scoring the cases into it resumes everything, calls nothing
    again = api.run(api.prepare(cases, CONFIG, skip_invalid=True), tmp_path / "merged" / "run")
    assert again.progress is not None and again.progress.skipped == 144 and again.progress.done == 0


def test_shards_of_a_plan_that_grows_merge_into_what_one_process_writes(tmp_path: Path) -> None:
    """Adaptive runs and a cascade: the merged plan is in one process's order, round by round."""
    cases = write_cases(tmp_path / "cases.jsonl", n=9)
    judge = ("  - {{name: {n}, model: openai/{m}, api_base: '{url}/v1', concurrency: 4, timeout_s: 5,"
             " input_cost_per_token: 0.000001, output_cost_per_token: 0.000002{extra}}}\n")
    with FakeServer(FakeConfig(seed=11, latency_ms=2.0, max_lifetime_s=300)) as srv:
        config = tmp_path / "c.yaml"
        config.write_text(
            "rubric: medical_record\nruns: adaptive\nadaptive: {max_runs: 3, run_spread: 4, run_star_gap: null}\n"
            "consensus: {flag_spread: 6, flag_star_gap: 2}\njudges:\n"
            + judge.format(n="judge-a", m="fake-a", url=srv.url, extra="")
            + judge.format(n="judge-b", m="fake-strict", url=srv.url, extra="")
            + judge.format(n="judge-c", m="fake-lenient", url=srv.url, extra=", stage: 2"), encoding="utf-8")
        one = api.run(api.prepare(cases, config), tmp_path / "one" / "run", n_boot=200)
        assert one.progress is not None and one.progress.rounds >= 3
        for k in range(3):
            shard = api.run(api.prepare(cases, config, shard=f"{k}/3"), tmp_path / f"s{k}", n_boot=200)
            assert shard.progress is not None and not shard.progress.interrupted
    merged = api.merge([tmp_path / f"s{k}" for k in range(3)], tmp_path / "merged" / "run", n_boot=200)
    assert merged.cases == 9 and merged.shards == 3
    # the one process's plan is round by round, not case by case: what the merge must reproduce
    with Store.open_existing(tmp_path / "one" / "run", read_only=True) as s:
        plan = s.plan()
    assert [p.case_id for p in plan] != sorted([p.case_id for p in plan], key=[c.id for c in one.cases].index)
    _same_as_one_process(tmp_path / "merged" / "run", tmp_path / "one" / "run")


def test_a_shard_with_no_case_merges_like_the_others(tmp_path: Path) -> None:
    cases = big_cases(3, seed=9)
    n = 8
    empty = [k for k in range(n) if not select(cases, Shard(k, n))[0]]
    assert empty, "3 cases in 8 shards leave some shard empty"
    for k in range(n):
        api.run(api.prepare(cases, CONFIG, shard=Shard(k, n)), tmp_path / f"s{k}", n_boot=100)
    with Store.open_existing(tmp_path / f"s{empty[0]}", read_only=True) as s:
        assert s.plan_size() == 0 and s.cases() == []
    api.run(api.prepare(cases, CONFIG), tmp_path / "one" / "run", n_boot=100)
    api.merge([tmp_path / f"s{k}" for k in range(n)], tmp_path / "merged" / "run", n_boot=100)
    _same_as_one_process(tmp_path / "merged" / "run", tmp_path / "one" / "run")


# --------------------------------------------------------------------------- what merge takes and refuses


@pytest.fixture
def shards(tmp_path: Path) -> list[Path]:
    """Three shards of 12 cases, scored by the rules judge."""
    cases = big_cases(12, seed=6)
    for k in range(3):
        api.run(api.prepare(cases, CONFIG, shard=f"{k}/3"), tmp_path / f"s{k}", n_boot=0)
    return [tmp_path / f"s{k}" for k in range(3)]


def _refused(runs: list[Path], out: Path, match: str) -> None:
    with pytest.raises(InputError, match=match):
        api.merge(runs, out, n_boot=0)
    assert not (out / STORE_NAME).exists() and not any(out.glob(".results.sqlite*"))


def test_the_shards_label_history_goes_to_the_merged_run(shards: list[Path], tmp_path: Path) -> None:
    """Every label event of every shard (a score set, changed, a comment set then cleared), as written: the
    merged run's labels are the shards' and each keeps its history (version, revision)."""
    labelled = []
    for k, run in enumerate(shards[:2]):
        with Store.open_existing(run) as s:
            case = s.cases()[0]["id"]
            for value in (30, 28 + k):
                s.upsert_human_label(HumanLabelRecord(case_id=case, dimension="accuracy", reviewer="chen",
                                                      kind="score", value=value, source="review app"))
            s.upsert_human_label(HumanLabelRecord(case_id=case, reviewer="li", kind="comment", value="see 2nd line",
                                                  source="review app"))
            s.delete_human_label(reviewer="li", kind="comment", case_id=case)
            labelled.append(case)

    def history(stores: list[Path]) -> list[tuple[Any, ...]]:
        out = []
        for run in stores:
            with Store.open_existing(run, read_only=True) as s:
                out += [(e.at, e.reviewer, e.case_id, e.kind, e.op, e.value, e.phase, e.source)
                        for e in s.label_events()]
        return sorted(out)

    merged = api.merge(shards, tmp_path / "m", n_boot=0)
    assert merged.labels == 2
    assert history([tmp_path / "m"]) == history(shards) and len(history(shards)) == 8
    with Store.open_existing(tmp_path / "m", read_only=True) as s:
        now = {lb.case_id: lb for lb in s.human_labels()}
    assert {c: (lb.reviewer, lb.value, lb.version) for c, lb in now.items()} == {
        labelled[0]: ("chen", 28, 2), labelled[1]: ("chen", 29, 2)}
    assert {lb.case_id for lb in merged.results.labels} == set(labelled)


def test_merge_refuses_what_is_not_every_shard_of_one_run(shards: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "m"
    _refused(shards[:2], out, r"shard\(s\) 2/3 missing")
    _refused([shards[0], shards[1], shards[1], shards[2]], out, "are both shard 1/3: give each shard once")
    api.run(api.prepare(big_cases(12, seed=6), CONFIG), tmp_path / "whole", n_boot=0)
    _refused([*shards, tmp_path / "whole"], out, "not a shard's run")
    # another count, another case set, another config
    api.run(api.prepare(big_cases(12, seed=6), CONFIG, shard="0/2"), tmp_path / "two", n_boot=0)
    _refused([tmp_path / "two", *shards[1:]], out, "s1 is shard 1/3 and .*two shard 0/2: the shards of one run are "
             "cut in the same number N")
    api.run(api.prepare(big_cases(13, seed=6), CONFIG, shard="0/3"), tmp_path / "other", n_boot=0)
    _refused([tmp_path / "other", *shards[1:]], out, "cut from another case set")
    cfg = {"rubric": "medical_record", "consensus": {"flag_spread": 5}, "judges": [{"name": "rules", "kind": "rules"}]}
    api.run(api.prepare(big_cases(12, seed=6), cfg, shard="0/3"), tmp_path / "cfg", n_boot=0)
    _refused([tmp_path / "cfg", *shards[1:]], out, r"its config differs from .* \(at consensus.flag_spread\)")
    # a store already in --out: a shard's, or another run's
    with pytest.raises(InputError, match=r"s0/results\.sqlite: is a shard's store"):
        api.merge(shards, shards[0], n_boot=0)
    with pytest.raises(InputError, match="a store is there already; merge writes a new run"):
        api.merge(shards, tmp_path / "whole", n_boot=0)


def test_merge_refuses_a_shard_not_finished_or_with_what_was_drawn_for_it(shards: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "m"
    con = sqlite3.connect(shards[1] / STORE_NAME)
    with con:
        con.execute("DELETE FROM calls WHERE rowid IN (SELECT rowid FROM calls LIMIT 2)")
    con.close()
    _refused(shards, out, r"s1: 2 planned call\(s\) not stored .* resume it")
    api.run(api.prepare(big_cases(12, seed=6), CONFIG, shard="1/3"), shards[1], n_boot=0)   # resumed
    api.spot_check(shards[2], 2, seed=1)
    _refused(shards, out, "spot check drawn from this shard's cases alone")
    with Store.open_existing(shards[2]) as s:
        s.replace_spot_checks([])
    api.add_reviewer(shards[0], "chen")
    _refused(shards, out, "review team or assignments made for this shard alone")
    api.remove_reviewer(shards[0], "chen")
    assert api.merge(shards, out, n_boot=0).calls == 36


def test_merge_on_the_command_line_says_what_it_refuses(shards: list[Path], tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["merge", str(shards[0]), str(shards[2]), "--out", str(tmp_path / "m")])
    assert res.exit_code == 2
    assert "shard(s) 1/3 missing" in " ".join(res.output.split())
    res = CliRunner().invoke(app, ["score", str(ROOT / "examples" / "cases.jsonl"), "--shard", "3/3",
                                   "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "3 is not a shard of 3" in " ".join(res.output.split())


def test_the_shard_record_says_where_each_round_starts(tmp_path: Path) -> None:
    """A growing plan's shard records its round starts; a fixed plan's is [0]; a later run without --shard
    into the same folder drops the record."""
    cases = big_cases(6, seed=8)
    api.run(api.prepare(cases, CONFIG, shard="0/2"), tmp_path / "s", n_boot=0)
    with Store.open_existing(tmp_path / "s", read_only=True) as s:
        rec = s.get_meta("shard")
    assert rec["round_starts"] == [0] and rec["index"] == 0 and rec["count"] == 2
    assert rec["n_cases"] == 6 and rec["positions"] == [i for i, c in enumerate(cases) if shard_of(c.id, 2) == 0]
    api.run(api.prepare(cases, CONFIG), tmp_path / "s", n_boot=0)
    with Store.open_existing(tmp_path / "s", read_only=True) as s:
        assert s.get_meta("shard") is None
    assert Counter(c.status for c in asyncio.run(api.run_async(api.prepare(cases, CONFIG), tmp_path / "s",
                                                                  n_boot=0)).consensus)["ok"] == 6


def test_merge_waits_for_no_shard_being_written(shards: list[Path], tmp_path: Path) -> None:
    """A shard another process is writing (it holds the run's lock) is not read half-written: merge is refused,
    naming the writer (exit 6), and nothing is written."""
    with lock_held_elsewhere(shards[1], "test holder") as proc:
        res = CliRunner().invoke(app, ["merge", *map(str, shards), "--out", str(tmp_path / "m")])
        assert res.exit_code == 6, res.output
        assert f"being written by `test holder` (pid {proc.pid}" in " ".join(res.output.split())
        assert not (tmp_path / "m" / STORE_NAME).exists()
    assert CliRunner().invoke(app, ["merge", *map(str, shards), "--out", str(tmp_path / "m")]).exit_code == 0
