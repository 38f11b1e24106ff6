"""Who may use a gateway: the holder of its token, over a loopback name, never a web page.

Checked on every request before its body is read, with the rules of `metaeval.loopback.access`:
its own loopback ``Host`` (421; on a Unix socket any port, and no ``Host``, are fine), no web
page (403), the token (401), a JSON body (415: ``application/json`` or ``*+json``). The
token is taken where each CLI puts its API key: ``Authorization: Bearer T`` (OpenAI clients,
Codex, mini-swe-agent), ``x-api-key: T`` (Anthropic clients, Claude Code), ``x-goog-api-key:
T`` or ``?key=T`` (Gemini clients). Only the health probes (``HEAD``, ``GET /``, ``GET
/health``) need none.
"""

from __future__ import annotations

from email.message import Message
from urllib.parse import parse_qsl

from metaeval.loopback import access

KEY_HEADERS = ("x-api-key", "x-goog-api-key")
JSON_TYPES = ("application/json", "+json")


def check(
    headers: Message,
    query: str,
    *,
    token: str,
    port: int | None,
    needs_token: bool,
    json_body: bool,
) -> None:
    """Raise `Refused` unless the request may go on (`port` None: a Unix socket)."""
    access.check_host(headers, port, "gateway")
    access.refuse_web_pages(headers)
    if needs_token:
        hint = "missing or wrong gateway token (give it as the API key)"
        access.check_token(presented_keys(headers, query), token, hint)
    if json_body:
        access.check_media(headers, JSON_TYPES)


def presented_keys(headers: Message, query: str) -> list[str]:
    """Every value a client may have sent as its API key."""
    keys = access.bearer(headers)
    keys += [v.strip() for name in KEY_HEADERS for v in headers.get_all(name) or []]
    if "key=" in query:
        keys += [v for k, v in parse_qsl(query, keep_blank_values=True) if k == "key"]
    return keys
