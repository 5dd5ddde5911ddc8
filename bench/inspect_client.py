"""Inspect AI as a client of the fake provider, for bench/pacing_bench.py's ``provider`` part: runs under
Inspect's own interpreter (a separate venv: ``python -m venv /tmp/inspect && /tmp/inspect/bin/pip install
inspect-ai==0.3.285 openai``), never imported by the project.

One eval of the prompts in ``--prompts`` (JSON lines ``{"id", "messages": [{"role", "content"}]}``, the
judge prompts consensus-eval renders for the same calls) against each of ``--models`` at once (Inspect's
``openai-api`` provider, service ``fake``: ``FAKE_BASE_URL`` is the server's ``/v1``), every setting at
Inspect's defaults: ``adaptive_connections`` on (start 20, min 10, max 100 connections per model, cut on
rate-limit retries), Inspect's own retries. Prints one JSON line: the CPU seconds and wall time of the
imports and of the eval, and how many samples ended in error.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="the fake server (http://127.0.0.1:PORT)")
    p.add_argument("--prompts", required=True)
    p.add_argument("--models", required=True, help="comma-separated model names as the server knows them")
    args = p.parse_args()
    os.environ["FAKE_BASE_URL"] = args.url + "/v1"
    os.environ["FAKE_API_KEY"] = "sk-fake"
    t0, c0 = time.monotonic(), _cpu()
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser
    from inspect_ai.solver import generate

    t1, c1 = time.monotonic(), _cpu()
    samples = []
    with open(args.prompts, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            msgs = [ChatMessageSystem(content=m["content"]) if m["role"] == "system" else
                    ChatMessageUser(content=m["content"]) for m in row["messages"]]
            samples.append(Sample(id=row["id"], input=msgs))
    task = Task(dataset=MemoryDataset(samples), solver=generate())
    models = [f"openai-api/fake/{m}" for m in args.models.split(",")]
    with tempfile.TemporaryDirectory() as logs:
        results = inspect_eval(task, model=models, log_dir=logs, display="none", fail_on_error=False)
        t2, c2 = time.monotonic(), _cpu()
        errors = sum(1 for log in results for s in (log.samples or []) if s.error is not None)
    print(json.dumps({"client": "inspect", "import_cpu_s": c1 - c0, "import_wall_s": t1 - t0,
                      "run_cpu_s": c2 - c1, "run_wall_s": t2 - t1, "samples": len(samples) * len(models),
                      "errors": errors, "status": [log.status for log in results]}), flush=True)


if __name__ == "__main__":
    main()
