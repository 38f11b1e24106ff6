"""A viewer response (`Page`) and the "no such page" error the routes raise."""

from __future__ import annotations

import json
from typing import Any

TEXT = "text/plain; charset=utf-8"


class NotFound(Exception):
    """No page at this address (answered with 404)."""


class Page:
    """A response: status, content type, body, extra headers."""

    def __init__(
        self,
        body: str | bytes,
        status: int = 200,
        ctype: str = "text/html; charset=utf-8",
        extra: dict[str, str] | None = None,
    ):
        self.body = body.encode("utf-8") if isinstance(body, str) else body
        self.status = status
        self.ctype = ctype
        self.extra = extra or {}


def json_page(data: Any) -> Page:
    """`data` as a JSON response."""
    return Page(json.dumps(data, default=str, ensure_ascii=False), ctype="application/json")


def one_int(rest: list[str]) -> int:
    """The single numeric path part left in `rest` (else: not found)."""
    if len(rest) != 1 or not rest[0].isdigit():
        raise NotFound("/".join(rest))
    return int(rest[0])
