"""CLI for the tcm metrics (being written)."""

import typer


def register(app: typer.Typer) -> None:
    """Add the `tcm` command to the `metrics` sub-app."""
