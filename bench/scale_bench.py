"""Rebuilding a large run from its store: time and peak memory against the number of cases.

Builds (once per size) a run of N cases x J judges written straight into a store
(:func:`tests.big_run.build_big_run`: the bundled examples made distinct, 0-4 deductions per call quoting
the record), then, for each size and each source tree, runs ``--repeats`` fresh processes, each doing
what ``score`` does at its end (:func:`consensus_eval.api.rebuild`: read, derive, ground, consensus,
audit, reliability with ``--boot`` resamples, judgments.jsonl, consensus.csv/jsonl, reliability.json,
report.md, report.html) on a copy of the store; it reports the median wall time and the median peak
RSS (``/usr/bin/time -v``, "Maximum resident set size").

``--tree`` (repeatable) names source trees to compare, e.g. a ``git worktree add /tmp/base <commit>``
of the code before a change: each is run with its own code on the same stores, and the ratio to the
first tree is printed.

    .venv/bin/python bench/scale_bench.py --cases 5000 10000 20000 --tree /tmp/base --tree . --repeats 3

``--gc-on``: the same rebuilds with the cyclic collector never paused (``gc.disable`` and ``gc.freeze`` made
no-ops): what the pause of :mod:`consensus_eval._gc` saves.

``--stages``: instead, one fresh process per size doing the same rebuild stage by stage (read the store, ground
and derive, consensus, judgments.jsonl, consensus.csv/jsonl, reliability, audit, report.md, report.html),
printing after each its seconds, its CPU seconds (the process's, the report's compressing thread included: the
steadier figure on a shared machine), the process's RSS and its peak RSS so far (``/proc/self/status``): where
the time goes, where the memory is held and where it peaks.

    .venv/bin/python bench/scale_bench.py --cases 5000 20000 --stages
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.big_run import build_big_run  # noqa: E402

CHILD = """
import gc, sys, time
sys.path.insert(0, {tree!r})
if {gc_on!r}:   # --gc-on: the collector never paused (what the pause saves)
    gc.disable = gc.freeze = lambda: None
from consensus_eval import api
t = time.perf_counter()
api.rebuild({folder!r}, n_boot={boot})
print("WALL", time.perf_counter() - t)
"""


STAGES = """
import inspect, sys, time
sys.path.insert(0, {tree!r})
from pathlib import Path
from consensus_eval._gc import gc_paused
from consensus_eval.analysis.results import analyze
try:
    from consensus_eval.analysis.derived import derived, read_run   # since issue 26: execution reads, analysis derives
    from consensus_eval.execution.stored_run import read_stored
except ImportError:
    from consensus_eval.execution.results import read_run
    derived = read_stored = None
from consensus_eval.execution.store import Store
from consensus_eval.output import files
from consensus_eval.output.report import data as report_data, html, markdown

def now():
    return time.perf_counter(), time.process_time()

def mark(name, t):
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    mb = lambda k: int(status[k].split()[0]) // 1024
    wall, cpu = now()
    print(f"  {{name:34s}} {{wall - t[0]:6.1f}} s  CPU {{cpu - t[1]:6.1f}} s  RSS {{mb('VmRSS'):6,d}} MB  "
          f"peak {{mb('VmHWM'):6,d}} MB", flush=True)

out = Path({folder!r})
start = now()
with gc_paused(), Store.open_existing(out) as store:
    t = now()
    lean = {{"replies": False}} if "replies" in inspect.signature(read_run).parameters else {{}}
    if read_stored is not None and lean:
        run = read_stored(store, **lean)
        mark("read the store", t)
        t = now(); run = derived(run); mark("ground quotes, derive scores", t)
        t = now(); res = analyze(run, labels=store.human_labels(), n_boot={boot}); mark("consensus", t)
    else:
        res = analyze(read_run(store, **lean), labels=store.human_labels(), n_boot={boot})
        mark("read, derive, ground, consensus", t)
    t = now()
    files.write_judgments(out / "judgments.jsonl", res.rubric, res.records, res.scores, res.run.grounding,
                          drop=res.config.ungrounded == "drop")
    mark("judgments.jsonl", t)
    t = now(); files.write_consensus(out, res.rubric, res.consensus); mark("consensus.csv/jsonl", t)
    t = now(); files.write_json(out / "reliability.json", res.reliability.to_json())
    mark("reliability (bootstrap), .json", t)
    t = now(); res.audit; mark("audit", t)
    t = now(); data = report_data.build_report_data(res, out)
    files.write_text(out / "report.md", markdown.render_markdown(data)); mark("report data, report.md", t)
    t = now()
    if hasattr(html, "write_html"):   # since issue 38: paged beyond html.PAGE cases, the page files written too
        html.write_html(data, out / "report.html")
    else:
        pieces = html.html_pieces(data) if hasattr(html, "html_pieces") else [html.render_html(data)]
        with files.atomic_writer(out / "report.html") as f:
            f.writelines(pieces)
    mark("report.html", t)
    sizes = [p.stat().st_size for p in [out / "report.html", *sorted(out.glob("report-cases/*.html"))]]
    print(f"  report.html {{sizes[0] / 1e6:.2f}} MB; page files {{len(sizes) - 1}}, {{sum(sizes[1:]) / 1e6:.2f}} MB",
          flush=True)
