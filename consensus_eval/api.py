"""The main job, end to end: load, plan, run into the store, then rebuild every output from the store."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from consensus_eval.analysis import consensus
from consensus_eval.output import files as outputs
from consensus_eval.domain.cases import Case, load_cases
from consensus_eval.domain.config import EvalConfig, load_config
from consensus_eval.judges import Judge, build_judge
from consensus_eval.domain.rubric import Rubric, load_rubric
from consensus_eval.run.execute import Progress, ProgressHook, execute
from consensus_eval.run.plan import Call, plan
from consensus_eval.run.store import CallRecord, Store

STORE_NAME = "results.sqlite"


@dataclass
class Prepared:
    """Everything a run needs, loaded and validated before any call is made."""

    config: EvalConfig
    rubric: Rubric
    cases: list[Case]
    invalid_lines: list[str]
    judges: list[Judge]
    calls: list[Call]


def prepare(cases_path: str | Path, config_path: str | Path, *, skip_invalid: bool = False,
            check_keys: bool = True) -> Prepared:
    """Load config, rubric and cases, build the judges and plan the calls. Raises InputError."""
    config = load_config(config_path)
    rubric = load_rubric(config.rubric)
    if check_keys:
        missing = [m for j in config.judges if (m := j.missing_key())]
        if missing:
            from consensus_eval._errors import InputError

            raise InputError("\n".join(missing))
    loaded = load_cases(cases_path, skip_invalid=skip_invalid)
    judges = [build_judge(j, rubric) for j in config.judges]
    calls = plan(loaded.cases, rubric, config, judges)
    return Prepared(config, rubric, loaded.cases, loaded.errors, judges, calls)


def run(prep: Prepared, out_dir: str | Path, on_progress: ProgressHook | None = None) -> Progress:
    """Make every planned call not yet stored, then rebuild the outputs. Resumable at any point."""
    out = Path(out_dir)
    with Store(out / STORE_NAME) as store:
        store.set_meta("rubric", prep.rubric.model_dump(mode="json"))
        store.set_meta("config", prep.config.model_dump(mode="json"))
        store.set_meta("cases", [c.model_dump(mode="json") for c in prep.cases])
        store.set_meta("invalid_lines", prep.invalid_lines)
        store.set_plan(c.planned for c in prep.calls)
        progress = asyncio.run(execute(prep.calls, prep.judges, prep.rubric, store, on_progress))
        rebuild(store, out)
    return progress


@dataclass
class Results:
    """What the outputs are made of, read back from a store."""

    rubric: Rubric
    config: EvalConfig
    cases: list[Case]
    records: list[CallRecord]
    consensus: list[consensus.CaseConsensus]

    @property
    def judges(self) -> list[str]:
        return [j.name for j in self.config.judges]


def load_results(store: Store) -> Results:
    """Rebuild the run's results from the store alone (no judge is called)."""
    rubric = Rubric.model_validate(store.get_meta("rubric"))
    config = EvalConfig.model_validate(store.get_meta("config"))
    cases = [Case.model_validate(c) for c in store.get_meta("cases", [])]
    records = store.calls()
    judges = [j.name for j in config.judges]
    cons = consensus.build(rubric, records, judges, [c.id for c in cases], config.consensus)
    return Results(rubric, config, cases, records, cons)


def rebuild(store: Store, out: Path, n_boot: int = 1000) -> Results:
    """(Re)write judgments.jsonl, consensus.csv/jsonl, reliability.json and the reports from the store."""
    from consensus_eval.analysis.reliability import run_reliability
    from consensus_eval.output.report import write_reports

    res = load_results(store)
    outputs.write_judgments(out / "judgments.jsonl", res.rubric, res.records,
                            consensus.derive_all(res.rubric, res.records))
    outputs.write_consensus(out, res.rubric, res.consensus)
    outputs.write_json(out / "reliability.json", run_reliability(res, n_boot=n_boot))
    write_reports(out)
    return res


def judge_totals(records: Sequence[CallRecord]) -> dict[str, dict[str, float]]:
    """Per judge: calls ok / failed, attempts, tokens and cost (summed over every stored call)."""
    totals: dict[str, dict[str, float]] = {}
    for r in records:
        t = totals.setdefault(r.judge, {"ok": 0, "failed": 0, "attempts": 0, "prompt_tokens": 0,
                                        "cached_tokens": 0, "completion_tokens": 0,
                                        "reasoning_tokens": 0, "cost": 0.0})
        t[r.status] += 1
        t["attempts"] += r.attempts
        for k in ("prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens", "cost"):
            t[k] += getattr(r, k) or 0
    return totals
