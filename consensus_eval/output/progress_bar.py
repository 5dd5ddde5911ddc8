"""Progress of a run: a live bar on a terminal, plain lines otherwise (CI logs, pipes)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeRemainingColumn

from consensus_eval.execution.execute import Progress, ProgressHook
from consensus_eval.output.report.i18n import Messages, messages


def _status(p: Progress, t: Messages) -> str:
    return t("con_progress_status", failed=p.failed, skipped=p.skipped, cost=f"{p.cost:.4f}")


@contextmanager
def progress_hook(console: Console, every_s: float = 5.0, t: Messages | None = None) -> Iterator[ProgressHook]:
    """Yield a hook for :func:`consensus_eval.execution.execute.execute` that shows progress on ``console``, in the
    language of ``t`` (English by default)."""
    t = t if t is not None else messages("en")
    if console.is_terminal:
        with RichProgress(TextColumn(t("con_progress_judging")), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[status]}"), TimeRemainingColumn(),
                          console=console, transient=False) as bar:
            task = bar.add_task("judging", total=None, status="")

            def live(p: Progress) -> None:
                bar.update(task, total=p.total, completed=p.skipped + p.done, status=_status(p, t))

            yield live
        return

    last = [0.0]

    def plain(p: Progress) -> None:
        now = time.monotonic()
        finished = p.skipped + p.done >= p.total
        if finished or now - last[0] >= every_s:
            last[0] = now
            eta = p.eta_s()
            tail = t("con_progress_eta", s=f"{eta:.0f}") if eta is not None and not finished else ""
            console.print(t("con_progress_line", n=p.skipped + p.done, total=p.total, status=_status(p, t), eta=tail),
                          highlight=False)

    yield plain
