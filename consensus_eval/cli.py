"""The `consensus-eval` command line: thin, parses and delegates."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer
from rich.text import Text

from consensus_eval._errors import InputError, RunBusy
from consensus_eval._gc import freeze_when_done
from consensus_eval.domain.terminal import SafeConsole, guarded
from consensus_eval.metrics.commands import metrics_app

if TYPE_CHECKING:
    from pydantic import BaseModel

app = typer.Typer(
    help="Score cases with a panel of judges and report how far to trust the result.",
    no_args_is_help=True,
    rich_markup_mode=None,  # click's plain help: paragraphs rewrapped, no `<bool>` column, no cut cells
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(metrics_app, name="metrics")

# control characters in what they print (a judge's quote, a name from a sheet) are shown escaped
out_console = SafeConsole()
err_console = SafeConsole(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(fn: F) -> F:
    """Show input errors as a message and exit 2, with no traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # a command owns its process, which ends soon after a rebuild: what a rebuild made may be frozen
        # out of the garbage collector's reach (consensus_eval._gc; the Python API never does this)
        freeze_when_done()
        try:
            with _terminate_as_interrupt():
                return guarded(fn)(*args, **kwargs)  # any console encoding; a stdout that fails is exit 1, one line
        except KeyboardInterrupt:   # Ctrl-C or SIGTERM: what was being written is removed, what was there kept
            err_console.print("interrupted: stopped; a file being written was removed, and every output is whole, "
                              "new or as it was", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except RunBusy as e:  # another command writes the run: nothing was written (README, "Exit codes")
            err_console.print(Text.assemble(("error:", "bold red"), " ", str(e)), highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_BUSY) from None
        except (InputError, FileNotFoundError) as e:
            err_console.print(Text.assemble(("error:", "bold red"), " ", str(e)), highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except RecursionError:  # a reader that does not limit nesting yet (the JSON and YAML readers do)
            err_console.print(Text.assemble(("error:", "bold red"), " an input file is nested too deeply to be read "
                                            "(JSON and YAML files may nest 100 levels)"), highlight=False)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (what a scheduler, a container or ``kill`` sends) raised as Ctrl-C's ``KeyboardInterrupt`` for the body,
    so a command stopped so cleans up as Ctrl-C makes it: the temporary file of an output being written is
    removed, a forked stage is stopped, the run's lock let go. Left as it is where a handler is set already (the
    caller's, or a command's own: ``score`` stops its calls and rebuilds) or off the main thread."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


DEFAULT_CONFIG = "configs/default.yaml"  # = config.DEFAULT_CONFIG; not imported, to keep start-up light
ConfigOpt = Annotated[str, typer.Option("--config", "-c", help="Config YAML (judges, rubric, runs).")]
HumanOpt = Annotated[Path | None, typer.Option(
    help="Human labels to import into the run's store first: the filled-in sheet of `audit --export`, "
         "or a CSV/JSONL of case_id + one column per dimension [+ categories].")]
ReviewerOpt = Annotated[str | None, typer.Option(
    help="Reviewer name for rows that give none (default: the one name in the sheet, else 'human').")]
EncodingOpt = Annotated[str | None, typer.Option(
    help="Encoding of the --human file (default: UTF-8, with or without BOM, then GB18030/GBK).")]


LangOpt = Annotated[str | None, typer.Option(
    "--lang", help="Language of what the command prints and of report.md/report.html: zh | en (default: the "
                   "rubric's).")]
WaitLockOpt = Annotated[bool, typer.Option(
    "--wait-lock", help="When another command is writing the run, wait for it to finish instead of refusing at "
                        "once (exit 6).")]


@contextmanager
def _writing(folder: Path, command: str, wait: bool, *, create: bool = False,
             mode: Literal["exclusive", "review", "team"] = "exclusive") -> Iterator[None]:
    """Hold the run's lock (one writer per run: execution.lock) for the body, as `consensus-eval COMMAND`; with
    ``wait`` (--wait-lock), wait for another holder, saying so once. ``create``: a new run's folder is made.
    ``mode``: ``review`` for the review server, ``team`` for a team change (both run beside each other)."""
    from consensus_eval import api

    def waiting(message: str) -> None:
        err_console.print(message, highlight=False, soft_wrap=True)

    with api.run_lock(folder, f"consensus-eval {command}", wait=wait, on_wait=waiting, create=create, mode=mode):
        yield


#: the largest seed of a spot check's draw (= api.MAX_SEED; not imported, to keep start-up light)
MAX_SEED = 2**32 - 1
#: the most bootstrap resamples --bootstrap takes (more adds nothing to a 95% CI, and costs memory and hours;
#: = api.MAX_BOOTSTRAP, not imported: start-up stays light)
MAX_BOOTSTRAP = 100_000
#: exit codes of `score` (README, "Exit codes")
EXIT_OK, EXIT_INPUT, EXIT_FAILURES, EXIT_INTERRUPTED = 0, 2, 3, 130
#: `score`: provider batches submitted and not all collected yet (README, "Exit codes")
EXIT_BATCHES_PENDING = 4
#: `compare --fail-if`: a condition held (a regression): README, "Exit codes"
EXIT_CONDITION = 5
#: another command is writing the run (its lock is held): nothing was written; README, "Exit codes"
EXIT_BUSY = 6


@app.command()
@friendly_errors
def score(
    cases: Annotated[Path, typer.Argument(help="Cases JSONL: id, conversation, record, [important], [meta].")],
    config: ConfigOpt = DEFAULT_CONFIG,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (results.sqlite and reports).")] = Path("out"),
    skip_invalid: Annotated[bool, typer.Option(help="Score the valid lines when some are invalid.")] = False,
    dry_run: Annotated[bool, typer.Option(
        help="Render every prompt, count tokens, estimate cost; call nothing.")] = False,
    show_prompt: Annotated[str | None, typer.Option(
        "--show-prompt", metavar="CASE[:DIMENSION]",
        help="With --dry-run: print what each judge would send for this case (or one dimension of it): every "
             "message as rendered, and the response schema instructor adds in the judge's mode.")] = None,
    allow_failures: Annotated[float, typer.Option(
        min=0.0, max=1.0,
        help="Exit 0 when at most this fraction of the planned calls failed (default 0: any failure exits 3).",
    )] = 0.0,
    lang: LangOpt = None,
    calibration: Annotated[Path | None, typer.Option(
        help="A calibration.json of `calibrate` for these judges: its figures go into the reports.")] = None,
    wait: Annotated[bool, typer.Option(
        help="Judges with `batch: true`: poll the provider (every batch_poll_s) until every batch is collected.",
    )] = False,
    wait_lock: WaitLockOpt = False,
    shard: Annotated[str | None, typer.Option(
        help="K/N: score only shard K of N (0 to N-1; a case's shard is a hash of its id) into OUT; "
             "`merge` then combines the shards' folders (docs/scale.md).")] = None,
) -> None:
    """Score CASES with the judges of CONFIG; resumes where a previous run into OUT stopped.

    Exit codes: 0 every planned call stored ok (with --allow-failures F: at most that fraction failed);
    2 bad input; 3 completed with failures (outputs written; the last lines say which and why); 4 provider
    batches submitted and still running (rerun `score`, or `score --wait`, to collect them); 6 another
    command is writing OUT (nothing written; --wait-lock waits for it); 130 interrupted (Ctrl-C or SIGTERM:
    outputs rebuilt from what is stored; rerun the same command to resume).
    """
    from functools import partial

    from consensus_eval import api
    from consensus_eval.judges.quiet import quiet_libraries
    from consensus_eval.output.console import (
        print_estimate,
        print_prompts,
        print_run_end,
        print_summary,
        print_weights_notice,
    )
    from consensus_eval.output.progress_bar import progress_hook
    from consensus_eval.output.report.i18n import default_lang, messages

    quiet_libraries()
    if lang is not None:
        messages(lang)  # an unknown language is refused before any call
    if calibration is not None:
        from consensus_eval.output.calibration_files import load_calibration

        load_calibration(calibration)  # a bad file is refused before any call
    if show_prompt is not None and not dry_run:
        raise InputError("--show-prompt prints what would be sent: add --dry-run (nothing is sent then)")
    prep = api.prepare(cases, config, skip_invalid=skip_invalid, check_keys=not dry_run, shard=shard)
    for line in prep.invalid_lines:
        err_console.print(f"[yellow]skipped:[/] {line}", highlight=False, soft_wrap=True)
    t = messages(lang or default_lang(prep.rubric))   # one language for the whole run: the rubric's, or --lang
    if prep.shard is not None:
        out_console.print(f"shard {prep.shard.shard}: {len(prep.cases)} of the {prep.shard.n_cases} cases",
                          highlight=False)
    if dry_run:
        if show_prompt is not None:
            print_prompts(out_console, api.show_prompt(prep, show_prompt), t)
            return
        print_weights_notice(out_console, prep.rubric, t)   # a rubric of your own is checked here first
        print_estimate(out_console, api.dry_run(prep), t)
        return
    with _writing(out, "score", wait_lock, create=True):
        with progress_hook(err_console, t=t) as hook:
            results = _run_until_done_or_interrupted(partial(api.run_async, lang=lang, wait=wait), prep, out, hook)
        if calibration is not None:
            api.attach_calibration(out, calibration, results, lang)
    print_summary(out_console, results, out, t=t)
    if results.progress is not None and results.progress.batches and not results.progress.interrupted:
        _print_batches(results.progress.batch_notes, results.progress.batches,
                       f"consensus-eval score {cases} --config {config} --out {out}")
        raise typer.Exit(EXIT_BATCHES_PENDING)
    if results.progress is not None:
        for note in results.progress.batch_notes:
            out_console.print(f"batch: {note}", highlight=False, soft_wrap=True)
    code = print_run_end(out_console, results, allow_failures, t)
    if code:
        raise typer.Exit(code)


@app.command()
@friendly_errors
def merge(
    runs: Annotated[list[Path], typer.Argument(help="The output folders of every shard (`score --shard K/N`).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder of the merged run (without a store).")],
    lang: LangOpt = None,
    wait_lock: WaitLockOpt = False,
) -> None:
    """Merge the runs of every shard of a run (`score --shard K/N`) into OUT and rebuild its outputs, as one
    `score` of every case would have written them. Calls no judge.

    Refused (exit 2, nothing written): a folder that is not a shard's run, shards of other cases, configs,
    rubrics or counts, a shard missing, given twice or not finished. Exit 3: the merged run has failed calls
    (as `score`).
    """
    from consensus_eval import api
    from consensus_eval.output.console import print_run_end, print_summary

    if lang is not None:
        from consensus_eval.output.report.i18n import messages

        messages(lang)  # an unknown language is refused before anything is written
    with _writing(out, "merge", wait_lock, create=True), ExitStack() as shards:
        for run in runs:  # none is written while merge reads it
            shards.enter_context(_writing(run, "merge", wait_lock))
        merged = api.merge(runs, out, lang=lang)
    out_console.print(f"merged {merged.shards} shard(s) into {out}: {merged.cases} cases, {merged.calls} calls, "
                      f"{merged.labels} human label(s)", highlight=False, soft_wrap=True)
    print_summary(out_console, merged.results, out)
    code = print_run_end(out_console, merged.results)
    if code:
        raise typer.Exit(code)


@app.command()
@friendly_errors
def calibrate(
    config: ConfigOpt = DEFAULT_CONFIG,
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Output folder (results.sqlite, calibration.json).")] = Path("out/calibration"),
    suite: Annotated[str, typer.Option(
        help="'builtin' (the suite shipped for the medical_record rubric), 'builtin-heldout' (its held-out "
             "operator family), 'handwritten' (its held-out set of errors written by hand), 'invariance' (clean "
             "records edited without changing their meaning, beside the planted suite where the rubric has one; "
             "any rubric, with --bases) or a suite JSONL file.",
    )] = "builtin",
    bases: Annotated[Path | None, typer.Option(
        help="A cases file of your own records, checked clean by a clinician: plant the built-in operators' "
             "errors into them instead of the built-in base records.")] = None,
    sample: Annotated[int | None, typer.Option(
        min=1, help="Run N cases of the suite drawn with --seed (clean controls in proportion).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the built-in suite and of --sample.")] = 15,
    dry_run: Annotated[bool, typer.Option(
        help="Render every prompt, count tokens, estimate cost; call nothing.")] = False,
    wait: Annotated[bool, typer.Option(
        help="Judges with `batch: true`: poll the provider (every batch_poll_s) until every batch is collected.",
    )] = False,
    lang: LangOpt = None,
    wait_lock: WaitLockOpt = False,
) -> None:
    """Measure each judge of CONFIG, and the panel, against records with planted errors: recall per
    deduction type and category, false alarms on clean records, score error. Resumes like `score`.

    Exit codes as `score`: 0 every call stored ok; 2 bad input; 3 completed with failures; 4 provider
    batches still running; 6 another command is writing OUT; 130 interrupted.
    """
    from functools import partial

    from consensus_eval import api
    from consensus_eval.judges.quiet import quiet_libraries
    from consensus_eval.output.console import print_estimate, print_run_end
    from consensus_eval.output.progress_bar import progress_hook
    from consensus_eval.output.report.calibration_blocks import calibration_block, invariance_block
    from consensus_eval.output.report.i18n import default_lang, messages
    from consensus_eval.output.trust_console import print_block

    quiet_libraries()
    if lang is not None:
        messages(lang)  # an unknown language is refused before any call
    prep = api.prepare_calibration(config, suite, sample=sample, seed=seed, check_keys=not dry_run, bases=bases)
    if prep.planting is not None:
        used = sum(1 for t in prep.planting.types.values() if t)
        err_console.print(f"planted into {used} of {len(prep.planting.types)} record(s) of {bases}; "
                          f"{len(prep.suite)} suite cases", highlight=False)
        for rid, why in prep.planting.nothing.items():
            err_console.print(f"[yellow]{rid}[/]: nothing could be planted: {why}", highlight=False, soft_wrap=True)
    t = messages(lang or default_lang(prep.prepared.rubric))
    if dry_run:
        print_estimate(out_console, api.dry_run(prep.prepared), t)
        return
    with _writing(out, "calibrate", wait_lock, create=True), progress_hook(err_console, t=t) as hook:
        results, report = _run_until_done_or_interrupted(partial(api.calibrate_async, wait=wait, lang=lang), prep,
                                                         out, hook)
    rubric = prep.prepared.rubric
    if report.suite_cases:
        print_block(out_console, calibration_block(report, t, rubric))
    if (stability := invariance_block(report, t)) is not None:
        print_block(out_console, stability)
    out_console.print(t("con_wrote", paths=out / "calibration.json"), highlight=False, soft_wrap=True)
    if results.progress is not None and results.progress.batches and not results.progress.interrupted:
        _print_batches(results.progress.batch_notes, results.progress.batches,
                       f"consensus-eval calibrate --config {config} --out {out} --suite {suite}"
                       + (f" --bases {bases}" if bases is not None else "")
                       + (f" --sample {sample} --seed {seed}" if sample is not None else ""))
        raise typer.Exit(EXIT_BATCHES_PENDING)
    code = print_run_end(out_console, results, 0.0, t)
    if code:
        raise typer.Exit(code)


def _print_batches(notes: list[str], pending: list[Any], command: str) -> None:
    """What the batch pass did, the batches still running, and how to collect them (exit 4)."""
    for note in notes:
        out_console.print(f"batch: {note}", highlight=False, soft_wrap=True)
    n = sum(b.n_calls for b in pending)
    out_console.print(f"{len(pending)} provider batch(es) still running, {n} call(s) not answered yet "
                      "(their cases are `incomplete` in the outputs):", highlight=False)
    for b in pending:
        out_console.print(f"  {b.judge}: {b.batch_id or b.key} ({b.n_calls} calls, {b.provider_status or b.state})",
                          highlight=False)
    out_console.print(f"rerun `{command}` to collect them, or add --wait to poll until they are done "
                      "(exit 4: batches pending)", highlight=False, soft_wrap=True)


def _run_until_done_or_interrupted(run_async: Callable[..., Any], *args: Any) -> Any:
    """``asyncio.run(run_async(*args, stop=...))`` with Ctrl-C and SIGTERM turned into a clean stop.

    The first signal sets ``stop``: calls in flight are cancelled, the outputs are rebuilt from what
    is stored and the run returns (interrupted). A second signal, until the process ends, exits at once (130),
    no traceback.
    """
    import asyncio
    import os
    import signal

    # the handlers go in before asyncio.run: it then installs no SIGINT handler of its own (a partial holding the
    # main task), whose check at the end (signal.getsignal) formats that task and so the whole result of the
    # run, which takes minutes for a large run
    running: dict[str, Any] = {}

    def again(signum: int, frame: object) -> None:
        message = "\ninterrupted again: exiting now, without rebuilding the outputs\n"
        try:
            sys.stderr.write(message)
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - it came in a write to stderr (a reentrant call): below its buffer
            with suppress(OSError):
                os.write(2, message.encode())
        os._exit(EXIT_INTERRUPTED)

    def first(signum: int, frame: object) -> None:
        # the second handler first: a signal that comes once the message is out (or while it is written:
        # Python runs handlers between bytecodes, even inside this one) is the second
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, again)
        sys.stderr.write("\ninterrupting: stopping the calls in flight and rebuilding the outputs from what is "
                         "stored (press Ctrl-C again to exit at once)\n")
        sys.stderr.flush()
        try:
            running["loop"].call_soon_threadsafe(running["stop"].set)
        except (KeyError, RuntimeError):   # before the run started, or after its loop closed: nothing to stop
            os._exit(EXIT_INTERRUPTED)

    async def main() -> Any:
        running["stop"] = stop = asyncio.Event()
        running["loop"] = asyncio.get_running_loop()
        return await run_async(*args, stop=stop)

    previous = {sig: signal.signal(sig, first) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return asyncio.run(main())
    finally:
        # once interrupted, a further signal exits at once until the process ends (the summary printed after the
        # run included): the previous handlers would turn it into a KeyboardInterrupt and exit 1
        if signal.getsignal(signal.SIGINT) is not again:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


@app.command()
@friendly_errors
def reliability(
    run_dir: Annotated[Path | None, typer.Argument(help="Output folder of a `score` run.")] = None,
    ratings: Annotated[Path | None, typer.Option(help="Any ratings table instead: CSV with unit,rater,value.")] = None,
    level: Annotated[str, typer.Option(help="nominal | ordinal | interval | ratio (with --ratings).")] = "interval",
    human: HumanOpt = None,
    reviewer: ReviewerOpt = None,
    bootstrap: Annotated[int, typer.Option(
        min=0, max=MAX_BOOTSTRAP, help="Bootstrap resamples for the 95% CI (0: none).")] = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 20261122,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    encoding: Annotated[str | None, typer.Option(
        help="Encoding of the --human / --ratings file (default: UTF-8, with or without BOM, then GB18030).")] = None,
    lang: LangOpt = None,
    wait_lock: WaitLockOpt = False,
    calibrated: Annotated[bool, typer.Option(
        help="Also fit, per judge and for the panel, an isotonic map of the total to the clinicians' scale on "
             "the random spot check, with its cross-validated error (reported beside the raw scores; "
             "reliability.json validity.calibrated).")] = False,
    export_errors: Annotated[Path | None, typer.Option(
        "--export-errors",
        help="Also write the error analysis against the clinicians (misses and false alarms per judge, the panel "
             "and item, with the cases, quotes and comments) as a CSV sheet here (- for standard output).")] = None,
) -> None:
    """Krippendorff's alpha with bootstrap CIs: of a run's judges (and a human), or of any ratings table;
    for a run also its validity against clinicians on the random spot check and the decision study
    (how many judges and runs are enough)."""
    from consensus_eval.analysis import alpha as al
    from consensus_eval.domain.writable import dumps_json  # NaN and Infinity written as null (JSON has neither)

    if ratings is not None:
        if level not in al.LEVELS:
            raise InputError(f"--level must be one of {', '.join(al.LEVELS)}, got {level!r}")
        arr, raters, units = al.load_ratings(ratings, encoding, level=level)
        a = al.alpha_with_ci(arr, level, bootstrap, seed)
        if json_out:
            print(dumps_json({**a.model_dump(), "raters": raters, "n_units_total": len(units)}, indent=2))
        else:
            ci = f"  95% CI [{a.ci[0]:.3f}, {a.ci[1]:.3f}]" if a.ci else ""
            val = f"{a.value:.3f}" if a.value is not None else f"undefined ({a.reason})"
            out_console.print(f"Krippendorff's alpha ({level}) = {val}{ci}\n"
                              f"{len(raters)} raters, {a.n_units} of {len(units)} units rated at least twice, "
                              f"{a.n_values} pairable values", highlight=False)
        return
    if run_dir is None:
        raise InputError("give a run folder (RUN_DIR) or --ratings FILE.csv")
    from consensus_eval import api
    from consensus_eval.output.files import write_json

    if human is not None:
        _import_human(run_dir, human, reviewer, encoding, bootstrap, wait_lock=wait_lock)
    if json_out and not calibrated and export_errors is None:
        # the figures alone: a part of the run at a time where it has no labels (api.reliability), at any size
        lean = api.reliability(run_dir, n_boot=bootstrap, seed=seed)
        write_json(run_dir / "reliability.json", lean.to_json())
        print(dumps_json(lean.to_json(), ensure_ascii=False, indent=2))
        return
    results = api.load_run(run_dir, n_boot=bootstrap, seed=seed, reuse_saved=False, replies=False)
    report = results.reliability
    if calibrated:
        from consensus_eval.analysis.judge_validity import validity_report

        if not results.spot_checks:
            raise InputError(f"--calibrated fits on the random spot check, and {run_dir} has none: run "
                             f"consensus-eval audit {run_dir} --spot-check N first and import the clinicians' scores")
        report.validity = validity_report(results.run, results.consensus, results.review, results.spot_checks,
                                          isotonic=True)
    write_json(run_dir / "reliability.json", report.to_json())
    if export_errors is not None:
        from consensus_eval.output.error_sheet import write_error_sheet

        if report.errors is None:
            raise InputError(f"{run_dir} has no clinician's label: nothing to analyse; score a spot check first "
                             f"(consensus-eval audit {run_dir} --spot-check N --export SPOT.csv, then human import)")
        write_error_sheet(report.errors, export_errors)
    if json_out:
        print(dumps_json(report.to_json(), ensure_ascii=False, indent=2))
    else:
        from consensus_eval.output.report.data import build_report_data
        from consensus_eval.output.trust_console import print_view

        print_view(out_console, build_report_data(results, run_dir, lang), "reliability")


@app.command()
@friendly_errors
def audit(
    run_dir: Annotated[Path, typer.Argument(help="Output folder of a `score` run.")],
    top: Annotated[int, typer.Option(
        min=0, help="Show (and export) the first N cases of the review queue; 0 for all. A sheet exported with "
                    "--reviewer holds every case that reviewer labelled or was assigned besides.")] = 10,
    export: Annotated[Path | None, typer.Option(
        help="Write the adjudication sheet (CSV, UTF-8 with BOM) here (- for standard output); `human import` "
             "reads it back.")] = None,
    human: HumanOpt = None,
    reviewer: Annotated[str | None, typer.Option(
        help="With --human: the reviewer of rows that name none. With --export: write this reviewer's "
             "stored labels into the sheet.")] = None,
    encoding: EncodingOpt = None,
    spot_check: Annotated[int | None, typer.Option(
        "--spot-check", min=1,
        help="Draw a random spot check of N cases and store it with each case's inclusion "
             "probability; validity against clinicians is measured on it. With --export: a blind sheet of "
             "those cases (no judge scores).")] = None,
    seed: Annotated[int, typer.Option(
        min=0, max=MAX_SEED, help="Seed of the --spot-check draw (the same seed, the same cases).")] = 0,
    stratify: Annotated[str | None, typer.Option(
        help="With --spot-check: draw per system (`system`) or per 10-point band of the panel total (`band`), "
             "in proportion to their sizes.")] = None,
    redraw: Annotated[bool, typer.Option(
        help="With --spot-check: replace a different spot check already drawn (refused once any of its cases "
             "has a reviewer's score).")] = False,
    lang: Annotated[str | None, typer.Option(
        "--lang", help="Language of the printed queue: zh | en (default: the rubric's).")] = None,
    wait_lock: WaitLockOpt = False,
) -> None:
    """The review queue: "N cases need review", the top cases with why, each judge's deductions side
    by side. Calls no judge.

    A case needs review when it failed, is inconclusive or incomplete, its judges' totals are further apart
    than flag_spread (or flag_spread_share of the total's range), its stars differ by flag_star_gap or more,
    its judges disagree on a criterion, a single judge scored it low or applied a
    fixed penalty, or a deduction quotes evidence not found in the case. Panels of two judges or more are
    ranked by disagreement (per-dimension spread as a share of the max, star gaps, deductions only one
    judge made: rates, so neither runs nor dimensions inflate it); a panel of one by risk (score lost,
    fixed penalties, evidence not found). docs/review.md, "Review queue".
    """
    from consensus_eval import api
    from consensus_eval.analysis.audit import export_selection, review_queue
    from consensus_eval.domain.writable import STDIO, check_output_path
    from consensus_eval.output.audit_console import print_audit
    from consensus_eval.output.files import write_adjudication_csv

    reviewer = _reviewer_option(reviewer)
    if spot_check is None and (stratify is not None or redraw):
        raise InputError(f"{'--stratify' if stratify is not None else '--redraw'} is about the draw of "
                         "--spot-check N: give --spot-check with it")
    if export is not None:  # before anything is imported, drawn or written
        inputs = [("the --human file", human)] if human is not None else []
        check_output_path(export, "the adjudication sheet", inputs=[*inputs, *api.recorded_inputs(run_dir)],
                          suggest="adjudication.csv")
    # a sheet written to standard output (--export -) is alone there: what the command says goes to stderr
    console = err_console if export is not None and str(export) == STDIO else out_console
    if human is not None:
        _import_human(run_dir, human, reviewer, encoding, console=console, wait_lock=wait_lock)
    if spot_check is not None:
        with _writing(run_dir, "audit --spot-check", wait_lock):
            _spot_check(run_dir, spot_check, seed, stratify, redraw, export, reviewer, console)
        return
    results = api.load_run(run_dir, replies=False)
    audits = results.audit
    from consensus_eval.output.report.i18n import default_lang, messages

    t = messages(lang or default_lang(results.rubric))
    print_audit(console, review_queue(audits, len(results.judges)), top, results.judge_quality, t)
    if export is not None:   # a reviewer's sheet holds every case they labelled or were assigned; --top the rest
        keep = {lb.case_id for lb in results.labels if lb.reviewer == reviewer} | set(
            api.assigned_cases(run_dir, reviewer)) if reviewer is not None else set()
        path = write_adjudication_csv(export, export_selection(audits, top, keep), judges=results.judges,
                                      review=results.review, reviewer=reviewer, rubric=results.rubric,
                                      spot_check={r.case_id for r in results.spot_checks},
                                      case_criteria=results.case_criteria, cases={c.id: c for c in results.cases})
        console.print(f"adjudication sheet: {path} (fill in human_score, human_verdict, human_comment, "
                      f"reviewer; then: consensus-eval human import {path} --run {run_dir})", highlight=False)


def _spot_check(run_dir: Path, n: int, seed: int, stratify: str | None, redraw: bool, export: Path | None,
                reviewer: str | None, console: SafeConsole = out_console) -> None:
    """`audit --spot-check N`: draw (or find) the random sample, list it, and write its blind sheet."""
    from consensus_eval import api
    from consensus_eval.analysis.spotcheck import STRATIFY
    from consensus_eval.output.files import write_adjudication_csv

    if stratify is not None and stratify not in STRATIFY:
        raise InputError(f"--stratify must be one of {', '.join(STRATIFY)}, got {stratify!r}")
    done = api.spot_check(run_dir, n, seed=seed, stratify=stratify, redraw=redraw)
    sample = done.sample
    strata: dict[str, tuple[int, float]] = {}
    for r in sample:
        k, p = strata.get(r.stratum, (0, r.probability))
        strata[r.stratum] = (k + 1, p)
    console.print(f"spot check: {len(sample)} case(s) drawn at random (seed {sample[0].seed}) "
                      f"{'now' if done.drawn else 'earlier (the same draw)'}; {done.labelled} already scored by a "
                      "reviewer", highlight=False)
    for name, (k, p) in strata.items():
        console.print(f"  {name}: {k} case(s), inclusion probability {p:.3g}", highlight=False)
    tuning = [r.case_id for r in sample if r.part == "tuning"]
    console.print(f"  tuning part: {len(tuning)} case(s) (a prompt may be tuned on them, few-shot examples come from "
                  f"them); held out: {len(sample) - len(tuning)} (what a changed prompt is measured on)",
                  highlight=False, soft_wrap=True)
    console.print("cases: " + ", ".join(r.case_id for r in sample), highlight=False, soft_wrap=True)
    if export is not None:
        results = api.load_run(run_dir, replies=False)
        by_id = {a.case_id: a for a in results.audit}
        path = write_adjudication_csv(export, [by_id[r.case_id] for r in sample if r.case_id in by_id],
                                      judges=results.judges, review=results.review, reviewer=reviewer,
                                      rubric=results.rubric, spot_check={r.case_id for r in sample},
                                      case_criteria=results.case_criteria, cases={c.id: c for c in results.cases})
        console.print(f"blind spot-check sheet: {path} (no judge score or deduction until the reviewer's own "
                          f"scores are in; fill in human_score and reviewer, then: consensus-eval human import {path} "
                          f"--run {run_dir}; export again with --reviewer NAME to judge the deductions)",
                          highlight=False, soft_wrap=True)
    else:
        console.print(f"next: consensus-eval audit {run_dir} --spot-check {n} --seed {sample[0].seed} --export "
                          "spot.csv (a blind sheet), or consensus-eval review (the app shows them apart, blinded)",
                          highlight=False, soft_wrap=True)


@app.command()
@friendly_errors
def compare(
    run_a: Annotated[Path, typer.Argument(help="Output folder of the baseline run (A), or the one run to split.")],
    run_b: Annotated[Path | None, typer.Argument(help="Output folder of the run compared with it (B).")] = None,
    systems: Annotated[tuple[str, str] | None, typer.Option(
        help="Compare two systems of RUN_A instead (B minus A), paired by source conversation.")] = None,
    fail_if: Annotated[list[str] | None, typer.Option(
        "--fail-if",
        help="Exit 5 when a condition on the change (B - A, points) holds, e.g. \"total < -1.0\" or "
             "\"accuracy.high < 0\" (the upper bound of its 95% CI). Repeat or separate with commas. With "
             "--against-clinicians: [RATER:]METRIC.KEY, e.g. \"icc.total < -0.05\" (METRIC: icc, mae, bias; or "
             "kappa, f1 of a judge's deduction items: \"JUDGE:f1.items < 0\"; RATER: a judge, default the "
             "panel).")] = None,
    against_clinicians: Annotated[bool, typer.Option(
        "--against-clinicians",
        help="Compare the two runs' agreement with the same clinicians' labels (human copy A B) on the spot "
             "check's held-out part: the paired change of ICC, MAE and bias per judge and the panel, with "
             "bootstrap CIs, and how often the held-out part has been used (each such comparison is recorded in "
             "both runs).")] = False,
    lang: LangOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """B against A on the same cases: per dimension the mean paired change with its 95% CI, the cases that moved
    most, the deductions gained or lost per category. Calls no judge. With --fail-if, a CI gate: exit 5 and the
    reason when a condition holds, 0 otherwise. With --against-clinicians: which run agrees better with the
    clinicians, on labels no prompt was tuned on."""
    from consensus_eval import api
    from consensus_eval.analysis.compare import compare_runs, compare_systems, failed_conditions, parse_conditions
    from consensus_eval.output.report.i18n import default_lang, messages
    from consensus_eval.output.report.trust import comparison_block
    from consensus_eval.output.trust_console import print_block

    if against_clinicians:
        if run_b is None or systems is not None:
            raise InputError("--against-clinicians compares two runs of the same cases: give RUN_A and RUN_B "
                             "(not --systems)")
        _compare_with_clinicians(run_a, run_b, fail_if or [], lang, json_out)
        return
    a = api.load_run(run_a, n_boot=0, replies=False)
    keys = [*(d.id for d in a.rubric.dimensions), "total"]
    conditions = parse_conditions(fail_if or [], keys)
    if systems is not None:
        if run_b is not None:
            raise InputError("give either RUN_B or --systems A B, not both")
        comparison = compare_systems(a, systems[0], systems[1])
    elif run_b is None:
        names = list(dict.fromkeys(c.system for c in a.cases if c.system))
        if len(names) != 2:
            raise InputError(f"give RUN_B, or --systems A B to compare two systems of {run_a} "
                             f"(its systems: {', '.join(names) or 'none named'})")
        comparison = compare_systems(a, names[0], names[1])
    else:
        b = api.load_run(run_b, n_boot=0, replies=False)
        comparison = compare_runs(a, b, str(run_a), str(run_b))
    reasons = failed_conditions(conditions, comparison)
    if not json_out:
        print_block(out_console, comparison_block(comparison, a.rubric, messages(lang or default_lang(a.rubric))))
    _end_comparison(comparison, reasons, [c.text for c in conditions], json_out)


def _compare_with_clinicians(run_a: Path, run_b: Path, fail_if: list[str], lang: str | None, json_out: bool) -> None:
    from consensus_eval import api
    from consensus_eval.analysis import heldout
    from consensus_eval.analysis.judge_validity import PANEL
    from consensus_eval.output.report.i18n import default_lang, messages
    from consensus_eval.output.report.qc import clinician_comparison_block
    from consensus_eval.output.trust_console import print_block

    a = api.load_run(run_a, n_boot=0, replies=False)
    rubric = a.rubric
    conditions = heldout.parse_conditions(fail_if, [*(d.id for d in rubric.dimensions), "total"], [*a.judges, PANEL])
    comparison = api.compare_against_clinicians(run_a, run_b, results_a=a)
    reasons = heldout.failed_conditions(conditions, comparison)
    if not json_out:
        print_block(out_console, clinician_comparison_block(comparison, rubric, messages(lang or default_lang(rubric))))
    _end_comparison(comparison, reasons, [c.text for c in conditions], json_out)


def _end_comparison(comparison: BaseModel, reasons: list[str], conditions: list[str], json_out: bool) -> None:
    """A comparison's end, for both kinds of `compare`: its JSON (with the failed conditions) when asked for, then
    each failed --fail-if condition on stderr and exit 5, or the line that none holds."""
    from consensus_eval.domain.writable import dumps_json

    if json_out:
        print(dumps_json({**comparison.model_dump(mode="json"), "failed": reasons}, ensure_ascii=False, indent=2))
    for reason in reasons:
        err_console.print(Text.assemble(("fail-if:", "bold red"), " ", reason), highlight=False, soft_wrap=True)
    if reasons:
        raise typer.Exit(EXIT_CONDITION)
    if conditions:
        out_console.print(f"fail-if: no condition holds ({'; '.join(conditions)})", highlight=False)


@app.command()
@friendly_errors
def report(
    run_dir: Annotated[Path, typer.Argument(help="Output folder of a `score` run.")],
    human: HumanOpt = None,
    reviewer: ReviewerOpt = None,
    encoding: EncodingOpt = None,
    lang: LangOpt = None,
    wait_lock: WaitLockOpt = False,
) -> None:
    """(Re)write RUN_DIR/report.md and a self-contained RUN_DIR/report.html from the store. Calls no judge.

    With --lang in another language than the rubric's, the reports go beside those as report.<lang>.md and
    report.<lang>.html (report --lang en: report.en.html). With --human SHEET, the labels are imported into the
    store first (`human import`)."""
    from consensus_eval import api
    from consensus_eval.output.report import report_paths, write_reports
    from consensus_eval.output.report.i18n import default_lang, messages

    if human is not None:
        _import_human(run_dir, human, reviewer, encoding, wait_lock=wait_lock)
    results = api.load_run(run_dir, replies=False)
    default = default_lang(results.rubric)
    md, html = write_reports(results, run_dir, lang, stem=report_paths(run_dir, lang or default, default)[1].stem)
    out_console.print(messages(lang or default)("con_wrote", paths=f"{md}, {html}"), highlight=False, soft_wrap=True)


@app.command()
@friendly_errors
def export(
    run_dir: Annotated[Path, typer.Argument(help="Output folder of a `score` run.")],
    parquet: Annotated[Path, typer.Option(
        "--parquet", help="Folder to write judgments.parquet and consensus.parquet into (made if missing).")],
) -> None:
    """Export RUN_DIR's judgments and consensus as Parquet files with typed columns, for a data warehouse
    (DuckDB, Spark, BigQuery...). Needs the `parquet` extra (pyarrow). Calls no judge."""
    from consensus_eval import api

    paths = api.export_parquet(run_dir, parquet)
    out_console.print(f"wrote {', '.join(str(p) for p in paths)}", highlight=False, soft_wrap=True)


@app.command()
@friendly_errors
def review(
    run_dir: Annotated[Path, typer.Argument(help="Output folder of a `score` run.")],
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8765,
    reviewer: Annotated[str | None, typer.Option(
        help="Your name, stored with every label (default: the page asks each browser).")] = None,
    host: Annotated[str, typer.Option(
        help="Address to listen on. Default: this machine only (127.0.0.1); any other address lets "
             "other machines reach the page (anyone with the printed link can label).")] = "127.0.0.1",
    lang: Annotated[str | None, typer.Option(
        help="Language of the pages: zh or en (default: zh for a rubric in Chinese, as the report).")] = None,
    wait_lock: WaitLockOpt = False,
) -> None:
    """A local web page where clinicians adjudicate the review queue: the record and the conversation
    side by side, each judge's deductions with their evidence highlighted, a verdict per deduction,
    a score per dimension; every change is stored at once in RUN_DIR/results.sqlite under the
    reviewer's name. Calls no judge. Ctrl-C stops the server (nothing is lost)."""
    try:  # the app is an extra: say so before anything starts
        import uvicorn  # noqa: F401

        from consensus_eval.review import serve
    except ModuleNotFoundError as e:
        missing = (e.name or "").partition(".")[0]
        if missing not in ("starlette", "uvicorn"):
            raise
        raise InputError(f"`review` needs {missing}, which is not installed: "
                         "pip install 'consensus-eval[review]'") from None

    freeze_when_done(False)  # a long-lived server: never freeze what its requests made (consensus_eval._gc)
    from consensus_eval import api
    from consensus_eval.domain.hosts import is_loopback

    reviewer = _reviewer_option(reviewer)
    members = api.team(run_dir)
    if not is_loopback(host):
        err_console.print(Text.assemble(
            ("warning:", "bold yellow"),
            f" listening on {host}, not only on this machine. Anyone who can reach it and has a link can read the "
            "cases (patients' records) and write labels, and the server speaks plain HTTP: on a network the links, "
            "the cookies and the records travel unencrypted. For a team, keep it on this machine "
            f"(--host 127.0.0.1) and put a TLS reverse proxy in front, e.g. `caddy reverse-proxy --from "
            f"review.example.org --to 127.0.0.1:{port}` or nginx with `proxy_pass http://127.0.0.1:{port};` and "
            "the Host header passed through; give each reviewer a personal link (consensus-eval reviewers add "
            f"NAME --run {run_dir})."), highlight=False, soft_wrap=True)

    def ready(url: str) -> None:
        if members:
            base = url.split("?", 1)[0]
            out_console.print(f"reviewing {run_dir} as a team of {len(members)} "
                              f"({', '.join(f'{m.name} ({m.role})' for m in members)}): open {base} with your "
                              f"personal link ({base}?key=...; consensus-eval reviewers add NAME --run {run_dir} "
                              "--new-key makes a new one); the shared token link is off  (Ctrl-C to stop)",
                              highlight=False, soft_wrap=True)
        else:
            out_console.print(f"reviewing {run_dir}: open {url}  (Ctrl-C to stop)", highlight=False, soft_wrap=True)

    # the server writes labels while it serves: team changes (reviewers add / assign / remove) run beside it, data
    # writers (score, human import, ...) are refused or wait (execution.lock)
    with _writing(run_dir, "review", wait_lock, mode="review"):
        serve(run_dir, host=host, port=port, reviewer=reviewer, on_ready=ready, lang=lang)


human_app = typer.Typer(help="Human labels: import the filled-in adjudication sheet into a run's store, or copy a "
                             "run's labels into another run of the same cases.",
                        no_args_is_help=True, rich_markup_mode=None)
app.add_typer(human_app, name="human")
reviewers_app = typer.Typer(help="The team reviewing a run: a personal link per reviewer, their roles.",
                            no_args_is_help=True, rich_markup_mode=None)
app.add_typer(reviewers_app, name="reviewers")
RunOpt = Annotated[Path, typer.Option("--run", help="Output folder of the `score` run.")]


@reviewers_app.command("add")
@friendly_errors
def reviewers_add(
    name: Annotated[str, typer.Argument(help="The reviewer's name: what their labels carry.")],
    run_dir: RunOpt,
    role: Annotated[str, typer.Option(help="reviewer | adjudicator (settles what two reviewers disagree on).")]
    = "reviewer",
    new_key: Annotated[bool, typer.Option(help="Replace the link of a reviewer already in the team.")] = False,
    host: Annotated[str, typer.Option(help="The address the link names (where `review` will listen).")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="The port the link names.")] = 8765,
    wait_lock: WaitLockOpt = False,
) -> None:
    """Add a reviewer to RUN's team and print their personal link (shown once: only a hash of its key is
    stored). With a team, `review` runs in team mode: each reviewer opens their own link and labels under
    their own name only; the shared token link no longer opens the app."""
    from consensus_eval import api

    with _writing(run_dir, "reviewers add", wait_lock, mode="team"):
        rec, key = api.add_reviewer(run_dir, name, role=role, new_key=new_key)  # type: ignore[arg-type]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    out_console.print(f"{rec.name} ({rec.role}) is on the team of {run_dir}. Their personal link, shown once (send "
                      f"it to them privately; anyone with it labels as {rec.name}):", highlight=False, soft_wrap=True)
    out_console.print(f"http://{shown}:{port}/?key={key}", highlight=False, soft_wrap=True)
    out_console.print(f"start the server with: consensus-eval review {run_dir} --port {port}"
                      + (f" --host {host}" if host != "127.0.0.1" else ""), highlight=False, soft_wrap=True)


