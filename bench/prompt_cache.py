"""Prompt caching on the example panel against the fake server: shared prefix, hit rate, money saved.

For each prompt layout (``before``: the templates of commit 453a882, the dimension's name in the
first sentence; ``after``: the templates in prompts/), it

1. runs ``score --dry-run``'s estimate on the 16 example cases with configs/panel.example.yaml
   (prompt tokens as sent, share of prompt tokens in the shared prefix per dimension);
2. scores the same cases with the same panel, every LLM judge pointed at the fake server with its
   prompt cache on (tests/fake_server.py: DeepSeek's 64-token blocks for the deepseek judge, OpenAI's
   128 from 1,024 for the others; a prefix is cached once a reply containing it has gone out), with the
   panel's concurrency and a lognormal latency, and reads per judge: cached tokens, hit rate, cost
   and money saved (:class:`consensus_eval.analysis.usage.JudgeUsage`).

    .venv/bin/python bench/prompt_cache.py [--latency-ms 300] [--json out.json]
    .venv/bin/python bench/prompt_cache.py --cases 1000 --layout after --latency-ms 80   # issue 16, section 7

``--cases N`` above 16 repeats the example cases under new ids (``ex-0001-...``; each keeps its
``important`` flag), so each is a distinct request whose case text providers have not seen.

Prices: deepseek and gpt from litellm's bundled price map (deepseek-reasoner 2.8e-7 / cached 2.8e-8,
gpt-4.1 2e-6 / 5e-7 per input token), qwen from the config (1.6e-6, cached at DashScope's 10%).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from consensus_eval import api, quiet_libraries  # noqa: E402
from consensus_eval.domain.config import EvalConfig  # noqa: E402
from tests.fake_server import FakeConfig, FakeServer  # noqa: E402

BEFORE_COMMIT = "453a882"
KEYS = ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "DASHSCOPE_API_KEY")


def old_prompts(into: Path) -> Path:
    """The templates as they were at BEFORE_COMMIT, written under ``into``."""
    folder = into / "medical_record"
    folder.mkdir(parents=True)
    for name in ("_base", "accuracy", "completeness", "standardization"):
        text = subprocess.run(["git", "show", f"{BEFORE_COMMIT}:prompts/medical_record/{name}.j2"], cwd=ROOT,
                              check=True, capture_output=True, text=True).stdout
        (folder / f"{name}.j2").write_text(text, encoding="utf-8")
    return into


def panel(api_base: str | None, prompts_dir: Path | None) -> EvalConfig:
    data = yaml.safe_load((ROOT / "configs" / "panel.example.yaml").read_text(encoding="utf-8"))
    if prompts_dir is not None:
        data["prompts_dir"] = str(prompts_dir)
    for j in data["judges"]:
        if j.get("kind") != "rules" and api_base:
            j["api_base"] = api_base
            j.pop("rpm", None)     # the fake server does not limit; pacing is not what is measured
    return EvalConfig.model_validate(data)


def cases_file(n: int, into: Path) -> Path:
    """The example cases, repeated under new ids up to ``n`` cases (the examples themselves if n <= 16)."""
    lines = [json.loads(x) for x in (ROOT / "examples" / "cases.jsonl").read_text(encoding="utf-8").splitlines()
             if x.strip()]
    out = [lines[i % len(lines)] | ({"id": f"ex-{i:04d}-{lines[i % len(lines)]['id']}"} if n > len(lines) else {})
           for i in range(n if n > len(lines) else len(lines))]
    path = into / f"cases-{n}.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in out), encoding="utf-8")
    return path


def measure(layout: str, prompts_dir: Path | None, latency_ms: float, out: Path, cases: Path) -> dict[str, Any]:
    estimates = api.dry_run(api.prepare(cases, panel(None, prompts_dir), check_keys=False))
    figures: dict[str, Any] = {"layout": layout, "judges": {}}
    for e in estimates:
        if e.prompt_tokens:
            figures["judges"][e.judge] = {
                "calls": e.calls, "prompt_tokens_estimated": e.prompt_tokens,
                "prefix_share": e.prefix_share, "case_prefix_share": e.case_prefix_share}
    with FakeServer(FakeConfig(seed=16, prompt_cache=True, latency_ms=latency_ms, latency_dist="lognormal",
                               max_lifetime_s=900)) as srv:
        start = time.monotonic()
        res = api.run(api.prepare(cases, panel(srv.url, prompts_dir)), out)
        figures["wall_s"] = round(time.monotonic() - start, 1)
    for name, u in res.usage.items():
        if not u.prompt_tokens:
            continue
        full = (u.cost + u.saved) if u.saved is not None else None
        figures["judges"][name].update(
            ok=u.ok, failed=u.failed, prompt_tokens=u.prompt_tokens, cached_tokens=u.cached_tokens,
            hit_rate=u.cache_hit_rate, cost=u.cost, saved=u.saved,
            saved_share=(u.saved / full) if full else None)
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency-ms", type=float, default=300.0, help="median of the fake server's latency")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--cases", type=int, default=16, help="cases (the 16 examples, repeated under new ids)")
    ap.add_argument("--layout", choices=("both", "before", "after"), default="both")
    args = ap.parse_args()
    quiet_libraries()
    for k in KEYS:
        os.environ.setdefault(k, "sk-bench-not-a-real-key-000000")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = cases_file(args.cases, Path(tmp))
        layouts = {"before": old_prompts(Path(tmp) / "before"), "after": None}
        for layout, prompts_dir in layouts.items():
            if args.layout in ("both", layout):
                results.append(measure(layout, prompts_dir, args.latency_ms, Path(tmp) / f"out-{layout}", cases))
    for r in results:
        print(f"== {r['layout']}, {args.cases} cases (wall {r['wall_s']} s)")
        for name, j in r["judges"].items():
            shares = " ".join(f"{d[:4]} {v:.0%}" for d, v in j["prefix_share"].items() if v is not None)
            print(f"  {name:9} prompt tok {j['prompt_tokens']:7d} (dry run {j['prompt_tokens_estimated']:7d})  "
                  f"prefix across cases {shares}, across dims {j['case_prefix_share']:.0%}  "
                  f"cached {j['cached_tokens']:7d} hit rate {j['hit_rate']:.1%}  cost ${j['cost']:.4f}  "
                  f"saved ${j['saved']:.4f} ({j['saved_share']:.0%} of the uncached cost)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
