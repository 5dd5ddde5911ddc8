"""Every command in the README and docs/ (docs/design/ too) is executed here, as written.

The commands are read out of the docs' fenced blocks (tests/docs_runner.py says what counts), so a command
added to a doc is run by this module the next time it runs; one that cannot be run here must be listed in
``NOT_RUN`` with the reason, or in ``ELSEWHERE`` with the test that runs it, or this module fails.

How each kind of command runs:

- ``consensus-eval ...``: the command line's app with the doc's arguments, in this process (starting a process
  imports litellm: seconds a command on this machine), in a work folder that looks like the repository
  (``examples/`` and ``prompts/`` linked, ``configs/`` copied); the README's first command runs as typed, through
  the installed entry point ``.venv/bin/consensus-eval`` in a process of its own. A block's commands run in order
  in one folder, later ones reading what earlier ones wrote. Its exit code is the doc's (``(exit N)`` in the output
  it shows, else 0), the files the docs say it writes appear, and every output line the doc shows is printed.
- a command of an LLM panel (``configs/*.example.yaml``, ``panel.yaml``): the config in the work folder is the
  shipped one with each LLM judge's ``api_base`` set to the local fake server (tests/fake_server.py), its ``rpm``
  and prices left out (the fake server has none); the model, mode and ``api_key_env`` are the doc's, and the
  keys those name are set to a fake key. ``export ...`` lines are checked to name exactly those keys.
- a synopsis of the README's commands table (``audit DIR [--export SHEET.csv]``): each placeholder is a real
  file of the table ``PLACEHOLDERS``; every optional part is given, and each other choice (``--lang zh|en``) is
  run too, each in a fresh copy of the work folder.
- ``review``: started on 127.0.0.1 with a free port, its page fetched, stopped with SIGINT (Ctrl-C).
- ``pip install X``: X names this project and extras pyproject.toml declares (nothing is installed).

Two scored runs are shared by the module (a module-scoped fixture runs the doc commands that make them):
the README's first command (out/example) and docs/validity.md's two-systems run (out/two-systems).
"""

from __future__ import annotations

import contextlib
import csv
import gc
import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import tomllib
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from consensus_eval.domain.calibration.suite import SuiteCase
from tests.docs_runner import Block, DocCommand, extract, output_pattern, strip_comment, variants
from tests.fake_server import FakeConfig, FakeServer

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", *(p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "docs").rglob("*.md"))))
BLOCKS = [b for doc in DOCS for b in extract(ROOT / doc, doc)]
COMMANDS = [c for b in BLOCKS for c in b.commands]
CLI = Path(sys.executable).with_name("consensus-eval")
CLI_NAMES = ("consensus-eval", ".venv/bin/consensus-eval")
FAKE_KEY = "sk-test-docs-0123456789abcdef"
TIMEOUT_S = 300

#: The README's placeholders and the files or values they stand for here (paths in the work folder).
PLACEHOLDERS: dict[str, str] = {
    "CASES.jsonl": "examples/cases_two_systems.jsonl",
    "CONFIG.yaml": "configs/default.yaml",           # the offline default (the table's commands run offline)
    "DIR": "out/two-systems",                        # the shared run (docs/validity.md), 32 cases, two systems
    "DIR_A": "out/two-systems",
    "DIR_B": "out/two-systems-again",                # made: the same cases and config again (a copy of DIR)
    "DIR_0": "out/shard-0",                          # made: shards 0/2 and 1/2 of DIR's cases (score --shard)
    "DIR_1": "out/shard-1",
    "MERGED": "out/merged",
    "PARQUET_DIR": "out/parquet",
    "SHEET.csv": "out/two-systems/sheet.csv",        # made when read: the audit's sheet of DIR, filled in
    "SPOT.csv": "out/spot.csv",
    "RATINGS.csv": "ratings.csv",                    # made: unit,rater,value, 5 units x 3 raters, levels 1-5
    "N": "4",
    "S": "7",
    "A": "scribe-a",                                 # the two systems of examples/cases_two_systems.jsonl
    "B": "scribe-b",
    "NAME": "dr_li",
    "SUITE.jsonl": "suite.jsonl",                    # made: 6 cases of the built-in suite (2 clean)
    "MINE.jsonl": "mine.jsonl",                      # made: 3 clean records (built-in base records)
    "PRED.json": "pred.json",                        # made: two Text2DT trees, one of them wrong
    "GOLD.json": "gold.json",
    "TASK": "face",
    "PRED.jsonl": "examples/tcm/face_pred.jsonl",
    "GOLD.jsonl": "examples/tcm/face_gold.jsonl",
}
#: A word that is a placeholder: capitals, digits and _, with an optional file extension.
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(\.[a-z]+)?$")
#: Values in a doc the test changes: `review` listens on a free port, never on 8765 (another process on the
#: machine may hold it); a `review` command without --port gets one (its doc output names the port too).
DEFAULT_PORT = "8765"

