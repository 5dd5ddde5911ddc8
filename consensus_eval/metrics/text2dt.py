"""Text2DT metrics (CHIP-2022 shared task 3), with exact parity to the organisers' scorer.

A Text2DT prediction is a medical decision tree written as its pre-order node list. Every node is
``{"role": "C"|"D", "triples": [[head, relation, tail], ...], "logical_rel": "and"|"or"|"null"}``;
a condition node (``C``) always has two children (yes = left, no = right), a decision node (``D``)
is a leaf, and an unknown branch is an *empty leaf*.

The four official metrics, computed exactly as the organisers' ``eval_func.py`` does on well-formed
input (see ``/work/shared/data/text2dt/SOURCE.md``):

* **triple F1** -- per tree, the set of all triples of all nodes (lower-cased); true positives,
  predicted and gold counts are summed over the data set (micro average);
* **tree accuracy** -- a tree is correct when every pre-order node is equal (role, logical relation,
  triple set); the denominator counts only *non-empty* predictions (an empty prediction is not in it);
* **decision-path F1** -- a path runs from the root to a leaf (empty leaves included) and records
  each node and each left/right turn; a predicted path is correct when the gold tree has an equal
  path; micro average over the data set;
* **mean edit distance** -- both trees are walked from the root and nodes are matched by position
  (left with left, right with right); a matched pair costs 1 if the roles differ, 1 if the logical
  relations differ, plus the size of the symmetric difference of the triple sets; a node present on
  one side only costs 2 + its number of triples (the scorer compares it with
  ``{role: '', triples: [], logical_rel: ''}``); the sum is divided by the number of non-empty
  predictions.

Two extras:

* **node F1** -- a node with at least one triple is the key (role, logical relation, triple set);
  predicted and gold keys of a tree are matched as *multisets* (a key seen twice in the prediction and
  once in the gold is one hit, one false positive). The organisers' scorer instead counted every
  (predicted, gold) equal pair, so a tree with two identical nodes scored 4 hits out of 2, and its
  node precision could exceed 1 (6 of the 500 real gold trees have such duplicates);
* **edit ratio** -- the normalisation used later by PromptCBLUE:
  ``1 - sum(edit distance) / sum(#triples + 2 x #nodes with triples, over prediction and gold)``,
  with per-tree triple counts as sets. The edit distance is the organisers' (CHIP) one above; note that
  PromptCBLUE's own copy of the scorer compares a missing node with ``logical_rel: 'null'``, so there a
  missing ``null`` node costs 1 + its triples. The ratio can be negative when structures differ a lot.

Exact values: every ratio is a :class:`fractions.Fraction` of integer counts. The organisers start
every counter (not the edit-distance sum) at ``1e-6``, so their values are off by a relative error of
about ``1e-6`` divided by the counts involved: ~1e-8 for F1s on the test set, but 2.49999875 instead of
5/2 for the mean edit distance of the two-tree worked example. A ratio whose denominator is 0 is
``None`` here; the original turns ``0/0`` into 1.0 (e.g. tree accuracy when every prediction is empty)
and ``x/0`` into ``x * 1e6`` (mean edit distance in the same case).

Input normalisation (both spellings give identical numbers):

* roles ``c``/``d`` are upper-cased (the original hangs on lower-case roles);
* the task description's empty leaf ``{"role": "", "triples": "", "logical_rel": ""}`` becomes the data
  set's ``{"role": "D", "triples": [], "logical_rel": "null"}``; the organisers' scorer only runs on the
  data-set spelling, so that is the spelling whose numbers we reproduce (a missing empty leaf costs 2);
* a logical relation written ``""`` or ``null`` (JSON) means "no relation" and becomes ``"null"``; any
  other string is compared verbatim, as the original does;
* triples are lower-cased and form a set inside a node, as in the original.

Where the original hangs or crashes (malformed pre-order sequence, unknown role, trailing nodes, a
triple that is not three strings, an empty gold tree) :func:`parse_tree` and :func:`evaluate` raise
:class:`Text2DTError` naming the tree and the node. With ``on_invalid="zero"`` an invalid *prediction*
is scored as a wrong tree: it predicts nothing (it adds gold counts and its full edit cost, like an
empty prediction) and, unlike an empty prediction in the original, it *does* count in the tree-accuracy
and mean-edit-distance denominators, so a file of one correct and one invalid tree has tree accuracy
1/2, not 1. It is listed in :attr:`Text2DTResult.invalid`. Invalid *gold* trees always raise.
"""

from __future__ import annotations

import errno
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, NamedTuple

from consensus_eval._errors import InputError, UsageError
from consensus_eval.domain.textio import jsonl_values, read_json

