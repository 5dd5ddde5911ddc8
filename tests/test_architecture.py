"""The package's shape: one-way layers without import cycles, a public API, judge kinds as plugins,
and an import that changes nothing global."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from tests.conftest import EXAMPLES, ROOT, write_config


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), i.e. every import cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle_anywhere_in_the_package() -> None:
    """Function-local imports included: grimp reads every import statement of every module."""
    graph = grimp.build_graph("consensus_eval", include_external_packages=False)
    assert len(graph.modules) > 40
    assert _cycles(graph) == []


def test_no_two_modules_share_a_name() -> None:
    """Modules are named for what they hold: two modules of one name in different layers (``results.py`` the run as
    stored and the typed results, ``batch.py`` the provider's format and a run's batches) meant different things.
    ``__init__.py`` and ``base.py`` (a package's protocol) may repeat."""
    by_name: dict[str, list[str]] = {}
    for f in sorted((ROOT / "consensus_eval").rglob("*.py")):
        by_name.setdefault(f.name, []).append(str(f.relative_to(ROOT)))
    shared = {n: fs for n, fs in by_name.items() if len(fs) > 1 and n not in ("__init__.py", "base.py")}
    assert not shared, f"rename one of each so the name says what it holds: {shared}"


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "cyclic_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from cyclic_pkg import b\n")
    (pkg / "b.py").write_text("import cyclic_pkg.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _cycles(grimp.build_graph("cyclic_pkg")) == [["cyclic_pkg.a", "cyclic_pkg.b"]]


def test_the_layering_contract_holds() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed in this environment (CI runs it in its static checks)")
    res = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout


def test_importing_the_package_changes_nothing_global() -> None:
    """No environment variable, no logger level, no library setting (the CLI module included: it
    changes them only when a command runs); the API is there, lazily."""
    code = """
import json, logging, os, sys
import litellm, instructor  # the libraries set their own loggers up at import: the baseline includes that
env, loggers = dict(os.environ), {n: logging.getLogger(n).level for n in ("LiteLLM", "httpx", "instructor")}
import consensus_eval, consensus_eval.api, consensus_eval.judges.llm, consensus_eval.cli
from consensus_eval import evaluate, load_run, Results, register_judge
print(json.dumps({"env": dict(os.environ) == env,
                  "loggers": {n: logging.getLogger(n).level for n in loggers} == loggers,
                  "litellm_quiet": litellm.suppress_debug_info,
                  "api": callable(evaluate) and callable(load_run)}))
"""
    env = {k: v for k, v in __import__("os").environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # litellm itself must not fetch its price map in a test
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out == {"env": True, "loggers": True, "litellm_quiet": False, "api": True}


def test_all_names_exactly_the_lazy_exports() -> None:
    """``__all__`` is spelled out for linters and type checkers; it must not drift from ``_EXPORTS``."""
    import consensus_eval

    assert len(consensus_eval.__all__) == len(set(consensus_eval.__all__))
    assert set(consensus_eval.__all__) == {"__version__", *consensus_eval._EXPORTS}


def test_every_public_name_resolves_to_what_it_names_whatever_was_imported_first() -> None:
    """A subpackage must not shadow an exported name (``consensus_eval.run`` was a subpackage once,
    and importing it replaced the exported ``run`` function)."""
    code = """
import importlib, pkgutil, json
import consensus_eval
for m in pkgutil.walk_packages(consensus_eval.__path__, "consensus_eval."):
    if not m.name.endswith("cli"):
        importlib.import_module(m.name)
bad = [n for n, mod in consensus_eval._EXPORTS.items()
       if getattr(consensus_eval, n) is not getattr(importlib.import_module(mod), n)]
print(json.dumps(bad))
"""
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == []


def test_the_metrics_do_not_load_the_judge_layer() -> None:
    code = ("import sys, consensus_eval.metrics.tcm, consensus_eval.metrics.text2dt;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('litellm', 'instructor', 'openai')))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stdout + res.stderr


# --------------------------------------------------------------------------- a judge kind from outside


def test_a_new_judge_kind_is_one_module_and_one_registration(tmp_path: Path) -> None:
    """tests/plugins/echo_judge.py adds ``kind: echo``; a config uses it like any built-in kind."""
    import tests.plugins.echo_judge  # noqa: F401 - registers the kind
    from consensus_eval import evaluate

    cfg = write_config(tmp_path / "echo.yaml", "  - name: echo\n    kind: echo\n    penalty_type: colloquial\n"
                                               "  - name: rules\n    kind: rules\n")
    results = evaluate(EXAMPLES, cfg, out=tmp_path / "out", n_boot=0)
    assert results.judges == ["echo", "rules"]
    assert results.progress is not None and results.progress.failed == 0
    echo = [r for r in results.records if r.judge == "echo"]
    assert len(echo) == len(results.cases) * 3 and all(r.status == "ok" for r in echo)
    # it deducted one colloquial-term occurrence (standardization.terminology, 1 point) on every case
    std = [results.scores[r.request_hash] for r in echo if r.dimension == "standardization"]
    assert {s.score for s in std} == {24.0}
    stored = json.loads((tmp_path / "out" / "consensus.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert set(stored["judges"]) == {"echo", "rules"}


def test_an_unknown_kind_is_named_with_the_known_ones(tmp_path: Path) -> None:
    from consensus_eval import InputError, load_config

    cfg = write_config(tmp_path / "bad.yaml", "  - name: x\n    kind: nosuchkind\n")
    with pytest.raises(InputError, match=r"judges\[0 x\].*unknown judge kind 'nosuchkind'; known kinds: .*llm.*rules"):
        load_config(cfg)


def test_an_aggregator_is_registered_by_name(tmp_path: Path) -> None:
    from consensus_eval import evaluate, register_aggregator

    register_aggregator("max_of", lambda values, trim: max(values))
    cfg = write_config(tmp_path / "agg.yaml", "  - name: rules\n    kind: rules\n",
                       consensus="{aggregate: max_of}")
    results = evaluate(EXAMPLES, cfg, out=tmp_path / "out", n_boot=0)
    assert results.config.consensus.aggregate == "max_of" and results.consensus[0].status == "ok"


def test_the_api_refuses_to_block_a_running_loop_and_its_async_twin_works(tmp_path: Path) -> None:
    import asyncio

    from consensus_eval import evaluate, evaluate_async

    async def inside() -> int:
        with pytest.raises(RuntimeError, match="evaluate_async"):
            evaluate(EXAMPLES, out=tmp_path / "a")
        results = await evaluate_async(EXAMPLES, out=tmp_path / "b", n_boot=0)
        return len(results.consensus)

    assert asyncio.run(inside()) == 16


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python API example of docs/api.md, as written, from the repository root."""
    doc = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    block = doc.split("```python", 1)[1].split("```", 1)[0]
    work = tmp_path / "w"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(work)
    namespace: dict[str, object] = {}
    exec(compile(block, "docs/api.md", "exec"), namespace)  # noqa: S102 - the documented example
    assert (work / "out" / "example" / "report.html").is_file()


def _installed_plugin(site: Path, module: str, source: str, group: str = "consensus_eval.judges") -> None:
    """A distribution as pip would install it: the module, and a dist-info with its entry point."""
    (site / f"{module}.py").write_text(source, encoding="utf-8")
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{group}]\n{module} = {module}\n", encoding="utf-8")


_PLUGIN_RUN = """
import json, sys
from consensus_eval import evaluate
from tests.conftest import write_config
from pathlib import Path
tmp = Path(sys.argv[1])
cfg = write_config(tmp / "c.yaml", "  - name: mine\\n    kind: {kind}\\n")
try:
    r = evaluate("examples/cases.jsonl", cfg, out=tmp / "out", n_boot=0)
    print(json.dumps({{"judges": r.judges, "ok": r.usage["mine"].ok}}))
except Exception as e:
    print(json.dumps({{"error": type(e).__name__, "message": str(e)}}))
"""


def test_an_installed_package_adds_a_judge_kind_through_its_entry_point(tmp_path: Path) -> None:
    """No import of the plugin anywhere: the config names the kind, the entry point is found."""
    site = tmp_path / "site"
    site.mkdir()
    echo = (ROOT / "tests" / "plugins" / "echo_judge.py").read_text(encoding="utf-8")
    _installed_plugin(site, "ce_echo_plugin", echo.replace('"echo"', '"echo2"').replace("echo-1", "echo2-1"))
    env = {**__import__("os").environ, "PYTHONPATH": f"{site}:{ROOT}", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    res = subprocess.run([sys.executable, "-c", _PLUGIN_RUN.format(kind="echo2"), str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {"judges": ["mine"], "ok": 48}


def test_a_broken_plugin_is_named_not_skipped(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _installed_plugin(site, "ce_broken_plugin", "raise RuntimeError('half-installed')\n")
    env = {**__import__("os").environ, "PYTHONPATH": f"{site}:{ROOT}", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    res = subprocess.run([sys.executable, "-c", _PLUGIN_RUN.format(kind="nosuch"), str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["error"] == "InputError"
    assert "plugin 'ce_broken_plugin'" in out["message"] and "half-installed" in out["message"]
