"""The hostile-input corpus, generated: what an attacker or a careless user feeds every subcommand.

Each entry (:class:`tests.bad_input_harness.Entry`, here called :data:`Hostile`) is a command line
(placeholders ``{d}``: the entry's own folder, ``{run}``: a fresh copy of a small scored run in ``{d}/run``),
the files it writes, what it must end in (``exit``: 2 for a clear refusal, 0/1/3 for a handled case) and
what its output must say (``expect``) or must not (``absent``); ``check`` looks further (the store still
whole, no escape character in report.md, strict JSON on stdout...). The families below are generated from
small templates crossed with their variations (every JSON reader x three depths, every case field x every
surrogate, every output a run needs x every command that writes one...), so the corpus grows by adding a
variation, not an entry.

Every entry is run and its result put in one class (refused, handled, traceback, wrong, hang) by the
harness shared with ``tests/test_bad_input_corpus.py`` (``tests/bad_input_harness.py``). Most entries run
in-process (typer's ``CliRunner``); those whose cost is the point (huge bootstrap counts, billions of
runs, YAML bombs, 40,001-node trees), and those about the process itself (the console's encoding, a full
disk, a closed pipe) run in a subprocess with a limit of CPU time and of address space.

As a script it runs the whole corpus and prints the counts per class (``--list`` prints the names)::

    .venv/bin/python -m tests.hostile_corpus            # counts, and each entry not refused/handled
    .venv/bin/python -m tests.hostile_corpus -k yaml    # only the entries whose name contains "yaml"

``tests/test_bad_input_hostile.py`` runs it under pytest (an entry not refused or handled fails).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bad_input_harness import (
    CLASSES,
    D_LEAF,
    EXAMPLES,
    IN_PROCESS_TIMEOUT,
    PROMPTS,
    ROOT,
    RUBRIC_MINI,
    RULES,
    TCM,
    TREE,
    Check,
    Entry,
    Outcome,
    case,
    classify,
    fill,
    jl,
    liveness_s,
    run_entry,
    scored_run_in,
    sql,
    store_path,
)

RUBRIC = ROOT / "configs" / "rubrics" / "medical_record.yaml"

#: an entry of this corpus
Hostile = Entry

#: `score` (a dry run) of {d}/cases.jsonl with the config {d}/c.yaml
DRY = ("score", "{d}/cases.jsonl", "-c", "{d}/c.yaml", "--dry-run")
GPT = "judges:\n  - name: gpt\n    model: openai/gpt-4.1\n    api_key_env: OPENAI_API_KEY\n"


def deep(kind: str, depth: int) -> str:
    """A JSON value nested ``depth`` deep: ``[[[...]]]`` or ``{"a":{"a":...}}``."""
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


# --------------------------------------------------------------------------- set-ups and checks


def _calls(store: Path) -> int:
    if not store.is_file():
        return 0
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT COUNT(*) FROM calls").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        con.close()


def store_whole(d: Path, out: Outcome) -> None:
    """The run's store is still a whole SQLite store with its calls."""
    p = store_path(d)
    assert p.read_bytes()[:16] == b"SQLite format 3\x00", f"{p} is no longer an SQLite store"
    con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("SELECT COUNT(*) FROM calls").fetchone()[0] > 0
    finally:
        con.close()


def unchanged(relative: str) -> Check:
    """The file ``{d}/relative`` is byte for byte what it was before the command (and the store whole)."""
    def check(d: Path, out: Outcome) -> None:
        before = (d / ".before" / relative.replace("/", "__"))
        assert (d / relative).read_bytes() == before.read_bytes(), f"{relative} was changed"
        store_whole(d, out)
    return check


def remember(*relative: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        (d / ".before").mkdir(exist_ok=True)
        for r in relative:
            shutil.copyfile(d / r, d / ".before" / r.replace("/", "__"))
    return setup


def chain(*steps: Callable[[Path], object] | None) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        for s in steps:
            if s is not None:
                s(d)
    return setup


def no_calls(folder: str) -> Check:
    """Nothing was called: the store of ``{d}/folder`` has no call (or does not exist)."""
    def check(d: Path, out: Outcome) -> None:
        assert _calls(d / folder / "results.sqlite") == 0, "calls were made before the refusal"
    return check


def no_escape(*relative: str, stdout: bool = True) -> Check:
    """No raw control character (ESC, BEL, C1...) in stdout/stderr nor in the files ``relative``."""
    def bad(text: str) -> list[str]:
        return sorted({repr(c) for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0})

    def check(d: Path, out: Outcome) -> None:
        if stdout:
            assert not bad(out.output), f"raw control characters in the output: {bad(out.output)}"
        for r in relative:
            text = (d / r).read_text(encoding="utf-8")
            assert not bad(text), f"raw control characters in {r}: {bad(text)}"
    return check


def strict_json(*want: str) -> Check:
    """stdout is strict JSON (no NaN, no Infinity), and holds ``null`` with the reason words ``want``."""
    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} in the JSON output")

    def check(d: Path, out: Outcome) -> None:
        json.loads(out.stdout, parse_constant=refuse)
        for w in want:
            assert w in out.stdout, f"{w!r} not in the JSON output"
    return check


def all_checks(*checks: Check) -> Check:
    def check(d: Path, out: Outcome) -> None:
        for c in checks:
            c(d, out)
    return check


def cli(d: Path, *args: str) -> str:
    """Run a command in-process as a set-up step; it must exit 0."""
    from typer.testing import CliRunner

    from consensus_eval.cli import app

    res = CliRunner().invoke(app, [fill(a, d) for a in args])
    assert res.exit_code == 0, f"set-up {' '.join(args)}: exit {res.exit_code}\n{res.output}"
    return res.output