__all__ = [
    "EMPTY_LEAF",
    "MAX_TREE_NODES",
    "F1Counts",
    "InvalidTree",
    "Node",
    "Text2DTError",
    "Text2DTResult",
    "Tree",
    "TreeRecord",
    "TreeScore",
    "as_records",
    "evaluate",
    "load_trees",
    "pair_records",
    "parse_tree",
    "score_pair",
]

OnInvalid = Literal["error", "zero"]
Pairing = Literal["id", "position"]
Triple = tuple[str, str, str]

NO_RELATION = "null"
MAX_TREE_NODES = 2_000
"""The most nodes a tree may have (:func:`parse_tree` refuses more): decision paths and edit positions are as
long as the tree is deep, so a chain of 40,001 nodes would cost O(n^2) time and memory."""
MISSING_NODE_BASE_COST = 2
"""A node present on one side only differs from ``{role: '', logical_rel: ''}`` in role and relation."""


# --------------------------------------------------------------------------------------------------
# Errors


class Text2DTError(InputError):
    """Input the organisers' scorer would hang or crash on, or a file that cannot be read.

    ``tree_ref`` names the tree (e.g. ``"prediction tree 3 (id 'a7')"``), ``node_index`` the 0-based
    position of the offending node in the pre-order list (``None`` when the whole tree or file is at
    fault), ``reason`` says what is wrong.
    """

    def __init__(self, reason: str, *, tree_ref: str | None = None, node_index: int | None = None):
        self.reason = reason
        self.tree_ref = tree_ref
        self.node_index = node_index
        where = [part for part in (tree_ref, None if node_index is None else f"node {node_index}") if part]
        super().__init__(f"{', '.join(where)}: {reason}" if where else reason)


# --------------------------------------------------------------------------------------------------
# Parsed trees


class Node(NamedTuple):
    """One normalised node; the node is its own key (what the organisers compare).

    ``role`` is ``"C"`` (condition) or ``"D"`` (decision or empty leaf); ``logical_rel`` the relation
    between the triples (``"and"``, ``"or"``, ``"null"`` for none); ``triples`` the lower-cased set.
    Two nodes are equal exactly when role, logical relation and triple set are.
    """

    role: str
    logical_rel: str
    triples: frozenset[Triple]

    @property
    def is_empty_leaf(self) -> bool:
        """A decision node without triples: the "unknown next step" leaf."""
        return self.role == "D" and not self.triples


EMPTY_LEAF = Node("D", NO_RELATION, frozenset())
"""The internal form of both spellings of the empty leaf."""


@dataclass(frozen=True, slots=True)
class Tree:
    """A full binary decision tree, kept in pre-order.

    ``left[i]`` / ``right[i]`` are the pre-order indices of node ``i``'s children, ``-1`` for a leaf.
    An empty tree (no nodes) is a valid, empty *prediction*. Two trees are equal (tree accuracy)
    exactly when their ``nodes`` are: the roles fix the shape.
    """

    nodes: tuple[Node, ...]
    left: tuple[int, ...]
    right: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.nodes)

    def triple_set(self) -> frozenset[Triple]:
        """All triples of the tree, as one set (what triple F1 counts)."""
        return frozenset().union(*[node.triples for node in self.nodes])

    def paths(self) -> set[tuple[Any, ...]]:
        """Every root-to-leaf decision path: ``(node, 'L'|'R', node, ..., leaf)``, empty leaves included."""
        nodes, left, right = self.nodes, self.left, self.right
        found: set[tuple[Any, ...]] = set()
        stack: list[tuple[int, tuple[Any, ...]]] = [(0, ())] if nodes else []
        while stack:
            index, prefix = stack.pop()
            here = (*prefix, nodes[index])
            if left[index] < 0:
                found.add(here)
            else:
                stack.append((right[index], (*here, "R")))
                stack.append((left[index], (*here, "L")))
        return found

    def nodes_with_triples(self) -> list[Node]:
        """The nodes that have at least one triple (what node F1 and the edit ratio count)."""
        return [node for node in self.nodes if node.triples]


EMPTY_TREE = Tree((), (), ())


def _is_triple(triple: Any) -> bool:
    return isinstance(triple, (list, tuple)) and len(triple) == 3 and all(isinstance(x, str) for x in triple)


def _normalise_triples(raw: Any, tree_ref: str | None, index: int) -> frozenset[Triple]:
    if raw is None or raw == "":
        return frozenset()
    if not isinstance(raw, (list, tuple)):
        raise Text2DTError(f"'triples' must be a list of [head, relation, tail], got {raw!r}",
                           tree_ref=tree_ref, node_index=index)
    triples = []
    for position, triple in enumerate(raw):
        if not _is_triple(triple):
            raise Text2DTError(f"triple {position} is not three strings: {triple!r}",
                               tree_ref=tree_ref, node_index=index)
        triples.append((triple[0].lower(), triple[1].lower(), triple[2].lower()))
    return frozenset(triples)


