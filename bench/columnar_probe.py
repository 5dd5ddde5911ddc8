"""How fast an embedded columnar engine takes a run's calls apart: a probe for issue 38's columnar rebuild.

Not the rebuild: a measurement that tells how much of today's "read the store" and "ground quotes, derive
scores" stages (per-call Python: bench/README.md, "Post-processing at scale") an engine could take over, and at
what memory, before that path is built. For a store of ``tests/big_run.py`` (N cases x 4 judges x 3 dimensions), it
streams the ok calls out of SQLite in plan order (the plan's rows, each call found by its request hash), in batches of
``--batch`` rows (sqlite3, the store of record), into DuckDB as Arrow columns, with the texts of the batch's cases only
(the plan is case-major: the cases are read alongside, in their order), and there, per batch:

- parses each judgment's JSON and unnests its deductions and fixed penalties into rows;
- sums the points per (case, judge, dimension, run, category), and counts the deductions and penalties;
- looks each deduction's quote up in its case's record and conversation as written (``strpos``, code points): a
  stand-in for grounding's first step (:func:`consensus_eval.domain.grounding.ground` folds widths and spaces
  first, and looks further for a quote not found, so its counts differ: the cost is what is measured);
- derives each call's score and stars from its deductions, as ``Deductions.derive`` does (per-category caps, each
  fixed penalty once, floored at 0, the stars' thresholds), the rubric read from the store as three small tables.
  Under ``ungrounded: drop`` the ungrounded deductions would have to be left out first: not done here;
- with ``--ground``, grounds every quote with the package's own grounding as ``ground_all`` does (the cases'
  texts folded 256 at a time, one ``CaseGrounder`` a case), batch by batch, the quotes listed by DuckDB: Python,
  what judgments.jsonl's bytes need (each quote's kind, spans and sections).

It prints each part's seconds, the rows made, and the process's peak RSS, and checks the totals (deductions,
penalties, points, quotes found as written) against the same made in Python with ``json.loads`` and ``str.find``
over the same rows, and every call's score and stars against the package's own derivation (read the store, ground,
derive: what a rebuild does first), and with ``--ground`` the groundings' kinds against ``ground_all``'s.
``--no-check`` leaves the checks out: they hold every case's texts and every call.

Needs DuckDB, and for ``--reader adbc`` ADBC's SQLite driver, neither a dependency of consensus-eval, and pyarrow
(the ``parquet`` extra): ``.venv/bin/pip install duckdb adbc-driver-sqlite pyarrow``.

    .venv/bin/python bench/columnar_probe.py --cases 20000 --stores /tmp/s9-stores --reader adbc --ground
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.big_run import build_big_run  # noqa: E402

#: the judgment's fields the probe reads, as DuckDB's from_json takes a structure
SHAPE = json.dumps({"deductions": [{"category": "VARCHAR", "type": "VARCHAR", "points": "DOUBLE",
                                    "evidence": "VARCHAR"}],
                    "fixed_penalties": [{"id": "VARCHAR", "evidence": "VARCHAR"}]})

#: each batch's judgments parsed once (the queries below read ``parsed``)
PARSE = f"""
CREATE OR REPLACE TEMP TABLE parsed AS
SELECT request_hash, case_id, judge, dimension, run, from_json(judgment, '{SHAPE}') AS j FROM batch
"""

EXPLODE = """
WITH deds AS (
    SELECT case_id, judge, dimension, run, unnest(j.deductions, recursive := true) FROM parsed
)
SELECT d.case_id, d.judge, d.dimension, d.run, d.category, count(*) AS n, sum(d.points) AS points,
       count(*) FILTER (WHERE strpos(c.record, d.evidence) > 0) AS in_record,
       count(*) FILTER (WHERE strpos(c.record, d.evidence) = 0 AND strpos(c.conversation, d.evidence) > 0)
           AS in_conversation
