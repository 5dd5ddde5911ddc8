"""CPU time and peak memory of one rebuild of a stored run, with the code of a given source tree.

    .venv/bin/python bench/rebuild_cpu.py --build /tmp/run2k --cases 2000      # once: a synthetic store
    .venv/bin/python bench/rebuild_cpu.py TREE /tmp/run2k                         # one rebuild, fresh process

Runs ``consensus_eval.api.rebuild`` (what ``score`` does at its end) on a copy of the store with the package
of TREE (a ``git worktree`` of the commit to measure), and prints the CPU seconds of the rebuild
(``time.process_time``), its wall time and the process's peak RSS. Alternate trees, several times each: CPU
time is less disturbed than wall time by other processes on a shared machine, but not immune.
"""

from __future__ import annotations

import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    if argv[:1] == ["--build"]:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.big_run import build_big_run

        n = int(argv[argv.index("--cases") + 1]) if "--cases" in argv else 2000
        print(build_big_run(Path(argv[1]), n, 4))
        return
    tree, store = argv[0], argv[1]
    sys.path.insert(0, tree)
    from consensus_eval import api

    work = Path(tempfile.mkdtemp())
    try:
        shutil.copytree(store, work / "run")
        cpu, wall = time.process_time(), time.perf_counter()
        api.rebuild(work / "run", n_boot=50)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{tree} CPU {time.process_time() - cpu:.2f} s wall {time.perf_counter() - wall:.2f} s "
              f"peak RSS {peak:.0f} MB")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main(sys.argv[1:])
