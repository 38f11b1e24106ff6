"""Markdown rendering shared by every protocol's reports.

Text from tasks, models and file names is untrusted. `md_text` shows it as text: control
characters escaped (`metaeval.safe_text.printable`) and ``&``, ``<``, ``>`` written as
entities, so raw HTML is never rendered; inline code spans (on one line) are kept as they are,
since Markdown shows their content literally. `md_code` and `md_fence` put text in code
whatever backticks it holds; table cells get `md_text` plus escaped pipes and newlines.

`md_document` is the last step of every ``report.md`` writer: whatever a piece of the report
forgot to escape, the file it writes holds no control character (C0 but newline and tab, DEL,
C1: no ESC, so no CSI or OSC 52 sequence) and no ``<`` outside code, so no raw HTML.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from metaeval.safe_text import printable

_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_HTML_RE = re.compile("[&<>]")


def _html(text: str) -> str:
    return _HTML_RE.sub(lambda m: _HTML[m.group(0)], text)


def _tag_start(text: str) -> str:
    return text.replace("<", "&lt;")


def _escape_line(line: str, escape: Callable[[str], str] = _html) -> str:
    """One line: HTML escaped (by `escape`) outside its inline code spans. A span counts only
    when it closes on the same line and its opening backticks are not backslash-escaped;
    anything else is escaped, so this never leaves raw HTML that Markdown would render."""
    out: list[str] = []
    i = 0
    while True:
        start = line.find("`", i)
        if start < 0:
            out.append(escape(line[i:]))
            return "".join(out)
        before = line[i:start]
        out.append(escape(before))
        end = start
        while end < len(line) and line[end] == "`":
            end += 1
        escaped = (len(before) - len(before.rstrip("\\"))) % 2 == 1
        close = None
        if not escaped:
            close = re.compile(f"(?<!`)`{{{end - start}}}(?!`)").search(line, end)
        i = close.end() if close else end
        out.append(line[start:i])


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def md_document(text: str) -> str:
    """A whole report.md as it is written: control characters escaped everywhere, and ``<``
    written ``&lt;`` outside fenced blocks and inline code spans (text already shown by
    `md_text` holds none, so this changes nothing there). Every report.md writer ends here."""
    out: list[str] = []
    fence = ""
    for line in printable(text).split("\n"):
        opening = _FENCE.match(line)
        if fence:
            if opening and opening.group(1)[0] == fence[0] and line.strip() == opening.group(1):
                fence = "" if len(opening.group(1)) >= len(fence) else fence
            out.append(line)
        elif opening and not (opening.group(1)[0] == "`" and "`" in line[opening.end() :]):
            fence = opening.group(1)  # (an info string with a backtick makes no fence)
            out.append(line)
        else:
            out.append(_escape_line(line, _tag_start))
    return "\n".join(out)


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
