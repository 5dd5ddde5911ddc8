"""A reviewer's name, as labels carry it: what a name may be."""

from __future__ import annotations

import unicodedata

from consensus_eval._errors import UsageError

#: the longest reviewer name accepted (characters)
MAX_NAME = 80


def clean_name(name: str) -> str:
    """A reviewer's name as stored: blanks trimmed; ``ValueError`` when empty, longer than :data:`MAX_NAME`
    or holding control characters (a line break and a tab included: the same rule in every channel, the command
    line, a sheet's reviewer column and the review page)."""
    if any(unicodedata.category(c).startswith("C") for c in name.strip()):
        raise UsageError("the reviewer's name holds control characters")
    name = " ".join(name.split())
    if not name:
        raise UsageError("the reviewer's name is empty")
    if len(name) > MAX_NAME:
        raise UsageError(f"the reviewer's name is longer than {MAX_NAME} characters")
    return name