def _normalise_logical_rel(raw: Any, tree_ref: str | None, index: int) -> str:
    if raw is None or raw == "":
        return NO_RELATION
    if not isinstance(raw, str):
        raise Text2DTError(f"'logical_rel' must be a string, got {raw!r}", tree_ref=tree_ref, node_index=index)
    return raw


_ROLES = {"C": "C", "D": "D", "c": "C", "d": "D"}


def _common_node(raw: Any) -> Node | None:
    """The internal form of a node in the common, well-formed shape (dict, role C/D/c/d, string
    relation, list of three-string lists), or ``None`` for anything else. Only exact types are
    accepted, so this is fast; :func:`normalise_node` handles (and reports) everything else."""
    if type(raw) is not dict:
        return None
    role, relation, raw_triples = raw.get("role"), raw.get("logical_rel"), raw.get("triples")
    if type(role) is not str or type(relation) is not str or not relation or type(raw_triples) is not list:
        return None
    role = _ROLES.get(role)
    if role is None:
        return None
    triples = []
    for triple in raw_triples:
        if type(triple) is not list or len(triple) != 3:
            return None
        head, relation_name, tail = triple
        if type(head) is not str or type(relation_name) is not str or type(tail) is not str:
            return None
        triples.append((head.lower(), relation_name.lower(), tail.lower()))
    return Node(role, relation, frozenset(triples))


def normalise_node(raw: Any, *, tree_ref: str | None = None, index: int = 0) -> Node:
    """Validate one raw node (either spelling) and return its internal form.

    Raises :class:`Text2DTError` for a non-object, a missing field, a role other than C/D/c/d or
    ``''`` (empty leaf), an empty-role node with triples, or a triple that is not three strings.
    """
    node = _common_node(raw)
    if node is not None:
        return node
    if not isinstance(raw, Mapping):
        raise Text2DTError(f"a node must be an object with role, triples, logical_rel; got {raw!r}",
                           tree_ref=tree_ref, node_index=index)
    missing = [name for name in ("role", "triples", "logical_rel") if name not in raw]
    if missing:
        raise Text2DTError(f"node lacks field(s) {', '.join(missing)}", tree_ref=tree_ref, node_index=index)
    role = raw["role"]
    triples = _normalise_triples(raw["triples"], tree_ref, index)
    logical_rel = _normalise_logical_rel(raw["logical_rel"], tree_ref, index)
    if role == "":
        if triples:
            raise Text2DTError("role '' marks an empty leaf, but the node has triples",
                               tree_ref=tree_ref, node_index=index)
        return EMPTY_LEAF if logical_rel == NO_RELATION else Node("D", logical_rel, triples)
    canonical = _ROLES.get(role) if isinstance(role, str) else None
    if canonical is None:
        raise Text2DTError(f"role {role!r} is not C, D (c, d) or '' (empty leaf)", tree_ref=tree_ref, node_index=index)
    return Node(canonical, logical_rel, triples)


def link_preorder(roles: Sequence[str], *, tree_ref: str | None = None) -> tuple[list[int], list[int]]:
    """Children of each node of a pre-order role sequence (``"C"``/``"D"``); ``-1`` marks a leaf.

    Each node is the next child of the deepest condition node still missing one. Raises
    :class:`Text2DTError` for a node after the tree is complete (trailing node) or a sequence that
    ends while a condition node still lacks a child.
    """
    size = len(roles)
    left, right = [-1] * size, [-1] * size
    waiting: list[int] = []  # condition nodes still missing a child, deepest last
    for index, role in enumerate(roles):
        if index:
            if not waiting:
                raise Text2DTError(f"trailing node: the tree is already complete after node {index - 1} "
                                   f"({size - index} node(s) left over)", tree_ref=tree_ref, node_index=index)
            parent = waiting[-1]
            if left[parent] < 0:
                left[parent] = index
            else:
                right[parent] = index
                waiting.pop()
        if role == "C":
            waiting.append(index)
    if waiting:
        parent = waiting[-1]
        side = "left" if left[parent] < 0 else "right"
        raise Text2DTError(f"condition node has no {side} child: the sequence ends after node {size - 1} "
                           "(every condition node needs two children; write an empty leaf for an unknown branch)",
                           tree_ref=tree_ref, node_index=parent)
    return left, right


