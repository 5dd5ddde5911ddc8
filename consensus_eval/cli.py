"""The `consensus-eval` command line: thin, parses and delegates."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from consensus_eval._errors import InputError
from consensus_eval.config import DEFAULT_CONFIG
from consensus_eval.metrics.cli import metrics_app

app = typer.Typer(
    help="Score cases with a panel of judges and report how far to trust the result.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(metrics_app, name="metrics")

out_console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(fn: F) -> F:
    """Show input errors as a message and exit 2, with no traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (InputError, FileNotFoundError) as e:
            err_console.print(f"[bold red]error:[/] {e}", markup=True, highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


ConfigOpt = Annotated[str, typer.Option("--config", "-c", help="Config YAML (judges, rubric, runs).")]


@app.command()
@friendly_errors
def score(
    cases: Annotated[Path, typer.Argument(help="Cases JSONL: id, conversation, record, [important], [meta].")],
    config: ConfigOpt = DEFAULT_CONFIG,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (results.sqlite and reports).")] = Path("out"),
    skip_invalid: Annotated[bool, typer.Option(help="Score the valid lines when some are invalid.")] = False,
    dry_run: Annotated[bool, typer.Option(help="Render every prompt, count tokens, estimate cost; call nothing.")] = False,
) -> None:
    """Score CASES with the judges of CONFIG; resumes where a previous run into OUT stopped."""
    from consensus_eval import evaluate
    from consensus_eval.summary import print_summary

    prep = evaluate.prepare(cases, config, skip_invalid=skip_invalid, check_keys=not dry_run)
    for line in prep.invalid_lines:
        err_console.print(f"[yellow]skipped:[/] {line}", highlight=False, soft_wrap=True)
    if dry_run:
        from consensus_eval.estimate import estimate, print_estimate

        print_estimate(out_console, estimate(prep))
        return
    from consensus_eval.progress import progress_hook

    with progress_hook(err_console) as hook:
        progress = evaluate.run(prep, out, hook)
    print_summary(out_console, out, progress)


def main() -> None:  # pragma: no cover - console entry point alias
    app(prog_name="consensus-eval")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
