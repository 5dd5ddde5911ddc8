"""CLI for the Text2DT metrics: `consensus-eval metrics text2dt PRED GOLD`.

Kept light: only the standard library, typer and (for the table) rich; never litellm.
"""

import enum
from pathlib import Path
from typing import Annotated, Any

import typer

from consensus_eval._errors import InputError
from consensus_eval._resources import resolve
from consensus_eval.domain.terminal import SafeConsole, escape_controls, guarded
from consensus_eval.domain.writable import STDIO, atomic_writer, check_output_path, dumps_json
from consensus_eval.metrics.text2dt import Text2DTResult, evaluate, load_trees

EXIT_INPUT_ERROR = 2
MAX_INVALID_SHOWN = 20

METRIC_LABELS = {
    "tree_accuracy": "Tree accuracy",
    "triple_f1": "Triple F1",
    "path_f1": "Decision-path F1",
    "mean_edit_distance": "Mean edit distance",
    "node_f1": "Node F1 (extra)",
    "edit_ratio": "Edit ratio (extra)",
}


class OnInvalid(enum.StrEnum):
    error = "error"
    zero = "zero"


def _f1_detail(counts: dict[str, Any]) -> str:
    return f"P {counts['correct']}/{counts['predicted']}, R {counts['correct']}/{counts['gold']}"


def _details(summary: dict[str, Any]) -> dict[str, str]:
    counts = summary["counts"]
    trees, distance = counts["trees"], counts["edit_distance"]
    return {
        "tree_accuracy": f"{trees['correct']} equal / {trees['scored_predictions']} non-empty or invalid preds",
        "triple_f1": _f1_detail(counts["triples"]),
        "path_f1": _f1_detail(counts["paths"]),
        "mean_edit_distance": f"{distance['sum']} edits / {distance['divided_by']} non-empty or invalid preds",
        "node_f1": _f1_detail(counts["nodes"]),
        "edit_ratio": f"1 - {distance['sum']}/{distance['ratio_denominator']}",
    }


def render_table(result: Text2DTResult, *, stderr: bool = False) -> None:
    """Print the metrics as a rich table, then the pairing and the invalid predictions (``stderr``: there,
    when standard output holds the per-tree file)."""
    from rich.table import Table

    summary = result.as_dict()
    console = SafeConsole(stderr=stderr)  # a label from the files may hold control characters: shown escaped
    table = Table(title=f"Text2DT metrics: {result.n_trees} trees, paired by {result.pairing}")
    table.add_column("Metric", no_wrap=True)
    table.add_column("Value", justify="right")
    table.add_column("Exact", justify="right")
    table.add_column("Counts")
    details = _details(summary)
    for name, label in METRIC_LABELS.items():
        value, exact = summary["metrics"][name], summary["exact"][name]
        table.add_row(label, "n/a" if value is None else f"{value:.6f}", exact or "n/a", details[name])
    console.print(table)
    if result.invalid:
        console.print(f"[bold red]{len(result.invalid)} invalid prediction(s) scored as empty (each a wrong tree):[/]")
        for item in result.invalid[:MAX_INVALID_SHOWN]:
            console.print(f"  - {item.message}", markup=False, highlight=False)
        if len(result.invalid) > MAX_INVALID_SHOWN:
            console.print(f"  ... and {len(result.invalid) - MAX_INVALID_SHOWN} more (see --json)")
    else:
        console.print("No invalid predictions.")


def write_per_tree(result: Text2DTResult, path: Path) -> None:
    """Write one JSON object per tree pair: its counts, edit distance and edit operations (atomically)."""
    with atomic_writer(path) as handle:
        for row in result.per_tree or ():
            handle.write(dumps_json(row, ensure_ascii=False) + "\n")


def text2dt_command(
    pred: Annotated[Path, typer.Argument(
        metavar="PRED", help="Predicted trees (JSON list or .jsonl).", show_default=False)],
    gold: Annotated[Path, typer.Argument(
        metavar="GOLD", help="Gold trees (JSON list or .jsonl).", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary instead of a table.")] = False,
    per_tree: Annotated[Path | None, typer.Option(
        "--per-tree", help="Write each pair's metrics and edit operations to this JSONL file (- for standard "
                           "output: the summary then goes to standard error).")] = None,
    on_invalid: Annotated[OnInvalid, typer.Option(
        "--on-invalid", help="error: stop at the first invalid prediction; zero: score it as empty and list it.",
        case_sensitive=False)] = OnInvalid.error,
) -> None:
    """Text2DT (CHIP-2022) metrics with exact parity to the organisers' scorer.

    Tree accuracy, triple F1, decision-path F1 and mean edit distance as the organisers compute them,
    plus node F1 and PromptCBLUE's edit ratio. Trees are paired by id when every tree has one, else
    by position. Exit code 2 on unreadable or invalid input.

    PRED and GOLD: a JSON list (or JSON Lines) of {"id"?, "text"?, "tree": [node, ...]}, the nodes in
    pre-order, each {"role": "C" (a condition: then its left subtree, taken when it holds, then its
    right one) or "D" (a decision, a leaf), "triples": [[head, relation, tail], ...], "logical_rel":
    "and" | "or" | "null"}; an empty leaf is {"role": "D", "triples": [], "logical_rel": "null"}.

    Example: consensus-eval metrics text2dt examples/text2dt/pred.json examples/text2dt/gold.json
    (docs/metrics.md: the format, and what this example scores).
    """
    try:
        if per_tree is not None:  # before anything is read or written
            check_output_path(per_tree, "the per-tree file", inputs=[("the predictions file", pred),
                                                                     ("the gold file", gold)],
                              suggest="per_tree.jsonl")
        # the bundled examples (examples/text2dt/...) are found from any folder, as the TCM ones
        result = evaluate(load_trees(resolve(pred, "examples")), load_trees(resolve(gold, "examples")),
                          on_invalid=on_invalid.value, per_tree=per_tree is not None)
        if per_tree is not None:
            write_per_tree(result, per_tree)
    except InputError as exc:  # Text2DTError, and an output that cannot be written
        typer.echo(f"error: {escape_controls(str(exc))}", err=True)
        raise typer.Exit(EXIT_INPUT_ERROR) from None
    to_stderr = per_tree is not None and str(per_tree) == STDIO  # standard output holds the per-tree file
    if as_json:
        typer.echo(dumps_json(result.as_dict(), ensure_ascii=False, indent=2), err=to_stderr)
    else:
        render_table(result, stderr=to_stderr)


def register(app: typer.Typer) -> None:
    """Add the `text2dt` command to the `metrics` sub-app."""
    app.command("text2dt")(guarded(text2dt_command))