def parse_tree(nodes: Any, *, tree_ref: str | None = None) -> Tree:
    """Parse a pre-order node list (either spelling) into a full binary :class:`Tree`.

    ``tree_ref`` names the tree in error messages. An empty list gives the empty tree.
    Raises :class:`Text2DTError` when the input is not a list, a node is invalid, or the sequence is
    not the pre-order of a full binary tree.
    """
    if not isinstance(nodes, (list, tuple)):
        raise Text2DTError(f"a tree must be a list of nodes, got {type(nodes).__name__}", tree_ref=tree_ref)
    if len(nodes) > MAX_TREE_NODES:
        raise Text2DTError(f"{len(nodes):,} nodes, more than the {MAX_TREE_NODES:,} a tree may have (a decision "
                           "tree of a clinical text has tens; the metrics' cost grows with the square of a "
                           "tree's depth)", tree_ref=tree_ref)
    parsed = tuple([normalise_node(raw, tree_ref=tree_ref, index=index) for index, raw in enumerate(nodes)])
    left, right = link_preorder([node.role for node in parsed], tree_ref=tree_ref)
    return Tree(parsed, tuple(left), tuple(right))


# --------------------------------------------------------------------------------------------------
# Per-tree scores


@dataclass(frozen=True, slots=True)
class F1Counts:
    """Counts behind an F1: ``correct`` hits, ``predicted`` and ``gold`` totals."""

    correct: int = 0
    predicted: int = 0
    gold: int = 0

    def __add__(self, other: F1Counts) -> F1Counts:
        return F1Counts(self.correct + other.correct, self.predicted + other.predicted, self.gold + other.gold)

    @property
    def precision(self) -> Fraction | None:
        """correct / predicted; ``None`` when nothing was predicted."""
        return Fraction(self.correct, self.predicted) if self.predicted else None

    @property
    def recall(self) -> Fraction | None:
        """correct / gold; ``None`` when the gold has nothing."""
        return Fraction(self.correct, self.gold) if self.gold else None

    @property
    def f1(self) -> Fraction | None:
        """2 x correct / (predicted + gold), the harmonic mean of precision and recall (0 if either is
        undefined and the other side is not empty); ``None`` when both sides are empty."""
        total = self.predicted + self.gold
        return Fraction(2 * self.correct, total) if total else None

    def as_dict(self) -> dict[str, Any]:
        return {"correct": self.correct, "predicted": self.predicted, "gold": self.gold,
                "precision": _as_float(self.precision), "recall": _as_float(self.recall), "f1": _as_float(self.f1)}


