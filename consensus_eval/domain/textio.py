"""Reading the user's text files (CSV labels and ratings, configs) in the encodings they really come in.

Excel saves "CSV UTF-8" with a byte-order mark, and on Chinese Windows its plain "CSV" is GBK
(code page 936). :func:`read_text` reads a file the way a user means it:

- with ``encoding`` given (the ``--encoding`` option), exactly that (a UTF-8 BOM is dropped when the
  encoding is UTF-8);
- else UTF-8 (a BOM, if any, is dropped); a file that starts with a UTF-16 BOM (Excel's "Unicode
  text") as UTF-16; and if the bytes are not UTF-8, GB18030 (a superset of GBK and GB2312);
- a file that is none of these is refused with an :class:`InputError` naming the file, the line and
  the byte offset of the first bad byte, and suggesting ``--encoding``.

Files that are JSON Lines (cases, model outputs) are UTF-8 by definition and are not read through
the GB18030 fallback; their loaders tolerate a BOM only.
"""

from __future__ import annotations

import codecs
import csv
import importlib
import io
import re
import zipfile
from pathlib import Path
from typing import Any

from consensus_eval._errors import InputError

__all__ = ["FALLBACK_ENCODING", "csv_records", "decimal_point", "formula_guard", "read_text", "unguard",
           "xlsx_records"]

#: tried when a file is not UTF-8: Excel's default for CSV on Chinese Windows (GBK) is a subset of it
FALLBACK_ENCODING = "gb18030"


#: what a message about undecodable bytes suggests by default (CSV files, which have an --encoding option)
ENCODING_HINT = 'save it as UTF-8 (Excel: "CSV UTF-8") or name its encoding with --encoding (e.g. --encoding big5)'


def read_text(path: str | Path, encoding: str | None = None, what: str = "text", *,
              hint: str = ENCODING_HINT) -> str:
    """The text of ``path``: in ``encoding`` if given, else UTF-8 (BOM dropped), UTF-16 (with its BOM)
    or GB18030, in that order. ``what`` names the file in messages ("human labels" -> "human labels
    file not found"); ``hint`` is what a message about undecodable bytes suggests.

    Raises :class:`InputError` for a missing or unreadable file, an unknown encoding, or bytes that
    do not decode (naming the line and the byte offset).
    """
    p = Path(path)
    raw = _read_bytes(p, what)
    if encoding is not None:
        try:
            codec = codecs.lookup(encoding)
        except LookupError:
            raise InputError(f"{p}: unknown encoding {encoding!r} (try utf-8, gb18030, big5, latin-1)") from None
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


def _read_bytes(p: Path, what: str) -> bytes:
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{p}: {what} file not found") from None
    except IsADirectoryError:
        raise InputError(f"{p}: is a folder, not a {what} file") from None
    except OSError as e:
        raise InputError(f"{p}: cannot read {what}: {e.strerror or e}") from None


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
        raise InputError(f"{path}:{reader.line_num}: not a readable CSV line: {e}") from None
    return out


_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")


def decimal_point(text: str) -> str:
    """A number written with a decimal comma (``30,5``, Excel in many locales) with a point; anything else as is."""
    return text.replace(",", ".") if _DECIMAL_COMMA.fullmatch(text.strip()) else text


def xlsx_records(path: Path) -> list[tuple[int, list[str]]]:
    """(row number, cells as text) of every non-blank row of the first sheet of an Excel workbook, the header
    first (openpyxl, read-only, cached values rather than formulas; numbers written as Excel shows them
    without a spurious ``.0``). An unreadable workbook is an :class:`InputError` naming ``path``."""
    try:
        openpyxl: Any = importlib.import_module("openpyxl")   # optional (the xlsx extra), untyped
    except ImportError:
        raise InputError(f"{path}: reading .xlsx needs openpyxl: pip install 'consensus-eval[xlsx]' "
                         "(or save the sheet as CSV UTF-8)") from None
    damaged = (OSError, ValueError, KeyError, zipfile.BadZipFile, openpyxl.utils.exceptions.InvalidFileException)
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
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
    finally:
        book.close()


def _cell_text(v: object) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
