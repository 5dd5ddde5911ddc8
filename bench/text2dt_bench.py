"""Benchmark: Text2DT metrics on 50,000 trees, against a reimplementation of the organisers' scorer.

The gold trees are the 500 real Text2DT trees, repeated; each prediction is its gold tree perturbed
deterministically (seeded): triples dropped, added, re-cased or duplicated, logical relations
changed, subtrees grown, pruned or swapped, and about 1% empty predictions. All trees stay
well-formed, since the original hangs or crashes otherwise.

The baseline follows the algorithm of the organisers' ``eval_func.py`` as SOURCE.md describes it,
naively: an n x n parent/child matrix built by repeated scans of the role list, leaf tests and parent
look-ups by scanning matrix rows, every predicted path compared with every gold path, node pairs
compared all against all (so duplicates count twice), and every counter started at 1e-6.

    python bench/text2dt_bench.py [--trees 50000] [--runs 5] [--seed 0]

Prints the medians of ``--runs`` timed runs of each side, the peak traced memory of one extra run of
each, checks that both give the same metrics (up to ~1e-6), and prints the speed ratio last.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from consensus_eval.metrics.text2dt import evaluate

DATA_DIR = Path("/work/shared/data/text2dt")
SPLITS = ("train", "dev", "test")
SMOOTHING = 0.000001
TOLERANCE = 1e-6

# --------------------------------------------------------------------------------------------------
# Baseline: the organisers' algorithm, reimplemented as they wrote it (naive on purpose).

_NO_NODE = {"role": "", "triples": [], "logical_rel": ""}


def baseline_matrix(tree: list[dict]) -> list[list[Any]]:
    """matrix[i][j] = 'F' / 'L' / 'R': node j is the parent / left child / right child of node i.

    Repeatedly finds the first condition node whose next two unconsumed entries are complete
    subtrees (marked 'D'), links them, and marks the subtree consumed ('X').
    """
    marks = [node["role"] for node in tree]
    size = len(marks)
    matrix: list[list[Any]] = [[0] * size for _ in range(size)]
    if size == 0:
        return matrix
    while marks[0] != "D":
        for i in range(size):
            if marks[i] != "C":
                continue
            first, linked = -1, False
            for j in range(i + 1, size):
                if marks[j] == "D" and first < 0:
                    first = j
                elif marks[j] == "X":
                    continue
                elif marks[j] == "D":
                    marks[i] = "D"
                    matrix[first][i] = matrix[j][i] = "F"
                    matrix[i][first], matrix[i][j] = "L", "R"
                    for k in range(i + 1, j + 1):
                        marks[k] = "X"
                    linked = True
                    break
                elif marks[j] == "C":
                    break
            if linked:
                break
    return matrix


def baseline_node_dis(a: dict, b: dict | None) -> int:
    b = _NO_NODE if b is None else b
    cost = (a["role"] != b["role"]) + (a["logical_rel"] != b["logical_rel"])
    return cost + len((set(a["triples"]) | set(b["triples"])) - (set(a["triples"]) & set(b["triples"])))


def _is_leaf(row: list[Any]) -> bool:
    return "L" not in row and "R" not in row


def _add_subtree(tree: list[dict], matrix: list[list[Any]], root: int) -> int:
    cost, stack = 0, [matrix[root].index("R"), matrix[root].index("L")]
    while stack:
        index = stack.pop()
        cost += baseline_node_dis(tree[index], None)
        if "L" in matrix[index] and "R" in matrix[index]:
            stack += [matrix[index].index("R"), matrix[index].index("L")]
    return cost


def baseline_edit_distance(pred: list[dict], gold: list[dict], pm: list[list[Any]], gm: list[list[Any]]) -> int:
    if not pm:
        return sum(baseline_node_dis(node, None) for node in gold)
    cost, stack1, stack2 = 0, [0], [0]
    while stack1:
        s1, s2 = stack1.pop(), stack2.pop()
        cost += baseline_node_dis(pred[s1], gold[s2])
        if _is_leaf(pm[s1]) and not _is_leaf(gm[s2]):
            cost += _add_subtree(gold, gm, s2)
        elif not _is_leaf(pm[s1]) and _is_leaf(gm[s2]):
            cost += _add_subtree(pred, pm, s1)
        elif not _is_leaf(pm[s1]):
            stack1 += [pm[s1].index("R"), pm[s1].index("L")]
            stack2 += [gm[s2].index("R"), gm[s2].index("L")]
    return cost


def _baseline_paths(tree: list[dict], matrix: list[list[Any]]) -> list[list[Any]]:
    paths = []
    for leaf in [i for i in range(len(matrix)) if _is_leaf(matrix[i])]:
        path, node = [tree[leaf]], leaf
        while node != 0:
            parent = matrix[node].index("F")
            path += [matrix[parent][node], tree[parent]]
            node = parent
        paths.append(path)
    return paths


def _baseline_path_equal(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, dict) and isinstance(y, dict):
            if not (x["role"] == y["role"] and x["logical_rel"] == y["logical_rel"]
                    and set(x["triples"]) == set(y["triples"])):
                return False
        elif x != y:
            return False
    return True


def baseline_paths(pred, gold, pm, gm) -> tuple[int, int, int]:
    pred_paths, gold_paths = _baseline_paths(pred, pm), _baseline_paths(gold, gm)
    correct = sum(1 for p in pred_paths if any(_baseline_path_equal(p, g) for g in gold_paths))
    return correct, len(pred_paths), len(gold_paths)


def _baseline_nodes_equal(a: dict, b: dict) -> bool:
    return a["role"] == b["role"] and a["logical_rel"] == b["logical_rel"] and set(a["triples"]) == set(b["triples"])


def baseline_tree_equal(pred: list[dict], gold: list[dict]) -> int:
    return int(len(pred) == len(gold) and all(_baseline_nodes_equal(p, g) for p, g in zip(pred, gold, strict=True)))


def baseline_triples(pred, gold) -> tuple[int, int, int]:
    p = set(t for node in pred for t in node["triples"])
    g = set(t for node in gold for t in node["triples"])
    return len(p & g), len(p), len(g)


def baseline_nodes(pred, gold) -> tuple[int, int, int]:
    p = [node for node in pred if node["triples"]]
    g = [node for node in gold if node["triples"]]
    correct = sum(1 for a in p for b in g if _baseline_nodes_equal(a, b))  # duplicates count twice
    return correct, len(p), len(g)


def _baseline_lowercase(tree: list[dict]) -> list[dict]:
    return [{"role": n["role"], "logical_rel": n["logical_rel"],
             "triples": [(t[0].lower(), t[1].lower(), t[2].lower()) for t in n["triples"]]} for n in tree]


def baseline_eval_one(pred: list[dict], gold: list[dict]) -> tuple[int, ...]:
    pred, gold = _baseline_lowercase(pred), _baseline_lowercase(gold)
    pm, gm = baseline_matrix(pred), baseline_matrix(gold)
    return (0 if pred == [] else 1, baseline_tree_equal(pred, gold), *baseline_triples(pred, gold),
            *baseline_paths(pred, gold, pm, gm), baseline_edit_distance(pred, gold, pm, gm),
            *baseline_nodes(pred, gold))


def _smoothed_f1(correct: float, predicted: float, gold: float) -> float:
    p, r = correct / predicted, correct / gold
    return 2 * p * r / (p + r)


def baseline_metrics(preds: list[list[dict]], golds: list[list[dict]]) -> dict[str, float]:
    """The organisers' aggregation (counters start at 1e-6) plus PromptCBLUE's edit ratio."""
    sums = [SMOOTHING] * 12
    sums[8] = 0  # the edit distance starts at 0
    max_edits = 0
    for pred, gold in zip(preds, golds, strict=True):
        counts = baseline_eval_one(pred, gold)
        sums = [s + c for s, c in zip(sums, counts, strict=True)]
        max_edits += counts[3] + 2 * counts[10] + counts[4] + 2 * counts[11]
    trees, correct_trees, *rest = sums
    return {
        "tree_accuracy": correct_trees / trees,
        "triple_f1": _smoothed_f1(rest[0], rest[1], rest[2]),
        "path_f1": _smoothed_f1(rest[3], rest[4], rest[5]),
        "mean_edit_distance": rest[6] / trees,
        "node_f1": _smoothed_f1(rest[7], rest[8], rest[9]),
        "edit_ratio": 1 - rest[6] / max_edits,
    }


# --------------------------------------------------------------------------------------------------
# Deterministic perturbations (on nested trees: [node, left, right] for a condition, [node] for a leaf)


def to_nested(nodes: list[dict]) -> list[Any]:
    position = 0

    def build() -> list[Any]:
        nonlocal position
        node = nodes[position]
        position += 1
        return [node, build(), build()] if node["role"] == "C" else [node]

    return build()


def to_preorder(tree: list[Any]) -> list[dict]:
    out = [tree[0]]
    for child in tree[1:]:
        out += to_preorder(child)
    return out


def _subtrees(tree: list[Any]) -> list[list[Any]]:
    found = [tree]
    for child in tree[1:]:
        found += _subtrees(child)
    return found


def _empty_leaf() -> dict:
    return {"role": "D", "triples": [], "logical_rel": "null"}


def _with_triples(node: dict) -> bool:
    return bool(node["triples"])


def perturb(gold: list[dict], rng: random.Random) -> list[dict]:
    """A well-formed prediction derived from ``gold`` by 0-3 random edits (1% empty)."""
    if rng.random() < 0.01:
        return []
    tree = to_nested(copy.deepcopy(gold))
    for _ in range(rng.randint(0, 3)):
        subtrees = _subtrees(tree)
        target = rng.choice(subtrees)
        node = target[0]
        kind = rng.choice(("drop", "add", "relation", "case", "duplicate", "grow", "prune", "swap"))
        if kind == "drop" and node["triples"]:
            node["triples"].pop(rng.randrange(len(node["triples"])))
        elif kind == "add":
            node["triples"].append(["患者", "治疗药物", f"药物{rng.randrange(50)}"])
        elif kind == "relation":
            node["logical_rel"] = rng.choice([r for r in ("and", "or", "null") if r != node["logical_rel"]])
        elif kind == "case" and node["triples"]:
            i = rng.randrange(len(node["triples"]))
            node["triples"][i] = [part.upper() for part in node["triples"][i]]
        elif kind == "duplicate" and node["triples"]:
            node["triples"].append(list(rng.choice(node["triples"])))
        elif kind == "grow" and len(target) == 1:
            donor = rng.choice([s[0] for s in subtrees if _with_triples(s[0])] or [node])
            target[:] = [{**node, "role": "C"}, [copy.deepcopy({**donor, "role": "D"})], [_empty_leaf()]]
        elif kind == "prune" and len(target) == 3:
            target[:] = [rng.choice([{**node, "role": "D"}, _empty_leaf()])]
        elif kind == "swap" and len(target) == 3:
            target[1], target[2] = target[2], target[1]
    return to_preorder(tree)


def load_gold_trees() -> list[list[dict]]:
    trees = []
    for split in SPLITS:
        trees += [entry["tree"] for entry in json.loads((DATA_DIR / f"Text2DT_{split}.json").read_text("utf-8"))]
    return trees


def make_workload(n_trees: int, seed: int) -> tuple[list[list[dict]], list[list[dict]]]:
    """``n_trees`` (prediction, gold) pairs: the real trees repeated, each prediction perturbed."""
    real = load_gold_trees()
    rng = random.Random(seed)
    golds = [real[i % len(real)] for i in range(n_trees)]
    preds = [perturb(gold, rng) for gold in golds]
    return preds, golds


def chain(trees: list[list[dict]]) -> list[dict]:
    """One large well-formed tree: each tree replaces the right-most (last pre-order) leaf of the previous."""
    out: list[dict] = []
    for tree in trees:
        out = out[:-1] + copy.deepcopy(tree)
    return out


def make_large_workload(n_trees: int, per_tree: int, seed: int) -> tuple[list[list[dict]], list[list[dict]]]:
    """``n_trees`` pairs of large trees, each gold chaining ``per_tree`` real trees (scaling check)."""
    real = load_gold_trees()
    rng = random.Random(seed)
    golds = [chain([real[(i * per_tree + k) % len(real)] for k in range(per_tree)]) for i in range(n_trees)]
    preds = [perturb(gold, rng) for gold in golds]
    return preds, golds


# --------------------------------------------------------------------------------------------------
# Timing


def ours(preds: list[list[dict]], golds: list[list[dict]]) -> dict[str, float]:
    result = evaluate(preds, golds)
    return {name: float(value) for name, value in result.metrics().items()}


def time_runs(function: Callable[..., Any], args: tuple, runs: int) -> tuple[list[float], Any]:
    times, value = [], None
    for _ in range(runs):
        start = time.perf_counter()
        value = function(*args)
        times.append(time.perf_counter() - start)
    return times, value


def peak_memory(function: Callable[..., Any], args: tuple) -> int:
    tracemalloc.start()
    try:
        function(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def close(mine: float, baseline: float) -> bool:
    """Equal up to the original's 1e-6 smoothing (relative for values above 1, e.g. edit distances)."""
    return abs(mine - baseline) <= TOLERANCE * max(1.0, abs(baseline))


