"""The review app under a team: page loads at N cases, and label saves with 5 reviewers posting at once.

For each size, on ``tests/big_run.py``'s synthetic run (N cases x 4 judges), a team of 5 reviewers is added
(personal links), and `consensus-eval review` is started as a user starts it (a subprocess). Then:

- the queue page (all cases, first page) and a case page are fetched 5 times each by one reviewer: the
  median time from request to the last byte, and the page size;
- 5 reviewers post score labels at the same time, one thread each, ``--posts`` in all, every post a
  different (case, dimension) of its reviewer: the median and p95 time per post, and, afterwards, the
  labels counted in the store against the posts answered 200 (none may be lost).

``--baseline REF`` measures the package of git commit REF too, in the same run, on a fresh copy of the same
store, before the working tree's (``git archive REF consensus_eval`` into a temporary folder, the server
started from there), and prints the ratio of each figure (baseline / now).

    .venv/bin/python bench/review_bench.py --cases 2000 20000 --posts 10000 [--baseline fcbb8e5]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from consensus_eval import api  # noqa: E402
from consensus_eval.execution.store import Store  # noqa: E402
from tests.big_run import build_big_run  # noqa: E402

REVIEWERS = ["r1", "r2", "r3", "r4", "r5"]


def start(folder: Path, port: int, code: Path = ROOT) -> tuple[subprocess.Popen[str], float]:
    """`consensus-eval review` of the package in ``code`` (``python -m`` puts its folder first on the path)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "consensus_eval.cli", "review", str(folder), "--port", str(port),
                             "--lang", "en"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "COLUMNS": "300", "PYTHONUNBUFFERED": "1"}, cwd=code)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "open http://" in line:
            return proc, time.perf_counter() - t0
    raise RuntimeError("the server did not start")


def session(base: str, key: str) -> tuple[httpx.Client, str]:
    c = httpx.Client(base_url=base, timeout=120)
    c.get(f"/?key={key}", follow_redirects=True)
    csrf = re.search(r'name="csrf-token" content="([^"]+)"', c.get("/").text)
    assert csrf is not None
    return c, csrf.group(1)


def timed_get(c: httpx.Client, path: str, n: int = 5) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(n):
        t = time.perf_counter()
        r = c.get(path)
        times.append(time.perf_counter() - t)
        assert r.status_code == 200, r.status_code
        size = len(r.content)
    return statistics.median(times), size


def post_labels(base: str, keys: dict[str, str], n: int, posts: int) -> tuple[list[float], int, float]:
    """5 reviewers posting score labels at once, each on its own (case, dimension)s: (latencies, answered 200,
    wall seconds)."""
    per = posts // len(REVIEWERS)
    lat: list[float] = []
    ok = [0] * len(REVIEWERS)
    lock = threading.Lock()

    def post(i: int, reviewer: str) -> None:
        cl, token = session(base, keys[reviewer])
        mine = []
        for k in range(per):
            case = (k // 3 + i * 997) % n + 1
            dim = ("accuracy", "completeness", "standardization")[k % 3]
            t = time.perf_counter()
            r = cl.post("/api/label", json={"op": "score", "case": case, "dimension": dim, "value": (k % 20) + 0.5},
                        headers={"X-CSRF-Token": token})
            mine.append(time.perf_counter() - t)
            ok[i] += r.status_code == 200
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=post, args=(i, r)) for i, r in enumerate(REVIEWERS)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return sorted(lat), sum(ok), time.perf_counter() - t0


def one_size(n: int, posts: int, port: int, code: Path = ROOT, label: str = "now") -> dict[str, float]:
    """Every figure at ``n`` cases, for the package in ``code``; printed as one line and returned."""
    with tempfile.TemporaryDirectory(prefix="review-bench-") as tmp:
        folder = Path(tmp) / "run"
        cached = Path("/tmp/review-bench") / f"{n}x4"
        if not (cached / "results.sqlite").is_file():
            build_big_run(cached, n, 4)
        folder.mkdir()
        shutil.copy(cached / "results.sqlite", folder / "results.sqlite")
        keys = {r: api.add_reviewer(folder, r)[1] for r in REVIEWERS}
        proc, started = start(folder, port, code)
        base = f"http://127.0.0.1:{port}"
        try:
            c, _ = session(base, keys["r1"])
            queue_s, queue_b = timed_get(c, "/?scope=all")
            case_s, case_b = timed_get(c, "/case/1")
            lat, ok, wall = post_labels(base, keys, n, posts)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        with Store.open_existing(folder, read_only=True) as store:
            stored = sum(1 for lb in store.human_labels() if lb.kind == "score")
    with open("/proc/loadavg", encoding="ascii") as f:
        load = f.read().split()[0]
    median, p95 = statistics.median(lat), lat[int(0.95 * (len(lat) - 1))]
    print(f"[{label}] {n} cases x 4 judges (load {load}): server ready in {started:.1f} s; "
          f"queue page {queue_s * 1000:.0f} ms ({queue_b / 1024:.0f} KB), case page {case_s * 1000:.0f} ms "
          f"({case_b / 1024:.0f} KB); {len(lat)} posts by 5 reviewers at once in {wall:.1f} s: "
          f"median {median * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms; "
          f"answered 200: {ok}, labels in the store: {stored} (lost: {ok - stored})", flush=True)
    return {"ready_s": started, "queue_ms": queue_s * 1000, "case_ms": case_s * 1000, "save_median_ms": median * 1000,
            "save_p95_ms": p95 * 1000, "posts_wall_s": wall}


def checkout(ref: str, into: Path) -> Path:
    """The package of commit ``ref`` (``git archive``), unpacked in ``into``; the working tree is not touched."""
    archive = subprocess.run(["git", "archive", ref, "consensus_eval"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, nargs="+", default=[2000, 20000])
    ap.add_argument("--posts", type=int, default=10000)
    ap.add_argument("--port", type=int, default=8799)
    ap.add_argument("--baseline", metavar="REF", help="also measure the package of this git commit, first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="review-bench-code-") as tmp:
        old = checkout(args.baseline, Path(tmp)) if args.baseline else None
        for n in args.cases:
            if old is None:
                one_size(n, args.posts, args.port)
                continue
            before = one_size(n, args.posts, args.port, old, args.baseline)
            after = one_size(n, args.posts, args.port)
            print(f"[{args.baseline} / now] {n} cases: "
                  + ", ".join(f"{k} {before[k] / after[k]:.2f}x" for k in before if after[k] > 0), flush=True)


if __name__ == "__main__":
    main()
