"""Text2DT metrics: parity with the organisers' scorer, both spellings, malformed input, pairing, CLI."""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from consensus_eval.metrics.text2dt import (
    EMPTY_LEAF,
    Node,
    Text2DTError,
    Text2DTResult,
    evaluate,
    load_trees,
    parse_tree,
    score_pair,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = Path("/work/shared/data/text2dt")
WORKED = DATA / "worked_example"
SPLITS = ("train", "dev", "test")


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("text2dt_bench", ROOT / "bench" / "text2dt_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_bench()


@pytest.fixture(scope="module")
def real_trees() -> list[list[dict[str, Any]]]:
    trees: list[list[dict[str, Any]]] = bench.load_gold_trees()
    return trees


# --------------------------------------------------------------------------------------------------
# Small hand-built trees. Triples t(x) = ["patient", "rel", x].


def t(name: str) -> list[str]:
    return ["patient", "rel", name]


def node(role: str, triples: list[Any], rel: str = "null") -> dict[str, Any]:
    return {"role": role, "triples": triples, "logical_rel": rel}


def empty_leaf() -> dict[str, Any]:
    return node("D", [])


def seed_empty_leaf() -> dict[str, Any]:
    return {"role": "", "triples": "", "logical_rel": ""}


# G:            C{a}
#             /      \
#          D{b}      C{c}
#                   /     \
#          D and{d, e}    (empty leaf)
GOLD = [node("C", [t("a")]), node("D", [t("b")]), node("C", [t("c")]),
        node("D", [t("d"), t("e")], "and"), empty_leaf()]
# Gold counts: triples {a,b,c,d,e} = 5; paths 3 (to b, to d&e, to the empty leaf);
# nodes with triples 4; edit-ratio share 5 + 2 x 4 = 13.

# a) node 3 loses triple e and its relation "and" becomes "null".
PRED_DROP = [node("C", [t("a")]), node("D", [t("b")]), node("C", [t("c")]), node("D", [t("d")]), empty_leaf()]
# triples 4 correct / 4 predicted / 5 gold; paths: root-L-b and root-R-c-R-empty match, root-R-c-L-d
# does not -> 2/3/3; nodes: a, b, c match, d differs -> 3/4/4;
# ED = node 3: relation 1 + symmetric difference {e} 1 = 2; ratio share 4 + 2x4 + 13 = 25.

# b) the subtree at root.R is pruned to a leaf D{c}.
PRED_PRUNE = [node("C", [t("a")]), node("D", [t("b")]), node("D", [t("c")])]
# triples 3/3/5; paths: root-L-b matches, root-R-D{c} does not -> 1/2/3; nodes: C{a}, D{b} match,
# D{c} != C{c} -> 2/3/4; ED = root.R role 1 + gold's lone D{d,e} (2+2) + lone empty leaf (2+0) = 7;
# ratio share 3 + 2x3 + 13 = 22.

# c) the root's children are swapped.
PRED_SWAP = [node("C", [t("a")]), node("C", [t("c")]), node("D", [t("d"), t("e")], "and"), empty_leaf(),
             node("D", [t("b")])]
# triples 5/5/5; paths: every turn differs -> 0/3/3; nodes (position-free) 4/4/4;
# ED: root 0; root.L C{c} vs D{b}: role 1 + triples 2 = 3, plus the prediction's lone children
# D{d,e} (2+2) and empty leaf (2) -> 9; root.R D{b} vs C{c}: 3, plus gold's lone children 4 + 2 -> 9;
# total 18; ratio share 5 + 2x4 + 13 = 26.

# d) empty prediction.
PRED_EMPTY: list[dict[str, Any]] = []
# not counted in the tree-accuracy / edit-distance denominators; triples 0/0/5; paths 0/0/3;
# nodes 0/0/4; ED = every gold node alone: 3 + 3 + 3 + 4 + 2 = 15; ratio share 0 + 13 = 13.

# e) the leaf D{b} grows into a condition C{b} with children D{x} and an empty leaf.
PRED_GROW = [node("C", [t("a")]), node("C", [t("b")]), node("D", [t("x")]), empty_leaf(),
             node("C", [t("c")]), node("D", [t("d"), t("e")], "and"), empty_leaf()]
# triples {a,b,x,c,d,e}: 5/6/5; paths: the two under root.R match, the two under root.L do not
# -> 2/4/3; nodes: C{a}, C{c}, D{d,e} match, C{b} and D{x} do not -> 3/5/4;
# ED: root.L C{b} vs D{b} role 1, plus lone D{x} (2+1) and lone empty leaf (2) -> 6;
# ratio share 6 + 2x5 + 13 = 29.

# f) identical: triples 5/5/5, paths 3/3/3, nodes 4/4/4, ED 0, ratio share 26, tree equal.
PRED_SAME = copy.deepcopy(GOLD)

HAND_CASES = {
    # name: (prediction, tree_equal, triples, paths, nodes, edit distance, ratio denominator)
    "drop": (PRED_DROP, False, (4, 4, 5), (2, 3, 3), (3, 4, 4), 2, 25),
    "prune": (PRED_PRUNE, False, (3, 3, 5), (1, 2, 3), (2, 3, 4), 7, 22),
    "swap": (PRED_SWAP, False, (5, 5, 5), (0, 3, 3), (4, 4, 4), 18, 26),
    "empty": (PRED_EMPTY, False, (0, 0, 5), (0, 0, 3), (0, 0, 4), 15, 13),
    "grow": (PRED_GROW, False, (5, 6, 5), (2, 4, 3), (3, 5, 4), 6, 29),
    "same": (PRED_SAME, True, (5, 5, 5), (3, 3, 3), (4, 4, 4), 0, 26),
}


def to_seed_spelling(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The task description's spelling: lower-case roles, empty leaves written with ''."""
    out = []
    for raw in tree:
        if raw["role"] == "D" and not raw["triples"] and raw["logical_rel"] == "null":
            out.append(seed_empty_leaf())
        else:
            out.append({**raw, "role": raw["role"].lower()})
    return out


def exact(result: Text2DTResult) -> dict[str, Fraction | None]:
    return result.metrics()


# --------------------------------------------------------------------------------------------------
# Parity


def test_worked_example_exact_values() -> None:
    result = evaluate(load_trees(WORKED / "pred.json"), load_trees(WORKED / "gold.json"))
    assert result.tree_accuracy == Fraction(1, 2)
    assert result.triple_f1 == Fraction(16, 19)
    assert result.path_f1 == Fraction(3, 5)
    assert result.mean_edit_distance == Fraction(5, 2)
    assert result.node_f1 == Fraction(3, 4)
    # the seed's formulas: triple F1 = 2 (8/9)(8/10) / (8/9 + 8/10), path F1 = 2 (3/5)(3/5) / (6/5)
    assert (result.triples.correct, result.triples.predicted, result.triples.gold) == (8, 10, 9)
    assert (result.paths.correct, result.paths.predicted, result.paths.gold) == (3, 5, 5)
    assert (result.nodes.correct, result.nodes.predicted, result.nodes.gold) == (6, 8, 8)
    assert result.edit_distance_sum == 5 and result.n_nonempty_predictions == 2
    # edit ratio: A1 (7 + 2x5) + (6 + 2x5), A2 (3 + 2x3) x 2 -> 51; 1 - 5/51
    assert result.edit_ratio == Fraction(46, 51)
    assert result.pairing == "position" and result.n_trees == 2 and result.invalid == ()


def test_worked_example_matches_the_smoothed_original_to_1e_6() -> None:
    preds = [entry["tree"] for entry in json.loads((WORKED / "pred.json").read_text())]
    golds = [entry["tree"] for entry in json.loads((WORKED / "gold.json").read_text())]
    baseline = bench.baseline_metrics(preds, golds)
    for name, value in evaluate(preds, golds).metrics().items():
        assert value is not None
        assert bench.close(float(value), baseline[name]), name


def test_gold_against_itself_on_all_500_real_trees(real_trees: list[list[dict[str, Any]]]) -> None:
    assert len(real_trees) == 500
    result = evaluate(real_trees, real_trees)
    assert result.tree_accuracy == 1
    assert result.triple_f1 == 1
    assert result.path_f1 == 1
    assert result.mean_edit_distance == 0
    assert result.node_f1 == 1
    assert result.edit_ratio == 1
    assert result.n_nonempty_predictions == 500


@pytest.mark.parametrize("name", list(HAND_CASES))
def test_hand_built_perturbations(name: str) -> None:
    pred, equal, triples, paths, nodes, distance, ratio_share = HAND_CASES[name]
    score = score_pair(parse_tree(pred), parse_tree(GOLD), with_operations=True)
    assert score.tree_equal is equal
    assert score.nonempty_prediction is bool(pred)
    assert (score.triples.correct, score.triples.predicted, score.triples.gold) == triples
    assert (score.paths.correct, score.paths.predicted, score.paths.gold) == paths
    assert (score.nodes.correct, score.nodes.predicted, score.nodes.gold) == nodes
    assert score.edit_distance == distance
    assert score.edit_ratio_denominator == ratio_share
    assert score.operations is not None
    assert sum(op["cost"] for op in score.operations) == distance


def test_hand_built_perturbations_aggregate() -> None:
    preds = [case[0] for case in HAND_CASES.values()]
    result = evaluate(preds, [GOLD] * len(preds))
    # non-empty predictions 5 (all but "empty"), 1 equal tree.
    assert result.tree_accuracy == Fraction(1, 5)
    # triples 22 correct / 23 predicted / 30 gold -> 44/53
    assert result.triple_f1 == Fraction(44, 53)
    # paths 8 / 15 / 18 -> 16/33
    assert result.path_f1 == Fraction(16, 33)
    # nodes 16 / 20 / 24 -> 32/44
    assert result.node_f1 == Fraction(8, 11)
    # edit distance 2 + 7 + 18 + 15 + 6 + 0 = 48 over 5 non-empty predictions
    assert result.mean_edit_distance == Fraction(48, 5)
    # ratio: 1 - 48 / (25 + 22 + 26 + 13 + 29 + 26) = 1 - 48/141
    assert result.edit_ratio == Fraction(31, 47)
    baseline = bench.baseline_metrics(copy.deepcopy(preds), [copy.deepcopy(GOLD) for _ in preds])
    for name, value in result.metrics().items():
        assert value is not None
        assert bench.close(float(value), baseline[name]), name


def test_edit_operations_of_the_worked_example() -> None:
    result = evaluate(load_trees(WORKED / "pred.json"), load_trees(WORKED / "gold.json"), per_tree=True)
    assert result.per_tree is not None
    first, second = result.per_tree
    ops = [(op["op"], op["position"], op.get("from"), op.get("to"), op.get("triple"))
           for op in first["edit_operations"]]
    assert ops == [
        ("change_logical_rel", "root.R.L", "and", "null", None),
        ("change_logical_rel", "root.R.R", "or", "and", None),
        ("delete_triple", "root.R.R", None, None, ["patient", "rel10", "t10"]),
        ("delete_triple", "root.R.R", None, None, ["patient", "rel11", "t11"]),
        ("insert_triple", "root.R.R", None, None, ["patient", "rel6", "t6"]),
    ]
    assert first["edit_distance"] == 5 and second["edit_distance"] == 0 and second["edit_operations"] == []
    assert second["tree_equal"] and not first["tree_equal"]


def test_lone_node_operations_carry_their_cost() -> None:
    score = score_pair(parse_tree(PRED_PRUNE), parse_tree(GOLD), with_operations=True)
    assert score.operations is not None
    assert [(op["op"], op["position"], op["cost"]) for op in score.operations] == [
        ("change_role", "root.R", 1), ("insert_node", "root.R.L", 4), ("insert_node", "root.R.R", 2)]


def test_matches_the_reimplemented_original_on_perturbed_real_trees() -> None:
    preds, golds = bench.make_workload(3000, seed=7)
    mine: dict[str, float] = {}
    for name, value in evaluate(preds, golds).metrics().items():
        assert value is not None
        mine[name] = float(value)
    assert bench.compare(mine, bench.baseline_metrics(preds, golds)) == []


def test_edit_operations_always_sum_to_the_distance() -> None:
    preds, golds = bench.make_workload(500, seed=3)
    result = evaluate(preds, golds, per_tree=True)
    assert result.per_tree is not None
    for row in result.per_tree:
        assert sum(op["cost"] for op in row["edit_operations"]) == row["edit_distance"]
    assert sum(row["edit_distance"] for row in result.per_tree) == result.edit_distance_sum


def test_triples_are_lower_cased_and_a_set() -> None:
    gold = [node("D", [["Patient", "REL", "Aspirin"]])]
    pred = [node("D", [["patient", "rel", "aspirin"], ["PATIENT", "rel", "aspirin"]])]
    result = evaluate([pred], [gold])
    assert result.tree_accuracy == 1 and result.triple_f1 == 1 and result.mean_edit_distance == 0


def test_node_f1_matches_duplicates_as_a_multiset_unlike_the_original() -> None:
    tree = [node("C", [t("a")]), node("D", [t("b")]), node("D", [t("b")])]
    result = evaluate([tree], [tree])
    assert (result.nodes.correct, result.nodes.predicted, result.nodes.gold) == (3, 3, 3)
    assert result.node_f1 == 1
    # the original counts each (predicted, gold) equal pair: 1 + 2 x 2 = 5 hits out of 3
    assert bench.baseline_nodes(bench._baseline_lowercase(tree), bench._baseline_lowercase(tree)) == (5, 3, 3)


def test_all_predictions_empty_leaves_accuracy_and_mean_distance_undefined() -> None:
    result = evaluate([[], []], [GOLD, GOLD])
    assert result.tree_accuracy is None and result.mean_edit_distance is None
    assert result.triple_f1 == 0 and result.path_f1 == 0 and result.node_f1 == 0
    assert result.edit_distance_sum == 30 and result.edit_ratio == 1 - Fraction(30, 26)
    summary = result.as_dict()
    assert summary["metrics"]["tree_accuracy"] is None and summary["exact"]["tree_accuracy"] is None
    json.dumps(summary)


# --------------------------------------------------------------------------------------------------
# Spellings


def test_parse_tree_structure_and_normal_form() -> None:
    tree = parse_tree(to_seed_spelling(GOLD))
    assert tree.left == (1, -1, 3, -1, -1) and tree.right == (2, -1, 4, -1, -1)
    assert tree.nodes[4] == EMPTY_LEAF and tree.nodes[4].is_empty_leaf
    assert tree.nodes[0] == Node("C", "null", frozenset({("patient", "rel", "a")}))
    assert tree == parse_tree(GOLD)


def test_both_spellings_give_identical_results_on_real_trees() -> None:
    preds, golds = bench.make_workload(1000, seed=11)
    reference = evaluate(preds, golds)
    Spelling = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
    spellings: list[tuple[Spelling, Spelling]] = [
        (to_seed_spelling, to_seed_spelling), (to_seed_spelling, list), (list, to_seed_spelling)]
    for pred_side, gold_side in spellings:
        result = evaluate([pred_side(p) for p in preds], [gold_side(g) for g in golds])
        assert result == reference
    assert reference.n_trees == 1000 and reference.edit_distance_sum > 0


def test_both_spellings_give_identical_results_on_hand_cases() -> None:
    preds = [case[0] for case in HAND_CASES.values()]
    data = evaluate(preds, [GOLD] * len(preds), per_tree=True)
    seed = evaluate([to_seed_spelling(p) for p in preds], [to_seed_spelling(GOLD)] * len(preds), per_tree=True)
    assert seed == data


def test_seed_example_tree_parses() -> None:
    seed_tree = [
        {"role": "c", "triples": [["亚急性甲状腺患者", "临床表现", "轻型"]], "logical_rel": "null"},
        {"role": "d", "triples": [["亚急性甲状腺患者", "治疗药物", "非甾体抗炎药"],
                                  ["亚急性甲状腺患者", "治疗药物", "阿司匹林"]], "logical_rel": "or"},
        {"role": "c", "triples": [["亚急性甲状腺患者", "临床表现", "中型"]], "logical_rel": "null"},
        {"role": "d", "triples": [["亚急性甲状腺患者", "治疗药物", "泼尼松"]], "logical_rel": "null"},
        seed_empty_leaf(),
    ]
    tree = parse_tree(seed_tree)
    assert [n.role for n in tree.nodes] == ["C", "D", "C", "D", "D"] and tree.nodes[-1] == EMPTY_LEAF


def test_empty_leaf_with_json_null_relation_is_the_same_leaf() -> None:
    assert parse_tree([{"role": "D", "triples": [], "logical_rel": None}]).nodes[0] == EMPTY_LEAF
    assert parse_tree([{"role": "", "triples": [], "logical_rel": "null"}]).nodes[0] == EMPTY_LEAF


# --------------------------------------------------------------------------------------------------
# Malformed input


def flip(tree: list[dict[str, Any]], index: int, role: str) -> list[dict[str, Any]]:
    out = copy.deepcopy(tree)
    out[index]["role"] = role
    return out


MALFORMED = {
    # name: (prediction, offending node index, words the message must contain)
    "flip D->C leaves a child missing": (flip(GOLD, 1, "C"), 1, "no right child"),
    "flip C->D leaves trailing nodes": (flip(GOLD, 2, "D"), 3, "trailing node"),
    "flip root C->D": (flip(GOLD, 0, "D"), 1, "trailing node"),
    "trailing node after a leaf": ([node("D", [t("a")]), node("D", [t("b")])], 1, "trailing node"),
    "sequence ends early": ([node("C", [t("a")]), node("D", [t("b")])], 0, "no right child"),
    "lone condition": ([node("C", [t("a")])], 0, "no left child"),
    "unknown role": (flip(GOLD, 3, "X"), 3, "role 'X'"),
    "role is not a string": (flip(GOLD, 3, 1), 3, "role 1"),  # type: ignore[arg-type]  # bad input: role 1
    "two-element triple": ([node("D", [["a", "b"]])], 0, "not three strings"),
    "four-element triple": ([node("D", [t("a"), ["a", "b", "c", "d"]])], 0, "triple 1 is not three strings"),
    "non-string in triple": ([node("D", [["a", "b", 3]])], 0, "not three strings"),
    "triple is a string": ([node("D", ["abc"])], 0, "not three strings"),
    "triples is not a list": ([node("D", "a b c")], 0, "'triples' must be a list"),  # type: ignore[arg-type]  # bad input
    "empty role with triples": ([{"role": "", "triples": [t("a")], "logical_rel": ""}], 0, "empty leaf"),
    "missing field": ([{"role": "D", "triples": []}], 0, "lacks field(s) logical_rel"),
    "node is not an object": ([["D", [], "null"]], 0, "must be an object"),
    "relation is not a string": ([node("D", [t("a")], ["and"])], 0,  # type: ignore[arg-type]  # bad input
                                 "'logical_rel' must be a string"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_prediction_raises_naming_tree_and_node(name: str) -> None:
    pred, node_index, words = MALFORMED[name]
    golds = [GOLD, GOLD, GOLD]
    with pytest.raises(Text2DTError) as caught:
        evaluate([GOLD, GOLD, pred], golds)
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.node_index == node_index
    assert error.tree_ref == "prediction tree 2"
    assert f"prediction tree 2, node {node_index}: " in str(error) and words in str(error)


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_prediction_scores_as_empty_in_zero_mode(name: str) -> None:
    pred, node_index, _ = MALFORMED[name]
    result = evaluate([GOLD, pred], [GOLD, GOLD], on_invalid="zero")
    assert dataclasses.replace(result, invalid=()) == evaluate([GOLD, []], [GOLD, GOLD])
    assert len(result.invalid) == 1
    item = result.invalid[0]
    assert (item.index, item.node_index) == (1, node_index)
    assert result.as_dict()["invalid"][0]["message"].startswith("prediction tree 1, node")


def test_zero_mode_counts_invalid_as_a_wrong_tree() -> None:
    result = evaluate([GOLD, flip(GOLD, 1, "C")], [GOLD, GOLD], on_invalid="zero")
    # the invalid tree adds gold counts and its full edit cost (15), and counts in the tree-accuracy and
    # edit-distance denominators as a wrong tree (1 correct + 1 invalid is 1/2, not 1)
    assert result.n_nonempty_predictions == 1 and result.scored_predictions == 2
    assert result.tree_accuracy == Fraction(1, 2)
    assert result.edit_distance_sum == 15 and result.mean_edit_distance == Fraction(15, 2)
    assert (result.triples.correct, result.triples.predicted, result.triples.gold) == (5, 5, 10)


def test_tree_that_is_not_a_list_is_invalid() -> None:
    with pytest.raises(Text2DTError, match="prediction tree 0: a tree must be a list of nodes"):
        evaluate([{"tree": None}], [GOLD])
    assert len(evaluate([{"tree": None}], [GOLD], on_invalid="zero").invalid) == 1


def test_invalid_gold_always_raises() -> None:
    with pytest.raises(Text2DTError, match="gold tree 0, node 1: trailing node"):
        evaluate([GOLD], [flip(GOLD, 0, "D")], on_invalid="zero")
    with pytest.raises(Text2DTError, match="gold tree 0: gold tree is empty"):
        evaluate([GOLD], [[]], on_invalid="zero")


def test_on_invalid_must_be_known() -> None:
    with pytest.raises(ValueError, match="on_invalid"):
        evaluate([GOLD], [GOLD], on_invalid="skip")  # type: ignore[arg-type]  # bad input: unknown value


# --------------------------------------------------------------------------------------------------
# Pairing and loading


def with_ids(trees: list[Any], prefix: str = "t") -> list[dict[str, Any]]:
    return [{"id": f"{prefix}{i}", "text": "", "tree": tree} for i, tree in enumerate(trees)]


def test_pairs_by_id_when_both_sides_have_ids() -> None:
    golds = [GOLD, PRED_GROW, PRED_SWAP]
    preds = [PRED_DROP, PRED_GROW, PRED_SWAP]
    by_position = evaluate(preds, golds)
    shuffled = [with_ids(preds)[i] for i in (2, 0, 1)]
    by_id = evaluate(shuffled, with_ids(golds))
    assert by_id.pairing == "id" and by_position.pairing == "position"
    assert by_id == dataclasses.replace(by_position, pairing="id")
    # drop (2 edits), grow and swap identical: tree accuracy 2/3, mean edit distance 2/3
    assert by_id.tree_accuracy == Fraction(2, 3) and by_id.mean_edit_distance == Fraction(2, 3)
    # the same shuffle paired by position is a different result
    assert evaluate([entry["tree"] for entry in shuffled], golds).metrics() != by_position.metrics()


def test_pairs_by_position_when_ids_are_partial() -> None:
    preds = with_ids([PRED_SAME, PRED_DROP])
    del preds[1]["id"]
    assert evaluate(preds, with_ids([GOLD, GOLD])).pairing == "position"


def test_missing_prediction_id() -> None:
    golds = with_ids([GOLD, GOLD, GOLD])
    preds = with_ids([GOLD, GOLD])
    with pytest.raises(Text2DTError, match="prediction for gold tree 2 \\(id 't2'\\): no prediction with this id"):
        evaluate(preds, golds)
    result = evaluate(preds, golds, on_invalid="zero")
    assert [(item.index, item.id) for item in result.invalid] == [(2, "t2")]
    assert result.n_nonempty_predictions == 2 and result.edit_distance_sum == 15


def test_unknown_or_duplicate_ids_and_length_mismatch_are_errors() -> None:
    with pytest.raises(Text2DTError, match="not in the gold file"):
        evaluate(with_ids([GOLD], "x"), with_ids([GOLD]))
    with pytest.raises(Text2DTError, match="duplicate id 't0'"):
        evaluate(with_ids([GOLD]) * 2, with_ids([GOLD, GOLD]))
    with pytest.raises(Text2DTError, match="2 predictions but 1 gold trees"):
        evaluate([GOLD, GOLD], [GOLD], on_invalid="zero")


def test_load_trees_formats(tmp_path: Path) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps([GOLD, PRED_DROP]), encoding="utf-8")
    lines = tmp_path / "lines.jsonl"
    lines.write_text("\n".join(json.dumps({"id": i, "tree": tree}) for i, tree in enumerate([GOLD, PRED_DROP])) + "\n")
    from_bare, from_lines = load_trees(bare), load_trees(lines)
    assert [r.nodes for r in from_bare] == [r.nodes for r in from_lines]
    assert [r.id for r in from_bare] == [None, None] and [r.id for r in from_lines] == ["0", "1"]


@pytest.mark.parametrize("content, words", [
    ("{not json", "not valid JSON"),
    ('{"tree": []}', "expected a JSON list of trees"),
])
def test_load_trees_errors(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "trees.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(Text2DTError, match=words):
        load_trees(path)


@pytest.mark.parametrize("entry, words", [
    (GOLD[0], "prediction tree 1: entry has no 'tree' field (it looks like a single node"),
    ({"id": 7, "text": "no tree"}, "prediction tree 1 (id '7'): entry has no 'tree' field"),
    (3, "prediction tree 1: entry must be a node list or an object with 'tree', got int"),
    ({"id": [1], "tree": GOLD}, "prediction tree 1: 'id' must be a string or an integer"),
])
def test_entries_without_a_tree_are_invalid_predictions(entry: object, words: str) -> None:
    with pytest.raises(Text2DTError) as caught:
        evaluate([GOLD, entry], [GOLD, GOLD])
    assert str(caught.value).startswith(words)
    assert [item.index for item in evaluate([GOLD, entry], [GOLD, GOLD], on_invalid="zero").invalid] == [1]
    with pytest.raises(Text2DTError, match="gold tree 1"):
        evaluate([GOLD, GOLD], [GOLD, entry], on_invalid="zero")


def test_load_trees_missing_file(tmp_path: Path) -> None:
    with pytest.raises(Text2DTError, match="cannot read"):
        load_trees(tmp_path / "nope.json")


# --------------------------------------------------------------------------------------------------
# CLI


def run_cli(*args: str) -> Result:
    from consensus_eval.cli import app

    return CliRunner().invoke(app, ["metrics", "text2dt", *args])


def test_cli_json_output() -> None:
    result = run_cli(str(WORKED / "pred.json"), str(WORKED / "gold.json"), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["exact"] == {"tree_accuracy": "1/2", "triple_f1": "16/19", "path_f1": "3/5",
                                "mean_edit_distance": "5/2", "node_f1": "3/4", "edit_ratio": "46/51"}
    assert summary["metrics"]["triple_f1"] == pytest.approx(16 / 19)
    assert summary["counts"]["triples"] == {"correct": 8, "predicted": 10, "gold": 9, "precision": 0.8,
                                            "recall": pytest.approx(8 / 9), "f1": pytest.approx(16 / 19)}
    assert summary["n_trees"] == 2 and summary["pairing"] == "position" and summary["invalid"] == []


def test_cli_table_output() -> None:
    result = run_cli(str(WORKED / "pred.json"), str(WORKED / "gold.json"))
    assert result.exit_code == 0, result.output
    for words in ("Tree accuracy", "Triple F1", "16/19", "Decision-path F1", "Mean edit distance", "5/2",
                  "Node F1", "Edit ratio", "paired by position", "No invalid predictions"):
        assert words in result.stdout


def test_cli_per_tree_file(tmp_path: Path) -> None:
    out = tmp_path / "per_tree.jsonl"
    result = run_cli(str(WORKED / "pred.json"), str(WORKED / "gold.json"), "--per-tree", str(out), "--json")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row["edit_distance"] for row in rows] == [5, 0]
    assert rows[0]["triples"]["correct"] == 5 and rows[0]["tree_equal"] is False
    assert {op["op"] for op in rows[0]["edit_operations"]} == {"change_logical_rel", "delete_triple", "insert_triple"}


def write_trees(tmp_path: Path, name: str, trees: list[Any]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(trees, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_cli_invalid_prediction_exits_2_without_traceback(tmp_path: Path) -> None:
    pred = write_trees(tmp_path, "pred.json", [GOLD, flip(GOLD, 2, "D")])
    gold = write_trees(tmp_path, "gold.json", [GOLD, GOLD])
    result = run_cli(pred, gold)
    assert result.exit_code == 2
    assert "error: prediction tree 1, node 3: trailing node" in result.stderr
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)


def test_cli_zero_mode_lists_invalid_trees(tmp_path: Path) -> None:
    pred = write_trees(tmp_path, "pred.json", [GOLD, flip(GOLD, 2, "D")])
    gold = write_trees(tmp_path, "gold.json", [GOLD, GOLD])
    result = run_cli(pred, gold, "--on-invalid", "zero", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert [(item["index"], item["node_index"]) for item in summary["invalid"]] == [(1, 3)]
    assert summary["counts"]["trees"]["nonempty_predictions"] == 1
    table = run_cli(pred, gold, "--on-invalid", "zero")
    assert "1 invalid prediction(s) scored as empty" in table.stdout and "node 3" in table.stdout


def test_cli_missing_file_exits_2(tmp_path: Path) -> None:
    result = run_cli(str(tmp_path / "missing.json"), str(WORKED / "gold.json"))
    assert result.exit_code == 2 and "cannot read" in result.stderr and "Traceback" not in result.output


def test_cli_pairing_is_reported(tmp_path: Path) -> None:
    pred = write_trees(tmp_path, "pred.json", list(reversed(with_ids([PRED_DROP, GOLD]))))
    gold = write_trees(tmp_path, "gold.json", with_ids([GOLD, GOLD]))
    summary = json.loads(run_cli(pred, gold, "--json").stdout)
    assert summary["pairing"] == "id" and summary["exact"]["mean_edit_distance"] == "1"


def test_metrics_modules_import_nothing_heavy() -> None:
    code = ("import sys, consensus_eval.metrics.text2dt, consensus_eval.metrics.commands; "
            "heavy = [m for m in ('litellm', 'instructor', 'openai', 'numpy', 'pydantic') if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