@dataclass(frozen=True, slots=True)
class TreeScore:
    """Everything one (prediction, gold) pair contributes.

    ``nonempty_prediction``: counts in the tree-accuracy and edit-distance denominators;
    ``tree_equal``: the prediction is correct for tree accuracy; ``edit_distance``: positional edit
    cost; ``edit_ratio_denominator``: this pair's share of the PromptCBLUE edit-ratio denominator;
    ``operations``: the edits turning the prediction into the gold (only when requested).
    """

    nonempty_prediction: bool
    tree_equal: bool
    triples: F1Counts
    paths: F1Counts
    nodes: F1Counts
    edit_distance: int
    edit_ratio_denominator: int
    operations: tuple[dict[str, Any], ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {"nonempty_prediction": self.nonempty_prediction, "tree_equal": self.tree_equal,
               "triples": self.triples.as_dict(), "paths": self.paths.as_dict(), "nodes": self.nodes.as_dict(),
               "edit_distance": self.edit_distance, "edit_ratio_denominator": self.edit_ratio_denominator}
        if self.operations is not None:
            out["edit_operations"] = list(self.operations)
        return out


def _overlap(predicted: set[Any] | frozenset[Any], expected: set[Any] | frozenset[Any]) -> tuple[int, int, int]:
    """(hits, predicted, gold) for two sets."""
    return len(predicted & expected), len(predicted), len(expected)


def _multiset_overlap(predicted: list[Any], expected: list[Any]) -> tuple[int, int, int]:
    """(hits, predicted, gold) for two multisets: an item seen k times on one side and m on the other
    is min(k, m) hits (sets when neither side repeats an item, which is the common case)."""
    predicted_set, expected_set = set(predicted), set(expected)
    if len(predicted_set) == len(predicted) and len(expected_set) == len(expected):
        return len(predicted_set & expected_set), len(predicted), len(expected)
    return sum((Counter(predicted) & Counter(expected)).values()), len(predicted), len(expected)


def node_distance(pred: Node, gold: Node) -> int:
    """Cost of a position matched on both sides: role + logical relation + triple symmetric difference."""
    return (pred.role != gold.role) + (pred.logical_rel != gold.logical_rel) + len(pred.triples ^ gold.triples)


def missing_node_cost(node: Node) -> int:
    """Cost of a node present on one side only: 2 + its triples."""
    return MISSING_NODE_BASE_COST + len(node.triples)


def _sorted_triples(triples: Iterable[Triple]) -> list[list[str]]:
    return [list(triple) for triple in sorted(triples)]


def _matched_operations(position: str, p: int, g: int, pred: Node, gold: Node) -> list[dict[str, Any]]:
    where = {"position": position, "pred_node": p, "gold_node": g}
    ops: list[dict[str, Any]] = []
    if pred.role != gold.role:
        ops.append({"op": "change_role", **where, "from": pred.role, "to": gold.role, "cost": 1})
    if pred.logical_rel != gold.logical_rel:
        ops.append({"op": "change_logical_rel", **where, "from": pred.logical_rel, "to": gold.logical_rel, "cost": 1})
    for op, triples in (("delete_triple", pred.triples - gold.triples), ("insert_triple", gold.triples - pred.triples)):
        ops += [{"op": op, **where, "triple": triple, "cost": 1} for triple in _sorted_triples(triples)]
    return ops


def _lone_operation(op: str, position: str, side: str, index: int, node: Node) -> dict[str, Any]:
    return {"op": op, "position": position, side: index, "role": node.role, "logical_rel": node.logical_rel,
            "triples": _sorted_triples(node.triples), "cost": missing_node_cost(node)}


def edit_distance(pred: Tree, gold: Tree, operations: list[dict[str, Any]] | None = None) -> int:
    """Positional edit distance between two trees (the organisers' walk).

    Nodes at the same position (``root``, ``root.L``, ``root.L.R``, ...) are compared with
    :func:`node_distance`; a position present on one side only costs :func:`missing_node_cost`.
    When ``operations`` is a list, the edits that turn ``pred`` into ``gold`` are appended to it
    (``change_role``, ``change_logical_rel``, ``delete_triple``, ``insert_triple``, ``delete_node``,
    ``insert_node``), each with its cost; the costs add up to the distance.
    """
    total = 0
    stack: list[tuple[int, int, str]] = [(0 if pred.nodes else -1, 0 if gold.nodes else -1, "root")]
    while stack:
        p, g, position = stack.pop()
        if p >= 0 and g >= 0:
            total += node_distance(pred.nodes[p], gold.nodes[g])
            if operations is not None:
                operations += _matched_operations(position, p, g, pred.nodes[p], gold.nodes[g])
            p_left, p_right, g_left, g_right = pred.left[p], pred.right[p], gold.left[g], gold.right[g]
        elif p >= 0:
            total += missing_node_cost(pred.nodes[p])
            if operations is not None:
                operations.append(_lone_operation("delete_node", position, "pred_node", p, pred.nodes[p]))
            p_left, p_right, g_left, g_right = pred.left[p], pred.right[p], -1, -1
        elif g >= 0:
            total += missing_node_cost(gold.nodes[g])
            if operations is not None:
                operations.append(_lone_operation("insert_node", position, "gold_node", g, gold.nodes[g]))
            p_left, p_right, g_left, g_right = -1, -1, gold.left[g], gold.right[g]
        else:
            continue
        if p_right >= 0 or g_right >= 0:
            stack.append((p_right, g_right, position + ".R"))
            stack.append((p_left, g_left, position + ".L"))
    return total


def _pair_counts(pred: Tree, gold: Tree, operations: list[dict[str, Any]] | None = None) -> tuple[int, ...]:
    """The integers one pair adds to the data-set totals, in :data:`_COUNT_FIELDS` order."""
    pred_triples, gold_triples = pred.triple_set(), gold.triple_set()
    pred_nodes, gold_nodes = pred.nodes_with_triples(), gold.nodes_with_triples()
    return (
        1 if pred.nodes else 0,
        1 if pred.nodes == gold.nodes else 0,
        *_overlap(pred_triples, gold_triples),
        *_overlap(pred.paths(), gold.paths()),
        *_multiset_overlap(pred_nodes, gold_nodes),
        edit_distance(pred, gold, operations),
        # PromptCBLUE's maximal edit count: #triples + 2 x #nodes with triples, on both sides
        len(pred_triples) + 2 * len(pred_nodes) + len(gold_triples) + 2 * len(gold_nodes),
    )


_COUNT_FIELDS = ("nonempty_prediction", "tree_equal", "triples_correct", "triples_predicted", "triples_gold",
                 "paths_correct", "paths_predicted", "paths_gold", "nodes_correct", "nodes_predicted", "nodes_gold",
                 "edit_distance", "edit_ratio_denominator")


def _score_from_counts(counts: Sequence[int], operations: list[dict[str, Any]] | None) -> TreeScore:
    return TreeScore(
        nonempty_prediction=bool(counts[0]), tree_equal=bool(counts[1]),
        triples=F1Counts(*counts[2:5]), paths=F1Counts(*counts[5:8]), nodes=F1Counts(*counts[8:11]),
        edit_distance=counts[11], edit_ratio_denominator=counts[12],
        operations=None if operations is None else tuple(operations),
    )


def score_pair(pred: Tree, gold: Tree, *, with_operations: bool = False) -> TreeScore:
    """All per-tree counts of one (prediction, gold) pair; ``with_operations`` lists the edits too."""
    operations: list[dict[str, Any]] | None = [] if with_operations else None
    return _score_from_counts(_pair_counts(pred, gold, operations), operations)


# --------------------------------------------------------------------------------------------------
# Loading and pairing


@dataclass(frozen=True, slots=True)
class TreeRecord:
    """One entry of a tree file: its 0-based ``index``, its ``id`` (``None`` if the entry has none),
    its raw pre-order ``nodes`` (validated later by :func:`parse_tree`) and, for an entry that holds no
    tree at all, the ``problem`` (reported when the tree is parsed, so ``on_invalid`` applies)."""

    index: int
    id: str | None
    nodes: Any
    problem: str | None = None

    def describe(self, side: str) -> str:
        """How error messages name this tree, e.g. ``"prediction tree 3 (id 'a7')"``."""
        return f"{side} tree {self.index}" + ("" if self.id is None else f" (id {self.id!r})")

    def parse(self, side: str) -> Tree:
        """The parsed tree; :class:`Text2DTError` naming this entry if it is not a valid tree."""
        if self.problem is not None:
            raise Text2DTError(self.problem, tree_ref=self.describe(side))
        return parse_tree(self.nodes, tree_ref=self.describe(side))


def _record_from_entry(entry: Any, index: int) -> TreeRecord:
    if isinstance(entry, TreeRecord):
        return entry
    if isinstance(entry, (list, tuple)):
        return TreeRecord(index, None, entry)
    if not isinstance(entry, Mapping):
        return TreeRecord(index, None, None, f"entry must be a node list or an object with 'tree', "
                                             f"got {type(entry).__name__}")
    raw_id = entry.get("id")
    if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, (str, int))):
        return TreeRecord(index, None, None, f"'id' must be a string or an integer, got {raw_id!r}")
    record_id = None if raw_id is None else str(raw_id)
    if "tree" not in entry:
        hint = " (it looks like a single node: a file must be a list of trees)" if "role" in entry else ""
        return TreeRecord(index, record_id, None, f"entry has no 'tree' field{hint}")
    return TreeRecord(index, record_id, entry["tree"])