mark("whole rebuild", start)
"""


def stages(tree: Path, store: Path, boot: int) -> None:
    """One fresh process rebuilding a copy of ``store`` stage by stage (module docstring), its lines printed."""
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        folder = Path(tmp) / "run"
        folder.mkdir()
        shutil.copy(store / "results.sqlite", folder / "results.sqlite")
        code = STAGES.format(tree=str(tree), folder=str(folder), boot=boot)
        proc = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True)
    print(proc.stdout, end="", flush=True)


def one_run(tree: Path, store: Path, boot: int, gc_on: bool = False) -> tuple[float, float, float]:
    """(seconds inside rebuild, peak RSS in MB, CPU seconds of the whole process: user + system, imports
    included) of one fresh process rebuilding a copy of ``store``. On this shared machine the wall time
    grows with the other engineers' load; the CPU time much less."""
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        folder = Path(tmp) / "run"
        folder.mkdir()
        shutil.copy(store / "results.sqlite", folder / "results.sqlite")
        code = CHILD.format(tree=str(tree), folder=str(folder), boot=boot, gc_on=gc_on)
        proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-c", code], cwd=tree,
                              capture_output=True, text=True, check=True)
    wall = float(re.search(r"WALL (\S+)", proc.stdout).group(1))  # type: ignore[union-attr]
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr).group(1))  # type: ignore[union-attr]
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): (\S+)", proc.stderr).group(1))  # type: ignore[union-attr]
              for kind in ("User", "System"))
    return wall, rss_kb / 1024, cpu


def _load() -> str:
    """The 1-minute load average (the machine is shared: figures depend on it)."""
    with open("/proc/loadavg", encoding="ascii") as f:
        return f.read().split()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, nargs="+", default=[5000, 10000, 20000])
    ap.add_argument("--judges", type=int, default=4)
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tree", type=Path, action="append", default=None,
                    help="source tree to run (repeatable; default: this one)")
    ap.add_argument("--stores", type=Path, default=Path("/tmp/scale-bench"))
    ap.add_argument("--stages", action="store_true", help="time and RSS after each stage of one rebuild per size")
    ap.add_argument("--gc-on", action="store_true",
                    help="make gc.disable and gc.freeze no-ops in the rebuild: the collector is never paused")
    args = ap.parse_args()
    trees = [t.resolve() for t in (args.tree or [ROOT])]
    for n in args.cases:
        store = args.stores / f"{n}x{args.judges}"
        if not (store / "results.sqlite").is_file():
            build_big_run(store, n, args.judges)
        if args.stages:
            for tree in trees:
                print(f"{n:6d} cases x {args.judges} judges  {tree}  (load {_load()})", flush=True)
                stages(tree, store, args.boot)
            continue
        first: tuple[float, float] | None = None
        for tree in trees:
            runs = [one_run(tree, store, args.boot, args.gc_on) for _ in range(args.repeats)]
            wall = statistics.median(w for w, _, _ in runs)
            rss = statistics.median(r for _, r, _ in runs)
            cpu = statistics.median(c for _, _, c in runs)
            load = _load()
            ratio = "" if first is None else f"  x{first[0] / wall:.2f} faster, x{first[1] / rss:.2f} less memory"
            print(f"{n:6d} cases x {args.judges} judges  {tree!s:30s}  rebuild {wall:7.1f} s "
                  f"(runs: {', '.join(f'{w:.1f}' for w, _, _ in runs)})  CPU {cpu:6.1f} s  peak RSS {rss:6.0f} MB  "
                  f"load {load}{ratio}", flush=True)
            first = first or (wall, rss)
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))


if __name__ == "__main__":
    main()
