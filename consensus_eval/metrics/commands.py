"""`consensus-eval metrics ...`: deterministic metrics. Must never import litellm (fast start-up)."""

from __future__ import annotations

import typer

metrics_app = typer.Typer(
    help="Deterministic task metrics (Text2DT decision trees, TCM). No judge is called.",
    no_args_is_help=True,
    rich_markup_mode=None,  # click's plain help, as the main app's
)


def _register() -> None:
    from consensus_eval.metrics import _tcm_cli, _text2dt_cli

    _text2dt_cli.register(metrics_app)
    _tcm_cli.register(metrics_app)


_register()
