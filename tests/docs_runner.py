"""The shell commands of the README and docs/*.md, read out of their fenced code blocks (tests/test_docs_commands.py).

What counts as a command: every line of a ```bash / ```sh / ```shell / ```console block, and of a block without a
language when one of its lines starts with ``$ ``, ``consensus-eval``, ``python`` or ``pip``. A ``$ `` prompt is
dropped; ``a && b`` is two commands; a line that starts with blanks continues the command above it (the README's
commands table wraps a long synopsis that way), as does a line ending in a backslash. A ``# comment`` after a
command describes it. A comment line at the left margin right after a command is what the command prints (the
docs show output that way): its ``...`` stands for anything, ``(exit N)`` at its end for the exit code; a comment
line starting with ``...`` is narrative (``# ... the reviewer fills in the sheet ...``).

A synopsis (``audit DIR [--export SHEET.csv]``) is expanded by :func:`variants`: ``[...]`` is optional, ``a|b`` a
choice of one word, and `` | `` inside brackets a choice between option groups.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

SHELL_LANGS = frozenset({"bash", "sh", "shell", "console", "zsh"})
_COMMAND_START = re.compile(r"^(\$ |consensus-eval\b|python3?\b|pip3?\b|\.venv/bin/)")
_EXIT = re.compile(r"\(exit (\d+)\)\s*$")


@dataclass(frozen=True, slots=True)
class DocCommand:
    """One command of a doc: where it is, its text (comments dropped, blanks collapsed) and what the doc shows
    it printing (:func:`output_pattern` turns each line into a regular expression)."""

    file: str
    line: int
    text: str
    output: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def exit_code(self) -> int:
        """The exit code the doc gives (``(exit 5)`` at the end of its output), else 0."""
        for out in self.output:
            if m := _EXIT.search(out):
                return int(m.group(1))
        return 0


@dataclass(frozen=True, slots=True)
class Block:
    """A fenced block of commands: they run in order, later ones reading what earlier ones wrote."""

    file: str
    line: int
    commands: tuple[DocCommand, ...] = field(default_factory=tuple)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(slots=True)
class _Part:
    """A command being read: its first line, its text so far, the output lines shown after it."""

    line: int
    text: str
    output: list[str] = field(default_factory=list)


def strip_comment(line: str) -> tuple[str, str]:
    """``(command, comment)``: the comment starts at a ``#`` outside quotes at the start or after a blank."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


def _is_command_block(lang: str, body: list[str]) -> bool:
    if lang in SHELL_LANGS:
        return True
    return lang == "" and any(_COMMAND_START.match(x.strip()) for x in body)


def _fenced_blocks(text: str) -> list[tuple[int, str, list[tuple[int, str]]]]:
    """``(line of the opening fence, language, [(line, text)])`` for every fenced block (1-based lines)."""
    blocks: list[tuple[int, str, list[tuple[int, str]]]] = []
    current: tuple[int, str, list[tuple[int, str]]] | None = None
    for n, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("```"):
            if current is None:
                current = (n, stripped[3:].strip().lower(), [])
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current[2].append((n, raw))
    return blocks


def extract(path: Path, name: str) -> list[Block]:
    """The blocks of commands of one Markdown file (``name``: how the file is named in the results)."""
    out: list[Block] = []
    for start, lang, body in _fenced_blocks(path.read_text(encoding="utf-8")):
        if not _is_command_block(lang, [t for _, t in body]):
            continue
        parts: list[_Part] = []
        continued = False
        for n, raw in body:
            command, comment = strip_comment(raw)
            command = command.removeprefix("$ ")
            if not command.strip():
                if comment and parts and not raw[:1].isspace() and not comment.startswith("..."):
                    parts[-1].output.append(comment)
                continue
            if parts and (continued or raw[:1].isspace()):
                parts[-1].text = f"{parts[-1].text} {command.strip()}"
            else:
                parts.append(_Part(n, command.strip()))
            continued = command.endswith("\\")
            if continued:
                parts[-1].text = parts[-1].text[:-1].rstrip()
        commands: list[DocCommand] = []
        for part in parts:
            pieces = [p.strip() for p in part.text.split(" && ")]
            for i, piece in enumerate(pieces):
                shown = tuple(part.output) if i == len(pieces) - 1 else ()
                commands.append(DocCommand(name, part.line, " ".join(piece.split()), shown))
        out.append(Block(name, start, tuple(commands)))
    return out