FROM deds d JOIN texts c USING (case_id)
GROUP BY ALL
"""

#: each call's score as a deductions dimension derives it (``Deductions.derive``): every category takes off
#: min(sum of its deductions, cap), each fixed penalty named is taken off once, floored at 0; stars by the
#: dimension's thresholds (``stars_for``, EPS 1e-9). The rubric comes in as three tables (``rubric_tables``).
DERIVE = """
WITH per_cat AS (
    SELECT request_hash, dimension, d.category, sum(d.points) AS s
    FROM (SELECT request_hash, dimension, unnest(j.deductions) AS d FROM parsed) GROUP BY ALL
), taken AS (
    SELECT request_hash, sum(least(s, cap)) AS taken FROM per_cat JOIN cats USING (dimension, category) GROUP BY ALL
), pen AS (
    SELECT request_hash, sum(points) AS penalties
    FROM (SELECT DISTINCT request_hash, dimension, unnest(j.fixed_penalties).id AS id FROM parsed)
    JOIN pens USING (dimension, id) GROUP BY ALL
), scored AS (
    SELECT request_hash, dims.*,
           round(greatest(0.0, max - coalesce(taken, 0.0) - coalesce(penalties, 0.0)), 9) AS score
    FROM parsed JOIN dims USING (dimension) LEFT JOIN taken USING (request_hash) LEFT JOIN pen USING (request_hash)
)
SELECT request_hash, score,
       CASE WHEN score + 1e-9 >= s5 THEN 5 WHEN score + 1e-9 >= s4 THEN 4 WHEN score + 1e-9 >= s3 THEN 3
            WHEN score + 1e-9 >= s2 THEN 2 ELSE 1 END AS stars
FROM scored
"""

#: each case's quotes (deductions', then fixed penalties'), for the package's grounding (``--ground``)
QUOTES = """
SELECT case_id, list(e) AS quotes FROM (
    SELECT case_id, unnest(j.deductions).evidence AS e FROM parsed
    UNION ALL SELECT case_id, unnest(j.fixed_penalties).evidence AS e FROM parsed
) GROUP BY case_id
"""

PENALTIES = """
SELECT count(*) FROM (SELECT unnest(j.fixed_penalties) FROM parsed)
"""


def peak_mb(field: str = "VmHWM") -> int:
    """The process's peak RSS (or, ``VmRSS``, its RSS now) in MB."""
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith(field))


def rss_mb() -> int:
    return peak_mb("VmRSS")


def stored_rubric(store: Path) -> Any:
    """The rubric the store was scored with (its meta)."""
    from consensus_eval.domain.rubric import Rubric

    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return Rubric.model_validate(json.loads(con.execute("SELECT value FROM meta WHERE key = 'rubric'")
                                                .fetchone()[0]))
    finally:
        con.close()


def rubric_tables(db: Any, store: Path) -> None:
    """The store's rubric (every dimension a ``deductions`` one) as DuckDB tables: cats (dimension, category, cap),
    pens (dimension, id, points), dims (dimension, max, s5..s2)."""
    import pyarrow as pa

    from consensus_eval.domain.kinds import Deductions, of_kind

    rubric = stored_rubric(store)
    cats, pens, dims = [], [], []
    for dim in rubric.dimensions:
        kind = of_kind(dim, Deductions)
        cats += [(dim.id, c.id, float(c.cap)) for c in kind.categories]
        pens += [(dim.id, p.id, float(p.points)) for p in kind.fixed_penalties]
        assert dim.stars is not None
        dims.append((dim.id, float(dim.max), *(float(dim.stars[k]) for k in (5, 4, 3, 2))))
    for name, names, rows in (("cats", ["dimension", "category", "cap"], cats),
                              ("pens", ["dimension", "id", "points"], pens),
                              ("dims", ["dimension", "max", "s5", "s4", "s3", "s2"], dims)):
        table = pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})
        db.register(f"{name}_arrow", table)
        db.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_arrow")
        db.unregister(f"{name}_arrow")


def _texts(body: str) -> tuple[str, str]:
    """A stored case's record and its conversation as one text."""
    case = json.loads(body)
    conv = case["conversation"]
    return case["record"], conv if isinstance(conv, str) else "".join(t["text"] for t in conv)


