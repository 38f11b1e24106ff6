"""Templates (Jinja2, autoescape on: everything from a run is text, never markup) and the
small formatting helpers the pages share."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any
from urllib.parse import urlencode

import jinja2
from markupsafe import Markup

STATIC_FILES = {"view.css": "text/css; charset=utf-8", "view.js": "text/javascript; charset=utf-8"}


def fmt(value: Any, places: int = 3) -> str:
    """A number to `places` decimals, an int as is, None as 'n/a'."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{places}f}"
    return str(value)


def pct(value: Any) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def delta(new: Any, old: Any) -> str:
    """new - old with a sign, 'n/a' when either is missing."""
    if not isinstance(new, int | float) or not isinstance(old, int | float):
        return "n/a"
    return f"{new - old:+.3f}"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def query(**params: Any) -> str:
    """A query string of the non-empty params (values are URL-encoded, so any text is safe)."""
    return urlencode({k: v for k, v in params.items() if v not in (None, "")})


def bars_svg(counts: dict[str, int], width: int = 420) -> Markup:
    """A horizontal bar chart as inline SVG (attributes only: no inline style, which the
    page's Content-Security-Policy forbids). Labels are escaped."""
    if not counts:
        return Markup('<p class="muted">none</p>')
    top = max(counts.values()) or 1
    row, label_w = 22, 170
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    height = row * len(items) + 6
    parts = [
        f'<svg class="bars" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        'role="img">'
    ]
    for i, (name, n) in enumerate(items):
        y = i * row + 3
        w = max(1, int((width - label_w - 50) * n / top))
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">'
            f"{Markup.escape(name[:28])}</text>"
            f'<rect x="{label_w}" y="{y}" width="{w}" height="{row - 6}" class="bar"/>'
            f'<text x="{label_w + w + 6}" y="{y + 14}">{n}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("metaeval.view", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(fmt=fmt, pct=pct, pretty_json=pretty_json)
    env.globals.update(query=query, delta=delta, bars_svg=bars_svg)
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def static_file(name: str) -> tuple[bytes, str] | None:
    """(bytes, content type) of a file the viewer ships, None for any other name."""
    if name not in STATIC_FILES:
        return None
    data = (resources.files("metaeval.view") / "static" / name).read_bytes()
    return data, STATIC_FILES[name]