def compare(mine: dict[str, float], baseline: dict[str, float]) -> list[str]:
    """Metric names whose values are not :func:`close` (node F1 is reported, not checked)."""
    return [name for name in mine if name != "node_f1" and not close(mine[name], baseline[name])]


def report_scaling(preds: list[list[dict]], golds: list[list[dict]], runs: int) -> None:
    """Secondary check on large trees, where the baseline's matrix scans and all-pairs path
    comparisons dominate. Printed first, so the main ratio stays the last line."""
    n_nodes = sum(map(len, golds))
    our_times, mine = time_runs(ours, (preds, golds), runs)
    base_times, base = time_runs(baseline_metrics, (preds, golds), runs)
    mismatched = compare(mine, base)
    our_median, base_median = statistics.median(our_times), statistics.median(base_times)
    print(f"scaling check: {len(golds)} large trees ({n_nodes / len(golds):.0f} gold nodes on average): "
          f"ours {our_median:.3f} s, baseline {base_median:.3f} s (median of {runs}), "
          f"{base_median / our_median:.1f}x; values "
          + ("equal up to 1e-6" if not mismatched else f"MISMATCH in {', '.join(mismatched)}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--large-trees", type=int, default=100,
                        help="also time this many large trees (0 to skip), each chaining --chain real trees")
    parser.add_argument("--chain", type=int, default=20)
    args = parser.parse_args(argv)

    if args.large_trees:
        report_scaling(*make_large_workload(args.large_trees, args.chain, args.seed), runs=args.runs)

    preds, golds = make_workload(args.trees, args.seed)
    print(f"workload: {args.trees} tree pairs (500 real trees repeated, perturbed with seed {args.seed}), "
          f"{sum(map(len, preds))} predicted / {sum(map(len, golds))} gold nodes, "
          f"{sum(1 for p in preds if not p)} empty predictions")

    our_times, mine = time_runs(ours, (preds, golds), args.runs)
    base_times, base = time_runs(baseline_metrics, (preds, golds), args.runs)
    our_peak, base_peak = peak_memory(ours, (preds, golds)), peak_memory(baseline_metrics, (preds, golds))

    print(f"{'metric':<20}{'ours':>14}{'baseline':>14}")
    for name in mine:
        print(f"{name:<20}{mine[name]:>14.8f}{base[name]:>14.8f}")
    mismatched = compare(mine, base)
    print("values: " + ("equal up to 1e-6 (node F1 excluded: the baseline counts duplicate nodes twice)"
                        if not mismatched else f"MISMATCH in {', '.join(mismatched)}"))
    our_median, base_median = statistics.median(our_times), statistics.median(base_times)
    print(f"ours:     median {our_median:.3f} s over {args.runs} runs "
          f"({', '.join(f'{t:.3f}' for t in our_times)}), peak traced memory {our_peak / 2**20:.2f} MiB")
    print(f"baseline: median {base_median:.3f} s over {args.runs} runs "
          f"({', '.join(f'{t:.3f}' for t in base_times)}), peak traced memory {base_peak / 2**20:.2f} MiB")
    print(f"ratio (baseline / ours median time): {base_median / our_median:.2f}x")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
