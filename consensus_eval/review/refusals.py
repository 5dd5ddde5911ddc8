"""The review pages' words (``i18n/<lang>.json``) and the refusals said in them: :class:`ActionError`, and the
reviewer's name as the pages check it."""

from __future__ import annotations

import json
import unicodedata
from functools import cache
from importlib.resources import files
from typing import Any

from consensus_eval._errors import ReviewError
from consensus_eval.domain.reviewers import MAX_NAME, clean_name
from consensus_eval.output.report.i18n import Messages


@cache
def catalogue(lang: str) -> Messages:
    """The review pages' words in ``lang`` (``i18n/<lang>.json``, shipped with the package; keys starting with
    ``_`` are notes). ``lang`` is one of the files' names (the app checks it: :func:`~.app.messages`)."""
    texts = json.loads((files("consensus_eval.review") / "i18n" / f"{lang}.json").read_text(encoding="utf-8"))
    return Messages(lang, {k: v for k, v in texts.items() if not k.startswith("_")})


class ActionError(ReviewError, ValueError):
    """An action the app cannot apply (unknown case, dimension or deduction, a score out of range...), said as a
    message of the review pages' catalogues: ``key`` (an ``err_`` key of ``i18n/<lang>.json``) and the
    ``params`` its placeholders take (ids and values as text). :meth:`text` says it in a page's language;
    ``str()`` is the English text (what the JSON API, the command line and the logs show)."""

    def __init__(self, key: str, /, **params: Any) -> None:
        self.key = key
        self.params = params
        super().__init__(self.text(catalogue("en")))

    def text(self, t: Messages) -> str:
        """The refusal in ``t``'s language."""
        return t(self.key, **self.params)


class AccessEnded(ActionError):
    """A save of a personal link's session whose reviewer was removed from the team or given a new link meanwhile
    (whichever process changed the team): nothing is stored, and the page says their access ended (403)."""

    def __init__(self, name: str) -> None:
        super().__init__("err_access_ended", name=name)


def clean_reviewer(name: str) -> str:
    """A reviewer's name as stored (:func:`consensus_eval.domain.reviewers.clean_name`); an
    :class:`ActionError` says what is wrong with it (``clean_name``'s rules, in its order)."""
    try:
        return clean_name(name)
    except ValueError:
        if any(unicodedata.category(c).startswith("C") for c in name.strip()):
            raise ActionError("err_name_control") from None
        if not name.split():
            raise ActionError("err_name_empty") from None
        raise ActionError("err_name_long", max=MAX_NAME) from None
