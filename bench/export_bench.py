"""``export --parquet`` of a large run: time and peak memory, read in parts (one process a core, or one process) and
read whole (what export did before it read cases in parts), on the same store, in fresh processes.

Builds (once per size, in ``--stores``) a run of N cases x J judges written straight into a store
(:func:`tests.big_run.build_big_run`), then, ``--repeats`` times, each way in turn:

- ``parts``: :func:`consensus_eval.api.export_parquet` as the command runs it (its cases in spans, one per core,
  each span read 2,000 cases at a time);
- ``one``: the same with ``CONSENSUS_EVAL_PROCESSES=1`` (every span read in the one process);
- ``whole``: the run read at once (:func:`consensus_eval.api.load_run`) and written by
  :func:`consensus_eval.output.parquet.write_parquet`; skipped with ``--no-whole`` (at 1,000,000 x 4 it needs
  about 40 GB).

``--command reliability``: instead, the reliability report alone (what ``reliability RUN --json`` writes), each way:

- ``parts``: :func:`consensus_eval.api.reliability` (a run without labels: read 2,000 cases at a time, the
  figures' columns kept);
- ``whole``: the run read at once (:func:`consensus_eval.api.load_run`), then its ``reliability``.

Each run reports its wall time, its CPU time (user + system of the process and of the processes it forked and
waited for), the peak RSS of its largest process (``wait4``'s), and the peak of the RSS of every process of its
tree summed (sampled every 0.2 s from ``/proc``); the SHA-256 of the two files, which must be the same every way.
Medians per way, and the ratio to ``whole``, at the end (the digest: of the files, or of reliability.json's bytes).

    .venv/bin/python bench/export_bench.py --cases 100000 --stores /tmp/export-stores --repeats 3
    .venv/bin/python bench/export_bench.py --cases 1000000 --stores /tmp/export-stores --repeats 1 --no-whole
    .venv/bin/python bench/export_bench.py --command reliability --cases 100000 --stores /tmp/export-stores
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
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
import sys
sys.path.insert(0, {root!r})
from consensus_eval import api
from consensus_eval.output.parquet import write_parquet
if {whole!r}:
    write_parquet(api.load_run({folder!r}, replies=False), {dest!r})
else:
    api.export_parquet({folder!r}, {dest!r})
"""


RELIABILITY = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from consensus_eval import api
from consensus_eval.domain.writable import dumps_json
report = api.load_run({folder!r}, replies=False, reuse_saved=False).reliability if {whole!r} else \
    api.reliability({folder!r})
Path({dest!r}, "reliability.json").write_text(dumps_json(report.to_json(), ensure_ascii=False, indent=2))
"""


def _tree_rss(pid: int) -> int:
    """The RSS (kB) of ``pid`` and of every process whose parent is in the tree, summed."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            with open(f"/proc/{p}/status", encoding="ascii") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
        except OSError:
            pass
    return total


def one_run(folder: Path, way: str, command: str = "export") -> dict[str, object]:
    """One ``command`` of ``folder``'s store ``way`` in a fresh process: its figures and the files' digests."""
    dest = Path(tempfile.mkdtemp(prefix="export-bench-"))
    env = dict(os.environ)
    if way == "one":
        env["CONSENSUS_EVAL_PROCESSES"] = "1"
    else:
        env.pop("CONSENSUS_EVAL_PROCESSES", None)
    code = (CHILD if command == "export" else RELIABILITY).format(root=str(ROOT), whole=way == "whole",
                                                                  folder=str(folder), dest=str(dest))
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    peak_tree = 0
    while True:   # reaped here, with the rusage of this process alone (and of the processes it waited for)
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak_tree = max(peak_tree, _tree_rss(proc.pid))
        time.sleep(0.2)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"export {way} of {folder} failed (exit {os.waitstatus_to_exitcode(status)})")
    digests = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16]
               for p in sorted([*dest.glob("*.parquet"), *dest.glob("*.json")])}
    shutil.rmtree(dest)
    return {"way": way, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_mb": usage.ru_maxrss / 1024,
            "tree_mb": peak_tree / 1024, "digests": digests}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, nargs="+", default=[20000])
    ap.add_argument("--judges", type=int, default=4)
    ap.add_argument("--stores", type=Path, default=Path(tempfile.gettempdir()) / "export-bench-stores")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-whole", action="store_true", help="leave out the whole-run read (too large for memory)")
    ap.add_argument("--command", choices=("export", "reliability"), default="export")
    ap.add_argument("--ways", nargs="+", choices=("parts", "one", "whole"), help="only these ways")
    args = ap.parse_args()
    ways = ["parts"] + (["one"] if args.command == "export" else []) + ([] if args.no_whole else ["whole"])
    ways = [w for w in ways if w in (args.ways or ways)]
    for n in args.cases:
        folder = args.stores / f"{n}x{args.judges}"
        if not (folder / "results.sqlite").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            t = time.perf_counter()
            build_big_run(folder, n, args.judges)
            print(f"built {folder} in {time.perf_counter() - t:.0f} s", flush=True)
        runs: list[dict[str, object]] = []
        for r in range(args.repeats):
            for way in ways:
                load = os.getloadavg()[0]
                res = one_run(folder, way, args.command)
                res["load"] = load
                runs.append(res)
                print(json.dumps({"cases": n, "round": r + 1, **res}), flush=True)
        if len({json.dumps(x["digests"], sort_keys=True) for x in runs}) != 1:
            raise SystemExit(f"{n} x {args.judges}: the files differ between ways: {runs}")
        med = {w: {k: statistics.median(float(x[k]) for x in runs if x["way"] == w)  # type: ignore[arg-type]
                   for k in ("wall", "cpu", "peak_mb", "tree_mb")} for w in ways}
        for w in ways:
            m = med[w]
            ratio = f", x{med['whole']['wall'] / m['wall']:.2f} against whole" if "whole" in med else ""
            print(f"{n} x {args.judges} {w}: median wall {m['wall']:.1f} s, CPU {m['cpu']:.1f} s, largest process "
                  f"{m['peak_mb']:.0f} MB, all processes {m['tree_mb']:.0f} MB{ratio}", flush=True)


if __name__ == "__main__":
    main()