@reviewers_app.command("assign")
@friendly_errors
def reviewers_assign(
    run_dir: RunOpt,
    per_case: Annotated[int, typer.Option(min=1, help="Reviewers per case (2: double review).")] = 2,
    queue: Annotated[bool, typer.Option(
        help="Assign the review queue's cases, even when a random spot check is drawn (default: the spot check "
             "when there is one).")] = False,
    seed: Annotated[int, typer.Option(help="Seed of the tie-breaking order.")] = 0,
    wait_lock: WaitLockOpt = False,
) -> None:
    """Assign cases to the team's reviewers, balanced, PER_CASE reviewers each: each then sees their own cases
    first, blinded to the judges on spot-check cases and to each other's labels. Replaces an earlier assignment."""
    from consensus_eval import api

    with _writing(run_dir, "reviewers assign", wait_lock, mode="team"):
        done = api.assign(run_dir, per_case, queue=queue, seed=seed)
    load: dict[str, int] = {}
    for names in done.values():
        for n in names:
            load[n] = load.get(n, 0) + 1
    out_console.print(f"assigned {len(done)} case(s), {per_case} reviewer(s) each: "
                      + ", ".join(f"{n} {k}" for n, k in load.items()), highlight=False, soft_wrap=True)


@reviewers_app.command("list")
@friendly_errors
def reviewers_list(run_dir: RunOpt) -> None:
    """The team of RUN: names and roles (no link: keys are not stored)."""
    from consensus_eval import api

    members = api.team(run_dir)
    if not members:
        out_console.print(f"no team for {run_dir}: `review` runs in one-token mode (one link for this machine)",
                          highlight=False)
    for m in members:
        out_console.print(f"{m.name}\t{m.role}", highlight=False)


