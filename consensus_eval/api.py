"""The Python API: score cases with a panel, read a run back, rebuild its outputs.

Everything the command line does goes through here, and it is usable from a notebook or another
event loop (``evaluate_async``/``run_async``; the synchronous ``evaluate``/``run`` refuse to start
inside a running loop and say so). A typical use::

    from consensus_eval import evaluate, load_run

    results = evaluate("examples/cases.jsonl", "configs/default.yaml", out="out/example")
    for case in results.consensus:
        print(case.case_id, case.total, case.status)
    results = load_run("out/example")            # later, from the store alone
    print(results.reliability.across_judges["total"].value)

Nothing here prints, and importing it changes no global state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, nullcontext, suppress
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from consensus_eval._errors import ConsensusEvalError, InputError, StateError, format_validation_error
from consensus_eval._gc import gc_paused_call
from consensus_eval._parallel import MIN_CASES, beside, can_fork, usable_cpus
from consensus_eval._resources import resolve
from consensus_eval.analysis.agreement import HumanLabel
from consensus_eval.analysis.alpha import DEFAULT_SEED
from consensus_eval.analysis.calibration import CalibrationReport, CalibrationSource, calibrate as measure
from consensus_eval.analysis.consensus import CaseConsensus, of_run as consensus_of_run
from consensus_eval.analysis.corrections import few_shot
from consensus_eval.analysis.derived import read_run, read_run_by_cases
from consensus_eval.analysis.heldout import ClinicianComparison, compare_with_clinicians, look_record
from consensus_eval.analysis.human import label_counts, read_labels
from consensus_eval.analysis.invariance import invariance
from consensus_eval.analysis.paired_boot import N_BOOT as N_PAIRED_BOOT
from consensus_eval.analysis.reliability import ReliabilityColumns, ReliabilityReport
from consensus_eval.analysis.results import Results, analyze
from consensus_eval.analysis.spotcheck import Stratify, draw, split
from consensus_eval.domain.calibration.bases import Planting, user_suite
from consensus_eval.domain.calibration.generator import (
    DEFAULT_SEED as DEFAULT_SUITE_SEED,
    RUBRIC_ID as SUITE_RUBRIC_ID,
    builtin_suite,
    sample as sample_suite,
)
from consensus_eval.domain.calibration.handwritten import handwritten_suite
from consensus_eval.domain.calibration.invariance_edits import (
    RUNS as INVARIANCE_RUNS,
    InvarianceSuite,
    builtin_records,
    invariance_suite,
    merged_cases,
    sample_records,
)
from consensus_eval.domain.calibration.operators import UNPLANTABLE
from consensus_eval.domain.calibration.suite import SuiteCase, load_suite
from consensus_eval.domain.cases import Case, CaseFields, load_cases
from consensus_eval.domain.config import DEFAULT_CONFIG, EvalConfig, LLMJudgeConfig, load_config
from consensus_eval.domain.grounding import ground
from consensus_eval.domain.reviewers import clean_name
from consensus_eval.domain.rubric import Rubric, load_rubric
from consensus_eval.domain.sets import duplicates
from consensus_eval.domain.textio import SURROGATE_MESSAGE, surrogate_field
from consensus_eval.domain.writable import RUN_OUTPUTS, check_outputs
from consensus_eval.execution.adaptive import execute_rounds, grow
from consensus_eval.execution.estimate import JudgeEstimate, ShownRequest, estimate, shown_requests
from consensus_eval.execution.execute import Progress, ProgressHook, execute
from consensus_eval.execution.label_copy import CopyReport, copy_labels as copy_run_labels, folder_name as label_source
from consensus_eval.execution.lock import run_lock as run_lock  # public: one writer per run (docs/api.md)
from consensus_eval.execution.plan import Call, plan
from consensus_eval.execution.shards import SHARD_META, Shard, ShardRecord, merge_stores, select as select_shard
from consensus_eval.execution.store import (
    REVIEWER_ROLES,
    STORE_NAME,
    HeldoutLook,
    LabelRefused,
    PlanOrderError,
    ReviewerRecord,
    ReviewerRole,
    SpotCheckRecord,
    Store,
    StoredCall,
)
from consensus_eval.execution.stored_run import Span, StoredRun, spans
from consensus_eval.judges import Judge, build_judge
from consensus_eval.output.calibration_files import CALIBRATION_JSON, load_calibration, write_calibration
from consensus_eval.output.files import write_analysis, write_json, write_tables
from consensus_eval.output.report import write_reports
from consensus_eval.output.report.html import check_page_folder, existing_pages

T = TypeVar("T")

CasesInput = str | Path | Iterable[Case | Mapping[str, Any]]
ConfigInput = str | Path | EvalConfig | Mapping[str, Any]


@dataclass
class Prepared:
    """Everything a run needs, loaded and validated before any call is made. ``calls`` is the plan, or with
    adaptive runs or a cascade its first round (the rest is decided from the results as they land)."""

    config: EvalConfig
    rubric: Rubric
    cases: list[Case]
    invalid_lines: list[str]
    judges: list[Judge]
    calls: list[Call]
    #: the files the run is made from, as ``(what, absolute path)`` (the cases, the config...): no output may
    #: replace one, and they are recorded in the store (``audit --export`` refuses them too)
    inputs: list[tuple[str, str]] = field(default_factory=list)
    #: a shard's run (``prepare(shard=...)``): which shard, and of which case set; ``cases`` are the shard's
    shard: ShardRecord | None = None


@gc_paused_call  # the cases and the plan are millions of objects on a large run: no collector pass while they are made
def prepare(cases: CasesInput, config: ConfigInput = DEFAULT_CONFIG, *, skip_invalid: bool = False,
            check_keys: bool = True, shard: str | Shard | None = None) -> Prepared:
    """Load the config, its rubric and the cases, build the judges and plan the calls.

    ``cases``: a JSONL, CSV or Excel (.xlsx) path (a sheet's columns named by the config's ``fields``),
    or Case objects / mappings. ``config``: a YAML path, an
    :class:`EvalConfig` or a mapping. ``check_keys``: refuse judges whose API key variable is unset.
    ``shard``: ``"K/N"`` (or a :class:`~consensus_eval.execution.shards.Shard`): plan only the cases of shard K
    of N, numbered from 0 (:mod:`consensus_eval.execution.shards`; :func:`merge` combines the shards' runs).
    Raises :class:`InputError` naming the file, line and field of what is wrong.
    """
    cfg = _with_examples(_config(config))
    rubric = load_rubric(cfg.rubric)
    if check_keys:
        missing = [m for j in cfg.judges if (m := j.missing_key())]
        if missing:
            raise InputError("\n".join(missing))
    if isinstance(cases, (str, Path)):   # the bundled examples (examples/cases.jsonl...) are found from any folder
        cases = resolve(cases, "examples")
    case_list, invalid = _cases(cases, skip_invalid, cfg.fields)
    if not case_list:
        raise InputError(f"{cases}: no valid case to score ({len(invalid)} invalid line(s), skipped):\n"
                         + "\n".join(invalid))
    record = None
    if shard is not None:
        case_list, record = select_shard(case_list, Shard.parse(shard) if isinstance(shard, str) else shard)
    judges = [build_judge(j, rubric) for j in cfg.judges]
    inputs = _inputs(("the cases file", cases), ("the config", config), ("the rubric", cfg.rubric))
    return Prepared(cfg, rubric, case_list, invalid, judges, plan(case_list, rubric, cfg, judges), inputs, record)


async def run_async(prep: Prepared, out: str | Path, on_progress: ProgressHook | None = None,
                    *, n_boot: int = 1000, stop: asyncio.Event | None = None, lang: str | None = None,
                    wait: bool = False) -> Results:
    """Make every planned call not yet stored in ``out``, then rebuild the outputs, and return the
    results (``results.progress``: calls made, resumed from the store, failed, interrupted).
    Resumable at any point: rerun it after an interruption and only the missing calls are made.

    Judges with ``batch: true`` have their calls submitted as provider batches, and finished batches
    collected (:mod:`consensus_eval.execution.batch`); ``results.progress.batches`` lists the batches
    still running (their calls are not stored yet: run again to collect). ``wait``: poll until none is.

    Setting ``stop`` (from a signal handler, a UI) ends the calls at once; the outputs are still
    rebuilt from what is stored, and the cases with calls missing are ``incomplete``. ``lang``: the
    reports' language (``zh``, ``en``; default the rubric's).
    """
    return await _run(prep, Path(out), on_progress, n_boot, stop, lang, wait)


def run(prep: Prepared, out: str | Path, on_progress: ProgressHook | None = None, *, n_boot: int = 1000,
        lang: str | None = None, wait: bool = False) -> Results:
    """:func:`run_async` for code that is not inside an event loop."""
    return _sync(run_async(prep, out, on_progress, n_boot=n_boot, lang=lang, wait=wait))


async def evaluate_async(cases: CasesInput, config: ConfigInput = DEFAULT_CONFIG, *, out: str | Path,
                         skip_invalid: bool = False, on_progress: ProgressHook | None = None,
                         n_boot: int = 1000) -> Results:
    """Score ``cases`` with the panel of ``config`` into the folder ``out`` (store, judgments,
    consensus, reliability, reports) and return the results, with ``results.progress`` saying how
    many calls were made, resumed and failed."""
    return await _run(prepare(cases, config, skip_invalid=skip_invalid), Path(out), on_progress, n_boot)


def evaluate(cases: CasesInput, config: ConfigInput = DEFAULT_CONFIG, *, out: str | Path,
             skip_invalid: bool = False, on_progress: ProgressHook | None = None, n_boot: int = 1000) -> Results:
    """:func:`evaluate_async` for code that is not inside an event loop (a script, a test)."""
    return _sync(evaluate_async(cases, config, out=out, skip_invalid=skip_invalid, on_progress=on_progress,
                                n_boot=n_boot))


@dataclass
class PreparedCalibration:
    """A calibration run, prepared: the suite (built-in, a user's suite file, or planted into the user's
    own records, possibly sampled), the scoring run of its cases (:class:`Prepared`, the same pipeline as
    ``score``), and, for ``bases``, what could be planted into which record (:class:`Planting`)."""

    suite: list[SuiteCase]
    prepared: Prepared
    planting: Planting | None = None
    #: what the errors are (:attr:`CalibrationReport.source`)
    source: CalibrationSource = "builtin"
    #: ``--suite invariance``: the clean records and their meaning-preserving copies
    invariance: InvarianceSuite | None = None


#: the suites shipped with the package (``--suite`` names)
BUILTIN_SUITES = ("builtin", "builtin-heldout", "handwritten")


def prepare_calibration(config: ConfigInput = DEFAULT_CONFIG, suite: str | Path = "builtin", *,
                        sample: int | None = None, seed: int = DEFAULT_SUITE_SEED,
                        check_keys: bool = True, bases: str | Path | None = None) -> PreparedCalibration:
    """Load the config and the calibration suite (``builtin``: the suite shipped for the
    ``medical_record`` rubric; ``builtin-heldout``: its held-out operator family; ``handwritten``: the
    held-out set of errors written by hand for it; else a
    suite JSONL file, checked against the config's rubric; or, with
    ``bases``, a cases file of the user's own clean records to plant the built-in operators' errors into),
    draw ``sample`` cases of it with ``seed`` when given, and plan the calls like :func:`prepare`."""
    cfg = _config(config)
    rubric = load_rubric(cfg.rubric)
    planting = None
    if str(suite) == "invariance":
        return _prepare_invariance(cfg, config, rubric, sample, seed, check_keys, bases)
    if not all(d.calibrates for d in rubric.dimensions):
        # calibration plants errors a judge must deduct: a likert or criteria dimension has nothing to plant
        other = [f"{d.id} ({d.kind})" for d in rubric.dimensions if not d.calibrates]
        raise InputError(f"rubric {rubric.id!r} has no planting operators: calibration measures judges on errors "
                         f"planted for them to deduct, and {', '.join(other)} are not deductions dimensions. Score "
                         f"the cases and check the judges against clinicians' labels instead (`consensus-eval "
                         f"audit RUN_DIR --spot-check N`)")
    if (bases is not None or str(suite) in BUILTIN_SUITES) and rubric.id != SUITE_RUBRIC_ID:
        # the planting operators (and the built-in suites made with them) belong to their rubric
        what = f"the {suite} calibration suite is" if bases is None else "the planting operators (--bases) are"
        raise InputError(f"rubric {rubric.id!r} has no planting operators ({what} written for the rubric "
                         f"{SUITE_RUBRIC_ID!r}): calibrate it with a suite of your own (--suite FILE)")
    if bases is not None:
        if str(suite) != "builtin":
            raise InputError("--bases plants into your records; --suite gives a finished suite: use one of them")
        cases, planting = user_suite(load_cases(bases, fields=cfg.fields).cases, rubric, seed)
        if not any(sc.expected for sc in cases):
            raise InputError(f"{bases}: no error could be planted into any record:\n"
                             + "\n".join(f"{rid}: {why}" for rid, why in planting.nothing.items()))
    elif str(suite) in ("builtin", "builtin-heldout"):
        cases = list(builtin_suite(seed, family="heldout" if str(suite) == "builtin-heldout" else "main"))
    elif str(suite) == "handwritten":
        cases = handwritten_suite(rubric)
    else:
        cases = load_suite(suite, rubric)
    if sample is not None:
        if sample < 1:
            raise InputError(f"--sample must be at least 1, got {sample}")
        cases = sample_suite(cases, sample, seed)
    source: CalibrationSource = ("bases" if bases is not None else "file" if str(suite) not in BUILTIN_SUITES
                                 else cast(CalibrationSource, str(suite)))
    prepared = prepare([c.case for c in cases], cfg, check_keys=check_keys)
    prepared.inputs = _inputs(("the config", config), ("the calibration suite", suite), ("the --bases cases", bases),
                              ("the rubric", cfg.rubric))
    return PreparedCalibration(cases, prepared, planting, source)


def _prepare_invariance(cfg: EvalConfig, config: ConfigInput, rubric: Rubric, sample: int | None, seed: int,
                        check_keys: bool, bases: str | Path | None) -> PreparedCalibration:
    """``--suite invariance``: the clean records (``bases``, else the built-in suite's base records) and their
    meaning-preserving copies; beside them, for a rubric with planting operators, the planted suite (the
    built-in one, or planted into ``bases``): sensitivity and stability measured in one run. ``sample``: that
    many planted cases and that many clean records. The clean records are judged at least 3 times each."""
    planting = None
    operators = rubric.id == SUITE_RUBRIC_ID and all(d.calibrates for d in rubric.dimensions)
    if bases is not None:
        records = load_cases(bases, fields=cfg.fields).cases
        planted, planting = user_suite(records, rubric, seed) if operators else ([], None)
    elif operators:
        records, planted = builtin_records(rubric), list(builtin_suite(seed))
    else:
        raise InputError(f"rubric {rubric.id!r} has no built-in clean records: give about 30 of your own, checked "
                         f"clean by a clinician (--suite invariance --bases CLEAN.jsonl)")
    if sample is not None:
        if sample < 1:
            raise InputError(f"--sample must be at least 1, got {sample}")
        planted, records = sample_suite(planted, sample, seed), sample_records(records, sample, seed)
    probe = invariance_suite(records, rubric)
    if isinstance(cfg.important_runs, int) and cfg.important_runs < INVARIANCE_RUNS:
        cfg = cfg.model_copy(update={"important_runs": INVARIANCE_RUNS})
    prepared = prepare(merged_cases(probe, [c.case for c in planted]), cfg, check_keys=check_keys)
    prepared.inputs = _inputs(("the config", config), ("the --bases cases", bases), ("the rubric", cfg.rubric))
    return PreparedCalibration(planted, prepared, planting, "bases" if bases is not None else "builtin", probe)


async def calibrate_async(prep: PreparedCalibration, out: str | Path, on_progress: ProgressHook | None = None,
                          *, n_boot: int = 1000, stop: asyncio.Event | None = None, wait: bool = False,
                          lang: str | None = None) -> tuple[Results, CalibrationReport]:
    """Run the suite's cases like :func:`run_async` (store, resume, outputs in ``out``; ``wait``: for
    provider batches), measure every judge and the panel against the planted errors, and write
    ``out/calibration.json``, the suite run (``out/suite.jsonl``) and the reports with their calibration
    section (in ``lang``; default: the rubric's)."""
    results = await _run(prep.prepared, Path(out), on_progress, n_boot, stop, lang, wait=wait)
    report = measure(prep.suite, results, ground, UNPLANTABLE, prep.source)
    if prep.planting is not None:
        report.planted_into = prep.planting.types
        report.not_planted = prep.planting.nothing
    if prep.invariance is not None:
        report.invariance = invariance(prep.invariance, results,
                                       {j.config.name for j in prep.prepared.judges if j.deterministic})
    write_calibration(Path(out), report, prep.suite, prep.invariance)
    write_reports(results, Path(out), lang)
    return results, report


def calibrate(config: ConfigInput = DEFAULT_CONFIG, *, out: str | Path, suite: str | Path = "builtin",
              sample: int | None = None, seed: int = DEFAULT_SUITE_SEED) -> CalibrationReport:
    """:func:`prepare_calibration` then :func:`calibrate_async`, for code that is not inside an event
    loop; returns the calibration report (also written to ``out/calibration.json``)."""
    prep = prepare_calibration(config, suite, sample=sample, seed=seed)
    return _sync(calibrate_async(prep, out))[1]


def attach_calibration(out: str | Path, calibration: str | Path, results: Results | None = None,
                       lang: str | None = None) -> CalibrationReport:
    """Put a calibration (a ``calibration.json`` of :func:`calibrate`) beside the run in ``out``: copied
    to ``out/calibration.json``, the run's reports rebuilt with its section (``results``: the run's, read
    back from ``out`` when not given; ``lang``: the reports' language). Refuses a file that is not one."""
    folder, src = Path(out), Path(calibration)
    report = load_calibration(src)
    if src.resolve() != (folder / CALIBRATION_JSON).resolve():
        write_json(folder / CALIBRATION_JSON, report.model_dump(mode="json"))
    write_reports(results if results is not None else load_run(folder, replies=False), folder, lang)
    return report


def dry_run(prep: Prepared) -> list[JudgeEstimate]:
    """Tokens and estimated cost per judge of the prepared plan; nothing is sent.

    With adaptive runs or a cascade the plan grows as results come in, so the estimate is a range: each
    judge's figures are its first round (``adaptive.min_runs`` runs, no stage-2 judge asked), and its
    ``upper`` the most the run can make (``adaptive.max_runs`` runs, stage-2 judges on every case)."""
    low = estimate(prep.calls, prep.judges)
    if not prep.config.grows:
        return low
    high = {e.judge: e for e in estimate(plan(prep.cases, prep.rubric, prep.config, prep.judges, upper=True),
                                         prep.judges)}
    return [replace(e, upper=high[e.judge]) for e in low]


def show_prompt(prep: Prepared, target: str) -> list[ShownRequest]:
    """What each judge would send for one case, ``CASE``, or one of its dimensions, ``CASE:DIMENSION``
    (``score --dry-run --show-prompt``): the request body as sent (messages and the tool or schema instructor
    adds in the judge's mode), per judge and dimension; nothing is sent. A judge that reads the case itself
    (rules, simulated) has no request. Raises :class:`InputError` for a case or dimension the run does not have.
    """
    case_id, dimension = target, None
    head, sep, tail = target.rpartition(":")
    if sep and head and tail in prep.rubric.dimensions_by_id:
        case_id, dimension = head, tail
    ids = [c.id for c in prep.cases]
    if case_id not in ids:
        shown = ", ".join(ids[:5]) + (f" ... ({len(ids)} cases)" if len(ids) > 5 else "")
        raise InputError(f"--show-prompt {target}: no case {case_id!r} in the cases ({shown}); give CASE or "
                         f"CASE:DIMENSION, the dimension one of {', '.join(prep.rubric.dimensions_by_id)}")
    return shown_requests(prep.calls, prep.judges, case_id, dimension)


async def check_judges_async(config: ConfigInput = DEFAULT_CONFIG) -> list[tuple[str, bool, str]]:
    """(judge, ok, message) for each judge of ``config``: one tiny call per LLM judge, concurrently.
    A judge whose key variable is unset is reported before any call is made (InputError)."""
    cfg = _config(config)
    missing = [m for j in cfg.judges if (m := j.missing_key())]
    if missing:
        raise InputError("\n".join(missing))
    rubric = load_rubric(cfg.rubric)

    async def one(judge: Judge) -> tuple[str, bool, str]:
        ok, msg = await judge.check()
        return judge.config.name, ok, msg

    return list(await asyncio.gather(*(one(build_judge(j, rubric)) for j in cfg.judges)))


def load_run(folder: str | Path, *, human: dict[str, HumanLabel] | None = None, n_boot: int = 1000,
             seed: int = DEFAULT_SEED, reuse_saved: bool = True, replies: bool = True) -> Results:
    """The results of a run, read back from ``folder/results.sqlite`` (no judge is called).

    With ``reuse_saved``, the reliability report is taken from ``folder/reliability.json`` when it
    describes this run (same judges and cases; it may carry a human section) and no ``human`` labels
    are given; otherwise it is computed on first use of ``results.reliability``. ``replies=False``:
    the records without the judges' raw replies (``raw`` None; less memory, what ``report``, ``audit``
    and ``reliability`` need).
    """
    _resamples(n_boot)
    out = Path(folder)
    with Store.open_existing(out, read_only=True) as store:
        stored = read_run(store, replies=replies)
        labels = store.human_labels()
        sample = store.spot_checks()
    reuse = reuse_saved and human is None
    saved = _saved_reliability(out, stored.judges, len(stored.cases)) if reuse else None
    return analyze(stored, labels=labels, human=human, n_boot=n_boot, seed=seed, reliability=saved,
                   reliability_source="reliability.json", spot_checks=sample)


@dataclass
class HumanImport:
    """What :func:`import_human` did: the file read (``format`` ``sheet`` or ``wide``), how many labels
    each reviewer got from it (``by_reviewer``; their earlier labels from the same file are replaced),
    how many labels the store holds now (``stored``), and the rebuilt ``results``."""

    path: Path
    format: str
    by_reviewer: dict[str, dict[str, int]]
    stored: int
    results: Results


def import_human(folder: str | Path, path: str | Path, *, reviewer: str | None = None,
                 encoding: str | None = None, n_boot: int = 1000, rebuild_outputs: bool = True) -> HumanImport:
    """Read a file of human labels (the adjudication sheet of ``audit --export``, or the wide
    ``case_id`` + dimension columns format) into ``folder``'s store, replacing what each reviewer had
    from that file, then rebuild every output (reliability.json, report.md/html...) from the store.

    ``reviewer``: the name for rows that do not give one (:func:`consensus_eval.analysis.human.read_labels`).
    Raises :class:`InputError` naming the file, line and column of a problem; nothing is stored then.
    """
    _resamples(n_boot)
    out = Path(folder)
    with Store.open_existing(out) as store:
        stored = read_run(store)
        found = read_labels(path, stored, reviewer=reviewer, encoding=encoding)
        if rebuild_outputs:
            check_outputs(out)  # an output that cannot be rebuilt is refused before a label is stored
        try:   # every label an event; the store refuses what no channel may store (a role, a blind case)
            for name, shown in found.revealed.items():   # the sheet showed them the judges: blind scores frozen first
                store.reveal(name, shown, source=found.source)
            store.replace_human_labels_of(found.source, found.labels)
        except LabelRefused as e:
            raise InputError(f"{path}: {e}; nothing was stored") from None
        results = _rebuild(store, out, n_boot) if rebuild_outputs else analyze(
            stored, labels=store.human_labels(), n_boot=n_boot, spot_checks=store.spot_checks())
    return HumanImport(path=Path(path), format=found.format,
                       by_reviewer={k: label_counts(v) for k, v in found.labels.items()},
                       stored=len(results.labels), results=results)


@dataclass
class LabelCopy:
    """What :func:`copy_labels` did (:class:`~consensus_eval.execution.label_copy.CopyReport`: the events copied,
    the cases skipped, the verdicts not carried), how many labels the target holds now (``stored``), and its rebuilt
    ``results``."""

    report: CopyReport
    stored: int
    results: Results


def copy_labels(source: str | Path, target: str | Path, *, n_boot: int = 1000,
                rebuild_outputs: bool = True) -> LabelCopy:
    """Copy the clinicians' labels of run ``source`` into run ``target`` (another run of the same cases: a changed
    prompt, another judge model), with the spot check and its tuning / held-out split, then rebuild the target's
    outputs (:mod:`consensus_eval.execution.label_copy`). The source is only read. Raises :class:`InputError`,
    storing nothing, when the runs' cases or rubrics differ, or their spot checks do."""
    _resamples(n_boot)
    src, dst = Path(source), Path(target)
    if src.resolve() == dst.resolve():
        raise InputError(f"{src}: the labels would be copied into the run they come from; name two runs")
    with Store.open_existing(src, read_only=True) as from_store, Store.open_existing(dst) as store:
        if rebuild_outputs:
            check_outputs(dst)
        report = copy_run_labels(from_store, store, label_source(src))
        results = _rebuild(store, dst, n_boot) if rebuild_outputs else analyze(
            read_run(store, replies=False), labels=store.human_labels(), n_boot=n_boot,
            spot_checks=store.spot_checks())
    return LabelCopy(report=report, stored=len(results.labels), results=results)


def compare_against_clinicians(run_a: str | Path, run_b: str | Path, *, n_boot: int = N_PAIRED_BOOT,
                               record: bool = True, results_a: Results | None = None) -> ClinicianComparison:
    """Run ``run_b`` against run ``run_a`` in agreement with the same clinicians, on their spot check's held-out
    part (:mod:`consensus_eval.analysis.heldout`): per judge and the panel, the paired change of ICC, MAE and bias
    with bootstrap intervals, and how many looks the held-out part has had. ``record``: write this look to both
    runs' stores (a store that cannot be written is said in ``notes``); ``results_a``: run A as already loaded.
    Calls no judge."""
    _resamples(n_boot)
    a = results_a if results_a is not None else load_run(run_a, n_boot=0, replies=False)
    b = load_run(run_b, n_boot=0, replies=False)
    looks: list[HeldoutLook] = []
    for folder in (run_a, run_b):
        with Store.open_existing(folder, read_only=True) as store:
            looks += store.heldout_looks()
    comparison = compare_with_clinicians(a, b, str(run_a), str(run_b), looks=looks, n_boot=n_boot)
    look = look_record(comparison, str(Path(run_a).resolve()), str(Path(run_b).resolve()))
    if record and look is not None:
        for folder in (run_a, run_b):
            try:
                with Store.open_existing(folder) as store:
                    store.add_heldout_looks([look])
            except ConsensusEvalError as e:
                comparison.recorded = False
                comparison.notes.append(f"this look was not recorded in {folder}: {e}")
    return comparison


#: the largest seed of a spot check's draw (stored as an SQLite integer; numpy takes any non-negative one)
MAX_SEED = 2**32 - 1


@dataclass
class SpotCheck:
    """What :func:`spot_check` did: the ``sample`` (the stored one), whether it was ``drawn`` now (False:
    the same draw was already stored), and how many of its cases already have a clinician's score
    (``labelled``)."""

    sample: list[SpotCheckRecord]
    drawn: bool
    labelled: int


def spot_check(folder: str | Path, n: int, *, seed: int = 0, stratify: Stratify | None = None,
               redraw: bool = False) -> SpotCheck:
    """Draw a random spot check of ``n`` cases of ``folder``'s run and store it with each case's inclusion
    probability (:mod:`consensus_eval.analysis.spotcheck`); validity figures are then measured on it.

    Asking again for the same draw (``n``, ``seed``, ``stratify``) returns the stored sample. A different
    draw replaces the stored one only with ``redraw``, and is refused while any case of the stored sample
    has a reviewer's score: a sample redrawn after seeing labels is no longer random.
    """
    if n < 1:
        raise InputError(f"--spot-check {n}: a spot check needs at least 1 case")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InputError(f"--seed {seed}: the seed of a draw is a whole number from 0 to {MAX_SEED}")
    out = Path(folder)
    with Store.open_existing(out) as store:
        stored = read_run(store, replies=False)
        labels = store.human_labels()
        old = store.spot_checks()
        scored = {lb.case_id for lb in labels if lb.kind == "score"}
        # the panel's totals only for score bands: a consensus of the whole run is not free at 20,000 cases
        cons = consensus_of_run(stored) if stratify == "band" else []
        new = draw(stored.cases, cons, n, seed, stratify)
        if old and [(r.case_id, r.probability, r.stratum) for r in old] == [
                (r.case_id, r.probability, r.stratum) for r in new]:
            if any(r.part is None for r in old):  # drawn before the split (schema < 9): the same draw, now split
                old = split(old, old[0].seed)
                store.replace_spot_checks(old)
            return SpotCheck(sample=old, drawn=False, labelled=sum(r.case_id in scored for r in old))
        if old:
            done = sum(r.case_id in scored for r in old)
            if not redraw or done:
                why = (f"{done} of its cases already have a reviewer's score: a sample redrawn after seeing labels "
                       "is no longer random; keep it, or move the labels away first") if done else \
                    "pass --redraw to replace it"
                raise InputError(f"{out}: a spot check of {len(old)} cases (seed {old[0].seed}) is already drawn; "
                                 + why)
        store.replace_spot_checks(new)
    return SpotCheck(sample=new, drawn=True, labelled=sum(r.case_id in scored for r in new))


def add_reviewer(folder: str | Path, name: str, *, role: ReviewerRole = "reviewer",
                 new_key: bool = False) -> tuple[ReviewerRecord, str]:
    """Add ``name`` to the team reviewing ``folder``'s run and return them with their personal key (shown
    once: only its hash is stored). The review app then runs in team mode: each reviewer opens their own
    link, labels under their own name only, and the shared token link no longer opens it. A name already in
    the team is refused unless ``new_key`` (their old link stops working; ``role`` is updated)."""
    import secrets

    try:
        name = clean_name(name)
    except ValueError as e:
        raise InputError(f"reviewer {name!r}: {e}") from None
    if role not in REVIEWER_ROLES:
        raise InputError(f"--role must be one of {', '.join(REVIEWER_ROLES)}, got {role!r}")
    with run_lock(folder, create=False, mode="team"), Store.open_existing(folder) as store:   # beside the review app
        if not new_key and any(r.name == name for r in store.reviewers()):
            raise InputError(f"{name} is already a reviewer of {folder}; give --new-key to replace their link "
                             "(the old one stops working)")
        key = secrets.token_urlsafe(24)
        return store.put_reviewer(name, role, key), key


def team(folder: str | Path) -> list[ReviewerRecord]:
    """The reviewers of ``folder``'s run (empty: no team; the review app runs in one-token mode)."""
    with Store.open_existing(folder, read_only=True) as store:
        return store.reviewers()


def assign(folder: str | Path, per_case: int = 2, *, queue: bool = False, seed: int = 0) -> dict[str, list[str]]:
    """Assign each case to ``per_case`` reviewers of the team (role ``reviewer``), balanced: each case goes
    to the reviewers with the fewest cases so far (ties in a seeded random order). The cases: the random
    spot check when one is drawn (unless ``queue``), else the cases of the review queue that need review.
    Replaces any earlier assignment; returns case id -> its reviewers."""
    import random

    if per_case < 1:
        raise InputError(f"--per-case {per_case}: a case needs at least 1 reviewer")
    with run_lock(folder, create=False, mode="team"), Store.open_existing(folder) as store:   # beside the review app
        team = [r.name for r in store.reviewers() if r.role == "reviewer"]
        if len(team) < per_case:
            raise InputError(f"{folder}: {per_case} reviewer(s) per case, but the team has {len(team)} reviewer(s) "
                             f"(consensus-eval reviewers add NAME --run {folder})")
        sample = [] if queue else [r.case_id for r in store.spot_checks()]
        if not sample:
            results = analyze(read_run(store, replies=False), n_boot=0)
            sample = [a.case_id for a in results.audit if a.needs_review]
        rng = random.Random(seed)
        order = {name: rng.random() for name in team}
        load = dict.fromkeys(team, 0)
        out: dict[str, list[str]] = {}
        for case_id in sample:
            chosen = sorted(team, key=lambda n: (load[n], order[n]))[:per_case]
            for n in chosen:
                load[n] += 1
            out[case_id] = chosen
        store.replace_assignments([(c, n) for c, names in out.items() for n in names])
    return out


def assigned_cases(folder: str | Path, reviewer: str) -> list[str]:
    """The cases of ``folder``'s run assigned to ``reviewer`` (``reviewers assign``; empty: none), read without
    writing."""
    with Store.open_existing(folder, read_only=True) as store:
        return [case_id for case_id, name in store.assignments() if name == reviewer]


def remove_reviewer(folder: str | Path, name: str) -> None:
    """Take ``name`` off the team: their link stops working at once (a review app serving the run refuses their
    next save); their labels stay."""
    with run_lock(folder, create=False, mode="team"), Store.open_existing(folder) as store:   # beside the review app
        if not store.remove_reviewer(" ".join(name.split())):
            raise InputError(f"{name!r} is not a reviewer of {folder} (see: consensus-eval reviewers list {folder})")


@dataclass
class Merged:
    """What :func:`merge` did: how many ``shards`` it merged, the run's ``cases``, its planned ``calls``, the
    human ``labels`` taken from the shards, and the rebuilt ``results``."""

    shards: int
    cases: int
    calls: int
    labels: int
    results: Results


def merge(runs: Sequence[str | Path], out: str | Path, *, n_boot: int = 1000, lang: str | None = None) -> Merged:
    """Merge the runs of every shard of a run (``score --shard K/N``; :func:`prepare` with ``shard``) into the new
    folder ``out``, then rebuild its outputs: what one process scoring every case would have written, but for
    the live timings and the store's own bookkeeping (docs/scale.md). No judge is called.

    Refused with an :class:`InputError` saying which run and why, nothing written: a run that is not a shard's;
    shards of different case sets, configs, rubrics or counts; a shard given twice or missing; a shard not
    finished (planned calls not stored, provider batches running); a spot check or a review team made for one
    shard; a store already in ``out`` (:func:`consensus_eval.execution.shards.merge_stores`). It holds the lock
    of ``out`` and of every shard's run while it works (:func:`run_lock`)."""
    folder = Path(out)
    check_outputs(folder, inputs=[("a shard's store", Path(r) / STORE_NAME) for r in runs])
    with ExitStack() as locks:  # no shard is written while it is read (one writer per run: execution.lock)
        for r in runs:
            locks.enter_context(run_lock(r, create=False))
        report = merge_stores([Path(r) for r in runs], folder)
    with Store.open_existing(folder) as store:
        results = _rebuild(store, folder, n_boot, lang)
    return Merged(shards=report.shards, cases=report.cases, calls=report.calls, labels=report.labels,
                  results=results)


#: the cases ``export --parquet`` reads at a time (:func:`export_parquet`): 2,000 x 4 judges x 3 dimensions hold
#: about 100 MB (bench/README.md, "Export at 1,000,000 x 4")
PARQUET_CASES = 2000


@gc_paused_call   # the parts make no reference cycle: the collector would only walk them (7.5 of 25.5 s of CPU)
def export_parquet(folder: str | Path, dest: str | Path) -> list[Path]:
    """Write the judgments and consensus of the run in ``folder`` as Parquet files into ``dest`` (made if missing):
    judgments.parquet and consensus.parquet, typed columns for a data warehouse
    (:mod:`consensus_eval.output.parquet`; needs the ``parquet`` extra, pyarrow). Read from the store alone (no
    judge is called); returns the files' paths."""
    from consensus_eval.output.parquet import write_parquet, write_parquet_parts

    with Store.open_existing(Path(folder), read_only=True) as store:
        # a few cases at a time (PARQUET_CASES): its memory does not grow with the run; the spans read side by side
        # (output.parquet.write_parquet_parts)
        cases, cut = _spans(store)
        try:
            return write_parquet_parts([partial(_parts, store, span, first=k == 0) for k, span in enumerate(cut)],
                                       dest, cases=cases)
        except PlanOrderError:
            pass   # a plan that grew by rounds gives a case's calls in each round: read as a whole, below
    return write_parquet(load_run(folder, replies=False), dest)


@gc_paused_call   # the parts make no reference cycle (export_parquet)
def reliability(folder: str | Path, *, n_boot: int = 1000, seed: int = DEFAULT_SEED) -> ReliabilityReport:
    """The reliability report of ``folder``'s run (what ``reliability.json`` holds: :attr:`Results.reliability`).

    A run with no human label and no spot check is read :data:`PARQUET_CASES` cases at a time, each part's
    figures' columns kept and its calls dropped (:class:`~consensus_eval.analysis.reliability.ReliabilityColumns`):
    the same report to the last bit, in memory that does not grow with the run's calls. Otherwise, or when its plan
    grew by rounds, the whole run is read (:func:`load_run`): the human sections read the labelled cases' calls.

    Args:
        folder: The run's output folder.
        n_boot: Bootstrap resamples for each interval (0: none).
        seed: The bootstrap's seed.
    """
    _resamples(n_boot)
    with Store.open_existing(Path(folder), read_only=True) as store:
        if not store.human_labels() and not store.spot_checks():
            cases, cut = _spans(store)   # the later spans' columns come back and are joined after the first's
            try:
                with ExitStack() as others:
                    later = [others.enter_context(beside(partial(_columns, store, span, first=False), cases=cases))
                             for span in cut[1:]]
                    columns = _columns(store, cut[0], first=True)
                    for theirs in later:
                        if (got := theirs.result()) is not None and columns is not None:
                            columns.merge(got)
            except PlanOrderError:
                columns = None   # a plan that grew by rounds gives a case's calls in each round: read whole, below
            if columns is not None:
                return columns.report(n_boot, seed)
    return load_run(folder, n_boot=n_boot, seed=seed, reuse_saved=False, replies=False).reliability


def _spans(store: Store) -> tuple[int, list[Span]]:
    """The run's number of cases, and its cases cut in as many spans as the processes that read them side by side
    (one a usable core, where forking serves and the run has :data:`MIN_CASES` cases), each a multiple of
    :data:`PARQUET_CASES` cases but the last: how :func:`export_parquet` and :func:`reliability` read a run."""
    cases = store.case_count()
    ways = usable_cpus() if cases >= MIN_CASES and can_fork() else 1
    return cases, spans(store, ways, PARQUET_CASES)


def _columns(store: Store, span: Span, *, first: bool) -> ReliabilityColumns | None:
    """The reliability columns of the cases of ``span`` (None: it has none), read as :func:`_parts` reads them
    (``first``: in this process)."""
    columns: ReliabilityColumns | None = None
    for part, cons in _parts(store, span, first=first):
        columns = columns or ReliabilityColumns(part, apart=not first)
        columns.add(part, cons)
    return columns


def _parts(store: Store, span: Span, *, first: bool) -> Iterator[tuple[StoredRun, list[CaseConsensus]]]:
    """The derived parts of ``span`` with their consensus, read from ``store`` (``first``: in this process) or from a
    connection of their own (in a forked process: :meth:`Store.another_reader`)."""
    with nullcontext(store) if first else store.another_reader() as reader:
        for part in read_run_by_cases(reader, PARQUET_CASES, replies=False, span=span):
            yield part, consensus_of_run(part)


def rebuild(folder: str | Path, *, n_boot: int = 1000, lang: str | None = None) -> Results:
    """Rewrite every output of ``folder`` (judgments.jsonl, consensus.csv/jsonl, reliability.json,
    report.md, report.html) from its store: one read, one derivation, one analysis. ``lang``: the
    reports' language (``zh``, ``en``; default the rubric's)."""
    _resamples(n_boot)
    out = Path(folder)
    with Store.open_existing(out) as store:
        return _rebuild(store, out, n_boot, lang)


# --------------------------------------------------------------------------- internals


async def _run(prep: Prepared, out: Path, on_progress: ProgressHook | None, n_boot: int,
               stop: asyncio.Event | None = None, lang: str | None = None, wait: bool = False) -> Results:
    _resamples(n_boot)
    # an output that cannot be written, or that is one of the run's inputs, is refused before any call (report.html's
    # page files too: whether the run has pages is known when they are written, what is in their place is known now;
    # so is their folder, which only a run of more cases than a page holds needs)
    check_outputs(out, (*RUN_OUTPUTS, *existing_pages(out)), inputs=prep.inputs)
    check_page_folder(out, len(prep.cases))
    with Store(out / STORE_NAME) as store:
        store.set_meta("inputs", [list(i) for i in prep.inputs])
        store.set_meta("rubric", prep.rubric.model_dump(mode="json"))
        store.set_meta("config", prep.config.to_json())
        store.set_cases(c.model_dump(mode="json") for c in prep.cases)
        store.set_meta("invalid_lines", prep.invalid_lines)
        if prep.shard is not None or store.get_meta(SHARD_META) is not None:  # a shard's record, or none
            store.set_meta(SHARD_META, None if prep.shard is None else prep.shard.model_dump())
        if prep.config.grows:
            def more(planned: list[Call], stored: list[StoredCall]) -> list[Call]:
                return grow(planned, stored, prep.rubric, prep.config, prep.judges)

            progress = await execute_rounds(prep.calls, prep.judges, prep.rubric, store, more, on_progress, stop)
        else:
            store.set_plan(c.planned for c in prep.calls)
            progress = await _execute_with_batches(prep, store, on_progress, stop, wait)
        if prep.shard is not None and progress.round_starts != prep.shard.round_starts:
            # where each round of a plan that grows starts: what a merge orders the calls by
            store.set_meta(SHARD_META, {**prep.shard.model_dump(), "round_starts": progress.round_starts})
        results = _rebuild(store, out, n_boot, lang)
    results.progress = progress
    return results


async def _execute_with_batches(prep: Prepared, store: Store, on_progress: ProgressHook | None,
                                stop: asyncio.Event | None, wait: bool) -> Progress:
    """The live judges' calls (:func:`execute`) and the batch judges' (:func:`run_batches`) side by side."""
    if not any(isinstance(j.config, LLMJudgeConfig) and j.config.batch for j in prep.judges):
        return await execute(prep.calls, prep.judges, prep.rubric, store, on_progress, stop)
    # imported here: it imports litellm, which a run without batch judges (the rules judge alone) never needs
    from consensus_eval.execution.batch import run_batches
    from consensus_eval.judges.llm import LLMJudge

    batched = [j for j in prep.judges if isinstance(j, LLMJudge) and j.config.batch]
    names = {j.config.name for j in batched}
    progress = Progress(total=0)
    live = execute([c for c in prep.calls if c.planned.judge not in names],
                   [j for j in prep.judges if j.config.name not in names], prep.rubric, store, on_progress, stop,
                   progress=progress)
    batches = run_batches(prep.calls, batched, prep.rubric, store, progress=progress, wait=wait, stop=stop,
                          on_progress=on_progress)
    _, report = await asyncio.gather(live, batches)
    progress.batches, progress.batch_notes = report.pending, report.notes
    return progress


@gc_paused_call
def _rebuild(store: Store, out: Path, n_boot: int, lang: str | None = None) -> Results:
    """Read, analyse and write a run in one paused-collector block (``consensus_eval._gc``): its stages' own
    blocks are nested, so the collector does not wake between stages to traverse what the stages before made."""
    # without the raw replies: nothing after the judge layer reads them (load_run keeps them)
    results = analyze(read_run(store, replies=False), labels=store.human_labels(), n_boot=n_boot,
                      spot_checks=store.spot_checks())
    # judgments.jsonl and consensus.csv/jsonl in a second process, while this one (and a third) run the bootstraps
    # and the audit and this one writes the reports (consensus_eval._parallel: one after the other where that cannot
    # serve)
    with beside(lambda: write_tables(results, out), cases=len(results.cases)):
        results.compute_all()
        write_analysis(results, out)
        write_reports(results, out, lang)
    return results


def _saved_reliability(folder: Path, judges: list[str], n_cases: int) -> ReliabilityReport | None:
    path = folder / "reliability.json"
    if not path.is_file():
        return None
    try:
        report = ReliabilityReport.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None  # unreadable or of another shape: recomputed
    return report if report.describes(judges, n_cases) else None


#: the most bootstrap resamples a figure takes (more adds nothing to a 95% CI; the CLI's --bootstrap has the same
#: bound): the count is bounded here, the memory by each bootstrap (analysis.alpha holds resamples x units only
#: up to MAX_WEIGHTS_BYTES, then works a chunk at a time)
MAX_BOOTSTRAP = 100_000


def _resamples(n_boot: int) -> None:
    """Refuse a number of bootstrap resamples that is not a whole number from 0 to :data:`MAX_BOOTSTRAP`."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or not 0 <= n_boot <= MAX_BOOTSTRAP:
        raise InputError(f"n_boot {n_boot!r}: bootstrap resamples are a whole number from 0 to {MAX_BOOTSTRAP:,} "
                         "(more adds nothing to a 95% interval)")


def _inputs(*given: tuple[str, object]) -> list[tuple[str, str]]:
    """``(what, absolute path)`` of each of ``given`` that is a path to a file (a config given as a mapping, cases
    given as objects, a bundled rubric's name are not)."""
    out = []
    for what, value in given:
        if isinstance(value, (str, Path)) and str(value) != "-":
            with suppress(OSError):
                if Path(value).is_file():
                    out.append((what, str(Path(value).absolute())))
    return out


def recorded_inputs(folder: str | Path) -> list[tuple[str, str]]:
    """The files the run in ``folder`` was scored from (``(what, absolute path)``, as :attr:`Prepared.inputs`
    recorded them; empty for a run scored before they were recorded): no output of another command replaces
    one (``audit --export``)."""
    with Store.open_existing(folder, read_only=True) as store:
        found = store.get_meta("inputs", [])
    return [(str(w), str(p)) for w, p in found if isinstance(w, str) and isinstance(p, str)] \
        if isinstance(found, list) and all(isinstance(i, list) and len(i) == 2 for i in found) else []


def _with_examples(cfg: EvalConfig) -> EvalConfig:
    """``cfg`` with its few-shot examples made from the run ``few_shot.from`` names (:mod:`.analysis.corrections`:
    the tuning part's corrections only), unless it has them already (a config read back from a run's store)."""
    spec = cfg.few_shot
    if spec is None or spec.examples:
        return cfg
    source = Path(spec.from_run)
    results = load_run(source, replies=False)
    if results.rubric.id != cfg.rubric:
        raise InputError(f"few_shot.from: {source} was scored with the rubric {results.rubric.id!r}, not "
                         f"{cfg.rubric!r}: its corrections name another rubric's deduction types")
    return cfg.model_copy(update={"few_shot": few_shot(spec, results, str(source))})


def _config(config: ConfigInput) -> EvalConfig:
    if isinstance(config, EvalConfig):
        return config
    if isinstance(config, Mapping):
        try:
            return EvalConfig.model_validate(dict(config))
        except ValidationError as e:
            raise InputError(f"invalid config:\n{format_validation_error(e, dict(config))}") from None
    return load_config(config)


def _cases(cases: CasesInput, skip_invalid: bool, fields: CaseFields | None = None) -> tuple[list[Case], list[str]]:
    if isinstance(cases, (str, Path)):
        loaded = load_cases(cases, skip_invalid=skip_invalid, fields=fields)
        return loaded.cases, loaded.errors
    out: list[Case] = []
    for i, c in enumerate(cases):
        try:
            out.append(c if isinstance(c, Case) else Case.model_validate(dict(c)))
        except ValidationError as e:
            raise InputError(f"case {i}: {format_validation_error(e).strip()}") from None
        if (where := surrogate_field(out[-1].model_dump())) is not None:  # a file's are refused as it is read
            raise InputError(f"case {i}: {where}: {SURROGATE_MESSAGE}")
    dup = sorted(duplicates(c.id for c in out))
    if dup:
        raise InputError(f"duplicate case id(s): {', '.join(dup)}")
    if not out:
        raise InputError("no cases to score")
    return out, []


def _sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code; refuse inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise StateError("an event loop is already running here (a notebook, an async app): "
                       "await the *_async function instead (evaluate_async, run_async)")
