"""CLI for the text2dt metrics (being written)."""

import typer


def register(app: typer.Typer) -> None:
    """Add the `text2dt` command to the `metrics` sub-app."""