#: Documented commands not executed here, with the reason.
NOT_RUN: dict[str, str] = {
    "python3 -m venv .venv": "creates the virtualenv these tests already run in",
    ".venv/bin/python -m pytest -q -n 2": "the whole test suite, this module included",
    **dict.fromkeys(("consensus-eval reliability DIR --export-errors ERRORS.csv",
                     'consensus-eval compare DIR_A DIR_B --against-clinicians [--fail-if "icc.total < -0.05"]'),
                    "needs clinicians' labels on a spot check: docs/qc-loop.md's walk runs both on such a run"),
    **dict.fromkeys(("jobid=$(sbatch --parsable score-shards.sbatch)",
                     'sbatch --dependency=afterok:"$jobid" merge-shards.sbatch'),
                    "submits to a Slurm cluster: the scripts it submits are run by test_the_scale_recipes_run_as_"
                    "the_schedulers_run_them, with the variables Slurm sets"),
    **dict.fromkeys(("kubectl apply -f score-shards.yaml",
                     "kubectl wait --for=condition=complete job/score-shards --timeout=24h",
                     "kubectl apply -f merge-shards.yaml"),
                    "talks to a Kubernetes cluster: the manifests' commands are run by test_the_scale_recipes_run_"
                    "as_the_schedulers_run_them, with the variable an Indexed Job sets"),
}
#: Documented commands another test runs (the test checks that the test named is still there).
ELSEWHERE: dict[str, str] = {
    "consensus-eval score examples/pdqi9/cases.jsonl --config configs/pdqi9.example.yaml --dry-run":
        "tests/test_kinds_content.py::test_each_documented_command_runs_as_a_dry_run",
    "consensus-eval score examples/criteria/cases.jsonl --config configs/criteria.example.yaml --dry-run":
        "tests/test_kinds_content.py::test_each_documented_command_runs_as_a_dry_run",
    **dict.fromkeys((
        'consensus-eval score examples/cases.jsonl --config configs/panel.example.yaml --shard '
        '"$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT" --out "runs/shard-$SLURM_ARRAY_TASK_ID"',
        "consensus-eval merge runs/shard-* --out runs/merged"),
        "tests/test_docs_commands.py::test_the_scale_recipes_run_as_the_schedulers_run_them"),
}
#: The doc commands the module-scoped fixture runs once (the runs other commands read).
SHARED = (".venv/bin/consensus-eval score examples/cases.jsonl --config configs/offline.yaml --out out/example",
          "consensus-eval score examples/cases_two_systems.jsonl --out out/two-systems")
#: What a scored run's folder holds (README, "Outputs").
RUN_FILES = ("results.sqlite", "judgments.jsonl", "consensus.csv", "consensus.jsonl", "reliability.json",
             "report.md", "report.html")


# --------------------------------------------------------------------------- the work folder


@dataclass
class Workspace:
    """The module's work folder (copied for each block) and the fake server its LLM configs point at."""

    base: Path
    server_url: str
    env: dict[str, str]
    shared: dict[str, Ran] = field(default_factory=dict)

    def copy(self, dst: Path) -> Path:
        shutil.copytree(self.base, dst, symlinks=True)
        return dst


def _llm_judges(cfg: dict[str, object]) -> list[dict[str, object]]:
    judges = cfg.get("judges") or []
    assert isinstance(judges, list)
    return [j for j in judges if isinstance(j, dict) and j.get("kind", "llm") != "rules" and "model" in j]


def _fake_server_config(src: Path, url: str) -> str | None:
    """The config at ``src`` with its LLM judges pointed at the fake server (None: no LLM judge)."""
    cfg = yaml.safe_load(src.read_text(encoding="utf-8"))
    judges = _llm_judges(cfg)
    if not judges:
        return None
    for j in judges:
        j["api_base"] = f"{url}/v1"
        for key in ("rpm", "tpm", "input_cost_per_token", "output_cost_per_token"):
            j.pop(key, None)
    return str(yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False))