def meta_value(key: str, value: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        sql(d, "UPDATE meta SET value = ? WHERE key = ?", params=(value, key))
    return setup


def case_body(value: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        sql(d, "UPDATE cases SET body = ? WHERE position = 0", params=(value,))
    return setup


def judgment_value(value: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        sql(d, "UPDATE calls SET judgment = ? WHERE status = 'ok'", params=(value,))
    return setup


def sheet(*, reviewer: str = "Ann", comment: str = "", score: str = "30", verdict: str = "") -> Callable[[Path], None]:
    """``{d}/s.csv``: the run's adjudication sheet with the first score row filled in."""
    def setup(d: Path) -> None:
        cli(d, "audit", "{run}", "--top", "2", "--export", "{d}/s.csv")
        text = (d / "s.csv").read_text(encoding="utf-8-sig")
        rows = list(csv.DictReader(io.StringIO(text)))
        first = next(r for r in rows if r["row"] == "score")
        first.update(human_score=score, reviewer=reviewer, human_comment=comment)
        if verdict:
            ded = next(r for r in rows if r["row"] == "deduction")
            ded.update(human_verdict=verdict, reviewer=reviewer, human_comment=comment)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        (d / "s.csv").write_text(buf.getvalue(), encoding="utf-8-sig")
    return setup


def fifo(name: str, source: Callable[[Path], bytes]) -> Callable[[Path], None]:
    """``{d}/name`` is a named pipe fed once with ``source(d)`` (what ``<(cat file)`` gives a command)."""
    def setup(d: Path) -> None:
        data = source(d)
        path = d / name
        os.mkfifo(path)

        def feed() -> None:
            # a liveness bound only (a command that never opens the pipe), not a deadline: under load the
            # command may open it late
            deadline = time.monotonic() + liveness_s(IN_PROCESS_TIMEOUT)
            while time.monotonic() < deadline:
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                except OSError as e:
                    if e.errno != errno.ENXIO:
                        return
                    time.sleep(0.005)
                    continue
                os.set_blocking(fd, True)
                with contextlib.suppress(OSError):
                    os.write(fd, data)
                os.close(fd)
                return

        threading.Thread(target=feed, daemon=True).start()
    return setup


def copy_prompts(d: Path, **templates: str) -> None:
    shutil.copytree(PROMPTS, d / "prompts")
    for name, text in templates.items():
        (d / "prompts" / "medical_record" / f"{name}.j2").write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------- the families

Family = list[Hostile]


def outputs_family() -> Family:
    """Item 1: an output path that is the store or a file the run needs is refused before anything is written;
    outputs that cannot be written stop `score` before any call."""
    out: Family = []
    store_forms = {
        "store": "{run}/results.sqlite",
        "store-dot": "{run}/./results.sqlite",
        "store-dotdot": "{run}/../run/results.sqlite",
        "store-double-slash": "{run}//results.sqlite",
    }
    for how, path in store_forms.items():
        for extra in ((), ("--top", "0")):
            tag = "-top0" if extra else ""
            out.append(Hostile(f"out-audit-export-{how}{tag}", ("audit", "{run}", *extra, "--export", path),
                               expect=("results.sqlite", "store"), setup=remember("run/results.sqlite"),
                               check=unchanged("run/results.sqlite"), item=1))
    out.append(Hostile("out-audit-spot-check-export-store",
                       ("audit", "{run}", "--spot-check", "2", "--export", "{run}/results.sqlite"),
                       expect=("results.sqlite", "store"), setup=remember("run/results.sqlite"),
                       check=unchanged("run/results.sqlite"), item=1))

    def symlink(d: Path) -> None:
        (d / "link.csv").symlink_to(store_path(d))
        remember("run/results.sqlite")(d)

    def hardlink(d: Path) -> None:
        os.link(store_path(d), d / "hard.csv")
        remember("run/results.sqlite")(d)

    out.append(Hostile("out-audit-export-symlink-to-store", ("audit", "{run}", "--export", "{d}/link.csv"),
                       expect=("{d}/link.csv", "store"), setup=symlink, check=unchanged("run/results.sqlite"),
                       item=1))
    out.append(Hostile("out-audit-export-hardlink-to-store", ("audit", "{run}", "--export", "{d}/hard.csv"),
                       expect=("{d}/hard.csv", "store"), setup=hardlink, check=unchanged("run/results.sqlite"),
                       item=1))

    def other_run(d: Path) -> None:
        shutil.copytree(d / "run", d / "other")
        remember("other/results.sqlite", "run/results.sqlite")(d)

    out.append(Hostile("out-audit-export-another-runs-store",
                       ("audit", "{run}", "--export", "{d}/other/results.sqlite"),
                       expect=("{d}/other/results.sqlite", "store"), setup=other_run,
                       check=unchanged("other/results.sqlite"), item=1))

    def sqlite_named_csv(d: Path) -> None:
        con = sqlite3.connect(d / "mydata.csv")
        con.execute("CREATE TABLE t (x)")
        con.commit()
        con.close()
        remember("mydata.csv", "run/results.sqlite")(d)

    out.append(Hostile("out-audit-export-over-any-sqlite-file", ("audit", "{run}", "--export", "{d}/mydata.csv"),
                       expect=("{d}/mydata.csv", "SQLite"), setup=sqlite_named_csv, check=unchanged("mydata.csv"),
                       item=1))
    for companion in ("results.sqlite-wal", "results.sqlite-shm", "results.sqlite-journal"):
        out.append(Hostile(f"out-audit-export-{companion.split('-')[-1]}",
                           ("audit", "{run}", "--export", "{run}/" + companion),
                           expect=(companion, "store"), setup=remember("run/results.sqlite"),
                           check=all_checks(store_whole, absent_file("run/" + companion)),
                           item=1))
    for own in ("judgments.jsonl", "consensus.csv", "consensus.jsonl", "reliability.json", "report.md",
                "report.html"):
        out.append(Hostile(f"out-audit-export-over-{own.replace('.', '-')}",
                           ("audit", "{run}", "--export", "{run}/" + own),
                           expect=("{run}/" + own, "run"), setup=remember("run/" + own), check=unchanged("run/" + own),
                           item=1))
    out.append(Hostile("out-text2dt-per-tree-over-store",
                       ("metrics", "text2dt", "{d}/p.json", "{d}/g.json", "--per-tree", "{run}/results.sqlite"),
                       files={"p.json": json.dumps([TREE]), "g.json": json.dumps([TREE])},
                       expect=("results.sqlite", "store"), setup=remember("run/results.sqlite"),
                       check=unchanged("run/results.sqlite"), item=1))
    out.append(Hostile("out-text2dt-per-tree-is-folder",
                       ("metrics", "text2dt", "{d}/p.json", "{d}/g.json", "--per-tree", "{d}"),
                       files={"p.json": json.dumps([TREE]), "g.json": json.dumps([TREE])},
                       expect=("{d}", "folder"), item=1))
    # the outputs of `score` checked writable before any call
    for own in ("report.html", "report.md", "judgments.jsonl", "consensus.csv", "consensus.jsonl", "reliability.json"):
        out.append(Hostile(f"out-score-{own.replace('.', '-')}-is-a-folder",
                           ("score", "{d}/cases.jsonl", "--out", "{d}/out"),
                           files={"cases.jsonl": jl(case(id="c1"), case(id="c2"))},
                           setup=folder_at("out/" + own),
                           expect=("{d}/out/" + own, "folder"), check=no_calls("out"), item=1))
    def calibration_and_folder(d: Path) -> None:
        cli(d, "calibrate", "--sample", "2", "--out", "{d}/cal")
        (d / "out" / "calibration.json").mkdir(parents=True)

    out.append(Hostile("out-score-calibration-json-is-a-folder",
                       ("score", "{d}/cases.jsonl", "--out", "{d}/out", "--calibration", "{d}/cal/calibration.json"),
                       files={"cases.jsonl": jl(case())}, setup=calibration_and_folder,
                       expect=("{d}/out/calibration.json", "folder"), check=no_calls("out"), item=1))
    out.append(Hostile("out-score-out-is-a-file", ("score", "{d}/cases.jsonl", "--out", "{d}/cases.jsonl"),
                       files={"cases.jsonl": jl(case())}, expect=("{d}/cases.jsonl",),
                       check=lambda d, o: json.loads((d / "cases.jsonl").read_text(encoding="utf-8")), item=1))
    out.append(Hostile("out-export-under-proc", ("audit", "{run}", "--export", "/proc/x.csv"),
                       expect=("cannot write /proc/x.csv",), absent=("does not exist",), item=1))
    out.append(Hostile("out-export-parent-is-a-file", ("audit", "{run}", "--export", "{run}/report.md/x.csv"),
                       expect=("{run}/report.md", "file"), item=1))
    out.append(Hostile("out-reliability-json-is-a-folder", ("reliability", "{run}", "--bootstrap", "0"),
                       setup=folder_at("run/reliability.json"),
                       expect=("{run}/reliability.json", "folder"), item=1))
    out.append(Hostile("out-report-md-is-a-folder", ("report", "{run}"),
                       setup=folder_at("run/report.md"),
                       expect=("{run}/report.md", "folder"), item=1))
    # the positive side: an export beside the run, and one replacing an earlier sheet, still work
    out.append(Hostile("out-ok-export-beside-the-run", ("audit", "{run}", "--export", "{run}/sheet.csv"), exit=0,
                       expect=("adjudication sheet",), check=store_whole, item=1))
    out.append(Hostile("out-ok-export-over-an-earlier-sheet", ("audit", "{run}", "--export", "{d}/s.csv"), exit=0,
                       files={"s.csv": "old sheet\n"}, expect=("adjudication sheet",),
                       check=lambda d, o: _assert("row,rank" in (d / "s.csv").read_text(encoding="utf-8-sig")), item=1))
    return out


def _assert(cond: bool, what: str = "") -> None:
    assert cond, what


def absent_file(relative: str) -> Check:
    """``{d}/relative`` was not written (no sheet there)."""
    def check(d: Path, out: Outcome) -> None:
        p = d / relative
        assert not p.exists() or p.stat().st_size == 0 or p.read_bytes()[:4] != b"row,", f"{p} was written"
    return check


def folder_at(relative: str) -> Callable[[Path], None]:
    """A folder where a file ``{d}/relative`` would be written (the file, if any, removed first)."""
    def setup(d: Path) -> None:
        target = d / relative
        target.unlink(missing_ok=True)
        target.mkdir(parents=True)
    return setup


def prompts_with(dimension: str, template: str | bytes) -> Callable[[Path], None]:
    """A copy of the bundled prompts in ``{d}/prompts`` with the template of ``dimension`` replaced."""
    def setup(d: Path) -> None:
        copy_prompts(d)
        path = d / "prompts" / "medical_record" / f"{dimension}.j2"
        if isinstance(template, bytes):
            path.write_bytes(template)
        else:
            path.write_text(template, encoding="utf-8")
    return setup


def limits_family() -> Family:
    """Item 2: counts, runs, plan and tree sizes, YAML aliases and duplicate keys, prices."""
    out: Family = []
    for n in (100_001, 10**6, 10**8, 10**12, 2**63):
        out.append(Hostile(f"limit-bootstrap-run-{n}", ("reliability", "{run}", "--bootstrap", str(n)),
                           expect=("--bootstrap",), proc=True, timeout=30, item=2))
    for n in (10**8, 2**40):
        out.append(Hostile(f"limit-bootstrap-ratings-{n}",
                           ("reliability", "--ratings", "{d}/r.csv", "--bootstrap", str(n)),
                           files={"r.csv": "unit,rater,value\nu1,a,1\nu1,b,2\nu2,a,3\nu2,b,3\n"},
                           expect=("--bootstrap",), proc=True, timeout=30, item=2))
    out.append(Hostile("limit-bootstrap-human-import", ("human", "import", "{d}/s.csv", "--run", "{run}", "--bootstrap",
                                                        str(10**9)),
                       files={"s.csv": "case_id,accuracy\ncase-01,30\n"}, expect=("--bootstrap",), proc=True,
                       timeout=30, item=2))
    out.append(Hostile("limit-ok-bootstrap-100000-ratings", ("reliability", "--ratings", "{d}/r.csv", "--bootstrap",
                                                              "100000"),
                       files={"r.csv": "unit,rater,value\nu1,a,1\nu1,b,2\nu2,a,3\nu2,b,3\nu3,a,1\nu3,b,1\n"},
                       exit=0, expect=("alpha",), proc=True, timeout=60, item=2))
    # runs and the size of the plan
    for key, n in (("runs", 10**9), ("runs", 1001), ("runs", 2**62), ("important_runs", 10**9)):
        cfg = GPT + f"{key}: {n}\n"
        out.append(Hostile(f"limit-{key}-{n}-llm-dry-run", DRY,
                           files={"cases.jsonl": jl(case(important=key == "important_runs")), "c.yaml": cfg},
                           expect=(key,), proc=True, timeout=30, item=2))
    out.append(Hostile("limit-runs-rules-judge", DRY,
                       files={"cases.jsonl": jl(case()), "c.yaml": RULES + "runs: 1000000000\n"},
                       expect=("runs",), proc=True, timeout=30, item=2))
    out.append(Hostile("limit-adaptive-max-runs", DRY,
                       files={"cases.jsonl": jl(case()),
                              "c.yaml": GPT + "runs: adaptive\nadaptive:\n  max_runs: 1000000000\n"},
                       expect=("max_runs",), proc=True, timeout=30, item=2))
    panel = "judges:\n" + "".join(f"  - name: j{i}\n    model: openai/m{i}\n    api_key_env: OPENAI_API_KEY\n"
                                  for i in range(40))
    many = jl(*(case(id=f"c{i}") for i in range(500)))
    out.append(Hostile("limit-plan-over-10-million-calls", DRY,
                       files={"cases.jsonl": many, "c.yaml": panel + "runs: 200\nimportant_runs: 200\n"},
                       expect=("10,000,000",), proc=True, timeout=30, item=2))
    out.append(Hostile("limit-ok-plan-of-a-million-calls",
                       DRY,
                       files={"cases.jsonl": jl(*(case(id=f"c{i}") for i in range(20))),
                              "c.yaml": GPT + "runs: 3\nimportant_runs: 3\n"},
                       exit=0, expect=("gpt",), proc=True, timeout=60, item=2))
    # Text2DT trees: a chain of 40,001 nodes, wide trees, as prediction and as gold
    def chain_tree(n_conditions: int, side: str = "R") -> list[dict[str, Any]]:
        nodes: list[dict[str, Any]] = []
        for i in range(n_conditions):
            c = {"role": "C", "triples": [["p", "has", f"s{i}"]], "logical_rel": "null"}
            nodes += [c, D_LEAF] if side == "R" else [c]
        if side == "R":
            nodes.append(D_LEAF)
        else:
            nodes += [D_LEAF] * (n_conditions + 1)
        return nodes

    for n, side in ((20_000, "R"), (20_000, "L"), (5_000, "R")):
        tree = json.dumps([{"id": "t", "tree": chain_tree(n, side)}])
        size = 2 * n + 1
        for which in ("pred", "gold", "both"):
            files = {"p.json": tree if which in ("pred", "both") else json.dumps([{"id": "t", "tree": TREE}]),
                     "g.json": tree if which in ("gold", "both") else json.dumps([{"id": "t", "tree": TREE}])}
            out.append(Hostile(f"limit-text2dt-chain-{size}-{side}-{which}",
                               ("metrics", "text2dt", "{d}/p.json", "{d}/g.json", "--on-invalid", "zero"),
                               files=files, expect=("nodes",), proc=True, timeout=30,
                               exit=0 if which == "pred" else 2, item=2))
    out.append(Hostile("limit-text2dt-chain-per-tree", ("metrics", "text2dt", "{d}/p.json", "{d}/g.json", "--per-tree",
                                                        "{d}/pt.jsonl"),
                       files={"p.json": json.dumps([chain_tree(20_000)]), "g.json": json.dumps([chain_tree(20_000)])},
                       expect=("nodes",), proc=True, timeout=30, item=2))
    out.append(Hostile("limit-ok-text2dt-chain-401", ("metrics", "text2dt", "{d}/p.json", "{d}/g.json", "--json"),
                       files={"p.json": json.dumps([chain_tree(200)]), "g.json": json.dumps([chain_tree(200)])},
                       exit=0, expect=('"tree_accuracy": 1.0',), proc=True, timeout=30, item=2))
    # YAML: aliases (billion laughs, self-reference), duplicate keys
    laughs = 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
        f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))
    for where, text in (
        ("config-top", RULES + "x_laughs:\n" + "".join("  " + ln + "\n" for ln in laughs.splitlines())),
        ("config-extra-body", GPT + "    extra_body:\n" + "".join("      " + ln + "\n" for ln in laughs.splitlines())),
    ):
        out.append(Hostile(f"limit-yaml-billion-laughs-{where}", DRY,
                           files={"cases.jsonl": jl(case()), "c.yaml": text}, expect=("{d}/c.yaml", "alias"),
                           proc=True, timeout=30, item=2))
    out.append(Hostile("limit-yaml-billion-laughs-rubric", DRY,
                       files={"cases.jsonl": jl(case()), "c.yaml": "rubric: {d}/r.yaml\n" + RULES,
                              "r.yaml": RUBRIC_MINI + "x_laughs:\n"
                              + "".join("  " + ln + "\n" for ln in laughs.splitlines())},
                       expect=("{d}/r.yaml", "alias"), proc=True, timeout=30, item=2))
    for name, block in (("mapping", "extra_body: &a\n      x: *a\n"), ("list", "extra_body:\n      x: &b [1, *b]\n"),
                        ("flow", "extra_body: &c {y: [*c]}\n")):
        out.append(Hostile(f"limit-yaml-self-alias-{name}", DRY,
                           files={"cases.jsonl": jl(case()), "c.yaml": GPT + "    " + block},
                           expect=("{d}/c.yaml", "alias"), proc=True, timeout=30, item=2))
    for depth in (5_000, 100_000):
        out.append(Hostile(f"limit-yaml-nested-{depth}", DRY,
                           files={"cases.jsonl": jl(case()),
                                  "c.yaml": RULES + "x: " + "[" * depth + "]" * depth + "\n"},
                           expect=("{d}/c.yaml",), proc=True, timeout=30, item=2))
    out.append(Hostile("limit-ok-yaml-one-anchor-reused", DRY,
                       files={"cases.jsonl": jl(case()),
                              "c.yaml": "judges:\n  - &r {name: a, kind: rules}\n  - {<<: *r, name: b}\n"},
                       exit=0, expect=("rules",), item=2))
    dups = {
        "top-runs": (RULES + "runs: 1\nruns: 3\n", 5, "runs"),
        "judge-model": ("judges:\n  - name: gpt\n    model: openai/a\n    model: openai/b\n", 4, "model"),
        "judge-name": ("judges:\n  - name: a\n    kind: rules\n    name: b\n", 4, "name"),
        "extra-body": (GPT + "    extra_body:\n      top_k: 1\n      top_k: 2\n", 7, "top_k"),
        "consensus": (RULES + "consensus:\n  aggregate: mean\n  aggregate: median\n", 6, "aggregate"),
        "flow-mapping": ("judges: [{name: a, kind: rules, name: b}]\n", 1, "name"),
        "judges-list": (RULES + "judges: []\n", 4, "judges"),
    }
    for name, (text, line, key) in dups.items():
        out.append(Hostile(f"limit-yaml-duplicate-key-{name}", DRY,
                           files={"cases.jsonl": jl(case()), "c.yaml": text},
                           expect=(f"{{d}}/c.yaml:{line}", f"duplicate key '{key}'"), item=2))
    out.append(Hostile("limit-yaml-duplicate-key-rubric", DRY,
                       files={"cases.jsonl": jl(case()), "c.yaml": "rubric: {d}/r.yaml\n" + RULES,
                              "r.yaml": RUBRIC_MINI.replace("    max: 10\n", "    max: 10\n    max: 20\n")},
                       expect=("{d}/r.yaml:7", "duplicate key 'max'"), item=2))
    out.append(Hostile("limit-ok-yaml-merge-key-override", DRY,
                       files={"cases.jsonl": jl(case()),
                              "c.yaml": "x_base: &b {kind: rules}\njudges:\n  - <<: *b\n    name: r\n"},
                       exit=2, expect=("x_base",), item=2))
    # prices and other numbers that are not finite
    for key, value in (("input_cost_per_token", ".inf"), ("input_cost_per_token", "-.inf"),
                       ("input_cost_per_token", ".nan"), ("input_cost_per_token", "1e309"),
                       ("output_cost_per_token", ".inf"), ("output_cost_per_token", "-0.000001"),
                       ("cached_input_cost_per_token", ".inf"), ("timeout_s", ".nan"), ("timeout_s", ".inf"),
                       ("temperature", ".nan")):
        cfg = GPT + f"    {key}: {value}\n"
        out.append(Hostile(f"limit-number-{key}-{value.strip('.-')}{'-neg' if value.startswith('-') else ''}",
                           DRY,
                           files={"cases.jsonl": jl(case()), "c.yaml": cfg}, expect=(f"judges[0 gpt].{key}",), item=2))
    for key, value in (("consensus:\n  trim", ".nan"), ("consensus:\n  flag_spread", ".inf"),
                       ("consensus:\n  flag_spread", ".nan")):
        out.append(Hostile(f"limit-number-{key.split()[-1]}-{value.strip('.')}",
                           DRY,
                           files={"cases.jsonl": jl(case()), "c.yaml": RULES + f"{key}: {value}\n"},
                           expect=("consensus.",), item=2))
    return out


JSON_DEPTHS = (150, 1_000, 100_000)


def json_depth_family() -> Family:
    """Item 3: deeply nested JSON in every JSON reader: refused with the file (and line), never a RecursionError."""
    out: Family = []
    for kind in ("array", "object"):
        for depth in JSON_DEPTHS:
            v = deep(kind, depth)
            tag = f"{kind}-{depth}"
            out += [
                Hostile(f"depth-cases-meta-{tag}", ("score", "{d}/cases.jsonl", "--dry-run"),
                        files={"cases.jsonl": '{"id": "c1", "conversation": "医生：你好", "record": "主诉：口渴", '
                                              f'"meta": {{"x": {v}}}}}\n'},
                        expect=("{d}/cases.jsonl:1", "nested")),
                Hostile(f"depth-cases-line-{tag}", ("score", "{d}/cases.jsonl", "--dry-run"),
                        files={"cases.jsonl": jl(case()) + v + "\n"}, expect=("{d}/cases.jsonl:2", "nested")),
                Hostile(f"depth-cases-conversation-{tag}", ("score", "{d}/cases.jsonl", "--dry-run"),
                        files={"cases.jsonl": '{"id": "c1", "record": "主诉：口渴", "conversation": ' + v + "}\n"},
                        expect=("{d}/cases.jsonl:1", "nested")),
                Hostile(f"depth-human-jsonl-{tag}",
                        ("reliability", "{run}", "--human", "{d}/h.jsonl", "--bootstrap", "0"),
                        files={"h.jsonl": '{"case_id": "case-01", "accuracy": 30, "x": ' + v + "}\n"},
                        expect=("{d}/h.jsonl:1", "nested")),
                Hostile(f"depth-human-import-jsonl-{tag}", ("human", "import", "{d}/h.jsonl", "--run", "{run}"),
                        files={"h.jsonl": v + "\n"}, expect=("{d}/h.jsonl:1", "nested")),
                Hostile(f"depth-text2dt-pred-{tag}", ("metrics", "text2dt", "{d}/p.json", "{d}/g.json"),
                        files={"p.json": v, "g.json": json.dumps([TREE])}, expect=("{d}/p.json", "nested")),
                Hostile(f"depth-text2dt-gold-jsonl-{tag}", ("metrics", "text2dt", "{d}/p.json", "{d}/g.jsonl"),
                        files={"p.json": json.dumps([TREE]), "g.jsonl": v + "\n"}, expect=("{d}/g.jsonl", "nested")),
                Hostile(f"depth-tcm-pred-{tag}", ("metrics", "tcm", "face", "{d}/p.jsonl", "{d}/g.jsonl"),
                        files={"p.jsonl": '{"id": 1, "syndromes": ' + v + "}\n",
                               "g.jsonl": jl({"id": 1, "syndromes": ["a"]})}, expect=("{d}/p.jsonl:1", "nested")),
                Hostile(f"depth-tcm-knowledge-{tag}", ("metrics", "tcm", "face", "{d}/p.jsonl", "{d}/g.jsonl",
                                                       "--knowledge", "{d}/k.json"),
                        files={"p.jsonl": jl({"id": 1, "syndromes": ["a"]}),
                               "g.jsonl": jl({"id": 1, "syndromes": ["a"]}), "k.json": v},
                        expect=("{d}/k.json", "nested")),
                Hostile(f"depth-store-meta-config-{tag}", ("report", "{run}"), setup=meta_value("config", v),
                        expect=("{run}/results.sqlite", "config")),
                Hostile(f"depth-store-case-{tag}", ("audit", "{run}"), setup=case_body(v),
                        expect=("{run}/results.sqlite", "cases", "row 1")),
                Hostile(f"depth-store-judgment-{tag}", ("audit", "{run}"),
                        setup=judgment_value('{"dimension": "accuracy", "deductions": ' + v + "}"),
                        expect=("{run}/results.sqlite", "damaged")),
                Hostile(f"depth-calibration-json-{tag}", ("score", "{d}/cases.jsonl", "--out", "{d}/out",
                                                          "--calibration", "{d}/cal.json"),
                        files={"cases.jsonl": jl(case()), "cal.json": v}, expect=("{d}/cal.json",),
                        check=no_calls("out")),
                Hostile(f"depth-suite-{tag}",
                        ("calibrate", "-c", "{d}/c.yaml", "--suite", "{d}/suite.jsonl", "--dry-run"),
                        # the suite reader refuses it like every JSON reader: file, line, how deep
                        files={"c.yaml": RULES, "suite.jsonl": v + "\n"},
                        expect=("{d}/suite.jsonl:1", "nested deeper than")),
            ]
    # the positive side: a meta nested a few levels is fine
    out.append(Hostile("depth-ok-cases-meta-20", ("score", "{d}/cases.jsonl", "--dry-run"),
                       files={"cases.jsonl": '{"id": "c1", "conversation": "医生：你好", "record": "主诉：口渴", '
                                             f'"meta": {{"x": {deep("object", 20)}}}}}\n'}, exit=0, expect=("rules",)))
    return out


SURROGATES = ("\\ud800", "\\udfff", "\\udc80")


def surrogate_family() -> Family:
    """Item 3: a lone surrogate (``\\ud800``: half of an emoji cut in two) refused with the line and the field."""
    out: Family = []
    base = '{"id": "c1", "conversation": "医生：你好\\n患者：口渴", "record": "主诉：口渴3个月"'
    where = {
        "id": ('"id": "c1"', '"id": "c{s}"', "id"),
        "record": ('"record": "主诉：口渴3个月"', '"record": "主诉：口渴{s}3个月"', "record"),
        "conversation": ('"conversation": "医生：你好\\n患者：口渴"', '"conversation": "医生：你好\\n患者：口渴{s}"',
                         "conversation"),
        "turn-text": ('"conversation": "医生：你好\\n患者：口渴"',
                      '"conversation": [{{"role": "doctor", "text": "你好{s}"}}]', "conversation"),
        "turn-role": ('"conversation": "医生：你好\\n患者：口渴"',
                      '"conversation": [{{"role": "doc{s}", "text": "你好"}}]', "conversation"),
        "system": ('"record": "主诉：口渴3个月"', '"record": "主诉：口渴3个月", "system": "sys{s}"', "system"),
        "source": ('"record": "主诉：口渴3个月"', '"record": "主诉：口渴3个月", "source": "src{s}"', "source"),
        "meta-value": ('"record": "主诉：口渴3个月"', '"record": "主诉：口渴3个月", "meta": {{"n": "x{s}"}}', "meta"),
        "meta-key": ('"record": "主诉：口渴3个月"', '"record": "主诉：口渴3个月", "meta": {{"k{s}": 1}}', "meta"),
    }
    for name, (old, new, fld) in where.items():
        for s in SURROGATES:
            line = base.replace(old, new.format(s=s)) + "}"
            tag = s.strip("\\")
            out.append(Hostile(f"surrogate-cases-{name}-{tag}", ("score", "{d}/cases.jsonl", "--dry-run"),
                               files={"cases.jsonl": jl(case(id="c0")) + line + "\n"},
                               expect=("{d}/cases.jsonl:2", fld, "surrogate")))
        # scored (not a dry run): the request hash is where it crashed
        out.append(Hostile(f"surrogate-cases-{name}-scored", ("score", "{d}/cases.jsonl", "--out", "{d}/out"),
                           files={"cases.jsonl": base.replace(old, new.format(s="\\ud800")) + "}\n"},
                           expect=("{d}/cases.jsonl:1", fld, "surrogate"), check=no_calls("out")))
    out.append(Hostile("surrogate-ok-pair-is-an-emoji", ("score", "{d}/cases.jsonl", "--dry-run"),
                       files={"cases.jsonl": base.replace("口渴3个月", "口渴\\ud83d\\ude00") + "}\n"},
                       exit=0, expect=("rules",)))
    out.append(Hostile("surrogate-human-jsonl-case-id", ("reliability", "{run}", "--human", "{d}/h.jsonl",
                                                        "--bootstrap", "0"),
                       files={"h.jsonl": '{"case_id": "case-01\\ud800", "accuracy": 30}\n'},
                       expect=("{d}/h.jsonl:1", "case_id", "surrogate")))
    out.append(Hostile("surrogate-human-jsonl-key",
                       ("reliability", "{run}", "--human", "{d}/h.jsonl", "--bootstrap", "0"),
                       files={"h.jsonl": '{"case_id": "case-01", "accuracy": 30, "x\\udfff": 1}\n'},
                       expect=("{d}/h.jsonl:1", "surrogate")))
    out.append(Hostile("surrogate-tcm-id", ("metrics", "tcm", "face", "{d}/p.jsonl", "{d}/g.jsonl"),
                       files={"p.jsonl": '{"id": "a\\ud800", "syndromes": ["x"]}\n',
                              "g.jsonl": '{"id": "a\\ud800", "syndromes": ["x"]}\n'},
                       expect=("{d}/p.jsonl:1", "id", "surrogate")))
    out.append(Hostile("surrogate-tcm-label", ("metrics", "tcm", "face", "{d}/p.jsonl", "{d}/g.jsonl"),
                       files={"p.jsonl": '{"id": 1, "syndromes": ["x\\ud800"]}\n',
                              "g.jsonl": jl({"id": 1, "syndromes": ["x"]})},
                       expect=("{d}/p.jsonl:1", "syndromes", "surrogate")))
    out.append(Hostile("surrogate-text2dt-triple", ("metrics", "text2dt", "{d}/p.json", "{d}/g.json"),
                       files={"p.json": '[[{"role": "D", "triples": [["a\\ud800", "b", "c"]], "logical_rel": "null"}]]',
                              "g.json": json.dumps([[D_LEAF]])},
                       expect=("{d}/p.json", "surrogate")))
    out.append(Hostile("surrogate-config-yaml", DRY,
                       files={"cases.jsonl": jl(case()), "c.yaml": 'judges:\n  - name: rules\n    kind: rules\n'
                                                                   'x_note: "a\\ud800"\n'},
                       expect=("{d}/c.yaml:4", "surrogate")))
    return out


TEMPLATE_ERRORS = {
    # name: (template text, the line the message names)
    "syntax-if": ("{% extends 'medical_record/_base.j2' %}\n{% block criteria %}\n{% if %}\n{% endblock %}\n", 3),
    "syntax-unclosed": ("line one\n{{ case.record \n", 2),
    "syntax-endfor": ("a\nb\n{% endfor %}\n", 3),
    "undefined-name": ("{% extends 'medical_record/_base.j2' %}\n{% block criteria %}\n{{ no_such_name }}\n"
                       "{% endblock %}\n", 3),
    "undefined-attribute": ("{{ message_break }}\nx\n{{ case.no_such_field }}\n", 3),
    "security-class": ("{{ message_break }}\n{{ ''.__class__.__mro__ }}\n", 2),
    "security-globals": ("{{ message_break }}\n\n{{ render.__globals__ }}\n", 3),
    "division-by-zero": ("{{ message_break }}\n{{ 1 / 0 }}\n", 2),
    "type-error": ("{{ message_break }}\n{{ 'a' + 1 }}\n", 2),
    "range-too-big": ("{{ message_break }}\n{% for i in range(100000000) %}{% endfor %}\n", 2),
    "recursion": ("{% macro m() %}{{ m() }}{% endmacro %}\n{{ message_break }}\n{{ m() }}\n", 1),
    "unknown-filter": ("{{ message_break }}\n\n{{ case.record | no_such_filter }}\n", 3),
    "include-missing": ("{{ message_break }}\n{% include 'no_such.j2' %}\n", 2),
    "extends-missing": ("{% extends 'no_such_base.j2' %}\n", 1),
    "unknown-test": ("{{ message_break }}\n{% if 1 is no_such_test %}{% endif %}\n", 2),
}


def template_family() -> Family:
    """Item 3: errors in a custom prompts_dir template: the template file, the line and the message, exit 2."""
    out: Family = []
    for name, (text, line) in TEMPLATE_ERRORS.items():
        cfg = GPT + "prompts_dir: {d}/prompts\n"
        for dim in ("accuracy", "standardization"):
            out.append(Hostile(f"template-{name}-{dim}", DRY,
                               files={"cases.jsonl": jl(case()), "c.yaml": cfg},
                               setup=prompts_with(dim, text),
                               expect=(f"{{d}}/prompts/medical_record/{dim}.j2", f"line {line}")))
    out.append(Hostile("template-not-utf8", DRY,
                       files={"cases.jsonl": jl(case()), "c.yaml": GPT + "prompts_dir: {d}/prompts\n"},
                       setup=prompts_with("accuracy", b"{{ message_break }}\n\xff\xfe\n"),
                       expect=("{d}/prompts/medical_record/accuracy.j2",)))
    out.append(Hostile("template-is-a-folder", DRY,
                       files={"cases.jsonl": jl(case()), "c.yaml": GPT + "prompts_dir: {d}/prompts\n"},
                       setup=chain(prompts_with("accuracy", ""), folder_at("prompts/medical_record/accuracy.j2")),
                       expect=("accuracy.j2",)))
    out.append(Hostile("template-per-case-undefined", DRY,
                       files={"cases.jsonl": jl(case()),
                              "c.yaml": GPT + "    call: per_case\nprompts_dir: {d}/prompts\n"},
                       setup=lambda d: copy_prompts(d, per_case="{{ message_break }}\n{{ nothing_here }}\n"),
                       expect=("{d}/prompts/medical_record/per_case.j2", "line 2")))
    return out


BIG = 200 * 1024


def big_cell_family() -> Family:
    """Item 3: a cell over the csv module's 128 KiB field limit: refused naming the file and line."""
    big = "x" * BIG
    return [
        Hostile("bigcell-ratings-value", ("reliability", "--ratings", "{d}/r.csv", "--bootstrap", "0"),
                files={"r.csv": f"unit,rater,value\nu1,a,1\nu1,b,{big}\n"}, expect=("{d}/r.csv:3", "characters")),
        Hostile("bigcell-ratings-unit", ("reliability", "--ratings", "{d}/r.csv", "--bootstrap", "0"),
                files={"r.csv": f"unit,rater,value\n{big},a,1\n"}, expect=("{d}/r.csv:2", "characters")),
        Hostile("bigcell-ratings-quoted-multiline", ("reliability", "--ratings", "{d}/r.csv", "--bootstrap", "0"),
                files={"r.csv": f'unit,rater,value\nu1,a,1\nu2,b,"{big}\n{big}"\n'},
                expect=("{d}/r.csv:3", "characters")),
        Hostile("bigcell-ratings-header", ("reliability", "--ratings", "{d}/r.csv", "--bootstrap", "0"),
                files={"r.csv": f"unit,rater,{big}\n"}, expect=("{d}/r.csv:1", "characters")),
        Hostile("bigcell-ratings-api", ("reliability", "--ratings", "{d}/r.csv", "--level", "nominal", "--json"),
                files={"r.csv": f"unit,rater,value\nu1,a,{big}\n"}, expect=("{d}/r.csv:2",)),
        Hostile("bigcell-human-wide", ("reliability", "{run}", "--human", "{d}/h.csv", "--bootstrap", "0"),
                files={"h.csv": f"case_id,accuracy\ncase-01,{big}\n"}, expect=("{d}/h.csv:2",)),
        Hostile("bigcell-human-import-wide", ("human", "import", "{d}/h.csv", "--run", "{run}"),
                files={"h.csv": f"case_id,accuracy\n{big},30\n"}, expect=("{d}/h.csv:2",)),
        Hostile("bigcell-human-sheet-comment", ("human", "import", "{d}/s.csv", "--run", "{run}"),
                setup=sheet(comment="y" * BIG), expect=("{d}/s.csv",)),
    ]


CONTROL_NAMES = {
    "esc": "Eve\x1b[31m", "bel": "Eve\x07", "newline": "Eve\nMallory", "cr": "Eve\rMallory", "del": "Eve\x7f",
    "c1-csi": "Eve\x9b31m", "nbsp-only": "\u00a0", "too-long": "E" * 81, "surrogate": "Eve\udcff",
}


def reviewer_family() -> Family:
    """Item 3: reviewer names: the same rule (no control character, 1-80 characters) in every channel."""
    out: Family = []
    for tag, name in CONTROL_NAMES.items():
        out.append(Hostile(f"reviewer-review-option-{tag}", ("review", "{run}", "--reviewer", name, "--port", "1"),
                           expect=("--reviewer",), timeout=10))
        out.append(Hostile(f"reviewer-human-import-option-{tag}", ("human", "import", "{d}/h.csv", "--run", "{run}",
                                                                  "--reviewer", name),
                           files={"h.csv": "case_id,accuracy\ncase-01,30\n"}, expect=("--reviewer",)))
        out.append(Hostile(f"reviewer-audit-export-option-{tag}", ("audit", "{run}", "--export", "{d}/s.csv",
                                                                  "--reviewer", name),
                           expect=("--reviewer",)))
        out.append(Hostile(f"reviewer-team-add-{tag}", ("reviewers", "add", name, "--run", "{run}"),
                           expect=("reviewer",)))
    for tag in ("esc", "bel", "del", "c1-csi", "too-long"):
        out.append(Hostile(f"reviewer-sheet-column-{tag}", ("human", "import", "{d}/s.csv", "--run", "{run}"),
                           setup=sheet(reviewer=CONTROL_NAMES[tag]), expect=("{d}/s.csv:", "reviewer"),
                           check=no_escape()))
    out.append(Hostile("reviewer-ok-sheet-unicode-name", ("human", "import", "{d}/s.csv", "--run", "{run}"),
                       setup=sheet(reviewer="王医生"), exit=0, expect=("王医生",)))
    return out


#: control sequences a judge's evidence or a user's file may carry
ESCAPES = {
    "sgr": "\x1b[31m", "clear-screen": "\x1b[2J\x1b[H", "osc-title": "\x1b]0;pwned\x07",
    "osc-hyperlink": "\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\", "bel": "\x07", "backspace": "\x08\x08",
    "c1-csi": "\x9b2J", "del": "\x7f",
}


def ansi_family() -> Family:
    """Item 3: control characters stripped or escaped from terminal output and report.md, whatever their source."""
    out: Family = []
    lines = EXAMPLES.read_text(encoding="utf-8").splitlines()
    base = json.loads(lines[3])  # case-04: a fixed penalty quoting "2型糖尿病病史10年" from the record
    for tag, esc in ESCAPES.items():
        rec = dict(base, record=base["record"].replace("2型糖尿病病史10年", f"2型糖尿病{esc}病史10年"))
        files = {"cases.jsonl": jl(rec)}
        out.append(Hostile(f"ansi-evidence-audit-{tag}", ("audit", "{d}/out"), files=files, exit=0,
                           setup=lambda d: cli(d, "score", "{d}/cases.jsonl", "--out", "{d}/out"),
                           check=no_escape("out/report.md")))
        out.append(Hostile(f"ansi-evidence-score-{tag}", ("score", "{d}/cases.jsonl", "--out", "{d}/out"), files=files,
                           exit=0, check=no_escape("out/report.md")))
        rubric = RUBRIC.read_text(encoding="utf-8").replace("    name: 准确性\n",
                                                           f"    name: {json.dumps(esc + '准确性')}\n")
        out.append(Hostile(f"ansi-rubric-name-{tag}",
                           ("score", "{d}/cases.jsonl", "-c", "{d}/c.yaml", "--out", "{d}/out"),
                           files={"cases.jsonl": jl(*json.loads("[" + ",".join(lines[:2]) + "]")),
                                  "c.yaml": "rubric: {d}/r.yaml\n" + RULES, "r.yaml": rubric},
                           exit=0, check=no_escape("out/report.md")))
        out.append(Hostile(f"ansi-sheet-comment-{tag}", ("human", "import", "{d}/s.csv", "--run", "{run}"),
                           setup=sheet(comment=f"bad{esc}comment", verdict="disagree"), exit=0,
                           check=no_escape("run/report.md")))
        out.append(Hostile(f"ansi-path-in-error-{tag}", ("score", "{d}/no" + esc + ".jsonl", "--dry-run"),
                           expect=("cannot read cases",), check=no_escape()))
        out.append(Hostile(f"ansi-system-name-{tag}", ("score", "{d}/cases.jsonl", "--out", "{d}/out"),
                           files={"cases.jsonl": jl(case(id="a", system="s1"), case(id="b", system=f"s2{esc}"))},
                           exit=0, check=no_escape("out/report.md")))
    out.append(Hostile("ansi-tcm-label", ("metrics", "tcm", "face", "{d}/p.jsonl", "{d}/g.jsonl"),
                       files={"p.jsonl": jl({"id": "\x1b[2Jx", "syndromes": ["\x1b]0;t\x07a"]}),
                              "g.jsonl": jl({"id": "\x1b[2Jx", "syndromes": ["b"]})},
                       exit=0, check=no_escape()))
    out.append(Hostile("ansi-text2dt-invalid-listed", ("metrics", "text2dt", "{d}/p.json", "{d}/g.json", "--on-invalid",
                                                       "zero"),
                       files={"p.json": json.dumps([[{"role": "\x1b[2JX", "triples": [], "logical_rel": "null"}]]),
                              "g.json": json.dumps([TREE])},
                       exit=0, check=no_escape()))
    return out


def pipe_family() -> Family:
    """Item 3: `human import <(cat s.csv)`: a named pipe is read once."""
    wide = b"case_id,accuracy,completeness,standardization\ncase-01,30,30,20\n"

    def the_sheet(d: Path) -> bytes:
        sheet(reviewer="Ann")(d)
        return (d / "s.csv").read_bytes()

    return [
        Hostile("pipe-human-import-wide", ("human", "import", "{d}/p.csv", "--run", "{run}"),
                setup=fifo("p.csv", lambda d: wide), exit=0, expect=("imported",)),
        Hostile("pipe-human-import-sheet", ("human", "import", "{d}/p.csv", "--run", "{run}"),
                setup=fifo("p.csv", the_sheet), exit=0, expect=("reviewer Ann",)),
        Hostile("pipe-report-human", ("report", "{run}", "--human", "{d}/p.csv"),
                setup=fifo("p.csv", lambda d: wide), exit=0, expect=("{run}/report.html",)),
        Hostile("pipe-reliability-human", ("reliability", "{run}", "--human", "{d}/p.csv", "--bootstrap", "0"),
                setup=fifo("p.csv", lambda d: wide), exit=0, expect=("imported",)),
        Hostile("pipe-ratings", ("reliability", "--ratings", "{d}/p.csv", "--bootstrap", "0"),
                setup=fifo("p.csv", lambda d: b"unit,rater,value\nu1,a,1\nu1,b,2\nu2,a,3\nu2,b,3\n"), exit=0,
                expect=("alpha",)),
        Hostile("pipe-cases", ("score", "{d}/p.jsonl", "--dry-run"),
                setup=fifo("p.jsonl", lambda d: jl(case()).encode()), exit=0, expect=("rules",)),
        Hostile("pipe-config", ("score", "{d}/cases.jsonl", "-c", "{d}/p.yaml", "--dry-run"),
                files={"cases.jsonl": jl(case())}, setup=fifo("p.yaml", lambda d: RULES.encode()), exit=0,
                expect=("rules",)),
    ]


ENCODINGS = ("gbk", "cp1252", "ascii", "latin-1")


def console_family() -> Family:
    """Item 3: the console under any encoding, a full disk, a closed pipe: no traceback."""
    out: Family = []
    commands = {
        "score-dry-run": (("score", str(EXAMPLES), "--dry-run"), 0),
        "report": (("report", "{run}"), 0),
        "audit": (("audit", "{run}", "--top", "0"), 0),
        "reliability": (("reliability", "{run}", "--bootstrap", "0"), 0),
        "tcm": (("metrics", "tcm", "face", str(TCM / "face_pred.jsonl"), str(TCM / "face_gold.jsonl")), 0),
        "error-chinese-path": (("score", "{d}/病例.jsonl", "--dry-run"), 2),
        "score-new": (("score", "{d}/cases.jsonl", "--out", "{d}/out"), 0),
    }
    for enc in ENCODINGS:
        for name, (args, code) in commands.items():
            out.append(Hostile(f"console-{enc}-{name}", args, files={"cases.jsonl": jl(case(id="病例-一"))},
                               exit=code, proc=True, env={"PYTHONIOENCODING": enc}, timeout=60))
    full = {
        "report": ("report", "{run}"), "audit": ("audit", "{run}", "--top", "0"),
        "reliability": ("reliability", "{run}", "--bootstrap", "0"),
        "reliability-json": ("reliability", "{run}", "--bootstrap", "0", "--json"),
        "score-dry-run": ("score", str(EXAMPLES), "--dry-run"),
        "tcm": ("metrics", "tcm", "face", str(TCM / "face_pred.jsonl"), str(TCM / "face_gold.jsonl")),
        "tcm-json": ("metrics", "tcm", "face", str(TCM / "face_pred.jsonl"), str(TCM / "face_gold.jsonl"), "--json"),
        "text2dt": ("metrics", "text2dt", "{d}/p.json", "{d}/g.json"),
    }
    for name, args in full.items():
        out.append(Hostile(f"console-dev-full-{name}", args,
                           files={"p.json": json.dumps([TREE]), "g.json": json.dumps([TREE])},
                           exit=1, expect=("standard output",), proc=True, stdout="full", timeout=60,
                           check=store_whole if "{run}" in " ".join(args) else None))
    for name in ("audit", "report", "tcm"):
        out.append(Hostile(f"console-closed-pipe-{name}", full[name], exit=1, proc=True, stdout="closed", timeout=60))
    return out


def exit_family() -> Family:
    """Item 5: NaN and Infinity never reach JSON; `metrics tcm TASK` refuses the files of another task."""
    out: Family = []
    for level in ("interval", "ratio", "ordinal"):
        for value in ("1e300", "1e308", "-1e300"):
            rows = f"unit,rater,value\nu1,a,{value}\nu1,b,1\nu2,a,1\nu2,b,{value}\nu3,a,2\nu3,b,{value}\n"
            if level == "ratio" and value.startswith("-"):
                continue
            # interval differences of 1e300 overflow (alpha undefined, said why); ranks and ratios do not
            overflows = level == "interval"
            out.append(Hostile(f"nan-ratings-{level}-{value}-json",
                               ("reliability", "--ratings", "{d}/r.csv", "--level", level, "--bootstrap", "20",
                                "--json"),
                               files={"r.csv": rows}, exit=0,
                               check=strict_json("null", "reason") if overflows else strict_json(), item=5))
            out.append(Hostile(f"nan-ratings-{level}-{value}-table",
                               ("reliability", "--ratings", "{d}/r.csv", "--level", level, "--bootstrap", "20"),
                               files={"r.csv": rows}, exit=0, expect=("undefined",) if overflows else ("alpha",),
                               absent=("= nan", "inf"), item=5))
    out.append(Hostile("nan-ratings-tiny-spread-json",
                       ("reliability", "--ratings", "{d}/r.csv", "--bootstrap", "20", "--json"),
                       files={"r.csv": "unit,rater,value\nu1,a,1e-320\nu1,b,0\nu2,a,0\nu2,b,1e-320\n"}, exit=0,
                       check=strict_json(), item=5))
    for task, of in (("pulse", "syndrome"), ("pulse", "agreement"), ("pulse", "face"), ("tongue", "syndrome"),
                     ("sound", "syndrome"), ("face", "syndrome"), ("syndrome", "pulse"), ("agreement", "pulse"),
                     ("pulse", "inquiry"), ("syndrome", "tongue")):
        out.append(Hostile(f"tcm-{task}-given-{of}-files",
                           ("metrics", "tcm", task, str(TCM / f"{of}_pred.jsonl"), str(TCM / f"{of}_gold.jsonl")),
                           expect=(f"task '{task}'",), absent=("0.0000",), item=5))
    return out


def variations_family() -> Family:
    """More of the same, spelled differently: what a hidden corpus with variations would try."""
    out: Family = []
    for tag, esc in ESCAPES.items():
        out.append(Hostile(f"vary-tcm-error-path-{tag}", ("metrics", "tcm", "face", "{d}/p" + esc + ".jsonl",
                                                         "{d}/g.jsonl"),
                           expect=("error:",), check=no_escape()))
        out.append(Hostile(f"vary-text2dt-error-id-{tag}", ("metrics", "text2dt", "{d}/p.json", "{d}/g.json"),
                           files={"p.json": json.dumps([{"id": f"t{esc}", "tree": TREE}] * 2),
                                  "g.json": json.dumps([{"id": f"t{esc}", "tree": TREE}])},
                           expect=("duplicate id",), check=no_escape()))
    for own in ("report.md", "judgments.jsonl", "results.sqlite-wal"):
        out.append(Hostile(f"vary-per-tree-over-run-{own.replace('.', '-')}",
                           ("metrics", "text2dt", "{d}/p.json", "{d}/g.json", "--per-tree", "{run}/" + own),
                           files={"p.json": json.dumps([TREE]), "g.json": json.dumps([TREE])},
                           expect=("{run}/" + own,), check=store_whole, item=1))
    rubric = RUBRIC.read_text(encoding="utf-8")
    for name, text in (
        ("rubric-stars-key", rubric.replace("    stars: {5: 38, 4: 32, 3: 24, 2: 16}\n",
                                            "    stars: {5: 38, 5: 35, 4: 32, 3: 24, 2: 16}\n", 1)),
        ("rubric-category-key", rubric.replace("      - id: numbers\n", "      - id: numbers\n        id: numbers2\n",
                                               1)),
        ("rubric-self-alias", rubric + "x_loop: &l\n  a: *l\n"),
    ):
        assert text != rubric, f"the variation {name} changes nothing: the rubric's shape changed"
        out.append(Hostile(f"vary-yaml-{name}", ("score", "{d}/cases.jsonl", "-c", "{d}/c.yaml", "--dry-run"),
                           files={"cases.jsonl": jl(case()), "c.yaml": "rubric: {d}/r.yaml\n" + RULES, "r.yaml": text},
                           expect=("{d}/r.yaml:",), item=2))
    out.append(Hostile("vary-yaml-duplicate-in-extra-body-list", DRY,
                       files={"cases.jsonl": jl(case()),
                              "c.yaml": GPT + "    extra_body:\n      tools:\n        - name: a\n          name: b\n"},
                       expect=("{d}/c.yaml:8", "duplicate key 'name'"), item=2))
    out.append(Hostile("vary-yaml-laughs-six-levels", DRY,
                       files={"cases.jsonl": jl(case()),
                              "c.yaml": GPT + "    extra_body:\n" + "".join(
                                  f"      l{i}: &l{i} [{', '.join([f'*l{i - 1}' if i else '1'] * 9)}]\n"
                                  for i in range(7))},
                       expect=("{d}/c.yaml", "alias"), proc=True, timeout=30, item=2))
    out.append(Hostile("vary-bootstrap-human-import-just-over", ("human", "import", "{d}/h.csv", "--run", "{run}",
                                                                 "--bootstrap", "100001"),
                       files={"h.csv": "case_id,accuracy\ncase-01,30\n"}, expect=("--bootstrap",), item=2))
    for depth in JSON_DEPTHS:
        v = deep("array", depth)
        for command in ("audit", "report"):
            out.append(Hostile(f"vary-depth-{command}-human-{depth}", (command, "{run}", "--human", "{d}/h.jsonl"),
                               files={"h.jsonl": '{"case_id": "case-01", "accuracy": 30, "x": ' + v + "}\n"},
                               expect=("{d}/h.jsonl:1", "nested")))
    out.append(Hostile("vary-surrogate-tcm-knowledge", ("metrics", "tcm", "face", "{d}/p.jsonl", "{d}/g.jsonl",
                                                         "--knowledge", "{d}/k.json"),
                       files={"p.jsonl": jl({"id": 1, "syndromes": ["a"]}),
                              "g.jsonl": jl({"id": 1, "syndromes": ["a"]}),
                              "k.json": '{"syndrome_similarity": {"a\\ud800": {"b": 0.5}}}'},
                       expect=("{d}/k.json", "surrogate")))
    out.append(Hostile("vary-surrogate-text2dt-id", ("metrics", "text2dt", "{d}/p.json", "{d}/g.json"),
                       files={"p.json": '[{"id": "t\\udc00", "tree": ' + json.dumps(TREE) + "}]",
                              "g.json": '[{"id": "t\\udc00", "tree": ' + json.dumps(TREE) + "}]"},
                       expect=("{d}/p.json", "surrogate")))
    emoji = json.loads(EXAMPLES.read_text(encoding="utf-8").splitlines()[3])
    emoji["record"] = emoji["record"].replace("2型糖尿病病史10年", "2型糖尿病😀病史10年")
    for enc in ("gbk", "ascii"):
        out.append(Hostile(f"vary-console-{enc}-emoji-evidence", ("audit", "{d}/out"), files={"cases.jsonl": jl(emoji)},
                           setup=lambda d: cli(d, "score", "{d}/cases.jsonl", "--out", "{d}/out"), exit=0, proc=True,
                           env={"PYTHONIOENCODING": enc}, timeout=60))
    return out


# ------------------------------------------------------- docs/limits.md: nothing destroyed, nothing unbounded
# items 341-346 are its sections in order (outputs, one writer, damaged stores, limits, secrets, refusals)


def _fingerprint(path: Path) -> tuple[str, str, str]:
    """(what the name is, what it leads to, the SHA-256 of a regular file's bytes) of ``path``."""
    import hashlib
    import stat as st

    def kind(mode: int) -> str:
        for test, name in ((st.S_ISLNK, "link"), (st.S_ISREG, "file"), (st.S_ISDIR, "folder"), (st.S_ISCHR, "chr"),
                           (st.S_ISFIFO, "fifo"), (st.S_ISSOCK, "socket"), (st.S_ISBLK, "blk")):
            if test(mode):
                return name
        return "other"

    own = kind(os.lstat(path).st_mode)
    target = kind(os.stat(path).st_mode)
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if target == "file" else ""
    return own, target, digest


def kept(*relative: str) -> tuple[Callable[[Path], None], Check]:
    """A set-up that fingerprints ``{d}/relative`` (file type, what a link leads to, checksum) and a check that
    each is still the same: no output replaced a special file or an input."""
    def setup(d: Path) -> None:
        (d / ".kept").mkdir(exist_ok=True)
        for r in relative:
            (d / ".kept" / r.replace("/", "__")).write_text(json.dumps(_fingerprint(d / r)), encoding="utf-8")

    def check(d: Path, out: Outcome) -> None:
        for r in relative:
            before = json.loads((d / ".kept" / r.replace("/", "__")).read_text(encoding="utf-8"))
            assert list(_fingerprint(d / r)) == before, f"{r} changed: {before} -> {list(_fingerprint(d / r))}"
    return setup, check


def special(name: str, kind: str) -> Callable[[Path], None]:
    """``{d}/name`` made a special file: ``fifo``, ``socket``, ``folder``, ``devnull`` (a link to /dev/null),
    ``chr`` (a null device node of its own, as root; else a link to /dev/null)."""
    def setup(d: Path) -> None:
        import socket

        path = d / name
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "socket":
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(str(path))
            sock.close()
        elif kind == "folder":
            path.mkdir()
        elif kind == "chr" and os.geteuid() == 0:
            import stat as st
            os.mknod(path, 0o666 | st.S_IFCHR, os.makedev(1, 3))
        else:
            path.symlink_to("/dev/null")
    return setup


def file_at(relative: str, text: str) -> Callable[[Path], None]:
    """``{d}/relative`` written with ``text`` (its folder made)."""
    def setup(d: Path) -> None:
        (d / relative).parent.mkdir(parents=True, exist_ok=True)
        (d / relative).write_text(text, encoding="utf-8")
    return setup


def recorded_cases(d: Path) -> None:
    """The run's store says it was scored from ``{d}/cases.jsonl`` (written here), as `score` records it."""
    (d / "cases.jsonl").write_text(EXAMPLES.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    sql(d, "INSERT OR REPLACE INTO meta(key, value) VALUES ('inputs', ?)",
        params=(json.dumps([["the cases file", str(d / "cases.jsonl")]]),))


def no_spot_check(d: Path, out: Outcome) -> None:
    """No spot check was stored (the command failed before drawing one)."""
    con = sqlite3.connect(f"file:{store_path(d)}?mode=ro", uri=True)
    try:
        assert con.execute("SELECT COUNT(*) FROM spot_checks").fetchone()[0] == 0, "a spot check was stored"
    finally:
        con.close()


def outputs_kept_family() -> Family:
    """docs/limits.md, Outputs: no output replaces a special file (a device, a pipe, a socket, a folder) or an input
    of the command or of its run; checked by file type and checksum before and after."""
    out: Family = []
    trees = {"p.json": json.dumps([TREE]), "g.json": json.dumps([TREE])}
    writers = {
        "audit-export": (("audit", "{run}", "--export", "{d}/{name}"), {}),
        "spot-check-export": (("audit", "{run}", "--spot-check", "2", "--export", "{d}/{name}"), {}),
        "per-tree": (("metrics", "text2dt", "{d}/p.json", "{d}/g.json", "--per-tree", "{d}/{name}"), trees),
    }
    for wname, (args, files) in writers.items():
        for kind in ("devnull", "chr", "fifo", "socket", "folder"):
            setup, check = kept(kind)
            checks = [check, no_spot_check] if wname == "spot-check-export" else [check]
            out.append(Hostile(f"kept-{wname}-over-{kind}", tuple(a.replace("{name}", kind) for a in args),
                               files=files, setup=chain(special(kind, kind), setup), check=all_checks(*checks),
                               expect=(f"{{d}}/{kind}", "not a regular file"), item=341))
    spellings = {"plain": "{d}/{t}", "dotted": "{d}/./{t}", "up": "{run}/../{t}", "symlink": "{d}/link.json",
                 "hardlink": "{d}/hard.json"}
    for target in ("p.json", "g.json"):
        def links(d: Path, target: str = target) -> None:
            (d / "link.json").symlink_to(d / target)
            os.link(d / target, d / "hard.json")
        for how, spelling in spellings.items():
            setup, check = kept(target)
            out.append(Hostile(f"kept-per-tree-over-{target[0]}-{how}",
                               ("metrics", "text2dt", "{d}/p.json", "{d}/g.json", "--per-tree",
                                spelling.replace("{t}", target)),
                               files=trees, setup=chain(links, setup), check=check,
                               expect=("the predictions file" if target == "p.json" else "the gold file",), item=341))
    setup, check = kept("h.csv")
    out.append(Hostile("kept-audit-export-over-its-human-file",
                       ("audit", "{run}", "--human", "{d}/h.csv", "--export", "{d}/h.csv"),
                       files={"h.csv": "case_id,accuracy\ncase-01,30\n"}, setup=setup, check=check,
                       expect=("{d}/h.csv", "the --human file"), item=341))
    setup, check = kept("cases.jsonl")
    for how in ("audit", "spot-check"):
        extra = ("--spot-check", "2") if how == "spot-check" else ()
        out.append(Hostile(f"kept-{how}-export-over-the-runs-cases",
                           ("audit", "{run}", *extra, "--export", "{d}/cases.jsonl"),
                           setup=chain(recorded_cases, setup), check=check,
                           expect=("{d}/cases.jsonl", "the cases file"), item=341))
    for own in ("report.md", "judgments.jsonl", "consensus.csv", "reliability.json", "results.sqlite"):
        setup, check = kept("out/" + own)
        out.append(Hostile(f"kept-score-out-over-its-cases-as-{own.replace('.', '-')}",
                           ("score", "{d}/out/" + own, "--out", "{d}/out"),
                           setup=chain(file_at("out/" + own, jl(case())), setup),
                           check=all_checks(check, no_calls("out")),
                           expect=("{d}/out/" + own,), item=341))
    setup, check = kept("out/consensus.csv")
    out.append(Hostile("kept-score-out-over-its-config", ("score", "{d}/cases.jsonl", "-c", "{d}/out/consensus.csv",
                                                          "--out", "{d}/out"),
                       files={"cases.jsonl": jl(case())},
                       setup=chain(file_at("out/consensus.csv", RULES), setup),
                       check=check, expect=("{d}/out/consensus.csv", "the config"), item=341))
    for kind in ("devnull", "fifo", "socket"):
        setup, check = kept("out/report.html")
        out.append(Hostile(f"kept-score-output-is-{kind}", ("score", "{d}/cases.jsonl", "--out", "{d}/out"),
                           files={"cases.jsonl": jl(case())},
                           setup=chain(folder_at("out"), special("out/report.html", kind), setup),
                           check=all_checks(check, no_calls("out")),
                           expect=("{d}/out/report.html", "not a regular file"), item=341))
    setup, check = kept("folder")
    out.append(Hostile("kept-spot-check-export-to-a-folder-draws-nothing",
                       ("audit", "{run}", "--spot-check", "2", "--export", "{d}/folder"),
                       setup=chain(special("folder", "folder"), setup), check=all_checks(check, no_spot_check),
                       expect=("{d}/folder", "folder"), item=341))
    out.append(Hostile("kept-ok-per-tree-to-stdout", ("metrics", "text2dt", "{d}/p.json", "{d}/g.json", "--per-tree",
                                                      "-", "--json"),
                       files=trees, exit=0, expect=('"edit_operations"',), item=341))
    out.append(Hostile("kept-ok-export-to-stdout", ("audit", "{run}", "--top", "1", "--export", "-"),
                       exit=0, expect=("row,rank,case_id",), item=341))
    return out


#: the run folders a corpus entry holds the lock of, with the lock file's descriptor (let go by its check)
_HELD: dict[Path, int] = {}


def lock_held(d: Path) -> None:
    """Another writer holds the run's lock: ``flock`` on ``{run}/results.sqlite.lock`` as ``corpus holder``
    (held by this process's own descriptor, which the module's re-entrant hold does not know)."""
    import fcntl

    path = d / "run" / "results.sqlite.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, json.dumps({"pid": 424242, "command": "corpus holder", "since": time.time()}).encode())
    _HELD[d] = fd


def let_go(d: Path, out: Outcome) -> None:
    """The entry's hold let go (the check of a :func:`lock_held` entry)."""
    fd = _HELD.pop(d, None)
    if fd is not None:
        os.close(fd)


def writers_family() -> Family:
    """docs/limits.md: one writer per run. Every command that writes a run, while another holds it, is refused
    at once naming the holder (exit 6), and the store is byte for byte what it was."""
    out: Family = []
    writers = {
        "score": ("score", "{d}/cases.jsonl", "--out", "{run}"),
        "calibrate": ("calibrate", "--sample", "2", "--out", "{run}"),
        "human-import": ("human", "import", "{d}/s.csv", "--run", "{run}"),
        "audit-human": ("audit", "{run}", "--human", "{d}/s.csv"),
        "report-human": ("report", "{run}", "--human", "{d}/s.csv"),
        "reliability-human": ("reliability", "{run}", "--human", "{d}/s.csv", "--bootstrap", "0"),
        "spot-check": ("audit", "{run}", "--spot-check", "2"),
        "reviewers-add": ("reviewers", "add", "ann", "--run", "{run}"),
        "reviewers-assign": ("reviewers", "assign", "--run", "{run}", "--per-case", "1"),
        "reviewers-remove": ("reviewers", "remove", "ann", "--run", "{run}"),
        "review": ("review", "{run}", "--port", "1"),
    }
    files = {"cases.jsonl": jl(case()), "s.csv": "case_id,accuracy\ncase-01,30\n"}
    for name, args in writers.items():
        setup, check = kept("run/results.sqlite")
        out.append(Hostile(f"writer-busy-{name}", args, files=files, setup=chain(setup, lock_held),
                           check=all_checks(let_go, check), exit=6,
                           expect=("being written by `corpus holder` (pid 424242", "--wait-lock"), item=342))
    for name, args in (("audit", ("audit", "{run}")), ("report", ("report", "{run}")),
                       ("reliability", ("reliability", "{run}", "--bootstrap", "0")),
                       ("reviewers-list", ("reviewers", "list", "--run", "{run}")),
                       ("compare", ("compare", "{run}", "{run}"))):
        out.append(Hostile(f"writer-busy-ok-reader-{name}", args, setup=lock_held, check=let_go, exit=0, item=342))
    return out


def damage(where: str) -> Callable[[Path], None]:
    """The run's store damaged in one page, as a disk or a copy damages it: ``calls``: the calls table's root page
    header overwritten; ``index``: an index's root page zeroed; ``meta``: the meta table's root page header
    overwritten; ``tail``: the last page zeroed."""
    def setup(d: Path) -> None:
        p = store_path(d)
        con = sqlite3.connect(p)
        try:
            size = con.execute("PRAGMA page_size").fetchone()[0]
            pages = con.execute("PRAGMA page_count").fetchone()[0]
            if where == "tail":
                page = pages
            else:
                kind = "index" if where == "index" else "table"
                row = con.execute("SELECT rootpage FROM sqlite_master WHERE type = ? AND rootpage > 1"
                                  + ("" if where == "index" else " AND name = ?") + " ORDER BY name LIMIT 1",
                                  (kind,) if where == "index" else (kind, where)).fetchone()
                page = row[0]
        finally:
            con.close()
        raw = bytearray(p.read_bytes())
        start = (page - 1) * size
        if where in ("index", "tail"):
            raw[start:start + size] = bytes(size)
        else:
            raw[start:start + 64] = b"\xff" * 64
        p.write_bytes(bytes(raw))
    return setup


def damaged_family() -> Family:
    """docs/limits.md: a damaged store is never written, nor read as if whole: every command refuses it with the
    way to recover (a copy, `sqlite3 .recover`), and the store is byte for byte what it was."""
    out: Family = []
    commands = {
        "score": ("score", "{d}/cases.jsonl", "--out", "{run}"),
        "human-import": ("human", "import", "{d}/s.csv", "--run", "{run}"),
        "spot-check": ("audit", "{run}", "--spot-check", "2"),
        "reviewers-add": ("reviewers", "add", "ann", "--run", "{run}"),
        "reviewers-list": ("reviewers", "list", "--run", "{run}"),
        "reviewers-assign": ("reviewers", "assign", "--run", "{run}"),
        "reviewers-remove": ("reviewers", "remove", "ann", "--run", "{run}"),
        "report-human": ("report", "{run}", "--human", "{d}/s.csv"),
        "audit": ("audit", "{run}"),
        "report": ("report", "{run}"),
        "reliability": ("reliability", "{run}", "--bootstrap", "0"),
        "review": ("review", "{run}", "--port", "1"),
        "compare": ("compare", "{run}", "{run}"),
    }
    files = {"cases.jsonl": jl(case()), "s.csv": "case_id,accuracy\ncase-01,30\n"}
    for where in ("calls", "index", "meta", "tail"):
        for name, args in commands.items():
            setup, check = kept("run/results.sqlite")
            out.append(Hostile(f"damaged-{where}-{name}", args, files=files, setup=chain(damage(where), setup),
                               check=check, expect=("{run}/results.sqlite", "damaged", ".recover"), item=343))
    return out


#: keys a careless user pastes where the name of the key's environment variable goes
PASTED_KEYS = ("sk-proj-Zq81LmNc0aTy62ExWd5uR4pK", "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6", "LK7q2Zx9a4QoAbCdEf12",
               "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "org_abc_DEF123ghiJKL456mno")


def secrets34_family() -> Family:
    """docs/limits.md, Secrets: a key pasted where the NAME of its variable goes is refused without being shown (no 4+
    character end of it in the output), by every command that reads the config."""
    out: Family = []
    for i, key in enumerate(PASTED_KEYS):
        cfg = f"judges:\n  - name: gpt\n    model: openai/gpt-4.1\n    api_key_env: {key}\n"
        for name, args in (("dry-run", DRY), ("score", ("score", "{d}/cases.jsonl", "-c", "{d}/c.yaml",
                                                         "--out", "{d}/out")),
                           ("judges-check", ("judges", "check", "-c", "{d}/c.yaml")),
                           ("calibrate", ("calibrate", "-c", "{d}/c.yaml", "--dry-run"))):
            out.append(Hostile(f"secret-key-as-variable-name-{i}-{name}", args,
                               files={"cases.jsonl": jl(case()), "c.yaml": cfg},
                               expect=("key",), absent=(key[:4], key[-4:]), item=345))
    return out


#: templates that would run for ever or fill the memory: each refused within its budget (domain/prompts.py)
RUNAWAY_TEMPLATES = {
    "nested-ranges": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "repeat-2e9": "{{ 'x' * 2000000000 }}",
    "center-2e9": "{{ 'x'.center(2000000000) }}",
    "center-filter-2e9": "{{ 'x'|center(2000000000) }}",
    "replace-empty": "{% set s = 'ab' * 5000 %}{{ s.replace('', s) }}",
    "join-doubling": "{% set ns = namespace(s='xy') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "plus-doubling": "{% set ns = namespace(s='xy') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
    "format-width": "{{ '{:>2000000000}'.format(1) }}",
    "percent-width": "{{ '%2000000000d' % 1 }}",
    "star-width": "{{ '%*d' % (2000000000, 1) }}",
    "power": "{{ 2 ** 100000000 }}",
    "squaring": "{% set ns = namespace(n=3) %}{% for i in range(60) %}{% set ns.n = ns.n * ns.n %}{% endfor %}",
    "list-repeat": "{{ (range(100000)|list) * 100000 }}",
    "recursive-macro": "{% macro f(n) %}{% for i in range(10) %}{{ f(n + 1) }}{% endfor %}{% endmacro %}{{ f(0) }}",
    "output-flood": "{% for i in range(100000) %}{{ case.record * 20 }}{% endfor %}",
    "join-method": "{% set s = 'x' * 9000000 %}{{ s.join(range(500)|map('string')) }}",
    "join-filter": "{% set s = 'x' * 9000000 %}{{ range(500)|map('string')|join(s) }}",
    "lipsum": "{{ lipsum(1000000) }}",
}


def link_to(relative: str, target: str) -> Callable[[Path], None]:
    """``{d}/relative`` a symbolic link to ``target``."""
    def setup(d: Path) -> None:
        (d / relative).symlink_to(target)
    return setup


def api_call(name: str, **kwargs: Any) -> Callable[[Path], object]:
    """A call of ``consensus_eval.api.<name>({run}, **kwargs)``."""
    def call(d: Path) -> object:
        return getattr(_api(), name)(d / "run", **kwargs)
    return call


def sparse(relative: str, size: int) -> Callable[[Path], None]:
    """``{d}/relative`` a sparse file of ``size`` bytes (its size over a cap at no cost)."""
    def setup(d: Path) -> None:
        with open(d / relative, "wb") as f:
            f.truncate(size)
    return setup


def short_pipe_wait(d: Path) -> None:
    """A pipe is given up on after 0.2 s (not 60) for this entry (restored by :func:`pipe_wait_back`)."""
    from consensus_eval.domain import textio

    textio.PIPE_WAIT_S = 0.2


def pipe_wait_back(d: Path, out: Outcome) -> None:
    from consensus_eval.domain import textio

    textio.PIPE_WAIT_S = 60.0


def silent_fifo(name: str) -> Callable[[Path], None]:
    """``{d}/name`` a named pipe nothing ever writes to."""
    def setup(d: Path) -> None:
        os.mkfifo(d / name)
        short_pipe_wait(d)
    return setup


def xlsx_with(kind: str) -> Callable[[Path], None]:
    """``{d}/c.xlsx``: a cases workbook made hostile: ``entities`` (a billion-laughs declaration used in a cell),
    ``xxe`` (an external entity), ``undefined`` (an entity never declared), ``bomb`` (a 300 MB comment),
    ``ratio`` (a 50 MB comment compressed 1,000 times)."""
    def setup(d: Path) -> None:
        import importlib
        import zipfile

        openpyxl: Any = importlib.import_module("openpyxl")   # untyped
        book = openpyxl.Workbook()
        sheet = book.active
        assert sheet is not None
        sheet.append(["id", "record", "conversation"])
        sheet.append(["c1", "主诉：口渴3个月。", "医生：哪里不舒服？"])
        book.save(d / "plain.xlsx")
        with zipfile.ZipFile(d / "plain.xlsx") as z:
            parts = {n: z.read(n) for n in z.namelist()}
        name = "xl/worksheets/sheet1.xml"
        xml = parts[name].decode()
        dtd = {"entities": '<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>',
               "xxe": '<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'}.get(kind, "")
        ref = {"entities": "&b;", "xxe": "&e;", "undefined": "&nope;"}.get(kind)
        if ref is not None:
            parts[name] = (dtd + xml.replace(">c1<", f">{ref}<", 1)).encode()
        with zipfile.ZipFile(d / "c.xlsx", "w", compression=zipfile.ZIP_DEFLATED) as z:
            for n, b in parts.items():
                z.writestr(n, b)
            if kind in ("bomb", "ratio"):
                z.writestr("xl/comments1.xml", b"<comments>" + b"a" * (300 if kind == "bomb" else 50) * 1024**2
                           + b"</comments>")
    return setup


def limits34_family() -> Family:
    """docs/limits.md: limits on every input and template. Devices and silent pipes as inputs, files over their
    kind's cap (sparse), hostile workbooks, runaway templates, unbounded bootstrap counts through the API: each
    refused with the file, the line or the cap named; a 10 MB quote grounded (not searched) within bounds."""
    out: Family = []
    inputs = {
        "cases": (("score", "{d}/{f}", "--dry-run"), {}),
        "config": (("score", "{d}/cases.jsonl", "-c", "{d}/{f}", "--dry-run"), {"cases.jsonl": jl(case())}),
        "human-labels": (("human", "import", "{d}/{f}", "--run", "{run}"), {}),
        "ratings": (("reliability", "--ratings", "{d}/{f}", "--bootstrap", "0"), {}),
        "trees": (("metrics", "text2dt", "{d}/{f}", "{d}/g.json"), {"g.json": json.dumps([TREE])}),
        "tcm": (("metrics", "tcm", "face", "{d}/{f}", "{d}/g.jsonl"), {"g.jsonl": jl({"id": 1, "syndromes": ["a"]})}),
        "calibration": (("score", "{d}/cases.jsonl", "--dry-run", "--calibration", "{d}/{f}"),
                        {"cases.jsonl": jl(case())}),
    }
    for what, (args, files) in inputs.items():
        for dev in ("/dev/zero", "/dev/urandom"):
            link = "z.csv" if what in ("human-labels", "ratings") else "z.jsonl" if what == "cases" else "z.json"
            out.append(Hostile(f"limit34-{what}-is-{dev.rsplit('/', 1)[1]}",
                               tuple(a.replace("{f}", link) for a in args), files=files,
                               setup=link_to(link, dev),
                               expect=("character device",), item=344))
        name = "p.csv" if what in ("human-labels", "ratings") else "p.jsonl" if what in ("cases", "tcm") else "p.json"
        out.append(Hostile(f"limit34-{what}-silent-pipe", tuple(a.replace("{f}", name) for a in args), files=files,
                           setup=silent_fifo(name), check=pipe_wait_back, expect=("nothing writes to it",), item=344))
    caps = {"cases": ("score", "{d}/big.jsonl", "--dry-run"),
            "config": ("score", "{d}/cases.jsonl", "-c", "{d}/big.yaml", "--dry-run"),
            "human labels": ("human", "import", "{d}/big.csv", "--run", "{run}"),
            "ratings": ("reliability", "--ratings", "{d}/big.csv", "--bootstrap", "0")}
    sizes = {"cases": 1024**3 + 1, "config": 4 * 1024**2 + 1, "human labels": 256 * 1024**2 + 1,
             "ratings": 256 * 1024**2 + 1}
    for what, args in caps.items():
        big = next(a for a in args if "big." in a).rsplit("/", 1)[1]
        out.append(Hostile(f"limit34-{what.replace(' ', '-')}-over-its-cap", args, files={"cases.jsonl": jl(case())},
                           setup=sparse(big, sizes[what]), expect=(f"{{d}}/{big}", "MiB"), item=344))
    for kind, want in (("entities", "entities"), ("xxe", "entities"), ("undefined", "undefined entity"),
                       ("bomb", "MiB uncompressed"), ("ratio", "zip bomb")):
        out.append(Hostile(f"limit34-xlsx-{kind}", ("score", "{d}/c.xlsx", "--dry-run"), setup=xlsx_with(kind),
                           expect=("{d}/c.xlsx", want), item=344))
    for name, text in RUNAWAY_TEMPLATES.items():
        out.append(Hostile(f"limit34-template-{name}", DRY,
                           files={"cases.jsonl": jl(case()), "c.yaml": GPT + "prompts_dir: {d}/prompts\n"},
                           setup=prompts_with("accuracy", text + "{{ message_break }}x"),
                           expect=("{d}/prompts/medical_record/accuracy.j2",
                                   "characters written" if name == "output-flood" else "line 1"), item=344))
    out.append(Hostile("limit34-template-over-its-cap", DRY,
                       files={"cases.jsonl": jl(case()), "c.yaml": GPT + "prompts_dir: {d}/prompts\n"},
                       setup=chain(prompts_with("accuracy", ""),
                                   sparse("prompts/medical_record/accuracy.j2", 4 * 1024**2 + 1)),
                       expect=("accuracy.j2", "MiB"), item=344))
    for n in (10**6, 10**9, -1):
        for fn in ("load_run", "rebuild"):
            out.append(Hostile(f"limit34-api-{fn}-n-boot-{n}", call=api_call(fn, n_boot=n), expect=("n_boot",),
                               item=344))
    out.append(Hostile("limit34-10-mb-quote", ("score", "{d}/cases.jsonl", "--out", "{run}"),
                       setup=ten_mb_quote,
                       exit=0, check=lambda d, o: _assert("not_found" in (d / "run" / "judgments.jsonl").read_text(
                           encoding="utf-8")), item=344))
    return out


def _reply_with_two_deductions(con: sqlite3.Connection, where: Path) -> tuple[int, dict[str, Any]]:
    """The first stored reply with two deductions or more, by rowid, and its judgment (the calls finish, and are
    stored, in any order; a reply may quote evidence only in its fixed penalties)."""
    for rowid, text in con.execute("SELECT rowid, judgment FROM calls WHERE status = 'ok' ORDER BY rowid"):
        judgment: dict[str, Any] = json.loads(text)
        if len(judgment["deductions"]) >= 2:
            return rowid, judgment
    raise AssertionError(f"{where}: no stored reply with two deductions or more to quote 10 MB in")


def ten_mb_quote(d: Path) -> None:
    """The run's cases beside it, and one stored judgment of it quoting 10 MB (twice: in parts, and whole)."""
    (d / "cases.jsonl").write_text("".join(EXAMPLES.read_text(encoding="utf-8").splitlines(keepends=True)[:4]),
                                   encoding="utf-8")
    con = sqlite3.connect(store_path(d))
    try:
        rowid, judgment = _reply_with_two_deductions(con, store_path(d))
        judgment["deductions"][0]["evidence"] = "空腹血糖…" * 2_000_000          # 10 MB of quoted parts
        judgment["deductions"][-1]["evidence"] = "口渴多饮" * 2_500_000          # 10 MB of one text
        con.execute("UPDATE calls SET judgment = ? WHERE rowid = ?",
                    (json.dumps(judgment, ensure_ascii=False), rowid))
        con.commit()
    finally:
        con.close()


def _api() -> Any:
    """consensus_eval.api (imported when an entry calls it)."""
    from consensus_eval import api
    return api


def refusals34_family() -> Family:
    """docs/limits.md, last table: each traceback and wrong exit 0 listed, a clear refusal (or a documented case)."""
    long = "x" * 300
    out: Family = [
        Hostile("refuse34-seed-negative", ("audit", "{run}", "--spot-check", "2", "--seed", "-5"),
                expect=("--seed",), check=no_spot_check, item=346),
        Hostile("refuse34-seed-2-80", ("audit", "{run}", "--spot-check", "2", "--seed", str(2**80)),
                expect=("--seed",), check=no_spot_check, item=346),
        Hostile("refuse34-seed-negative-api", call=lambda d: _api().spot_check(d / "run", 2, seed=-5),
                expect=("--seed -5",), check=no_spot_check, item=346),
        Hostile("refuse34-audit-top-negative", ("audit", "{run}", "--top", "-1"), expect=("--top",), item=346),
        Hostile("refuse34-stratify-without-spot-check", ("audit", "{run}", "--stratify", "band"),
                expect=("--stratify", "--spot-check"), item=346),
        Hostile("refuse34-redraw-without-spot-check", ("audit", "{run}", "--redraw"),
                expect=("--redraw", "--spot-check"), item=346),
        Hostile("refuse34-out-name-too-long", ("score", "{d}/cases.jsonl", "--out", "{d}/" + long),
                files={"cases.jsonl": jl(case())}, expect=("File name too long",), item=346),
        Hostile("refuse34-export-name-too-long", ("audit", "{run}", "--export", "{d}/" + long + ".csv"),
                expect=("File name too long",), item=346),
        Hostile("refuse34-encoding-rot13-human",
                ("human", "import", "{d}/h.csv", "--run", "{run}", "--encoding", "rot13"),
                files={"h.csv": "case_id,accuracy\ncase-01,30\n"}, expect=("{d}/h.csv", "not a text encoding"),
                item=346),
        Hostile("refuse34-encoding-base64-ratings", ("reliability", "--ratings", "{d}/r.csv", "--encoding", "base64"),
                files={"r.csv": "unit,rater,value\nu1,a,1\nu1,b,2\n"}, expect=("{d}/r.csv", "not a text encoding"),
                item=346),
        Hostile("refuse34-case-duplicate-key", DRY, files={
            "cases.jsonl": '{"id": "c1", "id": "c2", "conversation": "医生：哪里不舒服？", "record": "主诉：口渴。"}\n',
            "c.yaml": RULES}, expect=("{d}/cases.jsonl:1", '"id" is given twice'), item=346),
        Hostile("refuse34-case-duplicate-nested-key", DRY, files={
            "cases.jsonl": '{"id": "c1", "conversation": [{"role": "doctor", "text": "a", "text": "b"}], '
                           '"record": "主诉：口渴。"}\n', "c.yaml": RULES},
            expect=("{d}/cases.jsonl:1", '"text" is given twice'), item=346),
        Hostile("refuse34-cases-csv-nul", ("score", "{d}/c.csv", "--dry-run"),
                files={"c.csv": "id,record,conversation\nc1,主诉\x00口渴,医生：哪里\n"}, expect=("{d}/c.csv:2", "NUL"),
                item=346),
        Hostile("refuse34-human-csv-nul", ("human", "import", "{d}/h.csv", "--run", "{run}"),
                files={"h.csv": "case_id,accuracy\ncase-01\x00,30\n"}, expect=("{d}/h.csv:2", "NUL"), item=346),
        Hostile("refuse34-sheet-unknown-row-kind", ("human", "import", "{d}/s.csv", "--run", "{run}"),
                setup=chain(sheet(reviewer="Ann"), lambda d: (d / "s.csv").write_text(
                    (d / "s.csv").read_text(encoding="utf-8-sig").replace("\ndeduction,", "\nweird,", 1),
                    encoding="utf-8-sig")), expect=("{d}/s.csv", "'weird'"), item=346),
        Hostile("refuse34-compare-a-system-with-itself", ("compare", "{run}", "--systems", "A", "A"),
                expect=("a system compared with itself",), item=346),
        Hostile("refuse34-per-tree-name-too-long", ("metrics", "text2dt", "{d}/p.json", "{d}/g.json", "--per-tree",
                                                    "{d}/" + long),
                files={"p.json": json.dumps([TREE]), "g.json": json.dumps([TREE])}, expect=("File name too long",),
                item=346),
    ]
    for name, (old_text, new_text, want) in {
        "points-nan": ("points: 2}", "points: .nan}", "finite"),
        "points-inf": ("points: 2}", "points: .inf}", "finite"),
        "cap-nan": ("cap: 10", "cap: .nan", "finite"),
        "max-inf": ("max: 10", "max: .inf", "finite"),
        "language-unknown": ("name: mini\n", "name: mini\nlanguage: xx\n", "unknown language 'xx'"),
    }.items():
        out.append(Hostile(f"refuse34-rubric-{name}", DRY,
                           files={"cases.jsonl": jl(case()), "c.yaml": RULES + "rubric: {d}/r.yaml\n",
                                  "r.yaml": RUBRIC_MINI.replace(old_text, new_text, 1)},
                           expect=("{d}/r.yaml", want), item=346))
    return out


def build() -> list[Hostile]:
    """The whole corpus (names unique)."""
    corpus = [*outputs_family(), *limits_family(), *json_depth_family(), *surrogate_family(), *template_family(),
              *big_cell_family(), *reviewer_family(), *ansi_family(), *pipe_family(), *console_family(),
              *exit_family(), *variations_family(), *outputs_kept_family(),
              *writers_family(), *damaged_family(), *limits34_family(),
              *secrets34_family(), *refusals34_family()]
    names = [h.name for h in corpus]
    dup = sorted({n for n in names if names.count(n) > 1})
    assert not dup, f"duplicate corpus names: {dup}"
    return corpus


# --------------------------------------------------------------------------- the script


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Run the hostile-input corpus and count the results per class.")
    parser.add_argument("-k", default="", help="only the entries whose name contains this")
    parser.add_argument("--list", action="store_true", help="print the names and exit")
    parser.add_argument("-q", action="store_true", help="print only the counts")
    args = parser.parse_args(argv)
    corpus = [h for h in build() if args.k in h.name]
    if args.list:
        print("\n".join(h.name for h in corpus))
        return 0
    os.chdir(ROOT)
    from consensus_eval.judges.quiet import quiet_libraries

    quiet_libraries()
    counts = dict.fromkeys(CLASSES, 0)
    by_item: dict[int, dict[str, int]] = {}
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        run = scored_run_in(Path(tmp))
        for i, h in enumerate(corpus):
            d = Path(tmp) / f"e{i}"
            d.mkdir()
            try:
                cls, why = classify(h, d, run_entry(h, d, run))
            except Exception as e:  # noqa: BLE001 - a set-up that fails is reported, not fatal
                cls, why = "wrong", f"set-up: {type(e).__name__}: {e}"
            counts[cls] += 1
            by_item.setdefault(h.item, dict.fromkeys(CLASSES, 0))[cls] += 1
            if cls not in ("refused", "handled") and not args.q:
                print(f"{cls:9} {h.name}: {why[:400]!r}", flush=True)
            shutil.rmtree(d, ignore_errors=True)
    print(f"{len(corpus)} entries in {time.monotonic() - start:.0f} s: "
          + ", ".join(f"{counts[c]} {c}" for c in CLASSES))
    for item in sorted(by_item):
        print(f"  item {item}: " + ", ".join(f"{by_item[item][c]} {c}" for c in CLASSES))
    return 0 if counts["refused"] + counts["handled"] == len(corpus) else 1


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Hostile", "build"]