def as_records(entries: Iterable[Any]) -> list[TreeRecord]:
    """Turn file entries (bare node lists, ``{"tree", "id"?, ...}`` objects or records) into records.

    Never raises: an entry that holds no tree becomes a record with a ``problem``."""
    return [_record_from_entry(entry, index) for index, entry in enumerate(entries)]


def _read_json_or_jsonl(path: Path) -> Any:
    """A tree file's entries: a JSON value, or for ``.jsonl`` one value per line, read by the one JSON reader
    (:func:`~consensus_eval.domain.textio.read_json`, :func:`~consensus_eval.domain.textio.jsonl_values`: UTF-8,
    a BOM tolerated, the same messages as every command's)."""
    if path.is_dir():
        raise IsADirectoryError(path)
    if not path.exists() and str(path) != "-":
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
    if path.suffix.lower() != ".jsonl":
        try:
            return read_json(path, "trees")
        except InputError as exc:
            raise Text2DTError(str(exc)) from None
    errors: list[str] = []
    entries = [value for _, _, value in jsonl_values(path, errors, what="trees")]
    if errors:
        raise Text2DTError(errors[0])
    return entries


def load_trees(path: str | Path) -> list[TreeRecord]:
    """Read a tree file: a JSON list (or ``.jsonl`` lines) of ``{"text", "tree", "id"?}`` objects or of
    bare pre-order node lists. Raises :class:`Text2DTError` if the file is missing or unreadable."""
    path = Path(path)
    try:
        data = _read_json_or_jsonl(path)
    except IsADirectoryError:
        raise Text2DTError(f"cannot read {path}: it is a folder, not a tree file") from None
    except OSError as exc:
        raise Text2DTError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not isinstance(data, list):
        raise Text2DTError(f"{path}: expected a JSON list of trees, got {type(data).__name__}")
    return as_records(data)


