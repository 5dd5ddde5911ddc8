"""API keys never leave in a text: every string a judge stores or shows (errors, raw replies, the judgment's
evidence, reasons and comments, batch notes) passes through :func:`scrub`.

Providers echo keys in many forms, so a key is removed whole and by its fragments: any run of
:data:`MIN_FRAGMENT` (4) or more of its first or last characters (the masked forms of a 401,
``LK7q2Zx9****...a4Qo``, ``sk-abc…xyz``, ``*******cdef``), each also URL-encoded and as JSON escapes it; each
is replaced by ``***``. Short keys (under :data:`MIN_FRAGMENT` characters) are removed whole only. Four
characters is what providers show of a key's end; the price is that the same four characters elsewhere in a
text (one chance in about 14 million for a random key's end, per place) are masked too.

The keys of every judge built in this process are known (:func:`register`), so a reply of one judge that
quotes another judge's key is scrubbed too.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from urllib.parse import quote, quote_plus

from consensus_eval.domain.sets import merged_spans

__all__ = ["MASK", "MIN_FRAGMENT", "register", "scrub"]

#: the shortest prefix or suffix of a key that is removed (shorter ones are too common to be the key's; a
#: provider's masked 401 shows the last four: ``*******cdef``)
MIN_FRAGMENT = 4
#: what a key, or a fragment of it, is replaced with
MASK = "***"

_known: set[str] = set()


def register(key: str | None) -> None:
    """Remember ``key`` (a judge's API key): :func:`scrub` removes it from every text from now on."""
    if key and len(key) >= 4:
        _known.add(key)


def scrub(text: str, *keys: str | None) -> str:
    """``text`` without ``keys`` and the keys :func:`register` knows, whole or in fragments (see the module)."""
    if not text:
        return text
    spans: list[tuple[int, int]] = []
    for key in {k for k in keys if k and len(k) >= 4} | _known:
        for form in _forms(key):
            spans += _spans(text, form)
    if not spans:
        return text
    out: list[str] = []
    end = 0
    for start, stop in merged_spans(spans):  # forms found over the same text: each span masked once, whole
        out += [text[end:start], MASK]
        end = stop
    return "".join(out) + text[end:]


@lru_cache(maxsize=64)
def _forms(key: str) -> tuple[str, ...]:
    """The key as written, URL-encoded (both ways) and JSON-escaped (``/`` as ``\\/`` too)."""
    escaped = json.dumps(key)[1:-1]
    out = dict.fromkeys([escaped.replace("/", "\\/"), quote(key, safe=""), quote_plus(key, safe=""), escaped, key])
    return tuple(out)


def _spans(text: str, form: str) -> list[tuple[int, int]]:
    """Where ``form`` (or, for a long enough key, a prefix or suffix of it) is in ``text``."""
    if len(form) < MIN_FRAGMENT:
        return [m.span() for m in re.finditer(re.escape(form), text)]
    if form[:MIN_FRAGMENT] not in text and form[-MIN_FRAGMENT:] not in text:
        return []
    return [m.span() for m in _pattern(form).finditer(text)]


@lru_cache(maxsize=64)
def _pattern(form: str) -> re.Pattern[str]:
    """The key, or any prefix or suffix of it of at least :data:`MIN_FRAGMENT` characters, longest first."""
    chars = [re.escape(c) for c in form]
    prefix = "".join(chars[:MIN_FRAGMENT])
    rest = ""
    for c in reversed(chars[MIN_FRAGMENT:]):
        rest = f"(?:{c}{rest})?"
    suffix_head = ""
    for c in chars[:-MIN_FRAGMENT]:
        suffix_head = f"(?:{suffix_head}{c})?"
    suffix = suffix_head + "".join(chars[-MIN_FRAGMENT:])
    return re.compile(f"{prefix}{rest}|{suffix}")
