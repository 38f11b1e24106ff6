"""Markdown rendering shared by every protocol's reports.

Text from tasks, models and file names is untrusted. `md_text` shows it as text: control
characters escaped (`metaeval.safe_text.printable`) and ``&``, ``<``, ``>`` written as
entities, so raw HTML is never rendered; inline code spans (on one line) are kept as they are,
since Markdown shows their content literally. `md_code` and `md_fence` put text in code
whatever backticks it holds; table cells get `md_text` plus escaped pipes and newlines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from metaeval.safe_text import printable

_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_HTML_RE = re.compile("[&<>]")


def _html(text: str) -> str:
    return _HTML_RE.sub(lambda m: _HTML[m.group(0)], text)


def _escape_line(line: str) -> str:
    """One line: HTML escaped outside its inline code spans. A span counts only when it
    closes on the same line and its opening backticks are not backslash-escaped; anything
    else is escaped, so this never leaves raw HTML that Markdown would render."""
    out: list[str] = []
    i = 0
    while True:
        start = line.find("`", i)
        if start < 0:
            out.append(_html(line[i:]))
            return "".join(out)
        before = line[i:start]
        out.append(_html(before))
        end = start
        while end < len(line) and line[end] == "`":
            end += 1
        escaped = (len(before) - len(before.rstrip("\\"))) % 2 == 1
        close = None
        if not escaped:
            close = re.compile(f"(?<!`)`{{{end - start}}}(?!`)").search(line, end)
        i = close.end() if close else end
        out.append(line[start:i])


def md_text(value: Any) -> str:
    """Untrusted text for Markdown outside code: no control characters, no raw HTML."""
    return "\n".join(_escape_line(line) for line in printable(str(value)).split("\n"))


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return longest


def md_code(value: Any) -> str:
    """Untrusted text as one inline code span (on one line), whatever backticks it holds."""
    text = " ".join(printable(str(value)).split())
    ticks = "`" * (_longest_backtick_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def md_fence(text: str) -> str:
    """Untrusted text as a fenced code block, with a fence longer than any backtick run."""
    text = printable(text)
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    return f"{fence}\n{text}\n{fence}"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return md_text(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; headers and cells are shown as text (`md_text`), with
    pipes and newlines escaped."""
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