@reviewers_app.command("remove")
@friendly_errors
def reviewers_remove(name: Annotated[str, typer.Argument(help="The reviewer to take off the team.")],
                     run_dir: RunOpt, wait_lock: WaitLockOpt = False) -> None:
    """Take a reviewer off RUN's team: their link stops working; their labels stay."""
    from consensus_eval import api

    with _writing(run_dir, "reviewers remove", wait_lock, mode="team"):
        api.remove_reviewer(run_dir, name)
    out_console.print(f"{name} is off the team of {run_dir}: their link no longer opens it (their labels stay)",
                      highlight=False)


@human_app.command("import")
@friendly_errors
def human_import(
    sheet: Annotated[Path, typer.Argument(
        help="The sheet `audit --export` wrote, filled in (or a CSV/JSONL of case_id + dimension scores).")],
    run: Annotated[Path, typer.Option("--run", help="Output folder of the `score` run the sheet is about.")],
    reviewer: ReviewerOpt = None,
    encoding: EncodingOpt = None,
    bootstrap: Annotated[int, typer.Option(
        min=0, max=MAX_BOOTSTRAP, help="Bootstrap resamples for the rebuilt 95% CIs.")] = 1000,
    wait_lock: WaitLockOpt = False,
) -> None:
    """Store a reviewer's labels in RUN/results.sqlite (a re-import of the same sheet replaces them),
    then rebuild reliability.json and the reports. Calls no judge."""
    _import_human(run, sheet, reviewer, encoding, bootstrap, wait_lock=wait_lock)


