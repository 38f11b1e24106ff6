"""`metaeval serve MODEL`: the model gateway for agent CLIs, on the command line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

out = Console(soft_wrap=True)

TOKEN_ENV = "METAEVAL_GATEWAY_TOKEN"


def serve(
    model: Annotated[str, typer.Argument(help="provider/model, e.g. local/smollm2.")],
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free).")] = 0,
    host: Annotated[str, typer.Option(help="Loopback address to listen on.")] = "127.0.0.1",
    record: Annotated[
        Path | None, typer.Option(help="Append every exchange (redacted) to this JSONL file.")
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            min=0.1,
            help="Seconds a request may take to arrive, and an idle connection may stay open.",
        ),
    ] = 30.0,
) -> None:
    """Serve a metaeval model over the Anthropic, OpenAI (Responses, Chat) and Gemini APIs on
    loopback, so Claude Code, Codex, Gemini CLI or mini-swe-agent can run on it. Clients must
    send the printed token as their API key (or set one in $METAEVAL_GATEWAY_TOKEN)."""
    from metaeval.errors import ConfigError
    from metaeval.gateway.server import Gateway, serve_forever
    from metaeval.loopback.access import LOOPBACK_HOSTS
    from metaeval.models.registry import get_model

    if host not in LOOPBACK_HOSTS:
        raise ConfigError(f"the gateway serves loopback only, not {host!r}", field="host")
    token = os.environ.get(TOKEN_ENV) or None
    try:
        gateway = Gateway(
            get_model(model),
            host=host,
            port=port,
            record_path=record,
            token=token,
            timeout_s=timeout,
        )
    except ValueError as exc:
        raise ConfigError(f"${TOKEN_ENV}: {exc}", field="token") from exc
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc}", field="port") from exc

    def ready(gw: Gateway) -> None:
        url, key = gw.url, gw.token
        out.print(f"serving {model} at {url} (Ctrl-C stops)")
        out.print(f"  token:           {key} (send it as the API key; others get 401)")
        out.print(f"  Claude Code:     ANTHROPIC_BASE_URL={url} ANTHROPIC_API_KEY={key}")
        out.print(f"  OpenAI clients:  OPENAI_BASE_URL={url}/v1 OPENAI_API_KEY={key}")
        out.print(
            f"  Codex:           OPENAI_API_KEY={key} codex -c model_providers.m.base_url={url}/v1 "
            "-c model_providers.m.wire_api=responses -c model_providers.m.env_key=OPENAI_API_KEY "
            "-c model_provider=m"
        )
        out.print(f"  Gemini CLI:      GOOGLE_GEMINI_BASE_URL={url} GEMINI_API_KEY={key}")
        if record is not None:
            out.print(f"  exchanges:       {record}")

    try:
        serve_forever(gateway, on_ready=ready)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc}", field="port") from exc