def _key_names() -> set[str]:
    """Every api_key_env of the shipped configs' LLM judges."""
    names = set()
    for p in (ROOT / "configs").glob("*.yaml"):
        for j in _llm_judges(yaml.safe_load(p.read_text(encoding="utf-8"))):
            if j.get("api_key_env"):
                names.add(str(j["api_key_env"]))
    return names


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    base = tmp_path_factory.mktemp("docs") / "w"
    base.mkdir()
    for name in ("examples", "prompts"):
        (base / name).symlink_to(ROOT / name)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "200", "NO_COLOR": "1",
           "PYTHONUNBUFFERED": "1", **dict.fromkeys(sorted(_key_names()), FAKE_KEY)}
    with FakeServer(FakeConfig(seed=26, max_lifetime_s=900.0)) as srv:
        configs = base / "configs"
        configs.mkdir()
        for src in sorted((ROOT / "configs").iterdir()):
            text = _fake_server_config(src, srv.url) if src.suffix == ".yaml" else None
            if text is None:
                (configs / src.name).symlink_to(src)
            else:
                (configs / src.name).write_text(text, encoding="utf-8")
        ws = Workspace(base, srv.url, env)
        found = {c.text for c in COMMANDS if c.text in SHARED}
        assert found == set(SHARED), f"the docs no longer have the shared runs' commands: {set(SHARED) - found}"
        for text in SHARED:
            args = shlex.split(text)[1:]
            if text.startswith(".venv/bin/"):  # the README's first command: the installed entry point, as typed
                done = subprocess.run([str(CLI), *args], cwd=base, env=env, text=True, capture_output=True,
                                      timeout=TIMEOUT_S, check=False)
                ws.shared[text] = Ran(done.returncode, done.stdout, done.stdout + done.stderr)
            else:
                ws.shared[text] = run_cli(args, base, env)
        yield ws


# --------------------------------------------------------------------------- files the docs assume


@dataclass(frozen=True, slots=True)
class Ran:
    """How a command ended: its exit code, its stdout, and stdout and stderr together."""

    code: int
    stdout: str
    output: str


def run_cli(args: list[str], work: Path, env: dict[str, str]) -> Ran:
    """``consensus-eval ARGS`` in ``work``, in this process (a process start imports litellm: seconds each); the
    environment is ``env`` for the call. The collector's freeze the command line asks for is undone after."""
    from typer.testing import CliRunner

    from consensus_eval._gc import freeze_when_done
    from consensus_eval.cli import app

    with contextlib.chdir(work):
        res = CliRunner().invoke(app, args, env=env)
    freeze_when_done(False)
    gc.unfreeze()
    output = res.output
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        output += "".join(traceback.format_exception(res.exception))
    return Ran(res.exit_code, res.stdout, output)


def fill_sheet(sheet: Path, filled: Path) -> tuple[int, int]:
    """What a reviewer does with the audit's sheet: a score one below the panel's on every score row (on a blind
    spot-check row, which shows no panel score, 1 to 4 below the dimension's maximum, in turn), a verdict
    on every deduction (agree, disagree, unsure in turn); saved by Excel as GBK with CRLF (docs/review.md). Written
    as GB18030, which is GBK's bytes for every character GBK has (a record's "kg/m²" is not one of them).
    Returns (scores, verdicts) written."""
    rows = list(csv.DictReader(io.StringIO(sheet.read_text(encoding="utf-8-sig"))))
    assert rows, f"{sheet} has no rows"
    scores = verdicts = 0
    for i, row in enumerate(rows):
        if row["row"] == "score" and row["panel_score"]:
            row["human_score"] = str(max(0, round(float(row["panel_score"])) - 1))
            scores += 1
        elif row["row"] == "score" and row.get("sample") == "spot_check" and row["max"]:   # blind: no panel score
            row["human_score"] = str(max(0, round(float(row["max"])) - 1 - i % 4))
            scores += 1
        elif row["row"] == "deduction":
            row["human_verdict"] = ("agree", "disagree", "unsure")[verdicts % 3]
            verdicts += 1
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    filled.write_bytes(buf.getvalue().encode("gb18030"))
    return scores, verdicts


def _make_sheet(path: Path, ws: Workspace) -> None:
    """The filled-in sheet of the run in the sheet's folder: its `sheet.csv` if exported, else `audit --top 3`."""
    exported = path.parent / "sheet.csv"
    if not exported.exists():
        res = run_cli(["audit", ".", "--top", "3", "--export", "sheet.csv"], path.parent, ws.env)
        assert res.code == 0, res.output
    fill_sheet(exported, path)


def _make_verdicts(path: Path, ws: Workspace) -> None:
    """docs/qc-loop.md's second round: the sheet `verdicts.csv` beside it filled in (:func:`fill_sheet`), plus a
    deduction the judges missed (`row = added`: a value_error on the first case's accuracy, quoting its record)."""
    exported = path.parent / "verdicts.csv"
    fill_sheet(exported, path)
    text = path.read_bytes().decode("gb18030")
    rows = list(csv.DictReader(io.StringIO(text)))
    first = next(r for r in rows if r["row"] == "deduction")
    record = next(r["record"] for r in rows if r["case_id"] == first["case_id"] and r.get("record"))
    quote = record.split("\n")[0][:12]
    rows.append({**dict.fromkeys(rows[0], ""), "row": "added", "case_id": first["case_id"], "dimension": "accuracy",
                 "type": "value_error", "evidence": quote, "human_comment": "数值与对话不符"})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_bytes(buf.getvalue().encode("gb18030"))


