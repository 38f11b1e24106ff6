"""A loopback HTTP gateway that serves any metaeval model over the Anthropic, OpenAI and Gemini
APIs, so agent CLIs (Claude Code, Codex, Gemini CLI, mini-swe-agent) can run on it.

`Gateway` and `ExchangeLog` are imported on first use: every `metaeval` command registers
`serve`, and only that command needs the server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metaeval.gateway.exchange_log import ExchangeLog
    from metaeval.gateway.server import Gateway

__all__ = ["ExchangeLog", "Gateway"]


def __getattr__(name: str) -> Any:
    if name == "ExchangeLog":
        from metaeval.gateway import exchange_log

        return exchange_log.ExchangeLog
    if name == "Gateway":
        from metaeval.gateway import server

        return server.Gateway
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