@human_app.command("copy")
@friendly_errors
def human_copy(
    source: Annotated[Path, typer.Argument(help="Output folder of the run whose labels are copied (read only).")],
    target: Annotated[Path, typer.Argument(help="Output folder of another run of the same cases (a changed prompt, "
                                                "another judge model) that gets them.")],
    bootstrap: Annotated[int, typer.Option(
        min=0, max=MAX_BOOTSTRAP, help="Bootstrap resamples for the rebuilt 95% CIs.")] = 1000,
    wait_lock: WaitLockOpt = False,
) -> None:
    """Copy the clinicians' labels of SOURCE into TARGET, matched by case id and content, with the spot check and
    its tuning / held-out split; verdicts on deductions go to a deduction of the same type (else: not comparable).
    Each copied event names its origin; SOURCE is not changed. Copying again copies only what is new. Then rebuild
    TARGET's reliability.json and reports. Calls no judge."""
    from consensus_eval import api
    from consensus_eval.execution.label_copy import names

    with _writing(target, "human copy", wait_lock):
        done = api.copy_labels(source, target, n_boot=bootstrap)
    rep = done.report
    out_console.print(f"copied {rep.copied} label event(s) of {rep.cases} case(s) from {source} to {target}"
                      + (f" ({rep.already} copied before)" if rep.already else ""), highlight=False, soft_wrap=True)
    if rep.spot_check != "none":
        what = "copied with its tuning / held-out split" if rep.spot_check == "copied" else "the same in both"
        out_console.print(f"spot check: {what}", highlight=False)
    if rep.not_in_target:
        out_console.print(f"not in {target} (skipped): {len(rep.not_in_target)} labelled case(s): "
                          f"{names(rep.not_in_target)}", highlight=False, soft_wrap=True)
    if rep.not_comparable:
        n = sum(x.events for x in rep.not_comparable)
        items = [f"{x.case_id} {x.dimension}/{x.item}" for x in rep.not_comparable]
        out_console.print(f"not comparable: {n} verdict(s) on deduction types {target}'s judges did not give: "
                          f"{names(items)}", highlight=False, soft_wrap=True)
    out_console.print(f"{done.stored} human label(s) in {target}/results.sqlite; rebuilt reliability.json, "
                      "report.md, report.html", highlight=False, soft_wrap=True)