def _ids_by_record(records: Sequence[TreeRecord], side: str) -> dict[str, TreeRecord]:
    by_id: dict[str, TreeRecord] = {}
    for record in records:
        assert record.id is not None
        if record.id in by_id:
            raise Text2DTError(f"duplicate id {record.id!r} (also {side} tree {by_id[record.id].index})",
                               tree_ref=record.describe(side))
        by_id[record.id] = record
    return by_id


PairedRecords = list[tuple[TreeRecord | None, TreeRecord]]


def pair_records(preds: Sequence[TreeRecord], golds: Sequence[TreeRecord]) -> tuple[PairedRecords, Pairing]:
    """Pair predictions with gold trees, in gold order.

    By ``id`` when every entry on both sides has one (a gold id without a prediction is paired with
    ``None``; a prediction id absent from the gold, or a duplicate id, is an error); otherwise by
    position, which needs equally many entries on both sides (the original pairs by position only,
    silently ignores gold trees beyond the last prediction and crashes on extra predictions).
    Returns the pairs and ``"id"`` or ``"position"``.
    """
    if preds and golds and all(r.id is not None for r in preds) and all(r.id is not None for r in golds):
        pred_by_id = _ids_by_record(preds, "prediction")
        gold_by_id = _ids_by_record(golds, "gold")
        unknown = [record for record in preds if record.id not in gold_by_id]
        if unknown:
            raise Text2DTError(f"{len(unknown)} prediction id(s) not in the gold file, first {unknown[0].id!r}",
                               tree_ref=unknown[0].describe("prediction"))
        return [(pred_by_id.get(gold.id), gold) for gold in golds], "id"  # type: ignore[arg-type]
    if len(preds) != len(golds):
        raise Text2DTError(f"{len(preds)} predictions but {len(golds)} gold trees, and trees are paired by "
                           "position (give every tree an 'id' on both sides to pair by id)")
    return list(zip(preds, golds, strict=True)), "position"


# --------------------------------------------------------------------------------------------------
# Evaluation


@dataclass(frozen=True, slots=True)
class InvalidTree:
    """A prediction scored as empty under ``on_invalid="zero"``: pair ``index`` (gold order), ``id``,
    the offending ``node_index`` (``None`` if the whole tree is at fault) and the ``reason``."""

    index: int
    id: str | None
    node_index: int | None
    reason: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.id, "node_index": self.node_index,
                "reason": self.reason, "message": self.message}


