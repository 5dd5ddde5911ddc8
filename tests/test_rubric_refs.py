"""A rubric reference says what it loads. A name (``pdqi9``) is always the bundled rubric, whatever
the working directory holds; a path (a separator or a ``.yaml`` suffix) is a file; a name that a rubric file in the
working directory also answers to is refused, naming both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from consensus_eval._errors import InputError
from consensus_eval._resources import data_dir
from consensus_eval.cli import app
from consensus_eval.domain.rubric import is_rubric_path, load_rubric, rubric_file

BUNDLED = data_dir("configs") / "rubrics"


@pytest.mark.parametrize(("ref", "path"), [
    ("pdqi9", False), ("medical_record", False), ("criteria", False),
    ("pdqi9.yaml", True), ("mine.YML", True), ("./pdqi9", True), ("rubrics/pdqi9", True), ("a\\b", True),
    (Path("pdqi9"), True),
])
def test_a_path_has_a_separator_or_a_yaml_suffix(ref: str | Path, path: bool) -> None:
    assert is_rubric_path(ref) is path


def test_a_folder_or_file_named_like_a_bundled_rubric_changes_nothing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pdqi9").mkdir()                              # a project folder named like the rubric
    (tmp_path / "criteria").mkdir()
    (tmp_path / "criteria" / "notes.txt").write_text("x", encoding="utf-8")
    (tmp_path / "medical_record").write_text("not a rubric", encoding="utf-8")   # a file without a suffix
    for name in ("pdqi9", "criteria", "medical_record"):
        assert rubric_file(name) == BUNDLED / f"{name}.yaml"
        assert load_rubric(name).id == name


def test_a_name_also_answered_by_a_local_rubric_file_is_refused_naming_both(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mine = (BUNDLED / "pdqi9.yaml").read_text(encoding="utf-8").replace("id: pdqi9", "id: my_pdqi9")
    (tmp_path / "pdqi9.yaml").write_text(mine, encoding="utf-8")
    with pytest.raises(InputError) as ei:
        load_rubric("pdqi9")
    msg = str(ei.value)
    assert "ambiguous" in msg and str(BUNDLED / "pdqi9.yaml") in msg and "pdqi9.yaml" in msg.split("has ")[1]
    assert "rubric: ./pdqi9.yaml" in msg
    # written as a path, the file is what loads; the bundled one by its bundled path
    assert load_rubric("./pdqi9.yaml").id == "my_pdqi9"
    assert load_rubric("pdqi9.yaml").id == "my_pdqi9"


def test_an_unknown_name_lists_the_bundled_rubrics_and_says_how_to_name_a_file(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as ei:
        load_rubric("radiology")
    msg = str(ei.value)
    assert msg.startswith("radiology: rubric file not found")
    assert "bundled: criteria, medical_record, pdqi9" in msg and "./my_rubric.yaml" in msg
    (tmp_path / "radiology.yaml").write_text("id: r", encoding="utf-8")
    with pytest.raises(InputError, match=r"rubric: \./radiology\.yaml"):
        load_rubric("radiology")
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match="it is a folder"):
        load_rubric("./d")


def test_score_in_a_folder_with_a_criteria_subfolder_scores_the_bundled_rubric(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # the newcomer's report: a project folder `criteria/` made `rubric: criteria` fail with "a rubric must be a
    # mapping"; now the bundled rubric is what loads (the dry run renders its prompts for a judge that reads them)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "criteria").mkdir()
    (tmp_path / "criteria" / "criteria.yaml").write_text("[]", encoding="utf-8")
    (tmp_path / "c.yaml").write_text(
        "rubric: criteria\njudges:\n  - {name: a, model: openai/a, api_base: 'http://127.0.0.1:9/v1', "
        "api_key_env: NO_SUCH_KEY_37}\n", encoding="utf-8")
    case = {"id": "x", "conversation": "Doctor: hi\nPatient: hello", "record": "Plan: rest.",
            "criteria": [{"id": "rest", "text": "Advises rest.", "points": 1}]}
    (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["score", "cases.jsonl", "--config", "c.yaml", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "dry run" in result.output
