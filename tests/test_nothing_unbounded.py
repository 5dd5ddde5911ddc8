"""docs/limits.md: a 10 MB quote, a 1,000,000-character record and a template loop each finish or are
refused within 60 s of CPU and 1 GB. Each runs as a process of its own; its CPU time and peak memory are those
the system accounted to it (os.wait4), not a wall-clock deadline (a generous liveness bound only catches a true
hang, and says so)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bad_input_harness import EXAMPLES, PROMPTS, scored_run_in
from tests.helpers import cli_command
from tests.hostile_corpus import ten_mb_quote

ROOT = Path(__file__).resolve().parents[1]
#: what each command may use (docs/limits.md)
CPU_S, MEMORY = 60.0, 1024**3
#: a process still running after this long is hung, whatever the load (a liveness bound, not a measure)
HUNG_S = 900


#: runs ARGV[2:] as a child of its own and writes its exit code, CPU seconds and peak resident bytes to ARGV[1].
#: The measured command is a grandchild of the test: Linux carries a process's peak RSS over fork and exec, so
#: a direct child would report the test process's own peak; this small process's is what it inherits instead.
_MEASURE = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump([os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024], f)
"""


def run_measured(*args: str) -> tuple[int, str, float, int]:
    """(exit code, output, CPU seconds, peak resident bytes) of `consensus-eval ARGS` in a process of its own, as
    the system accounted them to that process (os.wait4)."""
    import tempfile

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    cmd = cli_command()
    if len(cmd) == 1:
        cmd = [sys.executable, *cmd]   # the script runs under this interpreter (execv needs a path to run)
    with tempfile.TemporaryDirectory() as tmp:
        figures = Path(tmp) / "usage.json"
        try:
            res = subprocess.run([sys.executable, "-c", _MEASURE, str(figures), *cmd, *args], cwd=ROOT, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=HUNG_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running after {HUNG_S} s: hung")
        code, cpu, peak = json.loads(figures.read_text(encoding="utf-8"))
    return code, res.stdout, cpu, peak


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scored_run_in(tmp_path_factory.mktemp("unbounded"))


def test_a_10_mb_quote_in_a_judges_reply_is_grounded_within_bounds(scored: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(scored, run)
    ten_mb_quote(tmp_path)   # the same reply the hostile corpus's entry edits
    code, out, cpu, peak = run_measured("score", str(tmp_path / "cases.jsonl"), "--out", str(run))
    assert code == 0, out   # nothing called (all stored), every output rebuilt, the quotes grounded
    assert cpu < CPU_S and peak < MEMORY, (cpu, peak)
    found = [json.loads(line) for line in (run / "judgments.jsonl").read_text(encoding="utf-8").splitlines()]
    kinds = [d["grounding"]["kind"] for rec in found for d in rec["deductions"] if len(d["evidence"]) > 1_000_000]
    assert kinds == ["not_found", "not_found"]   # too long to be a quote of the case: not searched


def test_a_million_character_record_finishes_or_is_refused_within_bounds(tmp_path: Path) -> None:
    case = json.loads(EXAMPLES.read_text(encoding="utf-8").splitlines()[0])
    for n, want in ((999_000, 0), (1_000_000, 3), (5_000_000, 3)):
        case.update(id=f"big-{n}", record=(case["record"] * (n // len(case["record"]) + 1))[:n])
        cases = tmp_path / f"c{n}.jsonl"
        cases.write_text(json.dumps(case, ensure_ascii=False) + "\n", encoding="utf-8")
        code, out, cpu, peak = run_measured("score", str(cases), "--out", str(tmp_path / f"o{n}"))
        assert code == want, out   # 3: over the rules judge's 1,000,000 characters, that call failed (not sent)
        assert cpu < CPU_S and peak < MEMORY, (n, cpu, peak)


def test_a_template_loop_is_refused_within_bounds(tmp_path: Path) -> None:
    shutil.copytree(PROMPTS, tmp_path / "prompts")
    (tmp_path / "prompts" / "medical_record" / "accuracy.j2").write_text(
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ i * j }}{% endfor %}{% endfor %}"
        "{{ message_break }}{{ 'x' * 2000000000 }}", encoding="utf-8")
    (tmp_path / "c.yaml").write_text("judges:\n  - name: gpt\n    model: openai/gpt-4.1\n"
                                     f"prompts_dir: {tmp_path / 'prompts'}\n", encoding="utf-8")
    (tmp_path / "cases.jsonl").write_text(EXAMPLES.read_text(encoding="utf-8").splitlines()[0] + "\n",
                                          encoding="utf-8")
    code, out, cpu, peak = run_measured("score", str(tmp_path / "cases.jsonl"), "-c", str(tmp_path / "c.yaml"),
                                        "--dry-run")
    assert code == 2, out
    assert "accuracy.j2: line 1" in out and "loop steps" in out
    assert cpu < CPU_S and peak < MEMORY, (cpu, peak)


def test_a_bootstrap_too_large_to_hold_is_computed_a_chunk_at_a_time(tmp_path: Path) -> None:
    """`reliability --ratings` of 25,000 units x 2 raters with 20,000 resamples: the resamples x units weights
    would be 4 GB held whole (100,000 resamples: 18.6 GiB); computed a chunk at a time, under 1 GB."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.normal(size=25_000)
    rows = ["unit,rater,value"] + [f"u{i},{r},{v:.4f}" for i, x in enumerate(a)
                                   for r, v in (("a", x), ("b", x + rng.normal()))]
    (tmp_path / "r.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, out, cpu, peak = run_measured("reliability", "--ratings", str(tmp_path / "r.csv"), "--bootstrap", "20000")
    assert code == 0 and "95% CI" in out, out
    assert cpu < CPU_S and peak < MEMORY, (cpu, peak)


def test_a_providers_negative_or_odd_token_counts_count_zero() -> None:
    """Negative token counts from a provider were once stored as they came (and made negative costs)."""
    from types import SimpleNamespace

    from consensus_eval.judges.llm import cached_tokens, token_count

    assert [token_count(v) for v in (12, 0, -5, 3.0, 2.5, float("nan"), float("-inf"), "7", None, True)] == [
        12, 0, 0, 3, 0, 0, 0, 0, 0, 0]
    usage = SimpleNamespace(prompt_tokens_details=SimpleNamespace(cached_tokens=-40))
    assert cached_tokens(usage) == 0
