"""The `consensus-eval` command line: thin, parses and delegates."""

from __future__ import annotations

import typer

from consensus_eval.metrics.cli import metrics_app

app = typer.Typer(
    help="Score cases with a panel of judges and report how far to trust the result.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(metrics_app, name="metrics")
