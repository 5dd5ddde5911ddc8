"""The Text2DT example shipped in examples/text2dt/ scores to its documented output
(examples/text2dt/expected.json, docs/metrics.md), which is the organisers' published result for the task
description's worked example whose shape it has."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from consensus_eval.metrics.commands import metrics_app
from consensus_eval.metrics.text2dt import evaluate, load_trees

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "text2dt"
WORKED = Path("/work/shared/data/text2dt/worked_example")


def test_the_example_scores_to_its_documented_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)   # the bundled example is found by its relative path from any folder
    res = CliRunner().invoke(metrics_app, ["text2dt", "examples/text2dt/pred.json", "examples/text2dt/gold.json",
                                           "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == json.loads((EXAMPLE / "expected.json").read_text(encoding="utf-8"))
    docs = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    exact = json.loads(res.output)["exact"]
    for name, label in (("tree_accuracy", "tree accuracy"), ("triple_f1", "triple F1"),
                        ("path_f1", "decision-path F1"), ("mean_edit_distance", "mean edit distance"),
                        ("node_f1", "node F1 (extra)"), ("edit_ratio", "edit ratio (extra)")):
        assert f"| {label} | {exact[name]} = " in docs, name


def test_the_example_has_the_worked_examples_shape_and_values() -> None:
    # the same trees as the task description's worked example, node for node, with clinical triples in place
    # of t1...t11: the organisers' published values hold for it (SOURCE.md of the shared data)
    mine = evaluate(load_trees(EXAMPLE / "pred.json"), load_trees(EXAMPLE / "gold.json"))
    assert (mine.tree_accuracy, mine.triple_f1, mine.path_f1, mine.mean_edit_distance, mine.node_f1) == (
        Fraction(1, 2), Fraction(16, 19), Fraction(3, 5), Fraction(5, 2), Fraction(3, 4))
    if WORKED.is_dir():
        theirs = evaluate(load_trees(WORKED / "pred.json"), load_trees(WORKED / "gold.json"))
        assert mine.metrics() == theirs.metrics()

        def shape(path: Path) -> list[list[tuple[str, int, str]]]:
            return [[(n["role"], len(n["triples"]), n["logical_rel"]) for n in t["tree"]]
                    for t in json.loads(path.read_text(encoding="utf-8"))]

        for side in ("pred.json", "gold.json"):
            assert shape(EXAMPLE / side) == shape(WORKED / side)
