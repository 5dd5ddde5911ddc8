"""Reading the user's text files (CSV labels and ratings, configs) in the encodings they really come in.

Excel saves "CSV UTF-8" with a byte-order mark, and on Chinese Windows its plain "CSV" is GBK
(code page 936). :func:`read_text` reads a file the way a user means it:

- with ``encoding`` given (the ``--encoding`` option), exactly that (a UTF-8 BOM is dropped when the
  encoding is UTF-8);
- else UTF-8 (a BOM, if any, is dropped); a file that starts with a UTF-16 BOM (Excel's "Unicode
  text") as UTF-16; and if the bytes are not UTF-8, GB18030 (a superset of GBK and GB2312);
- a file that is none of these is refused with an :class:`InputError` naming the file, the line and
  the byte offset of the first bad byte, and suggesting ``--encoding``.

Files that are JSON Lines (cases, calibration suites, TCM files, Text2DT trees, human labels) and JSON files are
UTF-8 by definition and are not read through the GB18030 fallback; they tolerate a BOM only. One reader per
format, for every command: :func:`jsonl_values` / :func:`jsonl_objects` (JSON Lines), :func:`read_json` (JSON),
:func:`csv_records` (CSV/TSV: ``,`` ``;`` or tab, as the header uses), :func:`xlsx_records` (Excel),
:func:`load_yaml` (YAML); the analysis modules parse the rows they give.

Every input file is read through :func:`read_bytes`, which bounds it (docs/limits.md, 'Limits on what is read';
``/dev/zero`` as the cases file would be read until memory ran out, a named pipe nobody writes to would block for
ever): a regular file, ``-`` (standard input) or a pipe (``<(cat file)``) only, never a device or a socket; a
file larger than the cap of its kind (:data:`MAX_INPUT_BYTES`, named in the message) is refused
before it is read, a pipe or standard input once it
has given more; a pipe that gives nothing for :data:`PIPE_WAIT_S` seconds is refused. An Excel workbook is
checked before it is opened (:func:`xlsx_records`): no part over :data:`MAX_XLSX_PART_BYTES` uncompressed, none
compressed more than :data:`MAX_XLSX_RATIO` times (a zip bomb), XML entity declarations refused.
"""

from __future__ import annotations

import codecs
import csv
import importlib
import io
import json
import os
import re
import select
import stat
import sys
import unicodedata
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from consensus_eval._errors import ConsensusEvalError, InputError

__all__ = ["FALLBACK_ENCODING", "MAX_DEPTH", "RefusedJSON", "csv_error", "csv_records", "decimal_point",
           "escape_controls", "formula_guard", "json_type", "jsonl_objects", "jsonl_values", "load_yaml", "loads_json",
           "read_bytes", "read_json", "read_text", "surrogate_field", "unguard", "xlsx_records"]

#: tried when a file is not UTF-8: Excel's default for CSV on Chinese Windows (GBK) is a subset of it
FALLBACK_ENCODING = "gb18030"


#: what a message about undecodable bytes suggests by default (CSV files, which have an --encoding option)
ENCODING_HINT = 'save it as UTF-8 (Excel: "CSV UTF-8") or name its encoding with --encoding (e.g. --encoding big5)'


