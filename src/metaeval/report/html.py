"""Pieces shared by every protocol's HTML report: one stylesheet, inlined into each page, and
the `finalize` hook that keeps control characters out of every page."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from markupsafe import Markup

from metaeval.safe_text import printable


@cache
def shared_css() -> Markup:
    """The common stylesheet (``style.css``), ready to inline inside a ``<style>`` element."""
    text = (resources.files("metaeval.report") / "style.css").read_text(encoding="utf-8")
    return Markup(text)


def printable_output(value: Any) -> Any:
    """A Jinja ``finalize`` hook: every string a template prints has its control characters
    escaped (`printable`), so an escape sequence from a task or a model does not reach a
    terminal that shows the page's source; autoescaping still applies afterwards."""
    if isinstance(value, Markup):
        return Markup(printable(str(value)))
    if isinstance(value, str):
        return printable(value)
    return value