def _reviewer_option(name: str | None) -> str | None:
    """``--reviewer`` checked as every reviewer name is (:func:`~consensus_eval.domain.reviewers.clean_name`)."""
    from consensus_eval.domain.reviewers import clean_name

    if name is None:
        return None
    try:
        return clean_name(name)
    except ValueError as e:
        raise InputError(f"--reviewer {name!r}: {e}") from None


def _import_human(run_dir: Path, sheet: Path, reviewer: str | None, encoding: str | None,
                  bootstrap: int = 1000, *, console: SafeConsole = out_console, wait_lock: bool = False) -> None:
    from consensus_eval import api

    with _writing(run_dir, "human import", wait_lock):
        done = api.import_human(run_dir, sheet, reviewer=_reviewer_option(reviewer), encoding=encoding,
                                n_boot=bootstrap)
    for name, counts in done.by_reviewer.items():
        what = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no label"
        console.print(f"imported {sheet} ({done.format}) for reviewer {name}: {what}", highlight=False)
    if not done.by_reviewer:
        console.print(f"imported {sheet} ({done.format}): no human cell is filled in", highlight=False)
    console.print(f"{done.stored} human label(s) in {run_dir}/results.sqlite; rebuilt reliability.json, "
                      "report.md, report.html", highlight=False)


judges_app = typer.Typer(help="Inspect and check the judges of a config.", no_args_is_help=True,
                         rich_markup_mode=None)
app.add_typer(judges_app, name="judges")


@judges_app.command("check")
@friendly_errors
def judges_check(config: ConfigOpt = DEFAULT_CONFIG) -> None:
    """Ping each LLM judge with one tiny call; report missing keys before any call is made."""
    import asyncio

    from consensus_eval import api
    from consensus_eval.domain.config import LLMJudgeConfig, load_config
    from consensus_eval.judges.quiet import quiet_libraries

    quiet_libraries()
    cfg = load_config(config)
    results = asyncio.run(api.check_judges_async(cfg))
    for name, ok, msg in results:
        j = cfg.judge(name)
        mark = "[green]ok[/]" if ok else "[bold red]FAILED[/]"
        model = j.model if isinstance(j, LLMJudgeConfig) else None
        out_console.print(f"{mark} {name} ({model or j.kind}): {msg}", highlight=False)
    if not all(ok for _, ok, _ in results):
        raise typer.Exit(1)


def main() -> None:  # pragma: no cover - console entry point alias
    app(prog_name="consensus-eval")


if __name__ == "__main__":  # pragma: no cover
    main()