def _make_v2(path: Path, ws: Workspace) -> None:
    """docs/qc-loop.md's prompt v2: the prompts with one line naming value_error, and the offline config using
    them (`configs/qc-v2.yaml`, `prompts-v2/`)."""
    work = path.parents[1]
    shutil.copytree(ROOT / "prompts", work / "prompts-v2")
    accuracy = work / "prompts-v2" / "medical_record" / "accuracy.j2"
    marker = "【准确性检查要点】\n"
    text = accuracy.read_text(encoding="utf-8")
    assert marker in text
    accuracy.write_text(text.replace(marker, marker + "- 检验数值与对话不一致时记 value_error，每处一次。\n"),
                        encoding="utf-8")
    config = (work / "configs" / "offline.yaml").read_text(encoding="utf-8")
    path.write_text(config + "prompts_dir: prompts-v2\n", encoding="utf-8")


def _make_ratings(path: Path, ws: Workspace) -> None:
    rows = ["unit,rater,value"] + [f"u{u},r{r},{1 + (u + (r == 2) * (u % 2)) % 5}" for u in range(5)
                                   for r in range(3)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def _suite_cases() -> tuple[SuiteCase, ...]:
    from consensus_eval.domain.calibration.generator import builtin_suite

    return builtin_suite(15)


def _make_suite(path: Path, ws: Workspace) -> None:
    """A suite file of your own (--suite FILE): two clean controls and four planted cases of the built-in suite."""
    cases = _suite_cases()
    picked = [c for c in cases if c.clean][:2] + [c for c in cases if not c.clean][:4]
    path.write_text("".join(json.dumps(c.to_line(), ensure_ascii=False) + "\n" for c in picked), encoding="utf-8")


def _make_clean_records(path: Path, ws: Workspace) -> None:
    """Three records a clinician checked as clean: base records of the built-in suite, as a cases file."""
    clean = [c for c in _suite_cases() if c.clean and c.case.id.endswith("~clean")]
    lines = [json.dumps(c.case.model_dump(mode="json", exclude_defaults=True), ensure_ascii=False)
             for c in clean[:3]]
    assert len(lines) == 3
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _make_panel(path: Path, ws: Workspace) -> None:
    shutil.copyfile(ws.base / "configs" / "panel.example.yaml", path)


def _tree(*names: str) -> list[dict[str, object]]:
    """A Text2DT tree: a condition on the first name, then a decision on each of the others."""
    node: list[dict[str, object]] = [{"role": "C", "triples": [["patient", "has", names[0]]], "logical_rel": "null"}]
    return node + [{"role": "D", "triples": [["patient", "takes", n]], "logical_rel": "null"} for n in names[1:]]


def _make_trees(path: Path, ws: Workspace) -> None:
    gold = [_tree("fever", "paracetamol", "rest"), _tree("cough", "honey", "fluids")]
    pred = [gold[0], _tree("cough", "antibiotics", "fluids")]
    (path.parent / "gold.json").write_text(json.dumps(gold), encoding="utf-8")
    (path.parent / "pred.json").write_text(json.dumps(pred), encoding="utf-8")


def _make_second_run(path: Path, ws: Workspace) -> None:
    shutil.copytree(path.parent / "two-systems", path)


def _make_shard(path: Path, ws: Workspace) -> None:
    k = path.name.rsplit("-", 1)[1]
    res = run_cli(["score", PLACEHOLDERS["CASES.jsonl"], "--shard", f"{k}/2", "--out", str(path)], path.parents[1],
                  ws.env)
    assert res.code == 0, res.output


#: Files a doc command reads that the reader is assumed to have: made when a command names one that is not there.
MADE: dict[str, Callable[[Path, Workspace], None]] = {
    "sheet.csv": _make_sheet,
    "sheet-filled.csv": _make_sheet,
    "verdicts-filled.csv": _make_verdicts,
    "qc-v2.yaml": _make_v2,
    "ratings.csv": _make_ratings,
    "suite.jsonl": _make_suite,
    "mine.jsonl": _make_clean_records,
    "clean30.jsonl": _make_clean_records,   # docs/calibration.md's ~30 records: 3 here, to keep the run short
    "panel.yaml": _make_panel,
    "pred.json": _make_trees,
    "gold.json": _make_trees,
    "two-systems-again": _make_second_run,
    "shard-0": _make_shard,
    "shard-1": _make_shard,
}


# --------------------------------------------------------------------------- what a command writes


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else None


def writes(argv: list[str]) -> list[str]:
    """The files the docs say a command writes (argv without the program name)."""
    if "--dry-run" in argv:
        return []
    verb = " ".join(argv[:2]) if argv[0] in ("human", "reviewers", "judges", "metrics") else argv[0]
    out = _option(argv, "--out")
    if verb in ("score", "merge"):
        return [f"{out or 'out'}/{f}" for f in RUN_FILES]
    if verb == "calibrate":
        return [f"{out or 'out/calibration'}/{f}" for f in ("calibration.json", "suite.jsonl", *RUN_FILES)]
    if verb == "audit" and (export := _option(argv, "--export")):
        return [export]
    if verb == "report":
        return [f"{argv[1]}/report.md", f"{argv[1]}/report.html"]
    if verb == "export" and (folder := _option(argv, "--parquet")):
        return [f"{folder}/judgments.parquet", f"{folder}/consensus.parquet"]
    if verb == "human import" and (run := _option(argv, "--run")):
        return [f"{run}/{f}" for f in ("reliability.json", "report.md", "report.html")]
    return []


def _removed_first(argv: list[str]) -> list[str]:
    """What a command makes: gone before it runs, so that its appearing is the command's doing."""
    found = writes(argv)
    if argv[0] in ("score", "calibrate", "merge") and (out := _option(argv, "--out")):
        found.append(out)
    return found


def _check_printed(argv: list[str], output: str, work: Path) -> None:
    """What a command prints, by kind: the dry run says nothing was sent, `judges check` an `ok` per judge..."""
    if "--dry-run" in argv:   # in the rubric's language; --show-prompt prints the requests instead of the estimate
        said = (r"the request as sent|发送的请求原文" if "--show-prompt" in argv
                else r"dry run: nothing was sent|试运行：未发送任何请求")
        assert re.search(said, output), output[:300]
    if argv[:2] == ["judges", "check"]:
        cfg = yaml.safe_load((work / str(_option(argv, "--config") or "configs/default.yaml")).read_text("utf-8"))
        for j in cfg["judges"]:
            assert re.search(rf"\bok\s+{re.escape(j['name'])}\b", output), (j["name"], output)
    if argv[:2] == ["reviewers", "add"]:
        assert "key=" in output
    if argv[:2] == ["human", "import"]:
        assert "human label(s)" in output
    if argv[0] == "metrics" and "--json" in argv:
        assert isinstance(json.loads(output), dict)
    if argv[0] == "compare" and "--systems" in argv:
        assert all(s in output for s in argv[argv.index("--systems") + 1:][:2])


# --------------------------------------------------------------------------- running one command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(argv: list[str], work: Path, env: dict[str, str]) -> tuple[int, str]:
    """`review`: started, its page fetched (200, HTML), stopped with SIGINT. Returns (exit code, what it printed)."""
    proc = subprocess.Popen([str(CLI), *argv], cwd=work, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    killer = threading.Timer(120, proc.kill)
    killer.start()
    seen: list[str] = []
    try:
        assert proc.stdout is not None
        url = None
        for line in proc.stdout:
            seen.append(line)
            if m := re.search(r"open (http://\S+)", line):
                url = m.group(1)
                break
        assert url, "the review server did not start:\n" + "".join(seen)
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())  # the token link sets a cookie
        with browser.open(url, timeout=30) as page:
            assert page.status == 200
            assert "<html" in page.read().decode("utf-8").lower()
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        seen.append(rest)
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(seen)


def run_variant(cmd: DocCommand, words: list[str], work: Path, ws: Workspace) -> None:
    """One argument list of a doc command, in ``work``: placeholders replaced, its outputs removed first, the
    files it reads made when the reader is assumed to have them; then the doc's exit code, files and output."""
    argv = [PLACEHOLDERS.get(w, w) for w in words[1:]]
    unknown = [w for w in words[1:] if PLACEHOLDER.match(w) and w not in PLACEHOLDERS]
    assert not unknown, f"{cmd.where}: placeholder(s) {unknown} not in PLACEHOLDERS of {__name__}"
    literals: dict[str, str] = {}
    if argv[0] == "review":
        port = str(_free_port())
        literals[DEFAULT_PORT] = port
        argv = [port if w == DEFAULT_PORT else w for w in argv]
        if "--port" not in argv:
            argv += ["--port", port]
    shared = ws.shared.get(cmd.text)  # run once by the fixture: its outputs are in the copy
    for rel in [] if shared else _removed_first(argv):
        p = work / rel
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    for w in argv:
        p = work / w
        if p.name in MADE and not p.exists():
            MADE[p.name](p, ws)
    where = f"{cmd.where}: {shlex.join(['consensus-eval', *argv])}"
    if argv[0] == "review":
        code, output = _serve(argv, work, ws.env)
        # Ctrl-C: 130, the shell's code for it (or 0); never a traceback, never killed by the signal
        assert code in (0, 130) and "Traceback" not in output, f"{where}: exit {code} after SIGINT\n{output}"
    else:
        res = shared or run_cli(argv, work, ws.env)
        code, output = res.code, res.output
        assert code == cmd.exit_code, f"{where}: exit {code}, the doc says {cmd.exit_code}\n{output}"
        _check_printed(argv, res.stdout if "--json" in argv else output, work)
    for rel in writes(argv):
        assert (work / rel).is_file(), f"{where}: {rel} was not written\n{output}"
    for shown in cmd.output:
        pattern = output_pattern(shown, literals)
        assert pattern.search(output), f"{where}: the doc shows {shown!r}; printed:\n{output}"


def check_install(cmd: DocCommand) -> None:
    """`pip install X`: X is this project (`.`, `.[extra]`, `consensus-eval[extra]`) and each extra exists."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    targets = [w for w in shlex.split(cmd.text)[2:] if not w.startswith("-")]
    assert targets, f"{cmd.where}: nothing to install"
    for target in targets:
        m = re.fullmatch(r"(?P<name>\.|[A-Za-z0-9_.-]+)(\[(?P<extras>[^\]]+)\])?", target)
        assert m, f"{cmd.where}: {target!r} is not a package"
        assert m["name"] in (".", project["name"]), f"{cmd.where}: {target!r} is not this project"
        for extra in (m["extras"] or "").split(","):
            if extra.strip():
                assert extra.strip() in project["optional-dependencies"], f"{cmd.where}: no extra {extra!r}"
    assert "consensus-eval" in project["scripts"]


def check_export(cmd: DocCommand, block: Block) -> None:
    """`export A=... B=...`: exactly the keys the block's configs read (their LLM judges' api_key_env)."""
    exported = {w.split("=", 1)[0] for w in shlex.split(cmd.text)[1:]}
    needed: set[str] = set()
    for c in block.commands:
        words = shlex.split(c.text)
        if words[0] in CLI_NAMES and (config := _option(words, "--config")):
            cfg = yaml.safe_load((ROOT / config).read_text(encoding="utf-8"))
            needed |= {str(j["api_key_env"]) for j in _llm_judges(cfg) if j.get("api_key_env")}
    assert exported == needed, f"{cmd.where}: exports {sorted(exported)}, the block's configs read {sorted(needed)}"


def run_command(cmd: DocCommand, block: Block, work: Path, ws: Workspace, tmp: Path) -> int:
    """Run (or check) one doc command; returns how many argument lists ran."""
    if cmd.text in NOT_RUN or cmd.text in ELSEWHERE:
        return 0
    words = shlex.split(cmd.text)
    if words[0] == "export":
        check_export(cmd, block)
        return 0
    if words[0].endswith("pip") and words[1:2] == ["install"]:
        check_install(cmd)
        return 0
    if words[0] not in CLI_NAMES:
        pytest.fail(f"{cmd.where}: {cmd.text!r}: no way to run it here: run it in {__name__} or list it in NOT_RUN "
                    "with the reason")
    runs = variants(cmd.text)
    for i, v in enumerate(runs):
        isolated = any(w in PLACEHOLDERS for w in v[1:])
        run_variant(cmd, v, ws.copy(tmp / f"{cmd.line}-{i}") if isolated else work, ws)
    return len(runs)


# --------------------------------------------------------------------------- the tests


def test_the_docs_commands_are_found() -> None:
    by_file = {doc: sum(len(b.commands) for b in BLOCKS if b.file == doc) for doc in DOCS}
    assert by_file["README.md"] >= 20 and len(COMMANDS) >= 35, by_file
    assert {"docs/judges.md", "docs/review.md", "docs/calibration.md", "docs/validity.md"} <= {
        doc for doc, n in by_file.items() if n}


def test_every_listed_command_is_still_in_the_docs_and_its_test_exists() -> None:
    texts = {c.text for c in COMMANDS}
    assert set(NOT_RUN) <= texts, set(NOT_RUN) - texts
    assert set(ELSEWHERE) <= texts, set(ELSEWHERE) - texts
    for where in set(ELSEWHERE.values()):
        path, name = where.split("::")
        assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), where


def test_every_doc_command_is_run_checked_or_listed() -> None:
    """Nothing is left out silently: a command is a consensus-eval command (run), a pip install or an export
    (checked), or listed with its reason."""
    for c in COMMANDS:
        first = shlex.split(c.text)[0]
        assert (c.text in NOT_RUN or c.text in ELSEWHERE or first in CLI_NAMES or first == "export"
                or first.endswith("pip")), f"{c.where}: {c.text!r} is neither run nor listed"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_each_documented_block_runs(block: Block, workspace: Workspace, tmp_path: Path) -> None:
    work = workspace.copy(tmp_path / "w")
    for cmd in block.commands:
        run_command(cmd, block, work, workspace, tmp_path)


# --------------------------------------------------------------------------- the runner's own pieces


def test_a_command_of_another_program_fails_until_it_is_listed(tmp_path: Path) -> None:
    cmd = DocCommand("d.md", 3, "curl -s http://127.0.0.1:8765/")
    block = Block("d.md", 2, (cmd,))
    with pytest.raises(pytest.fail.Exception, match="list it in NOT_RUN"):
        run_command(cmd, block, tmp_path, Workspace(tmp_path, "", {}), tmp_path)
    NOT_RUN[cmd.text] = "a test of the test"
    try:
        assert run_command(cmd, block, tmp_path, Workspace(tmp_path, "", {}), tmp_path) == 0
    finally:
        del NOT_RUN[cmd.text]


def test_an_export_must_name_the_keys_its_block_reads() -> None:
    run = DocCommand("d.md", 4, "consensus-eval judges check --config configs/panel.example.yaml")
    check_export(DocCommand("d.md", 3, "export DEEPSEEK_API_KEY=... OPENAI_API_KEY=... DASHSCOPE_API_KEY=..."),
                 Block("d.md", 2, (run,)))
    with pytest.raises(AssertionError, match="exports"):
        check_export(DocCommand("d.md", 3, "export OPENAI_API_KEY=..."), Block("d.md", 2, (run,)))


def test_an_install_must_name_this_project_and_its_extras() -> None:
    check_install(DocCommand("d.md", 1, "pip install -q '.[test]' 'consensus-eval[review]'"))
    for wrong in ("pip install '.[nosuchextra]'", "pip install other-package"):
        with pytest.raises(AssertionError):
            check_install(DocCommand("d.md", 1, wrong))


def test_a_synopsis_expands_to_every_choice() -> None:
    assert variants("consensus-eval report DIR [--human SHEET.csv] [--lang zh|en]") == [
        ["consensus-eval", "report", "DIR", "--human", "SHEET.csv", "--lang", "zh"],
        ["consensus-eval", "report", "DIR", "--human", "SHEET.csv", "--lang", "en"]]
    assert variants("x [--suite a|b | --bases M] [--n N]") == [
        ["x", "--suite", "a", "--n", "N"], ["x", "--bases", "M", "--n", "N"], ["x", "--suite", "b", "--n", "N"]]
    assert variants('consensus-eval compare A B --fail-if "total < -1.0"') == [
        ["consensus-eval", "compare", "A", "B", "--fail-if", "total < -1.0"]]
    with pytest.raises(ValueError, match="without its"):
        variants("x [--a")


def test_blocks_are_read_as_a_reader_reads_them(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text("text\n```bash\nexport K=...\nconsensus-eval a X [--b]   # what it does\n"
                   "                [--c C]    # wrapped\n# printed ... line  (exit 5)\n# ... narrative\n"
                   "pip install -q . && consensus-eval d \\\n  --e\n```\n```\nnot a command\n```\n"
                   "```json\n{\"consensus-eval\": 1}\n```\n```\n$ consensus-eval f\n```\n", encoding="utf-8")
    blocks = extract(doc, "d.md")
    assert [[c.text for c in b.commands] for b in blocks] == [
        ["export K=...", "consensus-eval a X [--b] [--c C]", "pip install -q .", "consensus-eval d --e"],
        ["consensus-eval f"]]
    a = blocks[0].commands[1]
    assert (a.line, a.output, a.exit_code) == (4, ("printed ... line  (exit 5)",), 5)
    assert output_pattern(a.output[0], {}).search("printed a long\n line")
    assert not output_pattern(a.output[0], {}).search("printed a long\n lane")
    assert strip_comment('a "#b" c # d') == ('a "#b" c', "d")


def test_the_filled_sheet_is_what_excel_saves(tmp_path: Path) -> None:
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("\ufeffrow,case_id,panel_score,human_score,human_verdict\r\nscore,c1,30,,\r\n"
                     "deduction,c1,,,\r\ndeduction,c1,,,\r\nscore,c2,,,\r\n", encoding="utf-8")
    assert fill_sheet(sheet, tmp_path / "filled.csv") == (1, 2)
    raw = (tmp_path / "filled.csv").read_bytes()
    assert b"\r\n" in raw and not raw.startswith(b"\xef\xbb\xbf")
    rows = list(csv.DictReader(io.StringIO(raw.decode("gbk"))))
    assert [(r["human_score"], r["human_verdict"]) for r in rows] == [("29", ""), ("", "agree"),
                                                                       ("", "disagree"), ("", "")]


# --------------------------------------------------------------------------- docs/scale.md: the schedulers' recipes


def _slurm_task(k: int, n: int) -> dict[str, str]:
    """What Slurm sets in task ``k`` of ``sbatch --array=0-(n-1)``."""
    return {"SLURM_ARRAY_JOB_ID": "4242", "SLURM_JOB_ID": str(4243 + k), "SLURM_ARRAY_TASK_ID": str(k),
            "SLURM_ARRAY_TASK_COUNT": str(n), "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": str(n - 1)}


def _indexed_pod(k: int, n: int) -> dict[str, str]:
    """What a Kubernetes Indexed Job of ``completions: n`` sets in the containers of the pod of index ``k``."""
    return {"JOB_COMPLETION_INDEX": str(k)}


def _expanded(text: str, variables: dict[str, str], work: Path) -> list[str]:
    """``text`` as a shell runs it: split, ``$NAME``/``${NAME}`` replaced by ``variables`` (one not set fails),
    a word with ``*`` replaced by the files it matches in ``work``, sorted (none matching fails)."""
    import glob

    words = [re.sub(r"\$\{?(\w+)\}?", lambda m: variables[m.group(1)], w) for w in shlex.split(text)]
    out: list[str] = []
    for w in words:
        if "*" in w:
            found = sorted(glob.glob(w, root_dir=work))
            assert found, f"{w!r} matches nothing in {work}"
            out += found
        else:
            out.append(w)
    return out


def _scale_recipes() -> list[tuple[str, int, Callable[[int, int], dict[str, str]], str, str]]:
    """(scheduler, tasks, their variables, the task's command, the merge's command) of each recipe of
    docs/scale.md: the Slurm array script (``#SBATCH --array=0-N``) and the merge script beside it; the Indexed
    Job manifest (``completions``) and the plain Job after it (their containers' ``sh -c`` commands)."""
    from tests.docs_runner import _fenced_blocks

    text = (ROOT / "docs" / "scale.md").read_text(encoding="utf-8")
    blocks = _fenced_blocks(text)
    scripts = [[t for _, t in body] for _, lang, body in blocks if lang == "bash" and body[0][1] == "#!/bin/bash"]
    array = next(b for b in scripts if any(x.startswith("#SBATCH --array=") for x in b))
    merge_script = next(b for b in scripts if b is not array and any("consensus-eval merge" in x for x in b))
    n_slurm = int(re.search(r"#SBATCH --array=0-(\d+)", "\n".join(array)).group(1)) + 1  # type: ignore[union-attr]

    def command(script: list[str]) -> str:
        lines = [x for x in script if not x.startswith("#")]
        return " ".join(" ".join(lines).replace("\\", " ").split())

    jobs = [yaml.safe_load("\n".join(t for _, t in body)) for _, lang, body in blocks if lang == "yaml"]

    def container_command(job: dict[str, Any]) -> str:
        shell, flag, script = job["spec"]["template"]["spec"]["containers"][0]["command"]
        assert (shell, flag) == ("sh", "-c"), job["metadata"]["name"]
        return " ".join(str(script).split())

    indexed = next(j for j in jobs if j["spec"].get("completionMode") == "Indexed")
    after = next(j for j in jobs if j is not indexed)
    return [("slurm", n_slurm, _slurm_task, command(array), command(merge_script)),
            ("kubernetes", int(indexed["spec"]["completions"]), _indexed_pod, container_command(indexed),
             container_command(after))]


def test_the_scale_recipes_run_as_the_schedulers_run_them(workspace: Workspace, tmp_path: Path) -> None:
    """Each task's command with the variables its scheduler sets, then the merge: the merged outputs are those of
    the same command without --shard (docs/scale.md, "How these recipes are tested")."""
    recipes = _scale_recipes()
    assert [r[:2] for r in recipes] == [("slurm", 4), ("kubernetes", 4)]
    for scheduler, n, task_vars, task, merge in recipes:
        work = workspace.copy(tmp_path / scheduler)
        for k in range(n):
            variables = task_vars(k, n)
            argv = _expanded(task, variables, work)
            assert argv[0] == "consensus-eval" and "--shard" in argv, task
            res = run_cli(argv[1:], work, {**workspace.env, **variables})
            assert res.code == 0, f"{scheduler} task {k}: {shlex.join(argv)}\n{res.output}"
            assert f"shard {k}/{n}:" in res.output
        argv = _expanded(merge, {}, work)
        assert argv[:2] == ["consensus-eval", "merge"] and len(argv) == 2 + n + 2, argv
        res = run_cli(argv[1:], work, workspace.env)
        assert res.code == 0, f"{scheduler} merge: {shlex.join(argv)}\n{res.output}"
        one = _expanded(task, task_vars(0, n), work)
        one = one[:one.index("--shard")] + one[one.index("--shard") + 2:]
        one[one.index("--out") + 1] = "runs/one"
        assert run_cli(one[1:], work, workspace.env).code == 0
        merged = work / argv[argv.index("--out") + 1]
        for name in ("consensus.csv", "consensus.jsonl", "reliability.json", "judgments.jsonl"):
            a, b = ((d / name).read_text(encoding="utf-8") for d in (merged, work / "runs" / "one"))
            assert (re.sub(r'"latency_s": [^,}]+', "", a) == re.sub(r'"latency_s": [^,}]+', "", b)), (scheduler, name)
