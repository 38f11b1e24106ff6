"""Pieces shared by every protocol's HTML report: one stylesheet, inlined into each page, the
`finalize` hook that keeps control characters out of every page, and the one Jinja
environment (`page_kit`) every static report renders from."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from typing import Any

import jinja2
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


@cache
def page_kit() -> jinja2.Environment:
    """The Jinja environment of the static reports (audit, build-and-find, improve):
    autoescaped, strict about undefined names, blocks trimmed, every printed string through
    `printable_output`. A page is named ``"<package>:<path>"`` and read from that package, so
    each protocol keeps its page beside its code and this layer names none of them."""
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_package_file),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=printable_output,
    )


def _package_file(name: str) -> str:
    package, sep, path = name.partition(":")
    if not sep or not package or not path:
        raise jinja2.TemplateNotFound(name)
    return (resources.files(package) / path).read_text(encoding="utf-8")


def page_template(
    package: str, path: str, filters: Mapping[str, Callable[..., Any]] | None = None
) -> jinja2.Template:
    """The page at `path` inside `package`, compiled by `page_kit` (once per process), with
    the page's own `filters` added to the kit first; a filter name another page already
    uses for another function is refused."""
    env = page_kit()
    for name, function in (filters or {}).items():
        if env.filters.setdefault(name, function) is not function:
            raise ValueError(f"report filter {name!r} is already another page's")
    return env.get_template(f"{package}:{path}")
