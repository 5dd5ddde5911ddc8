"""Shared fixtures: the bundled rubric, example cases, and panel configs pointing at mocked judges."""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from consensus_eval.domain.rubric import Rubric

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# The CLI's consoles take COLUMNS and LINES as fixed sizes when they are made (rich), at the CLI's import: a
# shell's, or the 80 x 24 an xdist worker inherits, would then outrank the COLUMNS a test gives one command. The
# tests see what a pipe sees (80 columns) unless they say otherwise.
for _size in ("COLUMNS", "LINES"):
    os.environ.pop(_size, None)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "cases.jsonl"
FAKE_KEY = "sk-test-DO-NOT-LEAK-0123456789abcdef"


@pytest.fixture
def rubric() -> Rubric:
    from consensus_eval.domain.rubric import load_rubric

    return load_rubric("medical_record")


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries wait milliseconds, not seconds, in tests."""
    import consensus_eval.judges.llm as llm

    monkeypatch.setattr(llm, "BACKOFF_BASE_S", 0.01)
    monkeypatch.setattr(llm, "BACKOFF_MAX_S", 0.2)


@pytest.fixture(autouse=True)
def cli_global_state() -> Iterator[None]:
    """What a command run in this process (typer's CliRunner) leaves behind is undone after each test: the garbage
    collector's freeze the command line asks for (consensus_eval._gc: a process that ends soon after; here the
    tests go on, and every later rebuild would freeze what it made), the signal handlers a run installs, the
    working folder and ``sys.argv``."""
    from consensus_eval import _gc

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGPROF)
    handlers = {sig: signal.getsignal(sig) for sig in handled}
    cwd, argv, frozen = os.getcwd(), list(sys.argv), gc.get_freeze_count()
    yield
    _gc.freeze_when_done(False)
    if gc.get_freeze_count() > frozen:
        gc.unfreeze()
    for sig, handler in handlers.items():
        if signal.getsignal(sig) is not handler and handler is not None:
            signal.signal(sig, handler)
    if os.getcwd() != cwd:
        os.chdir(cwd)
    sys.argv[:] = argv


@pytest.fixture(scope="module", params=["deductions", "likert", "criteria"])
def kind_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An offline run of each rubric kind (``tests.helpers.OFFLINE_RUNS``), scored once per module (50 resamples)."""
    from consensus_eval import api
    from tests.helpers import OFFLINE_RUNS

    cases, config = OFFLINE_RUNS[request.param]
    out = tmp_path_factory.mktemp(request.param) / "run"
    api.evaluate(ROOT / cases, ROOT / config, out=out, n_boot=50)
    return out


@pytest.fixture
def api_keys(monkeypatch: pytest.MonkeyPatch) -> str:
    for var in ("JUDGE_A_KEY", "JUDGE_B_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.setenv(var, FAKE_KEY)
    return FAKE_KEY


def write_config(path: Path, judges: str, **top: object) -> Path:
    """Write a config YAML with the given judges block (YAML text) and top-level settings."""
    settings = {"rubric": "medical_record", "runs": 1, "important_runs": 3, **top}
    head = "".join(f"{k}: {v}\n" for k, v in settings.items())
    path.write_text(head + "judges:\n" + judges, encoding="utf-8")
    return path


PANEL = """\
  - name: judge-a
    model: openai/fake-a
    api_base: http://judge-a.test/v1
    api_key_env: JUDGE_A_KEY
    mode: tools
    concurrency: 4
    input_cost_per_token: 0.000001
    output_cost_per_token: 0.000002
  - name: judge-b
    model: hosted_vllm/fake-b
    api_base: http://judge-b.test/v1
    api_key_env: JUDGE_B_KEY
    mode: json
    concurrency: 4
    input_cost_per_token: 0.000001
    output_cost_per_token: 0.000002
  - name: deepseek
    model: deepseek/deepseek-reasoner
    api_key_env: DEEPSEEK_API_KEY
    mode: md_json
    concurrency: 4
  - name: rules
    kind: rules
"""