def output_pattern(shown: str, literals: dict[str, str]) -> re.Pattern[str]:
    """What a doc shows a command printing as a pattern: ``...`` is anything, runs of blanks any blanks, a
    trailing ``(exit N)`` is left out; ``literals`` replaces values the test changed (a port)."""
    shown = _EXIT.sub("", shown).strip()
    for old, new in literals.items():
        shown = shown.replace(old, new)
    pieces = [r"\s+".join(re.escape(w) for w in piece.split()) for piece in shown.split("...")]
    return re.compile(r".*?".join(pieces), re.DOTALL)


# --------------------------------------------------------------------------- synopses


@dataclass(frozen=True, slots=True)
class _Choice:
    """A choice point: ``[a b | c]`` (``optional``: leaving it out is its first option) or a word ``a|b``."""

    key: int
    options: tuple[tuple[object, ...], ...]
    optional: bool


def _tokens(text: str) -> list[str]:
    spaced, quote = [], ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[]":
            spaced.append(f" {ch} ")
            continue
        spaced.append(ch)
    return shlex.split("".join(spaced))


def _parse(tokens: list[str], i: int, counter: list[int], inside: bool) -> tuple[list[list[object]], int]:
    """Items up to the closing ``]`` (``inside``) or the end, split at `` | `` into options."""
    options: list[list[object]] = [[]]
    while i < len(tokens):
        tok = tokens[i]
        if tok == "]":
            if not inside:
                raise ValueError("a ']' without its '['")
            return options, i + 1
        if tok == "[":
            counter[0] += 1
            key = counter[0]
            inner, i = _parse(tokens, i + 1, counter, inside=True)
            options[-1].append(_Choice(key, tuple(tuple(o) for o in inner), optional=True))
            continue
        if tok == "|" and inside:
            options.append([])
        elif "|" in tok and not tok.startswith("-"):
            counter[0] += 1
            options[-1].append(_Choice(counter[0], tuple((w,) for w in tok.split("|")), optional=False))
        else:
            options[-1].append(tok)
        i += 1
    if inside:
        raise ValueError("a '[' without its ']'")
    return options, i


def _choices(items: tuple[object, ...] | list[object]) -> list[_Choice]:
    found: list[_Choice] = []
    for item in items:
        if isinstance(item, _Choice):
            found.append(item)
            for option in item.options:
                found.extend(_choices(option))
    return found


def _render(items: tuple[object, ...] | list[object], pick: dict[int, int]) -> list[str]:
    """``pick``: choice key -> option index (an optional group: -1 leaves it out; default: its first option)."""
    words: list[str] = []
    for item in items:
        if isinstance(item, _Choice):
            k = pick.get(item.key, 0)
            if k >= 0:
                words.extend(_render(item.options[k], pick))
        else:
            words.append(str(item))
    return words


def variants(text: str) -> list[list[str]]:
    """The argument lists a synopsis stands for: every optional group in with its first choice, then each
    other choice of a group or a word in turn (the rest as in the first). ``score X [--a | --b]`` gives
    ``score X --a`` and ``score X --b``; a command without brackets or choices gives itself."""
    options, _ = _parse(_tokens(text), 0, [0], inside=False)
    items = options[0]
    out = [_render(items, {})]
    for choice in _choices(items):
        for k in range(1, len(choice.options)):
            v = _render(items, {choice.key: k})
            if v not in out:
                out.append(v)
    return out
