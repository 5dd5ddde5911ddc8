"""Scoring a large run with the rules judge: `consensus-eval score` end to end, time, CPU and peak memory.

Writes (once per size) N distinct cases (:func:`tests.big_run.big_cases`: the bundled examples made
distinct) to ``--data/cases-N.jsonl``, then for each repeat and each source tree in turn (so every tree is
measured in the same window of the shared machine's load) runs ``consensus-eval score CASES --config
configs/default.yaml --out DIR`` in a fresh process, with the tree's code (``PYTHONPATH=TREE``) into a fresh
folder: loading and planning, every call (the rules judge: three dimensions per case), the store, and the
rebuild of every output at the end. ``/usr/bin/time -v`` gives the wall time, the CPU (user + system, of
the process and of the processes it waited for: the rules judge's workers) and the peak RSS (the largest
single process). Each line has the 1-minute load average before and after the run; the medians per tree
and size come last, with the ratio to the first tree.

    .venv/bin/python bench/score_bench.py --cases 5000 20000 --tree /tmp/base --tree . --repeats 3
    .venv/bin/python bench/score_bench.py --cases 100000 --repeats 3

``--keep DIR`` keeps the last run's output folder there (to compare outputs between trees).

Each run's line also splits it into its phases, wall / CPU seconds: ``prepare`` (reading the cases, building
the judges, the plan), ``execute`` (every call into the store; CPU of the main process, then of the rules
judge's worker processes) and ``rebuild`` (every output, from the store), timed in the child around
``api.prepare`` and ``api._rebuild``.
"""

from __future__ import annotations

import argparse
import json
import os
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

from tests.big_run import big_cases  # noqa: E402


def cases_file(data: Path, n: int) -> Path:
    """``data/cases-N.jsonl``, written once (the same cases for every tree)."""
    path = data / f"cases-{n}.jsonl"
    if not path.is_file():
        data.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            for case in big_cases(n):
                f.write(json.dumps(case.model_dump(mode="json", exclude_none=True), ensure_ascii=False) + "\n")
        tmp.rename(path)
    return path


#: the child: ``consensus-eval`` with ``api.prepare`` and ``api._rebuild`` timed (wall, CPU of this process), and
#: this process's and its children's CPU at the end, printed to its standard error
CHILD = """
import atexit, os, sys, time
from consensus_eval import api

def timed(name, f):
    def wrapper(*args, **kwargs):
        wall, cpu = time.perf_counter(), os.times()
        try:
            return f(*args, **kwargs)
        finally:
            now = os.times()
            print("PHASE", name, time.perf_counter() - wall, now.user + now.system - cpu.user - cpu.system,
                  file=sys.stderr)
    return wrapper

api.prepare, api._rebuild = timed("prepare", api.prepare), timed("rebuild", api._rebuild)
atexit.register(lambda t=os.times: print("CPU", t().user + t().system, t().children_user + t().children_system,
                                         file=sys.stderr))
from consensus_eval.cli import app
app()
"""


def phases(stderr: str, wall: float) -> str:
    """``prepare W/C  execute W/C+C  rebuild W/C`` (seconds) from the child's PHASE and CPU lines."""
    got = {m[1]: (float(m[2]), float(m[3])) for m in re.finditer(r"^PHASE (\S+) (\S+) (\S+)$", stderr, re.M)}
    main, children = (float(x) for x in re.findall(r"^CPU (\S+) (\S+)$", stderr, re.M)[-1])
    (pw, pc), (rw, rc) = got["prepare"], got["rebuild"]
    return (f"prepare {pw:.1f}/{pc:.1f}  execute {wall - pw - rw:.1f}/{main - pc - rc:.1f}+{children:.1f}  "
            f"rebuild {rw:.1f}/{rc:.1f}")


def load() -> str:
    """The 1-minute load average (the machine is shared: figures depend on it)."""
    with open("/proc/loadavg", encoding="ascii") as f:
        return f.read().split()[0]


def one_run(tree: Path, cases: Path, keep: Path | None) -> tuple[float, float, float, str, str, str]:
    """(wall s, CPU s, peak RSS MB, load before, load after, phases) of one ``score`` in a fresh process and
    folder."""
    with tempfile.TemporaryDirectory(prefix="score-bench-") as tmp:
        out = Path(tmp) / "run"
        env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        before = load()
        proc = subprocess.run(
            ["/usr/bin/time", "-v", sys.executable, "-c", CHILD, "score",
             str(cases), "--config", str(tree / "configs" / "default.yaml"), "--out", str(out)],
            cwd=tree, env=env, capture_output=True, text=True)
        after = load()
        if proc.returncode != 0:
            raise SystemExit(f"score failed in {tree}:\n{proc.stderr[-3000:]}")
        if keep is not None:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(out, keep)

    def field(name: str) -> str:
        return re.search(rf"{name}: (\S+)", proc.stderr).group(1)  # type: ignore[union-attr]

    h, m, s = ([0.0] + [float(x) for x in field(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\)").split(":")])[-3:]
    wall = h * 3600 + m * 60 + s
    cpu = float(field(r"User time \(seconds\)")) + float(field(r"System time \(seconds\)"))
    rss = int(field(r"Maximum resident set size \(kbytes\)")) / 1024
    return wall, cpu, rss, before, after, phases(proc.stderr, wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, nargs="+", default=[5000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tree", type=Path, action="append", default=None,
                    help="source tree to run (repeatable; default: this one)")
    ap.add_argument("--data", type=Path, default=Path("/tmp/score-bench"))
    ap.add_argument("--keep", type=Path, default=None, help="keep the last run's output folder here")
    args = ap.parse_args()
    trees = [t.resolve() for t in (args.tree or [ROOT])]
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} CPUs", flush=True)
    for n in args.cases:
        cases = cases_file(args.data, n)
        runs: dict[Path, list[tuple[float, float, float, str, str, str]]] = {t: [] for t in trees}
        for r in range(args.repeats):
            for tree in trees:
                res = one_run(tree, cases, args.keep)
                runs[tree].append(res)
                wall, cpu, rss, before, after, split = res
                print(f"{n:7d} cases  {tree!s:28s} run {r + 1}: {wall:7.1f} s  CPU {cpu:7.1f} s  "
                      f"peak RSS {rss:6.0f} MB  load {before} -> {after}  ({split})", flush=True)
        first: float | None = None
        for tree in trees:
            wall = statistics.median(x[0] for x in runs[tree])
            cpu = statistics.median(x[1] for x in runs[tree])
            rss = statistics.median(x[2] for x in runs[tree])
            ratio = "" if first is None else f"  x{first / wall:.2f} faster"
            print(f"{n:7d} cases  {tree!s:28s} median {wall:7.1f} s ({', '.join(f'{x[0]:.1f}' for x in runs[tree])})"
                  f"  CPU {cpu:7.1f} s  peak RSS {rss:6.0f} MB{ratio}", flush=True)
            first = first or wall
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))


if __name__ == "__main__":
    main()
