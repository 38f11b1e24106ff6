"""Rich consoles for command output that read well on a terminal and in a file.

Rich assumes 80 columns when the output is not a terminal and hard-wraps long lines there
(``infra errors\\n0``). When stdout or stderr goes to a file or a pipe, lines are printed
unwrapped (``soft_wrap``) and tables get room up to `PIPE_WIDTH` columns; a ``COLUMNS``
variable still wins. On a terminal nothing changes.

Every string a console prints (a line, a table cell, a progress label) and every log record
(`escape_log_output`) passes through `metaeval.safe_text.printable`: a task's or a model's text may hold escape
sequences (an OSC 52 clipboard write, a cursor move hiding a line), which are shown as
``\\x1b...`` instead of reaching the terminal.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from rich.console import Console
from rich.text import Text

from metaeval.safe_text import printable

PIPE_WIDTH = 200


class SafeConsole(Console):
    """A rich Console that shows the control characters of every string it prints escaped
    (`printable`); rich's own styling is unaffected."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(printable(text), **kwargs)


def make_console(stderr: bool = False, markup: bool = True) -> Console:
    """A console for stdout (or stderr) that does not wrap at 80 columns when piped.

    `markup=False` prints text literally (for output holding user paths and names)."""
    console = SafeConsole(stderr=stderr, markup=markup)
    if not console.is_terminal:
        width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else None
        console = SafeConsole(
            stderr=stderr, soft_wrap=True, width=width or PIPE_WIDTH, markup=markup
        )
    return console


class _PrintableFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


def escape_log_output() -> None:
    """Escape control characters in what Python's last-resort log handler prints (warnings
    and errors of every logger, on stderr, when no handler is configured)."""
    if logging.lastResort is not None:
        logging.lastResort.setFormatter(_PrintableFormatter("%(message)s"))
