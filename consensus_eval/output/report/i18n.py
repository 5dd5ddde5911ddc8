"""The report's words in each language: a message catalogue per language, as data.

``i18n/<lang>.json`` (shipped in the wheel with the package) maps a message key to its text, with
``{name}`` placeholders filled by :meth:`Messages.__call__`. Only the report's own headings and
labels are translated; the rubric's names (dimensions, categories, types) are shown as the rubric
writes them. A rubric kind brings the words its report block, flags and review widget use
(:attr:`~consensus_eval.domain.kinds.base.Dimension.messages`): a catalogue has them beside its own.
The default language is the rubric's ``language`` when it has one of the catalogue's
languages, else Chinese when the rubric's name is written in Chinese, else English.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from consensus_eval._errors import InputError
from consensus_eval.domain.kinds.base import kind_messages, registered_kinds
from consensus_eval.domain.rubric import Rubric
from consensus_eval.output.report.blocks import Msg

CATALOGUES = Path(__file__).resolve().parent / "i18n"
#: the languages with a catalogue (``i18n/<lang>.json``)
LANGS = ("zh", "en")
_CJK = re.compile(r"[\u4e00-\u9fff]")


class Messages:
    """One language's catalogue: ``t("key", n=3)`` is the text of ``key`` with ``{n}`` filled in. Its
    :attr:`texts` are its own and, for keys it does not have, the rubric kinds' (kinds registered later too)."""

    def __init__(self, lang: str, texts: dict[str, str]) -> None:
        self.lang = lang
        self._own = texts
        self._texts = texts
        self._kinds = 0

    @property
    def texts(self) -> dict[str, str]:
        """Every key's text: the catalogue's own, then the registered kinds' own keys it does not have."""
        if len(kinds := registered_kinds()) != self._kinds:
            self._texts, self._kinds = {**kind_messages(self.lang), **self._own}, len(kinds)
        return self._texts

    def __call__(self, key: str, **values: Any) -> str:
        text = self.texts[key]
        return text.format(**values) if values else text

    def msg(self, key: str, **values: Any) -> Msg:
        """The text of ``key`` as the package's own (:class:`~consensus_eval.output.report.blocks.Msg`): report.md
        keeps its Markdown and escapes only ``values``."""
        return Msg(self.texts[key], values)

    @property
    def html_lang(self) -> str:
        """The ``<html lang>`` value: ``zh-CN`` or ``en``."""
        return "zh-CN" if self.lang == "zh" else self.lang


@cache
def messages(lang: str) -> Messages:
    """The catalogue of ``lang`` (one of :data:`LANGS`); an InputError names the choices otherwise."""
    if lang not in LANGS:
        raise InputError(f"--lang must be one of {', '.join(LANGS)}, got {lang!r}")
    texts = json.loads((CATALOGUES / f"{lang}.json").read_text(encoding="utf-8"))
    return Messages(lang, {k: v for k, v in texts.items() if not k.startswith("_")})


def default_lang(rubric: Rubric) -> str:
    """The rubric's ``language`` when a catalogue has it, else ``zh`` for a rubric named in Chinese, else ``en``."""
    lang = getattr(rubric, "language", None)
    if lang in LANGS:
        return str(lang)
    return "zh" if _CJK.search(rubric.name) else "en"


def simulated_notice(t: Messages, simulated: list[str], n_judges: int) -> str:
    """That ``simulated`` judges (of ``n_judges``) are a demo device, and what to change for real judges, in the
    language of ``t``; "" when none is simulated (the report's first screen, the console, the review app)."""
    if not simulated:
        return ""
    return t("simulated_banner", judges=", ".join(simulated), n=len(simulated), total=n_judges)
