"""`consensus-eval review` without the `review` extra (starlette, uvicorn): exit 2 naming the extra.

Each case runs the CLI in a fresh interpreter where the missing package is made unimportable the way
Python itself allows (``sys.modules[name] = None``), so the package's own import statements are the ones
that fail; nothing of ours is patched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SCRIPT = """
import sys
sys.modules[sys.argv[1]] = None
from consensus_eval.cli import app
app(["review", sys.argv[2]], prog_name="consensus-eval")
"""


def _review_without(module: str, run_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, module, str(run_dir)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("module", ["starlette", "uvicorn"])
def test_review_without_the_extra_names_it(module: str, tmp_path: Path) -> None:
    res = _review_without(module, tmp_path)
    assert res.returncode == 2, res.stderr
    assert f"error: `review` needs {module}, which is not installed: pip install 'consensus-eval[review]'" \
        in " ".join(res.stderr.split())
    assert "Traceback" not in res.stderr


def test_another_missing_module_is_not_blamed_on_the_extra(tmp_path: Path) -> None:
    res = _review_without("jinja2", tmp_path)  # the app's templates: a broken install, not a missing extra
    assert res.returncode == 1
    assert "No module named 'jinja2'" in res.stderr or "import of jinja2 halted" in res.stderr
    assert "consensus-eval[review]" not in res.stderr


def test_the_loopback_check_needs_no_web_stack() -> None:
    code = ("import sys; sys.modules['starlette'] = sys.modules['uvicorn'] = None\n"
            "from consensus_eval.domain.hosts import is_loopback\n"
            "print([is_loopback(h) for h in ('127.0.0.1', '[::1]', 'localhost', '0.0.0.0', 'example.org')])")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.stdout.strip() == "[True, True, True, False, False]", res.stderr