class Grounder:
    """The package's own grounding (:func:`consensus_eval.analysis.derived.ground_all`'s steps) of each case's quotes,
    case by case as the batches come: the cases' texts folded 256 at a time, one ``CaseGrounder`` a case. Counts
    the groundings by kind and the seconds spent."""

    def __init__(self, store: Path) -> None:
        from consensus_eval.domain.sections import Sections

        self.rubric = stored_rubric(store)
        self.sections = Sections.of(self.rubric)
        self.kinds: dict[str, int] = {}
        self.seconds = 0.0

    def ground(self, quotes: dict[str, list[str]], bodies: dict[str, str]) -> None:
        from consensus_eval.domain.cases import Case
        from consensus_eval.domain.grounding import CaseGrounder, normalise_all

        t = time.perf_counter()
        ids = list(quotes)
        for start in range(0, len(ids), 256):
            batch = ids[start:start + 256]
            cases = [Case.model_validate_json(bodies[c]) for c in batch]
            texts = [text for case in cases for text in (case.record, self.rubric.conversation_text(case))]
            folded = normalise_all(texts)
            for k, case_id in enumerate(batch):
                ground = CaseGrounder(texts[2 * k], texts[2 * k + 1], self.sections,
                                      (folded[2 * k], folded[2 * k + 1])).ground
                for q in quotes[case_id]:
                    kind = ground(q).kind
                    self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.seconds += time.perf_counter() - t


#: the ok calls in plan order (the plan's rows, each call found by its request hash)
CALLS = ("SELECT c.request_hash, c.case_id, c.judge, c.dimension, c.run, c.judgment FROM plan p "
         "JOIN calls c USING (request_hash) "
         "WHERE c.status = 'ok' ORDER BY p.rowid")


def _batches(store: Path, con: sqlite3.Connection, batch: int, reader: str) -> Iterator[Any]:
    """The ok calls as Arrow tables of ``batch`` rows: by sqlite3 (a Python tuple a row, then Arrow arrays) or by
    ADBC's SQLite driver (Arrow record batches made in C)."""
    import pyarrow as pa

    if reader == "adbc":
        import adbc_driver_sqlite.dbapi as adbc

        with adbc.connect(f"file:{store}?mode=ro") as conn, conn.cursor() as cur:
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(batch)})
            cur.execute(CALLS)
            for rb in cur.fetch_record_batch():
                yield pa.Table.from_batches([rb])
        return
    cur = con.execute(CALLS)
    while rows := cur.fetchmany(batch):
        cols = list(zip(*rows, strict=True))
        del rows
        yield pa.table({"request_hash": pa.array(cols[0], pa.string()), "case_id": pa.array(cols[1], pa.string()),
                        "judge": pa.array(cols[2], pa.string()), "dimension": pa.array(cols[3], pa.string()),
                        "run": pa.array(cols[4], pa.int32()), "judgment": pa.array(cols[5], pa.string())})


