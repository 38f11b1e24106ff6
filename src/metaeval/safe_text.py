"""Untrusted text (task files, model output, file names) made inert where it is shown.

- `printable`: control characters (C0 but newline and tab, DEL, C1, so also ESC) written as
  ``\\xNN``, so no escape sequence from a task or a model reaches a terminal (an OSC 52
  clipboard write, a cursor move that hides a line) or a report file.
- `markdown_text`: `printable` plus ``&``, ``<``, ``>`` as HTML entities, so raw HTML in a
  finding renders as text in report.md.
- `csv_cell` / `csv_value`: the OWASP rule against CSV injection. A text cell that a
  spreadsheet would run as a formula (it starts with ``=``, ``+``, ``-``, ``@``, tab or CR) is
  written with a leading ``'``; so is one that starts with ``'`` itself, which keeps the rule
  reversible. `csv_value` removes that quote when reading. Only text cells are quoted: numbers
  are written as numbers (``-1`` stays ``-1``), while a text cell ``-1`` is written ``'-1``
  (a spreadsheet shows it as text) and read back as ``-1``.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_HTML_RE = re.compile("[&<>]")
CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_CSV_QUOTED = (*CSV_FORMULA_START, "'")


def printable(text: str) -> str:
    """`text` with every control character but newline and tab written as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def markdown_text(text: str) -> str:
    """`printable` text with ``&``, ``<`` and ``>`` escaped, for Markdown outside code."""
    return _HTML_RE.sub(lambda m: _HTML[m.group(0)], printable(text))


def csv_cell(value: str) -> str:
    """A text value as written into a CSV cell (a leading ``'`` where a spreadsheet would see
    a formula, or where the value starts with ``'``)."""
    return "'" + value if value.startswith(_CSV_QUOTED) else value


def csv_value(cell: str) -> str:
    """The value of a CSV cell written by `csv_cell` (a cell typed by hand without the quote
    is read as it is)."""
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(_CSV_QUOTED) else cell
