"""A run's judgments and consensus as Parquet, for data warehouses (``consensus-eval export RUN --parquet DIR``).

Two files, each with a schema of its own fixed by the rubric (the same types whatever the run holds: a column
with no value is typed all the same), readable by DuckDB, Spark, BigQuery, Snowflake, pandas or polars:

- ``judgments.parquet``: one row per call of the plan that is stored, the fields of judgments.jsonl
  (:func:`consensus_eval.output.files.judgment_row`, in its order): ``run``, ``attempts`` int32, tokens
  int64, scores, points and cost float64, ``stars`` int8, ``claim_mismatch`` bool; a call's deductions,
  fixed penalties, a criteria call's ``verdicts`` and a likert call's ``evidence`` quotes as lists of structs
  (empty for the other kinds), each item's grounding as ``grounding`` (its kind: ``exact``, ``normalised``,
  ``fuzzy``, ``not_found``, ``empty``) and ``grounding_score``, and ``dropped`` (left out of the score under
  ``ungrounded: drop``). Where a quote was found (its spans) is in judgments.jsonl.
- ``consensus.parquet``: one row per case, consensus.csv's columns (:func:`consensus_columns`) typed: scores,
  totals and spread float64, stars int8, a criterion's majority verdict string, ``n_judges`` int32,
  ``flagged`` bool, ``flags`` a list of strings. Missing values are nulls, never empty strings.

Written with pyarrow (the ``parquet`` extra: ``pip install 'consensus-eval[parquet]'``), zstd-compressed,
each file atomically (a name unique to the process, then a rename).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from consensus_eval._errors import InputError
from consensus_eval._parallel import beside
from consensus_eval.analysis.consensus import CaseConsensus
from consensus_eval.analysis.results import Results
from consensus_eval.domain.rubric import Rubric
from consensus_eval.domain.writable import check_output_path, write_error
from consensus_eval.execution.stored_run import StoredRun
from consensus_eval.output.files import consensus_columns, judgment_row

if TYPE_CHECKING:
    import pyarrow as pa

#: the files :func:`write_parquet` writes
PARQUET_FILES = ("judgments.parquet", "consensus.parquet")
#: rows converted and written at a time (what memory holds of a large run's judgments)
BATCH_ROWS = 10_000


def _pyarrow() -> Any:
    """pyarrow, or an :class:`InputError` saying which extra to install."""
    try:
        import pyarrow
        import pyarrow.parquet  # the writer
    except ImportError:
        raise InputError("export --parquet needs pyarrow, which is not installed: pip install "
                         "'consensus-eval[parquet]'") from None
    return pyarrow


def judgment_schema(pa: Any) -> pa.Schema:
    """judgments.parquet's schema (module docstring)."""
    s, f64, b = pa.string(), pa.float64(), pa.bool_()
    grounded = [("grounding", s), ("grounding_score", f64), ("dropped", b)]
    return pa.schema([
        ("case_id", s), ("dimension", s), ("judge", s), ("run", pa.int32()), ("status", s),
        ("score", f64), ("stars", pa.int8()),
        ("deductions", pa.list_(pa.struct([("category", s), ("type", s), ("points", f64), ("evidence", s),
                                           ("reason", s), ("category_id", s), ("type_id", s), *grounded]))),
        ("fixed_penalties", pa.list_(pa.struct([("name", s), ("points", f64), ("evidence", s), ("reason", s),
                                                ("id", s), ("times_listed", pa.int32()), *grounded]))),
        ("rating", pa.int32()),
        ("evidence", pa.list_(pa.struct([("quote", s), *grounded]))),
        ("verdicts", pa.list_(pa.struct([("id", s), ("met", b), ("points", f64), ("evidence", s), ("reason", s),
                                         *grounded]))),
        ("claimed_score", f64), ("claimed_stars", pa.int8()), ("claim_mismatch", b), ("comment", s),
        ("error", s), ("error_kind", s), ("model", s), ("attempts", pa.int32()),
        ("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()), ("cost", f64), ("latency_s", f64),
        ("request_hash", s),
    ])


#: the Arrow type of each kind of consensus.csv column (:data:`consensus_eval.output.files.ColumnKind`)
def _column_type(pa: Any, kind: str) -> pa.DataType:
    return {"number": pa.float64(), "stars": pa.int8(), "verdict": pa.string(), "count": pa.int32(),
            "text": pa.string(), "flag": pa.bool_(), "list": pa.list_(pa.string())}[kind]


def consensus_schema(pa: Any, rubric: Rubric) -> pa.Schema:
    """consensus.parquet's schema for ``rubric`` (module docstring)."""
    return pa.schema([(c.name, _column_type(pa, c.kind)) for c in consensus_columns(rubric)])


def _item(item: dict[str, Any]) -> dict[str, Any]:
    """A deduction, penalty, verdict or quote of judgments.jsonl with its grounding as kind and score."""
    g = item.get("grounding")
    return {**item, "grounding": g["kind"] if g else None, "grounding_score": g["score"] if g else None,
            "dropped": bool(item.get("dropped", False))}


def _judgment(row: dict[str, Any]) -> dict[str, Any]:
    out = {**row, "deductions": [_item(d) for d in row["deductions"]],
           "fixed_penalties": [_item(p) for p in row["fixed_penalties"]],
           "verdicts": [_item(v) for v in row.get("verdicts", [])],
           "evidence": [_item(e) for e in row.get("evidence", [])]}
    out.setdefault("rating", None)
    return out


def write_parquet(results: Results, folder: str | Path) -> list[Path]:
    """judgments.parquet and consensus.parquet of ``results`` into ``folder`` (made if missing); returns their
    paths. Raises :class:`InputError` when pyarrow is missing or a file cannot be written."""
    return write_parquet_parts([lambda: [(results.run, results.consensus)]], folder)


#: a part of a run: a derived run of some of its cases, and their consensus
Part = tuple[StoredRun, Sequence[CaseConsensus]]


def write_parquet_parts(spans: Sequence[Callable[[], Iterable[Part]]], folder: str | Path, *,
                        cases: int = 0) -> list[Path]:
    """:func:`write_parquet` of a run given in parts (:func:`~consensus_eval.analysis.derived.read_run_by_cases`):
    what ``export --parquet`` writes without holding the run. ``spans``: functions each giving the parts of
    consecutive cases, in the run's order (one function: the whole run); ``cases``: how many the run has.

    The first span's parts are read here, each part's rows written before the next part is read. Every other span
    is read at the same time in a process of its own (:func:`consensus_eval._parallel.beside`, which reads it
    here first where forking cannot serve or the run has too few cases), its judgments written to a temporary
    Arrow file beside the output and its consensus rows sent back; they are copied in after the first span's.
    The files are the same as one process writes for the whole run: judgments in batches of :data:`BATCH_ROWS`
    rows, consensus in one table. An error any span raises leaves no file written, and the folder's earlier files
    as they were."""
    pa = _pyarrow()
    import pyarrow.ipc
    import pyarrow.parquet as pq

    out = Path(folder)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: is a file, not a folder; --parquet names the folder to write "
                         f"{' and '.join(PARQUET_FILES)} into (nothing was written)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise write_error(out / PARQUET_FILES[0], e) from None
    schema = judgment_schema(pa)
    paths = [check_output_path(out / name, name) for name in PARQUET_FILES]
    spilled = [out / f".judgments.{os.getpid()}.{k}.arrow" for k in range(1, len(spans))]
    per_case: list[Any] = []   # consensus.parquet's rows, written once every span is read

    def spill(span: Callable[[], Iterable[Part]], path: Path) -> list[Any]:   # a span of its own: in a child
        theirs: list[Any] = []
        try:
            with pa.OSFile(str(path), "wb") as f, pyarrow.ipc.new_stream(f, schema) as w:
                for batch in _batches(pa, span(), schema, theirs):
                    w.write_batch(batch)
        except BaseException:   # stopped (its parent's Ctrl-C, or killed: SIGTERM) or failed: nothing left behind
            path.unlink(missing_ok=True)
            raise
        return theirs

    try:
        with ExitStack() as others:
            pending = [others.enter_context(beside(partial(spill, span, path), cases=cases))
                       for span, path in zip(spans[1:], spilled, strict=True)]

            def judgments() -> Iterator[Any]:
                yield from _batches(pa, spans[0](), schema, per_case)
                for theirs, path in zip(pending, spilled, strict=True):
                    per_case.extend(theirs.result())
                    with pa.OSFile(str(path), "rb") as f:
                        yield from pyarrow.ipc.open_stream(f)

            _atomic(paths[0], lambda tmp: _write_batches(pq, tmp, schema, _rebatched(pa, judgments(), schema)))
    finally:
        for path in spilled:
            path.unlink(missing_ok=True)
    # one chunk, as one table of every case's row is written
    table = pa.Table.from_batches(per_case).combine_chunks()
    _atomic(paths[1], lambda tmp: pq.write_table(table, tmp, compression="zstd"))
    return paths


def _batches(pa: Any, parts: Iterable[Part], schema: pa.Schema, per_case: list[Any]) -> Iterator[Any]:
    """judgments.parquet's rows of each part (its calls in plan order), :data:`BATCH_ROWS` calls a batch at most (the
    rows of a batch are dicts until it is made: a whole run's would take gigabytes); the part's consensus rows are
    appended to ``per_case`` as one batch."""
    for run, consensus in parts:
        grounding, drop, scores, rubric = run.grounding, run.config.ungrounded == "drop", run.scores, run.rubric
        records = run.records
        for start in range(0, len(records), BATCH_ROWS):
            yield _judgment_batch(pa, schema, [_judgment(judgment_row(rubric, rec, scores.get(rec.request_hash),
                                                                      grounding, drop=drop))
                                               for rec in records[start:start + BATCH_ROWS]])
        columns = consensus_columns(rubric)
        per_case.append(pa.RecordBatch.from_pylist([{c.name: c.value(case) for c in columns} for case in consensus],
                                                   schema=consensus_schema(pa, rubric)))


def _judgment_batch(pa: Any, schema: pa.Schema, rows: list[dict[str, Any]]) -> Any:
    """judgments.parquet's ``rows`` as one Arrow batch."""
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def _rebatched(pa: Any, batches: Iterable[Any], schema: pa.Schema) -> Iterator[Any]:
    """``batches``' rows as batches of :data:`BATCH_ROWS` rows, the last one shorter (one empty batch when there is
    no row): the row groups judgments.parquet has whatever the parts' sizes."""
    pending: list[Any] = []
    held = written = 0
    for batch in batches:
        if batch.num_rows:
            pending.append(batch)
            held += batch.num_rows
        while held >= BATCH_ROWS:
            table = pa.Table.from_batches(pending, schema=schema)
            yield table.slice(0, BATCH_ROWS).combine_chunks().to_batches()[0]
            pending = table.slice(BATCH_ROWS).to_batches()
            held -= BATCH_ROWS
            written += BATCH_ROWS
    if held:
        yield pa.Table.from_batches(pending, schema=schema).combine_chunks().to_batches()[0]
    elif not written:
        yield pa.RecordBatch.from_pylist([], schema=schema)


def _write_batches(pq: Any, path: Path, schema: pa.Schema, batches: Any) -> None:
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for batch in batches:
            writer.write_batch(batch)


def _atomic(path: Path, write: Any) -> None:
    """``write(tmp)`` to a name unique to this process beside ``path``, then renamed to ``path`` (a reader never
    sees half a file; a failure leaves the previous one as it was)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        raise write_error(path, e) from None
    finally:
        tmp.unlink(missing_ok=True)
