"""Words people type into sheets and forms, in every language the tool reads, as data (``locale/*.json``):
verdicts (``agree`` / ``同意``), score origins (``own`` / ``自评``), yes and no (``1`` / ``是``). Every
language's file is read, so a sheet may mix them; adding a language is adding a file, not code."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

LOCALE = Path(__file__).with_name("locale")


@cache
def _files() -> tuple[tuple[str, dict[str, dict[str, list[str]]]], ...]:
    out = []
    for p in sorted(LOCALE.glob("*.json")):
        data = json.loads(p.read_text(encoding="utf-8"))
        out.append((p.stem, {k: v for k, v in data.items() if not k.startswith("_")}))
    return tuple(out)


def normal(text: str) -> str:
    """How a typed word is compared: lower-cased, spaces collapsed."""
    return " ".join(text.strip().lower().split())


@cache
def words(kind: str) -> dict[str, str]:
    """Every word of ``kind`` in every language -> the value it means (``words("verdict")["同意"] == "agree"``)."""
    out: dict[str, str] = {}
    for _, data in _files():
        for value, spelled in data.get(kind, {}).items():
            for w in spelled:
                out[normal(w)] = value
    return out


def spelled(kind: str, value: str) -> list[str]:
    """The first word of each language for ``value`` of ``kind`` (for messages: ``agree``, ``同意``)."""
    return [ws[0] for _, data in _files() if (ws := data.get(kind, {}).get(value))]