def read_text(path: str | Path, encoding: str | None = None, what: str = "text", *,
              hint: str = ENCODING_HINT, raw: bytes | None = None) -> str:
    """The text of ``path``: in ``encoding`` if given, else UTF-8 (BOM dropped), UTF-16 (with its BOM)
    or GB18030, in that order. ``what`` names the file in messages ("human labels" -> "human labels
    file not found"); ``hint`` is what a message about undecodable bytes suggests. ``raw``: the file's bytes,
    already read (:func:`read_bytes`: a named pipe, ``<(cat file)``, can be read only once).

    Raises :class:`InputError` for a missing or unreadable file, an unknown encoding, or bytes that
    do not decode (naming the line and the byte offset).
    """
    p = Path(path)
    raw = read_bytes(p, what) if raw is None else raw
    if encoding is not None:
        try:
            codec = codecs.lookup(encoding)
        except LookupError:
            raise InputError(f"{p}: unknown encoding {encoding!r} (try utf-8, gb18030, big5, latin-1)") from None
        if not getattr(codec, "_is_text_encoding", True):   # rot13, base64, zlib: codecs, not text encodings
            raise InputError(f"{p}: {encoding!r} is not a text encoding (try utf-8, gb18030, big5, latin-1)")
        name = "utf-8-sig" if codec.name == "utf-8" else codec.name
        try:
            return raw.decode(name)
        except UnicodeDecodeError as e:
            raise InputError(f"{p}: {what} file is not {encoding} text: {_where(raw, e)}") from None
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError as e:
            raise InputError(f"{p}: {what} file starts like UTF-16 but is not: {_where(raw, e)}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as first:
        try:
            return raw.decode(FALLBACK_ENCODING)
        except UnicodeDecodeError:
            raise InputError(
                f"{p}: {what} file is neither UTF-8 nor GB18030/GBK text: {_where(raw, first)}; {hint}") from None


MiB = 1024**2
#: the largest file of each kind read (bytes, by the ``what`` its reader names); others: :data:`DEFAULT_MAX_BYTES`
MAX_INPUT_BYTES = {"cases": 1024 * MiB, "trees": 1024 * MiB, "config": 4 * MiB, "rubric": 16 * MiB,
                   "prompt template": 4 * MiB, "human labels": 256 * MiB, "ratings": 256 * MiB,
                   "knowledge": 256 * MiB, "calibration": 64 * MiB, "calibration suite": 256 * MiB}
DEFAULT_MAX_BYTES = 256 * MiB
#: seconds a pipe (``<(cat file)``, a FIFO) may take to give its first bytes before it is given up on
PIPE_WAIT_S = 60.0


def max_bytes(what: str) -> int:
    """The cap of an input file of the kind ``what`` (:data:`MAX_INPUT_BYTES`)."""
    return MAX_INPUT_BYTES.get(what, DEFAULT_MAX_BYTES)


def _too_large(p: Path | str, what: str, cap: int) -> InputError:
    return InputError(f"{p}: the {what} file is larger than {cap // MiB:,} MiB, the most a {what} file may be "
                      "(split it, or keep only what is needed)")


def read_bytes(p: Path, what: str) -> bytes:
    """The bytes of ``p`` (``what`` names it in messages: "human labels file not found", and its cap:
    :func:`max_bytes`). ``-`` is standard input; a pipe is read once (module docstring). A device, a socket, a
    file over the cap, a pipe silent for :data:`PIPE_WAIT_S` seconds are refused with an :class:`InputError`."""
    cap = max_bytes(what)
    if str(p) == "-":
        data = sys.stdin.buffer.read(cap + 1)
        if len(data) > cap:
            raise _too_large("standard input", what, cap)
        return data
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError(f"{p}: {what} file not found") from None
    except OSError as e:
        raise InputError(f"{p}: cannot read {what}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{p}: is a folder, not a {what} file")
    pipe = stat.S_ISFIFO(st.st_mode)
    if not pipe and not stat.S_ISREG(st.st_mode):
        kind = "a character device" if stat.S_ISCHR(st.st_mode) else "a block device" if stat.S_ISBLK(
            st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file"
        raise InputError(f"{p}: is {kind}, not a {what} file: give a regular file (or - for standard input)")
    if not pipe and st.st_size > cap:
        raise _too_large(p, what, cap)
    try:
        fd = os.open(p, os.O_RDONLY | (os.O_NONBLOCK if pipe else 0))
    except OSError as e:
        raise InputError(f"{p}: cannot read {what}: {e.strerror or e}") from None
    try:
        if pipe:
            poll = select.poll()
            poll.register(fd, select.POLLIN)
            if not poll.poll(int(PIPE_WAIT_S * 1000)):
                raise InputError(f"{p}: a pipe that gave nothing in {PIPE_WAIT_S:g} s; nothing writes to it? "
                                 f"give the {what} file itself")
            os.set_blocking(fd, True)
        chunks = []
        size = 0
        want = 1 << 20 if pipe else st.st_size + 1   # a file at once (and what it grew by since), a pipe as it comes
        while chunk := os.read(fd, want):
            size += len(chunk)
            if size > cap:   # a file that grew, or a pipe that gives more than a file may hold
                raise _too_large(p, what, cap)
            chunks.append(chunk)
            want = 1 << 20
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    except OSError as e:
        raise InputError(f"{p}: cannot read {what}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def _where(raw: bytes, e: UnicodeDecodeError) -> str:
    """``line 3, byte 41 (0xb2)``: where the first undecodable byte is (lines counted from 1)."""
    line = raw.count(b"\n", 0, e.start) + 1
    return f"line {line}, byte {e.start} (0x{raw[e.start]:02x})"


#: the first characters that make a spreadsheet read a cell as a formula (OWASP: CSV injection)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def formula_guard(value: object) -> object:
    """``value`` made safe for a spreadsheet: a string starting with ``=``, ``+``, ``-``, ``@``, a tab or
    a carriage return gets a leading ``'`` unless it is a plain number; anything else is unchanged.
    :func:`unguard` takes the ``'`` off again."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def unguard(text: str) -> str:
    """A cell as :func:`formula_guard` meant it: the ``'`` it put before a formula-like text taken off
    (``'=A1`` -> ``=A1``); any other text unchanged (a ``'`` the user typed before a plain word stays)."""
    if text.startswith("'") and formula_guard(text[1:]) != text[1:]:
        return text[1:]
    return text


def csv_records(path: Path, text: str) -> list[tuple[int, list[str]]]:
    """(first line, cells) of every non-blank record of a CSV text, the header first; the delimiter is the
    one of ``,`` ``;`` tab that the header line uses most (Excel writes ``;`` where the decimal mark is a
    comma). A record that cannot be read is an :class:`InputError` naming ``path`` and the line."""
    if "\x00" in text:   # the csv module reads NUL as a character: a cell would hold it, unseen
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise InputError(f"{path}:{line}: a NUL byte: not a text CSV (a binary file, or UTF-16 saved without its "
                         "byte-order mark?); save it as CSV UTF-8")
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    delimiter = max([",", ";", "\t"], key=first.count)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    out = []
    start = 1
    try:
        for cells in reader:
            if any(c.strip() for c in cells):
                out.append((start, cells))
            start = reader.line_num + 1
    except csv.Error as e:
        raise csv_error(path, start, reader.line_num, e) from None
    return out


def csv_error(path: Path, start: int, line: int, e: csv.Error) -> InputError:
    """The :class:`InputError` of a CSV record that cannot be read: a cell over the csv module's size limit
    (128 KiB: a quote left open swallows the rest of the file) names the record's first line ``start``, any
    other error the line ``line`` where reading stopped."""
    if "field larger than field limit" in str(e):
        return InputError(f"{path}:{start}: a cell is longer than {csv.field_size_limit():,} characters (a quote "
                          "left open?); no label, rating or id is that long")
    return InputError(f"{path}:{line}: not a readable CSV line: {e}")


_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")


def decimal_point(text: str) -> str:
    """A number written with a decimal comma (``30,5``, Excel in many locales) with a point; anything else as is."""
    return text.replace(",", ".") if _DECIMAL_COMMA.fullmatch(text.strip()) else text


#: the largest part of an Excel workbook read (uncompressed bytes): a sheet, its shared strings, a comment
MAX_XLSX_PART_BYTES = 256 * MiB
#: the most an Excel part of over a MiB may be compressed (uncompressed / compressed): more is a zip bomb
#: (real sheets compress 5 to 20 times)
MAX_XLSX_RATIO = 100
_DECLARATIONS = (b"<!DOCTYPE", b"<!ENTITY")


def _check_xlsx(path: Path, book: zipfile.ZipFile) -> None:
    """Refuse a workbook with a part over :data:`MAX_XLSX_PART_BYTES`, one compressed over :data:`MAX_XLSX_RATIO`
    times, or XML that declares a document type or entities (an XXE or "billion laughs" attempt)."""
    for info in book.infolist():
        if info.file_size > MAX_XLSX_PART_BYTES:
            raise InputError(f"{path}: the workbook's part {info.filename} is {info.file_size / MiB:,.0f} MiB "
                             f"uncompressed, over the {MAX_XLSX_PART_BYTES // MiB} MiB a part may be (save the "
                             "sheet as CSV UTF-8, without comments or images)")
        if info.file_size > MiB and info.file_size > MAX_XLSX_RATIO * max(info.compress_size, 1):
            raise InputError(f"{path}: the workbook's part {info.filename} is compressed "
                             f"{info.file_size / max(info.compress_size, 1):,.0f} times, over the "
                             f"{MAX_XLSX_RATIO} times a real sheet is (a zip bomb?); save the sheet as CSV UTF-8")
        if info.filename.endswith((".xml", ".rels", ".vml")):
            tail = b""
            with book.open(info) as part:
                while chunk := part.read(1 << 20):
                    if any(d in tail + chunk for d in _DECLARATIONS):
                        raise InputError(f"{path}: the workbook's part {info.filename} declares a document type or "
                                         "XML entities, which Excel never writes (an XXE or entity-expansion "
                                         "attempt?); it is not read: save the sheet as CSV UTF-8")
                    tail = chunk[-16:]


def xlsx_records(path: Path, what: str = "cases") -> list[tuple[int, list[str]]]:
    """(row number, cells as text) of every non-blank row of the first sheet of an Excel workbook, the header
    first (openpyxl, read-only, cached values rather than formulas; numbers written as Excel shows them
    without a spurious ``.0``). The workbook is read within the cap of ``what`` and checked first
    (:func:`_check_xlsx`). An unreadable workbook is an :class:`InputError` naming ``path``."""
    try:
        openpyxl: Any = importlib.import_module("openpyxl")   # optional (the xlsx extra), untyped
    except ImportError:
        raise InputError(f"{path}: reading .xlsx needs openpyxl: pip install 'consensus-eval[xlsx]' "
                         "(or save the sheet as CSV UTF-8)") from None
    from xml.etree.ElementTree import ParseError

    damaged = (OSError, ValueError, KeyError, EOFError, ParseError, zipfile.BadZipFile,
               openpyxl.utils.exceptions.InvalidFileException)
    raw = io.BytesIO(read_bytes(path, what))
    try:
        with zipfile.ZipFile(raw) as archive:
            _check_xlsx(path, archive)
        book = openpyxl.load_workbook(raw, read_only=True, data_only=True)
    except InputError:
        raise
    except damaged as e:
        raise InputError(f"{path}: not a readable .xlsx workbook ({type(e).__name__}: {e})") from None
    try:
        sheet = book.worksheets[0]
        out = []
        for i, row in enumerate(sheet.iter_rows(values_only=True), start=1):
            cells = ["" if v is None else _cell_text(v) for v in row]
            if any(c.strip() for c in cells):
                out.append((i, cells))
        return out
    except damaged as e:
        raise InputError(f"{path}: not a readable .xlsx workbook ({type(e).__name__}: {e})") from None
    finally:
        book.close()


def _cell_text(v: object) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


# --------------------------------------------------------------------------- JSON and YAML written by users

#: the deepest nesting a JSON or YAML value read from a user's file may have: the parsers recurse, and so does
#: much of what reads their result; no case, label, tree or config is nested anywhere near this deep
MAX_DEPTH = 100

_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class RefusedJSON(ConsensusEvalError, json.JSONDecodeError):
    """JSON that parses but is refused (:func:`loads_json`): nested deeper than :data:`MAX_DEPTH`, or a lone
    surrogate in a string. A :class:`json.JSONDecodeError`, so each reader's ``except json.JSONDecodeError``
    reports it with its own file and line, and the message carries the column (and the field)."""


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def loads_json(text: str, *, unique_keys: bool = False) -> Any:
    """``json.loads(text)``, refusing (:class:`RefusedJSON`) a value nested deeper than :data:`MAX_DEPTH` (at the
    bracket that goes too deep; Python's parser would raise RecursionError) and a string or key holding a lone
    surrogate (``"\\ud800"``: half of a character, e.g. an emoji cut in two; it cannot be written as UTF-8, so
    it would fail later, in a hash or a file). ``unique_keys``: an object that gives a key twice is refused too
    (a user's file: JSON keeps the last silently, as the YAML reader does not)."""
    try:
        data = json.loads(text, object_pairs_hook=_unique) if unique_keys else json.loads(text)
    except _DuplicateKey as e:
        quoted = json.dumps(e.key, ensure_ascii=False)
        first = text.find(quoted)
        raise RefusedJSON(f"the key {quoted} is given twice in one object (which one is meant?)", text,
                          max(text.find(quoted, first + 1), 0)) from None
    except RecursionError:
        raise RefusedJSON(f"nested deeper than {MAX_DEPTH} levels", text, _too_deep_at(text)) from None
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(data) > MAX_DEPTH:
        raise RefusedJSON(f"nested deeper than {MAX_DEPTH} levels", text, _too_deep_at(text))
    if _SURROGATE_ESCAPE.search(text):
        where = surrogate_field(data)
        if where is not None:
            raise RefusedJSON(f"{where}: {SURROGATE_MESSAGE}", text, _lone_escape_at(text))
    return data


# --------------------------------------------------------------------------- JSON Lines: the one reader


def jsonl_values(p: Path, errors: list[str], *, what: str = "cases", encoding: str | None = None,
                 raw: bytes | None = None) -> Iterator[tuple[str, int, Any]]:
    """The values of the JSON Lines file ``p`` (``-``: standard input; ``raw``: its bytes, read already), each as
    ``("file:line", line number, value)``: the one JSON Lines reader of every command (cases, calibration
    suites, TCM files, Text2DT ``.jsonl``, human labels), with one encoding policy and one set of messages.

    JSON is UTF-8 (RFC 8259): each line is decoded as UTF-8, the first may start with a BOM; a line that is not
    is reported, never guessed at (a GB18030 file gets the same answer from every command). ``encoding`` (an
    ``--encoding`` option) decodes the whole file with that codec instead. Lines end at ``\n`` or ``\r`` only
    (a U+2028 inside a string is text). Blank lines are skipped. A line that is not UTF-8 or not JSON (nesting
    over :data:`MAX_DEPTH`, a lone surrogate, a key given twice included) adds ``file:line: message`` to
    ``errors`` instead. The file is read within the cap of ``what`` (:func:`read_bytes`)."""
    data = read_bytes(p, what) if raw is None else raw
    lines: list[bytes | str] = [*re.split(r"\r\n|\r|\n", read_text(p, encoding, what, raw=data))] \
        if encoding is not None else [*data.splitlines()]
    for lineno, given in enumerate(lines, start=1):
        where = f"{p}:{lineno}"
        if isinstance(given, bytes):
            try:
                line = given.decode("utf-8-sig" if lineno == 1 else "utf-8")  # tolerate a BOM
            except UnicodeDecodeError as e:
                errors.append(f"{where}: not UTF-8 (byte {e.start}: {given[e.start:e.start + 1]!r})")
                continue
        else:
            line = str(given)
        if not line.strip():
            continue
        try:
            value = loads_json(line, unique_keys=True)  # nesting over 100 deep, a lone surrogate, a key twice
        except json.JSONDecodeError as e:
            errors.append(f"{where}: not valid JSON: {e.msg} at column {e.colno}")
            continue
        yield where, lineno, value


def jsonl_objects(p: Path, errors: list[str], *, file: str = "a cases file", reading: str = "cases",
                  item: str = "a case", encoding: str | None = None) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """The objects of the JSON Lines file ``p`` (:func:`jsonl_values`), each as ``("file:line", line number,
    object)``; a line that is not a JSON object adds ``file:line: {item} must be a JSON object`` to ``errors``.
    A folder or a missing file raises :class:`InputError` naming the file as ``file`` ("is a folder, not a cases
    file (JSONL)") and ``reading`` ("cannot read cases: ...")."""
    if p.is_dir():
        raise InputError(f"{p}: is a folder, not {file} (JSONL)")
    if not p.exists() and str(p) != "-":
        raise InputError(f"{p}: cannot read {reading}: No such file or directory")
    for where, lineno, data in jsonl_values(p, errors, what=reading.removeprefix("the "), encoding=encoding):
        if not isinstance(data, dict):
            errors.append(f"{where}: {item} must be a JSON object, got {json_type(data)}")
            continue
        yield where, lineno, data


def read_json(p: Path, what: str) -> Any:
    """The JSON value of the file ``p`` (a Text2DT ``.json``, a TCM knowledge file): UTF-8, a BOM tolerated, as
    :func:`jsonl_values` reads JSON Lines; read within the cap of ``what``. A file that is not UTF-8 or not JSON
    is an :class:`InputError` naming the line (and the byte, or the column)."""
    raw = read_bytes(p, what)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{p}: not UTF-8 ({_where(raw, e)}); a JSON file is UTF-8") from None
    try:
        return loads_json(text, unique_keys=True)
    except json.JSONDecodeError as e:
        raise InputError(f"{p}:{e.lineno}: not valid JSON: {e.msg} at column {e.colno}") from None


def json_type(value: Any) -> str:
    """What a JSON value is, for messages ("got an array"): ``an object``, ``an array``, ``a string``, ``a number``,
    ``a boolean`` or ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


#: what a lone surrogate is, for messages
SURROGATE_MESSAGE = ("a lone surrogate (\\ud800-\\udfff): half of a character, e.g. an emoji cut in two; "
                     "the text is damaged")


def surrogate_field(data: Any, path: str = "") -> str | None:
    """The path (``record``, ``conversation[0].text``, ``meta.note``) of the first string or key of ``data``
    holding a lone surrogate, or None."""
    stack: list[tuple[Any, str]] = [(data, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return where or "(the value)"
        elif isinstance(node, dict):
            for key, value in reversed(list(node.items())):
                sub = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and _SURROGATE.search(key):
                    return f"{where or '(top level)'}: a key"
                stack.append((value, sub))
        elif isinstance(node, list):
            stack.extend((value, f"{where}[{i}]") for i, value in reversed(list(enumerate(node))))
    return None


def _depth(data: Any) -> int:
    """How many dicts and lists deep ``data`` goes (0: a scalar), counted no further than ``MAX_DEPTH + 1``:
    one layer of containers at a time (3x faster than a stack of (node, level) pairs on a store's cases)."""
    deepest = 0
    layer = [data] if isinstance(data, (dict, list)) else []
    while layer:
        deepest += 1
        if deepest > MAX_DEPTH:
            return deepest
        below: list[Any] = []
        add = below.append
        for node in layer:
            for x in node.values() if isinstance(node, dict) else node:
                if isinstance(x, (dict, list)):
                    add(x)
        layer = below
    return deepest


def _too_deep_at(text: str) -> int:
    """The index of the bracket that opens level ``MAX_DEPTH + 1`` (strings skipped), or 0."""
    level, in_string, escaped = 0, False, False
    for i, c in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            level += 1
            if level > MAX_DEPTH:
                return i
        elif c in "]}":
            level -= 1
    return 0


def _lone_escape_at(text: str) -> int:
    """The index of the first ``\\uXXXX`` escape of a lone surrogate in ``text`` (0 if none is found)."""
    matches = list(_SURROGATE_ESCAPE.finditer(text))
    i = 0
    while i < len(matches):
        m = matches[i]
        high = m.group(0)[3].lower() in "89ab"
        if high and i + 1 < len(matches) and matches[i + 1].start() == m.end() \
                and matches[i + 1].group(0)[3].lower() in "cdef":
            i += 2
            continue
        return m.start()
    return 0


#: the most values a YAML file may expand to once its aliases are followed (a config has a few hundred)
MAX_YAML_NODES = 100_000


def load_yaml(text: str, path: str | Path) -> Any:
    """``yaml.safe_load(text)`` for a file a user wrote (``path`` names it in messages), refusing with an
    :class:`InputError` naming the line: a key given twice in one mapping (YAML would keep the last one
    silently), an alias that contains itself, aliases that expand to more than :data:`MAX_YAML_NODES` values
    (a "billion laughs" file), nesting deeper than :data:`MAX_DEPTH`, and a lone surrogate
    (``"\\ud800"``). Merge keys (``<<: *defaults``) work as in YAML. Invalid YAML raises
    :class:`yaml.YAMLError` as ``yaml.safe_load`` does."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise InputError(f"{path}:{loader.line + 1}: YAML nested deeper than {MAX_DEPTH} levels") from None
        if node is None:
            return None
        _check_yaml(node, path)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_yaml(root: Any, path: str | Path) -> None:
    import yaml

    def line(node: Any) -> int:
        return int(node.start_mark.line) + 1

    size: dict[int, int] = {}
    pending: set[int] = set()   # on the path from the root to the node being looked at
    stack: list[tuple[Any, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, finished = stack.pop()
        key = id(node)
        children = ([x for pair in node.value for x in pair] if isinstance(node, yaml.MappingNode) else
                    list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if finished:
            pending.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            if size[key] > MAX_YAML_NODES:
                raise InputError(f"{path}:{line(node)}: the YAML aliases here expand to more than "
                                 f"{MAX_YAML_NODES:,} values (a \"billion laughs\" file?); write the values out")
            continue
        if key in size:
            continue
        if depth > MAX_DEPTH:
            raise InputError(f"{path}:{line(node)}: YAML nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.ScalarNode) and _SURROGATE.search(node.value):
            raise InputError(f"{path}:{line(node)}: {SURROGATE_MESSAGE}")
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for k, _v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    if (k.tag, k.value) in first:
                        raise InputError(f"{path}:{line(k)}: duplicate key {k.value!r} (first on line "
                                         f"{first[(k.tag, k.value)]}); YAML would keep only the last one")
                    first[(k.tag, k.value)] = line(k)
        pending.add(key)
        stack.append((node, depth, True))
        for c in children:
            if id(c) in pending:
                raise InputError(f"{path}:{line(node)}: a YAML alias here refers to a node that contains it "
                                 "(a loop); write the value out")
            if id(c) not in size:
                stack.append((c, depth + 1, False))


# --------------------------------------------------------------------------- terminal and Markdown text

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """``text`` with every control character except newline and tab written as an escape (``\\x1b``, ``\\x07``):
    shown on a terminal or in Markdown, a quote from a judge, a name from a sheet or a file name cannot move the
    cursor, clear the screen, set the window title or hide what follows."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def fold_width(text: str) -> str:
    """Full-width forms to half-width (and the ideographic space to a space), one character for one:
    each character becomes its NFKC form when that is a single character, else stays as it is."""
    if text.isascii():
        return text
    if len(text) < _FOLD_BY_ARRAY:
        return text.translate(_WIDTH)
    return _fold_width_array(text)


#: texts this long or longer are folded as an array of code points (a record: x3.5 against ``str.translate``,
#: which looks each character up in the table one by one)
_FOLD_BY_ARRAY = 128


def _fold_width_array(text: str) -> str:
    """:func:`fold_width` of ``text`` through :data:`_WIDTH_CODES` (the same table, as an array over the basic
    plane), when every character is in the basic plane; by ``str.translate`` otherwise."""
    import numpy as np  # here: the command line starts without numpy

    try:
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    except UnicodeEncodeError:   # a lone surrogate
        return text.translate(_WIDTH)
    if codes.max() >= 0x10000:
        return text.translate(_WIDTH)
    if not _WIDTH_CODES:
        _WIDTH_CODES.extend([np.arange(0x10000, dtype=np.uint32), np.zeros(0x10000, dtype=bool)])
    folded, known = _WIDTH_CODES
    seen = known[codes]
    if not seen.all():    # each character looked up once in _WIDTH: its fold set before it is marked known
        new = np.unique(codes[~seen]).tolist()
        folded[new] = [ord(_WIDTH[c]) for c in new]
        known[new] = True
    return str(folded[codes].tobytes().decode("utf-32-le"))


class _WidthTable(dict[int, str]):
    """``str.translate`` table of the one-for-one NFKC fold, filled as characters are met."""

    def __missing__(self, key: int) -> str:
        c = chr(key)
        f = unicodedata.normalize("NFKC", c)
        value = self[key] = f if len(f) == 1 else c
        return value


_WIDTH = _WidthTable()
#: :data:`_WIDTH` as arrays over the basic plane, made when first needed: each code point's fold, and whether it
#: was looked up yet (:func:`_fold_width_array`)
_WIDTH_CODES: list[Any] = []
