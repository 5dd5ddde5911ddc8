"""Clean text: `--help` of every command, and what the commands print on a non-terminal of 80 columns
(a CI log, a pipe), read cleanly: no `<bool>` marker, no rich markup shown as text, no word broken across two lines,
no table cell cut short."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from consensus_eval.cli import app


def _commands() -> Iterator[list[str]]:
    def walk(cmd: object, path: list[str]) -> Iterator[list[str]]:
        yield path
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, [*path, name])

    yield from walk(get_command(app), [])


COMMANDS = list(_commands())


def _help(path: list[str], columns: int) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_has_help() -> None:
    names = {" ".join(p) for p in COMMANDS}
    assert {"score", "calibrate", "report", "metrics text2dt", "metrics tcm", "human import", "judges check"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "root")
def test_help_reads_cleanly_at_80_columns(path: list[str]) -> None:
    narrow, wide = _help(path, 80), _help(path, 200)
    assert "<bool>" not in narrow
    assert "[bold]" not in narrow and "\\[" not in narrow   # rich markup never shown as text
    assert "…" not in narrow                                 # no cell cut short
    for line in narrow.splitlines():
        assert len(line) <= 80, line
        assert not re.search(r"\w-$", line), f"a word broken at its hyphen: {line!r}"
    # the same words at 80 columns as at 200: none cut, none broken in two
    assert narrow.split() == wide.split()


def test_help_paragraphs_are_rewrapped_not_broken_mid_sentence() -> None:
    # a docstring paragraph written over several source lines is rewrapped to the width: no line of it ends
    # short where a source line ended (rich's help kept those breaks: "2 bad input;" / "3 completed ...")
    for path in (["score"], ["calibrate"], ["audit"]):
        text = _help(path, 80)
        for para in re.split(r"\n\s*\n", text):
            lines = para.splitlines()
            if not lines or not lines[0].startswith("  ") or lines[0].startswith("  -"):
                continue   # the usage line, a section heading, an option row
            for line in lines[:-1]:
                assert len(line) >= 60, f"{' '.join(path)}: a line cut short mid-paragraph: {line!r}"


# --------------------------------------------------------------------------- the console at 80 columns

BOX = re.compile(r"[\u2500-\u257f]")    # the box-drawing characters of tables and rules


CJK = re.compile(r"[«»\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")   # and the quote marks around it


def _words(text: str) -> set[str]:
    """The words printed, table borders left out (a folded table's ``header:`` written as the header). Chinese text
    (a record's quote) has no spaces, so a line may break anywhere in it: its pieces are left out."""
    return {w.rstrip(":") for w in BOX.sub(" ", text).split() if not CJK.search(w)}


def _run(args: list[str], columns: int) -> str:
    result = CliRunner().invoke(app, args, env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """`score` of the bundled likert and medical-record examples with their offline panels, in two folders at 80
    and at 400 columns (the same words in both, every path relative), and the runs' folders."""
    from tests.conftest import ROOT

    base = tmp_path_factory.mktemp("console")
    out: dict[str, str] = {}
    here = Path.cwd()
    try:
        for name, cases, config, lang in (
                ("pdqi9", "examples/pdqi9/cases.jsonl", "configs/pdqi9.offline.yaml", "en"),
                ("medical_record", "examples/cases.jsonl", "configs/offline.yaml", "en")):
            for columns in (80, 400):
                folder = base / f"{name}-{columns}"
                folder.mkdir()
                os.chdir(folder)
                out[f"{name}-{columns}"] = _run(["score", str(ROOT / cases), "--config", str(ROOT / config),
                                                 "--out", "out", "--lang", lang], columns)
                out[f"{name}-{columns}-dir"] = str(folder / "out")
    finally:
        os.chdir(here)
    return out


def _check(narrow: str, wide: str) -> None:
    assert "…" not in narrow and "<bool>" not in narrow          # no cell cut short
    assert not re.search(r"[A-Za-z]-\n", narrow)                 # no word broken at its hyphen
    assert _words(narrow) == _words(wide)                        # no word folded in two: the same words as at 400


@pytest.mark.parametrize("name", ["pdqi9", "medical_record"])
def test_score_prints_whole_words_and_cells_at_80_columns(scored: dict[str, str], name: str) -> None:
    _check(scored[f"{name}-80"], scored[f"{name}-400"])
    assert "Outputs in out/" in scored[f"{name}-80"]
    # words per kind: PDQI-9 has neither stars nor deductions, so its queue has no star gap and no solo share
    assert (("star gap" in scored[f"{name}-80"]) and ("solo %" in scored[f"{name}-80"])) == (name != "pdqi9")


@pytest.mark.parametrize("command", [["audit", "--top", "3"], ["reliability", "--bootstrap", "50"]])
def test_audit_and_reliability_print_whole_words_and_cells_at_80_columns(scored: dict[str, str],
                                                                         command: list[str]) -> None:
    run = scored["medical_record-80-dir"]
    args = [command[0], run, *command[1:]]
    _check(_run([*args, "--lang", "en"], 80), _run([*args, "--lang", "en"], 400))
    zh = _run(args, 80)                                           # the rubric's language: Chinese
    assert "…" not in zh and "need review" not in zh and "across judges" not in zh


def test_calibrate_folds_its_wide_table_at_80_columns(tmp_path: Path) -> None:
    args = ["calibrate", "--sample", "12", "--seed", "3", "--lang", "en"]
    narrow = _run([*args, "--out", str(tmp_path / "a")], 80)
    wide = _run([*args, "--out", str(tmp_path / "a")], 400)      # the same run, resumed: the same table
    progress = re.compile(r"^calls \d+/\d+ .*\n", re.M)          # the progress lines: made now, resumed then
    _check(progress.sub("", narrow), progress.sub("", wide))
    assert "recall" in narrow.lower()


def test_one_language_per_run_the_rubrics(scored: dict[str, str], tmp_path: Path) -> None:
    # medical_record is Chinese: without --lang, what score prints is Chinese throughout (the tables' words too)
    from tests.conftest import ROOT

    os.chdir(tmp_path)
    zh = _run(["score", str(ROOT / "examples" / "cases.jsonl"), "--config", str(ROOT / "configs" / "offline.yaml"),
               "--out", "out"], 120)
    for english in ("cases need review", "mean panel score", "call(s) made", "Outputs in", "judges\n", "Most disputed"):
        assert english not in zh, english
    for chinese in ("个病例需要复核", "评审组平均分", "输出在 out/", "模拟评审"):
        assert chinese in zh, chinese


# --------------------------------------------------------------------------- words and notices


def test_a_likert_dimension_with_a_misspelt_key_gets_one_error_not_a_spurious_max(tmp_path: Path) -> None:
    from consensus_eval._errors import InputError
    from consensus_eval.domain.rubric import load_rubric

    p = tmp_path / "r.yaml"
    p.write_text("id: r\nname: R\ndimensions:\n  - {id: a, name: A, kind: likert, level: {1: bad, 2: ok, 3: good}}\n",
                 encoding="utf-8")
    with pytest.raises(InputError) as ei:
        load_rubric(p)
    assert "level: Extra inputs are not permitted" in str(ei.value) and "max" not in str(ei.value)
    p.write_text("id: r\nname: R\ndimensions:\n  - {id: a, name: A, kind: likert}\n", encoding="utf-8")
    with pytest.raises(InputError, match="a likert dimension needs levels") as ei:
        load_rubric(p)
    assert "max" not in str(ei.value)


def test_weights_that_do_not_sum_to_one_get_a_notice() -> None:
    from rich.console import Console

    from consensus_eval.domain.rubric import load_rubric
    from consensus_eval.output.console import print_weights_notice
    from consensus_eval.output.report.i18n import messages

    pdqi9 = load_rubric("pdqi9")
    dims = pdqi9.dimensions
    for weights, noticed in (([1.0] * 9, False), ([0.2] * 5 + [0.0] * 4, False), ([0.1] * 9, True),
                             ([2.0] + [1.0] * 8, True)):
        rubric = pdqi9.model_copy(update={"dimensions": [d.model_copy(update={"weight": w})
                                                         for d, w in zip(dims, weights, strict=True)]})
        console = Console(record=True, width=200)
        print_weights_notice(console, rubric, messages("en"))
        text = console.export_text()
        assert bool(text) is noticed, weights
        if noticed:
            assert f"sum to {sum(weights):g}, not 1" in text and f"at most {rubric.max_total:g}" in text


def test_the_judge_quality_table_names_what_each_kind_quotes() -> None:
    from rich.console import Console

    from consensus_eval.analysis.intervals import proportion
    from consensus_eval.analysis.judge_quality import JudgeQuality
    from consensus_eval.output.audit_console import judge_quality_table

    q = {"a": JudgeQuality(judge="a", ok_runs=4, deductions=6, by_kind={}, ungrounded=proportion(1, 6),
                           claimed_runs=0, claim_mismatch=proportion(0, 0))}
    for kinds, word in (({"deductions"}, "deductions"), ({"criteria"}, "verdicts"), ({"likert"}, "quotes"),
                        ({"likert", "deductions"}, "quotes")):
        console = Console(record=True, width=200)
        console.print(judge_quality_table(q, None, kinds))
        text = console.export_text()
        assert f"(1 of 6 {word})" in text, kinds
        assert word == "deductions" or "deductions" not in text


def test_the_dry_run_of_a_rubric_with_weights_not_summing_to_one_says_so(tmp_path: Path) -> None:
    from tests.conftest import ROOT

    rubric = (ROOT / "configs" / "rubrics" / "pdqi9.yaml").read_text(encoding="utf-8")
    (tmp_path / "w.yaml").write_text(rubric.replace("id: pdqi9", "id: weighted").replace(
        "    kind: likert\n", "    kind: likert\n    weight: 0.5\n"), encoding="utf-8")
    (tmp_path / "c.yaml").write_text(f"rubric: {tmp_path / 'w.yaml'}\nprompts_dir: {ROOT / 'prompts'}\n"
                                     "judges:\n  - {name: s, kind: simulated}\n", encoding="utf-8")
    out = _run(["score", str(ROOT / "examples" / "pdqi9" / "cases.jsonl"), "--config", str(tmp_path / "c.yaml"),
                "--dry-run"], 200)
    assert "weights of rubric weighted sum to 4.5, not 1" in out and "at most 22.5" in out

