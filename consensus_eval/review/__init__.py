"""``consensus-eval review DIR``: a local web app where clinicians adjudicate a run's review queue.

It sits at the top of the layers, beside the CLI (``cli -> review -> api -> output -> analysis ->
execution -> judges -> domain``): it reads the run through :mod:`consensus_eval.api`, writes human
labels through :class:`~consensus_eval.execution.store.Store`, and serves the adjudication sheet of
:func:`consensus_eval.output.files.write_adjudication_csv`. Only ``cli.py`` imports it.

- :mod:`.model`: the queue, one case as the page shows it, and the reviewer's actions as stored labels;
- :mod:`.app`: the Starlette app (pages, the label endpoint, access token, CSRF, CSP) and :func:`serve`.
"""

from __future__ import annotations

from consensus_eval.review.app import create_app, serve
from consensus_eval.review.model import ReviewRun, open_run

__all__ = ["ReviewRun", "create_app", "open_run", "serve"]