@dataclass(frozen=True)
class Text2DTResult:
    """Data-set level Text2DT metrics; every ratio is an exact :class:`~fractions.Fraction` or ``None``.

    Counts: ``n_trees`` pairs, paired by ``pairing`` (``"id"``/``"position"``); ``n_nonempty_predictions``
    (valid non-empty predictions); ``scored_predictions`` (those plus the ``invalid`` ones: the
    tree-accuracy and mean-edit-distance denominator); ``correct_trees``; ``triples``, ``paths``,
    ``nodes`` (:class:`F1Counts`); ``edit_distance_sum``; ``edit_ratio_denominator``; ``invalid``
    predictions scored as empty; ``per_tree`` scores when requested.
    """

    n_trees: int
    pairing: Pairing
    n_nonempty_predictions: int
    correct_trees: int
    triples: F1Counts
    paths: F1Counts
    nodes: F1Counts
    edit_distance_sum: int
    edit_ratio_denominator: int
    invalid: tuple[InvalidTree, ...] = ()
    per_tree: tuple[dict[str, Any], ...] | None = field(default=None, repr=False)

    @property
    def scored_predictions(self) -> int:
        """The tree-accuracy and mean-edit-distance denominator: non-empty predictions (the
        organisers') plus invalid ones scored under ``on_invalid="zero"`` (each a wrong tree)."""
        return self.n_nonempty_predictions + len(self.invalid)

    @property
    def tree_accuracy(self) -> Fraction | None:
        """Correct trees / scored predictions (non-empty ones, the organisers' denominator, and invalid ones)."""
        return Fraction(self.correct_trees, self.scored_predictions) if self.scored_predictions else None

    @property
    def triple_f1(self) -> Fraction | None:
        """Micro triple F1 over per-tree triple sets."""
        return self.triples.f1

    @property
    def path_f1(self) -> Fraction | None:
        """Micro decision-path F1."""
        return self.paths.f1

    @property
    def mean_edit_distance(self) -> Fraction | None:
        """Sum of edit distances / scored predictions (empty predictions add cost, not count; invalid ones
        add both)."""
        return Fraction(self.edit_distance_sum, self.scored_predictions) if self.scored_predictions else None

    @property
    def node_f1(self) -> Fraction | None:
        """Micro node F1 with multiset matching (extra; fixes the original's duplicate counting)."""
        return self.nodes.f1

    @property
    def edit_ratio(self) -> Fraction | None:
        """PromptCBLUE's 1 - sum(edit distance) / sum(#triples + 2 x #nodes with triples) (extra)."""
        if not self.edit_ratio_denominator:
            return None
        return 1 - Fraction(self.edit_distance_sum, self.edit_ratio_denominator)

    METRICS = ("tree_accuracy", "triple_f1", "path_f1", "mean_edit_distance", "node_f1", "edit_ratio")

    def metrics(self) -> dict[str, Fraction | None]:
        """The four official metrics, then the two extras, as exact fractions."""
        return {name: getattr(self, name) for name in self.METRICS}

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary: float ``metrics``, the same as ``"p/q"`` strings in ``exact``, the
        ``counts`` behind them, how trees were paired and the invalid predictions."""
        exact = self.metrics()
        return {
            "metrics": {name: _as_float(value) for name, value in exact.items()},
            "exact": {name: None if value is None else str(value) for name, value in exact.items()},
            "counts": {
                "trees": {"pairs": self.n_trees, "nonempty_predictions": self.n_nonempty_predictions,
                          "invalid_predictions": len(self.invalid), "scored_predictions": self.scored_predictions,
                          "correct": self.correct_trees},
                "triples": self.triples.as_dict(),
                "paths": self.paths.as_dict(),
                "nodes": self.nodes.as_dict(),
                "edit_distance": {"sum": self.edit_distance_sum, "divided_by": self.scored_predictions,
                                  "ratio_denominator": self.edit_ratio_denominator},
            },
            "n_trees": self.n_trees,
            "pairing": self.pairing,
            "invalid": [item.as_dict() for item in self.invalid],
        }


def _as_float(value: Fraction | None) -> float | None:
    return None if value is None else float(value)


def _parse_gold(record: TreeRecord) -> Tree:
    tree = record.parse("gold")
    if not tree.nodes:
        raise Text2DTError("gold tree is empty", tree_ref=record.describe("gold"))
    return tree


def _parse_prediction(record: TreeRecord | None, gold: TreeRecord) -> Tree:
    if record is None:
        raise Text2DTError("no prediction with this id", tree_ref=gold.describe("prediction for gold"))
    return record.parse("prediction")


def evaluate(preds: Sequence[Any], golds: Sequence[Any], on_invalid: OnInvalid = "error",
             per_tree: bool = False) -> Text2DTResult:
    """Score predictions against gold trees.

    ``preds`` and ``golds`` are lists of entries as in a file (bare node lists, ``{"tree", "id"?}``
    objects) or :class:`TreeRecord` s; they are paired by :func:`pair_records`. ``on_invalid``:
    ``"error"`` raises :class:`Text2DTError` on the first invalid prediction, ``"zero"`` scores it as an
    empty prediction and lists it. Invalid gold trees always raise. ``per_tree`` keeps each pair's
    counts and edit operations in :attr:`Text2DTResult.per_tree`.
    """
    if on_invalid not in ("error", "zero"):
        raise UsageError(f"on_invalid must be 'error' or 'zero', not {on_invalid!r}")
    pairs, pairing = pair_records(as_records(preds), as_records(golds))
    invalid: list[InvalidTree] = []
    details: list[dict[str, Any]] | None = [] if per_tree else None
    totals = [0] * len(_COUNT_FIELDS)
    for index, (pred_record, gold_record) in enumerate(pairs):
        gold = _parse_gold(gold_record)
        error: Text2DTError | None = None
        try:
            pred = _parse_prediction(pred_record, gold_record)
        except Text2DTError as exc:
            if on_invalid == "error":
                raise
            error, pred = exc, EMPTY_TREE
            invalid.append(InvalidTree(index, gold_record.id, exc.node_index, exc.reason, str(exc)))
        operations: list[dict[str, Any]] | None = [] if per_tree else None
        counts = _pair_counts(pred, gold, operations)
        totals = [total + count for total, count in zip(totals, counts, strict=True)]
        if details is not None:
            details.append({"index": index, "id": gold_record.id, "gold_index": gold_record.index,
                            "pred_index": None if pred_record is None else pred_record.index,
                            "invalid": error is not None, "error": None if error is None else str(error),
                            **_score_from_counts(counts, operations).as_dict()})
    return Text2DTResult(
        n_trees=len(pairs), pairing=pairing, n_nonempty_predictions=totals[0], correct_trees=totals[1],
        triples=F1Counts(*totals[2:5]), paths=F1Counts(*totals[5:8]), nodes=F1Counts(*totals[8:11]),
        edit_distance_sum=totals[11], edit_ratio_denominator=totals[12], invalid=tuple(invalid),
        per_tree=None if details is None else tuple(details),
    )
