"""Language and structure as data (docs/rubrics.md, 'Headings'): the record's section headings come from the rubric,
the words people type come from domain/locale, and the core holds no Chinese text of its own."""

from __future__ import annotations

import ast
import re

import pytest

import consensus_eval
from consensus_eval.domain.grounding import ground
from consensus_eval.domain.rubric import Headings, load_rubric
from consensus_eval.domain.sections import Sections
from consensus_eval.domain.words import spelled, words
from tests.conftest import ROOT

CJK = re.compile(r"[\u4e00-\u9fff]")
#: the medical_record rubric's own code (its rules judge and calibration suite) and the Chinese-task metrics
RUBRIC_OWN = ("judges/rules/medical_record/", "domain/calibration/", "metrics/")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def test_the_core_holds_no_chinese_text() -> None:
    """Every Chinese string the code uses outside the medical_record rubric's own files is data: the rubric's
    YAML (sections, headings, roles), domain/locale (typed words), the reports' catalogues. Docstrings may
    quote examples."""
    root = ROOT / "consensus_eval"
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(RUBRIC_OWN):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        found += [f"{rel}:{n.lineno}: {n.value[:40]!r}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
                  and CJK.search(n.value)]
    assert found == []
    assert consensus_eval.__file__   # the package that was scanned is the one imported


def test_headings_are_the_rubrics_data() -> None:
    mr = load_rubric("medical_record")
    sections = Sections.of(mr)
    record = "一、主诉：口干3年\n2) 既往病史：高血压\n体格检查：BP 130/80\n个人生活史：不吸烟"
    from consensus_eval.domain.sections import fold_width

    found = [(s.name, s.canonical) for s in sections.find(fold_width(record))]
    assert found == [("主诉", True), ("既往史", True), ("体格检查", False), ("个人史", True)]
    # an English rubric's headings: its own sections and aliases, nothing Chinese
    en = Sections(["Chief complaint", "History"], Headings(aliases={"HPI": "History"}, other=["Plan"]))
    text = "Chief complaint: cough\nHPI: 3 days. Plan: rest"
    assert [(s.name, s.canonical) for s in en.find(text)] == [("Chief complaint", True), ("History", True),
                                                              ("Plan", False)]
    # a rubric without sections: grounding works, spans carry no section
    none = Sections((), Headings())
    assert none.find(record) == []
    g = ground("口干3年", record, "", none)
    assert g.grounded and all(s.section is None for s in g.spans)
    assert ground("口干3年", record, "", sections).spans[0].section == "主诉"


def test_headings_do_not_change_the_rubrics_fingerprint() -> None:
    """Reading data, not what a judge is asked: stored results stay valid (request hashes unchanged)."""
    mr = load_rubric("medical_record")
    bare = mr.model_copy(update={"headings": Headings()})
    assert bare.fingerprint == mr.fingerprint


@pytest.mark.parametrize(("kind", "word", "value"), [
    ("verdict", "同意", "agree"), ("verdict", "Not sure", "unsure"), ("verdict", "反对", "disagree"),
    ("score_origin", "采纳", "accepted"), ("score_origin", "mine", "own"), ("yes_no", "是", "yes"),
    ("yes_no", "0", "no"),
])
def test_typed_words_in_every_language(kind: str, word: str, value: str) -> None:
    from consensus_eval.domain.words import normal

    assert words(kind)[normal(word)] == value
    assert spelled("verdict", "agree") == ["agree", "同意"]
