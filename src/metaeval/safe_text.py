"""Untrusted text (task files, model output, file names) made inert where it is shown.

- `printable`: control characters (C0 but newline and tab, DEL, C1, so also ESC; and the
  bidirectional overrides) written as ``\\xNN`` or ``\\uNNNN`` (ESC as ``\\x1b``), so no
  escape sequence from a task or a model reaches a terminal (an OSC 52 clipboard write, a
  cursor move that hides a line) or a report file (Markdown adds HTML escaping:
  `metaeval.report.markdown.md_text`).
- `csv_cell` / `csv_value`: the OWASP rule against CSV injection. A text cell that a
  spreadsheet would run as a formula (it starts with ``=``, ``+``, ``-``, ``@``, tab or CR) is
  written with a leading ``'``; so is one that starts with ``'`` itself, which keeps the rule
  reversible. `csv_value` removes that quote when reading. Only text cells are quoted: numbers
  are written as numbers (``-1`` stays ``-1``), while a text cell ``-1`` is written ``'-1``
  (a spreadsheet shows it as text) and read back as ``-1``.
"""

from __future__ import annotations

import re

# C0 but tab and newline, DEL, C1; the bidirectional embeddings, overrides and isolates that
# reorder what a terminal or a viewer shows ("Trojan Source"); and lone surrogates (bytes of an
# undecodable file name kept by "surrogateescape", which no terminal encoding can print)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_CSV_QUOTED = (*CSV_FORMULA_START, "'")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as "surrogateescape" keeps it
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character but newline and tab written as ``\\xNN`` (and
    an undecodable byte of a file name, kept as a lone surrogate, as ``\\xNN`` too)."""
    return _CONTROL.sub(_escape, text)


def csv_cell(value: str) -> str:
    """A text value as written into a CSV cell (a leading ``'`` where a spreadsheet would see
    a formula, or where the value starts with ``'``)."""
    return "'" + value if value.startswith(_CSV_QUOTED) else value


def csv_value(cell: str) -> str:
    """The value of a CSV cell written by `csv_cell` (a cell typed by hand without the quote
    is read as it is)."""
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(_CSV_QUOTED) else cell