def probe(store: Path, batch: int, reader: str = "sqlite3",
          scores: dict[str, tuple[float, int]] | None = None, grounder: Grounder | None = None) -> dict[str, float]:
    """Stream the ok calls in plan order, ``batch`` at a time, each batch with its cases' texts only."""
    import duckdb
    import pyarrow as pa

    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    db = duckdb.connect()
    rubric_tables(db, store)
    keep_scores = scores is not None
    scores = {} if scores is None else scores
    score_sum = 0.0
    start = rss_mb()
    cases = con.cursor().execute("SELECT case_id, body FROM cases ORDER BY position")
    held: dict[str, tuple[str, str, str]] = {}   # the cases' texts and bodies, read ahead until their calls are done
    read = texts_s = explode = 0.0
    parts = []
    penalties = calls = 0
    t = time.perf_counter()
    for table in _batches(store, con, batch, reader):
        read += time.perf_counter() - t
        t = time.perf_counter()
        needed = dict.fromkeys(table.column("case_id").to_pylist())
        last = next(reversed(needed))
        for case_id, body in cases if last not in held else ():   # the plan is case-major, in the cases' order
            held[case_id] = (*_texts(body), body)
            if case_id == last:
                break
        texts = pa.table({"case_id": pa.array(list(needed), pa.string()),
                          "record": pa.array([held[c][0] for c in needed], pa.string()),
                          "conversation": pa.array([held[c][1] for c in needed], pa.string())})
        bodies = {c: held[c][2] for c in needed} if grounder is not None else {}
        for c in needed:                        # the batch's last case may have calls in the next batch
            if c != last:
                del held[c]
        del needed
        texts_s += time.perf_counter() - t
        t = time.perf_counter()
        db.register("batch", table)
        db.register("texts", texts)
        db.execute(PARSE)
        parts.append(db.sql(EXPLODE).to_arrow_table())
        penalties += db.sql(PENALTIES).fetchall()[0][0]
        scored = db.sql(DERIVE).to_arrow_table()
        score_sum += sum(scored.column("score").to_pylist())
        if keep_scores:
            scores.update(zip(scored.column("request_hash").to_pylist(),
                              zip(scored.column("score").to_pylist(), scored.column("stars").to_pylist(),
                                  strict=True), strict=True))
        del scored
        quotes = dict(db.sql(QUOTES).fetchall()) if grounder is not None else {}
        explode += time.perf_counter() - t
        if grounder is not None:
            grounder.ground(quotes, bodies)
        del quotes, bodies
        t = time.perf_counter()
        db.unregister("batch")
        db.unregister("texts")
        explode += time.perf_counter() - t
        calls += table.num_rows
        del table, texts
        t = time.perf_counter()
    result = pa.concat_tables(parts)
    n = sum(result.column("n").to_pylist())
    return {"cases": texts_s, "read": read, "explode": explode, "calls": calls, "rows": result.num_rows,
            "deductions": n, "penalties": penalties, "points": sum(result.column("points").to_pylist()),
            "in_record": sum(result.column("in_record").to_pylist()),
            "in_conversation": sum(result.column("in_conversation").to_pylist()), "peak": peak_mb(),
            "start": start, "result_mb": result.nbytes / 2**20, "score_sum": score_sum}


