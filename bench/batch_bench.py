"""Provider batch APIs on the example panel against the fake server: cost and HTTP requests, live vs batch.

The 16 example cases with configs/panel.example.yaml (deepseek-reasoner, gpt-4.1, qwen-max, rules), every
LLM judge pointed at the fake server (tests/fake_server.py; rpm limits dropped, the panel's concurrency
kept, no latency, prompt cache off so that both runs are billed the same tokens), scored twice into two
folders:

- ``live``: the panel as it is;
- ``batch``: ``batch: true`` on every judge whose provider has a batch API litellm reaches (``openai``:
  gpt-4.1; DeepSeek has none, and qwen's ``dashscope/`` provider is refused: DashScope's OpenAI-compatible
  batch endpoint would need ``openai/qwen-max`` with its api_base), collected with ``score --wait``
  (``batch_poll_s`` 0.2 s; the fake completes a batch when it is first retrieved).

Per judge: calls, cost as stored (litellm's price map for deepseek and gpt, the config's prices for qwen;
a batch call at ``batch_cost_factor`` x the live price) and the HTTP requests the server received (chat
completions, and the files/batches endpoints). Then the same for ``--cases N`` (the examples repeated
under new ids, as bench/prompt_cache.py does).

    .venv/bin/python bench/batch_bench.py [--cases 16] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from consensus_eval import api, quiet_libraries  # noqa: E402
from consensus_eval.domain.config import BATCH_PROVIDERS, EvalConfig  # noqa: E402
from consensus_eval.execution.store import Store  # noqa: E402
from tests.fake_server import FakeConfig, FakeServer  # noqa: E402

KEYS = ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "DASHSCOPE_API_KEY")


def panel(api_base: str, batch: bool) -> EvalConfig:
    data = yaml.safe_load((ROOT / "configs" / "panel.example.yaml").read_text(encoding="utf-8"))
    for j in data["judges"]:
        if j.get("kind") == "rules":
            continue
        j["api_base"] = api_base
        j.pop("rpm", None)  # the fake server does not limit; pacing is not what is measured
        provider = j["model"].split("/", 1)[0]
        if batch and provider in BATCH_PROVIDERS:
            j.update(batch=True, batch_poll_s=0.2)
    return EvalConfig.model_validate(data)


def cases_file(n: int, into: Path) -> Path:
    lines = [json.loads(x) for x in (ROOT / "examples" / "cases.jsonl").read_text(encoding="utf-8").splitlines()
             if x.strip()]
    out = [lines[i % len(lines)] | ({"id": f"ex-{i:04d}-{lines[i % len(lines)]['id']}"} if n > len(lines) else {})
           for i in range(max(n, len(lines)) if n > len(lines) else len(lines))]
    path = into / f"cases-{n}.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in out), encoding="utf-8")
    return path


def run(cases: Path, cfg: EvalConfig, out: Path, srv: FakeServer) -> dict[str, Any]:
    chat_before = Counter(e["model"] for e in srv.log if "batch" not in e)
    batch_http_before = srv.batches.http_requests
    start = time.monotonic()
    prep = api.prepare(cases, cfg)
    results = asyncio.run(api.run_async(prep, out, n_boot=0, wait=True))
    wall = time.monotonic() - start
    chat = Counter(e["model"] for e in srv.log if "batch" not in e) - chat_before
    with Store.open_existing(out, read_only=True) as store:
        calls = store.calls()
        batches = store.batches()
    judges: dict[str, Any] = {}
    for j in cfg.judges:
        if j.kind == "rules":
            continue
        mine = [c for c in calls if c.judge == j.name]
        model = j.model.split("/", 1)[1]  # type: ignore[attr-defined]
        batched = bool(getattr(j, "batch", False))
        judges[j.name] = {
            "batch": batched, "calls": len(mine), "ok": sum(c.status == "ok" for c in mine),
            "prompt_tokens": sum(c.prompt_tokens or 0 for c in mine),
            "completion_tokens": sum(c.completion_tokens or 0 for c in mine),
            "cost": sum(c.cost or 0.0 for c in mine),
            "chat_requests": chat.get(model, 0),
            "batch_api_requests": (srv.batches.http_requests - batch_http_before) if batched else 0,
            "batches": sum(b.judge == j.name for b in batches),
        }
    return {"wall_s": round(wall, 2), "pending": len(results.progress.batches) if results.progress else None,
            "judges": judges}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=16)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    quiet_libraries()
    for k in KEYS:
        os.environ.setdefault(k, "sk-bench-not-a-real-key-000000")
    report: dict[str, Any] = {"cases": args.cases}
    with tempfile.TemporaryDirectory() as tmp, FakeServer(FakeConfig(seed=11, max_lifetime_s=3600)) as srv:
        cases = cases_file(args.cases, Path(tmp))
        for mode in ("live", "batch"):
            report[mode] = run(cases, panel(srv.url + "/v1", mode == "batch"), Path(tmp) / mode, srv)
    print(f"{args.cases} cases; per judge: calls, cost $, HTTP requests (chat + batch API), live -> batch")
    total = {"live": 0.0, "batch": 0.0}
    requests = {"live": 0, "batch": 0}
    for name, live in report["live"]["judges"].items():
        b = report["batch"]["judges"][name]
        for mode, r in (("live", live), ("batch", b)):
            total[mode] += r["cost"]
            requests[mode] += r["chat_requests"] + r["batch_api_requests"]
        print(f"  {name:9s} calls {live['calls']:4d} -> {b['calls']:4d}  cost {live['cost']:.4f} -> {b['cost']:.4f}"
              f"  requests {live['chat_requests'] + live['batch_api_requests']:5d} -> "
              f"{b['chat_requests']} chat + {b['batch_api_requests']} batch API"
              + (f" ({b['batches']} batch)" if b["batch"] else ""))
    print(f"  total     cost {total['live']:.4f} -> {total['batch']:.4f} "
          f"({(total['batch'] / total['live'] - 1) * 100:+.1f}%)  requests {requests['live']} -> {requests['batch']}")
    report["total"] = {"cost": total, "requests": requests}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