def python_totals(store: Path) -> tuple[int, int, float, int, int, float]:
    """(deductions, penalties, points, quotes in the record, quotes only in the conversation, seconds) made with
    json.loads and ``str.find`` over the same rows (every case's texts held: a check for the smaller stores)."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    t = time.perf_counter()
    texts = {case_id: _texts(body) for case_id, body in con.execute("SELECT case_id, body FROM cases")}
    n = p = in_record = in_conv = 0
    points = 0.0
    for case_id, text in con.execute("SELECT case_id, judgment FROM calls WHERE status = 'ok'"):
        j = json.loads(text)
        record, conv = texts[case_id]
        n += len(j["deductions"])
        p += len(j["fixed_penalties"])
        for d in j["deductions"]:
            points += d["points"]
            if record.find(d["evidence"]) >= 0:
                in_record += 1
            elif conv.find(d["evidence"]) >= 0:
                in_conv += 1
    return n, p, points, in_record, in_conv, time.perf_counter() - t


def python_scores(store: Path) -> tuple[dict[str, tuple[float, int | None]], dict[str, int], float]:
    """Every ok call's score and stars as the rebuild derives them (read the store, ground, derive: the package's
    own path), by request hash; the groundings by kind; and the seconds it took."""
    import shutil
    import tempfile

    from consensus_eval.analysis.derived import derived
    from consensus_eval.execution.store import Store
    from consensus_eval.execution.stored_run import read_stored

    with tempfile.TemporaryDirectory(prefix="columnar-probe-") as tmp:   # a copy: opening a store may upgrade it
        shutil.copy(store, Path(tmp) / "results.sqlite")
        t = time.perf_counter()
        with Store.open_existing(Path(tmp)) as st:
            run = derived(read_stored(st, replies=False))
        secs = time.perf_counter() - t
    kinds: dict[str, int] = {}
    for g in run.grounding.values():
        kinds[g.kind] = kinds.get(g.kind, 0) + 1
    return {h: (s.score, s.stars) for h, s in run.scores.items()}, kinds, secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, nargs="+", default=[20000])
    ap.add_argument("--judges", type=int, default=4)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--reader", choices=["sqlite3", "adbc"], default="sqlite3",
                    help="how the calls leave SQLite: sqlite3's rows, or ADBC's Arrow batches (pip install "
                         "adbc-driver-sqlite)")
    ap.add_argument("--stores", type=Path, default=Path("/tmp/scale-bench"))
    ap.add_argument("--ground", action="store_true",
                    help="also ground every quote with the package's own grounding, batch by batch (Python)")
    ap.add_argument("--no-check", action="store_true", help="skip the Python sums (their strings take memory)")
    args = ap.parse_args()
    for n in args.cases:
        folder = args.stores / f"{n}x{args.judges}"
        if not (folder / "results.sqlite").is_file():
            build_big_run(folder, n, args.judges)
        duck_scores: dict[str, tuple[float, int]] | None = None if args.no_check else {}
        grounder = Grounder(folder / "results.sqlite") if args.ground else None
        got = probe(folder / "results.sqlite", args.batch, args.reader, duck_scores, grounder)
        print(f"{n:8d} cases x {args.judges}: {got['calls']:,} ok calls; cases' texts {got['cases']:.2f} s; "
              f"read ({args.reader} -> Arrow) {got['read']:.2f} s; parse, unnest, sum, look up, derive (DuckDB) "
              f"{got['explode']:.2f} s; {got['rows']:,} rows of (case, judge, dimension, run, category); "
              f"peak RSS {got['peak']:,} MB ({got['start']:,} MB before the first batch; the rows kept "
              f"{got['result_mb']:.0f} MB)", flush=True)
        print(f"          deductions {got['deductions']:,}, penalties {got['penalties']:,}, points "
              f"{got['points']:.1f}; quotes found as written: {got['in_record']:,} in the record, "
              f"{got['in_conversation']:,} only in the conversation; scores derived in DuckDB, summed "
              f"{got['score_sum']:.1f}", flush=True)
        if grounder is not None:
            print(f"          the package's grounding of every quote, batch by batch: {grounder.seconds:.2f} s; "
                  f"{dict(sorted(grounder.kinds.items()))}; peak RSS {peak_mb():,} MB", flush=True)
        if not args.no_check:
            ded, pen, points, in_record, in_conv, secs = python_totals(folder / "results.sqlite")
            same = ((ded, pen, in_record, in_conv) == (got["deductions"], got["penalties"], got["in_record"],
                                                       got["in_conversation"])
                    and abs(points - got["points"]) < 1e-6)
            print(f"          Python (json.loads, str.find; {secs:.2f} s): deductions {ded:,}, penalties {pen:,}, "
                  f"points {points:.1f}, {in_record:,} in the record, {in_conv:,} only in the conversation: "
                  f"{'SAME' if same else 'DIFFERENT'}", flush=True)
            if not same:
                raise SystemExit(1)
            assert duck_scores is not None
            mine, kinds, secs = python_scores(folder / "results.sqlite")
            differ = [h for h in mine if mine[h] != duck_scores.get(h)]
            first = f"; first different: {differ[0]} {mine[differ[0]]} {duck_scores.get(differ[0])}" if differ else ""
            print(f"          scores and stars, DuckDB against the package's derivation (read, ground, derive: "
                  f"{secs:.2f} s): {len(mine) - len(differ):,} of {len(mine):,} the same{first}; "
                  f"{len(duck_scores) - len(mine):,} more in DuckDB", flush=True)
            if differ or len(duck_scores) != len(mine):
                raise SystemExit(1)
            if grounder is not None:
                print(f"          groundings by kind, the package's ground_all: {dict(sorted(kinds.items()))}: "
                      f"{'SAME' if kinds == grounder.kinds else 'DIFFERENT'}", flush=True)
                if kinds != grounder.kinds:
                    raise SystemExit(1)
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))


if __name__ == "__main__":
    main()
